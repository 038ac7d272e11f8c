//! `per = "key"`: every client key gets a limiter of its own, in its initial
//! state at the key's first request — as an API's "100 per second" is per
//! API key. `per = "host"`: every Host the requests name does (nginx's
//! `$host`, Traefik's `requestHost`); synthetic requests all name one. With `evict_after`, a key idle that long is forgotten, as a store
//! expires it, and comes back fresh (a full bucket, a new window): a known
//! source of bursts, modelled as it happens.

use std::collections::BTreeSet;

use serde::Deserialize as _;

use super::{Context, Decision, Limiter, LimiterConfig, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;
use crate::traffic::Key;
use crate::traffic::slots::KeySlots;

/// The most distinct keys one per-key limiter keeps state for.
pub const MAX_KEYS: usize = 10_000_000;

/// `per` and `evict_after`, taken out of a limiter's table before its kind
/// reads the rest.
pub(super) struct Fields {
    pub(super) evict_after: Option<Nanos>,
    pub(super) by_host: bool,
}

impl Fields {
    /// `Some` for `per = "key"` or `per = "host"`; `None` for
    /// `per = "global"` or no `per`.
    pub(super) fn take(table: &mut toml::Table) -> Result<Option<Fields>, FieldError> {
        let per = match table.remove("per") {
            None => "global".to_string(),
            Some(toml::Value::String(per)) if ["key", "host", "global"].contains(&per.as_str()) => {
                per
            }
            Some(other) => {
                return Err(field_error!(
                    "per",
                    "expected \"global\", \"key\" (a state per client) or \"host\" (per Host the requests name), got {other}"
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
            _ => Ok(Some(Fields {
                evict_after,
                by_host: per == "host",
            })),
        }
    }
}

/// A limiter with `per = "key"`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The limiter every key gets.
    pub inner: Box<LimiterConfig>,
    /// Forget a key idle this long: no request, and none of its delayed
    /// requests still to be released.
    pub evict_after: Option<Nanos>,
    /// `per = "host"`: a state per Host the requests name, not per client.
    pub by_host: bool,
}

impl Config {
    /// No key seen yet.
    pub fn build(&self, context: Context) -> Result<PerKey, FieldError> {
        if self.evict_after == Some(Nanos::ZERO) {
            return Err(field_error!("evict_after", "must be longer than 0"));
        }
        Ok(PerKey {
            prototype: self.inner.build(context)?,
            evict_after: self.evict_after.map(Nanos::get),
            by_host: self.by_host,
            slots: KeySlots::default(),
            states: Vec::new(),
            idle: BTreeSet::new(),
            alive_now: 0,
            alive_max: 0,
            created: 0,
            last: 0,
        })
    }
}

/// One key's limiter, when it last sent a request, and whether its state
/// exists (not evicted).
#[derive(Clone, Debug)]
struct KeyState {
    limiter: Limiter,
    /// Its last request, or the release of its last delayed one if later.
    last_seen: u64,
    alive: bool,
}

/// One limiter per key, created on demand.
#[derive(Clone, Debug)]
pub struct PerKey {
    prototype: Limiter,
    evict_after: Option<u64>,
    by_host: bool,
    slots: KeySlots,
    /// Per slot, together so one key's state shares a cache line or two.
    states: Vec<KeyState>,
    /// With eviction: (last request, slot) of every live key, oldest first.
    idle: BTreeSet<(u64, u32)>,
    alive_now: u64,
    alive_max: u64,
    created: u64,
    /// The slot of the last decision, to take it back.
    last: u32,
}

impl PerKey {
    /// Whether it keeps a state per Host rather than per client.
    pub fn by_host(&self) -> bool {
        self.by_host
    }

    /// The most keys that had state at once.
    pub fn keys_alive_max(&self) -> u64 {
        self.alive_max
    }

    /// Distinct keys seen.
    pub fn keys(&self) -> u64 {
        self.states.len() as u64
    }

    /// States created: one per key, and one more each time an evicted key came back.
    pub fn states_created(&self) -> u64 {
        self.created
    }

    /// The limiter every key gets, in its initial state.
    pub fn prototype(&self) -> &Limiter {
        &self.prototype
    }

    /// Forgets the keys idle for `evict_after` by `now`.
    fn evict(&mut self, now: u64, after: u64) {
        while let Some(&(seen, slot)) = self.idle.first() {
            if seen.saturating_add(after) > now {
                break;
            }
            self.idle.pop_first();
            self.states[slot as usize].alive = false;
            self.alive_now -= 1;
        }
    }

    /// The slot of `key` (its client, or with `per = "host"` its host), its
    /// state fresh if it had none.
    fn slot(&mut self, key: Key) -> u32 {
        let id = if self.by_host { key.host } else { key.client };
        let (slot, new) = self.slots.slot(id);
        if new {
            assert!(
                self.states.len() < MAX_KEYS,
                "validation bounds the keys to {MAX_KEYS}"
            );
            self.states.push(KeyState {
                limiter: self.prototype.clone(),
                last_seen: 0,
                alive: false,
            });
        }
        let state = &mut self.states[slot as usize];
        if !state.alive {
            if !new {
                state.limiter = self.prototype.clone();
                state.last_seen = 0;
            }
            state.alive = true;
            self.alive_now += 1;
            self.alive_max = self.alive_max.max(self.alive_now);
            self.created += 1;
        }
        slot
    }
}

impl RateLimiter for PerKey {
    fn keys_matter(&self) -> bool {
        true
    }

    fn every_window_edges(&self) -> Vec<(Nanos, Nanos)> {
        self.prototype.every_window_edges()
    }

    fn changes(&self) -> Vec<Nanos> {
        self.prototype.changes()
    }

    fn hint_granularity(&self) -> Nanos {
        self.prototype.hint_granularity()
    }

    /// Per key seen (at most one per request): its state and what the inner
    /// limiter allocates (memory a growing `Vec` reserves but never touches
    /// is not counted: the limit is on memory used), with eviction its entry
    /// in the idle set; and the key table: the dense table of synthetic
    /// clients' numbers (4 bytes for each number up to the largest, a power
    /// of two) or the hash map of a trace's keys (up to 48 bytes a key while
    /// it grows), whichever is larger.
    fn memory_at_most(&self, keys: u64, requests: u64) -> u128 {
        let seen = u128::from(keys.min(requests).max(1));
        let state =
            std::mem::size_of::<KeyState>() as u128 + self.prototype.memory_at_most(1, requests);
        let idle = if self.evict_after.is_some() { 48 } else { 0 };
        let dense =
            u128::from(keys.min(crate::traffic::clients::MAX_CLIENTS)).next_power_of_two() * 4;
        seen * (state + idle) + dense.max(seen * 48)
    }

    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        self.decide_keyed::<HINTS>(now, Key::DEFAULT)
    }

    /// The key's own limiter decides, and hints as it does.
    #[inline]
    fn decide_keyed<const HINTS: bool>(&mut self, now: Nanos, key: Key) -> Decision {
        if let Some(after) = self.evict_after {
            self.evict(now.get(), after);
        }
        let slot = self.slot(key);
        let state = &mut self.states[slot as usize];
        let decision = state.limiter.decide_keyed::<HINTS>(now, key);
        // A key is busy until its last request is served: one delayed to
        // t + d keeps it until then, so a key is never forgotten while it
        // still holds requests to release (nginx expires a node only once
        // its excess has drained).
        let busy_until = match decision {
            Decision::Delay(delay) => now.get().saturating_add(delay.get()),
            _ => now.get(),
        };
        let last_seen = state.last_seen.max(busy_until);
        if self.evict_after.is_some() {
            self.idle.remove(&(state.last_seen, slot));
            self.idle.insert((last_seen, slot));
        }
        state.last_seen = last_seen;
        self.last = slot;
        decision
    }

    fn refund(&mut self, now: Nanos) {
        self.states[self.last as usize].limiter.refund(now);
    }

    /// K keys, each within its limiter's bound — and with eviction, each
    /// idle gap of `evict_after` inside the interval may give a key a fresh
    /// limiter, so ⌊(L − 1)/E⌋ + 1 of them: K·(⌊(L − 1)/E⌋ + 1)·bound(L).
    /// A key is idle only once its delayed requests are released, so the
    /// releases of one key's successive limiters are E or more apart.
    /// Over any traffic with any number of keys there is no bound; this is
    /// for the K keys seen so far (none yet: no bound).
    fn bound(&self, interval: Nanos) -> u64 {
        self.scaled(interval, |limiter, interval| limiter.bound(interval))
    }

    fn decision_bound(&self, interval: Nanos) -> u64 {
        self.scaled(interval, |limiter, interval| {
            limiter.decision_bound(interval)
        })
    }

    fn max_delay(&self) -> Nanos {
        self.prototype.max_delay()
    }

    fn horizon(&self) -> Nanos {
        self.prototype.horizon()
    }

    /// The keys' advertised limits together (one key's before any is seen).
    fn nominal(&self, interval: Nanos) -> f64 {
        self.prototype.nominal(interval) * self.keys().max(1) as f64
    }

    fn describe(&self) -> String {
        match self.evict_after {
            None => format!("{} per key", self.prototype.describe()),
            Some(after) => format!(
                "{} per key, forgotten after {} idle",
                self.prototype.describe(),
                Nanos(after)
            ),
        }
    }

    /// One key's: what the store keeps per key.
    fn state_bytes(&self) -> Option<u64> {
        self.prototype.state_bytes()
    }

    fn store_ops(&self) -> Option<StoreOps> {
        self.prototype.store_ops()
    }

    /// Every key's.
    fn resets(&self) -> u64 {
        self.states.iter().map(|state| state.limiter.resets()).sum()
    }

    /// Every key's windows share their edges when the limiter's are fixed.
    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        self.prototype.window_edges()
    }
}

impl PerKey {
    fn scaled(&self, interval: Nanos, bound: impl Fn(&Limiter, Nanos) -> u64) -> u64 {
        if self.states.is_empty() || interval == Nanos::ZERO {
            return if interval == Nanos::ZERO { 0 } else { u64::MAX };
        }
        let fresh = self
            .evict_after
            .map_or(1, |after| (interval.get() - 1) / after + 1);
        bound(&self.prototype, interval)
            .saturating_mul(fresh)
            .saturating_mul(self.keys())
    }
}
