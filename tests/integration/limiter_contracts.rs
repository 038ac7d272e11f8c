//! Every limiter's contract on arbitrary traffic: it never admits more than its
//! stated bound in any interval, and a constructed adversarial trace reaches
//! that bound. The streaming metric is checked against brute force.

use burstsim::limiter::{Context, Decision, KINDS, Limiter, LimiterConfig, RateLimiter, example};
use burstsim::metrics::rolling::{RollingCounts, worst_by_brute_force};
use burstsim::time::Nanos;
use burstsim::traffic::Key;
use proptest::prelude::*;

use super::common;

fn limiter(text: &str) -> Limiter {
    let table: toml::Table = toml::from_str(text).expect("test configs are valid TOML");
    let context = Context {
        backend_capacity_per_sec: Some(150),
    };
    LimiterConfig::from_table(table)
        .and_then(|c| c.build(context))
        .expect("test configs build")
}

fn worst(admitted: &[u64], interval: u64) -> u64 {
    let mut counts = RollingCounts::new(&[Nanos(interval)]);
    admitted.iter().for_each(|&t| counts.push(Nanos(t)));
    counts.worst()[0].count
}

/// Sorted arrival times with clusters, exact window multiples and long gaps,
/// for windows of about 1,000 ns.
fn arrivals() -> impl Strategy<Value = Vec<u64>> {
    let gap = prop_oneof![
        4 => Just(0u64),
        4 => 1..50u64,
        2 => 50..1_500u64,
        1 => Just(1_000u64),
        1 => Just(999u64),
        1 => 1_500..5_000u64,
    ];
    prop::collection::vec(gap, 0..400).prop_map(|gaps| {
        gaps.iter()
            .scan(0u64, |t, g| {
                *t += g;
                Some(*t)
            })
            .collect()
    })
}

/// A configuration of any kind in the crate's list, from its own
/// [`burstsim::limiter::Kind::example`]: a kind added to the list is checked
/// here without touching this file.
fn configs() -> impl Strategy<Value = String> {
    (0..KINDS.len(), any::<u64>()).prop_map(|(kind, choice)| example(kind, choice))
}

/// The kinds whose `Retry-After` is exact: a retry at that instant, alone,
/// is admitted, and one a nanosecond earlier is not; or, where the real
/// header is coarser (whole seconds from the response), a retry at the hint
/// passes and one a granule and a nanosecond earlier does not. (A chain's
/// hint is its rejecting layer's, which other layers may still refuse.)
/// Kong is left out too: its `Retry-After` is what Kong says, which can be
/// too early (a 30-day month; with the redis policy, a period filled by the
/// rejected requests themselves after the one the header names), and is
/// checked on its own below. Traefik is left out: it serves a retry that
/// comes within `maxDelay` of its token late rather than refusing it, so its
/// `Retry-After` (the delay rounded up to seconds) is never the earliest;
/// its module checks the header. slowapi is left out: its `Retry-After`,
/// `int(1 + reset − now)` in floats, comes out a second early when the
/// float sum falls just under a whole number (two requests at 1302 ns under
/// "1/3 second": 3, where 3 s and 1302 ns is still refused), as the real
/// header does; it is checked on its own below.
fn exact_hints() -> impl Strategy<Value = String> {
    configs().prop_filter(
        "not a chain, Kong, Traefik, redis-cell or slowapi",
        |config| {
            !config.starts_with("kind = \"chain\"")
                && !config.starts_with("kind = \"kong\"")
                && !config.starts_with("kind = \"traefik\"")
                && !config.starts_with("kind = \"redis-cell\"")
                && !config.starts_with("kind = \"slowapi\"")
        },
    )
}

/// slowapi's configurations.
fn slowapi_configs() -> impl Strategy<Value = String> {
    configs().prop_filter("slowapi", |config| config.starts_with("kind = \"slowapi\""))
}

/// redis-cell's configurations.
fn redis_cell_configs() -> impl Strategy<Value = String> {
    configs().prop_filter("redis-cell", |config| {
        config.starts_with("kind = \"redis-cell\"")
    })
}

/// Kong's configurations.
fn kong_configs() -> impl Strategy<Value = String> {
    configs().prop_filter("Kong", |config| config.starts_with("kind = \"kong\""))
}

const INTERVALS: [u64; 6] = [1, 250, 999, 1_000, 1_001, 2_500];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn every_kind_never_exceeds_its_bound(config in configs(), times in arrivals()) {
        let mut limiter = limiter(&config);
        let passed = common::released(&mut limiter, &times);
        for interval in INTERVALS {
            prop_assert!(worst(&passed, interval) <= limiter.bound(Nanos(interval)), "{config} over {interval} ns");
        }
    }

    #[test]
    fn a_retry_when_told_is_the_first_that_can_pass(config in exact_hints(), times in arrivals()) {
        let mut limiter = limiter(&config);
        for &t in &times {
            let Decision::Reject(hint) = limiter.decide(Nanos(t)) else { continue };
            if let (Some(retry), Some(reset)) = (hint.retry_at, hint.reset_at) {
                prop_assert!(retry > Nanos(t) && reset >= retry, "{config} at {t}: {hint:?}");
            }
            let Some(retry) = hint.retry_at else { continue };
            let granule = limiter.hint_granularity().get();
            let mut early = limiter.clone();
            let before = retry.get().saturating_sub(granule + 1).max(t);
            prop_assert!(!early.decide(Nanos(before)).admitted(), "{config} at {t}: {hint:?} is not the earliest (to {granule} ns)");
            let mut on_time = limiter.clone();
            prop_assert!(on_time.decide(retry).admitted(), "{config} at {t}: a retry at {hint:?} is rejected");
        }
    }

    #[test]
    fn traefik_never_exceeds_its_bound_when_sources_are_forgotten(
        average in 1..200u64,
        per_minute in any::<bool>(),
        burst in 1..200u64,
        offset in 0..1_000_000_000u64,
        bursts in proptest::collection::vec((1..200u64, 0..3_000_000_000u64), 1..40),
    ) {
        // Bursts separated by idle gaps around the TTL map's forgetting
        // (a second or two, at any point of the Unix second).
        let period = if per_minute { "1m" } else { "1s" };
        let mut limiter = limiter(&format!(
            "kind = \"traefik\"\naverage = {average}\nperiod = \"{period}\"\nburst = {burst}\nclock_offset = \"{offset}ns\""
        ));
        let mut times = Vec::new();
        let mut t = 0u64;
        for (count, gap) in bursts {
            times.extend(std::iter::repeat_n(t, count as usize));
            t += 900_000_000 + gap;
        }
        let passed = common::released(&mut limiter, &times);
        for interval in [1_000_000_000, 2_000_000_001, 10_000_000_000, 60_000_000_000] {
            prop_assert!(
                worst(&passed, interval) <= limiter.bound(Nanos(interval)),
                "{average} per {period}, burst {burst}, offset {offset}: {} over {interval} ns > {}",
                worst(&passed, interval),
                limiter.bound(Nanos(interval))
            );
        }
    }

    #[test]
    fn redis_cell_hints_whole_seconds_truncated(config in redis_cell_configs(), times in arrivals()) {
        // `retry_after` is the wait in whole seconds, rounded down: no pass
        // before the instant it names, and one within a second of it.
        let mut limiter = limiter(&config);
        for &t in &times {
            let Decision::Reject(hint) = limiter.decide(Nanos(t)) else { continue };
            let Some(retry) = hint.retry_at.map(Nanos::get) else { continue };
            prop_assert!(retry >= t && (retry - t) % 1_000_000_000 == 0, "{config} at {t}: {hint:?}");
            if retry > t {
                prop_assert!(!limiter.clone().decide(Nanos(retry - 1)).admitted(), "{config} at {t}: {hint:?} passes early");
            }
            prop_assert!(limiter.clone().decide(Nanos(retry + 999_999_999)).admitted(), "{config} at {t}: {hint:?} a second late still refused");
        }
    }

    /// slowapi's whole-second `Retry-After` is never later than a granule
    /// after the earliest retry that passes, and at most one second early
    /// (float rounding): a retry a second after it always passes.
    #[test]
    fn slowapi_hints_whole_seconds_at_most_one_early(config in slowapi_configs(), times in arrivals()) {
        let mut limiter = limiter(&config);
        for &t in &times {
            let Decision::Reject(hint) = limiter.decide(Nanos(t)) else { continue };
            let Some(retry) = hint.retry_at else { continue };
            let granule = limiter.hint_granularity().get();
            prop_assert!(retry > Nanos(t) && granule == 1_000_000_000, "{config} at {t}: {hint:?}");
            let mut early = limiter.clone();
            let before = retry.get().saturating_sub(granule + 1).max(t);
            prop_assert!(!early.decide(Nanos(before)).admitted(), "{config} at {t}: {hint:?} is not the earliest (to {granule} ns)");
            let mut late = limiter.clone();
            prop_assert!(late.decide(Nanos(retry.get() + granule)).admitted(), "{config} at {t}: a retry a second after {hint:?} is rejected");
        }
    }

    #[test]
    fn kong_hints_whole_seconds_from_the_response(config in kong_configs(), times in arrivals()) {
        let mut limiter = limiter(&config);
        for &t in &times {
            let Decision::Reject(hint) = limiter.decide(Nanos(t)) else { continue };
            let retry = hint.retry_at.expect("Kong always sends Retry-After").get();
            prop_assert!(retry > t && (retry - t) % 1_000_000_000 == 0, "{config} at {t}: {hint:?}");
        }
    }

    #[test]
    fn the_streaming_metric_equals_brute_force(times in arrivals(), interval in 1..3_000u64) {
        let mut counts = RollingCounts::new(&[Nanos(interval)]);
        times.iter().for_each(|&t| counts.push(Nanos(t)));
        let streamed = counts.worst()[0];
        prop_assert_eq!((streamed.count, streamed.start.get()), worst_by_brute_force(&times, interval));
    }

    #[test]
    fn the_sliding_log_admits_exactly_when_fewer_than_n_are_in_the_trailing_window(
        times in arrivals(), n in 1..20usize,
    ) {
        let mut limiter = limiter(&format!("kind = \"sliding-log\"\nwindow = \"1000ns\"\nthreshold = {n}"));
        let mut passed: Vec<u64> = Vec::new();
        for &t in &times {
            let in_window = passed.iter().filter(|&&a| t - a < 1_000).count();
            prop_assert_eq!(limiter.decide(Nanos(t)).admitted(), in_window < n);
            if in_window < n {
                passed.push(t);
            }
        }
    }
}

/// Each constructed trace must admit exactly the limiter's bound over W.
fn reaches(config: &str, trace: &[u64], interval: u64) {
    let mut limiter = limiter(config);
    let passed = common::released(&mut limiter, trace);
    assert_eq!(
        worst(&passed, interval),
        limiter.bound(Nanos(interval)),
        "{config}"
    );
}

const S: u64 = 1_000_000_000;

fn burst(at: u64, count: usize) -> Vec<u64> {
    vec![at; count]
}

#[test]
fn a_fixed_window_reaches_2n_with_a_burst_on_each_side_of_the_edge() {
    let trace = [burst(S - 1, 100), burst(S, 100)].concat();
    reaches(
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100",
        &trace,
        S,
    );
}

#[test]
fn a_first_request_window_reaches_2n_minus_1_one_window_after_its_first_request() {
    // The request that opens a window is W before the next window opens, so
    // at most N − 1 of the first window share an interval of W with the next.
    let start = 300_000_000;
    let trace = [vec![start], burst(start + S - 1, 99), burst(start + S, 100)].concat();
    reaches(
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100\nalign = \"first-request\"",
        &trace,
        S,
    );
}

#[test]
fn smaller_windows_reach_k_plus_one_times_n_over_k() {
    // Ten windows of 100 ms with 10 each: fill all ten, plus the next one.
    // The last nanosecond of window 0, then the first of windows 1 to 10.
    let first_of_each = (1..=10).flat_map(|i| burst(S / 10 * i, 10));
    let trace: Vec<u64> = burst(S / 10 - 1, 10)
        .into_iter()
        .chain(first_of_each)
        .collect();
    reaches(
        "kind = \"smaller-window\"\nwindow = \"1s\"\nthreshold = 100\nsplits = 10",
        &trace,
        S,
    );
}

#[test]
fn the_70_percent_buffer_still_reaches_twice_its_threshold() {
    let trace = [burst(S - 1, 105), burst(S, 105)].concat();
    reaches(
        "kind = \"buffered\"\nwindow = \"1s\"\nratio = 0.7",
        &trace,
        S,
    );
}

#[test]
fn the_sliding_log_reaches_exactly_n() {
    let trace = [burst(S - 1, 100), burst(S, 100)].concat();
    reaches(
        "kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 100",
        &trace,
        S,
    );
}

#[test]
fn the_sliding_counter_reaches_2n_with_traffic_paced_against_the_weighting() {
    // N at the last nanosecond of window 0, then the j-th request of window 1
    // at the first instant the weighting allows it: e = floor(j·W/N) + 1.
    let n = 100;
    let paced = (0..n).map(|j| S + j * S / n + 1);
    let trace: Vec<u64> = burst(S - 1, n as usize).into_iter().chain(paced).collect();
    reaches(
        "kind = \"sliding-counter\"\nwindow = \"1s\"\nthreshold = 100",
        &trace,
        S,
    );
}

#[test]
fn a_token_bucket_reaches_burst_plus_rate_with_a_full_bucket_then_every_token() {
    // Full at 0: take the burst, then every token as it completes.
    let trace: Vec<u64> = burst(0, 100)
        .into_iter()
        .chain((1..=99).map(|i| i * S / 100))
        .collect();
    reaches(
        "kind = \"token-bucket\"\nrate = 100\nburst = 100",
        &trace,
        S,
    );
}

#[test]
fn a_chain_reaches_its_tightest_layer() {
    // The bucket's burst at the window's last nanosecond; its tokens fall in the next window.
    let tokens = (1..=99).map(|i| S - 1 + i * S / 100);
    let trace: Vec<u64> = burst(S - 1, 20).into_iter().chain(tokens).collect();
    let config = "kind = \"chain\"\nlayers = [{ kind = \"fixed-window\", window = \"1s\", threshold = 100 }, { kind = \"token-bucket\", rate = 100, burst = 20 }]";
    reaches(config, &trace, S);
}

/// Arrivals on nginx's millisecond scale: bursts in one millisecond, gaps of
/// a few milliseconds, and pauses.
fn millisecond_arrivals() -> impl Strategy<Value = Vec<u64>> {
    let ms = 1_000_000u64;
    let gap = prop_oneof![
        4 => Just(0u64),
        3 => (1..5_000u64).prop_map(|ns| ns * 200),
        3 => (1..50u64).prop_map(move |k| k * ms),
        1 => (1..3_000u64).prop_map(move |k| k * ms),
    ];
    prop::collection::vec(gap, 0..400).prop_map(|gaps| {
        gaps.iter()
            .scan(0u64, |t, g| {
                *t += g;
                Some(*t)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn nginx_never_releases_more_than_its_bound(
        rate in 1..400u64, per_minute in prop::bool::ANY, burst in 0..40u64, mode in 0..3usize, delay in 0..40u64,
        times in millisecond_arrivals(),
    ) {
        let unit = if per_minute { "r/m" } else { "r/s" };
        let mode = ["nodelay = true".to_string(), String::new(), format!("delay = {delay}")][mode].clone();
        let config = format!("kind = \"nginx-limit-req\"\nrate = \"{rate}{unit}\"\nburst = {burst}\n{mode}");
        let mut limiter = limiter(&config);
        let released = common::released(&mut limiter, &times);
        for interval in [1_000_000, 100_000_000, 999_999_999, 1_000_000_000, 1_001_000_000, 2_500_000_000] {
            prop_assert!(worst(&released, interval) <= limiter.bound(Nanos(interval)), "{config} over {interval} ns");
        }
    }
}

#[test]
fn nginx_with_nodelay_reaches_burst_plus_one_plus_the_rate() {
    // burst + 1 at once, then one each time 1000 thousandths have drained.
    let ms = 1_000_000;
    let trace: Vec<u64> = burst(0, 30)
        .into_iter()
        .chain((1..=10).map(|i| i * 100 * ms))
        .collect();
    let config = "kind = \"nginx-limit-req\"\nrate = \"10r/s\"\nburst = 20\nnodelay = true";
    let mut limiter = limiter(config);
    let released = common::released(&mut limiter, &trace);
    // 21 at 0 and one every 100 ms: 21 + 9 within [0, 1 s), 21 + 10 within the bound's 1.001 s.
    assert_eq!(worst(&released, S), 30);
    assert!(limiter.bound(Nanos(S)) >= 30);
}

/// A fixed window of 1000 ns run as a cluster: local or shared, with skewed,
/// drifting and stepped clocks.
fn clusters() -> impl Strategy<Value = String> {
    let offset = (-1_500i64..1_500)
        .prop_map(|ns| format!("\"{}{}ns\"", if ns < 0 { "-" } else { "+" }, ns.abs()));
    (1..4usize, 0..3usize, prop::collection::vec(offset, 3), prop::collection::vec(-900i64..900, 1), 0..2usize, 1..20u64, prop::bool::ANY, 0..3_000u64, -900i64..900)
        .prop_map(|(k, mode, offsets, drift, update, n, divide, step_at, step_by)| {
            let mode = ["local", "shared-instance-clock", "shared-store-clock"][mode];
            let offsets = offsets[..k].join(", ");
            // The store-clock mode is one atomic step on the store; only
            // instance clocks read, then increment.
            let update = if mode == "shared-store-clock" { "atomic" } else { ["atomic", "read-then-increment"][update] };
            let by = format!("\"{}{}ns\"", if step_by < 0 { "-" } else { "+" }, step_by.abs());
            // Batched counters only share a counter keyed by instance clocks.
            let sync = if mode == "shared-instance-clock" && divide { "sync_interval = \"700ns\"\n" } else { "" };
            format!(
                "duration = \"20us\"\n[cluster]\n{sync}instances = {k}\nmode = \"{mode}\"\ndivide = {divide}\noffsets = [{offsets}]\ndrift_ppm = [{}]\nsteps = [{{ at = \"{step_at}ns\", by = {by}, on = \"store\" }}, {{ at = \"{step_at}ns\", by = {by}, on = 0 }}]\nstore = {{ rtt = \"300ns\", update = \"{update}\" }}\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1000ns\"\nthreshold = {n}\n",
                drift[0] * 1_000
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn clusters_never_exceed_their_bound(text in clusters(), times in arrivals()) {
        let times: Vec<u64> = times.into_iter().filter(|&t| t < 20_000).collect();
        let scenario = burstsim::scenario::parse(&text, std::path::Path::new("c.toml")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut limiter = scenario.limiters[0].config.build(Context::default()).unwrap();
        let passed = common::released(&mut limiter, &times);
        for interval in INTERVALS {
            prop_assert!(worst(&passed, interval) <= limiter.bound(Nanos(interval)), "{text} over {interval} ns");
        }
    }
}

/// Sorted arrival times, each with one of a few keys.
fn keyed_arrivals() -> impl Strategy<Value = Vec<(u64, u64)>> {
    (arrivals(), prop::collection::vec(0..5u64, 400))
        .prop_map(|(times, keys)| times.into_iter().zip(keys).collect())
}

/// `config` with `per = "key"` and, maybe, `evict_after`.
fn per_key(config: &str, evict_after: Option<u64>) -> Limiter {
    let evict = evict_after.map_or(String::new(), |e| format!("\nevict_after = \"{e}ns\""));
    limiter(&format!("{config}\nper = \"key\"{evict}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn a_per_key_limiter_decides_as_one_limiter_per_key_run_apart(
        config in configs(),
        times in keyed_arrivals(),
    ) {
        let mut together = per_key(&config, None);
        let mut apart: std::collections::HashMap<u64, Limiter> = std::collections::HashMap::new();
        for &(t, key) in &times {
            let theirs = together.decide_keyed::<true>(Nanos(t), Key::client(key));
            let own = apart.entry(key).or_insert_with(|| limiter(&config)).decide(Nanos(t));
            prop_assert_eq!(theirs, own, "{} at {} for key {}", config, t, key);
        }
    }

    #[test]
    fn a_per_key_limiter_never_exceeds_keys_times_its_bound(
        config in configs(),
        times in keyed_arrivals(),
        evict in prop::option::of(1..3_000u64),
    ) {
        let mut limiter = per_key(&config, evict);
        let mut released = Vec::new();
        for &(t, key) in &times {
            let decision = limiter.decide_keyed::<false>(Nanos(t), Key::client(key));
            if decision.admitted() {
                released.push(t + decision.delay().get());
            }
        }
        released.sort_unstable();
        for interval in INTERVALS {
            prop_assert!(worst(&released, interval) <= limiter.bound(Nanos(interval)), "{config} evict {evict:?} over {interval} ns");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Delaying limiters per key, forgotten sooner than their delays last:
    /// a key is busy until its delayed requests are released, and the bound
    /// holds over what is released.
    #[test]
    fn evicted_delaying_keys_stay_within_the_bound(
        rate in prop::sample::select(vec![10u64, 100, 1_000]),
        burst in 1..40u64,
        delay in prop::option::of(0..10u64),
        evict_ms in 1..300u64,
        times in prop::collection::vec((0..3_000u64, 0..3u64, 1..6usize), 1..60),
    ) {
        let mode = delay.map_or(String::new(), |d| format!("\ndelay = {}", d.min(burst - 1)));
        let config = format!("kind = \"nginx-limit-req\"\nrate = \"{rate}r/s\"\nburst = {burst}{mode}");
        let mut limiter = per_key(&config, Some(evict_ms * 1_000_000));
        let mut arrivals: Vec<(u64, u64)> = times
            .into_iter()
            .flat_map(|(ms, key, count)| std::iter::repeat_n((ms * 1_000_000, key), count))
            .collect();
        arrivals.sort_unstable();
        let mut released = Vec::new();
        for &(t, key) in &arrivals {
            let decision = limiter.decide_keyed::<false>(Nanos(t), Key::client(key));
            if decision.admitted() {
                released.push(t + decision.delay().get());
            }
        }
        released.sort_unstable();
        for interval in [1, 1_000_000, 100_000_000, 1_000_000_000] {
            let (worst, bound) = (worst(&released, interval), limiter.bound(Nanos(interval)));
            prop_assert!(worst <= bound, "{config} evict {evict_ms} ms over {interval} ns: {worst} > {bound}");
        }
    }
}

#[test]
fn an_evicted_key_comes_back_fresh() {
    let config =
        "kind = \"fixed-window\"\nwindow = \"1000ns\"\nthreshold = 2\nalign = \"first-request\"";
    let mut kept = per_key(config, None);
    let mut evicted = per_key(config, Some(100));
    let decide =
        |l: &mut Limiter, t: u64| l.decide_keyed::<false>(Nanos(t), Key::client(7)).admitted();
    for l in [&mut kept, &mut evicted] {
        assert!(decide(l, 0) && decide(l, 0) && !decide(l, 0));
    }
    // Idle for 100 ns: the evicting store has forgotten the key's window.
    assert!(
        !decide(&mut kept, 100),
        "the window [0, 1000) is still full"
    );
    assert!(decide(&mut evicted, 100), "a fresh window opens at 100");
    let Limiter::PerKey(per) = &evicted else {
        unreachable!("built per key")
    };
    assert_eq!((per.keys(), per.states_created()), (1, 2));
}

/// nginx without `nodelay` per key, forgotten after 1 s idle: a key holding
/// delayed requests is busy until the last is released, so a burst every
/// 1.5 s cannot stack fresh limiters' releases on one another.
#[test]
fn a_key_holding_delayed_requests_is_not_forgotten() {
    let config = "kind = \"nginx-limit-req\"\nrate = \"10r/s\"\nburst = 100";
    let mut limiter = per_key(config, Some(1_000_000_000));
    let mut released = Vec::new();
    for burst in 0..8u64 {
        let at = burst * 1_500_000_000;
        for _ in 0..101 {
            let decision = limiter.decide_keyed::<false>(Nanos(at), Key::client(3));
            if decision.admitted() {
                released.push(at + decision.delay().get());
            }
        }
    }
    released.sort_unstable();
    // One limiter throughout: released at 10 a second (a forgetting one
    // stacked seven limiters' releases: 70).
    assert_eq!(worst(&released, 1_000_000_000), 10);
    assert_eq!(worst(&released, 1), 1);
    for interval in [1, 1_000_000, 1_000_000_000, 3_000_000_000] {
        assert!(worst(&released, interval) <= limiter.bound(Nanos(interval)));
    }
    let Limiter::PerKey(per) = &limiter else {
        unreachable!("built per key")
    };
    assert_eq!(
        per.states_created(),
        1,
        "never idle for 1 s while releasing"
    );
}

/// The most `config` per key admits in one interval from `trace` (time, key),
/// against its bound for the keys it saw.
fn reaches_per_key(config: &str, trace: &[(u64, u64)], interval: u64) {
    let mut limiter = per_key(config, None);
    let mut passed: Vec<u64> = trace
        .iter()
        .filter(|&&(t, k)| {
            limiter
                .decide_keyed::<false>(Nanos(t), Key::client(k))
                .admitted()
        })
        .map(|&(t, _)| t)
        .collect();
    passed.sort_unstable();
    assert_eq!(
        worst(&passed, interval),
        limiter.bound(Nanos(interval)),
        "{config}"
    );
}

#[test]
fn per_key_epoch_windows_reach_k_times_2n_when_every_key_bursts_at_the_edge() {
    // 50 keys, each 10 at the last nanosecond of a window and 10 at the first of the next.
    let trace: Vec<(u64, u64)> = [S - 1, S]
        .iter()
        .flat_map(|&t| (0..50).flat_map(move |k| std::iter::repeat_n((t, k), 10)))
        .collect();
    reaches_per_key(
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10",
        &trace,
        S,
    );
}

#[test]
fn per_key_first_request_windows_reach_k_times_2n_minus_1_when_keys_align_their_first_requests() {
    // Each key opens its window at 0 (one request), fills it at S - 1, and
    // opens the next at S: (2N − 1) per key within one second.
    let mut trace: Vec<(u64, u64)> = (0..50).map(|k| (0, k)).collect();
    for t in [S - 1, S] {
        trace.extend((0..50).flat_map(|k| std::iter::repeat_n((t, k), 10)));
    }
    reaches_per_key(
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\nalign = \"first-request\"",
        &trace,
        S,
    );
}

/// The float edge that takes slowapi's contract out of the exact hints
/// (found by `a_retry_when_told_is_the_first_that_can_pass` in CI): two
/// requests at 1302 ns under "1/3 second", moving window, headers on. The
/// second is told 3 s, `int(1 + (1302e-9 + 3) − 1302e-9)` being
/// `int(3.9999999999999996)`; at 3 s and 1302 ns the first still counts.
#[test]
fn slowapi_tells_a_second_early_where_its_float_sum_falls_short() {
    let mut limiter = limiter(
        "kind = \"slowapi\"\nlimit = \"1/3 second\"\nstrategy = \"moving-window\"\nheaders_enabled = true",
    );
    assert!(limiter.decide(Nanos(1302)).admitted());
    let Decision::Reject(hint) = limiter.decide(Nanos(1302)) else {
        panic!("the second request in the window is refused")
    };
    assert_eq!(hint.retry_at, Some(Nanos(3_000_001_302)));
    assert!(!limiter.clone().decide(Nanos(3_000_001_302)).admitted());
    assert!(limiter.decide(Nanos(4_000_001_302)).admitted());
}
