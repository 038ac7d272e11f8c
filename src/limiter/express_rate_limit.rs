//! Node's `express-rate-limit` (7.x) with its default `MemoryStore`
//! (modelled from `source/memory-store.ts` and `source/lib.ts` of 7.5.0,
//! the version `tests/probe_express` pins; checked decision by decision
//! against it in `tests/integration/express_real.rs`):
//!
//! - a client's window opens at its first hit: `resetTime = Date.now() +
//!   windowMs` in whole milliseconds; a hit at or after `resetTime` opens a
//!   new one there (`resetTime ≤ now` resets the count);
//! - every hit counts, the refused ones too (`increment` runs before the
//!   check), and a hit is refused when the count exceeds `limit`;
//! - a refusal answers 429 with `Retry-After: ⌈(resetTime − now)/1000⌉`
//!   whole seconds (and the draft headers' `reset` the same), counted from
//!   the response.
//!
//! The store's timer, which forgets clients idle for two windows, changes no
//! decision: a forgotten client's window had ended anyway.
//!
//! Per client (`keyGenerator`, the IP by default) is `per = "key"`. Shared by
//! a `[cluster]` with `mode = "shared-store-clock"`, the window is an
//! external store's (`rate-limit-redis`: `INCR`, then `PEXPIRE windowMs` when
//! the key has no expiry, on the store's clock), and when the store fails the
//! hit throws into Express's error handler, a 500 (`passOnStoreError = false`,
//! `source/lib.ts`), or passes unlimited with `pass_on_store_error = true`.
//! Not modelled: `skipFailedRequests` / `skipSuccessfulRequests` (they need
//! the response).
//!
//! N at the end of a window and N at the start of the next pass within a
//! millisecond or two: 2N, as for any fixed window.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const NANOS_PER_MS: u64 = 1_000_000;

/// `kind = "express-rate-limit"`, as `rateLimit({ windowMs, limit })`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `windowMs` (default 60000).
    #[serde(default = "minute")]
    pub window_ms: NonZeroU64,
    /// `limit` (`max` before 7.0; default 5).
    #[serde(default = "five", alias = "max")]
    pub limit: NonZeroU64,
    /// `passOnStoreError` (default false): when a shared store (a `[cluster]`
    /// with `mode = "shared-store-clock"`, as `rate-limit-redis`) fails, let
    /// the request through instead of passing the error on (a 500).
    #[serde(default)]
    pub pass_on_store_error: bool,
}

fn minute() -> NonZeroU64 {
    NonZeroU64::new(60_000).unwrap_or(NonZeroU64::MIN)
}

fn five() -> NonZeroU64 {
    NonZeroU64::new(5).unwrap_or(NonZeroU64::MIN)
}

impl Kind for Config {
    const NAME: &'static str = "express-rate-limit";
    type State = ExpressRateLimit;

    fn build(&self, _: Context) -> Result<ExpressRateLimit, FieldError> {
        // JavaScript's Date holds ±8.64·10¹⁵ ms; a window past that is not one.
        if self.window_ms.get() > 8_640_000_000_000_000 {
            return Err(field_error!("window_ms", "at most 8640000000000000 (JavaScript's Date range)"));
        }
        Ok(ExpressRateLimit {
            window: self.window_ms.get(),
            limit: self.limit.get(),
            reset: None,
            hits: 0,
        })
    }

    super::parameter_is!(limit);

    fn example(choice: u64) -> String {
        format!(
            "window_ms = {}\nlimit = {}",
            [1, 2, 3, 1_000][(choice % 4) as usize],
            choice / 4 % 20 + 1
        )
    }
}

/// One client's `MemoryStore` entry.
#[derive(Clone, Debug)]
pub struct ExpressRateLimit {
    window: u64,
    limit: u64,
    /// `resetTime`, in milliseconds; `None` before the first hit.
    reset: Option<u64>,
    /// `totalHits`.
    hits: u64,
}

impl RateLimiter for ExpressRateLimit {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let ms = now.get() / NANOS_PER_MS;
        let reset = match self.reset {
            Some(reset) if reset > ms => reset,
            _ => {
                self.hits = 0;
                let reset = ms.saturating_add(self.window);
                self.reset = Some(reset);
                reset
            }
        };
        self.hits += 1;
        Decision::admit_or::<HINTS>(self.hits <= self.limit, || {
            let seconds = (reset - ms).div_ceil(1_000);
            Hint::at_reset(now.get().saturating_add(seconds.saturating_mul(Nanos::SECOND.get())))
        })
    }

    /// Every hit counts, whatever a later layer answers: nothing to take back.
    fn refund(&mut self, _now: Nanos) {}

    /// Windows of W whole milliseconds, each holding at most N passes,
    /// opened anywhere: an interval of L meets ⌈(L − 1)/1 ms⌉ + 1 distinct
    /// milliseconds, so at most 1 + ⌈(M − 1)/W⌉ windows.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let millis = (interval.get() - 1).div_ceil(NANOS_PER_MS) + 1;
        ((millis - 1).div_ceil(self.window) + 1).saturating_mul(self.limit)
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX - self.window.saturating_mul(NANOS_PER_MS).min(u64::MAX / 2))
    }

    fn hint_granularity(&self) -> Nanos {
        Nanos::SECOND
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.limit as f64 * interval.get() as f64 / (self.window as f64 * NANOS_PER_MS as f64)
    }

    fn describe(&self) -> String {
        format!(
            "{} per {} from each first hit",
            self.limit,
            Nanos(self.window.saturating_mul(NANOS_PER_MS))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NANOS_PER_MS;

    fn store(window_ms: u64, limit: u64) -> ExpressRateLimit {
        let config: Config =
            toml::from_str(&format!("window_ms = {window_ms}\nlimit = {limit}")).unwrap();
        config.build(Context::default()).unwrap()
    }

    #[test]
    fn the_window_opens_at_the_first_hits_millisecond() {
        let mut l = store(1_000, 2);
        let at = 300 * MS + 999_999;
        assert!(l.decide(Nanos(at)).admitted());
        assert!(l.decide(Nanos(at)).admitted());
        assert_eq!(
            l.decide(Nanos(1_299 * MS + 999_999)),
            Decision::Reject(Hint::at_reset(1_299 * MS + 999_999 + Nanos::SECOND.get())),
            "1 ms left: Retry-After 1"
        );
        assert!(l.decide(Nanos(1_300 * MS)).admitted(), "resetTime 1300 ≤ now");
    }

    #[test]
    fn refused_hits_count_and_the_hint_is_whole_seconds() {
        let mut l = store(2_500, 1);
        assert!(l.decide(Nanos(0)).admitted());
        let Decision::Reject(hint) = l.decide(Nanos(400 * MS)) else {
            panic!("refused")
        };
        assert_eq!(hint.retry_at, Some(Nanos(400 * MS + 3 * Nanos::SECOND.get())), "⌈2100/1000⌉ = 3");
        assert_eq!(l.hits, 2);
    }

    proptest::proptest! {
        #[test]
        fn never_passes_more_than_its_bound(
            window in 1u64..2_000,
            limit in 1u64..6,
            mut times in proptest::collection::vec(0u64..5_000, 1..300),
        ) {
            let mut l = store(window, limit);
            let over = crate::limiter::over_bound(&mut l, &mut times, &[Nanos(1), Nanos(MS), Nanos(MS + 1), Nanos(window * MS), Nanos(window * MS + 1), Nanos(3 * window * MS)]);
            proptest::prop_assert!(over.is_none(), "{window} ms, {limit}: {over:?}");
        }
    }
}
