//! Layered limiters: a request passes only if every layer admits it, in order.

use serde::Deserialize;

use super::{Context, Decision, Kind, Limiter, LimiterConfig, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;
use crate::traffic::Key;

/// `kind = "chain"` with `layers = [{ kind = … }, …]`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The layers, first to last.
    pub layers: Vec<LimiterConfig>,
    /// Whether a layer keeps counting a request it admitted that a later
    /// layer rejected (default true, as chained middleware and Bucket4j's
    /// bandwidths do; false as a rate limit service that stops counting).
    pub count_rejected: bool,
    /// When a layer delays a request, whether the next layer hears it then
    /// and the delays add up, as chained middleware (Traefik) does; by
    /// default every layer hears it on arrival and it waits the longest of
    /// their delays, as nginx's `limit_req`s of one location.
    pub delays_add_up: bool,
}

/// `delays = "longest"` (default) or `"add-up"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Delays {
    #[default]
    Longest,
    AddUp,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            layers: Vec<toml::Table>,
            #[serde(default = "yes")]
            count_rejected: bool,
            #[serde(default)]
            delays: Delays,
        }
        fn yes() -> bool {
            true
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
        Ok(Config {
            layers,
            count_rejected: raw.count_rejected,
            delays_add_up: raw.delays == Delays::AddUp,
        })
    }
}

impl Kind for Config {
    const NAME: &'static str = "chain";
    type State = Chain;

    /// The sizing parameter: the first layer's.
    fn parameter(&self, context: Context) -> (&'static str, u64) {
        self.layers
            .first()
            .map_or(("threshold", 0), |layer| layer.parameter(context))
    }

    /// The first layer's.
    fn least_parameter(&self) -> u64 {
        self.layers.first().map_or(1, LimiterConfig::least_parameter)
    }

    /// Sized with the first layer's parameter: the second layer's (a fixed
    /// window's threshold against the bucket behind it); a third layer on
    /// stays as configured.
    fn companion(&self, context: Context) -> Option<super::Companion> {
        let (name, current) = self.layers.get(1)?.parameter(context);
        let (first, _) = self.parameter(context);
        Some(super::Companion {
            parameter: Some(format!("layers[0].{first}")),
            ..super::count_companion(&format!("layers[1].{name}"), current)?
        })
    }

    /// The same chain with the second layer's parameter at `value`.
    fn with_companion(&self, value: u64) -> Config {
        let mut layers = self.layers.clone();
        if let Some(second) = layers.get_mut(1) {
            *second = second.with_parameter(value);
        }
        Config {
            layers,
            ..self.clone()
        }
    }

    /// The same chain with the first layer's parameter set to `value`.
    fn with_parameter(&self, value: u64) -> Config {
        let mut layers = self.layers.clone();
        if let Some(first) = layers.first_mut() {
            *first = first.with_parameter(value);
        }
        Config {
            layers,
            ..self.clone()
        }
    }

    /// Every layer, fresh.
    fn build(&self, context: Context) -> Result<Chain, FieldError> {
        if self.layers.is_empty() {
            return Err(field_error!("layers", "a chain needs at least one layer"));
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
        Ok(Chain {
            layers,
            count_rejected: self.count_rejected,
            delays_add_up: self.delays_add_up,
        })
    }

    /// Two layers of other kinds' examples.
    fn example(choice: u64) -> String {
        let layer = |k: u64, c: u64| {
            let text = super::example(k as usize, c);
            let fields: Vec<&str> = text.lines().filter(|line| !line.is_empty()).collect();
            format!("{{ {} }}", fields.join(", "))
        };
        // Not a chain inside a chain: kinds other than this one.
        let kinds = super::KINDS.len() as u64;
        let own = super::KINDS
            .iter()
            .position(|&k| k == Self::NAME)
            .unwrap_or(0) as u64;
        let other = |k: u64| if k % kinds == own { k + 1 } else { k };
        format!(
            "count_rejected = {}\ndelays = \"{}\"\nlayers = [{}, {}]",
            choice.is_multiple_of(2),
            ["longest", "add-up"][(choice / 5 % 2) as usize],
            layer(other(choice / 2), choice / 7),
            layer(other(choice / 3 + 1), choice / 11)
        )
    }
}

/// Each layer sees only what the layers before it admitted. A layer that
/// admits a request counts it even if a later layer rejects it, as chained
/// middleware does; with `count_rejected = false` such admissions are taken
/// back, so earlier layers count only what passes every layer.
#[derive(Clone, Debug)]
pub struct Chain {
    layers: Vec<Limiter>,
    count_rejected: bool,
    delays_add_up: bool,
}

impl Chain {
    /// Its layers, in order.
    pub(super) fn layers_mut(&mut self) -> &mut [Limiter] {
        &mut self.layers
    }
}

impl RateLimiter for Chain {
    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        let layers: u128 = self.layers.iter().map(|l| l.memory_at_most(keys, requests, hashed)).sum();
        super::allocation::<Limiter>(self.layers.len() as u128) + layers
    }

    /// Rejects with the rejecting layer's hint; delays what it passes by the
    /// longest of the layers' delays, as nginx applies several `limit_req`s
    /// (with `delays = "add-up"`, by their sum, each layer hearing the
    /// request when the one before lets it go).
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        self.decide_keyed::<HINTS>(now, Key::DEFAULT)
    }

    /// Every layer hears the key: a layer with `per = "key"` keeps the
    /// key's own state.
    #[inline]
    fn decide_keyed<const HINTS: bool>(&mut self, now: Nanos, key: Key) -> Decision {
        let mut delay = Nanos::ZERO;
        for rejecting in 0..self.layers.len() {
            let at = if self.delays_add_up {
                Nanos(now.get().saturating_add(delay.get()))
            } else {
                now
            };
            match self.layers[rejecting].decide_keyed::<HINTS>(at, key) {
                Decision::Admit => {}
                Decision::Delay(by) if self.delays_add_up => {
                    delay = Nanos(delay.get().saturating_add(by.get()));
                }
                Decision::Delay(by) => delay = delay.max(by),
                rejected @ Decision::Reject(_) => {
                    if !self.count_rejected {
                        self.layers[..rejecting]
                            .iter_mut()
                            .for_each(|layer| layer.refund(now));
                    }
                    return rejected;
                }
            }
        }
        if delay == Nanos::ZERO {
            Decision::Admit
        } else {
            Decision::Delay(delay)
        }
    }

    fn refund(&mut self, now: Nanos) {
        self.layers.iter_mut().for_each(|layer| layer.refund(now));
    }

    /// What passes must pass every layer, so each layer's bound holds — for
    /// decision times. Releases come after the longest of the layers'
    /// delays, up to M = the longest delay any layer can give: with no
    /// delaying layer, the smallest layer bound; with exactly one, that
    /// layer's own release bound (the others add no delay, so its releases
    /// are the chain's) and every other layer's decision bound over L + M
    /// (what is released in [s, s + L) was decided in [s − M, s + L)); with
    /// several, every layer's decision bound over L + M.
    ///
    /// With delays that add up, a layer decides up to M = the sum of the
    /// delays before it after the arrival, so what is released in
    /// [s, s + L) was decided by every layer in [s − M, s + L): every
    /// layer's decision bound over L + M, once any layer delays.
    fn bound(&self, interval: Nanos) -> u64 {
        let longest = self.max_delay();
        let delaying = self
            .layers
            .iter()
            .filter(|l| l.max_delay() > Nanos::ZERO)
            .count();
        let widened = Nanos(interval.get().saturating_add(longest.get()));
        self.layers
            .iter()
            .map(|layer| match delaying {
                0 => layer.bound(interval),
                1 if layer.max_delay() > Nanos::ZERO && !self.delays_add_up => {
                    layer.bound(interval)
                }
                _ => layer.decision_bound(widened),
            })
            .min()
            .unwrap_or(0)
    }

    fn decision_bound(&self, interval: Nanos) -> u64 {
        self.layers
            .iter()
            .map(|layer| layer.decision_bound(interval))
            .min()
            .unwrap_or(0)
    }

    fn max_delay(&self) -> Nanos {
        let delays = self.layers.iter().map(Limiter::max_delay);
        if self.delays_add_up {
            delays.fold(Nanos::ZERO, |sum, d| Nanos(sum.get().saturating_add(d.get())))
        } else {
            delays.max().unwrap_or(Nanos::ZERO)
        }
    }

    fn horizon(&self) -> Nanos {
        self.layers
            .iter()
            .map(Limiter::horizon)
            .min()
            .unwrap_or(Nanos(u64::MAX))
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

    /// Every layer's state, when every layer's is known.
    fn state_bytes(&self) -> Option<u64> {
        self.layers.iter().map(Limiter::state_bytes).sum()
    }

    /// Every layer's commands, when every layer is store-backed.
    fn store_ops(&self) -> Option<StoreOps> {
        self.layers
            .iter()
            .map(Limiter::store_ops)
            .try_fold(StoreOps::default(), |sum, ops| Some(sum + ops?))
    }

    fn resets(&self) -> u64 {
        self.layers.iter().map(Limiter::resets).sum()
    }

    fn keys_matter(&self) -> bool {
        self.layers.iter().any(Limiter::keys_matter)
    }

    fn every_window_edges(&self) -> Vec<(Nanos, Nanos)> {
        self.layers.iter().flat_map(Limiter::every_window_edges).collect()
    }

    fn changes(&self) -> Vec<Nanos> {
        self.layers.iter().flat_map(Limiter::changes).collect()
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        self.layers.iter().find_map(Limiter::window_edges)
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

    /// With `delays = "add-up"` the second layer hears a delayed request
    /// when the first lets it go, as chained middleware; by default both
    /// hear it on arrival, as nginx's zones. A 100 ms window of one behind
    /// a delaying layer tells them apart: heard late, each request meets a
    /// new window.
    #[test]
    fn delays_add_up_when_the_next_layer_hears_the_request_late() {
        let layers = r#"layers = [
            { kind = "nginx-limit-req", rate = "10r/s", burst = 5 },
            { kind = "fixed-window", window = "100ms", threshold = 1 },
        ]"#;
        let mut longest = chain(layers);
        let mut adding = chain(&format!("delays = \"add-up\"\n{layers}"));
        let ms = |ms: u64| Nanos(ms * 1_000_000);
        let added: Vec<Decision> = (0..3).map(|_| adding.decide(ms(0))).collect();
        assert_eq!(
            added,
            [Decision::Admit, Decision::Delay(ms(100)), Decision::Delay(ms(200))]
        );
        assert!(longest.decide(ms(0)).admitted());
        assert!(!longest.decide(ms(0)).admitted(), "both heard it at 0");
        assert_eq!(adding.max_delay(), longest.max_delay());
        let one: Chain = chain(
            r#"delays = "add-up"
            layers = [
                { kind = "nginx-limit-req", rate = "10r/s", burst = 5 },
                { kind = "nginx-limit-req", rate = "10r/s", burst = 5 },
            ]"#,
        );
        assert_eq!(one.max_delay(), Nanos(2 * longest.max_delay().get()));
    }

    const WINDOW_THEN_BUCKET: &str = r#"layers = [
        { kind = "fixed-window", window = "1s", threshold = 100 },
        { kind = "token-bucket", rate = 100, burst = 20 },
    ]"#;

    #[test]
    fn a_request_passes_only_when_every_layer_admits_it() {
        let mut limiter = chain(WINDOW_THEN_BUCKET);
        let admitted = (0..100)
            .filter(|_| limiter.decide(Nanos(999_000_000)).admitted())
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
    fn without_counting_rejected_requests_the_window_keeps_its_allowance() {
        let not_counting =
            WINDOW_THEN_BUCKET.replace("layers =", "count_rejected = false\nlayers =");
        let mut counting = chain(WINDOW_THEN_BUCKET);
        let mut refunding = chain(&not_counting);
        // 100 at once: the bucket passes 20 of them either way.
        let burst = |limiter: &mut Chain| {
            (0..100)
                .filter(|_| limiter.decide(Nanos(0)).admitted())
                .count()
        };
        assert_eq!((burst(&mut counting), burst(&mut refunding)), (20, 20));
        // Then one request per new token, every 10 ms up to 990 ms: 99 of them.
        let ticks: Vec<u64> = (1..100).map(|i| i * 10_000_000).collect();
        let pass = |limiter: &mut Chain| {
            ticks
                .iter()
                .filter(|&&t| limiter.decide(Nanos(t)).admitted())
                .count()
        };
        assert_eq!(
            pass(&mut counting),
            0,
            "the window counted all 100 of the burst"
        );
        assert_eq!(
            pass(&mut refunding),
            80,
            "the window counted only the 20 that passed"
        );
    }

    /// A take-back is "as if rejected": a layer that counts rejected
    /// requests too (its real counter is incremented before anything
    /// decides) keeps the count; one that counts admissions gives it back.
    #[test]
    fn a_take_back_leaves_a_layer_that_counts_rejections_counted() {
        let run = |first: &str| {
            let mut limiter = chain(&format!(
                "count_rejected = false\nlayers = [{first}, {{ kind = \"fixed-window\", window = \"1s\", threshold = 2 }}]"
            ));
            (0..10)
                .filter(|_| limiter.decide(Nanos(0)).admitted())
                .count()
        };
        // The second layer passes 2 of 10; the first saw 10.
        let window = |counting: bool| {
            format!("{{ kind = \"fixed-window\", window = \"1s\", threshold = 5, count_rejected = {counting} }}")
        };
        assert_eq!(run(&window(false)), 2);
        let refunded = |first: &str| {
            let mut limiter = chain(&format!(
                "count_rejected = false\nlayers = [{first}, {{ kind = \"fixed-window\", window = \"1s\", threshold = 2 }}]"
            ));
            (0..10).for_each(|_| {
                limiter.decide(Nanos(0));
            });
            // A new second for the second layer only: does the first still have room?
            limiter.layers[0].decide(Nanos(1)).admitted()
        };
        assert!(refunded(&window(false)), "8 taken back: 2 of 5 counted");
        assert!(!refunded(&window(true)), "all 10 counted, as rejections are");
        assert!(!refunded("{ kind = \"sliding-log\", window = \"1s\", threshold = 5, count_rejected = true }"));
        assert!(refunded("{ kind = \"sliding-log\", window = \"1s\", threshold = 5 }"));
        assert!(!refunded("{ kind = \"kong\", second = 5, minute = 100, policy = \"redis\" }"));
        assert!(refunded("{ kind = \"kong\", second = 5, minute = 100, policy = \"local\" }"));
    }

    #[test]
    fn names_the_layer_with_an_error() {
        let table: toml::Table =
            toml::from_str(r#"layers = [{ kind = "fixed-window", window = "1s" }]"#).unwrap();
        let err = config::parse_table::<Config>(table).unwrap_err();
        assert!(
            err.to_string().contains("layer 1") && err.to_string().contains("threshold"),
            "{err}"
        );
    }
}
