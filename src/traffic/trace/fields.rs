//! A row's fields as times and keys: nanoseconds, decimal seconds or
//! milliseconds, RFC 3339 date-times, and any text as a key.

use super::*;

use crate::error::FieldError;

/// The unit of the timestamps in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Unit {
    /// Integer nanoseconds.
    #[serde(rename = "ns")]
    Nanos,
    /// Decimal seconds, up to nine digits after the point.
    #[serde(rename = "s")]
    Seconds,
    /// Decimal milliseconds, up to six digits after the point.
    #[serde(rename = "ms")]
    Millis,
    /// RFC 3339 / ISO 8601 date-times with an offset.
    #[serde(rename = "rfc3339", alias = "iso8601")]
    DateTime,
}

/// What to do with whole-second timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    /// Each request at a uniformly drawn instant of its second.
    Uniform,
    /// Every request of a second at its start.
    None,
}

pub(super) fn invalid(text: &str, unit: Unit) -> String {
    if out_of_range(text, unit) {
        let smaller = match unit {
            Unit::Seconds => "; is it in a smaller unit than seconds?",
            Unit::Millis => "; is it in a smaller unit than milliseconds?",
            Unit::Nanos | Unit::DateTime => "",
        };
        return format!(
            "{:?} is outside the times burstsim holds: nanoseconds since 1970-01-01T00:00:00Z in 64 bits, up to {LAST_TIME}{smaller}",
            crate::input::quote_at_most(text, 64)
        );
    }
    let date_time = matches!(unit, Unit::DateTime);
    // nginx's $msec and many JSON logs write epoch seconds as a string.
    let hint = if date_time && parse_text(text, Unit::Seconds).is_some() {
        "; it is a number: set unit = \"s\" (or \"ms\") to read it as epoch seconds (milliseconds)"
    } else if date_time && logs::iso_time(&format!("{}Z", text.trim())).is_some() {
        "; it has no offset from UTC, and burstsim does not guess the zone it was written in: log it with one (Z for UTC)"
    } else {
        ""
    };
    format!(
        "{:?} is not {}{hint}",
        crate::input::quote_at_most(text, 64),
        unit.expected(),
    )
}

/// The last instant a time in nanoseconds holds (`u64::MAX` ns).
const LAST_TIME: &str = "2554-07-21T23:34:33.709551615Z";

/// Whether `text`, which [`parse_text`] refused in `unit`, is written as a
/// time in that unit but lies past [`LAST_TIME`] (or, a date-time, before
/// the epoch): a number too large, not a malformed one.
fn out_of_range(text: &str, unit: Unit) -> bool {
    let text = text.trim();
    match unit {
        Unit::Nanos => !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()),
        Unit::Seconds | Unit::Millis => crate::decimal::is_decimal(text),
        Unit::DateTime => logs::iso_out_of_range(text),
    }
}

/// A request's start: its logged `end`, written as `text` in `unit`, less
/// `elapsed`, its duration in decimal seconds as the `name` field holds it
/// (nginx's `$request_time`). An end written to the whole second is
/// refused: the start would be known only within that second.
pub(super) fn started(
    end: u64,
    (text, unit): (&str, Unit),
    elapsed: &str,
    name: &str,
) -> Result<u64, String> {
    let below_second = match unit {
        Unit::Nanos | Unit::Millis => true,
        Unit::Seconds | Unit::DateTime => text.contains('.'),
    };
    if !below_second {
        return Err(format!(
            "{:?} is a whole second, so a start {name} before it is known only to the second; log the time with its milliseconds (nginx's $msec)",
            crate::input::quote_at_most(text, 64)
        ));
    }
    let longer = || {
        format!(
            "{name}: {} s is longer than the time itself",
            crate::input::quote_at_most(elapsed.trim(), 64)
        )
    };
    let took = match parse_text(elapsed, Unit::Seconds) {
        Some(took) => took,
        // Too many seconds for nanoseconds in 64 bits: more than any end.
        None if crate::decimal::is_decimal(elapsed.trim()) => return Err(longer()),
        None => {
            return Err(format!(
                "{name}: {:?} is not {}",
                crate::input::quote_at_most(elapsed, 64),
                Unit::Seconds.expected()
            ));
        }
    };
    end.checked_sub(took).ok_or_else(longer)
}

impl Unit {
    /// What a field in this unit looks like, in words.
    pub(super) fn expected(self) -> &'static str {
        match self {
            Unit::Nanos => "a whole number of nanoseconds",
            Unit::Seconds => "a non-negative number of seconds",
            Unit::Millis => "a non-negative number of milliseconds",
            Unit::DateTime => "an RFC 3339 date-time with an offset, like 2026-11-30T12:00:00.250Z",
        }
    }
}

/// A time written in `unit`, in nanoseconds.
pub(super) fn parse_text(text: &str, unit: Unit) -> Option<u64> {
    let text = text.trim();
    match unit {
        Unit::Nanos => parse_nanos(text.as_bytes()),
        Unit::Seconds => crate::decimal::scaled(text, NANOS_PER_SEC, 9),
        Unit::Millis => crate::decimal::scaled(text, 1_000_000, 6),
        Unit::DateTime => logs::iso_time(text),
    }
}

/// The line a CSV record starts on, when its file ends its lines with
/// `crlf` or not: the csv crate counts a line at its `\n`, and leaves a
/// CRLF's `\n` to the next record, which it then places a line early
/// (BurntSushi/rust-csv#395).
pub(super) fn record_line(record: &csv::ByteRecord, crlf: bool) -> u64 {
    record
        .position()
        .map_or(0, |at| at.line() + u64::from(crlf && at.line() > 0))
}

/// The key named in column `column`, any text (an empty field is a key too).
pub(super) fn parse_key(
    record: &csv::ByteRecord,
    column: usize,
    path: &Path,
    line: impl Fn() -> u64,
) -> Result<Key, FieldError> {
    record
        .get(column)
        .map(|field| Key::named(field.trim_ascii()))
        .ok_or_else(|| {
            let line = line();
            FieldError::new(format!(
                "{}:{line}: the row has no key column {}",
                path.display(),
                column + 1
            ))
        })
}

/// The time in column `column`, whose header `name` gives when it is
/// wrong.
pub(super) fn parse(
    record: &csv::ByteRecord,
    (column, name): (usize, impl FnOnce() -> String),
    unit: Unit,
    path: &Path,
    line: impl Fn() -> u64,
) -> Result<u64, FieldError> {
    let field = record.get(column);
    let parsed = field.and_then(|field| match unit {
        Unit::Nanos => parse_nanos(field),
        _ => std::str::from_utf8(field)
            .ok()
            .and_then(|text| parse_text(text, unit)),
    });
    parsed.ok_or_else(|| {
        let line = line();
        let Some(field) = field else {
            return FieldError::new(format!(
                "{}:{line}: the row has no column {}",
                path.display(),
                column + 1
            ));
        };
        FieldError::new(format!(
            "{}:{line}: {} (column {}): {}",
            path.display(),
            name(),
            column + 1,
            invalid(&String::from_utf8_lossy(field), unit)
        ))
    })
}

/// Whole nanoseconds from ASCII digits (spaces around them allowed), without
/// going through `str`: the hot path of replaying a trace.
#[inline]
pub(super) fn parse_nanos(field: &[u8]) -> Option<u64> {
    let digits = field.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &byte| {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// Decimal seconds to nanoseconds without floats; digits past the ninth are dropped.
#[cfg(test)]
pub(super) fn parse_seconds(text: &str) -> Option<u64> {
    crate::decimal::scaled(text, NANOS_PER_SEC, 9)
}
