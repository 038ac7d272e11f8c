//! Rate limiters: one file per algorithm, each with its configuration, its
//! state machine and its theoretical worst case over any traffic.

pub mod buffered;
pub mod chain;
pub mod cluster;
pub mod envoy_local;
pub mod fixed_window;
pub mod gcra;
pub mod nginx_limit_req;
pub mod sliding_buckets;
pub mod sliding_counter;
pub mod sliding_log;
pub mod smaller_window;
pub mod token_bucket;

use serde::Deserialize;

use crate::config::KindTable;

/// `parameter` and `with_parameter` for a configuration whose sizing
/// parameter is its `threshold` field.
macro_rules! threshold_is_the_parameter {
    () => {
        /// The sizing parameter: the threshold.
        pub fn parameter(&self) -> (&'static str, u64) {
            ("threshold", self.threshold.get())
        }

        /// The same limiter with threshold `value`.
        pub fn with_parameter(&self, value: u64) -> Config {
            let threshold = std::num::NonZeroU64::new(value).unwrap_or(std::num::NonZeroU64::MIN);
            Config {
                threshold,
                ..self.clone()
            }
        }
    };
}
use crate::time::Nanos;
pub(crate) use threshold_is_the_parameter;

/// What every limiter does: decide arrivals in time order, and state what it
/// promises and what it can let through at worst.
pub trait RateLimiter {
    /// Admits (`true`) or rejects the arrival at `now`. Arrivals come in
    /// non-decreasing time order; simultaneous arrivals are decided one by one.
    fn decide(&mut self, now: Nanos) -> bool;

    /// How long the request just admitted waits before the backend gets it
    /// (nginx's `limit_req` without `nodelay`); zero for every other limiter.
    #[inline]
    fn delay(&self) -> Nanos {
        Nanos::ZERO
    }

    /// Takes back the admission just made at `now`, as if it had been
    /// rejected: a chain with `count_rejected = false` does this to earlier
    /// layers when a later one rejects.
    fn refund(&mut self, now: Nanos);

    /// The most arrivals this limiter can admit in any interval `[s, s + L)`
    /// of `interval` nanoseconds, over any traffic whatsoever — counted when
    /// the backend gets them, after any delay.
    fn bound(&self, interval: Nanos) -> u64;

    /// The most it can admit in an interval counted at decision times,
    /// before delays: the same as [`RateLimiter::bound`] unless it delays.
    fn decision_bound(&self, interval: Nanos) -> u64 {
        self.bound(interval)
    }

    /// The longest delay it can give an admitted request.
    fn max_delay(&self) -> Nanos {
        Nanos::ZERO
    }

    /// The latest arrival time up to which its time arithmetic is exact;
    /// a run longer than this is refused rather than saturated silently.
    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX - self.max_delay().get())
    }

    /// What the limiter advertises over `interval` (N·L/W, or rate·L).
    fn nominal(&self, interval: Nanos) -> f64;

    /// Its effective parameters in a few words, like `100 per 1s (epoch)`.
    fn describe(&self) -> String;

    /// Where its windows start when they are fixed in time, at
    /// `phase + k·length`: `(length, phase)`, so charts can draw the edges.
    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        None
    }
}

/// Where a window limiter's windows start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Align {
    /// Windows `[k·W, (k+1)·W)` from the scenario's start: `align = "epoch"`.
    #[default]
    Epoch,
    /// A window starts at the first arrival after the previous one ended:
    /// `align = "first-request"`.
    FirstRequest,
    /// Windows `[a + k·W, a + (k+1)·W)` for an anchor a (Bucket4j's aligned
    /// refill, Resilience4j's cycles from process start):
    /// `align = { anchor = "250ms" }`.
    Anchor(Nanos),
}

impl Align {
    /// How the alignment is written in scenario files.
    pub fn name(self) -> String {
        match self {
            Align::Epoch => "epoch".into(),
            Align::FirstRequest => "first-request".into(),
            Align::Anchor(anchor) => format!("anchored at {anchor}"),
        }
    }

    /// The fixed phase of the windows' edges, or `None` when they depend on traffic.
    pub fn phase(self, window: u64) -> Option<u64> {
        match self {
            Align::Epoch => Some(0),
            Align::FirstRequest => None,
            Align::Anchor(anchor) => Some(anchor.get() % window),
        }
    }
}

impl<'de> Deserialize<'de> for Align {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(
            untagged,
            expecting = "\"epoch\", \"first-request\" or { anchor = \"250ms\" }"
        )]
        enum Raw {
            Name(String),
            Anchor { anchor: Nanos },
        }
        match Raw::deserialize(deserializer)? {
            Raw::Name(name) if name == "epoch" => Ok(Align::Epoch),
            Raw::Name(name) if name == "first-request" => Ok(Align::FirstRequest),
            Raw::Name(name) => Err(serde::de::Error::custom(format!(
                "unknown alignment {name:?}; expected \"epoch\", \"first-request\" or {{ anchor = \"250ms\" }}"
            ))),
            Raw::Anchor { anchor } => Ok(Align::Anchor(anchor)),
        }
    }
}

/// The limiter kinds accepted in `kind = "…"`.
pub const KINDS: &[&str] = &[
    "fixed-window",
    "smaller-window",
    "buffered",
    "sliding-log",
    "sliding-counter",
    "token-bucket",
    "chain",
    "gcra",
    "sliding-buckets",
    "envoy-local",
    "nginx-limit-req",
];

/// A limiter's configuration, as written in a scenario file.
#[derive(Clone, Debug)]
pub enum LimiterConfig {
    /// `fixed-window`.
    FixedWindow(fixed_window::Config),
    /// `smaller-window`.
    SmallerWindow(smaller_window::Config),
    /// `buffered`.
    Buffered(buffered::Config),
    /// `sliding-log`.
    SlidingLog(sliding_log::Config),
    /// `sliding-counter`.
    SlidingCounter(sliding_counter::Config),
    /// `token-bucket`.
    TokenBucket(token_bucket::Config),
    /// `chain`.
    Chain(chain::Config),
    /// `gcra`.
    Gcra(gcra::Config),
    /// `sliding-buckets`.
    SlidingBuckets(sliding_buckets::Config),
    /// `envoy-local`.
    EnvoyLocal(envoy_local::Config),
    /// `nginx-limit-req`.
    NginxLimitReq(nginx_limit_req::Config),
    /// Any of the above, run as a cluster (from a scenario's `[cluster]`).
    Cluster(cluster::Config),
}

/// What a limiter's configuration may depend on outside itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Context {
    /// The backend's capacity in requests per second, when the scenario has one.
    pub backend_capacity_per_sec: Option<u64>,
}

impl LimiterConfig {
    /// Reads a configuration from a TOML table holding `kind` and its fields.
    pub fn from_table(table: toml::Table) -> Result<LimiterConfig, String> {
        let table = KindTable::new(table, KINDS)?;
        Ok(match table.kind.as_str() {
            "fixed-window" => LimiterConfig::FixedWindow(table.parse()?),
            "smaller-window" => LimiterConfig::SmallerWindow(table.parse()?),
            "buffered" => LimiterConfig::Buffered(table.parse()?),
            "sliding-log" => LimiterConfig::SlidingLog(table.parse()?),
            "sliding-counter" => LimiterConfig::SlidingCounter(table.parse()?),
            "token-bucket" => LimiterConfig::TokenBucket(table.parse()?),
            "chain" => LimiterConfig::Chain(table.parse()?),
            "gcra" => LimiterConfig::Gcra(table.parse()?),
            "sliding-buckets" => LimiterConfig::SlidingBuckets(table.parse()?),
            "envoy-local" => LimiterConfig::EnvoyLocal(table.parse()?),
            "nginx-limit-req" => LimiterConfig::NginxLimitReq(table.parse()?),
            other => unreachable!("KindTable accepted an unlisted kind {other}"),
        })
    }

    /// The `kind` as written in scenario files.
    pub fn kind(&self) -> &'static str {
        match self {
            LimiterConfig::FixedWindow(_) => "fixed-window",
            LimiterConfig::SmallerWindow(_) => "smaller-window",
            LimiterConfig::Buffered(_) => "buffered",
            LimiterConfig::SlidingLog(_) => "sliding-log",
            LimiterConfig::SlidingCounter(_) => "sliding-counter",
            LimiterConfig::TokenBucket(_) => "token-bucket",
            LimiterConfig::Chain(_) => "chain",
            LimiterConfig::Gcra(_) => "gcra",
            LimiterConfig::SlidingBuckets(_) => "sliding-buckets",
            LimiterConfig::EnvoyLocal(_) => "envoy-local",
            LimiterConfig::NginxLimitReq(_) => "nginx-limit-req",
            LimiterConfig::Cluster(config) => config.inner.kind(),
        }
    }

    /// The parameter `burstsim size` varies (threshold, or rate) and its value.
    pub fn parameter(&self, context: Context) -> (&'static str, u64) {
        match self {
            LimiterConfig::FixedWindow(config) => config.parameter(),
            LimiterConfig::SmallerWindow(config) => config.parameter(),
            LimiterConfig::Buffered(config) => config.parameter(context),
            LimiterConfig::SlidingLog(config) => config.parameter(),
            LimiterConfig::SlidingCounter(config) => config.parameter(),
            LimiterConfig::TokenBucket(config) => config.parameter(),
            LimiterConfig::Chain(config) => config.parameter(context),
            LimiterConfig::Gcra(config) => config.parameter(),
            LimiterConfig::SlidingBuckets(config) => config.parameter(),
            LimiterConfig::EnvoyLocal(config) => config.parameter(),
            LimiterConfig::NginxLimitReq(config) => config.parameter(),
            LimiterConfig::Cluster(config) => config.inner.parameter(context),
        }
    }

    /// The same configuration with the sizing parameter set to `value`.
    pub fn with_parameter(&self, value: u64) -> LimiterConfig {
        match self {
            LimiterConfig::FixedWindow(config) => {
                LimiterConfig::FixedWindow(config.with_parameter(value))
            }
            LimiterConfig::SmallerWindow(config) => {
                LimiterConfig::SmallerWindow(config.with_parameter(value))
            }
            LimiterConfig::Buffered(config) => {
                LimiterConfig::Buffered(config.with_parameter(value))
            }
            LimiterConfig::SlidingLog(config) => {
                LimiterConfig::SlidingLog(config.with_parameter(value))
            }
            LimiterConfig::SlidingCounter(config) => {
                LimiterConfig::SlidingCounter(config.with_parameter(value))
            }
            LimiterConfig::TokenBucket(config) => {
                LimiterConfig::TokenBucket(config.with_parameter(value))
            }
            LimiterConfig::Chain(config) => LimiterConfig::Chain(config.with_parameter(value)),
            LimiterConfig::Gcra(config) => LimiterConfig::Gcra(config.with_parameter(value)),
            LimiterConfig::SlidingBuckets(config) => {
                LimiterConfig::SlidingBuckets(config.with_parameter(value))
            }
            LimiterConfig::EnvoyLocal(config) => {
                LimiterConfig::EnvoyLocal(config.with_parameter(value))
            }
            LimiterConfig::NginxLimitReq(config) => {
                LimiterConfig::NginxLimitReq(config.with_parameter(value))
            }
            LimiterConfig::Cluster(config) => LimiterConfig::Cluster(cluster::Config {
                inner: Box::new(config.inner.with_parameter(value)),
                ..config.clone()
            }),
        }
    }

    /// A fresh limiter in its initial state, or what is wrong with the configuration.
    pub fn build(&self, context: Context) -> Result<Limiter, String> {
        Ok(match self {
            LimiterConfig::FixedWindow(config) => Limiter::FixedWindow(config.build()?),
            LimiterConfig::SmallerWindow(config) => Limiter::FixedWindow(config.build()?),
            LimiterConfig::Buffered(config) => Limiter::FixedWindow(config.build(context)?),
            LimiterConfig::SlidingLog(config) => Limiter::SlidingLog(config.build()?),
            LimiterConfig::SlidingCounter(config) => Limiter::SlidingCounter(config.build()?),
            LimiterConfig::TokenBucket(config) => Limiter::TokenBucket(config.build()?),
            LimiterConfig::Chain(config) => Limiter::Chain(config.build(context)?),
            LimiterConfig::Gcra(config) => Limiter::Gcra(config.build()?),
            LimiterConfig::SlidingBuckets(config) => Limiter::SlidingBuckets(config.build()?),
            LimiterConfig::EnvoyLocal(config) => Limiter::EnvoyLocal(config.build()?),
            LimiterConfig::NginxLimitReq(config) => Limiter::NginxLimitReq(config.build()?),
            LimiterConfig::Cluster(config) => Limiter::Cluster(Box::new(config.build(context)?)),
        })
    }
}

/// A limiter's running state. An enum rather than `Box<dyn RateLimiter>` so the
/// per-request call is a jump table the compiler can inline, not a virtual call.
#[derive(Clone, Debug)]
pub enum Limiter {
    /// Fixed windows (also smaller-window and buffered).
    FixedWindow(fixed_window::FixedWindow),
    /// The exact sliding log.
    SlidingLog(sliding_log::SlidingLog),
    /// The weighted sliding counter.
    SlidingCounter(sliding_counter::SlidingCounter),
    /// The token bucket.
    TokenBucket(token_bucket::TokenBucket),
    /// Layers in order.
    Chain(chain::Chain),
    /// governor's GCRA.
    Gcra(gcra::Gcra),
    /// Sentinel's and .NET's bucketed sliding window.
    SlidingBuckets(sliding_buckets::SlidingBuckets),
    /// Envoy's local rate limit, K instances.
    EnvoyLocal(envoy_local::EnvoyLocal),
    /// nginx's limit_req.
    NginxLimitReq(nginx_limit_req::NginxLimitReq),
    /// Instances of a limiter, local or sharing a store.
    Cluster(Box<cluster::Cluster>),
}

macro_rules! each_limiter {
    ($self:expr, $inner:ident => $body:expr) => {
        match $self {
            Limiter::FixedWindow($inner) => $body,
            Limiter::SlidingLog($inner) => $body,
            Limiter::SlidingCounter($inner) => $body,
            Limiter::TokenBucket($inner) => $body,
            Limiter::Chain($inner) => $body,
            Limiter::Gcra($inner) => $body,
            Limiter::SlidingBuckets($inner) => $body,
            Limiter::EnvoyLocal($inner) => $body,
            Limiter::NginxLimitReq($inner) => $body,
            Limiter::Cluster($inner) => $body,
        }
    };
}

impl RateLimiter for Limiter {
    #[inline]
    fn decide(&mut self, now: Nanos) -> bool {
        each_limiter!(self, limiter => limiter.decide(now))
    }

    fn refund(&mut self, now: Nanos) {
        each_limiter!(self, limiter => limiter.refund(now))
    }

    #[inline]
    fn delay(&self) -> Nanos {
        each_limiter!(self, limiter => limiter.delay())
    }

    fn bound(&self, interval: Nanos) -> u64 {
        each_limiter!(self, limiter => limiter.bound(interval))
    }

    fn decision_bound(&self, interval: Nanos) -> u64 {
        each_limiter!(self, limiter => limiter.decision_bound(interval))
    }

    fn max_delay(&self) -> Nanos {
        each_limiter!(self, limiter => limiter.max_delay())
    }

    fn horizon(&self) -> Nanos {
        each_limiter!(self, limiter => limiter.horizon())
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        each_limiter!(self, limiter => limiter.nominal(interval))
    }

    fn describe(&self) -> String {
        each_limiter!(self, limiter => limiter.describe())
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        each_limiter!(self, limiter => limiter.window_edges())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LimiterConfig, String> {
        LimiterConfig::from_table(toml::from_str(text).unwrap())
    }

    #[test]
    fn reads_each_kind_from_a_table() {
        let config = parse("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100").unwrap();
        assert_eq!(config.kind(), "fixed-window");
    }

    #[test]
    fn names_the_misspelt_field() {
        let err = parse("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshhold = 100").unwrap_err();
        assert!(err.contains("threshhold"), "{err}");
    }

    #[test]
    fn names_the_field_with_a_bad_value() {
        let err = parse("kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 0").unwrap_err();
        assert!(err.starts_with("threshold: "), "{err}");
    }

    #[test]
    fn lists_the_kinds_for_an_unknown_kind() {
        let err = parse("kind = \"leaky-bucket\"").unwrap_err();
        assert!(
            err.contains("leaky-bucket") && err.contains("token-bucket"),
            "{err}"
        );
    }
}
