//! Ctrl-C and SIGTERM as a request to stop: the signal only raises a flag,
//! the work notices it at its next check and returns [`Interrupted`], and the
//! main thread cleans up as on any other error. Nothing is ever deleted from
//! the signal's thread while the main thread may still be writing.

use std::sync::atomic::{AtomicBool, Ordering};

/// Raised by the first Ctrl-C or SIGTERM.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The error the work returns once interrupted.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Installs the handler: the first signal asks the work to stop; a second one
/// stops the process at once (whatever it left behind is a leftover of a
/// process no longer running, which the next command into the folder removes).
/// Call once, from `main`.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            eprintln!("interrupted again; stopped at once");
            std::process::exit(130);
        }
    });
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// `Err(Interrupted)` once a stop was asked for: called between pieces of
/// work (a chunk of requests, a file written), never inside a commit.
pub fn check() -> Result<(), Interrupted> {
    if requested() {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Whether `err` is, or was caused by, an interrupt.
pub fn caused(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.is::<Interrupted>())
}

/// For tests of concurrent commands: when the environment variable
/// `BURSTSIM_PAUSE_AT` names `point`, the process stops itself (SIGSTOP)
/// there, so a test can run another command, send a signal, and continue it
/// (SIGCONT) at a known step instead of by luck.
pub fn pause_point(point: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("BURSTSIM_PAUSE_AT").ok());
    if at.as_deref() == Some(point) {
        // The crate forbids unsafe code, so no raise(3): kill(1) sends the
        // signal, and this process stops before it has reaped the child.
        let _ = std::process::Command::new("kill")
            .args(["-STOP", &std::process::id().to_string()])
            .status();
        // Continued: a Ctrl-C sent while stopped is handled on another
        // thread; give it time to be seen, however loaded the machine.
        for _ in 0..100 {
            if requested() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
