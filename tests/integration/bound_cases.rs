//! The cases where a reported bound was exceeded or a decision differed from
//! the documented semantics, each reproduced from its description: the
//! counts are taken at release times, as the metrics take them.

use std::path::Path;

use burstsim::limiter::{Context, Limiter, LimiterConfig, RateLimiter};
use burstsim::time::Nanos;

use super::common;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn limiter(text: &str) -> Limiter {
    let table: toml::Table = toml::from_str(text).unwrap();
    LimiterConfig::from_table(table)
        .unwrap()
        .build(Context::default())
        .unwrap()
}

/// The most times in any [s, s + len).
fn worst(times: &[u64], len: u64) -> u64 {
    let mut first = 0;
    let mut most = 0;
    for (i, &t) in times.iter().enumerate() {
        while times[first] + len <= t {
            first += 1;
        }
        most = most.max((i - first + 1) as u64);
    }
    most
}

#[test]
fn delayed_nginx_at_a_high_rate_stays_within_its_bound() {
    let mut nginx = limiter("kind = \"nginx-limit-req\"\nrate = \"10000r/s\"\nburst = 20");
    let arrivals: Vec<u64> = [999_999; 10].into_iter().chain([1_000_000; 10]).collect();
    let released = common::released(&mut nginx, &arrivals);
    assert_eq!(
        worst(&released, 2),
        20,
        "all 20 released at once: {released:?}"
    );
    assert!(
        20 <= nginx.bound(Nanos(2)),
        "bound {}",
        nginx.bound(Nanos(2))
    );
    assert!(20 <= nginx.bound(Nanos(MS)));
    // At 100r/s the bound is the true maximum, 101 per second.
    let slow = limiter("kind = \"nginx-limit-req\"\nrate = \"100r/s\"\nburst = 100");
    assert_eq!(slow.bound(Nanos(S)), 101);
}

#[test]
fn a_chain_with_a_delayed_nginx_layer_bounds_what_it_releases() {
    let mut chain = limiter(
        r#"kind = "chain"
        layers = [
          { kind = "nginx-limit-req", rate = "4r/s", burst = 10 },
          { kind = "fixed-window", window = "500ms", threshold = 1 },
        ]"#,
    );
    let arrivals: Vec<u64> = [0; 10]
        .into_iter()
        .chain([500 * MS, 1000 * MS, 1500 * MS, 2000 * MS])
        .collect();
    let released = common::released(&mut chain, &arrivals);
    let interval = 500 * MS + 1;
    assert_eq!(worst(&released, interval), 3, "{released:?}");
    assert!(
        3 <= chain.bound(Nanos(interval)),
        "bound {}",
        chain.bound(Nanos(interval))
    );
}

#[test]
fn a_taken_back_request_does_not_hold_a_first_request_window_open() {
    let mut chain = limiter(
        r#"kind = "chain"
        count_rejected = false
        layers = [
          { kind = "fixed-window", window = "1s", threshold = 2, align = "first-request" },
          { kind = "fixed-window", window = "2500ms", threshold = 4 },
        ]"#,
    );
    let arrivals = [0, 0, S, S, 2 * S, 3 * S - 1, 3 * S - 1, 3 * S, 3 * S];
    let released = common::released(&mut chain, &arrivals);
    assert!(
        worst(&released, 2) <= chain.bound(Nanos(2)),
        "{released:?} vs {}",
        chain.bound(Nanos(2))
    );
    assert_eq!(chain.bound(Nanos(2)), 3);
}

#[test]
fn nginx_in_a_chain_takes_a_request_back_as_if_it_had_been_rejected() {
    let mut chain = limiter(
        r#"kind = "chain"
        count_rejected = false
        layers = [
          { kind = "nginx-limit-req", rate = "1000r/s", burst = 0, nodelay = true },
          { kind = "fixed-window", window = "1200us", threshold = 1 },
        ]"#,
    );
    let decided: Vec<bool> = [0, MS, 1_500_000]
        .iter()
        .map(|&t| chain.decide(Nanos(t)).admitted())
        .collect();
    assert_eq!(decided, [true, false, true]);
}

/// Runs `text` (with `trace.csv` holding `times`) and returns every run's
/// (limiter, worst rolling, bound).
fn simulate(text: &str, times: &[u64]) -> Vec<(String, u64, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let rows: String = times.iter().map(|t| format!("{t}\n")).collect();
    std::fs::write(dir.path().join("trace.csv"), format!("time_ns\n{rows}")).unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, text).unwrap();
    let scenario = burstsim::scenario::load(&path).unwrap();
    let outcome = burstsim::sim::simulate(&scenario, &burstsim::sim::Options::default()).unwrap();
    outcome
        .runs()
        .map(|r| {
            (
                r.summary.limiter.clone(),
                r.summary.worst_rolling,
                r.summary.bound,
            )
        })
        .collect()
}

#[test]
fn a_backward_step_of_the_store_clock_does_not_reset_its_window() {
    let text = r#"duration = "2s"
[metrics]
rolling = "3ns"
profile = ["3ns"]
[[workload]]
name = "w"
sources = [{ kind = "trace", path = "trace.csv" }]
[[limiter]]
name = "store"
kind = "fixed-window"
window = "1s"
threshold = 2
cluster = { instances = 2, mode = "shared-store-clock", steps = [{ at = "1s", by = "-1ms", on = "store" }, { at = "1000000001ns", by = "-1ms", on = "store" }] }
"#;
    let times = [S - 1, S - 1, S, S, S + 1, S + 1];
    let runs = simulate(text, &times);
    let (_, worst, bound) = &runs[0];
    assert!(worst <= bound, "{worst} admitted in 3 ns, bound {bound}");
    assert_eq!(
        *worst, 2,
        "the key lives until the store's clock reaches its expiry"
    );
}

#[test]
fn a_run_past_a_limiters_exact_horizon_is_refused() {
    for limiter in [
        "kind = \"gcra\"\nquota = \"per_second(1).allow_burst(19)\"",
        "kind = \"nginx-limit-req\"\nrate = \"1r/s\"\nburst = 50",
        // A window ending past u64::MAX would saturate (and open anew at every request there).
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5",
        "kind = \"smaller-window\"\nwindow = \"1s\"\nthreshold = 50\nsplits = 10",
    ] {
        let text = format!(
            "duration = \"18446744073709551615ns\"\n[metrics]\nbucket = \"1000000h\"\nrolling = \"1s\"\nprofile = [\"1s\"]\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\n{limiter}\n"
        );
        let err = burstsim::scenario::parse(&text, Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("time arithmetic is exact only for arrivals up to"),
            "{err}"
        );
    }
    let gcra = limiter("kind = \"gcra\"\nquota = \"per_second(1).allow_burst(19)\"");
    assert_eq!(gcra.horizon(), Nanos(u64::MAX - 19 * S));
    let fixed = limiter("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5");
    assert_eq!(fixed.horizon(), Nanos(u64::MAX - S));
    let per_key = limiter("kind = \"fixed-window\"\nwindow = \"3s\"\nthreshold = 5\nper = \"key\"");
    assert_eq!(per_key.horizon(), Nanos(u64::MAX - 3 * S));
    let kong = limiter("kind = \"kong\"\nsecond = 10");
    assert_eq!(
        kong.horizon(),
        Nanos(u64::MAX - S),
        "Kong's sliding window of a second"
    );
}

#[test]
fn buffered_applies_the_ratio_to_the_exact_capacity_per_window() {
    let build = |per_sec: u64, window: &str| {
        let table: toml::Table =
            toml::from_str(&format!("kind = \"buffered\"\nwindow = \"{window}\"")).unwrap();
        LimiterConfig::from_table(table)
            .unwrap()
            .build(Context {
                backend_capacity_per_sec: Some(per_sec),
            })
            .map(|l| l.describe())
    };
    // 3/s over 1.5 s is 4.5 per window; ⌊0.7 × 4.5⌋ = 3.
    assert!(
        build(3, "1500ms").unwrap().starts_with("3 per 1.5s"),
        "{:?}",
        build(3, "1500ms")
    );
    // 150/s over 10 ms is 1.5; ⌊0.7 × 1.5⌋ = 1, not a refusal.
    assert!(
        build(150, "10ms").unwrap().starts_with("1 per 10ms"),
        "{:?}",
        build(150, "10ms")
    );
}

#[test]
fn dividing_a_token_bucket_among_instances_keeps_its_fractional_rate() {
    let text = |instances: u64| {
        format!(
            "duration = \"10s\"\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n\
             [[limiter]]\nname = \"b\"\nkind = \"token-bucket\"\nrate = 2.5\nburst = 1\n\
             cluster = {{ instances = {instances}, mode = \"local\", divide = true }}\n"
        )
    };
    // Per instance: 2.5/s, and 1.25/s each of two (not 2 and 1, truncated).
    for (instances, expected) in [(1, 2.5), (2, 1.25)] {
        let scenario = burstsim::scenario::parse(&text(instances), Path::new("s.toml")).unwrap();
        let built = scenario.limiters[0]
            .config
            .build(Context::default())
            .unwrap();
        let nominal = built.nominal(Nanos(S));
        assert!(
            (nominal - expected).abs() < 1e-9,
            "{instances} instances: {nominal}"
        );
    }
}

#[test]
fn decimals_are_exact_or_refused() {
    let scenario = |rate: &str| {
        format!(
            "duration = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n\
             [[limiter]]\nname = \"b\"\nkind = \"token-bucket\"\nrate = {rate}\nburst = 1\n"
        )
    };
    let err = burstsim::scenario::parse(&scenario("428571428.571428571"), Path::new("s.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("write it as a string"), "{err}");
    let exact =
        burstsim::scenario::parse(&scenario("\"428571428.571428571\""), Path::new("s.toml"))
            .unwrap();
    assert!(
        exact.limiters[0]
            .description
            .starts_with("428571428.571428571/s"),
        "{}",
        exact.limiters[0].description
    );
    let store = "duration = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 1 }]\n\
                 [[limiter]]\nname = \"f\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 1\n\
                 cluster = { instances = 2, mode = \"shared-store-clock\", store = { update = \"read-then-increment\" } }\n";
    let err = burstsim::scenario::parse(store, Path::new("s.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("read-then-increment"), "{err}");
}

/// Per key, the adversary's run reports many keys, the lower bound it
/// found and whether it reached the bound for that many keys; the same
/// window globally is tight at 2N from one key.
#[test]
fn the_adversary_attacks_a_per_key_limit_from_many_keys_and_says_how_many() {
    let text = r#"duration = "10s"
[[workload]]
name = "worst"
sources = [{ kind = "adversary", budget = 400 }]
[[limiter]]
name = "per-client"
kind = "fixed-window"
window = "1s"
threshold = 10
per = "key"
[[limiter]]
name = "global"
kind = "fixed-window"
window = "1s"
threshold = 10
"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, text).unwrap();
    let scenario = burstsim::scenario::load(&path).unwrap();
    let outcome = burstsim::sim::simulate(&scenario, &burstsim::sim::Options::default()).unwrap();
    let runs: Vec<_> = outcome.runs().map(|r| &r.summary).collect();
    let per_client = runs[0];
    assert_eq!(
        (
            per_client.worst_rolling,
            per_client.bound,
            per_client.lower_bound,
            per_client.tight
        ),
        (400, 400, Some(400), Some(true))
    );
    let keys = per_client
        .keys
        .as_ref()
        .expect("keyed: the adversary sent from keys");
    assert_eq!(keys.keys, 20);
    let how = per_client.adversary.as_deref().unwrap();
    assert!(how.starts_with("20 keys at once"), "{how}");
    let global = runs[1];
    assert_eq!(
        (global.worst_rolling, global.bound, global.tight),
        (20, 20, Some(true))
    );
    assert!(global.keys.is_none());
}
