//! Every shipped scenario's results, byte for byte. The RNG (xoshiro256++
//! seeded by SplitMix64), the exponential sampler, every limiter and metric,
//! and float formatting all feed these bytes; a refactor or a dependency
//! update that changes any of them fails here.
//!
//! `summary.json` and `summary.csv` are kept in full under
//! `tests/golden/NAME/`; `timeline.csv` (megabytes for some scenarios) as its
//! length and FNV-1a digest; `--decisions` files (all but the 10^8-request
//! benchmark's) as digests of their `time_ns` and `admitted` columns, so a
//! column added later does not count as drift. Regenerate only on purpose, and say why in the
//! commit:
//!
//!     BURSTSIM_BLESS=1 cargo test --test integration golden::

use std::fs;
use std::path::Path;

use assert_cmd::Command;

use super::common;

/// FNV-1a, 64 bits: a fixed, portable digest (std's hasher may change).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn digest(bytes: &[u8]) -> String {
    format!("{} bytes, fnv1a {:016x}\n", bytes.len(), fnv1a(bytes))
}

#[test]
fn every_shipped_scenario_gives_its_golden_results() {
    let bless = std::env::var_os("BURSTSIM_BLESS").is_some();
    let scenarios = common::shipped_scenarios();
    assert!(scenarios.len() >= 10, "found only {scenarios:?}");
    let mut drifted = Vec::new();
    for scenario in scenarios {
        let name = scenario.file_stem().unwrap().to_str().unwrap().to_owned();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        Command::cargo_bin("burstsim")
            .unwrap()
            .arg("run")
            .arg(&scenario)
            .args(["-q", "--no-charts", "--out"])
            .arg(&out)
            .args((name != "bench-100m").then_some("--decisions"))
            .assert()
            .success();
        let golden = Path::new("tests/golden").join(&name);
        let mut files = vec![
            ("summary.json", fs::read(out.join("summary.json")).unwrap()),
            ("summary.csv", fs::read(out.join("summary.csv")).unwrap()),
            (
                "timeline.csv.digest",
                digest(&fs::read(out.join("timeline.csv")).unwrap()).into_bytes(),
            ),
        ];
        if name != "bench-100m" {
            files.push(("decisions.digest", decisions_digest(&out.join("decisions"))));
        }
        for (file, actual) in files {
            let path = golden.join(file);
            if bless {
                fs::create_dir_all(&golden).unwrap();
                fs::write(&path, &actual).unwrap();
            } else if fs::read(&path).ok().as_deref() != Some(&actual[..]) {
                drifted.push(path.display().to_string());
            }
        }
    }
    assert!(
        drifted.is_empty(),
        "results differ from the golden copies: {drifted:?}"
    );
}

/// One line per `decisions/WORKLOAD/LIMITER.csv`, in name order: its path
/// and the digest of its `time_ns` and `admitted` columns.
fn decisions_digest(folder: &Path) -> Vec<u8> {
    let mut files = Vec::new();
    for workload in fs::read_dir(folder).unwrap() {
        for file in fs::read_dir(workload.unwrap().path()).unwrap() {
            files.push(file.unwrap().path());
        }
    }
    files.sort();
    let mut lines = String::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let mut rows = text.lines();
        let header: Vec<&str> = rows.next().unwrap().split(',').collect();
        let column = |name: &str| header.iter().position(|&h| h == name).unwrap();
        let (time, admitted) = (column("time_ns"), column("admitted"));
        let kept: String = rows
            .map(|row| {
                let fields: Vec<&str> = row.split(',').collect();
                format!("{},{}\n", fields[time], fields[admitted])
            })
            .collect();
        let relative = file.strip_prefix(folder).unwrap().display().to_string();
        lines += &format!("{relative}: {}", digest(kept.as_bytes()));
    }
    lines.into_bytes()
}

#[test]
fn the_digest_tells_one_changed_byte() {
    assert_ne!(digest(b"time_ns,1\n"), digest(b"time_ns,2\n"));
    assert_ne!(digest(b"ab"), digest(b"ba"));
}
