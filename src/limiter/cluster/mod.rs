//! Many instances of one limiter, as deployed: each gateway instance with its
//! own counter, or all sharing one counter in a store (Redis), with clocks
//! that disagree, drift and get stepped by NTP. Time here is true time; each
//! instance and the store read their own clock.

mod batched;
mod clock;
pub mod faults;
mod instance_clock;
mod local;
mod store_clock;

use std::num::NonZeroU64;

use serde::Deserialize;

use self::batched::Batched;
pub use self::clock::{Clock, Offset, Step, Target};
use self::faults::{Failover, FaultState, Faults, OnError, Outage, Reach};
use self::instance_clock::InstanceClock;
use self::local::Local;
use self::store_clock::StoreClock;
use super::{Context, Decision, Hint, Limiter, LimiterConfig, RateLimiter};
use crate::random;
use crate::time::Nanos;
use crate::traffic::Key;

/// How requests are spread over instances.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Request i to instance i mod K.
    #[default]
    RoundRobin,
    /// Uniformly at random (a fixed generator, so runs repeat).
    Random,
    /// By a hash of a client key drawn per request from `clients` keys.
    Hash,
}

/// Where the counter lives and whose clock cuts its windows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Each instance has its own limiter, on its own clock.
    #[default]
    Local,
    /// One shared counter per window, the window key computed from each
    /// instance's clock (the envoyproxy/ratelimit design).
    SharedInstanceClock,
    /// One shared counter whose window starts at its first increment and
    /// expires W later on the store's clock (Redis INCR + EXPIRE).
    SharedStoreClock,
}

/// How a shared counter is updated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Update {
    /// INCR and decide on its reply: no request sees a stale count.
    #[default]
    Atomic,
    /// GET, decide, then INCR: the increment lands one round trip later, so
    /// requests within that round trip all see the count before it.
    ReadThenIncrement,
}

/// The shared store.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// Round-trip time to the store (default 0).
    #[serde(default)]
    pub rtt: Nanos,
    /// How the counter is updated (default atomic).
    #[serde(default)]
    pub update: Update,
    /// The store clock's offset from true time (default 0).
    #[serde(default)]
    pub offset: Offset,
    /// Spans of time when no instance reaches the store.
    #[serde(default)]
    pub outages: Vec<Outage>,
    /// What instances do then (default allow, as Kong, Envoy and Spring do).
    #[serde(default)]
    pub on_error: OnError,
    /// Failovers that lose the increments of their last moments.
    #[serde(default)]
    pub failover: Vec<Failover>,
}

/// `[cluster]` in a scenario: applied to every limiter.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// How many instances.
    pub instances: NonZeroU64,
    /// How requests are spread (default round-robin).
    #[serde(default)]
    pub balance: Balance,
    /// Client keys for `balance = "hash"` (default 1000).
    pub clients: Option<NonZeroU64>,
    /// Where the counter lives (default local).
    #[serde(default)]
    pub mode: Mode,
    /// In local mode, give each instance threshold / instances (default false).
    #[serde(default)]
    pub divide: bool,
    /// Each instance's clock offset (one value for all, or one per instance).
    #[serde(default)]
    pub offsets: Vec<Offset>,
    /// Each instance's clock drift in parts per million (one, or one per instance).
    #[serde(default)]
    pub drift_ppm: Vec<i64>,
    /// Clock corrections.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The shared store.
    #[serde(default)]
    pub store: Store,
    /// Instead of `offsets`: clock offsets drawn uniformly from ±spread/2
    /// (a fixed generator, so runs repeat).
    pub offset_spread: Option<Nanos>,
    /// Batched counters (Kong's `sync_rate`): each instance counts locally and
    /// adds its counts to the shared counter every `sync_interval`, deciding
    /// on the shared count as of its last sync plus its own unsynced ones.
    pub sync_interval: Option<Nanos>,
}

impl ClusterConfig {
    /// Checks the lists against the number of instances and the mode against
    /// `inner`, a limiter of kind `kind`.
    pub fn check(&self, kind: &str, inner: &Limiter) -> Result<(), String> {
        let k = self.instances.get() as usize;
        if k > 10_000 {
            return Err("cluster.instances: at most 10000".into());
        }
        for (field, len) in [
            ("offsets", self.offsets.len()),
            ("drift_ppm", self.drift_ppm.len()),
        ] {
            if len > 1 && len != k {
                return Err(format!(
                    "cluster.{field}: give one value or one per instance ({k}), not {len}"
                ));
            }
        }
        if let Some(step) = self
            .steps
            .iter()
            .find(|s| matches!(s.on, Target::Instance(i) if i >= k))
        {
            return Err(format!(
                "cluster.steps: instance {:?} does not exist (instances are numbered from 0)",
                step.on
            ));
        }
        if self.offset_spread.is_some() && !self.offsets.is_empty() {
            return Err(
                "cluster.offset_spread: give either `offsets` or `offset_spread`, not both".into(),
            );
        }
        if self.store.update == Update::ReadThenIncrement && self.mode == Mode::SharedStoreClock {
            return Err("cluster.store.update: \"read-then-increment\" models instances that read the counter, then increment it, on their own clocks; the store-clock mode is INCR + PEXPIRE in one step on the store: set mode = \"shared-instance-clock\" or drop `update`".into());
        }
        if self.sync_interval.is_some() && self.mode != Mode::SharedInstanceClock {
            return Err("cluster.sync_interval: batched counters share a counter keyed by instance clocks; set mode = \"shared-instance-clock\"".into());
        }
        if self.sync_interval == Some(Nanos::ZERO) {
            return Err("cluster.sync_interval: must be longer than 0".into());
        }
        if self.drift_ppm.iter().any(|d| d.abs() > 1_000_000) {
            return Err("cluster.drift_ppm: at most ±1000000".into());
        }
        if self.mode != Mode::Local && inner.fixed_window().is_none() {
            return Err(format!(
                "cluster.mode: shared counters model fixed windows; a {kind} can only run locally"
            ));
        }
        let faults = !self.store.outages.is_empty() || !self.store.failover.is_empty();
        if faults && self.mode == Mode::Local {
            return Err("cluster.store: outages and failovers are of a shared store; in mode = \"local\" there is none".into());
        }
        if !self.store.failover.is_empty()
            && (self.sync_interval.is_some() || self.store.update == Update::ReadThenIncrement)
        {
            return Err("cluster.store.failover: modelled for atomic shared counters only; drop sync_interval and update = \"read-then-increment\", or the failover".into());
        }
        if self.mode != Mode::Local && inner.fixed_window().is_some_and(|f| f.counts_rejected()) {
            return Err("cluster.mode: shared counters are modelled counting admitted requests only; drop count_rejected or use mode = \"local\"".into());
        }
        Ok(())
    }

    fn clock(&self, instance: usize) -> Clock {
        let pick = |values: &[Offset]| {
            values
                .get(instance)
                .or(values.first())
                .copied()
                .unwrap_or_default()
                .0
        };
        let drift = self
            .drift_ppm
            .get(instance)
            .or(self.drift_ppm.first())
            .copied()
            .unwrap_or(0);
        let steps = self
            .steps
            .iter()
            .filter(|s| s.on == Target::Instance(instance))
            .map(|s| (s.at.get(), s.by.0))
            .collect();
        let offset = match self.offset_spread {
            // A draw in ±spread/2 from a fixed generator, so runs repeat.
            Some(spread) => {
                let half = i128::from(spread.get() / 2);
                let unit = i128::from(random::mix(0x5eed ^ instance as u64) >> 11);
                i64::try_from((unit * 2 * half) / (1i128 << 53) - half).unwrap_or(0)
            }
            None => pick(&self.offsets),
        };
        Clock {
            offset,
            drift_ppm: drift,
            steps,
        }
    }

    fn store_clock(&self) -> Clock {
        let steps = self
            .steps
            .iter()
            .filter(|s| s.on == Target::Store)
            .map(|s| (s.at.get(), s.by.0))
            .collect();
        Clock {
            offset: self.store.offset.0,
            drift_ppm: 0,
            steps,
        }
    }
}

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
    pub fn build(&self, context: Context) -> Result<Cluster, String> {
        let prototype = self.inner.build(context)?;
        let cluster = &self.cluster;
        cluster.check(self.inner.kind(), &prototype)?;
        let k = cluster.instances.get() as usize;
        let (window, threshold) = prototype
            .fixed_window()
            .map_or((0, 0), |fixed| (fixed.window().get(), fixed.threshold()));
        let counter = match (cluster.mode, cluster.sync_interval) {
            (Mode::Local, _) => {
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
            (Mode::SharedInstanceClock, Some(interval)) => {
                Counter::Batched(Batched::new(window, threshold, interval.get(), k))
            }
            (Mode::SharedInstanceClock, None) => Counter::InstanceClock(InstanceClock::new(
                window,
                threshold,
                cluster.store.update,
                cluster.store.rtt.get(),
            )),
            (Mode::SharedStoreClock, _) => Counter::StoreClock(StoreClock::new(
                window,
                threshold,
                cluster.store_clock(),
                cluster.store.rtt.get(),
            )),
        };
        let store = &cluster.store;
        let faults = Faults::new(
            store.outages.clone(),
            store.on_error,
            store.failover.clone(),
            self.duration,
        )?;
        Ok(Cluster {
            faults: (!faults.is_empty()).then(|| FaultState::new(faults, k, window, threshold)),
            last_source: Source::Store,
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
enum Source {
    Store,
    /// The store was down and the request let through.
    Allowed,
    /// The store was down and this instance's own window admitted it.
    Fallback,
}

/// Where the count lives: one small type per mode.
#[derive(Clone, Debug)]
enum Counter {
    Local(Local),
    InstanceClock(InstanceClock),
    Batched(Batched),
    StoreClock(StoreClock),
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
    last_source: Source,
}

/// A hint given on a clock that read `clock` at true time `now`, in true time:
/// the client hears "retry in d", and d is the same on every clock.
fn in_true_time(hint: Hint, clock: u64, now: u64) -> Hint {
    let shift =
        |at: Option<Nanos>| at.map(|at| Nanos(now.saturating_add(at.get().saturating_sub(clock))));
    Hint {
        retry_at: shift(hint.retry_at),
        reset_at: shift(hint.reset_at),
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

    /// The store's outages and what instances do during them, if any.
    pub fn outages(&self) -> Option<(&[Outage], OnError)> {
        let faults = self.faults.as_ref()?.faults();
        (!faults.outages.is_empty()).then_some((faults.outages.as_slice(), faults.on_error))
    }

    /// The shared counter loses `increments` (window key, for instance-clock
    /// counters) in a failover.
    fn lose(&mut self, increments: &[faults::Increment]) {
        match &mut self.counter {
            Counter::InstanceClock(shared) => {
                for &(_, key) in increments {
                    shared.lose(key);
                }
            }
            Counter::StoreClock(store) => store.lose(increments),
            // Refused by the configuration check.
            Counter::Local(_) | Counter::Batched(_) => {}
        }
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

    /// The span of instance-clock time an interval of `interval` true
    /// nanoseconds can cover on some clock: the interval, the fastest drift
    /// over it, and the spread between all the clocks' extremes.
    fn instance_clock_span(&self, interval: u64) -> u64 {
        let l = i128::from(interval);
        let (low, high) = self
            .clocks
            .iter()
            .map(|c| c.extremes(self.duration))
            .fold((i128::MAX, i128::MIN), |(lo, hi), (a, b)| {
                (lo.min(a), hi.max(b))
            });
        let drift = self
            .clocks
            .iter()
            .map(|c| c.drift_ppm.max(0))
            .max()
            .unwrap_or(0);
        let span = l + l * i128::from(drift) / 1_000_000 + (high - low).max(0);
        u64::try_from(span).unwrap_or(u64::MAX)
    }
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
        if let Counter::StoreClock(store) = &self.counter {
            at.extend(store.step_times());
        }
        at
    }

    /// In local mode, as its instances' limiter; shared counters are global.
    fn keys_matter(&self) -> bool {
        match &self.counter {
            Counter::Local(local) => local.first().keys_matter(),
            _ => false,
        }
    }

    /// Every instance: its clock, its figures and, in local mode, its own
    /// limiter, which may see any key and its share of the requests.
    fn memory_at_most(&self, keys: u64, requests: u64) -> u128 {
        let instances = self.clocks.len() as u128;
        let own = match &self.counter {
            Counter::Local(local) => local.memory_at_most(keys, requests),
            _ => 0,
        };
        instances * 64 + own
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
            && let Reach::Down(decision) = faults.reach::<HINTS>(instance, clock, now)
        {
            if decision.admitted() {
                self.admitted[instance] += 1;
                self.last = instance;
                self.last_source = match faults.faults().on_error {
                    OnError::Local => Source::Fallback,
                    _ => Source::Allowed,
                };
            }
            return decision;
        }
        let decision = match &mut self.counter {
            Counter::Local(local) => local.decide::<HINTS>(instance, clock, now, key),
            Counter::InstanceClock(shared) => {
                let oldest = self.last_clock.iter().min().copied().unwrap_or(0);
                shared.decide::<HINTS>(clock, now, oldest)
            }
            Counter::Batched(batched) => batched.decide::<HINTS>(instance, clock, now),
            Counter::StoreClock(store) => store.decide::<HINTS>(now),
        };
        if decision.admitted() {
            self.admitted[instance] += 1;
            self.last = instance;
            self.last_source = Source::Store;
            if let Some(faults) = &mut self.faults {
                let key = match &self.counter {
                    Counter::InstanceClock(shared) => shared.last_key(),
                    Counter::StoreClock(store) => store.current_key(),
                    Counter::Local(_) | Counter::Batched(_) => 0,
                };
                faults.journal(now, key);
            }
        }
        decision
    }

    fn refund(&mut self, _now: Nanos) {
        let instance = self.last;
        self.admitted[instance] -= 1;
        match self.last_source {
            Source::Store => {}
            Source::Allowed => return,
            Source::Fallback => {
                if let Some(faults) = &mut self.faults {
                    faults.refund(instance, self.last_clock[instance]);
                }
                return;
            }
        }
        match &mut self.counter {
            Counter::Local(local) => local.refund(instance, self.last_clock[instance]),
            Counter::InstanceClock(shared) => shared.refund(),
            Counter::Batched(batched) => batched.refund(),
            Counter::StoreClock(store) => store.refund(),
        }
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
        if !faults.outages.is_empty() {
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

    fn nominal(&self, interval: Nanos) -> f64 {
        match &self.counter {
            Counter::Local(local) => local.first().nominal(interval),
            _ => self.threshold as f64 * interval.get() as f64 / self.window.max(1) as f64,
        }
    }

    fn describe(&self) -> String {
        let k = self.clocks.len();
        let shared = || format!("{} per {}", self.threshold, Nanos(self.window));
        let (what, mode) = match &self.counter {
            Counter::Local(local) => (local.first().describe(), "each with its own counter"),
            Counter::InstanceClock(_) | Counter::Batched(_) => (
                shared(),
                "one shared counter, windows by each instance's clock",
            ),
            Counter::StoreClock(_) => {
                (shared(), "one shared counter, windows by the store's clock")
            }
        };
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
                words.push_str(&format!("; {} failover(s)", faults.failovers.len()));
            }
        }
        words
    }
}

impl Cluster {
    /// The shared counter's bound over `l`, faults aside.
    fn store_bound(&self, l: u64) -> u64 {
        match &self.counter {
            Counter::Local(local) => local.bound(
                self.clocks
                    .iter()
                    .map(|clock| clock.stretch(l, self.duration)),
            ),
            Counter::InstanceClock(shared) => shared.bound(self.instance_clock_span(l)),
            Counter::Batched(batched) => batched.bound(self.instance_clock_span(l)),
            Counter::StoreClock(store) => store.bound(l, self.duration),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(text: &str) -> Cluster {
        let cluster: ClusterConfig = toml::from_str(text).unwrap();
        let inner: toml::Table =
            toml::from_str("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100").unwrap();
        let config = Config {
            inner: Box::new(LimiterConfig::from_table(inner).unwrap()),
            cluster,
            duration: Nanos(60_000_000_000),
        };
        config.build(Context::default()).unwrap()
    }

    const S: u64 = 1_000_000_000;

    fn admitted(cluster: &mut Cluster, times: &[u64]) -> usize {
        times
            .iter()
            .filter(|&&t| cluster.decide(Nanos(t)).admitted())
            .count()
    }

    #[test]
    fn local_counters_with_full_thresholds_reach_2_instances_n() {
        let mut c = cluster("instances = 3");
        let times: Vec<u64> = [vec![S - 1; 300], vec![S; 300]].concat();
        assert_eq!(admitted(&mut c, &times), 600, "2 · 3 · 100");
        assert_eq!(c.bound(Nanos(S)), 600);
        assert_eq!(c.admitted_per_instance(), [200, 200, 200]);
    }

    #[test]
    fn a_shared_counter_keyed_by_skewed_clocks_reaches_3n() {
        // Clocks 400 ms behind, on time and 400 ms ahead: a spread under W.
        // At true 1.35 s they read 0.95 s, 1.35 s and 1.75 s (windows 0, 1, 1);
        // at true 1.65 s, 1.25 s, 1.65 s and 2.05 s (windows 1, 1, 2).
        let mut c = cluster(
            "instances = 3\nmode = \"shared-instance-clock\"\noffsets = [\"-400ms\", \"0s\", \"+400ms\"]",
        );
        let times: Vec<u64> = [vec![1_350_000_000; 300], vec![1_650_000_000; 300]].concat();
        assert_eq!(
            admitted(&mut c, &times),
            300,
            "N in each of windows 0, 1 and 2 within 300 ms of true time"
        );
        assert_eq!(
            c.bound(Nanos(S)),
            300,
            "W plus a 800 ms spread meets at most three windows"
        );
    }

    #[test]
    fn a_forward_step_of_the_store_clock_ends_a_window_early() {
        let mut c = cluster(
            "instances = 2\nmode = \"shared-store-clock\"\nsteps = [{ at = \"1500ms\", by = \"+600ms\", on = \"store\" }]",
        );
        assert_eq!(admitted(&mut c, &[S; 150]), 100, "the window opened at 1 s");
        // At 1.5 s the store's clock jumps to 2.1 s: the key expires, a new window opens.
        assert_eq!(admitted(&mut c, &[1_600_000_000; 150]), 100);
    }

    #[test]
    fn batched_counters_let_each_instance_spend_the_limit_between_syncs() {
        let mut c =
            cluster("instances = 3\nmode = \"shared-instance-clock\"\nsync_interval = \"2s\"");
        // All within one window and one sync period: each instance sees only its own counts.
        assert_eq!(admitted(&mut c, &[S / 2; 600]), 300);
        // After the next sync (at 2 s) every instance sees window 2's count afresh.
        assert_eq!(admitted(&mut c, &[2 * S + S / 2; 600]), 300);
        assert_eq!(c.bound(Nanos(S)), 2 * 3 * 100);
    }

    #[test]
    fn an_offset_spread_draws_fixed_offsets_within_it() {
        let c = cluster("instances = 4\noffset_spread = \"800ms\"");
        let offsets: Vec<i64> = c.clocks.iter().map(|clock| clock.offset).collect();
        assert!(
            offsets.iter().all(|o| o.abs() <= 400_000_000),
            "{offsets:?}"
        );
        assert!(
            offsets.windows(2).any(|pair| pair[0] != pair[1]),
            "{offsets:?}"
        );
        let again = cluster("instances = 4\noffset_spread = \"800ms\"");
        assert_eq!(
            offsets,
            again
                .clocks
                .iter()
                .map(|clock| clock.offset)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn an_outage_is_answered_as_on_error_says() {
        let outage = |on_error: &str| {
            cluster(&format!(
                "instances = 3\nmode = \"shared-instance-clock\"\nstore = {{ outages = [{{ at = \"2s\", for = \"1s\" }}], on_error = \"{on_error}\" }}"
            ))
        };
        let down: Vec<u64> = (0..900).map(|i| 2 * S + i * 1_000_000).collect();
        let mut allow = outage("allow");
        assert_eq!(
            admitted(&mut allow, &[S; 150]),
            100,
            "the store answers before"
        );
        assert_eq!(admitted(&mut allow, &down), 900, "fail open: everything");
        assert_eq!(
            admitted(&mut allow, &[3 * S; 150]),
            100,
            "the store is back at 3 s"
        );
        assert_eq!(allow.bound(Nanos(S)), u64::MAX);
        let mut deny = outage("deny");
        assert_eq!(admitted(&mut deny, &down), 0, "fail closed: nothing");
        assert!(matches!(
            deny.decide(Nanos(2 * S)),
            Decision::Reject(Hint::NONE)
        ));
        assert_eq!(deny.bound(Nanos(S)), 200, "as without the outage");
        let mut local = outage("local");
        assert_eq!(
            admitted(&mut local, &down),
            300,
            "each instance its own 100"
        );
        assert_eq!(local.bound(Nanos(S)), 200 + 3 * 200);
    }

    /// Ten 50 ms outages within a second: each instance's fallback window is
    /// the same one throughout, so one instance admits N in the second, not
    /// 10·N, and the bound holds.
    #[test]
    fn a_flapping_store_does_not_refill_the_local_fallback() {
        let outages: Vec<String> = (0..10)
            .map(|i| format!("{{ at = \"{}ms\", for = \"50ms\" }}", 1_000 + i * 100))
            .collect();
        let mut c = cluster(&format!(
            "instances = 1\nmode = \"shared-instance-clock\"\nstore = {{ outages = [{}], on_error = \"local\" }}",
            outages.join(", ")
        ));
        // 20 requests inside each outage, 2 ms apart.
        let down: Vec<u64> = (0..10)
            .flat_map(|i| (0..20).map(move |j| S + i * 100_000_000 + j * 2_000_000))
            .collect();
        let passed = admitted(&mut c, &down);
        assert_eq!(passed, 100, "one fallback window of 100 over the second");
        assert!(passed as u64 <= c.bound(Nanos(S)));
    }

    #[test]
    fn a_failover_loses_the_increments_of_its_last_moments() {
        let mut c = cluster(
            "instances = 2\nmode = \"shared-instance-clock\"\nstore = { failover = [{ at = \"1800ms\", lost = \"500ms\" }] }",
        );
        // Window 1: 40 admitted at 1.1 s, 60 at 1.5 s: full.
        assert_eq!(admitted(&mut c, &[1_100_000_000; 40]), 40);
        assert_eq!(admitted(&mut c, &[1_500_000_000; 60]), 60);
        assert_eq!(admitted(&mut c, &[1_700_000_000; 10]), 0);
        // The replica had only what landed by 1.3 s: 40; 60 more get in.
        assert_eq!(admitted(&mut c, &[1_900_000_000; 100]), 60);
        assert_eq!(
            c.bound(Nanos(S)),
            200 + 200,
            "what the counter admits in 500 ms, once more"
        );
        let mut store = cluster(
            "instances = 2\nmode = \"shared-store-clock\"\nstore = { failover = [{ at = \"1800ms\", lost = \"1s\" }] }",
        );
        assert_eq!(admitted(&mut store, &[S; 150]), 100, "the key opens at 1 s");
        // The replica never had the key: a new window opens at 1.9 s.
        assert_eq!(admitted(&mut store, &[1_900_000_000; 150]), 100);
    }

    #[test]
    fn store_faults_are_refused_where_they_cannot_apply() {
        let err = |text: &str| {
            let cluster: ClusterConfig = toml::from_str(text).unwrap();
            let inner: toml::Table =
                toml::from_str("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100")
                    .unwrap();
            Config {
                inner: Box::new(LimiterConfig::from_table(inner).unwrap()),
                cluster,
                duration: Nanos(60 * S),
            }
            .build(Context::default())
            .unwrap_err()
        };
        assert!(
            err("instances = 2\nstore = { outages = [{ at = \"1s\", for = \"1s\" }] }")
                .contains("in mode = \"local\" there is none")
        );
        assert!(err("instances = 2\nmode = \"shared-instance-clock\"\nstore = { outages = [{ at = \"1s\", for = \"2s\" }, { at = \"2s\", for = \"1s\" }] }").contains("overlap"));
        assert!(err("instances = 2\nmode = \"shared-instance-clock\"\nstore = { outages = [{ at = \"90s\", for = \"1s\" }] }").contains("after the end of the run"));
        assert!(err("instances = 2\nmode = \"shared-instance-clock\"\nsync_interval = \"1s\"\nstore = { failover = [{ at = \"1s\", lost = \"1s\" }] }").contains("atomic shared counters only"));
    }

    #[test]
    fn read_then_increment_over_admits_by_the_rate_times_the_round_trip() {
        // 100,000 per second for 10 ms, a 1 ms round trip: while the first
        // increments are in flight, r · rtt = 100 more requests see a count
        // below N; an increment landing exactly as a request arrives is seen
        // by it, so the window admits N + r · rtt − 1.
        let mut c = cluster(
            "instances = 4\nmode = \"shared-instance-clock\"\nstore = { rtt = \"1ms\", update = \"read-then-increment\" }",
        );
        let times: Vec<u64> = (0..1_000).map(|i| S / 4 + i * 10_000).collect();
        assert_eq!(admitted(&mut c, &times), 100 + 100 - 1);
    }

    #[test]
    fn read_then_increment_over_admits_within_a_round_trip() {
        let mut c = cluster(
            "instances = 4\nmode = \"shared-instance-clock\"\nstore = { rtt = \"2ms\", update = \"read-then-increment\" }",
        );
        // 400 requests within one millisecond: none sees another's increment.
        let times: Vec<u64> = (0..400).map(|i| S / 2 + i * 2_000).collect();
        assert_eq!(admitted(&mut c, &times), 400);
        let mut atomic = cluster("instances = 4\nmode = \"shared-instance-clock\"");
        assert_eq!(admitted(&mut atomic, &times), 100);
        assert_eq!(c.bound(Nanos(S)), u64::MAX, "no bound over any traffic");
    }
}
