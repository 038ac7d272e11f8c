//! Redisson's `RateType.OVERALL` in a cluster: one log of permits in the
//! store, each scored — and expired — by the clock of the instance that
//! runs the script (see [`crate::limiter::redisson`]).

use super::mode::{Mode, Reading, Stretch};
use super::{in_true_time, instance_clock_span};
use crate::limiter::redisson::Redisson;
use crate::limiter::{Decision, RateLimiter};
use crate::time::Nanos;

/// The one shared log.
#[derive(Clone, Debug)]
pub struct SharedLog {
    log: Redisson,
}

impl SharedLog {
    /// An empty log, as `log` is built.
    pub fn new(log: Redisson) -> SharedLog {
        SharedLog { log }
    }
}

impl Mode for SharedLog {
    /// The script runs on the log with the instance's clock as `now`; the
    /// delay it answers is a duration, the same in true time.
    fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision {
        match self.log.decide_on_clock::<HINTS>(at.clock) {
            Decision::Reject(hint) => Decision::Reject(in_true_time(hint, at.clock, at.now)),
            other => other,
        }
    }

    fn refund(&mut self, _instance: usize, clock: u64) {
        self.log.refund(Nanos(clock));
    }

    /// A permit leaves once some instance's reading is `interval` ms past
    /// its score; two readings g apart differ by at most the instances'
    /// clock span over g.
    fn bound(&self, stretch: &Stretch) -> u64 {
        self.log.bound_across_clocks(stretch.interval, |gap| {
            instance_clock_span(stretch.clocks, stretch.duration, gap)
        })
    }

    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        self.log.memory_at_most(keys, requests, hashed)
    }

    fn nominal(&self, interval: Nanos) -> Option<f64> {
        Some(self.log.nominal(interval))
    }

    fn describe(&self, _: String) -> (String, &'static str) {
        (
            self.log.describe(),
            "one log in the store, scored by each instance's clock",
        )
    }
}
