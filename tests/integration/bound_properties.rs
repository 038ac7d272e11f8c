//! Bounds under the traffic that broke them before: requests piled on window
//! edges (a nanosecond either side, many at the same instant), windows of
//! 1 ns, thresholds of 1, large timestamps — for every kind, chains of two
//! (with delays and take-backs) and every cluster mode with stepped clocks.

use burstsim::limiter::{Context, Limiter, LimiterConfig, RateLimiter};
use burstsim::time::Nanos;
use proptest::prelude::*;

use super::common;

fn build(text: &str) -> Limiter {
    let table: toml::Table = toml::from_str(text).expect("valid TOML");
    LimiterConfig::from_table(table)
        .and_then(|c| {
            c.build(Context {
                backend_capacity_per_sec: Some(150),
            })
        })
        .unwrap_or_else(|err| panic!("{text}: {err}"))
}

/// The most times in any [s, s + len), by brute force.
fn worst(times: &[u64], len: u64) -> u64 {
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|&&t| t - times[i] < len)
                .count() as u64
        })
        .max()
        .unwrap_or(0)
}

/// Arrivals piled on the edges of windows of `edge` ns: at each of a few
/// edges, requests at −1, 0 and +1 ns, several at the same instant, from a
/// base that may be far along the time line.
fn edge_arrivals() -> impl Strategy<Value = (u64, Vec<u64>)> {
    let edge = prop_oneof![
        Just(1u64),
        Just(2),
        Just(1_000),
        Just(997),
        Just(1_000_000),
        Just(250_000_000)
    ];
    let base = prop_oneof![Just(0u64), Just(1u64 << 40), Just(1u64 << 62)];
    let pile = (0..12u64, 0..3u64, 1..6usize);
    (edge, base, prop::collection::vec(pile, 1..40)).prop_map(|(edge, base, piles)| {
        let mut times: Vec<u64> = piles
            .into_iter()
            .flat_map(|(k, side, count)| {
                let at = (base + k * edge + side).saturating_sub(1);
                std::iter::repeat_n(at, count)
            })
            .collect();
        times.sort_unstable();
        (edge, times)
    })
}

/// One layer of every kind, over windows of `edge` ns, thresholds mostly 1.
fn layer(edge: u64) -> impl Strategy<Value = String> {
    let n = prop_oneof![3 => Just(1u64), 1 => 2..5u64];
    let align = prop_oneof![Just("epoch"), Just("first-request")];
    (n, align, 0..10u32).prop_map(move |(n, align, kind)| match kind {
        0 => format!("{{ kind = \"fixed-window\", window = \"{edge}ns\", threshold = {n}, align = \"{align}\" }}"),
        1 => format!("{{ kind = \"sliding-log\", window = \"{edge}ns\", threshold = {n} }}"),
        2 => format!("{{ kind = \"sliding-counter\", window = \"{edge}ns\", threshold = {n} }}"),
        3 => format!("{{ kind = \"smaller-window\", window = \"{}ns\", threshold = {}, splits = 2, align = \"{align}\" }}", edge * 2, n * 2),
        4 => format!("{{ kind = \"buffered\", window = \"{edge}ns\", capacity = {}, ratio = 0.5 }}", n * 2),
        // One token per window.
        5 => format!("{{ kind = \"token-bucket\", rate = {}, burst = {n} }}", 1_000_000_000 / edge),
        6 => format!("{{ kind = \"gcra\", quota = \"with_period({edge}ns).allow_burst({n})\" }}"),
        7 => format!("{{ kind = \"sliding-buckets\", window = \"{}ns\", threshold = {n}, buckets = 2 }}", edge * 2),
        8 => format!("{{ kind = \"envoy-local\", max_tokens = {n}, fill_interval = \"{edge}ns\", instances = 2 }}"),
        _ => format!("{{ kind = \"nginx-limit-req\", rate = \"{}r/s\", burst = {} }}", [4, 100, 5_000, 10_000][n as usize % 4], n * 5),
    })
}

/// nginx as it broke: high rates, real bursts, delayed or not.
fn nginx() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![4u64, 10, 100, 1_000, 5_000, 10_000, 20_000]),
        0..25u64,
        0..3usize,
        0..10u64,
    )
        .prop_map(|(rate, burst, mode, delay)| {
            let mode = [
                "nodelay = true".to_string(),
                String::new(),
                format!("delay = {delay}"),
            ][mode]
                .clone();
            format!("kind = \"nginx-limit-req\"\nrate = \"{rate}r/s\"\nburst = {burst}\n{mode}")
        })
}

/// A single layer, or a chain of two with or without take-backs.
fn limiters(edge: u64) -> impl Strategy<Value = String> {
    let inline = |layer: String| {
        layer
            .trim_start_matches("{ ")
            .trim_end_matches(" }")
            .replace(", ", "\n")
    };
    prop_oneof![
        nginx(),
        layer(edge).prop_map(inline),
        (layer(edge), layer(edge), prop::bool::ANY).prop_map(|(a, b, count)| format!(
            "kind = \"chain\"\ncount_rejected = {count}\nlayers = [{a}, {b}]"
        )),
    ]
}

fn intervals(edge: u64) -> [u64; 9] {
    [
        1,
        2,
        3,
        4,
        edge.saturating_sub(1).max(1),
        edge,
        edge + 1,
        2 * edge + 1,
        3 * edge,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn no_limiter_or_chain_exceeds_its_bound_at_window_edges(
        (edge, times) in edge_arrivals(),
        config in prop_oneof![Just(1u64), Just(2), Just(1_000), Just(997), Just(1_000_000), Just(500_000_000)].prop_flat_map(limiters),
    ) {
        let mut limiter = build(&config);
        let passed = common::released(&mut limiter, &times);
        for interval in intervals(edge).into_iter().chain(intervals(1_000)).chain([1_000_000, 1_000_000_000]) {
            let bound = limiter.bound(Nanos(interval));
            prop_assert!(worst(&passed, interval) <= bound, "{config}\nover {interval} ns: {} > {bound}\n{times:?}", worst(&passed, interval));
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16384))]

    #[test]
    fn no_cluster_mode_exceeds_its_bound_with_stepped_clocks(
        (edge, times) in edge_arrivals(),
        mode in 0..3usize,
        k in 1..4u64,
        n in prop_oneof![3 => Just(1u64), 1 => 2..5u64],
        steps in prop::collection::vec((0..3u64, -3i64..2, 0..3u64, prop::bool::weighted(0.8), prop::bool::weighted(0.8)), 0..6),
        // The store failing: a train of outages (start and length in
        // windows, then how many, each a sixteenth-window multiple long and
        // apart, so several fall in one window; the policy) and a failover
        // (at, lost), in windows.
        outage in prop::option::of((0..30u64, 1..5u64, 1..9u64, 1..4u64, 1..4u64, 1..3usize)),
        failover in prop::option::of((1..38u64, 1..4u64, 0..3u64)),
    ) {
        let mode = ["local", "shared-instance-clock", "shared-store-clock"][mode];
        // Fail-open outages have no bound to check; deny and local fallbacks do.
        let store = if mode == "local" {
            String::new()
        } else {
            let outages = outage.map_or(String::new(), |(at, len, count, short, gap, policy)| {
                // One long outage, or a train of short ones (a flapping store).
                let (len, gap) = if count == 1 { (len * edge, 0) } else { ((short * edge / 16).max(1), (gap * edge / 16).max(1)) };
                let train: Vec<String> = (0..count)
                    .map(|i| at * edge + i * (len + gap))
                    .take_while(|&start| start < 40 * edge)
                    .map(|start| format!("{{ at = \"{start}ns\", for = \"{len}ns\" }}"))
                    .collect();
                format!("outages = [{}], on_error = \"{}\", ", train.join(", "), ["allow", "deny", "local"][policy])
            });
            let failover = failover.map_or(String::new(), |(at, lost, side)| {
                format!("failover = [{{ at = \"{}ns\", lost = \"{}ns\" }}]", (at * edge + side).saturating_sub(1), lost * edge / 2)
            });
            format!("store = {{ {outages}{failover} }}\n")
        };
        let steps: Vec<String> = steps
            .iter()
            .map(|(at, by, side, store, small)| {
                // Steps of a few nanoseconds right at the piles of requests,
                // against long windows; or of whole windows.
                let (by, at) = if *small { (*by, (at * edge + side).saturating_sub(1)) } else { (by * edge as i64, at * edge) };
                format!(
                    "{{ at = \"{}ns\", by = \"{}{}ns\", on = {} }}",
                    at,
                    if by < 0 { "-" } else { "+" },
                    by.abs(),
                    if *store { "\"store\"".to_string() } else { "0".to_string() }
                )
            })
            .collect();
        // And requests piled at each outage's start, where a fallback that
        // forgot between outages would admit afresh.
        let mut times: Vec<u64> = times.into_iter().filter(|&t| t < 40 * edge).collect();
        if let Some((at, len, count, short, gap, _)) = outage.filter(|_| mode != "local") {
            let (len, gap) = if count == 1 { (len * edge, 0) } else { ((short * edge / 16).max(1), (gap * edge / 16).max(1)) };
            times.extend((0..count).flat_map(|i| std::iter::repeat_n(at * edge + i * (len + gap), 4)));
            times.sort_unstable();
        }
        let text = format!(
            "duration = \"{}ns\"\n[metrics]\nbucket = \"{}ns\"\nrolling = \"{edge}ns\"\nprofile = [\"{edge}ns\"]\n[cluster]\ninstances = {k}\nmode = \"{mode}\"\n{store}steps = [{}]\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"{edge}ns\"\nthreshold = {n}\n",
            40 * edge,
            40 * edge,
            steps.join(", ")
        );
        let scenario = burstsim::scenario::parse(&text, std::path::Path::new("c.toml")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut limiter = scenario.limiters[0].config.build(Context::default()).unwrap();
        let passed = common::released(&mut limiter, &times);
        for interval in intervals(edge) {
            let bound = limiter.bound(Nanos(interval));
            prop_assert!(worst(&passed, interval) <= bound, "{text}\nover {interval} ns: {} > {bound}\n{times:?}", worst(&passed, interval));
        }
    }
}

/// Requests piled on 100 ms edges (a nanosecond early, on it, or later),
/// and outages a tenth of a second long or more, apart, each with a pile at
/// its start, all within 6 s: the times in order and the outages as TOML.
fn piled_with_outages(
    piles: Vec<(u64, u64, usize)>,
    outages: Vec<(u64, u64)>,
) -> (Vec<u64>, Vec<String>) {
    const MS: u64 = 1_000_000;
    let mut times: Vec<u64> = piles
        .into_iter()
        .flat_map(|(at, side, n)| std::iter::repeat_n((at * 100 * MS + side).saturating_sub(1), n))
        .collect();
    let mut start = 0;
    let mut spans = Vec::new();
    for (gap, len) in outages {
        let at = start + gap * 100 * MS;
        if at >= 6_000 * MS {
            break;
        }
        spans.push(format!(
            "{{ at = \"{at}ns\", for = \"{}ns\" }}",
            len * 100 * MS
        ));
        times.extend(std::iter::repeat_n(at, 4));
        start = at + len * 100 * MS + 1;
    }
    times.retain(|&t| t < 6_000 * MS);
    times.sort_unstable();
    (times, spans)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Sentinel's token server in a cluster, its outages answered by each
    /// instance's own rule (or by passing everything), on clocks that
    /// disagree and step: requests piled on the server's 100 ms and the
    /// rule's 500 ms bucket edges and at each outage's start.
    #[test]
    fn the_token_server_and_its_fallback_never_exceed_their_bound(
        piles in prop::collection::vec((0..60u64, 0..3u64, 1..6usize), 1..40),
        k in 1..4u64,
        count in 1..6u64,
        behavior in 0..3usize,
        global in prop::bool::ANY,
        outages in prop::collection::vec((0..60u64, 1..15u64), 0..3),
        offsets in prop::collection::vec(-700i64..700, 3),
        steps in prop::collection::vec((0..60u64, -700i64..700, prop::bool::ANY), 0..3),
    ) {
        const MS: u64 = 1_000_000;
        let (times, spans) = piled_with_outages(piles, outages);
        let offsets: Vec<String> = offsets[..k as usize].iter().map(|o| format!("\"{}{}ms\"", if *o < 0 { "-" } else { "+" }, o.abs())).collect();
        let steps: Vec<String> = steps
            .iter()
            .map(|(at, by, store)| format!(
                "{{ at = \"{}ms\", by = \"{}{}ms\", on = {} }}",
                at * 100,
                if *by < 0 { "-" } else { "+" },
                by.abs(),
                if *store { "\"store\"" } else { "0" }
            ))
            .collect();
        let behavior = [
            "control_behavior = \"default\"",
            "control_behavior = \"warm-up\"\nwarm_up_period_sec = 1",
            "control_behavior = \"rate-limiter\"\nmax_queueing_time_ms = 300",
        ][behavior];
        let text = format!(
            "duration = \"6s\"\n[cluster]\ninstances = {k}\noffsets = [{}]\nsteps = [{}]\nstore = {{ outages = [{}] }}\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\nkind = \"sentinel\"\ncount = {count}\ncluster_mode = true\nthreshold_type = \"{}\"\nfallback_to_local_when_fail = {}\n{behavior}\n",
            offsets.join(", "),
            steps.join(", "),
            spans.join(", "),
            if global { "global" } else { "avg-local" },
            spans.is_empty() || count % 2 == 1,
        );
        let scenario = burstsim::scenario::parse(&text, std::path::Path::new("c.toml")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut limiter = scenario.limiters[0].config.build(Context::default()).unwrap();
        let passed = common::released(&mut limiter, &times);
        for interval in [1, 100 * MS, 100 * MS + 1, 500 * MS, 500 * MS + 1, 1_000 * MS, 1_001 * MS, 2_000 * MS] {
            let bound = limiter.bound(Nanos(interval));
            prop_assert!(worst(&passed, interval) <= bound, "{text}\nover {interval} ns: {} > {bound}\n{times:?}", worst(&passed, interval));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The store-backed libraries sharing one store (Upstash with each
    /// instance's cache, django-ratelimit, rate-limiter-flexible with its
    /// insurance, express-rate-limit), their store failing and its clock
    /// stepping: requests piled on the second's edges and at each outage's
    /// start. Failing open is unbounded, so it is drawn only without outages.
    #[test]
    fn store_backed_libraries_and_their_failure_defaults_never_exceed_their_bound(
        piles in prop::collection::vec((0..60u64, 0..3u64, 1..6usize), 1..40),
        k in 1..4u64,
        kind in 0..4usize,
        variant in 0..3usize,
        n in 1..6u64,
        outages in prop::collection::vec((0..60u64, 1..15u64), 0..3),
        offsets in prop::collection::vec(-700i64..700, 3),
        steps in prop::collection::vec((0..60u64, -700i64..700, 0..4usize), 0..3),
        rtt in 0..3u64,
    ) {
        const MS: u64 = 1_000_000;
        let (times, spans) = piled_with_outages(piles, outages);
        let open = spans.is_empty() && variant == 2;
        let (inner, instance_side) = match kind {
            0 => (format!(
                "kind = \"upstash\"\nalgorithm = \"{}\"\n{}\nephemeral_cache = {}\ntimeout = \"{}ms\"",
                ["fixed-window", "sliding-window", "token-bucket"][variant],
                if variant == 2 { format!("refill_rate = 1\ninterval = \"500ms\"\nmax_tokens = {n}") } else { format!("tokens = {n}\nwindow = \"1s\"") },
                n % 2 == 0,
                n * 100,
            ), true),
            1 => (format!("kind = \"django-ratelimit\"\nrate = \"{n}/s\"\nkey_value = \"k{variant}\"\nfail_open = {open}"), true),
            2 => (format!(
                "kind = \"rate-limiter-flexible\"\npoints = {n}\nduration = 1\nexec_evenly = {}{}",
                variant == 2,
                if variant >= 1 { format!("\ninsurance_points = {}\ninsurance_duration = 1", n % 3 + 1) } else { String::new() },
            ), false),
            _ => (format!("kind = \"express-rate-limit\"\nwindow_ms = 1000\nlimit = {n}\npass_on_store_error = {open}"), false),
        };
        let ms = |o: i64| format!("\"{}{}ms\"", if o < 0 { "-" } else { "+" }, o.abs());
        // Keys from the callers' clocks are modelled with one clock for all.
        let offsets: Vec<String> = offsets[..if instance_side { 1 } else { k as usize }].iter().map(|&o| ms(o)).collect();
        let steps: Vec<String> = steps
            .iter()
            .filter(|(_, _, on)| !instance_side || *on == 3)
            .map(|&(at, by, on)| format!(
                "{{ at = \"{}ms\", by = {}, on = {} }}",
                at * 100,
                ms(by),
                if on == 3 { "\"store\"".to_owned() } else { (on as u64 % k).to_string() }
            ))
            .collect();
        let text = format!(
            "duration = \"6s\"\n[cluster]\ninstances = {k}\nmode = \"shared-store-clock\"\noffsets = [{}]\nsteps = [{}]\nstore = {{ rtt = \"{rtt}ms\", offset = {}, outages = [{}] }}\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\n{inner}\n",
            offsets.join(", "),
            steps.join(", "),
            ms(offsets.len() as i64 * 37),
            spans.join(", "),
        );
        let scenario = burstsim::scenario::parse(&text, std::path::Path::new("c.toml")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut limiter = scenario.limiters[0].config.build(Context::default()).unwrap();
        let passed = common::released(&mut limiter, &times);
        for interval in [1, 100 * MS, 500 * MS, 500 * MS + 1, 1_000 * MS, 1_001 * MS, 2_000 * MS] {
            let bound = limiter.bound(Nanos(interval));
            prop_assert!(worst(&passed, interval) <= bound, "{text}\nover {interval} ns: {} > {bound}\n{times:?}", worst(&passed, interval));
        }
    }
}
