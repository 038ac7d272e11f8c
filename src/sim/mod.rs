//! The simulator: a validated scenario in, results out. Pure: it prints
//! nothing and writes no file; decisions go to a sink the caller provides.

mod driver;
mod events;
mod run;

use anyhow::{Context as _, Result, bail};
use rayon::prelude::*;

pub use self::driver::Driver;
pub use self::events::{Event, Events};
use self::run::RunState;
use crate::metrics::rolling::Worst;
use crate::metrics::timeline::Timeline;
use crate::metrics::trailing::Trailing;
use crate::scenario::{Scenario, Workload};
use crate::summary::{RunSummary, Summary};
use crate::time::Nanos;
use crate::traffic::{Arrival, Merge, Source, stream};

/// Arrivals generated at a time and shared by every limiter of a workload.
const CHUNK: usize = 4096;

/// Receives every decision, when the caller asks for them (`--decisions`).
pub trait DecisionSink {
    /// Records that run `run` (index into [`Outcome::runs`]) decided
    /// `admitted` for `arrival`.
    fn record(&mut self, run: usize, arrival: Arrival, admitted: bool) -> std::io::Result<()>;
}

/// The result of one workload × limiter.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The figures.
    pub summary: RunSummary,
    /// Admitted and rejected per bucket.
    pub timeline: Timeline,
    /// The limiter's window edges when they are fixed in time: (length, phase).
    pub window_edges: Option<(Nanos, Nanos)>,
    /// The worst count at each interval of [`Options::curve`].
    pub curve: Vec<Worst>,
    /// The trailing count over the whole run, per timeline bucket, when
    /// [`Options::trailing`] asks.
    pub trailing: Option<Trailing>,
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

/// The result of a whole scenario.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Workloads in file order, each with every limiter in file order.
    pub runs: Vec<RunResult>,
}

impl Outcome {
    /// The summary written to `summary.json`.
    pub fn summary(&self, scenario: &Scenario) -> Summary {
        Summary {
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            duration_ns: scenario.duration.get(),
            runs: self.runs.iter().map(|run| run.summary.clone()).collect(),
        }
    }
}

/// Runs every workload through every limiter.
pub fn simulate(
    scenario: &Scenario,
    options: &Options,
    mut sink: Option<&mut dyn DecisionSink>,
) -> Result<Outcome> {
    if sink.is_none() {
        // Workloads are independent: one per core.
        let per_workload = (0..scenario.workloads.len())
            .into_par_iter()
            .map(|index| simulate_workload_at(scenario, options, index))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Outcome {
            runs: per_workload.into_iter().flatten().collect(),
        });
    }
    let mut runs = Vec::with_capacity(scenario.workloads.len() * scenario.limiters.len());
    for workload in &scenario.workloads {
        let first = runs.len();
        runs.extend(simulate_workload(
            scenario, options, workload, first, &mut sink,
        )?);
    }
    Ok(Outcome { runs })
}

/// Runs workload number `index` through every limiter.
pub fn simulate_workload_at(
    scenario: &Scenario,
    options: &Options,
    index: usize,
) -> Result<Vec<RunResult>> {
    simulate_workload(scenario, options, &scenario.workloads[index], 0, &mut None)
}

fn simulate_workload(
    scenario: &Scenario,
    options: &Options,
    workload: &Workload,
    first_run: usize,
    sink: &mut Option<&mut dyn DecisionSink>,
) -> Result<Vec<RunResult>> {
    if driver::is_driven(workload) {
        return simulate_driven(scenario, options, workload, first_run, sink);
    }
    // Open loop: arrivals generated once, in chunks, and fed to every limiter.
    let mut arrivals = arrivals(scenario, workload, options.replication)?;
    let mut runs = scenario
        .limiters
        .iter()
        .map(|limiter| RunState::new(scenario, options, limiter))
        .collect::<Vec<_>>();
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        chunk.clear();
        arrivals.fill(&mut chunk, CHUNK);
        if chunk.is_empty() {
            break;
        }
        for (offset, run) in runs.iter_mut().enumerate() {
            match sink.as_deref_mut() {
                None => chunk.iter().for_each(|&arrival| {
                    run.observe(arrival);
                }),
                Some(sink) => {
                    for &arrival in &chunk {
                        let decision = run.observe(arrival);
                        sink.record(first_run + offset, arrival, decision.admitted())
                            .context("writing decisions")?;
                    }
                }
            }
        }
    }
    if let Some(err) = arrivals.take_error() {
        bail!("workload {:?}: {err}", workload.name);
    }
    // A run of no requests would pass every check. Later replications may
    // draw none by chance; the scenario's own may not.
    if options.replication == 0 && runs.iter().all(|run| run.offered == 0) {
        bail!(
            "workload {:?} offers no requests in {}: its sources produce nothing in the run; raise their rates, widen their start and end, or lengthen the run",
            workload.name,
            scenario.duration
        );
    }
    Ok(runs
        .into_iter()
        .zip(&scenario.limiters)
        .map(|(run, limiter)| run.finish(scenario, options, &workload.name, &limiter.name))
        .collect())
}

/// Each limiter with a driver of its own, which hears every answer.
fn simulate_driven(
    scenario: &Scenario,
    options: &Options,
    workload: &Workload,
    first_run: usize,
    sink: &mut Option<&mut dyn DecisionSink>,
) -> Result<Vec<RunResult>> {
    let mut results = Vec::with_capacity(scenario.limiters.len());
    for (offset, named) in scenario.limiters.iter().enumerate() {
        let mut driver = driver::for_limiter(scenario, workload, named)?;
        let mut run = RunState::new(scenario, options, named);
        run.drive(driver.as_mut(), |arrival, decision| {
            match sink.as_deref_mut() {
                Some(sink) => sink
                    .record(first_run + offset, arrival, decision.admitted())
                    .context("writing decisions"),
                None => Ok(()),
            }
        })?;
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
    let mut run = RunState::new(scenario, options, named);
    for (at, admitted) in decisions {
        run.record(at, admitted, Nanos::ZERO);
    }
    Ok(run.finish(scenario, options, workload, &named.name))
}

/// The time-merged arrivals of `workload`'s sources for one replication.
pub fn arrivals(scenario: &Scenario, workload: &Workload, replication: u64) -> Result<Merge> {
    let sources = workload
        .sources
        .iter()
        .enumerate()
        .map(|(i, source)| {
            source.arrivals(
                scenario.duration,
                &scenario.base_dir,
                stream(scenario.seed, &workload.name, i, replication),
            )
        })
        .collect::<Result<Vec<Source>, String>>()
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("workload {:?}", workload.name))?;
    Ok(Merge::new(sources))
}
