//! The `burstsim` command as users meet it: every shipped scenario runs, the
//! headline figures hold, results are deterministic, and bad input gets one
//! clear message and exit status 2.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

use super::common;
use predicates::prelude::*;
use serde_json::Value;

fn burstsim() -> Command {
    Command::cargo_bin("burstsim").expect("the binary is built for tests")
}

/// Runs `scenario` into a fresh folder and returns the folder and summary.json.
fn run(scenario: &str, extra: &[&str]) -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out = dir.path().join("out");
    burstsim()
        .args(["run", scenario, "--quiet", "--out"])
        .arg(&out)
        .args(extra)
        .assert()
        .success();
    let json = fs::read_to_string(out.join("summary.json")).expect("summary.json is written");
    (
        dir,
        serde_json::from_str(&json).expect("summary.json is JSON"),
    )
}

fn find<'a>(summary: &'a Value, workload: &str, limiter: &str) -> &'a Value {
    summary["runs"]
        .as_array()
        .expect("runs is an array")
        .iter()
        .find(|run| run["workload"] == workload && run["limiter"] == limiter)
        .unwrap_or_else(|| panic!("no run {workload} × {limiter}"))
}

#[test]
fn every_shipped_scenario_runs_and_writes_its_files() {
    let found = common::shipped_scenarios();
    assert!(
        found.len() >= 5,
        "expected the shipped scenarios, found {found:?}"
    );
    for scenario in found {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        burstsim()
            .arg("run")
            .arg(&scenario)
            .arg("--out")
            .arg(&out)
            .assert()
            .success()
            .stdout(predicate::str::contains("workload"));
        for file in ["summary.json", "summary.csv", "timeline.csv"] {
            assert!(
                out.join(file).is_file(),
                "{} wrote no {file}",
                scenario.display()
            );
        }
        let summary: Value =
            serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        for run in summary["runs"].as_array().unwrap() {
            // A bound is a number, or null where there is none.
            let bound = run["bound"]
                .as_u64()
                .or(run["bound"].is_null().then_some(u64::MAX));
            assert!(
                run["worst_rolling"].as_u64() <= bound,
                "{} exceeds its bound: {run}",
                scenario.display()
            );
            assert_ne!(run["bound"].as_u64(), Some(u64::MAX), "{run}");
        }
    }
}

#[test]
fn promo_shows_the_fixed_window_letting_200_through_in_one_second() {
    let (_dir, summary) = run("scenarios/promo.toml", &[]);
    let fixed = find(&summary, "edge-burst", "fixed-1s");
    assert_eq!(fixed["worst_rolling"], 200);
    assert_eq!(fixed["rolling_ns"], 1_000_000_000u64);
    assert_eq!(fixed["spike_ratio"], 2.0);
    assert_eq!(fixed["backend"]["over_capacity"], 50);
    assert!(
        find(&summary, "edge-burst", "sliding-log")["worst_rolling"]
            .as_u64()
            .unwrap()
            <= 100
    );
    let buffered = find(&summary, "edge-burst", "buffered-70");
    assert_eq!(
        buffered["bound"], 210,
        "the 70% buffer of 150 is 105, and 2 × 105 = 210"
    );
    assert!(
        buffered["backend"]["over_capacity"].as_u64().unwrap() > 0,
        "the 70% buffer is still over capacity"
    );
}

#[test]
fn basic_shows_20_requests_in_200_milliseconds() {
    let (_dir, summary) = run("scenarios/basic.toml", &[]);
    let fixed = find(&summary, "boundary-pair", "fixed-window");
    let at_200ms = fixed["profile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["interval_ns"] == 200_000_000)
        .unwrap();
    assert_eq!(at_200ms["worst"], 20);
    assert_eq!(
        find(&summary, "boundary-pair", "sliding-log")["worst_rolling"],
        10
    );
}

#[test]
fn the_same_seed_gives_byte_identical_json_and_another_seed_does_not() {
    let read = |seed: &str| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        burstsim()
            .args([
                "run",
                "scenarios/promo.toml",
                "--quiet",
                "--seed",
                seed,
                "--out",
            ])
            .arg(&out)
            .assert()
            .success();
        fs::read(out.join("summary.json")).unwrap()
    };
    assert_eq!(read("42"), read("42"));
    assert_ne!(read("42"), read("43"));
}

#[test]
fn format_json_prints_exactly_summary_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let printed = burstsim()
        .args(["run", "scenarios/basic.toml", "--format", "json", "--out"])
        .arg(&out)
        .assert()
        .success();
    let written = fs::read(out.join("summary.json")).unwrap();
    assert_eq!(printed.get_output().stdout, written);
}

#[test]
fn summary_json_has_the_documented_keys() {
    let (_dir, summary) = run("scenarios/promo.toml", &[]);
    assert_eq!(summary["scenario"], "promo");
    assert_eq!(summary["seed"], 42);
    let keys = [
        "workload",
        "limiter",
        "kind",
        "offered",
        "admitted",
        "rejected",
        "rolling_ns",
        "worst_rolling",
        "worst_rolling_start_ns",
        "nominal",
        "spike_ratio",
        "bound",
        "profile",
        "backend",
    ];
    let first = &summary["runs"][0];
    for key in keys {
        assert!(first.get(key).is_some(), "missing {key} in {first}");
    }
    assert!(
        first["profile"][0].get("interval_ns").is_some()
            && first["profile"][0].get("worst").is_some()
    );
}

#[test]
fn decisions_are_written_one_file_per_run() {
    let (dir, _) = run("scenarios/basic.toml", &["--decisions"]);
    let file = dir
        .path()
        .join("out/decisions/boundary-pair/sliding-log.csv");
    let text = fs::read_to_string(&file).expect("a decisions file per run");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time_ns,key,admitted"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 20);
    assert_eq!(rows.iter().filter(|row| row.ends_with(",true")).count(), 10);
    assert_eq!(
        rows[0], "900000000,0,true",
        "synthetic traffic is the default key's"
    );
}

#[test]
fn validate_reports_a_valid_scenario() {
    burstsim()
        .args(["validate", "scenarios/promo.toml"])
        .assert()
        .success()
        .stdout(predicate::str::contains("is valid"));
}

/// Writes promo.toml with `from` replaced by `to` into a temporary folder.
fn broken(from: &str, to: &str) -> (tempfile::TempDir, PathBuf) {
    let text = fs::read_to_string("scenarios/promo.toml").unwrap();
    assert!(
        text.contains(from),
        "promo.toml no longer contains {from:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    fs::write(&path, text.replacen(from, to, 1)).unwrap();
    (dir, path)
}

/// The 1-based line of promo.toml where `text` starts.
fn line_of(text: &str) -> usize {
    let promo = fs::read_to_string("scenarios/promo.toml").unwrap();
    promo[..promo.find(text).expect("text in promo.toml")]
        .matches('\n')
        .count()
        + 1
}

/// Runs a broken scenario and checks exit 2, the message, and that nothing was written.
fn rejects(from: &str, to: &str, expected: &[&str]) {
    let (dir, path) = broken(from, to);
    let out = dir.path().join("out");
    let assert = burstsim()
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2)
        .stdout("");
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.starts_with("error: "), "{stderr}");
    for part in expected {
        assert!(stderr.contains(part), "expected {part:?} in: {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing but the scenario may be left: {stderr}"
    );
}

#[test]
fn a_misspelt_key_names_the_file_line_and_key() {
    rejects(
        "threshold = 100\n\n[[limiter]]\nname = \"smaller",
        "threshhold = 100\n\n[[limiter]]\nname = \"smaller",
        &["bad.toml:", "limiter \"fixed-1s\"", "threshhold"],
    );
    let at = format!(
        "bad.toml:{}:1: unknown key \"durations\"",
        line_of("duration = \"60s\"")
    );
    rejects("duration = \"60s\"", "durations = \"60s\"", &[&at]);
}

#[test]
fn an_unknown_kind_lists_the_known_ones() {
    rejects(
        "kind = \"sliding-log\"",
        "kind = \"leaky-bucket\"",
        &["limiter \"sliding-log\"", "leaky-bucket", "token-bucket"],
    );
}

#[test]
fn zero_and_negative_values_are_refused_with_the_field() {
    rejects("threshold = 100", "threshold = 0", &["threshold"]);
    rejects("threshold = 100", "threshold = -5", &["threshold"]);
    rejects(
        "window = \"1s\"",
        "window = \"0s\"",
        &["window: must be longer than 0"],
    );
    rejects(
        "duration = \"60s\"",
        "duration = \"-60s\"",
        &["duration", "invalid duration"],
    );
    rejects(
        "{ kind = \"poisson\", rate = 80 }",
        "{ kind = \"poisson\", rate = -80 }",
        &["workload \"steady\", source 1", "rate"],
    );
    rejects("capacity = 150 ", "capacity = 0 ", &["capacity"]);
}

#[test]
fn duplicate_names_are_refused() {
    rejects(
        "name = \"smaller-100ms\"",
        "name = \"fixed-1s\"",
        &["limiter \"fixed-1s\"", "used twice"],
    );
}

#[test]
fn a_malformed_file_names_its_line_and_column() {
    let at = format!("bad.toml:{}:8: ", line_of("seed = 42"));
    rejects("seed = 42", "seed = = 42", &[&at, "seed = = 42"]);
}

#[test]
fn a_missing_trace_names_the_file() {
    let (dir, path) = broken(
        "name = \"steady\"\nsources = [{ kind = \"poisson\", rate = 80 }]",
        "name = \"steady\"\nsources = [{ kind = \"trace\", path = \"nowhere.csv\" }]",
    );
    burstsim()
        .arg("validate")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nowhere.csv"));
    drop(dir);
}

#[test]
fn a_missing_scenario_is_exit_2() {
    burstsim()
        .args(["run", "scenarios/no-such-file.toml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "cannot read scenario scenarios/no-such-file.toml",
        ));
}

#[test]
fn an_unwritable_output_folder_is_exit_2_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    fs::write(&blocker, "not a folder").unwrap();
    burstsim()
        .args(["run", "scenarios/basic.toml", "--out"])
        .arg(blocker.join("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("output folder"));
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_folder_that_is_not_burstsim_output_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("precious.txt"), "keep me").unwrap();
    burstsim()
        .args(["run", "scenarios/basic.toml", "--out"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not burstsim's to replace"));
    assert!(dir.path().join("precious.txt").is_file());
}

#[test]
fn a_rerun_replaces_earlier_results_and_leaves_no_staging_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for seed in ["1", "2"] {
        burstsim()
            .args([
                "run",
                "scenarios/basic.toml",
                "--quiet",
                "--seed",
                seed,
                "--out",
            ])
            .arg(&out)
            .assert()
            .success();
    }
    let summary = fs::read_to_string(out.join("summary.json")).unwrap();
    assert!(summary.contains("\"seed\": 2"));
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![Path::new("out").as_os_str().to_owned()]);
}

#[test]
fn prints_shell_completions() {
    burstsim()
        .args(["completions", "bash"])
        .assert()
        .success()
        .stdout(predicate::str::contains("burstsim"));
}

#[test]
fn help_lists_the_commands() {
    burstsim()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("run").and(predicate::str::contains("validate")));
}

#[test]
fn replications_report_statistics_and_do_not_depend_on_the_number_of_threads() {
    let read = |threads: &str| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        burstsim()
            .env("RAYON_NUM_THREADS", threads)
            .args([
                "run",
                "scenarios/promo.toml",
                "--quiet",
                "--no-charts",
                "--replications",
                "6",
                "--out",
            ])
            .arg(&out)
            .assert()
            .success();
        fs::read(out.join("summary.json")).unwrap()
    };
    let one = read("1");
    assert_eq!(
        one,
        read("2"),
        "the same summary.json on one thread and two"
    );
    let summary: Value = serde_json::from_slice(&one).unwrap();
    let steady = find(&summary, "steady", "fixed-1s");
    let stats = &steady["replications"];
    assert_eq!(stats["count"], 6);
    assert!(
        stats["worst_rolling"]["max"].as_f64().unwrap()
            >= steady["worst_rolling"].as_f64().unwrap()
    );
    assert!(
        stats["worst_rolling"]["p50"].as_f64().unwrap()
            <= stats["worst_rolling"]["max"].as_f64().unwrap()
    );
    // Deterministic workloads run once.
    assert_eq!(
        find(&summary, "edge-burst", "fixed-1s")["replications"]["count"],
        6
    );
    let (_dir, basic) = run("scenarios/basic.toml", &["--replications", "4"]);
    assert_eq!(
        find(&basic, "boundary-pair", "fixed-window")["replications"]["count"],
        1,
        "even bursts are deterministic"
    );
}

/// replay.toml with `rebase = true` removed: epoch timestamps fall far
/// beyond the one-minute run.
fn replay_without_rebase() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string("scenarios/replay.toml")
        .unwrap()
        .replace(", rebase = true", "")
        .replace(
            "traces/checkout-sample.csv",
            &fs::canonicalize("scenarios/traces/checkout-sample.csv")
                .unwrap()
                .display()
                .to_string(),
        );
    let path = dir.path().join("epoch.toml");
    fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn a_replay_that_drops_every_row_is_refused_by_run_check_and_validate() {
    let (dir, path) = replay_without_rebase();
    for command in ["run", "check", "validate"] {
        burstsim()
            .current_dir(dir.path())
            .arg(command)
            .arg(&path)
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("all 2562 rows fall outside")
                    .and(predicate::str::contains("set rebase = true")),
            );
    }
    assert!(!dir.path().join("output").exists());
}

#[test]
fn a_workload_that_offers_nothing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.toml");
    fs::write(
        &path,
        "duration = \"1ms\"\nseed = 1\n[[workload]]\nname = \"quiet\"\nsources = [{ kind = \"poisson\", rate = 1 }]\n\
         [[limiter]]\nname = \"l\"\nkind = \"sliding-log\"\nwindow = \"100us\"\nthreshold = 10\n",
    )
    .unwrap();
    burstsim()
        .current_dir(dir.path())
        .args(["check", "--capacity", "10"])
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "workload \"quiet\" offers no requests",
        ));
}

#[test]
fn a_partial_drop_is_a_warning_that_check_and_quiet_runs_still_print() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.toml");
    let text = fs::read_to_string("scenarios/replay.toml")
        .unwrap()
        .replace("duration = \"60s\"", "duration = \"30s\"")
        .replace(
            "traces/checkout-sample.csv",
            &fs::canonicalize("scenarios/traces/checkout-sample.csv")
                .unwrap()
                .display()
                .to_string(),
        );
    fs::write(&path, text).unwrap();
    for args in [vec!["check"], vec!["run", "-q", "--no-charts"]] {
        burstsim()
            .current_dir(dir.path())
            .args(&args)
            .arg(&path)
            .assert()
            .stderr(
                predicate::str::contains("rows fall outside")
                    .and(predicate::str::contains("are left out")),
            );
    }
}

#[test]
fn errors_point_at_the_value_in_the_scenarios_words() {
    let threshold = line_of("threshold = 100");
    rejects(
        "threshold = 100",
        "threshold = 0",
        &[
            &format!(
                "bad.toml:{threshold}:13: limiter \"fixed-1s\": threshold: expected a whole number ≥ 1, got 0"
            ),
            "threshold = 0\n",
        ],
    );
    rejects(
        "threshold = 100",
        "threshold = 5.0",
        &["expected a whole number ≥ 1, got 5.0"],
    );
    let window = line_of("window = \"1s\"");
    rejects(
        "window = \"1s\"",
        "window = 1",
        &[
            &format!("bad.toml:{window}:10: "),
            "expected a duration such as \"1s\"",
        ],
    );
    for (from, to) in [
        ("threshold = 100", "threshold = 0"),
        ("threshold = 100", "threshold = 5.0"),
    ] {
        let (dir, path) = broken(from, to);
        let stderr = burstsim()
            .current_dir(dir.path())
            .arg("validate")
            .arg(&path)
            .assert()
            .code(2)
            .get_output()
            .stderr
            .clone();
        let stderr = String::from_utf8_lossy(&stderr);
        for leak in [
            "u64",
            "nonzero",
            "floating point",
            "invalid type",
            "invalid value",
        ] {
            assert!(!stderr.contains(leak), "{leak:?} leaks into: {stderr}");
        }
    }
}

#[test]
fn a_bad_cluster_mode_is_blamed_on_the_cluster_section() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.toml");
    let text = fs::read_to_string("scenarios/basic.toml").unwrap()
        + "\n[cluster]\ninstances = 2\nmode = \"bogus\"\n";
    let line = text.lines().position(|l| l.starts_with("mode = ")).unwrap() + 1;
    fs::write(&path, text).unwrap();
    burstsim()
        .arg("validate")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(format!(
                "cluster.toml:{line}:8: cluster: mode: unknown value \"bogus\""
            ))
            .and(predicate::str::contains("limiter").not()),
        );
}

#[test]
fn per_key_epoch_windows_reset_together_and_first_request_windows_do_not() {
    let (_dir, summary) = run("scenarios/per-key.toml", &["--no-charts"]);
    let worst = |limiter: &str| {
        find(&summary, "api", limiter)["worst_rolling"]
            .as_u64()
            .unwrap()
    };
    let quotas = 10_000 * 10;
    let epoch = worst("epoch-window");
    assert!(
        epoch * 10 > quotas * 17,
        "every key's window resets at the same instant: {epoch} in a second, near 2 × {quotas}"
    );
    assert!(
        worst("first-request") * 10 < quotas * 12,
        "resets spread over the keys' own first requests"
    );
    assert!(
        worst("sliding-log") <= quotas,
        "no key above its 10 per second"
    );
    let run = find(&summary, "api", "epoch-window");
    let keys = &run["keys"];
    assert_eq!(keys["keys"], 10_000);
    assert_eq!(
        keys["worst_rolling_max"], 20,
        "one key: 10 before the edge, 10 after"
    );
    assert_eq!(run["bound"].as_u64(), Some(10_000 * 20), "K × 2N");
    let state = &keys["state"];
    assert_eq!(state["keys_alive_max"], 10_000);
    assert_eq!(state["bytes_per_key"], 129);
    let ops = state["store_ops_per_request"].as_f64().unwrap();
    assert!(
        ops > 1.0 && ops < 1.2,
        "INCR each, PEXPIRE per window opened: {ops}"
    );
}

#[test]
fn a_fail_open_store_outage_lets_the_whole_offered_load_through() {
    let (_dir, summary) = run("scenarios/store-outage.toml", &["--no-charts"]);
    let outage = |limiter: &str| find(&summary, "steady-500", limiter)["outages"][0].clone();
    let open = outage("fail-open");
    assert!(open["offered_worst_1s"].as_u64().unwrap() > 450, "{open}");
    assert_eq!(open["worst_1s_during"], open["offered_worst_1s"], "{open}");
    assert_eq!(open["admitted"], open["offered"], "{open}");
    // No bound over any traffic: null, never u64::MAX written out.
    assert!(find(&summary, "steady-500", "fail-open")["bound"].is_null());
    let closed = outage("fail-closed");
    assert_eq!(
        (
            closed["admitted"].as_u64(),
            closed["worst_1s_during"].as_u64()
        ),
        (Some(0), Some(0)),
        "{closed}"
    );
    // Three instances, each its own 100 per second: three times the limit, within their bound.
    let local = outage("local-fallback");
    let worst = local["worst_1s_during"].as_u64().unwrap();
    assert!((250..=600).contains(&worst), "{local}");
    assert_eq!(local["admitted"], 1500, "3 instances × 100 × 5 s: {local}");
    // The failover gives back a second of increments: a second window's worth.
    let failover = find(&summary, "steady-500", "failover");
    assert!(
        failover["worst_rolling"].as_u64().unwrap() > 150,
        "{failover}"
    );
    assert!(failover.get("outages").is_none());
}

#[test]
fn kong_and_envoy_ratelimit_hints_count_whole_seconds_from_the_response() {
    // Rejected through the first half second and told to come back in whole
    // seconds, clients return spread as they came, not in a herd at the
    // window's edge; a model of an exact instant (a plain fixed window)
    // herds them all.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("herd.toml");
    std::fs::write(
        &path,
        "duration = \"3s\"\n[[workload]]\nname = \"w\"\nretry = { policy = \"honour-hint\", max_attempts = 2 }\n\
         sources = [{ kind = \"uniform\", rate = 60, end = \"500ms\" }]\n\
         [[limiter]]\nname = \"kong\"\nkind = \"kong\"\nsecond = 10\n\
         [[limiter]]\nname = \"envoy\"\nkind = \"envoy-ratelimit\"\nrequests_per_unit = 10\nunit = \"second\"\n\
         [[limiter]]\nname = \"fixed\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
    )
    .unwrap();
    let output = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "--format", "json", "--no-charts", "--out"])
        .arg(dir.path().join("out"))
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let share = |limiter: &str| {
        summary["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["limiter"] == limiter)
            .unwrap()["closed_loop"]["retries_after_reset_share"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(share("kong"), 0.0);
    assert_eq!(share("envoy"), 0.0);
    assert_eq!(share("fixed"), 1.0);
}

/// The busiest client is named as the input names it — a trace's key column,
/// in CSV and in JSON lines — not by its hash.
#[test]
fn the_busiest_client_is_named_by_its_own_text() {
    let dir = tempfile::tempdir().unwrap();
    // 198.51.100.9 sends 5 in a second; the others one each.
    let mut csv = String::from("time_ns,client\n");
    let mut jsonl = String::new();
    for (i, client) in [
        "10.0.0.1",
        "198.51.100.9",
        "198.51.100.9",
        "10.0.0.2",
        "198.51.100.9",
        "198.51.100.9",
        "198.51.100.9",
    ]
    .iter()
    .enumerate()
    {
        csv.push_str(&format!("{},{client}\n", i * 1_000_000));
        jsonl.push_str(&format!(
            "{{\"time\": 1700000000.{i}, \"user\": {{\"ip\": 1}}, \"who\": \"{client}\"}}\n"
        ));
    }
    fs::write(dir.path().join("t.csv"), csv).unwrap();
    fs::write(dir.path().join("t.jsonl"), jsonl).unwrap();
    for (source, key) in [
        (
            "{ kind = \"trace\", path = \"t.csv\", key = \"client\" }",
            "198.51.100.9",
        ),
        (
            "{ kind = \"trace\", path = \"t.jsonl\", format = \"jsonl\", key = \"who\" }",
            "198.51.100.9",
        ),
    ] {
        let scenario = dir.path().join("s.toml");
        fs::write(
            &scenario,
            format!(
                "duration = \"20s\"\n[[workload]]\nname = \"w\"\nsources = [{source}]\n[[limiter]]\nname = \"per-ip\"\nkind = \"token-bucket\"\nrate = 100\nburst = 100\nper = \"key\"\n"
            ),
        )
        .unwrap();
        let (_out, summary) = run(scenario.to_str().unwrap(), &["--no-charts"]);
        let keys = &summary["runs"][0]["keys"];
        assert_eq!(keys["worst_key_name"], key, "{source}: {keys}");
        assert_eq!(keys["worst_rolling_max"], 5, "{source}: {keys}");
    }
}

#[test]
fn decisions_name_each_request_s_client_as_its_input_does() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("t.csv"),
        "time_ns,client\n0,10.0.0.1\n1,\"acme, inc\"\n2,10.0.0.1\n",
    )
    .unwrap();
    let scenario = dir.path().join("s.toml");
    fs::write(
        &scenario,
        "duration = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"trace\", path = \"t.csv\", key = \"client\" }]\n[[limiter]]\nname = \"per-ip\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 1\nper = \"key\"\n",
    )
    .unwrap();
    let (out, _) = run(scenario.to_str().unwrap(), &["--no-charts", "--decisions"]);
    let text = fs::read_to_string(out.path().join("out/decisions/w/per-ip.csv")).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows[0], "time_ns,key,admitted,client");
    let cells = |row: &str| row.split(',').map(str::to_string).collect::<Vec<_>>();
    assert!(rows[1].ends_with(",true,10.0.0.1"), "{text}");
    assert!(rows[2].ends_with(",true,\"acme, inc\""), "{text}");
    assert!(rows[3].ends_with(",false,10.0.0.1"), "{text}");
    assert_eq!(cells(rows[1])[1], cells(rows[3])[1], "one key, one client");
    // Replayed by number, named by their text's hash as before.
    let hash = |text: &[u8]| burstsim::traffic::Key::named(text).client.to_string();
    assert_eq!(cells(rows[1])[1], hash(b"10.0.0.1"), "{text}");
    assert_ne!(cells(rows[2])[1], hash(b"10.0.0.1"), "{text}");
}

/// `[metrics] per_key = false` leaves out the figures per key and nothing
/// else: the same decisions, the same worst counts.
#[test]
fn figures_per_key_can_be_left_out_without_changing_a_decision() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |per_key: &str| {
        let path = dir.path().join(format!("s-{}.toml", per_key.len()));
        fs::write(
            &path,
            format!("duration = \"3s\"\nseed = 4\n[metrics]\n{per_key}\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"poisson\", rate = 20000, clients = {{ count = 500 }} }}]\n[[limiter]]\nname = \"per-client\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 30\nper = \"key\"\n[[limiter]]\nname = \"global\"\nkind = \"token-bucket\"\nrate = 9000\nburst = 500\n"),
        )
        .unwrap();
        let (out, _) = run(path.to_str().unwrap(), &["--no-charts"]);
        let summary: Value =
            serde_json::from_str(&fs::read_to_string(out.path().join("out/summary.json")).unwrap())
                .unwrap();
        summary["runs"].as_array().unwrap().clone()
    };
    let with = scenario("");
    let without = scenario("per_key = false");
    assert_eq!(with.len(), 2);
    for (with, without) in with.iter().zip(&without) {
        assert!(with["keys"]["keys"].as_u64().unwrap() > 400, "{with}");
        assert!(without.get("keys").is_none_or(Value::is_null), "{without}");
        for figure in [
            "offered",
            "admitted",
            "worst_rolling",
            "worst_rolling_start_ns",
        ] {
            assert_eq!(with[figure], without[figure], "{figure}");
        }
    }
}

/// Each run's `peak` (the busiest clock second of demand and what was turned
/// away in it) against a count of its decisions file, second by second; and
/// the run's last lines name the cost of the limiters that held the backend.
#[test]
fn the_peak_second_and_its_cost_match_a_count_of_the_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let stdout = burstsim()
        .args([
            "run",
            "scenarios/promo.toml",
            "--no-charts",
            "--decisions",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap()
        .stdout;
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 28);
    for run in runs {
        let (workload, limiter) = (
            run["workload"].as_str().unwrap(),
            run["limiter"].as_str().unwrap(),
        );
        let text =
            fs::read_to_string(out.join(format!("decisions/{workload}/{limiter}.csv"))).unwrap();
        let mut seconds: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
        for row in text.lines().skip(1) {
            let fields: Vec<&str> = row.split(',').collect();
            let time: u64 = fields[0].parse().unwrap();
            let second = seconds.entry(time / 1_000_000_000).or_default();
            second.0 += 1;
            second.1 += u64::from(fields[2] == "false");
        }
        let (&second, &(offered, turned_away)) = seconds
            .iter()
            .reduce(|a, b| if b.1.0 > a.1.0 { b } else { a })
            .unwrap();
        assert_eq!(
            run["peak"],
            serde_json::json!({
                "start_ns": second * 1_000_000_000,
                "offered": offered,
                "turned_away": turned_away
            }),
            "{workload} / {limiter}"
        );
    }
    let stdout = String::from_utf8(stdout).unwrap();
    assert!(
        stdout.contains("cost at the peak: sliding-log turns away 77% of flash-sale's busiest second (439 requests from 26.000s)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("cost at the peak: fixed-1s"),
        "fixed-1s is over: its cost is no answer"
    );
}
