//! Envoy's local rate limit filter: a token bucket that starts full with
//! `max_tokens` and gains `tokens_per_fill` at discrete ticks every
//! `fill_interval`; `instances = K` models K Envoy processes each with its own
//! bucket, requests spread round-robin across them.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// `kind = "envoy-local"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The bucket's capacity; it starts full.
    pub max_tokens: NonZeroU64,
    /// Tokens added at each tick (default 1).
    #[serde(default = "one")]
    pub tokens_per_fill: NonZeroU64,
    /// Time between ticks, at `k·fill_interval` from the start.
    pub fill_interval: Nanos,
    /// Envoy processes, each with its own bucket (default 1).
    #[serde(default = "one")]
    pub instances: NonZeroU64,
}

fn one() -> NonZeroU64 {
    NonZeroU64::MIN
}

impl Kind for Config {
    const NAME: &'static str = "envoy-local";
    type State = EnvoyLocal;

    /// Full buckets.
    fn build(&self, _: Context) -> Result<EnvoyLocal, FieldError> {
        if self.fill_interval == Nanos::ZERO {
            return Err(field_error!("fill_interval", "must be longer than 0"));
        }
        let instances = usize::try_from(self.instances.get())
            .ok()
            .filter(|&k| k <= 100_000);
        let instances = instances.ok_or_else(|| FieldError::at("instances", "at most 100000"))?;
        Ok(EnvoyLocal {
            max_tokens: self.max_tokens.get(),
            per_fill: self.tokens_per_fill.get(),
            interval: self.fill_interval.get(),
            buckets: vec![(self.max_tokens.get(), 0); instances],
            next: 0,
        })
    }

    super::parameter_is!(tokens_per_fill);

    fn example(choice: u64) -> String {
        format!(
            "max_tokens = {}\ntokens_per_fill = {}\nfill_interval = \"{}ns\"\ninstances = {}",
            choice % 19 + 1,
            choice / 19 % 9 + 1,
            choice / 171 % 1_900 + 100,
            choice / 324_900 % 3 + 1
        )
    }
}

/// Each instance's bucket as (tokens, index of the last tick applied). A
/// request exactly at a tick sees the tick's tokens. Request i goes to
/// instance i mod K, admitted or not.
#[derive(Clone, Debug)]
pub struct EnvoyLocal {
    max_tokens: u64,
    per_fill: u64,
    interval: u64,
    buckets: Vec<(u64, u64)>,
    next: usize,
}

impl RateLimiter for EnvoyLocal {
    fn memory_at_most(&self, _keys: u64, _requests: u64, _hashed: bool) -> u128 {
        super::allocation::<(u64, u64)>(self.buckets.len() as u128)
    }

    /// Rejects (429) with no `Retry-After`; with Envoy's
    /// `enable_x_ratelimit_headers` the reset is the instance's next fill.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let tick = now.get() / self.interval;
        let (tokens, last) = &mut self.buckets[self.next];
        if tick > *last {
            let added = (tick - *last).saturating_mul(self.per_fill);
            *tokens = tokens.saturating_add(added).min(self.max_tokens);
            *last = tick;
        }
        let admit = *tokens > 0;
        *tokens -= u64::from(admit);
        self.next = (self.next + 1) % self.buckets.len();
        Decision::admit_or::<HINTS>(admit, || Hint {
            retry_at: None,
            reset_at: Some(Nanos((tick + 1).saturating_mul(self.interval))),
            ..Hint::NONE
        })
    }

    fn refund(&mut self, _now: Nanos) {
        let last = (self.next + self.buckets.len() - 1) % self.buckets.len();
        self.buckets[last].0 += 1;
    }

    /// K·(max_tokens + tokens_per_fill·⌈(L−1)/F⌉): each bucket holds at most
    /// max_tokens at the interval's first nanosecond (after any tick there)
    /// and gains tokens_per_fill at each later tick inside it.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let ticks = (interval.get() - 1).div_ceil(self.interval);
        let per_instance = ticks
            .saturating_mul(self.per_fill)
            .saturating_add(self.max_tokens);
        per_instance.saturating_mul(self.buckets.len() as u64)
    }

    /// What the configuration says for one process: tokens_per_fill per
    /// fill_interval. With K instances the spike ratio shows the K× surprise.
    fn nominal(&self, interval: Nanos) -> f64 {
        self.per_fill as f64 * interval.get() as f64 / self.interval as f64
    }

    fn describe(&self) -> String {
        let one = format!(
            "{} tokens, {} per {}",
            self.max_tokens,
            self.per_fill,
            Nanos(self.interval)
        );
        match self.buckets.len() {
            1 => one,
            k => format!("{one}, × {k} instances"),
        }
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        Some((Nanos(self.interval), Nanos::ZERO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envoy(instances: u64) -> EnvoyLocal {
        Config {
            max_tokens: NonZeroU64::new(10).unwrap(),
            tokens_per_fill: NonZeroU64::new(10).unwrap(),
            fill_interval: Nanos::SECOND,
            instances: NonZeroU64::new(instances).unwrap(),
        }
        .build(Context::default())
        .unwrap()
    }

    #[test]
    fn starts_full_and_refills_exactly_at_the_tick() {
        let mut limiter = envoy(1);
        assert_eq!(
            (0..12)
                .filter(|_| limiter.decide(Nanos(0)).admitted())
                .count(),
            10
        );
        assert!(!limiter.decide(Nanos(999_999_999)).admitted());
        assert_eq!(
            (0..12)
                .filter(|_| limiter.decide(Nanos(1_000_000_000)).admitted())
                .count(),
            10
        );
    }

    #[test]
    fn k_instances_let_k_times_the_limit_through() {
        let mut limiter = envoy(3);
        assert_eq!(
            (0..100)
                .filter(|_| limiter.decide(Nanos(0)).admitted())
                .count(),
            30
        );
        assert_eq!(limiter.bound(Nanos::SECOND), 3 * (10 + 10));
    }
}
