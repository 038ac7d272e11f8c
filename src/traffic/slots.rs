//! Numbering client keys 0, 1, 2, … in the order they are first seen, for
//! state kept per key in a `Vec`. Keys of synthetic clients are small (0 to
//! K − 1) and find their number in a table; keys hashed from a trace's text
//! go through a hash map.

use std::collections::HashMap;

use crate::random::MixState;

/// Keys below this index the table directly (the most synthetic clients).
const DENSE: u64 = super::clients::MAX_CLIENTS;

/// Each key's number.
#[derive(Clone, Debug, Default)]
pub struct KeySlots {
    /// By key, for small keys: its number + 1 (0: not seen).
    dense: Vec<u32>,
    sparse: HashMap<u64, u32, MixState>,
    count: u32,
}

impl KeySlots {
    /// The number of `id` (a client, or a host), and whether it is seen
    /// for the first time.
    #[inline]
    pub fn slot(&mut self, id: u64) -> (u32, bool) {
        let next = self.count;
        let slot = if id < DENSE {
            let index = id as usize;
            if index >= self.dense.len() {
                self.dense.resize((index + 1).next_power_of_two(), 0);
            }
            let entry = &mut self.dense[index];
            if *entry == 0 {
                *entry = next + 1;
            }
            *entry - 1
        } else {
            *self.sparse.entry(id).or_insert(next)
        };
        let new = slot == next;
        if new {
            self.count += 1;
        }
        (slot, new)
    }

    /// How many keys have a number.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no key has a number yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::Key;

    #[test]
    fn keys_are_numbered_in_the_order_first_seen_small_or_hashed() {
        let mut slots = KeySlots::default();
        let hashed = Key::named(b"alice").client;
        assert_eq!(slots.slot(7), (0, true));
        assert_eq!(slots.slot(hashed), (1, true));
        assert_eq!(slots.slot(0), (2, true));
        assert_eq!(slots.slot(7), (0, false));
        assert_eq!(slots.slot(hashed), (1, false));
        assert_eq!(slots.len(), 3);
    }
}
