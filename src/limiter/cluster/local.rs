//! `mode = "local"`: each instance runs its own limiter on its own clock.

use super::in_true_time;
use crate::limiter::{Decision, Limiter, RateLimiter};
use crate::time::Nanos;
use crate::traffic::Key;

/// K independent limiters.
#[derive(Clone, Debug)]
pub struct Local {
    instances: Vec<Limiter>,
}

impl Local {
    /// The most memory the instances' limiters can take, each seeing any of
    /// `keys` keys in its share of `requests` (balancing may be uneven: the
    /// share is counted twice).
    pub fn memory_at_most(&self, keys: u64, requests: u64) -> u128 {
        let share = requests
            .div_ceil(self.instances.len().max(1) as u64)
            .saturating_mul(2);
        let each = self
            .instances
            .first()
            .map_or(0, |limiter| limiter.memory_at_most(keys, share));
        super::super::allocation::<Limiter>(self.instances.len() as u128)
            + self.instances.len() as u128 * each
    }

    /// `instances`, each in its initial state.
    pub fn new(instances: Vec<Limiter>) -> Local {
        Local { instances }
    }

    /// Instance `instance`'s answer at its clock reading `clock` (true time `now`).
    pub fn decide<const HINTS: bool>(
        &mut self,
        instance: usize,
        clock: u64,
        now: u64,
        key: Key,
    ) -> Decision {
        match self.instances[instance].decide_keyed::<HINTS>(Nanos(clock), key) {
            Decision::Reject(hint) => Decision::Reject(in_true_time(hint, clock, now)),
            other => other,
        }
    }

    /// Takes back instance `instance`'s last admission, made at its clock reading `clock`.
    pub fn refund(&mut self, instance: usize, clock: u64) {
        self.instances[instance].refund(Nanos(clock));
    }

    /// Each instance's bound over the longest stretch of its own clock an
    /// interval can cover, summed.
    pub fn bound(&self, stretches: impl Iterator<Item = u64>) -> u64 {
        self.instances
            .iter()
            .zip(stretches)
            .map(|(limiter, stretch)| limiter.bound(Nanos(stretch)))
            .fold(0, u64::saturating_add)
    }

    /// One instance's limiter.
    pub fn first(&self) -> &Limiter {
        &self.instances[0]
    }
}
