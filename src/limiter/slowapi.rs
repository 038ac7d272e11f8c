//! Python's `slowapi` (`@limiter.limit("10/minute")` on a Starlette or
//! FastAPI route), modelled from slowapi 0.1.10 `extension.py` and the
//! `limits` 5.8 strategies it hands every hit to, over the default
//! `memory://` storage (`limits/strategies.py`, `limits/storage/memory.py`);
//! checked request by request against them in
//! `tests/integration/python_limiters.rs`:
//!
//! - `limit` in `limits`' notation: `"10/minute"`, `"10 per minute"`,
//!   `"100/5 minutes"`; granularities second, minute, hour, day, month (30
//!   days) and year (360 days).
//! - Time is `time.time()`, float seconds, and every comparison is made in
//!   binary64 as Python makes it (repeated here with `rustc_apfloat`).
//! - `strategy = "fixed-window"` (slowapi's default, `FixedWindowRateLimiter`):
//!   `MemoryStorage.incr` expires the key when `expiry ≤ now`, adds one —
//!   refused hits too — and a count of 1 sets `expiry = now + W`: a window
//!   from each key's first hit, N per window, 2N across a window's end.
//! - `"moving-window"` (`MovingWindowRateLimiter.acquire_entry`): a log of
//!   admission times, refused when the N-th newest is at or after `now − W`:
//!   N in any W.
//!
//! A refusal is `RateLimitExceeded` (429). With `headers_enabled = true`
//! slowapi adds `Retry-After: int(1 + reset − now)`, whole seconds counted
//! from the response, `reset` the key's expiry (fixed) or the oldest entry
//! in the window plus W (moving; with none in it — a limit of 1 refusing at
//! exactly `now − W`, which the check counts and the window does not — the
//! oldest entry stored, so a negative number, carried as 0).
//! The storage's cleanup thread, which runs on the wall clock and drops
//! entries whose `atime + W ≤ now`, is not modelled: it decides nothing the
//! check does not, except within a float rounding of `now − W` (the
//! differential test turns it off). The `sliding-window-counter` strategy,
//! several limits in one string, costs and the Redis storage are refused.

use std::collections::VecDeque;

use rustc_apfloat::Float;
use rustc_apfloat::ieee::Double;
use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const SECOND: u64 = 1_000_000_000;

/// The latest time modelled: 2^50 ns, 13 days. Below 2^53 ns Python's
/// `ns / 10**9` and this model's are the same division, and below 2^50 the
/// doubles' rounding shortens no window shorter than a year (see [`rounding`]).
const HORIZON: u64 = 1 << 50;

/// How many nanoseconds a window of `expiry` seconds can come out shorter
/// than W through rounding: `now` (under 2^21 s) and the next reading each
/// carry half a unit in the last place, 2^(b − 54) s for a value of b bits,
/// and so does `now + W`. Their sum in ns, whole: windows end on whole
/// nanoseconds, so less than one loses nothing (0 for any W under 30 days).
fn rounding(expiry: u64) -> u64 {
    let bits = |secs: u64| 64 - secs.leading_zeros();
    let h = HORIZON / SECOND + 1;
    let halves = (2u128 << bits(h)) + (1u128 << bits(h + expiry));
    ((u128::from(SECOND) * halves) >> 54) as u64
}

/// `kind = "slowapi"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The decorator's limit string: `"10/minute"`.
    pub limit: String,
    /// `"fixed-window"` (default) or `"moving-window"`.
    #[serde(default)]
    pub strategy: Strategy,
    /// `Limiter(headers_enabled=…)` (default false): a refusal carries `Retry-After`.
    #[serde(default)]
    pub headers_enabled: bool,
}

/// `Limiter(strategy=…)`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// `FixedWindowRateLimiter`.
    #[default]
    FixedWindow,
    /// `MovingWindowRateLimiter`.
    MovingWindow,
}

impl Kind for Config {
    const NAME: &'static str = "slowapi";
    type State = Slowapi;

    fn build(&self, _: Context) -> Result<Slowapi, FieldError> {
        let (amount, expiry) = self.parse()?;
        Ok(Slowapi(Box::new(State {
            amount,
            expiry,
            moving: self.strategy == Strategy::MovingWindow,
            headers: self.headers_enabled,
            count: 0,
            expires: None,
            log: VecDeque::new(),
            first: None,
        })))
    }

    fn parameter(&self, _: Context) -> (&'static str, u64) {
        ("limit", self.parse().map_or(1, |(amount, _)| amount))
    }

    /// The same limit string with `value` hits.
    fn with_parameter(&self, value: u64) -> Config {
        let text = self.limit.trim();
        let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        Config {
            limit: format!("{}{}", value.max(1), &text[digits..]),
            ..self.clone()
        }
    }

    fn example(choice: u64) -> String {
        format!(
            "limit = \"{}{}\"\nstrategy = \"{}\"\nheaders_enabled = {}",
            choice % 7 + 1,
            ["/second", " per 2 seconds", "/minute", "/3 second"][(choice / 7 % 4) as usize],
            ["fixed-window", "moving-window"][(choice / 28 % 2) as usize],
            choice / 56 % 2 == 1
        )
    }
}

impl Config {
    /// `limits.parse`: the amount and the expiry in seconds.
    fn parse(&self) -> Result<(u64, u64), FieldError> {
        let bad = || field_error!("limit", "{:?} is not a limits string; expected like \"10/minute\", \"10 per minute\" or \"100/5 minutes\" (second, minute, hour, day, month, year)", self.limit);
        let text = self.limit.trim().to_lowercase();
        if text.contains([',', ';', '|']) {
            return Err(field_error!("limit", "{:?} holds several limits; give each its own slowapi limiter in a chain (count_rejected = true: slowapi hits each in turn until one refuses)", self.limit));
        }
        let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let amount: u64 = text[..digits].parse().map_err(|_| bad())?;
        let rest = text[digits..].trim_start();
        let rest = rest
            .strip_prefix('/')
            .or_else(|| rest.strip_prefix("per"))
            .ok_or_else(bad)?
            .trim_start();
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let multiples: u64 = if digits == 0 { 1 } else { rest[..digits].parse().map_err(|_| bad())? };
        let unit = rest[digits..].trim();
        let seconds = match unit.strip_suffix('s').unwrap_or(unit) {
            "second" => 1,
            "minute" => 60,
            "hour" => 3_600,
            "day" => 86_400,
            "month" => 30 * 86_400,
            "year" => 360 * 86_400,
            _ => return Err(bad()),
        };
        if amount == 0 || amount > 1_000_000 {
            return Err(field_error!("limit", "{:?}: from 1 to 1000000 hits", self.limit));
        }
        let expiry = seconds * multiples;
        if expiry == 0 || expiry > 360 * 86_400 {
            return Err(field_error!("limit", "{:?}: a period of 1 s to a year", self.limit));
        }
        Ok((amount, expiry))
    }
}

/// A key's limit and storage: boxed, so a limiter per key stays small.
#[derive(Clone, Debug)]
pub struct Slowapi(Box<State>);

#[derive(Clone, Debug)]
struct State {
    amount: u64,
    /// W, whole seconds.
    expiry: u64,
    moving: bool,
    headers: bool,
    /// Fixed window: the key's count and expiry (a double's bits).
    count: u64,
    expires: Option<u64>,
    /// Moving window: the newest admissions' times (bits), newest first,
    /// at most `amount`; and the first ever stored.
    log: VecDeque<u64>,
    first: Option<u64>,
}

fn double(v: u64) -> Double {
    Double::from_u128(u128::from(v)).value
}

fn bits(d: Double) -> u64 {
    d.to_bits() as u64
}

fn from_bits(b: u64) -> Double {
    Double::from_bits(u128::from(b))
}

/// `time.time()` at `now` ns: `ns / 10**9`, correctly rounded.
fn seconds(now: Nanos) -> Double {
    match seconds_exactly(now.get()) {
        Some(bits) => from_bits(bits),
        None => seconds_by_division(now),
    }
}

/// [`seconds`] as binary64 division makes it: `ns` rounded to a double
/// (exact below 2^53), then divided by 10^9.
fn seconds_by_division(now: Nanos) -> Double {
    (double(now.get()) / double(SECOND)).value
}

/// The bits of `ns / 10^9` rounded to the nearest double,
/// worked out in integers, for `ns` below 2^53, where the double of `ns`
/// is `ns` itself and so the same as [`seconds_by_division`] (whose
/// software division was half of a slowapi run's time); `None` above.
fn seconds_exactly(ns: u64) -> Option<u64> {
    const SIGNIFICAND: u32 = 52;
    if ns >= 1 << (SIGNIFICAND + 1) {
        return None;
    }
    if ns == 0 {
        return Some(0);
    }
    let divisor = u128::from(SECOND);
    // The shift that puts ns·2^shift / 10^9 in [2^52, 2^53): from the
    // lengths of the two, then at most one step either way.
    let length = |v: u128| 128 - v.leading_zeros();
    let mut shift = SIGNIFICAND + length(divisor) - length(u128::from(ns));
    let low = divisor << SIGNIFICAND;
    while u128::from(ns) << shift < low {
        shift += 1;
    }
    while u128::from(ns) << shift >= low << 1 {
        shift -= 1;
    }
    // Below 2^53 · 10^9 < 2^83: within 128 bits.
    let scaled = u128::from(ns) << shift;
    let (mut significand, rest) = ((scaled / divisor) as u64, scaled % divisor);
    let mut exponent = i64::from(SIGNIFICAND) - i64::from(shift);
    // Never exactly halfway (ties to even would need a shift of at most 9,
    // the twos in 10^9, and ns / 10^9 < 2^24 takes one of at least 29).
    if 2 * rest > divisor {
        significand += 1;
        if significand == 1 << (SIGNIFICAND + 1) {
            significand >>= 1;
            exponent += 1;
        }
    }
    // ns / 10^9 ≥ 10^-9: far above the subnormals.
    let biased = u64::try_from(exponent + 1023).ok()?;
    Some(biased << SIGNIFICAND | significand & ((1 << SIGNIFICAND) - 1))
}

impl State {
    /// `Retry-After: int(1 + reset − now)`, counted from the response at `now`.
    fn retry_after(&self, reset: Double, at: Double, now: Nanos) -> Hint {
        if !self.headers {
            return Hint::NONE;
        }
        let after = ((double(1) + reset).value - at).value;
        let whole = after.to_u128(64).value as u64;
        Hint {
            retry_at: Some(Nanos(now.get().saturating_add(whole.saturating_mul(SECOND)))),
            reset_at: None,
            ..Hint::NONE
        }
    }

    fn fixed<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let at = seconds(now);
        // get(): the key expires when its expiry ≤ now.
        if self.expires.is_some_and(|e| from_bits(e) <= at) {
            (self.count, self.expires) = (0, None);
        }
        self.count += 1;
        if self.count == 1 {
            self.expires = Some(bits((at + double(self.expiry)).value));
        }
        if self.count <= self.amount {
            return Decision::Admit;
        }
        let reset = self.expires.map_or(at, from_bits);
        Decision::reject::<HINTS>(|| self.retry_after(reset, at, now))
    }

    fn moving<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let at = seconds(now);
        let since = (at - double(self.expiry)).value;
        let full = self.log.len() as u64 == self.amount;
        if full && self.log.back().is_some_and(|&oldest| from_bits(oldest) >= since) {
            return Decision::reject::<HINTS>(|| {
                // get_moving_window: the oldest entry after now − W, or
                // with none, the oldest stored.
                let start = self
                    .log
                    .iter()
                    .rev()
                    .map(|&b| from_bits(b))
                    .find(|&t| t > since)
                    .or_else(|| self.first.map(from_bits))
                    .unwrap_or(at);
                self.retry_after((start + double(self.expiry)).value, at, now)
            });
        }
        if full {
            self.log.pop_back();
        }
        self.log.push_front(bits(at));
        self.first.get_or_insert(bits(at));
        Decision::Admit
    }
}

impl RateLimiter for Slowapi {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        if self.0.moving {
            self.0.moving::<HINTS>(now)
        } else {
            self.0.fixed::<HINTS>(now)
        }
    }

    /// A hit stays hit, whatever a later layer answers (slowapi hits its
    /// limits in turn and stops at the first refusal).
    fn refund(&mut self, _now: Nanos) {}

    /// Fixed: N per window of W from a first hit, so the windows that
    /// meet an interval, each at least W less float rounding long. Moving:
    /// N in any W less rounding.
    fn bound(&self, interval: Nanos) -> u64 {
        let window = self.0.expiry * SECOND - rounding(self.0.expiry);
        let l = interval.get();
        if self.0.moving {
            l.div_ceil(window).saturating_mul(self.0.amount)
        } else {
            super::fixed_window::windows_met(l, window).saturating_mul(self.0.amount)
        }
    }

    fn horizon(&self) -> Nanos {
        Nanos(HORIZON)
    }

    /// `Retry-After` is whole seconds, truncated.
    fn hint_granularity(&self) -> Nanos {
        if self.0.headers { Nanos::SECOND } else { Nanos::ZERO }
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.0.amount as f64 * interval.get() as f64 / (self.0.expiry * SECOND) as f64
    }

    fn describe(&self) -> String {
        format!(
            "{} per {} s, {}",
            self.0.amount,
            self.0.expiry,
            if self.0.moving { "moving window" } else { "fixed window from the first hit" }
        )
    }

    /// The moving window's log of up to N times, and the state itself.
    fn memory_at_most(&self, _keys: u64, requests: u64, _hashed: bool) -> u128 {
        let entries = if self.0.moving { requests.min(self.0.amount) } else { 0 };
        super::allocation::<State>(1) + super::allocation::<u64>(u128::from(entries))
    }
}

#[cfg(test)]
mod tests;
