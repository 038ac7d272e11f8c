//! Redisson's `RRateLimiter` (modelled from `RedissonRateLimiter.java`,
//! redisson 3.x/4.x `tryAcquireAsync`'s Lua script, read at the 2026 master):
//! a sliding log in a Redis sorted set. `trySetRate(type, rate,
//! rateInterval)` stores the rate and the interval in milliseconds; each
//! `tryAcquire()` runs one script with the *caller's* `System.currentTimeMillis()`
//! as `now`. The script removes every permit scored at or before
//! `now − interval` and gives it back to the available value, then admits
//! when a permit is left, adding one scored `now`; otherwise it answers
//! `3 + interval − (now − first)` ms, `first` the lowest score left — when
//! the oldest permit expires, plus 3 ms.
//!
//! The value and the log always agree (value = rate − permits in the log),
//! so a request is admitted exactly when fewer than `rate` permits are
//! scored after `now − interval`: a sliding log on a millisecond clock.
//! On one clock, every permit scored in any `interval` consecutive
//! milliseconds is still in the log when the last of them is admitted, so
//! at most `rate` are; an interval of L true nanoseconds meets
//! ⌈(L − 1)/1 ms⌉ + 1 milliseconds of the clock: 2N within `interval − 1 ms
//! + 1 ns` of each other at worst (N at the end of one millisecond, N at the
//! start of the millisecond `interval` later).
//!
//! `rate_type = "overall"` (`RateType.OVERALL`) keeps one log for every
//! Redisson client; in a `[cluster]` the instances share it, each scoring
//! with its own clock, and a client whose clock is Δ ahead removes the
//! others' permits Δ early: 2N within `interval − Δ` (see
//! [`super::cluster`]). `"per-client"` (`PER_CLIENT`) keeps one per client.
//! A Redis error fails the call (`tryAcquire` throws): there is no fallback
//! to model, so a cluster's store outages are refused for this kind.

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const MS: u64 = 1_000_000;

/// The largest `rate`: the log holds up to that many permits.
pub const MAX_RATE: u64 = super::sliding_log::MAX_LOG;

/// `RateType`: whose log a request counts in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RateType {
    /// `OVERALL`: one log for every client.
    #[default]
    Overall,
    /// `PER_CLIENT`: one log per Redisson client (per instance).
    PerClient,
}

/// `kind = "redisson"`, as `trySetRate(rate_type, rate, rate_interval)`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `rate`: permits per interval.
    pub rate: NonZeroU64,
    /// `rateInterval`, whole milliseconds (Redisson keeps milliseconds).
    pub rate_interval: Nanos,
    /// `RateType` (default overall).
    #[serde(default)]
    pub rate_type: RateType,
}

impl Kind for Config {
    const NAME: &'static str = "redisson";
    type State = Redisson;

    super::parameter_is!(rate);

    fn example(choice: u64) -> String {
        format!(
            "rate = {}\nrate_interval = \"{}ms\"",
            choice % 17 + 1,
            [1, 2, 5, 1_000][(choice / 17 % 4) as usize]
        )
    }

    /// An empty log.
    fn build(&self, _: Context) -> Result<Redisson, FieldError> {
        let interval = self.rate_interval.get();
        if interval == 0 || !interval.is_multiple_of(MS) {
            return Err(field_error!(
                "rate_interval",
                "whole milliseconds of at least 1ms (Redisson keeps the interval in milliseconds), not {}",
                self.rate_interval
            ));
        }
        if interval / MS > u64::MAX / MS / 4 {
            return Err(field_error!("rate_interval", "at most {}", Nanos(u64::MAX / 4)));
        }
        if self.rate.get() > MAX_RATE {
            return Err(field_error!(
                "rate",
                "the log holds up to `rate` permits; at most {MAX_RATE} is allowed"
            ));
        }
        Ok(Redisson {
            interval: interval / MS,
            rate: self.rate.get(),
            permits: BTreeMap::new(),
            held: 0,
            last: 0,
            per_client: self.rate_type == RateType::PerClient,
        })
    }
}

/// The permits sorted set: how many permits each millisecond score holds.
#[derive(Clone, Debug)]
pub struct Redisson {
    /// `interval`, ms.
    interval: u64,
    rate: u64,
    permits: BTreeMap<u64, u64>,
    /// Permits in the log (rate − the stored value).
    held: u64,
    /// The score of the last admission, to take it back.
    last: u64,
    /// `PER_CLIENT`: in a cluster, a log per instance.
    per_client: bool,
}

impl Redisson {
    /// Decides at `now` nanoseconds of the caller's clock, which may be
    /// behind a permit another client scored: the shared log of a cluster
    /// hears every instance's clock.
    #[inline]
    pub fn decide_on_clock<const HINTS: bool>(&mut self, now: u64) -> Decision {
        let ms = now / MS;
        if let Some(cutoff) = ms.checked_sub(self.interval) {
            while let Some(entry) = self.permits.first_entry()
                && *entry.key() <= cutoff
            {
                self.held -= entry.remove();
            }
        }
        if self.held < self.rate {
            *self.permits.entry(ms).or_insert(0) += 1;
            self.held += 1;
            self.last = ms;
            return Decision::Admit;
        }
        Decision::reject::<HINTS>(|| {
            let first = self.permits.first_key_value().map_or(ms, |(&score, _)| score);
            // 3 + interval − (now − first), never below 4 ms: first > now − interval.
            let delay = (3 + self.interval + first).saturating_sub(ms);
            Hint {
                retry_at: Some(Nanos(now.saturating_add(delay.saturating_mul(MS)))),
                reset_at: None,
                ..Hint::NONE
            }
        })
    }

    /// The most admitted over `interval` true nanoseconds when the clocks
    /// that score and expire permits can disagree: a permit scored at
    /// reading r₁ leaves at the first reading r₂ with ⌊r₂/1 ms⌋ ≥ ⌊r₁/1 ms⌋ +
    /// interval, so r₂ − r₁ ≥ (interval − 1 ms) + 1 ns; `span(g)` is the most
    /// two readings g true nanoseconds apart can differ by. Each of the
    /// `rate` places in the log is reused at least `gap` apart, the least g
    /// whose span reaches that: `rate · (⌊(L − 1)/gap⌋ + 1)`, none when the
    /// clocks are so far apart that a permit can leave the instant it is
    /// scored.
    pub fn bound_across_clocks(&self, interval: u64, span: impl Fn(u64) -> u64) -> u64 {
        if interval == 0 {
            return 0;
        }
        let needed = (self.interval - 1) * MS + 1;
        if span(0) >= needed {
            return u64::MAX;
        }
        // The least gap whose span reaches `needed` (span grows with the gap).
        let (mut low, mut high) = (0, needed);
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if span(mid) >= needed {
                high = mid;
            } else {
                low = mid;
            }
        }
        ((interval - 1) / high + 1).saturating_mul(self.rate)
    }

    /// `PER_CLIENT`: a log per client.
    pub fn per_client(&self) -> bool {
        self.per_client
    }
}

impl RateLimiter for Redisson {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        self.decide_on_clock::<HINTS>(now.get())
    }

    /// As if rejected: the permit just scored leaves the log.
    fn refund(&mut self, _now: Nanos) {
        if let Some(count) = self.permits.get_mut(&self.last) {
            *count -= 1;
            self.held -= 1;
            if *count == 0 {
                self.permits.remove(&self.last);
            }
        }
    }

    /// At most N in any `interval` consecutive milliseconds of its clock;
    /// L true nanoseconds meet ⌈(L − 1)/1 ms⌉ + 1 of them.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let millis = (interval.get() - 1).div_ceil(MS) + 1;
        millis.div_ceil(self.interval).saturating_mul(self.rate)
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX - (self.interval + 4) * MS)
    }

    /// The hint is the oldest permit's expiry plus 3 ms, counted from the
    /// caller's millisecond: up to 4 ms after the first instant that passes.
    fn hint_granularity(&self) -> Nanos {
        Nanos(4 * MS)
    }

    /// A node per score: a B-tree's up to 11 entries of 16 bytes in nodes
    /// of about 200, at worst 6 to a node.
    fn memory_at_most(&self, _keys: u64, requests: u64, _hashed: bool) -> u128 {
        u128::from(self.rate.min(requests)).div_ceil(6) * 200
    }

    /// The script's `HGET`s, `GET`, `ZRANGEBYSCORE`, `ZADD`, `DECRBY` and
    /// `PTTL` in one `EVAL`: one round trip per request.
    fn store_ops(&self) -> Option<StoreOps> {
        Some(StoreOps {
            per_request: 1,
            per_reset: 0,
        })
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.rate as f64 * interval.get() as f64 / (self.interval * MS) as f64
    }

    fn describe(&self) -> String {
        format!(
            "{} per {} sliding log, ms clock",
            self.rate,
            Nanos(self.interval * MS)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(rate: u64, interval_ms: u64) -> Redisson {
        let config: Config =
            toml::from_str(&format!("rate = {rate}\nrate_interval = \"{interval_ms}ms\"")).unwrap();
        config.build(Context::default()).unwrap()
    }

    #[test]
    fn a_permit_leaves_when_its_score_is_interval_behind() {
        let mut l = limiter(2, 1_000);
        assert!(l.decide(Nanos(300 * MS + 999_999)).admitted());
        assert!(l.decide(Nanos(500 * MS)).admitted());
        // now = 1299 ms: the permit scored 300 is still in (300 > 299).
        let Decision::Reject(hint) = l.decide(Nanos(1_299 * MS + 5)) else {
            panic!("full")
        };
        // 3 + 1000 − (1299 − 300) = 4 ms.
        assert_eq!(hint.retry_at, Some(Nanos(1_303 * MS + 5)));
        assert!(l.decide(Nanos(1_300 * MS)).admitted(), "300 ≤ 1300 − 1000");
        assert!(!l.decide(Nanos(1_499 * MS)).admitted());
        assert!(l.decide(Nanos(1_500 * MS)).admitted());
    }

    #[test]
    fn two_n_pass_within_an_interval_less_a_millisecond() {
        let mut l = limiter(3, 1_000);
        let passed = |l: &mut Redisson, t| (0..5).filter(|_| l.decide(Nanos(t)).admitted()).count();
        assert_eq!(passed(&mut l, 999_999), 3);
        assert_eq!(passed(&mut l, 1_000 * MS), 3, "999 ms and 1 ns later");
        // Admitted 999 ms + 1 ns apart: together in an interval one longer.
        assert_eq!(l.bound(Nanos(999 * MS + 2)), 6);
        assert_eq!(l.bound(Nanos(999 * MS + 1)), 3);
    }

    #[test]
    fn a_client_behind_the_log_is_held_and_hinted_past_the_interval() {
        let mut l = limiter(1, 1_000);
        // Another client, 200 ms ahead, scored a permit at 1200.
        assert!(l.decide_on_clock::<true>(1_200 * MS).admitted());
        let Decision::Reject(hint) = l.decide_on_clock::<true>(1_000 * MS) else {
            panic!("full")
        };
        assert_eq!(hint.retry_at, Some(Nanos(2_203 * MS)), "3 + 1000 − (1000 − 1200)");
        // The client ahead removes it at its 2200; the one behind admits at its 2000.
        assert!(l.decide_on_clock::<true>(2_200 * MS).admitted());
        assert!(!l.decide_on_clock::<true>(2_000 * MS).admitted());
    }

    #[test]
    fn a_refund_takes_the_permit_back() {
        let mut l = limiter(1, 10);
        assert!(l.decide(Nanos(3 * MS)).admitted());
        l.refund(Nanos(3 * MS));
        assert!(l.decide(Nanos(4 * MS)).admitted());
        assert!(!l.decide(Nanos(5 * MS)).admitted());
    }

    #[test]
    fn across_clocks_the_gap_shrinks_by_the_skew() {
        let l = limiter(10, 1_000);
        // One clock: a place is reused 999 ms + 1 ns later at the earliest.
        assert_eq!(l.bound_across_clocks(999 * MS + 2, |g| g), 20);
        assert_eq!(l.bound_across_clocks(999 * MS + 1, |g| g), 10);
        // 300 ms apart: 699 ms + 1 ns.
        assert_eq!(l.bound_across_clocks(699 * MS + 2, |g| g + 300 * MS), 20);
        assert_eq!(l.bound_across_clocks(699 * MS + 1, |g| g + 300 * MS), 10);
        assert_eq!(l.bound_across_clocks(1, |g| g + 999 * MS + 1), u64::MAX);
    }

    #[test]
    fn the_interval_is_whole_milliseconds() {
        for bad in ["0ms", "1500us"] {
            let error =
                crate::limiter::tests::refusal::<Config>(&format!("rate = 1\nrate_interval = \"{bad}\""));
            assert!(error.contains("whole milliseconds"), "{error}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_passes_more_than_its_bound(
            interval in 1u64..2_000,
            rate in 1u64..6,
            mut times in proptest::collection::vec(0u64..5_000, 1..300),
        ) {
            let mut l = limiter(rate, interval);
            let over = crate::limiter::over_bound(&mut l, &mut times, &[Nanos(1), Nanos(MS), Nanos(MS + 1), Nanos(interval * MS), Nanos(interval * MS + 1), Nanos(3 * interval * MS)]);
            proptest::prop_assert!(over.is_none(), "{interval} ms, {rate}: {over:?}");
        }
    }
}
