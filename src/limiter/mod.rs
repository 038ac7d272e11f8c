//! Rate limiters: one file per algorithm, each with its configuration, its
//! state machine and its theoretical worst case over any traffic.

mod align;
pub mod cluster;
mod decision;
pub mod per_key;

pub use self::align::Align;
pub use self::decision::{Decision, Hint};

use serde::Deserialize;

use crate::config::KindTable;
use crate::error::{FieldError, field_error};

/// [`Kind::parameter`] and [`Kind::with_parameter`] for a configuration
/// whose sizing parameter is its `NonZeroU64` field `$field` (by default
/// `threshold`).
macro_rules! parameter_is {
    () => {
        $crate::limiter::parameter_is!(threshold);
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

/// What every limiter does: decide arrivals in time order, and state what it
/// promises and what it can let through at worst.
pub trait RateLimiter {
    /// Decides the arrival at `now`, with the hint a rejected client is
    /// given. Arrivals come in non-decreasing time order; simultaneous
    /// arrivals are decided one by one.
    #[inline]
    fn decide(&mut self, now: Nanos) -> Decision {
        self.decide_with::<true>(now)
    }

    /// [`RateLimiter::decide`], working out a rejection's hint only when
    /// `HINTS` (otherwise [`Hint::NONE`]): the same admissions either way.
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision;

    /// Decides a request of client `key`: the same as for any key, unless
    /// the limiter (or a layer of it) keeps state per key (`per = "key"`).
    #[inline]
    fn decide_keyed<const HINTS: bool>(&mut self, now: Nanos, key: Key) -> Decision {
        let _ = key;
        self.decide_with::<HINTS>(now)
    }

    /// Takes back the admission just made at `now`, as if it had been
    /// rejected: a chain with `count_rejected = false` does this to earlier
    /// layers when a later one rejects. A limiter that counts rejected
    /// requests too (HAProxy's `track-sc`, Kong's redis policy,
    /// `count_rejected = true`) keeps its count, as a rejection would.
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

    /// What one key's state costs where it is usually kept (a Redis key, an
    /// nginx zone), in bytes, when known: the figures are measured (Redis
    /// 7.0 with jemalloc, `INFO memory` over 10,000 keys; the test that
    /// measures them is in `tests/integration/redis_real.rs`) or documented (nginx).
    fn state_bytes(&self) -> Option<u64> {
        None
    }

    /// How coarse its rejections' hints are, as the real header carries
    /// them: 0 for an exact instant; 1 s for a whole number of seconds
    /// counted from the response (Kong, envoyproxy/ratelimit), which lands
    /// up to a second after the earliest instant a retry can pass.
    fn hint_granularity(&self) -> Nanos {
        Nanos::ZERO
    }

    /// The edges of every fixed window it keeps (length, phase), where
    /// several windows decide together (Kong's periods, a chain's layers);
    /// by default its one [`RateLimiter::window_edges`].
    fn every_window_edges(&self) -> Vec<(Nanos, Nanos)> {
        self.window_edges().into_iter().collect()
    }

    /// The instants, in true time, at which it changes on its own: a
    /// store's outages starting and ending, failovers, clock steps. The
    /// adversary tries its patterns after each as well as at the start.
    fn changes(&self) -> Vec<Nanos> {
        Vec::new()
    }

    /// Whether it keeps state per client key (`per = "key"`, here or in a
    /// layer or instance): then many keys get more through than one, and
    /// the adversary sends from many.
    fn keys_matter(&self) -> bool {
        false
    }

    /// The most memory its state can take besides the value itself (its
    /// logs, buckets, instances, per-key states) over `requests` requests
    /// from `keys` distinct client keys (synthetic clients are numbered 0 to
    /// `keys` − 1), in bytes: what `--max-memory` checks before a run.
    /// Allocations are counted at their largest capacity.
    fn memory_at_most(&self, _keys: u64, _requests: u64) -> u128 {
        0
    }

    /// Store commands per request and per counter reset in the usual
    /// store-backed implementation, when there is one (`INCR` per request
    /// and `PEXPIRE` per new window, say).
    fn store_ops(&self) -> Option<StoreOps> {
        None
    }

    /// Counters reset so far: windows opened, or rolled over.
    fn resets(&self) -> u64 {
        0
    }

    /// The fixed window it is, if it is one (fixed-window, smaller-window,
    /// buffered): clusters share and `burstsim live` replays only these.
    fn fixed_window(&self) -> Option<&fixed_window::FixedWindow> {
        None
    }
}

/// Store commands an implementation sends: so many per request, and so
/// many more each time a counter resets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreOps {
    /// Commands per request.
    pub per_request: u64,
    /// Commands per counter reset (a new window's expiry).
    pub per_reset: u64,
}

impl std::ops::Add for StoreOps {
    type Output = StoreOps;

    fn add(self, other: StoreOps) -> StoreOps {
        StoreOps {
            per_request: self.per_request + other.per_request,
            per_reset: self.per_reset + other.per_reset,
        }
    }
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

    /// The setting that trades against the sizing parameter, sized together
    /// with it (a bucket's rate against its burst), and its value; `None`
    /// when the kind has none.
    fn companion(&self) -> Option<(&'static str, u64)> {
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

/// Which of a limiter's sized settings to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The sizing parameter ([`Kind::parameter`]).
    Parameter,
    /// The setting sized together with it ([`Kind::companion`]).
    Companion,
}

/// `per` and `evict_after`, taken out of a limiter's table before its kind
/// reads the rest.
struct PerKeyFields {
    evict_after: Option<Nanos>,
}

impl PerKeyFields {
    /// `Some` for `per = "key"`; `None` for `per = "global"` or no `per`.
    fn take(table: &mut toml::Table) -> Result<Option<PerKeyFields>, FieldError> {
        let per = match table.remove("per") {
            None => "global".to_string(),
            Some(toml::Value::String(per)) if per == "key" || per == "global" => per,
            Some(other) => {
                return Err(field_error!(
                    "per",
                    "expected \"global\" or \"key\", got {other}"
                ));
            }
        };
        let evict_after = match table.remove("evict_after") {
            None => None,
            Some(value) => Some(
                Nanos::deserialize(value)
                    .map_err(|err| FieldError::at("evict_after", err.to_string()))?,
            ),
        };
        match (per.as_str(), evict_after) {
            ("global", Some(_)) => Err(field_error!(
                "evict_after",
                "forgets idle keys of a limiter with per = \"key\"; add it, or drop evict_after"
            )),
            ("global", None) => Ok(None),
            _ => Ok(Some(PerKeyFields { evict_after })),
        }
    }
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
                if let Some(per) = PerKeyFields::take(&mut table)? {
                    let inner = LimiterConfig::from_table(table)?;
                    return Ok(LimiterConfig::PerKey(per_key::Config {
                        inner: Box::new(inner),
                        evict_after: per.evict_after,
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

            /// The same configuration with the sizing parameter set to `value`.
            pub fn with_parameter(&self, value: u64) -> LimiterConfig {
                self.with_setting(Setting::Parameter, value)
            }

            /// The setting sized together with the parameter, and its value
            /// (see [`Kind::companion`]).
            pub fn companion(&self) -> Option<(&'static str, u64)> {
                match self {
                    $(LimiterConfig::$variant(config) => config.companion(),)+
                    LimiterConfig::Cluster(config) => config.inner.companion(),
                    LimiterConfig::PerKey(config) => config.inner.companion(),
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
            /// Decides every arrival of `chunk` in order without HINTS (an open
            /// loop hears no hints), telling `to` each decision: the kind is
            /// matched once, and the loop is compiled for each.
            #[inline]
            pub fn decide_all<T: crate::traffic::Timed>(&mut self, chunk: &[T], to: &mut impl Decisions) {
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

            fn memory_at_most(&self, keys: u64, requests: u64) -> u128 {
                each_limiter!(self, ($($variant)+), limiter => limiter.memory_at_most(keys, requests))
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
