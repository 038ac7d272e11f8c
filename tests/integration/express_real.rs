//! `express-rate-limit` against the real middleware and `MemoryStore`
//! (7.5.0, as `tests/probe_express/package-lock.json` pins): a Node driver
//! (`tests/probe_express/decide.js`) runs each request through the real
//! middleware with `Date.now()` set to the request's time, and the model,
//! a limiter per key, must give the same answer to every request — passed,
//! or refused with the same `Retry-After` in whole seconds — across window
//! edges to the millisecond, several requests in one millisecond, refused
//! requests that keep counting, and keys that come and go. Skipped where
//! Node or the packages are missing; `.ci/run` installs Node and runs
//! `npm ci` there.

use std::path::{Path, PathBuf};

use burstsim::limiter::{Decision, RateLimiter};
use burstsim::time::Nanos;
use burstsim::traffic::Key;

use super::common;

const MS: u64 = 1_000_000;

/// Node and `decide.js`; a check that runs must find them.
fn driver() -> (PathBuf, PathBuf) {
    let node = common::installed(&["/usr/bin/node", "/usr/local/bin/node"]);
    let installed = Path::new("tests/probe_express/node_modules/express-rate-limit").is_dir();
    let (Some(node), true) = (node, installed) else {
        common::required(
            "not installed: Node or express-rate-limit; .ci/run installs nodejs and runs npm ci in tests/probe_express",
        );
        unreachable!("required panics");
    };
    let driver = std::fs::canonicalize("tests/probe_express/decide.js");
    (node, driver.unwrap())
}

#[test]
#[ignore = "needs Node and tests/probe_express's packages: run with --include-ignored, as .ci/run does"]
fn express_rate_limit_decides_every_request_as_its_memory_store_does() {
    // No wall clock here, but a JVM, Node or Python at full speed would
    // disturb the checks that measure one: run apart from them.
    let _alone = common::real_time();
    let (node, driver) = driver();
    let mut seed = 20_261_202;
    let (mut compared, mut refused) = (0, 0);
    for (window_ms, limit, keys) in [
        (1_000u64, 10u64, 1u64),
        (1_000, 3, 4),
        (1, 1, 1),
        (7, 2, 3),
        (2_500, 5, 2),
        (60_000, 20, 5),
    ] {
        let requests = common::millisecond_requests(&mut seed, 3_000, window_ms, keys);
        let args = [
            driver.display().to_string(),
            window_ms.to_string(),
            limit.to_string(),
        ];
        let answers = common::piped(
            &node,
            &args,
            requests.iter().map(|(key, t)| format!("k{key} {t}")),
        );
        let mut model = common::model(&format!(
            "kind = \"express-rate-limit\"\nwindow_ms = {window_ms}\nlimit = {limit}\nper = \"key\""
        ));
        let mut lines = answers.lines();
        for (i, &(key, t)) in requests.iter().enumerate() {
            let theirs = lines.next().expect("an answer per request");
            let ours = match model.decide_keyed::<true>(Nanos(t), Key::client(key)) {
                Decision::Reject(hint) => {
                    let retry = hint.retry_at.expect("Retry-After is always sent");
                    format!("R {}", (retry.get() - t) / 1_000_000_000)
                }
                _ => "A".to_string(),
            };
            assert_eq!(
                ours, theirs,
                "windowMs {window_ms}, limit {limit}: request {i} (key {key}) at {t} ns"
            );
            refused += usize::from(ours.starts_with('R'));
            compared += 1;
        }
    }
    assert_eq!(compared, 6 * 3_000);
    assert!(
        refused > 2_000 && compared - refused > 2_000,
        "both answers exercised: {refused} refused of {compared}"
    );
}

#[test]
#[ignore = "needs Node and tests/probe_express's packages: run with --include-ignored, as .ci/run does"]
fn express_rate_limit_answers_a_failing_store_as_pass_on_store_error_says() {
    // The real middleware over a MemoryStore that fails every increment in
    // an outage, against a shared-store cluster of one instance whose store
    // is down then: refused (the error reaches Express, a 500) or passed
    // with passOnStoreError, and the window neither counts the outage's hits
    // nor forgets the ones before it.
    let _alone = common::real_time();
    let (node, driver) = driver();
    let mut seed = 20_261_206;
    let (mut compared, mut failed) = (0, 0);
    for (window_ms, limit, keys, pass) in [
        (1_000u64, 5u64, 2u64, false),
        (1_000, 5, 2, true),
        (7, 2, 3, false),
    ] {
        let requests = common::millisecond_requests(&mut seed, 3_000, window_ms, keys);
        let (first, last) = (requests[0].1 / 1_000_000, requests[2_999].1 / 1_000_000);
        // Down over the middle third of the schedule.
        let (from, to) = (first + (last - first) / 3, first + 2 * (last - first) / 3);
        let args = [
            driver.display().to_string(),
            window_ms.to_string(),
            limit.to_string(),
            from.to_string(),
            to.to_string(),
            pass.to_string(),
        ];
        let answers = common::piped(
            &node,
            &args,
            requests.iter().map(|(key, t)| format!("k{key} {t}")),
        );
        let mut model = common::down_in_a_shared_store(
            &format!(
                "kind = \"express-rate-limit\"\nwindow_ms = {window_ms}\nlimit = {limit}\npass_on_store_error = {pass}"
            ),
            from * MS,
            to * MS,
            (last + 1) * MS,
        );
        let mut lines = answers.lines();
        for (i, &(key, t)) in requests.iter().enumerate() {
            let theirs = lines.next().expect("an answer per request");
            let ours = match model.decide_keyed::<true>(Nanos(t), Key::client(key)) {
                Decision::Reject(hint) => match hint.retry_at {
                    Some(retry) => format!("R {}", (retry.get() - t) / 1_000_000_000),
                    None => "E".to_string(),
                },
                _ => "A".to_string(),
            };
            assert_eq!(
                ours, theirs,
                "windowMs {window_ms}, limit {limit}, passOnStoreError {pass}, down over [{from}, {to}) ms: request {i} (key {key}) at {t} ns"
            );
            failed += usize::from(ours == "E");
            compared += 1;
        }
    }
    assert_eq!(compared, 3 * 3_000);
    assert!(
        failed > 1_000,
        "the outage exercised: {failed} errors of {compared}"
    );
}
