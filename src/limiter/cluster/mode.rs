//! What a cluster's mode does with the requests its instances pass on: the
//! contract [`super::Cluster`] relies on, implemented in each mode's file.

use super::clock::Clock;
use super::faults::Increment;
use crate::limiter::Decision;
use crate::time::Nanos;
use crate::traffic::Key;

/// One request as the instance that took it sees it.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    /// The instance.
    pub instance: usize,
    /// Its clock's reading.
    pub clock: u64,
    /// True time.
    pub now: u64,
    /// The client's key.
    pub key: Key,
    /// The oldest reading among every instance's last.
    pub oldest: u64,
}

/// What a bound over an interval of true time may depend on.
#[derive(Clone, Copy, Debug)]
pub struct Stretch<'a> {
    /// The interval, in true nanoseconds.
    pub interval: u64,
    /// The run's length.
    pub duration: u64,
    /// Every instance's clock.
    pub clocks: &'a [Clock],
    /// The span of instance-clock time the interval can cover on some clock.
    pub instance_span: u64,
}

/// Where a cluster's count lives and how it decides.
pub trait Mode {
    /// The answer to `at`'s request.
    fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision;

    /// Its own answer while the store is down (Sentinel's fallback to the
    /// local rule), or `None` to leave it to `on_error`.
    fn when_down<const HINTS: bool>(&mut self, at: Reading) -> Option<Decision> {
        let _ = at;
        None
    }

    /// What it lets through over `stretch` while the store is down, besides
    /// [`Mode::bound`], when it answers outages itself.
    fn down_bound(&self, stretch: &Stretch) -> Option<u64> {
        let _ = stretch;
        None
    }

    /// The longest delay it gives an admitted request.
    fn max_delay(&self) -> Nanos {
        Nanos::ZERO
    }

    /// Takes back the last admission, which `instance` made at its clock
    /// reading `clock`.
    fn refund(&mut self, instance: usize, clock: u64);

    /// The most it admits over `stretch`, faults aside.
    fn bound(&self, stretch: &Stretch) -> u64;

    /// The window key of the last admission, for the failover journal.
    fn last_key(&self) -> u64 {
        0
    }

    /// Forgets the increments a failover loses.
    fn lose(&mut self, increments: &[Increment]) {
        let _ = increments;
    }

    /// When its own clock steps, in true time.
    fn step_times(&self) -> Vec<Nanos> {
        Vec::new()
    }

    /// Whether its decisions depend on the client's key.
    fn keys_matter(&self) -> bool {
        false
    }

    /// Memory it holds beyond the cluster's own figures.
    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        let _ = (keys, requests, hashed);
        0
    }

    /// Its nominal count over `interval`, when not the shared window's.
    fn nominal(&self, interval: Nanos) -> Option<f64> {
        let _ = interval;
        None
    }

    /// Its limit in words (given the shared window's, `shared`) and how the
    /// instances count.
    fn describe(&self, shared: String) -> (String, &'static str);
}
