//! `guava` against Guava's own `SmoothBursty` and `SmoothWarmingUp`
//! (Debian's `libguava-java`, 31.1): a Java driver (`tests/guava_driver/…/GuavaDriver.java`) feeds the
//! same request times to the real limiter on a simulated stopwatch and
//! prints each `tryAcquire()` answer; the model must give the same answer to
//! every request — bursts in one microsecond, gaps just under and over the
//! interval, idle spells that fill the store, at rates whose interval is a
//! whole number of microseconds and rates whose interval is not (where Guava
//! keeps its stored permits in a double and the model keeps them exactly).
//! Skipped where a JDK or the jar is missing; `.ci/run` installs
//! `default-jdk-headless` and `libguava-java`.

use std::path::{Path, PathBuf};
use std::process::Command;

use burstsim::limiter::RateLimiter;
use burstsim::time::Nanos;

use super::common;

const JAR: &str = "/usr/share/java/guava.jar";
const CLASS: &str = "com.google.common.util.concurrent.GuavaDriver";

/// The driver compiled into `dir`, and the `java` to run it; `None` where a
/// JDK or the jar is missing.
fn driver(dir: &Path) -> Option<(PathBuf, String)> {
    let javac = common::installed(&["/usr/bin/javac"])?;
    let java = common::installed(&["/usr/bin/java"])?;
    if !Path::new(JAR).is_file() {
        return None;
    }
    let source = std::fs::canonicalize(
        "tests/guava_driver/com/google/common/util/concurrent/GuavaDriver.java",
    )
    .unwrap();
    let status = Command::new(javac)
        .args(["-d"])
        .arg(dir)
        .args(["-cp", JAR])
        .arg(source)
        .status()
        .expect("javac runs");
    assert!(status.success(), "the Java driver compiles");
    Some((java, format!("{JAR}:{}", dir.display())))
}

/// Request times (ns) for a limiter of `rate` per second: runs in one
/// microsecond, gaps around the interval give or take a microsecond, and
/// idle spells of up to a few seconds.
fn times(seed: &mut u64, count: usize, rate: u64) -> Vec<u64> {
    let interval = 1_000_000_000 / rate;
    let mut next = || burstsim::random::splitmix64(seed);
    let mut t = next() % 1_000_000;
    (0..count)
        .map(|_| {
            t += match next() % 10 {
                0..=2 => 0,
                3 => next() % 1_000,
                4..=6 => (interval + next() % 4_000).saturating_sub(2_000),
                7 => next() % interval.max(1),
                8 => interval * (next() % 4) + next() % 1_000,
                _ => next() % 3_000_000_000,
            };
            t
        })
        .collect()
}

/// One limiter as the driver builds it and as the model's TOML writes it.
struct Setting {
    /// The driver's arguments after the class.
    args: Vec<String>,
    /// The model's configuration.
    toml: String,
    /// The rate, for the schedule.
    rate: u64,
}

fn bursty(rate: u64, burst: u64) -> Setting {
    Setting {
        args: vec![rate.to_string(), burst.to_string()],
        toml: format!("kind = \"guava\"\npermits_per_second = {rate}\nmax_burst_seconds = {burst}"),
        rate,
    }
}

fn warming_up(rate: u64, warmup_micros: u64) -> Setting {
    Setting {
        args: vec![rate.to_string(), "1".into(), warmup_micros.to_string()],
        toml: format!(
            "kind = \"guava\"\npermits_per_second = {rate}\nwarmup_period = \"{warmup_micros}us\""
        ),
        rate,
    }
}

/// Runs `count` requests through each setting, the real one and the model,
/// and asserts every answer the same and both answers given over 5,000
/// times (skipped where Java or Guava is missing).
fn compare(settings: &[Setting], seed: u64, count: usize) {
    let dir = tempfile::tempdir().unwrap();
    let Some((java, classpath)) = driver(dir.path()) else {
        common::required(
            "not installed: a JDK or Guava; .ci/run installs default-jdk-headless and libguava-java",
        );
        return;
    };
    let mut seed = seed;
    let (mut compared, mut refused) = (0, 0);
    for setting in settings {
        let times = times(&mut seed, count, setting.rate);
        let mut args = vec!["-cp".to_string(), classpath.clone(), CLASS.to_string()];
        args.extend(setting.args.iter().cloned());
        let answers = common::piped(&java, &args, times.iter().map(u64::to_string));
        let mut model = common::model(&setting.toml);
        let mut lines = answers.lines();
        for (i, &t) in times.iter().enumerate() {
            let theirs = lines.next().expect("an answer per request");
            let ours = if model.decide(Nanos(t)).admitted() {
                "A"
            } else {
                "R"
            };
            assert_eq!(ours, theirs, "{}: request {i} at {t} ns", setting.toml);
            refused += usize::from(ours == "R");
            compared += 1;
        }
    }
    assert_eq!(compared, settings.len() * count);
    assert!(
        refused > 5_000 && compared - refused > 5_000,
        "both answers exercised: {refused} refused"
    );
}

#[test]
#[ignore = "needs a JDK and Debian's libguava-java: run with --include-ignored, as .ci/run does"]
fn guava_decides_every_request_as_smooth_bursty_does() {
    // No wall clock here, but a JVM, Node or Python at full speed would
    // disturb the checks that measure one: run apart from them.
    let _alone = common::real_time();
    let settings = [
        (10u64, 1u64),
        (1, 1),
        (3, 1),
        (7, 2),
        (100, 0),
        (333, 1),
        (1_000, 5),
        (4_096, 1),
        (250_000, 1),
        (999_999, 1),
    ]
    .map(|(rate, burst)| bursty(rate, burst));
    compare(&settings, 20_261_202, 4_000);
}

/// `RateLimiter.create(N, warmupPeriod)`: cold starts, idle spells that
/// cool it down again, and warm-up periods from a microsecond to a few
/// seconds, some not a whole number of intervals.
#[test]
#[ignore = "needs a JDK and Debian's libguava-java: run with --include-ignored, as .ci/run does"]
fn guava_decides_every_request_as_smooth_warming_up_does() {
    let _alone = common::real_time();
    let settings = [
        (10u64, 1_000_000u64),
        (1, 3_000_000),
        (3, 2_000_001),
        (7, 999),
        (100, 1),
        (333, 500_000),
        (1_000, 5_000_000),
        (4_096, 1_234_567),
        (250_000, 1_000_000),
        (999_999, 10_000),
    ]
    .map(|(rate, warmup)| warming_up(rate, warmup));
    compare(&settings, 20_261_203, 4_000);
}
