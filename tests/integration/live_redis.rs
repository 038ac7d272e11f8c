//! `burstsim live` against a real Redis: the atomic scripts agree with the
//! simulator (edges within timing jitter are followed and reported), and the
//! non-atomic GET, INCR, PEXPIRE variant over-admits.

use super::common;

use std::fs;

use assert_cmd::Command;
use serde_json::Value;

/// The scenario the README's live example runs.
fn scenario() -> String {
    fs::read_to_string("scenarios/live.toml").expect("scenarios/live.toml is shipped")
}

/// Held by every test that replays in real time: replays that share the
/// two cores with one another send late, and their comparisons then blame
/// timing on the limiter.
fn one_replay_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static REPLAYING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    REPLAYING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Live and simulated admissions differ by no more than the disagreements
/// explained by a window edge within the timing jitter (reordered pairs
/// cancel out).
fn assert_admissions_agree(r: &Value) {
    let (live, model) = (
        r["admitted_live"].as_u64().unwrap(),
        r["admitted_model"].as_u64().unwrap(),
    );
    assert!(
        live.abs_diff(model) <= r["at_edges"].as_u64().unwrap(),
        "admissions differ by more than the edges explain: {r}"
    );
}

/// A redis-server of its own for one test; None (after saying so) where
/// none is installed (these checks are ignored unless asked for, and then
/// must run).
fn started_redis() -> Option<common::RedisServer> {
    let Some(binary) = common::redis_server() else {
        common::required("not installed: redis-server; .ci/run installs Debian's");
        return None;
    };
    Some(common::RedisServer::start(&binary))
}

/// `burstsim live` on `scenario` against `url` in the background, with
/// `extra` flags and its results under `out`, its output discarded.
fn spawn_live(
    url: &str,
    scenario: &std::path::Path,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_burstsim"))
        .args(["live", "--redis", url])
        .args(extra)
        .arg("--out")
        .arg(out)
        .arg(scenario)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn live_replay_agrees_with_the_simulator_on_atomic_scripts() {
    let _alone = super::common::real_time();
    let _one_at_a_time = one_replay_at_a_time();
    let Some(server) = started_redis() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.toml");
    fs::write(&path, scenario()).unwrap();
    let url = format!("redis://127.0.0.1:{}", server.port);
    // One replay against `url` into `out`, its outputs checked; its results
    // per variant.
    let replay = |url: &str, out: &str| -> Value {
        let out = dir.path().join(out);
        Command::cargo_bin("burstsim")
            .unwrap()
            .arg("live")
            .arg(&path)
            .args(["--redis", url, "--speed", "3", "--clients", "6", "--out"])
            .arg(&out)
            .assert()
            .success();
        for file in [
            "summary.json",
            "report.html",
            "charts/timeline-edge.svg",
            "charts/worst-rolling.svg",
        ] {
            assert!(out.join(file).is_file(), "live writes {file}");
        }
        serde_json::from_str(&fs::read_to_string(out.join("live.json")).unwrap()).unwrap()
    };
    // A stall longer than the jitter the replay measured can shift one
    // window (twice in three CI runs on 2026-12-03: equal admissions, half
    // the disagreements at edges; on 2026-12-04 the naive variant, which is
    // not held to agreement here, set off the one retry there was, and the
    // retry stalled too): see `common::unless_explained`.
    const AGREEING: [&str; 2] = ["atomic-fixed-window", "sliding-log"];
    let results = common::unless_explained(
        |tries| {
            if tries == 1 {
                return replay(&url, "out");
            }
            let fresh = started_redis().expect("redis-server started once already");
            replay(
                &format!("redis://127.0.0.1:{}", fresh.port),
                &format!("again-{tries}"),
            )
        },
        |results: &Value| {
            results
                .as_array()
                .unwrap()
                .iter()
                .any(|r| AGREEING.iter().any(|v| r["variant"] == *v) && r["unexplained"] != 0)
        },
        Value::to_string,
    );
    let find = |variant: &str| {
        results
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["variant"] == variant)
            .unwrap()
            .clone()
    };
    for variant in AGREEING {
        let r = find(variant);
        assert_eq!(r["unexplained"], 0, "{variant}: {r}");
        assert_admissions_agree(&r);
    }
    // 200 requests within 2 ms from 8 clients: separate GET and INCR race.
    Command::cargo_bin("burstsim")
        .unwrap()
        .arg("live")
        .arg(&path)
        .args([
            "--redis",
            &url,
            "--speed",
            "1",
            "--clients",
            "8",
            "--workload",
            "burst",
            "--out",
        ])
        .arg(dir.path().join("out"))
        .assert()
        .success();
    let results: Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join("out/live.json")).unwrap())
            .unwrap();
    let naive = results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["variant"] == "naive-fixed-window")
        .unwrap();
    let atomic = results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["variant"] == "atomic-fixed-window")
        .unwrap();
    assert_admissions_agree(atomic);
    assert!(
        naive["admitted_live"].as_u64() > naive["admitted_model"].as_u64(),
        "the naive variant over-admits: {naive}"
    );
}

#[test]
fn live_names_an_unreachable_redis_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.toml");
    fs::write(&path, scenario()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("live")
        .arg(&path)
        .args(["--redis", &format!("redis://127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot connect to Redis"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A port that accepts connections and never answers, like a hung server.
fn silent_port() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

#[test]
fn live_against_a_silent_port_exits_2_within_its_timeout() {
    let (_listener, port) = silent_port();
    let started = std::time::Instant::now();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .args([
            "live",
            "scenarios/live.toml",
            "--timeout",
            "500ms",
            "--redis",
        ])
        .arg(format!("redis://127.0.0.1:{port}"))
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("within 500ms: no answer"), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn live_refuses_a_speed_that_would_run_longer_than_the_wall_time_limit() {
    Command::cargo_bin("burstsim")
        .unwrap()
        .args([
            "live",
            "scenarios/live.toml",
            "--redis",
            "redis://127.0.0.1:1",
            "--speed",
            "1e-300",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("more than --max-wall-time 3600s"));
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn a_live_run_killed_midway_leaves_no_sliding_log_key_without_expiry() {
    let _alone = super::common::real_time();
    let _one_at_a_time = one_replay_at_a_time();
    let Some(server) = started_redis() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.toml");
    fs::write(
        &path,
        "duration = \"5s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 200 }]\n\
         [[limiter]]\nname = \"log\"\nkind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 50\n",
    )
    .unwrap();
    let url = format!("redis://127.0.0.1:{}", server.port);
    let mut child = spawn_live(&url, &path, &dir.path().join("out"), &[]);
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys = |con: &mut redis::Connection| -> Vec<String> {
        redis::cmd("KEYS").arg("burstsim:*").query(con).unwrap()
    };
    let started = std::time::Instant::now();
    while keys(&mut con).is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "live never wrote a key"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let left = keys(&mut con);
    assert!(!left.is_empty(), "the kill came before any key");
    for key in left {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
        assert!(ttl > 0, "{key} has no expiry (PTTL {ttl})");
    }
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn live_through_a_paused_redis_reports_what_each_policy_lets_through() {
    let _alone = super::common::real_time();
    let _one_at_a_time = one_replay_at_a_time();
    let Some(server) = started_redis() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pause.toml");
    fs::write(
        &path,
        "duration = \"4s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 200 }]\n\
         [[limiter]]\nname = \"fixed\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 50\n",
    )
    .unwrap();
    let url = format!("redis://127.0.0.1:{}", server.port);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_burstsim"))
        .args([
            "live",
            "--redis",
            &url,
            "--clients",
            "4",
            "--timeout",
            "100ms",
            "--through-outages",
            "--out",
        ])
        .arg(dir.path().join("out"))
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The atomic window's replay runs first, for 4 s: pause Redis through
    // its second second.
    std::thread::sleep(std::time::Duration::from_millis(1_200));
    server.signal("STOP");
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    server.signal("CONT");
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("Requests Redis did not answer within 100ms"),
        "{stdout}"
    );
    let results: Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join("out/live.json")).unwrap())
            .unwrap();
    let atomic = results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["variant"] == "atomic-fixed-window")
        .unwrap();
    let unanswered = atomic["store_errors"].as_u64().unwrap();
    assert!(
        unanswered >= 20,
        "a second's pause leaves requests unanswered: {atomic}"
    );
    let policy = |name: &str, field: &str| atomic["on_error"][name][field].as_u64().unwrap();
    assert_eq!(
        policy("allow", "admitted_unanswered"),
        unanswered,
        "{atomic}"
    );
    assert_eq!(policy("deny", "admitted_unanswered"), 0, "{atomic}");
    assert_eq!(
        policy("deny", "admitted"),
        atomic["admitted_live"].as_u64().unwrap()
    );
    // Four clients, each its own 50 per second: some, and at most 4 × 50 per window met.
    let local = policy("local", "admitted_unanswered");
    assert!(
        local > 0 && local < unanswered.max(1) + 1 && local <= 4 * 50 * 3,
        "{atomic}"
    );
    assert!(
        policy("allow", "worst_1s") >= policy("local", "worst_1s"),
        "{atomic}"
    );
    assert!(
        policy("local", "worst_1s") >= policy("deny", "worst_1s"),
        "{atomic}"
    );
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn a_live_run_killed_during_the_naive_window_leaves_no_key_without_expiry() {
    let _alone = super::common::real_time();
    let _one_at_a_time = one_replay_at_a_time();
    let Some(server) = started_redis() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("naive.toml");
    // The atomic script's replay first (1 s), then GET before INCR.
    fs::write(
        &path,
        "duration = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 400 }]\n\
         [[limiter]]\nname = \"fixed\"\nkind = \"fixed-window\"\nwindow = \"100ms\"\nthreshold = 5\n",
    )
    .unwrap();
    let url = format!("redis://127.0.0.1:{}", server.port);
    let mut child = spawn_live(&url, &path, &dir.path().join("out"), &["--clients", "8"]);
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let naive = |con: &mut redis::Connection| -> Vec<String> {
        redis::cmd("KEYS")
            .arg("burstsim:*NaiveFixedWindow")
            .query(con)
            .unwrap()
    };
    let started = std::time::Instant::now();
    while naive(&mut con).is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "live never wrote a naive window's key"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Killed while eight clients GET, INCR and expire: every key must expire.
    std::thread::sleep(std::time::Duration::from_millis(150));
    child.kill().unwrap();
    child.wait().unwrap();
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("burstsim:*")
        .query(&mut con)
        .unwrap();
    for key in left {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
        // -2: expired since KEYS listed it.
        assert!(ttl > 0 || ttl == -2, "{key} has no expiry (PTTL {ttl})");
    }
}

#[test]
fn a_password_in_the_redis_url_never_reaches_an_error_message() {
    let (_listener, port) = silent_port();
    for url in [
        format!("redis://user:hunter2@127.0.0.1:{port}"),
        "redis://user:hunter2@127.0.0.1:1".to_string(),
        "redis://user:hunter2@[::1".to_string(),
    ] {
        let output = Command::cargo_bin("burstsim")
            .unwrap()
            .args([
                "live",
                "scenarios/live.toml",
                "--timeout",
                "300ms",
                "--redis",
            ])
            .arg(&url)
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{url}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{url}: {stderr}");
        assert!(stderr.contains("user:****@"), "{url}: {stderr}");
    }
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn max_wall_time_holds_while_redis_stops_answering() {
    let _alone = super::common::real_time();
    let _one_at_a_time = one_replay_at_a_time();
    let Some(server) = started_redis() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.toml");
    fs::write(
        &path,
        "duration = \"2s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 50 }]\n\
         [[limiter]]\nname = \"fixed\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 50\n",
    )
    .unwrap();
    let url = format!("redis://127.0.0.1:{}", server.port);
    let started = std::time::Instant::now();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_burstsim"))
        .args(["live", "--redis", &url, "--clients", "1", "--timeout", "1s"])
        .args(["--through-outages", "--max-wall-time", "4s", "--out"])
        .arg(dir.path().join("out"))
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // 100 requests a second apart each once Redis stops: about 100 s unbounded.
    std::thread::sleep(std::time::Duration::from_millis(500));
    server.signal("STOP");
    let output = child.wait_with_output().unwrap();
    server.signal("CONT");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--max-wall-time"), "{stderr}");
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(8), "{took:?}");
    assert!(!dir.path().join("out").exists());
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn live_refuses_a_trace_whose_stream_ends_in_an_error() {
    let _alone = super::common::real_time();
    let _one_at_a_time = one_replay_at_a_time();
    let Some(server) = started_redis() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    fs::write(&trace, "time_ns\n100000000\n200000000\n300000000\n").unwrap();
    let path = dir.path().join("trace.toml");
    fs::write(
        &path,
        "duration = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"trace\", path = \"t.csv\" }]\n\
         [[limiter]]\nname = \"fixed\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 50\n",
    )
    .unwrap();
    let url = format!("redis://127.0.0.1:{}", server.port);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_burstsim"))
        .args(["live", "--redis", &url, "--out"])
        .arg(dir.path().join("out"))
        .arg(&path)
        .env("BURSTSIM_PAUSE_AT", "live:arrivals")
        // A trace's checked rows are replayed whatever happens to the file
        // later; past 1 GiB of them it is read again, and checked again.
        .env("BURSTSIM_KEEP_ROWS", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !fs::read_to_string(format!("/proc/{}/stat", child.id())).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, s)| s.starts_with('T'))
    }) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "never paused"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The file changes in place after it was checked, keeping its size,
    // inode and time: only the stream's own check can tell.
    let modified = fs::metadata(&trace).unwrap().modified().unwrap();
    fs::write(&trace, "time_ns\n100000000\n200000000\n900000000\n").unwrap();
    let file = fs::File::options().write(true).open(&trace).unwrap();
    file.set_modified(modified).unwrap();
    drop(file);
    let resumed = std::process::Command::new("kill")
        .args(["-CONT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(resumed.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("changed"), "{stderr}");
    assert!(!dir.path().join("out").exists());
}

#[test]
fn live_refuses_a_trace_that_run_refuses() {
    let dir = tempfile::tempdir().unwrap();
    // Rows out of order beyond what a trace may hold sorted: run refuses it.
    fs::write(dir.path().join("t.csv"), "time_ns\n5\n3\nx\n").unwrap();
    let path = dir.path().join("trace.toml");
    fs::write(
        &path,
        "duration = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"trace\", path = \"t.csv\" }]\n\
         [[limiter]]\nname = \"fixed\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 50\n",
    )
    .unwrap();
    let run = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "--out"])
        .arg(dir.path().join("run"))
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let (_listener, port) = silent_port();
    let live = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["live", "--timeout", "300ms", "--redis"])
        .arg(format!("redis://127.0.0.1:{port}"))
        .arg("--out")
        .arg(dir.path().join("live"))
        .arg(&path)
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&live.stderr);
    assert_eq!(live.status.code(), Some(2), "{stderr}");
    assert!(!dir.path().join("live").exists());
}
