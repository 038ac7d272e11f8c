//! HAProxy's request-rate limit: a stick table storing `http_req_rate(P)`,
//! `http-request track-sc0 …` counting every request (rejected ones too), and
//! `http-request deny if { sc_http_req_rate(0) gt L }`. The rate is a
//! `freq_ctr` (upstream: `src/freq_ctr.c`, `include/haproxy/freq_ctr.h`),
//! in whole milliseconds of HAProxy's clock:
//!
//! - on an event, when `now − curr_tick ≥ P` the counters rotate:
//!   `prev ← curr`, `curr ← 0`, `curr_tick += P`; after `2P` or more without
//!   events `prev ← 0` and `curr_tick ← now` (so periods are anchored at the
//!   key's first event); then `curr += 1`;
//! - the rate read is `curr + ⌊prev · remain / P⌋` with
//!   `remain = curr_tick + P − now`, or `prev` itself when `curr = 0` and
//!   `prev ≤ 1` (the "flapping" correction; it never applies right after
//!   `track-sc`, which has just counted the request).
//!
//! A request is denied when the rate read after counting it exceeds L. The
//! denial carries no `Retry-After`.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::time::Nanos;

const NANOS_PER_MS: u64 = 1_000_000;

/// `kind = "haproxy-rate"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `http_req_rate(P)`: the period, in whole milliseconds (default 1 s).
    #[serde(default = "second")]
    pub period: Nanos,
    /// `sc_http_req_rate(0) gt L`: the most requests per period.
    pub limit: NonZeroU64,
}

fn second() -> Nanos {
    Nanos::SECOND
}

impl Kind for Config {
    const NAME: &'static str = "haproxy-rate";
    type State = HaproxyRate;

    fn build(&self, _: Context) -> Result<HaproxyRate, String> {
        let period = self.period.get();
        if period == 0 || !period.is_multiple_of(NANOS_PER_MS) {
            return Err(format!(
                "period: HAProxy counts in whole milliseconds; {} is not a whole number of them",
                self.period
            ));
        }
        if period / NANOS_PER_MS > u64::from(u32::MAX / 2) {
            return Err("period: at most 24 days, as HAProxy's ticks allow".into());
        }
        Ok(HaproxyRate {
            period_ms: period / NANOS_PER_MS,
            limit: self.limit.get(),
            curr_tick: 0,
            curr: 0,
            prev: 0,
            started: false,
        })
    }

    super::parameter_is!(limit);

    /// Milliseconds are its clock: the contract tests' microsecond traffic
    /// sits inside one tick; the module's own property test crosses periods.
    fn example(choice: u64) -> String {
        format!(
            "period = \"{}ms\"\nlimit = {}",
            choice % 3 + 1,
            choice / 3 % 29 + 1
        )
    }
}

/// The stick table entry's `freq_ctr`.
#[derive(Clone, Debug)]
pub struct HaproxyRate {
    period_ms: u64,
    limit: u64,
    curr_tick: u64,
    curr: u64,
    prev: u64,
    /// Whether the key has an entry yet.
    started: bool,
}

impl HaproxyRate {
    /// `update_freq_ctr_period`: counts one event at `now` (ms).
    fn count(&mut self, now: u64) {
        let elapsed = now - self.curr_tick;
        if !self.started || elapsed >= 2 * self.period_ms {
            self.prev = 0;
            self.curr = 0;
            self.curr_tick = now;
            self.started = true;
        } else if elapsed >= self.period_ms {
            self.prev = self.curr;
            self.curr = 0;
            self.curr_tick += self.period_ms;
        }
        self.curr += 1;
    }

    /// `read_freq_ctr_period` at `now` (ms).
    fn rate(&self, now: u64) -> u64 {
        let (mut curr, mut past) = (self.curr, self.prev);
        let mut remain = i128::from(self.curr_tick) + i128::from(self.period_ms) - i128::from(now);
        if remain < 0 {
            remain += i128::from(self.period_ms);
            if remain < 0 {
                return 0;
            }
            past = curr;
            curr = 0;
        }
        if past <= 1 && curr == 0 {
            return past;
        }
        curr + (u128::from(past) * remain as u128 / u128::from(self.period_ms)) as u64
    }
}

impl RateLimiter for HaproxyRate {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now_ms = now.get() / NANOS_PER_MS;
        self.count(now_ms);
        let admit = self.rate(now_ms) <= self.limit;
        Decision::admit_or::<HINTS>(admit, || Hint::NONE)
    }

    /// Counted whatever the answer: `track-sc` runs before `deny`.
    fn refund(&mut self, _now: Nanos) {}

    /// L · (⌈X / P⌉ + 1): `curr` counts every request of its period and a
    /// request passes only while `curr ≤ L`, so each period admits at most
    /// L; periods are disjoint and P long, so an interval of X meets at
    /// most ⌈X / P⌉ + 1 of them.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let period = self.period_ms * NANOS_PER_MS;
        (interval.get().div_ceil(period) + 1).saturating_mul(self.limit)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.limit as f64 * interval.get() as f64 / (self.period_ms * NANOS_PER_MS) as f64
    }

    fn describe(&self) -> String {
        format!(
            "deny over {} per {} (freq_ctr)",
            self.limit,
            Nanos(self.period_ms * NANOS_PER_MS)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn haproxy(limit: u64) -> HaproxyRate {
        Config {
            period: Nanos::SECOND,
            limit: NonZeroU64::new(limit).unwrap(),
        }
        .build(Context::default())
        .unwrap()
    }

    fn at_ms(limiter: &mut HaproxyRate, ms: u64, tries: u64) -> usize {
        (0..tries)
            .filter(|_| limiter.decide(Nanos(ms * NANOS_PER_MS)).admitted())
            .count()
    }

    #[test]
    fn the_previous_period_weighs_by_what_is_left_of_the_current_one() {
        let mut limiter = haproxy(10);
        // Anchored at the first request: 10 pass at 100 ms, 5 more are counted and denied.
        assert_eq!(at_ms(&mut limiter, 100, 15), 10);
        // 1100 ms: a new period; prev = 15 weighs 15 · 1000/1000 = 15 > 10.
        assert_eq!(at_ms(&mut limiter, 1_100, 1), 0);
        // 1900 ms: 15 · 200/1000 = 3, curr 1 → 2..7 pass (rate ≤ 10).
        assert_eq!(at_ms(&mut limiter, 1_900, 10), 6);
    }

    #[test]
    fn two_idle_periods_forget_everything() {
        let mut limiter = haproxy(3);
        assert_eq!(at_ms(&mut limiter, 0, 5), 3);
        assert_eq!(at_ms(&mut limiter, 2_000, 5), 3);
    }

    proptest::proptest! {
        /// Over traffic that crosses periods: no rolling interval admits
        /// more than the bound, and the bound of one period is reached by
        /// two bursts either side of a period's edge.
        #[test]
        fn never_admits_more_than_its_bound(
            limit in 1u64..15,
            mut times in proptest::collection::vec(0u64..5_000, 1..300),
        ) {
            let mut limiter = haproxy(limit);
            let over = crate::limiter::over_bound(&mut limiter, &mut times, &[Nanos(300 * NANOS_PER_MS), Nanos::SECOND, Nanos(2_500 * NANOS_PER_MS)]);
            proptest::prop_assert!(over.is_none(), "{over:?}");
        }
    }
}
