//! Bucket4j's local bucket asked with `tryConsume(1)` (modelled from
//! bucket4j-core 8.x, `BucketState64BitsInteger.java`: `refill`,
//! `calculateInitialTokens`, `calculateLastRefillTimeNanos`; the default
//! 64-bit integer math). Bucket4j cannot be installed here; the tests check
//! hand-computed cases and the bounds.
//!
//! Each bandwidth is a bucket of `capacity` tokens refilled by
//! `refill_tokens` per `refill_period`:
//!
//! - `refill = "greedy"` (`refillGreedy`): on every call the time since the
//!   last refill adds `tokens · elapsed / period`, the remainder of the
//!   division carried to the next call (its "rounding error") — a token
//!   bucket: capacity + rate · L in any interval;
//! - `"intervally"` (`refillIntervally`): only whole periods since the last
//!   refill count, on a grid from the bucket's creation — a fixed window
//!   when capacity = tokens: N before a refill and N after, 2N in an
//!   instant;
//! - `"intervally-aligned"` (`refillIntervallyAligned`): the same grid
//!   moved to `time_of_first_refill` (on the epoch), with
//!   `adaptive_initial_tokens` as Bucket4j computes them.
//!
//! A call passes when every bandwidth has a token, and takes one from each.
//! The clock is Bucket4j's default for a local bucket, the wall clock in
//! whole milliseconds (`clock = "nanos"`: `withNanosecondPrecision()`).
//! `tryConsume` tells nothing on refusal; `retry_after_seconds = true` is
//! bucket4j-spring-boot-starter's filter, which answers a refusal with
//! `X-Rate-Limit-Retry-After-Seconds`: the probe's `nanosToWaitForRefill`
//! (`calculateDelayNanosAfterWillBePossibleToConsume`: greedy (period −
//! rounding error) / tokens, intervally the next refill's time − now, the
//! longest over the bandwidths) truncated to whole seconds
//! (`DefaultServletRateLimitFilter`, starter 0.2 – 0.13). A distributed bucket (JCache, Redis via the proxy
//! manager) runs the same arithmetic on each JVM's clock against one shared
//! state: not modelled; a `[cluster]` runs a bucket per instance, each on
//! its own clock.

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const NANOS_PER_MS: u64 = 1_000_000;

/// `kind = "bucket4j"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The bucket's bandwidths, each a table.
    pub bandwidths: Vec<BandwidthConfig>,
    /// `"millis"` (the default time meter) or `"nanos"`.
    #[serde(default)]
    pub clock: Clock,
    /// A refusal carries the Spring Boot starter's
    /// `X-Rate-Limit-Retry-After-Seconds` (default false: `tryConsume`).
    #[serde(default)]
    pub retry_after_seconds: bool,
}

/// Bucket4j's time meter.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Clock {
    /// `TimeMeter.SYSTEM_MILLISECONDS`.
    #[default]
    Millis,
    /// `TimeMeter.SYSTEM_NANOTIME`.
    Nanos,
}

/// One `Bandwidth`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthConfig {
    /// `capacity`.
    pub capacity: u64,
    /// Tokens per refill (default: the capacity).
    pub refill_tokens: Option<u64>,
    /// The refill period.
    pub refill_period: Nanos,
    /// `"greedy"` (default), `"intervally"` or `"intervally-aligned"`.
    #[serde(default)]
    pub refill: Refill,
    /// `timeOfFirstRefill` of an aligned refill, on the epoch (whole ms).
    pub time_of_first_refill: Option<Nanos>,
    /// `initialTokens` (default: the capacity).
    pub initial_tokens: Option<u64>,
    /// `useAdaptiveInitialTokens` of an aligned refill (default false).
    #[serde(default)]
    pub adaptive_initial_tokens: bool,
}

/// How a bandwidth refills.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Refill {
    /// `refillGreedy`.
    #[default]
    Greedy,
    /// `refillIntervally`.
    Intervally,
    /// `refillIntervallyAligned`.
    IntervallyAligned,
}

/// The most tokens a bandwidth may hold, and the longest period: products
/// stay within Bucket4j's integer path.
const MAX_CAPACITY: u64 = 1_000_000_000;
const MAX_PERIOD: u64 = 366 * 86_400 * 1_000_000_000;

impl Kind for Config {
    const NAME: &'static str = "bucket4j";
    type State = Bucket4j;

    fn build(&self, _: Context) -> Result<Bucket4j, FieldError> {
        if self.bandwidths.is_empty() || self.bandwidths.len() > 16 {
            return Err(field_error!("bandwidths", "1 to 16 bandwidths (got {})", self.bandwidths.len()));
        }
        let bands = self
            .bandwidths
            .iter()
            .enumerate()
            .map(|(i, b)| b.build().map_err(|e| e.at_index(i).within("bandwidths")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Bucket4j {
            retry_after_seconds: self.retry_after_seconds,
            unit: match self.clock {
                Clock::Millis => NANOS_PER_MS,
                Clock::Nanos => 1,
            },
            bands,
        })
    }

    fn parameter(&self, _: Context) -> (&'static str, u64) {
        ("bandwidths[0].capacity", self.bandwidths.first().map_or(1, |b| b.capacity))
    }

    /// The first bandwidth with capacity `value`, and its refill too when
    /// it refilled the whole capacity ("N per period").
    fn with_parameter(&self, value: u64) -> Config {
        let mut config = self.clone();
        if let Some(first) = config.bandwidths.first_mut() {
            if first.refill_tokens.is_none_or(|tokens| tokens == first.capacity) {
                first.refill_tokens = None;
            }
            first.capacity = value.max(1);
        }
        config
    }

    fn example(choice: u64) -> String {
        let refill = ["greedy", "intervally", "intervally-aligned"][(choice % 3) as usize];
        let capacity = choice / 3 % 7 + 1;
        let tokens = choice / 21 % 4 + 1;
        let period = [1_000, 999, 250, 3][(choice / 84 % 4) as usize];
        let second = if (choice / 336).is_multiple_of(2) {
            String::new()
        } else {
            format!(", {{ capacity = {}, refill_period = \"{}ns\", refill = \"intervally\" }}", capacity * 2 + 1, period * 3)
        };
        let first = if refill == "intervally-aligned" {
            format!(", time_of_first_refill = \"{}ms\", adaptive_initial_tokens = {}", choice / 672 % 3, choice / 2_016 % 2 == 1)
        } else {
            String::new()
        };
        format!(
            "clock = \"nanos\"\nbandwidths = [{{ capacity = {capacity}, refill_tokens = {tokens}, refill_period = \"{period}ns\", refill = \"{refill}\", initial_tokens = {}{first} }}{second}]",
            choice / 7 % (capacity + 1)
        )
    }
}

impl BandwidthConfig {
    fn build(&self) -> Result<Band, FieldError> {
        let tokens = self.refill_tokens.unwrap_or(self.capacity);
        let period = self.refill_period.get();
        if self.capacity == 0 || self.capacity > MAX_CAPACITY {
            return Err(field_error!("capacity", "1 to {MAX_CAPACITY} tokens (got {})", self.capacity));
        }
        if tokens == 0 || tokens > MAX_CAPACITY {
            return Err(field_error!("refill_tokens", "1 to {MAX_CAPACITY} tokens (got {tokens})"));
        }
        if period == 0 || period > MAX_PERIOD {
            return Err(field_error!("refill_period", "1ns to a year (got {})", self.refill_period));
        }
        let aligned = self.refill == Refill::IntervallyAligned;
        if self.time_of_first_refill.is_some() && !aligned {
            return Err(field_error!("time_of_first_refill", "only an intervally-aligned refill has one"));
        }
        let first = match (aligned, self.time_of_first_refill) {
            (true, Some(first)) if first.get() % NANOS_PER_MS == 0 => Some(first.get()),
            (true, Some(first)) => {
                return Err(field_error!("time_of_first_refill", "Bucket4j takes it in whole milliseconds (got {first})"));
            }
            (true, None) => {
                return Err(field_error!("time_of_first_refill", "an intervally-aligned refill needs it"));
            }
            (false, _) => None,
        };
        let initial = self.initial_tokens.unwrap_or(self.capacity).min(self.capacity);
        // calculateInitialTokens: adaptive, before the first refill.
        let size = match first {
            Some(first) if self.adaptive_initial_tokens && first > 0 => {
                let base = self.capacity.saturating_sub(tokens);
                let extra = u128::from(first) * u128::from(tokens) / u128::from(period);
                u64::try_from(u128::from(base) + extra).unwrap_or(u64::MAX).min(self.capacity)
            }
            _ => initial,
        };
        Ok(Band {
            capacity: i128::from(self.capacity),
            tokens: i128::from(tokens),
            period: i128::from(period),
            intervally: self.refill != Refill::Greedy,
            // calculateLastRefillTimeNanos: now (the run's start), or the
            // period before the first aligned refill.
            last: first.map_or(0, |first| i128::from(first) - i128::from(period)),
            size: i128::from(size),
            error: 0,
        })
    }
}

/// One bandwidth's state: `lastRefillTimeNanos`, `currentSize`, `roundingError`.
#[derive(Clone, Debug)]
pub struct Band {
    capacity: i128,
    tokens: i128,
    period: i128,
    intervally: bool,
    last: i128,
    size: i128,
    error: i128,
}

impl Band {
    /// `refill(bandwidth, now)`, as Bucket4j's integer path does it.
    fn refill(&mut self, mut now: i128) {
        let previous = self.last;
        if now <= previous {
            return;
        }
        if self.intervally {
            now -= (now - previous) % self.period;
            if now <= previous {
                return;
            }
        }
        self.last = now;
        if self.size >= self.capacity {
            return;
        }
        let mut elapsed = now - previous;
        let mut size = self.size;
        if elapsed > self.period {
            size += elapsed / self.period * self.tokens;
            if size > self.capacity {
                (self.size, self.error) = (self.capacity, 0);
                return;
            }
            elapsed %= self.period;
        }
        let divided = self.tokens * elapsed + self.error;
        let refilled = divided / self.period;
        let error = if refilled == 0 {
            divided
        } else {
            size += refilled;
            divided % self.period
        };
        if size >= self.capacity {
            (self.size, self.error) = (self.capacity, 0);
        } else {
            (self.size, self.error) = (size, error);
        }
    }

    /// `nanosToWaitForRefill` of one token, as Bucket4j computes it for
    /// this bandwidth at `now` (just refilled).
    fn wait(&self, now: i128) -> i128 {
        if self.size >= 1 {
            0
        } else if self.intervally {
            self.last + self.period - now
        } else {
            // The deficit is one token: (period − rounding error) / tokens.
            (self.period - self.error) / self.tokens
        }
    }

    /// The most it lets through while the clock spans `span` ns.
    fn bound(&self, span: u128, interval: Nanos) -> u64 {
        let (capacity, tokens, period) = (self.capacity as u128, self.tokens as u128, self.period as u128);
        let refilled = if self.intervally {
            // Refills at most at each grid point in the interval.
            tokens * (super::fixed_window::windows_met(interval.get(), self.period as u64) as u128 - 1)
        } else {
            // The carried remainder is part of the content, which never
            // exceeds the capacity: whole tokens of tokens · span / period.
            tokens * span / period
        };
        u64::try_from(capacity + refilled).unwrap_or(u64::MAX)
    }
}

/// A local bucket.
#[derive(Clone, Debug)]
pub struct Bucket4j {
    retry_after_seconds: bool,
    /// Nanoseconds per clock tick.
    unit: u64,
    bands: Vec<Band>,
}

impl Bucket4j {
    /// The starter's header for a refusal at clock reading `now` of a
    /// request that arrived at `arrival`: whole seconds, truncated, counted
    /// from the response; none from `tryConsume` alone.
    fn retry_after(&self, now: i128, arrival: u64) -> Hint {
        if !self.retry_after_seconds {
            return Hint::NONE;
        }
        let wait = self.bands.iter().map(|band| band.wait(now)).max().unwrap_or(0);
        let seconds = u64::try_from(wait.max(0) / i128::from(Nanos::SECOND.get())).unwrap_or(u64::MAX);
        Hint {
            retry_at: Some(Nanos(arrival.saturating_add(seconds.saturating_mul(Nanos::SECOND.get())))),
            reset_at: None,
            ..Hint::NONE
        }
    }
}

impl RateLimiter for Bucket4j {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let arrival = now.get();
        let now = i128::from(now.get() / self.unit * self.unit);
        self.bands.iter_mut().for_each(|band| band.refill(now));
        if self.bands.iter().any(|band| band.size < 1) {
            return Decision::reject::<HINTS>(|| self.retry_after(now, arrival));
        }
        self.bands.iter_mut().for_each(|band| band.size -= 1);
        Decision::Admit
    }

    /// The tokens taken back (the refills stay, as they would have happened).
    fn refund(&mut self, _now: Nanos) {
        for band in &mut self.bands {
            band.size = (band.size + 1).min(band.capacity);
        }
    }

    /// The least over its bandwidths of capacity plus what refills while
    /// the clock spans the interval (⌈(L − 1)/tick⌉ ticks): greedy
    /// ⌊tokens · span / period⌋ (tokens plus the carried remainder never
    /// exceed the capacity, and refills add exactly tokens · elapsed /
    /// period to them), intervally tokens at each grid point met.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let span = u128::from((interval.get() - 1).div_ceil(self.unit)) * u128::from(self.unit);
        self.bands.iter().map(|band| band.bound(span, interval)).min().unwrap_or(0)
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX / 2)
    }

    /// The starter's header is whole seconds, truncated.
    fn hint_granularity(&self) -> Nanos {
        if self.retry_after_seconds {
            Nanos::SECOND
        } else {
            Nanos::ZERO
        }
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.bands
            .iter()
            .map(|b| b.tokens as f64 * interval.get() as f64 / b.period as f64)
            .fold(f64::INFINITY, f64::min)
    }

    fn describe(&self) -> String {
        self.bands
            .iter()
            .map(|b| {
                format!(
                    "{} tokens, {} per {} {}",
                    b.capacity,
                    b.tokens,
                    Nanos(b.period as u64),
                    if b.intervally { "intervally" } else { "greedy" }
                )
            })
            .collect::<Vec<_>>()
            .join(" and ")
    }

    fn memory_at_most(&self, _keys: u64, _requests: u64, _hashed: bool) -> u128 {
        super::allocation::<Band>(self.bands.len() as u128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NANOS_PER_MS;

    fn bucket(text: &str) -> Bucket4j {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    fn passed(b: &mut Bucket4j, at: u64, count: usize) -> usize {
        (0..count).filter(|_| b.decide(Nanos(at)).admitted()).count()
    }

    #[test]
    fn greedy_refills_a_token_at_a_time_and_carries_the_remainder() {
        // 3 per second: a token every 333.33 ms, the thirds carried.
        let mut b = bucket("bandwidths = [{ capacity = 3, refill_period = \"1s\" }]");
        assert_eq!(passed(&mut b, 0, 5), 3);
        assert_eq!(passed(&mut b, 333 * MS, 1), 0, "999 ms·3 / 1 s: none yet");
        assert_eq!(passed(&mut b, 334 * MS, 1), 1);
        // 334 ms made 1002/1000 of a token: 2/1000 carried, so 332 ms more
        // are not enough and 333 are.
        assert_eq!(passed(&mut b, 666 * MS, 1), 0);
        assert_eq!(passed(&mut b, 667 * MS, 1), 1);
        assert_eq!(passed(&mut b, 999 * MS, 1), 0);
        assert_eq!(passed(&mut b, 1_000 * MS, 1), 1);
    }

    #[test]
    fn intervally_refills_whole_periods_from_creation_and_lets_2n_through() {
        let mut b = bucket("bandwidths = [{ capacity = 10, refill_period = \"1s\", refill = \"intervally\" }]");
        assert_eq!(passed(&mut b, 999 * MS, 15), 10);
        assert_eq!(passed(&mut b, 1_000 * MS, 15), 10, "the refill at 1 s");
        assert_eq!(b.bound(Nanos(1)), 10);
        assert_eq!(b.bound(Nanos(MS)), 20, "2N across a refill");
    }

    #[test]
    fn aligned_refills_sit_on_the_first_refill_and_adaptive_tokens_fill_before_it() {
        let text = "bandwidths = [{ capacity = 10, refill_period = \"1s\", refill = \"intervally-aligned\", time_of_first_refill = \"250ms\", adaptive_initial_tokens = true }]";
        let mut b = bucket(text);
        // Before the first refill: max(0, 10 − 10) + 250 ms · 10 / 1 s = 2.
        assert_eq!(passed(&mut b, 0, 5), 2);
        assert_eq!(passed(&mut b, 249 * MS, 5), 0);
        assert_eq!(passed(&mut b, 250 * MS, 15), 10);
        assert_eq!(passed(&mut b, 1_249 * MS, 5), 0);
        assert_eq!(passed(&mut b, 1_250 * MS, 15), 10);
    }

    #[test]
    fn the_starters_header_is_the_wait_for_a_token_in_whole_seconds() {
        let hint = |text: &str, used: u64, at: u64| {
            let mut b = bucket(&format!("retry_after_seconds = true\nbandwidths = [{text}]"));
            assert_eq!(passed(&mut b, 0, used as usize + 1), used as usize);
            b.decide(Nanos(at))
        };
        // 10 a minute, greedy: at 1 s the refill carried 1/6 of a token, so
        // the next is (60 s − 10 s) / 10 = 5 s away; it is due at 6 s.
        let greedy = "{ capacity = 10, refill_period = \"1m\" }";
        assert_eq!(hint(greedy, 10, 1_000 * MS), Decision::Reject(Hint { retry_at: Some(Nanos(6_000 * MS)), reset_at: None, ..Hint::NONE }));
        // 3 a second: 333 ms away, which truncates to 0: "retry now".
        let fast = "{ capacity = 3, refill_period = \"1s\" }";
        assert_eq!(hint(fast, 3, 0), Decision::Reject(Hint { retry_at: Some(Nanos(0)), reset_at: None, ..Hint::NONE }));
        // Intervally: the next refill (60 s) − now (1.5 s) = 58.5 s → 58.
        let interval = "{ capacity = 10, refill_period = \"1m\", refill = \"intervally\" }";
        assert_eq!(hint(interval, 10, 1_500 * MS), Decision::Reject(Hint { retry_at: Some(Nanos(59_500 * MS)), reset_at: None, ..Hint::NONE }));
        // The longest wait over the bandwidths that are empty.
        let both = format!("{greedy}, {{ capacity = 20, refill_period = \"1h\" }}");
        assert_eq!(hint(&both, 10, 1_000 * MS), Decision::Reject(Hint { retry_at: Some(Nanos(6_000 * MS)), reset_at: None, ..Hint::NONE }));
        // tryConsume alone tells nothing.
        let mut plain = bucket(&format!("bandwidths = [{greedy}]"));
        assert_eq!(passed(&mut plain, 0, 11), 10);
        assert_eq!(plain.decide(Nanos(1_000 * MS)), Decision::Reject(Hint::NONE));
    }

    #[test]
    fn every_bandwidth_must_have_a_token() {
        let mut b = bucket("bandwidths = [{ capacity = 100, refill_period = \"1s\" }, { capacity = 5, refill_period = \"1ms\", refill_tokens = 1, refill = \"intervally\" }]");
        assert_eq!(passed(&mut b, 0, 10), 5, "the burst bandwidth");
        assert_eq!(passed(&mut b, MS, 10), 1);
        let err = toml::from_str::<Config>("bandwidths = [{ capacity = 0, refill_period = \"1s\" }]")
            .unwrap()
            .build(Context::default())
            .unwrap_err();
        assert_eq!(err.path_text(), "bandwidths[0].capacity", "{err}");
    }

    #[test]
    fn the_millisecond_clock_sees_no_time_within_a_millisecond() {
        let mut b = bucket("bandwidths = [{ capacity = 1, refill_period = \"1ms\" }]");
        assert!(b.decide(Nanos(5 * MS + 1)).admitted());
        assert!(!b.decide(Nanos(5 * MS + 999_999)).admitted());
        assert!(b.decide(Nanos(6 * MS)).admitted());
        let mut b = bucket("clock = \"nanos\"\nbandwidths = [{ capacity = 1, refill_period = \"1ms\" }]");
        assert!(b.decide(Nanos(5 * MS + 1)).admitted());
        assert!(b.decide(Nanos(6 * MS + 1)).admitted());
    }

    proptest::proptest! {
        /// The examples on the millisecond clock, their periods read as
        /// milliseconds, over traffic of whole and half milliseconds.
        #[test]
        fn never_passes_more_than_its_bound_on_the_millisecond_clock(
            choice in 0u64..10_000,
            mut halves in proptest::collection::vec(0u64..12_000, 1..300),
        ) {
            let text = Config::example(choice).replace("clock = \"nanos\"\n", "").replace("ns\"", "ms\"");
            let mut b = bucket(&text);
            halves.sort_unstable();
            let admitted: Vec<u64> = halves
                .iter()
                .map(|h| h * MS / 2)
                .filter(|&t| b.decide(Nanos(t)).admitted())
                .collect();
            for interval in [1, MS, 3 * MS, 250 * MS, 999 * MS, 1_000 * MS, 1_000 * MS + 1] {
                let (worst, bound) = (crate::limiter::worst_in(&admitted, Nanos(interval)), b.bound(Nanos(interval)));
                proptest::prop_assert!(worst <= bound, "{}: {} > {} over {}", text, worst, bound, interval);
            }
        }

        /// The starter's header, on either clock: the first pass after a refusal (no request between)
        /// comes within a second after the header's instant, and no earlier
        /// than it less the clock's tick (the header is counted from the
        /// arrival, the wait from the tick's start).
        #[test]
        fn the_header_is_the_wait_truncated_to_whole_seconds(
            choice in 0u64..10_000,
            millis in proptest::bool::ANY,
            mut halves in proptest::collection::vec(0u64..12_000, 1..100),
        ) {
            // Periods of 30 ms to 10 s: waits of whole seconds and less.
            let mut text = Config::example(choice).replace("ns\"", "0ms\"");
            if millis {
                text = text.replace("clock = \"nanos\"\n", "");
            }
            let text = format!("retry_after_seconds = true\n{text}");
            let mut b = bucket(&text);
            let tick = if millis { MS } else { 1 };
            halves.sort_unstable();
            for t in halves.iter().map(|h| h * MS / 2 + 7) {
                let Decision::Reject(Hint { retry_at: Some(retry), .. }) = b.decide(Nanos(t)) else {
                    continue;
                };
                // The earliest pass: refills only add, so search it.
                let passes = |at: u64| b.clone().decide(Nanos(at)).admitted();
                let (mut low, mut high) = (t, t + 400_000 * MS);
                proptest::prop_assume!(passes(high));
                while low < high {
                    let mid = low + (high - low) / 2;
                    if passes(mid) { high = mid } else { low = mid + 1 }
                }
                let retry = retry.get();
                proptest::prop_assert!(low + tick > retry && low < retry + Nanos::SECOND.get() + tick, "{}: at {} the header says {} but the first pass is at {}", text, t, retry, low);
            }
        }
    }
}
