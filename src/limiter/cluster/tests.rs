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
