//! Replayed timestamps: a CSV file with a header (a `time_ns` column of
//! integer nanoseconds, a `time_s` column of decimal seconds, or any column
//! with its `unit`), an nginx/Apache combined log, or JSON lines; optionally
//! with a field naming each request's client key. Whole-second timestamps of
//! a log are spread within their second.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use serde::Deserialize;

use rand::RngExt as _;

use super::logs::{self, Combined, Format};
use super::{Arrival, EmptyKeys, Key, Kind, Place, Rng, Timed};
use crate::error::{FieldError, field_error};
use crate::time::{NANOS_PER_SEC, Nanos};

mod arrivals;
mod checked;
mod fields;
mod files;
mod filter;
mod input;
mod json;
mod labelled;
mod layout;
mod lines;
mod pattern;
mod reading;
mod scan;
mod stored;
#[cfg(test)]
mod tests;

pub use self::arrivals::Arrivals;
pub(crate) use self::checked::Book;
use self::arrivals::*;
use self::checked::*;
use self::fields::*;
pub use self::fields::{Spread, Unit};
pub use self::input::MAX_ROW_BYTES;
use self::input::*;
use self::reading::*;
use self::files::Part;
pub use self::filter::Where;
pub use self::labelled::{Labelled, PACKED_ROWS};
use self::stored::*;
use self::lines::LineReader;
use self::filter::Row;
use self::layout::Layout;

/// `kind = "trace"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The file, relative to the scenario file; a pattern (`access.log*`)
    /// for every file it matches, oldest first as logrotate names them; `-`
    /// for standard input.
    #[serde(default)]
    pub path: PathBuf,
    /// Several files, replayed one after the other in this order (instead of `path`).
    pub paths: Option<Vec<PathBuf>>,
    /// How it is laid out: `"csv"` (default), `"combined"`, `"jsonl"`, or a
    /// vendor's log (`"alb"`, `"cloudfront"`, `"cloudflare"`, `"envoy"`,
    /// `"gcp"`, `"haproxy"`, `"kong"`, `"traefik"`).
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
    /// The field keying a row whose key field is absent (a text log's `-`,
    /// a JSON member missing or `null`): Kong's `limit_by = "header"`,
    /// `"consumer"` or `"credential"` counts such a request by its client's
    /// address (`get_identifier` falls back to the forwarded IP). Without
    /// it, such rows are one absent key, which each kind treats as its
    /// gateway does ([`crate::limiter::Limiter::treat_empty_keys`]).
    pub key_fallback: Option<String>,
    /// The field or column of each request's duration in decimal seconds
    /// (nginx's `$request_time`), taken from its time: nginx writes a line
    /// when the request ends, so its `$msec` is the end, and the start is
    /// where a limit decided it. The time must resolve below a second.
    pub elapsed_field: Option<String>,
    /// The column or field naming the Host each request names, for limits
    /// kept per Host (`per = "host"`); without it every request names the
    /// one site.
    #[serde(rename = "host_field")]
    pub host: Option<String>,
    /// Only the rows of one part of a mixed log: `where = { path_prefix =
    /// "/api/", method = "POST", host = "shop.example", status = "2xx" }`.
    #[serde(rename = "where")]
    pub filter: Option<Box<Where>>,
    /// The statuses with which the log's own limiter turned a request away
    /// (default `[429]`), to compare its answers with the models'.
    pub rejected_status: Option<Vec<u16>>,
    /// Also decide its whole seconds' requests packed against the seconds'
    /// edges, for the most a placement the log allows lets through (default:
    /// when it holds at most 1,000,000 rows).
    pub packed: Option<bool>,
    /// Shift the trace so its earliest timestamp is the source's start
    /// (default: true for logs and date-times, false for CSV numbers).
    pub rebase: Option<bool>,
    /// Whole-second timestamps spread uniformly within their second, seeded
    /// (`"uniform"`, the default for logs and date-times), or kept on it (`"none"`).
    pub spread: Option<Spread>,
    /// Each row's own verdict in place of its key: client 1 when the log
    /// let it through, 2 when its limiter turned it away, 0 when it does not
    /// say (set by the decision files, never by a scenario).
    #[serde(skip)]
    pub verdicts: bool,
    /// Whether its keys are replayed numbered 0, 1, 2, … in the order the
    /// check first saw them (set when it is its workload's only source, or
    /// when all its workload's sources are traces naming keys, which share
    /// one numbering: so no other source's clients share the numbers).
    #[serde(skip)]
    pub(crate) interned: bool,
    /// The numbering it shares with the other sources of its workload,
    /// when they are all traces naming keys (see [`Book`]); `None` when it
    /// numbers its own keys, or hashes them.
    #[serde(skip)]
    pub(crate) book: Option<Arc<Book>>,
    /// Read the file again for each replay instead of keeping the checked
    /// rows, as a trace of more than [`CHECKED_BYTES`] of them is.
    #[serde(skip)]
    reread: bool,
    /// The instant its rebasing moves to the source's start, when its
    /// workload's other rebased traces share it (the earliest row of any of
    /// them, so that several servers' logs keep their places in time);
    /// `None`: its own earliest row.
    #[serde(skip)]
    pub(crate) origin: Option<u64>,
    /// With a shared origin: the labelled seconds its workload's traces
    /// may still keep counts of ([`Counted`]).
    #[serde(skip)]
    pub(crate) counted: Option<Arc<Counted>>,
    /// One of its workload's several sources, which are run packed together
    /// or not at all: the workload, not the trace, says what to set.
    #[serde(skip)]
    pub(crate) several: bool,
    /// The first pass's findings, shared by every clone of this configuration
    /// so that a run reads the file only once more.
    #[serde(skip)]
    scanned: Arc<OnceLock<Scan>>,
}

/// Most rows of one second held at once to spread them: a whole-second
/// trace with more in a second of the run is refused by its check.
const MAX_SPREAD_ROWS: usize = 10_000_000;

/// Bytes a row of a spread second takes while held: its time and key, and
/// its draw and place (see [`arrivals::Spreader`]).
const SPREAD_ROW_BYTES: u64 = 32;

/// What a first pass over the file found.
#[derive(Clone, Debug)]
struct Scan {
    /// Whether every timestamp is a whole second (so spreading applies).
    whole_seconds: bool,
    /// Rows the log says its own limiter turned away, when it logs statuses.
    turned_away: Option<u64>,
    /// For a sorted trace of whole seconds: the requests of its busiest
    /// labelled second, and of its busiest two adjacent ones.
    labelled: Option<Labelled>,
    /// Each labelled second's rows inside the run, in order, for a trace
    /// sharing its origin with its workload's others.
    seconds: Option<Arc<Vec<(u64, u64)>>>,
    /// Whether its findings are a part's, which says what its workload's
    /// log says as a whole ([`Config::preset`]).
    preset: bool,
    /// When its seconds are spread, the most rows spreading holds at once:
    /// those of its busiest second some of whose instants may fall in the
    /// run (0 when not spread).
    spread_rows: u64,
    /// Distinct keys in the file (1 without a key column); when its
    /// workload's sources share their numbering, those no source before
    /// it named.
    keys: u64,
    earliest: u64,
    sorted: bool,
    rows: u64,
    /// Its files in replay order, as checked.
    parts: Vec<Part>,
    /// The text of the first [`NAMED_KEYS`] keys, by key: to name a client
    /// in the results as the file does.
    names: std::sync::Arc<std::collections::HashMap<Key, String, crate::random::MixState>>,
    /// Its keys numbered in the order first seen.
    numbered: Arc<Numbered>,
    /// The clients (as its replays name them: numbered or hashed) of its
    /// rows whose key field names nothing, if any.
    empty: EmptyKeys,
    /// Its rows as read, for the replays (unless too many).
    checked: Option<Arc<Checked>>,
}

/// The most keys of a trace whose text is kept to name a client in the
/// results: the first 10,000 seen, 64 characters each (about 1.5 MB in all,
/// whatever the trace holds). A later key is named by its hash.
pub(crate) const NAMED_KEYS: usize = 10_000;

/// The most distinct keys a trace may name: state is kept per key.
pub const MAX_KEYS: u64 = 10_000_000;

/// The most labelled seconds whose counts a workload's several
/// whole-second traces keep together, to find their busiest second
/// together ([`Config::labelled_together`]): 16 bytes each, 64 MiB in all,
/// 48 days of busy seconds. Beyond, the check warns and their seconds'
/// interval is not given.
pub const MAX_COUNTED_SECONDS: u64 = 1 << 22;

/// The labelled seconds a workload's traces sharing an origin may still
/// keep counts of, taken as each trace's check meets them.
#[derive(Debug)]
pub(crate) struct Counted {
    left: std::sync::atomic::AtomicU64,
    /// Whether one trace has met the limit (it warns; the others need not).
    over: std::sync::atomic::AtomicBool,
}

impl Counted {
    pub(crate) fn new(seconds: u64) -> Counted {
        Counted {
            left: seconds.into(),
            over: false.into(),
        }
    }

    /// Takes `seconds` of what is left: whether there were that many.
    fn take(&self, seconds: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.left
            .fetch_update(Relaxed, Relaxed, |left| left.checked_sub(seconds))
            .is_ok()
    }

    /// Whether this is the first trace to meet the limit.
    fn first_over(&self) -> bool {
        !self.over.swap(true, std::sync::atomic::Ordering::Relaxed)
    }
}

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
    pub(crate) fn rebased(&self) -> bool {
        self.rebase.unwrap_or_else(|| self.is_log())
    }

    /// Where, within a second, its whole seconds start in a run whose source
    /// starts at `start`: a rebased trace's first second starts there.
    pub fn second_origin(&self, start: Nanos) -> u64 {
        if self.rebased() {
            start.get() % NANOS_PER_SEC
        } else {
            0
        }
    }

    /// Whether whole-second timestamps may be spread: then each replication
    /// draws its own instants.
    pub fn may_spread(&self) -> bool {
        match self.spread {
            Some(spread) => spread == Spread::Uniform,
            None => self.is_log(),
        }
    }

    /// Checks the file, counts rows that fall outside `[start, end)`, and
    /// keeps what it learnt for the run.
    pub fn check(
        &self,
        base_dir: &Path,
        start: Nanos,
        end: Nanos,
    ) -> Result<Vec<String>, FieldError> {
        if self.scanned.get().is_some() {
            // Already known (from a part: see `preset`).
            return Ok(Vec::new());
        }
        let (scan, warnings) = self.scan(base_dir, start, end)?;
        let _ = self.scanned.set(scan);
        Ok(warnings)
    }

    /// The time of its first row as written, read alone before the check
    /// (the earliest, in a sorted trace): `None` for standard input, which
    /// is read once, and where the first rows cannot say (the check will).
    pub(crate) fn first_time(&self, base_dir: &Path) -> Option<u64> {
        /// Keeps the first row's time, and stops the reading there.
        struct First(Option<u64>);
        impl ReadInto for First {
            fn row(&mut self, (time, ..): ReadRow, _: impl FnOnce() -> Option<String>) -> Result<(), FieldError> {
                self.0 = Some(time);
                Err(FieldError::new("read no further"))
            }
            fn file(&mut self, _: FileRead) -> Result<(), FieldError> {
                Ok(())
            }
        }
        if self.reads_standard_input(base_dir) {
            return None;
        }
        let files = self.files(base_dir).ok()?;
        let mut first = First(None);
        let _ = self.read_files(&files, &mut first);
        first.0
    }

    /// Where the worst rolling second of demand of a workload of several
    /// traces lies (see [`Labelled`]): their labelled seconds counted
    /// together, from the origin they share, when all are stamped in whole
    /// seconds; a part's, which says it of the whole workload. Packed as
    /// one trace is: unless one says `packed = false`, when one says
    /// `packed = true` or all hold at most [`PACKED_ROWS`] rows together.
    pub(crate) fn labelled_together<'a>(traces: impl IntoIterator<Item = &'a Config>) -> Option<Labelled> {
        let traces: Vec<&Config> = traces.into_iter().collect();
        let scans: Vec<&Scan> = traces.iter().map(|trace| trace.scanned.get()).collect::<Option<_>>()?;
        if let Some(part) = scans.iter().find(|scan| scan.preset) {
            return part.labelled;
        }
        let said = |packed| traces.iter().any(|trace| trace.packed == Some(packed));
        let rows: u64 = scans.iter().map(|scan| scan.rows).sum();
        let packed = !said(false) && (said(true) || rows <= PACKED_ROWS);
        let mut all: Vec<(u64, u64)> = Vec::new();
        for scan in &scans {
            all.extend(scan.seconds.as_deref()?.iter().copied());
        }
        all.sort_by_key(|&(second, _)| second);
        all.dedup_by(|(second, count), (kept, sum)| {
            let same = second == kept;
            if same {
                *sum += *count;
            }
            same
        });
        let mut labelled = Labelled::of_counts(all);
        labelled.packed = packed;
        Some(labelled)
    }

    /// Rows a workload of several traces says its own limiter turned away:
    /// all of theirs, when each logs statuses; a part's, which says it of
    /// the whole workload.
    pub(crate) fn turned_away_together<'a>(traces: impl IntoIterator<Item = &'a Config>) -> Option<u64> {
        let scans: Vec<&Scan> = traces.into_iter().map(|trace| trace.scanned.get()).collect::<Option<_>>()?;
        if let Some(part) = scans.iter().find(|scan| scan.preset) {
            return part.turned_away;
        }
        scans.iter().map(|scan| scan.turned_away).sum()
    }

    /// Whether one of its files is standard input.
    pub(crate) fn reads_standard_input(&self, base_dir: &Path) -> bool {
        self.files(base_dir)
            .is_ok_and(|files| files.iter().any(|file| file == Path::new("-")))
    }

    /// Whether it is rebased, and its earliest row as written, once checked.
    pub(crate) fn rebased_earliest(&self) -> Option<u64> {
        self.scanned.get().filter(|_| self.rebased()).map(|scan| scan.earliest)
    }

    /// Takes what a part of a partitioning says of this trace in place of
    /// reading it: `rows` arrivals in time order, and its clients as the
    /// whole run names them ([`crate::partition`]). The file is not read:
    /// the part's arrivals replace it, and the log's own figures (its
    /// verdicts, its labelled seconds) are the whole log's: left out, or
    /// taken from `log` for a merge of every part.
    pub fn preset(
        &self,
        rows: u64,
        clients: &[crate::partition::KeyFact],
        log: Option<&crate::partition::LogFacts>,
    ) -> Result<(), FieldError> {
        let mut names = std::collections::HashMap::default();
        let mut hashes = Vec::new();
        for fact in clients {
            if let Some(name) = &fact.name {
                names.insert(Key::client(fact.value), name.clone());
            }
            if self.interned {
                let number = usize::try_from(fact.id)
                    .ok()
                    .filter(|&n| (n as u64) < MAX_KEYS)
                    .ok_or_else(|| {
                        field_error!(
                            "key",
                            "the part numbers a client {}, past the {MAX_KEYS} keys a trace may name",
                            fact.id
                        )
                    })?;
                if hashes.len() <= number {
                    hashes.resize(number + 1, 0);
                }
                hashes[number] = fact.value;
            }
        }
        let _ = self.scanned.set(Scan {
            whole_seconds: log.is_some_and(|log| log.labelled.is_some()),
            turned_away: log.and_then(|log| log.turned_away),
            seconds: None,
            preset: true,
            labelled: log.and_then(|log| {
                let [busiest, busiest_pair] = log.labelled?;
                let mut labelled = Labelled::default();
                (labelled.busiest, labelled.busiest_pair) = (busiest, busiest_pair);
                labelled.packed = log.packed;
                Some(labelled)
            }),
            // The whole log's busiest second: what a part may hold at once.
            spread_rows: log.and_then(|log| log.labelled).map_or(0, |[busiest, _]| busiest),
            keys: log.map_or(clients.len() as u64, |log| log.keys).max(1),
            earliest: 0,
            sorted: true,
            rows,
            parts: Vec::new(),
            names: Arc::new(names),
            numbered: Arc::new(Numbered {
                numbers: Default::default(),
                hashes,
            }),
            empty: self.empty_clients(|hash| {
                clients.iter().find(|fact| fact.value == hash).map(|fact| fact.id)
            }),
            checked: None,
        });
        Ok(())
    }

    /// The hashes of its key field's texts that name no key: absent
    /// ([`Format::absent_key`]), if its format writes one, and blank.
    fn empty_hashes(&self) -> (Option<u64>, u64) {
        let hash = |text: &[u8]| Key::named(text).client;
        (self.format.absent_key().map(hash), hash(logs::BLANK_KEY))
    }

    /// The clients its replays give the keys that name nothing, as
    /// `client` finds each hash's (if seen); none without a key field, or
    /// where each row's verdict stands in for its client.
    fn empty_clients(&self, client: impl Fn(u64) -> Option<u64>) -> EmptyKeys {
        if self.key.is_none() || self.verdicts {
            return EmptyKeys::default();
        }
        let (absent, blank) = self.empty_hashes();
        EmptyKeys {
            absent: absent.and_then(&client).into_iter().collect(),
            blank: client(blank).into_iter().collect(),
        }
    }

    /// The clients of its rows whose key field names nothing, as its
    /// replays name them; none before it is checked, or without a key field.
    pub fn empty_keys(&self) -> &EmptyKeys {
        self.scanned.get().map_or(&super::NO_EMPTY_KEYS, |scan| &scan.empty)
    }

    /// How many distinct keys the file names (1 without a key column); read
    /// once, then remembered.
    pub fn key_count(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<u64, FieldError> {
        Ok(self.scanned(base_dir, start, end)?.keys)
    }

    /// How many rows the file holds (read once, then remembered).
    pub fn rows(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<u64, FieldError> {
        Ok(self.scanned(base_dir, start, end)?.rows)
    }

    /// Bytes held to sort the rows in memory: when they are out of order,
    /// 16 a row and half as much again for the stable sort's scratch; when
    /// whole seconds are spread, 32 a row of the busiest second of the run.
    pub fn sorting_bytes(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<u64, FieldError> {
        let scan = self.scanned(base_dir, start, end)?;
        let sorting = if scan.sorted {
            0
        } else {
            scan.rows.saturating_mul(SORTED_ROW_BYTES)
        };
        // A spread trace holds its busiest second's rows while drawing them.
        let spreading = scan.spread_rows.saturating_mul(SPREAD_ROW_BYTES);
        Ok(sorting.saturating_add(spreading))
    }

    /// Its keys' numbering: its workload's, when its sources share one,
    /// else its own.
    fn numbering<'a>(&'a self, scan: &'a Scan) -> &'a Arc<Numbered> {
        self.book.as_ref().and_then(|book| book.done()).unwrap_or(&scan.numbered)
    }

    /// The first pass's findings: remembered, or read now.
    fn scanned(&self, base_dir: &Path, start: Nanos, end: Nanos) -> Result<Scan, FieldError> {
        if let Some(scan) = self.scanned.get() {
            return Ok(scan.clone());
        }
        let scan = self.scan(base_dir, start, end)?.0;
        let _ = self.scanned.set(scan.clone());
        Ok(scan)
    }

    /// The trace's arrivals in `[start, end)`, streamed from disk when the file
    /// is sorted, and otherwise sorted in memory; whole seconds spread with `rng`.
    pub fn replay(
        &self,
        base_dir: &Path,
        start: Nanos,
        end: Nanos,
        rng: Rng,
    ) -> Result<Arrivals, FieldError> {
        let scan = self.scanned(base_dir, start, end)?;
        let offset = if self.rebased() {
            i128::from(start.get()) - i128::from(self.origin.unwrap_or(scan.earliest))
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
            arrivals.spread = Some(Spreader::new(rng));
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
    ) -> Result<Arrivals, FieldError> {
        let _ = base_dir;
        if let Some(checked) = &scan.checked {
            return Ok(Arrivals {
                rows: Rows::Checked(Box::new(CheckedRows::new(checked.clone(), self.verdicts))),
                start: start.get(),
                end: end.get(),
                offset: 0,
                spread: None,
                error: None,
            });
        }
        let mut rest: VecDeque<Part> = scan.parts.iter().cloned().collect();
        let first = rest.pop_front().expect("a checked trace has a file");
        let (input, path) = self.reopen(&first)?;
        Ok(Arrivals {
            rows: Rows::Stream {
                checksum: first.checksum,
                input: Box::new(input),
                layout: Box::new(first.layout),
                path,
                previous: 0,
                sorted: scan.sorted,
                rest,
                config: Box::new(self.clone()),
                numbered: (self.interned && self.key.is_some() && !self.verdicts)
                    .then(|| self.numbering(scan).clone()),
            },
            start: start.get(),
            end: end.get(),
            offset: 0,
            spread: None,
            error: None,
        })
    }

}

impl Kind for Config {
    const NAME: &'static str = "trace";
    type Item = Arrival;
    type Arrivals = Arrivals;

    /// The checked rows of a trace whose whole seconds are not spread are
    /// decoded straight into the chunk (see [`CheckedRows::fill_arrivals`]),
    /// a spread trace's a second at a time (see [`Arrivals::fill_spread`]);
    /// any other trace row by row.
    fn refill<T: Timed>(arrivals: &mut Arrivals, out: &mut Vec<T>, count: usize) {
        let Arrivals {
            rows: Rows::Checked(rows),
            spread: None,
            offset,
            start,
            end,
            error,
        } = arrivals
        else {
            if arrivals.spread.is_some() {
                return arrivals.fill_spread(out, count);
            }
            return super::refill(out, arrivals.take(count));
        };
        if let Err(err) = rows.fill_arrivals(out, count, *offset, [*start, *end]) {
            *error = Some(format!("reading the checked rows again: {err}"));
        }
    }

    fn validate(&self, place: Place) -> Result<Vec<String>, FieldError> {
        if place.clients.is_some() {
            return Err(field_error!(
                "clients",
                "a trace names its clients in a key column (`key = \"client\"`); drop `clients`"
            ));
        }
        if let Some(conditions) = &self.filter {
            conditions.check()?;
        }
        self.check(place.base_dir, place.start, place.end)
    }

    /// A log's whole-second timestamps are spread by a draw.
    fn is_stochastic(&self) -> bool {
        self.may_spread()
    }

    fn describe(&self) -> String {
        match &self.paths {
            Some(paths) => format!(
                "trace {}",
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!("trace {}", self.path.display()),
        }
    }

    fn estimated_arrivals(&self, place: Place) -> Result<u128, FieldError> {
        Ok(u128::from(self.rows(place.base_dir, place.start, place.end)?))
    }

    fn arrivals(&self, place: Place, rng: Rng, _: Rng) -> Result<Arrivals, FieldError> {
        self.replay(place.base_dir, place.start, place.end, rng)
    }

    fn names_keys(&self) -> bool {
        self.key.is_some()
    }

    fn names_hosts(&self) -> bool {
        self.host.is_some()
    }

    fn keys(&self, place: Place) -> Result<u64, FieldError> {
        self.key_count(place.base_dir, place.start, place.end)
    }

    fn sort_bytes(&self, place: Place) -> Result<u64, FieldError> {
        self.sorting_bytes(place.base_dir, place.start, place.end)
    }

    fn take_error(arrivals: &mut Arrivals) -> Option<String> {
        arrivals.take_error()
    }

    fn turned_away_in_log(&self) -> Option<u64> {
        self.scanned.get()?.turned_away
    }

    fn labelled_seconds(&self) -> Option<Labelled> {
        self.scanned.get()?.labelled
    }

    /// As the file writes it, for the keys the check read first.
    fn key_name(&self, key: Key) -> Option<String> {
        let scan = self.scanned.get()?;
        let key = Key::client(self.key_value(key)?);
        scan.names.get(&key).cloned()
    }

    /// A numbered key's hash.
    fn key_value(&self, key: Key) -> Option<u64> {
        if !self.interned {
            return Some(key.client);
        }
        let scan = self.scanned.get()?;
        let numbered = self.numbering(scan);
        numbered.hashes.get(usize::try_from(key.client).ok()?).copied()
    }
}
