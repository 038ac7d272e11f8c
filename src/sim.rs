//! The simulator: a validated scenario in, results out. Pure: it prints
//! nothing and writes no file; decisions go to a sink the caller provides.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use anyhow::{Context as _, Result, bail};
use hdrhistogram::Histogram;
use rayon::prelude::*;

use crate::adversary;
use crate::limiter::{Limiter, RateLimiter};
use crate::metrics::backend::Server;
use crate::metrics::rolling::{RollingCounts, Worst};
use crate::metrics::timeline::Timeline;
use crate::metrics::trailing::Trailing;
use crate::scenario::{Scenario, Workload};
use crate::summary::{
    BackendSummary, DelaySummary, ProfilePoint, QueueSummary, RunSummary, Summary,
};
use crate::time::Nanos;
use crate::traffic::{Arrival, Merge, Source, SourceConfig, stream};

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
    if let Some(budget) = workload
        .sources
        .iter()
        .find_map(SourceConfig::adversary_budget)
    {
        return simulate_adversary(scenario, options, workload, budget, first_run, sink);
    }
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
                None => chunk.iter().for_each(|arrival| {
                    run.observe(arrival.time);
                }),
                Some(sink) => {
                    for &arrival in &chunk {
                        let admitted = run.observe(arrival.time);
                        sink.record(first_run + offset, arrival, admitted)
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

/// Each limiter against the pattern the adversary found for it.
fn simulate_adversary(
    scenario: &Scenario,
    options: &Options,
    workload: &Workload,
    budget: u64,
    first_run: usize,
    sink: &mut Option<&mut dyn DecisionSink>,
) -> Result<Vec<RunResult>> {
    let mut results = Vec::with_capacity(scenario.limiters.len());
    for (offset, named) in scenario.limiters.iter().enumerate() {
        let mut run = RunState::new(scenario, options, named);
        let found = adversary::search(&run.limiter, budget, scenario.metrics.rolling, scenario.duration)
            .with_context(|| format!("workload {:?}: the run ({}) is too short for an adversary; make it at least a few windows long", workload.name, scenario.duration))?;
        for &t in &found.arrivals {
            let admitted = run.observe(t);
            if let Some(sink) = sink.as_deref_mut() {
                sink.record(first_run + offset, Arrival::at(t), admitted)
                    .context("writing decisions")?;
            }
        }
        let mut result = run.finish(scenario, options, &workload.name, &named.name);
        result.summary.adversary = Some(found.description);
        result.summary.tight = Some(found.tight);
        result.summary.lower_bound = Some(found.worst);
        results.push(result);
    }
    Ok(results)
}

/// One limiter's state and metrics while a workload streams through it.
struct RunState {
    limiter: Limiter,
    kind: &'static str,
    description: String,
    offered: u64,
    admitted: u64,
    rolling: RollingCounts,
    /// The distinct intervals tracked by `rolling`, in its order.
    intervals: Vec<Nanos>,
    timeline: Timeline,
    trailing: Option<Trailing>,
    /// Backend capacity per second, to count rejections it had room for.
    capacity: Option<u64>,
    rejected_with_spare_capacity: u64,
    server: Option<Server>,
    /// Admitted requests still waiting out their delay, by release time: the
    /// metrics see each when the backend gets it.
    pending: BinaryHeap<Reverse<u64>>,
    /// Delays of delayed requests (nginx without `nodelay`).
    delays: Option<Histogram<u64>>,
}

impl RunState {
    fn new(
        scenario: &Scenario,
        options: &Options,
        named: &crate::scenario::NamedLimiter,
    ) -> RunState {
        let metrics = &scenario.metrics;
        let mut intervals: Vec<Nanos> = metrics
            .profile
            .iter()
            .copied()
            .chain([metrics.rolling, Nanos::SECOND])
            .chain(options.curve.iter().copied())
            .collect();
        intervals.sort_unstable();
        intervals.dedup();
        let mut rolling = RollingCounts::new(&intervals);
        if let Some(backend) = scenario.backend {
            rolling = rolling.with_overload(Nanos::SECOND, backend.capacity_per_sec.get());
        }
        RunState {
            limiter: named.limiter.clone(),
            kind: named.config.kind(),
            description: named.description.clone(),
            offered: 0,
            admitted: 0,
            rolling,
            intervals,
            timeline: if options.skip_timeline {
                Timeline::new(metrics.bucket, Nanos::ZERO)
            } else {
                Timeline::new(metrics.bucket, scenario.duration)
            },
            trailing: (options.trailing && !options.skip_timeline)
                .then(|| Trailing::new(metrics.rolling, scenario.duration, metrics.bucket)),
            capacity: scenario.backend.map(|b| b.capacity_per_sec.get()),
            rejected_with_spare_capacity: 0,
            pending: BinaryHeap::new(),
            delays: None,
            server: scenario.backend.and_then(|b| {
                b.queue
                    .map(|queue| Server::new(b.capacity_per_sec.get(), queue))
            }),
        }
    }

    #[inline(always)]
    fn observe(&mut self, now: Nanos) -> bool {
        let decision = self.limiter.decide(now);
        self.record(now, decision.admitted(), decision.delay());
        decision.admitted()
    }

    /// Counts one decision made at `now`, released after `delay` if admitted.
    #[inline(always)]
    fn record(&mut self, now: Nanos, admitted: bool, delay: Nanos) {
        self.offered += 1;
        if !self.pending.is_empty() {
            self.release_until(now.get());
        }
        if admitted {
            self.admitted += 1;
            if delay == Nanos::ZERO {
                self.deliver(now);
            } else {
                self.pending
                    .push(Reverse(now.get().saturating_add(delay.get())));
                let delays = self
                    .delays
                    .get_or_insert_with(|| Histogram::new(3).expect("3 significant digits"));
                let _ = delays.record(delay.get());
            }
        } else {
            self.timeline.record(now, false);
            if let Some(capacity) = self.capacity {
                if self.rolling.trailing_count(now) < capacity {
                    self.rejected_with_spare_capacity += 1;
                }
            }
        }
    }

    /// The backend gets an admitted request at `at`.
    #[inline]
    fn deliver(&mut self, at: Nanos) {
        self.timeline.record(at, true);
        self.rolling.push(at);
        if let Some(trailing) = &mut self.trailing {
            trailing.push(at);
        }
        if let Some(server) = &mut self.server {
            server.arrive(at);
        }
    }

    /// Delivers, in time order, the delayed requests released by `now`.
    fn release_until(&mut self, now: u64) {
        while let Some(&Reverse(at)) = self.pending.peek().filter(|Reverse(at)| *at <= now) {
            self.pending.pop();
            self.deliver(Nanos(at));
        }
    }

    fn finish(
        mut self,
        scenario: &Scenario,
        options: &Options,
        workload: &str,
        limiter: &str,
    ) -> RunResult {
        self.release_until(u64::MAX);
        let worst = self.rolling.worst();
        let at = |interval: Nanos| {
            let index = self
                .intervals
                .iter()
                .position(|&i| i == interval)
                .expect("every reported interval is tracked");
            worst[index]
        };
        let rolling = scenario.metrics.rolling;
        let headline = at(rolling);
        let nominal = self.limiter.nominal(rolling);
        let profile = scenario
            .metrics
            .profile
            .iter()
            .map(|&interval| ProfilePoint {
                interval_ns: interval.get(),
                worst: at(interval).count,
                worst_start_ns: at(interval).start.get(),
                bound: self.limiter.bound(interval),
            })
            .collect();
        let backend = scenario.backend.map(|backend| {
            let capacity = backend.capacity_per_sec.get();
            let worst_1s = at(Nanos::SECOND).count;
            BackendSummary {
                capacity,
                worst_1s,
                bound_1s: self.limiter.bound(Nanos::SECOND),
                nominal_1s: self.limiter.nominal(Nanos::SECOND),
                rejected_with_spare_capacity: self.rejected_with_spare_capacity,
                queue: self.server.as_ref().map(|server| {
                    let stats = server.stats();
                    QueueSummary {
                        size: backend.queue.unwrap_or(0),
                        dropped: stats.dropped,
                        max_queue: stats.max_queue,
                        wait_p50_ns: stats.wait_p50.get(),
                        wait_p99_ns: stats.wait_p99.get(),
                        wait_max_ns: stats.wait_max.get(),
                    }
                }),
                over_capacity: worst_1s.saturating_sub(capacity),
                seconds_over_capacity: self.rolling.time_over_capacity().as_secs_f64(),
            }
        });
        let summary = RunSummary {
            workload: workload.to_string(),
            limiter: limiter.to_string(),
            kind: self.kind.to_string(),
            description: self.description,
            offered: self.offered,
            admitted: self.admitted,
            rejected: self.offered - self.admitted,
            rolling_ns: rolling.get(),
            worst_rolling: headline.count,
            worst_rolling_start_ns: headline.start.get(),
            nominal,
            spike_ratio: if nominal > 0.0 {
                headline.count as f64 / nominal
            } else {
                0.0
            },
            bound: self.limiter.bound(rolling),
            profile,
            backend,
            replications: None,
            adversary: None,
            tight: None,
            lower_bound: None,
            instances: match &self.limiter {
                Limiter::Cluster(cluster) => Some(cluster.admitted_per_instance().to_vec()),
                _ => None,
            },
            delay: self.delays.as_ref().map(|delays| DelaySummary {
                delayed: delays.len(),
                p50_ns: delays.value_at_quantile(0.5),
                p99_ns: delays.value_at_quantile(0.99),
                max_ns: delays.max(),
            }),
        };
        RunResult {
            summary,
            timeline: self.timeline,
            window_edges: self.limiter.window_edges(),
            curve: options.curve.iter().map(|&interval| at(interval)).collect(),
            trailing: self.trailing.map(Trailing::finish),
        }
    }
}
