//! Sweeps: one scenario run at every point of a grid of values. An axis sets
//! one value path to each of its values; axes zipped together form a group
//! that moves as one; the grid is every combination of the groups. Each
//! point is the scenario file with its values set in place, validated like
//! any scenario, so a mistake at a point names the file's own line.

pub mod path;
pub mod results;
pub mod shard;
pub mod values;

use std::path::Path;

use serde::{Deserialize, Serialize};
use toml_edit::{DocumentMut, Value};

use crate::error::{FieldError, ScenarioError, field_error};
use crate::scenario::Scenario;

pub use self::path::ValuePath;

/// Most points in one sweep.
pub const MAX_POINTS: usize = 100_000;

/// One varied value path and its values.
#[derive(Clone, Debug)]
pub struct Axis {
    /// The path as written (normalised).
    pub path: ValuePath,
    /// Its values, in order.
    pub values: Vec<Value>,
}

/// Every combination of the groups' values; within a group, axes move
/// together. The last group varies fastest.
#[derive(Clone, Debug)]
pub struct Grid {
    /// Groups of zipped axes.
    pub groups: Vec<Vec<Axis>>,
}

/// A grid as recorded in results: each axis's path and its values as TOML
/// text, so parts of one sweep can be checked against each other.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AxisSpec {
    /// The value path.
    pub path: String,
    /// Each value, as TOML (`50`, `"10ms"`).
    pub values: Vec<String>,
}

impl Grid {
    /// A grid from `--vary PATH=VALUES` arguments, every one its own group
    /// unless `zip` puts them all in one.
    pub fn from_args(vary: &[String], zip: bool) -> Result<Grid, FieldError> {
        let mut axes = Vec::with_capacity(vary.len());
        for arg in vary {
            let (path, spec) = arg.split_once('=').ok_or_else(|| {
                format!("--vary {arg:?}: expected PATH=VALUES, like limiter.fixed-1s.threshold=50..200:25")
            })?;
            let path = ValuePath::parse(path.trim()).map_err(|err| format!("--vary: {err}"))?;
            let values = values::parse(spec).map_err(|err| format!("--vary {path}: {err}"))?;
            axes.push(Axis { path, values });
        }
        let groups = if zip {
            vec![axes]
        } else {
            axes.into_iter().map(|axis| vec![axis]).collect()
        };
        Grid::checked(groups)
    }

    /// The grid written in the scenario as `[[sweep]]` entries (`vary`, then
    /// `values = [...]` or `range = "..."`, and `zip = true` to move with the
    /// entry before); `None` when it has none.
    pub fn from_scenario(text: &str, file: &Path) -> Result<Option<Grid>, ScenarioError> {
        let document = toml_edit::Document::parse(text).map_err(|err| {
            let offset = err.span().map_or(0, |span| span.start);
            ScenarioError::at(file, text, offset, err.message().trim_end())
        })?;
        let Some(item) = document.as_table().get("sweep") else {
            return Ok(None);
        };
        let at = |span: Option<std::ops::Range<usize>>, err: FieldError| {
            ScenarioError::at(file, text, span.map_or(0, |s| s.start), &err.to_string())
        };
        let Some(entries) = item.as_array_of_tables() else {
            return Err(at(
                item.span(),
                field_error!(
                    "sweep",
                    "expected [[sweep]] entries, each with vary = \"PATH\" and values = [...] or range = \"START..END:STEP\""
                ),
            ));
        };
        let mut groups: Vec<Vec<Axis>> = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let fail = |span, err: FieldError| at(span, err.at_index(i).within("sweep"));
            for (key, value) in entry.iter() {
                if !matches!(key, "vary" | "values" | "range" | "zip") {
                    return Err(fail(
                        value.span().or(entry.span()),
                        FieldError::new(format!(
                            "unknown field {key:?}; expected vary, values, range or zip"
                        )),
                    ));
                }
            }
            let vary = entry.get("vary").ok_or_else(|| {
                fail(
                    entry.span(),
                    "no vary; give the value path, like vary = \"limiter.fixed-1s.threshold\""
                        .into(),
                )
            })?;
            let path = vary
                .as_str()
                .ok_or_else(|| {
                    fail(
                        vary.span(),
                        field_error!("vary", "expected a value path in quotes"),
                    )
                })
                .and_then(|p| ValuePath::parse(p).map_err(|err| fail(vary.span(), err)))?;
            let values = match (entry.get("values"), entry.get("range")) {
                (Some(list), None) => list
                    .as_array()
                    .ok_or_else(|| {
                        fail(
                            list.span(),
                            field_error!("values", "expected a list, like [50, 100, 150]"),
                        )
                    })
                    .and_then(|a| values::from_array(a).map_err(|err| fail(list.span(), err)))?,
                (None, Some(range)) => range
                    .as_str()
                    .ok_or_else(|| {
                        fail(
                            range.span(),
                            field_error!(
                                "range",
                                "expected a range in quotes, like \"50..200:25\""
                            ),
                        )
                    })
                    .and_then(|r| {
                        if r.contains("..") {
                            values::parse(r).map_err(|err| fail(range.span(), err.within("range")))
                        } else {
                            Err(fail(
                                range.span(),
                                field_error!(
                                    "range",
                                    "expected START..END:STEP or START..END:*FACTOR"
                                ),
                            ))
                        }
                    })?,
                _ => {
                    return Err(fail(
                        entry.span(),
                        "give either values = [...] or range = \"START..END:STEP\", not both or neither".into(),
                    ));
                }
            };
            let zip = match entry.get("zip") {
                None => false,
                Some(zip) => zip.as_bool().ok_or_else(|| {
                    fail(zip.span(), field_error!("zip", "expected true or false"))
                })?,
            };
            let axis = Axis { path, values };
            match groups.last_mut() {
                Some(group) if zip => group.push(axis),
                None if zip => {
                    return Err(fail(
                        entry.span(),
                        "zip = true on the first entry: there is no entry before it to move with"
                            .into(),
                    ));
                }
                _ => groups.push(vec![axis]),
            }
        }
        Grid::checked(groups)
            .map(Some)
            .map_err(|err| at(item.span(), err.within("sweep")))
    }

    fn checked(groups: Vec<Vec<Axis>>) -> Result<Grid, FieldError> {
        if groups.is_empty()
            || groups
                .iter()
                .any(|g| g.is_empty() || g.iter().any(|a| a.values.is_empty()))
        {
            return Err("nothing to vary; give --vary PATH=VALUES or [[sweep]] entries".into());
        }
        let mut seen = Vec::new();
        for group in &groups {
            for axis in group {
                let path = axis.path.to_string();
                if path.starts_with("metrics.profile") {
                    return Err(format!(
                        "{path}: the profile's intervals name columns of sweep.csv, so every point needs the same; vary metrics.rolling, or sweep each profile separately"
                    ).into());
                }
                if seen.contains(&path) {
                    return Err(format!("{path} is varied twice").into());
                }
                seen.push(path);
                if axis.values.len() != group[0].values.len() {
                    return Err(format!(
                        "{} ({} values) and {} ({} values) are zipped, so they need as many values each",
                        group[0].path,
                        group[0].values.len(),
                        axis.path,
                        axis.values.len()
                    ).into());
                }
            }
        }
        let points = groups
            .iter()
            .try_fold(1usize, |n, g| n.checked_mul(g[0].values.len()))
            .filter(|&n| n <= MAX_POINTS);
        if points.is_none() {
            return Err(format!(
                "the grid has more than {MAX_POINTS} points; use fewer values, or zip axes that move together"
            ).into());
        }
        Ok(Grid { groups })
    }

    /// The grid recorded in results (by [`Grid::spec`]).
    pub fn from_spec(spec: &[Vec<AxisSpec>]) -> Result<Grid, FieldError> {
        let groups = spec
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(|axis| {
                        let values =
                            axis.values
                                .iter()
                                .map(|v| {
                                    v.parse::<Value>().map(|v| values::normalised(&v)).map_err(
                                        |_| format!("{}: {v:?} is not a TOML value", axis.path),
                                    )
                                })
                                .collect::<Result<_, _>>()?;
                        Ok(Axis {
                            path: ValuePath::parse(&axis.path)?,
                            values,
                        })
                    })
                    .collect::<Result<Vec<_>, FieldError>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        if groups.iter().any(Vec::is_empty) {
            return Err("a group of the grid has no axes".into());
        }
        Grid::checked(groups)
    }

    /// How many points.
    pub fn points(&self) -> usize {
        self.groups.iter().map(|g| g[0].values.len()).product()
    }

    /// Each axis, group by group.
    pub fn axes(&self) -> impl Iterator<Item = &Axis> {
        self.groups.iter().flatten()
    }

    /// The index into each group's values at `point`.
    pub fn coordinates(&self, point: usize) -> Vec<usize> {
        let mut rest = point;
        let mut coordinates = vec![0; self.groups.len()];
        for (g, group) in self.groups.iter().enumerate().rev() {
            let len = group[0].values.len();
            coordinates[g] = rest % len;
            rest /= len;
        }
        coordinates
    }

    /// Each axis's value at `point`, in the order of [`Grid::axes`].
    pub fn values_at(&self, point: usize) -> Vec<&Value> {
        let coordinates = self.coordinates(point);
        self.groups
            .iter()
            .zip(coordinates)
            .flat_map(|(group, c)| group.iter().map(move |axis| &axis.values[c]))
            .collect()
    }

    /// The values at `point`, `path=value, …`, to name it in a message.
    pub fn named(&self, point: usize) -> String {
        self.axes()
            .zip(self.values_at(point))
            .map(|(axis, value)| format!("{}={}", axis.path, values::label(value)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether every point offers the same requests as the scenario itself:
    /// no axis sets a workload, the run's length or its replications.
    pub fn leaves_requests_alone(&self) -> bool {
        self.axes().all(|axis| {
            let path = axis.path.to_string();
            !["workload", "duration", "replications"].iter().any(|top| {
                path == *top
                    || path.starts_with(&format!("{top}."))
                    || path.starts_with(&format!("{top}["))
            })
        })
    }

    /// The grid as recorded in results.
    pub fn spec(&self) -> Vec<Vec<AxisSpec>> {
        self.groups
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(|axis| AxisSpec {
                        path: axis.path.to_string(),
                        values: axis
                            .values
                            .iter()
                            .map(|v| values::normalised(v).to_string())
                            .collect(),
                    })
                    .collect()
            })
            .collect()
    }
}

/// A scenario file ready to be set at any point of a grid.
pub struct Base {
    file: std::path::PathBuf,
    document: DocumentMut,
}

impl Base {
    /// The scenario `text` read from `file`.
    pub fn new(text: String, file: &Path) -> Result<Base, ScenarioError> {
        let document = text.parse::<DocumentMut>().map_err(|err| {
            let offset = err.span().map_or(0, |span| span.start);
            ScenarioError::at(file, &text, offset, err.message().trim_end())
        })?;
        Ok(Base {
            file: file.to_owned(),
            document,
        })
    }

    /// The scenario at `point` of `grid`, validated: an error names the
    /// point's values and, through the file's own lines, what is wrong.
    pub fn at(&self, grid: &Grid, point: usize) -> Result<Scenario, FieldError> {
        let mut document = self.document.clone();
        let values = grid.values_at(point);
        for (axis, value) in grid.axes().zip(&values) {
            axis.path.set(&mut document, value)?;
        }
        // The grid's own entries are not part of any point's scenario.
        document.remove("sweep");
        crate::scenario::parse(&document.to_string(), &self.file)
            .map_err(|err| FieldError::new(format!("at {}: {err}", grid.named(point))))
    }
}

/// A stable 64-bit FNV-1a hash of `bytes`, as 16 hex digits: the identity
/// of a scenario's text in a sweep's results.
pub fn fingerprint(bytes: &[u8]) -> String {
    format!("{:016x}", crate::random::fnv1a(bytes))
}
