//! Traffic driven per run: a workload whose arrivals depend on the limiter's
//! answers. Open-loop workloads are generated once and shared by every
//! limiter (the fast path in [`super`]); a driven workload makes one driver
//! per limiter, which hands out arrivals one at a time, hears every answer,
//! and may schedule more requests on the run's event queue.

use anyhow::{Context as _, Result};

use super::events::Events;
use crate::adversary::{self, Found};
use crate::limiter::Decision;
use crate::scenario::{NamedLimiter, Scenario, Workload};
use crate::summary::RunSummary;
use crate::time::Nanos;
use crate::traffic::{Arrival, SourceConfig};

/// A run's traffic, reacting to the limiter.
pub trait Driver {
    /// When its next arrival comes, if it has one.
    fn next_time(&self) -> Option<Nanos>;

    /// Takes its next arrival.
    fn next(&mut self) -> Option<Arrival>;

    /// Hears the limiter's answer to `arrival`; may schedule requests.
    fn answer(&mut self, arrival: Arrival, decision: Decision, events: &mut Events);

    /// Adds what it knows of the run to its summary.
    fn annotate(&self, summary: &mut RunSummary);
}

/// Whether `workload` is driven per run rather than generated once: it
/// holds an adversary (the only driven source so far; validation makes it
/// the workload's only source).
pub fn is_driven(workload: &Workload) -> bool {
    workload
        .sources
        .iter()
        .any(|s| s.adversary_budget().is_some())
}

/// The driver of the driven `workload` for the limiter `named`.
pub fn for_limiter(
    scenario: &Scenario,
    workload: &Workload,
    named: &NamedLimiter,
) -> Result<Box<dyn Driver>> {
    let budget = workload
        .sources
        .iter()
        .find_map(SourceConfig::adversary_budget)
        .context("an open-loop workload has no driver")?;
    let found = adversary::search(&named.limiter, budget, scenario.metrics.rolling, scenario.duration)
        .with_context(|| format!("workload {:?}: the run ({}) is too short for an adversary; make it at least a few windows long", workload.name, scenario.duration))?;
    Ok(Box::new(Pattern::new(found)))
}

/// The adversary's pattern for one limiter, found before the run: it
/// ignores the answers, since it was searched against this very limiter.
struct Pattern {
    found: Found,
    next: usize,
}

impl Pattern {
    fn new(found: Found) -> Pattern {
        Pattern { found, next: 0 }
    }
}

impl Driver for Pattern {
    fn next_time(&self) -> Option<Nanos> {
        self.found.arrivals.get(self.next).copied()
    }

    fn next(&mut self) -> Option<Arrival> {
        let time = self.next_time()?;
        self.next += 1;
        Some(Arrival::at(time))
    }

    fn answer(&mut self, _: Arrival, _: Decision, _: &mut Events) {}

    fn annotate(&self, summary: &mut RunSummary) {
        summary.adversary = Some(self.found.description.clone());
        summary.tight = Some(self.found.tight);
        summary.lower_bound = Some(self.found.worst);
    }
}
