//! The simulator: a validated scenario in, results out. Pure: it prints
//! nothing and writes no file; decisions go to a sink the caller provides.

mod driver;
pub(crate) use self::driver::RETRY_STREAM;
mod events;
pub mod parts;
mod pipeline;
pub use self::parts::{Decide, Recount};
mod run;

use anyhow::{Context as _, Result, bail};
use rayon::prelude::*;

pub use self::driver::Driver;
pub use self::events::{Attempt, Event, Events};
use self::pipeline::{PIPELINE_FROM, in_chunks};
use self::run::RunState;
use self::run::figures::Away;
use crate::error::FieldError;
use crate::limiter::RateLimiter;
use crate::results::{Results, RunResult, WorkloadResults};
use crate::scenario::{Scenario, Workload};
use crate::time::{NANOS_PER_SEC, Nanos};
use crate::traffic::{Arrival, Merge, Source, Timed, streams};

/// Receives every decision, when the caller asks for them (`--decisions`).
pub trait DecisionSink {
    /// Records that the limiter numbered `limiter` (in file order) decided
    /// `admitted` for `arrival` of the workload numbered `workload`, its
    /// request's `attempt`-th (1 unless its clients retry).
    fn record(
        &mut self,
        workload: usize,
        limiter: usize,
        arrival: Arrival,
        attempt: u32,
        admitted: bool,
    ) -> std::io::Result<()>;
}

/// What to compute beyond the scenario's own metrics.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Interval lengths at which to sample the arrival curve (for charts).
    pub curve: Vec<Nanos>,
    /// Which replication's random streams to draw from (0 is the scenario's own).
    pub replication: u64,
    /// Keep no timeline (for runs whose summary is all that is wanted).
    pub skip_timeline: bool,
    /// Keep the exact trailing count over `metrics.rolling`, as the most in
    /// each timeline bucket (for charts).
    pub trailing: bool,
    /// For a log of whole seconds, also run its requests packed against the
    /// seconds' edges, to find the most another placement admits.
    pub packed: bool,
    /// Stop with [`Exceeded`] as soon as a run has admitted more than this
    /// in some second, or its backend has dropped a request: sizing asks
    /// only whether a setting stays within capacity.
    pub stop_above: Option<u64>,
}

/// A simulation stopped early: a run admitted more than
/// [`Options::stop_above`] in some second, or its backend dropped a request.
#[derive(Debug)]
pub struct Exceeded;

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a run went over the capacity it was held to")
    }
}

impl std::error::Error for Exceeded {}

/// [`Exceeded`] once some run of `runs` is over `stop_above`.
fn stop_if_over(runs: &[RunState], stop_above: Option<u64>) -> Result<()> {
    match stop_above {
        Some(capacity) if runs.iter().any(|run| run.over(capacity)) => Err(Exceeded.into()),
        _ => Ok(()),
    }
}

/// How many interval lengths the charts' arrival curve samples.
const CURVE_POINTS: u32 = 48;

/// What the simulator must keep for the charts: the arrival curve's
/// intervals and the trailing count for the overview.
pub fn for_charts(scenario: &Scenario) -> Options {
    Options {
        curve: curve_intervals(scenario),
        trailing: true,
        ..Options::default()
    }
}

/// Interval lengths for the arrival curve: log-spaced from the smallest
/// profile interval to four times the longest window or rolling interval,
/// plus the profile's own points.
pub fn curve_intervals(scenario: &Scenario) -> Vec<Nanos> {
    let metrics = &scenario.metrics;
    let longest_window = scenario
        .limiters
        .iter()
        .filter_map(|named| Some(named.limiter.window_edges()?.0))
        .max()
        .unwrap_or(metrics.rolling);
    let low = metrics
        .profile
        .iter()
        .copied()
        .chain([metrics.rolling])
        .min()
        .unwrap_or(Nanos::SECOND);
    let high = metrics
        .rolling
        .max(longest_window)
        .max(Nanos::SECOND)
        .get()
        .saturating_mul(4);
    let (low_f, high_f) = (low.get() as f64, high as f64);
    let step = (high_f / low_f).ln() / f64::from(CURVE_POINTS - 1);
    let mut intervals: Vec<Nanos> = (0..CURVE_POINTS)
        .map(|i| Nanos(((low_f.ln() + step * f64::from(i)).exp().round() as u64).max(1)))
        .chain(metrics.profile.iter().copied())
        .chain([metrics.rolling])
        .collect();
    intervals.sort_unstable();
    intervals.dedup();
    intervals
}

/// Runs every workload through every limiter, one workload per core.
pub fn simulate(scenario: &Scenario, options: &Options) -> Result<Results> {
    let one = |index| simulate_one(scenario, options, index);
    // A lone workload runs here, not on rayon's pool (see `replicate::simulate_replicated`).
    let workloads = if scenario.workloads.len() == 1 {
        vec![one(0)?]
    } else {
        (0..scenario.workloads.len())
            .into_par_iter()
            .map(one)
            .collect::<Result<Vec<_>>>()?
    };
    Ok(Results::new(scenario, options.curve.clone(), workloads))
}

/// Runs workload number `index` through every limiter.
pub fn simulate_one(
    scenario: &Scenario,
    options: &Options,
    index: usize,
) -> Result<WorkloadResults> {
    simulate_workload(scenario, options, index, &mut None)
}

/// Runs workload number `index` through every limiter, each decision told
/// to `sink` as it is made.
pub fn simulate_recorded(
    scenario: &Scenario,
    options: &Options,
    index: usize,
    sink: &mut dyn DecisionSink,
) -> Result<WorkloadResults> {
    simulate_workload(scenario, options, index, &mut Some(sink))
}

fn simulate_workload(
    scenario: &Scenario,
    options: &Options,
    index: usize,
    sink: &mut Option<&mut dyn DecisionSink>,
) -> Result<WorkloadResults> {
    let workload = &scenario.workloads[index];
    let (mut runs, packed) = if driver::is_driven(workload) {
        (simulate_driven(scenario, options, index, sink)?, None)
    } else {
        simulate_open(scenario, options, index, sink)?
    };
    let whole = scenario.part.is_none();
    let name = |key| (workload.key_value(key), workload.key_name(key));
    finish_workload(scenario, workload, &mut runs, packed, whole, &name);
    Ok(WorkloadResults::new(workload, runs))
}

/// What a workload's runs say beyond each run's own figures: for a `whole`
/// log (not a part of one), its labelled seconds (with the most each
/// limiter admitted packed against their edges, `packed`) and its own
/// limiter's answers; and each run's busiest client as the input names it,
/// `name` giving its value and name.
pub(crate) fn finish_workload(
    scenario: &Scenario,
    workload: &Workload,
    runs: &mut [RunResult],
    packed: Option<Vec<PackedWorst>>,
    whole: bool,
    name: &dyn Fn(crate::traffic::Key) -> (u64, Option<String>),
) {
    // A log of whole seconds cannot say where in its second each request
    // came: the worst rolling second is an interval, not the seeded draw.
    // (A part of a partitioning holds some of the log's keys: the log's
    // seconds and its own limiter's answers are the whole log's, not the
    // part's, and are left out.)
    if let Some(labelled) = workload.labelled_seconds().filter(|_| whole) {
        let rolling = scenario.metrics.rolling;
        let packed = packed.unwrap_or_else(|| vec![[0; 2]; runs.len()]);
        for (run, [packed_rolling, packed_1s]) in runs.iter_mut().zip(packed) {
            let summary = &mut run.summary;
            // Within a rolling interval of a second or less: at least the
            // busiest second's requests over the intervals that cover it
            // (all of them at a shorter interval's reach, or spread over
            // ⌈1 s / r⌉ of them), at most the busiest two adjacent
            // seconds' (packed).
            if rolling <= Nanos::SECOND {
                let covering = NANOS_PER_SEC.div_ceil(rolling.get());
                summary.whole_seconds = Some(interval(
                    &labelled,
                    covering,
                    [summary.worst_rolling, packed_rolling],
                    summary.bound,
                ));
            }
            // The backend takes a second at a time: with another rolling
            // interval, the same interval for the worst second (its packed
            // placements run for it), so that the verdict and `check`
            // judge what the log allows.
            if rolling != Nanos::SECOND
                && let Some(backend) = &mut summary.backend
            {
                backend.whole_seconds = Some(interval(
                    &labelled,
                    1,
                    [backend.worst_1s, packed_1s],
                    backend.bound_1s,
                ));
            }
        }
    }
    // What the real limiter did, as its log says.
    if let Some(turned_away) = workload.turned_away_in_log().filter(|_| whole) {
        for run in runs.iter_mut() {
            run.summary.turned_away_in_log = Some(turned_away);
        }
    }
    // The busiest client, named as the input names it (a limit per Host
    // counts Hosts, which have no client's name).
    for (run, named) in runs.iter_mut().zip(&scenario.limiters) {
        if let Some(keys) = &mut run.summary.keys
            && !named.limiter.keyed_by_host()
        {
            (keys.worst_key, keys.worst_key_name) =
                name(crate::traffic::Key::client(keys.worst_key));
        }
    }
}

/// Where a whole-second log's worst count over an interval lies, for a
/// limiter that let through `seeded` as drawn and `packed` with the
/// seconds packed, and can let through `bound`: each of the busiest
/// second's requests falls in one of the `covering` intervals that cover
/// it, and no interval holds more than the busiest two adjacent seconds.
fn interval(
    labelled: &crate::traffic::trace::Labelled,
    covering: u64,
    [seeded, packed]: [u64; 2],
    bound: u64,
) -> crate::summary::WholeSeconds {
    let at_least = seeded.max(packed);
    crate::summary::WholeSeconds {
        offered_low: labelled.busiest.div_ceil(covering),
        offered_high: labelled.busiest_pair,
        admitted_at_least: at_least,
        admitted_at_most: bound.min(labelled.busiest_pair).max(at_least),
    }
}

/// A log of whole seconds run, beside its seeded placement, with each
/// second's requests packed against an edge: even seconds (counted from
/// the log's first) at their last nanosecond and odd at their first, then
/// the reverse, so that every two adjacent seconds meet at one instant in
/// one of the two. Both are placements the log allows; the rows are the
/// seeded pass's, read once, given the packed times.
struct Packed {
    /// Where the log's seconds start in the run, within a second.
    origin: u64,
    /// The run's last instant.
    last: u64,
    /// Each placement's runs, one per limiter.
    runs: [Vec<RunState>; 2],
    /// The chunk with packed times, reused.
    chunk: Vec<Arrival>,
}

impl Packed {
    fn new(scenario: &Scenario, options: &Options, index: usize) -> Option<Packed> {
        let workload = &scenario.workloads[index];
        if !options.packed
            || scenario.part.is_some()
            || !packs(scenario)
            || !workload.labelled_seconds().is_some_and(|l| l.packed)
        {
            return None;
        }
        let origin = workload.second_origin(scenario.duration)?;
        let empty = workload.empty_keys();
        let runs = || {
            scenario
                .limiters
                .iter()
                .map(|limiter| Packed::run(scenario, limiter).treating_empty_keys(&empty))
                .collect::<Vec<_>>()
        };
        Some(Packed {
            origin,
            last: scenario.duration.get().saturating_sub(1),
            runs: [runs(), runs()],
            chunk: Vec::new(),
        })
    }

    /// A packed placement's run of `limiter`: only its worst counts are
    /// read, so it keeps no timeline and no figures per key (as the parts
    /// of a partitioned run do, [`Decide::new`]): those figures, kept and
    /// never read, were two thirds of a keyed log's replay.
    fn run(scenario: &Scenario, limiter: &crate::scenario::NamedLimiter) -> RunState {
        let figures = Options {
            skip_timeline: true,
            ..Options::default()
        };
        RunState::new(scenario, &figures, limiter, false)
    }

    /// Decides `chunk` packed, if there are packed runs.
    fn along<T: Timed>(packed: &mut Option<Packed>, chunk: &[T]) {
        if let Some(packed) = packed {
            packed.decide(chunk);
        }
    }

    fn decide<T: Timed>(&mut self, chunk: &[T]) {
        for (parity, runs) in self.runs.iter_mut().enumerate() {
            self.chunk.clear();
            self.chunk.extend(chunk.iter().map(|item| {
                let arrival = item.arrival();
                Arrival {
                    time: packed_time(arrival.time, [self.origin, self.last], parity),
                    ..arrival
                }
            }));
            for run in runs.iter_mut() {
                run.observe_all(&self.chunk);
            }
        }
    }

    /// The most each limiter let through, over both.
    fn worst(self, scenario: &Scenario, workload: &str) -> Vec<PackedWorst> {
        let figures = Options::default();
        let [even, odd] = self.runs;
        even.into_iter()
            .zip(odd)
            .zip(&scenario.limiters)
            .map(|((even, odd), limiter)| {
                let even = even.finish(scenario, &figures, workload, &limiter.name);
                let odd = odd.finish(scenario, &figures, workload, &limiter.name);
                packed_worst(&even, &odd)
            })
            .collect()
    }
}

/// What the packed placements of a limiter let through at most: in a
/// rolling interval, and in a second (0 without a backend).
pub(crate) type PackedWorst = [u64; 2];

/// Whether a whole-second log's requests are also run packed: for figures
/// over a rolling interval of a second or less, and for a backend's second
/// whatever the rolling interval.
pub(crate) fn packs(scenario: &Scenario) -> bool {
    scenario.metrics.rolling <= Nanos::SECOND || scenario.backend.is_some()
}

/// The most the two packed placements' runs let through.
pub(crate) fn packed_worst(even: &RunResult, odd: &RunResult) -> PackedWorst {
    let second = |run: &RunResult| run.summary.backend.as_ref().map_or(0, |b| b.worst_1s);
    [
        even.summary.worst_rolling.max(odd.summary.worst_rolling),
        second(even).max(second(odd)),
    ]
}

/// Where the packed placement numbered `parity` puts a request of a log
/// of whole seconds stamped `time`: at its second's last nanosecond when
/// the second (counted from `origin`) has that parity, else at its first;
/// never past the run's `last` instant.
pub(crate) fn packed_time(time: Nanos, [origin, last]: [u64; 2], parity: usize) -> Nanos {
    let second = time.get().saturating_sub(origin) / NANOS_PER_SEC;
    let start = origin + second * NANOS_PER_SEC;
    let time = if second % 2 == parity as u64 {
        start + (NANOS_PER_SEC - 1)
    } else {
        start
    };
    Nanos(time.min(last))
}

/// Open loop: arrivals generated once, in chunks, and fed to every limiter;
/// for a log of whole seconds, also the most each admits with them packed
/// against the seconds' edges.
fn simulate_open(
    scenario: &Scenario,
    options: &Options,
    index: usize,
    sink: &mut Option<&mut dyn DecisionSink>,
) -> Result<(Vec<RunResult>, Option<Vec<PackedWorst>>)> {
    let workload = &scenario.workloads[index];
    let arrivals = arrivals(scenario, workload, options.replication)?;
    let empty = workload.empty_keys();
    let mut runs = scenario
        .limiters
        .iter()
        .map(|limiter| {
            RunState::new(scenario, options, limiter, workload.is_keyed())
                .treating_empty_keys(&empty)
        })
        .collect::<Vec<_>>();
    let big = workload.sources().iter().try_fold(0u128, |sum, source| {
        source
            .estimated_arrivals(scenario.duration, &scenario.base_dir)
            .map(|n| sum + n)
    });
    let two = big.is_ok_and(|n| n >= PIPELINE_FROM) && crate::cores::second_core_free();
    // The second thread counts the figures per key where they are kept
    // and their keys outgrow the cache (then they are most of the run's
    // work), else it generates the arrivals. With one core, such figures
    // are counted here a chunk at a time while runs decide alike (counted
    // once for all of them); in the cache, as each run decides.
    let keys = workload.sources().iter().try_fold(0u64, |sum, source| {
        source
            .keys(scenario.duration, &scenario.base_dir)
            .map(|n| sum.saturating_add(n))
    });
    let many = keys.is_ok_and(|n| n >= crate::limiter::per_key::PREFETCH_FROM as u64);
    let mut away = (two && many)
        .then(|| Away::start(&mut runs))
        .flatten()
        .or_else(|| many.then(|| Away::here(&mut runs)).flatten());
    let pipelined = two && !Away::threaded(&away);
    let mut packed = Packed::new(scenario, options, index);
    let error = match arrivals.into_poisson() {
        // One Poisson source without clients: chunks of bare times.
        Ok(times) => {
            in_chunks(times, pipelined, &mut |chunk: &[Nanos]| {
                decide(&mut runs, sink, index, chunk)?;
                Away::after_chunk(&mut away, &mut runs);
                stop_if_over(&runs, options.stop_above)
            })?;
            None
        }
        // Requests naming Hosts: whole arrivals; else a time and a client.
        Err(merge) if workload.names_hosts() => {
            in_chunks(merge, pipelined, &mut |chunk: &[Arrival]| {
                Packed::along(&mut packed, chunk);
                decide(&mut runs, sink, index, chunk)?;
                Away::after_chunk(&mut away, &mut runs);
                stop_if_over(&runs, options.stop_above)
            })?
            .take_error()
        }
        Err(merge) => in_chunks(
            merge,
            pipelined,
            &mut |chunk: &[crate::traffic::Client]| {
                Packed::along(&mut packed, chunk);
                decide(&mut runs, sink, index, chunk)?;
                Away::after_chunk(&mut away, &mut runs);
                stop_if_over(&runs, options.stop_above)
            },
        )?
        .take_error(),
    };
    Away::finish(away, &mut runs);
    if let Some(err) = error {
        bail!("workload {:?}: {err}", workload.name);
    }
    check_offered(
        scenario,
        options,
        workload,
        runs.iter().map(RunState::offered).sum(),
    )?;
    let packed = packed.map(|packed| packed.worst(scenario, &workload.name));
    let finish = |(run, limiter): (RunState, &crate::scenario::NamedLimiter)| {
        run.finish(scenario, options, &workload.name, &limiter.name)
    };
    // Each run's figures per key are summed up over every key (a sort of
    // each key's worst count, 20 ms a run at 10^6 keys): side by side
    // where a core is free for it.
    let runs = if two && many {
        runs.into_par_iter()
            .zip(&scenario.limiters)
            .map(finish)
            .collect()
    } else {
        runs.into_iter()
            .zip(&scenario.limiters)
            .map(finish)
            .collect()
    };
    Ok((runs, packed))
}

/// Every limiter decides every arrival of `chunk`, in order.
fn decide<T: Timed>(
    runs: &mut [RunState],
    sink: &mut Option<&mut dyn DecisionSink>,
    workload: usize,
    chunk: &[T],
) -> Result<()> {
    for (limiter, run) in runs.iter_mut().enumerate() {
        match sink.as_deref_mut() {
            None => run.observe_all(chunk),
            Some(sink) => {
                for &item in chunk {
                    let arrival = item.arrival();
                    let decision = run.observe::<false>(arrival);
                    sink.record(workload, limiter, arrival, 1, decision.admitted())
                        .context("writing decisions")?;
                }
            }
        }
    }
    Ok(())
}

/// A run of no requests would pass every check: refused. Later replications
/// may draw none by chance; the scenario's own may not.
fn check_offered(
    scenario: &Scenario,
    options: &Options,
    workload: &Workload,
    offered: u64,
) -> Result<()> {
    if options.replication == 0 && offered == 0 {
        bail!(
            "workload {:?} offers no requests in {}: its sources produce nothing in the run; raise their rates, widen their start and end, or lengthen the run",
            workload.name,
            scenario.duration
        );
    }
    Ok(())
}

/// Each limiter with a driver of its own, which hears every answer.
fn simulate_driven(
    scenario: &Scenario,
    options: &Options,
    index: usize,
    sink: &mut Option<&mut dyn DecisionSink>,
) -> Result<Vec<RunResult>> {
    let workload = &scenario.workloads[index];
    let mut results = Vec::with_capacity(scenario.limiters.len());
    for (limiter, named) in scenario.limiters.iter().enumerate() {
        let mut driver = driver::for_limiter(scenario, workload, named, options.replication)?;
        // An adversary sends from many keys to a limiter that keeps state per key.
        let adversary_keys = workload.adversary().is_some() && named.limiter.keys_matter();
        let mut run = RunState::new(
            scenario,
            options,
            named,
            workload.is_keyed() || adversary_keys,
        )
        .treating_empty_keys(&workload.empty_keys());
        if let Some(retry) = &workload.retry {
            run = run.with_retries(scenario, retry);
        }
        run.drive(driver.as_mut(), |arrival, attempt, decision| {
            crate::interrupt::check()?;
            match sink.as_deref_mut() {
                Some(sink) => sink
                    .record(index, limiter, arrival, attempt.number, decision.admitted())
                    .context("writing decisions"),
                None => Ok(()),
            }
        })?;
        if let Some(err) = driver.take_error() {
            bail!("workload {:?}: {err}", workload.name);
        }
        check_offered(scenario, options, workload, run.offered())?;
        let mut result = run.finish(scenario, options, &workload.name, &named.name);
        driver.annotate(&mut result.summary);
        results.push(result);
    }
    Ok(results)
}

/// The figures, timeline and arrival curve of decisions made elsewhere (by a
/// real Redis, for `burstsim live`), as if `named` had made them on workload
/// `workload`; `decisions` come in time order.
pub fn summarise(
    scenario: &Scenario,
    options: &Options,
    named: &crate::scenario::NamedLimiter,
    workload: &str,
    decisions: impl IntoIterator<Item = (Nanos, bool)>,
) -> Result<RunResult> {
    let mut run = RunState::new(scenario, options, named, false);
    for (at, admitted) in decisions {
        run.record(Arrival::at(at), admitted, Nanos::ZERO);
    }
    Ok(run.finish(scenario, options, workload, &named.name))
}

/// The time-merged arrivals of `workload`'s sources for one replication.
pub fn arrivals(scenario: &Scenario, workload: &Workload, replication: u64) -> Result<Merge> {
    if let Some(part) = &scenario.part {
        let w = scenario
            .workloads
            .iter()
            .position(|w| w.name == workload.name)
            .with_context(|| {
                format!(
                    "workload {:?} is not in the partitioned scenario",
                    workload.name
                )
            })?;
        let keys = [workload.is_keyed(), workload.names_hosts()];
        let reader = part.arrivals(w, keys).map_err(anyhow::Error::msg)?;
        return Ok(Merge::new(vec![Source::Part(Box::new(reader))]));
    }
    let sources = workload
        .sources()
        .iter()
        .enumerate()
        .map(|(i, source)| {
            source.arrivals(
                scenario.duration,
                &scenario.base_dir,
                streams(scenario.seed, &workload.name, i, replication),
            )
        })
        .collect::<Result<Vec<Source>, FieldError>>()
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("workload {:?}", workload.name))?;
    Ok(Merge::new(sources))
}

#[cfg(test)]
mod tests;
