//! Rate limiters: one file per algorithm, each with its configuration, its
//! state machine and its theoretical worst case over any traffic.

mod align;
pub mod cluster;
mod decision;
mod key_windows;
pub mod per_key;
mod rate_limiter;

pub use self::align::Align;
pub use self::decision::{Decision, Hint};
pub use self::rate_limiter::{RateLimiter, StoreOps};

use crate::config::KindTable;
use crate::error::{FieldError, field_error};

/// [`Kind::parameter`] and [`Kind::with_parameter`] for a configuration
/// whose sizing parameter is its `NonZeroU64` field `$field` (by default
/// `threshold`).
macro_rules! parameter_is {
    () => {
        $crate::limiter::parameter_is!(threshold);
    };
    // A window kind: its threshold, sized together with its length.
    (threshold, window) => {
        $crate::limiter::parameter_is!(threshold);

        fn companion(&self, _: $crate::limiter::Context) -> Option<$crate::limiter::Companion> {
            $crate::limiter::window_companion(self.window)
        }

        fn with_companion(&self, value: u64) -> Config {
            Config {
                window: $crate::time::Nanos(value.max(1)),
                ..self.clone()
            }
        }
    };
    ($field:ident) => {
        fn parameter(&self, _: $crate::limiter::Context) -> (&'static str, u64) {
            (stringify!($field), self.$field.get())
        }

        fn with_parameter(&self, value: u64) -> Config {
            Config {
                $field: std::num::NonZeroU64::new(value).unwrap_or(std::num::NonZeroU64::MIN),
                ..self.clone()
            }
        }
    };
}
use crate::time::Nanos;
use crate::traffic::Key;
pub(crate) use parameter_is;

/// Bytes of a heap allocation of `len` items of `T`, grown by doubling, with
/// the allocator's header: the most one `Vec` of that length can hold.
pub(crate) fn allocation<T>(len: u128) -> u128 {
    len.next_power_of_two().max(4) * std::mem::size_of::<T>() as u128 + 16
}

/// One limiter kind: its configuration as written in a scenario file and the
/// state it builds. A kind is its own file implementing this, plus one line
/// in the `kinds!` list below.
pub trait Kind: Clone + std::fmt::Debug + serde::de::DeserializeOwned {
    /// How `kind = "…"` names it.
    const NAME: &'static str;

    /// Its running state.
    type State: RateLimiter + Clone + std::fmt::Debug;

    /// A fresh limiter in its initial state, or what is wrong with the configuration.
    fn build(&self, context: Context) -> Result<Self::State, FieldError>;

    /// The parameter `burstsim size` varies (threshold, rate, burst…) and its value.
    fn parameter(&self, context: Context) -> (&'static str, u64);

    /// The same configuration with the sizing parameter set to `value`.
    fn with_parameter(&self, value: u64) -> Self;

    /// The smallest value the sizing parameter takes: 1, or 0 where 0 is a
    /// setting of its own (nginx's `burst=0`, no burst at all).
    fn least_parameter(&self) -> u64 {
        1
    }

    /// The setting that trades against the sizing parameter, sized together
    /// with it (a bucket's rate against its burst, a window's length against
    /// its threshold); `None` when the kind has none.
    fn companion(&self, context: Context) -> Option<Companion> {
        let _ = context;
        None
    }

    /// The same configuration with the companion setting at `value`.
    fn with_companion(&self, value: u64) -> Self {
        let _ = value;
        self.clone()
    }

    /// The configuration as its gateway writes it, a line each, for the zone
    /// or route `zone`; `None` when burstsim's own fields are its notation.
    fn gateway_lines(&self, zone: &str) -> Option<Vec<String>> {
        let _ = zone;
        None
    }

    /// A valid configuration of this kind as TOML fields (without `kind`),
    /// with windows of about a microsecond, different for each `choice`: the
    /// property tests check every kind's contract on many of these.
    fn example(choice: u64) -> String;
}

/// The setting sized together with a kind's parameter ([`Kind::companion`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Companion {
    /// As the configuration names it: `burst`, `rate`, `window`, or a
    /// chain's `layers[1].rate`.
    pub name: String,
    /// How the sizing parameter is named beside it, where its own name
    /// would not say which (a chain's `layers[0].threshold`).
    pub parameter: Option<String>,
    /// Its value now.
    pub current: u64,
    /// What the value counts, which says the values worth trying.
    pub unit: Unit,
}

/// What a sized setting's value counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Requests, tokens, requests a second: any whole number.
    Count,
    /// A window's length in nanoseconds: the round lengths a configuration
    /// is written with ([`Unit::WINDOWS`]).
    Window,
}

impl Unit {
    /// The window lengths `size` tries: round ones from 10 ms to a minute.
    pub const WINDOWS: [Nanos; 13] = [
        Nanos(10_000_000),
        Nanos(20_000_000),
        Nanos(50_000_000),
        Nanos(100_000_000),
        Nanos(200_000_000),
        Nanos(250_000_000),
        Nanos(500_000_000),
        Nanos::SECOND,
        Nanos(2_000_000_000),
        Nanos(5_000_000_000),
        Nanos(10_000_000_000),
        Nanos(30_000_000_000),
        Nanos(60_000_000_000),
    ];

    /// `value` as a scenario writes it: `13`, `"100ms"`.
    pub fn toml(self, value: u64) -> String {
        match self {
            Unit::Count => value.to_string(),
            Unit::Window => format!("\"{}\"", Nanos(value).exact_text()),
        }
    }
}

/// A window kind's companion: its length.
pub(crate) fn window_companion(window: Nanos) -> Option<Companion> {
    Some(Companion {
        name: "window".to_string(),
        parameter: None,
        current: window.get(),
        unit: Unit::Window,
    })
}

/// A count companion called `name`, now `current`.
pub(crate) fn count_companion(name: &str, current: u64) -> Option<Companion> {
    Some(Companion {
        name: name.to_string(),
        parameter: None,
        current,
        unit: Unit::Count,
    })
}

/// Which of a limiter's sized settings to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The sizing parameter ([`Kind::parameter`]).
    Parameter,
    /// The setting sized together with it ([`Kind::companion`]).
    Companion,
}

/// What a limiter's configuration may depend on outside itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Context {
    /// The backend's capacity in requests per second, when the scenario has one.
    pub backend_capacity_per_sec: Option<u64>,
}

/// `$body` with `$inner` bound to the running limiter, whatever its kind.
macro_rules! each_limiter {
    ($self:expr, ($($variant:ident)+), $inner:ident => $body:expr) => {
        match $self {
            $(Limiter::$variant($inner) => $body,)+
            Limiter::Cluster($inner) => $body,
            Limiter::PerKey($inner) => $body,
        }
    };
}

/// Declares every limiter kind once: `Variant = module`, where
/// `src/limiter/module.rs` holds a `Config` implementing [`Kind`]. From the
/// list come the module declarations, the
/// configuration enum, the running-state enum (an enum rather than
/// `Box<dyn RateLimiter>` so the per-request call is a jump table the
/// compiler can inline), [`KINDS`], reading a kind from a table, and the
/// property tests' examples.
macro_rules! kinds {
    ($($variant:ident = $module:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// The limiter kinds accepted in `kind = "…"`.
        pub const KINDS: &[&str] = &[$(<$module::Config as Kind>::NAME),+];

        /// A limiter's configuration, as written in a scenario file.
        #[derive(Clone, Debug)]
        pub enum LimiterConfig {
            $(
                #[doc = concat!("`", stringify!($module), "`.")]
                $variant($module::Config),
            )+
            /// Any of the above, run as a cluster (from a scenario's `[cluster]`).
            Cluster(cluster::Config),
            /// Any of the above with `per = "key"`: a limiter per client key.
            PerKey(per_key::Config),
        }

        /// A limiter's running state.
        #[derive(Clone, Debug)]
        pub enum Limiter {
            $(
                #[doc = concat!("`", stringify!($module), "`.")]
                $variant(<$module::Config as Kind>::State),
            )+
            /// Instances of a limiter, local or sharing a store.
            Cluster(Box<cluster::Cluster>),
            /// A limiter per client key.
            PerKey(Box<per_key::PerKey>),
        }

        impl LimiterConfig {
            /// Reads a configuration from a TOML table holding `kind` and its
            /// fields, and `per` (`"global"`, the default, or `"key"`) with
            /// `evict_after`.
            pub fn from_table(mut table: toml::Table) -> Result<LimiterConfig, FieldError> {
                if let Some(per) = per_key::Fields::take(&mut table)? {
                    let inner = LimiterConfig::from_table(table)?;
                    return Ok(LimiterConfig::PerKey(per_key::Config {
                        inner: Box::new(inner),
                        evict_after: per.evict_after,
                        by_host: per.by_host,
                    }));
                }
                let table = KindTable::new(table, KINDS)?;
                // A chain's own `count_rejected` is about requests a later layer rejects.
                if table.has("count_rejected")
                    && table.kind != "chain"
                    && !COUNTS_REJECTED.contains(&table.kind.as_str())
                {
                    return Err(field_error!("count_rejected", "only {} can count rejected requests (as HAProxy, Kong's redis policy and envoyproxy/ratelimit do); a {} has no such option",
                        COUNTS_REJECTED.join(", "),
                        table.kind
                    ));
                }
                $(
                    if table.kind == <$module::Config as Kind>::NAME {
                        return Ok(LimiterConfig::$variant(table.parse()?));
                    }
                )+
                unreachable!("KindTable accepted an unlisted kind {}", table.kind)
            }

            /// The `kind` as written in scenario files.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(LimiterConfig::$variant(_) => <$module::Config as Kind>::NAME,)+
                    LimiterConfig::Cluster(config) => config.inner.kind(),
                    LimiterConfig::PerKey(config) => config.inner.kind(),
                }
            }

            /// The parameter `burstsim size` varies (threshold, or rate) and its value.
            pub fn parameter(&self, context: Context) -> (&'static str, u64) {
                match self {
                    $(LimiterConfig::$variant(config) => config.parameter(context),)+
                    LimiterConfig::Cluster(config) => config.inner.parameter(context),
                    LimiterConfig::PerKey(config) => config.inner.parameter(context),
                }
            }

            /// The smallest value of the sizing parameter (see [`Kind::least_parameter`]).
            pub fn least_parameter(&self) -> u64 {
                match self {
                    $(LimiterConfig::$variant(config) => config.least_parameter(),)+
                    LimiterConfig::Cluster(config) => config.inner.least_parameter(),
                    LimiterConfig::PerKey(config) => config.inner.least_parameter(),
                }
            }

            /// The same configuration with the sizing parameter set to `value`.
            pub fn with_parameter(&self, value: u64) -> LimiterConfig {
                self.with_setting(Setting::Parameter, value)
            }

            /// The setting sized together with the parameter, and its value
            /// (see [`Kind::companion`]).
            pub fn companion(&self, context: Context) -> Option<Companion> {
                match self {
                    $(LimiterConfig::$variant(config) => config.companion(context),)+
                    LimiterConfig::Cluster(config) => config.inner.companion(context),
                    LimiterConfig::PerKey(config) => config.inner.companion(context),
                }
            }

            /// The configuration as its gateway writes it (see [`Kind::gateway_lines`]).
            pub fn gateway_lines(&self, zone: &str) -> Option<Vec<String>> {
                match self {
                    $(LimiterConfig::$variant(config) => config.gateway_lines(zone),)+
                    LimiterConfig::Cluster(config) => config.inner.gateway_lines(zone),
                    LimiterConfig::PerKey(config) => config.inner.gateway_lines(zone),
                }
            }

            /// The same configuration with `setting` at `value`.
            pub fn with_setting(&self, setting: Setting, value: u64) -> LimiterConfig {
                match self {
                    $(LimiterConfig::$variant(config) => LimiterConfig::$variant(match setting {
                        Setting::Parameter => config.with_parameter(value),
                        Setting::Companion => config.with_companion(value),
                    }),)+
                    LimiterConfig::Cluster(config) => LimiterConfig::Cluster(cluster::Config {
                        inner: Box::new(config.inner.with_setting(setting, value)),
                        ..config.clone()
                    }),
                    LimiterConfig::PerKey(config) => LimiterConfig::PerKey(per_key::Config {
                        inner: Box::new(config.inner.with_setting(setting, value)),
                        ..config.clone()
                    }),
                }
            }

            /// A fresh limiter in its initial state, or what is wrong with the configuration.
            pub fn build(&self, context: Context) -> Result<Limiter, FieldError> {
                Ok(match self {
                    $(LimiterConfig::$variant(config) => Limiter::$variant(config.build(context)?),)+
                    LimiterConfig::Cluster(config) => {
                        Limiter::Cluster(Box::new(config.build(context)?))
                    }
                    LimiterConfig::PerKey(config) => {
                        Limiter::PerKey(Box::new(config.build(context)?))
                    }
                })
            }
        }

        /// A valid configuration of kind `KINDS[kind % KINDS.len()]` as a
        /// TOML table's text, different for each `choice` (see [`Kind::example`]).
        pub fn example(kind: usize, choice: u64) -> String {
            let examples: &[(&str, fn(u64) -> String)] =
                &[$((<$module::Config as Kind>::NAME, <$module::Config as Kind>::example)),+];
            let (name, example) = examples[kind % examples.len()];
            format!("kind = \"{name}\"\n{}", example(choice))
        }

        impl Limiter {
            /// Whether it keeps a state per Host (`per = "host"`), so its
            /// figures per key are per Host.
            pub fn keyed_by_host(&self) -> bool {
                matches!(self, Limiter::PerKey(per) if per.by_host())
            }

            /// Decides every arrival of `chunk` in order without HINTS (an open
            /// loop hears no hints), telling `to` each decision: the kind is
            /// matched once, and the loop is compiled for each.
            #[inline]
            pub fn decide_all<T: crate::traffic::Timed>(&mut self, chunk: &[T], to: &mut impl Decisions) {
                if let Limiter::PerKey(limiter) = self {
                    return limiter.decide_all(chunk, to);
                }
                if to.prefetches() {
                    // Figures per key: asked for ahead, as a limiter per key does.
                    each_limiter!(self, ($($variant)+), limiter => {
                        for (arrival, later) in per_key::with_later(chunk) {
                            if let Some(later) = later {
                                to.prefetch(later, per_key::AHEAD);
                            }
                            let decision = limiter.decide_keyed::<false>(arrival.time, arrival.key);
                            to.decided(arrival, decision);
                        }
                    });
                    return;
                }
                each_limiter!(self, ($($variant)+), limiter => {
                    for &item in chunk {
                        let arrival = item.arrival();
                        let decision = limiter.decide_keyed::<false>(arrival.time, arrival.key);
                        to.decided(arrival, decision);
                    }
                })
            }
        }

        impl RateLimiter for Limiter {
            #[inline]
            fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
                each_limiter!(self, ($($variant)+), limiter => limiter.decide_with::<HINTS>(now))
            }

            #[inline]
            fn decide_keyed<const HINTS: bool>(&mut self, now: Nanos, key: Key) -> Decision {
                each_limiter!(self, ($($variant)+), limiter => limiter.decide_keyed::<HINTS>(now, key))
            }

            fn refund(&mut self, now: Nanos) {
                each_limiter!(self, ($($variant)+), limiter => limiter.refund(now))
            }

            fn bound(&self, interval: Nanos) -> u64 {
                each_limiter!(self, ($($variant)+), limiter => limiter.bound(interval))
            }

            fn decision_bound(&self, interval: Nanos) -> u64 {
                each_limiter!(self, ($($variant)+), limiter => limiter.decision_bound(interval))
            }

            fn max_delay(&self) -> Nanos {
                each_limiter!(self, ($($variant)+), limiter => limiter.max_delay())
            }

            fn horizon(&self) -> Nanos {
                each_limiter!(self, ($($variant)+), limiter => limiter.horizon())
            }

            fn nominal(&self, interval: Nanos) -> f64 {
                each_limiter!(self, ($($variant)+), limiter => limiter.nominal(interval))
            }

            fn describe(&self) -> String {
                each_limiter!(self, ($($variant)+), limiter => limiter.describe())
            }

            fn window_edges(&self) -> Option<(Nanos, Nanos)> {
                each_limiter!(self, ($($variant)+), limiter => limiter.window_edges())
            }

            fn fixed_window(&self) -> Option<&fixed_window::FixedWindow> {
                each_limiter!(self, ($($variant)+), limiter => limiter.fixed_window())
            }

            fn state_bytes(&self) -> Option<u64> {
                each_limiter!(self, ($($variant)+), limiter => limiter.state_bytes())
            }

            fn store_ops(&self) -> Option<StoreOps> {
                each_limiter!(self, ($($variant)+), limiter => limiter.store_ops())
            }

            fn hint_granularity(&self) -> Nanos {
                each_limiter!(self, ($($variant)+), limiter => limiter.hint_granularity())
            }

            fn keys_matter(&self) -> bool {
                each_limiter!(self, ($($variant)+), limiter => limiter.keys_matter())
            }

            fn every_window_edges(&self) -> Vec<(Nanos, Nanos)> {
                each_limiter!(self, ($($variant)+), limiter => limiter.every_window_edges())
            }

            fn changes(&self) -> Vec<Nanos> {
                each_limiter!(self, ($($variant)+), limiter => limiter.changes())
            }

            fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
                each_limiter!(self, ($($variant)+), limiter => limiter.memory_at_most(keys, requests, hashed))
            }

            fn resets(&self) -> u64 {
                each_limiter!(self, ($($variant)+), limiter => limiter.resets())
            }
        }
    };
}

/// A loop over many arrivals with the limiter's kind matched once: the
/// simulator's open-loop hot path, monomorphised per kind so each decision
/// is inlined into it.
pub trait Decisions {
    /// Hears each arrival and the decision on it, in order.
    fn decided(&mut self, arrival: crate::traffic::Arrival, decision: Decision);

    /// Asks for what it keeps for `key`, whose decision it hears `ahead`
    /// requests from now, to be brought into the cache (see
    /// [`crate::traffic::slots::prefetch`]).
    fn prefetch(&self, key: Key, ahead: usize) {
        let _ = (key, ahead);
    }

    /// Whether [`Decisions::prefetch`] is worth asking.
    fn prefetches(&self) -> bool {
        false
    }
}

/// The kinds with `count_rejected`: a rejected request counts in the
/// window, the log or the counter as an admitted one does.
pub const COUNTS_REJECTED: &[&str] = &[
    "fixed-window",
    "sliding-log",
    "sliding-counter",
    "envoy-ratelimit",
];

kinds! {
    FixedWindow = fixed_window,
    SmallerWindow = smaller_window,
    Buffered = buffered,
    SlidingLog = sliding_log,
    SlidingCounter = sliding_counter,
    TokenBucket = token_bucket,
    Chain = chain,
    Gcra = gcra,
    SlidingBuckets = sliding_buckets,
    EnvoyLocal = envoy_local,
    NginxLimitReq = nginx_limit_req,
    EnvoyRatelimit = envoy_ratelimit,
    SpringCloudGateway = spring_cloud_gateway,
    HaproxyRate = haproxy_rate,
    Traefik = traefik,
    Kong = kong,
    Sentinel = sentinel,
    Resilience4j = resilience4j,
    Guava = guava,
    ExpressRateLimit = express_rate_limit,
    RateLimiterFlexible = rate_limiter_flexible,
    DjangoRatelimit = django_ratelimit,
    Bucket4j = bucket4j,
    Redisson = redisson,
    Upstash = upstash,
    Bottleneck = bottleneck,
    RedisCell = redis_cell,
    Slowapi = slowapi,
}

impl Limiter {
    /// Leaves the clients of `empty` keys (requests whose key names
    /// nothing) unlimited, or turns them away, wherever it keeps a state
    /// per key of a gateway that does ([`per_key::PerKey::treat_empty_keys`]), in a chain's layers
    /// and a local cluster's instances too.
    pub fn treat_empty_keys(&mut self, empty: &crate::traffic::EmptyKeys) {
        match self {
            Limiter::PerKey(per) => per.treat_empty_keys(empty),
            Limiter::Chain(chain) => {
                for layer in chain.layers_mut() {
                    layer.treat_empty_keys(empty);
                }
            }
            Limiter::Cluster(cluster) => cluster.treat_empty_keys(empty),
            _ => {}
        }
    }
}

/// The most `limiter` admits in any of `intervals`, above its bound, over
/// arrivals at `times_ms` (milliseconds, sorted here), or `None`: the module
/// property tests of kinds whose clock is whole seconds or milliseconds.
#[cfg(test)]
pub(crate) fn over_bound(
    limiter: &mut impl RateLimiter,
    times_ms: &mut [u64],
    intervals: &[Nanos],
) -> Option<String> {
    times_ms.sort_unstable();
    let admitted: Vec<u64> = times_ms
        .iter()
        .map(|ms| ms * 1_000_000)
        .filter(|&t| limiter.decide(Nanos(t)).admitted())
        .collect();
    intervals.iter().find_map(|&interval| {
        let (worst, bound) = (worst_in(&admitted, interval), limiter.bound(interval));
        (worst > bound).then(|| format!("{worst} > {bound} over {interval}"))
    })
}

/// The most of `admitted` (sorted times, ns) in any interval `[s, s + interval)`,
/// by brute force: for the property tests of kinds whose clock is whole
/// seconds or milliseconds, which the contract tests' microsecond traffic
/// never crosses.
#[cfg(test)]
pub(crate) fn worst_in(admitted: &[u64], interval: Nanos) -> u64 {
    admitted
        .iter()
        .map(|&s| {
            admitted
                .iter()
                .filter(|&&t| t >= s && t - s < interval.get())
                .count()
        })
        .max()
        .unwrap_or(0) as u64
}

#[cfg(test)]
mod tests;
