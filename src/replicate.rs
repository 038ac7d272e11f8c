//! Replications: every stochastic workload run with several seeds derived
//! from the scenario's, on all cores, and each figure summarised over them.

use anyhow::Result;
use rayon::prelude::*;

use std::collections::BTreeMap;

use crate::results::{Results, WorkloadResults};
use crate::scenario::Scenario;
use crate::sim::{self, Options};
use crate::summary::{Replications, RunSummary, Stat};

/// How many workload runs `simulate_replicated` makes: `replications` for
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

/// Runs the scenario `replications` times (deterministic workloads once),
/// telling `progress` of each workload × replication. Replication 0 keeps
/// its timelines and curves for the charts; the others only add statistics.
pub fn simulate_replicated(
    scenario: &Scenario,
    options: &Options,
    replications: u64,
    progress: &dyn Progress,
) -> Result<Results> {
    progress.start(units(scenario, replications));
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
    let tallies = units
        .par_iter()
        .map(|&(index, replication)| {
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
            Ok::<_, anyhow::Error>(one)
        })
        .try_reduce(empty, |a, b| Ok(a.merge(b)))?;
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
    Ok(Results::new(scenario, options.curve.clone(), workloads))
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

/// One figure over replications: how often each value came, exactly.
#[derive(Clone, Debug, Default)]
struct Tally {
    counts: BTreeMap<u64, u64>,
    n: u64,
    sum: u128,
}

impl Tally {
    fn add(&mut self, value: u64) {
        *self.counts.entry(value).or_insert(0) += 1;
        self.n += 1;
        self.sum += u128::from(value);
    }

    fn merge(&mut self, other: Tally) {
        for (value, count) in other.counts {
            *self.counts.entry(value).or_insert(0) += count;
        }
        self.n += other.n;
        self.sum += other.sum;
    }

    /// Mean, nearest-rank median and 99th percentile, and maximum, each
    /// value divided by `scale`; None with no values.
    fn stat(&self, scale: f64) -> Option<Stat> {
        if self.n == 0 {
            return None;
        }
        let rank = |q: f64| {
            let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
            let mut seen = 0;
            self.counts
                .iter()
                .find(|&(_, &count)| {
                    seen += count;
                    seen >= rank
                })
                .map_or(0, |(&value, _)| value) as f64
                / scale
        };
        Some(Stat {
            mean: self.sum as f64 / scale / self.n as f64,
            p50: rank(0.5),
            p99: rank(0.99),
            max: self.counts.keys().next_back().copied().unwrap_or(0) as f64 / scale,
        })
    }
}

/// The figures of one run that replications summarise.
#[derive(Clone, Debug, Default)]
struct RunTally {
    worst_rolling: Tally,
    offered: Tally,
    admitted: Tally,
    worst_1s: Tally,
    over_capacity: Tally,
    /// In nanoseconds.
    time_over_capacity: Tally,
    dropped: Tally,
}

impl RunTally {
    fn of(run: &RunSummary) -> RunTally {
        let mut tally = RunTally::default();
        tally.worst_rolling.add(run.worst_rolling);
        tally.offered.add(run.offered);
        tally.admitted.add(run.admitted);
        if let Some(backend) = &run.backend {
            tally.worst_1s.add(backend.worst_1s);
            tally.over_capacity.add(backend.over_capacity);
            tally
                .time_over_capacity
                .add((backend.seconds_over_capacity * 1e9).round() as u64);
            if let Some(queue) = &backend.queue {
                tally.dropped.add(queue.dropped);
            }
        }
        tally
    }

    fn merge(&mut self, other: RunTally) {
        self.worst_rolling.merge(other.worst_rolling);
        self.offered.merge(other.offered);
        self.admitted.merge(other.admitted);
        self.worst_1s.merge(other.worst_1s);
        self.over_capacity.merge(other.over_capacity);
        self.time_over_capacity.merge(other.time_over_capacity);
        self.dropped.merge(other.dropped);
    }

    fn statistics(&self) -> Replications {
        let always = |tally: &Tally| tally.stat(1.0).expect("at least one replication");
        Replications {
            count: self.offered.n,
            worst_rolling: always(&self.worst_rolling),
            offered: always(&self.offered),
            admitted: always(&self.admitted),
            worst_1s: self.worst_1s.stat(1.0),
            over_capacity: self.over_capacity.stat(1.0),
            seconds_over_capacity: self.time_over_capacity.stat(1e9),
            dropped: self.dropped.stat(1.0),
        }
    }
}

/// "simulated 100000000 requests (100000000 decisions) in 1.90 s: …; peak
/// memory 12.8 MB": what `results` took in `elapsed` (`run --stats`).
pub fn throughput(results: &Results, elapsed: std::time::Duration) -> String {
    // Every replication's requests count: mean × count is their exact sum.
    let total = |run: &crate::results::RunResult| match &run.summary.replications {
        Some(r) => (r.offered.mean * r.count as f64).round() as u64,
        None => run.summary.offered,
    };
    let decisions: u64 = results.runs().map(total).sum();
    // Every limiter of a workload is offered the same requests (open loop).
    let requests: u64 = results
        .workloads
        .iter()
        .filter_map(|w| w.runs.first())
        .map(total)
        .sum();
    let secs = elapsed.as_secs_f64();
    let peak = crate::memory::peak_kb().map_or(String::new(), |kb| {
        format!("; peak memory {:.1} MB", kb as f64 / 1024.0)
    });
    format!(
        "simulated {requests} requests ({decisions} decisions) in {secs:.2} s: {:.1} M requests/s, {:.1} M decisions/s{peak}",
        requests as f64 / secs / 1e6,
        decisions as f64 / secs / 1e6
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_gives_the_same_statistics_as_the_values_merged_in_any_order() {
        let values: Vec<u64> = (0..1000u64).map(|i| (i * 7919) % 313).collect();
        let expected = Stat::of(&values.iter().map(|&v| v as f64).collect::<Vec<_>>());
        let (mut a, mut b) = (Tally::default(), Tally::default());
        values[..400].iter().for_each(|&v| a.add(v));
        values[400..].iter().for_each(|&v| b.add(v));
        b.merge(a);
        let got = b.stat(1.0).unwrap();
        assert_eq!(
            (got.mean, got.p50, got.p99, got.max),
            (expected.mean, expected.p50, expected.p99, expected.max)
        );
        assert!(Tally::default().stat(1.0).is_none());
    }

    #[test]
    fn statistics_use_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let stat = Stat::of(&values);
        assert_eq!(
            (stat.mean, stat.p50, stat.p99, stat.max),
            (50.5, 50.0, 99.0, 100.0)
        );
        let one = Stat::of(&[7.0]);
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
    }
}
