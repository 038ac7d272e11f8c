//! The buffered threshold: a fixed window set to a fraction ρ of what the
//! backend takes per window, the "70% rule". Its worst case is still 2·⌊ρ·capacity⌋.
//! It runs as a fixed window, so it answers as one: a rejection is told the
//! end of the current window, for both `Retry-After` and the reset.

use serde::Deserialize;

use super::fixed_window::FixedWindow;
use super::{Align, Context, Kind};
use crate::error::{FieldError, field_error};
use crate::decimal::Decimal;
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "buffered"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Window length W.
    pub window: Nanos,
    /// ρ, the fraction of capacity used as the threshold (default 0.7).
    pub ratio: Option<Decimal>,
    /// Requests the backend takes per window (default: backend capacity × W).
    pub capacity: Option<u64>,
    /// Where windows start.
    #[serde(default)]
    pub align: Align,
}

/// The common rule of thumb.
const DEFAULT_RATIO: Decimal = Decimal::new(7, 1);

impl Kind for Config {
    const NAME: &'static str = "buffered";
    type State = FixedWindow;

    /// The sizing parameter: the effective threshold ⌊ratio · capacity⌋.
    fn parameter(&self, context: Context) -> (&'static str, u64) {
        (
            "threshold",
            self.build(context).map_or(0, |limiter| limiter.threshold()),
        )
    }

    /// The same limiter with threshold `value`: ratio 1 of a capacity of `value`.
    fn with_parameter(&self, value: u64) -> Config {
        Config {
            ratio: Some(Decimal::whole(1)),
            capacity: Some(value),
            ..self.clone()
        }
    }

    /// A fixed window with threshold ⌊ρ · capacity⌋, computed exactly — with
    /// the default capacity, ⌊ρ · capacity_per_sec · W⌋ in one step, never
    /// flooring the capacity per window first (3/s over 1.5 s is 4.5, and
    /// ⌊0.7 × 4.5⌋ is 3).
    fn build(&self, context: Context) -> Result<FixedWindow, FieldError> {
        let ratio = self.ratio.unwrap_or(DEFAULT_RATIO);
        let too_large = || field_error!("capacity", "too large");
        let (threshold, capacity) = match (self.capacity, context.backend_capacity_per_sec) {
            (Some(capacity), _) => (ratio.floor_mul(capacity), capacity.to_string()),
            (None, Some(per_sec)) => {
                let numerator = u128::from(ratio.numerator())
                    .checked_mul(u128::from(per_sec))
                    .and_then(|n| n.checked_mul(u128::from(self.window.get())))
                    .ok_or_else(too_large)?;
                let denominator = u128::from(ratio.denominator()) * u128::from(NANOS_PER_SEC);
                (
                    numerator / denominator,
                    format!("{per_sec}/s × {}", self.window),
                )
            }
            (None, None) => {
                return Err(field_error!("capacity", "missing; give `capacity` (requests per window) or a [backend] capacity"));
            }
        };
        let threshold = u64::try_from(threshold).map_err(|_| too_large())?;
        if threshold == 0 {
            return Err(field_error!("ratio", "{ratio} × capacity {capacity} per window leaves a threshold of 0"
            ));
        }
        FixedWindow::new(self.window, threshold, self.align)
    }

    fn example(choice: u64) -> String {
        format!(
            "window = \"1us\"\nratio = 0.{}\ncapacity = {}",
            choice % 9 + 1,
            choice / 9 % 40 + 10
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::RateLimiter;

    fn config(ratio: Option<Decimal>, capacity: Option<u64>) -> Config {
        Config {
            window: Nanos::SECOND,
            ratio,
            capacity,
            align: Align::Epoch,
        }
    }

    #[test]
    fn seventy_percent_of_a_150_per_second_backend_is_105_and_still_lets_210_through() {
        let context = Context {
            backend_capacity_per_sec: Some(150),
        };
        let limiter = config(None, None).build(context).unwrap();
        assert_eq!(limiter.threshold(), 105);
        assert_eq!(limiter.bound(Nanos::SECOND), 210);
    }

    #[test]
    fn an_explicit_capacity_wins_over_the_backend() {
        let context = Context {
            backend_capacity_per_sec: Some(150),
        };
        let limiter = config(Some(Decimal::whole(1)), Some(40))
            .build(context)
            .unwrap();
        assert_eq!(limiter.threshold(), 40);
    }

    #[test]
    fn needs_a_capacity_from_somewhere() {
        let err = config(None, None).build(Context::default()).unwrap_err();
        assert!(err.to_string().contains("capacity"), "{err}");
    }
}
