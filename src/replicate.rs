//! Replications: every stochastic workload run with several seeds derived
//! from the scenario's, on all cores, and each figure summarised over them.

use anyhow::Result;
use rayon::prelude::*;

use crate::results::Results;
use crate::scenario::Scenario;
use crate::sim::{self, Options};
use crate::summary::{Replications, RunSummary, Stat};

/// How many workload runs `simulate_replicated` makes: `replications` for
/// each stochastic workload, one for each deterministic one.
pub fn units(scenario: &Scenario, replications: u64) -> u64 {
    scenario
        .workloads
        .iter()
        .map(|w| {
            if w.sources.iter().any(|s| s.is_stochastic()) {
                replications
            } else {
                1
            }
        })
        .sum()
}

/// Runs the scenario `replications` times (deterministic workloads once),
/// calling `progress` after each workload × replication. Replication 0 keeps
/// its timelines and curves for the charts; the others only add statistics.
pub fn simulate_replicated(
    scenario: &Scenario,
    options: &Options,
    replications: u64,
    progress: &(dyn Fn() + Sync),
) -> Result<Results> {
    let units: Vec<(usize, u64)> = scenario
        .workloads
        .iter()
        .enumerate()
        .flat_map(|(index, workload)| {
            let count = if workload.sources.iter().any(|s| s.is_stochastic()) {
                replications
            } else {
                1
            };
            (0..count).map(move |replication| (index, replication))
        })
        .collect();
    // Replication 0 keeps whole results for the charts; the others keep
    // only their summaries, so memory does not grow with the replications.
    let results = units
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
            progress();
            let summaries: Vec<RunSummary> = workload
                .runs
                .iter()
                .map(|run| run.summary.clone())
                .collect();
            Ok((index, summaries, (replication == 0).then_some(workload)))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut workloads = Vec::with_capacity(scenario.workloads.len());
    for index in 0..scenario.workloads.len() {
        let of_workload: Vec<&Vec<RunSummary>> = results
            .iter()
            .filter(|(w, _, _)| *w == index)
            .map(|(_, summaries, _)| summaries)
            .collect();
        let mut workload = results
            .iter()
            .find_map(|(w, _, full)| full.as_ref().filter(|_| *w == index))
            .cloned()
            .expect("replication 0 of every workload is kept whole");
        if replications > 1 {
            for (limiter, run) in workload.runs.iter_mut().enumerate() {
                let summaries: Vec<&RunSummary> =
                    of_workload.iter().map(|runs| &runs[limiter]).collect();
                run.summary.replications = Some(statistics(&summaries));
            }
        }
        workloads.push(workload);
    }
    Ok(Results::new(scenario, options.curve.clone(), workloads))
}

fn statistics(runs: &[&RunSummary]) -> Replications {
    let stat = |figure: &dyn Fn(&RunSummary) -> Option<f64>| {
        let values: Option<Vec<f64>> = runs.iter().map(|run| figure(run)).collect();
        values.filter(|v| !v.is_empty()).map(|v| Stat::of(&v))
    };
    let always = |figure: &dyn Fn(&RunSummary) -> f64| {
        stat(&|run| Some(figure(run))).expect("at least one replication")
    };
    Replications {
        count: runs.len() as u64,
        worst_rolling: always(&|run| run.worst_rolling as f64),
        offered: always(&|run| run.offered as f64),
        admitted: always(&|run| run.admitted as f64),
        worst_1s: stat(&|run| run.backend.as_ref().map(|b| b.worst_1s as f64)),
        over_capacity: stat(&|run| run.backend.as_ref().map(|b| b.over_capacity as f64)),
        seconds_over_capacity: stat(&|run| run.backend.as_ref().map(|b| b.seconds_over_capacity)),
        dropped: stat(&|run| {
            run.backend
                .as_ref()?
                .queue
                .as_ref()
                .map(|q| q.dropped as f64)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
