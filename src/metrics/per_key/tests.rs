use super::*;
use crate::metrics::rolling::worst_by_brute_force;

#[test]
fn each_keys_worst_matches_brute_force_and_the_busiest_key_is_named() {
    let admitted: Vec<(u64, u64)> = vec![
        (0, 1),
        (5, 2),
        (9, 1),
        (10, 1),
        (10, 2),
        (19, 1),
        (20, 1),
        (29, 3),
        (30, 1),
    ];
    let mut counts = PerKeyCounts::new(Nanos(10));
    for &(t, k) in &admitted {
        counts.admitted(Nanos(t), Key::client(k));
    }
    counts.rejected(Key::client(3));
    counts.rejected(Key::client(4));
    let summary = counts.finish(None, Some(2.0)).unwrap();
    let brute = |key: u64| {
        let times: Vec<u64> = admitted
            .iter()
            .filter(|a| a.1 == key)
            .map(|a| a.0)
            .collect();
        worst_by_brute_force(&times, 10).0
    };
    assert_eq!(
        (brute(1), brute(2), brute(3)),
        (2, 2, 1),
        "key 1: {{9, 10}} or {{19, 20}}; key 2: {{5, 10}}"
    );
    assert_eq!(summary.keys, 4);
    assert_eq!(summary.throttled, 2);
    assert_eq!(
        (summary.worst_rolling_p50, summary.worst_rolling_max),
        (1, 2)
    );
    assert_eq!(summary.worst_key, 1, "the first seen of the keys with 2");
    let spread = summary.spike_ratio.unwrap();
    assert_eq!(
        (spread.p50, spread.max),
        (0.5, 1.0),
        "worst counts 1 and 2 over 2 per key"
    );
    // 4 keys: the busiest 1% is one key, key 1 with 6 of 9.
    assert!((summary.top_1pct_share - 6.0 / 9.0).abs() < 1e-12);
}

proptest::proptest! {
    /// Counted by value or selected, the nearest ranks of a sorted copy.
    #[test]
    fn nearest_ranks_are_those_of_the_sorted_values(
        mut values in proptest::collection::vec(
            proptest::prop_oneof![0u32..5, 0u32..70_000, proptest::strategy::Just(u32::MAX)],
            1..300,
        ),
    ) {
        let mut sorted = values.clone();
        sorted.sort_unstable();
        let qs = [0.0, 0.01, 0.5, 0.99, 1.0];
        let expected = qs.map(|q| {
            let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            u64::from(sorted[rank - 1])
        });
        proptest::prop_assert_eq!(nearest_ranks(&mut values, qs), expected);
    }

    /// Counted by value or selected, the sum of the largest of a sorted copy.
    #[test]
    fn the_largest_sum_to_those_of_the_sorted_values(
        values in proptest::collection::vec(0u64..70_000, 1..300),
        small: bool,
        huge: bool,
        share in 0.0f64..=1.0,
    ) {
        // Small values only (counted by value), or some of 2^16 or
        // more (selected), with one far larger or not.
        let mut values: Vec<u64> = values.iter().map(|v| if small { v % 6 } else { *v }).collect();
        if huge {
            values.push(1 << 40);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top = ((share * values.len() as f64) as usize).clamp(1, values.len());
        let expected: u64 = sorted[..top].iter().sum();
        proptest::prop_assert_eq!(sum_of_largest(&mut values, top), expected);
    }
}

proptest::proptest! {
    /// Keys numbered 0, 1, …, n − 1, first seen in that order or shuffled
    /// (a log's spread seconds): the figures read in place and counted by
    /// value are those of the list of every key, the worst key the first
    /// seen of the worst; a number skipped is left to the list.
    #[test]
    fn figures_by_value_are_those_of_the_list(
        steps in proptest::collection::vec((0u64..3, 0u64..40, 0u8..4), 1..300),
        interval in 1u64..20,
        order in 0u8..3,
        shuffle in proptest::collection::vec(0usize..1000, 300),
    ) {
        let (shuffled, gap) = (order == 1, order == 2);
        // How many keys the steps bring (a new one at the first step and
        // at each pick of 30 or more), and the numbers they take, in the
        // order first seen: 0 … n − 1, shuffled or not.
        let n = steps.iter().enumerate().filter(|&(i, &(_, pick, _))| i == 0 || pick >= 30).count();
        let mut numbers: Vec<u64> = (0..n as u64).collect();
        if shuffled {
            for (i, &pick) in shuffle.iter().enumerate().take(n) {
                numbers.swap(i, i + pick % (n - i));
            }
        }
        if gap {
            // Key 1 before key 0: 0 is never seen.
            numbers[0] = 1;
        }
        let mut counts = PerKeyCounts::new(Nanos(interval));
        let (mut at, mut seen) = (0u64, Vec::new());
        for &(gap, pick, what) in &steps {
            at += gap;
            // A key seen before, or the next number.
            let key = if !seen.is_empty() && pick < 30 {
                seen[pick as usize % seen.len()]
            } else {
                let key = numbers[seen.len()];
                seen.push(key);
                key
            };
            if what == 0 {
                counts.rejected(Key::client(key));
            } else {
                counts.admitted(Nanos(at), Key::client(key));
            }
        }
        match counts.by_value() {
            Some(parts) => {
                proptest::prop_assert!(!gap);
                proptest::prop_assert_eq!(parts, counts.by_list());
            }
            None => proptest::prop_assert!(gap),
        }
    }
}

proptest::proptest! {
    /// Each key's worst rolling count is the brute force's over its
    /// own admissions: equal times, 1 ns intervals, the end of time.
    #[test]
    fn each_key_s_worst_is_the_brute_force_worst_of_its_admissions(
        steps in proptest::collection::vec((0u64..4, 0u64..6), 1..400),
        interval in proptest::prop_oneof![proptest::strategy::Just(1u64), 1u64..12, 50u64..200],
        late: bool,
    ) {
        let mut counts = PerKeyCounts::new(Nanos(interval));
        let mut times = std::collections::BTreeMap::<u64, Vec<u64>>::new();
        let total: u64 = steps.iter().map(|&(gap, _)| gap).sum();
        let mut at = if late { u64::MAX - total } else { 0 };
        for &(gap, key) in &steps {
            at += gap;
            counts.admitted(Nanos(at), Key::client(key));
            times.entry(key).or_default().push(at);
        }
        let each: std::collections::BTreeMap<u64, (u32, u64)> = counts
            .each()
            .map(|(id, (worst, admitted, _))| (id, (worst, admitted)))
            .collect();
        let expected: std::collections::BTreeMap<u64, (u32, u64)> = times
            .iter()
            .map(|(&key, times)| {
                let worst = worst_by_brute_force(times, interval).0;
                (key, (worst as u32, times.len() as u64))
            })
            .collect();
        proptest::prop_assert_eq!(each, expected);
    }
}

proptest::proptest! {
    /// Keys numbered in order for a while (as a trace's come), then
    /// any: the order first seen as a plain list keeps it.
    #[test]
    fn keys_are_listed_in_the_order_first_seen(
        numbered in 0u64..50,
        then in proptest::collection::vec(0u64..80, 0..50),
    ) {
        let mut order = FirstSeen::Numbered(0);
        let mut listed: Vec<u64> = Vec::new();
        for id in (0..numbered).chain(then) {
            if !listed.contains(&id) {
                listed.push(id);
                order.push(id);
            }
        }
        proptest::prop_assert_eq!(order.len(), listed.len());
        proptest::prop_assert_eq!(order.iter().collect::<Vec<_>>(), listed);
    }
}

#[test]
fn counts_past_31_bits_are_carried_exactly() {
    let mut counts = PerKeyCounts::new(Nanos(10));
    counts.admitted(Nanos(0), Key::client(1));
    counts.rejected(Key::client(1));
    counts.admitted(Nanos(0), Key::client(2));
    // As if key 1 had had 2^32 − 1 admitted already: the count wraps
    // past 2^31 twice, and the throttled mark stays.
    counts.counts.set_admitted(1, u32::MAX.into());
    counts.admitted(Nanos(20), Key::client(1));
    counts.admitted(Nanos(20), Key::client(1));
    counts.rejected(Key::client(1));
    let each: Vec<_> = counts.each().collect();
    assert_eq!(each[0], (1, (2, (1 << 32) + 1, true)));
    assert_eq!(each[1], (2, (1, 1, false)));
    let summary = counts.finish(None, None).unwrap();
    assert_eq!(
        (summary.keys, summary.throttled, summary.worst_key),
        (2, 1, 1)
    );
    let share = ((1u64 << 32) + 1) as f64 / ((1u64 << 32) + 2) as f64;
    assert!((summary.top_1pct_share - share).abs() < 1e-12);
}

proptest::proptest! {
    /// Keys split over parts, each part's tallies added: the whole's
    /// figures, the busiest key being the first seen of the parts' busiest.
    #[test]
    fn parts_tallies_added_are_the_whole_s_figures(
        events in proptest::collection::vec((0u64..40, 0u64..300, proptest::bool::ANY), 1..400),
        parts in 1u64..5,
    ) {
        let (mut whole, mut split) = (PerKeyCounts::new(Nanos(20)), vec![PerKeyCounts::new(Nanos(20)); parts as usize]);
        let mut time = 0;
        for &(gap, key, admitted) in &events {
            time += gap;
            let part = &mut split[(key % parts) as usize];
            for counts in [&mut whole, part] {
                if admitted {
                    counts.admitted(Nanos(time), Key::client(key));
                } else {
                    counts.rejected(Key::client(key));
                }
            }
        }
        let expected = whole.finish(None, Some(3.0)).unwrap();
        let tallies: Vec<KeyTallies> = split.iter().filter_map(PerKeyCounts::tallies).collect();
        let added = KeyTallies::add(&tallies).unwrap();
        // The first seen of the parts' busiest with the most.
        let first_seen = |id: u64| whole.keys.iter().position(|k| k == id).unwrap();
        let worst_key = tallies
            .iter()
            .map(|t| t.busiest)
            .filter(|&(most, _)| most == added.busiest.0)
            .min_by_key(|&(_, id)| first_seen(id))
            .unwrap()
            .1;
        proptest::prop_assert_eq!(added.summary(worst_key, None, Some(3.0)), expected);
    }
}

#[test]
fn leaving_admissions_are_asked_for_only_with_many_keys_and_many_in_the_interval() {
    use crate::limiter::per_key::{AHEAD, PREFETCH_FROM};
    let mut counts = PerKeyCounts::new(Nanos(1000));
    // Many in the interval, but few keys: their counts stay in the cache.
    for _ in 0..ASK_LEAVING_FROM {
        counts.admitted(Nanos(0), Key::client(7));
    }
    assert_eq!(counts.leaving_ahead(), 0);
    // Many keys, all in the interval at once.
    for key in 0..PREFETCH_FROM as u64 {
        counts.admitted(Nanos(1), Key::client(key));
    }
    assert_eq!(counts.leaving_ahead(), AHEAD);
    // As many keys, but a log's second at a time: a leaving admission's
    // counts were touched a few admissions ago.
    for key in 0..ASK_LEAVING_FROM as u64 - 1 {
        counts.admitted(Nanos(2000), Key::client(key));
    }
    assert_eq!(counts.leaving_ahead(), 0);
    counts.admitted(Nanos(2000), Key::client(1));
    assert_eq!(counts.leaving_ahead(), AHEAD);
    // Asking changes no figure.
    let summary = counts.finish(None, None).unwrap();
    assert_eq!(summary.keys, PREFETCH_FROM as u64);
    // Key 7: its first admissions and one more 1 ns later.
    assert_eq!(summary.worst_rolling_max, ASK_LEAVING_FROM as u64 + 1);
    assert_eq!(summary.worst_key, 7);
}
