//! A scenario's traffic split by key (`burstsim partition`) and each part
//! replayed on its own (`run --part`): a limiter kept per key decides every
//! request of a part as it does in the whole run; a part that is not of the
//! scenario, or not what its part.json says, is refused naming it.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

const SCENARIO: &str = "scenarios/access-log.toml";

/// `burstsim ARGS`: its exit status and standard error.
fn status<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Option<i32>, String) {
    let out = Command::cargo_bin("burstsim")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

/// `burstsim ARGS`, which must succeed; its standard error.
fn burstsim<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let (code, stderr) = status(args);
    assert_eq!(code, Some(0), "{stderr}");
    stderr
}

/// `burstsim ARGS`, which must fail with status 2; its standard error.
fn refused<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let (code, stderr) = status(args);
    assert_eq!(code, Some(2), "{stderr}");
    stderr
}

/// Splits `scenario` into `parts` under `dir`/parts.
fn partition(scenario: &Path, dir: &Path, parts: u64) -> PathBuf {
    let out = dir.join("parts");
    let args: Vec<std::ffi::OsString> = vec![
        "partition".into(),
        scenario.into(),
        "--parts".into(),
        parts.to_string().into(),
        "--out".into(),
        out.clone().into(),
        "-q".into(),
    ];
    burstsim(&args);
    out
}

/// The decision lines of `limiter` in the run into `out` (all but the
/// header), each cut to its first four columns, sorted.
fn decisions(out: &Path, limiter: &str) -> Vec<String> {
    let file = out
        .join("decisions/black-friday")
        .join(format!("{limiter}.csv"));
    let mut lines: Vec<String> = fs::read_to_string(file)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| line.split(',').take(4).collect::<Vec<_>>().join(","))
        .collect();
    lines.sort();
    lines
}

/// `run --decisions` of `scenario` into `out`, of part `part` if given.
fn run(scenario: &Path, out: &Path, part: Option<&Path>) -> String {
    let mut args: Vec<std::ffi::OsString> = vec![
        "run".into(),
        scenario.into(),
        "-q".into(),
        "--no-charts".into(),
        "--decisions".into(),
        "--out".into(),
        out.into(),
    ];
    if let Some(part) = part {
        args.extend(["--part".into(), part.into()]);
    }
    burstsim(&args)
}

/// The scenario's text with its traces' paths made absolute, to be
/// written anywhere.
fn movable_scenario() -> String {
    let traces = fs::canonicalize("scenarios/traces").unwrap();
    fs::read_to_string(SCENARIO)
        .unwrap()
        .replace("\"traces/", &format!("\"{}/", traces.display()))
}

#[test]
fn limits_per_key_decide_every_request_of_a_part_as_in_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Path::new(SCENARIO);
    let parts = partition(scenario, dir.path(), 3);
    run(scenario, &dir.path().join("whole"), None);
    // The parts replay where the log is not: the same scenario text, alone.
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::copy(scenario, elsewhere.join("access-log.toml")).unwrap();
    let scenario = &elsewhere.join("access-log.toml");
    let mut of_parts: Vec<Vec<String>> = vec![Vec::new(); 3];
    let mut offered = 0;
    for i in 0..3 {
        let out = dir.path().join(format!("part-{i}"));
        let warned = run(scenario, &out, Some(&parts.join(i.to_string())));
        assert!(
            warned.contains("\"global-fixed\" is not kept per key"),
            "{warned}"
        );
        for (l, limiter) in ["per-client-fixed", "per-client-bucket", "global-fixed"]
            .iter()
            .enumerate()
        {
            of_parts[l].extend(decisions(&out, limiter));
        }
        let summary: serde_json::Value =
            serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
        let run = &summary["runs"][0];
        offered += run["offered"].as_u64().unwrap();
        assert!(
            run["turned_away_in_log"].is_null(),
            "a whole-log figure in a part"
        );
        assert!(
            run["whole_seconds"].is_null(),
            "a whole-log figure in a part"
        );
    }
    assert_eq!(offered, 2308, "every request in one part");
    for (l, limiter) in ["per-client-fixed", "per-client-bucket"].iter().enumerate() {
        of_parts[l].sort();
        assert_eq!(
            of_parts[l],
            decisions(&dir.path().join("whole"), limiter),
            "{limiter}"
        );
    }
    // The global limit sees each part's traffic alone: the bot's bursts
    // no longer crowd the other parts' shoppers.
    of_parts[2].sort();
    assert_ne!(
        of_parts[2],
        decisions(&dir.path().join("whole"), "global-fixed")
    );
}

#[test]
fn a_part_not_of_this_scenario_or_not_as_written_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = movable_scenario();
    let scenario = dir.path().join("shop.toml");
    fs::write(&scenario, &text).unwrap();
    let parts = partition(&scenario, dir.path(), 2);
    let part = parts.join("1");
    let out = dir.path().join("out");
    let args = |scenario: &Path| -> Vec<std::ffi::OsString> {
        [
            "run".into(),
            scenario.into(),
            "-q".into(),
            "--no-charts".into(),
            "--out".into(),
            out.clone().into(),
            "--part".into(),
            part.clone().into(),
        ]
        .to_vec()
    };
    // Another scenario text.
    let changed = dir.path().join("changed.toml");
    fs::write(&changed, text.replace("threshold = 60", "threshold = 61")).unwrap();
    let error = refused(&args(&changed));
    assert!(
        error.contains(&part.join("part.json").display().to_string()),
        "{error}"
    );
    assert!(error.contains("partition this scenario again"), "{error}");
    assert!(!out.exists());
    // Another seed.
    let error = refused(&[args(&scenario), vec!["--seed".into(), "12".into()]].concat());
    assert!(error.contains("seed 11"), "{error}");
    // Its records changed after it was written.
    let rows = part.join("w0.rows");
    let mut bytes = fs::read(&rows).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    fs::write(&rows, &bytes).unwrap();
    let error = refused(&args(&scenario));
    assert!(error.contains(&rows.display().to_string()), "{error}");
    assert!(!out.exists(), "nothing half-written");
    // Not a part at all.
    fs::write(part.join("part.json"), "{\"identity\": 3}").unwrap();
    let error = refused(&args(&scenario));
    assert!(error.contains("part.json:1:"), "{error}");
}

#[test]
fn what_cannot_be_split_by_one_key_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let text = movable_scenario();
    let mixed = dir.path().join("mixed.toml");
    fs::write(
        &mixed,
        text.replace("key_field = \"remote_addr\"", "key_field = \"remote_addr\", host_field = \"http_user_agent\"")
            + "\n[[limiter]]\nname = \"per-host\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 50\nper = \"host\"\n",
    )
    .unwrap();
    let out = dir.path().join("parts");
    let args = |file: &Path, parts: &str| -> Vec<std::ffi::OsString> {
        vec![
            "partition".into(),
            file.into(),
            "--parts".into(),
            parts.into(),
            "--out".into(),
            out.clone().into(),
        ]
    };
    let error = refused(&args(&mixed, "4"));
    assert!(
        error.contains("\"per-host\" keeps its state per Host and \"per-client-fixed\" per client"),
        "{error}"
    );
    let plain = dir.path().join("plain.toml");
    fs::write(&plain, &text).unwrap();
    for parts in ["0", "257"] {
        let error = refused(&args(&plain, parts));
        assert!(error.contains("expected 1 to 256 parts"), "{error}");
    }
    let global = dir.path().join("global.toml");
    let cut = text.find("# 5 per second per client").unwrap();
    fs::write(&global, &text[..cut]).unwrap();
    let error = refused(&args(&global, "4"));
    assert!(error.contains("no limiter is kept per key"), "{error}");
    assert!(!out.exists());
}

#[test]
fn a_part_s_table_gives_no_verdict_on_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Path::new(SCENARIO);
    let parts = partition(scenario, dir.path(), 3);
    let out = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("run")
        .arg(scenario)
        .args(["--no-charts", "--part"])
        .arg(parts.join("1"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(
        printed.contains("part 1 of 3: the requests of this part's keys alone"),
        "{printed}"
    );
    for verdict in [
        "recommended",
        "stay within the backend",
        "exceed the backend",
    ] {
        assert!(!printed.contains(verdict), "{printed}");
    }
}
