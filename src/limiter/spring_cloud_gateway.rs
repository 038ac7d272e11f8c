//! Spring Cloud Gateway's `RedisRateLimiter` (upstream:
//! `spring-cloud-gateway-server/src/main/resources/META-INF/scripts/request_rate_limiter.lua`):
//! a token bucket of `burst_capacity` tokens refilled at `replenish_rate`
//! per second, where "now" is the Redis clock in whole seconds. Each request
//! asks for `requested_tokens`:
//!
//! ```text
//! filled  = min(capacity, last_tokens + max(0, now − last_refreshed) · rate)
//! allowed = filled ≥ requested;  tokens = filled − requested if allowed
//! ```
//!
//! and both keys are written back with a TTL of ⌊2 · capacity / rate⌋
//! seconds; a bucket whose keys expired starts full. Refills come only at
//! whole seconds, so with `burst_capacity = replenish_rate` the bucket is a
//! fixed window of one epoch second: 2× the rate in a rolling second. With a
//! TTL of 0 (capacity < rate / 2) nothing is ever kept: every request finds
//! a full bucket and nothing is limited, as the script does.
//!
//! A rejected client gets 429 with `X-RateLimit-Remaining: 0`,
//! `-Replenish-Rate`, `-Burst-Capacity` and `-Requested-Tokens`, and no
//! `Retry-After` or reset (`RedisRateLimiter.getHeaders`): no hint, so a
//! client that honours hints falls back to its own backoff, as with HAProxy.
//!
//! In front of the limiter, `RequestRateLimiterGatewayFilterFactory`
//! (`spring-cloud-gateway-server/src/main/java/org/springframework/cloud/gateway/filter/factory/RequestRateLimiterGatewayFilterFactory.java`,
//! 4.x) asks the key resolver for the request's key; when it resolves
//! nothing (`defaultIfEmpty(EMPTY_KEY)`: the user not logged in, the header
//! missing) the request never reaches the bucket: with `denyEmptyKey` (the
//! default) it is answered `emptyKeyStatus` (403), without, it passes
//! unlimited. A key resolved as an empty string is a key like any. Per key,
//! [`crate::limiter::per_key::PerKey::treat_empty_keys`] does the same with
//! a replayed log's absent keys.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "spring-cloud-gateway"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `replenishRate`: tokens added per second.
    pub replenish_rate: NonZeroU64,
    /// `burstCapacity`: the bucket's size.
    pub burst_capacity: NonZeroU64,
    /// `requestedTokens`: tokens each request takes (default 1).
    #[serde(default = "one")]
    pub requested_tokens: NonZeroU64,
    /// `deny-empty-key`: per key, a request whose key resolves to nothing
    /// is turned away (403) without reaching the bucket; `false` lets it
    /// through unlimited (default `true`, Spring's).
    #[serde(default = "yes")]
    pub deny_empty_key: bool,
}

fn one() -> NonZeroU64 {
    NonZeroU64::MIN
}

fn yes() -> bool {
    true
}

impl Kind for Config {
    const NAME: &'static str = "spring-cloud-gateway";
    type State = SpringCloudGateway;

    fn build(&self, _: Context) -> Result<SpringCloudGateway, FieldError> {
        let (rate, capacity) = (self.replenish_rate.get(), self.burst_capacity.get());
        if self.requested_tokens.get() > capacity {
            return Err(field_error!("requested_tokens", "{} is more than burst_capacity {capacity}: every request would be denied",
                self.requested_tokens
            ));
        }
        Ok(SpringCloudGateway {
            rate,
            capacity,
            requested: self.requested_tokens.get(),
            ttl_s: capacity.saturating_mul(2) / rate,
            tokens: capacity,
            refreshed_s: 0,
            expires: 0,
            deny_empty_key: self.deny_empty_key,
        })
    }

    fn parameter(&self, _: Context) -> (&'static str, u64) {
        ("replenish_rate", self.replenish_rate.get())
    }

    fn with_parameter(&self, value: u64) -> Config {
        let rate = NonZeroU64::new(value).unwrap_or(NonZeroU64::MIN);
        // Burst follows the rate where it equalled it (the common setting).
        let burst_capacity = if self.burst_capacity == self.replenish_rate {
            rate
        } else {
            self.burst_capacity
        };
        Config {
            replenish_rate: rate,
            burst_capacity,
            ..self.clone()
        }
    }

    /// Whole seconds are its clock: the property tests' microsecond traffic
    /// sits inside one second, against the bucket and its TTL quirk.
    fn example(choice: u64) -> String {
        let rate = choice % 23 + 1;
        let capacity = choice / 23 % 31 + 1;
        format!(
            "replenish_rate = {rate}\nburst_capacity = {capacity}\nrequested_tokens = {}",
            (choice / 713 % 3 + 1).min(capacity)
        )
    }
}

/// The two Redis keys: tokens and the second they were refreshed, and when
/// they expire (ns; 0 when not stored).
#[derive(Clone, Debug)]
pub struct SpringCloudGateway {
    rate: u64,
    capacity: u64,
    requested: u64,
    ttl_s: u64,
    tokens: u64,
    refreshed_s: u64,
    expires: u64,
    /// The filter's `denyEmptyKey`: what becomes of a request without a key.
    deny_empty_key: bool,
}

impl SpringCloudGateway {
    /// Whether a request whose key resolves to nothing is turned away
    /// (`deny-empty-key`) rather than let through unlimited.
    pub fn denies_empty_key(&self) -> bool {
        self.deny_empty_key
    }
}

impl RateLimiter for SpringCloudGateway {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now_s = now.get() / NANOS_PER_SEC;
        // Keys gone (expired, or never written): a full bucket, refreshed at 0.
        let (last_tokens, last_refreshed) = if now.get() < self.expires {
            (self.tokens, self.refreshed_s)
        } else {
            (self.capacity, 0)
        };
        let delta = now_s.saturating_sub(last_refreshed);
        let filled = last_tokens
            .saturating_add(delta.saturating_mul(self.rate))
            .min(self.capacity);
        let allowed = filled >= self.requested;
        let tokens = if allowed {
            filled - self.requested
        } else {
            filled
        };
        if self.ttl_s > 0 {
            self.tokens = tokens;
            self.refreshed_s = now_s;
            self.expires = now
                .get()
                .saturating_add(self.ttl_s.saturating_mul(NANOS_PER_SEC));
        }
        Decision::admit_or::<HINTS>(allowed, || Hint::NONE)
    }

    fn refund(&mut self, now: Nanos) {
        if self.ttl_s > 0 && now.get() < self.expires {
            self.tokens = (self.tokens + self.requested).min(self.capacity);
        }
    }

    /// ⌊(capacity + rate · ⌈(L − 1)/1 s⌉) / requested⌋: at most a full bucket
    /// at the interval's first nanosecond, and `rate` more at each whole
    /// second after it inside the interval. With a TTL of 0: no bound.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        if self.ttl_s == 0 {
            return u64::MAX;
        }
        let seconds = (interval.get() - 1).div_ceil(NANOS_PER_SEC);
        seconds
            .saturating_mul(self.rate)
            .saturating_add(self.capacity)
            / self.requested
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX - self.ttl_s.saturating_mul(NANOS_PER_SEC).min(u64::MAX / 2))
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.rate as f64 / self.requested as f64 * interval.get() as f64 / NANOS_PER_SEC as f64
    }

    fn describe(&self) -> String {
        let ttl = if self.ttl_s == 0 {
            ", TTL 0: never limits".to_string()
        } else {
            String::new()
        };
        let cost = if self.requested > 1 {
            format!(", {} per request", self.requested)
        } else {
            String::new()
        };
        format!(
            "{}/s in whole seconds, burst {}{cost}{ttl}",
            self.rate, self.capacity
        )
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        Some((Nanos::SECOND, Nanos::ZERO))
    }

    fn state_bytes(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(rate: u64, burst: u64) -> SpringCloudGateway {
        Config {
            replenish_rate: NonZeroU64::new(rate).unwrap(),
            burst_capacity: NonZeroU64::new(burst).unwrap(),
            requested_tokens: NonZeroU64::MIN,
            deny_empty_key: true,
        }
        .build(Context::default())
        .unwrap()
    }

    #[test]
    fn a_rejection_carries_no_retry_or_reset_hint_as_the_real_429_does() {
        let mut limiter = gateway(10, 10);
        assert_eq!(admitted(&mut limiter, 0, 10), 10);
        assert_eq!(
            limiter.decide_with::<true>(Nanos(450_000_000)),
            Decision::Reject(Hint::NONE)
        );
    }

    fn admitted(limiter: &mut SpringCloudGateway, at_ns: u64, tries: u64) -> usize {
        (0..tries)
            .filter(|_| limiter.decide(Nanos(at_ns)).admitted())
            .count()
    }

    #[test]
    fn burst_equal_to_rate_is_an_epoch_second_window() {
        let mut limiter = gateway(100, 100);
        assert_eq!(admitted(&mut limiter, 999_000_000, 150), 100);
        assert_eq!(admitted(&mut limiter, 1_000_000_000, 150), 100);
        assert_eq!(limiter.bound(Nanos::SECOND), 200);
    }

    #[test]
    fn refills_only_at_whole_seconds() {
        let mut limiter = gateway(10, 20);
        assert_eq!(admitted(&mut limiter, 0, 30), 20);
        // 1.9 s later, still the same second as 1 s: one refill of 10.
        assert_eq!(admitted(&mut limiter, 1_900_000_000, 30), 10);
        assert_eq!(admitted(&mut limiter, 1_999_999_999, 30), 0);
        assert_eq!(admitted(&mut limiter, 2_000_000_000, 30), 10);
    }

    #[test]
    fn a_ttl_of_zero_never_limits() {
        // ⌊2 · 4 / 10⌋ = 0: the script keeps nothing.
        let mut limiter = gateway(10, 4);
        assert_eq!(admitted(&mut limiter, 0, 1_000), 1_000);
        assert_eq!(limiter.bound(Nanos::SECOND), u64::MAX);
        assert!(limiter.describe().contains("never limits"));
    }

    proptest::proptest! {
        /// Over whole seconds (which the contract tests' microsecond traffic
        /// never crosses): no rolling interval admits more than the bound.
        #[test]
        fn never_admits_more_than_its_bound_across_seconds(
            rate in 1u64..20,
            capacity in 1u64..40,
            mut times in proptest::collection::vec(0u64..5_000, 1..400),
        ) {
            let mut limiter = gateway(rate, capacity);
            // Milliseconds, many on whole seconds.
            let over = crate::limiter::over_bound(&mut limiter, &mut times, &[Nanos(500_000_000), Nanos::SECOND, Nanos(2_500_000_000)]);
            proptest::prop_assert!(over.is_none(), "{over:?}");
        }
    }

    #[test]
    fn expired_keys_return_as_a_full_bucket() {
        // TTL ⌊2 · 2 / 1⌋ = 4 s.
        let mut limiter = gateway(1, 2);
        assert_eq!(admitted(&mut limiter, 0, 5), 2);
        assert_eq!(admitted(&mut limiter, 4_000_000_000, 5), 2);
    }
}
