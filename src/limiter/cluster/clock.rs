//! Clocks that disagree: each instance's and the store's reading of true
//! time, with a fixed offset, a drift and NTP steps.

use serde::{Deserialize, Deserializer};

use crate::error::field_error;
use crate::time::Nanos;

/// A signed duration with a unit, like `"-500ms"` or `"+150ms"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offset(pub i64);

impl<'de> Deserialize<'de> for Offset {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let (sign, rest) = match text.trim().strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, text.trim().trim_start_matches('+')),
        };
        let magnitude = Nanos::parse(rest).map_err(serde::de::Error::custom)?;
        i64::try_from(magnitude.get())
            .map(|ns| Offset(sign * ns))
            .map_err(|_| serde::de::Error::custom(format!("offset {text:?} is too large")))
    }
}

/// A clock correction at true time `at`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// When it happens, in true time.
    pub at: Nanos,
    /// How far the clock jumps (`"-500ms"` steps it back).
    pub by: Offset,
    /// `"store"`, or an instance number from 0.
    pub on: Target,
}

/// Whose clock a step corrects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The store's.
    Store,
    /// Instance number n (from 0).
    Instance(usize),
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Index(usize),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Name(name) if name == "store" => Ok(Target::Store),
            Raw::Name(name) => Err(serde::de::Error::custom(field_error!(
                "on",
                "expected \"store\" or an instance number, got {name:?}"
            ))),
            Raw::Index(index) => Ok(Target::Instance(index)),
        }
    }
}

/// A clock: offset, drift and steps, as a function of true time.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Its offset from true time at t = 0.
    pub offset: i64,
    /// How fast it runs, in parts per million above true time.
    pub drift_ppm: i64,
    /// Steps: (true time, jump).
    pub steps: Vec<(u64, i64)>,
}

impl Clock {
    /// Its reading at true time `now`, clamped to the representable range.
    pub fn read(&self, now: u64) -> u64 {
        let stepped: i64 = self
            .steps
            .iter()
            .filter(|(at, _)| *at <= now)
            .map(|(_, by)| *by)
            .sum();
        (i128::from(now) + i128::from(self.offset) + self.drift(now) + i128::from(stepped))
            .clamp(0, i128::from(u64::MAX)) as u64
    }

    /// How far it has drifted by true time `now`: `now · drift_ppm / 10^6`,
    /// rounded toward zero, without a 128-bit division (a fifth of a
    /// cluster's decisions): with `now = q·10^6 + r`, `q·ppm` is exact and
    /// `r·ppm` has the same sign, so the quotient splits between them.
    #[inline]
    fn drift(&self, now: u64) -> i128 {
        const MILLION: u64 = 1_000_000;
        let (whole, rest) = (now / MILLION, now % MILLION);
        // Within 64 bits for any drift a scenario may give (±10^6 ppm).
        let part = match (rest as i64).checked_mul(self.drift_ppm) {
            Some(product) => i128::from(product / MILLION as i64),
            None => i128::from(rest) * i128::from(self.drift_ppm) / i128::from(MILLION),
        };
        i128::from(whole) * i128::from(self.drift_ppm) + part
    }

    /// When it steps, in true time.
    pub fn step_times(&self) -> Vec<Nanos> {
        self.steps.iter().map(|&(at, _)| Nanos(at)).collect()
    }

    /// The most it can lag behind and run ahead of true time over `duration`.
    pub fn extremes(&self, duration: u64) -> (i128, i128) {
        let drift = i128::from(duration) * i128::from(self.drift_ppm) / 1_000_000;
        let forward: i128 = self
            .steps
            .iter()
            .map(|(_, by)| i128::from((*by).max(0)))
            .sum();
        let backward: i128 = self
            .steps
            .iter()
            .map(|(_, by)| i128::from((*by).min(0)))
            .sum();
        let offset = i128::from(self.offset);
        (
            offset + drift.min(0) + backward,
            offset + drift.max(0) + forward,
        )
    }

    /// The longest stretch of this clock that an interval of `interval` true
    /// nanoseconds can cover over a run of `duration`: the interval, its
    /// drift, and the spread between the clock's extremes.
    pub fn stretch(&self, interval: u64, duration: u64) -> u64 {
        let l = i128::from(interval);
        let (low, high) = self.extremes(duration);
        let drift = l * i128::from(self.drift_ppm.max(0)) / 1_000_000;
        u64::try_from(l + drift + (high - low).max(0)).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The drift as a 128-bit product and quotient: what `Clock::drift` saves.
    fn drift_by_division(now: u64, ppm: i64) -> i128 {
        i128::from(now) * i128::from(ppm) / 1_000_000
    }

    #[test]
    fn drift_at_the_edges_is_the_quotient() {
        let nows = [0, 1, 999_999, 1_000_000, 1_000_001, u64::MAX - 1, u64::MAX];
        let ppms = [
            0,
            1,
            -1,
            999_999,
            -999_999,
            1_000_000,
            -1_000_000,
            i64::MAX,
            i64::MIN,
        ];
        for now in nows {
            for drift_ppm in ppms {
                let clock = Clock {
                    drift_ppm,
                    ..Clock::default()
                };
                assert_eq!(
                    clock.drift(now),
                    drift_by_division(now, drift_ppm),
                    "{now} ns at {drift_ppm} ppm"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn drift_is_the_quotient(now in any::<u64>(), drift_ppm in -1_000_000i64..=1_000_000) {
            let clock = Clock { drift_ppm, ..Clock::default() };
            prop_assert_eq!(clock.drift(now), drift_by_division(now, drift_ppm));
        }
    }
}
