//! Node's `rate-limiter-flexible`, `RateLimiterMemory` with `consume(key)`
//! (modelled from `lib/RateLimiterMemory.js` and
//! `lib/component/MemoryStorage/MemoryStorage.js` of 11.4.0, the version
//! `tests/node_limiters/package-lock.json` pins; checked decision by
//! decision against it in `tests/integration/node_limiters.rs`). Its Redis
//! and other stores keep the same window with `SET … EX NX` + `INCRBY`.
//!
//! - a key's record opens at its first consume: `expiresAt = Date.now() +
//!   duration · 1000` (whole milliseconds; never, for `duration = 0`), and a
//!   consume adds to it while `expiresAt − now > 0`, else opens a new one;
//! - every consume counts, refused ones too, and one is refused when the
//!   record's points exceed `points`; with `blockDuration`, the first refusal
//!   re-opens the record for that many seconds with its count, so the key is
//!   refused until then;
//! - a refusal tells `msBeforeNext`, the milliseconds to the record's end
//!   (what an application puts in `Retry-After`, here to the millisecond);
//! - `execEvenly` delays a passed consume (not the first of a record) by
//!   `⌈msBeforeNext / (remaining + 2)⌉` ms, or `consumed ·
//!   execEvenlyMinDelayMs` when that is less than the minimum: it spreads
//!   when callers go on, not how many pass.
//!
//! Per key (the `consume` key) is `per = "key"`. N at the end of a record and
//! N at the start of the next: 2N in a few milliseconds.
//!
//! Shared by a `[cluster]` with `mode = "shared-store-clock"`, the records
//! are a store's (`RateLimiterRedis`: the same window, on the store's
//! clock). When the store fails, `RateLimiterInsuredAbstract._handleError`
//! hands the consume to the `insuranceLimiter` — here a `RateLimiterMemory`
//! of `insurance_points` per `insurance_duration` in each instance, given
//! the main limiter's `blockDuration` and `execEvenly` — or, without one,
//! rejects with the store's error, which the application answers (refused
//! here, with no hint).

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const NANOS_PER_MS: u64 = 1_000_000;

/// `kind = "rate-limiter-flexible"`, as `new RateLimiterMemory({ points,
/// duration, blockDuration, execEvenly, execEvenlyMinDelayMs })`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `points`: the most consumed per record.
    pub points: NonZeroU64,
    /// `duration`: a record's life in whole seconds (0: it never ends).
    pub duration: u64,
    /// `blockDuration`: seconds a key is refused after it first exceeds (default 0).
    #[serde(default)]
    pub block_duration: u64,
    /// `execEvenly` (default false).
    #[serde(default)]
    pub exec_evenly: bool,
    /// `execEvenlyMinDelayMs` (default ⌈duration · 1000 / points⌉).
    pub exec_evenly_min_delay_ms: Option<u64>,
    /// The `insuranceLimiter`'s `points`: a `RateLimiterMemory` in each
    /// instance that answers while a shared store fails.
    pub insurance_points: Option<NonZeroU64>,
    /// The `insuranceLimiter`'s `duration`, whole seconds.
    pub insurance_duration: Option<u64>,
}

/// Seconds a setting may hold: a year.
const MAX_SECONDS: u64 = 366 * 86_400;

impl Kind for Config {
    const NAME: &'static str = "rate-limiter-flexible";
    type State = RateLimiterFlexible;

    fn build(&self, _: Context) -> Result<RateLimiterFlexible, FieldError> {
        if self.duration > MAX_SECONDS {
            return Err(field_error!("duration", "at most a year ({MAX_SECONDS} s)"));
        }
        if self.block_duration > MAX_SECONDS {
            return Err(field_error!("block_duration", "at most a year ({MAX_SECONDS} s)"));
        }
        let window = self.duration * 1_000;
        let min_delay = self
            .exec_evenly_min_delay_ms
            .unwrap_or_else(|| window.div_ceil(self.points.get()));
        if min_delay > MAX_SECONDS * 1_000 {
            return Err(field_error!("exec_evenly_min_delay_ms", "at most a year"));
        }
        if self.insurance_points.is_some() != self.insurance_duration.is_some() {
            return Err(field_error!(
                "insurance_points",
                "give the insurance limiter both insurance_points and insurance_duration, or neither"
            ));
        }
        Ok(RateLimiterFlexible {
            points: self.points.get(),
            window,
            block: self.block_duration * 1_000,
            min_delay: self.exec_evenly.then_some(min_delay),
            record: None,
        })
    }

    super::parameter_is!(points);

    fn example(choice: u64) -> String {
        format!(
            "points = {}\nduration = {}\nblock_duration = {}\nexec_evenly = {}",
            choice % 12 + 1,
            choice / 12 % 3,
            choice / 36 % 3 % 2,
            choice / 108 % 2 == 1
        )
    }
}

impl Config {
    /// The `insuranceLimiter`, if any: a `RateLimiterMemory` of its own
    /// points and duration, with this limiter's `blockDuration` and
    /// `execEvenly` (the setter copies them) and its own
    /// `execEvenlyMinDelayMs` default.
    pub fn insurance(&self) -> Option<Config> {
        Some(Config {
            points: self.insurance_points?,
            duration: self.insurance_duration?,
            block_duration: self.block_duration,
            exec_evenly: self.exec_evenly,
            exec_evenly_min_delay_ms: None,
            insurance_points: None,
            insurance_duration: None,
        })
    }
}

/// One key's `MemoryStorage` record.
#[derive(Clone, Debug)]
pub struct RateLimiterFlexible {
    points: u64,
    /// `duration`, in ms (0: never ends).
    window: u64,
    /// `blockDuration`, in ms.
    block: u64,
    /// `execEvenlyMinDelayMs` when `execEvenly`.
    min_delay: Option<u64>,
    /// `(value, expiresAt in ms or never)`.
    record: Option<(u64, Option<u64>)>,
}

impl RateLimiterFlexible {
    /// `MemoryStorage.set`: a record of `value` for `life` ms from `ms`.
    fn set(&mut self, value: u64, life: u64, ms: u64) -> Option<u64> {
        let expires = (life > 0).then(|| ms.saturating_add(life));
        self.record = Some((value, expires));
        expires
    }

    /// The longest a passed consume waits with `execEvenly`.
    fn longest_delay(&self) -> u64 {
        self.min_delay.map_or(0, |min| self.window.max(min.saturating_mul(self.points)))
    }
}

impl RateLimiter for RateLimiterFlexible {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let ms = now.get() / NANOS_PER_MS;
        // incrby: add to a live record, else open one.
        let (consumed, expires, first) = match self.record {
            Some((value, expires)) if expires.is_none_or(|e| e > ms) => {
                self.record = Some((value + 1, expires));
                (value + 1, expires, false)
            }
            _ => {
                let expires = self.set(1, self.window, ms);
                (1, expires, true)
            }
        };
        if consumed > self.points {
            let mut until = expires;
            if self.block > 0 && consumed <= self.points + 1 {
                until = self.set(consumed, self.block, ms);
            }
            // msBeforeNext: -1 (never) when the record does not end.
            return Decision::reject::<HINTS>(|| match until {
                Some(until) => Hint::at_reset(now.get().saturating_add((until - ms).saturating_mul(NANOS_PER_MS))),
                None => Hint::NONE,
            });
        }
        let (Some(min_delay), Some(expires)) = (self.min_delay, expires) else {
            return Decision::Admit;
        };
        let before_next = expires - ms;
        if first || before_next == 0 {
            return Decision::Admit;
        }
        let remaining = self.points - consumed;
        let mut delay = before_next.div_ceil(remaining + 2);
        if delay < min_delay {
            delay = consumed * min_delay;
        }
        Decision::Delay(Nanos(delay.saturating_mul(NANOS_PER_MS)))
    }

    /// Every consume counts, whatever a later layer answers.
    fn refund(&mut self, _now: Nanos) {}

    /// At most N pass per record; records that pass anything start at
    /// least S apart (the duration, or the block when shorter: a block
    /// replaces the record's end), and an interval of L meets M = ⌈(L −
    /// 1)/1 ms⌉ + 1 milliseconds, so at most 1 + ⌈(M − 1)/S⌉ of them.
    /// Released, with `execEvenly`, a pass can wait up to the longest delay
    /// more: counted over L plus that.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        self.decision_bound(Nanos(interval.get().saturating_add(self.max_delay().get())))
    }

    fn decision_bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        // Records that pass anything start at least this far apart: a
        // record ends when it expires or, blocked, when the block does
        // (which can cut it short); one that never ends passes N, ever.
        let spacing = match (self.window, self.block) {
            (0, 0) => return self.points,
            (0, block) => block,
            (window, 0) => window,
            (window, block) => window.min(block),
        };
        let millis = (interval.get() - 1).div_ceil(NANOS_PER_MS) + 1;
        ((millis - 1).div_ceil(spacing) + 1).saturating_mul(self.points)
    }

    fn max_delay(&self) -> Nanos {
        Nanos(self.longest_delay().saturating_mul(NANOS_PER_MS))
    }

    fn horizon(&self) -> Nanos {
        let longest = self.window.max(self.block).max(self.longest_delay());
        Nanos(u64::MAX - longest.saturating_mul(NANOS_PER_MS).min(u64::MAX / 2))
    }

    /// `msBeforeNext` is whole milliseconds, counted from the response.
    fn hint_granularity(&self) -> Nanos {
        Nanos(NANOS_PER_MS)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        if self.window == 0 {
            return self.points as f64;
        }
        self.points as f64 * interval.get() as f64 / (self.window as f64 * NANOS_PER_MS as f64)
    }

    fn describe(&self) -> String {
        format!(
            "{} points per {} from each first consume{}{}",
            self.points,
            Nanos(self.window.saturating_mul(NANOS_PER_MS)),
            if self.block > 0 {
                format!(", block {}", Nanos(self.block * NANOS_PER_MS))
            } else {
                String::new()
            },
            if self.min_delay.is_some() { ", execEvenly" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NANOS_PER_MS;

    fn memory(text: &str) -> RateLimiterFlexible {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    #[test]
    fn a_record_opens_at_the_first_consume_and_refusals_count() {
        let mut l = memory("points = 2\nduration = 1");
        assert!(l.decide(Nanos(300 * MS + 5)).admitted());
        assert!(l.decide(Nanos(400 * MS)).admitted());
        assert_eq!(
            l.decide(Nanos(1_299 * MS + 999_999)),
            Decision::Reject(Hint::at_reset(1_300 * MS + 999_999)),
            "1 ms before next"
        );
        assert!(l.decide(Nanos(1_300 * MS)).admitted(), "expiresAt − now = 0: a new record");
    }

    #[test]
    fn a_block_holds_the_key_from_its_first_refusal() {
        let mut l = memory("points = 1\nduration = 1\nblock_duration = 5");
        assert!(l.decide(Nanos(0)).admitted());
        let Decision::Reject(hint) = l.decide(Nanos(10 * MS)) else { panic!("refused") };
        assert_eq!(hint.retry_at, Some(Nanos(5_010 * MS)));
        assert!(!l.decide(Nanos(2_000 * MS)).admitted(), "still blocked");
        assert!(l.decide(Nanos(5_010 * MS)).admitted());
    }

    #[test]
    fn exec_evenly_delays_but_passes_as_many() {
        let mut l = memory("points = 4\nduration = 1\nexec_evenly = true");
        let delays: Vec<Option<u64>> = (0..6)
            .map(|_| {
                let d = l.decide(Nanos(0));
                d.admitted().then(|| d.delay().get() / MS)
            })
            .collect();
        // The first opens the record; then ⌈1000 / (remaining + 2)⌉ = 250,
        // 334 (both ≥ the 250 ms minimum), then ⌈1000/2⌉ = 500.
        assert_eq!(delays, [Some(0), Some(250), Some(334), Some(500), None, None]);
    }

    proptest::proptest! {
        #[test]
        fn never_passes_more_than_its_bound(
            choice in 0u64..1_000,
            mut times in proptest::collection::vec(0u64..6_000, 1..300),
        ) {
            times.sort_unstable();
            let text = Config::example(choice);
            let mut l = memory(&text);
            let mut released: Vec<u64> = times
                .iter()
                .filter_map(|ms| {
                    let t = ms * MS;
                    let d = l.decide(Nanos(t));
                    d.admitted().then(|| t + d.delay().get())
                })
                .collect();
            released.sort_unstable();
            for interval in [1, MS, 999 * MS, 1_000 * MS, 1_000 * MS + 1, 3_000 * MS] {
                let (worst, bound) = (crate::limiter::worst_in(&released, Nanos(interval)), l.bound(Nanos(interval)));
                proptest::prop_assert!(worst <= bound, "{}: {} > {} over {}", text, worst, bound, interval);
            }
        }
    }
}
