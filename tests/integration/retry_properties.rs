//! Clients that retry, on random limiters and retry behaviours: every
//! request ends exactly one way, the figures add up, no limiter exceeds its
//! bound however its clients retry, and a run repeats exactly.

use burstsim::limiter::{KINDS, example};
use burstsim::sim::{Options, simulate};
use proptest::prelude::*;

/// A retry behaviour over windows of about a microsecond.
fn retries() -> impl Strategy<Value = String> {
    (
        0..5usize,
        0..4usize,
        1..400u64,
        1..7u32,
        prop::option::of(5..60u64),
        1..4u64,
    )
        .prop_map(|(policy, jitter, base, attempts, budget, multiplier)| {
            let policy = ["none", "immediate", "fixed", "exponential", "honour-hint"][policy];
            let jitter = ["none", "full", "equal", "decorrelated"][jitter];
            let budget = budget.map_or(String::new(), |b| format!(", budget = {b}"));
            format!(
                "{{ policy = \"{policy}\", jitter = \"{jitter}\", base = \"{base}ns\", cap = \"{}ns\", multiplier = {multiplier}, max_attempts = {attempts}{budget}, lockout = \"2000ns\" }}",
                base * 8
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_request_ends_one_way_and_no_limiter_exceeds_its_bound(
        kind in 0..KINDS.len(),
        choice in any::<u64>(),
        per_key in prop::bool::weighted(0.25),
        retry in retries(),
        rate in prop_oneof![Just(2_000_000u64), Just(20_000_000u64)],
        clients in 1..5u64,
    ) {
        let mut limiter = example(kind, choice);
        if per_key {
            limiter.push_str("\nper = \"key\"");
        }
        let text = format!(
            "duration = \"20000ns\"\nseed = {choice}\n[metrics]\nrolling = \"1000ns\"\nbucket = \"100ns\"\nprofile = [\"1000ns\", \"2500ns\"]\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"poisson\", rate = {rate}, clients = {{ count = {clients} }} }}]\nretry = {retry}\n[[limiter]]\nname = \"l\"\n{limiter}\n"
        );
        let scenario = match burstsim::scenario::parse(&text, std::path::Path::new("r.toml")) {
            Ok(scenario) => scenario,
            // Some generated retries are invalid by design (a base of 0…); the
            // unit tests check those messages.
            Err(err) => return Err(TestCaseError::reject(err.to_string())),
        };
        let results = match simulate(&scenario, &Options::default()) {
            Ok(results) => results,
            Err(err) if err.to_string().contains("offers no requests") => {
                return Err(TestCaseError::reject("no requests"));
            }
            Err(err) => return Err(TestCaseError::fail(format!("{text}\n{err:#}"))),
        };
        let run = &results.workloads[0].runs[0].summary;
        let c = run.closed_loop.as_ref().expect("a retrying workload has closed-loop figures");
        prop_assert_eq!(c.requests + c.retries, run.offered, "{}", text);
        prop_assert_eq!(c.goodput, run.admitted, "{}", text);
        prop_assert_eq!(c.goodput + c.gave_up + c.unfinished, c.requests, "{}", text);
        prop_assert!(c.budget_refused <= c.gave_up, "{}", text);
        let max_attempts = scenario.workloads[0].retry.unwrap().max_attempts;
        prop_assert!(c.amplification <= f64::from(max_attempts), "{}", text);
        for point in &run.profile {
            prop_assert!(point.worst <= point.bound, "{}\nover {} ns: {} > {}", text, point.interval_ns, point.worst, point.bound);
        }
        if run.delay.is_none() {
            // What is admitted arrived: never more admitted than attempts in an interval.
            prop_assert!(run.worst_rolling <= c.worst_rolling_attempts, "{}", text);
        }
        let again = simulate(&scenario, &Options::default()).unwrap();
        prop_assert_eq!(
            serde_json::to_string(&results.summary()).unwrap(),
            serde_json::to_string(&again.summary()).unwrap()
        );
    }
}
