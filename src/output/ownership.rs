//! Which folders are burstsim's: a marker file, written last, lists every file
//! of a result folder; a folder may be replaced only when it is empty or holds
//! exactly what its marker lists, and nothing is ever read through a link.

use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The marker's file name inside a result folder.
pub const MARKER: &str = ".burstsim";
/// The marker's first line in finished results; the number is the format
/// version. Format 2 adds a second line, `id HEX`, new at every commit, so a
/// command can tell whether the results it started from are still there.
const FINISHED: &str = "burstsim results, format 2";
/// Finished results of earlier versions: no `id` line.
const FINISHED_1: &str = "burstsim results, format 1";
/// The marker's only line while a staging folder is being written.
pub const STAGING: &str = "burstsim staging, format 1";
/// A marker longer than this is not one of ours (a result folder of 10^5
/// decision files lists about 10 MB of names).
const MARKER_MAX_BYTES: u64 = 64 << 20;

/// What a folder is, for replacing it.
#[derive(Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Nothing in it.
    Empty,
    /// Finished burstsim results; the files its marker lists, in order.
    Results(Vec<String>),
    /// A staging folder of burstsim's, holding only regular files and folders.
    Staging,
    /// Anything else, and why, in words for an error message.
    Foreign(String),
}

/// Looks at `folder` without following any link in or below it.
pub fn ownership(folder: &Path) -> Result<Ownership> {
    let meta =
        fs::symlink_metadata(folder).with_context(|| format!("reading {}", folder.display()))?;
    if meta.file_type().is_symlink() {
        return Ok(Ownership::Foreign("it is a symbolic link".into()));
    }
    if !meta.is_dir() {
        return Ok(Ownership::Foreign("it is not a folder".into()));
    }
    let mut files = Vec::new();
    if let Some(foreign) = list_files(folder, "", &mut files)? {
        return Ok(Ownership::Foreign(foreign));
    }
    if files.is_empty() && fs::read_dir(folder)?.next().is_none() {
        return Ok(Ownership::Empty);
    }
    let Some(marker) = read_marker(folder)? else {
        let first = files.first().map_or("folders", String::as_str);
        return Ok(Ownership::Foreign(format!(
            "it holds {first} and no {MARKER} marker, so burstsim did not write it"
        )));
    };
    let mut lines = marker.lines().peekable();
    match lines.next() {
        Some(STAGING) => return Ok(Ownership::Staging),
        Some(FINISHED) if lines.next().is_some_and(|id| id.starts_with("id ")) => {}
        Some(FINISHED_1) => {}
        _ => {
            return Ok(Ownership::Foreign(format!(
                "its {MARKER} is not a burstsim marker"
            )));
        }
    }
    let listed: BTreeSet<&str> = lines.collect();
    // A marker travels with a folder that was shared, downloaded or
    // committed: one naming anything but a plain path inside the folder is
    // not burstsim's, whatever else it lists.
    if let Some(bad) = listed.iter().find(|name| !is_plain_relative(name)) {
        return Ok(Ownership::Foreign(format!(
            "its {MARKER} names {}, which is not a plain path inside the folder",
            crate::input::escape_controls(bad)
        )));
    }
    if let Some(extra) = files
        .iter()
        .find(|f| *f != MARKER && !listed.contains(f.as_str()))
    {
        return Ok(Ownership::Foreign(format!(
            "it holds {extra}, which burstsim did not write"
        )));
    }
    // The files found in the folder, not the names in the marker: a listed
    // file may have been deleted since, and nothing outside is ever named.
    files.retain(|f| f != MARKER);
    Ok(Ownership::Results(files))
}

/// Looks at a staging folder (`.NAME.partial-ID`) whose writer is gone. Its
/// marker is written in steps — created empty, the staging line, then the
/// finished marker's first lines in one small write, then its list — so a
/// kill leaves one of those: each makes the folder burstsim's staging (every
/// file in a staging folder is burstsim's), as long as it holds no link or
/// special file.
pub fn staging_ownership(folder: &Path) -> Result<Ownership> {
    let found = ownership(folder)?;
    if !matches!(found, Ownership::Foreign(_)) {
        return Ok(found);
    }
    let mut files = Vec::new();
    if list_files(folder, "", &mut files)?.is_some() {
        return Ok(found);
    }
    let Some(marker) = read_marker(folder)? else {
        return Ok(found);
    };
    let first = marker.lines().next();
    if marker.is_empty() || first == Some(STAGING) || first == Some(FINISHED) {
        return Ok(Ownership::Staging);
    }
    Ok(found)
}

/// A `/`-separated path of plain names: not empty, not absolute, no `.`,
/// `..` or empty part, no NUL.
fn is_plain_relative(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('\0')
        && name
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// The text of `folder`'s marker, if it has one: what a command compares to
/// learn whether the results it started from were replaced meanwhile.
pub fn marker_text(folder: &Path) -> Result<Option<String>> {
    read_marker(folder)
}

/// The finished marker for `folder`: its `id`, then every regular file in
/// it, one per line.
pub fn finished_marker(folder: &Path, id: &str) -> Result<String> {
    let mut files = Vec::new();
    if let Some(foreign) = list_files(folder, "", &mut files)? {
        bail!("{}: {foreign}", folder.display());
    }
    let mut marker = format!("{FINISHED}\nid {id}\n");
    for file in files.iter().filter(|f| *f != MARKER) {
        marker.push_str(file);
        marker.push('\n');
    }
    Ok(marker)
}

/// Appends the `/`-separated paths of the regular files below `folder` to
/// `files`, sorted; returns why the folder is not burstsim's when it holds a
/// link, a special file or a name that is not UTF-8 without a newline.
fn list_files(folder: &Path, prefix: &str, files: &mut Vec<String>) -> Result<Option<String>> {
    let mut entries = fs::read_dir(folder)
        .with_context(|| format!("reading {}", folder.display()))?
        .collect::<std::io::Result<Vec<_>>>()
        .with_context(|| format!("reading {}", folder.display()))?;
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            return Ok(Some(format!(
                "it holds a file whose name is not UTF-8, in {prefix:?}"
            )));
        };
        let relative = format!("{prefix}{name}");
        if relative.contains('\n') {
            return Ok(Some("it holds a file whose name has a line break".into()));
        }
        // DirEntry::file_type never follows a link.
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            return Ok(Some(format!(
                "it holds {relative}, a symbolic link, which burstsim never writes"
            )));
        } else if kind.is_dir() {
            if let Some(foreign) = list_files(&entry.path(), &format!("{relative}/"), files)? {
                return Ok(Some(foreign));
            }
        } else if kind.is_file() {
            files.push(relative);
        } else {
            return Ok(Some(format!(
                "it holds {relative}, which is not a regular file"
            )));
        }
    }
    Ok(None)
}

/// The marker's text, if `folder` holds a regular file by that name.
fn read_marker(folder: &Path) -> Result<Option<String>> {
    let path = folder.join(MARKER);
    match fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Ok(None),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
    }
    let mut text = String::new();
    let read = fs::File::open(&path)
        .and_then(|file| file.take(MARKER_MAX_BYTES).read_to_string(&mut text));
    Ok(read.ok().map(|_| text))
}
