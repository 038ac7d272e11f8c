//! Sentinel's `WarmUpController` (`control_behavior = "warm-up"`, modelled
//! from sentinel-core's `slots/block/flow/controller/WarmUpController.java`
//! and `StatisticNode.previousPassQps`, 1.8.x): Guava's warm-up idea on
//! whole tokens refilled once a second.
//!
//! - Built with `warningToken = (int)(W · count) / (coldFactor − 1)`,
//!   `maxToken = warningToken + (int)(2 · W · count / (1.0 + coldFactor))`
//!   and `slope = (coldFactor − 1.0) / count / (maxToken − warningToken)`,
//!   W the warm-up period in whole seconds.
//! - At each request, once per epoch second (`syncToken`, on the second's
//!   start `S`): below `warningToken`, or above it while the previous
//!   second passed fewer than `(int)count / coldFactor`, the stored tokens
//!   grow by `(S − lastFilled) · count / 1000` (truncated), capped at
//!   `maxToken`; then the previous second's passes are taken from them
//!   (not below 0). Sentinel starts with 0 stored and `lastFilled` = 0, and
//!   a wall clock is always far past 0: the first second fills it to
//!   `maxToken` — it starts cold.
//! - It passes while `passQps + 1 ≤ count` when the stored tokens are below
//!   `warningToken`, and `≤ Math.nextUp(1.0 / (above · slope + 1.0 /
//!   count))` above it, `passQps` being the node's rolling count over the
//!   interval, as the default behaviour reads it.
//!
//! The doubles are Java's binary64, repeated in integer arithmetic. Cold,
//! the ceiling is down to count / coldFactor; warm, it is the default
//! behaviour's — so its bound is the default's, 2N within a bucket and a
//! millisecond. With `W · count` under 4, `maxToken = warningToken` and
//! the slope is 1/0: Sentinel then computes 0 · ∞ and blocks everything,
//! and so does the model. With `count` below the cold factor the cold
//! ceiling, count / coldFactor, is under one request: nothing passes, and
//! since only passes take tokens from the store, it never warms — blocked
//! for good, as the source says.

use rustc_apfloat::Float;
use rustc_apfloat::ieee::Double;

use crate::limiter::sliding_buckets::SlidingBuckets;
use crate::limiter::{Decision, Hint, RateLimiter};
use crate::time::Nanos;

const NANOS_PER_MS: u64 = 1_000_000;

/// A Java `(double)` of a whole number below 2⁵³.
fn double(value: u64) -> Double {
    Double::from_u128(u128::from(value)).value
}

/// `(long) node.passQps()`: `pass / (intervalInMs / 1000.0)` in doubles.
pub fn pass_qps(pass: u64, interval_ms: u64) -> u64 {
    let seconds = (double(interval_ms) / double(1_000)).value;
    (double(pass) / seconds).value.to_u128(64).value as u64
}

/// The warm-up controller with the node's statistics it reads.
#[derive(Clone, Debug)]
pub struct WarmUp {
    /// The node's rolling pass count (`rollingCounterInSecond`).
    buckets: SlidingBuckets,
    interval_ms: u64,
    count: u64,
    cold_factor: u64,
    warning: u64,
    max: u64,
    /// `slope`, as its 64 bits.
    slope: u64,
    /// `storedTokens`.
    stored: u64,
    /// `lastFilledTime` in ms; `None` for Sentinel's 0, far in the past.
    last_filled: Option<u64>,
    /// The epoch second of the last request, its passes and the second
    /// before's (`rollingCounterInMinute`'s previous window).
    second: u64,
    passed_this_second: u64,
    passed_last_second: u64,
}

impl WarmUp {
    /// `WarmUpController(count, warmUpPeriodSec, coldFactor)` over the
    /// node's `buckets` of `interval_ms`.
    pub fn new(
        buckets: SlidingBuckets,
        interval_ms: u64,
        count: u64,
        warm_up_sec: u64,
        cold_factor: u64,
    ) -> WarmUp {
        let (w, c) = (double(warm_up_sec), double(count));
        // (int)(W · count) / (coldFactor − 1), in ints.
        let warning = (w * c).value.to_u128(64).value as u64 / (cold_factor - 1);
        let two_w_count = (double(2) * w).value * c;
        let spread = (two_w_count.value / (double(1) + double(cold_factor)).value).value;
        let max = warning + spread.to_u128(64).value as u64;
        let slope = (((double(cold_factor) - double(1)).value / c).value
            / double(max - warning))
        .value;
        WarmUp {
            buckets,
            interval_ms,
            count,
            cold_factor,
            warning,
            max,
            slope: slope.to_bits() as u64,
            stored: 0,
            last_filled: None,
            second: 0,
            passed_this_second: 0,
            passed_last_second: 0,
        }
    }

    /// `syncToken(previousQps)` at the start of epoch second `second`.
    fn sync(&mut self, second: u64, previous: u64) {
        let now = second * 1_000;
        if self.last_filled.is_some_and(|last| now <= last) {
            return;
        }
        let old = self.stored;
        let refills = old < self.warning
            || (old > self.warning && previous < self.count / self.cold_factor);
        let new = match (refills, self.last_filled) {
            (false, _) => old,
            // A wall clock's seconds since 0 fill any store.
            (true, None) => self.max,
            (true, Some(last)) => {
                let added = ((double(now - last) * double(self.count)).value / double(1_000)).value;
                let total = (double(old) + added).value;
                if total >= double(self.max) {
                    self.max
                } else {
                    total.to_u128(64).value as u64
                }
            }
        };
        self.stored = new.min(self.max).saturating_sub(previous);
        self.last_filled = Some(now);
    }

    /// Moves the minute counter's seconds on to `now`'s; its epoch second.
    fn roll(&mut self, now: Nanos) -> u64 {
        let second = now.get() / NANOS_PER_MS / 1_000;
        if second != self.second {
            self.passed_last_second = if second == self.second + 1 {
                self.passed_this_second
            } else {
                0
            };
            self.passed_this_second = 0;
            self.second = second;
        }
        second
    }

    /// Counts a pass granted elsewhere (the token server) in the node's
    /// statistics, leaving the tokens as they are.
    pub fn record(&mut self, now: Nanos) {
        self.roll(now);
        self.buckets.passed_at(now);
        self.buckets.count_one();
        self.passed_this_second += 1;
    }

    /// `canPass(node, 1)`: a block carries no hint.
    pub fn decide(&mut self, now: Nanos) -> Decision {
        let second = self.roll(now);
        let pass_qps = pass_qps(self.buckets.passed_at(now), self.interval_ms);
        self.sync(second, self.passed_last_second);
        let wanted = double(pass_qps + 1);
        let passes = if self.stored >= self.warning {
            let above = double(self.stored - self.warning);
            let slope = Double::from_bits(u128::from(self.slope));
            let per_token = (double(1) / double(self.count)).value;
            let interval = ((above * slope).value + per_token).value;
            let ceiling = (double(1) / interval).value.next_up().value;
            wanted <= ceiling
        } else {
            pass_qps < self.count
        };
        if !passes {
            return Decision::Reject(Hint::NONE);
        }
        self.buckets.count_one();
        self.passed_this_second += 1;
        Decision::Admit
    }

    /// As if blocked: the pass leaves the statistics (a sync stays, as a
    /// block's would).
    pub fn refund(&mut self, now: Nanos) {
        self.buckets.refund(now);
        self.passed_this_second -= 1;
    }

    /// Never more than the default behaviour passes.
    pub fn buckets(&self) -> &SlidingBuckets {
        &self.buckets
    }

    /// The stored tokens and the warning and maximum lines.
    #[cfg(test)]
    pub fn tokens(&self) -> (u64, u64, u64) {
        (self.stored, self.warning, self.max)
    }
}
