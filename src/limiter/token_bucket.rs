//! The token bucket: `rate` tokens per second up to `burst`, one per request.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::decimal::Decimal;
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "token-bucket"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Tokens added per second (may be fractional, like 0.5).
    pub rate: Decimal,
    /// Capacity of the bucket in tokens; it starts full.
    pub burst: NonZeroU64,
}

impl Kind for Config {
    const NAME: &'static str = "token-bucket";
    type State = TokenBucket;

    /// The sizing parameter: the rate, in whole tokens per second (rounded down).
    fn parameter(&self, _: Context) -> (&'static str, u64) {
        ("rate", self.rate.numerator() / self.rate.denominator())
    }

    /// The same bucket refilled at `value` tokens per second.
    fn with_parameter(&self, value: u64) -> Config {
        Config {
            rate: Decimal::whole(value),
            ..self.clone()
        }
    }

    /// Sized with the rate: the bucket's capacity.
    fn companion(&self, _: Context) -> Option<super::Companion> {
        super::count_companion("burst", self.burst.get())
    }

    /// The same bucket holding `value` tokens.
    fn with_companion(&self, value: u64) -> Config {
        Config {
            burst: NonZeroU64::new(value).unwrap_or(NonZeroU64::MIN),
            ..self.clone()
        }
    }

    /// A full bucket at t = 0.
    fn build(&self, _: Context) -> Result<TokenBucket, FieldError> {
        self.build_shared(1)
    }

    /// Rates in tokens per second over microsecond windows: huge rates.
    fn example(choice: u64) -> String {
        format!(
            "rate = {}.{}\nburst = {}",
            (choice % 49 + 1) * 1_000_000,
            choice / 49 % 3,
            choice / 147 % 19 + 1
        )
    }
}

impl Config {
    /// One of `shares` instances' buckets, refilled at rate/`shares`,
    /// exactly: a token is `shares` times as many units.
    pub fn build_shared(&self, shares: u64) -> Result<TokenBucket, FieldError> {
        if self.rate.is_zero() {
            return Err(field_error!("rate", "must be above 0 tokens per second"));
        }
        // One token is `rate denominator × 1e9` units, so refilling for Δt ns
        // adds exactly `rate numerator × Δt` units: no fraction is ever lost.
        let token = u128::from(self.rate.denominator())
            * u128::from(NANOS_PER_SEC)
            * u128::from(shares.max(1));
        let capacity = token * u128::from(self.burst.get());
        Ok(TokenBucket {
            shares: shares.max(1),
            rate: self.rate,
            burst: self.burst.get(),
            token,
            capacity,
            level: capacity,
            last: 0,
        })
    }
}

/// Refilled continuously from full at t = 0; admits at `t` when it holds at
/// least one token. The level is an integer count of 1/(denominator·10⁹)
/// tokens, so a token that completes exactly at `t` is usable at `t`.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// The rate is divided among this many instances (1: not divided).
    shares: u64,
    rate: Decimal,
    burst: u64,
    /// Units in one token.
    token: u128,
    /// Units in a full bucket.
    capacity: u128,
    level: u128,
    last: u64,
}

impl RateLimiter for TokenBucket {
    /// Rejects with `Retry-After` when the next token completes and the
    /// reset when the bucket is full again (the IETF RateLimit fields).
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now = now.get();
        if self.level < self.capacity {
            let refill = u128::from(self.rate.numerator()) * u128::from(now - self.last);
            self.level = self.level.saturating_add(refill).min(self.capacity);
        }
        self.last = now;
        if self.level >= self.token {
            self.level -= self.token;
            return Decision::Admit;
        }
        let after = |units: u128| {
            let wait = units.div_ceil(u128::from(self.rate.numerator()));
            u64::try_from(wait).map_or(u64::MAX, |wait| now.saturating_add(wait))
        };
        Decision::reject::<HINTS>(|| {
            Hint::new(
                after(self.token - self.level),
                after(self.capacity - self.level),
            )
        })
    }

    fn refund(&mut self, _now: Nanos) {
        self.level += self.token;
    }

    /// burst + ⌊rate·(L − 1 ns)⌋: a full bucket at the interval's first
    /// nanosecond, then every token that completes up to its last nanosecond.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let refill =
            u128::from(self.rate.numerator()) * u128::from(interval.get() - 1) / self.token;
        u64::try_from(refill)
            .unwrap_or(u64::MAX)
            .saturating_add(self.burst)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.rate.as_f64() / self.shares as f64 * interval.as_secs_f64()
    }

    /// A Redis hash of tokens and last refill, with its expiry: 175 B per key (measured).
    fn state_bytes(&self) -> Option<u64> {
        Some(175)
    }

    /// One script per request.
    fn store_ops(&self) -> Option<StoreOps> {
        Some(StoreOps {
            per_request: 1,
            per_reset: 0,
        })
    }

    fn describe(&self) -> String {
        match self.shares {
            1 => format!("{}/s, burst {}", self.rate, self.burst),
            k => format!("{}/{k} per s, burst {}", self.rate, self.burst),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(rate: Decimal, burst: u64) -> TokenBucket {
        Config {
            rate,
            burst: NonZeroU64::new(burst).unwrap(),
        }
        .build(Context::default())
        .unwrap()
    }

    #[test]
    fn starts_full_and_empties_after_the_burst() {
        let mut limiter = bucket(Decimal::whole(10), 5);
        assert_eq!(
            (0..6)
                .filter(|_| limiter.decide(Nanos(0)).admitted())
                .count(),
            5
        );
    }

    #[test]
    fn a_token_is_usable_exactly_when_it_completes() {
        let mut limiter = bucket(Decimal::whole(10), 1);
        assert!(limiter.decide(Nanos(0)).admitted());
        assert!(!limiter.decide(Nanos(99_999_999)).admitted());
        assert!(limiter.decide(Nanos(100_000_000)).admitted());
    }

    #[test]
    fn fractional_rates_refill_exactly() {
        // 0.3 tokens per second: the next token completes at 3.333… s.
        let mut limiter = bucket(Decimal::new(3, 1), 1);
        assert!(limiter.decide(Nanos(0)).admitted());
        assert!(!limiter.decide(Nanos(3_333_333_333)).admitted());
        assert!(limiter.decide(Nanos(3_333_333_334)).admitted());
    }

    #[test]
    fn the_bound_over_one_second_is_burst_plus_rate_minus_the_token_at_the_far_edge() {
        let limiter = bucket(Decimal::whole(100), 100);
        assert_eq!(limiter.bound(Nanos::SECOND), 199);
        assert_eq!(limiter.bound(Nanos(1_000_000_001)), 200);
    }
}
