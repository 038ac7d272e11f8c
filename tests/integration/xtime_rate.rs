//! `traefik` against the real `golang.org/x/time/rate` and the real
//! `github.com/mailgun/ttlmap` (the version Traefik pins): a Go driver
//! (`tests/xtime_rate/main.go`) makes Traefik's decision around the
//! libraries with injected times, and the model must give the same answer —
//! admitted now, admitted after the same delay to the nanosecond, or
//! refused with the same `Retry-After` — for every request, the map's whole-second expiry included, at
//! several offsets of the run within a Unix second. Skipped, with a message,
//! where Go or a library is missing; `.ci/run` installs Debian's `golang-go`,
//! `golang-golang-x-time-dev` and `golang-github-mailgun-ttlmap-dev` so CI
//! runs it.

use super::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use burstsim::limiter::{Context, Decision, LimiterConfig, RateLimiter};
use burstsim::time::Nanos;

const LIBRARIES: [&str; 2] = [
    "/usr/share/gocode/src/golang.org/x/time/rate/rate.go",
    "/usr/share/gocode/src/github.com/mailgun/ttlmap/ttlmap.go",
];

/// The driver, built into `dir`; `None` where Go or the library is missing.
fn driver(dir: &Path) -> Option<PathBuf> {
    let go = common::installed(&["/usr/bin/go", "/usr/lib/go/bin/go"])?;
    if !LIBRARIES.iter().all(|library| Path::new(library).is_file()) {
        return None;
    }
    let binary = dir.join("xtime");
    let status = Command::new(go)
        .args(["build", "-o"])
        .arg(&binary)
        .arg(std::fs::canonicalize("tests/xtime_rate/main.go").unwrap())
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", dir.join("cache"))
        .env("GOFLAGS", "")
        .status()
        .expect("go runs");
    assert!(status.success(), "the Go driver builds");
    Some(binary)
}

/// A small deterministic generator (SplitMix64), so a failure replays.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        burstsim::random::splitmix64(&mut self.0)
    }
}

/// Request times: runs at one instant, gaps of nanoseconds to seconds,
/// idle spells past the TTL, and requests just before, at and after whole
/// seconds of the Unix clock (where the TTL map forgets).
fn times(mix: &mut Mix, count: usize, scale: u64, offset: u64) -> Vec<u64> {
    const SECOND: u64 = burstsim::time::NANOS_PER_SEC;
    let mut t = 0u64;
    (0..count)
        .map(|_| {
            t += match mix.next() % 12 {
                0..=2 => 0,
                3..=5 => mix.next() % 1_000,
                6..=8 => mix.next() % scale,
                9 => mix.next() % (4 * SECOND),
                // To the next whole Unix second, give or take a nanosecond,
                // a second or two later.
                _ => {
                    let unix = t + offset;
                    let edge = (unix / SECOND + 1 + mix.next() % 2) * SECOND;
                    (edge - offset + mix.next() % 3).saturating_sub(1) - t
                }
            };
            t
        })
        .collect()
}

#[test]
#[ignore = "needs Go with golang.org/x/time/rate and mailgun/ttlmap: run with --include-ignored, as .ci/run does"]
fn traefik_decides_every_request_as_x_time_rate_does() {
    let _alone = super::common::real_time();
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(dir.path()) else {
        common::required(
            "not installed: Go or golang.org/x/time/rate; .ci/run installs golang-go and golang-golang-x-time-dev",
        );
        return;
    };
    let mut mix = Mix(20_261_130);
    let (mut compared, mut refused, mut delayed) = (0, 0, 0);
    for (average, period_ns, burst, offset) in [
        (10u64, 1_000_000_000u64, 2u64, 0u64),
        (1, 1_000_000_000, 5, 0),
        (3, 7_000_000_000, 1, 999_999_999),
        (100, 1_000_000_000, 20, 0),
        (7, 250_000_000, 3, 450_000_000),
        (1000, 1_000_000_000, 1, 1),
        (5, 1_500_000_000, 8, 0),
        (2, 3_000_000_000, 2, 500_000_000),
        (100, 60_000_000_000, 100, 0),
        (100, 60_000_000_000, 100, 900_000_000),
    ] {
        let scale = period_ns / average;
        let times = times(&mut mix, 3_000, scale, offset);
        let answers = common::piped(
            &driver,
            &[average, period_ns, burst, offset].map(|v| v.to_string()),
            times.iter().map(u64::to_string),
        );
        let table: toml::Table = toml::from_str(&format!(
            "kind = \"traefik\"\naverage = {average}\nperiod = \"{period_ns}ns\"\nburst = {burst}\nclock_offset = \"{offset}ns\""
        ))
        .unwrap();
        let mut model = LimiterConfig::from_table(table)
            .unwrap()
            .build(Context::default())
            .unwrap();
        let mut lines = answers.lines();
        for (i, &t) in times.iter().enumerate() {
            let theirs = lines.next().expect("an answer per request");
            let ours = match model.decide_with::<true>(Nanos(t)) {
                Decision::Admit => "A 0".to_string(),
                Decision::Delay(d) => format!("A {}", d.get()),
                Decision::Reject(hint) => match hint.retry_at {
                    // Retry-After, in the seconds from the response it says.
                    Some(at) => format!("R {}", (at.get() - t) / 1_000_000_000),
                    None => "R".to_string(),
                },
            };
            assert_eq!(
                ours, theirs,
                "average {average} per {period_ns} ns, burst {burst}, offset {offset} ns: request {i} at {t} ns"
            );
            refused += usize::from(ours.starts_with('R'));
            delayed += usize::from(ours.starts_with("A ") && ours != "A 0");
            compared += 1;
        }
    }
    assert_eq!(compared, 10 * 3_000);
    assert!(
        refused > 1_000 && delayed > 1_000,
        "both paths exercised: {refused} refused, {delayed} delayed"
    );
}
