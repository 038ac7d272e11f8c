//! The bucketed sliding window of Sentinel's LeapArray and .NET's
//! SlidingWindowRateLimiter: the window W is cut into B buckets of W/B, and a
//! request is admitted while the last B buckets hold fewer than N.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// `kind = "sliding-buckets"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The window W.
    pub window: Nanos,
    /// N, the most admitted in any B consecutive buckets.
    pub threshold: NonZeroU64,
    /// B, the number of buckets per window (Sentinel's sample count; default 2).
    #[serde(default = "default_buckets")]
    pub buckets: NonZeroU64,
}

fn default_buckets() -> NonZeroU64 {
    NonZeroU64::MIN.saturating_add(1)
}

impl Kind for Config {
    const NAME: &'static str = "sliding-buckets";
    type State = SlidingBuckets;

    fn example(choice: u64) -> String {
        let buckets = choice % 5 + 1;
        format!(
            "window = \"{}ns\"\nthreshold = {}\nbuckets = {buckets}",
            buckets * 200,
            choice / 5 % 29 + 1
        )
    }

    /// Empty buckets.
    fn build(&self, _: Context) -> Result<SlidingBuckets, FieldError> {
        let buckets = self.buckets.get();
        if !self.window.get().is_multiple_of(buckets) || self.window.get() < buckets {
            return Err(field_error!("window", "{} does not split into {buckets} buckets of whole nanoseconds",
                self.window
            ));
        }
        let slots = usize::try_from(buckets).map_err(|_| field_error!("buckets", "too many"))?;
        if slots > 1 << 20 {
            return Err(field_error!("buckets", "at most {} per window (got {buckets})",
                1 << 20
            ));
        }
        Ok(SlidingBuckets {
            bucket: self.window.get() / buckets,
            threshold: self.threshold.get(),
            counts: vec![0; slots],
            current: 0,
            sum: 0,
        })
    }

    super::parameter_is!();
}

/// Epoch-aligned buckets `[k·w, (k+1)·w)` with w = W/B; a request at `t`
/// in bucket k is admitted iff buckets k − B + 1 … k hold fewer than N. An
/// arrival exactly at `k·w` is in bucket k, and bucket k − B no longer counts.
///
/// The buckets are a ring of B counts with their running sum: O(1) per
/// request, plus O(B) when more than a whole window passes idle.
#[derive(Clone, Debug)]
pub struct SlidingBuckets {
    bucket: u64,
    threshold: u64,
    /// `counts[k % B]` is bucket k's count, for the last B buckets.
    counts: Vec<u64>,
    /// Index of the newest bucket seen.
    current: u64,
    sum: u64,
}

impl SlidingBuckets {
    /// The count in the window ending with `now`'s bucket (Sentinel's
    /// `pass()` over the `LeapArray`'s live buckets).
    #[inline]
    pub fn passed_at(&mut self, now: Nanos) -> u64 {
        let index = now.get() / self.bucket;
        let slots = self.counts.len() as u64;
        if index != self.current {
            // Retire the buckets that left the window, oldest first.
            let stale = (index - self.current).min(slots);
            for k in index - stale + 1..=index {
                let slot = (k % slots) as usize;
                self.sum -= self.counts[slot];
                self.counts[slot] = 0;
            }
            self.current = index;
        }
        self.sum
    }

    /// Counts one in the bucket of the last [`SlidingBuckets::passed_at`].
    #[inline]
    pub fn count_one(&mut self) {
        let slots = self.counts.len() as u64;
        self.counts[(self.current % slots) as usize] += 1;
        self.sum += 1;
    }
}

impl RateLimiter for SlidingBuckets {
    fn memory_at_most(&self, _keys: u64, _requests: u64, _hashed: bool) -> u128 {
        super::allocation::<u64>(self.counts.len() as u128)
    }

    /// Rejects with no hint: Sentinel's block carries no retry time.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        if self.passed_at(now) >= self.threshold {
            return Decision::Reject(Hint::NONE);
        }
        self.count_one();
        Decision::Admit
    }

    fn refund(&mut self, _now: Nanos) {
        let slot = (self.current % self.counts.len() as u64) as usize;
        self.counts[slot] -= 1;
        self.sum -= 1;
    }

    /// An interval of L meets m = ⌈(L−1)/w⌉ + 1 consecutive buckets; any B
    /// consecutive ones hold at most N, so m of them at most N·⌈m/B⌉: 2N for
    /// L = W, however many buckets (N in the last nanosecond of one bucket and
    /// N in the first of the bucket B later).
    fn bound(&self, interval: Nanos) -> u64 {
        let met = super::fixed_window::windows_met(interval.get(), self.bucket);
        met.div_ceil(self.counts.len() as u64)
            .saturating_mul(self.threshold)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.threshold as f64 * interval.get() as f64
            / (self.bucket as f64 * self.counts.len() as f64)
    }

    fn describe(&self) -> String {
        let window = Nanos(self.bucket * self.counts.len() as u64);
        format!(
            "{} per {window} in {} buckets of {}",
            self.threshold,
            self.counts.len(),
            Nanos(self.bucket)
        )
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        Some((Nanos(self.bucket), Nanos::ZERO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(buckets: u64) -> SlidingBuckets {
        Config {
            window: Nanos(1_000),
            threshold: NonZeroU64::new(10).unwrap(),
            buckets: NonZeroU64::new(buckets).unwrap(),
        }
        .build(Context::default())
        .unwrap()
    }

    fn admitted(limiter: &mut SlidingBuckets, at: u64, count: usize) -> usize {
        (0..count)
            .filter(|_| limiter.decide(Nanos(at)).admitted())
            .count()
    }

    #[test]
    fn a_bucket_leaves_the_window_exactly_b_buckets_later() {
        let mut l = limiter(2);
        assert_eq!(admitted(&mut l, 499, 12), 10, "bucket 0");
        assert_eq!(
            admitted(&mut l, 999, 5),
            0,
            "bucket 1: bucket 0 still counts"
        );
        assert_eq!(
            admitted(&mut l, 1_000, 12),
            10,
            "bucket 2: bucket 0 has left"
        );
    }

    #[test]
    fn lets_2n_through_in_one_window_however_many_buckets() {
        for buckets in [2, 5, 10] {
            let mut l = limiter(buckets);
            let w = 1_000 / buckets;
            let first = admitted(&mut l, w - 1, 10);
            let later = admitted(&mut l, w * buckets, 10);
            assert_eq!(first + later, 20);
            assert_eq!(
                w * buckets - (w - 1),
                1_000 - w + 1,
                "both within one window of 1000 ns"
            );
            assert_eq!(l.bound(Nanos(1_000)), 20);
        }
    }

    #[test]
    fn an_idle_stretch_clears_every_bucket() {
        let mut l = limiter(4);
        assert_eq!(admitted(&mut l, 10, 10), 10);
        assert_eq!(admitted(&mut l, 1_000_000, 10), 10);
    }
}
