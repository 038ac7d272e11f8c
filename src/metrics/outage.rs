//! What a limiter let through while its store was down, and just after:
//! the worst count in any interval starting within a span of time, exact.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::time::Nanos;

/// How long after an outage its aftermath is watched, at most.
pub const AFTERMATH: Nanos = Nanos(10_000_000_000);

/// The worst count, in any `[s, s + interval)`, of the times within
/// `[from, to)`: what a span of time saw in its worst interval, from times
/// pushed in non-decreasing order.
#[derive(Clone, Debug)]
pub struct SpanWorst {
    from: u64,
    to: u64,
    interval: u64,
    /// Times from `from` on within the interval before the newest.
    held: VecDeque<u64>,
    worst: u64,
    worst_start: u64,
}

impl SpanWorst {
    /// Watches intervals of `interval` starting in `[from, to)`.
    pub fn new(from: Nanos, to: Nanos, interval: Nanos) -> SpanWorst {
        SpanWorst {
            from: from.get(),
            to: to.get(),
            interval: interval.get(),
            held: VecDeque::new(),
            worst: 0,
            worst_start: from.get(),
        }
    }

    /// Counts one time.
    pub fn push(&mut self, t: u64) {
        if t < self.from || t >= self.to {
            return;
        }
        // An interval starting at a held time ends before `t`: it is complete.
        while let Some(&front) = self.held.front() {
            if front.saturating_add(self.interval) > t {
                break;
            }
            self.close(front, self.held.len() as u64);
            self.held.pop_front();
        }
        self.held.push_back(t);
    }

    fn close(&mut self, start: u64, count: u64) {
        if count > self.worst {
            self.worst = count;
            self.worst_start = start;
        }
    }

    /// The worst count and where its interval starts.
    pub fn finish(mut self) -> (u64, u64) {
        let held: Vec<u64> = self.held.drain(..).collect();
        for (i, &start) in held.iter().enumerate() {
            self.close(start, (held.len() - i) as u64);
        }
        (self.worst, self.worst_start)
    }
}

/// One outage of the store, as the run saw it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutageSummary {
    /// When the store went down.
    pub at_ns: u64,
    /// For how long.
    pub for_ns: u64,
    /// What instances did meanwhile: allow, deny or local.
    pub on_error: String,
    /// Requests that arrived during the outage.
    pub offered: u64,
    /// Of those, admitted.
    pub admitted: u64,
    /// The most requests arriving during the outage in any 1 s.
    pub offered_worst_1s: u64,
    /// The most admitted during the outage in any 1 s: the backend's worst
    /// second while the store was down.
    pub worst_1s_during: u64,
    /// Where that second starts.
    pub worst_1s_during_start_ns: u64,
    /// The most admitted in any 1 s of the aftermath: up to 10 s after the
    /// store is back, the next outage or the end of the run.
    pub worst_1s_after: u64,
    /// Where that second starts.
    pub worst_1s_after_start_ns: u64,
    /// How long the aftermath watched.
    pub after_ns: u64,
}

/// One outage being watched.
#[derive(Clone, Debug)]
struct Watch {
    at: Nanos,
    end: Nanos,
    after_end: Nanos,
    offered: u64,
    admitted: u64,
    offered_worst: SpanWorst,
    during: SpanWorst,
    after: SpanWorst,
}

/// Every outage of a run's store.
#[derive(Clone, Debug)]
pub struct Outages {
    on_error: &'static str,
    watches: Vec<Watch>,
}

impl Outages {
    /// Watches `outages` (start, end; in order, apart) of a run of `duration`.
    pub fn new(outages: &[(Nanos, Nanos)], on_error: &'static str, duration: Nanos) -> Outages {
        let watches = outages
            .iter()
            .enumerate()
            .map(|(i, &(at, end))| {
                let next = outages.get(i + 1).map_or(duration, |&(next, _)| next);
                let after_end = Nanos(end.get().saturating_add(AFTERMATH.get()))
                    .min(next)
                    .min(duration)
                    .max(end);
                Watch {
                    at,
                    end,
                    after_end,
                    offered: 0,
                    admitted: 0,
                    offered_worst: SpanWorst::new(at, end, Nanos::SECOND),
                    during: SpanWorst::new(at, end, Nanos::SECOND),
                    after: SpanWorst::new(end, after_end, Nanos::SECOND),
                }
            })
            .collect();
        Outages { on_error, watches }
    }

    /// A request arrived at `at`.
    pub fn offered(&mut self, at: Nanos) {
        for watch in &mut self.watches {
            if (watch.at..watch.end).contains(&at) {
                watch.offered += 1;
            }
            watch.offered_worst.push(at.get());
        }
    }

    /// A request that arrived at `arrived` was admitted.
    pub fn admitted(&mut self, arrived: Nanos) {
        for watch in &mut self.watches {
            if (watch.at..watch.end).contains(&arrived) {
                watch.admitted += 1;
            }
        }
    }

    /// The backend got an admitted request at `at`.
    pub fn delivered(&mut self, at: Nanos) {
        for watch in &mut self.watches {
            watch.during.push(at.get());
            watch.after.push(at.get());
        }
    }

    /// Each outage's figures.
    pub fn finish(self) -> Vec<OutageSummary> {
        self.watches
            .into_iter()
            .map(|w| {
                let (offered_worst_1s, _) = w.offered_worst.finish();
                let (worst_1s_during, worst_1s_during_start_ns) = w.during.finish();
                let (worst_1s_after, worst_1s_after_start_ns) = w.after.finish();
                OutageSummary {
                    at_ns: w.at.get(),
                    for_ns: w.end.get() - w.at.get(),
                    on_error: self.on_error.to_string(),
                    offered: w.offered,
                    admitted: w.admitted,
                    offered_worst_1s,
                    worst_1s_during,
                    worst_1s_during_start_ns,
                    worst_1s_after,
                    worst_1s_after_start_ns,
                    after_ns: w.after_end.get() - w.end.get(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worst count of `times` within [from, to) in any [s, s + l), by brute force.
    fn brute(times: &[u64], from: u64, to: u64, l: u64) -> u64 {
        (0..to + l)
            .map(|s| {
                times
                    .iter()
                    .filter(|&&t| from <= t && t < to && s <= t && t < s + l)
                    .count() as u64
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn agrees_with_brute_force_on_every_span() {
        let mut state = 17u64;
        for _ in 0..300 {
            let mut times: Vec<u64> = (0..crate::random::splitmix64(&mut state) % 40)
                .map(|_| crate::random::splitmix64(&mut state) % 60)
                .collect();
            times.sort_unstable();
            let from = crate::random::splitmix64(&mut state) % 50;
            let to = from + 1 + crate::random::splitmix64(&mut state) % 20;
            let l = 1 + crate::random::splitmix64(&mut state) % 15;
            let mut worst = SpanWorst::new(Nanos(from), Nanos(to), Nanos(l));
            times.iter().for_each(|&t| worst.push(t));
            assert_eq!(
                worst.finish().0,
                brute(&times, from, to, l),
                "{times:?} from {from} to {to} over {l}"
            );
        }
    }
}
