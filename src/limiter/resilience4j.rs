//! Resilience4j's default rate limiter, `AtomicRateLimiter` (modelled from
//! resilience4j-ratelimiter's `internal/AtomicRateLimiter.java`, 2.x line):
//! time since a fixed start (`nanoTime() − nanoTimeStart`) is cut into
//! cycles of `limit_refresh_period`; each cycle brings `limit_for_period`
//! permissions, capped at that many (unused ones are lost). A caller takes
//! one at once when one is left; otherwise it reserves one of a later cycle
//! — the balance goes negative — when the wait to that cycle's start is
//! within `timeout_duration`, and parks until then; beyond it, it is refused
//! (`RequestNotPermitted`, no retry hint).
//!
//! In integers, exactly as the source: at `t` in cycle c, the balance p is
//! `min(p + (c − c_last)·N, N)`; the wait is 0 when p ≥ 1, else
//! `((c + 1)·P − t) + ⌊−p / N⌋·P` — the start of a later cycle. So every
//! caller that waits wakes at the same instant, the cycle's start, together
//! with that cycle's first callers: a herd made by the limiter itself. Each
//! cycle's permissions are spent once, so at most N reach the backend in any
//! one cycle; N at the end of one and N at the start of the next pass in a
//! nanosecond.
//!
//! The cycles' origin is the class's `nanoTimeStart` (a static in the
//! version read: when the class loaded, so cycles are not aligned to
//! anything the caller sees); `cycle_offset` is how long before the run's
//! start that was, so edges fall at k·P − offset.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// `kind = "resilience4j"`, as `resilience4j.ratelimiter.instances.NAME.*`
/// in snake_case; defaults are `RateLimiterConfig`'s own.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `limitForPeriod`: permissions per cycle (default 50).
    #[serde(default = "default_limit")]
    pub limit_for_period: NonZeroU64,
    /// `limitRefreshPeriod`: the cycle (default 500 ns).
    #[serde(default = "default_period")]
    pub limit_refresh_period: Nanos,
    /// `timeoutDuration`: how long a caller may wait for a permission
    /// (default 5 s).
    #[serde(default = "default_timeout", alias = "timeout")]
    pub timeout_duration: Nanos,
    /// How long before the run's start the cycles' origin lies (default 0).
    #[serde(default)]
    pub cycle_offset: Nanos,
}

fn default_limit() -> NonZeroU64 {
    NonZeroU64::new(50).unwrap_or(NonZeroU64::MIN)
}

fn default_period() -> Nanos {
    Nanos(500)
}

fn default_timeout() -> Nanos {
    Nanos(5 * Nanos::SECOND.get())
}

impl Kind for Config {
    const NAME: &'static str = "resilience4j";
    type State = Resilience4j;

    /// The constructor's state: cycle 0 with a full cycle's permissions.
    fn build(&self, _: Context) -> Result<Resilience4j, FieldError> {
        if self.limit_for_period.get() > i32::MAX as u64 {
            return Err(field_error!("limit_for_period", "at most {} (a Java int)", i32::MAX));
        }
        if self.limit_refresh_period == Nanos::ZERO {
            return Err(field_error!("limit_refresh_period", "must be at least 1ns"));
        }
        // Resilience4j keeps the balance in an int: more waiting callers
        // than an int holds is refused rather than wrapped.
        let reservable = u128::from(self.timeout_duration.get() / self.limit_refresh_period.get() + 1)
            * u128::from(self.limit_for_period.get());
        if reservable > i32::MAX as u128 {
            return Err(field_error!("timeout_duration", "lets more callers wait ({reservable}) than Resilience4j's int balance holds"));
        }
        Ok(Resilience4j {
            period: self.limit_refresh_period.get(),
            limit: self.limit_for_period.get() as i64,
            timeout: self.timeout_duration.get(),
            offset: self.cycle_offset.get(),
            cycle: 0,
            permissions: self.limit_for_period.get() as i64,
            before: (0, 0),
        })
    }

    super::parameter_is!(limit_for_period);

    fn example(choice: u64) -> String {
        format!(
            "limit_for_period = {}\nlimit_refresh_period = \"{}ns\"\ntimeout_duration = \"{}ns\"\ncycle_offset = \"{}ns\"",
            choice % 12 + 1,
            [1, 7, 250, 999, 1_000, 1_003][(choice / 12 % 6) as usize],
            [0, 1, 500, 999, 1_000, 3_000][(choice / 72 % 6) as usize],
            choice / 432 % 2_000
        )
    }
}

/// `AtomicRateLimiter.State`: the active cycle and its balance.
#[derive(Clone, Debug)]
pub struct Resilience4j {
    period: u64,
    limit: i64,
    timeout: u64,
    offset: u64,
    cycle: u64,
    permissions: i64,
    /// `(cycle, permissions)` before the last admission, for a refund.
    before: (u64, i64),
}

impl RateLimiter for Resilience4j {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let current = now.get() + self.offset;
        let cycle = current / self.period;
        let mut permissions = self.permissions;
        if cycle != self.cycle {
            let elapsed = i128::from(cycle - self.cycle);
            let refilled = i128::from(permissions) + elapsed * i128::from(self.limit);
            permissions = refilled.min(i128::from(self.limit)) as i64;
        }
        let wait = if permissions >= 1 {
            0
        } else {
            let to_next = (cycle + 1) * self.period - current;
            (-permissions / self.limit) as u64 * self.period + to_next
        };
        self.before = (self.cycle, self.permissions);
        self.cycle = cycle;
        if wait > self.timeout {
            self.permissions = permissions;
            return Decision::Reject(Hint::NONE);
        }
        self.permissions = permissions - 1;
        match wait {
            0 => Decision::Admit,
            wait => Decision::Delay(Nanos(wait)),
        }
    }

    fn refund(&mut self, _now: Nanos) {
        (self.cycle, self.permissions) = self.before;
    }

    /// At most N released in any cycle (each cycle's permissions are spent
    /// once, by callers taking them in it or waking at its start): N per
    /// cycle met, 2N in a nanosecond across an edge.
    fn bound(&self, interval: Nanos) -> u64 {
        super::fixed_window::windows_met(interval.get(), self.period).saturating_mul(self.limit as u64)
    }

    /// Decided within L, they are released within L + timeout.
    fn decision_bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        super::fixed_window::windows_met(interval.get().saturating_add(self.timeout), self.period)
            .saturating_mul(self.limit as u64)
    }

    fn max_delay(&self) -> Nanos {
        Nanos(self.timeout)
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX - self.timeout - self.offset - 2 * self.period.min(u64::MAX / 4))
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.limit as f64 * interval.get() as f64 / self.period as f64
    }

    fn describe(&self) -> String {
        format!(
            "{} per {} cycle, wait ≤ {}",
            self.limit,
            Nanos(self.period),
            Nanos(self.timeout)
        )
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        Some((
            Nanos(self.period),
            Nanos((self.period - self.offset % self.period) % self.period),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn limiter(text: &str) -> Resilience4j {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    #[test]
    fn waiters_wake_together_at_the_cycle_start() {
        let mut l = limiter("limit_for_period = 3\nlimit_refresh_period = \"1s\"\ntimeout_duration = \"5s\"");
        let at = 700 * MS;
        let delays: Vec<Option<u64>> = (0..8)
            .map(|_| {
                let d = l.decide(Nanos(at));
                d.admitted().then(|| (at + d.delay().get()) / MS)
            })
            .collect();
        // Three now, three at 1 s, two at 2 s: every waiter of a cycle
        // released at its very start.
        assert_eq!(
            delays,
            [700, 700, 700, 1_000, 1_000, 1_000, 2_000, 2_000].map(Some)
        );
        // A new caller at 1.5 s finds cycle 1's permissions taken and
        // takes cycle 2's last; the next waits for cycle 3.
        assert_eq!(l.decide(Nanos(1_500 * MS)).delay(), Nanos(500 * MS));
        assert_eq!(l.decide(Nanos(1_500 * MS)).delay(), Nanos(1_500 * MS));
    }

    #[test]
    fn past_the_timeout_it_refuses_and_reserves_nothing() {
        let mut l = limiter("limit_for_period = 2\nlimit_refresh_period = \"1s\"\ntimeout_duration = \"300ms\"");
        assert!(l.decide(Nanos(0)).admitted());
        assert!(l.decide(Nanos(0)).admitted());
        assert!(!l.decide(Nanos(600 * MS)).admitted(), "400 ms to wait");
        assert_eq!(l.decide(Nanos(700 * MS)).delay(), Nanos(300 * MS));
        assert_eq!(l.decide(Nanos(1_000 * MS)).delay(), Nanos::ZERO, "one left");
        assert!(!l.decide(Nanos(1_000 * MS)).admitted(), "a whole cycle to wait");
    }

    #[test]
    fn cycles_count_from_the_offset() {
        let mut l = limiter("limit_for_period = 1\nlimit_refresh_period = \"1s\"\ntimeout_duration = \"0s\"\ncycle_offset = \"300ms\"");
        assert!(l.decide(Nanos(0)).admitted());
        assert!(!l.decide(Nanos(699 * MS)).admitted());
        assert!(l.decide(Nanos(700 * MS)).admitted(), "a new cycle at 1 s after the origin");
        assert_eq!(l.window_edges(), Some((Nanos::SECOND, Nanos(700 * MS))));
    }

    proptest::proptest! {
        #[test]
        fn never_releases_more_than_its_bound(
            choice in 0u64..1_000_000,
            mut times in proptest::collection::vec(0u64..20_000, 1..300),
        ) {
            times.sort_unstable();
            let text = Config::example(choice);
            let mut l = limiter(&text);
            let mut released = Vec::new();
            let mut decided = Vec::new();
            for &t in &times {
                let d = l.decide(Nanos(t));
                if d.admitted() {
                    released.push(t + d.delay().get());
                    decided.push(t);
                }
            }
            released.sort_unstable();
            for interval in [1, 7, 250, 999, 1_000, 1_001, 5_000] {
                let interval = Nanos(interval);
                let worst = crate::limiter::worst_in(&released, interval);
                proptest::prop_assert!(worst <= l.bound(interval), "{}: {} over {}", text, worst, interval);
                let worst = crate::limiter::worst_in(&decided, interval);
                proptest::prop_assert!(worst <= l.decision_bound(interval), "{}: decided {} over {}", text, worst, interval);
            }
        }
    }
}
