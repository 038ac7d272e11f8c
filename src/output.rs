//! Result folders written all at once: files go to a hidden staging folder
//! beside the target, which replaces the target only when everything is written.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::scenario::Scenario;
use crate::sim::DecisionSink;
use crate::time::Nanos;

/// A folder being written; dropped without [`Staging::commit`], it disappears
/// and the previous results stay as they were.
pub struct Staging {
    staging: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl Staging {
    /// Starts writing results meant for `target`.
    pub fn new(target: &Path) -> Result<Staging> {
        let name = target.file_name().with_context(|| {
            format!(
                "output folder {}: name a folder, like output/promo",
                target.display()
            )
        })?;
        if target.exists() && !is_replaceable(target) {
            bail!(
                "output folder {} exists and does not hold burstsim results (no summary.json); choose a new or empty folder",
                target.display()
            );
        }
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(parent)
            .with_context(|| format!("creating output folder {}", parent.display()))?;
        let staging = parent.join(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        if staging.exists() {
            fs::remove_dir_all(&staging)
                .with_context(|| format!("clearing {}", staging.display()))?;
        }
        fs::create_dir(&staging)
            .with_context(|| format!("cannot write to output folder {}", parent.display()))?;
        Ok(Staging {
            staging,
            target: target.to_owned(),
            committed: false,
        })
    }

    /// The staging folder, where files are written.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Writes `contents` to `relative` inside the staging folder.
    pub fn write(&self, relative: &str, contents: &str) -> Result<()> {
        let path = self.staging.join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))
    }

    /// Puts the staged results in place of the target.
    pub fn commit(mut self) -> Result<()> {
        let old = self.staging.with_extension("old");
        if self.target.exists() {
            fs::rename(&self.target, &old)
                .with_context(|| format!("moving aside {}", self.target.display()))?;
        }
        if let Err(err) = fs::rename(&self.staging, &self.target) {
            // Put the previous results back before reporting.
            let _ = fs::rename(&old, &self.target);
            return Err(err)
                .with_context(|| format!("moving results into {}", self.target.display()));
        }
        self.committed = true;
        if old.exists() {
            fs::remove_dir_all(&old)
                .with_context(|| format!("removing old results {}", old.display()))?;
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

/// Writes each `(relative path, contents)` into `folder`, one file at a time:
/// each goes to a hidden temporary file first and is renamed into place, so no
/// file is ever half-written. Other files in the folder are left alone.
pub fn write_each(folder: &Path, files: &[(&str, &str)]) -> Result<()> {
    for (relative, contents) in files {
        let path = folder.join(relative);
        let parent = path.parent().unwrap_or(folder);
        fs::create_dir_all(parent)
            .with_context(|| format!("cannot write to output folder {}", parent.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let partial = parent.join(format!(".{name}.partial-{}", std::process::id()));
        fs::write(&partial, contents).with_context(|| format!("writing {}", partial.display()))?;
        fs::rename(&partial, &path)
            .with_context(|| format!("moving {} into place", path.display()))?;
    }
    Ok(())
}

/// An empty folder, or one holding earlier burstsim results, may be replaced.
fn is_replaceable(folder: &Path) -> bool {
    folder.is_dir()
        && (folder.join("summary.json").is_file()
            || fs::read_dir(folder).is_ok_and(|mut entries| entries.next().is_none()))
}

/// Streams every decision to `decisions/<workload>/<limiter>.csv`.
pub struct DecisionFiles {
    files: Vec<(PathBuf, BufWriter<fs::File>)>,
}

impl DecisionFiles {
    /// Creates one file per run, in the order the simulator numbers runs.
    pub fn create(folder: &Path, scenario: &Scenario) -> Result<DecisionFiles> {
        let mut files = Vec::new();
        for workload in &scenario.workloads {
            let dir = folder.join("decisions").join(&workload.name);
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for limiter in &scenario.limiters {
                let path = dir.join(format!("{}.csv", limiter.name));
                let file = fs::File::create(&path)
                    .with_context(|| format!("creating {}", path.display()))?;
                let mut writer = BufWriter::with_capacity(1 << 16, file);
                writer
                    .write_all(b"time_ns,admitted\n")
                    .with_context(|| format!("writing {}", path.display()))?;
                files.push((path, writer));
            }
        }
        Ok(DecisionFiles { files })
    }

    /// Flushes every file.
    pub fn finish(self) -> Result<()> {
        for (path, mut writer) in self.files {
            writer
                .flush()
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}

impl DecisionSink for DecisionFiles {
    fn record(&mut self, run: usize, time: Nanos, admitted: bool) -> std::io::Result<()> {
        let writer = &mut self.files[run].1;
        writeln!(writer, "{},{}", time.get(), admitted)
    }
}
