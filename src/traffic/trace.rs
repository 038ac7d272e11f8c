//! Replayed timestamps from a CSV file with a header: a `time_ns` column of
//! integer nanoseconds or a `time_s` column of decimal seconds.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "trace"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The CSV file, relative to the scenario file.
    pub path: PathBuf,
    /// The column to read (default: `time_ns`, else `time_s`).
    pub column: Option<String>,
    /// `"ns"` or `"s"` (default: from a `_ns` or `_s` column name).
    pub unit: Option<Unit>,
    /// Shift the trace so its earliest timestamp is the source's start, for
    /// logs with absolute (epoch) timestamps (default false).
    #[serde(default)]
    pub rebase: bool,
}

/// The unit of the timestamps in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Unit {
    /// Integer nanoseconds.
    #[serde(rename = "ns")]
    Nanos,
    /// Decimal seconds, up to nine digits after the point.
    #[serde(rename = "s")]
    Seconds,
}

/// What a first pass over the file found.
struct Scan {
    column: usize,
    unit: Unit,
    earliest: u64,
    sorted: bool,
}

impl Config {
    fn open(&self, base_dir: &Path) -> Result<csv::Reader<BufReader<File>>, String> {
        let path = base_dir.join(&self.path);
        if path.is_dir() {
            return Err(format!(
                "path: {} is a folder, not a CSV file",
                path.display()
            ));
        }
        let file = File::open(&path)
            .map_err(|err| format!("path: cannot open {}: {err}", path.display()))?;
        Ok(csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(BufReader::with_capacity(1 << 16, file)))
    }

    fn locate(
        &self,
        base_dir: &Path,
        reader: &mut csv::Reader<BufReader<File>>,
    ) -> Result<(usize, Unit), String> {
        let shown = base_dir.join(&self.path);
        let headers = reader
            .headers()
            .map_err(|err| format!("{}: {err}", shown.display()))?;
        let wanted: Vec<&str> = match &self.column {
            Some(column) => vec![column.as_str()],
            None => vec!["time_ns", "time_s"],
        };
        let (index, name) = wanted
            .iter()
            .find_map(|name| {
                headers
                    .iter()
                    .position(|h| h.trim() == *name)
                    .map(|i| (i, *name))
            })
            .ok_or_else(|| {
                format!(
                    "{}:1: no column {} in the header",
                    shown.display(),
                    wanted.join(" or ")
                )
            })?;
        let unit = match (self.unit, name) {
            (Some(unit), _) => unit,
            (None, name) if name.ends_with("_ns") => Unit::Nanos,
            (None, name) if name.ends_with("_s") => Unit::Seconds,
            (None, name) => {
                return Err(format!(
                    "unit: the unit of column {name:?} is unknown; set unit = \"ns\" or \"s\""
                ));
            }
        };
        Ok((index, unit))
    }

    /// Reads the whole file once, streaming: every row must hold a timestamp.
    fn scan(&self, base_dir: &Path) -> Result<(Scan, Vec<String>), String> {
        let mut reader = self.open(base_dir)?;
        let (column, unit) = self.locate(base_dir, &mut reader)?;
        let shown = base_dir.join(&self.path);
        let (mut rows, mut unsorted, mut earliest, mut previous) = (0u64, 0u64, u64::MAX, 0u64);
        let mut record = csv::ByteRecord::new();
        while read(&mut reader, &mut record, &shown)? {
            let time = parse(&record, column, unit, &shown)?;
            unsorted += u64::from(time < previous);
            earliest = earliest.min(time);
            previous = time;
            rows += 1;
        }
        let mut warnings = Vec::new();
        if rows == 0 {
            warnings.push(format!("{}: the trace has no rows", shown.display()));
        }
        if unsorted > 0 {
            warnings.push(format!(
                "{}: {unsorted} of {rows} rows are earlier than the row before them; the trace was sorted in memory",
                shown.display()
            ));
        }
        Ok((
            Scan {
                column,
                unit,
                earliest,
                sorted: unsorted == 0,
            },
            warnings,
        ))
    }

    /// Checks the file, and counts rows that fall outside `[start, end)`.
    pub fn validate(
        &self,
        base_dir: &Path,
        start: Nanos,
        end: Nanos,
    ) -> Result<Vec<String>, String> {
        let (scan, mut warnings) = self.scan(base_dir)?;
        let outside = self
            .arrivals_from(base_dir, &scan, Nanos::ZERO, Nanos(u64::MAX))?
            .filter(|t| !(start..end).contains(&self.shifted(*t, &scan, start)))
            .count();
        if outside > 0 {
            let hint = if self.rebase {
                ""
            } else {
                "; if it holds absolute timestamps, set rebase = true"
            };
            warnings.push(format!(
                "{}: {outside} rows fall outside [{start}, {end}) and are left out{hint}",
                base_dir.join(&self.path).display()
            ));
        }
        Ok(warnings)
    }

    fn shifted(&self, time: Nanos, scan: &Scan, start: Nanos) -> Nanos {
        if self.rebase {
            Nanos(time.get() - scan.earliest + start.get())
        } else {
            time
        }
    }

    /// The trace's arrivals in `[start, end)`, streamed from disk when the file
    /// is sorted, and otherwise sorted in memory.
    pub fn arrivals(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<Arrivals, String> {
        let (scan, _) = self.scan(base_dir)?;
        let offset = if self.rebase {
            start.get() as i128 - scan.earliest as i128
        } else {
            0
        };
        let mut arrivals = self.arrivals_from(base_dir, &scan, start, end)?;
        arrivals.offset = offset;
        Ok(arrivals)
    }

    fn arrivals_from(
        &self,
        base_dir: &Path,
        scan: &Scan,
        start: Nanos,
        end: Nanos,
    ) -> Result<Arrivals, String> {
        let mut reader = self.open(base_dir)?;
        self.locate(base_dir, &mut reader)?;
        let mut arrivals = Arrivals {
            rows: Rows::Stream {
                reader,
                column: scan.column,
                unit: scan.unit,
                path: base_dir.join(&self.path),
            },
            start: start.get(),
            end: end.get(),
            offset: 0,
            error: None,
        };
        if !scan.sorted {
            let mut times: Vec<u64> = arrivals.raw().collect();
            times.sort_unstable();
            arrivals.rows = Rows::Sorted(times.into_iter());
        }
        Ok(arrivals)
    }
}

fn read(
    reader: &mut csv::Reader<BufReader<File>>,
    record: &mut csv::ByteRecord,
    path: &Path,
) -> Result<bool, String> {
    reader
        .read_byte_record(record)
        .map_err(|err| format!("{}: {err}", path.display()))
}

fn parse(record: &csv::ByteRecord, column: usize, unit: Unit, path: &Path) -> Result<u64, String> {
    let line = record.position().map_or(0, csv::Position::line);
    let field = record.get(column).ok_or_else(|| {
        format!(
            "{}:{line}: the row has no column {}",
            path.display(),
            column + 1
        )
    })?;
    let text = std::str::from_utf8(field).unwrap_or("").trim();
    let parsed = match unit {
        Unit::Nanos => text.parse::<u64>().ok(),
        Unit::Seconds => parse_seconds(text),
    };
    parsed.ok_or_else(|| {
        let expected = match unit {
            Unit::Nanos => "a whole number of nanoseconds",
            Unit::Seconds => "a non-negative number of seconds",
        };
        format!(
            "{}:{line}: {:?} is not {expected}",
            path.display(),
            String::from_utf8_lossy(field)
        )
    })
}

/// Decimal seconds to nanoseconds without floats; digits past the ninth are dropped.
fn parse_seconds(text: &str) -> Option<u64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && frac.is_empty()
        || !whole
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let digits = &frac[..frac.len().min(9)];
    let frac: u64 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let frac = frac * 10u64.pow(9 - digits.len() as u32);
    whole.checked_mul(NANOS_PER_SEC)?.checked_add(frac)
}

enum Rows {
    Stream {
        reader: csv::Reader<BufReader<File>>,
        column: usize,
        unit: Unit,
        path: PathBuf,
    },
    Sorted(std::vec::IntoIter<u64>),
}

/// The running source. A row that fails to parse now (the file changed since
/// it was checked) ends the stream and is kept in [`Arrivals::take_error`].
pub struct Arrivals {
    rows: Rows,
    start: u64,
    end: u64,
    offset: i128,
    error: Option<String>,
}

impl Arrivals {
    /// Arrivals from times already sorted (for tests and callers that hold them).
    pub fn from_sorted(times: Vec<Nanos>) -> Arrivals {
        let times: Vec<u64> = times.into_iter().map(Nanos::get).collect();
        Arrivals {
            rows: Rows::Sorted(times.into_iter()),
            start: 0,
            end: u64::MAX,
            offset: 0,
            error: None,
        }
    }

    /// The error that cut the stream short, if any.
    pub fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    fn raw(&mut self) -> impl Iterator<Item = u64> + '_ {
        let mut record = csv::ByteRecord::new();
        std::iter::from_fn(move || match &mut self.rows {
            Rows::Sorted(times) => times.next(),
            Rows::Stream {
                reader,
                column,
                unit,
                path,
            } => {
                let row = read(reader, &mut record, path).and_then(|more| {
                    more.then(|| parse(&record, *column, *unit, path))
                        .transpose()
                });
                row.unwrap_or_else(|err| {
                    self.error = Some(err);
                    None
                })
            }
        })
    }
}

impl Iterator for Arrivals {
    type Item = Nanos;

    fn next(&mut self) -> Option<Nanos> {
        let (start, end, offset) = (self.start, self.end, self.offset);
        self.raw()
            .map(|t| (t as i128 + offset).clamp(0, u64::MAX as i128) as u64)
            .find(|t| (start..end).contains(t) || *t >= end)
            .filter(|t| *t < end)
            .map(Nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(contents: &str, extra: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.csv"), contents).unwrap();
        let config: Config = toml::from_str(&format!("path = \"t.csv\"\n{extra}")).unwrap();
        (dir, config)
    }

    fn times(contents: &str, extra: &str) -> Result<Vec<u64>, String> {
        let (dir, config) = trace(contents, extra);
        let arrivals = config.arrivals(dir.path(), Nanos(0), Nanos(u64::MAX))?;
        Ok(arrivals.map(Nanos::get).collect())
    }

    #[test]
    fn reads_nanoseconds_and_decimal_seconds() {
        assert_eq!(times("time_ns\n5\n7\n", "").unwrap(), [5, 7]);
        assert_eq!(
            times("host,time_s\na,1.5\nb,2.000000001\n", "").unwrap(),
            [1_500_000_000, 2_000_000_001]
        );
    }

    #[test]
    fn sorts_an_unsorted_trace_and_says_so() {
        let (dir, config) = trace("time_ns\n9\n3\n5\n", "");
        let warnings = config.validate(dir.path(), Nanos(0), Nanos(100)).unwrap();
        assert!(warnings[0].contains("1 of 3 rows"), "{warnings:?}");
        assert_eq!(times("time_ns\n9\n3\n5\n", "").unwrap(), [3, 5, 9]);
    }

    #[test]
    fn names_the_line_of_a_bad_row() {
        let (dir, config) = trace("time_ns\n1\n2\nsoon\n", "");
        let err = config
            .validate(dir.path(), Nanos(0), Nanos(100))
            .unwrap_err();
        assert!(err.contains("t.csv:4:") && err.contains("soon"), "{err}");
    }

    #[test]
    fn handles_a_byte_order_mark_crlf_and_extra_columns() {
        assert_eq!(
            times("\u{feff}time_ns,extra\r\n1,x\r\n2,y,z\r\n", "").unwrap(),
            [1, 2]
        );
    }

    #[test]
    fn rebases_absolute_timestamps_to_the_start() {
        assert_eq!(
            times("time_s\n1700000000.25\n1700000001\n", "rebase = true").unwrap(),
            [0, 750_000_000]
        );
    }

    #[test]
    fn parses_seconds_exactly() {
        assert_eq!(parse_seconds("0.1"), Some(100_000_000));
        assert_eq!(parse_seconds(".5"), Some(500_000_000));
        assert_eq!(parse_seconds("3"), Some(3_000_000_000));
        assert_eq!(parse_seconds("1.0000000019"), Some(1_000_000_001));
        assert_eq!(parse_seconds("-1"), None);
        assert_eq!(parse_seconds("1e3"), None);
    }
}
