//! Seconds of overload: the whole seconds of a run (clock-aligned from its
//! start) in which more requests came than the limiter's limit a second, and
//! what it admitted in them — a limiter that admits well below its own limit
//! while demand exceeds it turns away traffic it was set to let through.
//! The same count finds the peak: the busiest whole second of demand, and
//! the share of it the limiter turned away — the cost a flash sale's
//! customers see, which a whole run's share dilutes with its quiet hours.
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

/// The busiest whole second of demand (clock-aligned from the run's start;
/// the earliest of equals) and what the limiter did with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peak {
    /// Where that second starts, in nanoseconds.
    pub start_ns: u64,
    /// Requests that came in it (attempts, when clients retry).
    pub offered: u64,
    /// Those the limiter turned away.
    pub turned_away: u64,
}

impl Peak {
    /// The share of the peak's demand turned away, 0 to 1.
    pub fn share(&self) -> f64 {
        self.turned_away as f64 / self.offered.max(1) as f64
    }
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
    peak: Option<Peak>,
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
            peak: None,
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
        if self.offered > self.peak.as_ref().map_or(0, |p| p.offered) {
            self.peak = Some(Peak {
                start_ns: self.end.saturating_sub(Nanos::SECOND.get()),
                offered: self.offered,
                turned_away: self.offered - self.admitted,
            });
        }
        if self.offered as f64 > self.limit {
            self.seconds += 1;
            self.admitted_in_them += self.admitted;
        }
        (self.offered, self.admitted) = (0, 0);
    }

    /// The overloaded seconds of a run of `duration` (its last second counts
    /// only if whole), or `None` when there were none; and the peak (a last
    /// second cut short counts: its demand is real), `None` when no request
    /// came.
    pub fn finish(mut self, duration: Nanos) -> (Option<Overload>, Option<Peak>) {
        let limit = self.limit;
        if self.end > duration.get() {
            // A second cut short: its demand may be the peak, never an
            // overloaded second.
            self.limit = f64::INFINITY;
        }
        self.close();
        self.limit = limit;
        let overload = (self.seconds > 0).then(|| {
            let per_second = self.admitted_in_them as f64 / self.seconds as f64;
            Overload {
                seconds: self.seconds,
                admitted_per_second: per_second,
                limit_share: per_second / self.limit,
            }
        });
        (overload, self.peak)
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
            counts.finish(ms(4_500)).0
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
        assert_eq!(
            counts.clone().finish(ms(1_000)).0.map(|o| o.seconds),
            Some(1)
        );
        assert!(counts.finish(ms(999)).0.is_none());
    }

    /// The peak against a brute-force count of every whole second.
    #[test]
    fn the_peak_is_the_busiest_whole_second_and_what_was_turned_away() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        for case in 0..200 {
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let n = next() % 60;
            let mut times: Vec<u64> = (0..n).map(|_| next() % 4_000).collect();
            times.sort_unstable();
            let decisions: Vec<(u64, bool)> = times.iter().map(|&t| (t, next() % 3 == 0)).collect();
            let duration = 1 + next() % 4_200;
            let mut counts = OverloadCounts::new(5.0);
            for &(t, admitted) in decisions.iter().filter(|(t, _)| *t < duration) {
                counts.record(ms(t), admitted);
            }
            let (_, peak) = counts.finish(ms(duration));
            let mut expected: Option<Peak> = None;
            for second in 0..5 {
                let inside: Vec<bool> = decisions
                    .iter()
                    .filter(|(t, _)| *t < duration && t / 1_000 == second)
                    .map(|&(_, admitted)| admitted)
                    .collect();
                let offered = inside.len() as u64;
                if offered > expected.as_ref().map_or(0, |p| p.offered) {
                    expected = Some(Peak {
                        start_ns: ms(second * 1_000).get(),
                        offered,
                        turned_away: inside.iter().filter(|a| !**a).count() as u64,
                    });
                }
            }
            assert_eq!(peak, expected, "case {case}");
        }
    }

    #[test]
    fn the_peak_share_counts_equal_timestamps_at_a_second_edge_in_the_later_second() {
        let mut counts = OverloadCounts::new(1.0);
        counts.record(ms(999), true);
        for _ in 0..3 {
            counts.record(ms(1_000), false);
        }
        let (overload, peak) = counts.finish(ms(1_500));
        let peak = peak.unwrap();
        assert_eq!(
            (peak.start_ns, peak.offered, peak.turned_away),
            (ms(1_000).get(), 3, 3)
        );
        assert_eq!(peak.share(), 1.0);
        // Second 1 is cut by the run's end: never an overloaded second.
        assert!(overload.is_none());
    }
}
