//! Kong's rate-limiting plugin (upstream: `kong/plugins/rate-limiting/handler.lua`,
//! `policies/init.lua` and `kong/tools/timestamp.lua`): one counter per
//! configured period — `second`, `minute`, `hour`, `day`, `month`, `year` —
//! each a fixed window aligned to the UTC calendar (a month starts on its
//! 1st at 00:00 UTC, a year on 1 January), read at Kong's clock in whole
//! seconds. A request is rejected when any period's usage has reached its
//! limit; with `policy = "local"` or `"cluster"` only admitted requests
//! are counted, with `policy = "redis"` (`sync_rate = -1`) every request
//! increments every period, rejected ones included.
//!
//! Each period's counter is a key (a shared-dict entry, a Redis key, a
//! database row) created by its window's first increment with a TTL of
//! Kong's `EXPIRATION` for the period (`expiration.lua`: a month is 30 days,
//! a year 365; `shm:incr(key, 1, 0, ttl)`, Redis `INCR` then `EXPIRE` when it
//! returned 1, the row's `ttl` column on insert). Shorter periods' keys
//! outlive their window, but a month's key created in the first day of a
//! 31-day month expires on the 31st, and a year's created on 1 January of a
//! leap year expires on 31 December: from then to the window's end the
//! quota is whole again. So a month limit of L lets up to 3L − 1 through
//! within a second: L − 1 just before the key expires, L after it, L when
//! the next month begins.
//!
//! A rejection carries `Retry-After` and `RateLimit-Reset` of
//! `max(1, window − elapsed)` seconds, for the exhausted period with the
//! longest window, where `window` is that `EXPIRATION` and `elapsed` is the
//! whole seconds since the period's calendar start: in a 31-day month or a
//! leap year the hint can come before the quota returns (unless the key
//! expired by then), and then a retry at the hint is rejected again, as
//! Kong's is.
//!
//! Not modelled: Kong increments in its log phase, after the response, so
//! requests in flight at once all read the count before any of them; here
//! the increment lands at the decision. `sync_rate > 0` (counters batched
//! between nodes) is the scenario's `[cluster]` with `sync_interval`.
//!
//! A single second, minute, hour or day limit is exactly a fixed window on
//! whole seconds, and is run as one (so a `[cluster]` can share it).

use std::fmt;
use std::num::NonZeroU64;

use serde::{Deserialize, Deserializer};
use time::format_description::well_known::Rfc3339;
use time::{Date, Month, OffsetDateTime};

use super::fixed_window::{FixedWindow, windows_met};
use super::{Align, Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "kong"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `config.second`: requests per UTC second.
    pub second: Option<NonZeroU64>,
    /// `config.minute`.
    pub minute: Option<NonZeroU64>,
    /// `config.hour`.
    pub hour: Option<NonZeroU64>,
    /// `config.day`.
    pub day: Option<NonZeroU64>,
    /// `config.month`: per calendar month.
    pub month: Option<NonZeroU64>,
    /// `config.year`: per calendar year.
    pub year: Option<NonZeroU64>,
    /// `config.policy` (default `local`, as Kong's).
    #[serde(default)]
    pub policy: Policy,
    /// `config.sync_rate` (default -1: every request goes to the counter).
    #[serde(default = "unsynced")]
    pub sync_rate: i64,
    /// The UTC instant the run starts at, RFC 3339 in whole seconds
    /// (default 1970-01-01T00:00:00Z): where the calendar's edges fall.
    #[serde(default)]
    pub start: Start,
}

/// Why `sync_rate > 0` is refused, and how to model it instead.
pub fn sync_rate_advice(rate: i64) -> String {
    format!(
        "sync_rate: {rate} batches counters between Kong nodes; model it as the scenario's [cluster] with mode = \"shared-instance-clock\" and sync_interval = \"{rate}s\" around a kong limiter with policy = \"cluster\" and one second, minute, hour or day limit"
    )
}

fn unsynced() -> i64 {
    -1
}

/// `config.policy`: where the counters are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// In the node's shared memory; admitted requests counted.
    #[default]
    Local,
    /// In Kong's database; admitted requests counted.
    Cluster,
    /// In Redis; every request counted, rejected ones included.
    Redis,
}

/// The run's start as a UTC instant, in unix seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Start(pub i64);

/// The last instant whose year still has a successor the calendar code can
/// name: 9999-01-01T00:00:00Z.
const LAST_UNIX: i64 = 253_370_764_800;

impl<'de> Deserialize<'de> for Start {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let at = OffsetDateTime::parse(&text, &Rfc3339).map_err(|err| {
            serde::de::Error::custom(format!(
                "{text:?} is not an RFC 3339 instant like \"2026-11-27T00:00:00Z\" ({err})"
            ))
        })?;
        if at.nanosecond() != 0 {
            return Err(serde::de::Error::custom(format!(
                "{text:?}: Kong's clock is whole seconds; give a whole second"
            )));
        }
        let unix = at.unix_timestamp();
        if !(0..LAST_UNIX).contains(&unix) {
            return Err(serde::de::Error::custom(format!(
                "{text:?}: give an instant from 1970 to 9998"
            )));
        }
        Ok(Start(unix))
    }
}

impl fmt::Display for Start {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match OffsetDateTime::from_unix_timestamp(self.0) {
            Ok(at) => write!(
                f,
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                at.year(),
                u8::from(at.month()),
                at.day(),
                at.hour(),
                at.minute(),
                at.second()
            ),
            Err(_) => write!(f, "unix {}", self.0),
        }
    }
}

/// One of Kong's periods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// A UTC second.
    Second,
    /// A UTC minute.
    Minute,
    /// A UTC hour.
    Hour,
    /// A UTC day.
    Day,
    /// A calendar month (28 to 31 days).
    Month,
    /// A calendar year (365 or 366 days).
    Year,
}

const SECONDS_PER_DAY: i64 = 86_400;

impl Period {
    /// Every period, shortest first.
    pub const ALL: [Period; 6] = [
        Period::Second,
        Period::Minute,
        Period::Hour,
        Period::Day,
        Period::Month,
        Period::Year,
    ];

    /// The name of its field.
    pub fn name(self) -> &'static str {
        match self {
            Period::Second => "second",
            Period::Minute => "minute",
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Month => "month",
            Period::Year => "year",
        }
    }

    /// Kong's `EXPIRATION`, in seconds: the `window` of its reset hint.
    pub fn expiration(self) -> i64 {
        match self {
            Period::Month => 30 * SECONDS_PER_DAY,
            Period::Year => 365 * SECONDS_PER_DAY,
            fixed => fixed.fixed_length().unwrap_or(1),
        }
    }

    /// Its length in seconds when every one is as long.
    fn fixed_length(self) -> Option<i64> {
        match self {
            Period::Second => Some(1),
            Period::Minute => Some(60),
            Period::Hour => Some(3_600),
            Period::Day => Some(SECONDS_PER_DAY),
            Period::Month | Period::Year => None,
        }
    }

    /// Its shortest length in seconds: what the bound counts with (a
    /// window's first key lives at least this long within it).
    fn shortest(self) -> i64 {
        match self {
            Period::Month => 28 * SECONDS_PER_DAY,
            Period::Year => 365 * SECONDS_PER_DAY,
            fixed => fixed.fixed_length().unwrap_or(1),
        }
    }

    /// The calendar window `[start, end)` holding the unix second `unix`
    /// (`timestamp.get_timestamps`), for `unix` in 1970…9998.
    fn window(self, unix: i64) -> (i64, i64) {
        if let Some(length) = self.fixed_length() {
            let start = unix.div_euclid(length) * length;
            return (start, start + length);
        }
        let date = OffsetDateTime::from_unix_timestamp(unix)
            .map_or(Date::MIN, |at| at.date());
        let year = date.year();
        let (first, next) = match self {
            Period::Month if date.month() == Month::December => {
                ((year, Month::December), (year + 1, Month::January))
            }
            Period::Month => ((year, date.month()), (year, date.month().next())),
            _ => ((year, Month::January), (year + 1, Month::January)),
        };
        (midnight_of_the_first(first), midnight_of_the_first(next))
    }
}

/// 00:00 UTC on the 1st of `month` of `year`, in unix seconds.
fn midnight_of_the_first((year, month): (i32, Month)) -> i64 {
    Date::from_calendar_date(year, month, 1)
        .map_or(i64::MAX, |date| date.midnight().assume_utc().unix_timestamp())
}

impl Config {
    /// The configured periods and limits, shortest first.
    fn limits(&self) -> Vec<(Period, u64)> {
        let fields = [
            self.second,
            self.minute,
            self.hour,
            self.day,
            self.month,
            self.year,
        ];
        Period::ALL
            .into_iter()
            .zip(fields)
            .filter_map(|(period, limit)| Some((period, limit?.get())))
            .collect()
    }

    fn set(&mut self, period: Period, value: Option<NonZeroU64>) {
        let field = match period {
            Period::Second => &mut self.second,
            Period::Minute => &mut self.minute,
            Period::Hour => &mut self.hour,
            Period::Day => &mut self.day,
            Period::Month => &mut self.month,
            Period::Year => &mut self.year,
        };
        *field = value;
    }
}

impl Kind for Config {
    const NAME: &'static str = "kong";
    type State = Kong;

    fn build(&self, _: Context) -> Result<Kong, String> {
        let limits = self.limits();
        if limits.is_empty() {
            return Err(
                "give at least one of second, minute, hour, day, month, year (Kong requires one)"
                    .into(),
            );
        }
        if self.sync_rate > 0 {
            return Err(sync_rate_advice(self.sync_rate));
        }
        if self.sync_rate != -1 && self.sync_rate != 0 {
            return Err(format!(
                "sync_rate: {} is not one of Kong's: -1 (synchronous), 0 or a positive number of seconds",
                self.sync_rate
            ));
        }
        let counts_rejected = self.policy == Policy::Redis;
        if let [(period, limit)] = limits[..]
            && let Some(length) = period.fixed_length()
        {
            // Whole-second windows on a whole-second clock: a fixed window.
            let anchor = (length - self.start.0.rem_euclid(length)) % length;
            let window = FixedWindow::new(
                Nanos(length as u64 * NANOS_PER_SEC),
                limit,
                Align::Anchor(Nanos(anchor as u64 * NANOS_PER_SEC)),
            )?
            .counting_rejected(counts_rejected)
            .hinting_whole_seconds();
            return Ok(Kong::Window(window, self.policy));
        }
        Ok(Kong::Calendar(Calendar {
            windows: limits
                .into_iter()
                .map(|(period, limit)| Window {
                    period,
                    limit,
                    count: 0,
                    start: i64::MIN,
                    end: i64::MIN,
                    expires: NO_KEY,
                })
                .collect(),
            start: self.start,
            policy: self.policy,
            resets: 0,
        }))
    }

    /// The shortest period's limit.
    fn parameter(&self, _: Context) -> (&'static str, u64) {
        self.limits()
            .first()
            .map_or(("second", 1), |&(period, limit)| (period.name(), limit))
    }

    fn with_parameter(&self, value: u64) -> Config {
        let mut config = self.clone();
        if let Some(&(period, _)) = self.limits().first() {
            config.set(period, Some(NonZeroU64::new(value).unwrap_or(NonZeroU64::MIN)));
        }
        config
    }

    /// Whole seconds are its clock: the property tests' microsecond traffic
    /// sits inside one second (and minute), against one limit or two.
    fn example(choice: u64) -> String {
        let policy = ["local", "cluster", "redis"][(choice % 3) as usize];
        let second = choice / 3 % 29 + 1;
        let minute = match choice / 87 % 3 {
            0 => String::new(),
            _ => format!("minute = {}\n", choice / 261 % 40 + 1),
        };
        format!("second = {second}\n{minute}policy = \"{policy}\"")
    }
}

/// A running Kong plugin: one fixed window when that is what it is, else
/// its calendar windows.
#[derive(Clone, Debug)]
pub enum Kong {
    /// One second, minute, hour or day limit.
    Window(FixedWindow, Policy),
    /// Several limits, or a month or a year.
    Calendar(Calendar),
}

/// Kong's counters for several periods on the UTC calendar.
#[derive(Clone, Debug)]
pub struct Calendar {
    windows: Vec<Window>,
    start: Start,
    policy: Policy,
    resets: u64,
}

/// One period's counter and its current window, in unix seconds.
#[derive(Clone, Copy, Debug)]
struct Window {
    period: Period,
    limit: u64,
    count: u64,
    start: i64,
    end: i64,
    /// When the counter's key expires, in run nanoseconds: its first
    /// increment plus the period's `EXPIRATION`; `NO_KEY` before that.
    expires: u64,
}

/// `Window::expires` while the window's key does not exist.
const NO_KEY: u64 = u64::MAX;

impl Window {
    /// Counts one request at run time `now`, creating the key (and its TTL)
    /// when there is none.
    fn increment(&mut self, now: Nanos) {
        if self.expires == NO_KEY {
            let ttl = self.period.expiration() as u64 * NANOS_PER_SEC;
            self.expires = now.get().saturating_add(ttl).min(NO_KEY - 1);
        }
        self.count += 1;
    }
}

impl Calendar {
    /// Kong's whole-second clock at run time `now`.
    fn unix(&self, now: Nanos) -> i64 {
        self.start.0 + (now.get() / NANOS_PER_SEC) as i64
    }

    /// `Retry-After`: `max(1, window − elapsed)` whole seconds on Kong's
    /// clock (`unix`), for the exhausted period with the longest window (the
    /// least remaining, ties to the longer window, as the handler picks);
    /// the client counts them from the response, at `now`.
    fn reset(&self, unix: i64, now: Nanos) -> u64 {
        let exhausted = self
            .windows
            .iter()
            .filter(|w| w.count >= w.limit)
            .max_by_key(|w| w.period.expiration());
        let wait = exhausted.map_or(1, |w| (w.period.expiration() - (unix - w.start)).max(1));
        now.get()
            .saturating_add((wait as u64).saturating_mul(NANOS_PER_SEC))
    }
}

impl RateLimiter for Kong {
    fn hint_granularity(&self) -> Nanos {
        Nanos::SECOND
    }

    fn memory_at_most(&self, _keys: u64, _requests: u64) -> u128 {
        match self {
            Kong::Window(..) => 0,
            Kong::Calendar(calendar) => super::allocation::<Window>(calendar.windows.len() as u128),
        }
    }

    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let calendar = match self {
            Kong::Window(window, _) => return window.decide_with::<HINTS>(now),
            Kong::Calendar(calendar) => calendar,
        };
        let unix = calendar.unix(now);
        for window in &mut calendar.windows {
            if unix >= window.end {
                (window.start, window.end) = window.period.window(unix);
                window.count = 0;
                window.expires = NO_KEY;
                calendar.resets += 1;
            } else if now.get() >= window.expires {
                // The key's TTL ran out inside its window: the next request
                // meets no key, as in a new window.
                window.count = 0;
                window.expires = NO_KEY;
                calendar.resets += 1;
            }
        }
        let admit = calendar.windows.iter().all(|w| w.count < w.limit);
        // The period named in Retry-After is judged on the usage before
        // this request's own increment, as Kong's handler judges it (with
        // the redis policy its usage is INCR − 1): with second = 2 and
        // minute = 3, the third request in a second hears 1 s, not 60.
        let hint = (HINTS && !admit).then(|| {
            let at = calendar.reset(unix, now);
            Hint::new(at, at)
        });
        if admit || calendar.policy == Policy::Redis {
            calendar.windows.iter_mut().for_each(|w| w.increment(now));
        }
        Decision::admit_or::<HINTS>(admit, || hint.unwrap_or(Hint::NONE))
    }

    fn refund(&mut self, now: Nanos) {
        match self {
            Kong::Window(window, _) => window.refund(now),
            // As if rejected: the redis policy counts rejected requests too.
            Kong::Calendar(calendar) if calendar.policy == Policy::Redis => {}
            Kong::Calendar(calendar) => calendar
                .windows
                .iter_mut()
                .for_each(|w| w.count = w.count.saturating_sub(1)),
        }
    }

    /// The least over its periods of limit · (keys an interval of X
    /// meets): each key's life admits at most its limit. A second, minute,
    /// hour or day has one key per window, so X meets at most
    /// ⌈(X − 1) / length⌉ + 1 of them. A month or a year can have two: the
    /// first lives at least the shortest window (28 days, 365), the second
    /// only from the first's expiry to the window's end; so X holds at most
    /// ⌊X / shortest⌋ whole first keys, at most one second key either side of
    /// each, and a key at each end: 2⌊X / shortest⌋ + 3, and never more
    /// keys than nanoseconds.
    fn bound(&self, interval: Nanos) -> u64 {
        match self {
            Kong::Window(window, _) => window.bound(interval),
            Kong::Calendar(calendar) => calendar
                .windows
                .iter()
                .map(|w| {
                    let shortest = w.period.shortest() as u64 * NANOS_PER_SEC;
                    let keys = match w.period {
                        Period::Month | Period::Year => {
                            (2 * (interval.get() / shortest) + 3).min(interval.get())
                        }
                        _ => windows_met(interval.get(), shortest),
                    };
                    keys.saturating_mul(w.limit)
                })
                .min()
                .unwrap_or(0),
        }
    }

    /// The last instant its calendar can name (the year 9998's end).
    fn horizon(&self) -> Nanos {
        let start = match self {
            Kong::Window(..) => return Nanos(u64::MAX),
            Kong::Calendar(calendar) => calendar.start.0,
        };
        let seconds = (LAST_UNIX - start).max(0) as u64;
        Nanos(seconds.saturating_mul(NANOS_PER_SEC))
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        match self {
            Kong::Window(window, _) => window.nominal(interval),
            Kong::Calendar(calendar) => calendar
                .windows
                .iter()
                .map(|w| {
                    // Each period promises its limit over its window, or less.
                    let window = (w.period.expiration() as u64 * NANOS_PER_SEC) as f64;
                    w.limit as f64 * (interval.get() as f64 / window).max(1.0)
                })
                .fold(f64::INFINITY, f64::min),
        }
    }

    fn describe(&self) -> String {
        match self {
            Kong::Window(window, policy) => {
                format!("{}, {} policy (UTC)", window.describe(), policy.name())
            }
            Kong::Calendar(calendar) => {
                let limits: Vec<String> = calendar
                    .windows
                    .iter()
                    .map(|w| format!("{} per {}", w.limit, w.period.name()))
                    .collect();
                format!(
                    "{}, {} policy (UTC calendar from {})",
                    limits.join(" and "),
                    calendar.policy.name(),
                    calendar.start
                )
            }
        }
    }

    /// Every fixed-length period's edges: a minute's edge is where a second
    /// limit and a minute limit both reset.
    fn every_window_edges(&self) -> Vec<(Nanos, Nanos)> {
        match self {
            Kong::Window(window, _) => window.window_edges().into_iter().collect(),
            Kong::Calendar(calendar) => calendar
                .windows
                .iter()
                .filter_map(|w| {
                    let length = w.period.fixed_length()?;
                    let phase = (length - calendar.start.0.rem_euclid(length)) % length;
                    Some((
                        Nanos(length as u64 * NANOS_PER_SEC),
                        Nanos(phase as u64 * NANOS_PER_SEC),
                    ))
                })
                .collect(),
        }
    }

    /// The shortest period's edges, when every one of its windows is as long.
    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        match self {
            Kong::Window(window, _) => window.window_edges(),
            Kong::Calendar(calendar) => {
                let length = calendar.windows.first()?.period.fixed_length()?;
                let phase = (length - calendar.start.0.rem_euclid(length)) % length;
                Some((
                    Nanos(length as u64 * NANOS_PER_SEC),
                    Nanos(phase as u64 * NANOS_PER_SEC),
                ))
            }
        }
    }

    fn store_ops(&self) -> Option<StoreOps> {
        match self {
            Kong::Window(window, Policy::Redis) => window.store_ops(),
            Kong::Calendar(calendar) if calendar.policy == Policy::Redis => Some(StoreOps {
                // A GET per period to read usage, an INCRBY per period to count.
                per_request: 2 * calendar.windows.len() as u64,
                per_reset: 1,
            }),
            _ => None,
        }
    }

    fn resets(&self) -> u64 {
        match self {
            Kong::Window(window, _) => window.resets(),
            Kong::Calendar(calendar) => calendar.resets,
        }
    }

    fn fixed_window(&self) -> Option<&FixedWindow> {
        match self {
            Kong::Window(window, _) => Some(window),
            Kong::Calendar(_) => None,
        }
    }
}

impl Policy {
    /// As `policy = "…"` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Local => "local",
            Policy::Cluster => "cluster",
            Policy::Redis => "redis",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kong(fields: &str) -> Kong {
        let config: Config = toml::from_str(fields).unwrap();
        config.build(Context::default()).unwrap()
    }

    fn secs(s: u64) -> Nanos {
        Nanos(s * NANOS_PER_SEC)
    }

    fn admitted(limiter: &mut Kong, at: Nanos, tries: usize) -> usize {
        (0..tries).filter(|_| limiter.decide(at).admitted()).count()
    }

    #[test]
    fn one_fixed_length_limit_is_a_fixed_window_on_the_utc_grid() {
        // 10 s before a UTC minute's edge: the window ends 10 s into the run.
        let mut limiter = kong("minute = 5\nstart = \"2026-11-27T09:59:50Z\"");
        assert!(limiter.fixed_window().is_some());
        assert_eq!(admitted(&mut limiter, secs(9), 8), 5);
        assert_eq!(admitted(&mut limiter, secs(10), 8), 5);
        assert_eq!(limiter.window_edges(), Some((secs(60), secs(10))));
    }

    #[test]
    fn any_exhausted_period_rejects() {
        let mut limiter = kong("second = 3\nminute = 5");
        assert_eq!(admitted(&mut limiter, secs(0), 10), 3);
        assert_eq!(admitted(&mut limiter, secs(1), 10), 2);
        assert_eq!(admitted(&mut limiter, secs(2), 10), 0);
        assert_eq!(admitted(&mut limiter, secs(60), 10), 3);
    }

    #[test]
    fn months_follow_the_calendar() {
        // February 2028 (a leap year) has 29 days.
        let mut limiter = kong("month = 2\nday = 100\nstart = \"2028-02-28T00:00:00Z\"");
        assert_eq!(admitted(&mut limiter, secs(0), 5), 2);
        assert_eq!(admitted(&mut limiter, secs(86_400), 5), 0, "29 February");
        assert_eq!(admitted(&mut limiter, secs(2 * 86_400), 5), 2, "1 March");
    }

    #[test]
    fn the_redis_policy_counts_rejected_requests_and_local_does_not() {
        for (policy, second_later) in [("local", 2), ("redis", 0)] {
            let mut limiter = kong(&format!("second = 2\nminute = 4\npolicy = \"{policy}\""));
            // 2 pass, 3 are rejected: only redis counts them in the minute.
            assert_eq!(admitted(&mut limiter, secs(0), 5), 2);
            assert_eq!(admitted(&mut limiter, secs(1), 5), second_later, "{policy}");
        }
    }

    #[test]
    fn the_reset_is_the_longest_exhausted_periods_window_minus_elapsed() {
        let mut limiter = kong("second = 1\nminute = 2\nstart = \"2026-11-27T10:00:00Z\"");
        assert!(limiter.decide(secs(20)).admitted());
        // "Retry-After: 1", counted from the response at 20 s + 5 ns.
        match limiter.decide(Nanos(20 * NANOS_PER_SEC + 5)) {
            Decision::Reject(hint) => assert_eq!(hint.retry_at, Some(Nanos(secs(21).get() + 5))),
            other => panic!("{other:?}"),
        }
        assert!(limiter.decide(secs(21)).admitted());
        // The minute is exhausted too: its window, 60 − 22 s from 10:00:22.
        match limiter.decide(secs(22)) {
            Decision::Reject(hint) => assert_eq!(hint.reset_at, Some(secs(60))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_redis_policy_names_the_period_exhausted_before_the_requests_own_increment() {
        let mut limiter =
            kong("second = 2\nminute = 3\npolicy = \"redis\"\nstart = \"2026-11-27T10:00:00Z\"");
        assert!(limiter.decide(Nanos(0)).admitted());
        assert!(limiter.decide(Nanos(100_000_000)).admitted());
        // Before its increment the second is used up (2 of 2), the minute
        // not (2 of 3): Kong says 1 s, and the client returns 1 s after.
        assert_eq!(
            limiter.decide_with::<true>(Nanos(200_000_000)),
            Decision::Reject(Hint::new(1_200_000_000, 1_200_000_000))
        );
    }

    #[test]
    fn in_a_31_day_month_the_hint_comes_a_day_early() {
        // Kong's month window is 30 days: on 31 January the hint says 1 s,
        // and a retry then is rejected again (the key, created on the 31st,
        // lives 30 days).
        let mut limiter = kong("month = 1\nday = 10\nstart = \"2027-01-31T00:00:00Z\"");
        assert!(limiter.decide(secs(0)).admitted());
        let Decision::Reject(hint) = limiter.decide(secs(5)) else {
            panic!("the month is exhausted");
        };
        assert_eq!(hint.retry_at, Some(secs(6)));
        assert!(!limiter.decide(secs(6)).admitted());
        assert!(limiter.decide(secs(86_400)).admitted(), "1 February");
    }

    /// The month's key lives 30 days from its first increment: created on
    /// 1 January it expires on the 31st and the quota is whole again until
    /// February. In a 30-day month, or from a later first request, it
    /// outlives the window.
    #[test]
    fn a_months_key_expires_30_days_after_its_first_increment() {
        for policy in ["local", "cluster", "redis"] {
            let mut limiter = kong(&format!(
                "month = 2\nday = 100\npolicy = \"{policy}\"\nstart = \"2027-01-01T00:00:00Z\""
            ));
            let first = Nanos(3_600 * NANOS_PER_SEC + 7);
            assert_eq!(admitted(&mut limiter, first, 3), 2);
            let expiry = first.get() + 30 * 86_400 * NANOS_PER_SEC;
            assert_eq!(admitted(&mut limiter, Nanos(expiry - 1), 3), 0, "{policy}");
            assert_eq!(admitted(&mut limiter, Nanos(expiry), 3), 2, "{policy}: 31 January");
            assert_eq!(admitted(&mut limiter, secs(31 * 86_400 - 1), 3), 0, "{policy}");
            assert_eq!(admitted(&mut limiter, secs(31 * 86_400), 3), 2, "{policy}: 1 February");
        }
        // April has 30 days: the key outlives it.
        let mut limiter = kong("month = 2\nday = 100\nstart = \"2027-04-01T00:00:00Z\"");
        assert_eq!(admitted(&mut limiter, secs(0), 3), 2);
        assert_eq!(admitted(&mut limiter, secs(30 * 86_400 - 1), 3), 0);
        // A year's key created on 1 January 2028 (leap) expires on 31 December.
        let mut limiter = kong("year = 1\nday = 100\nstart = \"2028-01-01T00:00:00Z\"");
        assert_eq!(admitted(&mut limiter, secs(0), 2), 1);
        assert_eq!(admitted(&mut limiter, secs(365 * 86_400 - 1), 2), 0);
        assert_eq!(admitted(&mut limiter, secs(365 * 86_400), 2), 1, "31 December 2028");
    }

    /// L − 1 before the month's key expires, L after, L in the next month:
    /// 3L − 1 within a second, and the bound says so.
    #[test]
    fn a_month_limit_can_admit_three_times_its_limit_within_a_second() {
        let mut limiter = kong("month = 10\nday = 1000\nstart = \"2027-01-01T00:00:00Z\"");
        let first = Nanos(86_399 * NANOS_PER_SEC + 500_000_000);
        assert_eq!(admitted(&mut limiter, first, 1), 1);
        let expiry = first.get() + 30 * 86_400 * NANOS_PER_SEC;
        let mut admitted_times = Vec::new();
        for at in [expiry - 100_000_000, expiry + 100_000_000, 31 * 86_400 * NANOS_PER_SEC] {
            for _ in 0..10 {
                if limiter.decide(Nanos(at)).admitted() {
                    admitted_times.push(at);
                }
            }
        }
        let worst = crate::limiter::worst_in(&admitted_times, Nanos::SECOND);
        assert_eq!(worst, 29);
        assert!(limiter.bound(Nanos::SECOND) >= worst);
        assert_eq!(limiter.bound(Nanos::SECOND), 30);
    }

    #[test]
    fn sync_rate_and_empty_limits_are_refused_with_the_way_out() {
        let err = |text: &str| {
            toml::from_str::<Config>(text)
                .map_err(|e| e.to_string())
                .and_then(|c| c.build(Context::default()).map(|_| ()))
                .unwrap_err()
        };
        assert!(err("second = 1\nsync_rate = 10").contains("sync_interval = \"10s\""));
        assert!(err("policy = \"redis\"").contains("at least one"));
        assert!(err("second = 1\nstart = \"2026-11-27T00:00:00.5Z\"").contains("whole second"));
        assert!(err("second = 1\nstart = \"yesterday\"").contains("RFC 3339"));
    }

    #[test]
    fn sync_rate_is_a_cluster_with_batched_counters() {
        use crate::limiter::LimiterConfig;
        use crate::limiter::cluster::{ClusterConfig, Config as ClusterRun};
        let inner = LimiterConfig::from_table(
            toml::from_str("kind = \"kong\"\nminute = 10\npolicy = \"cluster\"").unwrap(),
        )
        .unwrap();
        let cluster: ClusterConfig = toml::from_str(
            "instances = 2\nmode = \"shared-instance-clock\"\nsync_interval = \"10s\"",
        )
        .unwrap();
        let run = ClusterRun {
            inner: Box::new(inner),
            cluster,
            duration: secs(120),
        };
        let mut limiter = run.build(Context::default()).unwrap();
        // Between syncs each of the 2 nodes spends the minute's 10 on its own.
        assert_eq!(
            (0..40).filter(|_| limiter.decide(secs(1)).admitted()).count(),
            20
        );
    }

    proptest::proptest! {
        /// Over traffic crossing seconds and minutes (two limits, so the
        /// calendar windows rather than the fixed window): no rolling
        /// interval admits more than the bound.
        #[test]
        fn never_admits_more_than_its_bound(
            second in 1u64..8,
            minute in 1u64..40,
            redis in proptest::bool::ANY,
            mut times in proptest::collection::vec(0u64..150_000, 1..300),
        ) {
            let policy = if redis { "redis" } else { "local" };
            let mut limiter = kong(&format!(
                "second = {second}\nminute = {minute}\npolicy = \"{policy}\"\nstart = \"2026-11-27T09:59:30Z\""
            ));
            let over = crate::limiter::over_bound(&mut limiter, &mut times, &[Nanos(300_000_000), Nanos::SECOND, secs(60), secs(90)]);
            proptest::prop_assert!(over.is_none(), "{over:?}");
        }

        /// A month's key expiring inside a 31-day month: requests around
        /// the first increment, the key's expiry and the month's end, from
        /// either policy; no rolling interval admits more than the bound.
        #[test]
        fn expiring_month_keys_stay_within_the_bound(
            month in 1u64..6,
            redis in proptest::bool::ANY,
            first in 0u64..86_400_000,
            mut offsets in proptest::collection::vec((0u64..3, 0u64..3_000), 1..200),
        ) {
            let policy = if redis { "redis" } else { "local" };
            let mut limiter = kong(&format!(
                "month = {month}\nday = 1000\npolicy = \"{policy}\"\nstart = \"2027-01-01T00:00:00Z\""
            ));
            const MS: u64 = 1_000_000;
            let expiry = first * MS + 30 * 86_400 * NANOS_PER_SEC;
            let end = 31 * 86_400 * NANOS_PER_SEC;
            let mut times: Vec<u64> = offsets
                .drain(..)
                .map(|(at, ms)| [first * MS, expiry, end][at as usize] + ms * MS - MS * 1_500.min([first * MS, expiry, end][at as usize] / MS))
                .collect();
            times.sort_unstable();
            let admitted: Vec<u64> = times.into_iter().filter(|&t| limiter.decide(Nanos(t)).admitted()).collect();
            for interval in [Nanos(1), Nanos(3), Nanos::SECOND, secs(3), secs(86_400), secs(40 * 86_400)] {
                let (worst, bound) = (crate::limiter::worst_in(&admitted, interval), limiter.bound(interval));
                proptest::prop_assert!(worst <= bound, "{} > {} over {}", worst, bound, interval);
            }
        }
    }
}
