//! Guava's `RateLimiter.create(permitsPerSecond)`, the `SmoothBursty`
//! limiter, asked with `tryAcquire()` (modelled from guava's
//! `util/concurrent/SmoothRateLimiter.java` and `RateLimiter.java`, 31.1 as
//! Debian ships it; checked decision by decision against that jar in
//! `tests/integration/guava_real.rs`):
//!
//! - time is the limiter's stopwatch in whole microseconds since it was
//!   created (here: the run's start);
//! - `tryAcquire()` passes when `nextFreeTicketMicros ≤ now`, and refuses
//!   without touching anything otherwise;
//! - a pass first resyncs: when `now > nextFree`, the idle time becomes
//!   stored permits, `min(maxPermits, stored + (now − nextFree)/interval)`
//!   with `interval = 1 s / permitsPerSecond` and `maxPermits =
//!   maxBurstSeconds · permitsPerSecond` (1 s for `create`), and
//!   `nextFree = now`; then it spends a stored permit if it has a whole one,
//!   or the fraction it has and pays the rest later: `nextFree +=
//!   (long)((1 − stored) · interval)`.
//!
//! A fresh limiter stores nothing (`storedPermits = 0` on creation), but a
//! limiter idle for a second stores a second's worth: N stored plus the one
//! paid later plus N − 1 paced ones — 2N in a rolling second.
//!
//! Guava computes the stored permits and the wait in Java doubles, and a
//! wait one microsecond short of the exact one is common (1 − 0.917019 is
//! not 0.082981 in binary). The model repeats each of those operations in
//! IEEE binary64 with round-to-nearest, as Java does, but in integer
//! arithmetic (`rustc_apfloat`, LLVM's APFloat): every decision is Guava's,
//! and the same on any machine. No decision reads a hardware float.
//!
//! With `warmup_period`, `RateLimiter.create(N, warmupPeriod)`: the
//! `SmoothWarmingUp` limiter (cold factor 3). It starts cold, with
//! `maxPermits` stored; idle time adds `maxPermits / warmupPeriod` permits a
//! microsecond; and a stored permit is not free but costs the area under
//! the line from the stable interval (at `thresholdPermits = 0.5 ·
//! warmupPeriod / interval`) to three times it (at `maxPermits =
//! threshold + 2 · warmupPeriod / (4 · interval)`), so a cold limiter paces
//! at up to 3 intervals and a warm one at 1: every pass pushes the next
//! free ticket at least an interval ahead, less the three `(long)`
//! truncations — N + 1 in a second, never 2N.
//!
//! Not modelled: waiting `acquire()` / `tryAcquire(timeout)`, and rates of
//! 10⁶ or more per second (whose interval is under a microsecond, where
//! Guava's `(long)` truncation paces nothing at all).

use std::num::NonZeroU64;

use rustc_apfloat::Float;
use rustc_apfloat::ieee::Double;
use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const MICROS_PER_SEC: u64 = 1_000_000;

/// `kind = "guava"`, as `RateLimiter.create(permits_per_second)`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `permitsPerSecond`.
    pub permits_per_second: NonZeroU64,
    /// `SmoothBursty`'s `maxBurstSeconds`: how many seconds of permits an
    /// idle limiter stores (1 for `create`).
    #[serde(default = "one")]
    pub max_burst_seconds: u64,
    /// `create(permitsPerSecond, warmupPeriod)`: a `SmoothWarmingUp`
    /// limiter warming up over this long (whole microseconds, as Guava
    /// keeps it) instead of a bursty one.
    pub warmup_period: Option<Nanos>,
}

fn one() -> u64 {
    1
}

impl Kind for Config {
    const NAME: &'static str = "guava";
    type State = Guava;

    fn build(&self, _: Context) -> Result<Guava, FieldError> {
        let rate = self.permits_per_second.get();
        if rate >= MICROS_PER_SEC {
            return Err(field_error!("permits_per_second", "below 1000000: Guava's interval of 1s/{rate} is under its clock's microsecond, and its truncation then paces nothing"));
        }
        if self.max_burst_seconds > 86_400 {
            return Err(field_error!("max_burst_seconds", "at most a day (86400)"));
        }
        // setRate: stableIntervalMicros = 1e6 / permitsPerSecond.
        let per_second = double(u128::from(rate));
        let interval = (double(u128::from(MICROS_PER_SEC)) / per_second).value;
        let Some(warmup) = self.warmup_period else {
            // SmoothBursty: maxPermits = maxBurstSeconds · permitsPerSecond,
            // storedPermits = 0, cooling down an interval a permit.
            return Ok(Guava {
                rate,
                burst_seconds: self.max_burst_seconds,
                interval: interval.into(),
                max_stored: (double(u128::from(self.max_burst_seconds)) * per_second).value.into(),
                stored: Double::ZERO.into(),
                cool_down: interval.into(),
                warm: None,
                next_free: 0,
                before: (Double::ZERO.into(), 0),
            });
        };
        if self.max_burst_seconds != 1 {
            return Err(field_error!("max_burst_seconds", "is SmoothBursty's; a limiter with warmup_period stores what its warm-up sets"));
        }
        let micros = warmup.get() / 1_000;
        if micros == 0 || micros > 86_400 * MICROS_PER_SEC {
            return Err(field_error!("warmup_period", "from 1us to a day, not {warmup}"));
        }
        // SmoothWarmingUp.doSetRate with coldFactor 3, each operation as
        // Java evaluates it (left to right, long → double).
        let w = double(u128::from(micros));
        let cold = (interval * double(3)).value;
        let threshold = ((Double::from_u128(1).value / double(2)).value * w).value / interval;
        let threshold = threshold.value;
        let max = (threshold + ((double(2) * w).value / (interval + cold).value).value).value;
        let slope = ((cold - interval).value / (max - threshold).value).value;
        Ok(Guava {
            rate,
            burst_seconds: 0,
            interval: interval.into(),
            max_stored: max.into(),
            // The initial state is cold: maxPermits stored.
            stored: max.into(),
            cool_down: (w / max).value.into(),
            warm: Some((threshold.into(), slope.into())),
            next_free: 0,
            before: (max.into(), 0),
        })
    }

    super::parameter_is!(permits_per_second);

    fn example(choice: u64) -> String {
        let rate = [1, 3, 7, 10, 300, 999, 250_000, 999_999][(choice % 8) as usize];
        match choice / 8 % 4 {
            3 => format!(
                "permits_per_second = {rate}\nwarmup_period = \"{}us\"",
                [1, 999, 1_000_000, 3_000_001][(choice / 32 % 4) as usize]
            ),
            burst => format!("permits_per_second = {rate}\nmax_burst_seconds = {burst}"),
        }
    }
}

/// A Java `(double)` of a whole number (exact below 2⁵³, as here).
fn double(value: u128) -> Double {
    Double::from_u128(value).value
}

/// A binary64 kept as its 64 bits: the soft-float value is 32 bytes, and a
/// limiter per key keeps one state per key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bits(u64);

impl From<Double> for Bits {
    fn from(value: Double) -> Bits {
        Bits(value.to_bits() as u64)
    }
}

impl From<Bits> for Double {
    fn from(bits: Bits) -> Double {
        Double::from_bits(u128::from(bits.0))
    }
}

/// `SmoothBursty`'s or `SmoothWarmingUp`'s state, its doubles as Java
/// holds them.
#[derive(Clone, Debug)]
pub struct Guava {
    rate: u64,
    /// `maxBurstSeconds` (0 when warming up).
    burst_seconds: u64,
    /// `stableIntervalMicros`.
    interval: Bits,
    /// `maxPermits`.
    max_stored: Bits,
    /// `storedPermits`.
    stored: Bits,
    /// `coolDownIntervalMicros()`: the interval, or `warmupPeriod / maxPermits`.
    cool_down: Bits,
    /// Warming up: `thresholdPermits` and `slope`.
    warm: Option<(Bits, Bits)>,
    /// `nextFreeTicketMicros`.
    next_free: u64,
    /// `(stored, next_free)` before the last pass, for a refund.
    before: (Bits, u64),
}

/// Java's `(long)` of a non-negative double: truncated toward zero.
fn truncated(value: Double) -> u64 {
    value.to_i128(64).value.max(0) as u64
}

impl Guava {
    /// `storedPermitsToWaitTime(stored, take)`: 0 for `SmoothBursty`; for
    /// `SmoothWarmingUp` the area under its line over the permits taken.
    fn stored_wait(&self, stored: Double, take: Double) -> u64 {
        let Some((threshold, slope)) = self.warm else {
            return 0;
        };
        let interval = Double::from(self.interval);
        let slope = Double::from(slope);
        let time = |permits: Double| (interval + (permits * slope).value).value;
        let above = (stored - Double::from(threshold)).value;
        let mut take = take;
        let mut micros = 0;
        if above > Double::ZERO {
            let taken = above.min(take);
            let length = (time(above) + time((above - taken).value)).value;
            micros = truncated(((taken * length).value / double(2)).value);
            take = (take - taken).value;
        }
        micros + truncated((interval * take).value)
    }
}

impl RateLimiter for Guava {
    /// A refusal is `tryAcquire()` returning false: no hint.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now = now.get() / 1_000;
        if self.next_free > now {
            return Decision::Reject(Hint::NONE);
        }
        self.before = (self.stored, self.next_free);
        let interval = Double::from(self.interval);
        let mut stored = Double::from(self.stored);
        // resync(now)
        if now > self.next_free {
            let idle = double(u128::from(now - self.next_free));
            let fresh = (idle / Double::from(self.cool_down)).value;
            stored = Double::from(self.max_stored).min((stored + fresh).value);
            self.next_free = now;
        }
        // reserveEarliestAvailable(1, now)
        let spent = Double::from_u128(1).value.min(stored);
        let owed = (Double::from_u128(1).value - spent).value;
        let wait = self.stored_wait(stored, spent) + truncated((owed * interval).value);
        self.next_free = self.next_free.saturating_add(wait);
        self.stored = (stored - spent).value.into();
        Decision::Admit
    }

    fn refund(&mut self, _now: Nanos) {
        (self.stored, self.next_free) = self.before;
    }

    /// With Φ = stored + (now − nextFree)·rate/10⁶ permits: at most the
    /// burst B when a first pass resyncs, at least 0 before every pass, it
    /// grows by rate/10⁶ a microsecond and each pass takes more than 1 −
    /// rate/10⁶ (a whole permit, less under a microsecond lost to
    /// `(long)`). The k passes in [s, s + L) span U = ⌊(L + 998)/1000⌋
    /// microseconds, so (k − 1)(10⁶ − rate) < 10⁶·B + U·rate; one more is
    /// allowed where that quotient is whole, for the doubles' rounding.
    ///
    /// Warming up, nothing stored is free: each pass pushes the next free
    /// ticket at least ⌈10⁶/rate⌉ − 4 µs past it (an interval, less three
    /// truncations and the doubles' rounding), so k ≤ U / that + 1.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let span = (u128::from(interval.get()) + 998) / 1_000;
        if self.warm.is_some() {
            let gap = u128::from(MICROS_PER_SEC.div_ceil(self.rate).saturating_sub(4));
            return match gap {
                0 => u64::MAX,
                gap => u64::try_from(span / gap + 1).unwrap_or(u64::MAX),
            };
        }
        let burst = u128::from(self.burst_seconds) * u128::from(self.rate) * u128::from(MICROS_PER_SEC);
        let gained = burst + span * u128::from(self.rate);
        let per_pass = u128::from(MICROS_PER_SEC - self.rate);
        u64::try_from(gained / per_pass + 1).unwrap_or(u64::MAX)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.rate as f64 * interval.as_secs_f64()
    }

    fn describe(&self) -> String {
        match self.warm {
            Some(_) => format!("Guava {}/s, warming up", self.rate),
            None => format!(
                "Guava {}/s, bursty ({} s stored)",
                self.rate, self.burst_seconds
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn guava(rate: u64) -> Guava {
        let config: Config = toml::from_str(&format!("permits_per_second = {rate}")).unwrap();
        config.build(Context::default()).unwrap()
    }

    fn passed(l: &mut Guava, at_ms: u64, count: usize) -> usize {
        (0..count)
            .filter(|_| l.decide(Nanos(at_ms * MS)).admitted())
            .count()
    }

    #[test]
    fn a_fresh_limiter_stores_nothing_and_paces_from_its_first_pass() {
        let mut l = guava(10);
        assert_eq!(passed(&mut l, 0, 5), 1);
        assert_eq!(passed(&mut l, 99, 1), 0);
        assert_eq!(passed(&mut l, 100, 5), 1);
    }

    #[test]
    fn an_idle_second_stores_n_and_lets_2n_through_in_a_rolling_second() {
        let mut l = guava(10);
        assert_eq!(passed(&mut l, 0, 1), 1);
        // Idle from 100 ms (its next free ticket) to 1.1 s: 10 stored.
        let mut total = passed(&mut l, 1_100, 20);
        assert_eq!(total, 11, "ten stored and one paid later");
        for ms in (1_200..2_100).step_by(100) {
            total += passed(&mut l, ms, 3);
        }
        assert_eq!(total, 20, "2N within [1.1 s, 2.1 s)");
        assert_eq!(l.bound(Nanos::SECOND), 21, "21 where the microseconds allow it");
    }

    #[test]
    fn a_fraction_stored_shortens_the_next_wait() {
        let mut l = guava(4);
        assert!(l.decide(Nanos(0)).admitted());
        // next free at 250 ms; idle 125 ms more stores half a permit.
        assert!(l.decide(Nanos(375 * MS)).admitted());
        assert!(!l.decide(Nanos(499 * MS)).admitted());
        assert!(l.decide(Nanos(500 * MS)).admitted(), "125 ms: the half it lacked");
    }

    fn warming(rate: u64, warmup: &str) -> Guava {
        let config: Config = toml::from_str(&format!(
            "permits_per_second = {rate}\nwarmup_period = \"{warmup}\""
        ))
        .unwrap();
        config.build(Context::default()).unwrap()
    }

    /// The passes of a request every millisecond from `from_ms` to `to_ms`.
    fn passes(l: &mut Guava, from_ms: u64, to_ms: u64) -> Vec<u64> {
        (from_ms..to_ms)
            .filter(|&ms| l.decide(Nanos(ms * MS)).admitted())
            .collect()
    }

    #[test]
    fn a_cold_limiter_paces_down_the_warm_up_line_to_its_interval() {
        // 10/s over 1 s: threshold 5 permits, maxPermits 10, slope 40 ms a
        // permit. Cold, a pass costs the trapezoid under the permit it
        // takes: (300 + 260)/2 = 280 ms, then 240, 200, 160, 120 — then
        // the stable 100 ms.
        let mut l = warming(10, "1s");
        assert_eq!(
            passes(&mut l, 0, 1_600),
            [0, 280, 520, 720, 880, 1_000, 1_100, 1_200, 1_300, 1_400, 1_500]
        );
        assert_eq!(l.bound(Nanos::SECOND), 11, "N + 1, never 2N");
        // Idle 1 s cools it by 1 s / (1 s / 10 permits) = 10 permits: cold again.
        assert_eq!(passes(&mut l, 2_600, 3_600), [2_600, 2_880, 3_120, 3_320, 3_480]);
    }

    #[test]
    fn warming_up_is_its_own_setting() {
        for (text, says) in [
            ("permits_per_second = 10\nwarmup_period = \"999ns\"", "from 1us"),
            ("permits_per_second = 10\nwarmup_period = \"1s\"\nmax_burst_seconds = 2", "SmoothBursty's"),
        ] {
            let error = crate::limiter::tests::refusal::<Config>(text);
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_passes_more_than_its_bound(
            choice in 0u64..1_000,
            mut times in proptest::collection::vec(0u64..3_000, 1..300),
        ) {
            let config: Config = toml::from_str(&Config::example(choice)).unwrap();
            let mut l = config.build(Context::default()).unwrap();
            let over = crate::limiter::over_bound(&mut l, &mut times, &[Nanos(1), Nanos(MS), Nanos(100 * MS), Nanos::SECOND, Nanos(2_500 * MS)]);
            proptest::prop_assert!(over.is_none(), "{}: {over:?}", Config::example(choice));
        }
    }
}
