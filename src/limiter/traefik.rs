//! Traefik's `rateLimit` middleware (upstream: `pkg/middlewares/ratelimiter/rate_limiter.go`)
//! over `golang.org/x/time/rate` (`rate.go`: `reserveN`, `advance`,
//! `CancelAt`): a token bucket of `burst` at `average / period` per second
//! where each request reserves a token; if the reservation's delay is at most
//! `maxDelay` — 1 s / (2 · ⌊rate⌋), or 500 ms below one request per second —
//! the request waits that long and is served, otherwise the reservation is
//! cancelled (its token given back) and the answer is 429 with
//! `Retry-After: ⌈delay⌉` whole seconds and `X-Retry-In: delay` (Go's
//! duration text, to the nanosecond), both counted from the response; no
//! `RateLimit-Reset`. The hint is `Retry-After`, what a client honours; the
//! exact delay is `X-Retry-In`'s. Neither is the earliest a retry can pass:
//! one within `maxDelay` of the token is served late. Each source's
//! limiter lives in a TTL map (`mailgun/ttlmap`) refreshed by every request
//! with `ttl` seconds (2 for rates of at least one per second, else
//! 1 + ⌊1/rate⌋); the map keeps expiry times in whole Unix seconds —
//! `Unix(now + ttl)`, expired once `expiry <= Unix(now)` — so a source is
//! forgotten at the first whole second at or after `last + ttl` rounded
//! down: between `ttl − 1 s` and `ttl` after its last request, depending on
//! where in a second that was. The next request meets a new limiter, whose
//! zero time makes its bucket full. `clock_offset` says where within a Unix
//! second the run starts (default 0: on a whole second).
//!
//! The arithmetic is the Go library's, in the same IEEE doubles in the same
//! order — tokens, `Duration.Seconds()`, `durationFromTokens` truncated to
//! whole nanoseconds — because the real limiter decides in floats: integers
//! would disagree with it. `tests/integration/xtime_rate.rs` runs a Go driver over the
//! real library and agrees request by request.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "traefik"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Requests per `period` on average.
    pub average: NonZeroU64,
    /// The period of `average` (default 1 s).
    #[serde(default = "second")]
    pub period: Nanos,
    /// The bucket's size (default 1).
    #[serde(default = "one")]
    pub burst: NonZeroU64,
    /// Where within a Unix second the run starts (default 0), which decides
    /// when the TTL map forgets a source.
    #[serde(default)]
    pub clock_offset: Nanos,
}

fn second() -> Nanos {
    Nanos::SECOND
}

fn one() -> NonZeroU64 {
    NonZeroU64::MIN
}

/// The largest burst: the Go library keeps tokens in a double.
const MAX_BURST: u64 = 1 << 40;

impl Kind for Config {
    const NAME: &'static str = "traefik";
    type State = Traefik;

    fn build(&self, _: Context) -> Result<Traefik, FieldError> {
        if self.period == Nanos::ZERO {
            return Err(field_error!("period", "must be longer than 0"));
        }
        if self.burst.get() > MAX_BURST {
            return Err(field_error!("burst", "at most {MAX_BURST}"));
        }
        if self.clock_offset >= Nanos::SECOND {
            return Err(field_error!("clock_offset", "where within a second the run starts, less than 1s (got {})",
                self.clock_offset
            ));
        }
        let average = i64::try_from(self.average.get())
            .ok()
            .and_then(|a| a.checked_mul(NANOS_PER_SEC as i64))
            .ok_or_else(|| FieldError::at("average", "too large for Traefik's nanosecond arithmetic"))?;
        let rate = average as f64 / self.period.get() as f64;
        let max_delay = if rate < 1.0 {
            500_000_000
        } else {
            NANOS_PER_SEC as i64 / ((rate as i64).saturating_mul(2)).max(1)
        };
        let ttl_s = 1 + if rate >= 1.0 { 1 } else { (1.0 / rate) as u64 };
        Ok(Traefik {
            rate,
            burst: self.burst.get(),
            max_delay: max_delay as u64,
            ttl: ttl_s.saturating_mul(NANOS_PER_SEC),
            offset: self.clock_offset.get(),
            tokens: 0.0,
            last: 0,
            expires: 0,
        })
    }

    super::parameter_is!(average);

    /// Sized with the average: the bucket's size.
    fn companion(&self, _: Context) -> Option<super::Companion> {
        super::count_companion("burst", self.burst.get())
    }

    /// The same middleware with burst `value`.
    fn with_companion(&self, value: u64) -> Config {
        Config {
            burst: NonZeroU64::new(value).unwrap_or(NonZeroU64::MIN),
            ..self.clone()
        }
    }

    /// The middleware's `rateLimit` keys, as in Traefik's dynamic configuration.
    fn gateway_lines(&self, zone: &str) -> Option<Vec<String>> {
        let mut lines = vec![
            format!("{zone}: rateLimit:"),
            format!("  average: {}", self.average),
        ];
        if self.period != Nanos::SECOND {
            lines.push(format!("  period: {}", self.period));
        }
        lines.push(format!("  burst: {}", self.burst));
        Some(lines)
    }

    fn example(choice: u64) -> String {
        format!(
            "average = {}\nperiod = \"{}ns\"\nburst = {}\nclock_offset = \"{}ns\"",
            choice % 19 + 1,
            choice / 19 % 2_000 + 500,
            choice / 38_000 % 9 + 1,
            choice / 342_000 % 1_000_000_000
        )
    }
}

/// One source's `rate.Limiter` and its place in the TTL map.
#[derive(Clone, Debug)]
pub struct Traefik {
    rate: f64,
    burst: u64,
    max_delay: u64,
    ttl: u64,
    /// Where within a Unix second the run starts.
    offset: u64,
    tokens: f64,
    /// `lim.last`, in ns; meaningless while `expires` is 0 (a new limiter).
    last: u64,
    /// When the TTL map forgets the limiter; 0 before the first request.
    expires: u64,
}

/// `time.Duration.Seconds()`.
fn seconds(d: i64) -> f64 {
    let sec = d / NANOS_PER_SEC as i64;
    let nsec = d % NANOS_PER_SEC as i64;
    sec as f64 + nsec as f64 / 1e9
}

impl Traefik {
    /// `advance`: the tokens at `now`.
    fn advance(&self, now: u64, fresh: bool) -> f64 {
        // A new limiter's zero time is centuries ago: `Sub` saturates.
        let elapsed = if fresh {
            i64::MAX
        } else {
            (now - self.last.min(now)) as i64
        };
        let tokens = if fresh { 0.0 } else { self.tokens } + seconds(elapsed) * self.rate;
        tokens.min(self.burst as f64)
    }
}

impl RateLimiter for Traefik {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now = now.get();
        let fresh = now >= self.expires;
        // `Unix(now + ttl)`, in whole seconds of the Unix clock, back on
        // the run's: the map forgets the source once that second begins.
        let unix = now.saturating_add(self.offset).saturating_add(self.ttl);
        self.expires = (unix - unix % NANOS_PER_SEC).saturating_sub(self.offset);
        // reserveN(now, 1, InfDuration): always granted with burst ≥ 1.
        let tokens = self.advance(now, fresh) - 1.0;
        let wait = if tokens < 0.0 {
            // durationFromTokens, truncated toward zero like Go's conversion.
            (1e9 * (-tokens / self.rate)) as i64 as u64
        } else {
            0
        };
        self.last = now;
        self.tokens = tokens;
        if wait > self.max_delay {
            // CancelAt(now): advance by nothing, give the token back.
            let restored = self.advance(now, false) + 1.0;
            self.tokens = restored.min(self.burst as f64);
            // `Retry-After: math.Ceil(delay.Seconds())`, from the response.
            return Decision::admit_or::<HINTS>(false, || Hint {
                retry_at: Some(Nanos(
                    now.saturating_add(wait.div_ceil(NANOS_PER_SEC).saturating_mul(NANOS_PER_SEC)),
                )),
                reset_at: None,
                ..Hint::NONE
            });
        }
        if wait == 0 {
            Decision::Admit
        } else {
            Decision::Delay(Nanos(wait))
        }
    }

    fn refund(&mut self, _now: Nanos) {
        self.tokens = (self.tokens + 1.0).min(self.burst as f64);
    }

    /// `Retry-After` is whole seconds from the response.
    fn hint_granularity(&self) -> Nanos {
        Nanos::SECOND
    }

    /// Counted when requests are served. While a source is remembered it
    /// is a token bucket of `burst` at `rate`, its reservations served no
    /// earlier than their tokens exist: burst + ⌈rate · L⌉ + 1 in L (one more
    /// for the doubles' rounding). Forgotten after an idle gap g of at least
    /// ttl − 1 s + 1 ns (the map's whole seconds), it comes back full: in L,
    /// k stretches of activity, each starting at least g after the last
    /// ended and served at most `maxDelay` after it, so k ≤ ⌈(L + maxDelay)
    /// / g⌉, and their served spans, at least g − maxDelay apart, cover at
    /// most L − (k − 1)(g − maxDelay). Each admits at most burst + 1 and its
    /// refill over its span: the bound is the larger of k = 1 and the
    /// largest k (the count is linear in k). It matters when burst + 1 >
    /// rate · g: 100 a minute with a burst of 100 lets 100 through every
    /// second or so, not 100 a minute.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let within = |span: u64, stretches: u64| -> u64 {
            let refill = (self.rate * span as f64 / 1e9).ceil();
            stretches
                .saturating_mul(self.burst.saturating_add(1))
                .saturating_add(refill.min(u64::MAX as f64 / 2.0) as u64)
        };
        let length = interval.get();
        let gap = self.ttl - NANOS_PER_SEC + 1;
        let stretches = length.saturating_add(self.max_delay).div_ceil(gap).max(1);
        let apart = gap - self.max_delay.min(gap);
        let covered = length.saturating_sub((stretches - 1).saturating_mul(apart));
        within(length, 1).max(within(covered, stretches))
    }

    /// At decision times reservations may run up to `maxDelay` ahead.
    fn decision_bound(&self, interval: Nanos) -> u64 {
        self.bound(Nanos(interval.get().saturating_add(self.max_delay)))
    }

    fn max_delay(&self) -> Nanos {
        Nanos(self.max_delay)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.rate * interval.get() as f64 / 1e9
    }

    fn describe(&self) -> String {
        format!(
            "{:.6}/s, burst {}, waits up to {}",
            self.rate,
            self.burst,
            Nanos(self.max_delay)
        )
        .replace(".000000/s", "/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traefik(average: u64, burst: u64) -> Traefik {
        Config {
            average: NonZeroU64::new(average).unwrap(),
            period: Nanos::SECOND,
            burst: NonZeroU64::new(burst).unwrap(),
            clock_offset: Nanos::ZERO,
        }
        .build(Context::default())
        .unwrap()
    }

    #[test]
    fn a_short_wait_is_served_late_a_long_one_refused() {
        // 10/s: tokens every 100 ms, waits up to 1 s / 20 = 50 ms.
        let mut limiter = traefik(10, 2);
        assert_eq!(limiter.max_delay(), Nanos(50_000_000));
        assert_eq!(limiter.decide(Nanos(0)), Decision::Admit);
        assert_eq!(limiter.decide(Nanos(0)), Decision::Admit);
        assert!(!limiter.decide(Nanos(0)).admitted(), "a 100 ms wait");
        // 60 ms later: 0.6 of a token; the rest comes in 40 ms, within 50.
        assert_eq!(limiter.decide(Nanos(60_000_000)), Decision::Delay(Nanos(40_000_000)));
    }

    /// The 429 says `Retry-After: ⌈delay⌉` seconds from the response (1 for
    /// a 100 ms wait; 3 for a 2.5 s one), and no reset.
    #[test]
    fn a_refusal_says_retry_after_the_delay_rounded_up_to_seconds() {
        let mut limiter = traefik(10, 1);
        assert_eq!(limiter.decide(Nanos(7)), Decision::Admit);
        let refusal = limiter.decide_with::<true>(Nanos(10_000_007));
        // 90 ms to the next token: Retry-After: 1.
        assert_eq!(
            refusal,
            Decision::Reject(Hint {
                retry_at: Some(Nanos(1_010_000_007)),
                reset_at: None,
                ..Hint::NONE
            })
        );
        assert!(limiter.clone().decide(Nanos(1_010_000_007)).admitted());
        // 0.4 per second (2 a 5 s period): a 2.5 s wait says 3.
        let mut slow = Config {
            average: NonZeroU64::new(2).unwrap(),
            period: Nanos(5 * NANOS_PER_SEC),
            burst: NonZeroU64::MIN,
            clock_offset: Nanos::ZERO,
        }
        .build(Context::default())
        .unwrap();
        assert_eq!(slow.decide(Nanos(0)), Decision::Admit);
        let Decision::Reject(hint) = slow.decide_with::<true>(Nanos(0)) else {
            panic!("a 2.5 s wait is over 500 ms");
        };
        assert_eq!(hint.retry_at, Some(Nanos(3 * NANOS_PER_SEC)));
    }

    fn admitted(limiter: &mut Traefik, at: u64, tries: usize) -> usize {
        (0..tries)
            .filter(|_| limiter.decide(Nanos(at)).admitted())
            .count()
    }

    #[test]
    fn the_map_forgets_at_a_whole_unix_second_up_to_a_second_early() {
        // 10/s, burst 100, TTL 2 s: the last request at 0.9 s stores
        // Unix(2.9 s) = 2, and at 2.0 s the source is gone: a full bucket.
        let mut limiter = traefik(10, 100);
        assert_eq!(admitted(&mut limiter, 900_000_000, 100), 100);
        assert_eq!(admitted(&mut limiter, 2 * NANOS_PER_SEC, 100), 100);
        // The same run started 200 ms into a Unix second: 0.9 s is 1.1 on
        // the Unix clock, the expiry Unix(3.1) = 3, 2.8 s of the run; at
        // 2.0 s the bucket is the old one, refilled for 1.1 s.
        let mut limiter = Config {
            average: NonZeroU64::new(10).unwrap(),
            period: Nanos::SECOND,
            burst: NonZeroU64::new(100).unwrap(),
            clock_offset: Nanos(200_000_000),
        }
        .build(Context::default())
        .unwrap();
        assert_eq!(admitted(&mut limiter, 900_000_000, 100), 100);
        assert_eq!(admitted(&mut limiter, 2 * NANOS_PER_SEC, 100), 11);
    }

    #[test]
    fn the_bound_counts_the_full_buckets_of_forgotten_sources() {
        // 100 a minute with a burst of 100: 100 every 2 s all pass, 3000 in
        // 60 s, 200 in 2 s + 1 ns.
        let mut limiter = Config {
            average: NonZeroU64::new(100).unwrap(),
            period: Nanos(60 * NANOS_PER_SEC),
            burst: NonZeroU64::new(100).unwrap(),
            clock_offset: Nanos::ZERO,
        }
        .build(Context::default())
        .unwrap();
        let passed: usize = (0..30)
            .map(|i| admitted(&mut limiter, i * 2 * NANOS_PER_SEC, 100))
            .sum();
        assert_eq!(passed, 3000);
        assert!(limiter.bound(Nanos(60 * NANOS_PER_SEC)) >= 3000);
        assert!(limiter.bound(Nanos(2 * NANOS_PER_SEC + 1)) >= 200);
        // Forgotten just over a second after its last request (Unix
        // seconds): 100 at 0.999999999 s and 100 at 2 s.
        let mut limiter = limiter.clone();
        limiter.expires = 0;
        assert_eq!(admitted(&mut limiter, 999_999_999 + 60 * NANOS_PER_SEC, 100), 100);
        assert_eq!(admitted(&mut limiter, 62 * NANOS_PER_SEC, 100), 100);
        assert!(limiter.bound(Nanos(NANOS_PER_SEC + 2)) >= 200);
    }

    #[test]
    fn the_ttl_forgets_a_source_and_its_next_request_finds_a_full_bucket() {
        let mut limiter = traefik(1, 5);
        assert_eq!(limiter.ttl, 2 * NANOS_PER_SEC);
        let admitted = (0..8).filter(|_| limiter.decide(Nanos(0)).admitted()).count();
        assert_eq!(admitted, 5);
        // 2 s idle: forgotten, full again (refill alone would give 2).
        let admitted = (0..8)
            .filter(|_| limiter.decide(Nanos(2 * NANOS_PER_SEC)).admitted())
            .count();
        assert_eq!(admitted, 5);
    }
}
