//! Batched counters (Kong's `sync_rate`): each instance counts locally and
//! adds its counts to the shared counter every `sync_interval`, deciding on
//! the shared count as of its last sync plus its own unsynced ones.

use std::collections::BTreeMap;

use super::mode::{Mode, Reading, Stretch};
use super::window_decision;
use crate::limiter::Decision;

/// Shared counters keyed by instance clocks, synced in batches.
#[derive(Clone, Debug)]
pub struct Batched {
    window: u64,
    threshold: u64,
    /// The sync period.
    interval: u64,
    /// The store's counts by window key.
    counts: BTreeMap<u64, u64>,
    /// Per instance: counts not yet added to the store, by key.
    unsynced: Vec<BTreeMap<u64, u64>>,
    /// Per instance: the store's counts as of its last sync.
    snapshot: Vec<BTreeMap<u64, u64>>,
    /// Per instance: the next sync time (true time).
    next_sync: Vec<u64>,
    /// The instance and key of the last admission, to take it back.
    last: (usize, u64),
}

impl Batched {
    /// `instances` instances, none synced yet.
    pub fn new(window: u64, threshold: u64, interval: u64, instances: usize) -> Batched {
        Batched {
            window,
            threshold,
            interval,
            counts: BTreeMap::new(),
            unsynced: vec![BTreeMap::new(); instances],
            snapshot: vec![BTreeMap::new(); instances],
            next_sync: vec![0; instances],
            last: (0, 0),
        }
    }
}

impl Mode for Batched {
    /// Instance `instance`'s answer at true time `now`, its clock reading `clock`.
    fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision {
        let Reading {
            instance,
            clock,
            now,
            ..
        } = at;
        let key = clock / self.window;
        if now >= self.next_sync[instance] {
            for (k, count) in std::mem::take(&mut self.unsynced[instance]) {
                *self.counts.entry(k).or_insert(0) += count;
            }
            self.snapshot[instance] = self
                .counts
                .range(key.saturating_sub(2)..)
                .map(|(k, c)| (*k, *c))
                .collect();
            self.next_sync[instance] = (now / self.interval + 1).saturating_mul(self.interval);
        }
        let seen = self.snapshot[instance].get(&key).copied().unwrap_or(0)
            + self.unsynced[instance].get(&key).copied().unwrap_or(0);
        let admit = seen < self.threshold;
        if admit {
            *self.unsynced[instance].entry(key).or_insert(0) += 1;
            self.last = (instance, key);
        }
        window_decision::<HINTS>(admit, key, self.window, clock, now)
    }

    /// Takes back the last admission, not yet synced.
    fn refund(&mut self, _: usize, _: u64) {
        let (instance, key) = self.last;
        if let Some(count) = self.unsynced[instance].get_mut(&key) {
            *count -= 1;
        }
    }

    /// Each instance may spend N per key before it sees the others' counts:
    /// K·N per window key, over every key the clocks can read in `span`.
    fn bound(&self, stretch: &Stretch) -> u64 {
        let span = stretch.instance_span;
        let per_key = self.threshold.saturating_mul(self.unsynced.len() as u64);
        crate::limiter::fixed_window::windows_met(span, self.window).saturating_mul(per_key)
    }

    fn describe(&self, shared: String) -> (String, &'static str) {
        (
            shared,
            "one shared counter, windows by each instance's clock",
        )
    }
}
