//! The sliding log: exact, at most N admitted in any trailing window W.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// The largest threshold a sliding log accepts: its log holds N timestamps.
pub const MAX_LOG: u64 = 1 << 27;

/// `kind = "sliding-log"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Window length W.
    pub window: Nanos,
    /// Admitted requests per trailing window, N.
    pub threshold: NonZeroU64,
    /// Rejected requests enter the log too (a Redis sorted set that `ZADD`s
    /// before it counts).
    #[serde(default)]
    pub count_rejected: bool,
}

impl Kind for Config {
    const NAME: &'static str = "sliding-log";
    type State = SlidingLog;

    super::parameter_is!(threshold, window);

    fn example(choice: u64) -> String {
        let window = [1_000, 997, 250, 3_000][(choice % 4) as usize];
        format!(
            "window = \"{window}ns\"\nthreshold = {}\ncount_rejected = {}",
            choice / 4 % 29 + 1,
            choice / 116 % 2 == 1
        )
    }

    /// A fresh, empty log.
    fn build(&self, _: Context) -> Result<SlidingLog, FieldError> {
        if self.window == Nanos::ZERO {
            return Err(field_error!("window", "must be longer than 0"));
        }
        if self.threshold.get() > MAX_LOG {
            return Err(field_error!("threshold", "a sliding log keeps up to N timestamps in memory; {} would need {} GB, and at most {MAX_LOG} (1 GiB) is allowed",
                self.threshold,
                self.threshold.get() / 125_000_000
            ));
        }
        Ok(SlidingLog {
            window: self.window.get(),
            threshold: self.threshold.get(),
            log: Vec::new(),
            oldest: 0,
            overwritten: None,
            count_rejected: self.count_rejected,
        })
    }
}

/// Admits at `t` when fewer than N were admitted in `(t − W, t]`. An admission
/// exactly W before `t` has left the window, so its slot is free again at `t`.
///
/// Only the last N admitted times can matter, so they are kept in a ring of at
/// most N entries: O(1) per decision, memory O(N), growing only as used.
#[derive(Clone, Debug)]
pub struct SlidingLog {
    window: u64,
    threshold: u64,
    /// The last admitted times; once full, a ring whose oldest entry is at `oldest`.
    log: Vec<u64>,
    oldest: usize,
    /// The time the last admission overwrote, to take it back.
    overwritten: Option<u64>,
    /// Whether rejected requests enter the log too.
    count_rejected: bool,
}

impl RateLimiter for SlidingLog {
    fn memory_at_most(&self, _keys: u64, _requests: u64, _hashed: bool) -> u128 {
        super::allocation::<u64>(u128::from(self.threshold))
    }

    /// Rejects with `Retry-After` at the instant the oldest admission leaves
    /// the window, and the reset when the newest does (the log is empty then).
    /// With `count_rejected` the rejection itself is the newest entry.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now = now.get();
        if (self.log.len() as u64) < self.threshold {
            self.log.push(now);
            self.overwritten = None;
            return Decision::Admit;
        }
        if now - self.log[self.oldest] < self.window {
            if self.count_rejected {
                // Only the last N entries decide; the rejection is the newest.
                self.log[self.oldest] = now;
                self.oldest = (self.oldest + 1) % self.log.len();
            }
            let newest = (self.oldest + self.log.len() - 1) % self.log.len();
            return Decision::reject::<HINTS>(|| {
                Hint::new(
                    self.log[self.oldest].saturating_add(self.window),
                    self.log[newest].saturating_add(self.window),
                )
            });
        }
        self.overwritten = Some(self.log[self.oldest]);
        self.log[self.oldest] = now;
        self.oldest = (self.oldest + 1) % self.log.len();
        Decision::Admit
    }

    /// As if rejected: with `count_rejected` the entry stays, as a
    /// rejection's would.
    fn refund(&mut self, _now: Nanos) {
        if self.count_rejected {
            return;
        }
        match self.overwritten.take() {
            None => {
                self.log.pop();
            }
            Some(old) => {
                self.oldest = (self.oldest + self.log.len() - 1) % self.log.len();
                self.log[self.oldest] = old;
            }
        }
    }

    /// N·⌈L/W⌉: any window of length W holds at most N; an interval of L is
    /// covered by ⌈L/W⌉ such windows.
    fn bound(&self, interval: Nanos) -> u64 {
        interval
            .get()
            .div_ceil(self.window)
            .saturating_mul(self.threshold)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.threshold as f64 * interval.get() as f64 / self.window as f64
    }

    /// A Redis sorted set of admission times, with its expiry, holding up
    /// to N entries: 160 + 24 B per entry up to 128 entries (a listpack),
    /// about 126 B per entry beyond (a skiplist) — measured.
    fn state_bytes(&self) -> Option<u64> {
        Some(if self.threshold <= 128 {
            160 + 24 * self.threshold
        } else {
            126u64.saturating_mul(self.threshold)
        })
    }

    /// `ZREMRANGEBYSCORE`, `ZCARD`, `ZADD` and `PEXPIRE` per request.
    fn store_ops(&self) -> Option<StoreOps> {
        Some(StoreOps {
            per_request: 4,
            per_reset: 0,
        })
    }

    fn describe(&self) -> String {
        format!(
            "{} per trailing {}{}",
            self.threshold,
            Nanos(self.window),
            if self.count_rejected {
                ", counting rejected"
            } else {
                ""
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(threshold: u64) -> SlidingLog {
        Config {
            window: Nanos::SECOND,
            threshold: NonZeroU64::new(threshold).unwrap(),
            count_rejected: false,
        }
        .build(Context::default())
        .unwrap()
    }

    #[test]
    fn a_slot_frees_exactly_one_window_after_its_admission() {
        let mut limiter = log(2);
        assert!(limiter.decide(Nanos(100)).admitted());
        assert!(limiter.decide(Nanos(200)).admitted());
        assert!(
            !limiter.decide(Nanos(1_000_000_099)).admitted(),
            "100 is still inside (t − W, t]"
        );
        assert!(
            limiter.decide(Nanos(1_000_000_100)).admitted(),
            "100 left the window at exactly +W"
        );
        assert!(!limiter.decide(Nanos(1_000_000_150)).admitted());
        assert!(limiter.decide(Nanos(1_000_000_200)).admitted());
    }

    #[test]
    fn rejected_requests_do_not_occupy_the_log() {
        let mut limiter = log(1);
        assert!(limiter.decide(Nanos(0)).admitted());
        assert!(!limiter.decide(Nanos(500_000_000)).admitted());
        assert!(limiter.decide(Nanos(1_000_000_000)).admitted());
    }

    #[test]
    fn admits_no_more_than_the_threshold_across_a_boundary() {
        let mut limiter = log(10);
        let times = [999_999_999; 10].into_iter().chain([1_000_000_000; 10]);
        assert_eq!(
            times
                .filter(|&t| limiter.decide(Nanos(t)).admitted())
                .count(),
            10
        );
    }
}
