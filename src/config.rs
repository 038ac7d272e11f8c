//! Turning one TOML table into a typed configuration with a precise message:
//! the `kind` picks the type, and errors name the field path inside the table.

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

use crate::error::{FieldError, Step, field_error};

/// A TOML table split into its `kind` and the remaining fields.
pub struct KindTable {
    /// The value of the `kind` key.
    pub kind: String,
    rest: toml::Table,
}

impl KindTable {
    /// Takes the `kind` key out of `table`; `kinds` lists the accepted ones.
    pub fn new(mut table: toml::Table, kinds: &[&str]) -> Result<KindTable, FieldError> {
        let expected = kinds.join(", ");
        match table.remove("kind") {
            Some(toml::Value::String(kind)) if kinds.contains(&kind.as_str()) => {
                Ok(KindTable { kind, rest: table })
            }
            Some(toml::Value::String(kind)) => Err(field_error!(
                "kind",
                "unknown kind {kind:?}; expected one of {expected}"
            )),
            Some(other) => Err(field_error!(
                "kind",
                "expected a string, one of {expected} (got {})",
                other.type_str()
            )),
            None => Err(field_error!("kind", "missing; expected one of {expected}")),
        }
    }

    /// Whether the remaining fields hold `key`.
    pub fn has(&self, key: &str) -> bool {
        self.rest.contains_key(key)
    }

    /// Takes out the given keys, as a table of their own.
    pub fn take(&mut self, keys: &[&str]) -> toml::Table {
        keys.iter()
            .filter_map(|&key| self.rest.remove(key).map(|value| (key.to_string(), value)))
            .collect()
    }

    /// Deserializes the remaining fields as `T`, naming the failing field.
    pub fn parse<T: DeserializeOwned>(self) -> Result<T, FieldError> {
        parse_table(self.rest)
    }
}

/// Deserializes a table as `T`; the error holds the path to the failing
/// field (`layers[1].window`), or for a key that is not allowed, that key.
pub fn parse_table<T: DeserializeOwned>(table: toml::Table) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|err| {
        let path: Vec<Step> = err
            .path()
            .iter()
            .filter_map(|segment| match segment {
                Segment::Seq { index } => Some(Step::Index(*index)),
                Segment::Map { key } => Some(Step::Name(key.clone())),
                Segment::Enum { .. } | Segment::Unknown => None,
            })
            .collect();
        let inner = err.into_inner().to_string();
        // toml's value deserializer appends "in `field`"; the path says it already.
        let message = inner
            .lines()
            .filter(|line| !line.starts_with("in `"))
            .collect::<Vec<_>>()
            .join(" ");
        // A key that is not allowed ends the path; serde's message alone says
        // that it is the key, not its value, at fault.
        let at_key = message.starts_with("unknown field `");
        FieldError {
            path,
            message,
            at_key,
        }
    })
}
