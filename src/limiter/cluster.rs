//! Many instances of one limiter, as deployed: each gateway instance with its
//! own counter, or all sharing one counter in a store (Redis), with clocks
//! that disagree, drift and get stepped by NTP. Time here is true time; each
//! instance and the store read their own clock.

use std::collections::{BTreeMap, VecDeque};
use std::num::NonZeroU64;

use serde::{Deserialize, Deserializer};

use super::fixed_window::windows_met;
use super::{Context, Decision, Hint, Limiter, LimiterConfig, RateLimiter};
use crate::time::Nanos;

/// A signed duration with a unit, like `"-500ms"` or `"+150ms"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offset(pub i64);

impl<'de> Deserialize<'de> for Offset {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let (sign, rest) = match text.trim().strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, text.trim().trim_start_matches('+')),
        };
        let magnitude = Nanos::parse(rest).map_err(serde::de::Error::custom)?;
        i64::try_from(magnitude.get())
            .map(|ns| Offset(sign * ns))
            .map_err(|_| serde::de::Error::custom(format!("offset {text:?} is too large")))
    }
}

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

/// A clock correction at true time `at`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// When it happens, in true time.
    pub at: Nanos,
    /// How far the clock jumps (`"-500ms"` steps it back).
    pub by: Offset,
    /// `"store"`, or an instance number from 0.
    pub on: Target,
}

/// Whose clock a step corrects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The store's.
    Store,
    /// Instance number n (from 0).
    Instance(usize),
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Index(usize),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Name(name) if name == "store" => Ok(Target::Store),
            Raw::Name(name) => Err(serde::de::Error::custom(format!(
                "on: expected \"store\" or an instance number, got {name:?}"
            ))),
            Raw::Index(index) => Ok(Target::Instance(index)),
        }
    }
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
#[derive(Clone, Copy, Debug, Default, Deserialize)]
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

/// A clock: offset, drift and steps, as a function of true time.
#[derive(Clone, Debug, Default)]
struct Clock {
    offset: i64,
    drift_ppm: i64,
    steps: Vec<(u64, i64)>,
}

impl Clock {
    fn read(&self, now: u64) -> u64 {
        let stepped: i64 = self
            .steps
            .iter()
            .filter(|(at, _)| *at <= now)
            .map(|(_, by)| *by)
            .sum();
        let drift = i128::from(now) * i128::from(self.drift_ppm) / 1_000_000;
        (i128::from(now) + i128::from(self.offset) + drift + i128::from(stepped))
            .clamp(0, i128::from(u64::MAX)) as u64
    }

    /// The most it can run ahead of true time minus the most it can lag, over `duration`.
    fn extremes(&self, duration: u64) -> (i128, i128) {
        let drift = i128::from(duration) * i128::from(self.drift_ppm) / 1_000_000;
        let forward: i128 = self
            .steps
            .iter()
            .map(|(_, by)| i128::from((*by).max(0)))
            .sum();
        let backward: i128 = self
            .steps
            .iter()
            .map(|(_, by)| i128::from((*by).min(0)))
            .sum();
        let offset = i128::from(self.offset);
        (
            offset + drift.min(0) + backward,
            offset + drift.max(0) + forward,
        )
    }
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
                let unit = i128::from(splitmix(0x5eed ^ instance as u64) >> 11);
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

/// SplitMix64: a fixed, portable sequence for balancing and offsets.
fn splitmix(state: u64) -> u64 {
    let mut z = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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
        self.cluster.check(self.inner.kind(), &prototype)?;
        let k = self.cluster.instances.get() as usize;
        let (window, threshold) = prototype
            .fixed_window()
            .map_or((0, 0), |fixed| (fixed.window().get(), fixed.threshold()));
        let local = if self.cluster.mode == Mode::Local {
            let inner = if self.cluster.divide {
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
                prototype.clone()
            };
            vec![inner; k]
        } else {
            Vec::new()
        };
        Ok(Cluster {
            mode: self.cluster.mode,
            balance: self.cluster.balance,
            clients: self.cluster.clients.map_or(1_000, NonZeroU64::get),
            clocks: (0..k).map(|i| self.cluster.clock(i)).collect(),
            last_clock: vec![0; k],
            store_clock: self.cluster.store_clock(),
            store: self.cluster.store,
            local,
            window,
            threshold,
            counts: BTreeMap::new(),
            in_flight: VecDeque::new(),
            store_window: None,
            next: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
            admitted: vec![0; k],
            last: (0, None),
            sync_interval: self.cluster.sync_interval.map_or(0, Nanos::get),
            unsynced: vec![BTreeMap::new(); k],
            snapshot: vec![BTreeMap::new(); k],
            next_sync: vec![0; k],
            duration: self.duration.get(),
        })
    }
}

/// The running cluster.
#[derive(Clone, Debug)]
pub struct Cluster {
    mode: Mode,
    balance: Balance,
    clients: u64,
    clocks: Vec<Clock>,
    /// Each instance's last clock reading: its limiter never sees time go back.
    last_clock: Vec<u64>,
    store_clock: Clock,
    store: Store,
    local: Vec<Limiter>,
    window: u64,
    threshold: u64,
    /// Shared counters by window key (instance-clock mode), landed increments only.
    counts: BTreeMap<u64, u64>,
    /// Increments sent but not yet landed: (true time they land, key).
    in_flight: VecDeque<(u64, u64)>,
    /// Store-clock mode: the current key's (start on the store clock, count).
    store_window: Option<(u64, u64)>,
    next: usize,
    rng: u64,
    /// Admitted per instance.
    admitted: Vec<u64>,
    /// The instance and shared key of the last admission, to take it back.
    last: (usize, Option<u64>),
    /// Batched counters: the sync period (0: every decision goes to the store).
    sync_interval: u64,
    /// Per instance: counts not yet added to the store, by key.
    unsynced: Vec<BTreeMap<u64, u64>>,
    /// Per instance: the store's counts as of its last sync.
    snapshot: Vec<BTreeMap<u64, u64>>,
    /// Per instance: the next sync time (true time).
    next_sync: Vec<u64>,
    duration: u64,
}

impl Cluster {
    /// Admitted requests per instance.
    pub fn admitted_per_instance(&self) -> &[u64] {
        &self.admitted
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
                // SplitMix64 steps: a fixed, portable sequence.
                self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.rng;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
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

    /// A shared window's answer: a rejection hints the end of window `key`
    /// on the instance's clock, which read `clock` at true time `now`.
    fn window_decision(&self, admit: bool, key: u64, clock: u64, now: u64) -> Decision {
        Decision::admit_or(admit, || {
            let end = key.saturating_add(1).saturating_mul(self.window);
            in_true_time(Hint::at_reset(end), clock, now)
        })
    }

    /// The count of `key` as a request at `now` sees it.
    fn visible(&mut self, now: u64) {
        while self
            .in_flight
            .front()
            .is_some_and(|&(lands, _)| lands <= now)
        {
            let (_, key) = self.in_flight.pop_front().expect("checked non-empty");
            *self.counts.entry(key).or_insert(0) += 1;
        }
    }

    fn increment(&mut self, now: u64, key: u64) {
        match self.store.update {
            Update::Atomic => *self.counts.entry(key).or_insert(0) += 1,
            Update::ReadThenIncrement => self
                .in_flight
                .push_back((now.saturating_add(self.store.rtt.get()), key)),
        }
    }
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

impl RateLimiter for Cluster {
    /// Rejects with the hint of whatever decided — the instance's limiter,
    /// or the shared window's end on the clock that keys it — converted to
    /// true time: the client hears a duration, the same on every clock.
    fn decide(&mut self, now: Nanos) -> Decision {
        let now = now.get();
        let instance = self.pick();
        let clock = self.clocks[instance]
            .read(now)
            .max(self.last_clock[instance]);
        self.last_clock[instance] = clock;
        let (decision, key) = match self.mode {
            Mode::Local => {
                let decision = match self.local[instance].decide(Nanos(clock)) {
                    Decision::Reject(hint) => Decision::Reject(in_true_time(hint, clock, now)),
                    other => other,
                };
                (decision, None)
            }
            Mode::SharedInstanceClock if self.sync_interval > 0 => {
                let key = clock / self.window;
                if now >= self.next_sync[instance] {
                    for (k, count) in std::mem::take(&mut self.unsynced[instance]) {
                        *self.counts.entry(k).or_insert(0) += count;
                    }
                    self.snapshot[instance] = self
                        .counts
                        .range(key.saturating_sub(2)..)
                        .map(|(k, c)| (*k, *c))
                        .collect();
                    self.next_sync[instance] =
                        (now / self.sync_interval + 1).saturating_mul(self.sync_interval);
                }
                let seen = self.snapshot[instance].get(&key).copied().unwrap_or(0)
                    + self.unsynced[instance].get(&key).copied().unwrap_or(0);
                let admit = seen < self.threshold;
                if admit {
                    *self.unsynced[instance].entry(key).or_insert(0) += 1;
                }
                (self.window_decision(admit, key, clock, now), Some(key))
            }
            Mode::SharedInstanceClock => {
                self.visible(now);
                let key = clock / self.window;
                let admit = self.counts.get(&key).copied().unwrap_or(0) < self.threshold;
                if admit {
                    self.increment(now, key);
                }
                // Keys far behind every clock can no longer be used.
                let oldest = self.last_clock.iter().min().copied().unwrap_or(0) / self.window;
                while self
                    .counts
                    .first_key_value()
                    .is_some_and(|(&k, _)| k + 2 < oldest)
                {
                    self.counts.pop_first();
                }
                (self.window_decision(admit, key, clock, now), Some(key))
            }
            Mode::SharedStoreClock => {
                // The command reaches the store half a round trip later.
                let store_now = self
                    .store_clock
                    .read(now.saturating_add(self.store.rtt.get() / 2));
                // The key expires W after it was created, on the store's
                // clock: a backward step makes it live longer, never resets it.
                let (start, count) = match self.store_window {
                    Some((start, count)) if store_now < start.saturating_add(self.window) => {
                        (start, count)
                    }
                    _ => (store_now, 0),
                };
                let admit = count < self.threshold;
                self.store_window = Some((start, count + u64::from(admit)));
                let end = start.saturating_add(self.window);
                let hint = || in_true_time(Hint::at_reset(end), store_now, now);
                (Decision::admit_or(admit, hint), None)
            }
        };
        if decision.admitted() {
            self.admitted[instance] += 1;
            self.last = (instance, key);
        }
        decision
    }

    fn refund(&mut self, now: Nanos) {
        let (instance, key) = self.last;
        self.admitted[instance] -= 1;
        match self.mode {
            Mode::Local => self.local[instance].refund(now),
            Mode::SharedInstanceClock if self.sync_interval > 0 => {
                if let Some(count) = key.and_then(|key| self.unsynced[instance].get_mut(&key)) {
                    *count -= 1;
                }
            }
            Mode::SharedInstanceClock => {
                if let Some(key) = key {
                    match self.in_flight.iter().rposition(|&(_, k)| k == key) {
                        Some(position) => {
                            self.in_flight.remove(position);
                        }
                        None => *self.counts.entry(key).or_insert(1) -= 1,
                    }
                }
            }
            Mode::SharedStoreClock => {
                if let Some((_, count)) = &mut self.store_window {
                    *count -= 1;
                }
            }
        }
    }

    /// A GET-then-INCR counter over-admits by the requests that arrive while
    /// increments are in flight: N + r·rtt per window for a steady rate r,
    /// and without limit for arbitrary traffic.
    ///
    /// Local: K instances, each bounded over the longest stretch of its own
    /// clock that an interval of L can cover. Shared with instance clocks:
    /// N per window key, over every key any instance's clock can read in an
    /// interval of L (L plus the spread between the clocks: 3N for a spread
    /// under W). Store clock: N per store window met, with forward steps
    /// shortening windows. A read-then-increment counter has no bound: every
    /// request within a round trip sees the same count.
    fn bound(&self, interval: Nanos) -> u64 {
        let l = i128::from(interval.get());
        let stretch = |clock: &Clock| {
            let (low, high) = clock.extremes(self.duration);
            let drift = l * i128::from(clock.drift_ppm.max(0)) / 1_000_000;
            u64::try_from(l + drift + (high - low).max(0)).unwrap_or(u64::MAX)
        };
        match self.mode {
            Mode::Local => self
                .local
                .iter()
                .zip(&self.clocks)
                .map(|(limiter, clock)| limiter.bound(Nanos(stretch(clock))))
                .fold(0, u64::saturating_add),
            _ if self.store.update == Update::ReadThenIncrement
                && self.store.rtt > Nanos::ZERO
                && self.mode == Mode::SharedInstanceClock =>
            {
                u64::MAX
            }
            Mode::SharedInstanceClock => {
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
                // With batched counters each instance may spend N per key
                // before it sees the others' counts.
                let per_key = if self.sync_interval > 0 {
                    self.threshold.saturating_mul(self.clocks.len() as u64)
                } else {
                    self.threshold
                };
                windows_met(u64::try_from(span).unwrap_or(u64::MAX), self.window)
                    .saturating_mul(per_key)
            }
            Mode::SharedStoreClock => {
                windows_met(stretch(&self.store_clock), self.window).saturating_mul(self.threshold)
            }
        }
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        match self.local.first() {
            Some(limiter) => limiter.nominal(interval),
            None => self.threshold as f64 * interval.get() as f64 / self.window.max(1) as f64,
        }
    }

    fn describe(&self) -> String {
        let k = self.clocks.len();
        let what = match self.mode {
            Mode::Local => self
                .local
                .first()
                .map_or(String::new(), RateLimiter::describe),
            _ => format!("{} per {}", self.threshold, Nanos(self.window)),
        };
        let mode = match self.mode {
            Mode::Local => "each with its own counter",
            Mode::SharedInstanceClock => "one shared counter, windows by each instance's clock",
            Mode::SharedStoreClock => "one shared counter, windows by the store's clock",
        };
        format!("{what}, {k} instances, {mode}")
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
