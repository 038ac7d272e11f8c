//! What a simulation found, nested as the outputs show it — the scenario's
//! facts, then each workload, then each limiter's run on it — with
//! everything the table, CSV, JSON, charts and report need. They read only
//! this: never the scenario, and never a run by index arithmetic.

use std::path::PathBuf;

use crate::metrics::rolling::Worst;
use crate::metrics::timeline::Timeline;
use crate::metrics::trailing::Trailing;
use crate::scenario::{Backend, Metrics, Scenario};
use crate::summary::{RunSummary, Summary};
use crate::time::Nanos;

/// A whole scenario's results.
#[derive(Clone, Debug)]
pub struct Results {
    /// The scenario's name.
    pub scenario: String,
    /// The file it was read from.
    pub file: PathBuf,
    /// The seed of its random streams.
    pub seed: u64,
    /// The run's length.
    pub duration: Nanos,
    /// What was measured.
    pub metrics: Metrics,
    /// The backend, when the scenario describes one.
    pub backend: Option<Backend>,
    /// The interval lengths of every run's [`RunResult::curve`].
    pub curve: Vec<Nanos>,
    /// The limiters, in file order.
    pub limiters: Vec<LimiterFacts>,
    /// The workloads, in file order.
    pub workloads: Vec<WorkloadResults>,
    /// In a selection made for charts ([`Results::drawn`]): what was left
    /// out, in words, to be said wherever the selection is shown.
    pub left_out: Option<String>,
}

/// Charts draw at most this many limiters…
pub const MAX_DRAWN_LIMITERS: usize = 12;
/// …of at most this many workloads: a chart's size and the report's never
/// grow with the scenario.
pub const MAX_DRAWN_WORKLOADS: usize = 6;

/// What the outputs say of a limiter besides its runs.
#[derive(Clone, Debug)]
pub struct LimiterFacts {
    /// Its name.
    pub name: String,
    /// Its kind, as written.
    pub kind: &'static str,
    /// Its effective parameters in words.
    pub description: String,
}

/// One workload's results.
#[derive(Clone, Debug)]
pub struct WorkloadResults {
    /// Its name.
    pub name: String,
    /// Its sources, each in words.
    pub sources: Vec<String>,
    /// Every limiter's run on it, limiters in file order.
    pub runs: Vec<RunResult>,
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
    /// The worst count at each interval of [`Results::curve`] (empty when
    /// no curve was asked for).
    pub curve: Vec<Worst>,
    /// The trailing count over the whole run, per timeline bucket, when asked for.
    pub trailing: Option<Trailing>,
}

impl Results {
    /// The results of `scenario`'s `workloads`, curves sampled at `curve`.
    pub fn new(scenario: &Scenario, curve: Vec<Nanos>, workloads: Vec<WorkloadResults>) -> Results {
        Results {
            scenario: scenario.name.clone(),
            file: scenario.path.clone(),
            seed: scenario.seed,
            duration: scenario.duration,
            metrics: scenario.metrics.clone(),
            backend: scenario.backend,
            curve,
            limiters: scenario
                .limiters
                .iter()
                .map(|named| LimiterFacts {
                    name: named.name.clone(),
                    kind: named.config.kind(),
                    description: named.description.clone(),
                })
                .collect(),
            workloads,
            left_out: None,
        }
    }

    /// The results a chart or the report draws: all of them, or where there
    /// are more than [`MAX_DRAWN_LIMITERS`] limiters or
    /// [`MAX_DRAWN_WORKLOADS`] workloads, those with the largest worst
    /// rolling counts (in file order), and [`Results::left_out`] saying so.
    pub fn drawn(&self) -> std::borrow::Cow<'_, Results> {
        let (limiters, workloads) = (self.limiters.len(), self.workloads.len());
        if limiters <= MAX_DRAWN_LIMITERS && workloads <= MAX_DRAWN_WORKLOADS {
            return std::borrow::Cow::Borrowed(self);
        }
        let largest = |worst: &dyn Fn(usize) -> u64, count: usize, keep: usize| {
            let mut order: Vec<usize> = (0..count).collect();
            // Stable: equal worsts keep file order.
            order.sort_by_key(|&i| std::cmp::Reverse(worst(i)));
            order.truncate(keep);
            order.sort_unstable();
            order
        };
        let worst_of = |run: &RunResult| run.summary.worst_rolling;
        let kept_limiters = largest(
            &|l| self.runs_of(l).map(worst_of).max().unwrap_or(0),
            limiters,
            MAX_DRAWN_LIMITERS,
        );
        let kept_workloads = largest(
            &|w| {
                self.workloads[w]
                    .runs
                    .iter()
                    .map(worst_of)
                    .max()
                    .unwrap_or(0)
            },
            workloads,
            MAX_DRAWN_WORKLOADS,
        );
        let mut said = Vec::new();
        if kept_limiters.len() < limiters {
            said.push(format!("{} of {limiters} limiters", kept_limiters.len()));
        }
        if kept_workloads.len() < workloads {
            said.push(format!("{} of {workloads} workloads", kept_workloads.len()));
        }
        let drawn = Results {
            limiters: kept_limiters
                .iter()
                .map(|&l| self.limiters[l].clone())
                .collect(),
            workloads: kept_workloads
                .iter()
                .map(|&w| {
                    let workload = &self.workloads[w];
                    WorkloadResults {
                        runs: kept_limiters
                            .iter()
                            .map(|&l| workload.runs[l].clone())
                            .collect(),
                        ..workload.clone_without_runs()
                    }
                })
                .collect(),
            left_out: Some(format!(
                "{} shown: the largest worst {}",
                said.join(" and "),
                self.metrics.rolling
            )),
            ..self.clone_without_runs()
        };
        std::borrow::Cow::Owned(drawn)
    }

    /// A copy with no workloads (their runs are the bulk), to build a selection.
    fn clone_without_runs(&self) -> Results {
        Results {
            scenario: self.scenario.clone(),
            file: self.file.clone(),
            seed: self.seed,
            duration: self.duration,
            metrics: self.metrics.clone(),
            backend: self.backend,
            curve: self.curve.clone(),
            limiters: Vec::new(),
            workloads: Vec::new(),
            left_out: None,
        }
    }

    /// Every run: workloads in file order, each with its limiters in order.
    pub fn runs(&self) -> impl Iterator<Item = &RunResult> + Clone {
        self.workloads.iter().flat_map(|w| &w.runs)
    }

    /// The runs of the limiter numbered `limiter` (in file order), one per workload.
    pub fn runs_of(&self, limiter: usize) -> impl Iterator<Item = &RunResult> {
        self.workloads.iter().map(move |w| &w.runs[limiter])
    }

    /// The backend's capacity in requests per second, if there is a backend.
    pub fn capacity(&self) -> Option<u64> {
        self.backend.map(|b| b.capacity_per_sec.get())
    }

    /// The summary written to `summary.json`.
    pub fn summary(&self) -> Summary {
        Summary {
            scenario: self.scenario.clone(),
            seed: self.seed,
            duration_ns: self.duration.get(),
            runs: self.runs().map(|run| run.summary.clone()).collect(),
        }
    }
}

impl WorkloadResults {
    /// A copy with no runs.
    fn clone_without_runs(&self) -> WorkloadResults {
        WorkloadResults {
            name: self.name.clone(),
            sources: self.sources.clone(),
            runs: Vec::new(),
        }
    }

    /// The runs of `workload` of `scenario`.
    pub fn new(workload: &crate::scenario::Workload, runs: Vec<RunResult>) -> WorkloadResults {
        WorkloadResults {
            name: workload.name.clone(),
            sources: workload.describe(),
            runs,
        }
    }
}
