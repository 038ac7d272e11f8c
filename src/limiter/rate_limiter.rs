//! The contract every limiter's state keeps: decide arrivals in time order,
//! give back what a chain takes back, and state what it promises, what it
//! can let through at worst over any traffic, and what it costs a store.

use super::Decision;
use crate::time::Nanos;
use crate::traffic::Key;

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
    /// `HINTS` (otherwise [`super::Hint::NONE`]): the same admissions either way.
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
    fn memory_at_most(&self, _keys: u64, _requests: u64, _hashed: bool) -> u128 {
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
    fn fixed_window(&self) -> Option<&super::fixed_window::FixedWindow> {
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
