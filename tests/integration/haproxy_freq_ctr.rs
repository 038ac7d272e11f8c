//! `haproxy-rate` against HAProxy's own frequency counter: a small C driver
//! (`tests/haproxy_freq_ctr/driver.c`) built with the installed HAProxy's
//! source (`src/freq_ctr.c` and its headers, which `.ci/run` fetches from
//! Debian for the installed version into `BURSTSIM_HAPROXY_SOURCE`) decides
//! requests at injected milliseconds, and the model must give the same
//! answer for every one: equal times, odd and even milliseconds of
//! HAProxy's clock, odd periods, idle spells of two periods and the u32
//! clock wrapping. The wall-clock test against the running HAProxy
//! (`tests/integration/haproxy_real.rs`) checks the whole path; this one checks every
//! edge to the millisecond. Skipped, with a message, where the source or a
//! C compiler is missing.

use super::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use burstsim::limiter::{Context, LimiterConfig, RateLimiter};
use burstsim::random::splitmix64;
use burstsim::time::Nanos;

const MS: u64 = 1_000_000;

/// The driver, built into `dir`; `None` where the source or `cc` is missing.
fn driver(dir: &Path) -> Option<PathBuf> {
    let source = PathBuf::from(std::env::var_os("BURSTSIM_HAPROXY_SOURCE")?);
    let counter = source.join("src/freq_ctr.c");
    if !counter.is_file() {
        return None;
    }
    let cc = common::installed(&["/usr/bin/cc", "/usr/bin/gcc"])?;
    let binary = dir.join("freq_ctr");
    let output = Command::new(cc)
        .args(["-O1", "-w", "-I"])
        .arg(source.join("include"))
        .arg("-o")
        .arg(&binary)
        .arg(std::fs::canonicalize("tests/haproxy_freq_ctr/driver.c").unwrap())
        .arg(counter)
        .output()
        .expect("cc runs");
    assert!(
        output.status.success(),
        "the driver builds against {}: {}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(binary)
}

/// Request times (ns): equal times, gaps under a millisecond, of a few
/// milliseconds, of about a period, and idle spells past two periods.
fn times(state: &mut u64, count: usize, period_ms: u64) -> Vec<u64> {
    let mut t = 0u64;
    (0..count)
        .map(|_| {
            t += match splitmix64(state) % 16 {
                0..=4 => 0,
                5..=8 => splitmix64(state) % MS,
                9..=12 => splitmix64(state) % (4 * MS),
                13 | 14 => splitmix64(state) % (period_ms * MS + MS),
                _ => 2 * period_ms * MS + splitmix64(state) % (period_ms * MS),
            };
            t
        })
        .collect()
}

#[test]
#[ignore = "needs HAProxy's source in BURSTSIM_HAPROXY_SOURCE and cc: run with --include-ignored, as .ci/run does"]
fn haproxy_rate_decides_every_request_as_haproxys_freq_ctr() {
    let _alone = super::common::real_time();
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(dir.path()) else {
        common::required(
            "not installed: HAProxy source in BURSTSIM_HAPROXY_SOURCE (or no cc); .ci/run fetches Debian's for the installed haproxy",
        );
        return;
    };
    let mut state = 20_261_201;
    let (mut compared, mut denied, mut odd) = (0, 0, 0);
    // (P ms, L, HAProxy's clock at the run's start in ms, and where the run
    // starts within that millisecond in ns). The clock is at least 2P past
    // its last wrap, as the model assumes; two of them wrap during the run.
    for (period_ms, limit, start_ms, within) in [
        (1_000u64, 20u64, 1_000_000u32, 0u64),
        (1_000, 20, 1_000_001, 0),
        (1_001, 5, 7_000_007, 250_000),
        (2, 1, 12_000, 0),
        (3, 2, 13_001, 999_999),
        (7, 3, 4_294_967_290, 1),
        (10, 4, 4_294_967_291, 500_000),
        (999, 50, 2_024_000, 123_456),
    ] {
        let times = times(&mut state, 4_000, period_ms);
        let clock = |t: u64| (t + within) / MS;
        let answers = common::piped(
            &driver,
            &[period_ms, limit, u64::from(start_ms)].map(|v| v.to_string()),
            times.iter().map(|&t| clock(t).to_string()),
        );
        let offset = u64::from(start_ms % 2) * MS + within;
        let table: toml::Table = toml::from_str(&format!(
            "kind = \"haproxy-rate\"\nperiod = \"{period_ms}ms\"\nlimit = {limit}\nclock_offset = \"{offset}ns\""
        ))
        .unwrap();
        let mut model = LimiterConfig::from_table(table)
            .unwrap()
            .build(Context::default())
            .unwrap();
        let theirs = answers.trim_end().as_bytes();
        assert_eq!(theirs.len(), times.len(), "an answer per request");
        for (i, (&t, &answer)) in times.iter().zip(theirs).enumerate() {
            let ours = model.decide(Nanos(t)).admitted();
            assert_eq!(
                ours,
                answer == b'1',
                "P {period_ms} ms, L {limit}, clock at {start_ms} ms + {within} ns: request {i} at {t} ns (HAProxy's ms {})",
                u64::from(start_ms) + clock(t)
            );
            denied += usize::from(!ours);
            odd += usize::from((u64::from(start_ms) + clock(t)) % 2 == 1);
            compared += 1;
        }
    }
    assert_eq!(compared, 8 * 4_000);
    assert!(
        denied > 3_000 && compared - denied > 3_000 && odd > 10_000,
        "both answers and odd milliseconds exercised: {denied} denied, {odd} on odd milliseconds"
    );
}
