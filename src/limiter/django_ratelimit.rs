//! Python's `django-ratelimit` (`@ratelimit(key=…, rate="5/m")`, modelled
//! from `django_ratelimit/core.py` of 4.1.0, `get_usage` and `_get_window`;
//! checked decision by decision against it in
//! `tests/integration/python_limiters.rs`):
//!
//! - `rate = "N/P"` with P a second, minute, hour or day, or a multiple
//!   (`"100/5m"`);
//! - time is `int(time.time())`, whole Unix seconds; each key's windows are
//!   P seconds on the epoch grid moved by `crc32(key) % P` — the window id is
//!   the window's last second, `ts − ts % P + crc32(key) % P`, plus P when
//!   that is already past — so keys' windows end at different seconds, but
//!   each key's is a fixed window;
//! - every request increments the window's count (`increment=True`, what
//!   the decorator does), refused ones too, and a request is refused when the
//!   count exceeds N. The answer is `Ratelimited` (403 by default): no hint.
//!
//! Shared by a `[cluster]` with `mode = "shared-instance-clock"`, the count is
//! the shared cache's (`cache.add` / `cache.incr`), still keyed by each
//! instance's `time.time()`. A cache that fails refuses everything
//! (`get_usage` sees no count, and `RATELIMIT_FAIL_OPEN` is False by
//! default), or lets everything through with `fail_open = true`.
//!
//! The key's phase comes from its text. A global limit (one key value for
//! every request) states it with `key_value`; per key (`per = "key"`), each
//! key's phase is the crc32 of its client number written in decimal — the
//! real value for synthetic clients numbered as the application names them,
//! and for a trace's keys the crc32 of their hashed number, not of the text
//! in the log: the phases are spread as the real ones are, not the same.


use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;
use crate::traffic::Key;

const SECOND: u64 = 1_000_000_000;

/// `kind = "django-ratelimit"`, as `@ratelimit(key=…, rate="5/m")`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `rate`: `"5/s"`, `"100/m"`, `"1000/h"`, `"10000/d"`, `"100/5m"`.
    pub rate: String,
    /// The key's value, whose crc32 places its windows; by default each
    /// client's number in decimal.
    pub key_value: Option<String>,
    /// `RATELIMIT_FAIL_OPEN` (default false): when the shared cache fails, let
    /// the request through instead of refusing it.
    #[serde(default)]
    pub fail_open: bool,
}

impl Kind for Config {
    const NAME: &'static str = "django-ratelimit";
    type State = DjangoRatelimit;

    fn build(&self, _: Context) -> Result<DjangoRatelimit, FieldError> {
        let (limit, period) = self.rate()?;
        Ok(DjangoRatelimit {
            limit,
            period,
            phase: self.key_value.as_deref().map(|value| phase(value, period)),
            window: None,
            count: 0,
        })
    }

    fn parameter(&self, _: Context) -> (&'static str, u64) {
        ("rate", self.rate().map_or(1, |(limit, _)| limit))
    }

    /// The same decorator with `value` requests per its period.
    fn with_parameter(&self, value: u64) -> Config {
        let period = self.rate.split_once('/').map_or("s", |(_, period)| period);
        Config {
            rate: format!("{}/{period}", value.max(1)),
            ..self.clone()
        }
    }

    fn example(choice: u64) -> String {
        format!(
            "rate = \"{}/{}\"{}",
            choice % 9 + 1,
            ["s", "2s", "m", "7s"][(choice / 9 % 4) as usize],
            if (choice / 36).is_multiple_of(2) { "\nkey_value = \"10.0.0.7\"" } else { "" }
        )
    }
}

impl Config {
    /// `_split_rate`: the count and the period in seconds.
    fn rate(&self) -> Result<(u64, u64), FieldError> {
        let bad = || field_error!("rate", "{:?} is not django-ratelimit's notation; expected like \"5/s\", \"100/m\" or \"100/5m\" (s, m, h or d)", self.rate);
        let (count, period) = self.rate.trim().split_once('/').ok_or_else(bad)?;
        let count: u64 = count.parse().map_err(|_| bad())?;
        let digits = period.find(|c: char| !c.is_ascii_digit()).unwrap_or(period.len());
        let (multiple, unit) = period.split_at(digits);
        let seconds = match unit {
            "" | "s" | "S" => 1,
            "m" | "M" => 60,
            "h" | "H" => 3_600,
            "d" | "D" => 86_400,
            _ => return Err(bad()),
        };
        let multiple: u64 = if multiple.is_empty() { 1 } else { multiple.parse().map_err(|_| bad())? };
        let period = seconds * multiple;
        if count == 0 {
            return Err(field_error!("rate", "{:?} refuses every request; expected at least 1", self.rate));
        }
        if period == 0 || period > 366 * 86_400 {
            return Err(field_error!("rate", "{:?}: a period of 1 s to a year", self.rate));
        }
        Ok((count, period))
    }
}

/// `zlib.crc32(value) % period`.
fn phase(value: &str, period: u64) -> u64 {
    u64::from(crc32fast::hash(value.as_bytes())) % period
}

/// One key's window: its id (last second) and count.
#[derive(Clone, Debug)]
pub struct DjangoRatelimit {
    limit: u64,
    /// P, in seconds.
    period: u64,
    /// `crc32(value) % P`, once known.
    phase: Option<u64>,
    window: Option<u64>,
    count: u64,
}

impl DjangoRatelimit {
    fn decide_at(&mut self, now: Nanos, key: Key) -> Decision {
        let period = self.period;
        let phase = *self
            .phase
            .get_or_insert_with(|| phase(&key.client.to_string(), period));
        let ts = now.get() / SECOND;
        // _get_window: the current window's last second.
        let window = if period == 1 {
            ts
        } else {
            let w = ts - ts % period + phase;
            if w < ts { w + period } else { w }
        };
        if self.window != Some(window) {
            self.window = Some(window);
            self.count = 0;
        }
        self.count += 1;
        if self.count > self.limit {
            Decision::Reject(Hint::NONE)
        } else {
            Decision::Admit
        }
    }
}

impl RateLimiter for DjangoRatelimit {
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        self.decide_at(now, Key::DEFAULT)
    }

    #[inline]
    fn decide_keyed<const HINTS: bool>(&mut self, now: Nanos, key: Key) -> Decision {
        self.decide_at(now, key)
    }

    /// Every request increments the count, whatever a later layer answers.
    fn refund(&mut self, _now: Nanos) {}

    /// A fixed window of P whole seconds per key: N per window, an
    /// interval meets at most ⌈(L − 1)/P⌉ + 1 of them.
    fn bound(&self, interval: Nanos) -> u64 {
        super::fixed_window::windows_met(interval.get(), self.period * SECOND).saturating_mul(self.limit)
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX - 2 * self.period * SECOND)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.limit as f64 * interval.get() as f64 / (self.period * SECOND) as f64
    }

    fn describe(&self) -> String {
        format!("{} per {} s, windows moved by crc32(key)", self.limit, self.period)
    }

    /// With a stated key, its windows' edges: `(phase + 1) % P` seconds
    /// past the epoch grid.
    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        let phase = self.phase?;
        Some((Nanos(self.period * SECOND), Nanos((phase + 1) % self.period * SECOND)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decorator(text: &str) -> DjangoRatelimit {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    #[test]
    fn windows_are_moved_by_the_keys_crc32() {
        // crc32("10.0.0.7") % 60: each window ends that many seconds into
        // a minute.
        let offset = phase("10.0.0.7", 60);
        assert_eq!(offset, u64::from(crc32fast::hash(b"10.0.0.7")) % 60);
        let mut l = decorator("rate = \"2/m\"\nkey_value = \"10.0.0.7\"");
        let last = 120 + offset; // the window's last second
        assert!(l.decide(Nanos(last * SECOND)).admitted());
        assert!(l.decide(Nanos(last * SECOND + SECOND - 1)).admitted());
        assert!(!l.decide(Nanos(last * SECOND + SECOND - 1)).admitted(), "a third in the window");
        assert!(l.decide(Nanos((last + 1) * SECOND)).admitted(), "the next window");
        assert_eq!(l.window_edges(), Some((Nanos(60 * SECOND), Nanos((offset + 1) % 60 * SECOND))));
    }

    #[test]
    fn rates_read_as_django_ratelimit_reads_them() {
        for (rate, expected) in [("5/s", (5, 1)), ("100/m", (100, 60)), ("7/5m", (7, 300)), ("1/d", (1, 86_400)), ("3/", (3, 1))] {
            let config = Config { rate: rate.into(), key_value: None, fail_open: false };
            assert_eq!(config.rate().unwrap(), expected, "{rate}");
        }
        for rate in ["5", "five/s", "5/w", "0/s"] {
            let config = Config { rate: rate.into(), key_value: None, fail_open: false };
            assert!(config.rate().is_err(), "{rate}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_admits_more_than_its_bound(
            choice in 0u64..1_000,
            mut times in proptest::collection::vec(0u64..400_000, 1..300),
        ) {
            let config: Config = toml::from_str(&Config::example(choice)).unwrap();
            let mut l = config.build(Context::default()).unwrap();
            // Times in ms over 400 s: every phase of every period.
            let over = crate::limiter::over_bound(&mut l, &mut times, &[Nanos(1), Nanos(SECOND), Nanos(2 * SECOND), Nanos(60 * SECOND), Nanos(61 * SECOND)]);
            proptest::prop_assert!(over.is_none(), "{}: {over:?}", Config::example(choice));
        }
    }
}
