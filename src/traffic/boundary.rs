//! Burst pairs straddling window boundaries: the traffic that makes a fixed
//! window admit 2N in far less than one window.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::num::NonZeroU64;

use rand::RngExt;
use serde::Deserialize;

use super::clients::{Clients, Weights};
use super::{Arrival, Key, Kind, MAX_BURST, Place, Rng, Timed};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// `kind = "boundary"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Distance between boundaries.
    pub period: Nanos,
    /// Arrivals in `[b − spread, b)`.
    pub before: u64,
    /// Arrivals in `[b, b + spread)`.
    pub after: u64,
    /// Width of each half of the burst.
    pub spread: Nanos,
    /// Offset of the boundaries: b = phase + k·period (default 0).
    #[serde(default)]
    pub phase: Nanos,
    /// Target every n-th boundary, k = 1, 1 + n, 1 + 2n, … (default 2).
    #[serde(default = "default_every")]
    pub every: NonZeroU64,
    /// Evenly spaced arrivals instead of uniformly random ones (default false).
    #[serde(default)]
    pub even: bool,
    /// With the source's `clients`: every client bursts around boundaries
    /// of its own, `phase + p_i + k·period` for a phase p_i drawn once per
    /// client in [0, period), with `before` and `after` arrivals each, under
    /// its own key (default false: the bursts are shared, their requests
    /// spread over the clients).
    #[serde(default)]
    pub per_client: bool,
}

fn default_every() -> NonZeroU64 {
    NonZeroU64::MIN.saturating_add(1)
}

impl Config {
    /// Checks that bursts are non-empty and never overlap one another.
    fn check(&self) -> Result<(), FieldError> {
        if self.period == Nanos::ZERO {
            return Err(field_error!("period", "must be longer than 0"));
        }
        if self.spread == Nanos::ZERO {
            return Err(field_error!("spread", "must be longer than 0"));
        }
        if self.before.saturating_add(self.after) > super::MAX_BURST {
            return Err(field_error!(
                "before",
                "a burst pair of {} + {} is held in memory; at most {} in all",
                self.before,
                self.after,
                super::MAX_BURST
            ));
        }
        let gap = u128::from(self.period.get()) * u128::from(self.every.get());
        if 2 * u128::from(self.spread.get()) > gap {
            return Err(field_error!(
                "spread",
                "{} on each side of boundaries {} apart makes bursts overlap; use a spread of at most half that",
                self.spread,
                Nanos(u64::try_from(gap).unwrap_or(u64::MAX))
            ));
        }
        Ok(())
    }

    /// Arrivals in `[start, end)`.
    pub fn stream(&self, start: Nanos, end: Nanos, rng: Rng) -> Arrivals {
        Arrivals {
            config: self.clone(),
            start: start.get(),
            // Bursts of nothing (a sweep's size 0) end at once, not after
            // walking every boundary of the run.
            end: if self.is_empty() { 0 } else { end.get() },
            k: 1,
            burst: Vec::new().into_iter(),
            rng,
        }
    }

    /// Whether a burst has no arrivals at all (`before = after = 0`).
    fn is_empty(&self) -> bool {
        self.before == 0 && self.after == 0
    }

    /// The times of one burst pair around boundary `b`, sorted.
    fn burst(&self, b: u64, rng: &mut Rng) -> Vec<u64> {
        let spread = self.spread.get();
        let mut times = Vec::with_capacity((self.before + self.after) as usize);
        for (from, count) in [(b.saturating_sub(spread), self.before), (b, self.after)] {
            let width = if from == b { spread } else { b - from };
            if self.even {
                times.extend((0..count).map(|i| from + evenly(i, count, width)));
            } else {
                times.extend((0..count).map(|_| from + rng.random_range(0..width)));
            }
        }
        times.sort_unstable();
        times
    }
}

impl Config {
    /// Every one of `clients` clients bursting around its own boundaries,
    /// arrivals in `[start, end)`.
    pub fn per_client(&self, clients: u64, start: Nanos, end: Nanos, mut rng: Rng) -> PerClient {
        let period = self.period.get();
        let phases = (0..clients).map(|_| rng.random_range(0..period)).collect();
        PerClient {
            config: self.clone(),
            phases,
            start: start.get(),
            end: end.get(),
            k: 1,
            pending: BinaryHeap::new(),
            rng,
            exhausted: self.is_empty(),
        }
    }
}

/// The running source of per-client bursts: the clients' burst pairs around
/// one boundary index at a time, merged with what is left of the previous
/// index's, in time order (then key order) — at most two indices in memory.
pub struct PerClient {
    config: Config,
    /// Each client's phase, in [0, period).
    phases: Vec<u64>,
    start: u64,
    end: u64,
    /// The next boundary index to burst around.
    k: u64,
    pending: BinaryHeap<Reverse<(u64, u64)>>,
    rng: Rng,
    exhausted: bool,
}

impl Iterator for PerClient {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        loop {
            // Index k's boundaries are at base + p_i, base = phase + k·period;
            // its bursts start no earlier than base − spread.
            let base = self
                .k
                .checked_mul(self.config.period.get())
                .and_then(|offset| offset.checked_add(self.config.phase.get()))
                .filter(|_| !self.exhausted);
            let next_index = base.map_or(u64::MAX, |base| {
                base.saturating_sub(self.config.spread.get())
            });
            if let Some(&Reverse((time, key))) = self.pending.peek()
                && (time < next_index || self.exhausted)
            {
                self.pending.pop();
                if (self.start..self.end).contains(&time) {
                    return Some(Arrival {
                        time: Nanos(time),
                        key: Key::client(key),
                    });
                }
                continue;
            }
            let Some(base) = base.filter(|_| next_index < self.end) else {
                self.exhausted = true;
                if self.pending.is_empty() {
                    return None;
                }
                continue;
            };
            for (client, &phase) in self.phases.iter().enumerate() {
                let Some(b) = base.checked_add(phase) else {
                    continue;
                };
                for time in self.config.burst(b, &mut self.rng) {
                    self.pending.push(Reverse((time, client as u64)));
                }
            }
            match self.k.checked_add(self.config.every.get()) {
                Some(k) => self.k = k,
                None => self.exhausted = true,
            }
        }
    }
}

impl Kind for Config {
    const NAME: &'static str = "boundary";
    type Item = Arrival;
    type Arrivals = Bursts;

    fn validate(&self, place: Place) -> Result<Vec<String>, FieldError> {
        self.check()?;
        if self.per_client {
            match place.clients {
                None => {
                    return Err(field_error!(
                        "per_client",
                        "bursts per client need the source's clients, like clients = {{ count = 1000 }}"
                    ));
                }
                Some(c) if c.weights != Weights::Uniform => {
                    return Err(field_error!(
                        "per_client",
                        "every client bursts as often as the others; drop `weights`"
                    ));
                }
                Some(c) if c.count.get().saturating_mul(self.before + self.after) > MAX_BURST => {
                    return Err(field_error!(
                        "per_client",
                        "{} clients bursting {} + {} each is held in memory; at most {MAX_BURST} arrivals per boundary in all",
                        c.count,
                        self.before,
                        self.after
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(Vec::new())
    }

    fn is_stochastic(&self) -> bool {
        !self.even
    }

    fn describe(&self) -> String {
        format!(
            "boundary bursts: {} before and {} after every {} boundary of {} (phase {}), within {}",
            self.before,
            self.after,
            match self.every.get() {
                1 => "".to_string(),
                2 => "2nd".to_string(),
                3 => "3rd".to_string(),
                n => format!("{n}th"),
            },
            self.period,
            self.phase,
            self.spread
        )
        .replace("every  boundary", "every boundary")
    }

    fn estimated_arrivals(&self, place: Place) -> Result<u128, FieldError> {
        let gap = u128::from(self.period.get()) * u128::from(self.every.get());
        // Per client, every client bursts: one more boundary for their phases.
        let (bursting, extra) = match place.clients {
            Some(clients) if self.per_client => (u128::from(clients.count.get()), 1),
            _ => (1, 0),
        };
        Ok((place.span() / gap.max(1) + 1 + extra) * u128::from(self.before + self.after) * bursting)
    }

    fn arrivals(&self, place: Place, rng: Rng, keys: Rng) -> Result<Bursts, FieldError> {
        Ok(match place.clients {
            Some(clients) if self.per_client => {
                Bursts::PerClient(self.per_client(clients.count.get(), place.start, place.end, keys))
            }
            _ => Bursts::Shared(self.stream(place.start, place.end, rng)),
        })
    }

    fn keys_itself(&self, clients: Option<&Clients>) -> bool {
        self.per_client && clients.is_some()
    }

    /// The kind of bursts matched once a chunk, not once an arrival.
    fn refill<T: Timed>(arrivals: &mut Bursts, out: &mut Vec<T>, count: usize) {
        out.clear();
        match arrivals {
            Bursts::Shared(shared) => out.extend(shared.take(count).map(T::at)),
            Bursts::PerClient(each) => out.extend(each.take(count).map(T::of)),
        }
    }
}

/// The running source: bursts shared by everyone, or every client's own.
pub enum Bursts {
    /// Shared bursts (spread over the clients, if any, by the caller).
    Shared(Arrivals),
    /// Every client bursting around its own boundaries.
    PerClient(PerClient),
}

impl Iterator for Bursts {
    type Item = Arrival;

    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        match self {
            Bursts::Shared(shared) => shared.next().map(Timed::arrival),
            Bursts::PerClient(each) => each.next(),
        }
    }
}

/// The i-th of `count` points evenly spaced across `width`, starting at 0.
fn evenly(i: u64, count: u64, width: u64) -> u64 {
    (u128::from(i) * u128::from(width) / u128::from(count)) as u64
}

/// The running source: one burst pair in memory at a time.
pub struct Arrivals {
    config: Config,
    start: u64,
    end: u64,
    /// Index of the next boundary to burst around.
    k: u64,
    burst: std::vec::IntoIter<u64>,
    rng: Rng,
}

impl Iterator for Arrivals {
    type Item = Nanos;

    fn next(&mut self) -> Option<Nanos> {
        loop {
            if let Some(time) = self
                .burst
                .by_ref()
                .find(|t| (self.start..self.end).contains(t))
            {
                return Some(Nanos(time));
            }
            let offset = self.k.checked_mul(self.config.period.get())?;
            let b = self.config.phase.get().checked_add(offset)?;
            if b.saturating_sub(self.config.spread.get()) >= self.end {
                return None;
            }
            self.k = self.k.checked_add(self.config.every.get())?;
            self.burst = self.config.burst(b, &mut self.rng).into_iter();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const MS: u64 = 1_000_000;

    fn config(every: u64, even: bool) -> Config {
        Config {
            period: Nanos(1_000 * MS),
            before: 10,
            after: 10,
            spread: Nanos(100 * MS),
            phase: Nanos::ZERO,
            every: NonZeroU64::new(every).unwrap(),
            even,
            per_client: false,
        }
    }

    fn times(config: &Config, end_ms: u64) -> Vec<u64> {
        config
            .stream(Nanos(0), Nanos(end_ms * MS), Rng::seed_from_u64(5))
            .map(Nanos::get)
            .collect()
    }

    #[test]
    fn a_burst_of_nothing_ends_at_once_however_many_boundaries_the_run_has() {
        // 1 ns boundaries to the end of time: walking them would never end.
        let empty = Config {
            period: Nanos(1),
            spread: Nanos::ZERO,
            before: 0,
            after: 0,
            ..config(1, false)
        };
        let end = Nanos(u64::MAX);
        assert_eq!(
            empty.stream(Nanos(0), end, Rng::seed_from_u64(1)).count(),
            0
        );
        assert_eq!(
            empty
                .per_client(3, Nanos(0), end, Rng::seed_from_u64(1))
                .count(),
            0
        );
    }

    #[test]
    fn even_bursts_sit_just_before_and_just_after_the_boundary() {
        let list = times(&config(2, true), 2_000);
        let expected: Vec<u64> = (0..10)
            .map(|i| 900 * MS + i * 10 * MS)
            .chain((0..10).map(|i| 1_000 * MS + i * 10 * MS))
            .collect();
        assert_eq!(list, expected);
    }

    #[test]
    fn every_second_boundary_by_default_and_every_one_on_request() {
        let pairs = |every| times(&config(every, false), 6_000).len() / 20;
        assert_eq!(pairs(2), 3, "boundaries 1 s, 3 s, 5 s");
        assert_eq!(
            pairs(1),
            5,
            "boundaries 1 s to 5 s, and only the first half of the 6 s pair"
        );
    }

    #[test]
    fn random_bursts_stay_within_their_halves_and_sorted() {
        let list = times(&config(2, false), 2_000);
        assert!(list.is_sorted());
        assert_eq!(
            list.iter()
                .filter(|&&t| (900 * MS..1_000 * MS).contains(&t))
                .count(),
            10
        );
        assert_eq!(
            list.iter()
                .filter(|&&t| (1_000 * MS..1_100 * MS).contains(&t))
                .count(),
            10
        );
    }

    #[test]
    fn refuses_bursts_that_would_overlap() {
        let mut wide = config(1, false);
        wide.spread = Nanos(600 * MS);
        assert!(wide.check().unwrap_err().to_string().contains("overlap"));
    }
}
