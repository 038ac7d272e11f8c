//! Client populations: a source's arrivals spread over `count` client keys,
//! uniformly or by Zipf's law, drawn from a stream of their own so that
//! adding clients to a source leaves its arrival times unchanged.

use rand::RngExt;
use serde::Deserialize;

use super::{Key, Rng};

use crate::error::{FieldError, field_error};

/// The most clients one population may have.
pub const MAX_CLIENTS: u64 = 10_000_000;

/// `clients = { count = K, weights = "uniform" | { zipf = s } }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clients {
    /// How many clients: keys 0 to K − 1, shared by every source of the
    /// workload that names clients (client 7 of one source is client 7 of
    /// another).
    pub count: std::num::NonZeroU64,
    /// How often each is picked (default uniform).
    #[serde(default)]
    pub weights: Weights,
}

/// How requests are spread over clients.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Weights {
    /// Every client equally often.
    #[default]
    Uniform,
    /// Client of rank k (key k − 1) in proportion to 1/k^s.
    Zipf(f64),
}

impl<'de> Deserialize<'de> for Weights {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "\"uniform\" or { zipf = 1.1 }")]
        enum Raw {
            Name(String),
            Zipf { zipf: f64 },
        }
        match Raw::deserialize(deserializer)? {
            Raw::Name(name) if name == "uniform" => Ok(Weights::Uniform),
            Raw::Name(name) => Err(serde::de::Error::custom(format!(
                "unknown weights {name:?}; expected \"uniform\" or {{ zipf = 1.1 }}"
            ))),
            Raw::Zipf { zipf } if zipf.is_finite() && (0.0..=10.0).contains(&zipf) => {
                Ok(Weights::Zipf(zipf))
            }
            Raw::Zipf { zipf } => Err(serde::de::Error::custom(field_error!(
                "zipf",
                "the exponent must be between 0 and 10 (got {zipf})"
            ))),
        }
    }
}

impl Clients {
    /// Checks the population's size.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.count.get() > MAX_CLIENTS {
            return Err(field_error!(
                "clients.count",
                "at most {MAX_CLIENTS} (got {})",
                self.count
            ));
        }
        Ok(())
    }

    /// A drawer of keys from `rng`.
    pub fn draw(&self, rng: Rng) -> Draw {
        let picker = match self.weights {
            Weights::Uniform => Picker::Uniform(self.count.get()),
            Weights::Zipf(s) => Picker::Table(zipf_table(self.count.get(), s)),
        };
        Draw { picker, rng }
    }
}

enum Picker {
    Uniform(u64),
    /// Cumulative integer weights: key i is picked for draws in [cdf[i−1], cdf[i]).
    Table(Vec<u64>),
}

/// Draws one key per arrival.
pub struct Draw {
    picker: Picker,
    rng: Rng,
}

impl Draw {
    /// The next arrival's key.
    #[inline]
    pub fn next_key(&mut self) -> Key {
        match &self.picker {
            Picker::Uniform(count) => Key::client(self.rng.random_range(0..*count)),
            Picker::Table(cdf) => {
                let total = *cdf.last().expect("at least one client");
                let u = self.rng.random_range(0..total);
                Key::client(cdf.partition_point(|&c| c <= u) as u64)
            }
        }
    }
}

/// Cumulative weights ⌊2^40 / k^s⌋ (at least 1) for ranks k = 1..=count,
/// computed with IEEE-754 additions, multiplications and divisions only —
/// never the platform's `pow`, `exp` or `ln`, which differ between C
/// libraries — so every machine draws the same keys.
fn zipf_table(count: u64, s: f64) -> Vec<u64> {
    let mut cdf = Vec::with_capacity(count as usize);
    let mut total = 0u64;
    for k in 1..=count {
        let weight = (exp(-s * ln(k as f64)) * (1u64 << 40) as f64).floor() as u64;
        total += weight.max(1);
        cdf.push(total);
    }
    cdf
}

/// ln x for x ≥ 1, from x = m·2^e (m in [1, 2)): e·ln 2 + 2·atanh((m−1)/(m+1)).
fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let m = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52));
    let z = (m - 1.0) / (m + 1.0);
    let z2 = z * z;
    let (mut term, mut sum) = (z, 0.0);
    for n in 0..40 {
        sum += term / f64::from(2 * n + 1);
        term *= z2;
    }
    e as f64 * LN_2 + 2.0 * sum
}

/// e^y for y ≤ 0: y = n·ln 2 + r with |r| ≤ ln 2 / 2, e^r by its series, times 2^n.
fn exp(y: f64) -> f64 {
    let n = (y / LN_2).round();
    if n < -1000.0 {
        return 0.0;
    }
    let r = y - n * LN_2;
    let (mut term, mut sum) = (1.0, 1.0);
    for k in 1..30 {
        term = term * r / f64::from(k);
        sum += term;
    }
    sum * f64::from_bits(((n as i64 + 1023) as u64) << 52)
}

/// ln 2, correctly rounded.
const LN_2: f64 = std::f64::consts::LN_2;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_portable_ln_and_exp_agree_with_the_library_ones() {
        for x in [1.0, 1.5, 2.0, 3.0, 10.0, 12_345.0, 1e7] {
            assert!((ln(x) - f64::ln(x)).abs() < 1e-13, "ln {x}");
        }
        for y in [0.0, -0.3, -1.0, -7.5, -30.0, -200.0] {
            let (ours, theirs) = (exp(y), f64::exp(y));
            assert!(((ours - theirs) / theirs).abs() < 1e-13, "exp {y}");
        }
    }

    fn counts(clients: &str, draws: usize) -> Vec<u64> {
        let clients: Clients = toml::from_str(clients).unwrap();
        let mut draw = clients.draw(Rng::seed_from_u64(3));
        let mut counts = vec![0; clients.count.get() as usize];
        for _ in 0..draws {
            counts[draw.next_key().client as usize] += 1;
        }
        counts
    }

    #[test]
    fn uniform_clients_are_picked_about_equally() {
        let counts = counts("count = 10", 100_000);
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn zipf_clients_follow_their_ranks() {
        // s = 1 over 4 ranks: 1, 1/2, 1/3, 1/4 of 25/12.
        let counts = counts("count = 4\nweights = { zipf = 1.0 }", 120_000);
        let expected = [57_600.0, 28_800.0, 19_200.0, 14_400.0];
        for (got, want) in counts.iter().zip(expected) {
            assert!((*got as f64 - want).abs() < want * 0.03, "{counts:?}");
        }
    }

    #[test]
    fn a_bad_population_is_refused_with_its_field() {
        let err = toml::from_str::<Clients>("count = 5\nweights = { zipf = -1.0 }").unwrap_err();
        assert!(err.to_string().contains("zipf"), "{err}");
        let err = toml::from_str::<Clients>("count = 0").unwrap_err();
        assert!(err.to_string().contains("count"), "{err}");
    }
}
