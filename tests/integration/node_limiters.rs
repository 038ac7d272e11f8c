//! Node limiters against the real packages (`tests/node_limiters`, the
//! versions its package-lock.json pins): a driver runs each request through
//! the real library with `Date.now()` set to the request's time, and the
//! model, a limiter per key, must give the same answer to every request.
//! Skipped where Node or the packages are missing; `.ci/run` installs Node
//! and runs `npm ci` there.

use std::path::{Path, PathBuf};

use burstsim::limiter::{Decision, Limiter, RateLimiter};
use burstsim::time::Nanos;
use burstsim::traffic::Key;

use super::common;

const MS: u64 = 1_000_000;

/// Node and the driver `script`; a check that runs must find them and
/// `package`.
fn driver(script: &str, package: &str) -> (PathBuf, PathBuf) {
    let node = common::installed(&["/usr/bin/node", "/usr/local/bin/node"]);
    let installed = Path::new("tests/node_limiters/node_modules")
        .join(package)
        .is_dir();
    let (Some(node), true) = (node, installed) else {
        common::required(&format!(
            "not installed: Node or {package}; .ci/run installs nodejs and runs npm ci in tests/node_limiters"
        ));
        unreachable!("required panics");
    };
    let script = std::fs::canonicalize(Path::new("tests/node_limiters").join(script));
    (node, script.unwrap())
}

/// Asserts the model answers every request of `requests` as flexible.js
/// wrote rate-limiter-flexible's `answers` ("A DELAY_MS", or "R
/// MS_BEFORE_NEXT", -1 for a record that never ends), in the case `case`
/// names; how many it refused and delayed.
fn same_answers(
    model: &mut Limiter,
    requests: &[(u64, u64)],
    answers: &str,
    case: impl Fn() -> String,
) -> (usize, usize) {
    let mut lines = answers.lines();
    let (mut refused, mut delayed) = (0, 0);
    for (i, &(key, t)) in requests.iter().enumerate() {
        let theirs = lines.next().expect("an answer per request");
        let ours = match model.decide_keyed::<true>(Nanos(t), Key::client(key)) {
            Decision::Reject(hint) => match hint.retry_at {
                Some(retry) => format!("R {}", (retry.get() - t) / MS),
                None => "R -1".to_string(),
            },
            decision => format!("A {}", decision.delay().get() / MS),
        };
        assert_eq!(
            ours,
            theirs,
            "{}: request {i} (key {key}) at {t} ns",
            case()
        );
        refused += usize::from(ours.starts_with('R'));
        delayed += usize::from(ours.starts_with("A ") && ours != "A 0");
    }
    (refused, delayed)
}

#[test]
#[ignore = "needs Node and tests/node_limiters's packages: run with --include-ignored, as .ci/run does"]
fn rate_limiter_flexible_decides_every_consume_as_its_memory_store_does() {
    // No wall clock here, but a JVM, Node or Python at full speed would
    // disturb the checks that measure one: run apart from them.
    let _alone = common::real_time();
    let (node, script) = driver("flexible.js", "rate-limiter-flexible");
    let mut seed = 20_261_203;
    let (mut compared, mut refused, mut delayed) = (0, 0, 0);
    for (points, duration, block, evenly, min_delay) in [
        (10u64, 1u64, 0u64, false, None),
        (3, 1, 0, false, None),
        (1, 2, 0, false, None),
        (5, 1, 3, false, None),
        (4, 1, 0, true, None),
        (6, 2, 0, true, Some(50u64)),
        (3, 0, 0, false, None),
        (2, 0, 1, false, None),
        (5, 1, 1, true, None),
    ] {
        let window_ms = duration.max(1) * 1_000;
        let requests = common::millisecond_requests(&mut seed, 3_000, window_ms, 3);
        let args = [
            script.display().to_string(),
            points.to_string(),
            duration.to_string(),
            block.to_string(),
            evenly.to_string(),
            min_delay.map_or("-".to_string(), |ms| ms.to_string()),
        ];
        let answers = common::piped(
            &node,
            &args,
            requests.iter().map(|(key, t)| format!("k{key} {t}")),
        );
        let min = min_delay.map_or(String::new(), |ms| {
            format!("\nexec_evenly_min_delay_ms = {ms}")
        });
        let mut model = common::model(&format!(
            "kind = \"rate-limiter-flexible\"\npoints = {points}\nduration = {duration}\nblock_duration = {block}\nexec_evenly = {evenly}{min}\nper = \"key\""
        ));
        let (r, d) = same_answers(&mut model, &requests, &answers, || {
            format!("points {points}, duration {duration} s, block {block} s, execEvenly {evenly}")
        });
        (refused, delayed, compared) = (refused + r, delayed + d, compared + requests.len());
    }
    assert_eq!(compared, 9 * 3_000);
    assert!(
        refused > 2_000 && compared - refused > 2_000 && delayed > 500,
        "every answer exercised: {refused} refused, {delayed} delayed of {compared}"
    );
}

#[test]
#[ignore = "needs Node and tests/node_limiters's packages: run with --include-ignored, as .ci/run does"]
fn rate_limiter_flexible_hands_a_failing_store_to_its_insurance_limiter() {
    // A RateLimiterRedis whose store fails every call, with a
    // RateLimiterMemory insurance, against a shared-store cluster of one
    // instance whose store is down for the whole run: the insurance answers
    // with its own points and duration, the main limiter's blockDuration and
    // execEvenly, and its own execEvenlyMinDelayMs default.
    let _alone = common::real_time();
    let (node, script) = driver("flexible.js", "rate-limiter-flexible");
    let mut seed = 20_261_205;
    let (mut compared, mut refused, mut delayed) = (0, 0, 0);
    for (points, block, evenly, min_delay, insurance, insurance_duration) in [
        (10u64, 0u64, false, None, 3u64, 1u64),
        (5, 3, false, None, 2, 1),
        (8, 0, true, None, 4, 2),
        (2, 1, true, None, 5, 1),
        (6, 0, true, Some(40u64), 4, 1),
    ] {
        let requests =
            common::millisecond_requests(&mut seed, 3_000, insurance_duration * 1_000, 3);
        let args = [
            script.display().to_string(),
            points.to_string(),
            "1".to_string(),
            block.to_string(),
            evenly.to_string(),
            min_delay.map_or("-".to_string(), |ms| ms.to_string()),
            insurance.to_string(),
            insurance_duration.to_string(),
        ];
        let answers = common::piped(
            &node,
            &args,
            requests.iter().map(|(key, t)| format!("k{key} {t}")),
        );
        let evenly_min = min_delay.map_or(String::new(), |ms| {
            format!("\nexec_evenly_min_delay_ms = {ms}")
        });
        let mut model = common::down_in_a_shared_store(
            &format!(
                "kind = \"rate-limiter-flexible\"\npoints = {points}\nduration = 1\nblock_duration = {block}\nexec_evenly = {evenly}{evenly_min}\ninsurance_points = {insurance}\ninsurance_duration = {insurance_duration}"
            ),
            0,
            100_000 * 1_000 * MS,
            100_000 * 1_000 * MS,
        );
        let (r, d) = same_answers(&mut model, &requests, &answers, || {
            format!(
                "points {points}, block {block} s, execEvenly {evenly}, insurance {insurance} per {insurance_duration} s"
            )
        });
        (refused, delayed, compared) = (refused + r, delayed + d, compared + requests.len());
    }
    assert_eq!(compared, 5 * 3_000);
    assert!(
        refused > 1_000 && compared - refused > 1_000 && delayed > 200,
        "every answer exercised: {refused} refused, {delayed} delayed of {compared}"
    );
}

#[test]
#[ignore = "needs Node and tests/node_limiters's packages: run with --include-ignored, as .ci/run does"]
fn bottleneck_runs_every_job_when_bottleneck_does() {
    let _alone = common::real_time();
    let (node, script) = driver("bottleneck.js", "bottleneck");
    let mut seed = 20_261_204;
    let (mut compared, mut dropped, mut queued) = (0, 0, 0);
    // (Bottleneck's options, the model's fields, a typical gap in ms).
    let cases: [(&str, &str, u64); 11] = [
        (
            r#"{"reservoir":5,"reservoirRefreshAmount":5,"reservoirRefreshInterval":1000}"#,
            "reservoir = 5\nreservoir_refresh_amount = 5\nreservoir_refresh_interval = \"1s\"",
            250,
        ),
        (
            r#"{"reservoir":3,"reservoirRefreshAmount":3,"reservoirRefreshInterval":300,"minTime":50}"#,
            "reservoir = 3\nreservoir_refresh_amount = 3\nreservoir_refresh_interval = \"300ms\"\nmin_time = \"50ms\"",
            100,
        ),
        (
            r#"{"reservoir":0,"reservoirIncreaseAmount":2,"reservoirIncreaseInterval":500,"reservoirIncreaseMaximum":3}"#,
            "reservoir = 0\nreservoir_increase_amount = 2\nreservoir_increase_interval = \"500ms\"\nreservoir_increase_maximum = 3",
            300,
        ),
        (
            r#"{"reservoir":10,"reservoirRefreshAmount":10,"reservoirRefreshInterval":1000,"reservoirIncreaseAmount":1,"reservoirIncreaseInterval":250,"reservoirIncreaseMaximum":12}"#,
            "reservoir = 10\nreservoir_refresh_amount = 10\nreservoir_refresh_interval = \"1s\"\nreservoir_increase_amount = 1\nreservoir_increase_interval = \"250ms\"\nreservoir_increase_maximum = 12",
            250,
        ),
        (
            r#"{"reservoir":4,"reservoirRefreshAmount":4,"reservoirRefreshInterval":1000,"highWater":3,"strategy":2}"#,
            "reservoir = 4\nreservoir_refresh_amount = 4\nreservoir_refresh_interval = \"1s\"\nhigh_water = 3\nstrategy = \"overflow\"",
            200,
        ),
        (r#"{"minTime":100}"#, "min_time = \"100ms\"", 300),
        (
            r#"{"minTime":20,"highWater":0,"strategy":3,"penalty":100}"#,
            "min_time = \"20ms\"\nhigh_water = 0\nstrategy = \"block\"\npenalty = \"100ms\"",
            100,
        ),
        (
            r#"{"minTime":30,"highWater":0,"strategy":2}"#,
            "min_time = \"30ms\"\nhigh_water = 0\nstrategy = \"overflow\"",
            100,
        ),
        (
            r#"{"reservoirRefreshAmount":5,"reservoirRefreshInterval":1000}"#,
            "reservoir_refresh_amount = 5\nreservoir_refresh_interval = \"1s\"",
            400,
        ),
        (
            r#"{"reservoir":2,"reservoirRefreshAmount":2,"reservoirRefreshInterval":150,"heartbeatInterval":100,"minTime":7}"#,
            "reservoir = 2\nreservoir_refresh_amount = 2\nreservoir_refresh_interval = \"150ms\"\nheartbeat_interval = \"100ms\"\nmin_time = \"7ms\"",
            100,
        ),
        // LEAK drops the oldest queued job where the model drops the new
        // one: the same instants run, compared as a multiset below.
        (
            r#"{"reservoir":4,"reservoirRefreshAmount":4,"reservoirRefreshInterval":1000,"highWater":3}"#,
            "reservoir = 4\nreservoir_refresh_amount = 4\nreservoir_refresh_interval = \"1s\"\nhigh_water = 3",
            200,
        ),
    ];
    for (options, fields, gap_ms) in cases {
        let requests: Vec<u64> = common::millisecond_requests(&mut seed, 1_500, gap_ms, 1)
            .into_iter()
            .map(|(_, t)| t / MS)
            .collect();
        let answers = common::piped(
            &node,
            &[script.display().to_string(), options.to_string()],
            requests.iter().map(u64::to_string),
        );
        let mut model = common::model(&format!("kind = \"bottleneck\"\n{fields}"));
        let ours: Vec<String> = requests
            .iter()
            .map(|&ms| match model.decide(Nanos(ms * MS)) {
                Decision::Reject(_) => "R".to_string(),
                decision => format!("A {}", ms + decision.delay().get() / MS),
            })
            .collect();
        let theirs: Vec<&str> = answers.lines().collect();
        assert_eq!(theirs.len(), requests.len());
        if options.contains("highWater\":3}") {
            let sorted = |mut answers: Vec<&str>| {
                answers.sort_unstable();
                answers.join(" ")
            };
            assert_eq!(
                sorted(ours.iter().map(String::as_str).collect()),
                sorted(theirs.clone()),
                "{options}: the same runs and drops"
            );
        } else {
            for (i, (ours, theirs)) in ours.iter().zip(&theirs).enumerate() {
                assert_eq!(ours, theirs, "{options}: request {i} at {} ms", requests[i]);
            }
        }
        dropped += theirs.iter().filter(|a| **a == "R").count();
        queued += requests
            .iter()
            .zip(&theirs)
            .filter(|(ms, a)| {
                a.strip_prefix("A ")
                    .is_some_and(|run| run.parse::<u64>().unwrap() > **ms)
            })
            .count();
        compared += requests.len();
    }
    assert_eq!(compared, 11 * 1_500);
    assert!(
        dropped > 1_000 && queued > 3_000,
        "every answer exercised: {dropped} dropped, {queued} run later than they came of {compared}"
    );
}
