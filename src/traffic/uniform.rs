//! Evenly spaced arrivals, optionally jittered within their slots.

use rand::RngExt;
use serde::Deserialize;

use super::{Kind, Place, Rng};
use crate::decimal::Decimal;
use crate::error::{FieldError, field_error};
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "uniform"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Arrivals per second.
    pub rate: Decimal,
    /// Each arrival moves uniformly within ±jitter/2 of its slot (0 to 1; default 0).
    #[serde(default)]
    pub jitter: f64,
}

impl Config {
    /// Checks the rate and the jitter.
    fn check(&self) -> Result<(), FieldError> {
        if self.rate.is_zero() {
            return Err(field_error!("rate", "must be above 0 per second"));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(field_error!(
                "jitter",
                "must be between 0 and 1 (got {})",
                self.jitter
            ));
        }
        Ok(())
    }

    /// Arrival i at `start + i/rate`, moved by its jitter.
    pub fn stream(&self, start: Nanos, end: Nanos, rng: Rng) -> Arrivals {
        Arrivals {
            rate: self.rate,
            jitter: self.jitter,
            start: start.get(),
            end: end.get(),
            index: 0,
            rng,
        }
    }
}

impl Kind for Config {
    const NAME: &'static str = "uniform";
    type Item = Nanos;
    type Arrivals = Arrivals;

    fn validate(&self, _: Place) -> Result<Vec<String>, FieldError> {
        self.check().map(|()| Vec::new())
    }

    fn is_stochastic(&self) -> bool {
        self.jitter > 0.0
    }

    fn describe(&self) -> String {
        format!("uniform {}/s", self.rate)
    }

    fn estimated_arrivals(&self, place: Place) -> Result<u128, FieldError> {
        Ok(super::at_rate(place, &self.rate))
    }

    fn arrivals(&self, place: Place, rng: Rng, _: Rng) -> Result<Arrivals, FieldError> {
        Ok(self.stream(place.start, place.end, rng))
    }
}

/// The running source.
pub struct Arrivals {
    rate: Decimal,
    jitter: f64,
    start: u64,
    end: u64,
    index: u64,
    rng: Rng,
}

impl Iterator for Arrivals {
    type Item = Nanos;

    fn next(&mut self) -> Option<Nanos> {
        loop {
            // Slot i starts at i·10⁹·den/num ns, in integers so slots never drift.
            let offset = u128::from(self.index)
                * u128::from(NANOS_PER_SEC)
                * u128::from(self.rate.denominator())
                / u128::from(self.rate.numerator());
            let slot = u64::try_from(offset).ok()?.checked_add(self.start)?;
            if slot >= self.end {
                return None;
            }
            self.index += 1;
            if self.jitter == 0.0 {
                return Some(Nanos(slot));
            }
            let period = NANOS_PER_SEC as f64 / self.rate.as_f64();
            let shift = (self.rng.random::<f64>() - 0.5) * self.jitter * period;
            let time = (slot as f64 + shift).round() as u64;
            // A jittered arrival pushed outside the source's span is dropped.
            if (self.start..self.end).contains(&time) {
                return Some(Nanos(time));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn times(rate: Decimal, jitter: f64, end: u64) -> Vec<u64> {
        let config = Config { rate, jitter };
        config
            .stream(Nanos(0), Nanos(end), Rng::seed_from_u64(1))
            .map(Nanos::get)
            .collect()
    }

    #[test]
    fn spaces_arrivals_exactly_one_period_apart() {
        assert_eq!(
            times(Decimal::whole(4), 0.0, NANOS_PER_SEC),
            [0, 250_000_000, 500_000_000, 750_000_000]
        );
    }

    #[test]
    fn jittered_arrivals_stay_sorted_and_near_their_slots() {
        let list = times(Decimal::whole(1000), 1.0, NANOS_PER_SEC);
        assert!(list.is_sorted());
        for (i, &t) in list.iter().enumerate().skip(1).take(990) {
            let slot = i as i64 * 1_000_000;
            assert!(
                (t as i64 - slot).abs() <= 500_000 + 1_000_000,
                "{t} far from {slot}"
            );
        }
    }
}
