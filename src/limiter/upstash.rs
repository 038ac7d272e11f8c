//! `@upstash/ratelimit`'s `Ratelimit` (modelled from ratelimit-js,
//! `src/single.ts`, `src/cache.ts` and the scripts of
//! `src/lua-scripts/single.ts`, read at the repository's head), one region,
//! one identifier per key, on the caller's `Date.now()` milliseconds:
//!
//! - `fixedWindow(tokens, window)`: the key of window `⌊now / window⌋` is
//!   `INCRBY`'d by every request that reaches Redis, and it succeeds when
//!   the count after it is at most `tokens`.
//! - `slidingWindow(tokens, window)`: the script reads this window's and
//!   the previous window's counts and refuses when `⌊(1 − (now % window) /
//!   window) · previous⌋ + current ≥ tokens` (Lua's doubles), else counts
//!   the request; a refused one is not counted.
//! - `tokenBucket(refillRate, interval, maxTokens)`: a bucket created full
//!   at its first request, refilled `refillRate` at each whole `interval`
//!   since `refilledAt` (which moves by whole intervals), refusing at 0
//!   tokens; its key expires `⌈(maxTokens − remaining) / refillRate⌉ ·
//!   interval` after each write (when it would be full again), and a later
//!   request starts a fresh bucket on a new grid.
//!
//! With the `ephemeralCache` (on by default), a refused identifier is
//! refused locally, without asking Redis, until its `reset` has passed
//! (`reset < Date.now()`: still refused in the millisecond of `reset`
//! itself). The response carries `reset` — the window's end, or the next
//! refill — as a Unix millisecond; no `Retry-After` of its own.
//!
//! Bounds: at most `tokens` counted per window, so the fixed and the
//! sliding window let 2N through across an edge (the sliding window only
//! over a whole window and a millisecond: N at the end of one window, then
//! N more as the previous window's weight falls); the bucket `maxTokens` plus a refill
//! per `interval` met.
//!
//! Shared by a `[cluster]` (`mode = "shared-instance-clock"`: the keys and
//! `now` come from each caller's `Date.now()`), Redis holds the counts and
//! each instance its own ephemeral cache; while Redis does not answer, a
//! request the cache does not refuse succeeds after `timeout`
//! (`Ratelimit.limit` races the call against it, `src/ratelimit.ts`): fail
//! open, 5 s late. Not modelled: multi-region, dynamic limits and payload
//! limits.

use std::num::NonZeroU64;

use rustc_apfloat::Float;
use rustc_apfloat::ieee::Double;
use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const MS: u64 = 1_000_000;

/// The longest window or interval: a day of milliseconds keeps every
/// product well inside Lua's and JavaScript's exact integers.
const MAX_WINDOW_MS: u64 = 366 * 86_400_000;

/// `Ratelimit.fixedWindow`, `.slidingWindow` or `.tokenBucket`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// `fixedWindow(tokens, window)`.
    FixedWindow,
    /// `slidingWindow(tokens, window)`.
    SlidingWindow,
    /// `tokenBucket(refillRate, interval, maxTokens)`.
    TokenBucket,
}

/// `kind = "upstash"`, as the algorithm's arguments in snake_case.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Which of the three.
    pub algorithm: Algorithm,
    /// Windows: requests per window.
    pub tokens: Option<NonZeroU64>,
    /// Windows: the window, whole milliseconds.
    pub window: Option<Nanos>,
    /// Token bucket: tokens added per interval.
    pub refill_rate: Option<NonZeroU64>,
    /// Token bucket: the interval, whole milliseconds.
    pub interval: Option<Nanos>,
    /// Token bucket: its size, and what a new bucket holds.
    pub max_tokens: Option<NonZeroU64>,
    /// `ephemeralCache` (default on): refused identifiers refused locally
    /// until their reset.
    #[serde(default = "on")]
    pub ephemeral_cache: bool,
    /// `timeout` (default 5 s): when Redis does not answer within it, the
    /// request succeeds then (`reason: "timeout"`). Only a shared store's
    /// outage (a `[cluster]`) makes Redis silent here.
    #[serde(default = "five_seconds")]
    pub timeout: Nanos,
}

fn five_seconds() -> Nanos {
    Nanos(5 * Nanos::SECOND.get())
}

fn on() -> bool {
    true
}

impl Config {
    /// The (length, limit) the algorithm takes, checked: windows need
    /// `tokens` and `window`, the bucket `refill_rate`, `interval` and
    /// `max_tokens`, and none the other's.
    fn shape(&self) -> Result<(u64, u64, u64), FieldError> {
        let bucket = self.algorithm == Algorithm::TokenBucket;
        let (present, absent): (&[&str], &[&str]) = if bucket {
            (&["refill_rate", "interval", "max_tokens"], &["tokens", "window"])
        } else {
            (&["tokens", "window"], &["refill_rate", "interval", "max_tokens"])
        };
        let set = |name: &str| match name {
            "tokens" => self.tokens.is_some(),
            "window" => self.window.is_some(),
            "refill_rate" => self.refill_rate.is_some(),
            "interval" => self.interval.is_some(),
            _ => self.max_tokens.is_some(),
        };
        if let Some(missing) = present.iter().find(|name| !set(name)) {
            return Err(FieldError::at(missing, format!("required by algorithm = \"{}\"", self.name())));
        }
        if let Some(extra) = absent.iter().find(|name| set(name)) {
            return Err(FieldError::at(extra, format!("not a setting of algorithm = \"{}\"", self.name())));
        }
        let (field, length) = if bucket {
            ("interval", self.interval)
        } else {
            ("window", self.window)
        };
        let length = length.map_or(0, Nanos::get);
        if length == 0 || !length.is_multiple_of(MS) || length / MS > MAX_WINDOW_MS {
            return Err(FieldError::at(field, format!("whole milliseconds from 1ms to 366 days (Upstash keeps milliseconds), not {}", Nanos(length))));
        }
        let get = |value: Option<NonZeroU64>| value.map_or(1, NonZeroU64::get);
        let (limit, refill) = if bucket {
            (get(self.max_tokens), get(self.refill_rate))
        } else {
            (get(self.tokens), 0)
        };
        if limit > 1 << 40 || refill > 1 << 40 {
            return Err(field_error!("tokens", "at most 2^40 a window"));
        }
        Ok((length / MS, limit, refill))
    }

    fn name(&self) -> &'static str {
        match self.algorithm {
            Algorithm::FixedWindow => "fixed-window",
            Algorithm::SlidingWindow => "sliding-window",
            Algorithm::TokenBucket => "token-bucket",
        }
    }
}

impl Kind for Config {
    const NAME: &'static str = "upstash";
    type State = Upstash;

    fn build(&self, _: Context) -> Result<Upstash, FieldError> {
        let (length, limit, refill) = self.shape()?;
        let timeout = self.timeout.get();
        if !timeout.is_multiple_of(MS) || timeout / MS > MAX_WINDOW_MS {
            return Err(field_error!("timeout", "whole milliseconds up to 366 days (setTimeout's), not {}", self.timeout));
        }
        Ok(Upstash {
            algorithm: self.algorithm,
            cache: self.ephemeral_cache,
            length,
            limit,
            refill,
            state: Counts::default(),
            before: [0; 3],
        })
    }

    fn parameter(&self, _: Context) -> (&'static str, u64) {
        match self.algorithm {
            Algorithm::TokenBucket => ("max_tokens", self.max_tokens.map_or(1, NonZeroU64::get)),
            _ => ("tokens", self.tokens.map_or(1, NonZeroU64::get)),
        }
    }

    fn with_parameter(&self, value: u64) -> Config {
        let value = NonZeroU64::new(value).unwrap_or(NonZeroU64::MIN);
        match self.algorithm {
            Algorithm::TokenBucket => Config {
                max_tokens: Some(value),
                ..self.clone()
            },
            _ => Config {
                tokens: Some(value),
                ..self.clone()
            },
        }
    }

    fn example(choice: u64) -> String {
        let n = choice % 7 + 1;
        let length = [1, 2, 3, 1_000][(choice / 7 % 4) as usize];
        let cache = (choice / 28).is_multiple_of(2);
        match choice / 56 % 3 {
            0 => format!("algorithm = \"fixed-window\"\ntokens = {n}\nwindow = \"{length}ms\"\nephemeral_cache = {cache}"),
            1 => format!("algorithm = \"sliding-window\"\ntokens = {n}\nwindow = \"{length}ms\"\nephemeral_cache = {cache}"),
            _ => format!(
                "algorithm = \"token-bucket\"\nrefill_rate = {}\ninterval = \"{length}ms\"\nmax_tokens = {n}\nephemeral_cache = {cache}",
                choice / 168 % 3 + 1
            ),
        }
    }
}

/// What Redis and the local cache hold for one identifier.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    /// Windows: the window of `current`. Bucket: `refilledAt` (ms).
    mark: u64,
    /// Windows: this window's count. Bucket: its tokens.
    current: u64,
    /// Windows: the previous window's count.
    previous: u64,
    /// Bucket: when its key expires (ms); 0 before its first request.
    expires: u64,
    /// The cache's reset for a refused identifier (ms); 0 for none (a
    /// reset is never 0: it is a window's end or a refill after creation).
    blocked: u64,
}

/// One identifier's limiter.
#[derive(Clone, Debug)]
pub struct Upstash {
    algorithm: Algorithm,
    cache: bool,
    /// `window` or `interval`, ms.
    length: u64,
    /// `tokens` or `maxTokens`.
    limit: u64,
    /// `refillRate`.
    refill: u64,
    state: Counts,
    /// The bucket's `(mark, current, expires)` before the last admission,
    /// for a refund.
    before: [u64; 3],
}

/// A Lua double of a whole number (exact: below 2⁵³ here).
fn double(value: u64) -> Double {
    Double::from_u128(u128::from(value)).value
}

impl Upstash {
    /// Counts move to window `window`: the previous one's count is this
    /// one's when they are consecutive.
    fn roll(&mut self, window: u64) {
        let s = &mut self.state;
        if window != s.mark {
            s.previous = if window == s.mark + 1 { s.current } else { 0 };
            s.current = 0;
            s.mark = window;
        }
    }

    /// The script's answer at `ms`, and the response's `reset`.
    fn script(&mut self, ms: u64) -> (bool, u64) {
        match self.algorithm {
            Algorithm::FixedWindow => {
                let window = ms / self.length;
                self.roll(window);
                self.state.current += 1;
                (self.state.current <= self.limit, (window + 1) * self.length)
            }
            Algorithm::SlidingWindow => {
                let window = ms / self.length;
                self.roll(window);
                // ⌊(1 − (now % window) / window) · previous⌋ in doubles.
                let share = (double(ms % self.length) / double(self.length)).value;
                let kept = ((double(1) - share).value * double(self.state.previous)).value;
                let weighted = kept.to_u128(64).value as u64;
                let reset = (window + 1) * self.length;
                if weighted + self.state.current >= self.limit {
                    return (false, reset);
                }
                self.state.current += 1;
                (true, reset)
            }
            Algorithm::TokenBucket => {
                let s = &mut self.state;
                if s.expires == 0 || ms > s.expires {
                    // No key: a new bucket, full, its grid from now.
                    (s.mark, s.current) = (ms, self.limit);
                }
                if ms >= s.mark + self.length {
                    let refills = (ms - s.mark) / self.length;
                    s.current = self.limit.min(s.current + refills * self.refill);
                    s.mark += refills * self.length;
                }
                let reset = s.mark + self.length;
                if s.current == 0 {
                    return (false, reset);
                }
                s.current -= 1;
                let empty = self.limit - s.current;
                s.expires = ms + empty.div_ceil(self.refill) * self.length;
                (true, reset)
            }
        }
    }
}

impl RateLimiter for Upstash {
    /// A refusal carries the response's `reset`, the instant the
    /// application may send as `RateLimit-Reset`; there is no retry hint.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let ms = now.get() / MS;
        let reset = self.state.blocked;
        if reset != 0 {
            if reset >= ms {
                return Decision::Reject(Hint {
                    retry_at: None,
                    reset_at: Some(Nanos(reset * MS)),
                    ..Hint::NONE
                });
            }
            self.state.blocked = 0;
        }
        let s = &self.state;
        self.before = [s.mark, s.current, s.expires];
        let (success, reset) = self.script(ms);
        if success {
            return Decision::Admit;
        }
        if self.cache {
            self.state.blocked = reset;
        }
        Decision::Reject(Hint {
            retry_at: None,
            reset_at: Some(Nanos(reset * MS)),
            ..Hint::NONE
        })
    }

    /// As if refused by Redis: a fixed window's count stays (every request
    /// that reaches it is counted), the sliding window's pass is taken
    /// back, and the bucket is as before the script (which writes nothing
    /// when it refuses).
    fn refund(&mut self, _now: Nanos) {
        match self.algorithm {
            Algorithm::FixedWindow => {}
            Algorithm::SlidingWindow => self.state.current -= 1,
            Algorithm::TokenBucket => {
                let s = &mut self.state;
                [s.mark, s.current, s.expires] = self.before;
            }
        }
    }

    /// Windows: at most N counted per window, and an interval of M
    /// milliseconds meets at most 1 + ⌈(M − 1)/window⌉ windows. Bucket: at
    /// most `maxTokens` at the first pass, and refills at least an interval
    /// apart (a fresh bucket comes only when the old one would be full).
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let millis = (interval.get() - 1).div_ceil(MS) + 1;
        let met = (millis - 1).div_ceil(self.length);
        match self.algorithm {
            Algorithm::TokenBucket => self.limit.saturating_add(met.saturating_mul(self.refill)),
            _ => (met + 1).saturating_mul(self.limit),
        }
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX / 2)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        let per = match self.algorithm {
            Algorithm::TokenBucket => self.refill,
            _ => self.limit,
        };
        per as f64 * interval.get() as f64 / (self.length * MS) as f64
    }

    /// One `EVAL` a request that reaches Redis (the cache answers the
    /// others).
    fn store_ops(&self) -> Option<StoreOps> {
        Some(StoreOps {
            per_request: 1,
            per_reset: 0,
        })
    }

    fn describe(&self) -> String {
        let length = Nanos(self.length * MS);
        match self.algorithm {
            Algorithm::FixedWindow => format!("Upstash fixed window, {} per {length}", self.limit),
            Algorithm::SlidingWindow => format!("Upstash sliding window, {} per {length}", self.limit),
            Algorithm::TokenBucket => format!(
                "Upstash token bucket, {} per {length}, up to {}",
                self.refill, self.limit
            ),
        }
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        (self.algorithm != Algorithm::TokenBucket).then(|| (Nanos(self.length * MS), Nanos::ZERO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(text: &str) -> Upstash {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    fn passed(l: &mut Upstash, at_ms: u64, count: usize) -> usize {
        (0..count)
            .filter(|_| l.decide(Nanos(at_ms * MS)).admitted())
            .count()
    }

    #[test]
    fn a_fixed_window_lets_2n_through_across_its_edge() {
        let mut l = limiter("algorithm = \"fixed-window\"\ntokens = 5\nwindow = \"1s\"");
        assert_eq!(passed(&mut l, 999, 8), 5);
        let Decision::Reject(hint) = l.decide(Nanos(999 * MS)) else {
            panic!("refused")
        };
        assert_eq!(hint.reset_at, Some(Nanos::SECOND));
        // The cache still refuses in the millisecond of reset itself.
        assert_eq!(passed(&mut l, 1_000, 8), 0);
        assert_eq!(passed(&mut l, 1_001, 8), 5);
        assert_eq!(l.bound(Nanos(2 * MS + 1)), 10);
        let mut uncached = limiter("algorithm = \"fixed-window\"\ntokens = 5\nwindow = \"1s\"\nephemeral_cache = false");
        assert_eq!(passed(&mut uncached, 999, 8), 5);
        assert_eq!(passed(&mut uncached, 1_000, 8), 5, "Redis alone: a new window");
    }

    #[test]
    fn the_sliding_window_weighs_the_previous_window_down() {
        let mut l = limiter("algorithm = \"sliding-window\"\ntokens = 10\nwindow = \"1s\"\nephemeral_cache = false");
        assert_eq!(passed(&mut l, 999, 20), 10);
        // At 1.000 s the previous window weighs ⌊1 · 10⌋ = 10: nothing.
        assert_eq!(passed(&mut l, 1_000, 5), 0);
        // At 1.001 s, ⌊0.999 · 10⌋ = 9: one; at 1.5 s, ⌊0.5 · 10⌋ = 5: four more.
        assert_eq!(passed(&mut l, 1_001, 5), 1);
        assert_eq!(passed(&mut l, 1_500, 10), 4);
        // ⌊0.001 · 10⌋ = 0 at 1.999 s: five more, 2N from 999 ms to 1.999 s.
        assert_eq!(passed(&mut l, 1_999, 10), 5);
        assert_eq!(l.bound(Nanos(1_000 * MS + 1)), 20);
        // The cache refuses through 1 s, then until the end of the window
        // whose refusal it remembers, while Redis would weigh it down.
        let mut cached = limiter("algorithm = \"sliding-window\"\ntokens = 10\nwindow = \"1s\"");
        assert_eq!(passed(&mut cached, 999, 20), 10);
        assert_eq!(passed(&mut cached, 1_000, 5), 0);
        assert_eq!(passed(&mut cached, 1_001, 5), 1);
        assert_eq!(passed(&mut cached, 1_500, 10), 0, "refused locally until 2 s");
    }

    #[test]
    fn the_bucket_refills_on_its_grid_and_starts_fresh_after_expiry() {
        let mut l = limiter("algorithm = \"token-bucket\"\nrefill_rate = 2\ninterval = \"1s\"\nmax_tokens = 4\nephemeral_cache = false");
        assert_eq!(passed(&mut l, 300, 6), 4);
        let Decision::Reject(hint) = l.decide(Nanos(301 * MS)) else {
            panic!("empty")
        };
        assert_eq!(hint.reset_at, Some(Nanos(1_300 * MS)));
        assert_eq!(passed(&mut l, 1_299, 3), 0);
        assert_eq!(passed(&mut l, 1_300, 3), 2);
        // Written at 1.3 s with 0 left: the key lives ⌈4/2⌉ · 1 s, to 3.3 s.
        assert_eq!(passed(&mut l, 3_300, 9), 4, "two refills on the old grid");
        // Idle past 5.3 s: expired, a new full bucket on a grid from 6.05 s.
        assert_eq!(passed(&mut l, 6_050, 9), 4);
        assert_eq!(passed(&mut l, 7_049, 9), 0);
        assert_eq!(passed(&mut l, 7_050, 9), 2);
        assert_eq!(l.bound(Nanos::SECOND), 6, "4 and one refill");
    }

    #[test]
    fn each_algorithm_takes_its_own_settings() {
        for (text, says) in [
            ("algorithm = \"fixed-window\"\ntokens = 5", "window: required"),
            ("algorithm = \"token-bucket\"\nrefill_rate = 1\ninterval = \"1s\"\nmax_tokens = 2\ntokens = 3", "tokens: not a setting"),
            ("algorithm = \"sliding-window\"\ntokens = 5\nwindow = \"1500us\"", "whole milliseconds"),
        ] {
            let error = crate::limiter::tests::refusal::<Config>(text);
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_passes_more_than_its_bound(
            choice in 0u64..504,
            mut times in proptest::collection::vec(0u64..5_000, 1..300),
        ) {
            let text = Config::example(choice);
            let mut l = limiter(&text);
            let over = crate::limiter::over_bound(&mut l, &mut times, &[Nanos(1), Nanos(MS), Nanos(MS + 1), Nanos(999 * MS), Nanos::SECOND, Nanos(2_500 * MS)]);
            proptest::prop_assert!(over.is_none(), "{text}: {over:?}");
        }
    }
}
