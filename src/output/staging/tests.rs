use super::*;
use crate::output::lock::lock_file;
use std::time::Duration;

fn results(target: &Path, text: &str) -> Staging {
    let staging = Staging::new(target).unwrap();
    staging.write("summary.json", text).unwrap();
    staging.write("charts/a.svg", text).unwrap();
    staging.write("report.html", text).unwrap();
    staging
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

fn names(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A staging folder written by a process that was then killed: the folder
/// stays, its lock is gone.
fn killed(staging: Staging) -> PathBuf {
    let path = staging.path().to_owned();
    staging.abandon().unwrap();
    path
}

#[test]
fn replaces_its_own_results_and_leaves_nothing_beside_them() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    results(&target, "1").commit().unwrap();
    let first = read(&target.join(MARKER));
    results(&target, "2").commit().unwrap();
    assert_eq!(read(&target.join("summary.json")), "2");
    assert_eq!(names(dir.path()), ["out"]);
    let marker = read(&target.join(MARKER));
    let lines: Vec<&str> = marker.lines().collect();
    assert_eq!(lines[0], "burstsim results, format 2");
    assert!(lines[1].starts_with("id "), "{marker}");
    assert_eq!(lines[2..], ["charts/a.svg", "report.html", "summary.json"]);
    // Every commit has an id of its own.
    assert_ne!(first.lines().nth(1), marker.lines().nth(1));
}

#[test]
fn reads_the_markers_of_earlier_versions() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("summary.json"), "1").unwrap();
    fs::write(
        target.join(MARKER),
        "burstsim results, format 1\nsummary.json\n",
    )
    .unwrap();
    assert_eq!(
        ownership(&target).unwrap(),
        Ownership::Results(vec!["summary.json".into()])
    );
    results(&target, "2").commit().unwrap();
    assert_eq!(read(&target.join("summary.json")), "2");
}

#[test]
fn never_replaces_a_folder_holding_another_tools_summary_json() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_ed25519"), "key").unwrap();
    fs::write(home.join("summary.json"), "{}").unwrap();
    let err = Staging::new(&home).err().unwrap().to_string();
    assert!(err.contains("no .burstsim marker"), "{err}");
    assert!(err.contains(".ssh/id_ed25519"), "{err}");
    assert_eq!(read(&home.join(".ssh/id_ed25519")), "key");
    assert_eq!(names(dir.path()), ["home"]);
}

#[test]
fn a_marker_naming_files_outside_its_folder_makes_the_folder_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    fs::write(dir.path().join("notes.txt"), "my notes").unwrap();
    let thesis = dir.path().join("thesis.tex");
    fs::write(&thesis, "my thesis").unwrap();
    for listed in [
        "../notes.txt".to_string(),
        thesis.display().to_string(),
        "charts/../../notes.txt".into(),
        "./summary.json".into(),
        "charts//a.svg".into(),
    ] {
        results(&target, "1").commit().unwrap();
        let marker = read(&target.join(MARKER));
        fs::write(target.join(MARKER), format!("{marker}{listed}\n")).unwrap();
        let err = Staging::update(&target).err().unwrap().to_string();
        assert!(err.contains("not a plain path inside the folder"), "{err}");
        assert!(Staging::new(&target).is_err());
        assert_eq!(read(&dir.path().join("notes.txt")), "my notes");
        assert_eq!(read(&thesis), "my thesis");
        fs::remove_dir_all(&target).unwrap();
    }
}

#[test]
fn a_copy_never_writes_over_a_file_not_even_itself() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    fs::write(&file, "my notes").unwrap();
    assert!(link_or_copy(&file, &file).is_err());
    assert_eq!(read(&file), "my notes");
}

#[test]
fn a_folder_created_at_the_target_during_the_run_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    let staging = results(&target, "new");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("important.txt"), "mine").unwrap();
    let err = staging.commit().err().unwrap().to_string();
    assert!(err.contains("changed during the run"), "{err}");
    assert!(err.contains("important.txt"), "{err}");
    assert_eq!(read(&target.join("important.txt")), "mine");
    assert_eq!(names(dir.path()), ["out"]);
}

#[test]
fn a_file_added_to_earlier_results_during_the_run_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    results(&target, "old").commit().unwrap();
    let staging = results(&target, "new");
    fs::write(target.join("charts/notes.txt"), "mine").unwrap();
    assert!(staging.commit().is_err());
    assert_eq!(read(&target.join("charts/notes.txt")), "mine");
    assert_eq!(read(&target.join("summary.json")), "old");
}

#[test]
fn a_link_inside_results_is_never_followed_nor_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    results(&target, "old").commit().unwrap();
    fs::remove_dir_all(target.join("charts")).unwrap();
    std::os::unix::fs::symlink(&outside, target.join("charts")).unwrap();
    let err = Staging::update(&target).err().unwrap().to_string();
    assert!(err.contains("charts, a symbolic link"), "{err}");
    assert!(names(&outside).is_empty());
}

#[test]
fn an_update_keeps_the_other_files_and_never_writes_through_them() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    results(&target, "run").commit().unwrap();
    let staging = Staging::update(&target).unwrap();
    staging.write("summary.json", "changed").unwrap();
    staging.write("sizing.json", "size").unwrap();
    // Before the commit the earlier results are untouched, though linked.
    assert_eq!(read(&target.join("summary.json")), "run");
    staging.commit().unwrap();
    assert_eq!(read(&target.join("summary.json")), "changed");
    assert_eq!(read(&target.join("charts/a.svg")), "run");
    assert_eq!(read(&target.join("sizing.json")), "size");
    assert!(matches!(ownership(&target).unwrap(), Ownership::Results(f) if f.len() == 4));
}

/// What `size` does at its commit: adds its section to the run's report.
fn add_section(staging: &Staging, section: &str) -> Result<()> {
    let report = fs::read_to_string(staging.path().join("report.html"))?;
    staging.write("report.html", &format!("{report} + {section}"))
}

#[test]
fn an_update_never_reverts_results_committed_while_it_worked() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    results(&target, "run 1").commit().unwrap();
    let size = Staging::update(&target).unwrap();
    size.write("sizing.json", "size").unwrap();
    // A run commits while the sizing is under way.
    results(&target, "run 2").commit().unwrap();
    size.commit_with(|s| add_section(s, "sizing")).unwrap();
    assert_eq!(read(&target.join("summary.json")), "run 2");
    assert_eq!(read(&target.join("charts/a.svg")), "run 2");
    assert_eq!(read(&target.join("report.html")), "run 2 + sizing");
    assert_eq!(read(&target.join("sizing.json")), "size");
    assert_eq!(names(dir.path()), ["out"]);
}

#[test]
fn two_updates_at_once_keep_both_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    results(&target, "run").commit().unwrap();
    let size = Staging::update(&target).unwrap();
    let sweep = Staging::update(&target).unwrap();
    size.write("sizing.json", "size").unwrap();
    sweep.write("sweep.json", "sweep").unwrap();
    size.commit_with(|s| add_section(s, "sizing")).unwrap();
    sweep.commit_with(|s| add_section(s, "sweep")).unwrap();
    assert_eq!(read(&target.join("sizing.json")), "size");
    assert_eq!(read(&target.join("sweep.json")), "sweep");
    assert_eq!(read(&target.join("report.html")), "run + sizing + sweep");
    // Its own files win over the newer ones of the same name.
    let again = Staging::update(&target).unwrap();
    again.write("sizing.json", "size 2").unwrap();
    results(&target, "run 2").commit().unwrap();
    again.commit().unwrap();
    assert_eq!(read(&target.join("sizing.json")), "size 2");
    assert_eq!(read(&target.join("summary.json")), "run 2");
    assert!(!target.join("sweep.json").exists());
}

#[test]
fn an_update_whose_results_were_removed_meanwhile_keeps_only_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    results(&target, "run").commit().unwrap();
    let size = Staging::update(&target).unwrap();
    size.write("sizing.json", "size").unwrap();
    fs::remove_dir_all(&target).unwrap();
    size.commit().unwrap();
    assert_eq!(
        ownership(&target).unwrap(),
        Ownership::Results(vec!["sizing.json".into()])
    );
}

#[test]
fn a_commit_waits_for_another_commands_lock_beside_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    let staging = results(&target, "new");
    let held = lock_beside(dir.path(), OsStr::new("out")).unwrap();
    let committing = std::thread::spawn(move || staging.commit());
    std::thread::sleep(Duration::from_millis(200));
    assert!(!target.exists(), "committed while another held the lock");
    drop(held);
    committing.join().unwrap().unwrap();
    assert_eq!(read(&target.join("summary.json")), "new");
}

#[test]
fn a_kill_at_any_step_of_the_commit_leaves_old_or_new_results() {
    for earlier in [true, false] {
        for steps in 0..=5 {
            let dir = tempfile::tempdir().unwrap();
            let target = dir.path().join("out");
            if earlier {
                results(&target, "old").commit().unwrap();
            }
            let staging = results(&target, "new");
            // A kill at `steps`: the lock goes with the process.
            staging.commit_steps(|_| Ok(()), steps).unwrap();
            let leftovers = names(dir.path())
                .iter()
                .filter(|n| n.starts_with('.'))
                .count();
            // The next run tidies up before it starts, and says so.
            let next = Staging::new(&target).unwrap();
            assert_eq!(
                next.notes().len(),
                leftovers,
                "{earlier} {steps}: {:?}",
                next.notes()
            );
            assert!(
                next.notes().iter().all(|n| !n.contains("cannot prove")),
                "{earlier} {steps}: {:?}",
                next.notes()
            );
            drop(next);
            let found = fs::read_to_string(target.join("summary.json")).ok();
            let expected: &[Option<&str>] = match (earlier, steps) {
                (true, 0..=1) => &[Some("old")],
                (true, _) => &[Some("old"), Some("new")],
                (false, 0..=1) => &[None],
                (false, _) => &[Some("new")],
            };
            assert!(
                expected.contains(&found.as_deref()),
                "{earlier} {steps}: {found:?}"
            );
            let left = if found.is_some() { vec!["out"] } else { vec![] };
            assert_eq!(names(dir.path()), left, "{earlier} {steps}");
        }
    }
}

#[test]
fn a_removal_killed_midway_leaves_a_folder_the_next_command_removes() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    let earlier = dir.path().join("earlier");
    let staging = Staging::new(&earlier).unwrap();
    for i in 0..50 {
        staging.write(&format!("f{i:02}.csv"), "x").unwrap();
    }
    staging.commit().unwrap();
    results(&target, "new").commit().unwrap();
    // The earlier results, set aside by a commit that was then killed while
    // removing them.
    let old = dir.path().join(".out.old-1-0");
    fs::rename(&earlier, &old).unwrap();
    remove_results(&old, true).unwrap();
    assert!(
        old.join(MARKER).is_file(),
        "the marker went before the rest"
    );
    assert_eq!(names(&old).len(), 50);
    let next = Staging::new(&target).unwrap();
    assert_eq!(next.notes().len(), 1, "{:?}", next.notes());
    assert!(next.notes()[0].starts_with("removed"), "{:?}", next.notes());
    assert!(!old.exists());
}

#[test]
fn a_set_aside_folder_that_cannot_go_back_is_kept_where_no_command_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    results(&target, "earlier").commit().unwrap();
    let old = dir.path().join(".out.old-1-0");
    fs::rename(&target, &old).unwrap();
    // Something that is not burstsim's took the target meanwhile.
    fs::create_dir(&target).unwrap();
    fs::write(target.join("theirs.txt"), "theirs").unwrap();
    let err = put_back(&old, &target).err().unwrap().to_string();
    assert!(err.contains(".out.kept-"), "{err}");
    let kept: Vec<String> = names(dir.path())
        .into_iter()
        .filter(|n| n.starts_with(".out.kept-"))
        .collect();
    assert_eq!(kept.len(), 1);
    fs::remove_dir_all(&target).unwrap();
    results(&target, "next").commit().unwrap();
    results(&target, "after").commit().unwrap();
    assert_eq!(
        read(&dir.path().join(&kept[0]).join("summary.json")),
        "earlier"
    );
}

#[test]
fn names_a_leftover_it_cannot_prove_is_its_own_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    for leftover in [".out.old", ".out.partial-4000000000"] {
        fs::create_dir(dir.path().join(leftover)).unwrap();
        fs::write(dir.path().join(leftover).join("data"), "x").unwrap();
    }
    let staging = Staging::new(&target).unwrap();
    assert_eq!(staging.notes().len(), 2, "{:?}", staging.notes());
    assert!(staging.notes()[0].contains("cannot prove"));
    staging.commit().unwrap();
    assert_eq!(names(dir.path()).len(), 3);
}

#[test]
fn removes_the_staging_folder_of_a_killed_command() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    let dead = killed(results(&target, "dead"));
    let ours = Staging::new(&target).unwrap();
    assert_eq!(ours.notes().len(), 1, "{:?}", ours.notes());
    assert!(!dead.exists());
}

#[test]
fn leaves_a_staging_folder_alone_while_its_writer_holds_it_wherever_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out");
    // A writer in this process, one named after a process id not running
    // here (another PID namespace), one from another host: each holds its
    // marker's lock, which is all that counts.
    let running = results(&target, "theirs");
    let mut held = Vec::new();
    for name in [".out.partial-4000000000", ".out.partial-1-00ff00ff00ff00ff"] {
        let other = killed(results(&target, "other"));
        let elsewhere = dir.path().join(name);
        fs::rename(&other, &elsewhere).unwrap();
        let marker = File::options()
            .read(true)
            .write(true)
            .open(elsewhere.join(MARKER))
            .unwrap();
        marker.lock().unwrap();
        held.push((elsewhere, marker));
    }
    let ours = results(&target, "ours");
    assert!(ours.notes().is_empty(), "{:?}", ours.notes());
    assert_eq!(read(&running.path().join("summary.json")), "theirs");
    for (elsewhere, _) in &held {
        assert_eq!(read(&elsewhere.join("summary.json")), "other");
    }
    ours.commit().unwrap();
    running.commit().unwrap();
    assert_eq!(read(&target.join("summary.json")), "theirs");
    // Their writers gone, the next command removes them.
    drop(held);
    let next = Staging::new(&target).unwrap();
    assert_eq!(next.notes().len(), 2, "{:?}", next.notes());
    drop(next);
    assert_eq!(names(dir.path()), ["out"]);
}

#[test]
fn a_staging_folder_killed_at_any_step_of_its_marker_is_removed() {
    for marker in [
        "",
        "burstsim staging, format 1\n",
        "burstsim results, format 2\nid 1-0\n",
        "burstsim results, format 2\nid 1-0\nsumm",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let dead = killed(results(&target, "dead"));
        fs::write(dead.join(MARKER), marker).unwrap();
        let next = Staging::new(&target).unwrap();
        assert_eq!(next.notes().len(), 1, "{marker:?}: {:?}", next.notes());
        assert!(next.notes()[0].starts_with("removed"), "{:?}", next.notes());
        assert!(!dead.exists());
    }
}

#[test]
fn the_lock_file_beside_the_target_excludes_another_holder() {
    // Where a folder cannot be locked, a `.NAME.lock` file is: one holder at
    // a time, and a second waits for the first.
    let dir = tempfile::tempdir().unwrap();
    let held = lock_file(dir.path(), OsStr::new("out")).unwrap();
    assert!(dir.path().join(".out.lock").is_file());
    let other = File::open(dir.path().join(".out.lock")).unwrap();
    assert!(matches!(
        other.try_lock(),
        Err(fs::TryLockError::WouldBlock)
    ));
    let waiting = {
        let path = dir.path().to_owned();
        std::thread::spawn(move || lock_file(&path, OsStr::new("out")).map(drop))
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(!waiting.is_finished(), "took a lock another holds");
    drop(held);
    waiting.join().unwrap().unwrap();
    // It is not a leftover: a command tidying beside the target leaves it.
    results(&dir.path().join("out"), "1").commit().unwrap();
    assert!(dir.path().join(".out.lock").is_file());
}
