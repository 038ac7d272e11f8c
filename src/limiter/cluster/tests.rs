use super::*;

/// `inner` (a limiter's TOML) run as the cluster `text` for a minute.
fn build(inner: &str, text: &str) -> Result<Cluster, FieldError> {
    let cluster: ClusterConfig = toml::from_str(text).unwrap();
    let inner: toml::Table = toml::from_str(inner).unwrap();
    let config = Config {
        inner: Box::new(LimiterConfig::from_table(inner).unwrap()),
        cluster,
        duration: Nanos(60_000_000_000),
    };
    config.build(Context::default())
}

const WINDOW: &str = "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100";

fn cluster(text: &str) -> Cluster {
    build(WINDOW, text).unwrap()
}

const S: u64 = 1_000_000_000;

fn admitted(cluster: &mut Cluster, times: &[u64]) -> usize {
    times
        .iter()
        .filter(|&&t| cluster.decide(Nanos(t)).admitted())
        .count()
}

#[test]
fn local_counters_with_full_thresholds_reach_2_instances_n() {
    let mut c = cluster("instances = 3");
    let times: Vec<u64> = [vec![S - 1; 300], vec![S; 300]].concat();
    assert_eq!(admitted(&mut c, &times), 600, "2 · 3 · 100");
    assert_eq!(c.bound(Nanos(S)), 600);
    assert_eq!(c.admitted_per_instance(), [200, 200, 200]);
}

#[test]
fn a_shared_counter_keyed_by_skewed_clocks_reaches_3n() {
    // Clocks 400 ms behind, on time and 400 ms ahead: a spread under W.
    // At true 1.35 s they read 0.95 s, 1.35 s and 1.75 s (windows 0, 1, 1);
    // at true 1.65 s, 1.25 s, 1.65 s and 2.05 s (windows 1, 1, 2).
    let mut c = cluster(
        "instances = 3\nmode = \"shared-instance-clock\"\noffsets = [\"-400ms\", \"0s\", \"+400ms\"]",
    );
    let times: Vec<u64> = [vec![1_350_000_000; 300], vec![1_650_000_000; 300]].concat();
    assert_eq!(
        admitted(&mut c, &times),
        300,
        "N in each of windows 0, 1 and 2 within 300 ms of true time"
    );
    assert_eq!(
        c.bound(Nanos(S)),
        300,
        "W plus a 800 ms spread meets at most three windows"
    );
}

#[test]
fn a_forward_step_of_the_store_clock_ends_a_window_early() {
    let mut c = cluster(
        "instances = 2\nmode = \"shared-store-clock\"\nsteps = [{ at = \"1500ms\", by = \"+600ms\", on = \"store\" }]",
    );
    assert_eq!(admitted(&mut c, &[S; 150]), 100, "the window opened at 1 s");
    // At 1.5 s the store's clock jumps to 2.1 s: the key expires, a new window opens.
    assert_eq!(admitted(&mut c, &[1_600_000_000; 150]), 100);
}

#[test]
fn batched_counters_let_each_instance_spend_the_limit_between_syncs() {
    let mut c = cluster("instances = 3\nmode = \"shared-instance-clock\"\nsync_interval = \"2s\"");
    // All within one window and one sync period: each instance sees only its own counts.
    assert_eq!(admitted(&mut c, &[S / 2; 600]), 300);
    // After the next sync (at 2 s) every instance sees window 2's count afresh.
    assert_eq!(admitted(&mut c, &[2 * S + S / 2; 600]), 300);
    assert_eq!(c.bound(Nanos(S)), 2 * 3 * 100);
}

#[test]
fn an_offset_spread_draws_fixed_offsets_within_it() {
    let c = cluster("instances = 4\noffset_spread = \"800ms\"");
    let offsets: Vec<i64> = c.clocks.iter().map(|clock| clock.offset).collect();
    assert!(
        offsets.iter().all(|o| o.abs() <= 400_000_000),
        "{offsets:?}"
    );
    assert!(
        offsets.windows(2).any(|pair| pair[0] != pair[1]),
        "{offsets:?}"
    );
    let again = cluster("instances = 4\noffset_spread = \"800ms\"");
    assert_eq!(
        offsets,
        again
            .clocks
            .iter()
            .map(|clock| clock.offset)
            .collect::<Vec<_>>()
    );
}

#[test]
fn an_outage_is_answered_as_on_error_says() {
    let outage = |on_error: &str| {
        cluster(&format!(
            "instances = 3\nmode = \"shared-instance-clock\"\nstore = {{ outages = [{{ at = \"2s\", for = \"1s\" }}], on_error = \"{on_error}\" }}"
        ))
    };
    let down: Vec<u64> = (0..900).map(|i| 2 * S + i * 1_000_000).collect();
    let mut allow = outage("allow");
    assert_eq!(
        admitted(&mut allow, &[S; 150]),
        100,
        "the store answers before"
    );
    assert_eq!(admitted(&mut allow, &down), 900, "fail open: everything");
    assert_eq!(
        admitted(&mut allow, &[3 * S; 150]),
        100,
        "the store is back at 3 s"
    );
    assert_eq!(allow.bound(Nanos(S)), u64::MAX);
    let mut deny = outage("deny");
    assert_eq!(admitted(&mut deny, &down), 0, "fail closed: nothing");
    assert!(matches!(
        deny.decide(Nanos(2 * S)),
        Decision::Reject(Hint::NONE)
    ));
    assert_eq!(deny.bound(Nanos(S)), 200, "as without the outage");
    let mut local = outage("local");
    assert_eq!(
        admitted(&mut local, &down),
        300,
        "each instance its own 100"
    );
    assert_eq!(local.bound(Nanos(S)), 200 + 3 * 200);
}

/// Ten 50 ms outages within a second: each instance's fallback window is
/// the same one throughout, so one instance admits N in the second, not
/// 10·N, and the bound holds.
#[test]
fn a_flapping_store_does_not_refill_the_local_fallback() {
    let outages: Vec<String> = (0..10)
        .map(|i| format!("{{ at = \"{}ms\", for = \"50ms\" }}", 1_000 + i * 100))
        .collect();
    let mut c = cluster(&format!(
        "instances = 1\nmode = \"shared-instance-clock\"\nstore = {{ outages = [{}], on_error = \"local\" }}",
        outages.join(", ")
    ));
    // 20 requests inside each outage, 2 ms apart.
    let down: Vec<u64> = (0..10)
        .flat_map(|i| (0..20).map(move |j| S + i * 100_000_000 + j * 2_000_000))
        .collect();
    let passed = admitted(&mut c, &down);
    assert_eq!(passed, 100, "one fallback window of 100 over the second");
    assert!(passed as u64 <= c.bound(Nanos(S)));
}

#[test]
fn a_failover_loses_the_increments_of_its_last_moments() {
    let mut c = cluster(
        "instances = 2\nmode = \"shared-instance-clock\"\nstore = { failover = [{ at = \"1800ms\", lost = \"500ms\" }] }",
    );
    // Window 1: 40 admitted at 1.1 s, 60 at 1.5 s: full.
    assert_eq!(admitted(&mut c, &[1_100_000_000; 40]), 40);
    assert_eq!(admitted(&mut c, &[1_500_000_000; 60]), 60);
    assert_eq!(admitted(&mut c, &[1_700_000_000; 10]), 0);
    // The replica had only what landed by 1.3 s: 40; 60 more get in.
    assert_eq!(admitted(&mut c, &[1_900_000_000; 100]), 60);
    assert_eq!(
        c.bound(Nanos(S)),
        200 + 200,
        "what the counter admits in 500 ms, once more"
    );
    let mut store = cluster(
        "instances = 2\nmode = \"shared-store-clock\"\nstore = { failover = [{ at = \"1800ms\", lost = \"1s\" }] }",
    );
    assert_eq!(admitted(&mut store, &[S; 150]), 100, "the key opens at 1 s");
    // The replica never had the key: a new window opens at 1.9 s.
    assert_eq!(admitted(&mut store, &[1_900_000_000; 150]), 100);
}

#[test]
fn store_faults_are_refused_where_they_cannot_apply() {
    let err = |text: &str| build(WINDOW, text).unwrap_err();
    assert!(
        err("instances = 2\nstore = { outages = [{ at = \"1s\", for = \"1s\" }] }")
            .to_string()
            .contains("in mode = \"local\" there is none")
    );
    assert!(err("instances = 2\nmode = \"shared-instance-clock\"\nstore = { outages = [{ at = \"1s\", for = \"2s\" }, { at = \"2s\", for = \"1s\" }] }").to_string().contains("overlap"));
    assert!(err("instances = 2\nmode = \"shared-instance-clock\"\nstore = { outages = [{ at = \"90s\", for = \"1s\" }] }").to_string().contains("after the end of the run"));
    assert!(err("instances = 2\nmode = \"shared-instance-clock\"\nsync_interval = \"1s\"\nstore = { failover = [{ at = \"1s\", lost = \"1s\" }] }").to_string().contains("atomic shared counters only"));
}

#[test]
fn read_then_increment_over_admits_by_the_rate_times_the_round_trip() {
    // 100,000 per second for 10 ms, a 1 ms round trip: while the first
    // increments are in flight, r · rtt = 100 more requests see a count
    // below N; an increment landing exactly as a request arrives is seen
    // by it, so the window admits N + r · rtt − 1.
    let mut c = cluster(
        "instances = 4\nmode = \"shared-instance-clock\"\nstore = { rtt = \"1ms\", update = \"read-then-increment\" }",
    );
    let times: Vec<u64> = (0..1_000).map(|i| S / 4 + i * 10_000).collect();
    assert_eq!(admitted(&mut c, &times), 100 + 100 - 1);
}

#[test]
fn read_then_increment_over_admits_within_a_round_trip() {
    let mut c = cluster(
        "instances = 4\nmode = \"shared-instance-clock\"\nstore = { rtt = \"2ms\", update = \"read-then-increment\" }",
    );
    // 400 requests within one millisecond: none sees another's increment.
    let times: Vec<u64> = (0..400).map(|i| S / 2 + i * 2_000).collect();
    assert_eq!(admitted(&mut c, &times), 400);
    let mut atomic = cluster("instances = 4\nmode = \"shared-instance-clock\"");
    assert_eq!(admitted(&mut atomic, &times), 100);
    assert_eq!(c.bound(Nanos(S)), u64::MAX, "no bound over any traffic");
}

const REDISSON: &str = "kind = \"redisson\"\nrate = 100\nrate_interval = \"1s\"";

#[test]
fn redisson_overall_shares_one_log_and_per_client_keeps_one_each() {
    let mut overall = build(REDISSON, "instances = 2").unwrap();
    assert_eq!(admitted(&mut overall, &[S; 300]), 100);
    assert_eq!(
        overall.bound(Nanos(S)),
        200,
        "1 s meets 1001 ms of the clock"
    );
    let per_client = format!("{REDISSON}\nrate_type = \"per-client\"");
    let mut each = build(&per_client, "instances = 2").unwrap();
    assert_eq!(admitted(&mut each, &[S; 300]), 200);
    assert_eq!(each.admitted_per_instance(), [100, 100]);
}

#[test]
fn a_redisson_client_ahead_expires_the_others_permits_early() {
    // One client whose clock jumps 300 ms ahead at 700 ms: it reads 1000 ms
    // and removes every permit scored at 0 — 2N in 700 ms and 1 ns.
    let mut c = build(
        REDISSON,
        "instances = 1\nsteps = [{ at = \"700ms\", by = \"+300ms\", on = 0 }]",
    )
    .unwrap();
    assert_eq!(admitted(&mut c, &[0; 150]), 100);
    assert_eq!(admitted(&mut c, &[699_999_999; 50]), 0);
    assert_eq!(admitted(&mut c, &[700_000_000; 150]), 100);
    assert_eq!(c.bound(Nanos(700_000_001)), 200);
    assert_eq!(
        c.bound(Nanos(699_000_001)),
        100,
        "a place is reused 699 ms + 1 ns apart at the earliest"
    );
    // Two clients 300 ms apart, taking turns: the one ahead frees the
    // other's permits at true 700 ms.
    let mut two = build(REDISSON, "instances = 2\noffsets = [\"0s\", \"+300ms\"]").unwrap();
    assert_eq!(admitted(&mut two, &[0; 200]), 100);
    assert_eq!(admitted(&mut two, &[700_000_000; 100]), 50);
    assert_eq!(two.bound(Nanos(700_000_001)), 200);
}

#[test]
fn redisson_refuses_what_it_does_not_do() {
    let per_client = format!("{REDISSON}\nrate_type = \"per-client\"");
    for (inner, text, says) in [
        (
            REDISSON,
            "instances = 2\nmode = \"shared-store-clock\"",
            "never the store's",
        ),
        (
            per_client.as_str(),
            "instances = 2\nmode = \"shared-instance-clock\"",
            "a log per client",
        ),
        (REDISSON, "instances = 2\ndivide = true", "shares one rate"),
        (
            REDISSON,
            "instances = 2\nstore = { update = \"read-then-increment\" }",
            "atomic EVAL",
        ),
        (
            REDISSON,
            "instances = 2\nstore = { outages = [{ at = \"1s\", for = \"1s\" }] }",
            "tryAcquire throws",
        ),
    ] {
        let error = build(inner, text).unwrap_err().to_string();
        assert!(error.contains(says), "{text}: {error}");
    }
    let mut divided = build(&per_client, "instances = 2\ndivide = true").unwrap();
    assert_eq!(admitted(&mut divided, &[S; 300]), 100, "50 each");
}

const SENTINEL: &str = "kind = \"sentinel\"\ncount = 10\ncluster_mode = true";
const MS: u64 = 1_000_000;

/// The times of `times` a cluster admits.
fn passed(cluster: &mut Cluster, times: impl Iterator<Item = u64>) -> Vec<u64> {
    times
        .filter(|&t| cluster.decide(Nanos(t)).admitted())
        .collect()
}

#[test]
fn sentinel_instances_fall_back_to_their_own_rule_on_the_statistics_the_server_fed() {
    // Two instances, count 10 per instance (AVG_LOCAL: the server allows
    // 20 a rolling second), a request every 10 ms alternating between them.
    let every_10ms = |from: u64, to: u64| (from..to).step_by(10).map(|ms| ms * MS);
    let outage = |at: &str| {
        format!("instances = 2\nstore = {{ outages = [{{ at = \"{at}\", for = \"1s\" }}] }}")
    };
    let mut c = build(SENTINEL, &outage("300ms")).unwrap();
    // The server passes the first 20 (0–190 ms): ten in each instance's
    // 500 ms bucket [0, 500).
    assert_eq!(
        passed(&mut c, every_10ms(0, 300)),
        every_10ms(0, 200).collect::<Vec<_>>()
    );
    // From 300 ms the server is down: each instance's own rule sees those
    // ten in its last second ([0, 500) counts until 1 s), so it blocks
    // until 1 s, then passes ten each in [1 s, 1.5 s) and blocks again.
    assert_eq!(
        passed(&mut c, every_10ms(300, 1_300)),
        every_10ms(1_000, 1_200).collect::<Vec<_>>()
    );
    // Back at 1.3 s the server counted nothing since 190 ms: 20 more.
    assert_eq!(
        passed(&mut c, every_10ms(1_300, 2_000)),
        every_10ms(1_300, 1_500).collect::<Vec<_>>()
    );
    assert_eq!(c.admitted_per_instance(), [30, 30]);
    // The server's 2N (40) and each instance's own 2N (20) over a second.
    assert_eq!(c.bound(Nanos(1_000 * MS)), 80);

    // Without the fallback the rule is not applied: everything passes.
    let text = format!("{SENTINEL}\nfallback_to_local_when_fail = false");
    let mut open = build(&text, &outage("300ms")).unwrap();
    assert_eq!(passed(&mut open, every_10ms(0, 1_300)).len(), 20 + 100);
    assert_eq!(open.bound(Nanos(1_000 * MS)), u64::MAX);
    // No outage, no fallback to count.
    let mut steady = build(SENTINEL, "instances = 2").unwrap();
    assert_eq!(passed(&mut steady, every_10ms(0, 2_000)).len(), 40);
    assert_eq!(steady.bound(Nanos(1_000 * MS)), 40);
}

#[test]
fn sentinel_token_server_refuses_what_it_does_not_do() {
    let refused = |inner: &str, text: &str| build(inner, text).unwrap_err().to_string();
    for (text, says) in [
        (
            "instances = 2\nmode = \"shared-store-clock\"",
            "whatever the mode",
        ),
        ("instances = 2\ndivide = true", "threshold_type"),
        (
            "instances = 2\nstore = { on_error = \"deny\" }",
            "fallback_to_local_when_fail",
        ),
        (
            "instances = 2\nstore = { failover = [{ at = \"1s\", lost = \"1ms\" }] }",
            "restart as an outage",
        ),
    ] {
        assert!(
            refused(SENTINEL, text).contains(says),
            "{text}: {}",
            refused(SENTINEL, text)
        );
    }
    let three = format!("{SENTINEL}\nconnected_clients = 3");
    assert!(refused(&three, "instances = 2").contains("its 2 instances"));
    assert!(build(&three, "instances = 3").is_ok());
}

/// A request every 10 ms over [from, to) ms.
fn every_10ms(from: u64, to: u64) -> impl Iterator<Item = u64> {
    (from..to).step_by(10).map(|ms| ms * MS)
}

/// Two instances sharing a store, with an outage over [1 s, 2 s).
const SHARED_DOWN: &str = "instances = 2\nmode = \"shared-store-clock\"\nstore = { outages = [{ at = \"1s\", for = \"1s\" }] }";

#[test]
fn store_backed_libraries_share_one_count_and_fail_as_they_say() {
    // 10 a second, a request every 10 ms for 3 s over two instances: the
    // store passes 10 in [0, 1 s) and 10 in [2 s, 3 s), not each instance 10.
    let count = |inner: &str, text: &str| {
        passed(&mut build(inner, text).unwrap(), every_10ms(0, 3_000)).len()
    };
    let django = "kind = \"django-ratelimit\"\nrate = \"10/s\"\nkey_value = \"k\"";
    let express = "kind = \"express-rate-limit\"\nwindow_ms = 1000\nlimit = 10";
    let flexible = "kind = \"rate-limiter-flexible\"\npoints = 10\nduration = 1";
    for (inner, closed) in [(django, 20), (express, 20), (flexible, 20)] {
        assert_eq!(
            count(inner, "instances = 2"),
            3 * 20,
            "{inner}: each instance its own"
        );
        assert_eq!(
            count(inner, SHARED_DOWN),
            closed,
            "{inner}: refused while down"
        );
    }
    // Failing open: the outage's 100 pass.
    assert_eq!(
        count(&format!("{django}\nfail_open = true"), SHARED_DOWN),
        120
    );
    assert_eq!(
        count(
            &format!("{express}\npass_on_store_error = true"),
            SHARED_DOWN
        ),
        120
    );
    // The insurance, 3 per second in each instance from its first consume
    // (1.00 s and 1.01 s): 6 in the outage.
    let insured = format!("{flexible}\ninsurance_points = 3\ninsurance_duration = 1");
    let mut c = build(&insured, SHARED_DOWN).unwrap();
    let during: Vec<u64> = passed(&mut c, every_10ms(0, 3_000))
        .into_iter()
        .filter(|&t| (1_000 * MS..2_000 * MS).contains(&t))
        .collect();
    assert_eq!(
        during,
        [1_000, 1_010, 1_020, 1_030, 1_040, 1_050].map(|ms| ms * MS)
    );
    // The store's 2N over a second, and each instance's insurance's 2·3.
    assert_eq!(c.bound(Nanos::SECOND), 20 + 2 * 6);
    assert_eq!(build(django, SHARED_DOWN).unwrap().bound(Nanos::SECOND), 20);
    let open = build(
        &format!("{express}\npass_on_store_error = true"),
        SHARED_DOWN,
    )
    .unwrap();
    assert_eq!(open.bound(Nanos::SECOND), u64::MAX);
}

#[test]
fn upstash_passes_late_during_an_outage_unless_the_instance_cache_refuses() {
    let upstash = "kind = \"upstash\"\nalgorithm = \"fixed-window\"\ntokens = 10\nwindow = \"1s\"";
    let mut c = build(upstash, SHARED_DOWN).unwrap();
    let decisions: Vec<Decision> = every_10ms(0, 3_000).map(|t| c.decide(Nanos(t))).collect();
    let at = |ms: u64| decisions[(ms / 10) as usize];
    // Both instances' caches hold the refusals of [100 ms, 1 s) until the
    // window's end, 1 s, and refuse through its millisecond.
    assert!(!at(1_000).admitted());
    // Then Redis is silent: 5 s later, a pass.
    assert_eq!(at(1_010), Decision::Delay(Nanos(5 * S)));
    let passed = decisions.iter().filter(|d| d.admitted()).count();
    assert_eq!(passed, 10 + 99 + 10);
    assert_eq!(c.max_delay(), Nanos(5 * S));
    let uncached = build(
        &format!("{upstash}\nephemeral_cache = false\ntimeout = \"250ms\""),
        SHARED_DOWN,
    );
    let mut uncached = uncached.unwrap();
    let decisions: Vec<Decision> = every_10ms(0, 3_000)
        .map(|t| uncached.decide(Nanos(t)))
        .collect();
    assert_eq!(decisions[100], Decision::Delay(Nanos(250 * MS)));
    assert_eq!(decisions.iter().filter(|d| d.admitted()).count(), 120);
}

#[test]
fn each_upstash_instance_keeps_its_own_cache() {
    // N at 999 ms, then a refusal on each instance; at 1.001 s the previous
    // window weighs ⌊0.999 · 10⌋ = 9: one pass, and the refusal after it
    // is cached on its instance until 2 s. At 1.5 s (weight 5) the other
    // instance still asks Redis and passes four; one instance alone passes none.
    let sliding =
        "kind = \"upstash\"\nalgorithm = \"sliding-window\"\ntokens = 10\nwindow = \"1s\"";
    for (instances, at_1500) in [(1, 0), (2, 4)] {
        let text = format!("instances = {instances}\nmode = \"shared-instance-clock\"");
        let mut c = build(sliding, &text).unwrap();
        let mut count = |ms: u64, n: usize| passed(&mut c, std::iter::repeat_n(ms * MS, n)).len();
        assert_eq!(count(999, 12), 10);
        assert_eq!(count(1_001, 2), 1);
        assert_eq!(count(1_500, 10), at_1500, "{instances} instance(s)");
    }
}

#[test]
fn store_backed_libraries_refuse_what_they_do_not_do() {
    let upstash = "kind = \"upstash\"\nalgorithm = \"fixed-window\"\ntokens = 10\nwindow = \"1s\"";
    let django = "kind = \"django-ratelimit\"\nrate = \"10/s\"";
    let express = "kind = \"express-rate-limit\"";
    for (inner, text, says) in [
        (
            upstash,
            "instances = 2\nmode = \"shared-instance-clock\"\noffsets = [\"0ms\", \"5ms\"]",
            "one clock",
        ),
        (
            django,
            "instances = 2\nmode = \"shared-instance-clock\"\nsteps = [{ at = \"1s\", by = \"+1s\", on = 1 }]",
            "one clock",
        ),
        (
            express,
            "instances = 2\nmode = \"shared-store-clock\"\nstore = { on_error = \"deny\" }",
            "pass_on_store_error",
        ),
        (
            django,
            "instances = 2\nmode = \"shared-store-clock\"\nstore = { on_error = \"allow\", failover = [{ at = \"1s\", lost = \"1ms\" }] }",
            "as an outage",
        ),
        (
            express,
            "instances = 2\nmode = \"shared-store-clock\"\ndivide = true",
            "drop divide",
        ),
        (
            &format!("{upstash}\ntimeout = \"0s\""),
            SHARED_DOWN,
            "timeout = 0",
        ),
    ] {
        let error = build(inner, text).unwrap_err().to_string();
        assert!(error.contains(says), "{inner} / {text}: {error}");
    }
    // redis-cell has no failure default of its own: the call throws.
    let cell = "kind = \"redis-cell\"\nmax_burst = 9\ncount_per_period = 10\nperiod = 1";
    let error = build(cell, SHARED_DOWN).unwrap_err().to_string();
    assert!(error.contains("application's own code"), "{error}");
    // Shared, three instances take what one does; local, three times that.
    let cell_in = |text: &str| passed(&mut build(cell, text).unwrap(), every_10ms(0, 3_000)).len();
    let shared = cell_in("instances = 3\nmode = \"shared-store-clock\"");
    assert_eq!(
        shared,
        cell_in("instances = 1\nmode = \"shared-store-clock\"")
    );
    assert_eq!(cell_in("instances = 3"), 3 * shared);
    // Skewed instances are fine where the store's clock decides.
    let skewed = "instances = 2\nmode = \"shared-instance-clock\"\noffsets = [\"0ms\", \"5ms\"]";
    assert!(build(express, skewed).is_ok());
    // And a local cluster still has no store to fail.
    let local = "instances = 2\nstore = { outages = [{ at = \"1s\", for = \"1s\" }] }";
    assert!(
        build(express, local)
            .unwrap_err()
            .to_string()
            .contains("there is none")
    );
}

#[test]
fn a_store_clock_library_expires_on_the_store_clock() {
    // express-rate-limit's window opens at 0 on the store's clock and ends
    // at its 1 s; stepped forward by 500 ms at 300 ms, the store reads 1 s
    // at 500 ms true time, and the next window opens then.
    let express = "kind = \"express-rate-limit\"\nwindow_ms = 1000\nlimit = 10";
    let text = "instances = 2\nmode = \"shared-instance-clock\"\nsteps = [{ at = \"300ms\", by = \"+500ms\", on = \"store\" }]";
    let mut c = build(express, text).unwrap();
    let got = passed(&mut c, every_10ms(0, 1_000));
    let expected: Vec<u64> = every_10ms(0, 100).chain(every_10ms(500, 600)).collect();
    assert_eq!(got, expected);
}

#[test]
fn each_instance_s_upstash_cache_is_counted_in_memory() {
    let upstash = "kind = \"upstash\"\nalgorithm = \"fixed-window\"\ntokens = 10\nwindow = \"1s\"\nper = \"key\"";
    let memory = |k: u64| {
        let text = format!("instances = {k}\nmode = \"shared-instance-clock\"");
        build(upstash, &text)
            .unwrap()
            .memory_at_most(100_000, 1_000_000, false)
    };
    // Ten caches of 100,000 keys each: at least 10 × 100,000 × 24 bytes more.
    assert!(
        memory(10) >= memory(1) + 9 * 100_000 * 24,
        "{} vs {}",
        memory(10),
        memory(1)
    );
}

/// Instances each with their own nginx zone per key leave a request without
/// a key unlimited, as one nginx does: three of them, nine requests of the
/// absent key in one millisecond, all admitted; a key that is there, one an
/// instance (burst 0).
#[test]
fn local_instances_leave_requests_without_a_key_unlimited() {
    let nginx = "kind = \"nginx-limit-req\"\nrate = \"1r/s\"\nper = \"key\"";
    let mut c = build(nginx, "instances = 3").unwrap();
    let (absent, client) = (
        crate::traffic::Key::named(b"-"),
        crate::traffic::Key::named(b"a"),
    );
    c.treat_empty_keys(&crate::traffic::EmptyKeys {
        absent: vec![absent.client],
        blank: Vec::new(),
    });
    let passed = |c: &mut Cluster, key| {
        (0..9)
            .filter(|&i| c.decide_keyed::<false>(Nanos(i * 1000), key).admitted())
            .count()
    };
    assert_eq!(passed(&mut c, absent), 9);
    assert_eq!(passed(&mut c, client), 3);
}
