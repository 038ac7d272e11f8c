//! A sweep's results, ready to render: its identity, its grid and every
//! point's runs, with the questions the renderers ask of them (names in
//! order, a run at a point, a group's labels, whether a run held its
//! backend). Results live here, beside the sweep; `report` and `chart` only
//! read them.

use std::fmt::Write as _;

use crate::summary::RunSummary;
use crate::sweep::shard::{Identity, PointResult};
use crate::sweep::{Grid, values};

/// A sweep's results, ready to render.
pub struct SweepResults<'a> {
    /// What was swept.
    pub identity: &'a Identity,
    /// Its grid, read back from the identity.
    pub grid: Grid,
    /// Every point's results, in order.
    pub points: &'a [PointResult],
}

impl SweepResults<'_> {
    /// Each run with its point, in point order, then the runs' own order.
    pub fn rows(&self) -> impl Iterator<Item = (usize, &RunSummary)> {
        self.points
            .iter()
            .flat_map(|p| p.runs.iter().map(move |run| (p.point, run)))
    }

    /// The workloads' names, in the scenario's order.
    pub fn workloads(&self) -> Vec<&str> {
        self.distinct(|run| &run.workload)
    }

    /// The limiters' names, in the scenario's order.
    pub fn limiters(&self) -> Vec<&str> {
        self.distinct(|run| &run.limiter)
    }

    fn distinct<'s>(&'s self, name: impl Fn(&'s RunSummary) -> &'s String) -> Vec<&'s str> {
        let mut names: Vec<&str> = Vec::new();
        for (_, run) in self.rows() {
            if !names.contains(&name(run).as_str()) {
                names.push(name(run));
            }
        }
        names
    }

    /// The run of `workload` through `limiter` at `point`.
    pub fn run(&self, point: usize, workload: &str, limiter: &str) -> Option<&RunSummary> {
        self.points
            .get(point)?
            .runs
            .iter()
            .find(|r| r.workload == workload && r.limiter == limiter)
    }

    /// How each group's value at `point` is printed: its axes' values,
    /// joined by " / " when zipped axes differ.
    pub fn group_labels(&self, point: usize) -> Vec<String> {
        let coordinates = self.grid.coordinates(point);
        self.grid
            .groups
            .iter()
            .zip(coordinates)
            .map(|(group, c)| {
                let mut labels: Vec<String> =
                    group.iter().map(|a| values::label(&a.values[c])).collect();
                labels.dedup();
                labels.join(" / ")
            })
            .collect()
    }

    /// A group's axes in words: `limiter.fixed-1s.threshold (with …)`.
    pub fn group_name(&self, group: usize) -> String {
        let axes = &self.grid.groups[group];
        let mut name = axes[0].path.to_string();
        if axes.len() > 1 {
            let rest: Vec<String> = axes[1..].iter().map(|a| a.path.to_string()).collect();
            let _ = write!(name, " (with {})", rest.join(", "));
        }
        name
    }
}

/// Whether a run stayed within its backend (no second over capacity, no
/// drops, in any replication); `None` without a backend.
pub fn within_capacity(run: &RunSummary) -> Option<bool> {
    run.backend
        .as_ref()
        .map(|_| crate::check::failures(run).is_empty())
}

/// The most admitted in one second over every replication (for a
/// whole-second log, packed against its seconds' edges when more: what
/// [`within_capacity`] judges), and the capacity it is held to.
pub fn worst_second(run: &RunSummary) -> Option<(u64, u64)> {
    let backend = run.backend.as_ref()?;
    Some((run.judged_1s()?, backend.capacity))
}
