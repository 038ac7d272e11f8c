//! Synthetic and replayed traffic: each source kind is an iterator of
//! arrivals — a time and a client key — in non-decreasing time order; a
//! workload merges its sources by time.

pub mod adversary;
pub mod boundary;
pub mod clients;
pub mod logs;
pub mod poisson;
pub mod slots;
pub mod trace;
pub mod uniform;

use std::path::Path;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Deserialize;

use crate::config::{KindTable, parse_table};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// Whose request it is: an API key, a user, an address. Synthetic sources
/// send everything as [`Key::DEFAULT`]; a trace may name a key column, whose
/// text is hashed (FNV-1a) to a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub u64);

impl Key {
    /// The one key of traffic that names none.
    pub const DEFAULT: Key = Key(0);

    /// The key a trace's key field `text` names.
    pub fn named(text: &[u8]) -> Key {
        Key(crate::random::fnv1a(text))
    }
}

/// One request: when it arrives, and whose it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// When it arrives.
    pub time: Nanos,
    /// Whose it is.
    pub key: Key,
}

impl Arrival {
    /// A request at `time` of the default key.
    #[inline]
    pub fn at(time: Nanos) -> Arrival {
        Arrival {
            time,
            key: Key::DEFAULT,
        }
    }
}

/// What the simulator's chunks hold: whole arrivals, or bare times when
/// every arrival has the default key (half the bytes to write, and to move
/// from the thread that generates them to the one that decides).
pub trait Timed: Copy + Send + 'static {
    /// A default-key arrival at `time`.
    fn at(time: Nanos) -> Self;
    /// The arrival it stands for.
    fn arrival(self) -> Arrival;
}

impl Timed for Arrival {
    #[inline]
    fn at(time: Nanos) -> Arrival {
        Arrival::at(time)
    }

    #[inline]
    fn arrival(self) -> Arrival {
        self
    }
}

impl Timed for Nanos {
    #[inline]
    fn at(time: Nanos) -> Nanos {
        time
    }

    #[inline]
    fn arrival(self) -> Arrival {
        Arrival::at(self)
    }
}

/// A stream the simulator takes in chunks of `T`.
pub trait Chunks<T: Timed>: Send {
    /// Replaces what `out` holds with the next `count` items, fewer only at
    /// the end.
    fn refill(&mut self, out: &mut Vec<T>, count: usize);
}

/// The random generator behind every stochastic source, named after its
/// algorithm so results do not change when `rand` changes its default.
pub type Rng = Xoshiro256PlusPlus;

/// The most requests in one burst (or one adversary pattern), which is held in memory.
pub const MAX_BURST: u64 = 50_000_000;

/// The source kinds accepted in `kind = "…"`.
pub const KINDS: &[&str] = &["uniform", "poisson", "boundary", "trace", "adversary"];

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

/// The kinds of traffic.
#[derive(Clone, Debug)]
pub enum SourceKind {
    /// `uniform`.
    Uniform(uniform::Config),
    /// `poisson`.
    Poisson(poisson::Config),
    /// `boundary`.
    Boundary(boundary::Config),
    /// `trace`.
    Trace(trace::Config),
    /// `adversary`: a search per limiter, not a stream; see [`crate::adversary`].
    Adversary(adversary::Config),
}

impl SourceConfig {
    /// Reads a source from a TOML table holding `kind`, its fields, `start` and `end`.
    pub fn from_table(table: toml::Table) -> Result<SourceConfig, FieldError> {
        let mut table = KindTable::new(table, KINDS)?;
        let span = parse_table(table.take(&["start", "end"]))?;
        let clients = match table.take(&["clients"]).remove("clients") {
            None => None,
            Some(toml::Value::Table(clients)) => Some(
                parse_table::<clients::Clients>(clients).map_err(|err| format!("clients.{err}"))?,
            ),
            Some(other) => {
                return Err(field_error!(
                    "clients",
                    "expected a table like {{ count = 1000, weights = {{ zipf = 1.1 }} }}, got {}",
                    other.type_str()
                ));
            }
        };
        let kind = match table.kind.as_str() {
            "uniform" => SourceKind::Uniform(table.parse()?),
            "poisson" => SourceKind::Poisson(table.parse()?),
            "boundary" => SourceKind::Boundary(table.parse()?),
            "trace" => SourceKind::Trace(table.parse()?),
            "adversary" => SourceKind::Adversary(table.parse()?),
            other => unreachable!("KindTable accepted an unlisted kind {other}"),
        };
        if let SourceKind::Boundary(boundary) = &kind
            && boundary.per_client
        {
            match &clients {
                None => {
                    return Err(FieldError::at(
                        "per_client",
                        "bursts per client need the source's clients, like clients = { count = 1000 }",
                    ));
                }
                Some(c) if c.weights != clients::Weights::Uniform => {
                    return Err(field_error!(
                        "per_client",
                        "every client bursts as often as the others; drop `weights`"
                    ));
                }
                Some(c)
                    if c.count
                        .get()
                        .saturating_mul(boundary.before + boundary.after)
                        > MAX_BURST =>
                {
                    return Err(field_error!(
                        "per_client",
                        "{} clients bursting {} + {} each is held in memory; at most {MAX_BURST} arrivals per boundary in all",
                        c.count,
                        boundary.before,
                        boundary.after
                    ));
                }
                Some(_) => {}
            }
        }
        if clients.is_some() && matches!(kind, SourceKind::Trace(_) | SourceKind::Adversary(_)) {
            return Err(field_error!(
                "clients",
                "a trace names its clients in a key column (`key = \"client\"`), and an adversary has none; drop `clients`"
            ));
        }
        Ok(SourceConfig {
            span,
            clients,
            kind,
        })
    }

    /// True when the source draws random numbers, so replications differ.
    pub fn is_stochastic(&self) -> bool {
        if self.clients.as_ref().is_some_and(|c| c.count.get() > 1) {
            return true;
        }
        match &self.kind {
            SourceKind::Uniform(config) => config.jitter > 0.0,
            SourceKind::Poisson(_) => true,
            SourceKind::Boundary(config) => !config.even,
            // A log's whole-second timestamps are spread by a draw.
            SourceKind::Trace(config) => config.may_spread(),
            SourceKind::Adversary(_) => false,
        }
    }

    /// The most distinct client keys it can send (1 when it names none).
    pub fn keys(&self, duration: Nanos, base_dir: &Path) -> Result<u64, FieldError> {
        if let Some(clients) = &self.clients {
            return Ok(clients.count.get());
        }
        match &self.kind {
            SourceKind::Trace(trace) => {
                let (start, end) = self.window(duration)?;
                trace.keys(base_dir, start, end)
            }
            _ => Ok(1),
        }
    }

    /// Bytes it holds to sort a trace whose rows are out of order (0 for
    /// anything else): each row's time and key, and the sort's scratch.
    pub fn sort_bytes(&self, duration: Nanos, base_dir: &Path) -> Result<u64, FieldError> {
        match &self.kind {
            SourceKind::Trace(trace) => {
                let (start, end) = self.window(duration)?;
                trace.sort_bytes(base_dir, start, end)
            }
            _ => Ok(0),
        }
    }

    /// Whether its requests name their clients: `clients`, or a trace's key column.
    pub fn is_keyed(&self) -> bool {
        self.clients.is_some()
            || matches!(&self.kind, SourceKind::Trace(trace) if trace.key.is_some())
    }

    /// The budget of an adversary source (requests per second), if it is one.
    pub fn adversary_budget(&self) -> Option<u64> {
        match &self.kind {
            SourceKind::Adversary(config) => Some(config.budget.get()),
            _ => None,
        }
    }

    /// The `kind` as written in scenario files.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            SourceKind::Uniform(_) => "uniform",
            SourceKind::Poisson(_) => "poisson",
            SourceKind::Boundary(_) => "boundary",
            SourceKind::Trace(_) => "trace",
            SourceKind::Adversary(_) => "adversary",
        }
    }

    /// The source in a few words, like `poisson 80/s` or `trace traces/log.csv`.
    pub fn describe(&self) -> String {
        let what = match &self.kind {
            SourceKind::Uniform(c) => format!("uniform {}/s", c.rate),
            SourceKind::Poisson(c) => match (&c.rate, &c.schedule) {
                (Some(rate), _) => format!("poisson {rate}/s"),
                (None, Some(schedule)) => {
                    let steps: Vec<String> = schedule.iter().map(|(at, rate)| format!("{rate}/s from {at}")).collect();
                    format!("poisson {}", steps.join(", "))
                }
                (None, None) => "poisson".to_string(),
            },
            SourceKind::Boundary(c) => format!(
                "boundary bursts: {} before and {} after every {} boundary of {} (phase {}), within {}",
                c.before,
                c.after,
                match c.every.get() {
                    1 => "".to_string(),
                    2 => "2nd".to_string(),
                    3 => "3rd".to_string(),
                    n => format!("{n}th"),
                },
                c.period,
                c.phase,
                c.spread
            )
            .replace("every  boundary", "every boundary"),
            SourceKind::Trace(c) => format!("trace {}", c.path.display()),
            SourceKind::Adversary(c) => format!("adversary searching for each limiter's worst traffic, at most {} requests per second", c.budget),
        };
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
        let (start, end) = self.window(duration)?;
        if let Some(clients) = &self.clients {
            clients.validate()?;
        }
        match &self.kind {
            SourceKind::Uniform(config) => config.validate().map(|()| Vec::new()),
            SourceKind::Poisson(config) => config.validate(end).map(|()| Vec::new()),
            SourceKind::Boundary(config) => config.validate().map(|()| Vec::new()),
            SourceKind::Trace(config) => config.validate(base_dir, start, end),
            SourceKind::Adversary(config) if config.budget.get() > MAX_BURST => Err(field_error!(
                "budget",
                "at most {MAX_BURST} requests per second (got {})",
                config.budget
            )),
            SourceKind::Adversary(_) => Ok(Vec::new()),
        }
    }

    /// About how many arrivals the source makes in a run of `duration` (the
    /// mean, for random sources): to refuse runaway work before starting it.
    pub fn estimated_arrivals(&self, duration: Nanos, base_dir: &Path) -> Result<u128, FieldError> {
        let (start, end) = self.window(duration)?;
        let span = u128::from(end.get() - start.get());
        let per_second = |rate: &crate::decimal::Decimal| {
            span * u128::from(rate.numerator()) / (u128::from(rate.denominator()) * 1_000_000_000)
                + 1
        };
        Ok(match &self.kind {
            SourceKind::Uniform(config) => per_second(&config.rate),
            SourceKind::Poisson(config) => match (&config.rate, &config.schedule) {
                (Some(rate), _) => per_second(rate),
                // Bounded by the highest rate over the whole span.
                (None, Some(schedule)) => schedule
                    .iter()
                    .map(|(_, rate)| per_second(rate))
                    .max()
                    .unwrap_or(0),
                (None, None) => 0,
            },
            SourceKind::Boundary(config) => {
                let gap = u128::from(config.period.get()) * u128::from(config.every.get());
                // Per client, every client bursts: one more boundary for their phases.
                let (bursting, extra) = match &self.clients {
                    Some(clients) if config.per_client => (u128::from(clients.count.get()), 1),
                    _ => (1, 0),
                };
                (span / gap.max(1) + 1 + extra)
                    * u128::from(config.before + config.after)
                    * bursting
            }
            SourceKind::Trace(config) => u128::from(config.rows(base_dir, start, end)?),
            // About a thousand patterns of at most `budget` requests.
            SourceKind::Adversary(config) => u128::from(config.budget.get()) * 1_000,
        })
    }

    /// The source's arrivals for one run, drawn from `rng`.
    pub fn arrivals(
        &self,
        duration: Nanos,
        base_dir: &Path,
        rng: Rng,
        keys: Rng,
    ) -> Result<Source, FieldError> {
        let (start, end) = self.window(duration)?;
        let source = match &self.kind {
            SourceKind::Uniform(config) => Source::Uniform(config.arrivals(start, end, rng)),
            SourceKind::Poisson(config) => Source::Poisson(config.arrivals(start, end, rng)),
            SourceKind::Boundary(config) => Source::Boundary(config.arrivals(start, end, rng)),
            SourceKind::Trace(config) => Source::Trace(config.arrivals(base_dir, start, end, rng)?),
            SourceKind::Adversary(_) => {
                return Err("an adversary's traffic is searched per limiter, not generated".into());
            }
        };
        Ok(match (&self.clients, &self.kind) {
            (None, _) => source,
            (Some(clients), SourceKind::Boundary(config)) if config.per_client => {
                Source::PerClient(config.per_client(clients.count.get(), start, end, keys))
            }
            (Some(clients), _) => Source::Keyed(Box::new(source), clients.draw(keys)),
        })
    }
}

/// A running source: an iterator of arrivals.
pub enum Source {
    /// `uniform`.
    Uniform(uniform::Arrivals),
    /// `poisson`.
    Poisson(poisson::Arrivals),
    /// `boundary`.
    Boundary(boundary::Arrivals),
    /// `trace`.
    Trace(trace::Arrivals),
    /// A synthetic source whose arrivals are spread over clients.
    Keyed(Box<Source>, clients::Draw),
    /// Bursts of every client around its own boundaries.
    PerClient(boundary::PerClient),
}

impl Source {
    /// Replaces what `out` holds with its next `count` arrivals, fewer only
    /// at its end: one tight loop per kind, for the simulator's chunks.
    fn refill(&mut self, out: &mut Vec<Arrival>, count: usize) {
        match self {
            Source::Poisson(source) => source.refill(out, count),
            Source::Keyed(source, clients) => {
                source.refill(out, count);
                for arrival in out.iter_mut() {
                    arrival.key = clients.next_key();
                }
            }
            Source::Uniform(source) => refill(out, source.take(count).map(Arrival::at)),
            Source::Boundary(source) => refill(out, source.take(count).map(Arrival::at)),
            Source::Trace(source) => refill(out, source.take(count)),
            Source::PerClient(source) => refill(out, source.take(count)),
        }
    }
}

/// Replaces what `out` holds with `arrivals`.
fn refill(out: &mut Vec<Arrival>, arrivals: impl Iterator<Item = Arrival>) {
    out.clear();
    out.extend(arrivals);
}

impl Iterator for Source {
    type Item = Arrival;

    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        match self {
            Source::Uniform(source) => source.next().map(Arrival::at),
            Source::Poisson(source) => source.next().map(Arrival::at),
            Source::Boundary(source) => source.next().map(Arrival::at),
            Source::Trace(source) => source.next(),
            Source::PerClient(source) => source.next(),
            Source::Keyed(source, clients) => source.next().map(|arrival| Arrival {
                key: clients.next_key(),
                ..arrival
            }),
        }
    }
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
        self.sources.iter_mut().find_map(|source| match source {
            Source::Trace(trace) => trace.take_error(),
            _ => None,
        })
    }
}

impl Chunks<Arrival> for Merge {
    fn refill(&mut self, out: &mut Vec<Arrival>, count: usize) {
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

/// The stream a source's clients are drawn from: apart from its arrival
/// times' stream, so giving a source clients leaves its times unchanged.
pub fn keys_stream(seed: u64, workload: &str, source: usize, replication: u64) -> Rng {
    stream(seed ^ 0x6b65_7973_6b65_7973, workload, source, replication)
}

/// The random stream of one source of one workload, derived from the scenario
/// seed, the workload's name and the source's position, so that adding a
/// workload or a source leaves the others' traffic unchanged.
pub fn stream(seed: u64, workload: &str, source: usize, replication: u64) -> Rng {
    let name_hash = crate::random::fnv1a(workload.as_bytes());
    let mut state = seed
        ^ name_hash.rotate_left(17)
        ^ (source as u64).rotate_left(41)
        ^ replication.rotate_left(53);
    let mut seed_bytes = [0u8; 32];
    for chunk in seed_bytes.chunks_exact_mut(8) {
        chunk.copy_from_slice(&crate::random::splitmix64(&mut state).to_le_bytes());
    }
    Rng::from_seed(seed_bytes)
}

#[cfg(test)]
mod tests;
