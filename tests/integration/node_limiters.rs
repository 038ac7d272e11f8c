//! Node limiters against the real packages (`tests/node_limiters`, the
//! versions its package-lock.json pins): a driver runs each request through
//! the real library with `Date.now()` set to the request's time, and the
//! model, a limiter per key, must give the same answer to every request.
//! Skipped where Node or the packages are missing; `.ci/run` installs Node
//! and runs `npm ci` there.

use std::path::{Path, PathBuf};

use burstsim::limiter::{Decision, RateLimiter};
use burstsim::time::Nanos;
use burstsim::traffic::Key;

use super::common;

const MS: u64 = 1_000_000;

/// Node and the driver `script`, or `None` where either or `package` is missing.
fn driver(script: &str, package: &str) -> Option<(PathBuf, PathBuf)> {
    let node = common::installed(&["/usr/bin/node", "/usr/local/bin/node"])?;
    let installed = Path::new("tests/node_limiters/node_modules")
        .join(package)
        .is_dir();
    installed.then(|| {
        (
            node,
            std::fs::canonicalize(Path::new("tests/node_limiters").join(script)).unwrap(),
        )
    })
}

#[test]
#[ignore = "needs Node and tests/node_limiters's packages: run with --include-ignored, as .ci/run does"]
fn rate_limiter_flexible_decides_every_consume_as_its_memory_store_does() {
    // No wall clock here, but a JVM, Node or Python at full speed would
    // disturb the checks that measure one: run apart from them.
    let _alone = common::real_time();
    let Some((node, script)) = driver("flexible.js", "rate-limiter-flexible") else {
        common::required(
            "not installed: Node or rate-limiter-flexible; .ci/run installs nodejs and runs npm ci in tests/node_limiters",
        );
        return;
    };
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
        let mut lines = answers.lines();
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
                ours, theirs,
                "points {points}, duration {duration} s, block {block} s, execEvenly {evenly}: request {i} (key {key}) at {t} ns"
            );
            refused += usize::from(ours.starts_with('R'));
            delayed += usize::from(ours.starts_with("A ") && ours != "A 0");
            compared += 1;
        }
    }
    assert_eq!(compared, 9 * 3_000);
    assert!(
        refused > 2_000 && compared - refused > 2_000 && delayed > 500,
        "every answer exercised: {refused} refused, {delayed} delayed of {compared}"
    );
}
