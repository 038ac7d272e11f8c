//! The crate's fixed, portable mixing functions (std's hasher may change
//! between releases): SplitMix64, which seeds the traffic generators' xoshiro
//! streams and draws cluster balancing and clock offsets, and FNV-1a, which
//! turns names and trace keys into numbers.

/// A name no other process picks, on this host or another, in this PID
/// namespace or another: the process id and 64 bits from the operating
/// system's random source (std's per-process hasher keys). Never used for
/// anything a seed decides.
pub fn unique_id() -> String {
    use std::hash::BuildHasher as _;
    let random = std::hash::RandomState::new().hash_one(std::time::SystemTime::now());
    format!("{}-{random:016x}", std::process::id())
}

/// The random generator behind every stochastic source and retrying client,
/// named after its algorithm so results do not change when `rand` changes
/// its default.
pub type Rng = rand_xoshiro::Xoshiro256PlusPlus;

/// The random stream of one source of one workload, derived from the scenario
/// seed, the workload's name and the source's position, so that adding a
/// workload or a source leaves the others' traffic unchanged.
pub fn stream(seed: u64, workload: &str, source: usize, replication: u64) -> Rng {
    let name_hash = fnv1a(workload.as_bytes());
    let mut state = seed
        ^ name_hash.rotate_left(17)
        ^ (source as u64).rotate_left(41)
        ^ replication.rotate_left(53);
    let mut seed_bytes = [0u8; 32];
    for chunk in seed_bytes.chunks_exact_mut(8) {
        chunk.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    <Rng as rand::SeedableRng>::from_seed(seed_bytes)
}

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

/// A hasher for keys that are already numbers: SplitMix64's mix of the
/// number (well spread even for keys 0, 1, 2, …), and fixed, unlike std's
/// randomly seeded SipHash, which costs more and buys nothing here.
#[derive(Clone, Copy, Debug, Default)]
pub struct MixHasher(u64);

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = mix(self.0 ^ fnv1a(bytes));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = mix(self.0 ^ n);
    }
}

/// Builds [`MixHasher`]s, for `HashMap<Key, _, MixState>`.
pub type MixState = std::hash::BuildHasherDefault<MixHasher>;

/// FNV-1a, 64 bits, of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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

    #[test]
    fn fnv1a_matches_its_published_test_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
