//! Turning one TOML table into a typed configuration with a precise message:
//! the `kind` picks the type, and errors name the field path inside the table.

use serde::de::DeserializeOwned;

/// A TOML table split into its `kind` and the remaining fields.
pub struct KindTable {
    /// The value of the `kind` key.
    pub kind: String,
    rest: toml::Table,
}

impl KindTable {
    /// Takes the `kind` key out of `table`; `kinds` lists the accepted ones.
    pub fn new(mut table: toml::Table, kinds: &[&str]) -> Result<KindTable, String> {
        let expected = kinds.join(", ");
        match table.remove("kind") {
            Some(toml::Value::String(kind)) if kinds.contains(&kind.as_str()) => {
                Ok(KindTable { kind, rest: table })
            }
            Some(toml::Value::String(kind)) => Err(format!(
                "kind: unknown kind {kind:?}; expected one of {expected}"
            )),
            Some(other) => Err(format!(
                "kind: expected a string, one of {expected} (got {})",
                other.type_str()
            )),
            None => Err(format!("kind: missing; expected one of {expected}")),
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
    pub fn parse<T: DeserializeOwned>(self) -> Result<T, String> {
        parse_table(self.rest)
    }
}

/// Deserializes a table as `T`; the error names the field path, like
/// `layers[1].window: invalid duration "1 sec"`.
pub fn parse_table<T: DeserializeOwned>(table: toml::Table) -> Result<T, String> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        // toml's value deserializer appends "in `field`"; the path says it already.
        let inner = inner
            .lines()
            .filter(|line| !line.starts_with("in `"))
            .collect::<Vec<_>>()
            .join(" ");
        if path == "." {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        }
    })
}
