//! HAProxy's request-rate limit: a stick table storing `http_req_rate(P)`,
//! `http-request track-sc0 …` counting every request (rejected ones too), and
//! `http-request deny if { sc_http_req_rate(0) gt L }`. The rate is a
//! `freq_ctr` (upstream, as Debian's 2.6.12 has it: `src/freq_ctr.c` and
//! `include/haproxy/freq_ctr.h`, `update_freq_ctr_period` and
//! `read_freq_ctr_period`), in whole milliseconds of HAProxy's clock:
//!
//! - on an event, when `now − curr_tick ≥ P` the counters rotate:
//!   `prev ← curr`, `curr ← 0`, `tick ← curr_tick + P`; when `now − tick ≥ P`
//!   too (two periods without events) `prev ← 0` and `tick ← now`; then
//!   `curr_tick ← tick & ~1` — the low bit is the rotation lock, so a stored
//!   tick is always even: an odd period is one millisecond shorter after
//!   the first, and a period opened on an odd millisecond starts one
//!   earlier. Then `curr += 1`;
//! - the rate read is `curr + ⌊prev · remain / P⌋` with
//!   `remain = curr_tick + P − now`, or `prev` itself when `curr = 0` and
//!   `prev ≤ 1` (the "flapping" correction; it never applies right after
//!   `track-sc`, which has just counted the request).
//!
//! Which milliseconds are odd depends on HAProxy's clock, not the run's:
//! `clock_offset` says where that clock stands at the run's start (modulo
//! 2 ms, the only part that changes a decision). With P = 1 ms every request
//! on an odd millisecond opens a new period and passes, whatever L; that is
//! refused rather than modelled as a limit.
//!
//! A request is denied when the rate read after counting it exceeds L. The
//! denial carries no `Retry-After`.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
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
    /// HAProxy's clock at the run's start, modulo 2 ms (default 0: the run
    /// starts on an even millisecond).
    #[serde(default)]
    pub clock_offset: Nanos,
}

fn second() -> Nanos {
    Nanos::SECOND
}

impl Kind for Config {
    const NAME: &'static str = "haproxy-rate";
    type State = HaproxyRate;

    fn build(&self, _: Context) -> Result<HaproxyRate, FieldError> {
        let period = self.period.get();
        if period == 0 || !period.is_multiple_of(NANOS_PER_MS) {
            return Err(field_error!("period", "HAProxy counts in whole milliseconds; {} is not a whole number of them",
                self.period
            ));
        }
        if period == NANOS_PER_MS {
            return Err(field_error!("period", "HAProxy's freq_ctr needs at least 2ms: its ticks are stored even, so with 1ms every request on an odd millisecond opens a new period and passes"));
        }
        if self.clock_offset.get() >= 2 * NANOS_PER_MS {
            return Err(field_error!("clock_offset", "HAProxy's clock at the run's start modulo 2ms (ticks are stored even), less than 2ms (got {})",
                self.clock_offset
            ));
        }
        if period / NANOS_PER_MS > u64::from(u32::MAX / 2) {
            return Err(field_error!("period", "at most 24 days, as HAProxy's ticks allow"));
        }
        Ok(HaproxyRate {
            period_ms: period / NANOS_PER_MS,
            limit: self.limit.get(),
            offset: self.clock_offset.get(),
            curr_tick: 0,
            curr: 0,
            prev: 0,
            started: false,
        })
    }

    super::parameter_is!(limit);

    /// Milliseconds are its clock: the contract tests' microsecond traffic
    /// sits inside one or two ticks; the module's own property test crosses
    /// periods.
    fn example(choice: u64) -> String {
        format!(
            "period = \"{}ms\"\nlimit = {}\nclock_offset = \"{}us\"",
            choice % 3 + 2,
            choice / 3 % 29 + 1,
            choice / 87 % 2_000
        )
    }
}

/// The stick table entry's `freq_ctr`.
#[derive(Clone, Debug)]
pub struct HaproxyRate {
    period_ms: u64,
    limit: u64,
    /// `clock_offset`, ns.
    offset: u64,
    /// The stored tick: always even.
    curr_tick: u64,
    curr: u64,
    prev: u64,
    /// Whether the key has an entry yet.
    started: bool,
}

impl HaproxyRate {
    /// `update_freq_ctr_period`: counts one event at `now` (ms). A fresh
    /// entry is zeroed, and HAProxy's clock is far past `2P` by then, so its
    /// first event takes the "two periods missed" branch.
    fn count(&mut self, now: u64) {
        if !self.started {
            self.started = true;
            self.prev = 0;
            self.curr = 1;
            self.curr_tick = now & !1;
            return;
        }
        if now - self.curr_tick < self.period_ms {
            self.curr += 1;
            return;
        }
        self.prev = self.curr;
        self.curr = 1;
        let mut tick = self.curr_tick + self.period_ms;
        if now - tick >= self.period_ms {
            self.prev = 0;
            tick = now;
        }
        self.curr_tick = tick & !1;
    }

    /// HAProxy's millisecond at the run's `now`.
    fn millisecond(&self, now: Nanos) -> u64 {
        // The offset is under 2 ms: split so nothing overflows near u64::MAX.
        let (whole, part) = (now.get() / NANOS_PER_MS, now.get() % NANOS_PER_MS);
        whole + (part + self.offset) / NANOS_PER_MS
    }

    /// The fewest milliseconds a period spans: `P`, or `P − 1` when P is
    /// odd (a rotated tick is rounded down to even, so the next period
    /// starts one millisecond earlier than P after the last).
    fn shortest_period_ms(&self) -> u64 {
        self.period_ms & !1
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
        let now_ms = self.millisecond(now);
        self.count(now_ms);
        let admit = self.rate(now_ms) <= self.limit;
        Decision::admit_or::<HINTS>(admit, || Hint::NONE)
    }

    /// Counted whatever the answer: `track-sc` runs before `deny`.
    fn refund(&mut self, _now: Nanos) {}

    /// L · (⌈X / P'⌉ + 1): `curr` counts every request of its period and
    /// a request passes only while `curr ≤ L`, so each period admits at most
    /// L; periods are disjoint and each spans at least P' = P rounded down
    /// to even milliseconds (a rotated tick is rounded down to even), so an
    /// interval of X meets at most ⌈X / P'⌉ + 1 of them.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let period = self.shortest_period_ms() * NANOS_PER_MS;
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

    fn haproxy_with(period_ms: u64, limit: u64, clock_offset: u64) -> HaproxyRate {
        Config {
            period: Nanos(period_ms * NANOS_PER_MS),
            limit: NonZeroU64::new(limit).unwrap(),
            clock_offset: Nanos(clock_offset),
        }
        .build(Context::default())
        .unwrap()
    }

    fn haproxy(limit: u64) -> HaproxyRate {
        haproxy_with(1_000, limit, 0)
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

    /// The stored tick is even: a period opened on an odd millisecond of
    /// HAProxy's clock starts one earlier, so which milliseconds are odd
    /// (`clock_offset`) changes the answers.
    #[test]
    fn periods_start_on_even_milliseconds_of_haproxys_clock() {
        let answers = |clock_offset| {
            let mut limiter = haproxy_with(1_000, 1, clock_offset);
            [1, 1_000, 2_000].map(|ms| at_ms(&mut limiter, ms, 1))
        };
        // Clock even at the start: the period opened at 1 ms starts at 0, so
        // 1000 ms rotates (prev 1 weighs fully) and 2000 ms rotates again
        // with prev = 2 at full weight: denied.
        assert_eq!(answers(0), [1, 0, 0]);
        // Clock odd: 1 ms is HAProxy's 2, an even tick; 1000 ms is still in
        // the first period, 2000 ms (HAProxy's 2001) rotates to 1002 with 1
        // ms left of prev's weight: ⌊2 · 1 / 1000⌋ = 0, admitted.
        assert_eq!(answers(NANOS_PER_MS), [1, 0, 1]);
        // Within a millisecond the offset moves the edges by its nanoseconds.
        assert_eq!(answers(NANOS_PER_MS - 1), [1, 0, 0]);
        assert_eq!(answers(2 * NANOS_PER_MS - 1), [1, 0, 1]);
    }

    /// An odd period is one millisecond shorter after a rotation: with
    /// P = 3 ms, ticks go 0, 2, 4, …, so a request at 2 ms opens a new period.
    #[test]
    fn an_odd_period_rotates_one_millisecond_early() {
        let mut limiter = haproxy_with(3, 1, 0);
        assert_eq!(at_ms(&mut limiter, 0, 1), 1);
        // 3 ms rotates to tick 2; prev 1 weighs ⌊1 · 2 / 3⌋ = 0.
        assert_eq!(at_ms(&mut limiter, 3, 1), 1);
        // 5 ms: 5 − 2 ≥ 3 rotates to tick 4 (5 rounded down), prev 1
        // weighs ⌊1 · 2 / 3⌋ = 0: admitted, 2 ms after the last.
        assert_eq!(at_ms(&mut limiter, 5, 1), 1);
        // With the tick left odd (5), 5 would not have rotated at 7; here
        // 7 − 4 ≥ 3 does.
        assert_eq!(at_ms(&mut limiter, 7, 1), 1);
        assert_eq!(at_ms(&mut limiter, 7, 1), 0);
    }

    #[test]
    fn a_one_millisecond_period_and_a_long_offset_are_refused() {
        let build = |period: u64, offset: u64| {
            Config {
                period: Nanos(period),
                limit: NonZeroU64::new(5).unwrap(),
                clock_offset: Nanos(offset),
            }
            .build(Context::default())
            .map(|_| ())
        };
        let error = build(NANOS_PER_MS, 0).unwrap_err();
        assert!(error.to_string().contains("at least 2ms"), "{error}");
        let error = build(NANOS_PER_MS * 2, 2 * NANOS_PER_MS).unwrap_err();
        assert!(error.to_string().contains("clock_offset"), "{error}");
        assert!(build(NANOS_PER_MS * 2, 2 * NANOS_PER_MS - 1).is_ok());
    }

    /// The clock of a run that ends near u64::MAX nanoseconds does not wrap.
    #[test]
    fn the_end_of_time_does_not_overflow() {
        let mut limiter = haproxy_with(2, 1, 2 * NANOS_PER_MS - 1);
        assert!(limiter.decide(Nanos(u64::MAX - 1)).admitted());
        assert!(!limiter.decide(Nanos(u64::MAX)).admitted());
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

        /// Odd and even periods, any clock offset, nanosecond times: the
        /// bound holds over intervals shorter and longer than a period.
        #[test]
        fn never_admits_more_than_its_bound_on_any_clock(
            period_ms in 2u64..12,
            limit in 1u64..6,
            offset in 0u64..2 * NANOS_PER_MS,
            mut times in proptest::collection::vec(0u64..40 * NANOS_PER_MS, 1..200),
        ) {
            times.sort_unstable();
            let mut limiter = haproxy_with(period_ms, limit, offset);
            let admitted: Vec<u64> = times.iter().copied().filter(|&t| limiter.decide(Nanos(t)).admitted()).collect();
            for interval in [1, NANOS_PER_MS, period_ms * NANOS_PER_MS - 1, period_ms * NANOS_PER_MS, 3 * period_ms * NANOS_PER_MS + 1] {
                let (worst, bound) = (crate::limiter::worst_in(&admitted, Nanos(interval)), limiter.bound(Nanos(interval)));
                proptest::prop_assert!(worst <= bound, "{} > {} over {} ns", worst, bound, interval);
            }
        }
    }
}
