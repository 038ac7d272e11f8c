//! `burstsim size` and `burstsim check` as a gateway team uses them: the
//! recommended settings, the CI verdict, and that the one passes the other.

use std::fs;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn burstsim() -> Command {
    Command::cargo_bin("burstsim").unwrap()
}

fn sizing(scenario: &str) -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().unwrap();
    let output = burstsim()
        .args(["size", scenario, "--format", "json", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in ["sizing.json", "sizing.csv", "charts/sizing.svg"] {
        assert!(dir.path().join(file).is_file(), "no {file}");
    }
    let json = serde_json::from_slice(&output.stdout).unwrap();
    (dir, json)
}

fn limiter<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["limiters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["limiter"] == name)
        .unwrap()
}

#[test]
fn promo_sizes_as_the_theory_says() {
    let (_dir, report) = sizing("scenarios/promo.toml");
    assert_eq!(report["capacity"], 150);
    let fixed = limiter(&report, "fixed-1s");
    assert_eq!(fixed["safe_any_traffic"]["value"], 75, "capacity / 2");
    let buffered = limiter(&report, "buffered-70");
    assert_eq!(
        (
            buffered["current"].as_u64(),
            buffered["current_bound_1s"].as_u64()
        ),
        (Some(105), Some(210)),
        "the 70% buffer is unsafe"
    );
    assert_eq!(buffered["safe_any_traffic"]["value"], 75);
    let smaller = limiter(&report, "smaller-100ms");
    assert_eq!(
        smaller["safe_any_traffic"]["value"], 13,
        "13 per 100 ms: 11 × 13 = 143 ≤ 150"
    );
    assert_eq!(
        limiter(&report, "sliding-log")["safe_any_traffic"]["value"],
        150
    );
    assert_eq!(
        limiter(&report, "token-bucket")["safe_any_traffic"]["value"],
        51,
        "100 + ⌊51 × (1 s − 1 ns)⌋ = 150"
    );
    for sizing in report["limiters"].as_array().unwrap() {
        if let Some(worst) = sizing["safe_on_workloads"]["worst_1s"].as_u64() {
            assert!(worst <= 150, "{sizing}");
        }
    }
}

#[test]
fn check_fails_promo_naming_the_fixed_window_and_the_buffer() {
    burstsim()
        .args(["check", "scenarios/promo.toml"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "edge-burst × fixed-1s: 200 admitted in one second",
        ))
        .stdout(predicate::str::contains("edge-burst × buffered-70"))
        .stdout(predicate::str::contains("DROPS edge-burst × fixed-1s"))
        .stdout(predicate::str::contains("× sliding-log").not());
}

/// promo.toml with every limiter set to the value `size` recommends for any traffic.
fn sized_promo(report: &Value) -> String {
    let mut scenario: toml::Table =
        toml::from_str(&fs::read_to_string("scenarios/promo.toml").unwrap()).unwrap();
    let limiters = scenario.get_mut("limiter").unwrap().as_array_mut().unwrap();
    for table in limiters.iter_mut().map(|l| l.as_table_mut().unwrap()) {
        let name = table["name"].as_str().unwrap().to_string();
        let Some(value) = limiter(report, &name)["safe_any_traffic"]["value"].as_i64() else {
            continue;
        };
        let table = if table["kind"].as_str() == Some("chain") {
            table.get_mut("layers").unwrap().as_array_mut().unwrap()[0]
                .as_table_mut()
                .unwrap()
        } else {
            table
        };
        match table["kind"].as_str().unwrap() {
            "token-bucket" => {
                table.insert("rate".into(), value.into());
            }
            "smaller-window" => {
                let splits = table["splits"].as_integer().unwrap();
                table.insert("threshold".into(), (value * splits).into());
            }
            "buffered" => {
                table.insert("ratio".into(), 1.0.into());
                table.insert("capacity".into(), value.into());
            }
            _ => {
                table.insert("threshold".into(), value.into());
            }
        }
    }
    toml::to_string(&scenario).unwrap()
}

#[test]
fn a_scenario_sized_by_size_passes_check() {
    let (dir, report) = sizing("scenarios/promo.toml");
    let path = dir.path().join("sized.toml");
    fs::write(&path, sized_promo(&report)).unwrap();
    burstsim()
        .arg("check")
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::starts_with("ok: all 28 runs"));
}

/// A log stamped in whole seconds is judged by `check` on its requests
/// packed against the seconds' edges too: `size` sizes against the same,
/// so the largest threshold it calls safe on the log passes `check`, and
/// one more fails it — over a rolling second and a rolling minute alike.
/// (Sized on the seeded placement alone, kept on the second, no threshold
/// ever put more than 10 in a second: `size` called any value safe.)
#[test]
fn a_whole_second_log_sized_by_size_passes_check_and_one_more_fails() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for second in 0..6 {
        for i in 0..if second == 2 || second == 3 { 10 } else { 3 } {
            log.push_str(&format!(
                "10.0.0.{i} - - [27/Nov/2026:09:00:0{second} +0100] \"GET / HTTP/1.1\" 200 5 \"-\" \"t\"\n"
            ));
        }
    }
    fs::write(dir.path().join("edge.log"), log).unwrap();
    let scenario = |rolling: &str, threshold: u64| {
        format!(
            r#"duration = "10s"
[metrics]
rolling = "{rolling}"
[backend]
capacity = 12
[[workload]]
name = "log"
sources = [{{ kind = "trace", format = "combined", path = "edge.log", key_field = "remote_addr", spread = "none" }}]
[[limiter]]
name = "fixed"
kind = "fixed-window"
window = "1s"
threshold = {threshold}
"#
        )
    };
    for rolling in ["1s", "1m"] {
        let path = dir.path().join(format!("edge-{rolling}.toml"));
        fs::write(&path, scenario(rolling, 8)).unwrap();
        let (_out, report) = sizing(path.to_str().unwrap());
        let safe = &limiter(&report, "fixed")["safe_on_workloads"];
        assert_eq!(safe["kind"], "value", "{rolling}: {safe}");
        // Two seconds of 10 packed at their shared edge: 2 × threshold.
        let value = safe["value"].as_u64().unwrap();
        assert_eq!(
            (value, safe["worst_1s"].as_u64()),
            (6, Some(12)),
            "{rolling}"
        );
        for (threshold, code) in [(value, 0), (value + 1, 1)] {
            fs::write(&path, scenario(rolling, threshold)).unwrap();
            burstsim().arg("check").arg(&path).assert().code(code);
        }
    }
}

#[test]
fn check_needs_a_capacity() {
    burstsim()
        .args(["check", "scenarios/basic.toml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--capacity"));
    burstsim()
        .args(["check", "scenarios/basic.toml", "--capacity", "20"])
        .assert()
        .success();
    burstsim()
        .args(["check", "scenarios/basic.toml", "--capacity", "19"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "boundary-pair × fixed-window: 20 admitted",
        ));
}

#[test]
fn the_queue_model_reports_drops_and_waits() {
    let dir = tempfile::tempdir().unwrap();
    burstsim()
        .args(["run", "scenarios/promo.toml", "-q", "--no-charts", "--out"])
        .arg(dir.path().join("o"))
        .assert()
        .success();
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join("o/summary.json")).unwrap())
            .unwrap();
    let run = summary["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["workload"] == "edge-burst" && r["limiter"] == "fixed-1s")
        .unwrap();
    let queue = &run["backend"]["queue"];
    // 200 within 200 ms, served at 150/s: 30 served, one in service, 150 waiting, 19 dropped per pair.
    assert_eq!(queue["size"], 150);
    assert_eq!(queue["max_queue"], 150);
    assert!(queue["dropped"].as_u64().unwrap() > 0);
    assert!(
        queue["wait_max_ns"].as_u64().unwrap() >= 900_000_000,
        "150 waiting at 150/s wait about a second: {queue}"
    );
}

#[test]
fn check_prints_its_verdict_as_json_or_nothing_with_quiet() {
    let output = burstsim()
        .args(["check", "scenarios/promo.toml", "--format", "json"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let report: serde_json::Value =
        serde_json::from_slice(&output).expect("check --format json prints JSON");
    assert_eq!(report["ok"], false);
    assert_eq!(report["capacity"], 150);
    let failures = report["failures"].as_array().unwrap();
    assert!(failures.iter().any(|f| f["workload"] == "edge-burst"
        && f["limiter"] == "fixed-1s"
        && f["worst_1s"] == 200));
    burstsim()
        .args(["check", "scenarios/promo.toml", "--quiet"])
        .assert()
        .code(1)
        .stdout("");
    burstsim()
        .args(["check", "scenarios/basic.toml", "--capacity", "100", "-q"])
        .assert()
        .success()
        .stdout("");
}

#[test]
fn colour_follows_the_flag_and_no_color() {
    let run = |color: &str, no_color: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = burstsim();
        cmd.args(["check", "--color", color])
            .arg(std::fs::canonicalize("scenarios/promo.toml").unwrap());
        if let Some(value) = no_color {
            cmd.env("NO_COLOR", value);
        } else {
            cmd.env_remove("NO_COLOR");
        }
        let out = cmd
            .current_dir(dir.path())
            .assert()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap()
    };
    let always = run("always", Some("1"));
    assert!(always.contains("\x1b[1;31mOVER\x1b[0m"), "{always}");
    // Not a terminal here: auto stays plain, and so does never.
    assert!(!run("auto", None).contains('\x1b'));
    assert!(!run("never", None).contains('\x1b'));
}

#[test]
fn size_before_any_run_creates_the_results_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never-run");
    burstsim()
        .args(["size", "scenarios/promo.toml", "-q", "--out"])
        .arg(&out)
        .assert()
        .success();
    assert!(out.join("sizing.json").is_file());
    assert!(
        !out.join("report.html").exists(),
        "size writes no report of its own"
    );
}

#[test]
fn a_setting_sizing_cannot_build_is_an_error_not_a_verdict() {
    // Sizing tries thresholds up to four times the capacity; a sliding log of
    // 160 million timestamps is past what one may hold.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.toml");
    fs::write(
        &path,
        "duration = \"2s\"\n[backend]\ncapacity = 40000000\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 10 }]\n[[limiter]]\nname = \"log\"\nkind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 100\n",
    )
    .unwrap();
    let output = burstsim()
        .arg("size")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sizing limiter \"log\": threshold = 160000004")
            && stderr.contains("at most 134217728"),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists(), "nothing half-written");
}

#[test]
fn an_imported_nginx_site_limit_is_sized_as_nginx_lines_with_their_cost() {
    let (dir, report) = sizing("scenarios/my-gateway/my-gateway.toml");
    let together = &limiter(&report, "nginx-site")["together"];
    // Safe for any traffic already on the workloads: one setting, no other.
    let setting = &together["any_traffic"];
    let lines: Vec<&str> = setting["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let (rate, burst) = (&setting["values"][1], &setting["values"][0]);
    assert_eq!(
        (&rate["name"], &burst["name"]),
        (&"rate".into(), &"burst".into())
    );
    assert_eq!(
        lines,
        [
            format!("limit_req_zone … zone=site rate={}r/s;", rate["value"]),
            format!("limit_req zone=site burst={} nodelay;", burst["value"]),
        ],
        "nginx's own lines, the zone as nginx.conf names it"
    );
    assert!(setting["bound_1s"].as_u64().unwrap() <= 120, "{setting}");
    let sale = &setting["costs"][0];
    assert_eq!(sale["workload"], "sale-opening");
    assert!(sale["rejected"].as_u64().unwrap() > 0, "{sale}");
    // A per-client limit has no pair that holds the backend alone.
    let per_client = &limiter(&report, "nginx-per-client")["together"];
    assert_eq!(per_client["per"], "per client");
    assert!(per_client["any_traffic"].is_null() && per_client["on_workloads"].is_null());
    // The table prints the lines to paste, and the report gains them.
    let output = burstsim()
        .args(["size", "scenarios/my-gateway/my-gateway.toml", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let table = String::from_utf8(output.stdout).unwrap();
    for line in &lines {
        assert!(table.contains(&format!("      {line}\n")), "{table}");
    }
}
