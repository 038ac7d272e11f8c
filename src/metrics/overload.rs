//! Seconds of overload: the whole seconds of a run (clock-aligned from its
//! start) in which more requests came than the limiter's limit a second, and
//! what it admitted in them — a limiter that admits well below its own limit
//! while demand exceeds it turns away traffic it was set to let through.
//! Counted as decisions are made, whatever else the run keeps.

use serde::{Deserialize, Serialize};

use crate::time::Nanos;

/// How a limiter behaved while demand exceeded its limit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Overload {
    /// Whole seconds (clock-aligned from the run's start) in which more
    /// requests came than the limit allows in a second.
    pub seconds: u64,
    /// Requests it admitted per second in them, on average (decisions
    /// counted when made, a delayed request when it was accepted).
    pub admitted_per_second: f64,
    /// That as a share of its limit.
    pub limit_share: f64,
}

/// The running count: this second's decisions, and the overloaded seconds
/// closed so far.
#[derive(Clone, Debug)]
pub struct OverloadCounts {
    /// Requests a second the limiter allows (infinite: never overloaded).
    limit: f64,
    /// Where the current second ends.
    end: u64,
    offered: u64,
    admitted: u64,
    seconds: u64,
    admitted_in_them: u64,
}

impl OverloadCounts {
    /// Counts against `limit` requests a second.
    pub fn new(limit: f64) -> OverloadCounts {
        OverloadCounts {
            limit,
            end: 0,
            offered: 0,
            admitted: 0,
            seconds: 0,
            admitted_in_them: 0,
        }
    }

    /// Counts a decision at `now` (in time order).
    #[inline(always)]
    pub fn record(&mut self, now: Nanos, admitted: bool) {
        if now.get() >= self.end {
            self.next_second(now);
        }
        self.offered += 1;
        self.admitted += u64::from(admitted);
    }

    /// Closes the current second and opens the one holding `now`.
    #[cold]
    fn next_second(&mut self, now: Nanos) {
        self.close();
        let second = Nanos::SECOND.get();
        self.end = (now.get() / second + 1).saturating_mul(second);
    }

    fn close(&mut self) {
        if self.offered as f64 > self.limit {
            self.seconds += 1;
            self.admitted_in_them += self.admitted;
        }
        (self.offered, self.admitted) = (0, 0);
    }

    /// The overloaded seconds of a run of `duration` (its last second counts
    /// only if whole), or `None` when there were none.
    pub fn finish(mut self, duration: Nanos) -> Option<Overload> {
        if self.end <= duration.get() {
            self.close();
        }
        (self.seconds > 0).then(|| {
            let per_second = self.admitted_in_them as f64 / self.seconds as f64;
            Overload {
                seconds: self.seconds,
                admitted_per_second: per_second,
                limit_share: per_second / self.limit,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Nanos {
        Nanos(n * 1_000_000)
    }

    #[test]
    fn counts_the_whole_seconds_whose_demand_exceeds_the_limit() {
        let run = |limit: f64| {
            let mut counts = OverloadCounts::new(limit);
            // Second 0: 12 come, 8 admitted. Second 1: 10 come, all
            // admitted. Second 3 (none in 2): 11 come, 2 admitted. Second
            // 4 is cut by the run's end: left out.
            for i in 0..12 {
                counts.record(ms(i * 50), i < 8);
            }
            for i in 0..10 {
                counts.record(ms(1_000 + i * 90), true);
            }
            for i in 0..11 {
                counts.record(ms(3_000 + i), i < 2);
            }
            for i in 0..50 {
                counts.record(ms(4_000 + i), false);
            }
            counts.finish(ms(4_500))
        };
        let o = run(10.0).unwrap();
        assert_eq!(
            (o.seconds, o.admitted_per_second, o.limit_share),
            (2, 5.0, 0.5)
        );
        let o = run(11.0).unwrap();
        assert_eq!((o.seconds, o.admitted_per_second), (1, 8.0));
        assert!(run(12.0).is_none(), "12 in a second is not more than 12");
        assert!(run(f64::INFINITY).is_none());
    }

    #[test]
    fn a_second_ending_with_the_run_counts() {
        let mut counts = OverloadCounts::new(1.0);
        counts.record(ms(999), true);
        counts.record(ms(999), false);
        assert_eq!(counts.clone().finish(ms(1_000)).map(|o| o.seconds), Some(1));
        assert!(counts.finish(ms(999)).is_none());
    }
}
