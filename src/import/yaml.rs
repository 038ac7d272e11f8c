//! YAML documents as a small tree of nodes that remember their line, read
//! with `saphyr` (its marked nodes): the dialects ask for keys and typed
//! values, and every error points at the node's line and column.

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

use super::Source;
use crate::error::ScenarioError;

/// The deepest nesting read; real configurations are a dozen levels deep.
const MAX_DEPTH: usize = 64;

/// A YAML node and where it starts.
#[derive(Clone, Debug)]
pub struct Node {
    /// 1-based line.
    pub line: usize,
    /// 0-based column, in characters.
    pub column: usize,
    /// Its content.
    pub value: Value,
}

/// A node's content: scalars keep their text; YAML's own typing is not used.
#[derive(Clone, Debug)]
pub enum Value {
    /// `~`, `null` or nothing.
    Null,
    /// A scalar's text.
    Scalar(String),
    /// A sequence.
    List(Vec<Node>),
    /// A mapping, in file order, keys as text.
    Map(Vec<(String, Node)>),
}

/// Parses every document of the file.
pub fn parse(source: &Source) -> Result<Vec<Node>, ScenarioError> {
    // saphyr's loader nests as deep as the text does: refuse deep text first.
    check_depth(source)?;
    // Its loader also expands every alias into a copy of its anchor: one
    // 1 MB value aliased 20,000 times would be 20 GB. Aliases are refused
    // from the parser's events, which expand nothing.
    refuse_aliases(source)?;
    let documents = MarkedYaml::load_from_str(source.text).map_err(|err| {
        let at = err.marker();
        source.error(
            at.line(),
            at.col(),
            format!("not valid YAML: {}", err.info()),
        )
    })?;
    documents
        .iter()
        .map(|document| convert(source, document, 0))
        .collect()
}

/// Refuses the first alias (`*name`) in the text, at its line and column.
fn refuse_aliases(source: &Source) -> Result<(), ScenarioError> {
    for event in saphyr_parser::Parser::new_from_str(source.text) {
        match event {
            Ok((saphyr_parser::Event::Alias(_), span)) => {
                return Err(source.error(
                    span.start.line(),
                    span.start.col(),
                    "YAML aliases are not read (each would be a copy of its anchor, which can make a small file huge); write the value out",
                ));
            }
            Ok(_) => {}
            // The loader reports it, with its place.
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Refuses text that nests flow collections or indentation deeper than
/// [`MAX_DEPTH`], before a parser recurses into it.
fn check_depth(source: &Source) -> Result<(), ScenarioError> {
    let mut flow = 0usize;
    for (number, line) in source.text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches([' ', '-']).len();
        for c in line.chars() {
            match c {
                '[' | '{' => flow += 1,
                ']' | '}' => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
        if flow > MAX_DEPTH || indent > 4 * MAX_DEPTH {
            return Err(source.error(
                number + 1,
                0,
                format!(
                    "nested deeper than {MAX_DEPTH} levels; no gateway configuration needs that"
                ),
            ));
        }
    }
    Ok(())
}

fn convert(source: &Source, node: &MarkedYaml, depth: usize) -> Result<Node, ScenarioError> {
    let (line, column) = (node.span.start.line(), node.span.start.col());
    if depth > MAX_DEPTH {
        return Err(source.error(
            line,
            column,
            format!("nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    let value = match &node.data {
        YamlData::Value(scalar) => scalar_value(scalar),
        YamlData::Representation(text, _, _) => Value::Scalar(text.to_string()),
        YamlData::Sequence(items) => Value::List(
            items
                .iter()
                .map(|item| convert(source, item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        YamlData::Mapping(map) => Value::Map(
            map.iter()
                .map(|(key, value)| {
                    let key = match convert(source, key, depth + 1)?.value {
                        Value::Scalar(text) => text,
                        Value::Null => String::new(),
                        _ => {
                            return Err(source.error(
                                key.span.start.line(),
                                key.span.start.col(),
                                "a mapping key must be plain text",
                            ));
                        }
                    };
                    Ok((key, convert(source, value, depth + 1)?))
                })
                .collect::<Result<_, _>>()?,
        ),
        YamlData::Tagged(_, inner) => return convert(source, inner, depth + 1),
        YamlData::Alias(_) | YamlData::BadValue => {
            return Err(source.error(
                line,
                column,
                "YAML aliases and values that do not parse are not read; write the value out",
            ));
        }
    };
    Ok(Node {
        line,
        column,
        value,
    })
}

fn scalar_value(scalar: &Scalar) -> Value {
    match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Scalar(b.to_string()),
        Scalar::Integer(i) => Value::Scalar(i.to_string()),
        Scalar::FloatingPoint(f) => Value::Scalar(f.to_string()),
        Scalar::String(text) => Value::Scalar(text.to_string()),
    }
}

impl Node {
    /// The value of `key` when this is a mapping holding it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The entries when this is a mapping.
    pub fn entries(&self) -> &[(String, Node)] {
        match &self.value {
            Value::Map(entries) => entries,
            _ => &[],
        }
    }

    /// The items when this is a sequence.
    pub fn items(&self) -> &[Node] {
        match &self.value {
            Value::List(items) => items,
            _ => &[],
        }
    }

    /// Its text when it is a scalar.
    pub fn text(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(text) => Some(text),
            _ => None,
        }
    }

    /// Its text, or an error saying what `field` should have been.
    pub fn string(&self, source: &Source, field: &str) -> Result<String, ScenarioError> {
        self.text()
            .map(str::to_string)
            .ok_or_else(|| self.error(source, format!("{field}: expected text")))
    }

    /// A whole number ≥ 0, or an error naming `field`.
    pub fn number(&self, source: &Source, field: &str) -> Result<u64, ScenarioError> {
        self.text()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .ok_or_else(|| self.error(source, format!("{field}: expected a whole number ≥ 0")))
    }

    /// `true` or `false`, or an error naming `field`.
    pub fn boolean(&self, source: &Source, field: &str) -> Result<bool, ScenarioError> {
        match self.text() {
            Some("true" | "True" | "TRUE") => Ok(true),
            Some("false" | "False" | "FALSE") => Ok(false),
            _ => Err(self.error(source, format!("{field}: expected true or false"))),
        }
    }

    /// The value of `key`, or an error here saying `missing` (what is wrong, and how to fix it).
    pub fn require(
        &self,
        source: &Source,
        key: &str,
        missing: impl AsRef<str>,
    ) -> Result<&Node, ScenarioError> {
        self.get(key).ok_or_else(|| self.error(source, missing))
    }

    /// An error at this node.
    pub fn error(&self, source: &Source, message: impl AsRef<str>) -> ScenarioError {
        source.error(self.line, self.column, message)
    }

    /// Every node of the tree, this one first, depth first, in file order,
    /// with the key it is the value of.
    pub fn walk<'a>(
        &'a self,
        key: Option<&'a str>,
        visit: &mut impl FnMut(Option<&'a str>, &'a Node),
    ) {
        visit(key, self);
        match &self.value {
            Value::Map(entries) => entries.iter().for_each(|(k, v)| v.walk(Some(k), visit)),
            Value::List(items) => items.iter().for_each(|item| item.walk(None, visit)),
            _ => {}
        }
    }
}
