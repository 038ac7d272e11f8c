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

use std::num::NonZeroU64;

use serde::Deserialize;

mod calendar;

pub use self::calendar::{Period, Start};
use self::calendar::LAST_UNIX;

use super::fixed_window::{FixedWindow, windows_met};
use super::{Align, Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
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
    /// `config.hide_client_headers`: the 429 carries no Retry-After (nor
    /// any rate-limit header), so a client honouring hints has none
    /// (handler.lua sets Retry-After only `if not conf.hide_client_headers`).
    #[serde(default)]
    pub hide_client_headers: bool,
}

/// Why `sync_rate > 0` is refused, and how to model it instead.
pub fn sync_rate_advice(rate: i64) -> FieldError {
    field_error!("sync_rate", "{rate} batches counters between Kong nodes; model it as the scenario's [cluster] with mode = \"shared-instance-clock\" and sync_interval = \"{rate}s\" around a kong limiter with policy = \"cluster\" and one second, minute, hour or day limit"
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

    fn build(&self, _: Context) -> Result<Kong, FieldError> {
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
            return Err(field_error!("sync_rate", "{} is not one of Kong's: -1 (synchronous), 0 or a positive number of seconds",
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
            return Ok(Kong::Window(window, self.policy, self.hide_client_headers));
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
            hide_client_headers: self.hide_client_headers,
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
    /// One second, minute, hour or day limit; whether its 429 hides the
    /// client headers (`hide_client_headers`: no Retry-After).
    Window(FixedWindow, Policy, bool),
    /// Several limits, or a month or a year.
    Calendar(Calendar),
}

/// Kong's counters for several periods on the UTC calendar.
#[derive(Clone, Debug)]
pub struct Calendar {
    windows: Vec<Window>,
    /// `hide_client_headers`: a 429 without Retry-After.
    hide_client_headers: bool,
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
    /// A fixed-length period's window length and the run time of its first
    /// edge; `None` for a month or a year.
    fn edges(&self, period: Period) -> Option<(Nanos, Nanos)> {
        let length = period.fixed_length()?;
        let phase = (length - self.start.0.rem_euclid(length)) % length;
        Some((
            Nanos(length as u64 * NANOS_PER_SEC),
            Nanos(phase as u64 * NANOS_PER_SEC),
        ))
    }

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

    fn memory_at_most(&self, _keys: u64, _requests: u64, _hashed: bool) -> u128 {
        match self {
            Kong::Window(..) => 0,
            Kong::Calendar(calendar) => super::allocation::<Window>(calendar.windows.len() as u128),
        }
    }

    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let calendar = match self {
            Kong::Window(window, _, true) => return window.decide_with::<false>(now),
            Kong::Window(window, ..) => return window.decide_with::<HINTS>(now),
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
        let hint = (HINTS && !admit && !calendar.hide_client_headers).then(|| {
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
            Kong::Window(window, ..) => window.refund(now),
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
            Kong::Window(window, ..) => window.bound(interval),
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
            Kong::Window(window, ..) => return window.horizon(),
            Kong::Calendar(calendar) => calendar.start.0,
        };
        let seconds = (LAST_UNIX - start).max(0) as u64;
        Nanos(seconds.saturating_mul(NANOS_PER_SEC))
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        match self {
            Kong::Window(window, ..) => window.nominal(interval),
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
            Kong::Window(window, policy, _) => {
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
            Kong::Window(window, ..) => window.window_edges().into_iter().collect(),
            Kong::Calendar(calendar) => calendar
                .windows
                .iter()
                .filter_map(|w| calendar.edges(w.period))
                .collect(),
        }
    }

    /// The shortest period's edges, when every one of its windows is as long.
    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        match self {
            Kong::Window(window, ..) => window.window_edges(),
            Kong::Calendar(calendar) => calendar.edges(calendar.windows.first()?.period),
        }
    }

    fn store_ops(&self) -> Option<StoreOps> {
        match self {
            Kong::Window(window, Policy::Redis, _) => window.store_ops(),
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
            Kong::Window(window, ..) => window.resets(),
            Kong::Calendar(calendar) => calendar.resets,
        }
    }

    fn fixed_window(&self) -> Option<&FixedWindow> {
        match self {
            Kong::Window(window, ..) => Some(window),
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
mod tests;
