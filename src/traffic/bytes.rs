//! Finding a byte in a log's short fields eight bytes at a time: a
//! search's set-up per field (`memchr`'s) costs more than the search, and
//! a byte loop is slow on the long ones.

const ONES: u64 = u64::from_ne_bytes([1; 8]);
const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);

/// Where the first byte of `bytes` is one of `these` or below `below` (0:
/// none is): the high bit of each such byte of a word is set — exact for
/// the lowest, which is all that is read (a borrow only marks bytes above
/// a true one). Bytes of UTF-8 past ASCII have their high bit set, so they
/// are never below an ASCII `below`.
#[inline]
pub(crate) fn find<const K: usize>(bytes: &[u8], these: [u8; K], below: u8) -> Option<usize> {
    let mut from = 0;
    while let Some(chunk) = bytes.get(from..from + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let found = these.iter().fold(
            word.wrapping_sub(ONES * u64::from(below)) & !word & HIGH,
            |found, &byte| {
                let zero = word ^ (ONES * u64::from(byte));
                found | zero.wrapping_sub(ONES) & !zero & HIGH
            },
        );
        if found != 0 {
            return Some(from + (found.trailing_zeros() / 8) as usize);
        }
        from += 8;
    }
    Some(
        from + bytes[from..]
            .iter()
            .position(|b| these.contains(b) || *b < below)?,
    )
}
