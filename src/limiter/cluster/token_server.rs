//! Sentinel's cluster mode in a cluster: one token server decides for every
//! instance on its own clock, and each instance keeps the rule's local
//! statistics, which `StatisticSlot` feeds with every pass whoever granted
//! it. When the server cannot be reached (`[cluster.store] outages`),
//! `FlowRuleChecker.fallbackToLocalOrPass` (sentinel-core 1.8) decides:
//! with `fallback_to_local_when_fail` each instance checks the rule's own
//! controller on those statistics, without it every request passes.

use super::clock::Clock;
use super::mode::{Mode, Reading, Stretch};
use crate::limiter::sentinel::Sentinel;
use crate::limiter::{Decision, RateLimiter};
use crate::time::Nanos;

/// The server, its clock, and each instance's own rule.
#[derive(Clone, Debug)]
pub struct TokenServer {
    server: Sentinel,
    clock: Clock,
    rtt: u64,
    /// The server clock's last reading: its statistics never go back.
    last: u64,
    local: Vec<Sentinel>,
    fallback: bool,
    /// Whether the last admission was the local rule's own.
    last_local: bool,
}

impl TokenServer {
    /// `server` on `clock`, reached in `rtt`; `instances` copies of the rule's
    /// `local` controller, checked when the server fails if `fallback`.
    pub fn new(
        server: Sentinel,
        clock: Clock,
        rtt: u64,
        local: Sentinel,
        instances: usize,
        fallback: bool,
    ) -> TokenServer {
        TokenServer {
            server,
            clock,
            rtt,
            last: 0,
            local: vec![local; instances],
            fallback,
            last_local: false,
        }
    }
}

impl Mode for TokenServer {
    /// The server decides when the request reaches it, half a round trip
    /// later, on its clock; a pass is counted in the instance's statistics
    /// too. A block carries no hint.
    fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision {
        let reading = self.clock.read(at.now.saturating_add(self.rtt / 2));
        self.last = self.last.max(reading);
        let decision = self.server.decide_with::<HINTS>(Nanos(self.last));
        if decision.admitted() {
            self.local[at.instance].record(Nanos(at.clock));
        }
        self.last_local = false;
        decision
    }

    /// The rule's own controller on the instance's statistics and clock,
    /// or a pass (which the statistics count all the same).
    fn when_down<const HINTS: bool>(&mut self, at: Reading) -> Option<Decision> {
        let rule = &mut self.local[at.instance];
        let decision = if self.fallback {
            rule.decide_with::<HINTS>(Nanos(at.clock))
        } else {
            rule.record(Nanos(at.clock));
            Decision::Admit
        };
        self.last_local = true;
        Some(decision)
    }

    fn refund(&mut self, instance: usize, clock: u64) {
        if self.last_local && self.fallback {
            self.local[instance].refund(Nanos(clock));
            return;
        }
        if !self.last_local {
            self.server.refund(Nanos(self.last));
        }
        self.local[instance].unrecord(Nanos(clock));
    }

    /// The server's bound over the span of its clock an interval covers.
    fn bound(&self, stretch: &Stretch) -> u64 {
        self.server.bound(Nanos(
            self.clock.stretch(stretch.interval, stretch.duration),
        ))
    }

    /// Each instance's own rule besides the server, or none without the
    /// fallback: every request passes while the server is down.
    fn down_bound(&self, stretch: &Stretch) -> Option<u64> {
        Some(if self.fallback {
            super::bound_on_own_clocks(&self.local, stretch)
        } else {
            u64::MAX
        })
    }

    /// The rate-limiter behaviour queues in the fallback; the server never does.
    fn max_delay(&self) -> Nanos {
        match (&self.local[0], self.fallback) {
            (rule, true) => rule.max_delay(),
            _ => Nanos::ZERO,
        }
    }

    fn step_times(&self) -> Vec<Nanos> {
        self.clock.step_times()
    }

    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        let each = self.local[0].memory_at_most(keys, requests, hashed);
        self.server.memory_at_most(keys, requests, hashed)
            + crate::limiter::allocation::<Sentinel>(self.local.len() as u128)
            + self.local.len() as u128 * each
    }

    fn nominal(&self, interval: Nanos) -> Option<f64> {
        Some(self.server.nominal(interval))
    }

    fn describe(&self, _: String) -> (String, &'static str) {
        (
            self.server.describe(),
            if self.fallback {
                "one token server; each instance's own rule when it fails"
            } else {
                "one token server; everything passes when it fails"
            },
        )
    }
}
