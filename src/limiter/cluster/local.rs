//! `mode = "local"`: each instance runs its own limiter on its own clock.

use super::in_true_time;
use super::mode::{Mode, Reading, Stretch};
use crate::limiter::{Decision, Limiter, RateLimiter};
use crate::time::Nanos;

/// K independent limiters.
#[derive(Clone, Debug)]
pub struct Local {
    instances: Vec<Limiter>,
}

impl Local {
    /// `instances`, each in its initial state.
    pub fn new(instances: Vec<Limiter>) -> Local {
        Local { instances }
    }

    /// One instance's limiter.
    pub fn first(&self) -> &Limiter {
        &self.instances[0]
    }

    /// Each instance's limiter leaves `empty` keys unlimited, or turns them away, where its
    /// gateway does ([`Limiter::treat_empty_keys`]).
    pub fn treat_empty_keys(&mut self, empty: &crate::traffic::EmptyKeys) {
        for instance in &mut self.instances {
            instance.treat_empty_keys(empty);
        }
    }
}

impl Mode for Local {
    /// The instance's own limiter decides on its own clock; its hint is
    /// converted to true time.
    fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision {
        match self.instances[at.instance].decide_keyed::<HINTS>(Nanos(at.clock), at.key) {
            Decision::Reject(hint) => Decision::Reject(in_true_time(hint, at.clock, at.now)),
            other => other,
        }
    }

    fn refund(&mut self, instance: usize, clock: u64) {
        self.instances[instance].refund(Nanos(clock));
    }

    /// Each instance's bound over the longest stretch of its own clock an
    /// interval can cover, summed.
    fn bound(&self, stretch: &Stretch) -> u64 {
        super::bound_on_own_clocks(&self.instances, stretch)
    }

    fn max_delay(&self) -> Nanos {
        self.first().max_delay()
    }

    /// As its instances' limiter.
    fn keys_matter(&self) -> bool {
        self.first().keys_matter()
    }

    /// The most memory the instances' limiters can take, each seeing any of
    /// `keys` keys in its share of `requests` (balancing may be uneven: the
    /// share is counted twice).
    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        let share = requests
            .div_ceil(self.instances.len().max(1) as u64)
            .saturating_mul(2);
        let each = self
            .instances
            .first()
            .map_or(0, |limiter| limiter.memory_at_most(keys, share, hashed));
        super::super::allocation::<Limiter>(self.instances.len() as u128)
            + self.instances.len() as u128 * each
    }

    fn nominal(&self, interval: Nanos) -> Option<f64> {
        Some(self.first().nominal(interval))
    }

    fn describe(&self, _: String) -> (String, &'static str) {
        (self.first().describe(), super::OWN_COUNTERS)
    }
}
