//! Many instances of one limiter, as deployed: each gateway instance with its
//! own counter, or all sharing one counter in a store (Redis), with clocks
//! that disagree, drift and get stepped by NTP. Time here is true time; each
//! instance and the store read their own clock.

mod batched;
mod clock;
mod counter;
pub mod faults;
mod instance_clock;
mod library;
mod local;
mod mode;
mod settings;
mod shared_log;
mod store_clock;
mod token_server;

use std::num::NonZeroU64;

use serde::Deserialize;

use self::batched::Batched;
pub use self::clock::{Clock, Offset, Step, Target};
use self::counter::Counter;
use self::faults::{Failover, FaultState, Faults, OnError, Outage};
use self::instance_clock::InstanceClock;
use self::library::Library;
use self::local::Local;
use self::mode::{Reading, Stretch};
pub use self::settings::{Balance, ClusterConfig, Mode, Store, Update};
use self::shared_log::SharedLog;
use self::store_clock::StoreClock;
use self::token_server::TokenServer;
use super::{Context, Decision, Hint, Limiter, LimiterConfig, RateLimiter};
use crate::error::FieldError;
use crate::random;
use crate::time::Nanos;
use crate::traffic::Key;

/// How a cluster of local instances describes its counting: the verdict
/// tells instances that each allow the whole limit from a shared count.
pub const OWN_COUNTERS: &str = "each with its own counter";

/// How a cluster describes a store that fails over and loses increments.
pub const FAILOVERS: &str = "failover(s)";

/// `inner` run as a cluster of `config.instances`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The limiter each instance runs.
    pub inner: Box<LimiterConfig>,
    /// The cluster.
    pub cluster: ClusterConfig,
    /// The run's length, for the clocks' extremes in the bound.
    pub duration: Nanos,
}

impl Config {
    /// Fresh instances and an empty store.
    pub fn build(&self, context: Context) -> Result<Cluster, FieldError> {
        let prototype = self.inner.build(context)?;
        let cluster = &self.cluster;
        let library = (cluster.mode != Mode::Local)
            .then(|| library::shared(&self.inner))
            .flatten();
        cluster.check(self.inner.kind(), &prototype, library.as_ref())?;
        let k = cluster.instances.get() as usize;
        let (window, threshold) = prototype
            .fixed_window()
            .map_or((0, 0), |fixed| (fixed.window().get(), fixed.threshold()));
        let overall = match &prototype {
            Limiter::Redisson(log) if !log.per_client() => Some(log.clone()),
            _ => None,
        };
        let token_server = match &*self.inner {
            LimiterConfig::Sentinel(rule) if rule.cluster_mode => Some(rule.for_cluster(k as u64)?),
            _ => None,
        };
        let fallback = token_server.as_ref().map(|(_, _, fallback)| *fallback);
        let counter = match (
            cluster.mode,
            cluster.sync_interval,
            overall,
            token_server,
            &library,
        ) {
            (_, _, _, _, Some(shared)) => Counter::Library(Library::new(
                shared,
                context,
                cluster.store_clock(),
                cluster.store.rtt.get(),
                k,
            )?),
            (_, _, _, Some((server, local, fallback)), None) => {
                Counter::TokenServer(TokenServer::new(
                    server,
                    cluster.store_clock(),
                    cluster.store.rtt.get(),
                    local,
                    k,
                    fallback,
                ))
            }
            // Redisson's overall log is in the store whatever the mode.
            (_, _, Some(log), None, None) => Counter::SharedLog(SharedLog::new(log)),
            (Mode::Local, _, None, None, None) => {
                let instance = if cluster.divide {
                    match &*self.inner {
                        // A rate divides exactly: each instance refills at rate/K.
                        LimiterConfig::TokenBucket(bucket) => {
                            Limiter::TokenBucket(bucket.build_shared(k as u64)?)
                        }
                        inner => {
                            // Whole requests do not divide: each gets ⌊N/K⌋, at least 1.
                            let (_, value) = inner.parameter(context);
                            inner
                                .with_parameter((value / k as u64).max(1))
                                .build(context)?
                        }
                    }
                } else {
                    prototype
                };
                Counter::Local(Local::new(vec![instance; k]))
            }
            (Mode::SharedInstanceClock, Some(interval), None, None, None) => {
                Counter::Batched(Batched::new(window, threshold, interval.get(), k))
            }
            (Mode::SharedInstanceClock, None, None, None, None) => {
                Counter::InstanceClock(InstanceClock::new(
                    window,
                    threshold,
                    cluster.store.update,
                    cluster.store.rtt.get(),
                ))
            }
            (Mode::SharedStoreClock, _, None, None, None) => Counter::StoreClock(StoreClock::new(
                window,
                threshold,
                cluster.store_clock(),
                cluster.store.rtt.get(),
            )),
        };
        let store = &cluster.store;
        // Sentinel's rule, or the library, says what a failed request does.
        let on_error = match (fallback, library.map(|l| l.down)) {
            (Some(true), _) | (_, Some(library::Down::Insurance)) => OnError::Local,
            (_, Some(library::Down::Refuse)) => OnError::Deny,
            (Some(false), _) | (_, Some(_)) => OnError::Allow,
            (None, None) => store.on_error,
        };
        let faults = Faults::new(
            store.outages.clone(),
            on_error,
            store.failover.clone(),
            self.duration,
        )?;
        Ok(Cluster {
            faults: (!faults.is_empty()).then(|| FaultState::new(faults, k, window, threshold)),
            last_source: Answerer::Store,
            balance: cluster.balance,
            clients: cluster.clients.map_or(1_000, NonZeroU64::get),
            next: 0,
            rng: random::GOLDEN,
            clocks: (0..k).map(|i| cluster.clock(i)).collect(),
            last_clock: vec![0; k],
            admitted: vec![0; k],
            last: 0,
            counter,
            window,
            threshold,
            duration: self.duration.get(),
        })
    }
}

/// What answered the last admission, to take it back there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answerer {
    Store,
    /// The store was down and the request let through.
    Allowed,
    /// The store was down and this instance's own window admitted it.
    Fallback,
    /// The store was down and the mode answered itself.
    Mode,
}

/// The running cluster: requests balanced over instances, each reading its
/// own clock, deciding on the counter of the cluster's mode.
#[derive(Clone, Debug)]
pub struct Cluster {
    balance: Balance,
    clients: u64,
    /// Round robin: the next instance.
    next: usize,
    /// Random and hash balancing: the SplitMix64 state.
    rng: u64,
    clocks: Vec<Clock>,
    /// Each instance's last clock reading: its limiter never sees time go back.
    last_clock: Vec<u64>,
    /// Admitted per instance.
    admitted: Vec<u64>,
    /// The instance of the last admission, to take it back.
    last: usize,
    counter: Counter,
    /// The shared window and threshold (0 in local mode).
    window: u64,
    threshold: u64,
    duration: u64,
    /// The store's outages and failovers, when it has any.
    faults: Option<FaultState>,
    /// What answered the last admission.
    last_source: Answerer,
}

/// A hint given on a clock that read `clock` at true time `now`, in true time:
/// the client hears "retry in d", and d is the same on every clock.
fn in_true_time(hint: Hint, clock: u64, now: u64) -> Hint {
    let shift =
        |at: Option<Nanos>| at.map(|at| Nanos(now.saturating_add(at.get().saturating_sub(clock))));
    Hint {
        retry_at: shift(hint.retry_at),
        reset_at: shift(hint.reset_at),
        forbidden: hint.forbidden,
    }
}

/// A shared window's answer: a rejection hints the end of window `key` of
/// length `window` on the instance's clock, which read `clock` at true time `now`.
fn window_decision<const HINTS: bool>(
    admit: bool,
    key: u64,
    window: u64,
    clock: u64,
    now: u64,
) -> Decision {
    Decision::admit_or::<HINTS>(admit, || {
        let end = key.saturating_add(1).saturating_mul(window);
        in_true_time(Hint::at_reset(end), clock, now)
    })
}

impl Cluster {
    /// Admitted requests per instance.
    pub fn admitted_per_instance(&self) -> &[u64] {
        &self.admitted
    }

    /// Instances that each run their own limiter (local mode: nginx's or
    /// HAProxy's own zone or table on each host, each gateway's own Redis)
    /// leave `empty` keys unlimited, or turn them away, where their gateway
    /// does ([`Limiter::treat_empty_keys`]);
    /// shared counters are the libraries', which keep every key.
    pub fn treat_empty_keys(&mut self, empty: &crate::traffic::EmptyKeys) {
        if let Counter::Local(local) = &mut self.counter {
            local.treat_empty_keys(empty);
        }
    }

    /// The store's outages and what instances do during them, if any.
    pub fn outages(&self) -> Option<(&[Outage], OnError)> {
        let faults = self.faults.as_ref()?.faults();
        (!faults.outages.is_empty()).then_some((faults.outages.as_slice(), faults.on_error))
    }

    /// The shared counter loses `increments` (window key, for instance-clock
    /// counters) in a failover.
    fn lose(&mut self, increments: &[faults::Increment]) {
        // Local and batched counters have no failovers: the configuration
        // check refuses them.
        self.counter.lose(increments);
    }

    fn pick(&mut self) -> usize {
        let k = self.clocks.len();
        match self.balance {
            Balance::RoundRobin => {
                let i = self.next;
                self.next = (i + 1) % k;
                i
            }
            Balance::Random | Balance::Hash => {
                let z = random::splitmix64(&mut self.rng);
                let key = if self.balance == Balance::Hash {
                    z % self.clients
                } else {
                    z
                };
                let spread = key.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 16;
                (spread % k as u64) as usize
            }
        }
    }

    /// See [`instance_clock_span`].
    fn instance_clock_span(&self, interval: u64) -> u64 {
        instance_clock_span(&self.clocks, self.duration, interval)
    }
}

/// The span of instance-clock time an interval of `interval` true
/// nanoseconds can cover on some clock of `clocks` over a run of
/// `duration`: the interval, the fastest drift over it, and the spread
/// between all the clocks' extremes. Two readings `interval` apart, on any
/// two of the clocks, differ by at most this.
fn instance_clock_span(clocks: &[Clock], duration: u64, interval: u64) -> u64 {
    let l = i128::from(interval);
    let (low, high) = clocks
        .iter()
        .map(|c| c.extremes(duration))
        .fold((i128::MAX, i128::MIN), |(lo, hi), (a, b)| {
            (lo.min(a), hi.max(b))
        });
    let drift = clocks.iter().map(|c| c.drift_ppm.max(0)).max().unwrap_or(0);
    let span = l + l * i128::from(drift) / 1_000_000 + (high - low).max(0);
    u64::try_from(span).unwrap_or(u64::MAX)
}

/// Each instance's limiter's bound over the longest stretch of its own
/// clock `stretch`'s interval can cover, summed.
fn bound_on_own_clocks<'a, L: RateLimiter + 'a>(
    limiters: impl IntoIterator<Item = &'a L>,
    stretch: &Stretch,
) -> u64 {
    limiters
        .into_iter()
        .zip(stretch.clocks)
        .map(|(limiter, clock)| {
            limiter.bound(Nanos(clock.stretch(stretch.interval, stretch.duration)))
        })
        .fold(0, u64::saturating_add)
}

impl RateLimiter for Cluster {
    /// Outages starting and ending, failovers and every instance's (or the
    /// store's) clock steps.
    fn changes(&self) -> Vec<Nanos> {
        let mut at: Vec<Nanos> = self.clocks.iter().flat_map(Clock::step_times).collect();
        if let Some(faults) = self.faults.as_ref().map(FaultState::faults) {
            at.extend(faults.outages.iter().flat_map(|o| [o.at, o.end()]));
            at.extend(faults.failovers.iter().map(|f| f.at));
        }
        at.extend(self.counter.step_times());
        at
    }

    /// In local mode, as its instances' limiter; shared counters are global.
    fn keys_matter(&self) -> bool {
        self.counter.keys_matter()
    }

    /// Every instance: its clock, its figures and, in local mode, its own
    /// limiter, which may see any key and its share of the requests.
    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        let instances = self.clocks.len() as u128;
        instances * 64 + self.counter.memory_at_most(keys, requests, hashed)
    }

    /// Rejects with the hint of whatever decided — the instance's limiter,
    /// or the shared window's end on the clock that keys it — converted to
    /// true time: the client hears a duration, the same on every clock.
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        self.decide_keyed::<HINTS>(now, Key::DEFAULT)
    }

    /// An instance's own limiter hears the key (it may keep state per key).
    fn decide_keyed<const HINTS: bool>(&mut self, now: Nanos, key: Key) -> Decision {
        let now = now.get();
        let instance = self.pick();
        let clock = self.clocks[instance]
            .read(now)
            .max(self.last_clock[instance]);
        self.last_clock[instance] = clock;
        if let Some(faults) = &mut self.faults {
            for lost in faults.failovers_due(now) {
                self.lose(&lost);
            }
        }
        if let Some(faults) = &mut self.faults
            && faults.down(now)
        {
            let reading = Reading {
                instance,
                clock,
                now,
                key,
                oldest: 0,
            };
            let (decision, source) = match self.counter.when_down::<HINTS>(reading) {
                Some(decision) => (decision, Answerer::Mode),
                None => (
                    faults.answer::<HINTS>(instance, clock, now),
                    match faults.faults().on_error {
                        OnError::Local => Answerer::Fallback,
                        _ => Answerer::Allowed,
                    },
                ),
            };
            if decision.admitted() {
                self.admitted[instance] += 1;
                self.last = instance;
                self.last_source = source;
            }
            return decision;
        }
        let oldest = match self.counter {
            Counter::InstanceClock(_) => self.last_clock.iter().min().copied().unwrap_or(0),
            _ => 0,
        };
        let decision = self.counter.decide::<HINTS>(Reading {
            instance,
            clock,
            now,
            key,
            oldest,
        });
        if decision.admitted() {
            self.admitted[instance] += 1;
            self.last = instance;
            self.last_source = Answerer::Store;
            if let Some(faults) = &mut self.faults {
                faults.journal(now, self.counter.last_key());
            }
        }
        decision
    }

    fn refund(&mut self, _now: Nanos) {
        let instance = self.last;
        self.admitted[instance] -= 1;
        match self.last_source {
            Answerer::Store | Answerer::Mode => {}
            Answerer::Allowed => return,
            Answerer::Fallback => {
                if let Some(faults) = &mut self.faults {
                    faults.refund(instance, self.last_clock[instance]);
                }
                return;
            }
        }
        self.counter.refund(instance, self.last_clock[instance]);
    }

    /// Local: each instance's bound over the longest stretch of its own
    /// clock an interval of L can cover, summed. Shared with instance
    /// clocks: N per window key (K·N when batched) over every key any
    /// instance's clock can read in an interval of L (L plus the spread
    /// between the clocks: 3N for a spread under W); none for a
    /// read-then-increment counter, where every request within a round trip
    /// sees the same count (N + r·rtt per window for a steady rate r). Store
    /// clock: N per store window met, with forward steps shortening windows.
    ///
    /// With store faults: none when an outage lets everything through; with
    /// `local` fallbacks, K instances' own windows besides; each failover
    /// can give back what the counter admitted in its `lost`.
    fn bound(&self, interval: Nanos) -> u64 {
        let l = interval.get();
        let store = self.store_bound(l);
        let Some(faults) = self.faults.as_ref().map(FaultState::faults) else {
            return store;
        };
        let mut bound = store;
        if let Some(down) = self.counter.down_bound(&self.stretch(l))
            && !faults.outages.is_empty()
        {
            bound = bound.saturating_add(down);
        } else if !faults.outages.is_empty() {
            match faults.on_error {
                OnError::Allow => return u64::MAX,
                OnError::Deny => {}
                OnError::Local => {
                    let own = crate::limiter::fixed_window::windows_met(
                        self.instance_clock_span(l),
                        self.window,
                    )
                    .saturating_mul(self.threshold);
                    bound = bound.saturating_add(own.saturating_mul(self.clocks.len() as u64));
                }
            }
        }
        for failover in &faults.failovers {
            bound = bound.saturating_add(self.store_bound(failover.lost.get()));
        }
        bound
    }

    /// Its instances' (local mode) or its fallback's longest delay.
    fn max_delay(&self) -> Nanos {
        self.counter.max_delay()
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.counter.nominal(interval).unwrap_or_else(|| {
            self.threshold as f64 * interval.get() as f64 / self.window.max(1) as f64
        })
    }

    fn describe(&self) -> String {
        let k = self.clocks.len();
        let shared = || format!("{} per {}", self.threshold, Nanos(self.window));
        let (what, mode) = self.counter.describe(shared());
        let mut words = format!("{what}, {k} instances, {mode}");
        if let Some(faults) = self.faults.as_ref().map(FaultState::faults) {
            if !faults.outages.is_empty() {
                words.push_str(&format!(
                    "; store down {} time(s), on error {}",
                    faults.outages.len(),
                    faults.on_error.name()
                ));
            }
            if !faults.failovers.is_empty() {
                words.push_str(&format!("; {} {FAILOVERS}", faults.failovers.len()));
            }
        }
        words
    }
}

impl Cluster {
    /// The shared counter's bound over `l`, faults aside.
    fn store_bound(&self, l: u64) -> u64 {
        self.counter.bound(&self.stretch(l))
    }

    fn stretch(&self, l: u64) -> Stretch<'_> {
        Stretch {
            interval: l,
            duration: self.duration,
            clocks: &self.clocks,
            instance_span: self.instance_clock_span(l),
        }
    }
}

#[cfg(test)]
mod tests;
