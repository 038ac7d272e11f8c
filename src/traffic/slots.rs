//! State kept per client key (or per Host), found in one step. Keys of
//! synthetic clients are small (0 to K − 1) and index a `Vec` directly, a
//! seen bit apiece; keys hashed from a trace's text are numbered in a hash
//! map the first time they are seen and index a second `Vec`. A [`Slot`]
//! names an entry of either, so a ring of past requests can find its key's
//! state again without hashing.

/// Keys below this index the table directly (the most synthetic clients).
const DENSE: u64 = super::clients::MAX_CLIENTS;

/// Marks a slot of the hashed part.
const HASHED: u64 = 1 << 63;

/// Where one key's entry is: a small key's own index, or a hashed key's
/// number with the top bit set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(u64);

impl Slot {
    /// Whether it is a hashed key's, and its index among its kind's.
    #[inline(always)]
    pub fn parts(self) -> (bool, u64) {
        (self.0 & HASHED != 0, self.0 & !HASHED)
    }

    /// The slot of [`Slot::parts`] (`index` below 2^63).
    #[inline(always)]
    pub fn from_parts(hashed: bool, index: u64) -> Slot {
        Slot(if hashed { index | HASHED } else { index })
    }
}

/// An entry per key seen, each starting as a copy of `fresh`.
#[derive(Clone, Debug)]
pub struct KeyTable<T> {
    fresh: T,
    /// By key, for small keys.
    dense: Vec<T>,
    /// One bit per small key: seen.
    seen: Vec<u64>,
    numbers: Numbers,
    /// By number, for hashed keys.
    hashed: Vec<T>,
    len: usize,
}

impl<T: Clone> KeyTable<T> {
    /// No key seen; each new key's entry starts as `fresh`.
    pub fn new(fresh: T) -> KeyTable<T> {
        KeyTable {
            fresh,
            dense: Vec::new(),
            seen: Vec::new(),
            numbers: Numbers::default(),
            hashed: Vec::new(),
            len: 0,
        }
    }

    /// The slot of `id` (a client, or a host), and whether it is seen for
    /// the first time (its entry is then `fresh`).
    #[inline]
    pub fn slot(&mut self, id: u64) -> (Slot, bool) {
        if id < DENSE {
            let index = id as usize;
            if index >= self.dense.len() {
                // Up to this key (the `Vec` grows its room geometrically).
                self.dense.resize(index + 1, self.fresh.clone());
                self.seen.resize(index / 64 + 1, 0);
            }
            let (word, bit) = (&mut self.seen[index / 64], 1u64 << (index % 64));
            let new = *word & bit == 0;
            *word |= bit;
            self.len += usize::from(new);
            (Slot(id), new)
        } else {
            let (number, new) = self.numbers.number(id);
            if new {
                self.hashed.push(self.fresh.clone());
                self.len += 1;
            }
            (Slot(HASHED | u64::from(number)), new)
        }
    }

    /// The entry at `slot`.
    #[inline]
    pub fn get_mut(&mut self, slot: Slot) -> &mut T {
        if slot.0 & HASHED == 0 {
            &mut self.dense[slot.0 as usize]
        } else {
            &mut self.hashed[(slot.0 & !HASHED) as usize]
        }
    }

    /// The entry at `slot`, to read.
    #[inline]
    pub fn peek(&self, slot: Slot) -> &T {
        if slot.0 & HASHED == 0 {
            &self.dense[slot.0 as usize]
        } else {
            &self.hashed[(slot.0 & !HASHED) as usize]
        }
    }

    /// The entry of `id`, and whether it is new.
    #[inline]
    pub fn entry(&mut self, id: u64) -> (Slot, &mut T, bool) {
        let (slot, new) = self.slot(id);
        (slot, self.get_mut(slot), new)
    }

    /// Whether the small key `index` has an entry.
    fn seen(&self, index: usize) -> bool {
        self.seen
            .get(index / 64)
            .is_some_and(|word| word & (1 << (index % 64)) != 0)
    }

    /// The slot and entry of `id`, if it has one.
    pub fn find(&self, id: u64) -> Option<(Slot, &T)> {
        let slot = if id < DENSE {
            self.seen(id as usize).then_some(Slot(id))?
        } else {
            Slot(HASHED | u64::from(self.numbers.get(id)?))
        };
        Some((slot, self.peek(slot)))
    }

    /// Asks for the entry of a small key `id`, if it exists, to be brought
    /// into the cache (see [`prefetch`]).
    #[inline(always)]
    pub fn prefetch(&self, id: u64) {
        if let Some(entry) = usize::try_from(id)
            .ok()
            .and_then(|index| self.dense.get(index))
        {
            prefetch(entry);
        }
    }

    /// Asks for the entry at `slot` to be brought into the cache.
    #[inline(always)]
    pub fn prefetch_slot(&self, slot: Slot) {
        prefetch(self.peek(slot));
    }

    /// The entry of `id`, and whether it is new, as [`KeyTable::entry`]
    /// gives them — but a small key whose entry is `used` (no longer as
    /// fresh) was seen, so its seen bit is not read: one access, not two.
    #[inline(always)]
    pub fn entry_unless(&mut self, id: u64, used: impl Fn(&T) -> bool) -> (Slot, &mut T, bool) {
        if let Ok(index) = usize::try_from(id)
            && index < self.dense.len()
            && used(&self.dense[index])
        {
            return (Slot(id), &mut self.dense[index], false);
        }
        self.entry(id)
    }

    /// The same keys in the same slots, each entry turned by `turn`;
    /// `fresh` for keys not seen yet.
    pub fn map<U: Clone>(self, fresh: U, turn: impl Fn(&T) -> U) -> KeyTable<U> {
        KeyTable {
            fresh,
            dense: self.dense.iter().map(&turn).collect(),
            seen: self.seen,
            numbers: self.numbers,
            hashed: self.hashed.iter().map(&turn).collect(),
            len: self.len,
        }
    }

    /// Entries held, those of small keys not seen yet (still `fresh`)
    /// included: what [`KeyTable::update_all`] passes over.
    pub fn room(&self) -> usize {
        self.dense.len() + self.hashed.len()
    }

    /// Changes every entry held by `turn`, `fresh` ones of small keys not
    /// seen yet too (`turn` must leave a fresh entry fresh).
    pub fn update_all(&mut self, turn: impl Fn(&mut T)) {
        self.dense.iter_mut().for_each(&turn);
        self.hashed.iter_mut().for_each(&turn);
    }

    /// How many keys have an entry.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key has an entry yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries of small keys 0, 1, …, n − 1, in order, when every one
    /// of them is seen (as keys numbered in order are): one slice, read
    /// without a lookup per key.
    pub fn first(&self, n: usize) -> Option<&[T]> {
        let entries = self.dense.get(..n)?;
        let (whole, rest) = (n / 64, n % 64);
        let low = (1u64 << rest).wrapping_sub(1);
        let all_seen = self.seen.get(..whole)?.iter().all(|&word| word == u64::MAX)
            && (rest == 0 || self.seen.get(whole).is_some_and(|&word| word & low == low));
        all_seen.then_some(entries)
    }

    /// Every key's entry, with its key's id for small keys (`None` for a
    /// hashed key), small keys first.
    pub fn entries(&self) -> impl Iterator<Item = &T> {
        self.dense
            .iter()
            .enumerate()
            .filter(|&(index, _)| self.seen(index))
            .map(|(_, entry)| entry)
            .chain(self.hashed.iter())
    }
}

/// Asks the processor to bring the cache line holding `entry` in, and
/// goes on without waiting for it: issued a few requests ahead of the
/// decision that needs it, the memory's latency passes while earlier
/// requests are decided. Only a hint: it changes no result (and does
/// nothing on processors without SSE's prefetch).
#[inline(always)]
pub fn prefetch<T>(entry: &T) {
    #[cfg(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse"
    ))]
    safe_arch::prefetch_t0(entry);
    #[cfg(not(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse"
    )))]
    let _ = entry;
}

/// 64-bit ids (hashes of text) numbered 0, 1, 2, … in the order first
/// seen: one open-addressing table of cache lines of five (id, number)
/// places each, an id looked for in its home line, then in the lines after
/// it, at most four fifths full — a lookup is most often one line. (Places
/// of 16 bytes probed one by one from anywhere in a line often ran on into
/// the next: a second miss to memory. In a standalone model of a log's
/// 1.4·10^6 keys, their lines read ahead in batches of 32, a lookup took
/// 93–102 ns that way and 68–82 ns this way, in the same 32 MB.)
#[derive(Clone, Debug, Default)]
pub struct Numbers {
    lines: Vec<Line>,
    /// The number of id `u64::MAX`, which would wrap to 0 as stored.
    max_id: Option<u32>,
    len: u32,
}

/// Places in one [`Line`].
const PER_LINE: usize = 5;
/// Ids a line holds on average before the table grows: four fifths full.
const HELD_PER_LINE: usize = PER_LINE * 4 / 5;

/// One cache line of places: each id + 1, or 0 for a free place (the
/// places of a line fill in order, and nothing leaves), and its number.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Line {
    ids: [u64; PER_LINE],
    numbers: [u32; PER_LINE],
}

impl Numbers {
    /// The number of `id`, and whether it was just given (the next one).
    #[inline]
    pub fn number(&mut self, id: u64) -> (u32, bool) {
        if id == u64::MAX {
            let next = self.len;
            let number = *self.max_id.get_or_insert(next);
            self.len += u32::from(number == next);
            return (number, number == next);
        }
        if self.len as usize >= self.capacity() {
            self.grow();
        }
        let mask = self.lines.len() - 1;
        let stored = id + 1;
        let mut at = Self::home(id, mask);
        loop {
            let line = &mut self.lines[at];
            for place in 0..PER_LINE {
                if line.ids[place] == stored {
                    return (line.numbers[place], false);
                }
                if line.ids[place] == 0 {
                    let number = self.len;
                    (line.ids[place], line.numbers[place]) = (stored, number);
                    self.len += 1;
                    return (number, true);
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// The number of `id`, if it has one.
    #[inline]
    pub fn get(&self, id: u64) -> Option<u32> {
        if id == u64::MAX {
            return self.max_id;
        }
        if self.lines.is_empty() {
            return None;
        }
        let mask = self.lines.len() - 1;
        let stored = id + 1;
        let mut at = Self::home(id, mask);
        loop {
            let line = &self.lines[at];
            for place in 0..PER_LINE {
                if line.ids[place] == stored {
                    return Some(line.numbers[place]);
                }
                if line.ids[place] == 0 {
                    return None;
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// Reads the line where `id`'s lookup starts, so that a batch of such
    /// reads brings their cache lines in together before the ids are
    /// numbered one by one.
    #[inline]
    pub fn touch(&self, id: u64) -> u64 {
        if self.lines.is_empty() {
            return 0;
        }
        self.lines[Self::home(id, self.lines.len() - 1)].ids[0]
    }

    /// Ids numbered.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Ids it holds before it next grows.
    pub fn capacity(&self) -> usize {
        self.lines.len() * HELD_PER_LINE
    }

    /// Room for `ids` ids (the fewest lines, a power of two, that hold
    /// them), grown to at once: every id moved once, where doubling
    /// would move the first ids once a doubling and fault in every table
    /// on the way. Nothing when it holds them already.
    pub fn reserve(&mut self, ids: usize) {
        let ids = ids.min(u32::MAX as usize);
        let lines = ids.div_ceil(HELD_PER_LINE).next_power_of_two().max(4);
        if lines > self.lines.len() {
            self.grow_to(lines);
        }
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The line where `id`'s lookup starts (its bits mixed: ids may be small numbers).
    #[inline]
    fn home(id: u64, mask: usize) -> usize {
        (crate::random::mix(id) as usize) & mask
    }

    /// Twice the lines (at least 4), every id moved to its new place.
    /// The new lines are written free one by one rather than allocated
    /// zeroed: zeroed memory is first mapped to the system's shared zero
    /// page, and the first store to each page then copies it and flushes
    /// that page from every core running another thread of burstsim (an
    /// interrupt per page, measured at 3% of a log's check on two cores).
    fn grow(&mut self) {
        self.grow_to((self.lines.len() * 2).max(4));
    }

    /// [`Self::grow`] to `lines` lines, a power of two larger than now.
    fn grow_to(&mut self, lines: usize) {
        debug_assert!(lines.is_power_of_two() && lines > self.lines.len());
        let mut free = Vec::with_capacity(lines);
        free.resize(lines, Line::default());
        let old = std::mem::replace(&mut self.lines, free);
        let mask = lines - 1;
        for line in old {
            for (&stored, &number) in line.ids.iter().zip(&line.numbers) {
                if stored == 0 {
                    break;
                }
                // The first free place from its home, as `number` puts it:
                // a line's places fill in order, so its first free one is
                // the count of those taken (counted without a branch: which
                // place is free is a coin toss the processor mispredicts).
                let mut at = Self::home(stored - 1, mask);
                loop {
                    let line = &mut self.lines[at];
                    let place = line.ids.iter().filter(|&&id| id != 0).count();
                    if place < PER_LINE {
                        (line.ids[place], line.numbers[place]) = (stored, number);
                        break;
                    }
                    at = (at + 1) & mask;
                }
            }
        }
    }
}

/// Bytes a [`KeyTable`] of `keys` keys holds at most for entries of
/// `entry` bytes: an entry per key (numbered keys — synthetic clients, a
/// lone trace's keys — index up to the largest, at most the number of
/// keys), and a seen bit per numbered key, or for `hashed` keys a place in
/// their own numbering ([`NUMBERING`]).
pub fn table_bytes(keys: u64, entry: u128, hashed: bool) -> u128 {
    let keys = u128::from(keys.max(1));
    keys * entry
        + if hashed {
            keys * NUMBERING
        } else {
            keys / 8 + 8
        }
}

/// Bytes a key takes in a [`Numbers`] table at most: 64-byte lines of five
/// places filled to four fifths (16 bytes a key), doubled when full (32),
/// and while it doubles the old lines beside the new (48).
pub const NUMBERING: u128 = 48;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::Key;

    #[test]
    fn small_and_hashed_keys_each_find_their_own_entry() {
        let mut table = KeyTable::new(0u32);
        let hashed = Key::named(b"alice").client;
        let (seven, _, new) = table.entry(7);
        assert!(new);
        *table.get_mut(seven) += 1;
        let (alice, entry, new) = table.entry(hashed);
        assert!(new && *entry == 0);
        *entry += 10;
        assert!(table.entry(0).2);
        assert_eq!(table.entry(7), (seven, &mut 1, false));
        assert_eq!(table.entry(hashed), (alice, &mut 10, false));
        assert_ne!(seven, alice);
        assert_eq!(table.len(), 3);
        let mut all: Vec<u32> = table.entries().copied().collect();
        all.sort_unstable();
        assert_eq!(all, [0, 1, 10]);
    }

    #[test]
    fn the_first_entries_are_one_slice_only_when_each_is_seen() {
        let mut table = KeyTable::new(0u8);
        for id in (0..70).filter(|&id| id != 64) {
            *table.entry(id).1 = id as u8;
        }
        let first: Vec<u8> = (0..64).collect();
        assert_eq!(table.first(64), Some(&first[..]));
        assert_eq!(table.first(0), Some(&[][..]));
        // Key 64's entry is there (key 69's made room for it), unseen: the
        // first of a word of seen bits.
        assert_eq!(table.first(65), None);
        assert_eq!(table.first(70), None);
        assert_eq!(table.first(71), None, "past the entries");
        *table.entry(64).1 = 64;
        assert_eq!(table.first(70).map(<[u8]>::len), Some(70));
    }

    proptest::proptest! {
        /// Numbers go to ids in the order first seen, and each id keeps
        /// its own, whatever the ids (small, equal, at the end of u64).
        #[test]
        fn numbers_follow_first_sight(ids in proptest::collection::vec(
            proptest::prop_oneof![0u64..40, proptest::num::u64::ANY, u64::MAX - 2..=u64::MAX],
            0..400,
        )) {
            let mut numbers = Numbers::default();
            let mut seen: Vec<u64> = Vec::new();
            for &id in &ids {
                let expected = seen.iter().position(|&s| s == id);
                let (number, new) = numbers.number(id);
                proptest::prop_assert_eq!(new, expected.is_none());
                proptest::prop_assert_eq!(number as usize, expected.unwrap_or(seen.len()));
                if new {
                    seen.push(id);
                }
                proptest::prop_assert_eq!(numbers.get(id), Some(number));
            }
            proptest::prop_assert_eq!(numbers.len(), seen.len());
            for (number, &id) in seen.iter().enumerate() {
                proptest::prop_assert_eq!(numbers.get(id), Some(number as u32));
            }
            proptest::prop_assert_eq!(numbers.get(12345), seen.iter().position(|&s| s == 12345).map(|n| n as u32));
        }
    }

    proptest::proptest! {
        /// Room made at any point, for more ids or fewer than it holds,
        /// changes no number: each id keeps its own and new ones follow
        /// on; the table then holds at least as many as asked for.
        #[test]
        fn room_made_changes_no_number(
            ids in proptest::collection::vec(proptest::prop_oneof![0u64..300, proptest::num::u64::ANY], 0..600),
            at in 0usize..600,
            room in 0usize..5000,
        ) {
            let (mut reserved, mut plain) = (Numbers::default(), Numbers::default());
            for (nth, &id) in ids.iter().enumerate() {
                if nth == at {
                    reserved.reserve(room);
                    proptest::prop_assert!(reserved.capacity() >= room.max(reserved.len()));
                    proptest::prop_assert!(reserved.lines.len().is_power_of_two());
                    for &seen in &ids[..nth] {
                        proptest::prop_assert_eq!(reserved.get(seen), plain.get(seen));
                    }
                }
                proptest::prop_assert_eq!(reserved.number(id), plain.number(id));
            }
            for &id in &ids {
                proptest::prop_assert_eq!(reserved.get(id), plain.get(id));
            }
            proptest::prop_assert_eq!(reserved.len(), plain.len());
        }
    }

    /// A reservation grows the table once, to the fewest lines that hold
    /// it, and ids up to it then fit without another growth.
    #[test]
    fn room_made_is_the_fewest_lines_that_hold_it() {
        let mut numbers = Numbers::default();
        numbers.reserve(1000);
        assert_eq!(
            numbers.lines.len(),
            256,
            "1000 ids at 4 a line: 250 lines, 256 a power of two"
        );
        assert_eq!(numbers.capacity(), 1024);
        for id in 0..1024 {
            numbers.number(id * 7919);
        }
        assert_eq!(numbers.lines.len(), 256, "every id reserved for fit");
        numbers.number(u64::from(u32::MAX));
        assert_eq!(numbers.lines.len(), 512, "one more than it holds: doubled");
        numbers.reserve(100);
        assert_eq!(
            numbers.lines.len(),
            512,
            "room for fewer than it holds: nothing"
        );
    }

    proptest::proptest! {
        /// `entry_unless` finds the same slots and tells the same keys new
        /// as `entry`, whether an entry is used or back to fresh (as a
        /// window closed by a refund is), for small keys and hashed ones.
        #[test]
        fn an_entry_found_by_its_use_is_the_entry(steps in proptest::collection::vec(
            (proptest::prop_oneof![0u64..50, u64::MAX - 3..=u64::MAX], 0u32..3),
            0..300,
        )) {
            let (mut quick, mut plain) = (KeyTable::new(0u32), KeyTable::new(0u32));
            for &(id, value) in &steps {
                let (slot, entry, new) = quick.entry_unless(id, |&v| v != 0);
                let expected = plain.entry(id);
                proptest::prop_assert_eq!((slot, *entry, new), (expected.0, *expected.1, expected.2));
                *entry = value;
                *expected.1 = value;
                proptest::prop_assert_eq!(quick.len(), plain.len());
            }
            for &(id, _) in &steps {
                proptest::prop_assert_eq!(quick.find(id), plain.find(id));
            }
        }
    }

    #[test]
    fn growing_past_a_word_of_seen_bits_keeps_every_entry() {
        let mut table = KeyTable::new(0u64);
        for id in (0..1000).rev().step_by(7) {
            let (_, entry, new) = table.entry(id);
            assert!(new);
            *entry = id;
        }
        for id in (0..1000).rev().step_by(7) {
            assert_eq!(table.entry(id), (Slot(id), &mut id.clone(), false));
        }
        assert_eq!(table.len(), 143);
        assert_eq!(table.entries().count(), 143);
        // A hint, for keys with an entry or without.
        table.prefetch(992);
        table.prefetch(5000);
        table.prefetch(u64::MAX);
    }
}
