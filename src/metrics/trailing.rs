//! The count admitted in the trailing interval (t − L, t], exact, over a
//! whole run — kept per chart column as the most it reached in that column,
//! so a chart of it shows every peak exactly, never an aligned-bucket sum.

use std::collections::VecDeque;

use crate::time::Nanos;

/// The most admitted in any trailing interval of length `interval` ending in
/// each column of `column` nanoseconds.
///
/// Invariant: `window` holds the admitted times in (t − L, t] for the last
/// time t seen, oldest first. Memory O(columns + most admitted within L);
/// O(1) amortised per admitted request.
#[derive(Clone, Debug)]
pub struct Trailing {
    /// The interval L.
    pub interval: Nanos,
    /// Each column's width; column j covers `[j·column, (j+1)·column)`.
    pub column: Nanos,
    /// Per column: max over t in the column of |{a : t − L < a ≤ t}|
    /// (saturating at `u32::MAX`, like the timeline's counts).
    pub most: Vec<u32>,
    window: VecDeque<u64>,
    /// Columns before this one are final.
    current: usize,
    /// Where the current column ends (`u64::MAX` for the last): a time
    /// before it is in the current column, found without a division.
    end: u64,
}

impl Trailing {
    /// Columns `column` wide (at least 1 ns) covering `duration`; times
    /// past its end count in the last column.
    pub fn new(interval: Nanos, duration: Nanos, column: Nanos) -> Trailing {
        let column = column.get().max(1);
        let count = duration.get().div_ceil(column).max(1);
        let mut trailing = Trailing {
            interval,
            column: Nanos(column),
            most: vec![0; usize::try_from(count).unwrap_or(usize::MAX)],
            window: VecDeque::new(),
            current: 0,
            end: 0,
        };
        trailing.end = trailing.end_of_current();
        trailing
    }

    /// Counts a request admitted at `at`; times come in order.
    #[inline]
    pub fn push(&mut self, at: Nanos) {
        if at.get() >= self.end {
            self.advance(self.column_of(at.get()));
        }
        self.forget_until(at.get());
        self.window.push_back(at.get());
        let count = self.count();
        let most = &mut self.most[self.current];
        *most = (*most).max(count);
    }

    /// Where the current column ends, `u64::MAX` for the last.
    fn end_of_current(&self) -> u64 {
        if self.current + 1 >= self.most.len() {
            return u64::MAX;
        }
        (self.current as u64 + 1).saturating_mul(self.column.get())
    }

    /// Accounts the time after the last request, to the end of the run.
    pub fn finish(mut self) -> Trailing {
        self.advance(self.most.len() - 1);
        self.window = VecDeque::new();
        self
    }

    fn column_of(&self, at: u64) -> usize {
        usize::try_from(at / self.column.get())
            .unwrap_or(usize::MAX)
            .min(self.most.len() - 1)
    }

    /// Brings every column up to `column` up to date: the count at a
    /// column's start is its least candidate for the most.
    fn advance(&mut self, column: usize) {
        while self.current < column {
            self.current += 1;
            let start = self.current as u64 * self.column.get();
            self.forget_until(start);
            self.most[self.current] = self.most[self.current].max(self.count());
        }
        self.end = self.end_of_current();
    }

    fn count(&self) -> u32 {
        u32::try_from(self.window.len()).unwrap_or(u32::MAX)
    }

    /// The most per column of `factor` columns each (the last maybe fewer):
    /// still exact, as a maximum of maxima.
    pub fn coarsened(&self, factor: usize) -> Vec<u32> {
        self.most
            .chunks(factor.max(1))
            .map(|chunk| chunk.iter().copied().max().unwrap_or(0))
            .collect()
    }

    /// Drops the times no longer within (t − L, t].
    fn forget_until(&mut self, t: u64) {
        let interval = self.interval.get();
        while self
            .window
            .front()
            .is_some_and(|&a| a.saturating_add(interval) <= t)
        {
            self.window.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The same figure by brute force: every t in every column.
    fn brute_force(times: &[u64], interval: u64, column: u64, columns: usize) -> Vec<u32> {
        (0..columns)
            .map(|j| {
                let (from, to) = (j as u64 * column, (j as u64 + 1) * column);
                (from..to)
                    .map(|t| {
                        times
                            .iter()
                            .filter(|&&a| a <= t && t < a + interval)
                            .count() as u32
                    })
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn matches_brute_force(
            mut times in proptest::collection::vec(0u64..200, 0..40),
            interval in 1u64..50,
            column in 1u64..80,
            factor in 1usize..5,
        ) {
            times.sort_unstable();
            let mut trailing = Trailing::new(Nanos(interval), Nanos(200), Nanos(column));
            for &t in &times {
                trailing.push(Nanos(t));
            }
            let trailing = trailing.finish();
            let expected = brute_force(&times, interval, trailing.column.get(), trailing.most.len());
            prop_assert_eq!(&trailing.most, &expected);
            let coarse = brute_force(&times, interval, column * factor as u64, expected.len().div_ceil(factor));
            prop_assert_eq!(trailing.coarsened(factor), coarse);
        }
    }

    #[test]
    fn shows_the_two_bursts_of_a_boundary_pair_as_one_peak() {
        // 10 at 0.9–1.0 s and 10 at 1.0–1.1 s: the trailing second holds all 20.
        let mut trailing = Trailing::new(
            Nanos::SECOND,
            Nanos(2 * Nanos::SECOND.get()),
            Nanos(100_000_000),
        );
        for i in 0..20u64 {
            trailing.push(Nanos(900_000_000 + i * 10_000_000));
        }
        let most = trailing.finish().most;
        assert_eq!(most.iter().max(), Some(&20));
        assert_eq!(most[10], 20, "at 1.0–1.1 s: {most:?}");
        assert_eq!(
            most[18], 20,
            "until just before 1.9 s all 20 are in: {most:?}"
        );
        assert_eq!(
            most[19], 19,
            "at 1.9 s the request of 0.9 s has left: {most:?}"
        );
        assert_eq!(most[0], 0);
    }

    #[test]
    fn a_request_leaves_exactly_one_interval_after_it_arrived() {
        let mut trailing = Trailing::new(Nanos(10), Nanos(30), Nanos(10));
        trailing.push(Nanos(0));
        let most = trailing.finish().most;
        // (t − 10, t] holds 0 for t in [0, 10) and not at t = 10.
        assert_eq!(most, [1, 0, 0]);
    }
}
