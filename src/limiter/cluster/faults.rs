//! The shared store failing: outages during which no instance reaches it,
//! each answered as `on_error` says, and failovers that lose the increments
//! of the last moments (asynchronous replication).
//!
//! Real limiters disagree on what to do without their store: Kong
//! (`fault_tolerant`, the default), Envoy's rate limit filter
//! (`failure_mode_deny = false`) and Spring Cloud Gateway let every request
//! through; Traefik answers 500; some libraries fall back to a counter per
//! instance, which lets K times the limit through.

use std::collections::VecDeque;

use serde::Deserialize;

use crate::error::{FieldError, field_error};
use crate::limiter::fixed_window::FixedWindow;
use crate::limiter::{Align, Decision, Hint, RateLimiter};
use crate::time::Nanos;

/// The most outages or failovers one store may list.
pub const MAX_EVENTS: usize = 1_000;

/// What an instance does when the store does not answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// Let the request through (fail open): Kong, Envoy, Spring Cloud Gateway.
    #[default]
    Allow,
    /// Reject it, with no hint (Traefik's 500).
    Deny,
    /// Decide on a fixed window of its own, N per W on its own clock, fresh
    /// at each outage: K instances let up to K times the limit through.
    Local,
}

impl OnError {
    /// As written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Allow => "allow",
            OnError::Deny => "deny",
            OnError::Local => "local",
        }
    }
}

/// A span of true time during which the store does not answer.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outage {
    /// When it starts.
    pub at: Nanos,
    /// How long it lasts.
    #[serde(rename = "for")]
    pub length: Nanos,
}

impl Outage {
    /// When it ends (exclusive).
    pub fn end(&self) -> Nanos {
        Nanos(self.at.get().saturating_add(self.length.get()))
    }
}

/// A failover to a replica that had not yet received the last `lost` of
/// increments: they are gone, and counters continue from what it had.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failover {
    /// When it happens.
    pub at: Nanos,
    /// The increments of how long before it are lost.
    pub lost: Nanos,
}

/// The store's faults as written, checked against the run.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Outages, in time order, not overlapping.
    pub outages: Vec<Outage>,
    /// What instances do during them.
    pub on_error: OnError,
    /// Failovers, in time order.
    pub failovers: Vec<Failover>,
}

impl Faults {
    /// Checks and orders the lists for a run of `duration`.
    pub fn new(
        mut outages: Vec<Outage>,
        on_error: OnError,
        mut failovers: Vec<Failover>,
        duration: Nanos,
    ) -> Result<Faults, FieldError> {
        if outages.len() > MAX_EVENTS || failovers.len() > MAX_EVENTS {
            return Err(field_error!(
                "cluster.store",
                "at most {MAX_EVENTS} outages and {MAX_EVENTS} failovers"
            ));
        }
        outages.sort_by_key(|o| o.at);
        failovers.sort_by_key(|f| f.at);
        for outage in &outages {
            if outage.length == Nanos::ZERO {
                return Err(field_error!(
                    "cluster.store.outages",
                    "the outage at {} lasts 0; give `for` a length",
                    outage.at
                ));
            }
            if outage.at >= duration {
                return Err(field_error!(
                    "cluster.store.outages",
                    "the outage at {} starts after the end of the run ({duration})",
                    outage.at
                ));
            }
        }
        if let Some(pair) = outages.windows(2).find(|p| p[1].at < p[0].end()) {
            return Err(field_error!(
                "cluster.store.outages",
                "the outages at {} and {} overlap; merge them",
                pair[0].at,
                pair[1].at
            ));
        }
        if let Some(f) = failovers.iter().find(|f| f.at >= duration) {
            return Err(field_error!(
                "cluster.store.failover",
                "the failover at {} is after the end of the run ({duration})",
                f.at
            ));
        }
        Ok(Faults {
            outages,
            on_error,
            failovers,
        })
    }

    /// Whether there is anything to model.
    pub fn is_empty(&self) -> bool {
        self.outages.is_empty() && self.failovers.is_empty()
    }

    /// The most one failover can give back: every increment of its `lost`.
    pub fn longest_loss(&self) -> Option<Nanos> {
        self.failovers.iter().map(|f| f.lost).max()
    }
}

/// An increment the store holds, for a failover to take back: when it
/// landed (true time) and the window key it counted in.
pub type Increment = (u64, u64);

/// The faults as a run goes: which outage is next, each instance's fallback
/// counter during one, and the recent increments a failover would lose.
#[derive(Clone, Debug)]
pub struct FaultState {
    faults: Faults,
    /// The first outage not yet over.
    next_outage: usize,
    /// The first failover not yet happened.
    next_failover: usize,
    /// Per instance, its own window (`local`): made at its first outage and
    /// kept between outages, as an in-process fallback limiter is, so a
    /// flapping store does not hand out a fresh window at every outage.
    fallback: Vec<Option<FixedWindow>>,
    window: u64,
    threshold: u64,
    /// Increments within the longest loss of any failover still to come.
    journal: VecDeque<Increment>,
    longest_loss: u64,
}

impl FaultState {
    /// Before the run, for `instances` instances of a shared `threshold` per `window`.
    pub fn new(faults: Faults, instances: usize, window: u64, threshold: u64) -> FaultState {
        FaultState {
            longest_loss: faults.longest_loss().map_or(0, Nanos::get),
            faults,
            next_outage: 0,
            next_failover: 0,
            fallback: vec![None; instances],
            window,
            threshold,
            journal: VecDeque::new(),
        }
    }

    /// The failovers due by `now`, oldest first: each with the increments it
    /// loses (landed within its `lost` before it), taken out of the journal.
    pub fn failovers_due(&mut self, now: u64) -> Vec<Vec<Increment>> {
        let mut due = Vec::new();
        while let Some(failover) = self
            .faults
            .failovers
            .get(self.next_failover)
            .filter(|f| f.at.get() <= now)
        {
            let (at, lost) = (failover.at.get(), failover.lost.get());
            let from = at.saturating_sub(lost);
            let (kept, gone): (Vec<Increment>, Vec<Increment>) = self
                .journal
                .drain(..)
                .partition(|&(landed, _)| landed <= from || landed > at);
            self.journal = kept.into();
            due.push(gone);
            self.next_failover += 1;
        }
        due
    }

    /// Records an increment landing at `at` in window `key`, while a failover
    /// to come could lose it.
    pub fn journal(&mut self, at: u64, key: u64) {
        if self.next_failover >= self.faults.failovers.len() {
            return;
        }
        self.journal.push_back((at, key));
        while self
            .journal
            .front()
            .is_some_and(|&(landed, _)| landed.saturating_add(self.longest_loss) < at)
        {
            self.journal.pop_front();
        }
    }

    /// Whether the store is down at true time `now`.
    pub fn down(&mut self, now: u64) -> bool {
        while self
            .faults
            .outages
            .get(self.next_outage)
            .is_some_and(|o| o.end().get() <= now)
        {
            self.next_outage += 1;
        }
        self.faults
            .outages
            .get(self.next_outage)
            .is_some_and(|o| o.at.get() <= now)
    }

    /// The answer `on_error` gives instance `instance`, whose clock reads
    /// `clock` at true time `now`, while the store is down.
    pub fn answer<const HINTS: bool>(&mut self, instance: usize, clock: u64, now: u64) -> Decision {
        match self.faults.on_error {
            OnError::Allow => Decision::Admit,
            OnError::Deny => Decision::reject::<HINTS>(|| Hint::NONE),
            OnError::Local => {
                let (window, threshold) = (self.window, self.threshold);
                let fallback = self.fallback[instance].get_or_insert_with(|| {
                    FixedWindow::new(Nanos(window), threshold, Align::Epoch)
                        .expect("a shared window is valid")
                });
                match fallback.decide_with::<HINTS>(Nanos(clock)) {
                    Decision::Reject(hint) => {
                        Decision::Reject(super::in_true_time(hint, clock, now))
                    }
                    decision => decision,
                }
            }
        }
    }

    /// Takes back the last admission of instance `instance`'s own window.
    pub fn refund(&mut self, instance: usize, clock: u64) {
        if let Some(fallback) = &mut self.fallback[instance] {
            fallback.refund(Nanos(clock));
        }
    }

    /// The faults as configured.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }
}
