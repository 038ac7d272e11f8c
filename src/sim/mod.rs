//! The simulator: a validated scenario in, results out. Pure: it prints
//! nothing and writes no file; decisions go to a sink the caller provides.

mod driver;
mod events;
mod run;

use anyhow::{Context as _, Result, bail};
use rayon::prelude::*;

pub use self::driver::Driver;
pub use self::events::{Attempt, Event, Events};
use self::run::RunState;
use crate::error::FieldError;
use crate::limiter::RateLimiter;
use crate::results::{Results, RunResult, WorkloadResults};
use crate::scenario::{Scenario, Workload};
use crate::time::Nanos;
use crate::traffic::{Arrival, Chunks, Merge, Source, Timed, streams};

/// Arrivals generated at a time and shared by every limiter of a workload.
const CHUNK: usize = 4096;

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

/// Runs every workload through every limiter.
pub fn simulate(
    scenario: &Scenario,
    options: &Options,
    mut sink: Option<&mut dyn DecisionSink>,
) -> Result<Results> {
    let workloads = if sink.is_none() {
        // Workloads are independent: one per core.
        (0..scenario.workloads.len())
            .into_par_iter()
            .map(|index| simulate_one(scenario, options, index))
            .collect::<Result<Vec<_>>>()?
    } else {
        (0..scenario.workloads.len())
            .map(|index| simulate_workload(scenario, options, index, &mut sink))
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

fn simulate_workload(
    scenario: &Scenario,
    options: &Options,
    index: usize,
    sink: &mut Option<&mut dyn DecisionSink>,
) -> Result<WorkloadResults> {
    let workload = &scenario.workloads[index];
    let runs = if driver::is_driven(workload) {
        simulate_driven(scenario, options, index, sink)?
    } else {
        simulate_open(scenario, options, index, sink)?
    };
    Ok(WorkloadResults::new(workload, runs))
}

/// Open loop: arrivals generated once, in chunks, and fed to every limiter.
fn simulate_open(
    scenario: &Scenario,
    options: &Options,
    index: usize,
    sink: &mut Option<&mut dyn DecisionSink>,
) -> Result<Vec<RunResult>> {
    let workload = &scenario.workloads[index];
    let arrivals = arrivals(scenario, workload, options.replication)?;
    let mut runs = scenario
        .limiters
        .iter()
        .map(|limiter| RunState::new(scenario, options, limiter, workload.is_keyed()))
        .collect::<Vec<_>>();
    let big = workload.sources().iter().try_fold(0u128, |sum, source| {
        source
            .estimated_arrivals(scenario.duration, &scenario.base_dir)
            .map(|n| sum + n)
    });
    let pipelined = big.is_ok_and(|n| n >= PIPELINE_FROM)
        && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    let error = match arrivals.into_poisson() {
        // One Poisson source without clients: chunks of bare times.
        Ok(times) => {
            in_chunks(times, pipelined, &mut |chunk: &[Nanos]| {
                decide(&mut runs, sink, index, chunk)
            })?;
            None
        }
        Err(merge) => in_chunks(merge, pipelined, &mut |chunk: &[Arrival]| {
            decide(&mut runs, sink, index, chunk)
        })?
        .take_error(),
    };
    if let Some(err) = error {
        bail!("workload {:?}: {err}", workload.name);
    }
    check_offered(
        scenario,
        options,
        workload,
        runs.iter().map(RunState::offered).sum(),
    )?;
    Ok(runs
        .into_iter()
        .zip(&scenario.limiters)
        .map(|(run, limiter)| run.finish(scenario, options, &workload.name, &limiter.name))
        .collect())
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

/// Hands `decide` the stream's chunks in order, from a second thread when
/// `pipelined`; returns the stream, to ask for the error that cut a trace short.
fn in_chunks<T: Timed, S: Chunks<T>>(
    mut stream: S,
    pipelined: bool,
    decide: &mut dyn FnMut(&[T]) -> Result<()>,
) -> Result<S> {
    if pipelined {
        return pipeline(stream, decide);
    }
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        crate::interrupt::check()?;
        stream.refill(&mut chunk, CHUNK);
        if chunk.is_empty() {
            return Ok(stream);
        }
        decide(&chunk)?;
    }
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

/// Workloads of at least this many requests generate their arrivals on a
/// thread of their own while the limiters decide on this one.
const PIPELINE_FROM: u128 = 1 << 20;
/// Chunks generated ahead of the decisions, at most.
const PIPELINE_DEPTH: usize = 4;

/// Generates `arrivals` in chunks on a second thread while `decide` takes
/// them in order on this one: the same chunks in the same order as one
/// thread makes them, so results do not depend on it. Returns the stream, to
/// ask for the error that cut a trace short.
fn pipeline<T: Timed, S: Chunks<T>>(
    mut arrivals: S,
    decide: &mut dyn FnMut(&[T]) -> Result<()>,
) -> Result<S> {
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<T>>(PIPELINE_DEPTH);
    let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<T>>();
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || {
            loop {
                // Chunks come back once decided, so a few are reused all along.
                let mut chunk = empty_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
                arrivals.refill(&mut chunk, CHUNK);
                // An empty chunk ends the stream; a failed send means the
                // decisions stopped on an error.
                if chunk.is_empty() || !hand_over(&full_tx, chunk) {
                    return arrivals;
                }
            }
        });
        let mut outcome = Ok(());
        while let Some(chunk) = next_chunk(&full_rx) {
            outcome = crate::interrupt::check()
                .map_err(anyhow::Error::from)
                .and_then(|()| decide(&chunk));
            if outcome.is_err() {
                break;
            }
            let _ = empty_tx.send(chunk);
        }
        // Unblocks a producer waiting to send after an error.
        drop(full_rx);
        let arrivals = producer
            .join()
            .expect("the arrival generator does not panic");
        outcome.map(|()| arrivals)
    })
}

/// The next chunk from the generator, or `None` when it has finished. The
/// decisions usually outrun the generator: waiting a few microseconds on the
/// core before sleeping saves a wake-up (a system call on each side) per chunk.
fn next_chunk<T>(chunks: &std::sync::mpsc::Receiver<Vec<T>>) -> Option<Vec<T>> {
    use std::sync::mpsc::TryRecvError;
    for _ in 0..SPINS_BEFORE_SLEEP {
        match chunks.try_recv() {
            Ok(chunk) => return Some(chunk),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
    chunks.recv().ok()
}

/// Sends `chunk` to the decisions, false when they have stopped. When the
/// queue is full the generator, too, waits a few microseconds on the core
/// before sleeping: with the two sides about as fast, each would otherwise
/// put the other to sleep and wake it up again chunk after chunk.
fn hand_over<T>(chunks: &std::sync::mpsc::SyncSender<Vec<T>>, mut chunk: Vec<T>) -> bool {
    use std::sync::mpsc::TrySendError;
    for _ in 0..SPINS_BEFORE_SLEEP {
        match chunks.try_send(chunk) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(back)) => chunk = back,
        }
        std::hint::spin_loop();
    }
    chunks.send(chunk).is_ok()
}

/// How often the decisions look for a chunk before sleeping until one comes
/// (a few microseconds: a chunk takes tens to generate).
const SPINS_BEFORE_SLEEP: u32 = 2_000;

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
        );
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
    let sources = workload
        .sources()
        .iter()
        .enumerate()
        .map(|(i, source)| {
            let (times, keys) = streams(scenario.seed, &workload.name, i, replication);
            source.arrivals(scenario.duration, &scenario.base_dir, times, keys)
        })
        .collect::<Result<Vec<Source>, FieldError>>()
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("workload {:?}", workload.name))?;
    Ok(Merge::new(sources))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        crate::scenario::parse(
            "duration = \"2s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 50000 }, { kind = \"uniform\", rate = 7000, clients = { count = 9 } }]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
            std::path::Path::new("p.toml"),
        )
        .unwrap()
    }

    #[test]
    fn the_pipeline_hands_over_exactly_the_chunks_one_thread_makes() {
        let scenario = scenario();
        let mut alone = arrivals(&scenario, &scenario.workloads[0], 0).unwrap();
        let mut expected = Vec::new();
        let mut chunk = Vec::new();
        loop {
            alone.refill(&mut chunk, CHUNK);
            if chunk.is_empty() {
                break;
            }
            expected.push(chunk.clone());
        }
        let mut got = Vec::new();
        let merge = arrivals(&scenario, &scenario.workloads[0], 0).unwrap();
        pipeline(merge, &mut |chunk| {
            got.push(chunk.to_vec());
            Ok(())
        })
        .unwrap();
        assert!(expected.len() > 10, "{} chunks", expected.len());
        assert_eq!(got, expected);
    }

    #[test]
    fn a_lone_poisson_source_gives_bare_times_in_the_same_chunks() {
        let two_sources = scenario();
        let scenario = crate::scenario::parse(
            "duration = \"2s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 50000 }]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
            std::path::Path::new("p.toml"),
        )
        .unwrap();
        let merge = || arrivals(&scenario, &scenario.workloads[0], 0).unwrap();
        let mut whole = Vec::new();
        in_chunks(merge(), false, &mut |chunk: &[Arrival]| {
            whole.push(chunk.iter().map(|a| a.time).collect::<Vec<_>>());
            Ok(())
        })
        .unwrap();
        let mut bare = Vec::new();
        let Ok(times) = merge().into_poisson() else {
            panic!("a lone Poisson source makes bare times")
        };
        pipeline(times, &mut |chunk: &[Nanos]| {
            bare.push(chunk.to_vec());
            Ok(())
        })
        .unwrap();
        assert!(whole.len() > 10, "{} chunks", whole.len());
        assert_eq!(bare, whole);
        // Anything else stays a merge, its sources in order.
        let fresh = || arrivals(&two_sources, &two_sources.workloads[0], 0).unwrap();
        let Err(kept) = fresh().into_poisson() else {
            panic!("two sources are not a lone Poisson source")
        };
        assert!(kept.take(5000).eq(fresh().take(5000)));
    }

    #[test]
    fn a_decision_error_stops_the_pipeline_without_hanging() {
        let scenario = scenario();
        let merge = arrivals(&scenario, &scenario.workloads[0], 0).unwrap();
        let mut seen = 0;
        let err = pipeline(merge, &mut |_| {
            seen += 1;
            if seen == 3 {
                anyhow::bail!("disk full")
            }
            Ok(())
        })
        .err()
        .expect("the error comes back");
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(seen, 3);
    }
}
