use super::*;

fn kong(fields: &str) -> Kong {
    let config: Config = toml::from_str(fields).unwrap();
    config.build(Context::default()).unwrap()
}

fn secs(s: u64) -> Nanos {
    Nanos(s * NANOS_PER_SEC)
}

fn admitted(limiter: &mut Kong, at: Nanos, tries: usize) -> usize {
    (0..tries).filter(|_| limiter.decide(at).admitted()).count()
}

#[test]
fn one_fixed_length_limit_is_a_fixed_window_on_the_utc_grid() {
    // 10 s before a UTC minute's edge: the window ends 10 s into the run.
    let mut limiter = kong("minute = 5\nstart = \"2026-11-27T09:59:50Z\"");
    assert!(limiter.fixed_window().is_some());
    assert_eq!(admitted(&mut limiter, secs(9), 8), 5);
    assert_eq!(admitted(&mut limiter, secs(10), 8), 5);
    assert_eq!(limiter.window_edges(), Some((secs(60), secs(10))));
}

#[test]
fn any_exhausted_period_rejects() {
    let mut limiter = kong("second = 3\nminute = 5");
    assert_eq!(admitted(&mut limiter, secs(0), 10), 3);
    assert_eq!(admitted(&mut limiter, secs(1), 10), 2);
    assert_eq!(admitted(&mut limiter, secs(2), 10), 0);
    assert_eq!(admitted(&mut limiter, secs(60), 10), 3);
}

#[test]
fn months_follow_the_calendar() {
    // February 2028 (a leap year) has 29 days.
    let mut limiter = kong("month = 2\nday = 100\nstart = \"2028-02-28T00:00:00Z\"");
    assert_eq!(admitted(&mut limiter, secs(0), 5), 2);
    assert_eq!(admitted(&mut limiter, secs(86_400), 5), 0, "29 February");
    assert_eq!(admitted(&mut limiter, secs(2 * 86_400), 5), 2, "1 March");
}

#[test]
fn the_redis_policy_counts_rejected_requests_and_local_does_not() {
    for (policy, second_later) in [("local", 2), ("redis", 0)] {
        let mut limiter = kong(&format!("second = 2\nminute = 4\npolicy = \"{policy}\""));
        // 2 pass, 3 are rejected: only redis counts them in the minute.
        assert_eq!(admitted(&mut limiter, secs(0), 5), 2);
        assert_eq!(admitted(&mut limiter, secs(1), 5), second_later, "{policy}");
    }
}

#[test]
fn the_reset_is_the_longest_exhausted_periods_window_minus_elapsed() {
    let mut limiter = kong("second = 1\nminute = 2\nstart = \"2026-11-27T10:00:00Z\"");
    assert!(limiter.decide(secs(20)).admitted());
    // "Retry-After: 1", counted from the response at 20 s + 5 ns.
    match limiter.decide(Nanos(20 * NANOS_PER_SEC + 5)) {
        Decision::Reject(hint) => assert_eq!(hint.retry_at, Some(Nanos(secs(21).get() + 5))),
        other => panic!("{other:?}"),
    }
    assert!(limiter.decide(secs(21)).admitted());
    // The minute is exhausted too: its window, 60 − 22 s from 10:00:22.
    match limiter.decide(secs(22)) {
        Decision::Reject(hint) => assert_eq!(hint.reset_at, Some(secs(60))),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_redis_policy_names_the_period_exhausted_before_the_requests_own_increment() {
    let mut limiter =
        kong("second = 2\nminute = 3\npolicy = \"redis\"\nstart = \"2026-11-27T10:00:00Z\"");
    assert!(limiter.decide(Nanos(0)).admitted());
    assert!(limiter.decide(Nanos(100_000_000)).admitted());
    // Before its increment the second is used up (2 of 2), the minute
    // not (2 of 3): Kong says 1 s, and the client returns 1 s after.
    assert_eq!(
        limiter.decide_with::<true>(Nanos(200_000_000)),
        Decision::Reject(Hint::new(1_200_000_000, 1_200_000_000))
    );
}

#[test]
fn in_a_31_day_month_the_hint_comes_a_day_early() {
    // Kong's month window is 30 days: on 31 January the hint says 1 s,
    // and a retry then is rejected again (the key, created on the 31st,
    // lives 30 days).
    let mut limiter = kong("month = 1\nday = 10\nstart = \"2027-01-31T00:00:00Z\"");
    assert!(limiter.decide(secs(0)).admitted());
    let Decision::Reject(hint) = limiter.decide(secs(5)) else {
        panic!("the month is exhausted");
    };
    assert_eq!(hint.retry_at, Some(secs(6)));
    assert!(!limiter.decide(secs(6)).admitted());
    assert!(limiter.decide(secs(86_400)).admitted(), "1 February");
}

/// The month's key lives 30 days from its first increment: created on
/// 1 January it expires on the 31st and the quota is whole again until
/// February. In a 30-day month, or from a later first request, it
/// outlives the window.
#[test]
fn a_months_key_expires_30_days_after_its_first_increment() {
    for policy in ["local", "cluster", "redis"] {
        let mut limiter = kong(&format!(
            "month = 2\nday = 100\npolicy = \"{policy}\"\nstart = \"2027-01-01T00:00:00Z\""
        ));
        let first = Nanos(3_600 * NANOS_PER_SEC + 7);
        assert_eq!(admitted(&mut limiter, first, 3), 2);
        let expiry = first.get() + 30 * 86_400 * NANOS_PER_SEC;
        assert_eq!(admitted(&mut limiter, Nanos(expiry - 1), 3), 0, "{policy}");
        assert_eq!(admitted(&mut limiter, Nanos(expiry), 3), 2, "{policy}: 31 January");
        assert_eq!(admitted(&mut limiter, secs(31 * 86_400 - 1), 3), 0, "{policy}");
        assert_eq!(admitted(&mut limiter, secs(31 * 86_400), 3), 2, "{policy}: 1 February");
    }
    // April has 30 days: the key outlives it.
    let mut limiter = kong("month = 2\nday = 100\nstart = \"2027-04-01T00:00:00Z\"");
    assert_eq!(admitted(&mut limiter, secs(0), 3), 2);
    assert_eq!(admitted(&mut limiter, secs(30 * 86_400 - 1), 3), 0);
    // A year's key created on 1 January 2028 (leap) expires on 31 December.
    let mut limiter = kong("year = 1\nday = 100\nstart = \"2028-01-01T00:00:00Z\"");
    assert_eq!(admitted(&mut limiter, secs(0), 2), 1);
    assert_eq!(admitted(&mut limiter, secs(365 * 86_400 - 1), 2), 0);
    assert_eq!(admitted(&mut limiter, secs(365 * 86_400), 2), 1, "31 December 2028");
}

/// L − 1 before the month's key expires, L after, L in the next month:
/// 3L − 1 within a second, and the bound says so.
#[test]
fn a_month_limit_can_admit_three_times_its_limit_within_a_second() {
    let mut limiter = kong("month = 10\nday = 1000\nstart = \"2027-01-01T00:00:00Z\"");
    let first = Nanos(86_399 * NANOS_PER_SEC + 500_000_000);
    assert_eq!(admitted(&mut limiter, first, 1), 1);
    let expiry = first.get() + 30 * 86_400 * NANOS_PER_SEC;
    let mut admitted_times = Vec::new();
    for at in [expiry - 100_000_000, expiry + 100_000_000, 31 * 86_400 * NANOS_PER_SEC] {
        for _ in 0..10 {
            if limiter.decide(Nanos(at)).admitted() {
                admitted_times.push(at);
            }
        }
    }
    let worst = crate::limiter::worst_in(&admitted_times, Nanos::SECOND);
    assert_eq!(worst, 29);
    assert!(limiter.bound(Nanos::SECOND) >= worst);
    assert_eq!(limiter.bound(Nanos::SECOND), 30);
}

#[test]
fn sync_rate_and_empty_limits_are_refused_with_the_way_out() {
    let err = |text: &str| {
        toml::from_str::<Config>(text)
            .map_err(|e| e.to_string())
            .and_then(|c| c.build(Context::default()).map(|_| ()).map_err(|e| e.to_string()))
            .unwrap_err()
    };
    assert!(err("second = 1\nsync_rate = 10").contains("sync_interval = \"10s\""));
    assert!(err("policy = \"redis\"").contains("at least one"));
    assert!(err("second = 1\nstart = \"2026-11-27T00:00:00.5Z\"").contains("whole second"));
    assert!(err("second = 1\nstart = \"yesterday\"").contains("RFC 3339"));
}

#[test]
fn sync_rate_is_a_cluster_with_batched_counters() {
    use crate::limiter::LimiterConfig;
    use crate::limiter::cluster::{ClusterConfig, Config as ClusterRun};
    let inner = LimiterConfig::from_table(
        toml::from_str("kind = \"kong\"\nminute = 10\npolicy = \"cluster\"").unwrap(),
    )
    .unwrap();
    let cluster: ClusterConfig = toml::from_str(
        "instances = 2\nmode = \"shared-instance-clock\"\nsync_interval = \"10s\"",
    )
    .unwrap();
    let run = ClusterRun {
        inner: Box::new(inner),
        cluster,
        duration: secs(120),
    };
    let mut limiter = run.build(Context::default()).unwrap();
    // Between syncs each of the 2 nodes spends the minute's 10 on its own.
    assert_eq!(
        (0..40).filter(|_| limiter.decide(secs(1)).admitted()).count(),
        20
    );
}

proptest::proptest! {
    /// Over traffic crossing seconds and minutes (two limits, so the
    /// calendar windows rather than the fixed window): no rolling
    /// interval admits more than the bound.
    #[test]
    fn never_admits_more_than_its_bound(
        second in 1u64..8,
        minute in 1u64..40,
        redis in proptest::bool::ANY,
        mut times in proptest::collection::vec(0u64..150_000, 1..300),
    ) {
        let policy = if redis { "redis" } else { "local" };
        let mut limiter = kong(&format!(
            "second = {second}\nminute = {minute}\npolicy = \"{policy}\"\nstart = \"2026-11-27T09:59:30Z\""
        ));
        let over = crate::limiter::over_bound(&mut limiter, &mut times, &[Nanos(300_000_000), Nanos::SECOND, secs(60), secs(90)]);
        proptest::prop_assert!(over.is_none(), "{over:?}");
    }

    /// A month's key expiring inside a 31-day month: requests around
    /// the first increment, the key's expiry and the month's end, from
    /// either policy; no rolling interval admits more than the bound.
    #[test]
    fn expiring_month_keys_stay_within_the_bound(
        month in 1u64..6,
        redis in proptest::bool::ANY,
        first in 0u64..86_400_000,
        mut offsets in proptest::collection::vec((0u64..3, 0u64..3_000), 1..200),
    ) {
        let policy = if redis { "redis" } else { "local" };
        let mut limiter = kong(&format!(
            "month = {month}\nday = 1000\npolicy = \"{policy}\"\nstart = \"2027-01-01T00:00:00Z\""
        ));
        const MS: u64 = 1_000_000;
        let expiry = first * MS + 30 * 86_400 * NANOS_PER_SEC;
        let end = 31 * 86_400 * NANOS_PER_SEC;
        let mut times: Vec<u64> = offsets
            .drain(..)
            .map(|(at, ms)| [first * MS, expiry, end][at as usize] + ms * MS - MS * 1_500.min([first * MS, expiry, end][at as usize] / MS))
            .collect();
        times.sort_unstable();
        let admitted: Vec<u64> = times.into_iter().filter(|&t| limiter.decide(Nanos(t)).admitted()).collect();
        for interval in [Nanos(1), Nanos(3), Nanos::SECOND, secs(3), secs(86_400), secs(40 * 86_400)] {
            let (worst, bound) = (crate::limiter::worst_in(&admitted, interval), limiter.bound(interval));
            proptest::prop_assert!(worst <= bound, "{} > {} over {}", worst, bound, interval);
        }
    }
}

/// `hide_client_headers: true`: Kong's 429 then has no Retry-After
/// (handler.lua sets it only when the headers are shown), for one window
/// and for a calendar alike; the decisions themselves are unchanged.
#[test]
fn hidden_client_headers_give_no_hint() {
    for limits in ["second = 1", "second = 1\nminute = 5"] {
        for hidden in [false, true] {
            let mut limiter = kong(&format!("{limits}\nhide_client_headers = {hidden}"));
            assert!(limiter.decide(secs(3)).admitted());
            match limiter.decide(secs(3)) {
                Decision::Reject(hint) => assert_eq!(
                    hint.retry_at.is_none(),
                    hidden,
                    "{limits}, hidden {hidden}: {hint:?}"
                ),
                other => panic!("{other:?}"),
            }
            assert!(limiter.decide(secs(4)).admitted());
        }
    }
}
