//! The backend as a deterministic server: it serves `capacity` requests per
//! second one after another, holds at most `queue` waiting, and drops the rest.

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use crate::time::{NANOS_PER_SEC, Nanos};

/// Significant digits kept by the waiting-time histogram.
const WAIT_PRECISION: u8 = 3;

/// A first-in, first-out server with a bounded queue.
///
/// Time is scaled by the capacity C, so that one service takes exactly 10⁹
/// units whatever C is: no rounding of 1/C ever accumulates. Memory is
/// O(queue); waiting times go to a histogram (3 significant digits).
#[derive(Clone, Debug)]
pub struct Server {
    capacity: u128,
    queue: usize,
    /// Scaled finish times of the requests in the system, oldest first.
    finishes: VecDeque<u128>,
    dropped: u64,
    served: u64,
    max_waiting: u64,
    waits: Histogram<u64>,
}

/// What the server saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerStats {
    /// Requests that found the queue full.
    pub dropped: u64,
    /// Requests served (or still to be served at the end).
    pub served: u64,
    /// The most requests waiting at once (not counting the one in service).
    pub max_queue: u64,
    /// Median wait before service.
    pub wait_p50: Nanos,
    /// 99th percentile of the wait.
    pub wait_p99: Nanos,
    /// Longest wait.
    pub wait_max: Nanos,
}

impl Server {
    /// A server of `capacity_per_sec` (at least 1) that holds up to `queue` waiting requests.
    pub fn new(capacity_per_sec: u64, queue: u64) -> Server {
        Server {
            capacity: u128::from(capacity_per_sec.max(1)),
            queue: usize::try_from(queue).unwrap_or(usize::MAX),
            finishes: VecDeque::new(),
            dropped: 0,
            served: 0,
            max_waiting: 0,
            waits: Histogram::new(WAIT_PRECISION)
                .expect("3 significant digits is a valid precision"),
        }
    }

    /// A request arrives at `now` (non-decreasing).
    #[inline]
    pub fn arrive(&mut self, now: Nanos) {
        let now = u128::from(now.get()) * self.capacity;
        while self.finishes.front().is_some_and(|&finish| finish <= now) {
            self.finishes.pop_front();
        }
        // The oldest request in the system is in service; the others wait.
        let waiting = self.finishes.len().saturating_sub(1);
        if waiting >= self.queue && !self.finishes.is_empty() {
            self.dropped += 1;
            return;
        }
        let start = self
            .finishes
            .back()
            .map_or(now, |&busy_until| busy_until.max(now));
        self.finishes.push_back(start + u128::from(NANOS_PER_SEC));
        self.served += 1;
        self.max_waiting = self.max_waiting.max(self.finishes.len() as u64 - 1);
        let wait_ns = u64::try_from((start - now) / self.capacity).unwrap_or(u64::MAX);
        // The histogram grows as needed; only a wait beyond its largest
        // trackable value (about 2^62 ns) could fail, and is then left out.
        let _ = self.waits.record(wait_ns);
    }

    /// Requests dropped so far (the queue full).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The figures so far.
    pub fn stats(&self) -> ServerStats {
        let quantile = |q: f64| {
            Nanos(if self.waits.is_empty() {
                0
            } else {
                self.waits.value_at_quantile(q)
            })
        };
        ServerStats {
            dropped: self.dropped,
            served: self.served,
            max_queue: self.max_waiting,
            wait_p50: quantile(0.5),
            wait_p99: quantile(0.99),
            wait_max: Nanos(self.waits.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_at_capacity_and_queues_the_rest() {
        // 10 per second: one every 100 ms. Three at once: waits of 0, 100 and 200 ms.
        let mut server = Server::new(10, 5);
        (0..3).for_each(|_| server.arrive(Nanos(0)));
        let stats = server.stats();
        assert_eq!((stats.dropped, stats.max_queue), (0, 2));
        assert!(
            stats.wait_max.get().abs_diff(200_000_000) < 200_000,
            "{:?}",
            stats.wait_max
        );
        assert!(
            stats.wait_p50.get().abs_diff(100_000_000) < 100_000,
            "{:?}",
            stats.wait_p50
        );
    }

    #[test]
    fn drops_what_the_queue_cannot_hold() {
        let mut server = Server::new(10, 2);
        (0..5).for_each(|_| server.arrive(Nanos(0)));
        // One in service, two waiting, two dropped.
        assert_eq!(server.stats().dropped, 2);
        assert_eq!(server.stats().served, 3);
    }

    #[test]
    fn a_request_finishing_exactly_at_an_arrival_has_left() {
        let mut server = Server::new(10, 0);
        server.arrive(Nanos(0));
        server.arrive(Nanos(100_000_000));
        assert_eq!(
            server.stats().dropped,
            0,
            "the first finished at exactly 100 ms"
        );
        server.arrive(Nanos(150_000_000));
        assert_eq!(
            server.stats().dropped,
            1,
            "no room to wait behind the one in service"
        );
        assert_eq!(server.stats().wait_max, Nanos(0), "nobody waited");
    }

    #[test]
    fn a_third_of_a_second_per_request_does_not_drift() {
        // 3 per second: service takes 333.33… ms; the 300th finishes at exactly 100 s.
        let mut server = Server::new(3, 1_000);
        (0..300).for_each(|_| server.arrive(Nanos(0)));
        server.arrive(Nanos(100 * NANOS_PER_SEC));
        assert_eq!(server.stats().max_queue, 299);
        let mut later = server.clone();
        later.arrive(Nanos(100 * NANOS_PER_SEC));
        assert_eq!(
            later.stats().max_queue,
            299,
            "the system emptied at exactly 100 s"
        );
    }
}
