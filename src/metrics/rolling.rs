//! The exact worst count of admitted requests in any interval `[s, s + L)`,
//! for several L at once, in one pass over the admitted times.

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
    /// Absolute index of the oldest admitted time still within (t − L, t],
    /// for the last t checked.
    front: u64,
    worst: u64,
    worst_start: u64,
    /// Absolute index of the next admitted time whose count could beat `worst`.
    next: u64,
}

/// The most admitted times one tracker skips at once: its front lags by no
/// more than this, so the ring holds at most this many more times.
const MAX_SKIP: u64 = 1 << 16;

/// The first index in `front..=last` whose time is within `(now − interval, now]`,
/// where `at(last) = now`: galloping from `front`, since the fronts move by
/// about one per request when checked at every request, and by many after a skip.
#[inline]
fn first_within(at: &impl Fn(u64) -> u64, front: u64, last: u64, now: u64, interval: u64) -> u64 {
    let old = |i: u64| now - at(i) >= interval;
    if !old(front) {
        return front;
    }
    // old(lo) holds and old(hi) does not; old(last) never holds.
    let (mut lo, mut hi, mut step) = (front, last, 1);
    while lo + step < last {
        if !old(lo + step) {
            hi = lo + step;
            break;
        }
        lo += step;
        step *= 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if old(mid) { lo = mid } else { hi = mid }
    }
    hi
}

/// Time spent with more than `capacity` admitted in the trailing interval.
#[derive(Clone, Debug)]
struct Overload {
    interval: u64,
    /// Absolute index of the oldest admitted time still in the trailing interval.
    front: u64,
    capacity: u64,
    /// Time up to which the total is accounted.
    since: u64,
    total: u64,
}

/// Admitted times pushed before the trackers catch up with them: scanning
/// each interval over a batch keeps its state in registers.
const BATCH: u64 = 512;

/// Worst rolling counts for a set of interval lengths.
///
/// A ring buffer holds the admitted times within the longest interval; each
/// length keeps its own front pointer into it and scans new times in batches.
/// O(number of lengths) amortised per admitted request; memory O(most admitted
/// within the longest interval).
#[derive(Clone, Debug)]
pub struct RollingCounts {
    /// Times by absolute index `i` at `ring[i & mask]`; a power of two long.
    ring: Vec<u64>,
    mask: u64,
    /// Absolute index of the oldest time kept.
    dropped: u64,
    /// Times up to this index have been scanned by every tracker.
    done: u64,
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
                    next: 0,
                }
            })
            .collect();
        let capacity = 2 * BATCH as usize;
        RollingCounts {
            ring: vec![0; capacity],
            mask: capacity as u64 - 1,
            dropped: 0,
            done: 0,
            pushed: 0,
            trackers,
            overload: None,
        }
    }

    /// Also measures how long the trailing count over `interval` stays above `capacity`.
    pub fn with_overload(mut self, interval: Nanos, capacity: u64) -> RollingCounts {
        assert!(
            interval.get() > 0,
            "rolling intervals must be longer than 0"
        );
        self.overload = Some(Overload {
            interval: interval.get(),
            front: 0,
            capacity,
            since: 0,
            total: 0,
        });
        self
    }

    /// Records one admitted request at `now` (non-decreasing).
    #[inline]
    pub fn push(&mut self, now: Nanos) {
        if self.pushed - self.dropped == self.ring.len() as u64 {
            self.catch_up();
            if self.pushed - self.dropped == self.ring.len() as u64 {
                self.grow();
            }
        }
        self.ring[(self.pushed & self.mask) as usize] = now.get();
        self.pushed += 1;
        if self.pushed - self.done >= BATCH {
            self.catch_up();
        }
    }

    fn grow(&mut self) {
        let mut ring = vec![0; self.ring.len() * 2];
        let mask = ring.len() as u64 - 1;
        for i in self.dropped..self.pushed {
            ring[(i & mask) as usize] = self.ring[(i & self.mask) as usize];
        }
        self.ring = ring;
        self.mask = mask;
    }

    /// Scans every pushed time not yet seen by the trackers, then forgets the
    /// times no tracker needs any more.
    fn catch_up(&mut self) {
        let (ring, done, pushed) = (self.ring.as_slice(), self.done, self.pushed);
        // The ring's length is a power of two, so `i & (len − 1)` is within it:
        // said this way, the compiler drops the bounds checks.
        assert!(ring.len().is_power_of_two());
        let at = |i: u64| ring[(i as usize) & (ring.len() - 1)];
        for tracker in &mut self.trackers {
            let (interval, mut front, mut worst) = (tracker.interval, tracker.front, tracker.worst);
            // Indices before `next` cannot beat the worst: the count rises by at
            // most one per admitted request, so at a count c < worst the next
            // worst − c requests cannot reach past it, and are skipped (the
            // front then catches up by galloping, not one step at a time).
            let mut i = tracker.next.max(done);
            while i < pushed {
                let now = at(i);
                front = first_within(&at, front, i, now, interval);
                let count = i + 1 - front;
                if count > worst {
                    worst = count;
                    tracker.worst_start = at(front);
                }
                i += (worst - count).min(MAX_SKIP) + 1;
            }
            (tracker.front, tracker.worst, tracker.next) = (front, worst, i);
        }
        if let Some(overload) = &mut self.overload {
            for i in done..pushed {
                // Account up to this arrival with the i requests before it.
                overload.advance(at(i), i, &at);
            }
        }
        self.done = pushed;
        let fronts = self
            .trackers
            .iter()
            .map(|t| t.front)
            .chain(self.overload.as_ref().map(|o| o.front));
        self.dropped = fronts.min().unwrap_or(pushed);
    }

    /// The worst count per interval, in the order given to [`RollingCounts::new`].
    pub fn worst(&mut self) -> Vec<Worst> {
        self.catch_up();
        let worst = |t: &Tracker| Worst {
            interval: Nanos(t.interval),
            count: t.worst,
            start: Nanos(t.worst_start),
        };
        self.trackers.iter().map(worst).collect()
    }

    /// The worst count over `interval` (one of those tracked, else 0) of
    /// the requests scanned so far: never more than [`RollingCounts::worst`]
    /// finds, and as cheap as a look (the last few pushed may be unscanned).
    pub fn worst_so_far(&self, interval: Nanos) -> u64 {
        self.trackers
            .iter()
            .find(|tracker| tracker.interval == interval.get())
            .map_or(0, |tracker| tracker.worst)
    }

    /// How many admitted requests lie in `(now − L, now]` for the overload
    /// interval L, at `now` (non-decreasing, and not before the last push).
    #[inline]
    pub fn trailing_count(&mut self, now: Nanos) -> u64 {
        self.catch_up();
        let (ring, mask, pushed) = (&self.ring, self.mask, self.pushed);
        let Some(overload) = self.overload.as_mut() else {
            return 0;
        };
        overload.advance(now.get(), pushed, &|i| ring[(i & mask) as usize]);
        pushed - overload.front
    }

    /// Total time the trailing count exceeded the capacity, once every admitted
    /// request has expired from the interval.
    pub fn time_over_capacity(&mut self) -> Nanos {
        self.catch_up();
        let (ring, mask, pushed) = (&self.ring, self.mask, self.pushed);
        let Some(overload) = &self.overload else {
            return Nanos::ZERO;
        };
        let mut overload = overload.clone();
        overload.expire(u64::MAX, pushed, &|i| ring[(i & mask) as usize]);
        Nanos(overload.total)
    }
}

impl Overload {
    /// Expires what has left (now − L, now] and accounts the time up to
    /// `now`, with `live_end` requests pushed before `now`.
    #[inline]
    fn advance(&mut self, now: u64, live_end: u64, at: &impl Fn(u64) -> u64) {
        self.expire(now, live_end, at);
        self.account(live_end - self.front, now);
    }

    /// Expires, in time order, every request whose interval ends by `now`.
    fn expire(&mut self, now: u64, live_end: u64, at: &impl Fn(u64) -> u64) {
        while self.front < live_end {
            let oldest = at(self.front);
            if now - oldest < self.interval {
                break;
            }
            self.account(live_end - self.front, oldest + self.interval);
            self.front += 1;
        }
    }

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

    /// Skipping requests that cannot beat the worst, several lengths at once:
    /// every length's count and start as brute force finds them, over steady
    /// traffic with bursts (equal times) that set a new worst late.
    #[test]
    fn skipping_ahead_finds_every_worst_exactly() {
        let mut times = Vec::new();
        let mut t = 0u64;
        for i in 0..6_000u64 {
            t += 1 + (i * 7919) % 13;
            times.push(t);
            if i % 1_500 == 1_499 {
                times.extend(std::iter::repeat_n(t, 40 + i as usize / 100));
            }
        }
        let intervals = [1, 7, 64, 500, 3_000, 40_000];
        let streamed = worst(&times, &intervals);
        for (k, &interval) in intervals.iter().enumerate() {
            assert_eq!(
                streamed[k],
                worst_by_brute_force(&times, interval),
                "interval {interval}"
            );
        }
    }

    /// More requests than a tracker skips at once (2^16) within one length,
    /// then a burst that beats the worst: still exact.
    #[test]
    fn a_skip_longer_than_the_cap_still_finds_a_late_burst() {
        // One request per ns for 200,000 ns; the 100,000 ns length holds
        // 100,000 of them from the start on. Then, at 300,000, a burst of
        // 100,001 at one instant.
        let mut times: Vec<u64> = (0..200_000).collect();
        times.extend(std::iter::repeat_n(300_000, 100_001));
        assert_eq!(
            worst(&times, &[100_000, 10]),
            [(100_001, 300_000), (100_001, 300_000)]
        );
        let steady: Vec<u64> = (0..200_000).collect();
        assert_eq!(worst(&steady, &[100_000]), [(100_000, 0)]);
    }
}
