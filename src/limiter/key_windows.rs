//! A fixed window per key in as few bytes as the rules allow. Windows on a
//! fixed grid (epoch or anchored) share their edges across keys, so a key
//! needs only its count in the window now — 1 byte while the threshold fits
//! 7 bits, every count cleared when a later window opens — or, once clearing
//! costs more than the decisions it serves, which window its count belongs
//! to (numbered from a window seen) and the count: 4 bytes while the
//! numbers and the threshold fit 16 bits each, 8 while they fit 32, and the
//! whole 16-byte [`Window`] otherwise (first-request windows, decisions out
//! of time order, or a run past 2^32 windows). A table widens itself when
//! it must; every width decides exactly as [`FixedWindow::decide_in`] does.
//! At 10^6 keys the 1-byte table fits the cache where the 4-byte one does
//! not.

use super::Decision;
use super::fixed_window::{FixedWindow, Window};
use crate::time::Nanos;
use crate::traffic::slots::{KeyTable, Slot};

/// A key's window number and count, packed in one integer: the number
/// (0 for none: never opened, or closed by a refund) in the high half.
pub(super) trait Cell: Copy + std::fmt::Debug {
    /// Bits of each half.
    const BITS: u32;
    fn pack(number: u64, count: u64) -> Self;
    fn number(self) -> u64;
    fn count(self) -> u64;
    /// The largest window number or count it holds.
    const LARGEST: u64 = (1 << Self::BITS) - 1;
    /// The largest threshold it holds: one less than `LARGEST`, so that a
    /// window full at the threshold still fits.
    const MAX_COUNT: u64 = Self::LARGEST - 1;
}

impl Cell for u32 {
    const BITS: u32 = 16;
    #[inline]
    fn pack(number: u64, count: u64) -> u32 {
        ((number << 16) | count) as u32
    }
    #[inline]
    fn number(self) -> u64 {
        u64::from(self >> 16)
    }
    #[inline]
    fn count(self) -> u64 {
        u64::from(self & 0xffff)
    }
}

impl Cell for u64 {
    const BITS: u32 = 32;
    #[inline]
    fn pack(number: u64, count: u64) -> u64 {
        (number << 32) | count
    }
    #[inline]
    fn number(self) -> u64 {
        self >> 32
    }
    #[inline]
    fn count(self) -> u64 {
        self & 0xffff_ffff
    }
}

/// A byte cell's mark that its key was seen: a used cell is never 0.
const SEEN: u8 = 0x80;

/// A byte cell's count in the window now.
const COUNT: u8 = 0x7f;

/// The bytes clearing the byte cells may pass over per decision made on
/// them, over the run: past it, windows open faster than the keys are
/// used, and the table widens to cells that carry their window's number.
const CLEARED_PER_DECISION: u64 = 64;

/// Every key's window, in the narrowest form that holds it.
#[derive(Clone, Debug)]
enum Table {
    /// Counts in window `base` alone (see [`SEEN`], [`COUNT`]).
    Bytes(KeyTable<u8>),
    Narrow(KeyTable<u32>),
    Mid(KeyTable<u64>),
    Wide(KeyTable<Window>),
}

/// The window holding the last request, so that finding a request's
/// window costs a division only when a window ends.
#[derive(Clone, Copy, Debug)]
struct Grid {
    /// Window length and phase: edges at `phase + k·window`.
    window: u64,
    phase: u64,
    /// The cached window `[start, end)` and its index (edges at or before its start).
    start: u64,
    end: u64,
    index: u64,
}

impl Grid {
    fn new(window: u64, phase: u64) -> Grid {
        // Empty: the first request works its window out.
        Grid {
            window,
            phase,
            start: 1,
            end: 0,
            index: 0,
        }
    }

    /// The index of the window holding `now`: how many edges lie at or
    /// before it (0 before the first edge, `phase`).
    #[inline(always)]
    fn index(&mut self, now: u64) -> u64 {
        if (self.start..self.end).contains(&now) {
            return self.index;
        }
        self.move_to(now)
    }

    /// Works out the window holding `now` (a division: once a window).
    #[cold]
    #[inline(never)]
    fn move_to(&mut self, now: u64) -> u64 {
        let (window, phase) = (u128::from(self.window), u128::from(self.phase));
        let index = (u128::from(now) + window - phase) / window;
        let end = index * window + phase;
        self.start = u64::try_from(end.saturating_sub(window)).unwrap_or(u64::MAX);
        self.end = u64::try_from(end).unwrap_or(u64::MAX);
        self.index = index as u64;
        self.index
    }

    /// The end of the cached window (where its rejections are told to come back).
    fn end(&self) -> u64 {
        self.end
    }
}

/// A fixed window per key: the rules once, a cell per key.
#[derive(Clone, Debug)]
pub(super) struct KeyWindows {
    rules: FixedWindow,
    /// `None` for first-request windows (kept whole).
    grid: Option<Grid>,
    /// The index of a window a request fell in: cells number windows from
    /// it, 1 for that one; byte cells count in it. `None` before the first.
    base: Option<u64>,
    table: Table,
    /// Windows opened, over all keys.
    opened: u64,
    /// The bytes byte cells may still be cleared for (see [`CLEARED_PER_DECISION`]).
    credit: u64,
}

impl KeyWindows {
    pub(super) fn new(rules: FixedWindow) -> KeyWindows {
        let grid = rules
            .align()
            .phase(rules.window().get())
            .map(|phase| Grid::new(rules.window().get(), phase));
        let table = match (grid, rules.threshold()) {
            (Some(_), n) if n <= u64::from(COUNT) => Table::Bytes(KeyTable::new(0)),
            (Some(_), n) if n <= <u32 as Cell>::MAX_COUNT => Table::Narrow(KeyTable::new(0)),
            (Some(_), n) if n <= <u64 as Cell>::MAX_COUNT => Table::Mid(KeyTable::new(0)),
            _ => Table::Wide(KeyTable::new(Window::default())),
        };
        KeyWindows {
            rules,
            grid,
            base: None,
            table,
            opened: 0,
            credit: 0,
        }
    }

    /// Keys seen.
    pub(super) fn len(&self) -> usize {
        match &self.table {
            Table::Bytes(table) => table.len(),
            Table::Narrow(table) => table.len(),
            Table::Mid(table) => table.len(),
            Table::Wide(table) => table.len(),
        }
    }

    /// Windows opened, over all keys.
    pub(super) fn opened(&self) -> u64 {
        self.opened
    }

    /// The bytes a key's window takes now.
    #[cfg(test)]
    pub(super) fn cell_bytes(&self) -> usize {
        match &self.table {
            Table::Bytes(_) => 1,
            Table::Narrow(_) => 4,
            Table::Mid(_) => 8,
            Table::Wide(_) => std::mem::size_of::<Window>(),
        }
    }

    /// Asks for the window of key `id` (see [`KeyTable::prefetch`]).
    #[inline(always)]
    pub(super) fn prefetch(&self, id: u64) {
        match &self.table {
            Table::Bytes(table) => table.prefetch(id),
            Table::Narrow(table) => table.prefetch(id),
            Table::Mid(table) => table.prefetch(id),
            Table::Wide(table) => table.prefetch(id),
        }
    }

    /// Decides a request of key `id` at `now`, as [`FixedWindow::decide_in`]
    /// does on the key's own window; returns the key's slot too.
    #[inline(always)]
    pub(super) fn decide<const HINTS: bool>(&mut self, id: u64, now: Nanos) -> (Slot, Decision) {
        // The common cases inline: byte cells in their window, 4-byte
        // cells in a window after the first.
        if let (Some(grid), Some(base)) = (&mut self.grid, self.base) {
            let index = grid.index(now.get());
            match &mut self.table {
                Table::Bytes(table) if index == base => {
                    self.credit += CLEARED_PER_DECISION;
                    let (slot, decision, opened) =
                        decide_byte::<HINTS>(&self.rules, grid, table, id, now);
                    self.opened += u64::from(opened);
                    return (slot, decision);
                }
                Table::Narrow(table) => {
                    let number = index.wrapping_sub(base).wrapping_add(1);
                    if (1..=<u32 as Cell>::LARGEST).contains(&number) {
                        let (slot, decision, opened) =
                            decide_cell::<u32, HINTS>(&self.rules, grid, table, id, number, now);
                        self.opened += u64::from(opened);
                        return (slot, decision);
                    }
                }
                _ => {}
            }
        }
        self.decide_other::<HINTS>(id, now)
    }

    /// [`KeyWindows::decide`] in every other case: the first request, a
    /// window opening on byte cells, wider cells, or a table about to widen.
    #[inline(never)]
    fn decide_other<const HINTS: bool>(&mut self, id: u64, now: Nanos) -> (Slot, Decision) {
        let Some(grid) = &mut self.grid else {
            return self.decide_wide::<HINTS>(id, now);
        };
        let index = grid.index(now.get());
        let base = *self.base.get_or_insert(index);
        // Window numbers start at 1 (0 is none); earlier than the first
        // window or past what the cells hold, the table widens.
        let number = index.wrapping_sub(base).wrapping_add(1);
        if let Table::Bytes(table) = &mut self.table {
            // A later window opens: every count is cleared, while the
            // decisions made pay for it; otherwise (an earlier window: a
            // decision out of time order) the table widens.
            let cost = table.room() as u64;
            if index > base && self.credit >= cost {
                self.credit -= cost;
                table.update_all(|cell| *cell &= SEEN);
                self.base = Some(index);
            } else if index != base {
                self.widen(number);
                return self.decide_other::<HINTS>(id, now);
            }
            return self.decide::<HINTS>(id, now);
        }
        let (slot, decision, opened) = match &mut self.table {
            Table::Narrow(table) if (1..=<u32 as Cell>::LARGEST).contains(&number) => {
                decide_cell::<u32, HINTS>(&self.rules, grid, table, id, number, now)
            }
            Table::Mid(table) if (1..=<u64 as Cell>::LARGEST).contains(&number) => {
                decide_cell::<u64, HINTS>(&self.rules, grid, table, id, number, now)
            }
            Table::Wide(_) => return self.decide_wide::<HINTS>(id, now),
            _ => {
                self.widen(number);
                return self.decide_other::<HINTS>(id, now);
            }
        };
        self.opened += u64::from(opened);
        (slot, decision)
    }

    fn decide_wide<const HINTS: bool>(&mut self, id: u64, now: Nanos) -> (Slot, Decision) {
        let Table::Wide(table) = &mut self.table else {
            unreachable!("first-request windows are kept whole")
        };
        let (slot, window, _) = table.entry(id);
        let (decision, opened) = self.rules.decide_in::<HINTS>(window, now);
        self.opened += u64::from(opened);
        (slot, decision)
    }

    /// Takes back the last admission of the key at `slot` (see
    /// [`FixedWindow::refund_in`]).
    pub(super) fn refund(&mut self, slot: Slot, now: Nanos) {
        if self.rules.counts_rejected() {
            return;
        }
        let closed = match &mut self.table {
            Table::Bytes(table) => refund_byte(table.get_mut(slot)),
            Table::Narrow(table) => refund_cell(table.get_mut(slot)),
            Table::Mid(table) => refund_cell(table.get_mut(slot)),
            Table::Wide(table) => self.rules.refund_in(table.get_mut(slot), now),
        };
        self.opened -= u64::from(closed);
    }

    /// Moves every key's window to a table that holds window `number`
    /// (relative to `base`): from byte cells to 4-byte ones numbered from
    /// the window their counts are in; then 8-byte cells when it and the
    /// threshold fit, whole windows otherwise.
    #[cold]
    fn widen(&mut self, number: u64) {
        let grid = self.grid.expect("only windows on a grid are packed");
        let base = self.base.expect("a window was seen");
        // The end of the window a cell numbers (0: none, so the next request opens one).
        let end = |number: u64| {
            if number == 0 {
                return 0;
            }
            let index = u128::from(base) + u128::from(number) - 1;
            u64::try_from(index * u128::from(grid.window) + u128::from(grid.phase))
                .unwrap_or(u64::MAX)
        };
        let wide = |number: u64, count: u64| Window::at(end(number), count);
        let fits_mid = (1..=<u64 as Cell>::LARGEST).contains(&number)
            && self.rules.threshold() <= <u64 as Cell>::MAX_COUNT;
        self.table = match std::mem::replace(&mut self.table, Table::Mid(KeyTable::new(0))) {
            // Counts in window `base`, numbered 1 (a threshold of 7 bits
            // fits 16); a later `number` widens further from there.
            Table::Bytes(table) => Table::Narrow(table.map(0, |&cell| match cell & COUNT {
                0 => 0,
                count => u32::pack(1, u64::from(count)),
            })),
            Table::Narrow(table) if fits_mid => {
                Table::Mid(table.map(0, |cell| u64::pack(cell.number(), cell.count())))
            }
            Table::Narrow(table) => {
                Table::Wide(table.map(Window::default(), |c| wide(c.number(), c.count())))
            }
            Table::Mid(table) => {
                Table::Wide(table.map(Window::default(), |c| wide(c.number(), c.count())))
            }
            wide @ Table::Wide(_) => wide,
        };
    }
}

/// [`FixedWindow::decide_in`] on a packed cell: its window is `number`
/// (relative to the first), the one holding `now` in `grid`.
#[inline(always)]
fn decide_cell<C: Cell, const HINTS: bool>(
    rules: &FixedWindow,
    grid: &Grid,
    table: &mut KeyTable<C>,
    id: u64,
    number: u64,
    now: Nanos,
) -> (Slot, Decision, bool) {
    let (slot, cell, _) = table.entry_unless(id, |cell| cell.number() != 0);
    let opened = cell.number() != number;
    let count = if opened { 0 } else { cell.count() };
    let admit = count < rules.threshold();
    // A rejection counted (`count_rejected`) changes nothing within the
    // window, which is full already: only admissions are counted here.
    *cell = C::pack(number, count + u64::from(admit));
    let decision = Decision::admit_or::<HINTS>(admit, || rules.hint(now.get(), grid.end()));
    (slot, decision, opened)
}

/// [`FixedWindow::decide_in`] on a byte cell, which counts in the window
/// holding `now` in `grid`.
#[inline(always)]
fn decide_byte<const HINTS: bool>(
    rules: &FixedWindow,
    grid: &Grid,
    table: &mut KeyTable<u8>,
    id: u64,
    now: Nanos,
) -> (Slot, Decision, bool) {
    let (slot, cell, _) = table.entry_unless(id, |&cell| cell != 0);
    let count = *cell & COUNT;
    // A threshold of at least 1 admits the first request of a window: a
    // count of 0 is a window not opened (or closed by a refund).
    let admit = u64::from(count) < rules.threshold();
    *cell = SEEN | (count + u8::from(admit));
    let decision = Decision::admit_or::<HINTS>(admit, || rules.hint(now.get(), grid.end()));
    (slot, decision, count == 0)
}

/// Takes back one admission of a byte cell; says whether that closes the window.
fn refund_byte(cell: &mut u8) -> bool {
    let count = (*cell & COUNT) - 1;
    *cell = SEEN | count;
    count == 0
}

/// Takes back one admission; says whether that closes the window.
fn refund_cell<C: Cell>(cell: &mut C) -> bool {
    let count = cell.count() - 1;
    let closed = count == 0;
    *cell = C::pack(if closed { 0 } else { cell.number() }, count);
    closed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::Align;
    use std::collections::HashMap;

    /// One step of a run: a request of a key after a gap, or a refund of
    /// the last admission.
    #[derive(Clone, Debug)]
    enum Step {
        Request { key: u64, gap: u64 },
        Refund,
    }

    fn steps() -> impl proptest::strategy::Strategy<Value = Vec<Step>> {
        use proptest::prelude::*;
        // Gaps of 0 (equal times), short ones, and jumps past 2^16 and 2^32
        // windows of 1 ns, so tables widen mid-run; now and then a key of
        // hundreds, so that clearing byte cells costs more than the
        // decisions made.
        let gap = prop_oneof![
            6 => 0u64..4,
            3 => 0u64..3_000,
            1 => prop_oneof![Just(65_534u64), Just(65_535), Just(65_536), Just(1 << 32), Just((1 << 32) + 7)],
        ];
        let step = prop_oneof![
            8 => (prop_oneof![9 => 0u64..6, 1 => 0u64..300], gap).prop_map(|(key, gap)| Step::Request { key, gap }),
            1 => Just(Step::Refund),
        ];
        proptest::collection::vec(step, 1..300)
    }

    /// Every request decided (and refunded) as `KeyWindows` and as a
    /// `FixedWindow::decide_in` on a window per key, from `start`: the same
    /// decisions, hints and windows opened, whatever width the table has
    /// or takes on the way.
    fn same_as_a_window_per_key(rules: FixedWindow, start: u64, steps: &[Step]) -> usize {
        alongside(KeyWindows::new(rules.clone()), rules, start, steps)
    }

    /// [`same_as_a_window_per_key`] from a table of 4-byte cells, as one
    /// widened from bytes goes on.
    fn same_from_4_bytes(rules: FixedWindow, start: u64, steps: &[Step]) -> usize {
        let mut packed = KeyWindows::new(rules.clone());
        if let Table::Bytes(_) = packed.table {
            packed.table = Table::Narrow(KeyTable::new(0));
        }
        alongside(packed, rules, start, steps)
    }

    fn alongside(mut packed: KeyWindows, rules: FixedWindow, start: u64, steps: &[Step]) -> usize {
        let mut windows: HashMap<u64, Window> = HashMap::new();
        let (mut now, mut opened, mut last) = (start, 0u64, None);
        for (nth, step) in steps.iter().enumerate() {
            match *step {
                Step::Request { key, gap } => {
                    now = now.saturating_add(gap).min(rules.horizon().get());
                    let (slot, decision) = packed.decide::<true>(key, Nanos(now));
                    let (expected, open) =
                        rules.decide_in::<true>(windows.entry(key).or_default(), Nanos(now));
                    opened += u64::from(open);
                    assert_eq!(decision, expected, "step {nth} at {now}: {steps:?}");
                    last = decision.admitted().then_some((slot, key));
                }
                Step::Refund => {
                    if let Some((slot, key)) = last.take() {
                        packed.refund(slot, Nanos(now));
                        let closed = rules.refund_in(windows.get_mut(&key).unwrap(), Nanos(now));
                        opened -= u64::from(closed);
                    }
                }
            }
            assert_eq!(packed.opened(), opened, "step {nth}: {steps:?}");
        }
        assert_eq!(packed.len(), windows.len());
        packed.cell_bytes()
    }

    use crate::limiter::RateLimiter as _;

    proptest::proptest! {
        #[test]
        fn packed_windows_decide_as_a_window_per_key(
            window in proptest::prop_oneof![1u64..5, 997u64..1_001],
            threshold in 1u64..5,
            align in 0u64..4,
            count_rejected: bool,
            whole_seconds: bool,
            near_the_end: bool,
            from_4_bytes: bool,
            steps in steps(),
        ) {
            let align = match align {
                0 => Align::Epoch,
                1 => Align::FirstRequest,
                anchor => Align::Anchor(Nanos(anchor * 7)),
            };
            let mut rules = FixedWindow::new(Nanos(window), threshold, align).unwrap().counting_rejected(count_rejected);
            if whole_seconds {
                rules = rules.hinting_whole_seconds();
            }
            let start = if near_the_end { u64::MAX - window - 20_000 } else { 0 };
            if from_4_bytes {
                same_from_4_bytes(rules, start, &steps);
            } else {
                same_as_a_window_per_key(rules, start, &steps);
            }
        }
    }

    #[test]
    fn a_table_widens_only_when_a_window_number_outgrows_it() {
        let rules = |threshold| FixedWindow::new(Nanos(1), threshold, Align::Epoch).unwrap();
        let request = |key, gap| Step::Request { key, gap };
        // A threshold of 7 bits starts at a byte, 8 bits at 4 bytes.
        assert_eq!(same_as_a_window_per_key(rules(127), 0, &[request(0, 0)]), 1);
        assert_eq!(same_as_a_window_per_key(rules(128), 0, &[request(0, 0)]), 4);
        // Byte cells hold any window after the first, as long as the
        // decisions pay for clearing them: 1,000 keys' cells cleared after
        // 16 decisions (1,024 bytes' worth) stay bytes, after 15 widen.
        let opening = |decisions: u64| {
            let mut steps = vec![request(999, 0)];
            steps.extend((1..decisions).map(|_| request(0, 0)));
            steps.extend([request(0, 1_000), request(999, 0), request(3, 0)]);
            steps
        };
        assert_eq!(same_as_a_window_per_key(rules(2), 5, &opening(16)), 1);
        assert_eq!(same_as_a_window_per_key(rules(2), 5, &opening(15)), 4);
        // 65,535 windows after the first still fit 16 bits; one more does not.
        assert_eq!(
            same_from_4_bytes(rules(2), 5, &[request(0, 0), request(1, 65_534)]),
            4
        );
        assert_eq!(
            same_from_4_bytes(rules(2), 5, &[request(0, 0), request(1, 65_535)]),
            8
        );
        assert_eq!(
            same_from_4_bytes(rules(2), 5, &[request(0, 0), request(0, 1 << 32)]),
            16
        );
        // A threshold past a 16-bit count starts at 8 bytes; first-request windows are kept whole.
        assert_eq!(
            same_as_a_window_per_key(rules(65_534), 0, &[request(0, 0)]),
            4
        );
        assert_eq!(
            same_as_a_window_per_key(rules(65_535), 0, &[request(0, 0)]),
            8
        );
        let first = FixedWindow::new(Nanos(1), 2, Align::FirstRequest).unwrap();
        assert_eq!(same_as_a_window_per_key(first, 0, &[request(0, 0)]), 16);
        // A window earlier than the first seen (decisions out of time
        // order) widens to whole windows, which decide as a window per key does.
        let (mut packed, mut window) = (KeyWindows::new(rules(1)), Window::default());
        for (now, key) in [(10, 0), (9, 1), (9, 0), (11, 0)] {
            let expected = if key == 0 {
                rules(1).decide_in::<true>(&mut window, Nanos(now)).0
            } else {
                Decision::Admit
            };
            assert_eq!(
                packed.decide::<true>(key, Nanos(now)).1,
                expected,
                "{key} at {now}"
            );
        }
        assert_eq!(packed.cell_bytes(), 16);
    }
}
