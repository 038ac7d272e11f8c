//! `mode = "shared-store-clock"`: one shared counter whose window starts at
//! its first increment and expires W later on the store's clock (Redis
//! `INCR` + `PEXPIRE`).

use super::clock::Clock;
use super::faults::Increment;
use super::in_true_time;
use super::mode::{Mode, Reading, Stretch};
use crate::limiter::{Decision, Hint};
use crate::time::Nanos;

/// One counter, windows cut by the store's clock.
#[derive(Clone, Debug)]
pub struct StoreClock {
    window: u64,
    threshold: u64,
    clock: Clock,
    rtt: u64,
    /// The current key: (its start on the store's clock, its count).
    current: Option<(u64, u64)>,
}

impl StoreClock {
    /// No key yet.
    pub fn new(window: u64, threshold: u64, clock: Clock, rtt: u64) -> StoreClock {
        StoreClock {
            window,
            threshold,
            clock,
            rtt,
            current: None,
        }
    }
}

impl Mode for StoreClock {
    /// The answer to a request sent at true time `now`.
    fn decide<const HINTS: bool>(&mut self, at: Reading) -> Decision {
        let now = at.now;
        // The command reaches the store half a round trip later.
        let store_now = self.clock.read(now.saturating_add(self.rtt / 2));
        // The key expires W after it was created, on the store's clock: a
        // backward step makes it live longer, never resets it.
        let (start, count) = match self.current {
            Some((start, count)) if store_now < start.saturating_add(self.window) => (start, count),
            _ => (store_now, 0),
        };
        let admit = count < self.threshold;
        self.current = Some((start, count + u64::from(admit)));
        let end = start.saturating_add(self.window);
        Decision::admit_or::<HINTS>(admit, || in_true_time(Hint::at_reset(end), store_now, now))
    }

    /// The current key's start on the store's clock, which names it.
    fn last_key(&self) -> u64 {
        self.current.map_or(0, |(start, _)| start)
    }

    /// A failover loses `increments` (each naming its key by its start):
    /// those of the current key come off its count; when they were all it
    /// had, the replica never had the key, and the window is gone.
    fn lose(&mut self, increments: &[Increment]) {
        if let Some((start, count)) = &mut self.current {
            let lost = increments.iter().filter(|&&(_, key)| key == *start).count() as u64;
            *count = count.saturating_sub(lost);
            if *count == 0 {
                self.current = None;
            }
        }
    }

    /// Takes back the last admission.
    fn refund(&mut self, _: usize, _: u64) {
        if let Some((_, count)) = &mut self.current {
            *count -= 1;
        }
    }

    /// N per store window met, with forward steps shortening windows.
    fn bound(&self, stretch: &Stretch) -> u64 {
        crate::limiter::fixed_window::windows_met(
            self.clock.stretch(stretch.interval, stretch.duration),
            self.window,
        )
        .saturating_mul(self.threshold)
    }

    /// When the store's clock steps, in true time.
    fn step_times(&self) -> Vec<Nanos> {
        self.clock.step_times()
    }

    fn describe(&self, shared: String) -> (String, &'static str) {
        (shared, "one shared counter, windows by the store's clock")
    }
}
