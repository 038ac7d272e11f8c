//! The crate's one source of fixed, portable pseudo-random numbers beyond the
//! traffic generators' xoshiro streams: SplitMix64, which seeds those streams
//! and draws cluster balancing and clock offsets.

/// The golden-ratio increment of SplitMix64, also its usual starting state.
pub const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// Advances `state` and returns the next SplitMix64 output (Steele, Lea and
/// Flood; the seeding function the xoshiro authors recommend).
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The SplitMix64 output for `state`, leaving nothing to advance: a fixed
/// draw keyed by `state`.
pub fn mix(state: u64) -> u64 {
    splitmix64(&mut { state })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sequence() {
        // The first outputs from state 0 in the reference implementation.
        let mut state = 0;
        assert_eq!(splitmix64(&mut state), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut state), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(mix(0), 0xe220_a839_7b1d_cdaf);
    }
}
