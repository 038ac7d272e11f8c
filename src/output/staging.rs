//! Result folders written all at once. Files go to a hidden staging folder
//! beside the target, `.NAME.partial-PID`; on commit the target is moved aside
//! to `.NAME.old-PID`, checked again there (so nothing that appeared during the
//! run is lost), and the staging folder takes its place. A run killed at any
//! step leaves the old results or the new ones, and the next run puts back or
//! removes the leftovers that are provably its own.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};

use super::ownership::{MARKER, Ownership, STAGING, finished_marker, ownership};

/// Staging folders of this process, removed on Ctrl-C; the lock is held while
/// a commit swaps folders, so an interrupt waits for the swap to finish.
static ACTIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes this process's staging folders and exits with status 130 on
/// Ctrl-C or SIGTERM. Call once, from `main`.
pub fn remove_staging_on_interrupt() {
    let _ = ctrlc::set_handler(|| {
        let active = ACTIVE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for path in active.iter() {
            let _ = fs::remove_dir_all(path);
        }
        eprintln!("interrupted; earlier results, if any, are as they were");
        std::process::exit(130);
    });
}

/// A folder being written; dropped without [`Staging::commit`], it disappears
/// and the previous results stay as they were.
pub struct Staging {
    staging: PathBuf,
    target: PathBuf,
    /// The process id in the leftover names; another only in tests, which
    /// play a process that was killed.
    pid: u32,
    notes: Vec<String>,
    committed: bool,
}

impl Staging {
    /// Starts writing results meant for `target`, which must not exist, be
    /// empty, or hold burstsim results.
    pub fn new(target: &Path) -> Result<Staging> {
        Staging::with_pid(target, std::process::id())
    }

    /// Starts writing results that add to those in `target` (if any): its
    /// files are linked into the staging folder, to be replaced or kept.
    pub fn update(target: &Path) -> Result<Staging> {
        let staging = Staging::new(target)?;
        // Nothing there yet (a scenario sized before it was ever run): nothing to keep.
        if fs::symlink_metadata(target).is_ok()
            && let Ownership::Results(files) = ownership(target)?
        {
            for file in files {
                let (from, to) = (target.join(&file), staging.staging.join(&file));
                if let Some(parent) = to.parent() {
                    fs::create_dir_all(parent)?;
                }
                // A hard link costs nothing; files are never changed in place
                // (`write` replaces them), so the old results stay intact.
                fs::hard_link(&from, &to)
                    .or_else(|_| fs::copy(&from, &to).map(drop))
                    .with_context(|| format!("copying {}", from.display()))?;
            }
        }
        Ok(staging)
    }

    fn with_pid(target: &Path, pid: u32) -> Result<Staging> {
        let name = target.file_name().with_context(|| {
            format!(
                "output folder {}: name a folder, like output/promo",
                target.display()
            )
        })?;
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut notes = Vec::new();
        if parent.is_dir() {
            notes = recover_leftovers(parent, name, target)?;
        }
        if fs::symlink_metadata(target).is_ok()
            && let Ownership::Foreign(why) = ownership(target)?
        {
            bail!(
                "output folder {} is not burstsim's to replace: {why}; choose a new or empty folder",
                target.display()
            );
        }
        fs::create_dir_all(parent)
            .with_context(|| format!("creating output folder {}", parent.display()))?;
        let staging = leftover_path(parent, name, "partial", pid);
        fs::create_dir(&staging)
            .with_context(|| format!("cannot write to output folder {}", parent.display()))?;
        lock().push(staging.clone());
        let staging = Staging {
            staging,
            target: target.to_owned(),
            pid,
            notes,
            committed: false,
        };
        staging.write(MARKER, &format!("{STAGING}\n"))?;
        Ok(staging)
    }

    /// The staging folder, where files are written.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// What was found and tidied from earlier interrupted runs, for the user.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Writes `contents` to `relative` inside the staging folder, replacing
    /// (never writing through) a file already there.
    pub fn write(&self, relative: &str, contents: &str) -> Result<()> {
        let path = self.staging.join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        match fs::remove_file(&path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(err).with_context(|| format!("replacing {}", path.display()));
            }
            _ => {}
        }
        fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))
    }

    /// A new file at `relative` inside the staging folder, for writing a
    /// large file as a stream.
    pub fn create(&self, relative: &str) -> Result<std::io::BufWriter<fs::File>> {
        let path = self.staging.join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(std::io::BufWriter::with_capacity(1 << 16, file))
    }

    /// Puts the staged results in place of the target.
    pub fn commit(self) -> Result<()> {
        self.commit_steps(usize::MAX)
    }

    /// The commit, stopping dead after `steps` steps, as a killed process
    /// would; tests use that to check every point of the swap.
    fn commit_steps(mut self, steps: usize) -> Result<()> {
        let marker = finished_marker(&self.staging)?;
        let mut step = 0;
        let mut crash = || {
            step += 1;
            step > steps
        };
        if crash() {
            std::mem::forget(self);
            return Ok(());
        }
        self.write(MARKER, &marker)?;
        let mut active = lock();
        if crash() {
            std::mem::forget(self);
            return Ok(());
        }
        let old = leftover_path(self.parent(), self.name(), "old", self.pid);
        let moved_aside = fs::symlink_metadata(&self.target).is_ok();
        if moved_aside {
            fs::rename(&self.target, &old)
                .with_context(|| format!("moving aside {}", self.target.display()))?;
            if crash() {
                std::mem::forget(self);
                return Ok(());
            }
            // Checked again now, on what was really moved aside: the folder
            // may have been created or changed since the run started.
            if let Ownership::Foreign(why) = ownership(&old)? {
                put_back(&old, &self.target)?;
                bail!(
                    "output folder {} changed during the run and is no longer burstsim's to replace: {why}; it is left as it is, and the new results were not written",
                    self.target.display()
                );
            }
        }
        if let Err(err) = fs::rename(&self.staging, &self.target) {
            if moved_aside {
                put_back(&old, &self.target)?;
            }
            return Err(err)
                .with_context(|| format!("moving results into {}", self.target.display()));
        }
        self.committed = true;
        active.retain(|p| p != &self.staging);
        drop(active);
        if crash() {
            return Ok(());
        }
        if moved_aside {
            fs::remove_dir_all(&old)
                .with_context(|| format!("removing old results {}", old.display()))?;
        }
        Ok(())
    }

    fn parent(&self) -> &Path {
        self.staging.parent().unwrap_or(Path::new("."))
    }

    fn name(&self) -> &OsStr {
        self.target.file_name().unwrap_or_default()
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.staging);
            lock().retain(|p| p != &self.staging);
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    ACTIVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `.NAME.KIND-PID` beside the target.
fn leftover_path(parent: &Path, name: &OsStr, kind: &str, pid: u32) -> PathBuf {
    parent.join(format!(".{}.{kind}-{pid}", name.to_string_lossy()))
}

/// Moves the set-aside folder back, or says where it is.
fn put_back(old: &Path, target: &Path) -> Result<()> {
    fs::rename(old, target).with_context(|| {
        format!(
            "something new is at {} too; the earlier folder is kept at {}",
            target.display(),
            old.display()
        )
    })
}

/// Puts back or removes what killed runs into `target` left beside it: an
/// `.old` folder of finished results returns to `target` when `target` is
/// gone and is removed otherwise; a staging folder is removed. Only folders of
/// processes no longer running, and only when they are provably burstsim's;
/// anything else is named in the notes returned.
fn recover_leftovers(parent: &Path, name: &OsStr, target: &Path) -> Result<Vec<String>> {
    let name = name.to_string_lossy();
    let mut notes = Vec::new();
    let entries = fs::read_dir(parent).with_context(|| format!("reading {}", parent.display()))?;
    let mut leftovers: Vec<(PathBuf, &str, Option<u32>)> = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&format!(".{name}.")))
        else {
            continue;
        };
        for kind in ["partial", "old"] {
            if let Some(tail) = rest.strip_prefix(kind) {
                let pid = tail.strip_prefix('-').and_then(|p| p.parse().ok());
                if tail.is_empty() || pid.is_some() {
                    leftovers.push((entry.path(), kind, pid));
                }
            }
        }
    }
    leftovers.sort();
    for (path, kind, pid) in leftovers {
        if pid.is_some_and(|pid| is_running(pid, &path)) {
            continue;
        }
        match (kind, ownership(&path)?) {
            ("partial", Ownership::Staging | Ownership::Results(_) | Ownership::Empty) => {
                fs::remove_dir_all(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
                notes.push(format!("removed {}, left by an interrupted run", path.display()));
            }
            ("old", Ownership::Results(_)) if fs::symlink_metadata(target).is_err() => {
                fs::rename(&path, target).with_context(|| format!("restoring {}", path.display()))?;
                notes.push(format!(
                    "restored earlier results to {} from {}, left by an interrupted run",
                    target.display(),
                    path.display()
                ));
            }
            ("old", Ownership::Results(_) | Ownership::Empty) => {
                fs::remove_dir_all(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
                notes.push(format!("removed {}, left by an interrupted run", path.display()));
            }
            (_, ownership) => notes.push(format!(
                "{} looks like a leftover of an interrupted run, but burstsim cannot prove it is its own ({}); delete it yourself if it is not needed",
                path.display(),
                match ownership {
                    Ownership::Foreign(why) => why,
                    _ => "a set-aside folder without finished results".into(),
                }
            )),
        }
    }
    Ok(notes)
}

/// Whether the process that named `path` after `pid` may still be writing
/// it; only Linux can tell, so elsewhere every leftover counts as some running
/// process's and is left alone.
fn is_running(pid: u32, path: &Path) -> bool {
    if pid == std::process::id() {
        return lock().iter().any(|p| p == path);
    }
    !cfg!(target_os = "linux") || Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process id above Linux's largest, so never running.
    const KILLED: u32 = 4_000_000_000;

    fn results(target: &Path, pid: u32, text: &str) -> Staging {
        let staging = Staging::with_pid(target, pid).unwrap();
        staging.write("summary.json", text).unwrap();
        staging.write("charts/a.svg", text).unwrap();
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

    #[test]
    fn replaces_its_own_results_and_leaves_nothing_beside_them() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        results(&target, std::process::id(), "1").commit().unwrap();
        results(&target, std::process::id(), "2").commit().unwrap();
        assert_eq!(read(&target.join("summary.json")), "2");
        assert_eq!(names(dir.path()), ["out"]);
        assert_eq!(
            read(&target.join(MARKER)),
            "burstsim results, format 1\ncharts/a.svg\nsummary.json\n"
        );
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
    fn a_folder_created_at_the_target_during_the_run_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let staging = results(&target, std::process::id(), "new");
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
        results(&target, std::process::id(), "old")
            .commit()
            .unwrap();
        let staging = results(&target, std::process::id(), "new");
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
        results(&target, std::process::id(), "old")
            .commit()
            .unwrap();
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
        results(&target, std::process::id(), "run")
            .commit()
            .unwrap();
        let staging = Staging::update(&target).unwrap();
        staging.write("summary.json", "changed").unwrap();
        staging.write("sizing.json", "size").unwrap();
        // Before the commit the earlier results are untouched, though linked.
        assert_eq!(read(&target.join("summary.json")), "run");
        staging.commit().unwrap();
        assert_eq!(read(&target.join("summary.json")), "changed");
        assert_eq!(read(&target.join("charts/a.svg")), "run");
        assert_eq!(read(&target.join("sizing.json")), "size");
        assert!(matches!(ownership(&target).unwrap(), Ownership::Results(f) if f.len() == 3));
    }

    #[test]
    fn a_kill_at_any_step_of_the_commit_leaves_old_or_new_results() {
        for earlier in [true, false] {
            for steps in 0..=5 {
                let dir = tempfile::tempdir().unwrap();
                let target = dir.path().join("out");
                if earlier {
                    results(&target, std::process::id(), "old")
                        .commit()
                        .unwrap();
                }
                results(&target, KILLED, "new").commit_steps(steps).unwrap();
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
    fn names_a_leftover_it_cannot_prove_is_its_own_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        for leftover in [".out.old", &format!(".out.partial-{KILLED}")] {
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
    fn leaves_the_staging_folder_of_a_running_process_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        // Process 1 is always running: its staging folder is not a leftover.
        let running = results(&target, 1, "theirs");
        let ours = results(&target, std::process::id(), "ours");
        assert!(ours.notes().is_empty(), "{:?}", ours.notes());
        assert_eq!(read(&running.path().join("summary.json")), "theirs");
        ours.commit().unwrap();
        running.commit().unwrap();
        assert_eq!(read(&target.join("summary.json")), "theirs");
        assert_eq!(names(dir.path()), ["out"]);
    }
}
