//! A partitioning's pieces decided apart and counted together: a shard
//! decides its part's requests (or its slice of time's) and keeps the
//! figures per key as counts by value ([`Decide`]); a merge counts every
//! part's decisions in the whole workload's order, as one run counts its
//! own, and adds the counts by value ([`Recount`]). Only the decisions
//! travel between them.

use super::Options;
use super::run::RunState;
use crate::metrics::per_key::KeyTallies;
use crate::partition::Code;
use crate::results::{RunResult, WorkloadResults};
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::traffic::{Arrival, Key};

/// The placements of a piece's requests: as the run places them, then, for
/// a log of whole seconds whose requests a run also packs against the
/// seconds' edges, the two packed placements ([`super::packed_time`]).
fn placed(arrival: Arrival, placement: usize, packed: Option<[u64; 2]>) -> Arrival {
    match (placement, packed) {
        (0, _) | (_, None) => arrival,
        (p, Some(origin_last)) => Arrival {
            time: super::packed_time(arrival.time, origin_last, p - 1),
            ..arrival
        },
    }
}

/// The placements a run decides: 1, or 3 when `packed` (the origin of a
/// log's whole seconds) says its requests are also packed.
fn placements(packed: Option<[u64; 2]>) -> usize {
    if packed.is_some() { 3 } else { 1 }
}

/// A run's options when its figures alone are wanted.
fn figures() -> Options {
    Options {
        skip_timeline: true,
        ..Options::default()
    }
}

/// For a log whose whole seconds start at `origin` and are packed: that
/// origin and the run's last instant, as [`super::packed_time`] takes them.
fn packed_span(scenario: &Scenario, origin: Option<u64>) -> Option<[u64; 2]> {
    origin.map(|origin| [origin, scenario.duration.get().saturating_sub(1)])
}

/// What a shard keeps of a limiter's run: its figures per key as counts by
/// value and, kept per key, the most keys it held at once and its resets.
pub type Decided = (Option<KeyTallies>, Option<(u64, u64)>);

/// Some limiters deciding one piece of a workload, each placement apart.
pub struct Decide {
    runs: Vec<Vec<RunState>>,
    packed: Option<[u64; 2]>,
}

impl Decide {
    /// `limiters` (by number) of `scenario` deciding a piece of workload
    /// `workload`; `packed`, the origin of its log's whole seconds when a
    /// run packs them.
    pub fn new(
        scenario: &Scenario,
        workload: usize,
        limiters: &[usize],
        packed: Option<u64>,
    ) -> Decide {
        let keyed = scenario.workloads[workload].is_keyed();
        let empty = scenario.workloads[workload].empty_keys();
        let (figures, packed) = (figures(), packed_span(scenario, packed));
        let runs = limiters
            .iter()
            .map(|&l| {
                (0..placements(packed))
                    .map(|p| {
                        RunState::new(scenario, &figures, &scenario.limiters[l], keyed && p == 0)
                            .treating_empty_keys(&empty)
                    })
                    .collect()
            })
            .collect();
        Decide { runs, packed }
    }

    /// How many placements each limiter decides.
    pub fn placements(&self) -> usize {
        placements(self.packed)
    }

    /// Every limiter decides `arrival` in each placement, telling `out`
    /// (the limiter's place in the list, the placement) each decision.
    pub fn decide(
        &mut self,
        arrival: Arrival,
        out: &mut dyn FnMut(usize, usize, Code) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        for (slot, runs) in self.runs.iter_mut().enumerate() {
            for (placement, run) in runs.iter_mut().enumerate() {
                let decision = run.observe::<false>(placed(arrival, placement, self.packed));
                let code = Code {
                    admitted: decision.admitted(),
                    delay: decision.delay(),
                };
                out(slot, placement, code)?;
            }
        }
        Ok(())
    }

    /// Per limiter: its figures per key as counts by value, and with a
    /// limiter per key, the most keys it held at once and its resets.
    pub fn finish(self) -> Vec<Decided> {
        self.runs
            .into_iter()
            .map(|mut runs| runs[0].tallies())
            .collect()
    }
}

/// What a merge brings of a limiter decided by key: its parts' tallies
/// added, its most keys held at once and resets, and its parts' busiest keys.
pub struct Merged {
    /// The parts' figures per key, added.
    pub tallies: KeyTallies,
    /// The most keys held at once and the resets, over every part.
    pub state: (u64, u64),
    /// The busiest key of each part with the most: the first of them the
    /// whole run counts is its busiest.
    pub candidates: Vec<u64>,
    /// The workload's distinct keys that name nothing, absent and blank
    /// ([`crate::partition::LogFacts::absent`]).
    pub empty: [u64; 2],
}

/// A workload's decisions, made by shards, counted as one run counts its own.
pub struct Recount {
    /// Per limiter, one run per placement.
    runs: Vec<Vec<RunState>>,
    /// Per limiter: its tallies when decided by key.
    merged: Vec<Option<Merged>>,
    packed: Option<[u64; 2]>,
    options: Options,
    workload: usize,
}

impl Recount {
    /// Counting for workload `workload`, as a run with `options` counts;
    /// `merged`, per limiter, what its parts decided by key said (its
    /// figures per key are theirs, not counted again here).
    pub fn new(
        scenario: &Scenario,
        options: &Options,
        workload: usize,
        packed: Option<u64>,
        merged: Vec<Option<Merged>>,
    ) -> Recount {
        let keyed = scenario.workloads[workload].is_keyed();
        let empty = scenario.workloads[workload].empty_keys();
        let (figures, packed) = (figures(), packed_span(scenario, packed));
        let runs = scenario
            .limiters
            .iter()
            .zip(&merged)
            .map(|(named, merged)| {
                (0..placements(packed))
                    .map(|p| {
                        if p > 0 {
                            return RunState::new(scenario, &figures, named, false)
                                .treating_empty_keys(&empty);
                        }
                        let mut run =
                            RunState::new(scenario, options, named, keyed && merged.is_none())
                                .treating_empty_keys(&empty);
                        if let Some(merged) = merged {
                            run.watch(merged.candidates.clone());
                        }
                        run
                    })
                    .collect()
            })
            .collect();
        Recount {
            runs,
            merged,
            packed,
            options: options.clone(),
            workload,
        }
    }

    /// How many placements each limiter's decisions come in.
    pub fn placements(&self) -> usize {
        placements(self.packed)
    }

    /// Counts limiter `limiter`'s decision `code` on `arrival`, in placement
    /// `placement`; in the whole workload's order.
    pub fn record(&mut self, limiter: usize, placement: usize, arrival: Arrival, code: Code) {
        let arrival = placed(arrival, placement, self.packed);
        let delay = if code.admitted {
            code.delay
        } else {
            Nanos::ZERO
        };
        self.runs[limiter][placement].record(arrival, code.admitted, delay);
    }

    /// Each run's results, and the most each limiter admitted packed.
    pub fn finish(self, scenario: &Scenario) -> Recounted {
        let workload = &scenario.workloads[self.workload];
        let figures = Options::default();
        let mut runs = Vec::new();
        let mut packed = self.packed.map(|_| Vec::new());
        for ((placements, named), merged) in self
            .runs
            .into_iter()
            .zip(&scenario.limiters)
            .zip(&self.merged)
        {
            let mut placements = placements.into_iter();
            let run = placements.next().expect("the run's own placement");
            if let (Some(packed), Some(even), Some(odd)) =
                (&mut packed, placements.next(), placements.next())
            {
                let even = even.finish(scenario, &figures, &workload.name, &named.name);
                let odd = odd.finish(scenario, &figures, &workload.name, &named.name);
                packed.push(super::packed_worst(&even, &odd));
            }
            let merged = merged.as_ref().map(|m| {
                // No request of a part's busiest key counted: no key sent any.
                let busiest = run.watched().unwrap_or(m.tallies.busiest.1);
                super::run::FromShards {
                    tallies: &m.tallies,
                    busiest,
                    state: m.state,
                    empty: m.empty,
                }
            });
            runs.push(run.finish_with(
                scenario,
                &self.options,
                [&workload.name, &named.name],
                merged,
            ));
        }
        Recounted {
            workload: self.workload,
            runs,
            packed,
        }
    }
}

/// A workload's recounted runs, before their busiest clients are named.
pub struct Recounted {
    workload: usize,
    runs: Vec<RunResult>,
    packed: Option<Vec<super::PackedWorst>>,
}

impl Recounted {
    /// The clients the results name: each run's busiest.
    pub fn busiest(&self) -> Vec<u64> {
        self.runs
            .iter()
            .filter_map(|run| Some(run.summary.keys.as_ref()?.worst_key))
            .collect()
    }

    /// The workload's results as the whole run gives them, its busiest
    /// clients given their value and name by `name`.
    pub fn results(
        mut self,
        scenario: &Scenario,
        name: &dyn Fn(Key) -> (u64, Option<String>),
    ) -> WorkloadResults {
        let workload = &scenario.workloads[self.workload];
        super::finish_workload(scenario, workload, &mut self.runs, self.packed, true, name);
        WorkloadResults::new(workload, self.runs)
    }
}
