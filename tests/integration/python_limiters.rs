//! Python limiters against the real packages (`tests/python_limiters`, the
//! versions its requirements.txt pins, installed by `.ci/run` into the
//! virtual environment `target/python-limiters`): a driver runs each request
//! through the real library with `time.time()` set to the request's time,
//! and the model, a limiter per key, must give the same answer to every
//! request. Skipped where the environment is missing.

use std::path::{Path, PathBuf};

use burstsim::limiter::RateLimiter;
use burstsim::time::Nanos;
use burstsim::traffic::Key;

use super::common;

const SECOND: u64 = 1_000_000_000;

/// The environment's Python, with the packages installed.
fn python() -> Option<PathBuf> {
    let python = Path::new("target/python-limiters/bin/python");
    // Not canonicalised: the link into the base interpreter would leave the
    // virtual environment behind.
    python
        .is_file()
        .then(|| std::env::current_dir().unwrap().join(python))
}

/// The virtual environment's Python and the driver `script`; a check that
/// runs must find them.
fn driver(script: &str) -> (PathBuf, PathBuf) {
    let Some(python) = python() else {
        common::required(
            "not installed: target/python-limiters; .ci/run creates it with tests/python_limiters/requirements.txt",
        );
        unreachable!("required panics");
    };
    let script = std::fs::canonicalize(Path::new("tests/python_limiters").join(script));
    (python, script.unwrap())
}

/// `(key, time)` pairs for windows of `period` seconds: bursts in one
/// second, steps just under and over a second, and jumps of a period or more.
fn requests(seed: &mut u64, count: usize, period: u64, keys: u64) -> Vec<(u64, u64)> {
    let mut next = || burstsim::random::splitmix64(seed);
    let mut t = next() % (100 * SECOND);
    (0..count)
        .map(|_| {
            t += match next() % 12 {
                0..=5 => next() % 1_000_000,
                6 | 7 => next() % (SECOND / 4),
                8 | 9 => (SECOND + next() % 4_000).saturating_sub(2_000),
                10 => next() % (period * SECOND),
                _ => next() % (3 * period * SECOND),
            };
            // Application keys numbered from 1000, as the model reads them.
            (1_000 + next() % keys, t)
        })
        .collect()
}

#[test]
#[ignore = "needs target/python-limiters with tests/python_limiters/requirements.txt: run with --include-ignored, as .ci/run does"]
fn django_ratelimit_decides_every_request_as_get_usage_does() {
    // No wall clock here, but a JVM, Node or Python at full speed would
    // disturb the checks that measure one: run apart from them.
    let _alone = common::real_time();
    let (python, driver) = driver("django_driver.py");
    let mut seed = 20_261_204;
    let (mut compared, mut refused) = (0, 0);
    for (rate, period, keys) in [
        ("5/s", 1u64, 1u64),
        ("3/s", 1, 4),
        ("10/m", 60, 5),
        ("2/7s", 7, 5),
        ("4/2s", 2, 3),
        ("20/h", 3_600, 4),
    ] {
        let requests = requests(&mut seed, 2_000, period, keys);
        let args = [driver.display().to_string(), rate.to_string()];
        let answers = common::piped(
            &python,
            &args,
            requests.iter().map(|(key, t)| format!("{key} {t}")),
        );
        let mut model = common::model(&format!(
            "kind = \"django-ratelimit\"\nrate = \"{rate}\"\nper = \"key\""
        ));
        let mut lines = answers.lines();
        for (i, &(key, t)) in requests.iter().enumerate() {
            let theirs = lines.next().expect("an answer per request");
            let ours = if model
                .decide_keyed::<false>(Nanos(t), Key::client(key))
                .admitted()
            {
                "A"
            } else {
                "R"
            };
            assert_eq!(
                ours, theirs,
                "rate {rate}: request {i} (key {key}) at {t} ns"
            );
            refused += usize::from(ours == "R");
            compared += 1;
        }
    }
    assert_eq!(compared, 6 * 2_000);
    assert!(
        refused > 1_000 && compared - refused > 1_000,
        "both answers exercised: {refused} refused of {compared}"
    );
}

#[test]
#[ignore = "needs target/python-limiters with tests/python_limiters/requirements.txt: run with --include-ignored, as .ci/run does"]
fn django_ratelimit_answers_a_failing_cache_as_ratelimit_fail_open_says() {
    // The real get_usage over a cache that fails in an outage, against a
    // shared-store cluster of one instance whose store is down then:
    // limited (RATELIMIT_FAIL_OPEN false) or not, and the windows neither
    // count the outage's requests nor forget the ones before it.
    let _alone = common::real_time();
    let (python, driver) = driver("django_driver.py");
    let mut seed = 20_261_207;
    let (mut compared, mut refused) = (0, 0);
    for (rate, period, keys, open) in [
        ("5/s", 1u64, 2u64, false),
        ("3/7s", 7, 3, true),
        ("2/s", 1, 1, false),
    ] {
        let requests = requests(&mut seed, 2_000, period, keys);
        let (first, last) = (requests[0].1, requests[1_999].1);
        // Down over the middle third, on odd nanoseconds.
        let (from, to) = (
            (first + (last - first) / 3) | 1,
            (first + 2 * (last - first) / 3) | 1,
        );
        let args = [
            driver.display().to_string(),
            rate.to_string(),
            from.to_string(),
            to.to_string(),
            open.to_string(),
        ];
        let answers = common::piped(
            &python,
            &args,
            requests.iter().map(|(key, t)| format!("{key} {t}")),
        );
        let mut model = common::down_in_a_shared_store(
            &format!("kind = \"django-ratelimit\"\nrate = \"{rate}\"\nfail_open = {open}"),
            from,
            to,
            last + 1,
        );
        let mut lines = answers.lines();
        let mut down = 0;
        for (i, &(key, t)) in requests.iter().enumerate() {
            let theirs = lines.next().expect("an answer per request");
            let admitted = model
                .decide_keyed::<false>(Nanos(t), Key::client(key))
                .admitted();
            let ours = if admitted { "A" } else { "R" };
            assert_eq!(
                ours, theirs,
                "rate {rate}, fail open {open}, down over [{from}, {to}) ns: request {i} (key {key}) at {t} ns"
            );
            refused += usize::from(!admitted);
            down += usize::from((from..to).contains(&t));
            compared += 1;
        }
        assert!(down > 300, "the outage exercised: {down} requests in it");
    }
    assert_eq!(compared, 3 * 2_000);
    assert!(refused > 1_000, "{refused} refused of {compared}");
}

#[test]
#[ignore = "needs target/python-limiters with tests/python_limiters/requirements.txt: run with --include-ignored, as .ci/run does"]
fn slowapi_answers_every_request_and_retry_after_as_slowapi_does() {
    let _alone = common::real_time();
    let (python, driver) = driver("slowapi_driver.py");
    let mut seed = 20_261_203;
    let (mut compared, mut refused, mut hinted, mut negative) = (0, 0, 0, 0);
    for (limit, strategy, period, keys) in [
        ("2/second", "fixed-window", 1u64, 1u64),
        ("3 per 2 seconds", "moving-window", 2, 3),
        ("10/minute", "fixed-window", 60, 4),
        ("5/minute", "moving-window", 60, 2),
        ("1/second", "moving-window", 1, 2),
        ("4/3 seconds", "fixed-window", 3, 3),
    ] {
        let mut requests = requests(&mut seed, 1_000, period, keys);
        // Then 500 on a grid of quarter seconds, which doubles hold
        // exactly: hits exactly W apart, where `now − W` equals a logged
        // time and an expiry equals `now`.
        let last = requests.last().map_or(0, |&(_, t)| t);
        let start = last - last % (SECOND / 4) + SECOND;
        requests.extend((0..500u64).map(|i| {
            let step = [0, 1, 1, 2, 4 * period][(i % 5) as usize] * SECOND / 4;
            (
                1_000 + i / 5 % keys,
                start + i / 5 * period * SECOND / 2 + step,
            )
        }));
        requests.sort_by_key(|&(_, t)| t);
        let args = [
            driver.display().to_string(),
            limit.to_string(),
            strategy.to_string(),
        ];
        let answers = common::piped(
            &python,
            &args,
            requests.iter().map(|(key, t)| format!("{key} {t}")),
        );
        let mut model = common::model(&format!(
            "kind = \"slowapi\"\nlimit = \"{limit}\"\nstrategy = \"{strategy}\"\nheaders_enabled = true\nper = \"key\""
        ));
        let mut lines = answers.lines();
        for (i, &(key, t)) in requests.iter().enumerate() {
            let theirs = lines.next().expect("an answer per request");
            // With no hit in the moving window (a limit of 1 refusing at
            // exactly now − W, where the check counts the hit and the
            // window does not), slowapi's reset is the oldest entry stored
            // and its Retry-After negative; the model says 0, as a client
            // that waits max(0, it) does.
            let theirs = if theirs.starts_with("R -") {
                negative += 1;
                "R 0"
            } else {
                theirs
            };
            let ours = match model.decide_keyed::<true>(Nanos(t), Key::client(key)) {
                burstsim::limiter::Decision::Reject(hint) => {
                    let retry = hint.retry_at.expect("headers_enabled: a Retry-After");
                    format!("R {}", (retry.get() - t) / SECOND)
                }
                _ => "A".to_string(),
            };
            assert_eq!(
                ours, theirs,
                "{limit} {strategy}: request {i} (key {key}) at {t} ns"
            );
            refused += usize::from(ours != "A");
            hinted += usize::from(ours.starts_with("R ") && ours != "R 0" && ours != "R 1");
            compared += 1;
        }
    }
    assert_eq!(compared, 6 * 1_500);
    assert!(
        refused > 1_000 && compared - refused > 1_000 && hinted > 100,
        "both answers and long waits exercised: {refused} refused ({hinted} told to wait 2 s or more) of {compared}"
    );
    assert!(negative > 0, "the grid reaches the moving window's edge");
}
