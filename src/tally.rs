//! Figures over replications, tallied exactly: each figure's values are
//! counted by value as runs finish, so memory grows with the distinct
//! values, never with the runs, and the statistics are the same in any
//! order of merging.

use std::collections::BTreeMap;

use crate::summary::{Replications, RunSummary, Stat};

/// One figure over replications: how often each value came, exactly.
#[derive(Clone, Debug, Default)]
struct Tally {
    counts: BTreeMap<u64, u64>,
    n: u64,
    sum: u128,
}

impl Tally {
    fn add(&mut self, value: u64) {
        *self.counts.entry(value).or_insert(0) += 1;
        self.n += 1;
        self.sum += u128::from(value);
    }

    fn merge(&mut self, other: Tally) {
        for (value, count) in other.counts {
            *self.counts.entry(value).or_insert(0) += count;
        }
        self.n += other.n;
        self.sum += other.sum;
    }

    /// Mean, nearest-rank median and 99th percentile, and maximum, each
    /// value divided by `scale`; None with no values.
    fn stat(&self, scale: f64) -> Option<Stat> {
        if self.n == 0 {
            return None;
        }
        let rank = |q: f64| {
            let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
            let mut seen = 0;
            self.counts
                .iter()
                .find(|&(_, &count)| {
                    seen += count;
                    seen >= rank
                })
                .map_or(0, |(&value, _)| value) as f64
                / scale
        };
        Some(Stat {
            mean: self.sum as f64 / scale / self.n as f64,
            p50: rank(0.5),
            p99: rank(0.99),
            max: self.counts.keys().next_back().copied().unwrap_or(0) as f64 / scale,
        })
    }
}

/// The figures of one run that replications summarise.
#[derive(Clone, Debug, Default)]
pub struct RunTally {
    worst_rolling: Tally,
    offered: Tally,
    admitted: Tally,
    worst_1s: Tally,
    over_capacity: Tally,
    /// In nanoseconds.
    time_over_capacity: Tally,
    dropped: Tally,
}

impl RunTally {
    /// The figures of `run`, tallied once.
    pub fn of(run: &RunSummary) -> RunTally {
        let mut tally = RunTally::default();
        tally.worst_rolling.add(run.worst_rolling);
        tally.offered.add(run.offered);
        tally.admitted.add(run.admitted);
        if let Some(backend) = &run.backend {
            tally.worst_1s.add(backend.worst_1s);
            tally.over_capacity.add(backend.over_capacity);
            tally
                .time_over_capacity
                .add((backend.seconds_over_capacity * 1e9).round() as u64);
            if let Some(queue) = &backend.queue {
                tally.dropped.add(queue.dropped);
            }
        }
        tally
    }

    /// Adds `other`'s values to these.
    pub fn merge(&mut self, other: RunTally) {
        self.worst_rolling.merge(other.worst_rolling);
        self.offered.merge(other.offered);
        self.admitted.merge(other.admitted);
        self.worst_1s.merge(other.worst_1s);
        self.over_capacity.merge(other.over_capacity);
        self.time_over_capacity.merge(other.time_over_capacity);
        self.dropped.merge(other.dropped);
    }

    /// Each figure's mean, median, 99th percentile and maximum.
    pub fn statistics(&self) -> Replications {
        let always = |tally: &Tally| tally.stat(1.0).expect("at least one replication");
        Replications {
            count: self.offered.n,
            worst_rolling: always(&self.worst_rolling),
            offered: always(&self.offered),
            admitted: always(&self.admitted),
            worst_1s: self.worst_1s.stat(1.0),
            over_capacity: self.over_capacity.stat(1.0),
            seconds_over_capacity: self.time_over_capacity.stat(1e9),
            dropped: self.dropped.stat(1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_gives_the_same_statistics_as_the_values_merged_in_any_order() {
        let values: Vec<u64> = (0..1000u64).map(|i| (i * 7919) % 313).collect();
        let expected = Stat::of(&values.iter().map(|&v| v as f64).collect::<Vec<_>>());
        let (mut a, mut b) = (Tally::default(), Tally::default());
        values[..400].iter().for_each(|&v| a.add(v));
        values[400..].iter().for_each(|&v| b.add(v));
        b.merge(a);
        let got = b.stat(1.0).unwrap();
        assert_eq!(
            (got.mean, got.p50, got.p99, got.max),
            (expected.mean, expected.p50, expected.p99, expected.max)
        );
        assert!(Tally::default().stat(1.0).is_none());
    }

    #[test]
    fn statistics_use_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let stat = Stat::of(&values);
        assert_eq!(
            (stat.mean, stat.p50, stat.p99, stat.max),
            (50.5, 50.0, 99.0, 100.0)
        );
        let one = Stat::of(&[7.0]);
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
    }
}
