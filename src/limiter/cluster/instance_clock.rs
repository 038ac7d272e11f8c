//! `mode = "shared-instance-clock"`: one shared counter per window, the
//! window's key computed from each instance's own clock (the
//! envoyproxy/ratelimit design), updated atomically or read first and
//! incremented a round trip later.

use std::collections::{BTreeMap, VecDeque};

use super::faults::Increment;
use super::mode::{Mode, Reading, Stretch};
use super::{Update, window_decision};
use crate::limiter::Decision;

/// Shared counters keyed by instance clocks.
#[derive(Clone, Debug)]
pub struct InstanceClock {
    window: u64,
    threshold: u64,
    update: Update,
    rtt: u64,
    /// Counts by window key: landed increments only.
    counts: BTreeMap<u64, u64>,
    /// Increments sent but not yet landed: (true time they land, key).
    in_flight: VecDeque<(u64, u64)>,
    /// The key of the last admission, to take it back.
    last: u64,
}

impl InstanceClock {
    /// No counter yet.
    pub fn new(window: u64, threshold: u64, update: Update, rtt: u64) -> InstanceClock {
        InstanceClock {
            window,
            threshold,
            update,
            rtt,
            counts: BTreeMap::new(),
            in_flight: VecDeque::new(),
            last: 0,
        }
    }
}

impl Mode for InstanceClock {
    /// The answer to a request at true time `now`, on an instance whose
    /// clock reads `clock`; `oldest` is the furthest-behind instance clock.
    fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision {
        let Reading {
            clock, now, oldest, ..
        } = at;
        // Increments that have landed by now are visible.
        while let Some(&(_, key)) = self.in_flight.front().filter(|(lands, _)| *lands <= now) {
            self.in_flight.pop_front();
            *self.counts.entry(key).or_insert(0) += 1;
        }
        let key = clock / self.window;
        let admit = self.counts.get(&key).copied().unwrap_or(0) < self.threshold;
        if admit {
            match self.update {
                Update::Atomic => *self.counts.entry(key).or_insert(0) += 1,
                Update::ReadThenIncrement => self
                    .in_flight
                    .push_back((now.saturating_add(self.rtt), key)),
            }
            self.last = key;
        }
        // Keys far behind every clock can no longer be used.
        let oldest = oldest / self.window;
        while self
            .counts
            .first_key_value()
            .is_some_and(|(&k, _)| k + 2 < oldest)
        {
            self.counts.pop_first();
        }
        window_decision::<HINTS>(admit, key, self.window, clock, now)
    }

    /// The window key of the last admission.
    fn last_key(&self) -> u64 {
        self.last
    }

    /// A failover loses one landed increment of each window key it names.
    fn lose(&mut self, increments: &[Increment]) {
        for &(_, key) in increments {
            if let Some(count) = self.counts.get_mut(&key) {
                *count = count.saturating_sub(1);
            }
        }
    }

    /// Takes back the last admission, landed or still in flight.
    fn refund(&mut self, _: usize, _: u64) {
        let key = self.last;
        match self.in_flight.iter().rposition(|&(_, k)| k == key) {
            Some(position) => {
                self.in_flight.remove(position);
            }
            None => *self.counts.entry(key).or_insert(1) -= 1,
        }
    }

    /// N per window key, over every key the clocks can read in an interval
    /// (`span` of instance-clock time); none at all for a read-then-increment
    /// counter with a round trip: every request within it sees the same count.
    fn bound(&self, stretch: &Stretch) -> u64 {
        let span = stretch.instance_span;
        if self.update == Update::ReadThenIncrement && self.rtt > 0 {
            return u64::MAX;
        }
        crate::limiter::fixed_window::windows_met(span, self.window).saturating_mul(self.threshold)
    }

    fn describe(&self, shared: String) -> (String, &'static str) {
        (
            shared,
            "one shared counter, windows by each instance's clock",
        )
    }
}
