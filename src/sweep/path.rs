//! Paths to scenario values, like `limiter.fixed-1s.threshold` or
//! `workload.edge-burst.sources[1].before`, and setting the value one names
//! in a scenario's TOML document without disturbing the rest of it (so an
//! error at a point still names the file's own lines).

use std::fmt;

use toml_edit::{DocumentMut, Item, Value};

use crate::error::FieldError;

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A key of a table; in an array of tables, the entry whose `name` it is.
    Key(String),
    /// An entry of an array, from 0.
    Index(usize),
}

/// A parsed path, printed back as written (normalised).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuePath {
    steps: Vec<Step>,
}

impl ValuePath {
    /// Parses `text`: keys separated by `.`, each optionally followed by
    /// `[i]` indexes; a key holding `.` or `[` is written in double quotes
    /// (`limiter."api.v2".threshold`).
    pub fn parse(text: &str) -> Result<ValuePath, FieldError> {
        let fail = |why: &str| {
            Err(FieldError::new(format!(
                "{text:?} is not a value path ({why}); write keys separated by '.', an array entry as [i], and a limiter or workload by its name, like limiter.fixed-1s.threshold or workload.edge-burst.sources[1].before"
            )))
        };
        let mut steps = Vec::new();
        let mut chars = text.chars().peekable();
        loop {
            // A key: quoted, or up to the next '.' or '['.
            let mut key = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some(c) => key.push(c),
                        None => return fail("a quote is not closed"),
                    }
                }
                if key.is_empty() {
                    return fail("a quoted key is empty");
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == '.' || c == '[' {
                        break;
                    }
                    if c == '"' || c == ']' || c.is_whitespace() {
                        return fail(&format!("{c:?} inside a key; quote the key"));
                    }
                    key.push(c);
                    chars.next();
                }
                if key.is_empty() {
                    return fail("a key is empty");
                }
            }
            steps.push(Step::Key(key));
            while chars.peek() == Some(&'[') {
                chars.next();
                let mut digits = String::new();
                loop {
                    match chars.next() {
                        Some(']') => break,
                        Some(c) => digits.push(c),
                        None => return fail("a '[' is not closed"),
                    }
                }
                match digits.parse::<usize>() {
                    Ok(index) => steps.push(Step::Index(index)),
                    Err(_) => return fail(&format!("[{digits}] is not an index from 0")),
                }
            }
            match chars.next() {
                None => break,
                Some('.') => continue,
                Some(c) => return fail(&format!("{c:?} after a key")),
            }
        }
        Ok(ValuePath { steps })
    }

    /// The path's last key (`threshold` in `limiter.fixed-1s.threshold`).
    pub fn last_key(&self) -> &str {
        self.steps
            .iter()
            .rev()
            .find_map(|step| match step {
                Step::Key(key) => Some(key.as_str()),
                Step::Index(_) => None,
            })
            .unwrap_or("")
    }

    /// Sets the value this path names in `document` to `value`, keeping the
    /// comment beside the old one. The last key may be new (a default made
    /// explicit); every step before it must exist.
    pub fn set(&self, document: &mut DocumentMut, value: &Value) -> Result<(), FieldError> {
        set_in(
            Node::Item(document.as_item_mut()),
            &self.steps,
            0,
            self,
            value,
        )
    }
}

impl fmt::Display for ValuePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::Key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if key.contains(['.', '[', ']', '"']) || key.contains(char::is_whitespace) {
                        write!(f, "\"{key}\"")?;
                    } else {
                        f.write_str(key)?;
                    }
                }
                Step::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// A place in the document: a table's item, or a value inside an array or
/// inline table.
enum Node<'a> {
    Item(&'a mut Item),
    Value(&'a mut Value),
    Table(&'a mut toml_edit::Table),
}

fn set_in(
    node: Node<'_>,
    steps: &[Step],
    at: usize,
    path: &ValuePath,
    value: &Value,
) -> Result<(), FieldError> {
    let Some(step) = steps.get(at) else {
        // The end of the path: replace what is here, keeping its comments.
        match node {
            Node::Item(Item::Value(old)) | Node::Value(old) => {
                let mut new = value.clone();
                *new.decor_mut() = old.decor().clone();
                *old = new;
            }
            Node::Item(item @ Item::None) => *item = Item::Value(value.clone()),
            Node::Item(_) | Node::Table(_) => {
                return Err(format!(
                    "{path} names a table or an array of tables, not a value; name one of its fields"
                ).into());
            }
        }
        return Ok(());
    };
    let where_ = prefix(steps, at);
    match (node, step) {
        (Node::Item(Item::ArrayOfTables(array)), Step::Key(name)) => {
            let names: Vec<String> = array
                .iter()
                .filter_map(|t| t.get("name").and_then(Item::as_str).map(str::to_owned))
                .collect();
            let Some(table) = array
                .iter_mut()
                .find(|t| t.get("name").and_then(Item::as_str) == Some(name))
            else {
                return Err(no_name(path, &where_, name, &names).into());
            };
            set_in(Node::Table(table), steps, at + 1, path, value)
        }
        (Node::Item(Item::ArrayOfTables(array)), Step::Index(index)) => {
            let len = array.len();
            let table = array
                .get_mut(*index)
                .ok_or_else(|| out_of_range(path, &where_, *index, len))?;
            set_in(Node::Table(table), steps, at + 1, path, value)
        }
        (Node::Item(Item::Value(Value::Array(array))) | Node::Value(Value::Array(array)), step) => {
            let len = array.len();
            let index = match step {
                Step::Index(index) => *index,
                Step::Key(name) => {
                    let names: Vec<String> = array
                        .iter()
                        .filter_map(|v| {
                            v.as_inline_table()
                                .and_then(|t| t.get("name"))
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })
                        .collect();
                    array
                        .iter()
                        .position(|v| {
                            v.as_inline_table()
                                .and_then(|t| t.get("name"))
                                .and_then(Value::as_str)
                                == Some(name)
                        })
                        .ok_or_else(|| no_name(path, &where_, name, &names))?
                }
            };
            let entry = array
                .get_mut(index)
                .ok_or_else(|| out_of_range(path, &where_, index, len))?;
            set_in(Node::Value(entry), steps, at + 1, path, value)
        }
        (Node::Table(table), Step::Key(key)) => in_table(table, key, steps, at, path, value),
        (Node::Value(Value::InlineTable(table)), Step::Key(key)) => {
            in_table(table, key, steps, at, path, value)
        }
        (Node::Item(item), Step::Key(key)) if item.is_table_like() => {
            let table = item.as_table_like_mut().expect("checked: table-like");
            in_table(table, key, steps, at, path, value)
        }
        (_, Step::Index(_)) => Err(format!("{path}: {where_} is not an array").into()),
        (_, Step::Key(key)) => {
            Err(format!("{path}: {where_} is a single value, not a table with {key:?}").into())
        }
    }
}

/// The step into `key` of `table`, added when it is the path's last.
fn in_table(
    table: &mut dyn toml_edit::TableLike,
    key: &str,
    steps: &[Step],
    at: usize,
    path: &ValuePath,
    value: &Value,
) -> Result<(), FieldError> {
    if table.get(key).is_none() {
        if at + 1 < steps.len() {
            return Err(format!(
                "{path}: {} has no {key:?}; a path may add only its last key",
                prefix(steps, at)
            )
            .into());
        }
        table.insert(key, Item::Value(value.clone()));
        return Ok(());
    }
    let item = table.get_mut(key).expect("checked: present");
    set_in(Node::Item(item), steps, at + 1, path, value)
}

/// The path up to step `at`, in words.
fn prefix(steps: &[Step], at: usize) -> String {
    if at == 0 {
        "the scenario".to_string()
    } else {
        ValuePath {
            steps: steps[..at].to_vec(),
        }
        .to_string()
    }
}

fn no_name(path: &ValuePath, where_: &str, name: &str, names: &[String]) -> String {
    format!(
        "{path}: {where_} has no entry named {name:?}; it has {}",
        if names.is_empty() {
            "no named entries (use [i])".to_string()
        } else {
            names
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    )
}

fn out_of_range(path: &ValuePath, where_: &str, index: usize, len: usize) -> String {
    format!("{path}: {where_} has {len} entries (from [0]); there is no [{index}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"name = "x"
duration = "10s"   # keep

[backend]
capacity = 150

[[workload]]
name = "burst"
sources = [
  { kind = "poisson", rate = 40 },
  { kind = "boundary", period = "1s", before = 100, after = 100 },
]

[[limiter]]
name = "api.v2"
kind = "fixed-window"
window = "1s"
threshold = 100 # the limit
"#;

    fn set(path: &str, value: &str) -> Result<String, FieldError> {
        let mut document: DocumentMut = SCENARIO.parse().unwrap();
        let value: Value = value.parse().unwrap();
        ValuePath::parse(path)?.set(&mut document, &value)?;
        Ok(document.to_string())
    }

    #[test]
    fn sets_values_in_tables_arrays_and_inline_tables_keeping_comments() {
        let text = set("limiter.\"api.v2\".threshold", "75").unwrap();
        assert!(text.contains("threshold = 75 # the limit"), "{text}");
        let text = set("limiter[0].threshold", "80").unwrap();
        assert!(text.contains("threshold = 80 # the limit"), "{text}");
        let text = set("workload.burst.sources[1].before", "0").unwrap();
        assert!(text.contains("before = 0, after = 100"), "{text}");
        let text = set("duration", "\"20s\"").unwrap();
        assert!(text.contains("duration = \"20s\"   # keep"), "{text}");
        // The lines stay where they were, so errors point at the file's own.
        assert_eq!(text.lines().count(), SCENARIO.lines().count());
    }

    #[test]
    fn the_last_key_may_be_new_but_nothing_before_it() {
        let text = set("backend.queue", "10").unwrap();
        assert!(text.contains("queue = 10"), "{text}");
        let text = set("workload.burst.sources[0].start", "\"1s\"").unwrap();
        assert!(text.contains("start = \"1s\""), "{text}");
        let err = set("cluster.instances", "3").unwrap_err();
        assert!(
            err.to_string().contains("the scenario has no \"cluster\""),
            "{err}"
        );
    }

    #[test]
    fn wrong_paths_say_what_is_there() {
        for (path, expect) in [
            (
                "limiter.fixed.threshold",
                "has no entry named \"fixed\"; it has \"api.v2\"",
            ),
            (
                "workload.burst.sources[2].before",
                "has 2 entries (from [0]); there is no [2]",
            ),
            ("limiter", "names a table or an array of tables"),
            ("backend.capacity.x", "is a single value"),
            ("backend[0]", "is not an array"),
            ("limiter..x", "a key is empty"),
            ("limiter[x]", "[x] is not an index"),
            ("limiter.\"api", "a quote is not closed"),
        ] {
            let err = set(path, "1").unwrap_err();
            assert!(err.to_string().contains(expect), "{path}: {err}");
        }
    }

    #[test]
    fn paths_print_back_as_written() {
        for path in [
            "limiter.\"api.v2\".threshold",
            "workload.w.sources[1].before",
            "a[0][1].b",
        ] {
            assert_eq!(ValuePath::parse(path).unwrap().to_string(), path);
        }
    }
}
