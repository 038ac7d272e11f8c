//! One limiter's run: its state, the metrics of what it admits, and its
//! event queue, fed arrivals in time order.

use anyhow::{Result, bail};
use hdrhistogram::Histogram;

use super::Options;
use super::driver::Driver;
use super::events::{Attempt, Event, Events};
use crate::limiter::per_key::PerKey;
use crate::limiter::{Decision, Limiter, RateLimiter};
use crate::metrics::backend::Server;
use crate::metrics::closed_loop::ClosedLoop;
use crate::metrics::outage::Outages;
use crate::metrics::overload::OverloadCounts;
use crate::metrics::per_key::{KeyEvent, KeyTallies, PerKeyCounts, StateCost, Summed};
use crate::metrics::rolling::RollingCounts;
use crate::metrics::timeline::Timeline;
use crate::metrics::trailing::Trailing;
use crate::results::RunResult;
use crate::scenario::{NamedLimiter, Scenario};
use crate::summary::{BackendSummary, DelaySummary, ProfilePoint, QueueSummary, RunSummary};
use crate::time::Nanos;
use crate::traffic::{Arrival, Key, Timed};

pub(super) mod figures;

/// One limiter's state and metrics while a workload streams through it.
pub(super) struct RunState {
    limiter: Limiter,
    m: Counters,
}

/// Everything of a run but its limiter: what the decisions are counted into.
struct Counters {
    kind: &'static str,
    description: String,
    offered: u64,
    admitted: u64,
    rolling: RollingCounts,
    /// The distinct intervals tracked by `rolling`, in its order.
    intervals: Vec<Nanos>,
    timeline: Timeline,
    trailing: Option<Trailing>,
    /// Backend capacity per second, to count rejections it had room for.
    capacity: Option<u64>,
    rejected_with_spare_capacity: u64,
    server: Option<Server>,
    /// Delayed requests waiting for the backend, and clients' scheduled
    /// requests: the metrics see a delayed request when the backend gets it.
    events: Events,
    /// Delays of delayed requests (nginx without `nodelay`).
    delays: Option<Histogram<u64>>,
    /// Figures per client key, when the workload's requests name clients
    /// (per Host, for a limit with `per = "host"`).
    keys: Option<PerKeyCounts>,
    /// Instead, while another thread counts them: the decisions since sent ([`figures::Away`]).
    keys_away: Option<Vec<KeyEvent>>,
    /// Instead, at the end: those figures summed up, when the run counted
    /// them with others that decided alike ([`figures::Figures`]).
    keys_summed: Option<Summed>,
    /// Whether `keys` counts Hosts.
    keys_by_host: bool,
    /// Figures of clients that retry, when they do.
    closed: Option<ClosedLoop>,
    /// What got through while a cluster's store was down, and after.
    outages: Option<Outages>,
    /// Seconds in which demand exceeded the limit, and what was admitted.
    overload: OverloadCounts,
    /// In a merge of shards: the keys whose first request (or delayed
    /// release) is looked for, to name the busiest as the whole run does.
    watch: Option<Watch>,
    /// Whether any of the figures only some runs keep is kept (per key,
    /// trailing, backend, outages): the hot path checks this one flag.
    extras: bool,
}

/// What a merge brings of a limiter decided by key, for
/// [`RunState::finish_with`]: its shards' tallies added, the busiest key,
/// the most keys held at once and the resets, and the workload's keys that
/// name nothing (absent, blank).
pub(super) struct FromShards<'a> {
    pub(super) tallies: &'a KeyTallies,
    pub(super) busiest: u64,
    pub(super) state: (u64, u64),
    pub(super) empty: [u64; 2],
}

/// Some keys, and the first of them the figures per key would have counted.
#[derive(Debug)]
struct Watch {
    ids: Vec<u64>,
    first: Option<u64>,
}

impl Watch {
    #[inline]
    fn saw(&mut self, id: u64) {
        if self.first.is_none() && self.ids.contains(&id) {
            self.first = Some(id);
        }
    }
}

impl RunState {
    /// `named` before its run on a workload; `keyed` when the workload's
    /// requests name their clients (then figures per key are kept).
    pub(super) fn new(
        scenario: &Scenario,
        options: &Options,
        named: &NamedLimiter,
        keyed: bool,
    ) -> RunState {
        let metrics = &scenario.metrics;
        // The worst second is reported against a backend; without one it is
        // not kept (it holds a whole second of admitted times).
        let second = scenario.backend.map(|_| Nanos::SECOND);
        let mut intervals: Vec<Nanos> = metrics
            .profile
            .iter()
            .copied()
            .chain([metrics.rolling])
            .chain(second)
            .chain(options.curve.iter().copied())
            .collect();
        intervals.sort_unstable();
        intervals.dedup();
        let mut rolling = RollingCounts::new(&intervals);
        if let Some(backend) = scenario.backend {
            rolling = rolling.with_overload(Nanos::SECOND, backend.capacity_per_sec.get());
        }
        // A limit per key is each key's: no second of all keys' demand
        // measures it.
        let limit_1s = match &named.limiter {
            Limiter::PerKey(_) => f64::INFINITY,
            limiter => limiter.nominal(Nanos::SECOND),
        };
        let mut m = Counters {
            overload: OverloadCounts::new(limit_1s),
            watch: None,
            extras: false,
            kind: named.config.kind(),
            description: named.description.clone(),
            offered: 0,
            admitted: 0,
            rolling,
            intervals,
            timeline: if options.skip_timeline {
                Timeline::new(metrics.bucket, Nanos::ZERO)
            } else {
                Timeline::new(metrics.bucket, scenario.duration)
            },
            trailing: (options.trailing && !options.skip_timeline)
                .then(|| Trailing::new(metrics.rolling, scenario.duration, metrics.bucket)),
            capacity: scenario.backend.map(|b| b.capacity_per_sec.get()),
            rejected_with_spare_capacity: 0,
            events: Events::default(),
            keys: (keyed && metrics.per_key).then(|| PerKeyCounts::new(metrics.rolling)),
            keys_away: None,
            keys_summed: None,
            keys_by_host: named.limiter.keyed_by_host(),
            closed: None,
            outages: match &named.limiter {
                Limiter::Cluster(cluster) => cluster.outages().map(|(outages, on_error)| {
                    let spans: Vec<(Nanos, Nanos)> =
                        outages.iter().map(|o| (o.at, o.end())).collect();
                    Outages::new(&spans, on_error.name(), scenario.duration)
                }),
                _ => None,
            },
            delays: None,
            server: scenario.backend.and_then(|b| {
                b.queue
                    .map(|queue| Server::new(b.capacity_per_sec.get(), queue))
            }),
        };
        m.extras = m.keys.is_some()
            || m.trailing.is_some()
            || m.server.is_some()
            || m.outages.is_some()
            || m.capacity.is_some();
        RunState {
            limiter: named.limiter.clone(),
            m,
        }
    }

    /// The same run, its limiter leaving the workload's `empty` keys
    /// unlimited, or turning them away, where its gateway does ([`Limiter::treat_empty_keys`]).
    pub(super) fn treating_empty_keys(mut self, empty: &crate::traffic::EmptyKeys) -> RunState {
        if !empty.is_empty() {
            self.limiter.treat_empty_keys(empty);
        }
        self
    }

    /// Requests decided so far.
    pub(super) fn offered(&self) -> u64 {
        self.m.offered
    }

    /// Looks, in the decisions counted from now, for the first of `ids`
    /// that the figures per key would count.
    pub(super) fn watch(&mut self, ids: Vec<u64>) {
        self.m.watch = Some(Watch { ids, first: None });
        self.m.extras = true;
    }

    /// The first of the watched keys counted, if any was.
    pub(super) fn watched(&self) -> Option<u64> {
        self.m.watch.as_ref().and_then(|watch| watch.first)
    }

    /// The figures per key as counts by value, every held request released
    /// first; with a limiter per key, the most keys it held state for at
    /// once and its resets.
    pub(super) fn tallies(&mut self) -> (Option<KeyTallies>, Option<(u64, u64)>) {
        self.m.release_until(Nanos(u64::MAX));
        let tallies = self.m.keys.as_ref().and_then(PerKeyCounts::tallies);
        let state = match &self.limiter {
            Limiter::PerKey(per) => Some((per.keys_alive_max(), per.resets())),
            _ => None,
        };
        (tallies, state)
    }

    /// Decides every arrival of `chunk` and counts the decisions: the open
    /// loop's hot path, with the limiter's kind matched once per chunk.
    pub(super) fn observe_all<T: Timed>(&mut self, chunk: &[T]) {
        self.limiter.decide_all(chunk, &mut self.m);
    }

    /// Whether it has, as far as counted, admitted more than `capacity` in
    /// some second, or its backend has dropped a request (see
    /// [`super::Options::stop_above`]).
    pub(super) fn over(&self, capacity: u64) -> bool {
        self.m.rolling.worst_so_far(Nanos::SECOND) > capacity
            || self
                .m
                .server
                .as_ref()
                .is_some_and(|server| server.dropped() > 0)
    }

    /// Counts one decision made elsewhere (by a real Redis).
    pub(super) fn record(&mut self, arrival: Arrival, admitted: bool, delay: Nanos) {
        self.m.record(arrival, admitted, delay);
    }

    /// Decides `arrival` and counts the decision; a rejection's hint is
    /// worked out only when `HINTS` (a driver hears it; open loops do not).
    #[inline(always)]
    pub(super) fn observe<const HINTS: bool>(&mut self, arrival: Arrival) -> Decision {
        let decision = self
            .limiter
            .decide_keyed::<HINTS>(arrival.time, arrival.key);
        self.m
            .record(arrival, decision.admitted(), decision.delay());
        decision
    }

    /// Keeps the figures of clients retrying as `retry` says: attempts, goodput,
    /// the herd after resets, lockouts.
    pub(super) fn with_retries(
        mut self,
        scenario: &Scenario,
        retry: &crate::retry::Retry,
    ) -> RunState {
        // A client's limit: its key's own with a limiter per key, else the limiter's.
        let (limit, per_key) = match &self.limiter {
            Limiter::PerKey(per) => (per.prototype().nominal(Nanos::SECOND), true),
            limiter => (limiter.nominal(Nanos::SECOND), false),
        };
        self.m.closed = Some(ClosedLoop::new(
            retry.describe(),
            scenario.metrics.rolling,
            self.limiter.window_edges(),
            limit,
            per_key,
            retry.lockout,
        ));
        self.m.timeline.track_attempts();
        self
    }

    /// Runs `driver` to its end, calling `recorded` with every decision. The
    /// run's own events come first at equal times: they were scheduled before.
    pub(super) fn drive(
        &mut self,
        driver: &mut dyn Driver,
        mut recorded: impl FnMut(Arrival, Attempt, Decision) -> Result<()>,
    ) -> Result<()> {
        loop {
            let event_first = match (self.m.events.next_time(), driver.next_time()) {
                (None, None) => return Ok(()),
                (Some(due), Some(next)) => due <= next,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            let (arrival, attempt) = if event_first {
                match self.m.events.pop().expect("an event is due") {
                    (at, Event::Release(key)) => {
                        self.m.deliver(at, key);
                        continue;
                    }
                    (_, Event::Arrive(arrival, attempt)) => (arrival, attempt),
                }
            } else {
                let arrival = driver.next().expect("the driver has a next arrival");
                (arrival, Attempt::first(arrival.time))
            };
            let decision = self.observe::<true>(arrival);
            if let Some(closed) = &mut self.m.closed {
                let admitted_at = match decision {
                    Decision::Admit => Some(arrival.time),
                    Decision::Delay(delay) => {
                        Some(Nanos(arrival.time.get().saturating_add(delay.get())))
                    }
                    Decision::Reject(_) => None,
                };
                match decision {
                    Decision::Reject(hint) if hint.forbidden => {
                        closed.refused(arrival, attempt.number);
                    }
                    _ => closed.attempt(arrival, attempt.number, attempt.first, admitted_at),
                }
                self.m
                    .timeline
                    .record_attempt(arrival.time, attempt.number > 1);
            }
            recorded(arrival, attempt, decision)?;
            driver.answer(arrival, attempt, decision, &mut self.m.events);
            if self.m.events.len() > crate::retry::MAX_PENDING {
                bail!(
                    "more than {} requests wait to retry at once (at {}); retries are held in memory until they are sent: lower the rate, max_attempts or the waits, or shorten the run",
                    crate::retry::MAX_PENDING,
                    arrival.time
                );
            }
        }
    }

    pub(super) fn finish(
        self,
        scenario: &Scenario,
        options: &Options,
        workload: &str,
        limiter: &str,
    ) -> RunResult {
        self.finish_with(scenario, options, [workload, limiter], None)
    }

    /// [`RunState::finish`]; with `merged`, the figures per key are those
    /// of the shards' tallies added (the busiest key, the most keys held
    /// at once and the resets given), not this run's own.
    pub(super) fn finish_with(
        mut self,
        scenario: &Scenario,
        options: &Options,
        [workload, limiter]: [&str; 2],
        merged: Option<FromShards<'_>>,
    ) -> RunResult {
        if let (Some(from), Limiter::PerKey(per)) = (&merged, &mut self.limiter) {
            per.count_keys_elsewhere(from.tallies.keys, from.empty);
        }
        self.m.release_until(Nanos(u64::MAX));
        let worst = self.m.rolling.worst();
        let at = |interval: Nanos| {
            let index = self
                .m
                .intervals
                .iter()
                .position(|&i| i == interval)
                .expect("every reported interval is tracked");
            worst[index]
        };
        let rolling = scenario.metrics.rolling;
        let headline = at(rolling);
        let nominal = self.limiter.nominal(rolling);
        let profile = scenario
            .metrics
            .profile
            .iter()
            .map(|&interval| ProfilePoint {
                interval_ns: interval.get(),
                worst: at(interval).count,
                worst_start_ns: at(interval).start.get(),
                bound: self.limiter.bound(interval),
            })
            .collect();
        let backend = scenario.backend.map(|backend| {
            let capacity = backend.capacity_per_sec.get();
            let worst_1s = at(Nanos::SECOND).count;
            BackendSummary {
                capacity,
                worst_1s,
                bound_1s: self.limiter.bound(Nanos::SECOND),
                nominal_1s: self.limiter.nominal(Nanos::SECOND),
                rejected_with_spare_capacity: self.m.rejected_with_spare_capacity,
                queue: self.m.server.as_ref().map(|server| {
                    let stats = server.stats();
                    QueueSummary {
                        size: backend.queue.unwrap_or(0),
                        dropped: stats.dropped,
                        max_queue: stats.max_queue,
                        wait_p50_ns: stats.wait_p50.get(),
                        wait_p99_ns: stats.wait_p99.get(),
                        wait_max_ns: stats.wait_max.get(),
                    }
                }),
                over_capacity: worst_1s.saturating_sub(capacity),
                seconds_over_capacity: self.m.rolling.time_over_capacity().as_secs_f64(),
                whole_seconds: None,
            }
        });
        let summed = merged.is_none().then(|| self.m.summed_keys()).flatten();
        let (overload, peak) = self.m.overload.finish(scenario.duration);
        let summary = RunSummary {
            workload: workload.to_string(),
            limiter: limiter.to_string(),
            kind: self.m.kind.to_string(),
            description: self.m.description,
            offered: self.m.offered,
            admitted: self.m.admitted,
            rejected: self.m.offered - self.m.admitted,
            rolling_ns: rolling.get(),
            worst_rolling: headline.count,
            worst_rolling_start_ns: headline.start.get(),
            nominal,
            spike_ratio: if nominal > 0.0 {
                headline.count as f64 / nominal
            } else {
                0.0
            },
            bound: self.limiter.bound(rolling),
            profile,
            backend,
            replications: None,
            adversary: None,
            tight: None,
            lower_bound: None,
            keys: match (merged, &self.limiter) {
                (Some(from), Limiter::PerKey(per)) => Some(from.tallies.summary(
                    from.busiest,
                    Some(state_cost(
                        per,
                        [from.state.0, from.state.1],
                        self.m.offered,
                        scenario.duration,
                    )),
                    Some(per.prototype().nominal(rolling)),
                )),
                (Some(from), _) => Some(from.tallies.summary(from.busiest, None, None)),
                (None, limiter) => summed.map(|summed| match limiter {
                    Limiter::PerKey(per) => summed.finish(
                        Some(state_cost(
                            per,
                            [per.keys_alive_max(), per.resets()],
                            self.m.offered,
                            scenario.duration,
                        )),
                        Some(per.prototype().nominal(rolling)),
                    ),
                    _ => summed.finish(None, None),
                }),
            }
            .map(|mut keys| {
                if let Limiter::PerKey(per) = &self.limiter {
                    keys.empty_unlimited = per.leaves_keys_unlimited();
                    keys.empty_denied = per.denies_keyless();
                }
                keys
            }),
            whole_seconds: None,
            turned_away_in_log: None,
            instances: match &self.limiter {
                Limiter::Cluster(cluster) => Some(cluster.admitted_per_instance().to_vec()),
                _ => None,
            },
            closed_loop: self.m.closed.map(|closed| closed.finish(0, 0, 0)),
            outages: self.m.outages.map(Outages::finish),
            overload,
            peak,
            delay: self.m.delays.as_ref().map(|delays| DelaySummary {
                delayed: delays.len(),
                p50_ns: delays.value_at_quantile(0.5),
                p99_ns: delays.value_at_quantile(0.99),
                max_ns: delays.max(),
            }),
        };
        RunResult {
            summary,
            timeline: self.m.timeline,
            window_edges: self.limiter.window_edges(),
            curve: options.curve.iter().map(|&interval| at(interval)).collect(),
            trailing: self.m.trailing.map(Trailing::finish),
        }
    }
}

impl crate::limiter::Decisions for Counters {
    #[inline(always)]
    fn decided(&mut self, arrival: Arrival, decision: Decision) {
        self.record(arrival, decision.admitted(), decision.delay());
    }

    fn prefetches(&self) -> bool {
        self.keys
            .as_ref()
            .is_some_and(|keys| keys.len() >= crate::limiter::per_key::PREFETCH_FROM)
    }

    #[inline(always)]
    fn prefetch(&self, key: Key, ahead: usize) {
        if let Some(keys) = &self.keys {
            keys.prefetch(counted(key, self.keys_by_host), ahead);
        }
    }
}

/// The key a request is counted under: its client, or its Host.
fn counted(key: Key, by_host: bool) -> Key {
    if by_host { Key::client(key.host) } else { key }
}

impl Counters {
    /// Counts one decision on `arrival`, released after `delay` if admitted.
    #[inline(always)]
    fn record(&mut self, arrival: Arrival, admitted: bool, delay: Nanos) {
        let Arrival { time: now, key } = arrival;
        self.offered += 1;
        self.overload.record(now, admitted);
        if !self.events.is_empty() {
            self.release_until(now);
        }
        if admitted {
            self.admitted += 1;
            if delay == Nanos::ZERO {
                self.deliver(now, key);
            } else {
                self.delay(now, key, delay);
            }
        } else {
            self.timeline.record(now, false);
        }
        // Out of line, and called only where there is something to count
        // (a call per admission that returned at once was 7% of the
        // deciding thread's time in a log's replay).
        if self.outages.is_some() {
            self.record_outages(arrival.time, admitted);
        }
        if self.extras && !admitted {
            self.record_rejected(arrival);
        }
    }

    /// Holds an admitted request of `key` for `delay` (nginx without `nodelay`).
    fn delay(&mut self, now: Nanos, key: Key, delay: Nanos) {
        let at = Nanos(now.get().saturating_add(delay.get()));
        self.events.schedule(at, Event::Release(key));
        let delays = self
            .delays
            .get_or_insert_with(|| Histogram::new(3).expect("3 significant digits"));
        let _ = delays.record(delay.get());
    }

    /// A decision at `now` during a cluster's store outages, or after.
    #[inline(never)]
    fn record_outages(&mut self, now: Nanos, admitted: bool) {
        if let Some(outages) = &mut self.outages {
            outages.offered(now);
            if admitted {
                outages.admitted(now);
            }
        }
    }

    /// The figures only some runs keep, for a rejection of `arrival`: per
    /// key, and against the backend's capacity.
    #[inline(never)]
    fn record_rejected(&mut self, arrival: Arrival) {
        let Arrival { time: now, key } = arrival;
        let key = counted(key, self.keys_by_host);
        if let Some(keys) = &mut self.keys {
            keys.rejected(key);
        } else if let Some(away) = &mut self.keys_away {
            away.push(KeyEvent::Rejected(key.client));
        }
        if let Some(watch) = &mut self.watch {
            watch.saw(key.client);
        }
        if let Some(capacity) = self.capacity
            && self.rolling.trailing_count(now) < capacity
        {
            self.rejected_with_spare_capacity += 1;
        }
    }

    /// The backend gets an admitted request of `key` at `at`.
    #[inline(always)]
    fn deliver(&mut self, at: Nanos, key: Key) {
        self.timeline.record(at, true);
        self.rolling.push(at);
        if self.extras {
            self.deliver_extras(at, key);
        }
    }

    /// The figures per key summed up, if kept and any key sent anything.
    fn summed_keys(&self) -> Option<Summed> {
        self.keys_summed
            .or_else(|| self.keys.as_ref().and_then(PerKeyCounts::summed))
    }

    /// The figures only some runs keep, for a request the backend gets.
    #[inline(never)]
    fn deliver_extras(&mut self, at: Nanos, key: Key) {
        let key = counted(key, self.keys_by_host);
        if let Some(keys) = &mut self.keys {
            keys.admitted(at, key);
        } else if let Some(away) = &mut self.keys_away {
            away.push(KeyEvent::Admitted(at, key.client));
        }
        if let Some(watch) = &mut self.watch {
            watch.saw(key.client);
        }
        if let Some(trailing) = &mut self.trailing {
            trailing.push(at);
        }
        if let Some(server) = &mut self.server {
            server.arrive(at);
        }
        if let Some(outages) = &mut self.outages {
            outages.delivered(at);
        }
    }

    /// Delivers, in time order, the delayed requests released by `now`.
    fn release_until(&mut self, now: Nanos) {
        while let Some((at, key)) = self.events.release_due(now) {
            self.deliver(at, key);
        }
    }
}

/// What `per`'s states cost, having held at most `keys` at once and reset
/// `resets` times, over a run of `offered` requests lasting `duration`.
fn state_cost(per: &PerKey, [keys, resets]: [u64; 2], offered: u64, duration: Nanos) -> StateCost {
    StateCost {
        keys_alive_max: keys,
        bytes_per_key: per.state_bytes(),
        bytes: per.state_bytes().map(|bytes| bytes.saturating_mul(keys)),
        store_ops_per_request: per.store_ops().filter(|_| offered > 0).map(|ops| {
            (offered as f64 * ops.per_request as f64 + resets as f64 * ops.per_reset as f64)
                / offered as f64
        }),
        resets_per_sec: resets as f64 / duration.as_secs_f64(),
    }
}

#[cfg(test)]
mod tests;
