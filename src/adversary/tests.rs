use super::*;
use crate::limiter::{Context, LimiterConfig};

/// What the search finds for `config` within `budget`, and its bound over 1 s.
pub(super) fn searched(config: &str, budget: u64) -> (Found, u64) {
    let table: toml::Table = toml::from_str(config).unwrap();
    let limiter = LimiterConfig::from_table(table)
        .unwrap()
        .build(Context::default())
        .unwrap();
    let found = search(&limiter, budget, Nanos::SECOND, Nanos(60 * NANOS_PER_SEC)).unwrap();
    (found, limiter.bound(Nanos::SECOND))
}

fn found(config: &str, budget: u64) -> (u64, u64, String) {
    let (found, bound) = searched(config, budget);
    (found.worst, bound, found.description)
}

/// Per key, the adversary sends from many keys: 2N from each of as many
/// keys as the budget feeds, so the whole budget passes, and the bound
/// for that many keys is reached (tight). One key would find 2N only.
#[test]
fn a_per_key_limit_is_attacked_from_many_keys() {
    let config = "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100\nper = \"key\"";
    let table: toml::Table = toml::from_str(config).unwrap();
    let limiter = LimiterConfig::from_table(table)
        .unwrap()
        .build(Context::default())
        .unwrap();
    let found = search(&limiter, 1_000, Nanos::SECOND, Nanos(60 * NANOS_PER_SEC)).unwrap();
    assert_eq!(found.worst, 1_000, "{}", found.description);
    assert_eq!(found.keys, 5, "{}", found.description);
    assert!(found.tight, "{}", found.description);
    assert!(
        found.description.starts_with("5 keys at once"),
        "{}",
        found.description
    );
    // A global window of the same limit: one key, 2N.
    let (global, _) = searched(
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100",
        1_000,
    );
    assert_eq!((global.worst, global.keys), (200, 1));
}

/// HAProxy's freq_ctr lets 2L through over a period: L at the end of a
/// period anchored by an opener, then L back-loaded through the next as
/// the previous period's weight shrinks.
#[test]
fn finds_2l_for_haproxy() {
    let (worst, bound, how) = found("kind = \"haproxy-rate\"\nlimit = 100", 400);
    assert_eq!((worst, bound), (200, 200), "{how}");
}

/// Kong with a second and a minute limit: both reset at a minute's edge,
/// where 100 before and 100 after pass.
#[test]
fn finds_2n_at_a_minute_edge_for_kong_second_and_minute() {
    let table: toml::Table = toml::from_str("kind = \"kong\"\nsecond = 100\nminute = 100").unwrap();
    let limiter = LimiterConfig::from_table(table)
        .unwrap()
        .build(Context::default())
        .unwrap();
    let found = search(&limiter, 400, Nanos::SECOND, Nanos(300 * NANOS_PER_SEC)).unwrap();
    assert_eq!(
        (found.worst, limiter.bound(Nanos::SECOND)),
        (200, 200),
        "{}",
        found.description
    );
    assert!(found.tight);
}

/// A store down at the start denies everything then; the patterns are
/// tried again after the outage ends, where 2N passes.
#[test]
fn finds_2n_after_an_outage_that_denies() {
    let scenario = crate::scenario::parse(
        "duration = \"60s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"adversary\", budget = 400 }]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100\ncluster = { instances = 3, mode = \"shared-instance-clock\", store = { outages = [{ at = \"1s\", for = \"5s\" }], on_error = \"deny\" } }\n",
        std::path::Path::new("d.toml"),
    )
    .unwrap();
    let limiter = &scenario.limiters[0].limiter;
    assert_eq!(limiter.changes(), [Nanos::SECOND, Nanos(6 * NANOS_PER_SEC)]);
    let found = search(limiter, 400, Nanos::SECOND, scenario.duration).unwrap();
    assert_eq!(
        (found.worst, found.tight),
        (200, true),
        "{}",
        found.description
    );
}

#[test]
fn finds_2n_for_an_epoch_fixed_window() {
    let (worst, bound, how) = found(
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100",
        400,
    );
    assert_eq!((worst, bound), (200, 200), "{how}");
}

#[test]
fn finds_2n_minus_1_for_a_first_request_window() {
    let (worst, bound, how) = found(
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100\nalign = \"first-request\"",
        400,
    );
    assert_eq!((worst, bound), (199, 199), "{how}");
}

#[test]
fn finds_about_2n_for_the_sliding_counter() {
    let (worst, _, how) = found(
        "kind = \"sliding-counter\"\nwindow = \"1s\"\nthreshold = 100",
        200,
    );
    assert!(worst >= 198, "{worst}: {how}");
}

#[test]
fn finds_about_2n_for_a_token_bucket_with_burst_n() {
    let (worst, bound, how) = found("kind = \"token-bucket\"\nrate = 100\nburst = 100", 400);
    assert!(worst >= 198 && worst <= bound, "{worst} of {bound}: {how}");
}

#[test]
fn finds_k_plus_1_windows_for_smaller_windows() {
    let (worst, bound, how) = found(
        "kind = \"smaller-window\"\nwindow = \"1s\"\nthreshold = 100\nsplits = 10",
        400,
    );
    assert_eq!((worst, bound), (110, 110), "{how}");
}

#[test]
fn finds_a_window_then_bucket_chains_bound() {
    let chain = "kind = \"chain\"\nlayers = [{ kind = \"fixed-window\", window = \"1s\", threshold = 100 }, { kind = \"token-bucket\", rate = 100, burst = 20 }]";
    let (worst, bound, how) = found(chain, 400);
    assert_eq!((worst, bound), (119, 119), "{how}");
}

#[test]
fn finds_the_bound_of_governors_gcra() {
    let (worst, bound, how) = found("kind = \"gcra\"\nquota = \"per_second(100)\"", 400);
    assert_eq!((worst, bound), (199, 199), "{how}");
}

#[test]
fn finds_2n_for_sliding_buckets_however_many() {
    for buckets in [2, 10] {
        let config = format!(
            "kind = \"sliding-buckets\"\nwindow = \"1s\"\nthreshold = 100\nbuckets = {buckets}"
        );
        let (worst, bound, how) = found(&config, 400);
        assert_eq!((worst, bound), (200, 200), "{buckets} buckets: {how}");
    }
}

#[test]
fn finds_k_times_the_limit_for_envoy_instances() {
    let config = "kind = \"envoy-local\"\nmax_tokens = 50\ntokens_per_fill = 50\nfill_interval = \"1s\"\ninstances = 2";
    let (worst, bound, how) = found(config, 400);
    assert_eq!((worst, bound), (200, 200), "{how}");
}

#[test]
fn finds_exactly_n_for_the_sliding_log() {
    let (worst, bound, how) = found(
        "kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 100",
        400,
    );
    assert_eq!((worst, bound), (100, 100), "{how}");
}

/// The ladder is fixed and cut at the budget (so a larger budget tries all a
/// smaller one did), and a large budget costs tens of rungs, not thousands.
#[test]
fn the_ladder_stays_short_for_large_budgets_and_grows_monotonically() {
    let small = ladder(400);
    let large = ladder(1_000_000);
    assert!(small.iter().all(|rung| large.contains(rung)));
    assert_eq!(&large[..small.len()], &small[..]);
    assert!(large.contains(&1_000) && !large.contains(&1_050));
    assert!(large.len() < 200, "{} rungs", large.len());
}

proptest::proptest! {
    /// The search's count of a pattern is the exact rolling worst, equal
    /// times and 1 ns intervals included; a time put in its place keeps
    /// the pattern as a sort would.
    #[test]
    fn the_peak_is_the_brute_force_worst_and_insertion_sorts(
        mut times in proptest::collection::vec(0u64..2_000, 0..60),
        interval in 1u64..1_500,
        t in 0u64..2_000,
    ) {
        times.sort_unstable();
        let (worst, _) = crate::metrics::rolling::worst_by_brute_force(&times, interval);
        proptest::prop_assert_eq!(peak_within(&times, interval), worst);
        let mut sorted = times.clone();
        sorted.push(t);
        sorted.sort_unstable();
        insert_sorted(&mut times, t);
        proptest::prop_assert_eq!(times, sorted);
    }
}
