//! Exact decimal parameters (rates, ratios) read from TOML numbers, so that a
//! threshold like ⌊0.7 × 150⌋ is computed in integers, never in floats.

use std::fmt;

use serde::{Deserialize, Deserializer};

use crate::error::FieldError;

/// A decimal number (`"1.5"`) of units worth `scale` each (`"1.5"` seconds
/// at a scale of 10^9 is 1,500,000,000 ns), without floats: digits past the
/// `digits`-th after the point are dropped. `None` for anything but digits
/// around at most one point, or an overflow. Trace timestamps and import's
/// durations are read with it.
#[inline]
pub fn scaled(text: &str, scale: u64, digits: usize) -> Option<u64> {
    if !is_decimal(text) {
        return None;
    }
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let kept = &frac[..frac.len().min(digits)];
    let frac: u64 = if kept.is_empty() {
        0
    } else {
        kept.parse().ok()?
    };
    let frac = frac * 10u64.pow((digits - kept.len()) as u32);
    whole.checked_mul(scale)?.checked_add(frac)
}

/// Whether `text` is digits around at most one point, at least one digit:
/// what [`scaled`] reads, whether or not it overflows.
#[inline]
pub fn is_decimal(text: &str) -> bool {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    !(whole.is_empty() && frac.is_empty())
        && whole
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit())
}

/// As [`scaled`], but `None` rather than dropping digits past the
/// `digits`-th: for settings, which must mean exactly what they say.
pub fn scaled_exactly(text: &str, scale: u64, digits: usize) -> Option<u64> {
    let fraction = text.split_once('.').map_or("", |(_, f)| f);
    if fraction.len() > digits {
        return None;
    }
    scaled(text, scale, digits)
}

/// Most digits kept after the decimal point.
const MAX_SCALE: u32 = 9;

/// A non-negative decimal number, exactly `units / 10^scale`.
///
/// Invariant: `scale <= 9`, so `10^scale` fits any integer arithmetic used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal {
    units: u64,
    scale: u32,
}

impl Decimal {
    /// A whole number.
    pub const fn whole(value: u64) -> Decimal {
        Decimal {
            units: value,
            scale: 0,
        }
    }

    /// `units / 10^scale`; `scale` is at most 9.
    pub const fn new(units: u64, scale: u32) -> Decimal {
        assert!(scale <= MAX_SCALE, "Decimal scale above 9");
        Decimal { units, scale }
    }

    /// The numerator over [`Decimal::denominator`].
    pub const fn numerator(self) -> u64 {
        self.units
    }

    /// `10^scale`.
    pub const fn denominator(self) -> u64 {
        10u64.pow(self.scale)
    }

    /// True when the value is zero.
    pub const fn is_zero(self) -> bool {
        self.units == 0
    }

    /// ⌊self × value⌋, exactly.
    pub fn floor_mul(self, value: u64) -> u128 {
        u128::from(self.units) * u128::from(value) / u128::from(self.denominator())
    }

    /// The value as a float, for reports and for traffic generation only.
    pub fn as_f64(self) -> f64 {
        self.units as f64 / self.denominator() as f64
    }

    /// Parses the decimal text of a non-negative number, like `"0.7"` or `"150"`.
    pub fn parse(text: &str) -> Result<Decimal, FieldError> {
        let invalid = || format!("expected a non-negative number, got {text}");
        let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
        let frac = frac.trim_end_matches('0');
        if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid().into());
        }
        if !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid().into());
        }
        let scale = u32::try_from(frac.len()).unwrap_or(u32::MAX);
        if scale > MAX_SCALE {
            return Err(
                format!("{text} has more than {MAX_SCALE} digits after the decimal point").into(),
            );
        }
        let units = format!("{whole}{frac}")
            .parse::<u64>()
            .map_err(|_| format!("{text} is too large"))?;
        Ok(Decimal { units, scale })
    }

    fn from_f64(value: f64) -> Result<Decimal, FieldError> {
        if !value.is_finite() {
            return Err(format!("expected a finite number, got {value}").into());
        }
        // Display prints the shortest text that reads back as the same float:
        // 0.7 stays "0.7", not 0.6999999999999999555910790149937. Up to 15
        // significant digits that is exactly what was written; beyond, the
        // float may already have changed it, so it is not guessed.
        let text = value.to_string();
        let digits = text.trim_start_matches('-').replace('.', "");
        let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
        if significant > 15 {
            return Err(format!(
                "{text} has more significant digits than a TOML number keeps exactly (15); write it as a string, like \"{text}\", to have it exact"
            ).into());
        }
        Decimal::parse(&text)
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let den = self.denominator();
        let (whole, frac) = (self.units / den, self.units % den);
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let digits = self.scale as usize;
            let frac = format!("{frac:0digits$}");
            write!(f, "{whole}.{}", frac.trim_end_matches('0'))
        }
    }
}

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "a non-negative number, like 100 or 0.7")]
        enum Number {
            Int(i64),
            Float(f64),
            Text(String),
        }
        let parsed = match Number::deserialize(deserializer)? {
            Number::Text(text) => Decimal::parse(text.trim()),
            Number::Int(value) => u64::try_from(value).map(Decimal::whole).map_err(|_| {
                FieldError::new(format!("expected a non-negative number, got {value}"))
            }),
            Number::Float(value) => Decimal::from_f64(value),
        };
        parsed.map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_mul_is_exact_where_floats_are_not() {
        // In f64, 0.29 × 100 = 28.999999999999996, which floors to 28.
        let ratio = Decimal::from_f64(0.29).unwrap();
        assert_eq!(ratio.floor_mul(100), 29);
        assert_eq!(Decimal::from_f64(0.7).unwrap().floor_mul(150), 105);
    }

    #[test]
    fn parses_whole_and_fractional_numbers() {
        assert_eq!(Decimal::parse("150"), Ok(Decimal::whole(150)));
        assert_eq!(Decimal::parse("0.50"), Ok(Decimal { units: 5, scale: 1 }));
        assert_eq!(Decimal::parse("0.5").unwrap().to_string(), "0.5");
    }

    #[test]
    fn refuses_negative_infinite_and_overly_precise_numbers() {
        assert!(Decimal::parse("-1").is_err());
        assert!(Decimal::from_f64(f64::NAN).is_err());
        assert!(Decimal::from_f64(f64::INFINITY).is_err());
        assert!(Decimal::parse("0.0000000001").is_err());
    }
}
