//! redis-cell's `CL.THROTTLE <key> <max_burst> <count per period> <period>
//! [<quantity>]` (modelled from redis-cell 0.2.2 on crates.io: `src/lib.rs`,
//! `src/cell/mod.rs`, `src/cell/store.rs`; checked decision by decision
//! against that module loaded into a real redis-server in
//! `tests/integration/redis_cell_real.rs`): GCRA on the Redis server's own
//! clock, so one clock for every application instance.
//!
//! - the emission interval is `T = (period · 10⁹ as f64 / count as f64) as
//!   i64` ns (binary64, then truncated), the tolerance `τ = T · (max_burst +
//!   1)`, the increment `I = T · quantity`;
//! - a call reads the key's TAT (theoretical arrival time, Unix ns) or takes
//!   `now` for a missing key, sets `new = max(now, tat) + I` and refuses when
//!   `now < new − τ`; a pass writes `new` with a time to live of `(new −
//!   now)` truncated to whole milliseconds, which Redis counts from its
//!   millisecond clock and expires once that clock is past it — so a key can
//!   vanish up to a millisecond before its TAT, and a call then starts from
//!   `now`;
//! - the reply's `retry_after` and `reset_after` are whole seconds,
//!   truncated (`Duration::num_seconds`): a refusal less than a second from
//!   its retry says 0; `retry_after` is −1 (never) when the quantity is more
//!   than the burst can ever hold.
//!
//! Bound: each pass moves the TAT on by `I`, a pass needs `TAT ≤ now + τ`,
//! and a key that expires early gives back less than `min(1 ms, τ)`, at most
//! once per millisecond and once per `g = max(I − 1 ms + 1 ns, 1 ns)`:
//! `⌊(L − 1 + τ + R·(min(1 ms, τ) − 1 ns)) / I⌋` with `R = min(⌈(L − 1)/1
//! ms⌉, ⌊(L − 1)/g⌋)` — `max_burst + 1` plus the rate (and a little), not 2N.

use std::num::NonZeroU64;

use rustc_apfloat::Float;
use rustc_apfloat::ieee::Double;
use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::{NANOS_PER_SEC, Nanos};

const MS: u64 = 1_000_000;

/// The longest `period`: a year of seconds.
const MAX_PERIOD: u64 = 366 * 86_400;

/// The largest tolerance τ: keeps every instant inside redis-cell's `i64`
/// Unix nanoseconds for centuries.
const MAX_TOLERANCE: u64 = 1 << 60;

/// `kind = "redis-cell"`, as `CL.THROTTLE`'s arguments.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `max_burst`: requests beyond the steady rate at once (0: none).
    pub max_burst: u64,
    /// `count per period`: the steady rate's count.
    pub count_per_period: NonZeroU64,
    /// `period`: whole seconds.
    pub period: NonZeroU64,
    /// `quantity`: what each request takes (default 1).
    #[serde(default = "one")]
    pub quantity: NonZeroU64,
}

fn one() -> NonZeroU64 {
    NonZeroU64::MIN
}

impl Config {
    /// `Rate::per_period`: `(period ns as f64 / count as f64) as i64`.
    fn emission_interval(&self) -> Result<u64, FieldError> {
        let period = self.period.get();
        if period > MAX_PERIOD {
            return Err(field_error!("period", "at most a year ({MAX_PERIOD} s), in whole seconds"));
        }
        let ns = Double::from_u128(u128::from(period * NANOS_PER_SEC)).value;
        let count = Double::from_u128(u128::from(self.count_per_period.get())).value;
        let t = (ns / count).value.to_u128(64).value as u64;
        if t == 0 {
            return Err(field_error!(
                "count_per_period",
                "at most {} (one a nanosecond): redis-cell's emission interval would be 0 and it would pass everything",
                period * NANOS_PER_SEC
            ));
        }
        Ok(t)
    }
}

impl Kind for Config {
    const NAME: &'static str = "redis-cell";
    type State = RedisCell;

    fn build(&self, _: Context) -> Result<RedisCell, FieldError> {
        let t = self.emission_interval()?;
        let tau = u128::from(t) * (u128::from(self.max_burst) + 1);
        if tau > u128::from(MAX_TOLERANCE) {
            return Err(field_error!("max_burst", "too large: (max_burst + 1) times the emission interval must stay under 2^60 ns"));
        }
        let increment = u128::from(t) * u128::from(self.quantity.get());
        if increment > u128::from(MAX_TOLERANCE) {
            return Err(field_error!("quantity", "too large: quantity times the emission interval must stay under 2^60 ns"));
        }
        Ok(RedisCell {
            t,
            tau: tau as u64,
            increment: increment as u64,
            key: None,
            before: None,
        })
    }

    super::parameter_is!(count_per_period);

    fn example(choice: u64) -> String {
        format!(
            "max_burst = {}\ncount_per_period = {}\nperiod = 1\nquantity = {}",
            choice % 5,
            [100_000, 250_000, 1_000_000, 3_000_000][(choice / 5 % 4) as usize],
            choice / 20 % 3 + 1
        )
    }
}

/// One key of `CL.THROTTLE`.
#[derive(Clone, Debug)]
pub struct RedisCell {
    /// The emission interval T, ns.
    t: u64,
    /// τ = T · (max_burst + 1).
    tau: u64,
    /// T · quantity.
    increment: u64,
    /// The key's `(TAT, the last Redis millisecond it lives)`.
    key: Option<(u64, u64)>,
    /// The key before the last pass, for a refund.
    before: Option<(u64, u64)>,
}

impl RedisCell {
    /// The TAT redis-cell reads at `now`: the key's, while Redis keeps it.
    fn tat(&self, now: u64) -> u64 {
        match self.key {
            Some((tat, last_ms)) if now / MS <= last_ms => tat,
            _ => now,
        }
    }
}

impl RateLimiter for RedisCell {
    /// A refusal carries the reply's `retry_after` and `reset_after`, whole
    /// seconds counted from the reply (truncated).
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now = now.get();
        let tat = self.tat(now);
        let new = now.max(tat) + self.increment;
        if now + self.tau < new {
            return Decision::reject::<HINTS>(|| {
                let whole = |ns: u64| now + ns / NANOS_PER_SEC * NANOS_PER_SEC;
                Hint {
                    retry_at: (self.increment <= self.tau).then(|| Nanos(whole(new - self.tau - now))),
                    reset_at: Some(Nanos(whole(tat.saturating_sub(now)))),
                    ..Hint::NONE
                }
            });
        }
        self.before = self.key;
        self.key = Some((new, now / MS + (new - now) / MS));
        Decision::Admit
    }

    /// As if refused: the key as it was (a refusal writes nothing).
    fn refund(&mut self, _now: Nanos) {
        self.key = self.before;
    }

    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO || self.increment > self.tau {
            return 0;
        }
        let span = u128::from(interval.get() - 1);
        // Resets after the first pass: each in a later millisecond than
        // the write before it, and each needs the TAT under a millisecond
        // away, at least I − 1 ms + 1 ns after the segment's first pass.
        let gap = u128::from(self.increment.saturating_sub(MS - 1).max(1));
        let resets = span.div_ceil(u128::from(MS)).min(span / gap);
        let lost = u128::from(MS.min(self.tau) - 1);
        let most = (span + u128::from(self.tau) + resets * lost) / u128::from(self.increment);
        u64::try_from(most).unwrap_or(u64::MAX)
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX - 2 * MAX_TOLERANCE - MS)
    }

    /// `retry_after` is whole seconds, truncated.
    fn hint_granularity(&self) -> Nanos {
        Nanos::SECOND
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        interval.get() as f64 / self.increment as f64
    }

    /// One `CL.THROTTLE` a request; the key expires by itself.
    fn store_ops(&self) -> Option<StoreOps> {
        Some(StoreOps {
            per_request: 1,
            per_reset: 0,
        })
    }

    fn describe(&self) -> String {
        let burst = self.tau / self.t - 1;
        let quantity = self.increment / self.t;
        format!(
            "redis-cell GCRA, one per {}, max burst {burst}{}",
            Nanos(self.t),
            if quantity > 1 { format!(", quantity {quantity}") } else { String::new() }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(text: &str) -> RedisCell {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    fn passed(l: &mut RedisCell, at: u64, count: usize) -> usize {
        (0..count).filter(|_| l.decide(Nanos(at)).admitted()).count()
    }

    #[test]
    fn a_burst_then_the_rate_and_hints_in_whole_seconds() {
        // 10 per 10 s (T = 1 s), max burst 2: 3 at once, then one a second.
        let mut l = cell("max_burst = 2\ncount_per_period = 10\nperiod = 10");
        let s = NANOS_PER_SEC;
        assert_eq!(passed(&mut l, 5 * s, 5), 3);
        // TAT = 8 s; the next passes at TAT + T − τ = 6 s.
        assert_eq!(
            l.decide(Nanos(5 * s + 300 * MS)),
            Decision::Reject(Hint {
                retry_at: Some(Nanos(5 * s + 300 * MS)),
                reset_at: Some(Nanos(7 * s + 300 * MS)),
                ..Hint::NONE
            }),
            "0.7 s to retry says 0, 2.7 s to reset says 2"
        );
        assert!(!l.decide(Nanos(6 * s - 1)).admitted());
        assert!(l.decide(Nanos(6 * s)).admitted());
        // 3 + 9 by the rate, and ten early expiries worth under 1 ms each.
        assert_eq!(l.bound(Nanos(10 * s)), (13 * s - 1 + 10 * (MS - 1)) / s);
    }

    #[test]
    fn a_key_redis_expires_early_starts_from_now() {
        // T = 1 ms, no burst: τ = 1 ms. A pass at 0.9 ms writes TAT 1.9 ms
        // with a TTL of ⌊1 ms⌋ = 1 ms from Redis millisecond 0: the key
        // lives through millisecond 1 and is gone in millisecond 2.
        let mut l = cell("max_burst = 0\ncount_per_period = 1000\nperiod = 1");
        assert!(l.decide(Nanos(900_000)).admitted());
        assert!(!l.decide(Nanos(1_899_999)).admitted(), "TAT 1.9 ms still read");
        assert!(l.decide(Nanos(1_900_000)).admitted());
        // TAT 2.9 ms, TTL ⌊1 ms⌋ from millisecond 1: read up to 2.999… ms.
        assert!(!l.decide(Nanos(2_899_999)).admitted());
        // Faster: 10,000 a second (T = τ = 100 µs). A pass at 0.95 ms
        // writes TAT 1.05 ms with a TTL of 0 ms: at 1.0 ms Redis has
        // dropped the key, so it passes though the TAT is 50 µs away.
        let mut fast = cell("max_burst = 0\ncount_per_period = 10000\nperiod = 1");
        assert!(fast.decide(Nanos(950_000)).admitted());
        assert!(!fast.decide(Nanos(999_999)).admitted());
        assert!(fast.decide(Nanos(1_000_000)).admitted(), "expired a TAT early");
        // The bound counts it: up to 10,000 a second plus a reset each
        // millisecond worth under τ.
        assert_eq!(fast.bound(Nanos::SECOND), (999_999_999 + 100_000 + 1_000 * 99_999) / 100_000);
    }

    #[test]
    fn the_emission_interval_is_redis_cells_double_division() {
        // 10⁹ / 3 = 333,333,333.33… → 333,333,333 ns.
        let l = cell("max_burst = 0\ncount_per_period = 3\nperiod = 1");
        assert_eq!(l.t, 333_333_333);
        // 10⁹ / 999,999,999 = 1.000000001 → 1 ns; more than 10⁹ a second is refused.
        assert_eq!(cell("max_burst = 0\ncount_per_period = 999999999\nperiod = 1").t, 1);
        let refusal = crate::limiter::tests::refusal::<Config>("max_burst = 0\ncount_per_period = 2000000000\nperiod = 1");
        assert!(refusal.contains("count_per_period") && refusal.contains("pass everything"), "{refusal}");
    }

    #[test]
    fn a_quantity_over_the_burst_never_passes_and_says_never() {
        let mut l = cell("max_burst = 1\ncount_per_period = 1\nperiod = 1\nquantity = 3");
        let Decision::Reject(hint) = l.decide(Nanos(0)) else { panic!("refused") };
        assert_eq!(hint.retry_at, None);
        assert_eq!(l.bound(Nanos(100 * NANOS_PER_SEC)), 0);
    }

    #[test]
    fn a_refund_leaves_the_key_as_a_refusal_would() {
        let mut l = cell("max_burst = 0\ncount_per_period = 1\nperiod = 1");
        assert!(l.decide(Nanos(0)).admitted());
        l.refund(Nanos(0));
        assert!(l.decide(Nanos(1)).admitted());
        assert!(!l.decide(Nanos(2)).admitted());
    }

    proptest::proptest! {
        #[test]
        fn never_passes_more_than_its_bound(
            choice in 0u64..60,
            mut times in proptest::collection::vec(0u64..4_000_000, 1..300),
        ) {
            times.sort_unstable();
            let mut l = cell(&Config::example(choice));
            let admitted: Vec<u64> = times.iter().copied().filter(|&t| l.decide(Nanos(t)).admitted()).collect();
            for interval in [1, 1_000, 99_999, 100_000, MS, MS + 1, 3 * MS] {
                let (worst, bound) = (crate::limiter::worst_in(&admitted, Nanos(interval)), l.bound(Nanos(interval)));
                proptest::prop_assert!(worst <= bound, "{}: {} > {} over {}", Config::example(choice), worst, bound, interval);
            }
        }
    }
}
