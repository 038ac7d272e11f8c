//! Kong's UTC calendar: the run's start as an instant, and each period's
//! windows (`kong/tools/timestamp.lua`'s `get_timestamps`): seconds to days on
//! the UTC grid, months from their 1st, years from 1 January, with Kong's
//! `EXPIRATION` for each (`expiration.lua`).

use std::fmt;

use serde::{Deserialize, Deserializer};
use time::format_description::well_known::Rfc3339;
use time::{Date, Month, OffsetDateTime};

/// The run's start as a UTC instant, in unix seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Start(pub i64);

/// The last instant whose year still has a successor the calendar code can
/// name: 9999-01-01T00:00:00Z.
pub(super) const LAST_UNIX: i64 = 253_370_764_800;

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
    pub(super) fn fixed_length(self) -> Option<i64> {
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
    pub(super) fn shortest(self) -> i64 {
        match self {
            Period::Month => 28 * SECONDS_PER_DAY,
            Period::Year => 365 * SECONDS_PER_DAY,
            fixed => fixed.fixed_length().unwrap_or(1),
        }
    }

    /// The calendar window `[start, end)` holding the unix second `unix`
    /// (`timestamp.get_timestamps`), for `unix` in 1970…9998.
    pub(super) fn window(self, unix: i64) -> (i64, i64) {
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

