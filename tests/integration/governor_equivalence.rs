//! burstsim's `gcra` makes the same decision as the `governor` crate itself,
//! request by request, driven by governor's fake clock.

use std::num::NonZeroU32;
use std::time::Duration;

use burstsim::limiter::{Context, LimiterConfig, RateLimiter};
use burstsim::time::Nanos;
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter as Governor};
use proptest::prelude::*;

/// Decisions of governor and of burstsim on the same arrival times.
fn both(per_second: u32, burst: u32, times: &[u64]) -> (Vec<bool>, Vec<bool>) {
    let quota = Quota::per_second(NonZeroU32::new(per_second).unwrap())
        .allow_burst(NonZeroU32::new(burst).unwrap());
    let clock = FakeRelativeClock::default();
    let governor = Governor::direct_with_clock(quota, clock.clone());
    let mut elapsed = 0;
    let theirs = times
        .iter()
        .map(|&t| {
            clock.advance(Duration::from_nanos(t - elapsed));
            elapsed = t;
            governor.check().is_ok()
        })
        .collect();
    let table: toml::Table = toml::from_str(&format!(
        "kind = \"gcra\"\nquota = \"per_second({per_second}).allow_burst({burst})\""
    ))
    .unwrap();
    let mut ours = LimiterConfig::from_table(table)
        .unwrap()
        .build(Context::default())
        .unwrap();
    let mine = times
        .iter()
        .map(|&t| ours.decide(Nanos(t)).admitted())
        .collect();
    (theirs, mine)
}

/// Gaps around the emission interval T of `per_second`: zero, exact multiples
/// of T, one nanosecond either side, and anything.
fn arrivals(per_second: u32) -> impl Strategy<Value = Vec<u64>> {
    let t = 1_000_000_000 / u64::from(per_second);
    let gap = prop_oneof![
        3 => Just(0u64),
        2 => (1..4u64).prop_map(move |k| k * t),
        2 => (1..4u64).prop_map(move |k| k * t - 1),
        2 => (1..4u64).prop_map(move |k| k * t + 1),
        3 => 0..3 * t,
    ];
    prop::collection::vec(gap, 1..300).prop_map(|gaps| {
        gaps.iter()
            .scan(0u64, |now, gap| {
                *now += gap;
                Some(*now)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn gcra_decides_exactly_as_governor((per_second, burst, times) in (1..2_000u32, 1..40u32).prop_flat_map(|(n, b)| (Just(n), Just(b), arrivals(n)))) {
        let (theirs, ours) = both(per_second, burst, &times);
        prop_assert_eq!(theirs, ours);
    }
}

#[test]
fn gcra_decides_exactly_as_governor_on_adversarial_traces() {
    // A burst exactly at the start, at a cell boundary, and one nanosecond early.
    for (per_second, burst) in [(10, 10), (3, 1), (1_000, 7), (7, 3)] {
        let t = 1_000_000_000 / per_second as u64;
        let mut times: Vec<u64> = vec![0; burst as usize + 2];
        times.extend([t - 1, t, t, 2 * t - 1, 2 * t, 10 * t, 10 * t, 10 * t + 1]);
        times.extend((0..50).map(|i| 11 * t + i * t / 2));
        let (theirs, ours) = both(per_second, burst, &times);
        assert_eq!(
            theirs, ours,
            "per_second({per_second}).allow_burst({burst})"
        );
    }
}
