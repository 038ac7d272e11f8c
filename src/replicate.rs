//! Replications: every stochastic workload run with several seeds derived
//! from the scenario's, on all cores, and each figure summarised over them.

use anyhow::Result;
use rayon::prelude::*;

use crate::results::{Results, WorkloadResults};
use crate::scenario::Scenario;
use crate::sim::{self, DecisionSink, Options};
use crate::tally::RunTally;

/// How many workload runs [`simulate_replicated`] makes: `replications` for
/// each stochastic workload, one for each deterministic one.
fn units(scenario: &Scenario, replications: u64) -> u64 {
    scenario
        .workloads
        .iter()
        .map(|w| if w.is_stochastic() { replications } else { 1 })
        .sum()
}

/// Hears how many workload runs there are, then of each one done (a
/// progress bar; `()` hears nothing).
pub trait Progress: Sync {
    /// There are `units` runs to make.
    fn start(&self, units: u64);
    /// One more is made.
    fn advance(&self);
}

impl Progress for () {
    fn start(&self, _: u64) {}
    fn advance(&self) {}
}

/// A terminal's progress bar counts the runs, hidden for fewer than two.
impl Progress for indicatif::ProgressBar {
    fn start(&self, units: u64) {
        if units < 2 {
            self.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        self.set_length(units);
    }

    fn advance(&self) {
        self.inc(1);
    }
}

/// What replication 0 keeps beyond every run's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Its timelines, arrival curves and trailing counts, for the charts.
    Charts,
    /// Its timelines (for timeline.csv).
    Timeline,
    /// The figures alone.
    Figures,
}

impl Keep {
    fn options(self, scenario: &Scenario) -> Options {
        let options = match self {
            Keep::Charts => sim::for_charts(scenario),
            Keep::Timeline => Options::default(),
            Keep::Figures => Options {
                skip_timeline: true,
                ..Options::default()
            },
        };
        // Replication 0 also places a whole-second log's requests at edges.
        Options {
            packed: true,
            ..options
        }
    }
}

/// A decision sink another thread may write to while the rest run.
pub type Decisions<'a> = &'a mut (dyn DecisionSink + Send);

/// Runs the scenario `replications` times (deterministic workloads once),
/// telling `progress` of each workload × replication. Replication 0 keeps
/// what `keep` says for the charts; the others only add statistics. With
/// `decisions`, replication 0's decisions are recorded as it runs (on one
/// thread, in file order, beside the other replications).
pub fn simulate_replicated(
    scenario: &Scenario,
    keep: Keep,
    replications: u64,
    decisions: Option<Decisions<'_>>,
    progress: &dyn Progress,
) -> Result<Results> {
    progress.start(units(scenario, replications));
    let options = keep.options(scenario);
    let units: Vec<(usize, u64)> = scenario
        .workloads
        .iter()
        .enumerate()
        .flat_map(|(index, workload)| {
            let count = if workload.is_stochastic() {
                replications
            } else {
                1
            };
            (0..count).map(move |replication| (index, replication))
        })
        .collect();
    // Replication 0 keeps whole results for the charts; every replication's
    // figures are tallied as they come, by value, so memory grows with the
    // distinct values of each figure, never with whole summaries.
    let workloads_count = scenario.workloads.len();
    let empty = || Tallies {
        runs: vec![None; workloads_count],
        kept: vec![None; workloads_count],
    };
    let tallied = |index: usize, replication: u64, workload: WorkloadResults| {
        progress.advance();
        let mut one = empty();
        one.runs[index] = Some(
            workload
                .runs
                .iter()
                .map(|run| RunTally::of(&run.summary))
                .collect(),
        );
        if replication == 0 {
            one.kept[index] = Some(workload);
        }
        one
    };
    let unit = |&(index, replication): &(usize, u64)| {
        let options = if replication == 0 {
            options.clone()
        } else {
            Options {
                replication,
                skip_timeline: true,
                ..Options::default()
            }
        };
        let workload = sim::simulate_one(scenario, &options, index)?;
        Ok::<_, anyhow::Error>(tallied(index, replication, workload))
    };
    // A single unit runs on this thread: handed to rayon, it would start
    // the pool's threads, and the one left idle spins (yielding) on the
    // core a busy neighbour leaves the run, while the run itself may be
    // placed on the neighbour's (a log beside a spinning neighbour took
    // 1.02x the time on both cores that it took pinned to one).
    let alone = units.len() == 1;
    let tallies = match decisions {
        None if alone => empty().merge(unit(&units[0])?),
        None => units
            .par_iter()
            .map(unit)
            .try_reduce(empty, |a, b| Ok(a.merge(b)))?,
        Some(sink) => {
            let mut recorded = || {
                (0..workloads_count).try_fold(empty(), |all, index| {
                    let workload = sim::simulate_recorded(scenario, &options, index, sink)?;
                    Ok::<_, anyhow::Error>(all.merge(tallied(index, 0, workload)))
                })
            };
            let others = || {
                units
                    .par_iter()
                    .filter(|&&(_, replication)| replication > 0)
                    .map(unit)
                    .try_reduce(empty, |a, b| Ok(a.merge(b)))
            };
            if units.iter().all(|&(_, replication)| replication == 0) {
                recorded()?
            } else {
                let (recorded, others) = rayon::join(recorded, others);
                recorded?.merge(others?)
            }
        }
    };
    let mut workloads = Vec::with_capacity(workloads_count);
    for (kept, runs) in tallies.kept.into_iter().zip(tallies.runs) {
        let mut workload = kept.expect("replication 0 of every workload is kept whole");
        if replications > 1 {
            let runs = runs.expect("every workload ran");
            for (run, tally) in workload.runs.iter_mut().zip(runs) {
                run.summary.replications = Some(tally.statistics());
            }
        }
        workloads.push(workload);
    }
    Ok(Results::new(scenario, options.curve, workloads))
}

/// Every workload's run figures tallied so far, and replication 0's whole results.
struct Tallies {
    runs: Vec<Option<Vec<RunTally>>>,
    kept: Vec<Option<WorkloadResults>>,
}

impl Tallies {
    fn merge(mut self, other: Tallies) -> Tallies {
        for (mine, theirs) in self.runs.iter_mut().zip(other.runs) {
            *mine = match (mine.take(), theirs) {
                (Some(mut a), Some(b)) => {
                    a.iter_mut().zip(b).for_each(|(a, b)| a.merge(b));
                    Some(a)
                }
                (a, b) => a.or(b),
            };
        }
        for (mine, theirs) in self.kept.iter_mut().zip(other.kept) {
            if mine.is_none() {
                *mine = theirs;
            }
        }
        self
    }
}
