//! Node's `bottleneck`, one `new Bottleneck({...})` with the local datastore
//! and `schedule(job)` (modelled from `lib/Bottleneck.js`,
//! `lib/LocalDatastore.js` and `lib/Queues.js` of 2.19.5, the version
//! `tests/node_limiters/package-lock.json` pins; checked job by job against
//! it in `tests/integration/node_limiters.rs`), on an event loop whose
//! timers fire when due:
//!
//! - a job registers when the reservoir has a unit for it (at once, or at a
//!   later heartbeat that refills it) and then runs after `wait = max(0,
//!   nextRequest − now)`, with `nextRequest = now + wait + minTime`: jobs
//!   queue first in, first out, and a queued job is never refused;
//! - the heartbeat beats every `heartbeatInterval` (250 ms) from the
//!   limiter's construction (the run's start); a beat at least
//!   `reservoirRefreshInterval` after the last refresh sets the reservoir to
//!   `reservoirRefreshAmount`, one at least `reservoirIncreaseInterval` after
//!   the last increase adds `reservoirIncreaseAmount` (up to
//!   `reservoirIncreaseMaximum`), and the queue drains into it at once: the
//!   queued jobs run together at the beat, a herd the limiter makes itself;
//! - with `highWater`, a job that finds that many queued and could not run
//!   at once is dropped (`OVERFLOW`); `LEAK` (the default) drops the oldest
//!   queued job instead and queues the new one — the same instants run and
//!   as many are dropped, but another request is the one dropped: modelled
//!   as `OVERFLOW`; `BLOCK` drops it and refuses everything for `penalty` ms
//!   (15 · `minTime`, or 5 s), pushing `nextRequest` past that, and every
//!   job while blocked starts the penalty again.
//!
//! Times are `Date.now()` milliseconds; a dropped job rejects with a
//! `BottleneckError` and no time. Not modelled: `maxConcurrent` (how long
//! each job runs decides it), `BLOCK` with a reservoir (it drops jobs
//! already queued), priorities, weights, expirations, the Redis datastore,
//! and `Bottleneck.Group` (each key's limiter made at its first job, and
//! dropped after `timeout` idle) — here each key's limiter starts with the
//! run. Node itself waits at least 1 ms for a 0 ms timer and a little more
//! under load: in a real process each job runs a few milliseconds later.
//!
//! Bound: with `minTime` M, each run's millisecond is at least M after the
//! last's (`nextRequest` is the last run's millisecond plus M): ⌊(L − 2 +
//! 1 ms)/M⌋ + 1 — N + 1 a second. Without, a run is its registration: the most the reservoir can
//! hold plus what each beat in the interval adds, `A · ⌊(L − 1)/P⌋ + 1`
//! refreshes and as many increases — 2A within a nanosecond of a refresh.

use std::collections::VecDeque;

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const MS: u64 = 1_000_000;

/// Milliseconds a setting may hold: a year.
const MAX_MS: u64 = 366 * 86_400_000;

/// What `highWater` does when reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// `Bottleneck.strategy.LEAK`: drops the oldest queued job.
    #[default]
    Leak,
    /// `OVERFLOW_PRIORITY`: drops a queued job of lower priority (all are
    /// equal here: as `LEAK`).
    OverflowPriority,
    /// `OVERFLOW`: drops the new job.
    Overflow,
    /// `BLOCK`: drops it and blocks for `penalty`.
    Block,
}

/// `kind = "bottleneck"`, as the constructor's options in snake_case
/// (lengths in whole milliseconds).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `reservoir`: units at the start (none: unlimited until a refresh).
    pub reservoir: Option<u64>,
    /// `reservoirRefreshInterval`.
    pub reservoir_refresh_interval: Option<Nanos>,
    /// `reservoirRefreshAmount`.
    pub reservoir_refresh_amount: Option<u64>,
    /// `reservoirIncreaseInterval`.
    pub reservoir_increase_interval: Option<Nanos>,
    /// `reservoirIncreaseAmount`.
    pub reservoir_increase_amount: Option<u64>,
    /// `reservoirIncreaseMaximum`.
    pub reservoir_increase_maximum: Option<u64>,
    /// `minTime` (default 0).
    #[serde(default)]
    pub min_time: Nanos,
    /// `highWater` (default none: the queue is unbounded).
    pub high_water: Option<u64>,
    /// `strategy` (default `"leak"`).
    #[serde(default)]
    pub strategy: Strategy,
    /// `penalty` (default 15 · `minTime`, or 5 s when that is 0).
    pub penalty: Option<Nanos>,
    /// `heartbeatInterval` (default 250 ms).
    pub heartbeat_interval: Option<Nanos>,
    /// `maxConcurrent`: refused (how long each job runs decides it).
    pub max_concurrent: Option<u64>,
}

/// A whole number of milliseconds from `value`, or what is wrong.
fn millis(field: &'static str, value: Nanos, least: u64) -> Result<u64, FieldError> {
    let ns = value.get();
    if !ns.is_multiple_of(MS) || ns / MS < least || ns / MS > MAX_MS {
        return Err(FieldError::at(field, format!("whole milliseconds from {least}ms to 366 days (Bottleneck counts Date.now() milliseconds), not {value}")));
    }
    Ok(ns / MS)
}

/// A pair of settings that go together: both, or neither.
fn pair(names: [&'static str; 2], interval: Option<Nanos>, amount: Option<u64>, beat: u64) -> Result<Option<(u64, u64)>, FieldError> {
    match (interval, amount) {
        (None, None) => Ok(None),
        (Some(interval), Some(amount)) => {
            if amount > 1 << 40 {
                return Err(FieldError::at(names[1], "at most 2^40"));
            }
            // Beats at multiples of the heartbeat: the first at least the
            // interval after the last.
            let interval = millis(names[0], interval, 0)?;
            Ok(Some((interval.div_ceil(beat).max(1) * beat, amount)))
        }
        (Some(_), None) => Err(FieldError::at(names[1], format!("required with {}: Bottleneck only beats with both", names[0]))),
        (None, Some(_)) => Err(FieldError::at(names[0], format!("required with {}: Bottleneck only beats with both", names[1]))),
    }
}

impl Kind for Config {
    const NAME: &'static str = "bottleneck";
    type State = Bottleneck;

    fn build(&self, _: Context) -> Result<Bottleneck, FieldError> {
        if self.max_concurrent.is_some() {
            return Err(field_error!("max_concurrent", "not modelled: how many run at once depends on how long each job takes, which burstsim does not know; leave it out to model the reservoir and minTime"));
        }
        let beat = millis("heartbeat_interval", self.heartbeat_interval.unwrap_or(Nanos(250 * MS)), 1)?;
        let refresh = pair(["reservoir_refresh_interval", "reservoir_refresh_amount"], self.reservoir_refresh_interval, self.reservoir_refresh_amount, beat)?;
        let increase = pair(["reservoir_increase_interval", "reservoir_increase_amount"], self.reservoir_increase_interval, self.reservoir_increase_amount, beat)?;
        if self.reservoir_increase_maximum.is_some() && increase.is_none() {
            return Err(field_error!("reservoir_increase_maximum", "only with reservoir_increase_interval and reservoir_increase_amount"));
        }
        let min_time = millis("min_time", self.min_time, 0)?;
        let limited = self.reservoir.is_some() || refresh.is_some() || increase.is_some();
        if !limited && min_time == 0 {
            return Err(field_error!("reservoir", "Bottleneck with neither a reservoir nor min_time limits nothing: set one"));
        }
        if self.strategy == Strategy::Block && limited {
            return Err(field_error!("strategy", "\"block\" with a reservoir is not modelled: it drops jobs already queued, after burstsim has decided them; use \"overflow\", or min_time alone"));
        }
        let penalty = match self.penalty {
            Some(penalty) => millis("penalty", penalty, 0)?,
            None if min_time > 0 => 15 * min_time,
            None => 5_000,
        };
        // The reservoir never refills to anything: queued jobs would wait for ever.
        let refills = refresh.is_some_and(|(_, a)| a > 0) || (increase.is_some_and(|(_, a)| a > 0) && self.reservoir_increase_maximum != Some(0));
        if limited && !refills && self.high_water.is_none() {
            return Err(field_error!("high_water", "needed: nothing refills this reservoir, so once it is spent every job waits for ever in an unbounded queue"));
        }
        Ok(Bottleneck(Box::new(State {
            refresh,
            increase,
            maximum: self.reservoir_increase_maximum,
            min_time,
            high_water: self.high_water,
            strategy: self.strategy,
            penalty,
            refills,
            initial: self.reservoir,
            at: 0,
            reservoir: self.reservoir,
            queued: VecDeque::new(),
            waiting: 0,
            stuck: 0,
            next_request: 0,
            unblock: None,
            undo: None,
        })))
    }

    fn parameter(&self, _: Context) -> (&'static str, u64) {
        match (self.reservoir_refresh_amount, self.reservoir_increase_amount) {
            (Some(amount), _) => ("reservoir_refresh_amount", amount),
            (None, Some(amount)) => ("reservoir_increase_amount", amount),
            _ => ("reservoir", self.reservoir.unwrap_or(1)),
        }
    }

    fn with_parameter(&self, value: u64) -> Config {
        let mut config = self.clone();
        match (self.reservoir_refresh_amount, self.reservoir_increase_amount) {
            (Some(_), _) => config.reservoir_refresh_amount = Some(value),
            (None, Some(_)) => config.reservoir_increase_amount = Some(value),
            _ => config.reservoir = Some(value),
        }
        config
    }

    fn example(choice: u64) -> String {
        let n = choice % 5 + 1;
        let beat = choice / 5 % 2 + 1;
        let high_water = match choice / 10 % 3 {
            0 => String::new(),
            k => format!("\nhigh_water = {}", k * 2),
        };
        let strategy = ["leak", "overflow"][(choice / 30 % 2) as usize];
        match choice / 60 % 3 {
            0 => format!("reservoir = {n}\nreservoir_refresh_amount = {n}\nreservoir_refresh_interval = \"{}ms\"\nheartbeat_interval = \"{beat}ms\"{high_water}\nstrategy = \"{strategy}\"", choice / 180 % 3 + 1),
            1 => format!("reservoir = 0\nreservoir_increase_amount = {n}\nreservoir_increase_interval = \"2ms\"\nreservoir_increase_maximum = {}\nheartbeat_interval = \"{beat}ms\"\nmin_time = \"{}ms\"{high_water}", n + 1, choice / 180 % 2),
            _ => format!("min_time = \"{}ms\"\nhigh_water = 0\nstrategy = \"{}\"\npenalty = \"{}ms\"", beat, ["overflow", "block"][(choice / 30 % 2) as usize], choice / 180 % 4),
        }
    }
}

/// One `Bottleneck` (boxed: its state is larger than a limiter's slot).
#[derive(Clone, Debug)]
pub struct Bottleneck(Box<State>);

/// A `Bottleneck`'s settings and state.
#[derive(Clone, Debug)]
pub struct State {
    /// Refresh beats' period (ms, a multiple of the heartbeat) and amount.
    refresh: Option<(u64, u64)>,
    /// Increase beats' period and amount.
    increase: Option<(u64, u64)>,
    /// `reservoirIncreaseMaximum`.
    maximum: Option<u64>,
    /// `minTime`, ms.
    min_time: u64,
    high_water: Option<u64>,
    strategy: Strategy,
    /// `penalty`, ms.
    penalty: u64,
    /// Whether any beat adds to the reservoir.
    refills: bool,
    /// `reservoir` at construction.
    initial: Option<u64>,
    /// The millisecond the reservoir is known at: the last registration's
    /// beat or instant (later, while jobs are queued).
    at: u64,
    /// The reservoir at `at`, after what registered then (`None`: unlimited).
    reservoir: Option<u64>,
    /// Queued jobs by the beat they will register at, in order.
    queued: VecDeque<(u64, u64)>,
    /// The jobs in `queued`.
    waiting: u64,
    /// Jobs queued for ever (nothing refills the reservoir).
    stuck: u64,
    /// `_nextRequest`, ms.
    next_request: u64,
    /// `_unblockTime`, ms (none yet: Bottleneck's 0, long before any `Date.now()`).
    unblock: Option<u64>,
    /// What the last admission changed, for a refund.
    undo: Option<Undo>,
}

/// A registration or queued job taken back.
#[derive(Clone, Copy, Debug)]
struct Undo {
    at: u64,
    reservoir: Option<u64>,
    next_request: u64,
    /// Whether it joined the queue.
    queued: bool,
}

/// Admitted now, or run after `delay` ns.
fn after(delay: u64) -> Decision {
    if delay == 0 { Decision::Admit } else { Decision::Delay(Nanos(delay)) }
}

impl State {
    /// The reservoir at beat or instant `to`, from `value` at `from`, with
    /// every beat in `(from, to]` applied and nothing registered between.
    fn evolve(&self, mut value: Option<u64>, from: u64, to: u64) -> Option<u64> {
        let mut start = from;
        if let Some((period, amount)) = self.refresh {
            let last = to / period * period;
            if last > from {
                value = Some(amount);
                // An increase at the same beat comes after the refresh.
                start = last - 1;
            }
        }
        if let Some((period, amount)) = self.increase {
            let beats = to / period - start / period;
            // `reservoir += min(amount, maximum − reservoir)` when that is
            // positive, a reservoir of null counting as 0.
            let held = value.unwrap_or(0);
            let full = self.maximum.is_some_and(|max| held >= max);
            if beats > 0 && amount > 0 && !full {
                let grown = held.saturating_add(beats.saturating_mul(amount));
                value = Some(self.maximum.map_or(grown, |max| grown.min(max)));
            }
        }
        value
    }

    /// The first beat after `from` that leaves an empty reservoir with a unit.
    fn next_refill(&self, mut from: u64) -> Option<(u64, u64)> {
        if !self.refills {
            return None;
        }
        loop {
            let next = |beat: Option<(u64, u64)>| beat.map(|(p, _)| (from / p + 1) * p);
            let beat = next(self.refresh).into_iter().chain(next(self.increase)).min()?;
            match self.evolve(Some(0), from, beat) {
                Some(units) if units > 0 => return Some((beat, units)),
                _ => from = beat,
            }
        }
    }

    /// Jobs queued at `ms`: those registering at a later beat.
    fn queue_length(&mut self, ms: u64) -> u64 {
        while let Some(&(beat, n)) = self.queued.front()
            && beat <= ms
        {
            self.queued.pop_front();
            self.waiting -= n;
        }
        self.waiting + self.stuck
    }

    /// Registers a job at `ms` (a beat, or the request's instant `now`):
    /// its run instant, ns.
    fn register(&mut self, ms: u64, at_ns: u64) -> u64 {
        let wait = self.next_request.saturating_sub(ms);
        self.next_request = ms + wait + self.min_time;
        at_ns + wait * MS
    }
}

impl std::ops::Deref for Bottleneck {
    type Target = State;

    fn deref(&self) -> &State {
        &self.0
    }
}

impl std::ops::DerefMut for Bottleneck {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.0
    }
}

impl RateLimiter for Bottleneck {
    /// A dropped job rejects with a `BottleneckError`, no time.
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let t = now.get();
        let ms = t / MS;
        let queued = self.queue_length(ms);
        // The reservoir now, when nothing is queued ahead.
        let current = if queued == 0 { self.evolve(self.reservoir, self.at, ms) } else { Some(0) };
        let can_run = current != Some(0) && self.next_request <= ms;
        let reached = self.high_water == Some(queued) && !can_run;
        if self.strategy == Strategy::Block && (reached || self.unblock.is_some_and(|until| until >= ms)) {
            self.unblock = Some(ms + self.penalty);
            self.next_request = ms + self.penalty + self.min_time;
            return Decision::Reject(Hint::NONE);
        }
        if reached {
            return Decision::Reject(Hint::NONE);
        }
        let mut undo = Undo {
            at: self.at,
            reservoir: self.reservoir,
            next_request: self.next_request,
            queued: false,
        };
        if queued == 0 && current != Some(0) {
            // Registers at once.
            self.undo = Some(undo);
            self.reservoir = current.map(|units| units - 1);
            self.at = ms;
            let run = self.register(ms, t);
            return after(run - t);
        }
        // Waits for a beat: the last queued one's, while it has room, or
        // the next that refills an empty reservoir.
        let (beat, left) = match self.queued.back() {
            Some(_) if self.reservoir.is_some_and(|left| left > 0) => (self.at, self.reservoir.unwrap_or(0)),
            _ => match self.next_refill(if queued == 0 { ms } else { self.at }) {
                Some(found) => found,
                None => {
                    self.stuck += 1;
                    return Decision::Reject(Hint::NONE);
                }
            },
        };
        match self.queued.back_mut() {
            Some((last, n)) if *last == beat => *n += 1,
            _ => self.queued.push_back((beat, 1)),
        }
        self.waiting += 1;
        undo.queued = true;
        self.undo = Some(undo);
        self.at = beat;
        self.reservoir = Some(left - 1);
        let run = self.register(beat, beat * MS);
        after(run - t)
    }

    /// As if dropped: the registration or the queued job taken back.
    fn refund(&mut self, _now: Nanos) {
        let Some(undo) = self.undo.take() else { return };
        (self.at, self.reservoir, self.next_request) = (undo.at, undo.reservoir, undo.next_request);
        if undo.queued {
            self.waiting -= 1;
        }
        if undo.queued && let Some((_, n)) = self.queued.back_mut() {
            *n -= 1;
            if *n == 0 {
                self.queued.pop_back();
            }
        }
    }

    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let span = interval.get() - 1;
        if self.min_time > 0 {
            // A run's millisecond is at least `minTime` after the last's
            // (`nextRequest` is the last run's millisecond plus minTime).
            return (span + MS - 1) / (self.min_time * MS) + 1;
        }
        let beats = |beat: Option<(u64, u64)>| beat.map_or(0, |(p, amount)| (span / (p * MS) + 1).saturating_mul(amount));
        // The most the reservoir holds at the interval's start.
        let Some(initial) = self.initial else {
            return u64::MAX; // unlimited until the first beat
        };
        let refreshed = self.refresh.map_or(0, |(_, a)| a).max(initial);
        let held = match (self.refresh, self.increase, self.maximum) {
            (_, Some(_), Some(max)) => max.max(refreshed),
            (Some((p, _)), Some((q, b)), None) => refreshed.saturating_add((p / q + 1).saturating_mul(b)),
            (None, Some(_), None) => return u64::MAX, // grows without end
            _ => refreshed,
        };
        held.saturating_add(beats(self.refresh)).saturating_add(beats(self.increase))
    }

    /// Queued jobs are decided when they arrive, however many.
    fn decision_bound(&self, _interval: Nanos) -> u64 {
        u64::MAX
    }

    /// A queue without `highWater` is unbounded, and so is `minTime`'s wait.
    fn max_delay(&self) -> Nanos {
        Nanos(u64::MAX / 4)
    }

    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX / 4)
    }

    /// Every queued job is held until it runs, as in the real process: a
    /// heap entry and a queue slot each.
    fn memory_at_most(&self, _keys: u64, requests: u64, _hashed: bool) -> u128 {
        u128::from(requests) * 48
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        let per = |(period, amount): (u64, u64)| amount as f64 * interval.get() as f64 / (period * MS) as f64;
        match (self.refresh, self.increase) {
            (Some(refresh), _) => per(refresh),
            (None, Some(increase)) => per(increase),
            _ if self.min_time > 0 => interval.get() as f64 / (self.min_time * MS) as f64,
            _ => self.initial.unwrap_or(0) as f64,
        }
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some((period, amount)) = self.refresh {
            parts.push(format!("reservoir refreshed to {amount} every {}", Nanos(period * MS)));
        }
        if let Some((period, amount)) = self.increase {
            parts.push(format!("+{amount} every {}{}", Nanos(period * MS), self.maximum.map_or(String::new(), |m| format!(" up to {m}"))));
        }
        if let (true, Some(initial)) = (parts.is_empty(), self.initial) {
            parts.push(format!("reservoir {initial}"));
        }
        if self.min_time > 0 {
            parts.push(format!("minTime {}", Nanos(self.min_time * MS)));
        }
        if let Some(high_water) = self.high_water {
            let strategy = match self.strategy {
                Strategy::Leak => "leak",
                Strategy::OverflowPriority => "overflow-priority",
                Strategy::Overflow => "overflow",
                Strategy::Block => "block",
            };
            parts.push(format!("highWater {high_water} ({strategy})"));
        }
        format!("Bottleneck, {}", parts.join(", "))
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        self.refresh.map(|(period, _)| (Nanos(period * MS), Nanos::ZERO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bottleneck(text: &str) -> Bottleneck {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    /// Each request's run instant in ms, or `None` when dropped.
    fn runs(l: &mut Bottleneck, times_ms: &[u64]) -> Vec<Option<u64>> {
        times_ms
            .iter()
            .map(|&ms| {
                let d = l.decide(Nanos(ms * MS));
                d.admitted().then(|| ms + d.delay().get() / MS)
            })
            .collect()
    }

    #[test]
    fn queued_jobs_run_together_at_the_refresh_beat() {
        // 2 per 1 s: two at once, the rest at each refresh, two at a time.
        let mut l = bottleneck("reservoir = 2\nreservoir_refresh_amount = 2\nreservoir_refresh_interval = \"1s\"");
        let got = runs(&mut l, &[0, 0, 0, 0, 10, 999, 1_000, 1_000, 1_001, 1_250]);
        let want = [0, 0, 1_000, 1_000, 2_000, 2_000, 3_000, 3_000, 4_000, 4_000];
        assert_eq!(got, want.map(Some));
        // Refreshed at the beat, not 300 ms after the last: beats are 250 ms.
        let mut l = bottleneck("reservoir = 1\nreservoir_refresh_amount = 1\nreservoir_refresh_interval = \"300ms\"\nhigh_water = 2\nstrategy = \"overflow\"");
        assert_eq!(runs(&mut l, &[0, 0, 0, 0, 0]), [Some(0), Some(500), Some(1_000), None, None]);
        assert_eq!(l.bound(Nanos(1)), 2, "a refresh on top of a full reservoir");
    }

    #[test]
    fn min_time_spaces_runs_and_block_extends_its_penalty() {
        let mut l = bottleneck("min_time = \"100ms\"");
        assert_eq!(runs(&mut l, &[0, 0, 0, 5]), [0, 100, 200, 300].map(Some));
        let mut l = bottleneck("min_time = \"100ms\"\nhigh_water = 0\nstrategy = \"block\"\npenalty = \"200ms\"");
        // Passes at 0; at 1 it would wait: blocked to 201, and each job
        // while blocked starts the penalty again; nextRequest then 100 ms on.
        assert_eq!(runs(&mut l, &[0, 1, 2, 300, 303, 700]), [Some(0), None, None, None, None, Some(700)]);
    }

    #[test]
    fn increases_stop_at_the_maximum_and_a_refresh_comes_first() {
        let mut l = bottleneck("reservoir = 0\nreservoir_increase_amount = 2\nreservoir_increase_interval = \"500ms\"\nreservoir_increase_maximum = 3");
        let got = runs(&mut l, &[0, 0, 0, 0, 0, 0, 0, 600, 600, 600, 600]);
        let want = [500, 500, 1_000, 1_000, 1_500, 1_500, 2_000, 2_000, 2_500, 2_500, 3_000];
        assert_eq!(got, want.map(Some));
        // Idle: 2, 3 (the maximum), 3 … at 5 s.
        let mut idle = bottleneck("reservoir = 0\nreservoir_increase_amount = 2\nreservoir_increase_interval = \"500ms\"\nreservoir_increase_maximum = 3");
        assert_eq!(runs(&mut idle, &[5_000; 4]), [Some(5_000), Some(5_000), Some(5_000), Some(5_500)]);
    }

    #[test]
    fn a_null_reservoir_is_unlimited_until_the_first_refresh() {
        let mut l = bottleneck("reservoir_refresh_amount = 1\nreservoir_refresh_interval = \"1s\"");
        assert_eq!(runs(&mut l, &[0; 5]), [Some(0); 5]);
        assert_eq!(runs(&mut l, &[1_000, 1_000]), [Some(1_000), Some(2_000)]);
        assert_eq!(l.bound(Nanos::SECOND), u64::MAX);
    }

    #[test]
    fn settings_it_cannot_model_are_refused_with_the_reason() {
        let refusal = crate::limiter::tests::refusal::<Config>;
        assert!(refusal("reservoir = 5\nmax_concurrent = 1").contains("how long each job takes"));
        assert!(refusal("reservoir = 5\nreservoir_refresh_amount = 5\nreservoir_refresh_interval = \"1s\"\nhigh_water = 1\nstrategy = \"block\"").contains("already queued"));
        assert!(refusal("reservoir = 5").contains("waits for ever"));
        assert!(refusal("reservoir_refresh_amount = 5").contains("required with reservoir_refresh_amount"));
        assert!(refusal("min_time = \"1500us\"").contains("whole milliseconds"));
        assert!(refusal("high_water = 3").contains("limits nothing"));
    }

    #[test]
    fn a_refund_takes_the_job_back() {
        let mut l = bottleneck("reservoir = 1\nreservoir_refresh_amount = 1\nreservoir_refresh_interval = \"1s\"\nmin_time = \"10ms\"");
        assert!(l.decide(Nanos(0)).admitted());
        l.refund(Nanos(0));
        assert_eq!(runs(&mut l, &[0, 0]), [Some(0), Some(1_000)]);
        assert!(l.decide(Nanos(0)).admitted());
        l.refund(Nanos(0));
        assert_eq!(runs(&mut l, &[0]), [Some(2_000)], "the queued job taken back too");
    }

    proptest::proptest! {
        #[test]
        fn never_runs_more_than_its_bound(
            choice in 0u64..540,
            mut times in proptest::collection::vec(0u64..30_000_000, 1..200),
        ) {
            // Anywhere in a millisecond: waits are whole milliseconds from it.
            times.sort_unstable();
            let text = Config::example(choice);
            let mut l = bottleneck(&text);
            let mut released: Vec<u64> = times
                .iter()
                .filter_map(|&t| {
                    let d = l.decide(Nanos(t));
                    d.admitted().then(|| t + d.delay().get())
                })
                .collect();
            released.sort_unstable();
            for interval in [1, MS, 2 * MS, 3 * MS + 1, 10 * MS] {
                let (worst, bound) = (crate::limiter::worst_in(&released, Nanos(interval)), l.bound(Nanos(interval)));
                proptest::prop_assert!(worst <= bound, "{}: {} > {} over {}", text, worst, bound, interval);
            }
        }
    }
}
