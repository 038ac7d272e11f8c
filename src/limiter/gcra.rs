//! GCRA, the generic cell rate algorithm, with the exact arithmetic of the
//! `governor` crate: emission interval T, tolerance τ = (burst − 1)·T, and a
//! theoretical arrival time (TAT) per limiter.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::decimal::Decimal;
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "gcra"`: either `quota` or `rate` (with `burst`, default 1).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// governor's constructors: `"per_second(10)"`, `"per_minute(600)"`,
    /// `"per_hour(N)"` or `"with_period(100ms)"`, optionally followed by
    /// `".allow_burst(N)"`.
    pub quota: Option<String>,
    /// Cells per second; T = ⌊10⁹ / rate⌋ ns.
    pub rate: Option<Decimal>,
    /// The most cells at once (with `rate`; default 1).
    pub burst: Option<NonZeroU64>,
}

impl Kind for Config {
    const NAME: &'static str = "gcra";
    type State = Gcra;

    /// A limiter with no cell seen yet.
    fn build(&self, _: Context) -> Result<Gcra, FieldError> {
        let (t, burst) = self.quota()?;
        let tau = t
            .checked_mul(burst - 1)
            .ok_or_else(|| FieldError::at("burst", "too large for its interval"))?;
        Ok(Gcra {
            t,
            tau,
            burst,
            tat: None,
            previous: None,
        })
    }

    /// The sizing parameter: the burst.
    fn parameter(&self, _: Context) -> (&'static str, u64) {
        ("burst", self.quota().map_or(1, |(_, burst)| burst))
    }

    /// The same rate with burst `value`.
    fn with_parameter(&self, value: u64) -> Config {
        let (t, _) = self.quota().unwrap_or((NANOS_PER_SEC, 1));
        let burst = NonZeroU64::new(value).unwrap_or(NonZeroU64::MIN);
        Config {
            quota: Some(format!("with_period({t}ns).allow_burst({burst})")),
            rate: None,
            burst: None,
        }
    }

    /// Sized with the burst: cells per second, when the interval divides a
    /// second exactly (as `per_second(N)` makes it).
    fn companion(&self, _: Context) -> Option<super::Companion> {
        let (t, _) = self.quota().ok()?;
        if !NANOS_PER_SEC.is_multiple_of(t) {
            return None;
        }
        super::count_companion("per_second", NANOS_PER_SEC / t)
    }

    /// The same burst at `value` cells per second (governor's `per_second`).
    fn with_companion(&self, value: u64) -> Config {
        let (_, burst) = self.quota().unwrap_or((NANOS_PER_SEC, 1));
        Config {
            quota: Some(format!(
                "with_period({}ns).allow_burst({burst})",
                NANOS_PER_SEC / value.clamp(1, NANOS_PER_SEC)
            )),
            rate: None,
            burst: None,
        }
    }

    fn example(choice: u64) -> String {
        format!(
            "quota = \"with_period({}ns).allow_burst({})\"",
            choice % 1_999 + 1,
            choice / 1_999 % 19 + 1
        )
    }
}

impl Config {
    /// The emission interval T (ns) and the burst, as governor computes them.
    pub fn quota(&self) -> Result<(u64, u64), FieldError> {
        match (&self.quota, &self.rate) {
            (Some(_), Some(_)) => Err(field_error!("quota", "give either `quota` or `rate`, not both")),
            (None, None) => {
                Err(field_error!("quota", "missing; give `quota = \"per_second(N)\"` or `rate` and `burst`"))
            }
            (None, Some(rate)) => {
                if rate.is_zero() {
                    return Err(field_error!("rate", "must be above 0 per second"));
                }
                let t = u128::from(NANOS_PER_SEC) * u128::from(rate.denominator())
                    / u128::from(rate.numerator());
                Ok((
                    u64::try_from(t).unwrap_or(u64::MAX).max(1),
                    self.burst.map_or(1, NonZeroU64::get),
                ))
            }
            (Some(quota), None) => {
                if self.burst.is_some() {
                    return Err(
                        field_error!("burst", "with `quota`, write `.allow_burst(N)` in the quota instead"),
                    );
                }
                parse_quota(quota).map_err(|err| err.within("quota"))
            }
        }
    }
}

/// Parses governor's constructor syntax into (T in ns, burst).
fn parse_quota(text: &str) -> Result<(u64, u64), FieldError> {
    let invalid = || {
        format!(
            "{text:?} is not a quota; expected per_second(N), per_minute(N), per_hour(N) or with_period(DURATION), optionally .allow_burst(N)"
        )
    };
    let call = |part: &str, name: &str| -> Option<String> {
        part.strip_prefix(name)?
            .strip_prefix('(')?
            .strip_suffix(')')
            .map(|arg| arg.trim().to_string())
    };
    let (base, burst) = match text.trim().split_once(".allow_burst") {
        Some((base, burst)) => (
            base.trim(),
            Some(call(&format!("allow_burst{burst}"), "allow_burst").ok_or_else(invalid)?),
        ),
        None => (text.trim(), None),
    };
    let count = |arg: String| {
        arg.parse::<u64>()
            .ok()
            .filter(|&n| n > 0 && n <= u64::from(u32::MAX))
            .ok_or_else(invalid)
    };
    let (t, default_burst) = if let Some(arg) = call(base, "per_second") {
        let n = count(arg)?;
        (NANOS_PER_SEC / n, n)
    } else if let Some(arg) = call(base, "per_minute") {
        let n = count(arg)?;
        (60 * NANOS_PER_SEC / n, n)
    } else if let Some(arg) = call(base, "per_hour") {
        let n = count(arg)?;
        (3_600 * NANOS_PER_SEC / n, n)
    } else if let Some(arg) = call(base, "with_period") {
        let period = Nanos::parse(&arg)?;
        if period == Nanos::ZERO {
            return Err("with_period needs a period longer than 0".into());
        }
        (period.get(), 1)
    } else {
        return Err(invalid().into());
    };
    let burst = burst.map(count).transpose()?.unwrap_or(default_burst);
    Ok((t.max(1), burst))
}

/// governor's GCRA: a cell at `t` conforms iff `t ≥ TAT − τ` (saturating at
/// 0); a conforming cell moves TAT to `max(TAT, t) + T`. Before the first cell
/// TAT is the cell's own time. A cell exactly at `TAT − τ` conforms.
#[derive(Clone, Debug)]
pub struct Gcra {
    t: u64,
    tau: u64,
    burst: u64,
    tat: Option<u64>,
    /// TAT before the last conforming cell, to take it back.
    previous: Option<u64>,
}

impl RateLimiter for Gcra {
    /// Rejects with `Retry-After` at TAT − τ, governor's `NotUntil::earliest_possible`,
    /// and the reset at TAT, when the whole burst is available again.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now = now.get();
        let tat = self.tat.unwrap_or(now);
        if now < tat.saturating_sub(self.tau) {
            return Decision::reject::<HINTS>(|| Hint::new(tat - self.tau, tat));
        }
        self.previous = self.tat;
        self.tat = Some(tat.max(now).saturating_add(self.t));
        Decision::Admit
    }

    fn refund(&mut self, _now: Nanos) {
        self.tat = self.previous;
    }

    /// A conforming cell at t leaves TAT ≤ t + τ + T: past u64::MAX − τ − T
    /// it would saturate, and every later cell within τ would conform.
    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX.saturating_sub(self.tau).saturating_sub(self.t))
    }

    /// burst + ⌊(L − 1 ns)/T⌋: n cells conform within a span of L − 1 ns only
    /// if (n − 1)·T − τ ≤ L − 1; a burst at the start, then one every T, reaches it.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        ((interval.get() - 1) / self.t).saturating_add(self.burst)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        interval.get() as f64 / self.t as f64
    }

    /// A Redis string holding the TAT, with its expiry: 138 B per key (measured).
    fn state_bytes(&self) -> Option<u64> {
        Some(138)
    }

    /// One script (or redis-cell's `CL.THROTTLE`) per request.
    fn store_ops(&self) -> Option<StoreOps> {
        Some(StoreOps {
            per_request: 1,
            per_reset: 0,
        })
    }

    fn describe(&self) -> String {
        format!("one per {}, burst {}", Nanos(self.t), self.burst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gcra(quota: &str) -> Gcra {
        Config {
            quota: Some(quota.into()),
            rate: None,
            burst: None,
        }
        .build(Context::default())
        .unwrap()
    }

    #[test]
    fn reads_governor_quotas() {
        assert_eq!(parse_quota("per_second(10)"), Ok((100_000_000, 10)));
        assert_eq!(
            parse_quota("per_minute(600).allow_burst(5)"),
            Ok((100_000_000, 5))
        );
        assert_eq!(
            parse_quota("per_second(3)"),
            Ok((333_333_333, 3)),
            "T rounds down as in governor"
        );
        assert_eq!(parse_quota("with_period(250ms)"), Ok((250_000_000, 1)));
        assert!(parse_quota("per_fortnight(2)").is_err());
        assert!(parse_quota("per_second(0)").is_err());
    }

    #[test]
    fn admits_the_burst_at_once_then_one_per_interval() {
        let mut limiter = gcra("per_second(10)");
        assert_eq!(
            (0..11)
                .filter(|_| limiter.decide(Nanos(0)).admitted())
                .count(),
            10
        );
        assert!(!limiter.decide(Nanos(99_999_999)).admitted());
        assert!(
            limiter.decide(Nanos(100_000_000)).admitted(),
            "exactly at TAT − τ conforms"
        );
    }

    #[test]
    fn its_bound_is_burst_plus_the_intervals_that_fit() {
        assert_eq!(gcra("per_second(10)").bound(Nanos::SECOND), 10 + 9);
    }
}
