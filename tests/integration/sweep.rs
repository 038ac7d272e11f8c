//! `burstsim sweep` and `burstsim merge`: the grid's figures are the
//! figures of the scenario edited by hand; shards, under GNU parallel too,
//! merge byte for byte into the whole sweep; parts that do not belong
//! together, and bad paths and values, are refused before any work.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

use super::common;

const PROMO: &str = "scenarios/sweep-promo.toml";

fn burstsim() -> Command {
    Command::cargo_bin("burstsim").unwrap()
}

/// Every file of a sweep's results (not a run's), relative to `dir`, with its bytes.
fn sweep_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for name in ["sweep.json", "sweep.csv", "report.html"] {
        files.push((PathBuf::from(name), fs::read(dir.join(name)).unwrap()));
    }
    let mut charts: Vec<PathBuf> = fs::read_dir(dir.join("charts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("sweep-")
        })
        .collect();
    charts.sort();
    assert!(!charts.is_empty(), "no sweep charts in {}", dir.display());
    for chart in charts {
        let bytes = fs::read(&chart).unwrap();
        files.push((chart.strip_prefix(dir).unwrap().to_owned(), bytes));
    }
    files
}

fn assert_same_files(whole: &Path, merged: &Path) {
    let (a, b) = (sweep_files(whole), sweep_files(merged));
    assert_eq!(
        a.iter().map(|f| &f.0).collect::<Vec<_>>(),
        b.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(
            x == y,
            "{} differs between the whole sweep and the merge",
            name.display()
        );
    }
}

fn sweep(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    burstsim()
        .args(["sweep", PROMO, "-q", "--out"])
        .arg(&out)
        .args(extra)
        .assert()
        .success();
    out
}

fn rows(out: &Path) -> Vec<Value> {
    let json: Value = serde_json::from_slice(&fs::read(out.join("sweep.json")).unwrap()).unwrap();
    json["rows"].as_array().unwrap().clone()
}

fn row<'a>(rows: &'a [Value], threshold: i64, burst: i64, limiter: &str) -> &'a Value {
    rows.iter()
        .find(|r| {
            r["values"]["limiter.fixed-1s.threshold"] == threshold
                && r["values"]["workload.noisy-edge-burst.sources[1].before"] == burst
                && r["run"]["limiter"] == limiter
        })
        .unwrap_or_else(|| panic!("no row for {threshold} × {burst} × {limiter}"))
}

#[test]
fn sweep_promo_shows_the_fixed_window_safe_only_at_half_the_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let out = sweep(dir.path(), "out", &[]);
    let rows = rows(&out);
    // 7 thresholds × 9 burst sizes × 2 limiters.
    assert_eq!(rows.len(), 7 * 9 * 2);
    for threshold in (50..=200).step_by(25) {
        for burst in (0..=200).step_by(25) {
            let fixed = &row(&rows, threshold, burst, "fixed-1s")["within_capacity"];
            let sliding = &row(&rows, threshold, burst, "sliding-log")["within_capacity"];
            // At most 2 × threshold in any second: within 150 whatever the burst.
            if threshold <= 75 {
                assert_eq!(fixed, true, "fixed {threshold} × {burst}");
            }
            if threshold <= 150 {
                assert_eq!(sliding, true, "sliding {threshold} × {burst}");
            }
            // Bursts of 100 either side of a boundary get 2 × threshold through.
            if threshold >= 100 && burst >= 100 {
                assert_eq!(fixed, false, "fixed {threshold} × {burst}");
            }
            if threshold >= 175 && burst >= 100 {
                assert_eq!(sliding, false, "sliding {threshold} × {burst}");
            }
        }
    }
    let csv = fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 7 * 9 * 2);
    assert!(csv.starts_with("point,limiter.fixed-1s.threshold,limiter.sliding-log.threshold,workload.noisy-edge-burst.sources[1].before,workload.noisy-edge-burst.sources[1].after,within_capacity,workload,limiter,"));
    let svg = fs::read_to_string(out.join("charts/sweep-noisy-edge-burst.svg")).unwrap();
    roxmltree::Document::parse(&svg).expect("the heat map is well-formed SVG");
    assert!(svg.contains("outlined: within the backend"));
    let report = fs::read_to_string(out.join("report.html")).unwrap();
    assert!(report.contains("<h2>Sweep</h2>") && report.contains("<svg"));
}

#[test]
fn each_point_gives_the_figures_of_the_scenario_edited_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let out = sweep(dir.path(), "out", &[]);
    let rows = rows(&out);
    let text = fs::read_to_string(PROMO).unwrap();
    let text = &text[..text.find("[[sweep]]").unwrap()];
    for (threshold, burst) in [(125, 75), (50, 0), (200, 200)] {
        let edited = text
            .replace("threshold = 100", &format!("threshold = {threshold}"))
            .replace(
                "before = 100, after = 100",
                &format!("before = {burst}, after = {burst}"),
            );
        let file = dir.path().join(format!("edited-{threshold}-{burst}.toml"));
        fs::write(&file, edited).unwrap();
        let run_out = dir.path().join(format!("run-{threshold}-{burst}"));
        burstsim()
            .arg("run")
            .arg(&file)
            .args(["-q", "--no-charts", "--out"])
            .arg(&run_out)
            .assert()
            .success();
        let summary: Value =
            serde_json::from_slice(&fs::read(run_out.join("summary.json")).unwrap()).unwrap();
        for run in summary["runs"].as_array().unwrap() {
            let limiter = run["limiter"].as_str().unwrap();
            assert_eq!(
                &row(&rows, threshold, burst, limiter)["run"],
                run,
                "{threshold} × {burst} × {limiter}"
            );
        }
    }
}

#[test]
fn shards_merged_are_byte_identical_to_the_whole_sweep_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let whole = sweep(dir.path(), "whole", &[]);
    let mut parts = Vec::new();
    for i in 0..3 {
        let part = dir.path().join(format!("part-{i}"));
        burstsim()
            .args(["sweep", PROMO, "-q", "--shard", &format!("{i}/3"), "--out"])
            .arg(&part)
            .env("RAYON_NUM_THREADS", "1")
            .assert()
            .success();
        parts.push(part);
    }
    let merged = dir.path().join("merged");
    burstsim()
        .args(["merge", "-q", "--out"])
        .arg(&merged)
        .args(&parts)
        .assert()
        .success();
    assert_same_files(&whole, &merged);
    // One thread or all of them: the same bytes.
    let single = dir.path().join("single");
    burstsim()
        .args(["sweep", PROMO, "-q", "--out"])
        .arg(&single)
        .env("RAYON_NUM_THREADS", "1")
        .assert()
        .success();
    assert_same_files(&whole, &single);
}

#[test]
#[ignore = "needs GNU parallel: run with --include-ignored, as .ci/run does"]
fn shards_under_gnu_parallel_merge_into_the_whole_sweep_and_resume() {
    let _alone = super::common::real_time();
    if !Path::new("/usr/bin/parallel").exists() {
        common::required("GNU parallel is not installed (Debian's `parallel`)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let whole = sweep(dir.path(), "whole", &[]);
    let binary = assert_cmd::cargo::cargo_bin("burstsim");
    let parts = dir.path().join("parts");
    let shards = |dir: &Path| {
        let output = std::process::Command::new("parallel")
            .args(["--will-cite", "--halt", "now,fail=1", "-j", "4"])
            .arg(format!(
                "{} sweep {PROMO} --shard {{}}/8 --out {}/{{}}",
                binary.display(),
                dir.display()
            ))
            .arg(":::")
            .args((0..8).map(|i| i.to_string()))
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let first = shards(&parts);
    assert_eq!(first.matches("points in").count(), 8, "{first}");
    // Run again, as after a failure: every shard is already complete.
    let again = shards(&parts);
    assert_eq!(
        again
            .matches("of this sweep is already complete in")
            .count(),
        8,
        "{again}"
    );
    let merged = dir.path().join("merged");
    burstsim()
        .args(["merge", "-q", "--out"])
        .arg(&merged)
        .args((0..8).map(|i| parts.join(i.to_string())))
        .assert()
        .success();
    assert_same_files(&whole, &merged);
}

#[test]
fn merge_refuses_a_missing_a_repeated_or_a_foreign_part() {
    let dir = tempfile::tempdir().unwrap();
    let part = |name: &str, shard: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        burstsim()
            .args(["sweep", PROMO, "-q", "--shard", shard, "--out"])
            .arg(&out)
            .args(extra)
            .assert()
            .success();
        out
    };
    let (a, b, c) = (
        part("a", "0/3", &[]),
        part("b", "1/3", &[]),
        part("c", "2/3", &[]),
    );
    let foreign = part("foreign", "2/3", &["--seed", "7"]);
    let merge = |parts: &[&PathBuf], expected: &str| {
        let out = dir.path().join("merged");
        burstsim()
            .args(["merge", "--out"])
            .arg(&out)
            .args(parts)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(expected));
        assert!(!out.exists(), "a refused merge wrote {}", out.display());
    };
    merge(&[&a, &b], "missing shard 2 of 3");
    merge(&[&a, &b, &b, &c], "shard 1/3 is given twice");
    merge(&[&a, &b, &foreign], "is not part of the same sweep");
    merge(&[&a, &b, &foreign], "seed 7 instead of 42");
    // A part of the same scenario split another way.
    let other = part("other", "0/2", &[]);
    merge(&[&a, &other], "the sweep was split two ways");
    // Not a part at all.
    merge(&[&a, &dir.path().join("nowhere")], "cannot read");
}

#[test]
fn shard_auto_takes_the_index_from_the_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("auto");
    burstsim()
        .args(["sweep", PROMO, "--shard", "auto/4", "--out"])
        .arg(&out)
        .env("JOB_COMPLETION_INDEX", "3")
        .assert()
        .success()
        .stdout(predicate::str::contains("shard 3/4:"));
    let part: Value =
        serde_json::from_slice(&fs::read(out.join("sweep-part.json")).unwrap()).unwrap();
    assert_eq!(part["shard"]["index"], 3);
    burstsim()
        .args(["sweep", PROMO, "--shard", "auto/4", "--out"])
        .arg(dir.path().join("none"))
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("AWS_BATCH_JOB_ARRAY_INDEX")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("JOB_COMPLETION_INDEX"));
}

/// A scenario with `from` replaced by `to`, swept with `args`: exit 2, the
/// error holds every `expected`, and nothing is written.
fn refused(from: &str, to: &str, args: &[&str], expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(PROMO).unwrap();
    assert!(text.contains(from), "{from:?} is not in {PROMO}");
    let file = dir.path().join("s.toml");
    fs::write(&file, text.replacen(from, to, 1)).unwrap();
    let out = dir.path().join("out");
    let assert = burstsim()
        .arg("sweep")
        .arg(&file)
        .args(args)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2);
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    for expected in expected {
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.exists(), "a refused sweep wrote {}", out.display());
}

#[test]
fn bad_paths_values_and_grids_are_refused_before_any_work() {
    // A path that names nothing, on the command line: the names it has.
    refused(
        "",
        "",
        &["--vary", "limiter.fixed.threshold=1,2"],
        &[
            "limiter.fixed.threshold",
            "has no entry named \"fixed\"",
            "\"fixed-1s\"",
        ],
    );
    // A value that is wrong at one point: the point, the file's own line.
    refused(
        "",
        "",
        &["--vary", "limiter.fixed-1s.threshold=100,0"],
        &["at limiter.fixed-1s.threshold=0", "s.toml:34:", "threshold"],
    );
    refused(
        "",
        "",
        &["--vary", "limiter.fixed-1s.threshold"],
        &["expected PATH=VALUES"],
    );
    refused("", "", &["--vary", "duration=1..5"], &["has no step"]);
    refused(
        "",
        "",
        &["--vary", "metrics.profile=[\"1s\"],[\"2s\"]"],
        &["the profile's intervals name columns of sweep.csv"],
    );
    refused(
        "",
        "",
        &["--vary", "seed=1..4:1", "--vary", "duration=1s,2s", "--zip"],
        &["are zipped, so they need as many values each"],
    );
    refused(
        "",
        "",
        &[
            "--vary",
            "seed=1..1000:1",
            "--vary",
            "duration=1s..1000s:1s",
        ],
        &["more than 100000 points"],
    );
    refused(
        "",
        "",
        &["--max-requests", "1000"],
        &[
            "this sweep would simulate about",
            "63 points",
            "--max-requests 1000",
        ],
    );
    // In the file: the entry's line and column.
    refused(
        "range = \"0..200:25\"",
        "range = \"0..200\"",
        &[],
        &["s.toml:55:", "sweep[2].range:", "has no step"],
    );
    refused(
        "vary = \"limiter.sliding-log.threshold\"",
        "vary = \"limiter.sliding-log.threshold\"\nstep = 1",
        &[],
        &["sweep[1]: unknown field \"step\""],
    );
    refused(
        "[[sweep]]",
        "[[sweep]]\nzip = true",
        &[],
        &["zip = true on the first entry"],
    );
}

#[test]
fn a_sweep_without_anything_to_vary_says_how() {
    let dir = tempfile::tempdir().unwrap();
    burstsim()
        .args(["sweep", "scenarios/promo.toml", "--out"])
        .arg(dir.path().join("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "nothing to vary; give --vary PATH=VALUES",
        ));
}

#[test]
fn a_sweep_adds_its_section_to_a_run_report_and_keeps_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("promo");
    burstsim()
        .args(["run", "scenarios/promo.toml", "-q", "--out"])
        .arg(&out)
        .assert()
        .success();
    let summary = fs::read(out.join("summary.json")).unwrap();
    for _ in 0..2 {
        burstsim()
            .args([
                "sweep",
                "scenarios/promo.toml",
                "-q",
                "--vary",
                "backend.capacity=100..300:100",
                "--out",
            ])
            .arg(&out)
            .assert()
            .success();
    }
    assert_eq!(fs::read(out.join("summary.json")).unwrap(), summary);
    let report = fs::read_to_string(out.join("report.html")).unwrap();
    // Once, however often it is swept, and before the run's explanation.
    assert_eq!(report.matches("<h2>Sweep</h2>").count(), 1);
    assert!(report.find("<h2>Sweep</h2>") < report.find("<h2>What this means</h2>"));
    assert!(report.contains("<h2>Results</h2>"));
    // One varied value: a line chart per workload, the capacity varied along it.
    let svg = fs::read_to_string(out.join("charts/sweep-edge-burst.svg")).unwrap();
    assert!(svg.contains("backend capacity (varied)"));
    let rows = rows(&out);
    assert_eq!(rows.len(), 3 * 4 * 7);
    assert_eq!(rows[0]["run"]["backend"]["capacity"], 100);
}

#[test]
fn validate_checks_every_point_of_a_sweep_in_the_file() {
    burstsim()
        .args(["validate", PROMO])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "sweep: 63 points (7 × 9), every one valid",
        ));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    let text = fs::read_to_string(PROMO).unwrap();
    fs::write(
        &file,
        text.replace("range = \"50..200:25\"", "range = \"0..200:25\""),
    )
    .unwrap();
    burstsim()
        .arg("validate")
        .arg(&file)
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("at limiter.fixed-1s.threshold=0"));
}

#[test]
fn a_sweep_too_large_is_refused_from_the_scenario_before_any_point_is_built() {
    // 2,000 limiters and 1,000 values: building every point to estimate it
    // took 27 s before the refusal.
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from(
        "duration = \"10s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 100 }]\n",
    );
    for i in 0..2_000 {
        text.push_str(&format!(
            "[[limiter]]\nname = \"l{i}\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n"
        ));
    }
    let path = dir.path().join("wide.toml");
    fs::write(&path, text).unwrap();
    let started = std::time::Instant::now();
    burstsim()
        .arg("sweep")
        .arg(&path)
        .args([
            "--vary",
            "limiter.l0.threshold=1..1000:1",
            "--max-requests",
            "1",
        ])
        .arg("--out")
        .arg(dir.path().join("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("more than --max-requests 1"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_point_whose_workload_offers_no_requests_is_named_before_any_point_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edge.toml");
    fs::write(
        &path,
        "duration = \"10s\"\n[[workload]]\nname = \"edge\"\nsources = [{ kind = \"boundary\", period = \"1s\", before = 10, after = 10, spread = \"100ms\" }]\n\
         [[limiter]]\nname = \"f\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
    )
    .unwrap();
    burstsim()
        .arg("sweep")
        .arg(&path)
        .args([
            "--vary",
            "workload.edge.sources[0].before=10,0",
            "--vary",
            "workload.edge.sources[0].after=10,0",
            "--zip",
            "--out",
        ])
        .arg(dir.path().join("out"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("workload.edge.sources[0].before=0")
                .and(predicate::str::contains("offers no requests")),
        );
    assert!(!dir.path().join("out").exists());
    // A rate source may still draw none at a point: the error names it too.
    let poisson = dir.path().join("rare.toml");
    fs::write(
        &poisson,
        "duration = \"1ms\"\n[[workload]]\nname = \"rare\"\nsources = [{ kind = \"poisson\", rate = 1 }]\n\
         [[limiter]]\nname = \"f\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
    )
    .unwrap();
    burstsim()
        .arg("sweep")
        .arg(&poisson)
        .args(["--vary", "limiter.f.threshold=5,10", "--out"])
        .arg(dir.path().join("out"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("at limiter.f.threshold=")
                .and(predicate::str::contains("offers no requests")),
        );
}

/// An edit of a part's JSON.
type Change = Box<dyn Fn(&mut Value)>;

#[test]
fn merge_checks_what_a_part_says_of_itself_before_sizing_anything_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let part_dir = dir.path().join("p0");
    burstsim()
        .args([
            "sweep",
            "scenarios/basic.toml",
            "--vary",
            "limiter.fixed-window.threshold=5,10",
        ])
        .args(["--shard", "0/2", "--quiet", "--out"])
        .arg(&part_dir)
        .assert()
        .success();
    let good: Value =
        serde_json::from_str(&fs::read_to_string(part_dir.join("sweep-part.json")).unwrap())
            .unwrap();
    let wide: Vec<Value> = (0..3)
        .map(|i| {
            serde_json::json!([{
                "path": format!("limiter.fixed-window.threshold{i}"),
                "values": (1..=100_000).map(|v| v.to_string()).collect::<Vec<_>>()
            }])
        })
        .collect();
    let cases: [(&str, Change, &str); 4] = [
        (
            "shards",
            Box::new(|p| p["shard"]["count"] = 100_000_000.into()),
            "expected I/N",
        ),
        (
            "max",
            Box::new(|p| p["shard"]["count"] = u64::MAX.into()),
            "expected I/N",
        ),
        (
            "grid",
            Box::new(move |p| p["identity"]["grid"] = Value::Array(wide.clone())),
            "100000 points",
        ),
        (
            "point",
            Box::new(|p| p["points"][0]["point"] = 7.into()),
            "outside the grid",
        ),
    ];
    for (name, change, expected) in cases {
        let mut part = good.clone();
        change(&mut part);
        let path = dir.path().join(format!("{name}.json"));
        fs::write(&path, serde_json::to_string(&part).unwrap()).unwrap();
        burstsim()
            .arg("merge")
            .arg(&path)
            .arg("--out")
            .arg(dir.path().join("out"))
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains(expected).and(predicate::str::contains("panicked").not()),
            );
    }
    // A file of NUL bytes is refused at its first byte, not read whole; one
    // larger than --max-memory allows is refused before it is opened for reading.
    let nul = dir.path().join("nul.json");
    fs::File::create(&nul).unwrap().set_len(3 << 30).unwrap();
    burstsim()
        .arg("merge")
        .arg(&nul)
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("more than --max-memory"));
    burstsim()
        .args(["merge", "--max-memory", "64GiB"])
        .arg(&nul)
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a part of a sweep"));
    assert!(!dir.path().join("out").exists());
}

/// An adversary has no sources of its own (its pattern is built for each
/// limiter at each point): a sweep over a scenario with one runs, and the
/// application limiters' settings sweep like any other. (It was refused as
/// a workload offering no requests.)
#[test]
fn a_scenario_with_an_adversary_sweeps_and_its_worst_follows_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("java");
    burstsim()
        .args(["sweep", "scenarios/java.toml", "-q", "--no-charts", "--out"])
        .arg(&out)
        .args(["--vary", "limiter.guava.permits_per_second=50,100"])
        .assert()
        .success();
    let rows = rows(&out);
    let worst = |rate: i64| {
        rows.iter()
            .find(|r| {
                r["values"]["limiter.guava.permits_per_second"] == rate
                    && r["run"]["limiter"] == "guava"
                    && r["run"]["workload"] == "worst-case"
            })
            .unwrap_or_else(|| panic!("no guava row at {rate}"))["run"]["worst_rolling"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        (worst(50), worst(100)),
        (101, 201),
        "2N + 1 at each setting"
    );
}
