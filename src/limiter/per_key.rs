//! `per = "key"`: every client key gets a limiter of its own, in its initial
//! state at the key's first request — as an API's "100 per second" is per
//! API key. `per = "host"`: every Host the requests name does (nginx's
//! `$host`, Traefik's `requestHost`); synthetic requests all name one. With `evict_after`, a key idle that long is forgotten, as a store
//! expires it, and comes back fresh (a full bucket, a new window): a known
//! source of bursts, modelled as it happens.

use std::collections::BTreeSet;

use serde::Deserialize as _;

use super::fixed_window::Window;
use super::key_windows::KeyWindows;
use super::{Context, Decision, Hint, Limiter, LimiterConfig, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;
use crate::traffic::slots::{KeyTable, Slot};
use crate::traffic::{EmptyKeys, Key};

/// The most distinct keys one per-key limiter keeps state for.
pub const MAX_KEYS: usize = 10_000_000;

/// How many requests ahead of its decision a key's state is asked for:
/// far enough for memory's latency to pass while the requests between are
/// decided, near enough that it is still in the cache when needed.
pub(crate) const AHEAD: usize = 16;

/// Keys from which state kept per key is asked for ahead of the decisions
/// (see [`crate::traffic::slots::prefetch`]): below, it stays in the cache
/// anyway (a fixed window's cells take 64 to 256 KB, the figures per key 1 MB).
pub(crate) const PREFETCH_FROM: usize = 1 << 16;

/// Each arrival of `chunk`, with the key of the one [`AHEAD`] requests
/// later, if any.
#[inline(always)]
pub(super) fn with_later<T: crate::traffic::Timed>(
    chunk: &[T],
) -> impl Iterator<Item = (crate::traffic::Arrival, Option<Key>)> + '_ {
    chunk.iter().enumerate().map(move |(nth, item)| {
        let later = chunk.get(nth + AHEAD).map(|later| later.arrival().key);
        (item.arrival(), later)
    })
}

/// The id a limiter kept per key keeps `key`'s state by: its client, or
/// with `per = "host"` its host.
#[inline]
fn id_of(key: Key, by_host: bool) -> u64 {
    if by_host { key.host } else { key.client }
}

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
        let prototype = self.inner.build(context)?;
        let states = match &prototype {
            // A fixed window's rules once, 1 to 16 bytes per key: what a
            // key's window is, without a copy of the rules (or an enum's
            // largest kind) each.
            Limiter::FixedWindow(rules) if self.evict_after.is_none() => {
                States::Windows(KeyWindows::new(rules.clone()))
            }
            _ => States::Any(KeyTable::new(KeyState {
                limiter: prototype.clone(),
                last_seen: 0,
                alive: false,
            })),
        };
        Ok(PerKey {
            prototype,
            evict_after: self.evict_after.map(Nanos::get),
            by_host: self.by_host,
            states,
            idle: BTreeSet::new(),
            alive_now: 0,
            alive_max: 0,
            created: 0,
            last: None,
            keys_elsewhere: 0,
            unlimited: Vec::new(),
            unaccounted: 0,
            unlimited_elsewhere: false,
            denied: Vec::new(),
            turned_away_keyless: 0,
            denied_elsewhere: false,
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

/// Every key's state.
#[derive(Clone, Debug)]
enum States {
    /// Any limiter, a copy per key (with its last request, for eviction).
    Any(KeyTable<KeyState>),
    /// Fixed windows that are never evicted: the rules once, a window per key.
    Windows(KeyWindows),
}

/// One limiter per key, created on demand.
#[derive(Clone, Debug)]
pub struct PerKey {
    prototype: Limiter,
    evict_after: Option<u64>,
    by_host: bool,
    states: States,
    /// With eviction: (last request, slot) of every live key, oldest first.
    idle: BTreeSet<(u64, Slot)>,
    alive_now: u64,
    alive_max: u64,
    created: u64,
    /// The slot of the last decision, to take it back.
    last: Option<Slot>,
    /// Keys seen by the shards whose decisions a merge counts: its own
    /// state holds none, and its advertised limits are theirs together.
    keys_elsewhere: u64,
    /// The ids of the keys its gateway leaves unlimited: requests whose key
    /// names nothing, which nginx's `limit_req` does not account and
    /// HAProxy does not track when absent ([`PerKey::treat_empty_keys`]).
    unlimited: Vec<u64>,
    /// Requests of those keys admitted without a state.
    unaccounted: u64,
    /// In a merge: whether the shards' workload had such a key.
    unlimited_elsewhere: bool,
    /// The ids of the keys its gateway turns away before any state:
    /// Spring Cloud Gateway's `deny-empty-key` ([`PerKey::treat_empty_keys`]).
    denied: Vec<u64>,
    /// Requests of those keys turned away.
    turned_away_keyless: u64,
    /// In a merge: whether the shards' workload had such a key.
    denied_elsewhere: bool,
}

/// What a gateway does with a request whose key names nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keyless {
    /// A key like any: one state for all such requests, a client of its own.
    Keyed,
    /// Admitted without a state, accounting nothing.
    Unlimited,
    /// Turned away without a state.
    Denied,
}

impl PerKey {
    /// Whether it keeps a state per Host rather than per client.
    pub fn by_host(&self) -> bool {
        self.by_host
    }

    /// Whether it forgets keys idle for a while (`evict_after`).
    pub fn evicts(&self) -> bool {
        self.evict_after.is_some()
    }

    /// The most keys that had state at once.
    pub fn keys_alive_max(&self) -> u64 {
        match &self.states {
            States::Any(_) => self.alive_max,
            States::Windows { .. } => self.keys(),
        }
    }

    /// Distinct keys seen.
    pub fn keys(&self) -> u64 {
        self.keys_elsewhere
            + match &self.states {
                States::Any(states) => states.len() as u64,
                States::Windows(windows) => windows.len() as u64,
            }
    }

    /// Leaves the clients of `empty` keys unlimited, or turns them away,
    /// where its gateway does. nginx's `limit_req` skips a zone whose key
    /// is empty for the request, absent or blank alike, accounting nothing
    /// (`ngx_http_limit_req_handler` in
    /// `src/http/modules/ngx_http_limit_req_module.c`: `key.len == 0`) — a
    /// zone keyed by `$http_x_forwarded_for` and a request without the
    /// header. HAProxy's `http-request track-scN KEY` tracks nothing when
    /// the key cannot be fetched (`http_action_track_sc` in `src/http_act.c`,
    /// 2.6: `if (!key) goto end`), and `sc_http_req_rate` of an untracked
    /// counter denies nothing — but a header present and empty is a key like
    /// any. Both checked against Debian's (nginx 1.22, HAProxy 2.6.12) in
    /// `tests/integration/nginx_real.rs` and `haproxy_real.rs`. Spring
    /// Cloud Gateway's filter never asks the bucket for a key that resolved
    /// to nothing: it answers 403 (`deny-empty-key`, its default) or lets
    /// the request through unlimited (`RequestRateLimiterGatewayFilterFactory`);
    /// a key resolved as an empty string is a key like any. Envoy asks its
    /// rate limit service nothing for a request without the header a
    /// descriptor takes (`RequestHeadersAction::populateDescriptor` in
    /// `source/common/router/router_ratelimit.cc`: no header, no descriptor,
    /// unless `skip_if_absent`), so `envoy-ratelimit` leaves an absent key
    /// unlimited; a present empty header is a value like any. Other kinds
    /// keep one state for such a key, a client of its own; a state per Host
    /// is never empty (`$host` falls back to the server's name).
    pub fn treat_empty_keys(&mut self, empty: &EmptyKeys) {
        let rules = self.keyless_rules();
        let ids = |rule: Keyless| -> Vec<u64> {
            rules
                .iter()
                .zip([&empty.absent, &empty.blank])
                .filter(|(r, _)| **r == rule)
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect()
        };
        self.unlimited = ids(Keyless::Unlimited);
        self.denied = ids(Keyless::Denied);
    }

    /// Whether some of its workload's keys name nothing and it leaves them
    /// unlimited ([`PerKey::treat_empty_keys`]), here or in a merge's shards.
    pub fn leaves_keys_unlimited(&self) -> bool {
        !self.unlimited.is_empty() || self.unlimited_elsewhere
    }

    /// Whether some of its workload's keys name nothing and it turns them
    /// away ([`PerKey::treat_empty_keys`]), here or in a merge's shards.
    pub fn denies_keyless(&self) -> bool {
        !self.denied.is_empty() || self.denied_elsewhere
    }

    /// Requests admitted unlimited, without a state ([`PerKey::treat_empty_keys`]).
    pub fn unaccounted(&self) -> u64 {
        self.unaccounted
    }

    /// Requests turned away for want of a key ([`PerKey::treat_empty_keys`]).
    pub fn turned_away_keyless(&self) -> u64 {
        self.turned_away_keyless
    }

    /// Counts `keys` seen elsewhere (by shards) as seen, of them `absent`
    /// and `blank` keys that name nothing: a merge's limiter advertises what
    /// the whole run's does, whose state left out the keys it leaves
    /// unlimited or turns away.
    pub fn count_keys_elsewhere(&mut self, keys: u64, [absent, blank]: [u64; 2]) {
        let rules = self.keyless_rules();
        let of = |rule: Keyless| {
            u64::from(rules[0] == rule) * absent + u64::from(rules[1] == rule) * blank
        };
        let (unlimited, denied) = (of(Keyless::Unlimited), of(Keyless::Denied));
        self.keys_elsewhere = keys - (unlimited + denied).min(keys);
        self.unlimited_elsewhere = unlimited > 0;
        self.denied_elsewhere = denied > 0;
    }

    /// What its gateway does with a request whose key is absent, and with
    /// one whose key is blank ([`PerKey::treat_empty_keys`]).
    fn keyless_rules(&self) -> [Keyless; 2] {
        use Keyless::{Denied, Keyed, Unlimited};
        match &self.prototype {
            _ if self.by_host => [Keyed, Keyed],
            Limiter::NginxLimitReq(_) => [Unlimited, Unlimited],
            Limiter::HaproxyRate(_) | Limiter::EnvoyRatelimit(_) => [Unlimited, Keyed],
            Limiter::SpringCloudGateway(spring) if spring.denies_empty_key() => [Denied, Keyed],
            Limiter::SpringCloudGateway(_) => [Unlimited, Keyed],
            _ => [Keyed, Keyed],
        }
    }

    /// States created: one per key, and one more each time an evicted key came back.
    pub fn states_created(&self) -> u64 {
        match &self.states {
            States::Any(_) => self.created,
            States::Windows { .. } => self.keys(),
        }
    }

    /// The id of `key` this limiter keeps state by: its client, or with
    /// `per = "host"` its host.
    #[inline]
    pub(crate) fn id(&self, key: Key) -> u64 {
        id_of(key, self.by_host)
    }

    /// Asks for the state of `key` (see [`KeyTable::prefetch`]).
    #[inline(always)]
    pub fn prefetch(&self, key: Key) {
        match &self.states {
            States::Windows(windows) => windows.prefetch(self.id(key)),
            States::Any(states) => states.prefetch(self.id(key)),
        }
    }

    /// The limiter every key gets, in its initial state.
    pub fn prototype(&self) -> &Limiter {
        &self.prototype
    }

    /// Decides every arrival of `chunk`, telling `to` each decision: in
    /// batches whose keys' states (here and in `to`) are first read one
    /// after the other, so that their cache misses overlap instead of
    /// coming one per request.
    pub fn decide_all<T: crate::traffic::Timed>(
        &mut self,
        chunk: &[T],
        to: &mut impl super::Decisions,
    ) {
        if let States::Windows(windows) = &mut self.states {
            // The common case, its kind matched once a chunk: a fixed
            // window per key, never evicted. Its keys' windows are asked
            // for ahead only when they outgrow the cache.
            let by_host = self.by_host;
            let ahead = windows.len() >= PREFETCH_FROM || to.prefetches();
            let mut last = self.last;
            for (arrival, later) in with_later(chunk) {
                if let Some(later) = later.filter(|_| ahead) {
                    windows.prefetch(id_of(later, by_host));
                    to.prefetch(later, AHEAD);
                }
                let id = id_of(arrival.key, by_host);
                let (slot, decision) = windows.decide::<false>(id, arrival.time);
                last = Some(slot);
                to.decided(arrival, decision);
            }
            self.last = last;
            return;
        }
        let asks = to.prefetches();
        for (arrival, later) in with_later(chunk) {
            if let Some(later) = later {
                self.prefetch(later);
                if asks {
                    to.prefetch(later, AHEAD);
                }
            }
            let decision = self.decide_keyed::<false>(arrival.time, arrival.key);
            to.decided(arrival, decision);
        }
    }

    /// Forgets the keys idle for `evict_after` by `now`.
    fn evict(&mut self, now: u64, after: u64) {
        let States::Any(states) = &mut self.states else {
            return;
        };
        while let Some(&(seen, slot)) = self.idle.first() {
            if seen.saturating_add(after) > now {
                break;
            }
            self.idle.pop_first();
            states.get_mut(slot).alive = false;
            self.alive_now -= 1;
        }
    }

    /// Decides with the key's own limiter (any kind), its state fresh if
    /// it had none.
    #[inline]
    fn decide_any<const HINTS: bool>(&mut self, now: Nanos, key: Key) -> Decision {
        let id = self.id(key);
        let States::Any(states) = &mut self.states else {
            unreachable!("called for a limiter kept whole per key")
        };
        let (slot, new) = states.slot(id);
        assert!(
            states.len() <= MAX_KEYS,
            "validation bounds the keys to {MAX_KEYS}"
        );
        let state = states.get_mut(slot);
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
        self.last = Some(slot);
        decision
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

    /// Per key: its state (a fixed window's 16 bytes, or a whole limiter
    /// and what it allocates: memory a growing `Vec` reserves but never
    /// touches is not counted, the limit is on memory used), with eviction
    /// its entry in the idle set; and the key table's own
    /// ([`crate::traffic::slots::table_bytes`]: hashed ids, and Hosts,
    /// are numbered by a table of their own).
    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        let state = match &self.states {
            States::Windows { .. } => std::mem::size_of::<Window>() as u128,
            States::Any(_) => {
                std::mem::size_of::<KeyState>() as u128
                    + self.prototype.memory_at_most(1, requests, hashed)
            }
        };
        let idle = if self.evict_after.is_some() { 48 } else { 0 };
        crate::traffic::slots::table_bytes(keys, state + idle, hashed || self.by_host)
    }

    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        self.decide_keyed::<HINTS>(now, Key::DEFAULT)
    }

    /// The key's own limiter decides, and hints as it does.
    #[inline]
    fn decide_keyed<const HINTS: bool>(&mut self, now: Nanos, key: Key) -> Decision {
        let id = self.id(key);
        if let States::Windows(windows) = &mut self.states {
            let (slot, decision) = windows.decide::<HINTS>(id, now);
            self.last = Some(slot);
            return decision;
        }
        if let Some(after) = self.evict_after {
            self.evict(now.get(), after);
        }
        if !self.unlimited.is_empty() && self.unlimited.contains(&id) {
            self.unaccounted += 1;
            self.last = None;
            return Decision::Admit;
        }
        if !self.denied.is_empty() && self.denied.contains(&id) {
            self.turned_away_keyless += 1;
            self.last = None;
            return Decision::Reject(Hint::FORBIDDEN);
        }
        self.decide_any::<HINTS>(now, key)
    }

    fn refund(&mut self, now: Nanos) {
        // A request admitted unlimited took nothing to give back.
        let Some(slot) = self.last else {
            assert!(self.unaccounted > 0, "a refund follows a decision");
            return;
        };
        match &mut self.states {
            States::Any(states) => states.get_mut(slot).limiter.refund(now),
            States::Windows(windows) => windows.refund(slot, now),
        }
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
        match &self.states {
            States::Any(states) => states.entries().map(|state| state.limiter.resets()).sum(),
            States::Windows(windows) => windows.opened(),
        }
    }

    /// Every key's windows share their edges when the limiter's are fixed.
    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        self.prototype.window_edges()
    }
}

impl PerKey {
    /// With a key of the workload left unlimited, there is no bound.
    fn scaled(&self, interval: Nanos, bound: impl Fn(&Limiter, Nanos) -> u64) -> u64 {
        if self.leaves_keys_unlimited() && interval > Nanos::ZERO {
            return u64::MAX;
        }
        if self.keys() == 0 || interval == Nanos::ZERO {
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
