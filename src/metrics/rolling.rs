//! The exact worst count of admitted requests in any interval `[s, s + L)`,
//! for several L at once, in one pass over the admitted times.

use std::collections::VecDeque;

use crate::time::Nanos;

/// The worst count for one interval length, and where it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Worst {
    /// The interval length L.
    pub interval: Nanos,
    /// max over s of |{a : s ≤ a < s + L}|.
    pub count: u64,
    /// Where the first interval holding `count` begins: the time of its first
    /// request. (Any s down to just after `start + L` minus the last request's
    /// time attains the count too; the first request is the start a reader
    /// recognises on a chart.)
    pub start: Nanos,
}

#[derive(Clone, Debug)]
struct Tracker {
    interval: u64,
    /// Absolute index of the oldest admitted time still within (t − L, t].
    front: u64,
    worst: u64,
    worst_start: u64,
}

/// Time spent with more than `capacity` admitted in the trailing interval.
#[derive(Clone, Debug)]
struct Overload {
    tracker: usize,
    capacity: u64,
    since: u64,
    total: u64,
}

/// Worst rolling counts for a set of interval lengths.
///
/// One deque holds the admitted times within the longest interval; each length
/// keeps its own front pointer into it. O(number of lengths) amortised per
/// admitted request; memory O(most admitted within the longest interval).
#[derive(Clone, Debug)]
pub struct RollingCounts {
    times: VecDeque<u64>,
    /// How many times were dropped from the deque's front: the absolute index of `times[0]`.
    dropped: u64,
    pushed: u64,
    trackers: Vec<Tracker>,
    overload: Option<Overload>,
}

impl RollingCounts {
    /// Tracks each of `intervals` (all longer than 0).
    pub fn new(intervals: &[Nanos]) -> RollingCounts {
        let trackers = intervals
            .iter()
            .map(|interval| {
                assert!(
                    interval.get() > 0,
                    "rolling intervals must be longer than 0"
                );
                Tracker {
                    interval: interval.get(),
                    front: 0,
                    worst: 0,
                    worst_start: 0,
                }
            })
            .collect();
        RollingCounts {
            times: VecDeque::new(),
            dropped: 0,
            pushed: 0,
            trackers,
            overload: None,
        }
    }

    /// Also measures how long the trailing count over `interval` (which must be
    /// one of the tracked ones) stays above `capacity`.
    pub fn with_overload(mut self, interval: Nanos, capacity: u64) -> RollingCounts {
        let tracker = self
            .trackers
            .iter()
            .position(|t| t.interval == interval.get());
        let tracker = tracker.expect("the overload interval is tracked");
        self.overload = Some(Overload {
            tracker,
            capacity,
            since: 0,
            total: 0,
        });
        self
    }

    /// Records one admitted request at `now` (non-decreasing).
    #[inline]
    pub fn push(&mut self, now: Nanos) {
        let now = now.get();
        self.times.push_back(now);
        self.pushed += 1;
        for (index, tracker) in self.trackers.iter_mut().enumerate() {
            let overload = self.overload.as_mut().filter(|o| o.tracker == index);
            advance(
                tracker,
                &self.times,
                self.dropped,
                self.pushed - 1,
                now,
                overload,
            );
            let count = self.pushed - tracker.front;
            if count > tracker.worst {
                tracker.worst = count;
                tracker.worst_start = self.times[(tracker.front - self.dropped) as usize];
            }
        }
        let keep_from = self
            .trackers
            .iter()
            .map(|t| t.front)
            .min()
            .unwrap_or(self.pushed);
        while self.dropped < keep_from {
            self.times.pop_front();
            self.dropped += 1;
        }
    }

    /// The worst count per interval, in the order given to [`RollingCounts::new`].
    pub fn worst(&self) -> Vec<Worst> {
        let worst = |t: &Tracker| Worst {
            interval: Nanos(t.interval),
            count: t.worst,
            start: Nanos(t.worst_start),
        };
        self.trackers.iter().map(worst).collect()
    }

    /// How many admitted requests lie in `(now − L, now]` for the overload
    /// interval L, at `now` (non-decreasing, and not before the last push).
    #[inline]
    pub fn trailing_count(&mut self, now: Nanos) -> u64 {
        let Some(overload) = self.overload.as_mut() else {
            return 0;
        };
        let tracker = &mut self.trackers[overload.tracker];
        advance(
            tracker,
            &self.times,
            self.dropped,
            self.pushed,
            now.get(),
            Some(overload),
        );
        self.pushed - tracker.front
    }

    /// Total time the trailing count exceeded the capacity, once every admitted
    /// request has expired from the interval.
    pub fn time_over_capacity(&self) -> Nanos {
        let Some(overload) = &self.overload else {
            return Nanos::ZERO;
        };
        let mut overload = overload.clone();
        let mut tracker = self.trackers[overload.tracker].clone();
        advance(
            &mut tracker,
            &self.times,
            self.dropped,
            self.pushed,
            u64::MAX,
            Some(&mut overload),
        );
        Nanos(overload.total)
    }
}

/// Moves `tracker`'s front past the times that have left (now − L, now], and
/// accounts the time over capacity up to `now`, with `live_end` times pushed.
#[inline]
fn advance(
    tracker: &mut Tracker,
    times: &VecDeque<u64>,
    dropped: u64,
    live_end: u64,
    now: u64,
    mut overload: Option<&mut Overload>,
) {
    while tracker.front < live_end {
        let oldest = times[(tracker.front - dropped) as usize];
        if now - oldest < tracker.interval {
            break;
        }
        if let Some(overload) = overload.as_deref_mut() {
            let expiry = oldest + tracker.interval;
            overload.account(live_end - tracker.front, expiry);
        }
        tracker.front += 1;
    }
    if let Some(overload) = overload {
        if now != u64::MAX {
            overload.account(live_end - tracker.front, now);
        }
    }
}

impl Overload {
    /// The trailing count was `live` from `self.since` until `until`.
    #[inline]
    fn account(&mut self, live: u64, until: u64) {
        if live > self.capacity {
            self.total += until - self.since;
        }
        self.since = until;
    }
}

/// The same figures by brute force, O(n²): for tests of the streaming version.
pub fn worst_by_brute_force(admitted: &[u64], interval: u64) -> (u64, u64) {
    let mut best = (0, 0);
    for (i, &end) in admitted.iter().enumerate() {
        let inside: Vec<u64> = admitted[..=i]
            .iter()
            .copied()
            .filter(|&a| end - a < interval)
            .collect();
        if inside.len() as u64 > best.0 {
            best = (inside.len() as u64, inside[0]);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worst(times: &[u64], intervals: &[u64]) -> Vec<(u64, u64)> {
        let intervals: Vec<Nanos> = intervals.iter().map(|&i| Nanos(i)).collect();
        let mut counts = RollingCounts::new(&intervals);
        times.iter().for_each(|&t| counts.push(Nanos(t)));
        counts
            .worst()
            .iter()
            .map(|w| (w.count, w.start.get()))
            .collect()
    }

    #[test]
    fn counts_a_half_open_interval() {
        // 0 and 10 are exactly 10 apart: never in one [s, s + 10).
        assert_eq!(worst(&[0, 10], &[10]), [(1, 0)]);
        assert_eq!(worst(&[0, 9], &[10]), [(2, 0)]);
    }

    #[test]
    fn reports_the_first_request_of_the_earliest_worst_interval() {
        assert_eq!(worst(&[100, 105, 200, 205, 206], &[10]), [(3, 200)]);
    }

    #[test]
    fn tracks_several_lengths_in_one_pass() {
        let times = [0, 1, 2, 50, 51, 52, 53, 99];
        assert_eq!(worst(&times, &[3, 100, 10]), [(3, 0), (8, 0), (4, 50)]);
    }

    #[test]
    fn measures_time_above_capacity_exactly() {
        let mut counts = RollingCounts::new(&[Nanos(10)]).with_overload(Nanos(10), 1);
        // Two admitted at 0 and 4: the trailing count is 2 from 4 until 0 expires at 10.
        [0, 4, 30, 31, 32]
            .iter()
            .for_each(|&t| counts.push(Nanos(t)));
        // Then 2 from 31 to 32, 3 from 32 to 40, 2 from 40 until 41.
        assert_eq!(counts.time_over_capacity(), Nanos(6 + 10));
    }

    #[test]
    fn agrees_with_brute_force_on_a_small_case() {
        let times = [3, 3, 7, 12, 12, 12, 19, 40, 41];
        for interval in [1, 2, 5, 9, 10, 40] {
            assert_eq!(
                worst(&times, &[interval])[0],
                worst_by_brute_force(&times, interval)
            );
        }
    }
}
