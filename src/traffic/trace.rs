//! Replayed timestamps from a CSV file with a header: a `time_ns` column of
//! integer nanoseconds or a `time_s` column of decimal seconds, and
//! optionally a column naming each request's client key.

use std::fs::File;
use std::hash::{DefaultHasher, Hasher};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use serde::Deserialize;

use super::{Arrival, Key};
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
    /// The column naming each request's client (an API key, a user, an
    /// address: any text, hashed to a key); without it every request is the
    /// default key's.
    pub key: Option<String>,
    /// Shift the trace so its earliest timestamp is the source's start, for
    /// logs with absolute (epoch) timestamps (default false).
    #[serde(default)]
    pub rebase: bool,
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
}

/// What a first pass over the file found.
#[derive(Clone, Copy, Debug)]
struct Scan {
    column: usize,
    unit: Unit,
    /// The key column's index, when the trace has one.
    key: Option<usize>,
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

/// The opened file, read no further than its length when opened, hashing
/// every byte it hands out.
struct Hashing {
    file: std::io::Take<File>,
    hasher: DefaultHasher,
}

impl Read for Hashing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.hasher.write(&buf[..n]);
        Ok(n)
    }
}

type Reader = csv::Reader<BufReader<Hashing>>;

/// Reads what is left of the file and returns the hash of all of it.
fn drain(reader: &mut Reader) -> std::io::Result<u64> {
    std::io::copy(reader.get_mut(), &mut std::io::sink())?;
    Ok(reader.get_ref().get_ref().hasher.finish())
}

fn changed(path: &Path) -> String {
    format!(
        "{}: the file changed after burstsim checked it; nothing was written, run again once it is stable",
        path.display()
    )
}

/// The most distinct keys a trace may name: state is kept per key.
pub const MAX_KEYS: u64 = 10_000_000;

/// The most rows of an unsorted trace sorted in memory (1 GiB of timestamps
/// and keys).
const MAX_UNSORTED_ROWS: u64 = 1 << 26;

impl Config {
    /// Opens the file once as a regular file and, when it was checked
    /// before, insists it is the same one.
    fn open(
        &self,
        base_dir: &Path,
        expected: Option<Identity>,
    ) -> Result<(Reader, Identity), String> {
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
        };
        let reader = csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(BufReader::with_capacity(1 << 16, hashing));
        Ok((reader, identity))
    }

    /// The time column, its unit and the key column, from the header.
    fn locate(
        &self,
        base_dir: &Path,
        reader: &mut Reader,
    ) -> Result<(usize, Unit, Option<usize>), String> {
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
            (None, name) => {
                return Err(format!(
                    "unit: the unit of column {name:?} is unknown; set unit = \"ns\" or \"s\""
                ));
            }
        };
        Ok((index, unit, key))
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
        let (mut reader, identity) = self.open(base_dir, None)?;
        let (column, unit, key) = self.locate(base_dir, &mut reader)?;
        let shown = base_dir.join(&self.path);
        let (mut rows, mut unsorted, mut earliest, mut previous) = (0u64, 0u64, u64::MAX, 0u64);
        let (mut first, mut outside) = (None, 0u64);
        let mut record = csv::ByteRecord::new();
        let mut keys: std::collections::HashSet<Key, crate::random::MixState> =
            std::collections::HashSet::default();
        while read(&mut reader, &mut record, &shown)? {
            let time = parse(&record, column, unit, &shown)?;
            if let Some(key) = key
                && keys.insert(parse_key(&record, key, &shown)?)
                && keys.len() as u64 > MAX_KEYS
            {
                return Err(format!(
                    "{}: more than {MAX_KEYS} distinct keys in column {:?}; state is kept per key, and that many is refused",
                    shown.display(),
                    self.key.as_deref().unwrap_or_default()
                ));
            }
            unsorted += u64::from(time < previous);
            earliest = earliest.min(time);
            previous = time;
            rows += 1;
            // While sorted, the first row is the earliest, so the rebased time is known now.
            let first = *first.get_or_insert(time);
            let shifted = if self.rebase {
                (time - first.min(time)).saturating_add(start.get())
            } else {
                time
            };
            outside += u64::from(!(start.get()..end.get()).contains(&shifted));
        }
        let checksum = drain(&mut reader).map_err(|err| format!("{}: {err}", shown.display()))?;
        let now = reader.get_ref().get_ref().file.get_ref().metadata();
        if now.map(|meta| Identity::of(&meta)).ok() != Some(identity) {
            return Err(changed(&shown));
        }
        let scan = Scan {
            column,
            unit,
            key,
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
            let offset = if self.rebase {
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
                "{}: the trace has no rows, so there is nothing to replay; give it one timestamp per row under its header",
                shown.display()
            ));
        }
        if outside == rows {
            let hint = if self.rebase {
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
            let hint = if self.rebase {
                ""
            } else {
                "; if it holds absolute timestamps, set rebase = true"
            };
            warnings.push(format!(
                "{}: {outside} rows fall outside [{start}, {end}) and are left out{hint}",
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

    /// The first pass's findings: remembered, or read now.
    fn scanned(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<Scan, String> {
        if let Some(scan) = self.scanned.get() {
            return Ok(*scan);
        }
        let scan = self.scan(base_dir, start, end)?.0;
        let _ = self.scanned.set(scan);
        Ok(scan)
    }

    /// The trace's arrivals in `[start, end)`, streamed from disk when the file
    /// is sorted, and otherwise sorted in memory.
    pub fn arrivals(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<Arrivals, String> {
        let scan = self.scanned(base_dir, start, end)?;
        let offset = if self.rebase {
            i128::from(start.get()) - i128::from(scan.earliest)
        } else {
            0
        };
        let mut arrivals = self.stream(base_dir, &scan, Nanos::ZERO, Nanos(u64::MAX))?;
        if !scan.sorted {
            let mut rows: Vec<(u64, Key)> = arrivals.raw().collect();
            // Stable: rows at the same instant keep the file's order.
            rows.sort_by_key(|&(time, _)| time);
            arrivals.rows = Rows::Sorted(rows.into_iter());
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
        let (mut reader, _) = self.open(base_dir, Some(scan.identity))?;
        self.locate(base_dir, &mut reader)?;
        Ok(Arrivals {
            rows: Rows::Stream {
                checksum: scan.checksum,
                reader: Box::new(reader),
                record: csv::ByteRecord::new(),
                column: scan.column,
                unit: scan.unit,
                key: scan.key,
                path: base_dir.join(&self.path),
                previous: 0,
                sorted: scan.sorted,
            },
            start: start.get(),
            end: end.get(),
            offset: 0,
            error: None,
        })
    }
}

fn read(reader: &mut Reader, record: &mut csv::ByteRecord, path: &Path) -> Result<bool, String> {
    reader
        .read_byte_record(record)
        .map_err(|err| format!("{}: {err}", path.display()))
}

/// Fails unless the bytes read, to the end, are those checked at first.
fn verify(reader: &mut Reader, checksum: u64, path: &Path) -> Result<(), String> {
    match drain(reader) {
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
        Unit::Seconds => std::str::from_utf8(field)
            .ok()
            .and_then(|text| parse_seconds(text.trim())),
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
        let expected = match unit {
            Unit::Nanos => "a whole number of nanoseconds",
            Unit::Seconds => "a non-negative number of seconds",
        };
        format!(
            "{}:{line}: {:?} is not {expected}",
            path.display(),
            crate::input::quote_at_most(&String::from_utf8_lossy(field), 64)
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
        /// Boxed: the reader's buffers dwarf the other variant.
        reader: Box<Reader>,
        /// The hash of the file's bytes when it was checked.
        checksum: u64,
        /// Reused for every row, so streaming allocates nothing per row.
        record: csv::ByteRecord,
        column: usize,
        unit: Unit,
        key: Option<usize>,
        path: PathBuf,
        /// The last timestamp read, to catch a file that changed after it was checked.
        previous: u64,
        /// Whether the first pass found the file sorted.
        sorted: bool,
    },
    Sorted(std::vec::IntoIter<(u64, Key)>),
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
    /// Arrivals already in time order (for tests and callers that hold them).
    pub fn from_sorted(arrivals: Vec<Arrival>) -> Arrivals {
        let rows: Vec<(u64, Key)> = arrivals.iter().map(|a| (a.time.get(), a.key)).collect();
        Arrivals {
            rows: Rows::Sorted(rows.into_iter()),
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

    /// The next timestamp as written, before shifting and filtering, and its key.
    #[inline]
    fn next_raw(&mut self) -> Option<(u64, Key)> {
        match &mut self.rows {
            Rows::Sorted(times) => times.next(),
            Rows::Stream {
                reader,
                checksum,
                record,
                column,
                unit,
                key,
                path,
                previous,
                sorted,
            } => {
                let row = read(reader, record, path).and_then(|more| {
                    if !more {
                        verify(reader, *checksum, path)?;
                    }
                    more.then(|| {
                        let time = parse(record, *column, *unit, path)?;
                        let key = match *key {
                            Some(column) => parse_key(record, column, path)?,
                            None => Key::DEFAULT,
                        };
                        Ok((time, key))
                    })
                    .transpose()
                });
                let row = row.and_then(|row| match row {
                    Some((time, _)) if *sorted && time < *previous => {
                        let line = record.position().map_or(0, csv::Position::line);
                        Err(format!("{}:{line}: the row is earlier than the one before it; the file changed while burstsim read it", path.display()))
                    }
                    Some((time, key)) => {
                        *previous = time;
                        Ok(Some((time, key)))
                    }
                    None => Ok(None),
                });
                row.unwrap_or_else(|err| {
                    self.error = Some(err);
                    None
                })
            }
        }
    }

    /// Ends a stream cut short at the run's end: the rest of the file is
    /// read too, so the whole of it is checked against the first pass.
    fn finish_early(&mut self) {
        if let Rows::Stream {
            reader,
            checksum,
            path,
            ..
        } = &mut self.rows
            && let Err(err) = verify(reader, *checksum, path)
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
            let (raw, key) = self.next_raw()?;
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

    fn trace(contents: &str, extra: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.csv"), contents).unwrap();
        let config: Config = toml::from_str(&format!("path = \"t.csv\"\n{extra}")).unwrap();
        (dir, config)
    }

    fn times(contents: &str, extra: &str) -> Result<Vec<u64>, String> {
        let (dir, config) = trace(contents, extra);
        let arrivals = config.arrivals(dir.path(), Nanos(0), Nanos(u64::MAX))?;
        Ok(arrivals.map(|a| a.time.get()).collect())
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
        let arrivals = config.arrivals(dir.path(), Nanos(0), Nanos(u64::MAX))?;
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
        let mut arrivals = config.arrivals(dir.path(), Nanos(0), Nanos(250))?;
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
