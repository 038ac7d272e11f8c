//! Time as one type: integer nanoseconds since the scenario's start, and the
//! only place where `"250ms"`-style strings are parsed and printed.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::FieldError;

/// Nanoseconds per second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A point in time or a duration, in integer nanoseconds.
///
/// Every admit/reject decision and every interval comparison is made on this
/// type, never on floats, so results are exact and the same on every machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero nanoseconds.
    pub const ZERO: Nanos = Nanos(0);
    /// One second.
    pub const SECOND: Nanos = Nanos(NANOS_PER_SEC);

    /// The raw count of nanoseconds.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Seconds as a float, for reports and charts only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }

    /// Parses a duration with a unit: `"1s"`, `"100ms"`, `"250us"`, `"5m"`,
    /// `"1m 30s"`. A bare number is refused: the unit is never guessed.
    pub fn parse(text: &str) -> Result<Nanos, FieldError> {
        let duration = humantime::parse_duration(text.trim()).map_err(|err| {
            format!("invalid duration {text:?} ({err}); expected a number with a unit, like \"1s\", \"100ms\", \"250us\" or \"5m\"")
        })?;
        u64::try_from(duration.as_nanos()).map(Nanos).map_err(|_| {
            FieldError::new(format!(
                "duration {text:?} is too long (at most about 584 years)"
            ))
        })
    }
}

impl FromStr for Nanos {
    type Err = FieldError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Nanos::parse(text)
    }
}

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DurationVisitor)
    }
}

/// Reads a duration string, and answers a bare number with the fix.
struct DurationVisitor;

impl DurationVisitor {
    fn bare<E: serde::de::Error>(number: impl fmt::Display) -> E {
        E::custom(format!(
            "expected a duration such as \"{number}s\" or \"{number}ms\", got the bare number {number}: give it a unit, in quotes"
        ))
    }
}

impl serde::de::Visitor<'_> for DurationVisitor {
    type Value = Nanos;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a duration such as \"1s\" or \"250ms\"")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Nanos, E> {
        Nanos::parse(text).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<Nanos, E> {
        Err(Self::bare(number))
    }

    fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<Nanos, E> {
        Err(Self::bare(number))
    }

    fn visit_f64<E: serde::de::Error>(self, number: f64) -> Result<Nanos, E> {
        Err(Self::bare(number))
    }
}

/// Prints the shortest exact form with a unit: `1s`, `100ms`, `1.5s`, `250us`, `7ns`.
/// Seconds with millisecond precision, for times inside a run in reports
/// and messages: `12.345s`.
pub fn seconds(ns: u64) -> String {
    format!("{:.3}s", ns as f64 / 1e9)
}

impl Nanos {
    /// As a scenario writes it, in the largest unit that holds it exactly
    /// (`1500ms`, not `1.5s`), so it reads back as the same nanoseconds:
    /// what import and sweeps write into scenario files.
    pub fn exact_text(self) -> String {
        const UNITS: [(u64, &str); 4] = [
            (NANOS_PER_SEC, "s"),
            (1_000_000, "ms"),
            (1_000, "us"),
            (1, "ns"),
        ];
        if self.0 == 0 {
            return "0s".into();
        }
        let (unit, name) = UNITS
            .iter()
            .find(|(unit, _)| self.0.is_multiple_of(*unit))
            .expect("1 ns divides everything");
        format!("{}{name}", self.0 / unit)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (NANOS_PER_SEC, "s"),
            (1_000_000, "ms"),
            (1_000, "us"),
            (1, "ns"),
        ];
        let ns = self.0;
        if ns == 0 {
            return f.pad("0s");
        }
        let text = UNITS
            .iter()
            .find(|(unit, _)| ns >= *unit)
            .map(|&(unit, name)| {
                let whole = ns / unit;
                let frac = ns % unit;
                if frac == 0 {
                    format!("{whole}{name}")
                } else {
                    let digits = unit.ilog10() as usize;
                    let frac = format!("{frac:0digits$}");
                    format!("{whole}.{}{name}", frac.trim_end_matches('0'))
                }
            })
            .unwrap_or_default();
        f.pad(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_documented_unit() {
        assert_eq!(Nanos::parse("1s"), Ok(Nanos(1_000_000_000)));
        assert_eq!(Nanos::parse("100ms"), Ok(Nanos(100_000_000)));
        assert_eq!(Nanos::parse("250us"), Ok(Nanos(250_000)));
        assert_eq!(Nanos::parse("5m"), Ok(Nanos(300_000_000_000)));
        assert_eq!(Nanos::parse("1m 30s"), Ok(Nanos(90_000_000_000)));
    }

    #[test]
    fn refuses_a_number_without_a_unit_and_negative_values() {
        assert!(Nanos::parse("100").is_err());
        assert!(Nanos::parse("-1s").is_err());
        assert!(Nanos::parse("").is_err());
    }

    #[test]
    fn refuses_durations_beyond_u64_nanoseconds() {
        let err = Nanos::parse("600years").unwrap_err();
        assert!(err.to_string().contains("too long"), "{err}");
    }

    #[test]
    fn prints_the_shortest_exact_form() {
        assert_eq!(Nanos(1_000_000_000).to_string(), "1s");
        assert_eq!(Nanos(1_500_000_000).to_string(), "1.5s");
        assert_eq!(Nanos(100_000_000).to_string(), "100ms");
        assert_eq!(Nanos(99_900_001).to_string(), "99.900001ms");
        assert_eq!(Nanos(7).to_string(), "7ns");
        assert_eq!(Nanos(0).to_string(), "0s");
    }

    #[test]
    fn printing_and_parsing_round_trip() {
        for ns in [1, 999, 1_000, 1_234_567, 60_000_000_000, 86_400_000_000_123] {
            let text = Nanos(ns).to_string();
            // humantime does not read fractions, so only whole units round-trip.
            if !text.contains('.') {
                assert_eq!(Nanos::parse(&text), Ok(Nanos(ns)), "{text}");
            }
        }
    }
}
