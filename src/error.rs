//! Errors a user can cause with a scenario file, each in one form: the file,
//! line and column of the offending value, what is wrong in the scenario's
//! words, and the line itself with a caret under the value.

use std::fmt;
use std::path::PathBuf;

use toml::de::{DeTable, DeValue};

/// Why a scenario could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario {}: {cause}", path.display())]
    Read {
        /// The scenario file.
        path: PathBuf,
        /// What the file system said (in the message, not the error chain,
        /// so it is printed once).
        cause: std::io::Error,
    },
    /// Something wrong at a place in the file: TOML syntax, a value of the
    /// wrong type, or one that is well-formed but not usable.
    #[error("{}", At(self))]
    At {
        /// The scenario file.
        path: PathBuf,
        /// 1-based line of the value at fault.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// The field path, what is expected and how to fix it.
        message: String,
        /// The offending line, cut to a readable length.
        source_line: String,
    },
}

/// The longest part of a line quoted under a message.
const LONGEST_LINE: usize = 160;

impl ScenarioError {
    /// An error at byte `offset` of the scenario `text` read from `path`.
    pub fn at(path: &std::path::Path, text: &str, offset: usize, message: &str) -> ScenarioError {
        let offset = floor_char_boundary(text, offset.min(text.len()));
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = text[line_start..offset].chars().count() + 1;
        let whole = text[line_start..].lines().next().unwrap_or("");
        ScenarioError::At {
            path: path.to_owned(),
            line,
            column,
            message: crate::input::shorten_message(&humanize(message)),
            source_line: whole.chars().take(LONGEST_LINE).collect(),
        }
    }
}

/// Displays [`ScenarioError::At`]: the location and message, then the line
/// with a caret, as compilers do.
struct At<'a>(&'a ScenarioError);

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ScenarioError::At {
            path,
            line,
            column,
            message,
            source_line,
        } = self.0
        else {
            return Ok(());
        };
        write!(f, "{}:{line}:{column}: {message}", path.display())?;
        if source_line.trim().is_empty() {
            return Ok(());
        }
        let gutter = " ".repeat(line.to_string().len());
        let caret = column.saturating_sub(1).min(source_line.chars().count());
        write!(
            f,
            "\n{gutter} |\n{line} | {source_line}\n{gutter} | {}^",
            " ".repeat(caret)
        )
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// One step of a path into the scenario: a key or an array index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A table key.
    Name(String),
    /// An array element.
    Index(usize),
}

/// Where the value at `path` stands in the scenario `text`, or with
/// `at_key` the last key itself (for a key that is not allowed there).
pub fn locate(text: &str, path: &[Step], at_key: bool) -> Option<std::ops::Range<usize>> {
    let root = DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut value: Option<&toml::Spanned<DeValue>> = None;
    for (i, key) in path.iter().enumerate() {
        let next = match (key, value.map(toml::Spanned::get_ref)) {
            (Step::Name(name), None | Some(DeValue::Table(_))) => {
                if let Some(DeValue::Table(inner)) = value.map(toml::Spanned::get_ref) {
                    table = inner;
                }
                let (k, v) = table
                    .iter()
                    .find(|(k, _)| k.get_ref().as_ref() == name.as_str())?;
                if at_key && i + 1 == path.len() {
                    return Some(k.span());
                }
                v
            }
            (Step::Index(index), Some(DeValue::Array(array))) => array.get(*index)?,
            _ => return None,
        };
        value = Some(next);
    }
    value.map(toml::Spanned::span)
}

/// A value in a configuration that cannot be used: the path to it inside
/// the table being read (empty: the table, or the value, as a whole) and
/// what is wrong. Callers put the path in front as they hand it up, and the
/// scenario reader turns it into a line, a column and a caret; no message
/// text is ever read back for its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Keys and indices from the table being read to the value at fault.
    pub path: Vec<Step>,
    /// What is wrong with it, and how to fix it.
    pub message: String,
    /// The fault is the path's last key itself (a key that is not allowed
    /// there), not its value.
    pub at_key: bool,
}

impl FieldError {
    /// An error about the table or value as a whole.
    pub fn new(message: impl Into<String>) -> FieldError {
        FieldError {
            path: Vec::new(),
            message: message.into(),
            at_key: false,
        }
    }

    /// An error about the field `name` (a key, or keys joined by dots like
    /// `metrics.bucket`).
    pub fn at(name: &str, message: impl Into<String>) -> FieldError {
        FieldError::new(message).within(name)
    }

    /// The same error seen from the table that holds `name`.
    pub fn within(mut self, name: &str) -> FieldError {
        let steps = name.split('.').map(|key| Step::Name(key.to_string()));
        self.path.splice(0..0, steps);
        self
    }

    /// The same error seen from the array that holds it at `index`.
    pub fn at_index(mut self, index: usize) -> FieldError {
        self.path.insert(0, Step::Index(index));
        self
    }

    /// The path as a scenario writes it: `layers[1].window`.
    pub fn path_text(&self) -> String {
        let mut text = String::new();
        for step in &self.path {
            match step {
                Step::Name(name) if text.is_empty() => text.push_str(name),
                Step::Name(name) => {
                    text.push('.');
                    text.push_str(name);
                }
                Step::Index(index) => text.push_str(&format!("[{index}]")),
            }
        }
        text
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path_text() {
            path if path.is_empty() => f.write_str(&self.message),
            path => write!(f, "{path}: {}", self.message),
        }
    }
}

impl std::error::Error for FieldError {}

/// A message with no field: about the whole table or value.
impl From<String> for FieldError {
    fn from(message: String) -> FieldError {
        FieldError::new(message)
    }
}

impl From<&str> for FieldError {
    fn from(message: &str) -> FieldError {
        FieldError::new(message)
    }
}

/// A [`FieldError`] at field `$name` with a `format!` message, or with no
/// field: `field_error!("window", "must be longer than {min}")`.
macro_rules! field_error {
    ($name:literal, $($message:tt)+) => {
        $crate::error::FieldError::at($name, format!($($message)+))
    };
}
pub(crate) use field_error;

/// serde's and toml's wording in the scenario's words: "expected a whole
/// number ≥ 1, got 0" instead of "invalid value: integer `0`, expected a
/// nonzero u64".
pub fn humanize(message: &str) -> String {
    message
        .lines()
        .map(humanize_line)
        .collect::<Vec<_>>()
        .join("\n")
}

fn humanize_line(line: &str) -> String {
    for marker in ["invalid value: ", "invalid type: "] {
        if let Some(at) = line.find(marker) {
            let (head, rest) = line.split_at(at);
            let rest = &rest[marker.len()..];
            if let Some((got, expected)) = rest.split_once(", expected ") {
                return format!(
                    "{head}expected {}, got {}",
                    expected_words(expected),
                    got_words(got)
                );
            }
        }
    }
    line.replace("unknown field `", "unknown key `")
        .replace("missing field `", "missing key `")
        .replace("unknown variant `", "unknown value `")
        .replace('`', "\"")
}

fn expected_words(expected: &str) -> String {
    match expected.trim() {
        "a nonzero u64" | "a nonzero u32" | "a nonzero usize" => "a whole number ≥ 1".into(),
        "u64" | "u32" | "usize" | "u16" | "u8" => "a whole number ≥ 0".into(),
        "i64" | "i32" => "a whole number".into(),
        "f64" | "f32" => "a number".into(),
        "a string" => "text in quotes".into(),
        "a boolean" => "true or false".into(),
        other => other.replace('`', "\""),
    }
}

fn got_words(got: &str) -> String {
    let got = got.trim();
    for (serde, words) in [
        ("integer ", ""),
        ("floating point ", ""),
        ("boolean ", ""),
        ("string ", "the text "),
    ] {
        if let Some(value) = got.strip_prefix(serde) {
            return format!("{words}{}", value.trim_matches('`'));
        }
    }
    match got {
        "sequence" => "a list".into(),
        "map" => "a table".into(),
        other => other.replace('`', "\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speaks_the_scenarios_words() {
        assert_eq!(
            humanize("threshold: invalid value: integer `0`, expected a nonzero u64"),
            "threshold: expected a whole number ≥ 1, got 0"
        );
        assert_eq!(
            humanize("threshold: invalid type: floating point `5.0`, expected a nonzero u64"),
            "threshold: expected a whole number ≥ 1, got 5.0"
        );
        assert_eq!(
            humanize("mode: unknown variant `bogus`, expected one of `local`, `shared`"),
            "mode: unknown value \"bogus\", expected one of \"local\", \"shared\""
        );
    }

    #[test]
    fn writes_its_path_in_front_of_its_message() {
        let err = FieldError::at("window", "expected a duration")
            .at_index(1)
            .within("layers");
        assert_eq!(err.to_string(), "layers[1].window: expected a duration");
        assert_eq!(
            err.path,
            [
                Step::Name("layers".into()),
                Step::Index(1),
                Step::Name("window".into())
            ]
        );
        assert_eq!(FieldError::at("metrics.bucket", "no").path.len(), 2);
        assert_eq!(FieldError::new("used twice").to_string(), "used twice");
    }

    #[test]
    fn locates_a_value_in_an_array_of_tables_and_an_inline_table() {
        let text = "[[limiter]]\nname = \"a\"\n\n[[limiter]]\nname = \"b\"\nthreshold = 0\n\n[[workload]]\nsources = [{ kind = \"x\", rate = 5 }]\n";
        let name = |s: &str| Step::Name(s.into());
        let span = locate(
            text,
            &[name("limiter"), Step::Index(1), name("threshold")],
            false,
        )
        .unwrap();
        assert_eq!(&text[span], "0");
        let span = locate(
            text,
            &[name("limiter"), Step::Index(1), name("threshold")],
            true,
        )
        .unwrap();
        assert_eq!(&text[span], "threshold");
        let path = [
            name("workload"),
            Step::Index(0),
            name("sources"),
            Step::Index(0),
            name("rate"),
        ];
        assert_eq!(&text[locate(text, &path, false).unwrap()], "5");
    }

    #[test]
    fn shows_the_line_with_a_caret_under_the_value() {
        let text = "a = 1\nthreshold = 0\n";
        let err = ScenarioError::at(std::path::Path::new("s.toml"), text, 18, "threshold: no");
        assert_eq!(
            err.to_string(),
            "s.toml:2:13: threshold: no\n  |\n2 | threshold = 0\n  |             ^"
        );
    }
}
