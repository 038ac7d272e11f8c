//! The figures per key's cost per admission: burstsim's `PerKeyCounts`
//! against the same algorithm written out by hand (a ring of the trailing
//! interval's admissions, an 8-byte cell per key: admissions in the
//! interval, their most, all admissions) with none of burstsim's generality
//! (no widening, no hashed keys, no seen bits, no keys' order, no asking
//! ahead). Both are fed the same admissions, shaped as the yardstick's log:
//! 2·10^6 at 555 a second on whole seconds, through two limiters' figures,
//! a share of them from a key seen before.
//!
//!     cargo run --release -- [SHARE_NEW_IN_TENTHS]   # 10: every key new; 0: one key; default 7
//!
//! Both find the same keys and worst counts, or the model panics.

use std::collections::VecDeque;

use burstsim::metrics::per_key::{KeyEvent, PerKeyCounts};
use burstsim::time::Nanos;

/// One key's counts in 8 bytes: twice burstsim's narrowest cell, which
/// widens in place when a count outgrows it (here nothing widens; the
/// wider cell, more memory for the same keys, only makes the model slower).
#[derive(Clone, Copy, Default)]
struct Cell {
    trailing: u16,
    worst: u16,
    admitted: u32,
}

/// The algorithm alone.
struct ByHand {
    interval: u64,
    cells: Vec<Cell>,
    ring: VecDeque<(u64, u32)>,
}

impl ByHand {
    #[inline(always)]
    fn admitted(&mut self, at: u64, key: u32) {
        while let Some(&(then, left)) = self.ring.front() {
            if at - then < self.interval {
                break;
            }
            self.ring.pop_front();
            self.cells[left as usize].trailing -= 1;
        }
        if key as usize >= self.cells.len() {
            self.cells.resize(key as usize + 1, Cell::default());
        }
        let cell = &mut self.cells[key as usize];
        cell.trailing += 1;
        cell.worst = cell.worst.max(cell.trailing);
        cell.admitted += 1;
        self.ring.push_back((at, key));
    }
}

fn main() {
    let new_in_tenths: u64 = std::env::args()
        .nth(1)
        .map_or(7, |a| a.parse().expect("a share in tenths"));
    let n: u64 = 2_000_000;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut keys, mut admissions) = (0u64, Vec::with_capacity(n as usize));
    for i in 0..n {
        let draw = next();
        let key = if keys == 0 || draw % 10 < new_in_tenths {
            keys += 1;
            keys - 1
        } else {
            (draw >> 8) % keys
        };
        // 555 a second, each on its whole second.
        admissions.push((i * 1_800_000 / 1_000_000_000 * 1_000_000_000, key));
    }
    let events: Vec<KeyEvent> = admissions
        .iter()
        .map(|&(at, key)| KeyEvent::Admitted(Nanos(at), key))
        .collect();
    let interval = 1_000_000_000;
    for _ in 0..5 {
        let start = std::time::Instant::now();
        let mut runs = [
            PerKeyCounts::new(Nanos(interval)),
            PerKeyCounts::new(Nanos(interval)),
        ];
        for chunk in events.chunks(16384) {
            for run in &mut runs {
                run.count(chunk);
            }
        }
        let burstsim = start.elapsed();
        let start = std::time::Instant::now();
        let mut by_hand: [ByHand; 2] = std::array::from_fn(|_| ByHand {
            interval,
            cells: Vec::new(),
            ring: VecDeque::new(),
        });
        for chunk in admissions.chunks(16384) {
            for run in &mut by_hand {
                for &(at, key) in chunk {
                    run.admitted(at, key as u32);
                }
            }
        }
        let hand = start.elapsed();
        for (run, hand) in runs.iter().zip(&by_hand) {
            let figures = run.finish(None, None).expect("keys");
            let worst = hand
                .cells
                .iter()
                .map(|c| u64::from(c.worst))
                .max()
                .unwrap_or(0);
            assert_eq!(
                (figures.keys, figures.worst_rolling_max),
                (hand.cells.len() as u64, worst)
            );
        }
        let per = |took: std::time::Duration| took.as_nanos() as f64 / (2 * n) as f64;
        println!(
            "{keys} keys: burstsim {:.1} ns an admission, by hand {:.1} ns",
            per(burstsim),
            per(hand)
        );
    }
}
