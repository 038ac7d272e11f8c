//! The lock beside a results folder: every step that looks at or changes
//! the folders beside a target holds it — a lock on the parent folder, or
//! where the file system cannot lock a folder, on `.NAME.lock` — waiting at
//! most a minute for another command, and giving way to Ctrl-C.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::interrupt;

/// How long a command waits for another one writing beside the same target
/// (a commit takes milliseconds; a paused or hung one is reported).
pub(super) const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Holds the lock for the folders beside the target: a lock on the parent
/// folder itself, or where the file system cannot lock a folder (some network
/// file systems), on a file `.NAME.lock` beside the target.
pub(super) struct LockBeside(#[allow(dead_code)] File);

pub(super) fn lock_beside(parent: &Path, name: &OsStr) -> Result<LockBeside> {
    // A folder that cannot be opened as a file (Windows) or locked (some
    // network file systems) falls back to the lock file.
    let unsupported = match File::open(parent) {
        Ok(folder) => match wait_for_lock(&folder, parent)? {
            None => return Ok(LockBeside(folder)),
            Some(err) => err,
        },
        Err(err) => err,
    };
    lock_file(parent, name)
        .with_context(|| format!("cannot lock {} ({unsupported})", parent.display()))
}

/// The lock on `.NAME.lock` beside the target, created once and left there.
pub(super) fn lock_file(parent: &Path, name: &OsStr) -> Result<LockBeside> {
    let path = parent.join(format!(".{}.lock", name.to_string_lossy()));
    let file = no_follow(
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )
    .open(&path)
    .with_context(|| format!("cannot open {}", path.display()))?;
    match wait_for_lock(&file, parent)? {
        None => Ok(LockBeside(file)),
        Some(err) => Err(err).with_context(|| format!("cannot lock {}", path.display())),
    }
}

/// Waits up to [`LOCK_WAIT`] for `file`'s lock; `Some` error when the file
/// system cannot lock it at all.
pub(super) fn wait_for_lock(file: &File, parent: &Path) -> Result<Option<std::io::Error>> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(None),
            Err(fs::TryLockError::Error(err)) => return Ok(Some(err)),
            Err(fs::TryLockError::WouldBlock) => {}
        }
        interrupt::check()?;
        if Instant::now() >= deadline {
            bail!(
                "another burstsim command has been writing into {} for {} s; try again when it has finished",
                parent.display(),
                LOCK_WAIT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `options` that refuse to open a symbolic link (where the system can say so).
pub(super) fn no_follow(options: &mut fs::OpenOptions) -> &mut fs::OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    options
}
