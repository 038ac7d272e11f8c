//! Synthetic and replayed traffic: each source kind is an iterator of
//! arrivals — a time and a client key — in non-decreasing time order; a
//! workload merges its sources by time.
//!
//! A kind is its module plus one line in `sources!` below: the module's
//! `Config` implements [`Kind`], and from the list come the module
//! declarations, the configuration and running-stream enums, [`KINDS`],
//! reading a kind from a table, and the dispatch of every [`Kind`] method.

mod arrival;
pub(crate) mod bytes;
pub mod clients;
pub mod kind;
pub mod logs;
pub mod slots;
pub mod vendor;

pub use arrival::{Arrival, Client, EmptyKeys, Key, NO_EMPTY_KEYS, Timed};

use std::path::Path;

use serde::Deserialize;

pub use self::kind::{Kind, Place};
use crate::config::{KindTable, parse_table};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// A stream the simulator takes in chunks of `T`.
pub trait Chunks<T: Timed>: Send {
    /// Replaces what `out` holds with the next `count` items, fewer only at
    /// the end.
    fn refill(&mut self, out: &mut Vec<T>, count: usize);
}

pub use crate::random::{Rng, stream};

/// The most requests in one burst (or one adversary pattern), which is held in memory.
pub const MAX_BURST: u64 = 50_000_000;

/// The part of the run a source is active in, `[start, end)`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Span {
    /// First instant the source may produce (default: the run's start).
    pub start: Option<Nanos>,
    /// End of the source's activity, exclusive (default: the run's end).
    pub end: Option<Nanos>,
}

/// One traffic source as written in a scenario file.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// Where in the run it is active.
    pub span: Span,
    /// The clients its requests come from (default: one, key 0).
    pub clients: Option<clients::Clients>,
    /// What it produces.
    pub kind: SourceKind,
}

/// Calls `$body` with `$inner` bound to the kind's configuration and `$K`
/// to its type, for whichever kind `$self` holds.
macro_rules! each_kind {
    ($self:expr, ($($variant:ident = $module:ident)+), $inner:ident: $K:ident => $body:expr) => {
        match $self {
            $(SourceKind::$variant($inner) => {
                #[allow(unused)]
                type $K = $module::Config;
                $body
            })+
        }
    };
}

/// Declares every traffic source kind once: `Variant = module`, where
/// `src/traffic/module.rs` holds a `Config` implementing [`Kind`].
macro_rules! sources {
    ($($variant:ident = $module:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// The source kinds accepted in `kind = "…"`.
        pub const KINDS: &[&str] = &[$(<$module::Config as Kind>::NAME),+];

        /// What a source produces, as written in a scenario file.
        #[derive(Clone, Debug)]
        pub enum SourceKind {
            $(
                #[doc = concat!("`", stringify!($module), "`.")]
                $variant($module::Config),
            )+
        }

        /// A running source: an iterator of arrivals (an enum rather than a
        /// `Box<dyn Iterator>`, so each kind's loop is compiled for it).
        pub enum Source {
            $(
                #[doc = concat!("`", stringify!($module), "`.")]
                $variant(<$module::Config as Kind>::Arrivals),
            )+
            /// A source whose arrivals are spread over its clients.
            Keyed(Box<Source>, clients::Draw),
            /// A part of a partitioning, replayed.
            Part(Box<crate::partition::PartReader>),
        }

        impl SourceKind {
            /// The kind named in `table`, read from its fields.
            fn from_table(table: KindTable) -> Result<SourceKind, FieldError> {
                $(
                    if table.kind == <$module::Config as Kind>::NAME {
                        return Ok(SourceKind::$variant(table.parse()?));
                    }
                )+
                unreachable!("KindTable accepted an unlisted kind {}", table.kind)
            }

            /// Its stream for one run.
            fn arrivals(&self, place: Place, rng: Rng, keys: Rng) -> Result<Source, FieldError> {
                Ok(match self {
                    $(SourceKind::$variant(config) => Source::$variant(config.arrivals(place, rng, keys)?),)+
                })
            }
        }

        impl Source {
            /// Replaces what `out` holds with its next `count` arrivals, fewer
            /// only at its end: one tight loop per kind, for the simulator's chunks.
            fn refill<T: Timed>(&mut self, out: &mut Vec<T>, count: usize) {
                match self {
                    $(Source::$variant(source) => {
                        <$module::Config as Kind>::refill(source, out, count)
                    })+
                    Source::Part(source) => refill(out, source.take(count)),
                    Source::Keyed(source, clients) => {
                        source.refill(out, count);
                        for arrival in out.iter_mut() {
                            *arrival = arrival.with_key(clients.next_key());
                        }
                    }
                }
            }

            /// The error that cut the stream short, if any.
            fn take_error(&mut self) -> Option<String> {
                match self {
                    $(Source::$variant(source) => <$module::Config as Kind>::take_error(source),)+
                    Source::Keyed(source, _) => source.take_error(),
                    Source::Part(source) => source.take_error(),
                }
            }
        }

        impl Iterator for Source {
            type Item = Arrival;

            #[inline]
            fn next(&mut self) -> Option<Arrival> {
                match self {
                    $(Source::$variant(source) => source.next().map(Timed::arrival),)+
                    Source::Part(source) => source.next(),
                    Source::Keyed(source, clients) => source.next().map(|arrival| Arrival {
                        key: clients.next_key(),
                        ..arrival
                    }),
                }
            }
        }

        /// [`each_kind!`] over this list.
        macro_rules! with_kind {
            ($self_:expr, $inner_:ident => $body_:expr) => {
                each_kind!($self_, ($($variant = $module)+), $inner_: K => $body_)
            };
        }
    };
}

sources! {
    Uniform = uniform,
    Poisson = poisson,
    Boundary = boundary,
    Trace = trace,
}

impl SourceConfig {
    /// For a trace: where, within a second, its whole seconds start in the
    /// run (see [`trace::Config::second_origin`]); `None` for other sources.
    pub fn second_origin(&self, duration: Nanos) -> Option<u64> {
        match &self.kind {
            SourceKind::Trace(trace) => Some(trace.second_origin(self.window(duration).ok()?.0)),
            _ => None,
        }
    }

    /// A trace streaming each row's own verdict in place of its key (see
    /// [`trace::Config::verdicts`]); `None` for other sources.
    pub fn verdicts(&self) -> Option<SourceConfig> {
        match &self.kind {
            SourceKind::Trace(trace) => {
                let mut trace = trace.clone();
                trace.verdicts = true;
                Some(SourceConfig {
                    kind: SourceKind::Trace(trace),
                    ..self.clone()
                })
            }
            _ => None,
        }
    }

    /// Reads a source from a TOML table holding `kind`, its fields,
    /// `clients`, `start` and `end`.
    pub fn from_table(table: toml::Table) -> Result<SourceConfig, FieldError> {
        let mut table = KindTable::new(table, KINDS)?;
        let span = parse_table(table.take(&["start", "end"]))?;
        let clients = match table.take(&["clients"]).remove("clients") {
            None => None,
            Some(toml::Value::Table(clients)) => Some(
                parse_table::<clients::Clients>(clients).map_err(|err| err.within("clients"))?,
            ),
            Some(other) => {
                return Err(field_error!(
                    "clients",
                    "expected a table like {{ count = 1000, weights = {{ zipf = 1.1 }} }}, got {}",
                    other.type_str()
                ));
            }
        };
        Ok(SourceConfig {
            span,
            clients,
            kind: SourceKind::from_table(table)?,
        })
    }

    /// Where it runs in a run of `duration`, checked to lie inside it.
    fn place<'a>(&'a self, duration: Nanos, base_dir: &'a Path) -> Result<Place<'a>, FieldError> {
        let (start, end) = self.window(duration)?;
        Ok(Place {
            start,
            end,
            base_dir,
            clients: self.clients.as_ref(),
        })
    }

    /// True when the source draws random numbers, so replications differ.
    pub fn is_stochastic(&self) -> bool {
        self.clients.as_ref().is_some_and(|c| c.count.get() > 1)
            || with_kind!(&self.kind, config => config.is_stochastic())
    }

    /// The most distinct client keys it can send (1 when it names none).
    pub fn keys(&self, duration: Nanos, base_dir: &Path) -> Result<u64, FieldError> {
        if let Some(clients) = &self.clients {
            return Ok(clients.count.get());
        }
        let place = self.place(duration, base_dir)?;
        with_kind!(&self.kind, config => config.keys(place))
    }

    /// Bytes it holds to sort its input in memory (0 for most kinds).
    pub fn sort_bytes(&self, duration: Nanos, base_dir: &Path) -> Result<u64, FieldError> {
        let place = self.place(duration, base_dir)?;
        with_kind!(&self.kind, config => config.sort_bytes(place))
    }

    /// A trace naming its keys: whether the replay knows them by the
    /// number the check gave them (the workload's one source), or by their
    /// hash (`None` for other sources).
    pub fn numbers_keys(&self) -> Option<bool> {
        match &self.kind {
            SourceKind::Trace(trace) if trace.key.is_some() => Some(trace.interned),
            _ => None,
        }
    }

    /// Whether its requests name their clients: `clients`, or a trace's key column.
    pub fn is_keyed(&self) -> bool {
        self.clients.is_some() || with_kind!(&self.kind, config => config.names_keys())
    }

    /// Whether its requests name Hosts (a trace's host column).
    pub fn names_hosts(&self) -> bool {
        with_kind!(&self.kind, config => config.names_hosts())
    }

    /// See [`Kind::turned_away_in_log`].
    pub fn turned_away_in_log(&self) -> Option<u64> {
        with_kind!(&self.kind, config => config.turned_away_in_log())
    }

    /// See [`Kind::labelled_seconds`].
    pub fn labelled_seconds(&self) -> Option<trace::Labelled> {
        with_kind!(&self.kind, config => config.labelled_seconds())
    }

    /// The key the results show for client `key` as it streamed (a
    /// trace's numbered keys by their text's hash); `None` when it is not
    /// this source's to say.
    pub fn key_value(&self, key: Key) -> Option<u64> {
        with_kind!(&self.kind, config => config.key_value(key))
    }

    /// For a trace, what a part of a partitioning says of it in place of
    /// its file ([`trace::Config::preset`]); nothing for other kinds.
    pub fn preset(
        &self,
        rows: u64,
        clients: &[crate::partition::KeyFact],
        log: Option<&crate::partition::LogFacts>,
    ) -> Result<(), FieldError> {
        match &self.kind {
            SourceKind::Trace(trace) => trace.preset(rows, clients, log),
            _ => Ok(()),
        }
    }

    /// The clients of a checked trace's rows whose key field is empty
    /// ([`trace::Config::empty_keys`]); none for other kinds.
    pub fn empty_keys(&self) -> &EmptyKeys {
        match &self.kind {
            SourceKind::Trace(trace) => trace.empty_keys(),
            _ => &NO_EMPTY_KEYS,
        }
    }

    /// Numbers a workload's keys in the order first seen where its
    /// sources can (see [`trace::Config::interned`]): a lone source's, or
    /// those of several traces that all name keys, which share one
    /// numbering (returned, to be closed once they are checked; `None`
    /// when `checked` is false, where a part of a partitioning names each
    /// client's number itself). Other mixes keep their keys' hashes, as
    /// synthetic clients and unnamed requests are numbered from 0 too.
    pub(crate) fn number_together(
        sources: &mut [SourceConfig],
        checked: bool,
    ) -> Option<std::sync::Arc<trace::Book>> {
        let keyed_traces = sources.iter().all(|source| {
            source.clients.is_none()
                && matches!(&source.kind, SourceKind::Trace(trace) if trace.key.is_some())
        });
        let book = (sources.len() > 1 && keyed_traces && checked)
            .then(std::sync::Arc::<trace::Book>::default);
        if sources.len() == 1 || keyed_traces {
            for source in sources {
                if let SourceKind::Trace(trace) = &mut source.kind {
                    trace.interned = true;
                    trace.book = book.clone();
                }
            }
        }
        book
    }

    /// Marks each trace of a workload of several sources as one of them
    /// (see [`trace::Config::several`]).
    pub(crate) fn mark_several(sources: &mut [SourceConfig]) {
        let several = sources.len() > 1;
        for source in sources {
            if let SourceKind::Trace(trace) = &mut source.kind {
                trace.several = several;
            }
        }
    }

    /// Several rebased traces of one workload (several servers' logs)
    /// share one origin, so that their rows keep their places in time
    /// against each other: `earliest` when given (their earliest row, once
    /// checked), else the earliest of their first rows, read ahead of the
    /// check (the earliest rows of sorted files; standard input's cannot
    /// be). Sets it on each and returns it; `None` for fewer than two.
    pub(crate) fn rebase_together(
        sources: &mut [SourceConfig],
        base_dir: &std::path::Path,
        earliest: Option<u64>,
    ) -> Option<u64> {
        let mut rebased: Vec<&mut trace::Config> = sources
            .iter_mut()
            .filter_map(|source| match &mut source.kind {
                SourceKind::Trace(trace) if trace.rebased() => Some(trace),
                _ => None,
            })
            .collect();
        if rebased.len() < 2 {
            return None;
        }
        let origin = match earliest {
            Some(earliest) => earliest,
            None => rebased
                .iter()
                .filter_map(|trace| trace.first_time(base_dir))
                .min()?,
        };
        // Their labelled seconds, counted together, are bounded together.
        let counted = std::sync::Arc::new(trace::Counted::new(trace::MAX_COUNTED_SECONDS));
        for trace in &mut rebased {
            trace.origin = Some(origin);
            trace.counted = Some(std::sync::Arc::clone(&counted));
        }
        Some(origin)
    }

    /// When a workload's rebased traces were checked from an origin that
    /// is not their earliest row (an unsorted file's earliest row past its
    /// first, or none read ahead): that row, to check them again from; an
    /// error when one of them is standard input, which is read once.
    pub(crate) fn rebased_anew(
        sources: &[SourceConfig],
        base_dir: &std::path::Path,
    ) -> Result<Option<u64>, String> {
        // Each rebased trace with its own earliest row.
        let traces: Vec<(&trace::Config, u64)> = sources
            .iter()
            .filter_map(|source| match &source.kind {
                SourceKind::Trace(trace) => Some((trace, trace.rebased_earliest()?)),
                _ => None,
            })
            .collect();
        let Some(shared) = traces
            .iter()
            .map(|&(_, own)| own)
            .min()
            .filter(|_| traces.len() > 1)
        else {
            return Ok(None);
        };
        if traces
            .iter()
            .all(|&(trace, own)| trace.origin.unwrap_or(own) == shared)
        {
            return Ok(None);
        }
        if traces
            .iter()
            .any(|(trace, _)| trace.reads_standard_input(base_dir))
        {
            return Err("its rebased traces share one origin, their earliest row, and standard input is read once: its rows could not be checked from that origin; give it as a file, or set rebase = false on every trace".into());
        }
        Ok(Some(shared))
    }

    /// The traces of several sources, if every one is a trace.
    fn all_traces(sources: &[SourceConfig]) -> Option<Vec<&trace::Config>> {
        sources
            .iter()
            .map(|source| match &source.kind {
                SourceKind::Trace(trace) if source.clients.is_none() => Some(trace),
                _ => None,
            })
            .collect()
    }

    /// See [`trace::Config::labelled_together`]: `None` unless every
    /// source is a trace.
    pub(crate) fn labelled_together(sources: &[SourceConfig]) -> Option<trace::Labelled> {
        trace::Config::labelled_together(Self::all_traces(sources)?)
    }

    /// See [`trace::Config::turned_away_together`]: `None` unless every
    /// source is a trace.
    pub(crate) fn turned_away_together(sources: &[SourceConfig]) -> Option<u64> {
        trace::Config::turned_away_together(Self::all_traces(sources)?)
    }

    /// How the results name client `key`: as a trace's key column writes
    /// it, or `client N` for the N-th of synthetic clients (from 0).
    pub fn key_name(&self, key: Key) -> Option<String> {
        with_kind!(&self.kind, config => config.key_name(key)).or_else(|| {
            self.clients
                .as_ref()
                .filter(|clients| key.client < clients.count.get())
                .map(|_| format!("client {}", key.client))
        })
    }

    /// The `kind` as written in scenario files.
    pub fn kind_name(&self) -> &'static str {
        with_kind!(&self.kind, _config => K::NAME)
    }

    /// The source in a few words, like `poisson 80/s` or `trace traces/log.csv`.
    pub fn describe(&self) -> String {
        let what = with_kind!(&self.kind, config => config.describe());
        let what = match &self.clients {
            None => what,
            Some(clients) => match clients.weights {
                clients::Weights::Uniform => format!("{what} from {} clients", clients.count),
                clients::Weights::Zipf(s) => {
                    format!("{what} from {} clients (Zipf, s = {s})", clients.count)
                }
            },
        };
        match (self.span.start, self.span.end) {
            (None, None) => what,
            (start, end) => format!(
                "{what} in [{}, {})",
                start.unwrap_or(Nanos::ZERO),
                end.map_or("end".to_string(), |e| e.to_string())
            ),
        }
    }

    /// The active part of a run of `duration`, checked to lie inside it.
    pub fn window(&self, duration: Nanos) -> Result<(Nanos, Nanos), FieldError> {
        let start = self.span.start.unwrap_or(Nanos::ZERO);
        let end = self.span.end.unwrap_or(duration);
        if end > duration {
            return Err(field_error!(
                "end",
                "{end} is after the end of the run ({duration})"
            ));
        }
        if start >= end {
            return Err(field_error!(
                "start",
                "{start} is not before the end ({end})"
            ));
        }
        Ok((start, end))
    }

    /// Checks what can be checked without generating traffic; for a trace,
    /// reads the file once. Returns warnings worth showing the user.
    pub fn validate(&self, duration: Nanos, base_dir: &Path) -> Result<Vec<String>, FieldError> {
        let place = self.place(duration, base_dir)?;
        if let Some(clients) = &self.clients {
            clients.validate()?;
        }
        with_kind!(&self.kind, config => config.validate(place))
    }

    /// About how many arrivals the source makes in a run of `duration` (the
    /// mean, for random sources): to refuse runaway work before starting it.
    pub fn estimated_arrivals(&self, duration: Nanos, base_dir: &Path) -> Result<u128, FieldError> {
        let place = self.place(duration, base_dir)?;
        with_kind!(&self.kind, config => config.estimated_arrivals(place))
    }

    /// The source's arrivals for one run, drawn from its `streams` ([`streams`]):
    /// times from the first, its clients' keys from the second.
    pub fn arrivals(
        &self,
        duration: Nanos,
        base_dir: &Path,
        streams: (Rng, Rng),
    ) -> Result<Source, FieldError> {
        let (rng, keys) = streams;
        let place = self.place(duration, base_dir)?;
        let itself = with_kind!(&self.kind, config => config.keys_itself(place.clients));
        match &self.clients {
            Some(clients) if !itself => {
                let draw = clients.draw(keys.clone());
                Ok(Source::Keyed(
                    Box::new(self.kind.arrivals(place, rng, keys)?),
                    draw,
                ))
            }
            _ => self.kind.arrivals(place, rng, keys),
        }
    }
}

/// Arrivals at `per_second` (a decimal rate) over `place`, rounded down,
/// plus one: the count of a steady source, for [`Kind::estimated_arrivals`].
pub fn at_rate(place: Place, per_second: &crate::decimal::Decimal) -> u128 {
    place.span() * u128::from(per_second.numerator())
        / (u128::from(per_second.denominator()) * 1_000_000_000)
        + 1
}

/// Replaces what `out` holds with `arrivals`.
fn refill<T: Timed>(out: &mut Vec<T>, arrivals: impl Iterator<Item = Arrival>) {
    out.clear();
    out.extend(arrivals.map(T::of));
}

/// The time-merge of several sources. Simultaneous arrivals come in source
/// order, so ties break the same way on every run.
pub struct Merge {
    sources: Vec<Source>,
    heads: Vec<Option<Arrival>>,
}

impl Merge {
    /// Merges `sources`; with one source this is a plain pass-through.
    pub fn new(mut sources: Vec<Source>) -> Merge {
        let heads = if sources.len() == 1 {
            Vec::new()
        } else {
            sources.iter_mut().map(Iterator::next).collect()
        };
        Merge { sources, heads }
    }
}

impl Merge {
    /// A single Poisson source without clients, which makes bare times, or
    /// the merge as it was.
    pub fn into_poisson(mut self) -> Result<poisson::Arrivals, Merge> {
        match self.sources.pop() {
            Some(Source::Poisson(source)) if self.sources.is_empty() => Ok(source),
            popped => {
                self.sources.extend(popped);
                Err(self)
            }
        }
    }

    /// The error that cut a trace short while streaming, if any.
    pub fn take_error(&mut self) -> Option<String> {
        self.sources.iter_mut().find_map(Source::take_error)
    }
}

impl<T: Timed> Chunks<T> for Merge {
    fn refill(&mut self, out: &mut Vec<T>, count: usize) {
        match self.sources.as_mut_slice() {
            [single] => single.refill(out, count),
            _ => refill(out, self.take(count)),
        }
    }
}

impl Iterator for Merge {
    type Item = Arrival;

    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        if let [single] = self.sources.as_mut_slice() {
            return single.next();
        }
        // A linear scan: workloads have a handful of sources, where a heap costs more.
        let (index, arrival) = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, head)| head.map(|a| (i, a)))
            .min_by_key(|&(i, a)| (a.time, i))?;
        self.heads[index] = self.sources[index].next();
        Some(arrival)
    }
}

/// What sets a source's clients' stream apart from its times' ("keyskeys").
const KEYS_SEED: u64 = 0x6b65_7973_6b65_7973;

/// The stream a source's clients are drawn from: apart from its arrival
/// times' stream, so giving a source clients leaves its times unchanged.
pub fn keys_stream(seed: u64, workload: &str, source: usize, replication: u64) -> Rng {
    stream(seed ^ KEYS_SEED, workload, source, replication)
}

/// A source's two streams, of times and of clients: ([`stream`], [`keys_stream`]).
pub fn streams(seed: u64, workload: &str, source: usize, replication: u64) -> (Rng, Rng) {
    let [times, keys] =
        [seed, seed ^ KEYS_SEED].map(|seed| stream(seed, workload, source, replication));
    (times, keys)
}

#[cfg(test)]
mod tests;
