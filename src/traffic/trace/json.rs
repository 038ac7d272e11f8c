//! The few members of a JSON line a replay reads, found in one pass over
//! it: the other members are checked and skipped, and nothing is kept of
//! them (a table of every member cost a map, an allocation a member name
//! and a SipHash each: two thirds of a JSON log's reading time). A line
//! that is one object whose members' names have no escapes — what access
//! logs write, their values escaped or not (Kong's file-log writes every
//! `/` as `\/`, Go's loggers `&` as `\u0026`) — is read by a scanner of its
//! own ([`scanned`]); any other goes to serde_json, which the scanner never
//! contradicts (a property test checks it on lines valid, nested, escaped
//! and broken).

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
) -> Result<[Option<&'a str>; N], serde_json::Error> {
    let mut found = [None; N];
    members_into(text, &names, &mut found)?;
    Ok(found)
}

/// [`members`] written into `found` (on an error, what it holds is not
/// the line's: the scanner may have stopped part way). (Each line's arrays
/// of names, of names listed and of members passed by reference and
/// written in place: passed and returned by value, they were copied with
/// `memcpy` four times a line, a twentieth of a JSON log's reading.)
pub(super) fn members_into<'a, const N: usize>(
    text: &'a str,
    names: &[Option<&str>; N],
    found: &mut [Option<&'a str>; N],
) -> Result<(), serde_json::Error> {
    if !scanned(text, names, found) {
        *found = parsed(text, *names)?;
    }
    Ok(())
}

/// [`members`] as serde_json reads them: any JSON.
fn parsed<'a, const N: usize>(
    text: &'a str,
    names: [Option<&str>; N],
) -> Result<[Option<&'a str>; N], serde_json::Error> {
    // (A byte loop: the names are short, and a search's set-up costs more.)
    let outers = names.map(|name| {
        let name = name?;
        Some(&name[..name.bytes().position(|b| b == b'.')?])
    });
    let mut reader = serde_json::Deserializer::from_str(text);
    let [found, outer] = reader.deserialize_map(Members { names, outers })?;
    reader.end()?;
    let mut found = found.map(|value| value.map(RawValue::get));
    inside(&mut found, &outer.map(|value| value.map(RawValue::get)), &names);
    Ok(found)
}

/// The dotted names not found as members themselves, looked up in the
/// objects their first parts name (`outer`, each as written): each such
/// object read once for all the names inside it (Google's `httpRequest`
/// holds the address, the status, the method and the URL).
fn inside<'a, const N: usize>(
    found: &mut [Option<&'a str>; N],
    outer: &[Option<&'a str>; N],
    names: &[Option<&str>; N],
) {
    // Most lines name no object: nothing to split.
    if outer.iter().all(Option::is_none) {
        return;
    }
    // Only the names whose object was found are split, by a byte loop
    // (the names are short; a char pattern's searcher was 2% of a Kong
    // log's reading).
    let parts: [Option<(&str, &str)>; N] = std::array::from_fn(|i| {
        let name = outer[i].and(names[i])?;
        let dot = name.bytes().position(|b| b == b'.')?;
        Some((&name[..dot], &name[dot + 1..]))
    });
    let mut read = [false; N];
    for i in 0..N {
        let (Some(object), Some((first, _))) = (outer[i], parts[i]) else {
            continue;
        };
        if read[i] || found[i].is_some() {
            continue;
        }
        let mut inner = [None; N];
        for j in i..N {
            if let Some((other, rest)) = parts[j]
                && other == first
                && found[j].is_none()
            {
                inner[j] = Some(rest);
                read[j] = true;
            }
        }
        if let Ok(values) = members(object, inner) {
            for j in 0..N {
                if inner[j].is_some() {
                    found[j] = values[j];
                }
            }
        }
    }
}

/// [`members`] of a line of JSON without escapes in its members' names,
/// nested at most [`NESTING`] deep (what access logs write), read byte by
/// byte with JSON's grammar; `None` for any other line — an escaped name,
/// deeper nesting, or what is not JSON — for serde_json to read.
/// (serde_json took 0.7 µs of a 190-byte line's reading; see
/// docs/performance.md.)
fn scanned<'a, const N: usize>(
    text: &'a str,
    names: &[Option<&str>; N],
    found: &mut [Option<&'a str>; N],
) -> bool {
    let bytes = text.as_bytes();
    let outers = names.map(|name| {
        let name = name?;
        Some(&name[..name.bytes().position(|b| b == b'.')?])
    });
    // The names asked for (and the objects holding dotted ones) listed
    // once, so that each member is compared with those few, not with every
    // slot: the slots' loop was a quarter of a JSON line's reading.
    let (mut asked, mut outer_asked) = ([(0, &[][..]); N], [(0, &[][..]); N]);
    let asked_len = listed(names, &mut asked);
    let outer_len = listed(&outers, &mut outer_asked);
    let mut outer = [None; N];
    let start = space(bytes, 0);
    let end = object_end(bytes, start, NESTING, &mut |name: (usize, usize), value: (usize, usize)| {
        let name = &bytes[name.0..name.1];
        for &(i, asked) in &asked[..asked_len] {
            if asked == name {
                found[i] = text.get(value.0..value.1);
            }
        }
        for &(i, asked) in &outer_asked[..outer_len] {
            if asked == name {
                outer[i] = text.get(value.0..value.1);
            }
        }
    });
    if end.is_none_or(|end| space(bytes, end) != bytes.len()) {
        return false;
    }
    inside(found, &outer, names);
    true
}

/// The names given, each with its slot, first in `listed`; how many there are.
#[inline(always)]
fn listed<'n, const N: usize>(names: &[Option<&'n str>; N], listed: &mut [(usize, &'n [u8]); N]) -> usize {
    let mut len = 0;
    for (i, name) in names.iter().enumerate() {
        if let Some(name) = name {
            listed[len] = (i, name.as_bytes());
            len += 1;
        }
    }
    len
}

/// How deep [`scanned`] reads nested objects and arrays (the line's own
/// object the first); deeper, serde_json reads the line.
const NESTING: usize = 64;

/// Past the object at `at`, each member's name and value (as ranges of
/// `bytes`) handed to `member`; `None` unless it is one, without escapes in
/// its names, nested at most `depth` deep.
fn object_end(
    bytes: &[u8],
    at: usize,
    depth: usize,
    member: &mut impl FnMut((usize, usize), (usize, usize)),
) -> Option<usize> {
    if bytes.get(at) != Some(&b'{') || depth == 0 {
        return None;
    }
    let mut at = space(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some(at + 1);
    }
    loop {
        let name_end = name_end(bytes, at)?;
        let name = (at + 1, name_end - 1);
        at = space(bytes, name_end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        at = space(bytes, at + 1);
        let end = value_end(bytes, at, depth - 1)?;
        member(name, (at, end));
        at = space(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = space(bytes, at + 1),
            Some(b'}') => return Some(at + 1),
            _ => return None,
        }
    }
}

/// Past the array at `at`; `None` unless it is one, without escapes in
/// its objects' names, nested at most `depth` deep.
fn array_end(bytes: &[u8], at: usize, depth: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'[') || depth == 0 {
        return None;
    }
    let mut at = space(bytes, at + 1);
    if bytes.get(at) == Some(&b']') {
        return Some(at + 1);
    }
    loop {
        at = space(bytes, value_end(bytes, at, depth - 1)?);
        match bytes.get(at) {
            Some(b',') => at = space(bytes, at + 1),
            Some(b']') => return Some(at + 1),
            _ => return None,
        }
    }
}

/// Past JSON's whitespace from `at`.
#[inline]
fn space(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// Past the member's name at `at` (its closing quote included); `None`
/// when there is none, or it has an escape (a name is compared as
/// written) or a control character.
#[inline]
fn name_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    // A quote, a backslash, or a control character (below 0x20).
    let stop = at + 1 + crate::traffic::bytes::find(bytes.get(at + 1..)?, [b'"', b'\\'], 0x20)?;
    (bytes[stop] == b'"').then_some(stop + 1)
}

/// Past the string at `at` (its closing quote included); `None` when there
/// is none, or it has a control character or an escape JSON does not
/// have. As serde_json skips a string, a `\u` escape is four hex digits,
/// whatever code point they make (a lone surrogate is refused only when
/// the string is unescaped: see [`string`]).
#[inline]
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut at = at + 1;
    loop {
        // A quote, a backslash, or a control character (below 0x20).
        let stop = at + crate::traffic::bytes::find(bytes.get(at..)?, [b'"', b'\\'], 0x20)?;
        match bytes[stop] {
            b'"' => return Some(stop + 1),
            b'\\' => {
                at = match bytes.get(stop + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => stop + 2,
                    b'u' if bytes.get(stop + 2..stop + 6)?.iter().all(u8::is_ascii_hexdigit) => stop + 6,
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
}

/// Past the value at `at`: a string, a number, `true`,
/// `false`, `null`, or an object or array of them nested at most `depth`
/// deep; `None` for anything else.
#[inline]
fn value_end(bytes: &[u8], at: usize, depth: usize) -> Option<usize> {
    let digits = |mut at: usize| {
        let from = at;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        (at > from).then_some(at)
    };
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' => object_end(bytes, at, depth, &mut |_, _| {}),
        b'[' => array_end(bytes, at, depth),
        b'-' | b'0'..=b'9' => {
            // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
            let mut at = at + usize::from(bytes[at] == b'-');
            at = match bytes.get(at)? {
                b'0' => at + 1,
                b'1'..=b'9' => digits(at)?,
                _ => return None,
            };
            if bytes.get(at) == Some(&b'.') {
                at = digits(at + 1)?;
            }
            if let Some(b'e' | b'E') = bytes.get(at) {
                at += 1;
                at += usize::from(matches!(bytes.get(at), Some(b'+' | b'-')));
                at = digits(at)?;
            }
            Some(at)
        }
        _ => ["true", "false", "null"]
            .iter()
            .find(|word| bytes[at..].starts_with(word.as_bytes()))
            .map(|word| at + word.len()),
    }
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

    /// [`scanned`]'s members, or `None` when it leaves the line to serde_json.
    fn scan<'a, const N: usize>(text: &'a str, names: [Option<&str>; N]) -> Option<[Option<&'a str>; N]> {
        let mut found = [None; N];
        scanned(text, &names, &mut found).then_some(found)
    }

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
                    got,
                    lookup(&all, name).map(RawValue::get),
                    "{name} in {line}"
                );
                assert!(none.is_none());
            }
            // All at once: each object holding dotted names read once for them.
            let together = members(line, names.map(Some)).unwrap();
            for (name, got) in names.iter().zip(together) {
                assert_eq!(got, lookup(&all, name).map(RawValue::get), "{name} with the others in {line}");
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

    /// An access log's line is read by the scanner, serde_json untouched.
    #[test]
    fn a_flat_line_is_read_by_the_scanner() {
        let line = r#"{"time":"2026-11-27T08:00:00Z","remote_addr":"10.8.170.193","status":200,"bytes":-2.5e+3,"referer":"-","ok":true,"gone":null,"no":false, "ua" : "Mozilla/5.0 (X11; Linux x86_64) é" }"#;
        let names = [Some("time"), Some("remote_addr"), Some("status"), Some("bytes"), Some("ua"), Some("no"), Some("missing"), None];
        let found = scan(line, names).expect("read by the scanner");
        assert_eq!(
            found,
            [Some(r#""2026-11-27T08:00:00Z""#), Some(r#""10.8.170.193""#), Some("200"), Some("-2.5e+3"), Some(r#""Mozilla/5.0 (X11; Linux x86_64) é""#), Some("false"), None, None]
        );
        assert_eq!(Ok(found), parsed(line, names).map_err(|e| e.to_string()));
        assert_eq!(scan("{ }", [Some("a")]), Some([None]));
        // Escapes in values, as Kong's file-log and Go's loggers write them.
        let kong = r#"{"request":{"uri":"\/api\/cart?a=1\u0026b=2","headers":{"host":"shop.example","user-agent":"q\"\\\n"}},"client_ip":"10.0.0.1","started_at":1764230400123}"#;
        let names = [Some("request.uri"), Some("request.headers.host"), Some("client_ip"), Some("started_at")];
        let found = scan(kong, names).expect("read by the scanner");
        assert_eq!(
            found,
            [Some(r#""\/api\/cart?a=1\u0026b=2""#), Some(r#""shop.example""#), Some(r#""10.0.0.1""#), Some("1764230400123")]
        );
        assert_eq!(Ok(found), parsed(kong, names).map_err(|e| e.to_string()));
        assert_eq!(string(found[0].unwrap()).as_deref(), Some("/api/cart?a=1&b=2"));
        // A name with an escape is compared unescaped: serde_json's.
        assert_eq!(scan(r#"{"t\u0069me":1}"#, [Some("time")]), None);
    }

    use proptest::prelude::*;

    /// Pieces of lines, valid JSON and not: names with and without
    /// escapes, values of every kind and near-misses of numbers and words,
    /// JSON's whitespace and other spaces, and stray punctuation.
    const PIECES: [&str; 46] = [
        "{", "}", "[", "]", ",", ":", "\"", " ", "\t", "\n", "\r", "\u{a0}", "\u{b}",
        "\"time\"", "\"ip\"", "\"a\"", "\"a.b\"", "\"\"", "\"t\\u0069me\"", "\"é\"",
        "\"10.0.0.1\"", "\"a\\\"b\"", "\"\u{1}\"", "\"\t\"", "\"2026-11-27T08:00:00Z\"",
        "0", "-0", "01", "1.", "1.5", "-", "1e", "1e+5", "1E-2", "-12.5e3", ".5", "+1", "00",
        "true", "false", "null", "tru", "nul", "True", "{\"b\":1}", "[1,{\"ip\":2}]",
    ];

    /// A string as written, 0 to 40 characters between quotes: mostly
    /// letters, some of them escapes, control characters, quotes or
    /// characters past ASCII, at any place within the scanner's 8 bytes.
    fn written() -> impl Strategy<Value = String> {
        let alphabet = [
            "a", "a", "a", "a", "a", "a", "é", "\\", "\\\"", "\u{1}", "\t", "\"", "\u{7f}", " ", "\u{1f}", "€",
            "\\/", "\\\\", "\\n", "\\b", "\\u0026", "\\u00E9", "\\uD800", "\\u12G4", "\\u00", "\\x", "\\U0041",
        ];
        prop::collection::vec(0..alphabet.len(), 0..40)
            .prop_map(move |chars| format!("\"{}\"", chars.iter().map(|&c| alphabet[c]).collect::<String>()))
    }

    /// A line: an object whose members' names and values are picked from
    /// [`PIECES`] or written, mostly valid, the values nested objects and
    /// arrays of them; the same with one character dropped or replaced;
    /// or any run of pieces.
    fn line() -> impl Strategy<Value = String> {
        let piece = |from: usize, to: usize| {
            prop_oneof![3 => (from..to).prop_map(|p| PIECES[p].to_string()), 1 => written()]
        };
        let space = || (0..4usize).prop_map(|s| [" ", "", "\t", "\n"][s]);
        let valid = prop::sample::select(vec!["\"10.0.0.1\"", "\"2026-11-27T08:00:00Z\"", "0", "-12.5e3", "1e+5", "true", "false", "null", "\"é\"", "\"\""]);
        let leaf = prop_oneof![4 => valid.prop_map(str::to_string), 1 => piece(17, PIECES.len())];
        let names = prop::sample::select(vec!["\"a\"", "\"b\"", "\"c\"", "\"x\"", "\"y\"", "\"x.y\"", "\"httpRequest\"", "\"remoteIp\"", "\"ip\"", "\"time\""]);
        let name = prop_oneof![4 => names.prop_map(str::to_string), 1 => piece(13, 25)];
        let member = move |value: BoxedStrategy<String>| {
            (name.clone(), value, space(), space())
                .prop_map(|(name, value, before, after)| format!("{before}{name}{after}:{before}{value}{after}"))
        };
        let object = move |value: BoxedStrategy<String>| {
            prop::collection::vec(member(value), 0..5).prop_map(|members| format!("{{{}}}", members.join(",")))
        };
        let value = leaf.boxed().prop_recursive(4, 48, 5, move |inner| {
            prop_oneof![
                2 => object.clone()(inner.clone()),
                1 => prop::collection::vec(inner, 0..4).prop_map(|values| format!("[{}]", values.join(","))),
            ]
        });
        let object = value.prop_map(|value| if value.starts_with('{') { value } else { format!("{{\"a\":{value}}}") });
        // Mostly JSON's punctuation, or nothing: near-misses of the line.
        let with = prop::sample::select(vec!["{", "}", "[", "]", ",", ":", "\"", "\\", " ", "1", "-", "e", ""]);
        let edit = (object.clone(), any::<prop::sample::Index>(), with).prop_map(|(line, at, with)| {
            let chars: Vec<char> = line.chars().collect();
            let at = at.index(chars.len().max(1));
            chars.iter().take(at).collect::<String>() + with + &chars.iter().skip(at + 1).collect::<String>()
        });
        prop_oneof![
            3 => object,
            2 => edit,
            1 => prop::collection::vec(0..PIECES.len(), 0..24).prop_map(|pieces| pieces.iter().map(|&p| PIECES[p]).collect()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Where the scanner reads a line, serde_json reads it alike;
        /// where serde_json refuses a line, so does the scanner.
        #[test]
        fn the_scanner_reads_as_serde_json_does(line in line()) {
            let names = [Some("time"), Some("ip"), Some("a.b"), Some("a"), Some(""), Some("é"), Some("x.y"), Some("httpRequest.remoteIp"), Some("a.b.c"), Some("x.y.c")];
            if let Some(found) = scan(&line, names) {
                prop_assert_eq!(Ok(found), parsed(&line, names).map_err(|e| e.to_string()), "{:?}", line);
            }
        }
    }

    /// Nested as deep as the scanner reads, a line is scanned; deeper,
    /// serde_json reads it (to its own limit).
    #[test]
    fn the_scanner_reads_lines_nested_to_its_depth() {
        for depth in [2, NESTING, NESTING + 1] {
            // The line's object, then depth - 1 arrays.
            let arrays = depth - 1;
            let line = format!("{{\"a\":{}1{}, \"ip\": \"10.0.0.1\"}}", "[".repeat(arrays), "]".repeat(arrays));
            let found = scan(&line, [Some("ip")]);
            assert_eq!(found.is_some(), depth <= NESTING, "{depth}");
            assert_eq!(members(&line, [Some("ip")]).unwrap(), [Some("\"10.0.0.1\"")]);
        }
        let gcp = r#"{"httpRequest":{"requestMethod":"GET","remoteIp":"192.0.2.1","status":429,"latency":"0.01s"},"timestamp":"2026-11-27T08:00:00.250Z","labels":[]}"#;
        assert_eq!(
            scan(gcp, [Some("httpRequest.remoteIp"), Some("httpRequest.status"), Some("timestamp"), Some("httpRequest.missing")]),
            Some([Some("\"192.0.2.1\""), Some("429"), Some("\"2026-11-27T08:00:00.250Z\""), None])
        );
    }

    #[test]
    fn a_string_is_borrowed_unless_it_has_escapes() {
        assert!(matches!(string(r#""10.0.0.1""#), Some(Cow::Borrowed("10.0.0.1"))));
        assert_eq!(string(r#""a\"b\u00e9""#).as_deref(), Some("a\"bé"));
        assert_eq!(string("12"), None);
    }
}
