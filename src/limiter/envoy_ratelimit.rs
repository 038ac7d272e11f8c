//! The envoyproxy/ratelimit service (upstream: `src/utils/utilities.go`,
//! `UnitToDivider` and `CalculateReset`; `src/redis/fixed_cache_impl.go`):
//! one counter per descriptor and window, the window the unix time in whole
//! seconds divided by the unit's divider — second 1, minute 60, hour 3600,
//! day 86400, week 604800, month 30 days, year 365 days — so windows are
//! aligned to the epoch, not to the calendar. The counter is `INCRBY`'d for
//! every request, over-limit ones included, and a request is over the limit
//! when the count after its increment exceeds `requests_per_unit`. A
//! rejected client is told `RateLimit-Reset: divider − now % divider`
//! seconds on the service's whole-second clock, relative to the response:
//! a client comes back that many seconds after it was rejected, at the next
//! window's start plus the fraction of a second it was rejected at.
//!
//! The run's start is taken to be a window edge of the unit (`anchor`
//! shifts it). This is a fixed window in every respect; its own kind says
//! which real service it is and takes the service's own fields.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::fixed_window::FixedWindow;
use super::{Align, Context, Kind};
use crate::error::FieldError;
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "envoy-ratelimit"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The descriptor's limit per unit.
    pub requests_per_unit: NonZeroU64,
    /// `second`, `minute`, `hour`, `day`, `week`, `month` (30 days) or `year` (365 days).
    pub unit: Unit,
    /// Where in the run a window starts (default: at the run's start).
    #[serde(default)]
    pub anchor: Nanos,
    /// Over-limit requests increment the counter too (default true, as the
    /// service does); in one window this changes no decision.
    #[serde(default = "yes")]
    pub count_rejected: bool,
}

fn yes() -> bool {
    true
}

/// The service's `RateLimitResponse.RateLimit.Unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// 1 s.
    Second,
    /// 60 s.
    Minute,
    /// 3600 s.
    Hour,
    /// 86400 s.
    Day,
    /// 7 days.
    Week,
    /// 30 days, as the service's divider has it (not the calendar month).
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// `UnitToDivider`, in seconds.
    pub fn divider(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 60 * 60,
            Unit::Day => 60 * 60 * 24,
            Unit::Week => 60 * 60 * 24 * 7,
            Unit::Month => 60 * 60 * 24 * 30,
            Unit::Year => 60 * 60 * 24 * 365,
        }
    }
}

impl Kind for Config {
    const NAME: &'static str = "envoy-ratelimit";
    type State = FixedWindow;

    fn build(&self, _: Context) -> Result<FixedWindow, FieldError> {
        let window = Nanos(self.unit.divider() * NANOS_PER_SEC);
        let align = if self.anchor == Nanos::ZERO {
            Align::Epoch
        } else {
            Align::Anchor(self.anchor)
        };
        Ok(FixedWindow::new(window, self.requests_per_unit.get(), align)?
            .counting_rejected(self.count_rejected)
            .hinting_whole_seconds())
    }

    super::parameter_is!(requests_per_unit);

    /// The unit is at least a second: the property tests' microsecond
    /// traffic meets windows edges only through the anchor.
    fn example(choice: u64) -> String {
        format!(
            "requests_per_unit = {}\nunit = \"second\"\nanchor = \"{}ns\"\ncount_rejected = {}",
            choice % 29 + 1,
            999_999_000 + choice / 29 % 2_000,
            choice / 58_000 % 2 == 1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::{Decision, RateLimiter};

    fn service(limit: u64, unit: &str) -> FixedWindow {
        let config: Config =
            toml::from_str(&format!("requests_per_unit = {limit}\nunit = \"{unit}\"")).unwrap();
        config.build(Context::default()).unwrap()
    }

    #[test]
    fn dividers_are_the_services() {
        let days = |unit: &str| service(1, unit).window().get() / (86_400 * NANOS_PER_SEC);
        assert_eq!(days("week"), 7);
        assert_eq!(days("month"), 30);
        assert_eq!(days("year"), 365);
        assert_eq!(service(1, "minute").window(), Nanos(60 * NANOS_PER_SEC));
    }

    #[test]
    fn epoch_minutes_let_twice_the_limit_through_across_an_edge() {
        let mut limiter = service(100, "minute");
        let at = |s: u64| Nanos(s * NANOS_PER_SEC);
        let before = (0..150).filter(|_| limiter.decide(at(59)).admitted()).count();
        let after = (0..150).filter(|_| limiter.decide(at(60)).admitted()).count();
        assert_eq!((before, after), (100, 100));
        assert_eq!(limiter.bound(Nanos::SECOND), 200);
    }

    #[test]
    fn the_reset_is_divider_minus_now_mod_divider() {
        let mut limiter = service(1, "hour");
        assert!(limiter.decide(Nanos(10 * NANOS_PER_SEC)).admitted());
        // At 1000 s: 3600 − 1000 % 3600 = 2600 s later, at 3600 s.
        match limiter.decide(Nanos(1_000 * NANOS_PER_SEC)) {
            Decision::Reject(hint) => {
                assert_eq!(hint.reset_at, Some(Nanos(3_600 * NANOS_PER_SEC)));
            }
            other => panic!("{other:?}"),
        }
        // At 1000.45 s the header still says 2600: relative to the
        // response, so the client returns at 3600.45 s.
        match limiter.decide(Nanos(1_000 * NANOS_PER_SEC + 450_000_000)) {
            Decision::Reject(hint) => {
                assert_eq!(
                    hint.retry_at,
                    Some(Nanos(3_600 * NANOS_PER_SEC + 450_000_000))
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(limiter.counts_rejected());
    }
}
