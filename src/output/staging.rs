//! Result folders written all at once. Files go to a hidden staging folder
//! beside the target, `.NAME.partial-ID`, whose marker the writer holds
//! locked for as long as it lives. Every step that looks at or changes the
//! folders beside the target — tidying leftovers, creating a staging folder,
//! the commit — holds one lock for the target's parent, so two commands never
//! interleave them. On commit the target is moved aside to `.NAME.old-ID`,
//! checked again there (nothing that appeared during the run is lost), and
//! the staging folder takes its place. A command killed at any step leaves
//! the old results or the new ones, and the next one puts back or removes the
//! leftovers that are provably its own.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{Seek as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::lock::{lock_beside, no_follow};
use super::ownership::{
    MARKER, Ownership, STAGING, finished_marker, marker_text, ownership, staging_ownership,
};
use crate::interrupt::{self, pause_point};

/// A folder being written; dropped without [`Staging::commit`], it disappears
/// and the previous results stay as they were.
pub struct Staging {
    staging: PathBuf,
    target: PathBuf,
    /// The staging folder's marker, open and locked from the folder's
    /// creation until this value is dropped: the lock, not a process id,
    /// tells another command (in another PID namespace, or on another host
    /// sharing the folder) that the folder is still being written.
    marker: File,
    /// For an update, the results it started from.
    base: Option<Base>,
    notes: Vec<String>,
    /// Committed, or given up as a killed process would: not removed on drop.
    kept: bool,
    /// Whether Ctrl-C stops the writing (see [`Staging::despite_interrupt`]).
    heeds_interrupt: bool,
}

/// The results an update started from: their marker, to learn at the commit
/// whether another command replaced them meanwhile, and each file linked
/// from them with its file id, to tell those from the files this command wrote.
struct Base {
    marker: Option<String>,
    linked: Vec<(String, u64)>,
}

impl Staging {
    /// Starts writing results meant for `target`, which must not exist, be
    /// empty, or hold burstsim results.
    pub fn new(target: &Path) -> Result<Staging> {
        Staging::open(target, false)
    }

    /// Starts writing results that add to those in `target` (if any): its
    /// files are linked into the staging folder, to be replaced or kept. If
    /// another command replaces `target` before the commit, the commit starts
    /// again from the newer results (see [`Staging::commit_with`]).
    pub fn update(target: &Path) -> Result<Staging> {
        Staging::open(target, true)
    }

    fn open(target: &Path, update: bool) -> Result<Staging> {
        let name = target.file_name().with_context(|| {
            format!(
                "output folder {}: name a folder, like output/promo",
                target.display()
            )
        })?;
        let parent = parent_of(target);
        fs::create_dir_all(parent)
            .with_context(|| format!("creating output folder {}", parent.display()))?;
        let _lock = lock_beside(parent, name)?;
        let notes = recover_leftovers(parent, name, target)?;
        if fs::symlink_metadata(target).is_ok()
            && let Some(why) = not_replaceable(target)?
        {
            bail!(
                "output folder {} is not burstsim's to replace: {why}; choose a new or empty folder",
                target.display()
            );
        }
        let staging = leftover_path(parent, name, "partial", &crate::random::unique_id());
        fs::create_dir(&staging)
            .with_context(|| format!("cannot write to output folder {}", parent.display()))?;
        let marker = match create_locked_marker(&staging) {
            Ok(marker) => marker,
            Err(err) => {
                let _ = fs::remove_dir_all(&staging);
                return Err(err);
            }
        };
        let mut staging = Staging {
            staging,
            target: target.to_owned(),
            marker,
            base: None,
            notes,
            kept: false,
            heeds_interrupt: true,
        };
        if update {
            staging.base = Some(Base {
                marker: current_marker(target)?,
                linked: staging.link_results()?,
            });
        }
        Ok(staging)
    }

    /// Writes and commits even after Ctrl-C: for results that cannot be
    /// had again by running the command again (a probe's answers from a
    /// real server), written once the work itself has stopped.
    pub fn despite_interrupt(mut self) -> Staging {
        self.heeds_interrupt = false;
        self
    }

    /// `Err(Interrupted)` once a stop was asked for, unless this staging
    /// writes despite it.
    fn check_interrupt(&self) -> Result<(), interrupt::Interrupted> {
        if self.heeds_interrupt {
            interrupt::check()
        } else {
            Ok(())
        }
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
        self.check_interrupt()?;
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
        fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        pause_point(&format!("wrote:{relative}"));
        Ok(())
    }

    /// A new file at `relative` inside the staging folder, for writing a
    /// large file as a stream.
    pub fn create(&self, relative: &str) -> Result<std::io::BufWriter<File>> {
        self.check_interrupt()?;
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
        self.commit_with(|_| Ok(()))
    }

    /// Puts the staged results in place of the target, calling `derive`
    /// first, under the lock: an update whose target was replaced since it
    /// started is first linked to the newer results (its own files kept), so
    /// `derive` — which reads files the update did not write, such as
    /// report.html, to add to them — reads the results that are there now.
    /// Two commands into one folder at once thus keep both their results.
    pub fn commit_with(self, derive: impl FnOnce(&Staging) -> Result<()>) -> Result<()> {
        self.commit_steps(derive, usize::MAX)
    }

    /// The commit, stopping dead after `steps` steps, as a killed process
    /// would; tests use that to check every point of the swap.
    fn commit_steps(
        mut self,
        derive: impl FnOnce(&Staging) -> Result<()>,
        steps: usize,
    ) -> Result<()> {
        // Once the commit has started it finishes: an interrupt is heeded
        // before it, never in the middle.
        self.check_interrupt()?;
        pause_point("commit");
        let _lock = lock_beside(self.parent(), self.name())?;
        pause_point("commit:locked");
        if let Some(base) = self.base.take() {
            self.rebase(base)?;
        }
        derive(&self)?;
        let marker = finished_marker(&self.staging, &crate::random::unique_id())?;
        let mut step = 0;
        let mut crash = || {
            step += 1;
            step > steps
        };
        if crash() {
            return self.abandon();
        }
        self.rewrite_marker(&marker)?;
        if crash() {
            return self.abandon();
        }
        let old = leftover_path(
            self.parent(),
            self.name(),
            "old",
            &crate::random::unique_id(),
        );
        let moved_aside = fs::symlink_metadata(&self.target).is_ok();
        if moved_aside {
            fs::rename(&self.target, &old)
                .with_context(|| format!("moving aside {}", self.target.display()))?;
            if crash() {
                return self.abandon();
            }
            pause_point("commit:moved-aside");
            // Checked again now, on what was really moved aside: the folder
            // may have been created or changed since the run started.
            if let Some(why) = not_replaceable(&old)? {
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
        self.kept = true;
        if crash() {
            return Ok(());
        }
        if moved_aside {
            remove_results(&old, crash())
                .with_context(|| format!("removing old results {}", old.display()))?;
        }
        Ok(())
    }

    /// Stops as a killed process would: the folder stays, its lock goes.
    fn abandon(mut self) -> Result<()> {
        self.kept = true;
        Ok(())
    }

    /// Links every file of the results now at the target that this command
    /// has not written itself; returns each with its file id.
    fn link_results(&self) -> Result<Vec<(String, u64)>> {
        let mut linked = Vec::new();
        // Nothing there yet (a scenario sized before it was ever run), or not
        // burstsim's (the commit refuses it): nothing to keep.
        if fs::symlink_metadata(&self.target).is_err() {
            return Ok(linked);
        }
        let Ownership::Results(files) = ownership(&self.target)? else {
            return Ok(linked);
        };
        for file in files {
            let (from, to) = (self.target.join(&file), self.staging.join(&file));
            if fs::symlink_metadata(&to).is_ok() {
                continue;
            }
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent)?;
            }
            link_or_copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
            linked.push((file, file_id(&fs::symlink_metadata(&to)?)));
        }
        Ok(linked)
    }

    /// Starts from the results at the target now when another command
    /// replaced those this update started from: the files linked from the
    /// earlier results go, this command's own stay, the newer ones come in.
    fn rebase(&mut self, base: Base) -> Result<()> {
        if current_marker(&self.target)? == base.marker {
            return Ok(());
        }
        for (file, id) in &base.linked {
            let path = self.staging.join(file);
            if fs::symlink_metadata(&path).is_ok_and(|meta| file_id(&meta) == *id) {
                fs::remove_file(&path).with_context(|| format!("replacing {}", path.display()))?;
            }
        }
        self.link_results()?;
        Ok(())
    }

    /// Writes the finished marker through the locked file, keeping the lock:
    /// its first two lines over the staging line in one small write (a kill
    /// leaves the one or the other whole), then the list of files.
    fn rewrite_marker(&mut self, text: &str) -> Result<()> {
        let path = self.staging.join(MARKER);
        let head = text
            .match_indices('\n')
            .nth(1)
            .map_or(text.len(), |(i, _)| i + 1);
        (|| {
            self.marker.rewind()?;
            self.marker.write_all(&text.as_bytes()[..head])?;
            self.marker.write_all(&text.as_bytes()[head..])?;
            self.marker.set_len(text.len() as u64)
        })()
        .with_context(|| format!("writing {}", path.display()))
    }

    fn parent(&self) -> &Path {
        parent_of(&self.target)
    }

    fn name(&self) -> &OsStr {
        self.target.file_name().unwrap_or_default()
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.kept {
            let _ = remove_results(&self.staging, false);
        }
    }
}

/// Why the folder at a target may not be replaced: only an empty folder or
/// finished results may (a staging marker never stands at a target).
fn not_replaceable(folder: &Path) -> Result<Option<String>> {
    Ok(match ownership(folder)? {
        Ownership::Empty | Ownership::Results(_) => None,
        Ownership::Staging => {
            Some("it holds a staging marker, which no finished results have".into())
        }
        Ownership::Foreign(why) => Some(why),
    })
}

fn parent_of(target: &Path) -> &Path {
    target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The marker of what is at `target` now, `None` when nothing is.
fn current_marker(target: &Path) -> Result<Option<String>> {
    if fs::symlink_metadata(target).is_err() {
        return Ok(None);
    }
    marker_text(target)
}

/// A new staging folder's marker, created and locked before anyone else can
/// look (the caller holds the lock beside the target).
fn create_locked_marker(staging: &Path) -> Result<File> {
    let path = staging.join(MARKER);
    let mut marker = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    marker
        .try_lock()
        .with_context(|| format!("locking {}", path.display()))?;
    marker
        .write_all(format!("{STAGING}\n").as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(marker)
}

/// A hard link from `from` to `to`, or where the file system has none, a
/// copy into a new file: never written over an existing file, so never a
/// file onto itself.
fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    match fs::hard_link(from, to) {
        Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => {
            let mut source = no_follow(fs::OpenOptions::new().read(true)).open(from)?;
            let mut copy = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(to)?;
            std::io::copy(&mut source, &mut copy).map(drop)
        }
        other => other,
    }
}

/// What tells one file from another: its inode where there is one, else its
/// size and time (good enough to tell a linked file from a new one).
fn file_id(meta: &fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        meta.ino()
    }
    #[cfg(not(unix))]
    {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (meta.len(), meta.modified().ok()).hash(&mut hasher);
        hasher.finish()
    }
}

/// `.NAME.KIND-ID` beside the target.
fn leftover_path(parent: &Path, name: &OsStr, kind: &str, id: &str) -> PathBuf {
    parent.join(format!(".{}.{kind}-{id}", name.to_string_lossy()))
}

/// Moves the set-aside folder back; where something new stands at the target
/// (not burstsim's: commits never overlap), the earlier folder is renamed to
/// `.NAME.kept-ID`, which no command ever removes, and the error says where.
fn put_back(old: &Path, target: &Path) -> Result<()> {
    if fs::rename(old, target).is_ok() {
        return Ok(());
    }
    let name = target.file_name().unwrap_or_default();
    let kept = leftover_path(parent_of(target), name, "kept", &crate::random::unique_id());
    let at = if fs::rename(old, &kept).is_ok() {
        kept
    } else {
        old.to_owned()
    };
    bail!(
        "something new is at {} too; the earlier folder is kept at {}, and burstsim will not remove it",
        target.display(),
        at.display()
    )
}

/// Removes a folder of burstsim's results or staging, its marker last: a
/// kill in the middle leaves a folder still provably burstsim's, which the
/// next command removes. Nothing below is followed through a link.
fn remove_results(folder: &Path, stop_after_first: bool) -> std::io::Result<()> {
    let gone = |result: std::io::Result<()>| match result {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    };
    for entry in fs::read_dir(folder)? {
        let entry = entry?;
        if entry.file_name() == MARKER {
            continue;
        }
        if entry.file_type()?.is_dir() {
            gone(fs::remove_dir_all(entry.path()))?;
        } else {
            gone(fs::remove_file(entry.path()))?;
        }
        if stop_after_first {
            return Ok(());
        }
        pause_point("commit:removing-old");
    }
    gone(fs::remove_file(folder.join(MARKER)))?;
    gone(fs::remove_dir(folder))
}

/// Whether another process holds the staging folder's marker locked: it is
/// being written, wherever that process runs.
fn is_being_written(folder: &Path) -> bool {
    let path = folder.join(MARKER);
    let open = |write| no_follow(fs::OpenOptions::new().read(true).write(write)).open(&path);
    match open(true).or_else(|_| open(false)) {
        Ok(marker) => matches!(marker.try_lock(), Err(fs::TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

/// Puts back or removes what killed commands into `target` left beside it
/// (the caller holds the lock beside the target, so no commit is under way):
/// an `.old` folder of finished results returns to `target` when `target` is
/// gone and is removed otherwise; a staging folder whose writer is gone is
/// removed. Only folders provably burstsim's; anything else is named in the
/// notes returned.
fn recover_leftovers(parent: &Path, name: &OsStr, target: &Path) -> Result<Vec<String>> {
    let name = name.to_string_lossy();
    let mut notes = Vec::new();
    let entries = fs::read_dir(parent).with_context(|| format!("reading {}", parent.display()))?;
    let mut leftovers: Vec<(PathBuf, &str)> = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&format!(".{name}.")))
        else {
            continue;
        };
        for kind in ["partial", "old"] {
            if let Some(tail) = rest.strip_prefix(kind)
                && (tail.is_empty() || tail.starts_with('-'))
            {
                leftovers.push((entry.path(), kind));
            }
        }
    }
    leftovers.sort();
    for (path, kind) in leftovers {
        if kind == "partial" && is_being_written(&path) {
            continue;
        }

        let removed = || -> Result<String> {
            remove_results(&path, false).with_context(|| format!("removing {}", path.display()))?;
            Ok(format!(
                "removed {}, left by an interrupted run",
                path.display()
            ))
        };
        let ownership = if kind == "partial" {
            staging_ownership(&path)?
        } else {
            ownership(&path)?
        };
        match (kind, ownership) {
            ("partial", Ownership::Staging | Ownership::Results(_) | Ownership::Empty) => {
                notes.push(removed()?);
            }
            ("old", Ownership::Results(_)) if fs::symlink_metadata(target).is_err() => {
                fs::rename(&path, target).with_context(|| format!("restoring {}", path.display()))?;
                notes.push(format!(
                    "restored earlier results to {} from {}, left by an interrupted run",
                    target.display(),
                    path.display()
                ));
            }
            ("old", Ownership::Results(_) | Ownership::Empty) => notes.push(removed()?),
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

#[cfg(test)]
mod tests;
