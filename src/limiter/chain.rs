//! Layered limiters: a request passes only if every layer admits it, in order.

use serde::Deserialize;

use super::{Context, Limiter, LimiterConfig, RateLimiter};
use crate::time::Nanos;

/// `kind = "chain"` with `layers = [{ kind = … }, …]`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The layers, first to last.
    pub layers: Vec<LimiterConfig>,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            layers: Vec<toml::Table>,
        }
        let raw = Raw::deserialize(deserializer)?;
        let layers = raw
            .layers
            .into_iter()
            .enumerate()
            .map(|(i, table)| {
                LimiterConfig::from_table(table).map_err(|err| format!("layer {}: {err}", i + 1))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(serde::de::Error::custom)?;
        Ok(Config { layers })
    }
}

impl Config {
    /// The sizing parameter: the first layer's.
    pub fn parameter(&self, context: Context) -> (&'static str, u64) {
        self.layers
            .first()
            .map_or(("threshold", 0), |layer| layer.parameter(context))
    }

    /// The same chain with the first layer's parameter set to `value`.
    pub fn with_parameter(&self, value: u64) -> Config {
        let mut layers = self.layers.clone();
        if let Some(first) = layers.first_mut() {
            *first = first.with_parameter(value);
        }
        Config { layers }
    }

    /// Every layer, fresh.
    pub fn build(&self, context: Context) -> Result<Chain, String> {
        if self.layers.is_empty() {
            return Err("layers: a chain needs at least one layer".into());
        }
        let layers = self
            .layers
            .iter()
            .enumerate()
            .map(|(i, layer)| {
                layer
                    .build(context)
                    .map_err(|err| format!("layer {}: {err}", i + 1))
            })
            .collect::<Result<_, _>>()?;
        Ok(Chain { layers })
    }
}

/// Each layer sees only what the layers before it admitted. A layer that
/// admits a request counts it even if a later layer rejects it, as chained
/// middleware does.
#[derive(Clone, Debug)]
pub struct Chain {
    layers: Vec<Limiter>,
}

impl RateLimiter for Chain {
    #[inline]
    fn decide(&mut self, now: Nanos) -> bool {
        self.layers.iter_mut().all(|layer| layer.decide(now))
    }

    /// What passes must pass every layer, so the smallest layer bound holds.
    fn bound(&self, interval: Nanos) -> u64 {
        self.layers
            .iter()
            .map(|layer| layer.bound(interval))
            .min()
            .unwrap_or(0)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.layers
            .iter()
            .map(|layer| layer.nominal(interval))
            .fold(f64::INFINITY, f64::min)
    }

    fn describe(&self) -> String {
        let layers: Vec<String> = self.layers.iter().map(Limiter::describe).collect();
        layers.join(" → ")
    }

    fn epoch_window(&self) -> Option<Nanos> {
        self.layers.iter().find_map(Limiter::epoch_window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;

    fn chain(text: &str) -> Chain {
        let table: toml::Table = toml::from_str(text).unwrap();
        config::parse_table::<Config>(table)
            .unwrap()
            .build(Context::default())
            .unwrap()
    }

    const WINDOW_THEN_BUCKET: &str = r#"layers = [
        { kind = "fixed-window", window = "1s", threshold = 100 },
        { kind = "token-bucket", rate = 100, burst = 20 },
    ]"#;

    #[test]
    fn a_request_passes_only_when_every_layer_admits_it() {
        let mut limiter = chain(WINDOW_THEN_BUCKET);
        let admitted = (0..100)
            .filter(|_| limiter.decide(Nanos(999_000_000)))
            .count();
        assert_eq!(
            admitted, 20,
            "the bucket's burst of 20 is the tighter layer"
        );
    }

    #[test]
    fn the_bound_is_the_tightest_layer() {
        let limiter = chain(WINDOW_THEN_BUCKET);
        assert_eq!(limiter.bound(Nanos::SECOND), 20 + 99);
    }

    #[test]
    fn names_the_layer_with_an_error() {
        let table: toml::Table =
            toml::from_str(r#"layers = [{ kind = "fixed-window", window = "1s" }]"#).unwrap();
        let err = config::parse_table::<Config>(table).unwrap_err();
        assert!(
            err.contains("layer 1") && err.contains("threshold"),
            "{err}"
        );
    }
}
