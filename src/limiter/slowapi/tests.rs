use super::*;

const MS: u64 = 1_000_000;

fn limit(text: &str) -> Slowapi {
    let config: Config = toml::from_str(text).unwrap();
    config.build(Context::default()).unwrap()
}

fn answers(l: &mut Slowapi, times_ms: &[u64]) -> Vec<Decision> {
    times_ms.iter().map(|&t| l.decide(Nanos(t * MS))).collect()
}

#[test]
fn a_fixed_window_opens_at_the_first_hit_and_counts_refusals() {
    let mut l = limit("limit = \"2/second\"\nheaders_enabled = true");
    let d = answers(&mut l, &[300, 500, 900, 1_299, 1_300, 1_301, 1_302]);
    assert!(d[0].admitted() && d[1].admitted());
    // The third hit in [0.3 s, 1.3 s) is refused: reset 1.3, so
    // int(1 + 1.3 − 0.9) = 1 s after the response.
    assert_eq!(d[2], Decision::Reject(Hint { retry_at: Some(Nanos(1_900 * MS)), reset_at: None, ..Hint::NONE }));
    assert!(!d[3].admitted());
    // At 1.3 s the expiry is ≤ now: a new window from this hit.
    assert!(d[4].admitted() && d[5].admitted() && !d[6].admitted());
    // 2N across the window's end: 2 at 0.5 s and 2 at 1.3 s, 800 ms apart.
    assert_eq!(l.bound(Nanos(1_000 * MS)), 4);
    assert_eq!(l.bound(Nanos(1)), 2);
    // Refused hits count in the window: a steady stream above the limit
    // keeps refusing until the window, opened by the first, ends.
    let mut steady = limit("limit = \"1/second\"");
    let d = answers(&mut steady, &[0, 400, 800, 1_000, 1_200]);
    assert_eq!(d.iter().map(|d| d.admitted()).collect::<Vec<_>>(), [true, false, false, true, false]);
    assert_eq!(d[1], Decision::Reject(Hint::NONE), "no headers by default");
}

#[test]
fn a_moving_window_refuses_while_the_nth_newest_is_within_w() {
    let mut l = limit("limit = \"2 per 2 seconds\"\nstrategy = \"moving-window\"\nheaders_enabled = true");
    let d = answers(&mut l, &[0, 1_500, 1_999, 2_000, 2_001, 3_500, 3_501]);
    assert!(d[0].admitted() && d[1].admitted());
    // The 2nd newest (0 s) is at or after 1.999 − 2: refused; the oldest
    // entry after now − W is at 0, so int(1 + 0 + 2 − 1.999) = 1.
    assert_eq!(d[2], Decision::Reject(Hint { retry_at: Some(Nanos(2_999 * MS)), reset_at: None, ..Hint::NONE }));
    // At 2.000 s, 0 ≥ 2 − 2 still holds: refused, the entry at exactly now − W counts.
    assert!(!d[3].admitted());
    assert!(d[4].admitted(), "0 < 2.001 − 2");
    // A refusal is not logged: the log is 2.001 and 1.5.
    assert!(!d[5].admitted(), "1.5 ≥ 3.5 − 2");
    assert!(d[6].admitted(), "1.5 < 3.501 − 2");
    assert_eq!(l.bound(Nanos(2 * SECOND)), 2);
    assert_eq!(l.bound(Nanos(2 * SECOND + 1)), 4);
}

#[test]
fn rounding_shortens_only_windows_of_a_month_or_more() {
    assert_eq!(rounding(1), 0);
    assert_eq!(rounding(86_400), 0);
    assert_eq!(rounding(29 * 86_400), 0);
    assert!(rounding(360 * 86_400) >= 1);
}

#[test]
fn limit_strings_are_read_as_limits_reads_them() {
    for (text, amount, expiry) in [
        ("10/minute", 10, 60),
        ("10 per minute", 10, 60),
        ("100/5 minutes", 100, 300),
        ("3 PER 2 Hours", 3, 7_200),
        ("1/month", 1, 2_592_000),
        ("1/year", 1, 31_104_000),
    ] {
        let config = Config { limit: text.into(), strategy: Strategy::FixedWindow, headers_enabled: false };
        assert_eq!(config.parse().unwrap(), (amount, expiry), "{text}");
    }
    for text in ["10/fortnight", "ten/minute", "0/second", "1/second;10/minute"] {
        let config = Config { limit: text.into(), strategy: Strategy::FixedWindow, headers_enabled: false };
        assert_eq!(config.parse().unwrap_err().path_text(), "limit", "{text}");
    }
}

proptest::proptest! {
    /// Over requests of whole and odd nanoseconds near window ends, no
    /// interval holds more than the bound.
    #[test]
    fn never_passes_more_than_its_bound(
        choice in 0u64..10_000,
        mut times in proptest::collection::vec(0u64..8_000_000_000, 1..300),
    ) {
        let text = Config::example(choice);
        let mut l = limit(&text);
        times.sort_unstable();
        let admitted: Vec<u64> = times.iter().copied().filter(|&t| l.decide(Nanos(t)).admitted()).collect();
        for interval in [1, MS, 999 * MS, SECOND - 1, SECOND, SECOND + 1, 2 * SECOND, 3 * SECOND + 1] {
            let (worst, bound) = (crate::limiter::worst_in(&admitted, Nanos(interval)), l.bound(Nanos(interval)));
            proptest::prop_assert!(worst <= bound, "{}: {} > {} over {}", text, worst, bound, interval);
        }
    }
}

/// `ns / 10^9` worked out in integers is the double binary64 division
/// gives, bit for bit, at the edges of the integers' range and of the
/// doubles' exponents.
#[test]
fn seconds_in_integers_are_the_division_at_the_edges() {
    let five_to_the_ninth: u64 = 1_953_125;
    let mut cases = vec![0, 1, 2, 499_999_999, 500_000_000, 999_999_999, SECOND, SECOND + 1];
    cases.extend([(1 << 53) - 1, 1 << 53, (1 << 53) + 1, u64::MAX]);
    // Multiples of 5^9: as near to halfway between two doubles as it gets.
    cases.extend((1..2_000).map(|j| j * five_to_the_ninth));
    cases.extend((0..53).map(|p| 1u64 << p));
    for ns in cases {
        assert_eq!(
            bits(seconds(Nanos(ns))),
            bits(seconds_by_division(Nanos(ns))),
            "{ns} ns"
        );
    }
}

proptest::proptest! {
    /// The same, anywhere: any u64, any integer of a double, and any
    /// multiple of 5^9 (the nearest to halfway) below 2^53.
    #[test]
    fn seconds_in_integers_are_the_division(
        ns in proptest::prelude::any::<u64>(),
        small in 0u64..1 << 53,
        halves in 0u64..(1 << 53) / 1_953_125,
    ) {
        for ns in [ns, small, halves * 1_953_125] {
            proptest::prop_assert_eq!(
                bits(seconds(Nanos(ns))),
                bits(seconds_by_division(Nanos(ns))),
                "{} ns",
                ns
            );
        }
    }
}
