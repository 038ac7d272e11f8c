//! Replayed timestamps: a CSV file with a header (a `time_ns` column of
//! integer nanoseconds, a `time_s` column of decimal seconds, or any column
//! with its `unit`), an nginx/Apache combined log, or JSON lines; optionally
//! with a field naming each request's client key. Whole-second timestamps of
//! a log are spread within their second.

use std::collections::VecDeque;
use std::fs::File;
use std::hash::{DefaultHasher, Hasher};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use serde::Deserialize;

use rand::RngExt as _;

use super::logs::{self, Combined, Format};
use super::{Arrival, Key, Rng};
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "trace"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The file, relative to the scenario file.
    pub path: PathBuf,
    /// How it is laid out: `"csv"` (default), `"combined"` or `"jsonl"`.
    #[serde(default)]
    pub format: Format,
    /// The CSV column or JSON field of the time (default: `time_ns`, else
    /// `time_s`, else `time_ms` in CSV; `time` in JSON lines).
    #[serde(alias = "time_field")]
    pub column: Option<String>,
    /// `"ns"`, `"s"`, `"ms"` (epoch or not) or `"rfc3339"` (also ISO 8601
    /// date-times with an offset); default: from a `_ns` or `_s` column
    /// name in CSV, and in JSON lines `rfc3339` for text and `s` for numbers.
    pub unit: Option<Unit>,
    /// The column or field naming each request's client (an API key, a user,
    /// an address: any text, hashed to a key); without it every request is
    /// the default key's. In a combined log, one of its fields by nginx's name
    /// (`remote_addr`, `remote_user`, `http_user_agent`, …).
    #[serde(alias = "key_field")]
    pub key: Option<String>,
    /// Shift the trace so its earliest timestamp is the source's start
    /// (default: true for logs and date-times, false for CSV numbers).
    pub rebase: Option<bool>,
    /// Whole-second timestamps spread uniformly within their second, seeded
    /// (`"uniform"`, the default for logs and date-times), or kept on it (`"none"`).
    pub spread: Option<Spread>,
    /// The first pass's findings, shared by every clone of this configuration
    /// so that a run reads the file only once more.
    #[serde(skip)]
    scanned: Arc<OnceLock<Scan>>,
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
    /// Decimal milliseconds, up to six digits after the point.
    #[serde(rename = "ms")]
    Millis,
    /// RFC 3339 / ISO 8601 date-times with an offset.
    #[serde(rename = "rfc3339", alias = "iso8601")]
    DateTime,
}

/// What to do with whole-second timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    /// Each request at a uniformly drawn instant of its second.
    Uniform,
    /// Every request of a second at its start.
    None,
}

/// Where a row's time and key are.
#[derive(Clone, Debug)]
enum Layout {
    Csv {
        column: usize,
        unit: Unit,
        key: Option<usize>,
    },
    Combined {
        key: Option<&'static str>,
    },
    Json {
        time: String,
        unit: Option<Unit>,
        key: Option<String>,
    },
}

/// Most rows of one second held at once to spread them.
const MAX_SPREAD_ROWS: usize = 10_000_000;

/// What a first pass over the file found.
#[derive(Clone, Debug)]
struct Scan {
    layout: Layout,
    /// Whether every timestamp is a whole second (so spreading applies).
    whole_seconds: bool,
    /// Distinct keys in the file (1 without a key column).
    keys: u64,
    earliest: u64,
    sorted: bool,
    rows: u64,
    /// The file as checked; a replay refuses any other.
    identity: Identity,
    /// A hash of every byte as checked; a replay that reads other bytes fails.
    checksum: u64,
}

/// What tells one file's content from another's without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Identity {
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let (device, inode) = (0, 0);
        Identity {
            device,
            inode,
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

/// The most bytes one row (a line, or a CSV record over several lines) may
/// hold: a file with no line break (a JSON array exported on one line) or a
/// row of 10^8 commas is refused as it is read, not once it fills memory.
pub const MAX_ROW_BYTES: u64 = 1 << 20;
/// What the reader holds ahead of the row it is reading.
const BUFFER_BYTES: usize = 1 << 16;

/// The opened file, read no further than its length when opened, hashing
/// every byte it hands out, and refusing to hand out more than a row's
/// worth (and the buffer) before the row is done.
struct Hashing {
    file: std::io::Take<File>,
    hasher: DefaultHasher,
    /// Bytes handed out since the last row was done: at most the row and
    /// the buffer read ahead of it.
    since_row: u64,
    /// Whether rows are capped (not while draining the rest for its hash).
    capped: bool,
}

impl Read for Hashing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.hasher.write(&buf[..n]);
        self.since_row += n as u64;
        if self.capped && self.since_row > MAX_ROW_BYTES + BUFFER_BYTES as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "a row longer than {MAX_ROW_BYTES} bytes (1 MiB), the most a trace's line or record may hold"
                ),
            ));
        }
        Ok(n)
    }
}

type Reader = csv::Reader<BufReader<Hashing>>;

/// The opened file, read as CSV records or as lines.
enum Input {
    Csv {
        reader: Box<Reader>,
        /// Reused for every row, so streaming allocates nothing per row.
        record: csv::ByteRecord,
    },
    Lines {
        reader: Box<BufReader<Hashing>>,
        line: String,
        number: u64,
    },
}

impl Input {
    /// The line of the last row read.
    fn line(&self) -> u64 {
        match self {
            Input::Csv { record, .. } => record.position().map_or(0, csv::Position::line),
            Input::Lines { number, .. } => *number,
        }
    }

    fn hashing(&mut self) -> &mut Hashing {
        match self {
            Input::Csv { reader, .. } => reader.get_mut().get_mut(),
            Input::Lines { reader, .. } => reader.get_mut(),
        }
    }

    /// Reads what is left of the file and returns the hash of all of it.
    fn drain(&mut self) -> std::io::Result<u64> {
        self.hashing().capped = false;
        match self {
            Input::Csv { reader, .. } => std::io::copy(reader.get_mut(), &mut std::io::sink())?,
            Input::Lines { reader, .. } => std::io::copy(reader, &mut std::io::sink())?,
        };
        Ok(self.hashing().hasher.finish())
    }

    /// The next row's time as written and its key; `None` at the end.
    fn next(&mut self, layout: &Layout, path: &Path) -> Result<Option<(u64, Key)>, String> {
        match (self, layout) {
            (Input::Csv { reader, record }, Layout::Csv { column, unit, key }) => {
                let line = record.position().map_or(1, |p| p.line() + 1);
                let more = reader
                    .read_byte_record(record)
                    .map_err(|err| match err.kind() {
                        csv::ErrorKind::Io(io) => format!("{}:{line}: {io}", path.display()),
                        _ => format!("{}: {err}", path.display()),
                    })?;
                if !more {
                    return Ok(None);
                }
                reader.get_mut().get_mut().since_row = 0;
                let time = parse(record, *column, *unit, path)?;
                let key = match *key {
                    Some(column) => parse_key(record, column, path)?,
                    None => Key::DEFAULT,
                };
                Ok(Some((time, key)))
            }
            (
                Input::Lines {
                    reader,
                    line,
                    number,
                },
                layout,
            ) => loop {
                line.clear();
                let read = reader
                    .read_line(line)
                    .map_err(|err| format!("{}:{}: {err}", path.display(), *number + 1))?;
                if read == 0 {
                    return Ok(None);
                }
                *number += 1;
                reader.get_mut().since_row = 0;
                let text = line.trim();
                if text.is_empty() {
                    continue;
                }
                let at = |what: String| format!("{}:{number}: {what}", path.display());
                return match layout {
                    Layout::Combined { key } => {
                        let fields = Combined::parse(text).ok_or_else(|| {
                            at(format!(
                                "{:?} is not a combined log line (ADDR IDENT USER [TIME] \"REQUEST\" STATUS BYTES …)",
                                crate::input::quote_at_most(text, 64)
                            ))
                        })?;
                        let time = logs::combined_time(fields.time).ok_or_else(|| {
                            at(format!(
                                "[{}] is not a time like [10/Oct/2000:13:55:36 -0700]",
                                fields.time
                            ))
                        })?;
                        let key = key
                            .and_then(|name| fields.field(name))
                            .map_or(Key::DEFAULT, |k| Key::named(k.as_bytes()));
                        Ok(Some((time, key)))
                    }
                    Layout::Json { time, unit, key } => json_row(text, time, *unit, key.as_deref())
                        .map(Some)
                        .map_err(at),
                    Layout::Csv { .. } => unreachable!("CSV is read as records"),
                };
            },
            (Input::Csv { .. }, _) => unreachable!("a CSV layout comes with CSV input"),
        }
    }
}

/// The time and key of one JSON line.
fn json_row(
    text: &str,
    field: &str,
    unit: Option<Unit>,
    key: Option<&str>,
) -> Result<(u64, Key), String> {
    // Values as written: a number of epoch seconds goes through the same
    // decimal parser as CSV's time_s, never through a float (which would turn
    // 1764460800.999999999 into 1764460801).
    let object: std::collections::HashMap<String, &serde_json::value::RawValue> =
        serde_json::from_str(text).map_err(|err| format!("not a JSON object ({err})"))?;
    let value = object.get(field).ok_or_else(|| {
        format!("no field {field:?}; set time_field to the field holding the time")
    })?;
    let time = match json_text(value) {
        JsonText::String(text) => {
            let unit = unit.unwrap_or(Unit::DateTime);
            parse_text(&text, unit).ok_or_else(|| invalid(&text, unit))?
        }
        JsonText::Number(text) => {
            let unit = unit.unwrap_or(Unit::Seconds);
            parse_text(text, unit).ok_or_else(|| invalid(text, unit))?
        }
        JsonText::Other(text) => {
            return Err(format!(
                "{field}: {} is not a time",
                crate::input::quote_at_most(text, 64)
            ));
        }
    };
    let key = match key {
        None => Key::DEFAULT,
        Some(name) => match object.get(name).map(|raw| json_text(raw)) {
            Some(JsonText::String(text)) => Key::named(text.trim().as_bytes()),
            Some(JsonText::Number(text) | JsonText::Other(text)) => Key::named(text.as_bytes()),
            None => return Err(format!("no key field {name:?}")),
        },
    };
    Ok((time, key))
}

/// A JSON value as written in the line.
enum JsonText<'a> {
    /// A string, unescaped.
    String(String),
    /// A number, its digits as written.
    Number(&'a str),
    /// Anything else, as written.
    Other(&'a str),
}

fn json_text(raw: &serde_json::value::RawValue) -> JsonText<'_> {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'"') => serde_json::from_str(text).map_or(JsonText::Other(text), JsonText::String),
        Some(b'-' | b'0'..=b'9') => JsonText::Number(text),
        _ => JsonText::Other(text),
    }
}

fn invalid(text: &str, unit: Unit) -> String {
    format!(
        "{:?} is not {}",
        crate::input::quote_at_most(text, 64),
        unit.expected()
    )
}

impl Unit {
    /// What a field in this unit looks like, in words.
    fn expected(self) -> &'static str {
        match self {
            Unit::Nanos => "a whole number of nanoseconds",
            Unit::Seconds => "a non-negative number of seconds",
            Unit::Millis => "a non-negative number of milliseconds",
            Unit::DateTime => "an RFC 3339 date-time with an offset, like 2026-11-30T12:00:00.250Z",
        }
    }
}

/// A time written in `unit`, in nanoseconds.
fn parse_text(text: &str, unit: Unit) -> Option<u64> {
    let text = text.trim();
    match unit {
        Unit::Nanos => parse_nanos(text.as_bytes()),
        Unit::Seconds => crate::decimal::scaled(text, NANOS_PER_SEC, 9),
        Unit::Millis => crate::decimal::scaled(text, 1_000_000, 6),
        Unit::DateTime => logs::iso_time(text),
    }
}

fn changed(path: &Path) -> String {
    format!(
        "{}: the file changed after burstsim checked it; nothing was written, run again once it is stable",
        path.display()
    )
}

/// The most distinct keys a trace may name: state is kept per key.
pub const MAX_KEYS: u64 = 10_000_000;

/// Bytes a row of an unsorted trace takes while sorted in memory: its time
/// and key, and the stable sort's scratch of half the rows.
const SORTED_ROW_BYTES: u64 = 24;

/// The most rows of an unsorted trace sorted in memory (1 GiB of timestamps
/// and keys).
const MAX_UNSORTED_ROWS: u64 = 1 << 26;

impl Config {
    /// Whether the timestamps are absolute (a log's, or date-times), so the
    /// trace is rebased and whole seconds spread by default.
    fn is_log(&self) -> bool {
        self.format != Format::Csv || self.unit == Some(Unit::DateTime)
    }

    /// Whether the trace is shifted to start at the source's start.
    fn rebased(&self) -> bool {
        self.rebase.unwrap_or_else(|| self.is_log())
    }

    /// Whether whole-second timestamps may be spread: then each replication
    /// draws its own instants.
    pub fn may_spread(&self) -> bool {
        match self.spread {
            Some(spread) => spread == Spread::Uniform,
            None => self.is_log(),
        }
    }

    /// Opens the file once as a regular file and, when it was checked
    /// before, insists it is the same one.
    fn open(
        &self,
        base_dir: &Path,
        expected: Option<Identity>,
    ) -> Result<(Input, Identity), String> {
        let path = base_dir.join(&self.path);
        let (file, meta) = crate::input::open_regular(&path)
            .map_err(|err| format!("path: cannot replay {}: {err}", path.display()))?;
        let identity = Identity::of(&meta);
        if expected.is_some_and(|expected| expected != identity) {
            return Err(changed(&path));
        }
        let hashing = Hashing {
            file: file.take(identity.len),
            hasher: DefaultHasher::new(),
            since_row: 0,
            capped: true,
        };
        let buffered = BufReader::with_capacity(BUFFER_BYTES, hashing);
        let input = match self.format {
            Format::Csv => Input::Csv {
                reader: Box::new(
                    csv::ReaderBuilder::new()
                        .flexible(true)
                        .from_reader(buffered),
                ),
                record: csv::ByteRecord::new(),
            },
            Format::Combined | Format::Jsonl => Input::Lines {
                reader: Box::new(buffered),
                line: String::new(),
                number: 0,
            },
        };
        Ok((input, identity))
    }

    /// Where each row's time and key are: from the header of a CSV file,
    /// from the configuration for a log.
    fn locate(&self, base_dir: &Path, input: &mut Input) -> Result<Layout, String> {
        let shown = base_dir.join(&self.path);
        match (self.format, input) {
            (Format::Csv, Input::Csv { reader, .. }) => self.locate_csv(&shown, reader),
            (Format::Combined, _) => {
                if self.column.is_some() || self.unit.is_some() {
                    return Err("time_field and unit: a combined log's time is its [10/Oct/2000:13:55:36 -0700] field; remove them".into());
                }
                let key = match &self.key {
                    None => None,
                    Some(key) => Some(
                        *logs::COMBINED_FIELDS
                            .iter()
                            .find(|f| **f == key.as_str())
                            .ok_or_else(|| {
                                format!(
                                    "key_field: a combined log has no field {key:?}; it has {}",
                                    logs::COMBINED_FIELDS.join(", ")
                                )
                            })?,
                    ),
                };
                Ok(Layout::Combined { key })
            }
            (Format::Jsonl, _) => Ok(Layout::Json {
                time: self.column.clone().unwrap_or_else(|| "time".into()),
                unit: self.unit,
                key: self.key.clone(),
            }),
            (Format::Csv, Input::Lines { .. }) => unreachable!("a CSV file is read as CSV"),
        }
    }

    /// The time column, its unit and the key column, from a CSV header.
    fn locate_csv(&self, shown: &Path, reader: &mut Reader) -> Result<Layout, String> {
        let headers = reader
            .headers()
            .map_err(|err| format!("{}: {err}", shown.display()))?;
        let wanted: Vec<&str> = match &self.column {
            Some(column) => vec![column.as_str()],
            None => vec!["time_ns", "time_s", "time_ms"],
        };
        let (column, name) = wanted
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
        let key =
            match &self.key {
                None => None,
                Some(key) => Some(headers.iter().position(|h| h.trim() == key).ok_or_else(
                    || format!("{}:1: no key column {key:?} in the header", shown.display()),
                )?),
            };
        let unit = match (self.unit, name) {
            (Some(unit), _) => unit,
            (None, name) if name.ends_with("_ns") => Unit::Nanos,
            (None, name) if name.ends_with("_s") => Unit::Seconds,
            (None, name) if name.ends_with("_ms") => Unit::Millis,
            (None, name) => {
                return Err(format!(
                    "unit: the unit of column {name:?} is unknown; set unit = \"ns\", \"s\", \"ms\" or \"rfc3339\""
                ));
            }
        };
        Ok(Layout::Csv { column, unit, key })
    }

    /// Reads the whole file once, streaming: every row must hold a timestamp.
    /// Also counts the rows outside `[start, end)` (after rebasing); for an
    /// unsorted file that takes a second pass.
    fn scan(
        &self,
        base_dir: &Path,
        start: Nanos,
        end: Nanos,
    ) -> Result<(Scan, Vec<String>), String> {
        let (mut input, identity) = self.open(base_dir, None)?;
        let layout = self.locate(base_dir, &mut input)?;
        let shown = base_dir.join(&self.path);
        let (mut rows, mut unsorted, mut earliest, mut previous) = (0u64, 0u64, u64::MAX, 0u64);
        let (mut first, mut outside, mut whole_seconds) = (None, 0u64, true);
        let mut keys: std::collections::HashSet<Key, crate::random::MixState> =
            std::collections::HashSet::default();
        let keyed = self.key.is_some();
        while let Some((time, key)) = input.next(&layout, &shown)? {
            if keyed && keys.insert(key) && keys.len() as u64 > MAX_KEYS {
                return Err(format!(
                    "{}: more than {MAX_KEYS} distinct keys in column {:?}; state is kept per key, and that many is refused",
                    shown.display(),
                    self.key.as_deref().unwrap_or_default()
                ));
            }
            unsorted += u64::from(time < previous);
            earliest = earliest.min(time);
            whole_seconds &= time % NANOS_PER_SEC == 0;
            previous = time;
            rows += 1;
            // While sorted, the first row is the earliest, so the rebased time is known now.
            let first = *first.get_or_insert(time);
            let shifted = if self.rebased() {
                (time - first.min(time)).saturating_add(start.get())
            } else {
                time
            };
            outside += u64::from(!(start.get()..end.get()).contains(&shifted));
        }
        let checksum = input
            .drain()
            .map_err(|err| format!("{}: {err}", shown.display()))?;
        let now = input.hashing().file.get_ref().metadata();
        if now.map(|meta| Identity::of(&meta)).ok() != Some(identity) {
            return Err(changed(&shown));
        }
        let spreading = rows > 0 && whole_seconds && self.may_spread();
        if self.spread == Some(Spread::Uniform) && rows > 0 && !whole_seconds {
            return Err(format!(
                "spread: \"uniform\" spreads whole-second timestamps within their second, and {} has finer ones; remove it",
                shown.display()
            ));
        }
        let scan = Scan {
            layout,
            whole_seconds: spreading,
            keys: (keys.len() as u64).max(1),
            earliest,
            sorted: unsorted == 0,
            rows,
            identity,
            checksum,
        };
        if unsorted > 0 && rows > MAX_UNSORTED_ROWS {
            return Err(format!(
                "{}: {unsorted} of {rows} rows are out of order, and sorting more than {MAX_UNSORTED_ROWS} rows in memory is refused; sort the file first (sort -t, -k1,1n)",
                shown.display()
            ));
        }
        if unsorted > 0 {
            let offset = if self.rebased() {
                i128::from(start.get()) - i128::from(earliest)
            } else {
                0
            };
            let mut all = self.stream(base_dir, &scan, Nanos::ZERO, Nanos(u64::MAX))?;
            all.offset = offset;
            outside = rows - all.filter(|a| (start..end).contains(&a.time)).count() as u64;
        }
        // A replay of nothing would pass every check: refuse it.
        if rows == 0 {
            return Err(format!(
                "{}: the trace has no rows, so there is nothing to replay; give it one timestamp per row{}",
                shown.display(),
                if self.format == Format::Csv {
                    " under its header"
                } else {
                    ""
                }
            ));
        }
        if outside == rows {
            let hint = if self.rebased() {
                "; set the source's start and end to where the rows are, or lengthen the run"
            } else {
                "; if it holds absolute (epoch) timestamps, set rebase = true"
            };
            return Err(format!(
                "{}: all {rows} rows fall outside [{start}, {end}), so nothing would be replayed{hint}",
                shown.display()
            ));
        }
        let mut warnings = Vec::new();
        if unsorted > 0 {
            warnings.push(format!(
                "{}: {unsorted} of {rows} rows are earlier than the row before them; the trace was sorted in memory",
                shown.display()
            ));
        }
        if outside > 0 {
            let hint = if self.rebased() {
                ""
            } else {
                "; if it holds absolute timestamps, set rebase = true"
            };
            warnings.push(format!(
                "{}: {outside} rows fall outside [{start}, {end}) and are left out{hint}",
                shown.display()
            ));
        }
        if spreading {
            warnings.push(format!(
                "{}: its timestamps are whole seconds, so each request is spread at a uniformly drawn instant of its second (seeded; replications draw anew); set spread = \"none\" to keep them on the second",
                shown.display()
            ));
        }
        Ok((scan, warnings))
    }

    /// Checks the file, counts rows that fall outside `[start, end)`, and
    /// keeps what it learnt for the run.
    pub fn validate(
        &self,
        base_dir: &Path,
        start: Nanos,
        end: Nanos,
    ) -> Result<Vec<String>, String> {
        let (scan, warnings) = self.scan(base_dir, start, end)?;
        let _ = self.scanned.set(scan);
        Ok(warnings)
    }

    /// How many distinct keys the file names (1 without a key column); read
    /// once, then remembered.
    pub fn keys(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<u64, String> {
        Ok(self.scanned(base_dir, start, end)?.keys)
    }

    /// How many rows the file holds (read once, then remembered).
    pub fn rows(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<u64, String> {
        Ok(self.scanned(base_dir, start, end)?.rows)
    }

    /// Bytes held to sort the rows in memory when they are out of order:
    /// 16 a row and half as much again for the stable sort's scratch.
    pub fn sort_bytes(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<u64, String> {
        let scan = self.scanned(base_dir, start, end)?;
        Ok(if scan.sorted {
            0
        } else {
            scan.rows.saturating_mul(SORTED_ROW_BYTES)
        })
    }

    /// The first pass's findings: remembered, or read now.
    fn scanned(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<Scan, String> {
        if let Some(scan) = self.scanned.get() {
            return Ok(scan.clone());
        }
        let scan = self.scan(base_dir, start, end)?.0;
        let _ = self.scanned.set(scan.clone());
        Ok(scan)
    }

    /// The trace's arrivals in `[start, end)`, streamed from disk when the file
    /// is sorted, and otherwise sorted in memory; whole seconds spread with `rng`.
    pub fn arrivals(
        &self,
        base_dir: &Path,
        start: Nanos,
        end: Nanos,
        rng: Rng,
    ) -> Result<Arrivals, String> {
        let scan = self.scanned(base_dir, start, end)?;
        let offset = if self.rebased() {
            i128::from(start.get()) - i128::from(scan.earliest)
        } else {
            0
        };
        let mut arrivals = self.stream(base_dir, &scan, Nanos::ZERO, Nanos(u64::MAX))?;
        if !scan.sorted {
            // As many as the first pass counted: no doubling on the way.
            let mut rows: Vec<(u64, Key)> =
                Vec::with_capacity(usize::try_from(scan.rows).unwrap_or(0));
            rows.extend(arrivals.raw());
            // Stable: rows at the same instant keep the file's order.
            rows.sort_by_key(|&(time, _)| time);
            arrivals.rows = Rows::Sorted(rows.into_iter());
        }
        if scan.whole_seconds {
            arrivals.spread = Some(Spreader {
                rng,
                pending: VecDeque::new(),
                carry: None,
            });
        }
        (arrivals.start, arrivals.end, arrivals.offset) = (start.get(), end.get(), offset);
        Ok(arrivals)
    }

    /// The file's rows in order as they stand, filtered to `[start, end)`.
    fn stream(
        &self,
        base_dir: &Path,
        scan: &Scan,
        start: Nanos,
        end: Nanos,
    ) -> Result<Arrivals, String> {
        let (mut input, _) = self.open(base_dir, Some(scan.identity))?;
        self.locate(base_dir, &mut input)?;
        Ok(Arrivals {
            rows: Rows::Stream {
                checksum: scan.checksum,
                input: Box::new(input),
                layout: scan.layout.clone(),
                path: base_dir.join(&self.path),
                previous: 0,
                sorted: scan.sorted,
            },
            start: start.get(),
            end: end.get(),
            offset: 0,
            spread: None,
            error: None,
        })
    }
}

/// Fails unless the bytes read, to the end, are those checked at first.
fn verify(input: &mut Input, checksum: u64, path: &Path) -> Result<(), String> {
    match input.drain() {
        Ok(hash) if hash == checksum => Ok(()),
        Ok(_) => Err(changed(path)),
        Err(err) => Err(format!("{}: {err}", path.display())),
    }
}

/// The key named in column `column`, any text (an empty field is a key too).
fn parse_key(record: &csv::ByteRecord, column: usize, path: &Path) -> Result<Key, String> {
    record
        .get(column)
        .map(|field| Key::named(field.trim_ascii()))
        .ok_or_else(|| {
            let line = record.position().map_or(0, csv::Position::line);
            format!(
                "{}:{line}: the row has no key column {}",
                path.display(),
                column + 1
            )
        })
}

fn parse(record: &csv::ByteRecord, column: usize, unit: Unit, path: &Path) -> Result<u64, String> {
    let field = record.get(column);
    let parsed = field.and_then(|field| match unit {
        Unit::Nanos => parse_nanos(field),
        _ => std::str::from_utf8(field)
            .ok()
            .and_then(|text| parse_text(text, unit)),
    });
    parsed.ok_or_else(|| {
        let line = record.position().map_or(0, csv::Position::line);
        let Some(field) = field else {
            return format!(
                "{}:{line}: the row has no column {}",
                path.display(),
                column + 1
            );
        };
        format!(
            "{}:{line}: {}",
            path.display(),
            invalid(&String::from_utf8_lossy(field), unit)
        )
    })
}

/// Whole nanoseconds from ASCII digits (spaces around them allowed), without
/// going through `str`: the hot path of replaying a trace.
#[inline]
fn parse_nanos(field: &[u8]) -> Option<u64> {
    let digits = field.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &byte| {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// Decimal seconds to nanoseconds without floats; digits past the ninth are dropped.
#[cfg(test)]
fn parse_seconds(text: &str) -> Option<u64> {
    crate::decimal::scaled(text, NANOS_PER_SEC, 9)
}

enum Rows {
    Stream {
        /// Boxed: the reader's buffers dwarf the other variant.
        input: Box<Input>,
        /// The hash of the file's bytes when it was checked.
        checksum: u64,
        layout: Layout,
        path: PathBuf,
        /// The last timestamp read, to catch a file that changed after it was checked.
        previous: u64,
        /// Whether the first pass found the file sorted.
        sorted: bool,
    },
    Sorted(std::vec::IntoIter<(u64, Key)>),
}

/// Whole-second rows spread within their second: one second's rows at a
/// time, drawn, then sorted (equal draws keep the file's order).
struct Spreader {
    rng: Rng,
    pending: VecDeque<(u64, Key)>,
    /// The first row of the next second, read while gathering this one's.
    carry: Option<(u64, Key)>,
}

/// The running source. A row that fails to parse now (the file changed since
/// it was checked) ends the stream and is kept in [`Arrivals::take_error`].
pub struct Arrivals {
    rows: Rows,
    start: u64,
    end: u64,
    offset: i128,
    spread: Option<Spreader>,
    error: Option<String>,
}

impl Arrivals {
    /// Arrivals already in time order (for tests and callers that hold them).
    pub fn from_sorted(arrivals: Vec<Arrival>) -> Arrivals {
        let rows: Vec<(u64, Key)> = arrivals.iter().map(|a| (a.time.get(), a.key)).collect();
        Arrivals {
            rows: Rows::Sorted(rows.into_iter()),
            start: 0,
            end: u64::MAX,
            offset: 0,
            spread: None,
            error: None,
        }
    }

    /// The error that cut the stream short, if any.
    pub fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    /// The next timestamp as written, before shifting and filtering, and its key.
    #[inline]
    fn next_raw(&mut self) -> Option<(u64, Key)> {
        match &mut self.rows {
            Rows::Sorted(times) => times.next(),
            Rows::Stream {
                input,
                checksum,
                layout,
                path,
                previous,
                sorted,
            } => {
                let row = input.next(layout, path).and_then(|row| match row {
                    None => verify(input, *checksum, path).map(|()| None),
                    Some((time, _)) if *sorted && time < *previous => Err(format!(
                        "{}:{}: the row is earlier than the one before it; the file changed while burstsim read it",
                        path.display(),
                        input.line()
                    )),
                    Some((time, key)) => {
                        *previous = time;
                        Ok(Some((time, key)))
                    }
                });
                row.unwrap_or_else(|err| {
                    self.error = Some(err);
                    None
                })
            }
        }
    }

    /// The next row, spread within its second when the trace's are whole seconds.
    #[inline]
    fn next_spread(&mut self) -> Option<(u64, Key)> {
        let Some(mut spread) = self.spread.take() else {
            return self.next_raw();
        };
        if spread.pending.is_empty() {
            let first = spread.carry.take().or_else(|| self.next_raw());
            if let Some(first) = first {
                let second = first.0 / NANOS_PER_SEC;
                let mut rows = vec![first];
                while let Some(row) = self.next_raw() {
                    if row.0 / NANOS_PER_SEC != second {
                        spread.carry = Some(row);
                        break;
                    }
                    rows.push(row);
                    if rows.len() > MAX_SPREAD_ROWS {
                        self.error = Some(format!(
                            "more than {MAX_SPREAD_ROWS} requests in one second of the trace are spread in memory, and more is refused; set spread = \"none\""
                        ));
                        return None;
                    }
                }
                for row in &mut rows {
                    row.0 += spread.rng.random_range(0..NANOS_PER_SEC);
                }
                rows.sort_by_key(|&(time, _)| time);
                spread.pending.extend(rows);
            }
        }
        let row = spread.pending.pop_front();
        self.spread = Some(spread);
        row
    }

    /// Ends a stream cut short at the run's end: the rest of the file is
    /// read too, so the whole of it is checked against the first pass.
    fn finish_early(&mut self) {
        if let Rows::Stream {
            input,
            checksum,
            path,
            ..
        } = &mut self.rows
            && let Err(err) = verify(input, *checksum, path)
        {
            self.error.get_or_insert(err);
        }
    }

    fn raw(&mut self) -> impl Iterator<Item = (u64, Key)> + '_ {
        std::iter::from_fn(move || self.next_raw())
    }
}

impl Iterator for Arrivals {
    type Item = Arrival;

    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        loop {
            let (raw, key) = self.next_spread()?;
            let time = if self.offset == 0 {
                raw
            } else {
                (i128::from(raw) + self.offset).clamp(0, i128::from(u64::MAX)) as u64
            };
            if time >= self.end {
                self.finish_early();
                return None;
            }
            if time >= self.start {
                return Some(Arrival {
                    time: Nanos(time),
                    key,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    fn rng() -> Rng {
        Rng::seed_from_u64(7)
    }

    fn trace(contents: &str, extra: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.csv"), contents).unwrap();
        let config: Config = toml::from_str(&format!("path = \"t.csv\"\n{extra}")).unwrap();
        (dir, config)
    }

    fn times(contents: &str, extra: &str) -> Result<Vec<u64>, String> {
        let (dir, config) = trace(contents, extra);
        let arrivals = config.arrivals(dir.path(), Nanos(0), Nanos(u64::MAX), rng())?;
        Ok(arrivals.map(|a| a.time.get()).collect())
    }

    fn file(name: &str, contents: &str, extra: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(name), contents).unwrap();
        let config: Config = toml::from_str(&format!("path = \"{name}\"\n{extra}")).unwrap();
        (dir, config)
    }

    /// Times and keys as replayed.
    type Replayed = Vec<(u64, Key)>;

    /// Times and keys as replayed from `[0, end)`, and the first pass's warnings.
    fn replay(name: &str, contents: &str, extra: &str) -> Result<(Replayed, Vec<String>), String> {
        let (dir, config) = file(name, contents, extra);
        let warnings = config.validate(dir.path(), Nanos(0), Nanos(u64::MAX))?;
        let mut arrivals = config.arrivals(dir.path(), Nanos(0), Nanos(u64::MAX), rng())?;
        let rows: Vec<(u64, Key)> = arrivals.by_ref().map(|a| (a.time.get(), a.key)).collect();
        arrivals.take_error().map_or(Ok((rows, warnings)), Err)
    }

    const COMBINED: &str = r#"198.51.100.1 - - [27/Nov/2026:09:00:00 +0100] "GET / HTTP/1.1" 200 5 "-" "a"
198.51.100.2 - bob [27/Nov/2026:09:00:00 +0100] "POST /x HTTP/1.1" 429 0 "-" "b"

203.0.113.7 - - [27/Nov/2026:08:00:02 +0000] "GET / HTTP/1.1" 200 5 "-" "c"
"#;

    #[test]
    fn a_combined_log_replays_rebased_with_its_addresses_as_keys() {
        let (rows, warnings) = replay(
            "a.log",
            COMBINED,
            "format = \"combined\"\nkey_field = \"remote_addr\"\nspread = \"none\"",
        )
        .unwrap();
        // 08:00:02 UTC is 09:00:02 +0100: two seconds after the first rows.
        assert_eq!(
            rows,
            [
                (0, Key::named(b"198.51.100.1")),
                (0, Key::named(b"198.51.100.2")),
                (2_000_000_000, Key::named(b"203.0.113.7")),
            ]
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let (rows, _) = replay(
            "a.log",
            COMBINED,
            "format = \"combined\"\nkey_field = \"remote_user\"\nspread = \"none\"",
        )
        .unwrap();
        assert_eq!(rows[1].1, Key::named(b"bob"));
    }

    #[test]
    fn whole_seconds_of_a_log_are_spread_within_their_second_and_said_so() {
        let (rows, warnings) = replay("a.log", COMBINED, "format = \"combined\"").unwrap();
        assert!(
            warnings.iter().any(|w| w.contains("whole seconds")),
            "{warnings:?}"
        );
        let times: Vec<u64> = rows.iter().map(|r| r.0).collect();
        assert!(times.is_sorted(), "{times:?}");
        assert!(times[..2].iter().all(|&t| t < NANOS_PER_SEC), "{times:?}");
        assert!(
            (2 * NANOS_PER_SEC..3 * NANOS_PER_SEC).contains(&times[2]),
            "{times:?}"
        );
        // Drawn, not left on the second (a draw of exactly 0 has chance 10^-9).
        assert!(times.iter().all(|t| t % NANOS_PER_SEC != 0), "{times:?}");
        // Seeded: the same seed, the same instants.
        assert_eq!(
            replay("a.log", COMBINED, "format = \"combined\"")
                .unwrap()
                .0,
            rows
        );
    }

    #[test]
    fn json_lines_and_date_times_in_csv_read_as_the_combined_log_does() {
        let json = r#"{"time": "2026-11-27T09:00:00+01:00", "ip": "198.51.100.1"}
{"time": "2026-11-27T08:00:00Z", "ip": "198.51.100.2"}
{"time": "2026-11-27T09:00:02.000+01:00", "ip": "203.0.113.7"}
"#;
        let csv = "when,ip\n2026-11-27T09:00:00+01:00,198.51.100.1\n2026-11-27 08:00:00Z,198.51.100.2\n2026-11-27T08:00:02Z,203.0.113.7\n";
        let combined = replay(
            "a.log",
            COMBINED,
            "format = \"combined\"\nkey_field = \"remote_addr\"",
        )
        .unwrap()
        .0;
        let from_json = replay("a.jsonl", json, "format = \"jsonl\"\nkey_field = \"ip\"")
            .unwrap()
            .0;
        let from_csv = replay(
            "a.csv",
            csv,
            "time_field = \"when\"\nunit = \"rfc3339\"\nkey_field = \"ip\"",
        )
        .unwrap()
        .0;
        assert_eq!(from_json, combined);
        assert_eq!(from_csv, combined);
    }

    #[test]
    fn a_row_longer_than_the_cap_is_refused_as_it_is_read() {
        let long = "x".repeat(MAX_ROW_BYTES as usize + 200_000);
        let cases = [
            (
                "a.jsonl",
                format!("{{\"time\": 1.5}}\n[{long}"),
                "format = \"jsonl\"",
            ),
            ("a.log", format!("{long}\n"), "format = \"combined\""),
            (
                "a.csv",
                format!("time_ns,k\n1,a\n2,{}\n", ",".repeat(2 << 20)),
                "",
            ),
            (
                "a.csv",
                format!("time_ns,k\n1,a\n2,\"{}\"\n", "ab\n".repeat(1 << 20)),
                "",
            ),
        ];
        for (name, contents, extra) in cases {
            let err = replay(name, &contents, extra).unwrap_err();
            assert!(
                err.contains("a row longer than 1048576 bytes"),
                "{name}: {err}"
            );
            assert!(err.contains(&format!("{name}:")), "{name}: {err}");
        }
        // Just under the cap is a row like any other.
        let wide = format!(
            "time_ns,k\n1,{}\n",
            "k".repeat(MAX_ROW_BYTES as usize - 100)
        );
        assert_eq!(replay("a.csv", &wide, "key = \"k\"").unwrap().0.len(), 1);
    }

    #[test]
    fn epoch_seconds_in_json_are_as_exact_as_in_csv() {
        let json = "{\"ts\": 1764460800.999999999}\n{\"ts\": 1764460801.000000001}\n";
        let (rows, _) = replay("a.jsonl", json, "format = \"jsonl\"\ntime_field = \"ts\"").unwrap();
        let csv = "time_s\n1764460800.999999999\n1764460801.000000001\n";
        let (from_csv, _) = replay("a.csv", csv, "").unwrap();
        assert_eq!(from_csv[1].0 - from_csv[0].0, 2, "{from_csv:?}");
        // Through a float the first would be 1764460801.0, the same instant
        // as the second, on the other side of a whole second.
        assert_eq!(rows[1].0 - rows[0].0, 2, "{rows:?}");
    }

    #[test]
    fn epoch_numbers_in_json_and_milliseconds_in_csv() {
        let json = "{\"ts\": 1764230400.5}\n{\"ts\": 1764230401}\n";
        let (rows, _) = replay("a.jsonl", json, "format = \"jsonl\"\ntime_field = \"ts\"").unwrap();
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            [0, 500_000_000]
        );
        let json = "{\"ts\": 1764230400500}\n{\"ts\": 1764230401000}\n";
        let (rows, _) = replay(
            "a.jsonl",
            json,
            "format = \"jsonl\"\ntime_field = \"ts\"\nunit = \"ms\"",
        )
        .unwrap();
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            [0, 500_000_000]
        );
        let (rows, _) = replay("a.csv", "time_ms\n1.5\n3\n", "").unwrap();
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            [1_500_000, 3_000_000]
        );
    }

    #[test]
    fn bad_log_lines_name_their_line_and_what_is_expected() {
        for (name, contents, extra, expected) in [
            (
                "a.log",
                "198.51.100.1 - - [27/Nov/2026:09:00:00 +0100] \"GET / HTTP/1.1\" 200 5\nnonsense\n",
                "format = \"combined\"",
                "a.log:2: \"nonsense\" is not a combined log line",
            ),
            (
                "a.log",
                "1.2.3.4 - - [27/Nov/2026:25:00:00 +0100] \"GET / HTTP/1.1\" 200 5\n",
                "format = \"combined\"",
                "a.log:1: [27/Nov/2026:25:00:00 +0100] is not a time",
            ),
            (
                "a.log",
                COMBINED,
                "format = \"combined\"\nkey_field = \"client\"",
                "a combined log has no field \"client\"",
            ),
            (
                "a.log",
                COMBINED,
                "format = \"combined\"\nunit = \"s\"",
                "a combined log's time is its",
            ),
            (
                "a.jsonl",
                "{\"time\": \"2026-11-27T09:00:00Z\"}\n[1]\n",
                "format = \"jsonl\"",
                "a.jsonl:2: not a JSON object",
            ),
            (
                "a.jsonl",
                "{\"t\": 1}\n",
                "format = \"jsonl\"",
                "a.jsonl:1: no field \"time\"; set time_field",
            ),
            (
                "a.jsonl",
                "{\"time\": \"noon\"}\n",
                "format = \"jsonl\"",
                "a.jsonl:1: \"noon\" is not an RFC 3339 date-time",
            ),
            (
                "a.jsonl",
                "{\"time\": 1, \"k\": 2}\n{\"time\": 2}\n",
                "format = \"jsonl\"\nkey_field = \"k\"",
                "a.jsonl:2: no key field \"k\"",
            ),
            (
                "a.csv",
                "time_s\n1.5\n",
                "spread = \"uniform\"",
                "spread: \"uniform\" spreads whole-second timestamps",
            ),
            (
                "a.log",
                "",
                "format = \"combined\"",
                "the trace has no rows",
            ),
        ] {
            let err = replay(name, contents, extra).unwrap_err();
            assert!(err.contains(expected), "{expected:?} not in {err}");
        }
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

    /// Times and keys, both as replayed.
    fn keyed(contents: &str, extra: &str) -> Result<Vec<(u64, Key)>, String> {
        let (dir, config) = trace(contents, extra);
        config.validate(dir.path(), Nanos(0), Nanos(u64::MAX))?;
        let arrivals = config.arrivals(dir.path(), Nanos(0), Nanos(u64::MAX), rng())?;
        Ok(arrivals.map(|a| (a.time.get(), a.key)).collect())
    }

    #[test]
    fn a_key_column_names_each_requests_client() {
        let (alice, bob) = (Key::named(b"alice"), Key::named(b"bob"));
        assert_ne!(alice, bob);
        assert_eq!(
            keyed(
                "time_ns,client\n5,alice\n7, bob \n9,alice\n",
                "key = \"client\""
            )
            .unwrap(),
            [(5, alice), (7, bob), (9, alice)]
        );
        assert_eq!(
            keyed("time_ns,client\n5,alice\n", "").unwrap(),
            [(5, Key::DEFAULT)],
            "without `key`, every request is the default key's"
        );
    }

    #[test]
    fn an_unsorted_keyed_trace_keeps_file_order_at_equal_times() {
        let rows = keyed("time_ns,k\n9,c\n5,a\n5,b\n1,d\n", "key = \"k\"").unwrap();
        let keys: Vec<Key> = [b"d", b"a", b"b", b"c"]
            .iter()
            .map(|k| Key::named(*k))
            .collect();
        assert_eq!(rows.iter().map(|r| r.1).collect::<Vec<_>>(), keys);
    }

    #[test]
    fn a_missing_key_column_or_field_is_an_error_with_its_line() {
        let err = keyed("time_ns\n5\n", "key = \"client\"").unwrap_err();
        assert!(err.contains(":1: no key column \"client\""), "{err}");
        let err = keyed("time_ns,client\n5,a\n6\n", "key = \"client\"").unwrap_err();
        assert!(err.contains(":3: the row has no key column 2"), "{err}");
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

    /// Checks a trace, changes it as `change` does, and replays it.
    fn replay_after(change: impl Fn(&Path)) -> Result<Vec<u64>, String> {
        let (dir, config) = trace("time_ns\n100\n200\n300\n", "");
        config.validate(dir.path(), Nanos(0), Nanos(1000))?;
        change(&dir.path().join("t.csv"));
        let mut arrivals = config.arrivals(dir.path(), Nanos(0), Nanos(250), rng())?;
        let times: Vec<u64> = arrivals.by_ref().map(|a| a.time.get()).collect();
        arrivals.take_error().map_or(Ok(times), Err)
    }

    #[test]
    fn replays_an_unchanged_trace_cut_at_the_run_end() {
        assert_eq!(replay_after(|_| {}).unwrap(), [100, 200]);
    }

    #[test]
    fn refuses_a_trace_that_changed_after_it_was_checked() {
        let same_size_and_time = |path: &Path| {
            let modified = std::fs::metadata(path).unwrap().modified().unwrap();
            std::fs::write(path, "time_ns\n100\n201\n300\n").unwrap();
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(modified).unwrap();
        };
        let appended = |path: &Path| {
            let mut file = std::fs::File::options().append(true).open(path).unwrap();
            std::io::Write::write_all(&mut file, b"1\n").unwrap();
        };
        let replaced = |path: &Path| {
            std::fs::remove_file(path).unwrap();
            std::fs::write(path, "time_ns\n100\n250\n300\n").unwrap();
        };
        let truncated = |path: &Path| std::fs::write(path, "time_ns\n").unwrap();
        for (name, change) in [
            ("same size and time", &same_size_and_time as &dyn Fn(&Path)),
            ("appended", &appended),
            ("replaced", &replaced),
            ("truncated", &truncated),
        ] {
            let err = replay_after(change).unwrap_err();
            assert!(
                err.contains("changed after burstsim checked it"),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn refuses_a_fifo_or_device_swapped_in_after_the_check_without_hanging() {
        let fifo = |path: &Path| {
            std::fs::remove_file(path).unwrap();
            let made = std::process::Command::new("mkfifo")
                .arg(path)
                .status()
                .unwrap();
            assert!(made.success());
        };
        let zero = |path: &Path| {
            std::fs::remove_file(path).unwrap();
            std::os::unix::fs::symlink("/dev/zero", path).unwrap();
        };
        for change in [&fifo as &dyn Fn(&Path), &zero] {
            let err = replay_after(change).unwrap_err();
            assert!(err.contains("not a regular file"), "{err}");
        }
    }
}
