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

/// The files of a results folder, by path within it, with their bytes.
fn files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut found = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|name| name != ".burstsim") {
                // (.burstsim marks the folder as burstsim's, uniquely.)
                let bytes = fs::read(&path).unwrap();
                found.insert(path.strip_prefix(dir).unwrap().to_owned(), bytes);
            }
        }
    }
    found
}

/// Decides every shard of the partitioning `parts` (of `count`) into
/// `dir`/s`I`; the shards' folders.
fn shards(scenario: &Path, parts: &Path, count: u64, dir: &Path) -> Vec<PathBuf> {
    (0..count)
        .map(|i| {
            let out = dir.join(format!("s{i}"));
            let args: Vec<std::ffi::OsString> = vec![
                "run".into(),
                scenario.into(),
                "--partition".into(),
                parts.into(),
                "--shard".into(),
                format!("{i}/{count}").into(),
                "--out".into(),
                out.clone().into(),
                "-q".into(),
            ];
            burstsim(&args);
            out
        })
        .collect()
}

/// `burstsim merge --partition PARTS SHARDS… --out OUT`: exit status and stderr.
fn merge(parts: &Path, shards: &[PathBuf], out: &Path) -> (Option<i32>, String) {
    let mut args: Vec<std::ffi::OsString> = vec!["merge".into(), "-q".into(), "--partition".into()];
    args.push(parts.into());
    args.extend(shards.iter().map(|s| s.clone().into()));
    args.extend(["--out".into(), out.into()]);
    status(&args)
}

#[test]
fn shards_merged_in_any_order_give_the_whole_run_s_results_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    merges_as_the_whole_run(Path::new(SCENARIO), dir.path());
}

/// Requests whose forwarded-for header was missing (logged `-`): nginx's
/// zone keyed by it leaves them unlimited, and Spring Cloud Gateway's
/// filter turns them away, in every shard as in the whole run, and the
/// merge says so as the whole run does, byte for byte.
#[test]
fn a_log_s_empty_keys_are_left_unlimited_or_turned_away_in_shards_as_in_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for second in 0..20 {
        for i in 0..12 {
            let forwarded = match i % 4 {
                0 | 1 => "-".to_string(),
                n => format!("198.51.100.{}", (second + n) % 5),
            };
            log.push_str(&format!(
                "10.0.0.1 - - [27/Nov/2026:10:00:{second:02} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a\" \"{forwarded}\"\n"
            ));
        }
    }
    fs::write(dir.path().join("main.log"), log).unwrap();
    let scenario = dir.path().join("xff.toml");
    fs::write(
        &scenario,
        "name = \"xff\"\nduration = \"20s\"\nseed = 3\n\n[[workload]]\nname = \"log\"\nsources = [{ kind = \"trace\", format = \"combined\", path = \"main.log\", key_field = \"http_x_forwarded_for\" }]\n\n[[limiter]]\nname = \"nginx\"\nkind = \"nginx-limit-req\"\nrate = \"2r/s\"\nburst = 1\nnodelay = true\nper = \"key\"\n\n[[limiter]]\nname = \"window\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 2\nper = \"key\"\n\n[[limiter]]\nname = \"spring\"\nkind = \"spring-cloud-gateway\"\nreplenish_rate = 2\nburst_capacity = 2\nper = \"key\"\n",
    )
    .unwrap();
    let whole = merges_as_the_whole_run(&scenario, dir.path());
    let summary: serde_json::Value =
        serde_json::from_slice(&whole[Path::new("summary.json")]).unwrap();
    let runs = summary["runs"].as_array().unwrap();
    let run = |name: &str| runs.iter().find(|r| r["limiter"] == name).unwrap();
    // Half the 240 requests are `-`, 6 a second: nginx admits them all,
    // unbounded, and keeps no state for them; the window limits them as
    // one client, 2 a second.
    let admitted = |name: &str| run(name)["admitted"].as_u64().unwrap();
    assert!(
        admitted("nginx") > 120 && admitted("window") == 120,
        "{runs:?}"
    );
    assert_eq!(run("nginx")["keys"]["worst_key_name"], "-");
    // (Spread within their seconds, two seconds' `-` may meet in one.)
    assert!(
        run("nginx")["keys"]["worst_rolling_max"].as_u64() >= Some(6),
        "{runs:?}"
    );
    assert_eq!(run("nginx")["keys"]["keys"], 6);
    assert_eq!(run("nginx")["keys"]["state"]["keys_alive_max"], 5);
    assert!(
        run("nginx")["bound"].is_null(),
        "unbounded: {:?}",
        run("nginx")
    );
    assert!(run("window")["bound"].is_u64(), "{:?}", run("window"));
    assert_eq!(run("nginx")["keys"]["empty_unlimited"], true);
    assert!(
        run("window")["keys"].get("empty_unlimited").is_none()
            && run("window")["keys"].get("empty_denied").is_none(),
        "{:?}",
        run("window")
    );
    // Spring turns every `-` away and keeps no bucket for them: at most
    // the 120 keyed requests pass, bounded by the five keys' buckets.
    let spring = run("spring");
    assert_eq!(spring["keys"]["empty_denied"], true, "{spring:?}");
    assert!(
        spring["keys"].get("empty_unlimited").is_none(),
        "{spring:?}"
    );
    assert_eq!(spring["keys"]["state"]["keys_alive_max"], 5, "{spring:?}");
    assert!(
        admitted("spring") <= 120
            && admitted("spring") + spring["rejected"].as_u64().unwrap() == 240,
        "{spring:?}"
    );
    assert!(spring["bound"].is_u64(), "{spring:?}");
}

/// A workload of two logs (two servers' of one site, say), whose clients
/// partly meet: its sources share one numbering of their keys, and each
/// part names its clients by it, so the shards merge into the whole run.
#[test]
fn the_shards_of_a_workload_of_two_logs_merge_into_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    for (file, first) in [("a.log", 0), ("b.log", 3)] {
        let mut log = String::new();
        for second in 0..20 {
            for i in 0..8 {
                log.push_str(&format!(
                    "198.51.100.{} - - [27/Nov/2026:10:00:{second:02} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a\"\n",
                    first + (second + i) % 6
                ));
            }
        }
        fs::write(dir.path().join(file), log).unwrap();
    }
    let scenario = dir.path().join("two.toml");
    fs::write(
        &scenario,
        "name = \"two\"\nduration = \"20s\"\nseed = 3\n\n[[workload]]\nname = \"site\"\nsources = [{ kind = \"trace\", format = \"combined\", path = \"a.log\", key_field = \"remote_addr\" }, { kind = \"trace\", format = \"combined\", path = \"b.log\", key_field = \"remote_addr\" }]\n\n[[limiter]]\nname = \"window\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 2\nper = \"key\"\n\n[[limiter]]\nname = \"bucket\"\nkind = \"token-bucket\"\nrate = 2\nburst = 3\nper = \"key\"\n",
    )
    .unwrap();
    let whole = merges_as_the_whole_run(&scenario, dir.path());
    let summary: serde_json::Value =
        serde_json::from_slice(&whole[Path::new("summary.json")]).unwrap();
    let run = &summary["runs"][0];
    // Addresses .0–.5 and .3–.8: nine clients, three of them in both logs.
    assert_eq!(run["keys"]["keys"], 9, "{run:?}");
    assert!(run["rejected"].as_u64() > Some(0), "{run:?}");
}

/// Runs `scenario` whole into `dir`, then in one part and in four, each
/// part's shards merged in reverse order: every file of the merge is the
/// whole run's, byte for byte. The whole run's files.
fn merges_as_the_whole_run(
    scenario: &Path,
    dir: &Path,
) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let whole = dir.join("whole");
    let args: Vec<std::ffi::OsString> = vec![
        "run".into(),
        scenario.into(),
        "-q".into(),
        "--out".into(),
        whole.clone().into(),
    ];
    burstsim(&args);
    let expected = files(&whole);
    assert!(expected.contains_key(Path::new("summary.json")));
    assert!(expected.keys().any(|p| p.starts_with("charts")));
    // One part, and several: a limiter per key through its parts'
    // tallies, a global one by slices of time.
    for count in [1u64, 4] {
        let at = dir.join(format!("n{count}"));
        let parts = partition(scenario, &at, count);
        let mut decided = shards(scenario, &parts, count, &at);
        decided.reverse();
        let merged = at.join("merged");
        let (code, stderr) = merge(&parts, &decided, &merged);
        assert_eq!(code, Some(0), "{stderr}");
        let got = files(&merged);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>()
        );
        for (path, bytes) in &expected {
            assert!(
                got[path] == *bytes,
                "{count} parts: {} differs",
                path.display()
            );
        }
    }
    expected
}

/// Over a rolling minute the whole run packs the log's seconds for the
/// backend's second: so do the shards, and the merge gives the same
/// `backend.whole_seconds`, byte for byte.
#[test]
fn shards_over_a_rolling_minute_give_the_backends_packed_second_as_the_whole_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("minute.toml");
    fs::write(
        &scenario,
        movable_scenario().replace("[backend]", "[metrics]\nrolling = \"1m\"\n\n[backend]"),
    )
    .unwrap();
    let whole = dir.path().join("whole");
    burstsim(&[
        "run".into(),
        scenario.clone().into_os_string(),
        "-q".into(),
        "--no-charts".into(),
        "--out".into(),
        whole.clone().into_os_string(),
    ]);
    let summary = fs::read(whole.join("summary.json")).unwrap();
    let parsed: serde_json::Value = serde_json::from_slice(&summary).unwrap();
    assert!(
        parsed["runs"][0]["backend"]["whole_seconds"]["admitted_at_least"]
            .as_u64()
            .unwrap()
            > parsed["runs"][0]["backend"]["worst_1s"].as_u64().unwrap(),
        "packed beyond the seeded second"
    );
    let parts = partition(&scenario, dir.path(), 3);
    let decided = shards(&scenario, &parts, 3, dir.path());
    let merged = dir.path().join("merged");
    let (code, stderr) = merge(&parts, &decided, &merged);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        fs::read(merged.join("summary.json")).unwrap() == summary,
        "the merged summary.json differs from the whole run's"
    );
}

#[test]
fn a_missing_foreign_or_altered_shard_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Path::new(SCENARIO);
    let parts = partition(scenario, dir.path(), 3);
    let decided = shards(scenario, &parts, 3, dir.path());
    let out = dir.path().join("merged");
    let (code, stderr) = merge(&parts, &decided[..2], &out);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("missing shard 2 of 3"), "{stderr}");
    let (code, stderr) = merge(
        &parts,
        &[decided[0].clone(), decided[0].clone(), decided[1].clone()],
        &out,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("are both shard 0 of 3"), "{stderr}");
    // A shard of another partitioning (another seed).
    let other = dir.path().join("other");
    fs::create_dir(&other).unwrap();
    let args: Vec<std::ffi::OsString> = vec![
        "partition".into(),
        scenario.into(),
        "--parts".into(),
        "3".into(),
        "--seed".into(),
        "12".into(),
        "--out".into(),
        other.join("parts").into(),
        "-q".into(),
    ];
    burstsim(&args);
    let args: Vec<std::ffi::OsString> = vec![
        "run".into(),
        scenario.into(),
        "--seed".into(),
        "12".into(),
        "--partition".into(),
        other.join("parts").into(),
        "--shard".into(),
        "1/3".into(),
        "--out".into(),
        other.join("s1").into(),
        "-q".into(),
    ];
    burstsim(&args);
    let (code, stderr) = merge(
        &parts,
        &[decided[0].clone(), other.join("s1"), decided[2].clone()],
        &out,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("s1/shard.json: a shard of another partitioning"),
        "{stderr}"
    );
    // A decision flipped in a shard's file.
    let file = decided[1].join("w0.l1.p0");
    let mut bytes = fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs::write(&file, bytes).unwrap();
    let (code, stderr) = merge(&parts, &decided, &out);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("w0.l1.p0"), "{stderr}");
    assert!(!out.exists(), "nothing written");
}

#[test]
#[ignore = "needs GNU parallel: run with --include-ignored, as .ci/run does"]
fn four_shards_under_gnu_parallel_merge_into_the_whole_run() {
    let _alone = super::common::real_time();
    if !Path::new("/usr/bin/parallel").exists() {
        super::common::required("GNU parallel is not installed (Debian's `parallel`)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = Path::new(SCENARIO);
    let whole = dir.path().join("whole");
    run(scenario, &whole, None);
    let parts = partition(scenario, dir.path(), 4);
    let binary = assert_cmd::cargo::cargo_bin("burstsim");
    // auto/4 reads the index from GNU parallel's PARALLEL_SEQ (from 1).
    let decide = || {
        let output = std::process::Command::new("parallel")
            .args(["--will-cite", "--halt", "now,fail=1", "-j", "4"])
            .arg(format!(
                "{} run {SCENARIO} --partition {} --shard auto/4 --out {}/shard-{{#}}",
                binary.display(),
                parts.display(),
                dir.path().display()
            ))
            .arg(":::")
            .args(["a", "b", "c", "d"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let stdout = decide();
    for i in 0..4 {
        assert!(stdout.contains(&format!("shard {i}/4:")), "{stdout}");
    }
    // Run again, as after a failure: every shard is already complete.
    let again = decide();
    assert_eq!(
        again
            .matches("of this partitioning is already complete in")
            .count(),
        4,
        "{again}"
    );
    let decided: Vec<PathBuf> = (1..=4)
        .map(|i| dir.path().join(format!("shard-{i}")))
        .collect();
    let merged = dir.path().join("merged");
    let (code, stderr) = merge(&parts, &decided, &merged);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        fs::read(merged.join("summary.json")).unwrap(),
        fs::read(whole.join("summary.json")).unwrap()
    );
}

/// Writes a combined log of `lines` lines over an hour of whole seconds:
/// 1 line in 4 from one of 50 busy addresses (about 14 a second each), the
/// rest spread over 2·10^6 (most seen a few times).
fn fleet_log(path: &Path, lines: u64) {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, fs::File::create(path).unwrap());
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..lines {
        // xorshift: a fixed stream, the same on every machine.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let address = if i % 4 == 0 {
            state % 50
        } else {
            50 + state % 2_000_000
        };
        let second = i * 3600 / lines;
        writeln!(
            out,
            "10.{}.{}.{} - - [27/Nov/2026:{:02}:{:02}:{:02} +0100] \"GET /api/cart?id={i} HTTP/1.1\" 200 512 \"-\" \"curl/8.5\"",
            address >> 16,
            (address >> 8) & 255,
            address & 255,
            9 + second / 3600,
            second / 60 % 60,
            second % 60
        )
        .unwrap();
    }
    out.flush().unwrap();
}

#[test]
#[ignore = "10^7 log lines (about 1 GB in a temporary folder, a minute or two): run with --include-ignored, as .ci/run does"]
fn ten_million_lines_in_eight_shards_under_gnu_parallel_merge_into_the_whole_run() {
    let _alone = super::common::real_time();
    if !Path::new("/usr/bin/parallel").exists() {
        super::common::required("GNU parallel is not installed (Debian's `parallel`)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fleet.log");
    fleet_log(&log, 10_000_000);
    let scenario = dir.path().join("fleet.toml");
    fs::write(
        &scenario,
        format!(
            "name = \"fleet\"\nduration = \"1h\"\nseed = 7\n[backend]\ncapacity = 2500\n[[workload]]\nname = \"fleet\"\nsources = [{{ kind = \"trace\", format = \"combined\", path = \"{}\", key_field = \"remote_addr\" }}]\n[[limiter]]\nname = \"global-fixed\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 2000\n[[limiter]]\nname = \"per-key-fixed\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5\nper = \"key\"\n[[limiter]]\nname = \"per-key-bucket\"\nkind = \"token-bucket\"\nrate = 5\nburst = 5\nper = \"key\"\n",
            log.display()
        ),
    )
    .unwrap();
    let whole = dir.path().join("whole");
    let args: Vec<std::ffi::OsString> = vec![
        "run".into(),
        scenario.clone().into(),
        "-q".into(),
        "--no-charts".into(),
        "--out".into(),
        whole.clone().into(),
    ];
    burstsim(&args);
    let parts = partition(&scenario, dir.path(), 8);
    // The log is not needed past this point.
    fs::remove_file(&log).unwrap();
    let binary = assert_cmd::cargo::cargo_bin("burstsim");
    let output = std::process::Command::new("parallel")
        .args(["--will-cite", "--halt", "now,fail=1", "-j", "2"])
        .arg(format!(
            "{} run {} --partition {} --shard auto/8 -q --out {}/shard-{{#}}",
            binary.display(),
            scenario.display(),
            parts.display(),
            dir.path().display()
        ))
        .arg(":::")
        .args((0..8).map(|i| i.to_string()))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let decided: Vec<PathBuf> = (1..=8)
        .map(|i| dir.path().join(format!("shard-{i}")))
        .collect();
    let merged = dir.path().join("merged");
    let mut args: Vec<std::ffi::OsString> = vec![
        "merge".into(),
        "-q".into(),
        "--no-charts".into(),
        "--partition".into(),
        parts.clone().into(),
    ];
    args.extend(decided.iter().map(|d| d.clone().into()));
    args.extend(["--out".into(), merged.clone().into()]);
    burstsim(&args);
    let summary = fs::read(whole.join("summary.json")).unwrap();
    assert!(
        fs::read(merged.join("summary.json")).unwrap() == summary,
        "summary.json differs"
    );
    // The figures are not trivial: every limiter turns some away, and the
    // per-key ones throttle the busy addresses.
    let json: serde_json::Value = serde_json::from_slice(&summary).unwrap();
    for run in json["runs"].as_array().unwrap() {
        assert_eq!(run["offered"], 10_000_000, "{run}");
        assert!(run["rejected"].as_u64().unwrap() > 0, "{run}");
        assert!(run["keys"]["throttled"].as_u64().unwrap() > 0, "{run}");
    }
    // A part replaced by another partitioning's is refused, naming it.
    let other = dir.path().join("other");
    let args: Vec<std::ffi::OsString> = vec![
        "partition".into(),
        SCENARIO.into(),
        "--parts".into(),
        "8".into(),
        "--out".into(),
        other.clone().into(),
        "-q".into(),
    ];
    burstsim(&args);
    fs::remove_dir_all(parts.join("5")).unwrap();
    copy_dir(&other.join("5"), &parts.join("5"));
    let (code, stderr) = merge(&parts, &decided, &dir.path().join("again"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("5/part.json: not part 5 of this partitioning"),
        "{stderr}"
    );
}

/// Copies the files of folder `from` into a new folder `to`.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
}
