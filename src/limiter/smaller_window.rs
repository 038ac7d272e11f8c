//! Smaller windows: a fixed window of W/k with ⌊N/k⌋ each, the common
//! mitigation that shrinks the boundary spike to (k + 1)·⌊N/k⌋.
//! It runs as a fixed window, so it answers as one: a rejection is told the
//! end of the current window, for both `Retry-After` and the reset.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::fixed_window::FixedWindow;
use super::{Align, Context, Kind};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// `kind = "smaller-window"`: the nominal limit N per W, enforced as k windows.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The nominal window W; each smaller window lasts W/k.
    pub window: Nanos,
    /// The nominal threshold N per W; each smaller window admits ⌊N/k⌋.
    pub threshold: NonZeroU64,
    /// k, the number of smaller windows per W.
    pub splits: NonZeroU64,
    /// Where windows start.
    #[serde(default)]
    pub align: Align,
}

impl Kind for Config {
    const NAME: &'static str = "smaller-window";
    type State = FixedWindow;

    /// The sizing parameter: the threshold of each smaller window, ⌊N/k⌋.
    fn parameter(&self, _: Context) -> (&'static str, u64) {
        ("per split", self.threshold.get() / self.splits.get())
    }

    /// The same limiter with `value` per smaller window (N = value · k).
    fn with_parameter(&self, value: u64) -> Config {
        let threshold = value.saturating_mul(self.splits.get());
        Config {
            threshold: NonZeroU64::new(threshold).unwrap_or(NonZeroU64::MIN),
            ..self.clone()
        }
    }

    /// The equivalent fixed window of W/k and ⌊N/k⌋ (its bound is (k + 1)·⌊N/k⌋ over W).
    fn build(&self, _: Context) -> Result<FixedWindow, FieldError> {
        let splits = self.splits.get();
        if !self.window.get().is_multiple_of(splits) {
            return Err(field_error!("window", "{} does not split evenly into {splits} windows; choose a window or splits that divide exactly",
                self.window
            ));
        }
        let threshold = self.threshold.get() / splits;
        if threshold == 0 {
            return Err(field_error!("threshold", "{} split {splits} ways leaves 0 per window; use at most {} splits",
                self.threshold, self.threshold
            ));
        }
        FixedWindow::new(Nanos(self.window.get() / splits), threshold, self.align)
    }

    fn example(choice: u64) -> String {
        format!(
            "window = \"1200ns\"\nthreshold = {}\nsplits = {}",
            (choice % 20 + 1) * 12,
            [1, 2, 3, 4, 6, 12][(choice / 20 % 6) as usize]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::RateLimiter;

    fn config(threshold: u64, splits: u64) -> Config {
        Config {
            window: Nanos::SECOND,
            threshold: NonZeroU64::new(threshold).unwrap(),
            splits: NonZeroU64::new(splits).unwrap(),
            align: Align::Epoch,
        }
    }

    #[test]
    fn ten_splits_of_a_hundred_per_second_are_ten_per_hundred_milliseconds() {
        let limiter = config(100, 10).build(Context::default()).unwrap();
        assert_eq!(limiter.window(), Nanos(100_000_000));
        assert_eq!(limiter.threshold(), 10);
        assert_eq!(limiter.bound(Nanos::SECOND), 110);
    }

    #[test]
    fn the_threshold_is_rounded_down() {
        assert_eq!(
            config(105, 10)
                .build(Context::default())
                .unwrap()
                .threshold(),
            10
        );
    }

    #[test]
    fn refuses_splits_that_leave_nothing_per_window() {
        assert!(
            config(5, 10)
                .build(Context::default())
                .unwrap_err()
                .to_string().contains("leaves 0")
        );
    }

    #[test]
    fn refuses_a_window_that_does_not_divide() {
        assert!(
            config(100, 7)
                .build(Context::default())
                .unwrap_err()
                .to_string().contains("split evenly")
        );
    }
}
