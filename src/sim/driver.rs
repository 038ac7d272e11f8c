//! Traffic driven per run: a workload whose arrivals depend on the limiter's
//! answers. Open-loop workloads are generated once and shared by every
//! limiter (the fast path in [`super`]); a driven workload makes one driver
//! per limiter, which hands out arrivals one at a time, hears every answer,
//! and may schedule more requests on the run's event queue.

use anyhow::{Context as _, Result};

use super::events::{Attempt, Event, Events};
use crate::adversary::{self, Found};
use crate::limiter::Decision;
use crate::retry::{Budget, Retry};
use crate::scenario::{NamedLimiter, Scenario, Workload};
use crate::summary::RunSummary;
use crate::time::Nanos;
use crate::traffic::{Arrival, Merge, Rng};

/// A run's traffic, reacting to the limiter.
pub trait Driver {
    /// When its next arrival comes, if it has one.
    fn next_time(&self) -> Option<Nanos>;

    /// Takes its next arrival.
    fn next(&mut self) -> Option<Arrival>;

    /// Hears the limiter's answer to `arrival`, its request's `attempt`;
    /// may schedule requests.
    fn answer(
        &mut self,
        arrival: Arrival,
        attempt: Attempt,
        decision: Decision,
        events: &mut Events,
    );

    /// Adds what it knows of the run to its summary.
    fn annotate(&self, summary: &mut RunSummary);

    /// The error that cut its traffic short (a trace failing mid-read), if any.
    fn take_error(&mut self) -> Option<String> {
        None
    }
}

/// Whether `workload` is driven per run rather than generated once: its
/// clients retry, or it holds an adversary (validation makes that the
/// workload's only source).
pub fn is_driven(workload: &Workload) -> bool {
    workload.retry.is_some() || workload.adversary().is_some()
}

/// The driver of the driven `workload` for the limiter `named`.
pub fn for_limiter(
    scenario: &Scenario,
    workload: &Workload,
    named: &NamedLimiter,
    replication: u64,
) -> Result<Box<dyn Driver>> {
    if let Some(retry) = workload.retry {
        let arrivals = super::arrivals(scenario, workload, replication)?;
        let rng =
            crate::random::stream(scenario.seed ^ RETRY_STREAM, &workload.name, 0, replication);
        return Ok(Box::new(RetryingClients::new(
            arrivals,
            retry,
            rng,
            scenario.duration,
        )));
    }
    let budget = workload
        .adversary()
        .context("an open-loop workload has no driver")?
        .budget
        .get();
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
        let keys = self.found.keys.max(1) as usize;
        self.found.arrivals.get(self.next / keys).copied()
    }

    /// Each instant of the pattern once for every key, keys in turn.
    fn next(&mut self) -> Option<Arrival> {
        let time = self.next_time()?;
        let key = self.next as u64 % self.found.keys.max(1);
        self.next += 1;
        // Key 0 is the default key: a one-key pattern is unkeyed traffic.
        Some(Arrival {
            time,
            key: crate::traffic::Key::client(key),
        })
    }

    fn answer(&mut self, _: Arrival, _: Attempt, _: Decision, _: &mut Events) {}

    fn annotate(&self, summary: &mut RunSummary) {
        summary.adversary = Some(self.found.description.clone());
        summary.tight = Some(self.found.tight);
        summary.lower_bound = Some(self.found.worst);
    }
}

/// Sets the retry jitter's stream apart from the sources' own.
pub(crate) const RETRY_STREAM: u64 = 0x7265_7472_7921_2121;

/// Clients that retry: their requests' first attempts come from the
/// workload's sources, and a rejected request comes back as its retry
/// policy says, until admitted, out of attempts or budget, or past the run.
pub struct RetryingClients {
    arrivals: Merge,
    /// The next first attempt.
    head: Option<Arrival>,
    retry: Retry,
    /// The jitter's draws, in the order of rejections.
    rng: Rng,
    budget: Option<Budget>,
    /// The end of the run: a retry due then or later is not made.
    end: Nanos,
    gave_up: u64,
    budget_refused: u64,
    unfinished: u64,
}

impl RetryingClients {
    /// Clients sending `arrivals` and retrying as `retry` says, over a run
    /// ending at `end`.
    pub fn new(mut arrivals: Merge, retry: Retry, rng: Rng, end: Nanos) -> RetryingClients {
        RetryingClients {
            head: arrivals.next(),
            arrivals,
            budget: retry.budget.map(Budget::new),
            retry,
            rng,
            end,
            gave_up: 0,
            budget_refused: 0,
            unfinished: 0,
        }
    }
}

impl Driver for RetryingClients {
    fn next_time(&self) -> Option<Nanos> {
        self.head.map(|arrival| arrival.time)
    }

    fn next(&mut self) -> Option<Arrival> {
        let head = self.head.take()?;
        self.head = self.arrivals.next();
        Some(head)
    }

    fn answer(
        &mut self,
        arrival: Arrival,
        attempt: Attempt,
        decision: Decision,
        events: &mut Events,
    ) {
        let hint = match decision {
            Decision::Reject(hint) => hint,
            Decision::Admit | Decision::Delay(_) => {
                if let Some(budget) = &mut self.budget {
                    budget.admitted(attempt.number);
                }
                return;
            }
        };
        // A refusal no retry changes (a 403) is not a rate limit's no: a
        // client retrying those (429) gives up on it at once.
        if hint.forbidden || attempt.number >= self.retry.max_attempts {
            self.gave_up += 1;
            return;
        }
        let Some((at, slept)) = self.retry.next_attempt(
            arrival.time,
            hint,
            attempt.number,
            attempt.slept,
            &mut self.rng,
        ) else {
            self.gave_up += 1;
            return;
        };
        if at >= self.end {
            self.unfinished += 1;
            return;
        }
        if let Some(budget) = &mut self.budget
            && !budget.take()
        {
            self.gave_up += 1;
            self.budget_refused += 1;
            return;
        }
        let retry = Attempt {
            number: attempt.number + 1,
            first: attempt.first,
            slept,
        };
        events.schedule(
            at,
            Event::Arrive(
                Arrival {
                    time: at,
                    ..arrival
                },
                retry,
            ),
        );
    }

    fn annotate(&self, summary: &mut RunSummary) {
        if let Some(closed) = &mut summary.closed_loop {
            closed.gave_up = self.gave_up;
            closed.budget_refused = self.budget_refused;
            closed.unfinished = self.unfinished;
        }
    }

    fn take_error(&mut self) -> Option<String> {
        self.arrivals.take_error()
    }
}
