//! The running counts behind the figures per key, in as few bytes as the
//! counts allow: memory's latency, not arithmetic, is what they cost at
//! 10^6 keys, and half the bytes is twice the keys in the cache.
//!
//! - A key's counts take 4 bytes while every key's admissions in the
//!   trailing interval fit 8 bits and its admissions in all 15, 8 bytes
//!   while they fit 16 and 31 bits, 12 after (the table widens, in place,
//!   keeping every slot; past 2^31 admissions a key's wraps are kept aside).
//! - An admission in the trailing interval takes 8 bytes: its gap from
//!   the one before (a gap of 2^32 − 1 ns or more kept aside, in order) and
//!   its key's slot in 32 bits (validation bounds the keys to 10^7).

use std::collections::{HashMap, VecDeque};

use crate::traffic::slots::{KeyTable, Slot};

/// One key's counts: its admissions in the trailing interval, the most
/// ever there, and its admissions below [`Width::TOP`] with the throttled
/// bit on top (a request of the key was rejected).
#[derive(Clone, Copy, Debug, Default)]
struct Cell<W, A> {
    trailing: W,
    worst: W,
    admitted: A,
}

/// The width of a count.
trait Width: Copy + Default + Into<u32> + TryFrom<u32> {
    /// The top bit of a count this wide.
    const TOP: u32;
}
impl Width for u8 {
    const TOP: u32 = 1 << 7;
}
impl Width for u16 {
    const TOP: u32 = 1 << 15;
}
impl Width for u32 {
    const TOP: u32 = 1 << 31;
}

/// `count`, which fits `W` by construction.
#[inline(always)]
fn fitted<W: Width>(count: u32) -> W {
    W::try_from(count).unwrap_or_default()
}

impl<W: Width, A: Width> Cell<W, A> {
    /// Whether the key has counted anything (else it may be new).
    #[inline(always)]
    fn used(&self) -> bool {
        self.admitted.into() != 0
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

    /// The most it had in the trailing interval.
    #[inline(always)]
    fn most(&self) -> u32 {
        self.worst.into()
    }

    /// Its admissions below [`Width::TOP`], and whether it was throttled.
    #[inline(always)]
    fn admissions(&self) -> (u32, bool) {
        let admitted = self.admitted.into();
        (admitted & (A::TOP - 1), admitted & A::TOP != 0)
    }

    /// Whether one more admission would wrap the count.
    #[inline(always)]
    fn full(&self) -> bool {
        self.admissions().0 == A::TOP - 1
    }

    /// One admission counted; says whether the count wrapped to 0.
    #[inline(always)]
    fn admit(&mut self) -> bool {
        let (count, throttled) = self.admissions();
        let count = (count + 1) & (A::TOP - 1);
        self.admitted = fitted(count | if throttled { A::TOP } else { 0 });
        count == 0
    }

    /// A request of the key was rejected.
    #[inline(always)]
    fn throttle(&mut self) {
        self.admitted = fitted(self.admitted.into() | A::TOP);
    }

    /// One fewer in the trailing interval.
    #[inline(always)]
    fn leave(&mut self) {
        self.trailing = fitted(self.trailing.into() - 1);
    }

    /// The same counts in other widths, at least as wide.
    fn widened<V: Width, B: Width>(&self) -> Cell<V, B> {
        let (admitted, throttled) = self.admissions();
        Cell {
            trailing: fitted(self.trailing.into()),
            worst: fitted(self.worst.into()),
            admitted: fitted(admitted | if throttled { B::TOP } else { 0 }),
        }
    }
}

/// Every key's counts, in the narrowest width that holds them.
#[derive(Clone, Debug)]
enum Table {
    Tiny(KeyTable<Cell<u8, u16>>),
    Narrow(KeyTable<Cell<u16, u32>>),
    Wide(KeyTable<Cell<u32, u32>>),
}

/// `body` with `table` bound to whichever width `$table` holds.
macro_rules! each_width {
    ($table:expr, $bound:ident => $body:expr) => {
        match $table {
            Table::Tiny($bound) => $body,
            Table::Narrow($bound) => $body,
            Table::Wide($bound) => $body,
        }
    };
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
            table: Table::Tiny(KeyTable::new(Cell::default())),
            wrapped: HashMap::new(),
        }
    }

    /// Counts an admission of key `id` into the trailing interval; gives
    /// its slot and whether the key is new.
    #[inline(always)]
    pub(super) fn admitted(&mut self, id: u64) -> (Slot, bool) {
        let (slot, new, wrapped) = match &mut self.table {
            Table::Tiny(table) => {
                let (slot, cell, new) = table.entry_unless(id, Cell::used);
                // A new key's fresh cell always fits one more.
                if cell.full() || !cell.enter() {
                    self.widen();
                    return self.admitted(id);
                }
                (slot, new, cell.admit())
            }
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
        each_width!(&mut self.table, table => {
            let (_, cell, new) = table.entry_unless(id, Cell::used);
            cell.throttle();
            new
        })
    }

    /// The admission of the key at `slot` left the trailing interval.
    #[inline(always)]
    pub(super) fn left(&mut self, slot: Slot) {
        each_width!(&mut self.table, table => table.get_mut(slot).leave())
    }

    /// Asks for the counts of key `id` (see [`KeyTable::prefetch`]).
    #[inline(always)]
    pub(super) fn prefetch(&self, id: u64) {
        each_width!(&self.table, table => table.prefetch(id))
    }

    /// Asks for the counts at `slot`.
    #[inline(always)]
    pub(super) fn prefetch_slot(&self, slot: Slot) {
        each_width!(&self.table, table => table.prefetch_slot(slot))
    }

    /// Tells `visit` what keys 0, 1, …, n − 1 counted, in order, and says
    /// `true` — when they are keys numbered in order (each seen) and no
    /// key's admitted count wrapped; else tells it nothing and says `false`.
    pub(super) fn each_numbered(&self, n: usize, visit: impl FnMut(Figures)) -> bool {
        if !self.wrapped.is_empty() {
            return false;
        }
        each_width!(&self.table, table => Self::visit(table.first(n), visit))
    }

    fn visit<W: Width, A: Width>(
        cells: Option<&[Cell<W, A>]>,
        mut visit: impl FnMut(Figures),
    ) -> bool {
        let Some(cells) = cells else {
            return false;
        };
        for cell in cells {
            let (admitted, throttled) = cell.admissions();
            visit((cell.most(), u64::from(admitted), throttled));
        }
        true
    }

    /// What key `id` counted, if it counted anything.
    pub(super) fn figures(&self, id: u64) -> Option<Figures> {
        let (slot, worst, (admitted, throttled)) = each_width!(&self.table, table => table
            .find(id)
            .map(|(slot, cell)| (slot, cell.most(), cell.admissions()))?);
        // Only the widest counts wrap, at 2^31.
        let wraps = self.wrapped.get(&slot).copied().unwrap_or(0);
        Some((worst, wraps << 31 | u64::from(admitted), throttled))
    }

    /// Moves every key's counts to the next width, in the same slots.
    #[cold]
    fn widen(&mut self) {
        let narrow =
            std::mem::replace(&mut self.table, Table::Wide(KeyTable::new(Cell::default())));
        self.table = match narrow {
            Table::Tiny(table) => Table::Narrow(table.map(Cell::default(), Cell::widened)),
            Table::Narrow(table) => Table::Wide(table.map(Cell::default(), Cell::widened)),
            Table::Wide(_) => unreachable!("the widest table does not widen"),
        };
    }

    /// The bytes a key's counts take now.
    #[cfg(test)]
    pub(super) fn cell_bytes(&self) -> usize {
        match &self.table {
            Table::Tiny(_) => std::mem::size_of::<Cell<u8, u16>>(),
            Table::Narrow(_) => std::mem::size_of::<Cell<u16, u32>>(),
            Table::Wide(_) => std::mem::size_of::<Cell<u32, u32>>(),
        }
    }

    /// Sets key `id`'s admitted count (it must have counted something), as
    /// if that many had been counted: for tests of the wraps, which only
    /// the widest counts keep aside.
    #[cfg(test)]
    pub(super) fn set_admitted(&mut self, id: u64, admitted: u64) {
        while matches!(self.table, Table::Tiny(_)) {
            self.widen();
        }
        let slot = each_width!(&mut self.table, table => {
            let (slot, cell, _) = table.entry(id);
            let (_, throttled) = cell.admissions();
            cell.admitted = fitted(admitted as u32 & (u32::TOP - 1));
            if throttled {
                cell.throttle();
            }
            slot
        });
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
    /// How many admissions it holds.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.ring.len()
    }

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
    fn counts_widen_past_8_and_16_bits_keeping_every_key() {
        let mut counts = Counts::new();
        assert_eq!(counts.cell_bytes(), 4);
        counts.rejected(5);
        let hashed = crate::traffic::Key::named(b"alice").client;
        for _ in 0..u8::MAX {
            counts.admitted(7);
        }
        counts.admitted(hashed);
        assert_eq!(counts.cell_bytes(), 4);
        assert_eq!(counts.figures(7), Some((255, 255, false)));
        counts.admitted(7);
        assert_eq!(counts.cell_bytes(), 8);
        for _ in 256..u32::from(u16::MAX) {
            counts.admitted(7);
        }
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
    fn counts_widen_past_15_bits_of_admissions_keeping_the_throttled_bit() {
        let mut counts = Counts::new();
        counts.rejected(3);
        let mut seen = Vec::new();
        // One in the trailing interval at a time: only the admissions grow.
        for n in 0..(1u64 << 15) + 2 {
            let (slot, _) = counts.admitted(3);
            counts.left(slot);
            seen.push((counts.cell_bytes(), counts.figures(3)));
            assert_eq!(counts.figures(3), Some((1, n + 1, true)));
        }
        assert_eq!(seen[(1 << 15) - 2].0, 4, "2^15 - 1 admissions fit 4 bytes");
        assert_eq!(seen[(1 << 15) - 1].0, 8, "2^15 do not");
        assert!(counts.each_numbered(0, |_| ()));
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
