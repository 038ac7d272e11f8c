//! The store-backed application libraries in a cluster: with either shared
//! mode, one copy of the library's state in the shared store (Redis, a
//! Django cache), decided on whichever clock the library itself keys it by
//! (the mode's name cannot change that), and, when the store does not
//! answer, the library's own failure default:
//!
//! - `@upstash/ratelimit`: keys and `now` from each caller's `Date.now()`;
//!   each instance keeps its own ephemeral cache of refused identifiers,
//!   which still refuses during an outage; any other request succeeds once
//!   `timeout` has passed (`Ratelimit.limit` races Redis against it);
//! - `django-ratelimit`: windows from each caller's `time.time()`; a cache
//!   that fails refuses (`RATELIMIT_FAIL_OPEN` False), or passes with
//!   `fail_open`;
//! - `rate-limiter-flexible` (`RateLimiterRedis`): records that expire on
//!   the store's clock; the `insuranceLimiter` in each instance answers
//!   while it fails, or the consume rejects with the store's error;
//! - `express-rate-limit` with a Redis store: windows that expire on the
//!   store's clock; a store error becomes a 500, or a pass with
//!   `pass_on_store_error`;
//! - `redis-cell`: `CL.THROTTLE` in Redis, on its clock; a failed call
//!   throws into the application (outages refused).

use std::collections::HashMap;

use super::clock::Clock;
use super::mode::{Mode, Reading, Stretch};
use crate::error::FieldError;
use crate::limiter::{Context, Decision, Hint, Limiter, LimiterConfig, RateLimiter, per_key};
use crate::time::Nanos;
use crate::traffic::Key;

const MS: u64 = 1_000_000;

/// Whose clock cuts the shared state's windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Each caller's clock (the library computes the key or `now` itself).
    Instance,
    /// The store's (keys expire there).
    Store,
}

/// What a library does when its store does not answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Down {
    /// Lets the request through.
    Pass,
    /// Refuses it, with no hint.
    Refuse,
    /// Lets it through once this many nanoseconds have passed (Upstash).
    PassAfter(u64),
    /// Asks the instance's own insurance limiter.
    Insurance,
    /// Throws into the application's code: outages are refused.
    Throws,
}

/// A library kind's settings that matter when the store is shared.
#[derive(Clone, Debug)]
pub struct Shared {
    /// The kind, as scenario files name it.
    pub kind: &'static str,
    /// Whose clock.
    pub side: Side,
    /// Its failure default.
    pub down: Down,
    /// The state the store keeps (without any per-process cache).
    store: LimiterConfig,
    /// Upstash's ephemeral cache, per instance.
    cache: bool,
    /// The insurance limiter each instance runs.
    insurance: Option<LimiterConfig>,
}

/// The store-backed library `inner` runs, if it is one (`per = "key"`
/// keeps its keys in the store and the insurance alike).
pub fn shared(inner: &LimiterConfig) -> Option<Shared> {
    use crate::limiter::upstash;
    Some(match inner {
        LimiterConfig::PerKey(per) => {
            let wrap = |config: LimiterConfig| {
                LimiterConfig::PerKey(per_key::Config {
                    inner: Box::new(config),
                    ..per.clone()
                })
            };
            let own = shared(&per.inner)?;
            Shared {
                store: wrap(own.store),
                insurance: own.insurance.map(wrap),
                ..own
            }
        }
        LimiterConfig::Upstash(config) => Shared {
            kind: inner.kind(),
            side: Side::Instance,
            down: Down::PassAfter(config.timeout.get()),
            store: LimiterConfig::Upstash(upstash::Config {
                ephemeral_cache: false,
                ..config.clone()
            }),
            cache: config.ephemeral_cache,
            insurance: None,
        },
        LimiterConfig::DjangoRatelimit(config) => {
            Shared::kept(inner, Side::Instance, config.fail_open)
        }
        LimiterConfig::RateLimiterFlexible(config) => Shared {
            down: if config.insurance_points.is_some() {
                Down::Insurance
            } else {
                Down::Refuse
            },
            insurance: config.insurance().map(LimiterConfig::RateLimiterFlexible),
            ..Shared::kept(inner, Side::Store, false)
        },
        // CL.THROTTLE runs in Redis on its clock; a failed call is the
        // application's error to handle.
        LimiterConfig::RedisCell(_) => Shared {
            down: Down::Throws,
            ..Shared::kept(inner, Side::Store, false)
        },
        LimiterConfig::ExpressRateLimit(config) => {
            Shared::kept(inner, Side::Store, config.pass_on_store_error)
        }
        _ => return None,
    })
}

impl Shared {
    /// `inner` kept in the store as it is, on `side`'s clock, refusing while
    /// the store is down unless it `passes`.
    fn kept(inner: &LimiterConfig, side: Side, passes: bool) -> Shared {
        Shared {
            kind: inner.kind(),
            side,
            down: if passes { Down::Pass } else { Down::Refuse },
            store: inner.clone(),
            cache: false,
            insurance: None,
        }
    }
}

/// What answered the last admission, to take it back there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Store,
    Insurance,
    Passed,
}

/// The store's state, each instance's cache and insurance.
#[derive(Clone, Debug)]
pub struct Library {
    store: Limiter,
    side: Side,
    /// The store's clock (read for `Side::Store`).
    clock: Clock,
    rtt: u64,
    /// The latest reading the store's state has seen: it never goes back.
    last: u64,
    down: Down,
    /// Upstash's ephemeral caches: per instance and identifier, the reset
    /// (ms on the instance's clock) of its last refusal.
    cache: Option<HashMap<(usize, Key), u64>>,
    per_key: bool,
    insurance: Vec<Limiter>,
    source: Source,
    instances: usize,
}

impl Library {
    /// `shared`'s state in a store on `clock`, reached in `rtt`, for
    /// `instances` instances.
    pub fn new(
        shared: &Shared,
        context: Context,
        clock: Clock,
        rtt: u64,
        instances: usize,
    ) -> Result<Library, FieldError> {
        let insurance = match &shared.insurance {
            Some(config) => vec![config.build(context)?; instances],
            None => Vec::new(),
        };
        Ok(Library {
            per_key: matches!(shared.store, LimiterConfig::PerKey(_)),
            store: shared.store.build(context)?,
            side: shared.side,
            clock,
            rtt,
            last: 0,
            down: shared.down,
            cache: shared.cache.then(HashMap::new),
            insurance,
            source: Source::Store,
            instances,
        })
    }

    /// The identifier Upstash's cache knows the request by.
    fn identifier(&self, at: &Reading) -> (usize, Key) {
        (
            at.instance,
            if self.per_key { at.key } else { Key::DEFAULT },
        )
    }

    /// The instance's cache refusing the request: still in the millisecond
    /// of the reset it remembers (`reset < Date.now()` lets it go).
    fn cached<const HINTS: bool>(&mut self, at: &Reading) -> Option<Decision> {
        let id = self.identifier(at);
        let cache = self.cache.as_mut()?;
        let &reset = cache.get(&id)?;
        if reset < at.clock / MS {
            cache.remove(&id);
            return None;
        }
        let hint = Hint {
            retry_at: None,
            reset_at: Some(Nanos(reset.saturating_mul(MS))),
            ..Hint::NONE
        };
        Some(Decision::Reject(super::in_true_time(
            hint, at.clock, at.now,
        )))
    }
}

impl Mode for Library {
    /// The store's state decides on the library's clock (the store's half a
    /// round trip later); a refusal is remembered in the instance's cache.
    fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision {
        if let Some(refused) = self.cached::<HINTS>(&at) {
            return refused;
        }
        let reading = match self.side {
            Side::Instance => at.clock,
            Side::Store => self.clock.read(at.now.saturating_add(self.rtt / 2)),
        };
        self.last = self.last.max(reading);
        self.source = Source::Store;
        let decision = if self.cache.is_some() {
            self.store.decide_keyed::<true>(Nanos(self.last), at.key)
        } else {
            self.store.decide_keyed::<HINTS>(Nanos(self.last), at.key)
        };
        let Decision::Reject(hint) = decision else {
            return decision;
        };
        let id = self.identifier(&at);
        if let (Some(cache), Some(reset)) = (&mut self.cache, hint.reset_at) {
            cache.insert(id, reset.get() / MS);
        }
        Decision::Reject(super::in_true_time(hint, self.last, at.now))
    }

    /// The library's failure default.
    fn when_down<const HINTS: bool>(&mut self, at: Reading) -> Option<Decision> {
        self.source = Source::Passed;
        Some(match self.down {
            Down::Pass => Decision::Admit,
            Down::Refuse | Down::Throws => Decision::Reject(Hint::NONE),
            Down::PassAfter(timeout) => self
                .cached::<HINTS>(&at)
                .unwrap_or(Decision::Delay(Nanos(timeout))),
            Down::Insurance => {
                self.source = Source::Insurance;
                match self.insurance[at.instance].decide_keyed::<HINTS>(Nanos(at.clock), at.key) {
                    Decision::Reject(hint) => {
                        Decision::Reject(super::in_true_time(hint, at.clock, at.now))
                    }
                    decision => decision,
                }
            }
        })
    }

    fn refund(&mut self, instance: usize, clock: u64) {
        match self.source {
            Source::Store => self.store.refund(Nanos(self.last)),
            Source::Insurance => self.insurance[instance].refund(Nanos(clock)),
            Source::Passed => {}
        }
    }

    /// The state's own bound over the longest stretch of its clock the
    /// interval covers (one clock for every instance on the instance side).
    fn bound(&self, stretch: &Stretch) -> u64 {
        let clock = match self.side {
            Side::Instance => stretch.clocks.first().unwrap_or(&self.clock),
            Side::Store => &self.clock,
        };
        self.store
            .bound(Nanos(clock.stretch(stretch.interval, stretch.duration)))
    }

    /// Unbounded when it lets requests through; each instance's insurance.
    fn down_bound(&self, stretch: &Stretch) -> Option<u64> {
        Some(match self.down {
            Down::Pass | Down::PassAfter(_) => u64::MAX,
            Down::Refuse | Down::Throws => 0,
            Down::Insurance => super::bound_on_own_clocks(&self.insurance, stretch),
        })
    }

    fn max_delay(&self) -> Nanos {
        let down = match self.down {
            Down::PassAfter(timeout) => Nanos(timeout),
            Down::Insurance => self
                .insurance
                .iter()
                .map(Limiter::max_delay)
                .max()
                .unwrap_or_default(),
            Down::Pass | Down::Refuse | Down::Throws => Nanos::ZERO,
        };
        self.store.max_delay().max(down)
    }

    fn step_times(&self) -> Vec<Nanos> {
        match self.side {
            Side::Store => self.clock.step_times(),
            Side::Instance => Vec::new(),
        }
    }

    fn keys_matter(&self) -> bool {
        self.store.keys_matter()
    }

    /// The store's state, each instance's insurance, and a cache entry per
    /// instance and key.
    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        let instances = self.instances as u128;
        let insurance = self
            .insurance
            .first()
            .map_or(0, |l| l.memory_at_most(keys, requests, hashed) * instances);
        let cache = if self.cache.is_some() {
            crate::limiter::allocation::<((usize, Key), u64)>(instances * u128::from(keys.max(1)))
        } else {
            0
        };
        self.store.memory_at_most(keys, requests, hashed) + insurance + cache
    }

    fn nominal(&self, interval: Nanos) -> Option<f64> {
        Some(self.store.nominal(interval))
    }

    fn describe(&self, _: String) -> (String, &'static str) {
        (
            self.store.describe(),
            match self.down {
                Down::Pass => "one shared store; everything passes when it fails",
                Down::Refuse => "one shared store; everything is refused when it fails",
                Down::Throws => "one shared store",
                Down::PassAfter(_) => {
                    "one shared store; everything passes after the timeout when it fails"
                }
                Down::Insurance => {
                    "one shared store; each instance's insurance limiter when it fails"
                }
            },
        )
    }
}

/// Refuses what a store-backed library in a shared store does not do.
pub fn check(shared: &Shared, cluster: &super::ClusterConfig) -> Result<(), FieldError> {
    use super::{OnError, Update};
    let kind = shared.kind;
    let one_clock = cluster.offsets.len() <= 1
        && cluster.drift_ppm.len() <= 1
        && cluster.offset_spread.is_none()
        && cluster.steps.iter().all(|s| s.on == super::Target::Store);
    let refused = match () {
        _ if shared.side == Side::Instance && !one_clock => Some((
            "cluster.offsets",
            format!("{kind}'s shared windows are modelled with one clock for every instance: give at most one offset and one drift_ppm, no offset_spread and no steps on instances"),
        )),
        _ if cluster.divide => Some((
            "cluster.divide",
            format!("the instances share one {kind} limit in the store; drop divide"),
        )),
        _ if cluster.sync_interval.is_some() => Some((
            "cluster.sync_interval",
            format!("{kind} asks the store on every request; drop sync_interval"),
        )),
        _ if cluster.store.update == Update::ReadThenIncrement => Some((
            "cluster.store.update",
            format!("{kind} counts in one step in the store; drop `update`"),
        )),
        _ if cluster.store.on_error != OnError::Allow => Some((
            "cluster.store.on_error",
            format!("{kind} says itself what a failed store does ({}); drop on_error", down_setting(kind)),
        )),
        _ if !cluster.store.failover.is_empty() => Some((
            "cluster.store.failover",
            format!("not modelled for {kind}; model the store's loss as an outage"),
        )),
        _ if shared.down == Down::Throws && !cluster.store.outages.is_empty() => Some((
            "cluster.store.outages",
            format!("when its store fails, {kind}'s call throws and what follows is the application's own code: not modelled; drop the outages for this limiter"),
        )),
        _ if shared.down == Down::PassAfter(0) && !cluster.store.outages.is_empty() => Some((
            "timeout",
            "with timeout = 0 Upstash waits on Redis as long as it is down: not modelled; give a timeout".to_owned(),
        )),
        _ => None,
    };
    refused.map_or(Ok(()), |(field, message)| {
        Err(FieldError::at(field, message))
    })
}

/// The setting that says what a library does without its store.
fn down_setting(kind: &str) -> &'static str {
    match kind {
        "upstash" => "timeout",
        "django-ratelimit" => "fail_open",
        "rate-limiter-flexible" => "insurance_points and insurance_duration",
        "redis-cell" => "none: the call throws",
        _ => "pass_on_store_error",
    }
}
