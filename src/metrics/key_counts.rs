//! The running counts behind the figures per key, in as few bytes as the
//! counts allow: memory's latency, not arithmetic, is what they cost at
//! 10^6 keys, and half the bytes is twice the keys in the cache.
//!
//! - A key's counts take 8 bytes while every key's admissions in the
//!   trailing interval fit 16 bits, 12 after (the table widens once, in
//!   place, keeping every slot).
//! - An admission in the trailing interval takes 8 bytes: its gap from
//!   the one before (a gap of 2^32 − 1 ns or more kept aside, in order) and
//!   its key's slot in 32 bits (validation bounds the keys to 10^7).

use std::collections::{HashMap, VecDeque};

use crate::traffic::slots::{KeyTable, Slot};

/// The top bit of [`Cell::admitted`]: a request of the key was rejected.
const THROTTLED: u32 = 1 << 31;

/// One key's counts: its admissions in the trailing interval, the most
/// ever there, and its admissions modulo 2^31 with the throttled bit.
#[derive(Clone, Copy, Debug, Default)]
struct Cell<W> {
    trailing: W,
    worst: W,
    admitted: u32,
}

/// The width of a count in the trailing interval.
trait Width: Copy + Default + Into<u32> + TryFrom<u32> {}
impl Width for u16 {}
impl Width for u32 {}

impl<W: Width> Cell<W> {
    /// Whether the key has counted anything (else it may be new).
    #[inline(always)]
    fn used(&self) -> bool {
        self.admitted != 0
    }

    /// One more in the trailing interval; `false`, and nothing changed,
    /// when that does not fit `W`.
    #[inline(always)]
    fn enter(&mut self) -> bool {
        let Ok(trailing) = W::try_from(self.trailing.into() + 1) else {
            return false;
        };
        self.trailing = trailing;
        if trailing.into() > self.worst.into() {
            self.worst = trailing;
        }
        true
    }

    /// One admission counted; says whether the count wrapped past 2^31.
    #[inline(always)]
    fn admit(&mut self) -> bool {
        let count = (self.admitted & !THROTTLED).wrapping_add(1) & !THROTTLED;
        self.admitted = (self.admitted & THROTTLED) | count;
        count == 0
    }

    /// One fewer in the trailing interval.
    #[inline(always)]
    fn leave(&mut self) {
        let trailing = self.trailing.into() - 1;
        self.trailing = W::try_from(trailing).unwrap_or_default();
    }

    /// The same counts in another width.
    fn widened<V: Width>(&self) -> Cell<V> {
        let wide = |count: W| V::try_from(count.into()).unwrap_or_default();
        Cell {
            trailing: wide(self.trailing),
            worst: wide(self.worst),
            admitted: self.admitted,
        }
    }
}

/// Every key's counts, in the narrowest width that holds them.
#[derive(Clone, Debug)]
enum Table {
    Narrow(KeyTable<Cell<u16>>),
    Wide(KeyTable<Cell<u32>>),
}

/// Every key's running counts.
#[derive(Clone, Debug)]
pub(super) struct Counts {
    table: Table,
    /// Per key whose admitted count passed 2^31: how many times it wrapped
    /// (rare: kept aside so the counts stay small).
    wrapped: HashMap<Slot, u64>,
}

/// What one key counted: (its worst count in the trailing interval, its
/// admissions, whether a request of it was rejected).
pub(super) type Figures = (u32, u64, bool);

impl Counts {
    pub(super) fn new() -> Counts {
        Counts {
            table: Table::Narrow(KeyTable::new(Cell::default())),
            wrapped: HashMap::new(),
        }
    }

    /// Counts an admission of key `id` into the trailing interval; gives
    /// its slot and whether the key is new.
    #[inline(always)]
    pub(super) fn admitted(&mut self, id: u64) -> (Slot, bool) {
        let (slot, new, wrapped) = match &mut self.table {
            Table::Narrow(table) => {
                let (slot, cell, new) = table.entry_unless(id, Cell::used);
                if !cell.enter() {
                    self.widen();
                    return self.admitted(id);
                }
                (slot, new, cell.admit())
            }
            Table::Wide(table) => {
                let (slot, cell, new) = table.entry_unless(id, Cell::used);
                let entered = cell.enter();
                debug_assert!(entered, "2^32 admissions of one key in one interval");
                (slot, new, cell.admit())
            }
        };
        if wrapped {
            *self.wrapped.entry(slot).or_default() += 1;
        }
        (slot, new)
    }

    /// Counts a rejection of key `id`; says whether the key is new.
    #[inline(always)]
    pub(super) fn rejected(&mut self, id: u64) -> bool {
        match &mut self.table {
            Table::Narrow(table) => {
                let (_, cell, new) = table.entry_unless(id, Cell::used);
                cell.admitted |= THROTTLED;
                new
            }
            Table::Wide(table) => {
                let (_, cell, new) = table.entry_unless(id, Cell::used);
                cell.admitted |= THROTTLED;
                new
            }
        }
    }

    /// The admission of the key at `slot` left the trailing interval.
    #[inline(always)]
    pub(super) fn left(&mut self, slot: Slot) {
        match &mut self.table {
            Table::Narrow(table) => table.get_mut(slot).leave(),
            Table::Wide(table) => table.get_mut(slot).leave(),
        }
    }

    /// Asks for the counts of key `id` (see [`KeyTable::prefetch`]).
    #[inline(always)]
    pub(super) fn prefetch(&self, id: u64) {
        match &self.table {
            Table::Narrow(table) => table.prefetch(id),
            Table::Wide(table) => table.prefetch(id),
        }
    }

    /// Asks for the counts at `slot`.
    #[inline(always)]
    pub(super) fn prefetch_slot(&self, slot: Slot) {
        match &self.table {
            Table::Narrow(table) => table.prefetch_slot(slot),
            Table::Wide(table) => table.prefetch_slot(slot),
        }
    }

    /// Tells `visit` what keys 0, 1, …, n − 1 counted, in order, and says
    /// `true` — when they are keys numbered in order (each seen) and no
    /// key's admitted count wrapped; else tells it nothing and says `false`.
    pub(super) fn each_numbered(&self, n: usize, visit: impl FnMut(Figures)) -> bool {
        if !self.wrapped.is_empty() {
            return false;
        }
        match &self.table {
            Table::Narrow(table) => Self::visit(table.first(n), visit),
            Table::Wide(table) => Self::visit(table.first(n), visit),
        }
    }

    fn visit<W: Width>(cells: Option<&[Cell<W>]>, mut visit: impl FnMut(Figures)) -> bool {
        let Some(cells) = cells else {
            return false;
        };
        for cell in cells {
            visit((
                cell.worst.into(),
                u64::from(cell.admitted & !THROTTLED),
                cell.admitted & THROTTLED != 0,
            ));
        }
        true
    }

    /// What key `id` counted, if it counted anything.
    pub(super) fn figures(&self, id: u64) -> Option<Figures> {
        let (slot, worst, admitted) = match &self.table {
            Table::Narrow(table) => table
                .find(id)
                .map(|(slot, cell)| (slot, u32::from(cell.worst), cell.admitted))?,
            Table::Wide(table) => table
                .find(id)
                .map(|(slot, cell)| (slot, cell.worst, cell.admitted))?,
        };
        let wraps = self.wrapped.get(&slot).copied().unwrap_or(0);
        Some((
            worst,
            wraps << 31 | u64::from(admitted & !THROTTLED),
            admitted & THROTTLED != 0,
        ))
    }

    /// Moves every key's counts to 12 bytes, in the same slots.
    #[cold]
    fn widen(&mut self) {
        let Table::Narrow(table) =
            std::mem::replace(&mut self.table, Table::Wide(KeyTable::new(Cell::default())))
        else {
            unreachable!("only a narrow table widens")
        };
        self.table = Table::Wide(table.map(Cell::default(), Cell::widened));
    }

    /// The bytes a key's counts take now.
    #[cfg(test)]
    pub(super) fn cell_bytes(&self) -> usize {
        match &self.table {
            Table::Narrow(_) => std::mem::size_of::<Cell<u16>>(),
            Table::Wide(_) => std::mem::size_of::<Cell<u32>>(),
        }
    }

    /// Sets key `id`'s admitted count (it must have counted something), as
    /// if that many had been counted: for tests of the wraps.
    #[cfg(test)]
    pub(super) fn set_admitted(&mut self, id: u64, admitted: u64) {
        let (slot, cell) = match &mut self.table {
            Table::Narrow(table) => {
                let (slot, cell, _) = table.entry(id);
                (slot, &mut cell.admitted)
            }
            Table::Wide(table) => {
                let (slot, cell, _) = table.entry(id);
                (slot, &mut cell.admitted)
            }
        };
        *cell = (*cell & THROTTLED) | (admitted as u32 & !THROTTLED);
        self.wrapped.insert(slot, admitted >> 31);
    }
}

/// What hears of the admissions leaving the trailing interval.
pub(super) trait Leaving {
    /// The admission at `slot` is about to leave: its counts may be asked for.
    fn ask(&self, slot: Slot);
    /// The admission at `slot` left.
    fn left(&mut self, slot: Slot);
}

impl Leaving for Counts {
    #[inline(always)]
    fn ask(&self, slot: Slot) {
        self.prefetch_slot(slot);
    }

    #[inline(always)]
    fn left(&mut self, slot: Slot) {
        Counts::left(self, slot);
    }
}

/// A gap kept aside.
const LONG: u32 = u32::MAX;

/// The admissions of the trailing interval, oldest first, 8 bytes each.
#[derive(Clone, Debug, Default)]
pub(super) struct Admissions {
    /// (the gap from the admission before in ns, or [`LONG`]; its key's
    /// slot, packed). The oldest's gap is not read.
    ring: VecDeque<(u32, u32)>,
    /// The gaps of the admissions marked [`LONG`], oldest first.
    long: VecDeque<u64>,
    /// The times of the oldest and the newest admission.
    oldest: u64,
    newest: u64,
    /// How many of the oldest admissions were told by
    /// [`Admissions::unasked`] (taken down as they leave).
    asked: std::cell::Cell<usize>,
}

impl Admissions {
    /// Adds an admission of the key at `slot` at `at` (never before the last).
    #[inline(always)]
    pub(super) fn push(&mut self, at: u64, slot: Slot) {
        let gap = if self.ring.is_empty() {
            self.oldest = at;
            0
        } else {
            at - self.newest
        };
        let gap = match u32::try_from(gap) {
            Ok(gap) if gap != LONG => gap,
            _ => {
                self.long.push_back(gap);
                LONG
            }
        };
        self.newest = at;
        self.ring.push_back((gap, pack(slot)));
    }

    /// Takes out, oldest first, every admission at least `interval` before
    /// `at`, telling `to` each one's slot as it leaves, and asking for
    /// those `ahead` places behind it: a log's whole second leaves at once.
    #[inline(always)]
    pub(super) fn leave_before(
        &mut self,
        at: u64,
        interval: u64,
        ahead: usize,
        to: &mut impl Leaving,
    ) {
        while let Some(&(_, slot)) = self.ring.front() {
            // A difference, not a sum: nothing saturates at the end of time.
            if at.saturating_sub(self.oldest) < interval {
                break;
            }
            self.ring.pop_front();
            self.asked.set(self.asked.get().saturating_sub(1));
            self.unasked(ahead, to);
            to.left(unpack(slot));
            if let Some(&(gap, _)) = self.ring.front() {
                self.oldest += match gap {
                    LONG => self.long.pop_front().expect("a long gap is kept aside"),
                    gap => u64::from(gap),
                };
            }
        }
    }

    /// Asks `to` for each of the `ahead` oldest admissions not asked for
    /// before, oldest first: each admission is asked for once on its way
    /// out, however many leave at a time (a Poisson stream lets 0, 1 or 3
    /// leave per request; asking for the one `ahead` places from the
    /// oldest alone skipped a quarter of them, each a miss to memory).
    #[inline(always)]
    pub(super) fn unasked(&self, ahead: usize, to: &impl Leaving) {
        let upto = ahead.min(self.ring.len());
        let mut asked = self.asked.get();
        while asked < upto {
            to.ask(unpack(self.ring[asked].1));
            asked += 1;
        }
        self.asked.set(asked);
    }

    /// The slot of the oldest admission, if there is one.
    #[cfg(test)]
    fn oldest_slot(&self) -> Option<Slot> {
        self.ring.front().map(|&(_, slot)| unpack(slot))
    }
}

/// The marker of a hashed key's slot in 32 bits.
const HASHED: u32 = 1 << 31;

/// `slot` in 32 bits: validation bounds keys and their numbers to 10^7.
#[inline(always)]
fn pack(slot: Slot) -> u32 {
    let (hashed, index) = slot.parts();
    let index = u32::try_from(index)
        .ok()
        .filter(|&index| index < HASHED)
        .expect("validation bounds the keys to 10^7");
    if hashed { index | HASHED } else { index }
}

/// The slot packed by [`pack`].
#[inline(always)]
fn unpack(packed: u32) -> Slot {
    Slot::from_parts(packed & HASHED != 0, u64::from(packed & !HASHED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_widen_past_16_bits_keeping_every_key() {
        let mut counts = Counts::new();
        assert_eq!(counts.cell_bytes(), 8);
        counts.rejected(5);
        let hashed = crate::traffic::Key::named(b"alice").client;
        for _ in 0..u16::MAX {
            counts.admitted(7);
        }
        counts.admitted(hashed);
        assert_eq!(counts.cell_bytes(), 8);
        let (seven, new) = counts.admitted(7);
        assert!(!new);
        assert_eq!(counts.cell_bytes(), 12);
        assert_eq!(counts.figures(7), Some((65_536, 65_536, false)));
        assert_eq!(counts.figures(5), Some((0, 0, true)));
        assert_eq!(counts.figures(hashed), Some((1, 1, false)));
        assert_eq!(counts.figures(8), None);
        counts.left(seven);
        counts.admitted(7);
        assert_eq!(counts.figures(7), Some((65_536, 65_537, false)));
    }

    #[test]
    fn admissions_keep_exact_times_across_long_gaps_and_the_end_of_time() {
        let times = [
            0,
            3,
            3,
            u64::from(u32::MAX) - 1,
            u64::from(u32::MAX) * 3,
            u64::from(u32::MAX) * 3 + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for interval in [
            1,
            2,
            u64::from(u32::MAX),
            u64::from(u32::MAX) * 2 + 1,
            u64::MAX,
        ] {
            let mut ring = Admissions::default();
            let mut held: VecDeque<(u64, Slot)> = VecDeque::new();
            for (n, &at) in times.iter().enumerate() {
                let (mut left, mut expected) = (Heard::default(), Vec::new());
                ring.leave_before(at, interval, 0, &mut left);
                let left = left.left;
                while held.front().is_some_and(|&(then, _)| at - then >= interval) {
                    expected.push(held.pop_front().unwrap().1);
                }
                assert_eq!(left, expected, "interval {interval}, at {at}");
                let slot = Slot::from_parts(n % 2 == 1, n as u64);
                ring.push(at, slot);
                held.push_back((at, slot));
                assert_eq!(ring.oldest_slot(), held.front().map(|&(_, slot)| slot));
                assert_eq!(ring.oldest, held[0].0);
            }
        }
    }

    /// The slots asked for and left, in order.
    #[derive(Default)]
    struct Heard {
        asked: std::cell::RefCell<Vec<Slot>>,
        left: Vec<Slot>,
    }

    impl Leaving for Heard {
        fn ask(&self, slot: Slot) {
            self.asked.borrow_mut().push(slot);
        }

        fn left(&mut self, slot: Slot) {
            self.left.push(slot);
        }
    }

    #[test]
    fn each_admission_is_asked_for_once_before_it_leaves() {
        // Times 0, 1, 2, … but up to 3 at once (as many leave at once), then
        // a whole second's 300 at once, as a log's do.
        let times: Vec<u64> = (0..400u64)
            .map(|n| n / 4 * 4 + [0, 0, 1, 3][n as usize % 4])
            .chain([1_000; 300])
            .chain([1_200; 3])
            .collect();
        for ahead in [0, 1, 2, 5, 16] {
            let mut ring = Admissions::default();
            let mut heard = Heard::default();
            for (n, &at) in times.iter().enumerate() {
                ring.unasked(ahead, &heard);
                ring.leave_before(at, 10, ahead, &mut heard);
                // Each admission that leaves was asked for before it left.
                if ahead > 0 {
                    let asked = heard.asked.borrow();
                    assert!(
                        heard.left.iter().all(|slot| asked.contains(slot)),
                        "ahead {ahead}"
                    );
                }
                ring.push(at, Slot::from_parts(false, n as u64));
            }
            let asked = heard.asked.into_inner();
            let index = |slot: &Slot| slot.parts().1;
            assert!(
                asked.windows(2).all(|w| index(&w[0]) < index(&w[1])),
                "ahead {ahead}: asked for oldest first, each once"
            );
            assert_eq!(heard.left.len(), 400 + 300, "ahead {ahead}");
            if ahead == 0 {
                assert!(asked.is_empty());
            }
        }
    }

    #[test]
    fn slots_pack_into_32_bits_and_back() {
        for (hashed, index) in [
            (false, 0),
            (false, 9_999_999),
            (true, 0),
            (true, (1 << 31) - 1),
        ] {
            let slot = Slot::from_parts(hashed, index);
            assert_eq!(unpack(pack(slot)), slot);
        }
    }
}
