//! The one enum that holds whichever mode a cluster runs, and its dispatch
//! of [`Mode`]'s methods.

use super::batched::Batched;
use super::faults::Increment;
use super::instance_clock::InstanceClock;
use super::library::Library;
use super::local::Local;
use super::mode::{Mode, Reading, Stretch};
use super::shared_log::SharedLog;
use super::store_clock::StoreClock;
use super::token_server::TokenServer;
use crate::limiter::Decision;
use crate::time::Nanos;

/// Whichever mode a cluster runs (an enum, so the per-request call is a
/// jump the compiler can inline).
#[derive(Clone, Debug)]
pub enum Counter {
    /// `local`.
    Local(Local),
    /// `shared-instance-clock`.
    InstanceClock(InstanceClock),
    /// `shared-instance-clock` with `sync_interval`.
    Batched(Batched),
    /// `shared-store-clock`.
    StoreClock(StoreClock),
    /// Redisson's overall log.
    SharedLog(SharedLog),
    /// Sentinel's token server.
    TokenServer(TokenServer),
    /// A store-backed library's state in the store.
    Library(Library),
}

/// `$body` with `$mode` bound to whichever mode `$counter` holds.
macro_rules! each_mode {
    ($counter:expr, $mode:ident => $body:expr) => {
        match $counter {
            Counter::Local($mode) => $body,
            Counter::InstanceClock($mode) => $body,
            Counter::Batched($mode) => $body,
            Counter::StoreClock($mode) => $body,
            Counter::SharedLog($mode) => $body,
            Counter::TokenServer($mode) => $body,
            Counter::Library($mode) => $body,
        }
    };
}

impl Counter {
    /// See [`Mode::decide`].
    #[inline]
    pub fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision {
        each_mode!(self, mode => mode.decide::<HINTS>(at))
    }

    /// See [`Mode::when_down`].
    pub fn when_down<const HINTS: bool>(&mut self, at: Reading) -> Option<Decision> {
        each_mode!(self, mode => mode.when_down::<HINTS>(at))
    }

    /// See [`Mode::down_bound`].
    pub fn down_bound(&self, stretch: &Stretch) -> Option<u64> {
        each_mode!(self, mode => mode.down_bound(stretch))
    }

    /// See [`Mode::max_delay`].
    pub fn max_delay(&self) -> Nanos {
        each_mode!(self, mode => mode.max_delay())
    }

    /// See [`Mode::refund`].
    pub fn refund(&mut self, instance: usize, clock: u64) {
        each_mode!(self, mode => mode.refund(instance, clock))
    }

    /// See [`Mode::bound`].
    pub fn bound(&self, stretch: &Stretch) -> u64 {
        each_mode!(self, mode => mode.bound(stretch))
    }

    /// See [`Mode::last_key`].
    pub fn last_key(&self) -> u64 {
        each_mode!(self, mode => mode.last_key())
    }

    /// See [`Mode::lose`].
    pub fn lose(&mut self, increments: &[Increment]) {
        each_mode!(self, mode => mode.lose(increments))
    }

    /// See [`Mode::step_times`].
    pub fn step_times(&self) -> Vec<Nanos> {
        each_mode!(self, mode => mode.step_times())
    }

    /// See [`Mode::keys_matter`].
    pub fn keys_matter(&self) -> bool {
        each_mode!(self, mode => mode.keys_matter())
    }

    /// See [`Mode::memory_at_most`].
    pub fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        each_mode!(self, mode => mode.memory_at_most(keys, requests, hashed))
    }

    /// See [`Mode::nominal`].
    pub fn nominal(&self, interval: Nanos) -> Option<f64> {
        each_mode!(self, mode => mode.nominal(interval))
    }

    /// See [`Mode::describe`].
    pub fn describe(&self, shared: String) -> (String, &'static str) {
        each_mode!(self, mode => mode.describe(shared))
    }
}
