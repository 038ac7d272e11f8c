//! Hostile input: whatever a scenario or trace holds, burstsim answers with a
//! result or one clear error (exit 2), never a panic, a hang or a runaway
//! allocation. And the same scenario always gives the same bytes.

use std::fs;
use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;

const LIMITER: &str =
    "[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n";

fn scenario(workload_sources: &str) -> String {
    format!(
        "duration = \"10s\"\n[[workload]]\nname = \"w\"\nsources = [{workload_sources}]\n{LIMITER}"
    )
}

/// Runs `burstsim run` on `text` (written to a file, with `trace.csv` beside
/// it when given) and expects exit 2 with `expected` in the message.
fn refused(text: &[u8], trace: Option<&[u8]>, expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.toml");
    fs::write(&path, text).unwrap();
    if let Some(trace) = trace {
        fs::write(dir.path().join("trace.csv"), trace).unwrap();
    }
    let out = dir.path().join("out");
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "expected exit 2 for {expected:?}; stderr: {stderr}"
    );
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.len() < 2_000,
        "the message stays short: {} bytes",
        stderr.len()
    );
    assert!(!out.exists(), "nothing is written for bad input");
}

#[test]
fn hostile_numbers_are_refused_with_their_field() {
    refused(
        scenario("{ kind = \"poisson\", rate = nan }").as_bytes(),
        None,
        "rate",
    );
    refused(
        scenario("{ kind = \"poisson\", rate = inf }").as_bytes(),
        None,
        "rate",
    );
    refused(
        scenario("{ kind = \"poisson\", rate = 1e400 }").as_bytes(),
        None,
        "hostile.toml:4:39: ",
    );
    refused(
        scenario("{ kind = \"uniform\", rate = 1e30 }").as_bytes(),
        None,
        "rate",
    );
    refused(
        b"duration = \"1s\"\nseed = 18446744073709551616\n",
        None,
        "seed",
    );
    refused(b"duration = \"-5s\"\n", None, "duration");
    refused(b"duration = \"700years\"\n", None, "too long");
    refused(
        scenario("{ kind = \"uniform\", rate = 10, jitter = -0.5 }").as_bytes(),
        None,
        "jitter",
    );
}

#[test]
fn hostile_files_are_refused() {
    refused(b"", None, "duration");
    refused(b"\xff\xfe\x00garbage", None, "valid UTF-8");
    refused(
        b"duration = \"1s\"\nduration = \"2s\"\n",
        None,
        "duplicate key",
    );
    let deep = format!(
        "duration = \"1s\"\na = {}1{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    refused(deep.as_bytes(), None, "hostile.toml:2:");
}

#[test]
fn hostile_traces_are_refused_with_their_line() {
    let trace = scenario("{ kind = \"trace\", path = \"trace.csv\" }");
    refused(trace.as_bytes(), Some(b"time_ns\n1\n-5\n"), "trace.csv:3:");
    refused(
        trace.as_bytes(),
        Some(b"time_ns\n1\n99999999999999999999999\n"),
        "trace.csv:3:",
    );
    refused(
        trace.as_bytes(),
        Some(b"when\n1\n"),
        "no column time_ns or time_s",
    );
    refused(
        trace.as_bytes(),
        Some(b"time_ns\n1\n\"unterminated\n"),
        "trace.csv",
    );
    let device = scenario("{ kind = \"trace\", path = \"/dev/zero\" }");
    refused(device.as_bytes(), None, "not a regular file");
    let folder = scenario("{ kind = \"trace\", path = \".\" }");
    refused(folder.as_bytes(), None, "is a folder");
}

#[test]
fn runaway_work_and_memory_are_refused_before_starting() {
    let busy = "duration = \"24h\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 1000000000 }]\n".to_string() + LIMITER;
    refused(busy.as_bytes(), None, "--max-requests");
    let log = scenario("{ kind = \"poisson\", rate = 1 }")
        .replace("kind = \"fixed-window\"", "kind = \"sliding-log\"")
        .replace("threshold = 10", "threshold = 10000000000");
    refused(log.as_bytes(), None, "80 GB");
    refused(scenario("{ kind = \"boundary\", period = \"1s\", before = 1000000000000, after = 1, spread = \"1ms\" }").as_bytes(), None, "held in memory");
    refused(
        scenario("{ kind = \"adversary\", budget = 1000000000000 }").as_bytes(),
        None,
        "budget",
    );
    let buckets = format!(
        "duration = \"10000h\"\n[metrics]\nbucket = \"1us\"\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"poisson\", rate = 1 }}]\n{LIMITER}"
    );
    refused(buckets.as_bytes(), None, "metrics.bucket");
}

#[test]
fn a_failed_run_leaves_the_previous_results_intact() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = |scenario: &Path| {
        Command::cargo_bin("burstsim")
            .unwrap()
            .arg("run")
            .arg(scenario)
            .arg("-q")
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    assert!(run(Path::new("scenarios/basic.toml")).status.success());
    let before = fs::read(out.join("summary.json")).unwrap();
    // A scenario that fails (its trace has a bad row), run into the same folder.
    let scenario = dir.path().join("s.toml");
    fs::write(&scenario, scenario_text()).unwrap();
    fs::write(dir.path().join("trace.csv"), "time_ns\nnot-a-number\n").unwrap();
    let failed = run(&scenario);
    assert_eq!(failed.status.code(), Some(2));
    assert_eq!(
        fs::read(out.join("summary.json")).unwrap(),
        before,
        "the earlier results are untouched"
    );
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no staging folder is left behind: {leftovers:?}"
    );
}

fn scenario_text() -> String {
    scenario("{ kind = \"trace\", path = \"trace.csv\" }")
}

/// `burstsim validate PATH` exits 2 within a few seconds with `expected`.
fn scenario_refused(path: &Path, expected: &str) {
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("validate")
        .arg(path)
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}: {stderr}",
        path.display()
    );
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in: {stderr}"
    );
}

#[test]
fn a_scenario_that_is_a_device_a_fifo_or_too_large_is_refused_at_once() {
    scenario_refused(Path::new("/dev/zero"), "not a regular file");
    scenario_refused(Path::new("/dev/urandom"), "not a regular file");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    scenario_refused(&fifo, "not a regular file");
    let big = dir.path().join("big.toml");
    fs::write(&big, "#".repeat(16 << 20 | 1)).unwrap();
    scenario_refused(&big, "over the limit of 16777216 bytes");
}

#[test]
fn a_huge_value_is_quoted_only_in_part() {
    let huge = "a".repeat(5 << 20);
    let long_name = scenario("{ kind = \"poisson\", rate = 1 }")
        .replace("name = \"w\"", &format!("name = \"{huge}\""));
    refused(long_name.as_bytes(), None, "longer than 64 characters");
    let dup = format!(
        "{}[[workload]]\nname = \"{huge}\"\nsources = [{{ kind = \"poisson\", rate = 1 }}]\n",
        long_name
    );
    refused(dup.as_bytes(), None, "workload");
    // A row under the 1 MiB cap is quoted in part; one over it is refused
    // as it is read.
    let row = format!("time_ns\n1\n{}\n", &huge[..512 << 10]);
    refused(
        scenario("{ kind = \"trace\", path = \"trace.csv\" }").as_bytes(),
        Some(row.as_bytes()),
        "is not a whole number",
    );
    let row = format!("time_ns\n1\n{huge}\n");
    refused(
        scenario("{ kind = \"trace\", path = \"trace.csv\" }").as_bytes(),
        Some(row.as_bytes()),
        "a row longer than 1048576 bytes",
    );
    let bad_limiter = format!(
        "{}\n[[limiter]]\nname = \"x\"\nkind = \"{huge}\"\n",
        scenario("{ kind = \"poisson\", rate = 1 }")
    );
    refused(bad_limiter.as_bytes(), None, "kind");
}

/// Runs `text` with `--stats` and returns (exit code, stderr, peak MB, chart bytes).
fn run_measured(text: &str, extra: &[&str]) -> (Option<i32>, String, f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.toml");
    fs::write(&path, text).unwrap();
    let out = dir.path().join("out");
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "-q", "--stats", "--out"])
        .arg(&out)
        .arg(&path)
        .args(extra)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let peak = stderr
        .split("peak memory ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|mb| mb.parse().ok())
        .unwrap_or(0.0);
    let charts = fs::read_dir(out.join("charts"))
        .map(|entries| entries.map(|e| e.unwrap().metadata().unwrap().len()).sum())
        .unwrap_or(0);
    (output.status.code(), stderr, peak, charts)
}

#[test]
fn a_one_nanosecond_window_draws_a_small_chart_in_little_memory() {
    // Once one SVG line per window edge: past 11 GB.
    let text = "duration = \"10ms\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 1000000 }]\n[[limiter]]\nname = \"ns\"\nkind = \"fixed-window\"\nwindow = \"1ns\"\nthreshold = 1\n";
    let (code, stderr, peak, charts) = run_measured(text, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(peak > 0.0 && peak < 100.0, "peak memory {peak} MB");
    assert!(charts < 1_000_000, "charts {charts} bytes");
}

#[test]
fn a_one_nanosecond_bucket_is_drawn_at_the_charts_resolution() {
    // Once one bar per bucket: past 4 GB. Ten million buckets stay in the limit.
    let text = "duration = \"10ms\"\n[metrics]\nbucket = \"1ns\"\nrolling = \"1ms\"\nprofile = [\"1ms\"]\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 1000000 }]\n[[limiter]]\nname = \"fixed\"\nkind = \"fixed-window\"\nwindow = \"1ms\"\nthreshold = 100\n";
    let (code, stderr, peak, charts) = run_measured(text, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(peak > 0.0 && peak < 400.0, "peak memory {peak} MB");
    assert!(charts < 1_000_000, "charts {charts} bytes");
}

#[test]
fn work_that_would_need_more_than_max_memory_is_refused_before_it_starts() {
    // 40 s of 10^6 requests per second through a log that admits them all:
    // the rolling window would hold 4·10^7 times.
    let text = "duration = \"40s\"\n[metrics]\nrolling = \"1s\"\nprofile = [\"1s\"]\nbucket = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 1000000 }]\n[[limiter]]\nname = \"log\"\nkind = \"sliding-log\"\nwindow = \"40s\"\nthreshold = 100000000\n";
    let (code, stderr, _, _) = run_measured(text, &["--max-memory", "100MB"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("more than --max-memory 100 MB") && stderr.contains("rolling windows"),
        "{stderr}"
    );
    let buckets = "duration = \"10s\"\n[metrics]\nbucket = \"1us\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 10 }]\n[[limiter]]\nname = \"f\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 1\n";
    let (code, stderr, _, _) = run_measured(buckets, &["--max-memory", "50MB"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("for timelines at a 1us bucket"), "{stderr}");
}

#[test]
fn client_keys_beyond_the_limit_are_refused_before_any_work() {
    refused(
        scenario("{ kind = \"poisson\", rate = 10, clients = { count = 10000001 } }").as_bytes(),
        None,
        "clients.count: at most 10000000",
    );
    refused(
        scenario("{ kind = \"poisson\", rate = 10, clients = { count = 6000000 } }, { kind = \"uniform\", rate = 10, clients = { count = 6000000 } }").as_bytes(),
        None,
        "up to 12000000 distinct client keys",
    );
    refused(
        scenario(
            "{ kind = \"poisson\", rate = 10, clients = { count = 5, weights = \"pareto\" } }",
        )
        .as_bytes(),
        None,
        "unknown weights \"pareto\"",
    );
}

#[test]
fn state_per_client_key_counts_toward_max_memory() {
    let text = scenario("{ kind = \"poisson\", rate = 1000000, clients = { count = 10000000 } }")
        .replace("threshold = 10\n", "threshold = 10\nper = \"key\"\n");
    // About 56 bytes a key: 560 MB, where the rest comes to 140 MB.
    over_max_memory(&text, "300MB", "MB for state per client key");
}

/// Runs `text` with `--max-memory max` and expects exit 2, `expected` in
/// the message, and no results folder.
fn over_max_memory(text: &str, max: &str, expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.toml");
    fs::write(&path, text).unwrap();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "--max-memory", max, "--out"])
        .arg(dir.path().join("out"))
        .arg(&path)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
    assert!(!dir.path().join("out").exists());
}

#[test]
fn retries_count_toward_max_requests_and_max_memory_before_any_work() {
    // 10^8 requests are within --max-requests; 100 attempts each are not.
    let many = scenario("{ kind = \"poisson\", rate = 10000000 }").replace(
        "sources = [",
        "retry = { policy = \"fixed\", max_attempts = 100 }\nsources = [",
    );
    refused(many.as_bytes(), None, "every attempt of clients that retry");
    // Within --max-requests, the attempts held within a second and the
    // requests waiting to retry are not within 100 MB.
    let text = scenario("{ kind = \"poisson\", rate = 1000000 }").replace(
        "sources = [",
        "retry = { policy = \"fixed\", max_attempts = 10 }\nsources = [",
    );
    over_max_memory(&text, "100MB", "for clients that retry");
}

#[test]
fn live_refuses_a_workload_whose_clients_retry_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retry.toml");
    fs::write(
        &path,
        scenario("{ kind = \"poisson\", rate = 10 }").replace(
            "sources = [",
            "retry = { policy = \"honour-hint\" }\nsources = [",
        ),
    )
    .unwrap();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["live", "--redis", "redis://127.0.0.1:1"])
        .arg(&path)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("live replays open-loop traffic only"),
        "{stderr}"
    );
}

#[test]
fn a_million_replications_are_tallied_in_little_memory() {
    // Once every replication's summary was kept to the end: 1.5 GB here.
    let text = "duration = \"100ms\"\n[metrics]\nbucket = \"100ms\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 20 }]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 1\n";
    let (code, stderr, peak, _) = run_measured(text, &["--replications", "1000000", "--no-charts"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(peak > 0.0 && peak < 100.0, "peak memory {peak} MB");
}

/// Text from a user's file never reaches the terminal as control sequences:
/// a window title (OSC 0), the clipboard (OSC 52), a cleared screen.
#[test]
fn control_characters_from_files_are_shown_escaped_in_messages() {
    const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}]52;c;aGk=\u{7}\u{1b}[2J";
    let check = |stderr: &[u8]| {
        let stderr = String::from_utf8_lossy(stderr);
        assert!(
            !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
            "{stderr:?}"
        );
        assert!(stderr.contains("\\u{1b}]52;c;aGk="), "{stderr}");
    };
    // A scenario whose bad line carries the sequence: quoted in the error.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.toml");
    fs::write(&path, format!("duration = \"10s\" {HOSTILE}\n")).unwrap();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("validate")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    check(&output.stderr);
    // An nginx.conf whose directive does.
    let conf = dir.path().join("nginx.conf");
    fs::write(
        &conf,
        format!("http {{\n limit_req_zone $binary_remote_addr zone=a:10m rate=5r/{HOSTILE};\n}}\n"),
    )
    .unwrap();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("import")
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    check(&output.stderr);
    // A YAML configuration's.
    let yaml = dir.path().join("traefik.yaml");
    fs::write(
        &yaml,
        format!(
            "http:\n  middlewares:\n    m:\n      rateLimit:\n        average: \"x{HOSTILE}\"\n"
        ),
    )
    .unwrap();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("import")
        .arg(&yaml)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    check(&output.stderr);
}

#[test]
fn a_cluster_of_instances_each_keeping_state_per_key_counts_toward_max_memory() {
    // Each of 10,000 local instances numbers the keys it sees in a table as
    // large as the largest key: 5.3 GB, once run under a 200 MiB limit.
    let text = "duration = \"10s\"\n[cluster]\ninstances = 10000\nmode = \"local\"\n\
        [[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 20000, clients = { count = 100000 } }]\n\
        [[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5\nper = \"key\"\n";
    over_max_memory(text, "200MiB", "GB for state per client key");
}

/// The estimate's figure, from the refusal under a limit of 1 byte, in MB.
fn estimated_mb(text: &str) -> f64 {
    let (code, stderr, _, _) = run_measured(text, &["--max-memory", "1B"]);
    assert_eq!(code, Some(2), "{stderr}");
    let about = stderr.split("about ").nth(1).unwrap_or_default();
    let mut words = about.split(' ');
    let number: f64 = words.next().and_then(|n| n.parse().ok()).unwrap();
    match words.next() {
        Some("kB") => number / 1000.0,
        Some("MB") => number,
        Some("GB") => number * 1000.0,
        unit => panic!("{unit:?} in {stderr}"),
    }
}

/// `text`'s estimate and, run without charts, its peak, in MB.
fn estimate_and_peak(what: &str, text: &str) -> (f64, f64) {
    let estimate = estimated_mb(text);
    let (code, stderr, peak, _) = run_measured(text, &["--no-charts"]);
    assert_eq!(code, Some(0), "{what}: {stderr}");
    (estimate, peak)
}

#[test]
fn the_memory_estimate_covers_what_per_key_limiters_use() {
    for limiter in [
        "kind = \"sliding-log\"\nwindow = \"10s\"\nthreshold = 64",
        "kind = \"sliding-buckets\"\nwindow = \"1s\"\nthreshold = 64\nbuckets = 100",
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5",
    ] {
        let text = format!(
            "duration = \"5s\"\n[metrics]\nbucket = \"1s\"\nprofile = [\"1s\"]\n[[workload]]\nname = \"w\"\n\
             sources = [{{ kind = \"poisson\", rate = 1000000, clients = {{ count = 50000 }} }}]\n\
             [[limiter]]\nname = \"l\"\n{limiter}\nper = \"key\"\n"
        );
        let (estimate, peak) = estimate_and_peak(limiter, &text);
        // The process itself (code, buffers, threads) is not in the estimate.
        assert!(
            peak > 0.0 && peak <= estimate + 16.0,
            "{limiter}: peak {peak} MB, estimated {estimate} MB"
        );
    }
}

/// Per key the estimate stays an upper bound near what is used: numbered
/// keys (synthetic clients, a lone trace's, a workload's traces' shared
/// numbering) index flat arrays with no hash table per limiter, the
/// traces' numbering is counted once, and the
/// packed placements of a whole-second log keep the limiters' states but
/// no figures. Once 3.9× the peak for the clients and 10× for the log.
#[test]
fn the_memory_estimate_of_many_keys_stays_near_the_peak() {
    let dir = tempfile::tempdir().unwrap();
    // 300,000 lines of a combined log, each from an address of its own,
    // 100 a second; split in two, the halves are two sources that share
    // one numbering of their keys.
    let line = |i: u32| {
        let t = i / 100;
        format!(
            "10.{}.{}.{} - - [27/Nov/2026:10:{:02}:{:02} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a\"\n",
            i >> 16,
            (i >> 8) & 255,
            i & 255,
            t / 60,
            t % 60
        )
    };
    let write = |name: &str, lines: std::ops::Range<u32>| {
        let path = dir.path().join(name);
        fs::write(&path, lines.map(line).collect::<String>()).unwrap();
        format!(
            "{{ kind = \"trace\", format = \"combined\", path = {:?}, key_field = \"remote_addr\", spread = \"none\" }}",
            path.display().to_string()
        )
    };
    let (whole, first, second) = (
        write("all.log", 0..300_000),
        write("a.log", 0..150_000),
        write("b.log", 150_000..300_000),
    );
    let log = |sources: &str| {
        format!(
            "duration = \"1h\"\n[metrics]\nrolling = \"1s\"\nprofile = [\"1s\"]\nbucket = \"1s\"\n\
             [[workload]]\nname = \"log\"\nsources = [{sources}]\n\
             [[limiter]]\nname = \"global\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 600\n\
             [[limiter]]\nname = \"per-key\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5\nper = \"key\"\n"
        )
    };
    let synthetic = "duration = \"2s\"\n[metrics]\nbucket = \"1s\"\nprofile = [\"1s\"]\n[[workload]]\nname = \"w\"\n\
        sources = [{ kind = \"poisson\", rate = 1000000, clients = { count = 1000000 } }]\n\
        [[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5\nper = \"key\"\n";
    for (what, text, most) in [
        ("10^6 clients", synthetic.to_string(), Some(3.0)),
        ("a log's numbered keys", log(&whole), Some(4.0)),
        (
            "two logs' shared numbering",
            log(&format!("{first}, {second}")),
            Some(4.0),
        ),
    ] {
        let (estimate, peak) = estimate_and_peak(what, &text);
        // A few MB for the process itself, which the estimate leaves out.
        assert!(
            peak > 0.0 && peak <= estimate + 4.0,
            "{what}: peak {peak} MB, estimated {estimate} MB"
        );
        if let Some(most) = most {
            assert!(
                estimate <= most * peak,
                "{what}: estimated {estimate} MB, more than {most}× the peak {peak} MB"
            );
        }
    }
}

#[test]
fn yaml_alias_bombs_are_refused_before_they_expand() {
    let dir = tempfile::tempdir().unwrap();
    // One 1 MB value aliased 20,000 times (20 GB expanded), and the nested
    // "billion laughs", in a value and in mapping keys.
    let big = format!(
        "http:\n  middlewares:\n    m:\n      rateLimit:\n        average: &a \"{}\"\n        list: [{}]\n",
        "x".repeat(1 << 20),
        vec!["*a"; 20_000].join(", ")
    );
    let mut laughs = String::from(
        "a0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n",
    );
    for i in 1..10 {
        let p = i - 1;
        laughs.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let keys = "base: &k {lol: 1}\nmap:\n  ? *k\n  : 1\n".to_string();
    for (name, text) in [
        ("traefik.yaml", big),
        ("kong.yaml", laughs),
        ("kong-keys.yaml", keys),
    ] {
        let path = dir.path().join(name);
        fs::write(&path, text).unwrap();
        let output = Command::cargo_bin("burstsim")
            .unwrap()
            .args([
                "import",
                "--format",
                if name.starts_with("traefik") {
                    "traefik"
                } else {
                    "kong"
                },
            ])
            .arg(&path)
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains("YAML aliases are not read"),
            "{name}: {stderr}"
        );
        assert!(stderr.contains(&format!("{name}:")), "{name}: {stderr}");
    }
}

#[test]
fn a_trace_sorted_in_memory_counts_toward_max_memory() {
    // 10^7 descending rows took 170 MB under a 32 MiB limit.
    let dir = tempfile::tempdir().unwrap();
    let mut rows = String::from("time_ns\n");
    for i in 0..1_000_000u64 {
        rows.push_str(&format!("{}\n", 1_000_000 - i));
    }
    fs::write(dir.path().join("desc.csv"), rows).unwrap();
    let text = "duration = \"1s\"\n[metrics]\nbucket = \"100ms\"\n[[workload]]\nname = \"w\"\n\
        sources = [{ kind = \"trace\", path = \"desc.csv\", rebase = true }]\n\
        [[limiter]]\nname = \"f\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n";
    let path = dir.path().join("desc.toml");
    fs::write(&path, text).unwrap();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "--max-memory", "8MiB", "--out"])
        .arg(dir.path().join("out"))
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("24 MB for sorting traces (out of order"),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists());
}

/// A trace whose whole seconds are spread holds its busiest second's rows
/// at once (32 bytes each): that counts toward --max-memory before any
/// work, and a second of more than 10^7 requests is refused by the check.
#[test]
fn a_spread_seconds_rows_count_toward_max_memory_and_too_many_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // `rows` at 1 s (after `before` at 0 s), the source's fields after its path.
    let run = |before: usize, rows: usize, fields: &str, max_memory: &str| {
        let mut text = String::from("time_s\n");
        text.push_str(&"0\n".repeat(before));
        text.push_str(&"1\n".repeat(rows));
        fs::write(dir.path().join("second.csv"), text).unwrap();
        let path = dir.path().join("second.toml");
        let source = format!("{{ kind = \"trace\", path = \"second.csv\", {fields} }}");
        fs::write(&path, scenario(&source)).unwrap();
        let out = dir.path().join("out");
        let output = Command::cargo_bin("burstsim")
            .unwrap()
            .args(["run", "--no-charts", "--max-memory", max_memory, "--out"])
            .arg(&out)
            .arg(&path)
            .output()
            .unwrap();
        let written = out.exists();
        let _ = fs::remove_dir_all(&out);
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
            written,
        )
    };
    let spread = |how: &str| format!("spread = \"{how}\"");
    // 300,000 rows in one second: 9.6 MB to spread them (said to two
    // figures), none kept on it.
    let (code, stderr, written) = run(0, 300_000, &spread("uniform"), "8MiB");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("10 MB for sorting traces (out of order, or a second spread)"),
        "{stderr}"
    );
    assert!(!written);
    let (code, stderr, written) = run(0, 300_000, &spread("none"), "8MiB");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(written);
    // A second whose stamp is before the source's start still reaches into
    // it when spread, and is held: counted. One wholly before the run's
    // start is read through, not held: not counted.
    let (code, stderr, written) = run(
        300_000,
        1,
        "spread = \"uniform\", start = \"500ms\"",
        "8MiB",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("10 MB for sorting traces"), "{stderr}");
    assert!(!written);
    let (code, stderr, written) = run(300_000, 1, "spread = \"uniform\", start = \"1s\"", "8MiB");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(written);
    // One more than the most a second may hold, refused at the check with
    // the field to change.
    let (code, stderr, written) = run(0, 10_000_001, &spread("uniform"), "4GiB");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("second.toml:4:"), "{stderr}");
    assert!(
        stderr.contains("spread: spreads each second's requests in memory, and ")
            && stderr.contains(
                "second.csv has 10000001 in one second, more than the 10000000 a second may hold"
            ),
        "{stderr}"
    );
    assert!(
        !stderr.contains("warning"),
        "refused before the run's warnings: {stderr}"
    );
    assert!(!written);
    // As many in a second past the run's end: left out, never held.
    let (code, stderr, written) = run(1, 10_000_001, "spread = \"uniform\", end = \"1s\"", "4GiB");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(written);
}

/// `count` fixed windows over one small workload.
fn many_limiters(count: usize) -> String {
    let mut text = String::from(
        "duration = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 1000 }]\n",
    );
    for i in 0..count {
        text.push_str(&format!(
            "[[limiter]]\nname = \"l{i}\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = {}\n",
            10 + i % 50
        ));
    }
    text
}

#[test]
fn charts_and_the_report_show_at_most_a_dozen_limiters_and_say_so() {
    // Once every limiter was drawn: 20,000 limiters wrote a 410 MB report
    // and took 1.4 GB under a 256 MiB limit; 100,000 aborted.
    over_max_memory(
        &many_limiters(20_000),
        "256MiB",
        "for the figures of 20000 runs",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.toml");
    fs::write(&path, many_limiters(2_000)).unwrap();
    let out = dir.path().join("out");
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&path)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    for entry in fs::read_dir(out.join("charts")).unwrap() {
        let chart = fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(chart.len() < 1_000_000, "{} bytes", chart.len());
        assert!(
            chart.contains("12 of 2000 limiters shown"),
            "the title says what is left out"
        );
    }
    let report = fs::read_to_string(out.join("report.html")).unwrap();
    assert!(report.len() < 2_000_000, "{} bytes", report.len());
    assert!(report.contains("2000 runs: the tables and charts below show 12 of 2000 limiters"));
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["runs"].as_array().unwrap().len(), 2_000);
}
