//! The weighted sliding counter (Cloudflare's approximation of a sliding
//! window): the previous window's count, weighted by how much of it still
//! overlaps the trailing window, plus the current window's count.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::fixed_window::windows_met;
use super::{Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// `kind = "sliding-counter"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Window length W.
    pub window: Nanos,
    /// The threshold N.
    pub threshold: NonZeroU64,
    /// Rejected requests count in the current window too, and so weigh in
    /// the next window as the previous one's.
    #[serde(default)]
    pub count_rejected: bool,
}

impl Kind for Config {
    const NAME: &'static str = "sliding-counter";
    type State = SlidingCounter;

    super::parameter_is!(threshold, window);

    fn example(choice: u64) -> String {
        let window = [1_000, 997, 250, 3_000][(choice % 4) as usize];
        format!(
            "window = \"{window}ns\"\nthreshold = {}\ncount_rejected = {}",
            choice / 4 % 29 + 1,
            choice / 116 % 2 == 1
        )
    }

    /// A fresh counter.
    fn build(&self, _: Context) -> Result<SlidingCounter, FieldError> {
        if self.window == Nanos::ZERO {
            return Err(field_error!("window", "must be longer than 0"));
        }
        Ok(SlidingCounter {
            window: self.window.get(),
            threshold: self.threshold.get(),
            start: 0,
            previous: 0,
            current: 0,
            rolled: 0,
            count_rejected: self.count_rejected,
        })
    }
}

/// Epoch windows `[k·W, (k+1)·W)`. At `t`, with `e = t − k·W` elapsed in the
/// current window, admits iff `previous·(W − e) + current·W < N·W`: the float
/// rule `previous·(1 − e/W) + current < N` multiplied through by W, so there is
/// no rounding at all. An arrival exactly at `k·W` has `e = 0`: the previous
/// window still weighs in full.
///
/// `previous` is the count of window k − 1 only if that window immediately
/// precedes; after an idle window it is 0.
#[derive(Clone, Debug)]
pub struct SlidingCounter {
    window: u64,
    threshold: u64,
    /// Start of the current window.
    start: u64,
    previous: u64,
    current: u64,
    /// Windows rolled over so far.
    rolled: u64,
    /// Whether rejected requests count too.
    count_rejected: bool,
}

impl SlidingCounter {
    /// What a rejection tells the client.
    fn hint(&self) -> Hint {
        let (w, n) = (u128::from(self.window), u128::from(self.threshold));
        // The least e with `weight·(W − e) + counted·W < N·W`, or None if
        // even e = W − 1 is not enough: W − x for the largest whole x with
        // weight·x < (N − counted)·W.
        let first = |weight: u64, counted: u64| -> Option<u128> {
            let room = n.checked_sub(u128::from(counted)).filter(|&r| r > 0)? * w;
            let x = if weight == 0 {
                w
            } else {
                ((room - 1) / u128::from(weight)).min(w)
            };
            (x > 0).then(|| w - x)
        };
        let start = u128::from(self.start);
        let retry = first(self.previous, self.current)
            .map(|e| start + e)
            .or_else(|| first(self.current, 0).map(|e| start + w + e))
            .unwrap_or(start + 2 * w);
        let reset = if self.current > 0 {
            start + 2 * w
        } else {
            start + w
        };
        let clamp = |t: u128| u64::try_from(t).unwrap_or(u64::MAX);
        Hint::new(clamp(retry), clamp(reset))
    }
}

impl RateLimiter for SlidingCounter {
    /// Rejects with `Retry-After` at the first instant the weighted count
    /// drops below N if no other request is admitted meanwhile (exactly, from
    /// the same integer rule), and the reset when both windows it weighs have
    /// passed.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now = now.get();
        let elapsed = now - self.start;
        let elapsed = if elapsed < self.window {
            elapsed
        } else {
            let start = now - now % self.window;
            let adjacent = start - self.start == self.window;
            self.previous = if adjacent { self.current } else { 0 };
            self.current = 0;
            self.start = start;
            self.rolled += 1;
            now - start
        };
        let weighted = u128::from(self.previous) * u128::from(self.window - elapsed)
            + u128::from(self.current) * u128::from(self.window);
        let admit = weighted < u128::from(self.threshold) * u128::from(self.window);
        self.current += u64::from(admit | self.count_rejected);
        Decision::admit_or::<HINTS>(admit, || self.hint())
    }

    fn refund(&mut self, _now: Nanos) {
        self.current -= 1;
    }

    /// Each window admits at most N (`current < N` is necessary), and an
    /// interval of L meets at most ⌈(L−1)/W⌉ + 1 windows: 2N for L = W. The
    /// 2N is reached in whole nanoseconds: N at the last nanosecond of a
    /// window, then the next window's N paced against the weighting (the j-th
    /// admitted at e = ⌊j·W/N⌋ + 1), all within W when W/N ≥ 3.
    fn bound(&self, interval: Nanos) -> u64 {
        windows_met(interval.get(), self.window).saturating_mul(self.threshold)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.threshold as f64 * interval.get() as f64 / self.window as f64
    }

    /// Two Redis counters (this window and the last) with expiries: 244 B per key (measured).
    fn resets(&self) -> u64 {
        self.rolled
    }

    fn state_bytes(&self) -> Option<u64> {
        Some(244)
    }

    /// `GET` the previous window and `INCR` this one per request, `PEXPIRE` per new window.
    fn store_ops(&self) -> Option<StoreOps> {
        Some(StoreOps {
            per_request: 2,
            per_reset: 1,
        })
    }

    fn describe(&self) -> String {
        format!(
            "{} per {} (weighted{})",
            self.threshold,
            Nanos(self.window),
            if self.count_rejected {
                ", counting rejected"
            } else {
                ""
            }
        )
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        Some((Nanos(self.window), Nanos::ZERO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(threshold: u64) -> SlidingCounter {
        Config {
            window: Nanos(1_000),
            threshold: NonZeroU64::new(threshold).unwrap(),
            count_rejected: false,
        }
        .build(Context::default())
        .unwrap()
    }

    #[test]
    fn the_previous_window_weighs_in_full_exactly_at_the_edge() {
        let mut limiter = counter(10);
        assert_eq!(
            (0..10)
                .filter(|_| limiter.decide(Nanos(999)).admitted())
                .count(),
            10
        );
        assert!(
            !limiter.decide(Nanos(1_000)).admitted(),
            "e = 0: 10·1000 + 0 is not < 10·1000"
        );
        assert!(
            limiter.decide(Nanos(1_001)).admitted(),
            "e = 1: 10·999 < 10·1000"
        );
    }

    #[test]
    fn admits_by_the_weighted_rule_without_rounding() {
        let mut limiter = counter(10);
        (0..10).for_each(|_| assert!(limiter.decide(Nanos(500)).admitted()));
        // At e = 500: 10·500 + current·1000 < 10·1000 ⟺ current < 5.
        assert_eq!(
            (0..10)
                .filter(|_| limiter.decide(Nanos(1_500)).admitted())
                .count(),
            5
        );
    }

    #[test]
    fn an_idle_window_clears_the_previous_count() {
        let mut limiter = counter(10);
        (0..10).for_each(|_| assert!(limiter.decide(Nanos(999)).admitted()));
        assert_eq!(
            (0..12)
                .filter(|_| limiter.decide(Nanos(2_000)).admitted())
                .count(),
            10
        );
    }
}
