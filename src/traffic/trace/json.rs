//! The few members of a JSON line a replay reads, found in one pass over
//! it: the other members are checked and skipped, and nothing is kept of
//! them (a table of every member cost a map, an allocation a member name
//! and a SipHash each: two thirds of a JSON log's reading time).

use std::borrow::Cow;
use std::fmt;

use serde::Deserializer as _;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The members named `names` of the JSON object `text`, each as written
/// (`None` for a name not given or not there); a dotted name such as
/// `httpRequest.remoteIp` that is not a member itself is the member
/// `remoteIp` of the object `httpRequest` (to any depth). Where a name is
/// written twice, the last member counts. An error when `text` is not one
/// JSON object, as `serde_json` reads it.
pub(super) fn members<'a, const N: usize>(
    text: &'a str,
    names: [Option<&str>; N],
) -> Result<[Option<&'a RawValue>; N], serde_json::Error> {
    // (A byte loop: the names are short, and a search's set-up costs more.)
    let outers = names.map(|name| {
        let name = name?;
        Some(&name[..name.bytes().position(|b| b == b'.')?])
    });
    let mut reader = serde_json::Deserializer::from_str(text);
    let [mut found, outer] = reader.deserialize_map(Members { names, outers })?;
    reader.end()?;
    for (i, name) in names.iter().enumerate() {
        if found[i].is_none()
            && let (Some(value), Some((_, inner))) = (outer[i], name.and_then(|n| n.split_once('.')))
        {
            found[i] = members(value.get(), [Some(inner)]).ok().and_then(|[value]| value);
        }
    }
    Ok(found)
}

/// Reads an object's members: those named, and those named by the first
/// part of a dotted name.
struct Members<'n, const N: usize> {
    names: [Option<&'n str>; N],
    /// Each dotted name's first part.
    outers: [Option<&'n str>; N],
}

impl<'de, const N: usize> Visitor<'de> for Members<'_, N> {
    /// Each name's member, and the member its first part names.
    type Value = [[Option<&'de RawValue>; N]; 2];

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        // As serde_json says it of a map.
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [[None; N]; 2];
        while let Some(Name(name)) = map.next_key()? {
            let name = Some(&*name);
            if !self.names.contains(&name) && !self.outers.contains(&name) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value: &'de RawValue = map.next_value()?;
            let [whole, outer] = &mut found;
            for (((found, wanted), found_outer), outer_name) in
                whole.iter_mut().zip(self.names).zip(outer.iter_mut()).zip(self.outers)
            {
                if wanted == name {
                    *found = Some(value);
                }
                if outer_name == name {
                    *found_outer = Some(value);
                }
            }
        }
        Ok(found)
    }
}

/// A member's name: borrowed from the line unless it has escapes.
struct Name<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for Name<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Name<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(text.to_owned())))
            }
        }
        d.deserialize_str(Text)
    }
}

impl<'de, const N: usize> DeserializeSeed<'de> for Members<'_, N> {
    type Value = [[Option<&'de RawValue>; N]; 2];

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

/// A JSON string's text, unescaped: borrowed from the line unless it has
/// escapes. `raw` must be a JSON string as written (checked by the parse
/// that found it).
pub(super) fn string(raw: &str) -> Option<Cow<'_, str>> {
    let inside = raw.strip_prefix('"')?.strip_suffix('"')?;
    if memchr::memchr(b'\\', inside.as_bytes()).is_some() {
        serde_json::from_str(raw).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inside))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The members as a map of every member finds them (the reading this
    /// replaced), for every name, on objects with nesting, escapes,
    /// repeated names and values of every type.
    #[test]
    fn finds_each_member_as_a_map_of_all_of_them_does() {
        type All<'a> = std::collections::HashMap<String, &'a RawValue>;
        fn lookup<'a>(object: &All<'a>, name: &str) -> Option<&'a RawValue> {
            if let Some(value) = object.get(name) {
                return Some(*value);
            }
            let (outer, inner) = name.split_once('.')?;
            let nested: All<'a> = serde_json::from_str(object.get(outer)?.get()).ok()?;
            lookup(&nested, inner)
        }
        let lines = [
            r#"{"time": 1, "ip": "10.0.0.1", "a": {"b": {"c": 3}, "b.c": 4}, "x.y": 5, "x": {"y": 6}}"#,
            r#"{"t\u0069me": "2026", "ip": "a\"b", "ip": "second", "n": null, "l": [1, {"ip": 2}], "f": 1.5e3, "z": true}"#,
            r#"{"a": "not an object", "httpRequest": {"remoteIp": "192.0.2.1", "status": 429}}"#,
            r#"{}"#,
            r#"{"a": {"b": {"c": {"d": "deep"}}}}"#,
        ];
        let names = [
            "time", "ip", "a.b.c", "a.b", "x.y", "x", "n", "l", "f", "z", "missing", "a.missing",
            "httpRequest.remoteIp", "httpRequest.status", "a.b.c.d", "a", "",
        ];
        for line in lines {
            let all: All = serde_json::from_str(line).unwrap();
            for name in names {
                let [got, none] = members(line, [Some(name), None]).unwrap();
                assert_eq!(
                    got.map(RawValue::get),
                    lookup(&all, name).map(RawValue::get),
                    "{name} in {line}"
                );
                assert!(none.is_none());
            }
        }
    }

    /// What is not one JSON object is an error, as it was read before.
    #[test]
    fn refuses_what_is_not_one_object_as_serde_json_does() {
        type All<'a> = std::collections::HashMap<String, &'a RawValue>;
        for line in [
            "[1, 2]",
            "\"text\"",
            "{\"a\": 1} trailing",
            "{\"a\": 1",
            "{\"a\": tru}",
            "{\"a\": 1,}",
            "{\"a\": \"\u{1}\"}",
            "{\"a\": {\"b\": [1, }}",
            "",
            "{\"a\" 1}",
        ] {
            let ours = members(line, [Some("a")]).map(|_| ()).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<All>(line).map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{line:?}");
        }
    }

    #[test]
    fn a_string_is_borrowed_unless_it_has_escapes() {
        assert!(matches!(string(r#""10.0.0.1""#), Some(Cow::Borrowed("10.0.0.1"))));
        assert_eq!(string(r#""a\"b\u00e9""#).as_deref(), Some("a\"bé"));
        assert_eq!(string("12"), None);
    }
}
