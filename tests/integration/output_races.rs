//! Two commands into one folder at once, signals and kill -9 at known steps:
//! each race made deterministic by pausing a real process at a named point
//! (`BURSTSIM_PAUSE_AT`), then the same commands in loops of unsynchronised
//! pairs and random kills, counting anomalies.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_burstsim");

/// A scenario small enough to run in milliseconds, whose results differ by
/// seed, and that can be run, sized, swept and merged.
const SCENARIO: &str = r#"duration = "10s"
seed = 1
[backend]
capacity = 50
[[workload]]
name = "w"
sources = [{ kind = "poisson", rate = 60 }]
[[limiter]]
name = "fw"
kind = "fixed-window"
window = "1s"
threshold = 40
"#;

struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("s.toml"), SCENARIO).unwrap();
        let place = Place { dir };
        // Parts of a sweep for `merge`, outside the folder under test.
        for shard in ["0/2", "1/2"] {
            let out = place.path().join(format!("parts/{}", &shard[..1]));
            place.ok(&[
                "sweep",
                "s.toml",
                "--vary",
                "limiter.fw.threshold=20,40",
                "--shard",
                shard,
                "--out",
                out.to_str().unwrap(),
            ]);
        }
        place
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn out(&self) -> PathBuf {
        self.path().join("out")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .arg("--quiet")
            .current_dir(self.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    fn ok(&self, args: &[&str]) -> Output {
        let output = self.command(args).output().unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Starts `args`, stopped at `point`; returns once it is stopped there.
    fn paused(&self, args: &[&str], point: &str) -> Child {
        let mut child = self
            .command(args)
            .env("BURSTSIM_PAUSE_AT", point)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !is_stopped(child.id()) {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{args:?} ended with {status} before reaching {point}");
            }
            assert!(started.elapsed() < Duration::from_secs(60), "never paused");
            std::thread::sleep(Duration::from_millis(2));
        }
        child
    }

    fn summary(&self) -> Option<Vec<u8>> {
        fs::read(self.out().join("summary.json")).ok()
    }

    /// What beside `out` a command left: hidden folders named after it.
    fn leftovers(&self) -> Vec<String> {
        names(self.path())
            .into_iter()
            .filter(|n| n.starts_with(".out."))
            .collect()
    }
}

/// The command line of each command the loops run, into `out`.
fn command(name: &str, seed: u64) -> Vec<String> {
    let seed = seed.to_string();
    let args: Vec<&str> = match name {
        "run" => vec!["run", "s.toml", "--seed", &seed],
        "size" => vec!["size", "s.toml"],
        "sweep" => vec!["sweep", "s.toml", "--vary", "limiter.fw.threshold=20,40"],
        "merge" => vec!["merge", "parts/0", "parts/1"],
        _ => unreachable!(),
    };
    args.into_iter()
        .map(str::to_string)
        .chain(["--out".to_string(), "out".to_string()])
        .collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn names(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn is_stopped(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, after) = stat.rsplit_once(')')?;
            after.split_whitespace().next().map(|state| state == "T")
        })
        .unwrap_or(false)
}

fn signal(child: &Child, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

/// The files of `out` its marker lists, or why it is not burstsim's results.
fn results(out: &Path) -> Result<Vec<String>, String> {
    let marker = fs::read_to_string(out.join(".burstsim")).map_err(|e| format!("marker: {e}"))?;
    let mut lines = marker.lines();
    match lines.next() {
        Some("burstsim results, format 2") => drop(lines.next()),
        Some("burstsim results, format 1") => {}
        _ => return Err(format!("not finished results: {marker}")),
    }
    let listed: Vec<String> = lines.map(str::to_string).collect();
    for file in &listed {
        if !out.join(file).is_file() {
            return Err(format!("{file} listed but missing"));
        }
    }
    Ok(listed)
}

#[test]
fn a_run_committed_while_size_works_is_never_reverted() {
    let place = Place::new();
    place.ok(&strs(&command("run", 1)));
    let size = place.paused(&strs(&command("size", 0)), "commit");
    place.ok(&strs(&command("run", 2)));
    let run_2 = place.summary().unwrap();
    signal(&size, "CONT");
    let size = finish(size);
    assert!(size.status.success(), "{size:?}");
    assert_eq!(place.summary().unwrap(), run_2, "the run was reverted");
    let report = fs::read_to_string(place.out().join("report.html")).unwrap();
    assert!(report.contains("<!-- burstsim:sizing -->"));
    assert!(place.out().join("sizing.json").is_file());
    assert!(place.leftovers().is_empty(), "{:?}", place.leftovers());
}

#[test]
fn a_command_meeting_a_commit_under_way_waits_for_it_and_nothing_is_lost() {
    let place = Place::new();
    place.ok(&strs(&command("run", 1)));
    let first = place.paused(&strs(&command("run", 2)), "commit:moved-aside");
    let second = place.command(&strs(&command("run", 3))).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The first has moved the earlier results aside; the second waits.
    assert!(
        !place.out().exists() && place.leftovers().len() == 2,
        "the second command went ahead during the first one's commit: {:?}",
        place.leftovers()
    );
    signal(&first, "CONT");
    let (first, second) = (finish(first), finish(second));
    assert!(first.status.success(), "{first:?}");
    assert!(second.status.success(), "{second:?}");
    assert!(place.leftovers().is_empty(), "{:?}", place.leftovers());
    results(&place.out()).unwrap();
    // The second waited for the first to finish its commit, so it is last.
    let last = place.summary().unwrap();
    place.ok(&strs(&command("run", 3)));
    assert_eq!(place.summary().unwrap(), last);
}

#[test]
fn ctrl_c_stops_the_work_before_anything_is_removed() {
    let place = Place::new();
    place.ok(&strs(&command("run", 1)));
    let before = place.summary().unwrap();
    let run = place.paused(&strs(&command("run", 2)), "wrote:summary.json");
    signal(&run, "INT");
    signal(&run, "CONT");
    let run = finish(run);
    assert_eq!(run.status.code(), Some(130), "{run:?}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("earlier results, if any, are as they were"),
        "{stderr}"
    );
    assert!(place.leftovers().is_empty(), "{:?}", place.leftovers());
    assert_eq!(place.summary().unwrap(), before);
    results(&place.out()).unwrap();
}

#[test]
fn a_kill_while_the_earlier_results_are_removed_leaves_nothing_the_next_command_cannot_remove() {
    let place = Place::new();
    place.ok(&strs(&command("run", 1)));
    let run = place.paused(&strs(&command("run", 2)), "commit:removing-old");
    let new = place.summary().unwrap();
    signal(&run, "KILL");
    finish(run);
    assert_eq!(place.leftovers().len(), 1, "{:?}", place.leftovers());
    let next = place.ok(&strs(&command("size", 0)));
    let stderr = String::from_utf8_lossy(&next.stderr);
    assert!(stderr.contains("removed"), "{stderr}");
    assert!(!stderr.contains("cannot prove"), "{stderr}");
    assert!(place.leftovers().is_empty(), "{:?}", place.leftovers());
    assert_eq!(place.summary().unwrap(), new);
}

#[test]
fn a_staging_folder_locked_by_a_process_elsewhere_is_never_removed() {
    let place = Place::new();
    // A staging folder named after a process id that is not running here: a
    // writer in another PID namespace or on another host sharing the folder,
    // which holds its marker locked as burstsim does.
    let elsewhere = place.path().join(".out.partial-4000000000");
    fs::create_dir(&elsewhere).unwrap();
    fs::write(elsewhere.join("summary.json"), "theirs").unwrap();
    fs::write(elsewhere.join(".burstsim"), "burstsim staging, format 1\n").unwrap();
    // A process of its own holds the lock, as that writer would (flock(1),
    // which takes flock(2)'s lock, as burstsim does). Not this test's
    // process: a child that another test forks inherits its descriptors
    // until it executes, and the lock with them, so a lock released here
    // could still be held for a moment (the removal below once failed so).
    let mut holder = Command::new("flock")
        .arg(elsewhere.join(".burstsim"))
        .args(["sh", "-c", "echo locked; cat > /dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("flock(1), from util-linux");
    let mut locked = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut locked,
    )
    .unwrap();
    assert_eq!(locked, "locked\n");
    place.ok(&strs(&command("run", 1)));
    assert_eq!(
        fs::read_to_string(elsewhere.join("summary.json")).unwrap(),
        "theirs"
    );
    // Its input closed, the holder ends, and with it the lock.
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    let next = place.ok(&strs(&command("run", 1)));
    assert!(String::from_utf8_lossy(&next.stderr).contains("removed"));
    assert!(!elsewhere.exists());
}

#[test]
fn a_marker_naming_a_file_outside_the_folder_never_gets_it_truncated() {
    let place = Place::new();
    place.ok(&strs(&command("run", 1)));
    fs::write(place.path().join("notes.txt"), "my notes").unwrap();
    let marker = place.out().join(".burstsim");
    let text = fs::read_to_string(&marker).unwrap();
    fs::write(&marker, format!("{text}../notes.txt\n")).unwrap();
    for name in ["size", "sweep", "merge", "run"] {
        let output = place.command(&strs(&command(name, 2))).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{name}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("not a plain path"), "{name}: {stderr}");
        assert_eq!(
            fs::read_to_string(place.path().join("notes.txt")).unwrap(),
            "my notes"
        );
    }
}

/// A small deterministic generator for the loops' choices.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

const COMMANDS: [&str; 4] = ["run", "size", "sweep", "merge"];

/// What an update adds to the folder.
fn added_by(name: &str) -> Option<&'static str> {
    match name {
        "size" => Some("sizing.json"),
        "sweep" | "merge" => Some("sweep.json"),
        _ => None,
    }
}

#[test]
fn unsynchronised_pairs_of_every_two_commands_lose_and_revert_nothing() {
    const ROUNDS: usize = 20;
    let place = Place::new();
    let mut anomalies = Vec::new();
    let mut pairs = 0;
    for (i, a) in COMMANDS.iter().enumerate() {
        for b in &COMMANDS[i..] {
            for round in 0..ROUNDS {
                let _ = fs::remove_dir_all(place.out());
                place.ok(&strs(&command("run", 1)));
                let earlier = place.summary().unwrap();
                let children = [(a, 2), (b, 3)].map(|(name, seed)| {
                    place.command(&strs(&command(name, seed))).spawn().unwrap()
                });
                let outputs = children.map(finish);
                pairs += 1;
                let case = format!("{a} + {b}, round {round}");
                for output in &outputs {
                    if !output.status.success() {
                        anomalies.push(format!("{case}: {output:?}"));
                    }
                }
                if !place.leftovers().is_empty() {
                    anomalies.push(format!("{case}: left {:?}", place.leftovers()));
                }
                let listed = match results(&place.out()) {
                    Ok(listed) => listed,
                    Err(why) => {
                        anomalies.push(format!("{case}: {why}"));
                        continue;
                    }
                };
                let ran = *a == "run" || *b == "run";
                let summary = place.summary();
                if ran && summary.as_ref() == Some(&earlier) {
                    anomalies.push(format!("{case}: the run was reverted"));
                }
                if !ran {
                    if summary.as_ref() != Some(&earlier) {
                        anomalies.push(format!("{case}: the earlier run was lost"));
                    }
                    for added in [a, b].into_iter().filter_map(|n| added_by(n)) {
                        if !listed.iter().any(|f| f == added) {
                            anomalies.push(format!("{case}: {added} was lost"));
                        }
                    }
                }
                let Ok(report) = fs::read_to_string(place.out().join("report.html")) else {
                    anomalies.push(format!("{case}: report.html was lost"));
                    continue;
                };
                if listed.iter().any(|f| f == "sizing.json")
                    && !report.contains("<!-- burstsim:sizing -->")
                {
                    anomalies.push(format!("{case}: sizing.json without its report section"));
                }
                if listed.iter().any(|f| f == "sweep.json")
                    && !report.contains("<!-- burstsim:sweep -->")
                {
                    anomalies.push(format!("{case}: sweep.json without its report section"));
                }
            }
        }
    }
    assert_eq!(pairs, 10 * ROUNDS);
    assert!(
        anomalies.is_empty(),
        "{} anomalies in {pairs} pairs:\n{}",
        anomalies.len(),
        anomalies.join("\n")
    );
}

#[test]
fn a_kill_at_a_random_moment_of_any_command_leaves_old_or_new_results() {
    const KILLS: usize = 40;
    let place = Place::new();
    let mut random = Lcg(7);
    let mut anomalies = Vec::new();
    let mut kills = 0;
    for name in COMMANDS {
        // How long the command takes here, to aim the kills across all of it.
        let started = Instant::now();
        place.ok(&strs(&command("run", 1)));
        place.ok(&strs(&command(name, 2)));
        let span = started.elapsed().as_micros() as u64 / 2 + 1;
        for round in 0..KILLS {
            let _ = fs::remove_dir_all(place.out());
            place.ok(&strs(&command("run", 1)));
            let earlier = place.summary().unwrap();
            let child = place.command(&strs(&command(name, 2))).spawn().unwrap();
            std::thread::sleep(Duration::from_micros(random.below(span * 5 / 4)));
            signal(&child, "KILL");
            finish(child);
            kills += 1;
            let case = format!("{name}, kill {round}");
            // The next command tidies what the killed one left.
            let next = place.command(&strs(&command("size", 0))).output().unwrap();
            let stderr = String::from_utf8_lossy(&next.stderr);
            if !next.status.success() || stderr.contains("cannot prove") {
                anomalies.push(format!("{case}: next command: {stderr}"));
            }
            if !place.leftovers().is_empty() {
                anomalies.push(format!("{case}: left {:?}", place.leftovers()));
            }
            if let Err(why) = results(&place.out()) {
                anomalies.push(format!("{case}: {why}"));
            }
            let summary = place.summary();
            if name != "run" && summary.as_ref() != Some(&earlier) {
                anomalies.push(format!("{case}: the earlier results were lost"));
            }
            if summary.is_none() {
                anomalies.push(format!("{case}: no results"));
            }
        }
    }
    assert_eq!(kills, 4 * KILLS);
    assert!(
        anomalies.is_empty(),
        "{} anomalies in {kills} kills:\n{}",
        anomalies.len(),
        anomalies.join("\n")
    );
}
