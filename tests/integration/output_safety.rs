//! A user's files are sacred: burstsim replaces only folders it provably
//! wrote, never writes through a link, and an interrupted run leaves the old
//! results or the new ones and nothing else.

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::*;

fn burstsim() -> Command {
    Command::cargo_bin("burstsim").expect("the binary is built for tests")
}

fn names(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_home_folder_with_another_tools_summary_json_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::create_dir_all(home.join("project")).unwrap();
    fs::write(home.join(".ssh/id_ed25519"), "key").unwrap();
    fs::write(home.join(".bashrc"), "alias").unwrap();
    fs::write(home.join("summary.json"), "{}").unwrap();
    burstsim()
        .args(["run", "scenarios/basic.toml", "--quiet", "--out"])
        .arg(&home)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not burstsim's to replace"));
    assert_eq!(names(&home), [".bashrc", ".ssh", "project", "summary.json"]);
    assert_eq!(names(dir.path()), ["home"]);
}

#[test]
fn size_adds_to_the_run_results_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    burstsim()
        .args([
            "run",
            "scenarios/promo.toml",
            "--quiet",
            "--no-charts",
            "--out",
        ])
        .arg(&out)
        .assert()
        .success();
    let summary = fs::read(out.join("summary.json")).unwrap();
    burstsim()
        .args(["size", "scenarios/promo.toml", "--quiet", "--out"])
        .arg(&out)
        .assert()
        .success();
    assert_eq!(fs::read(out.join("summary.json")).unwrap(), summary);
    assert!(out.join("sizing.json").is_file() && out.join("charts/sizing.svg").is_file());
    let marker = fs::read_to_string(out.join(".burstsim")).unwrap();
    assert!(marker.contains("sizing.csv\n") && marker.contains("summary.json\n"));
    assert_eq!(names(dir.path()), ["out"]);
}

#[test]
fn size_never_writes_through_a_link_planted_in_the_results() {
    let dir = tempfile::tempdir().unwrap();
    let (out, outside) = (dir.path().join("out"), dir.path().join("outside"));
    fs::create_dir(&outside).unwrap();
    burstsim()
        .args(["run", "scenarios/basic.toml", "--quiet", "--out"])
        .arg(&out)
        .assert()
        .success();
    fs::remove_dir_all(out.join("charts")).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("charts")).unwrap();
    burstsim()
        .args([
            "size",
            "scenarios/basic.toml",
            "--capacity",
            "10",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("charts, a symbolic link"));
    assert!(names(&outside).is_empty());
}

#[test]
fn size_never_overwrites_a_sizing_csv_it_did_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("sizing.csv"), "my spreadsheet").unwrap();
    burstsim()
        .args([
            "size",
            "scenarios/basic.toml",
            "--capacity",
            "10",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("sizing.csv"));
    assert_eq!(
        fs::read_to_string(out.join("sizing.csv")).unwrap(),
        "my spreadsheet"
    );
}

#[test]
fn an_old_leftover_beside_the_results_is_named_and_does_not_block_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let leftover = dir.path().join(".out.old");
    fs::create_dir(&leftover).unwrap();
    fs::write(leftover.join("summary.json"), "{}").unwrap();
    burstsim()
        .args(["run", "scenarios/basic.toml", "--no-charts", "--out"])
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains(".out.old").and(predicate::str::contains("cannot prove")));
    assert!(leftover.join("summary.json").is_file());
}

#[test]
fn ctrl_c_removes_the_staging_folder_and_keeps_earlier_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    burstsim()
        .args(["run", "scenarios/basic.toml", "--quiet", "--out"])
        .arg(&out)
        .assert()
        .success();
    let before = fs::read(out.join("summary.json")).unwrap();
    // Ten million decisions written to disk: long enough to interrupt.
    let scenario = dir.path().join("long.toml");
    fs::write(
        &scenario,
        "duration = \"100s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 100000 }]\n\
         [[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_burstsim"))
        .args(["run", "--decisions", "--quiet", "--out"])
        .arg(&out)
        .arg(&scenario)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !names(dir.path())
        .iter()
        .any(|n| n.starts_with(".out.partial-"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no staging folder appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "the run finished before the interrupt"
    );
    assert_eq!(names(dir.path()), ["long.toml", "out"]);
    assert_eq!(fs::read(out.join("summary.json")).unwrap(), before);
}
