//! How many cores are free for a second thread, asked of the kernel just
//! before the work that would use one.

/// Whether a second core is free for a second thread now: this process
/// may run on more than one, and the kernel's count of threads running or
/// ready to run (`procs_running` in `/proc/stat`, this thread included),
/// the least of a few looks a fraction of a millisecond apart, leaves one
/// of them idle. A neighbour already busy on every other core makes two
/// threads slower than one (the second gets a share of a core, and the
/// first waits whenever it is taken off it), so the work stays on one.
/// Where the kernel does not say, a core is taken to be free (the
/// simulation's pipeline then finds out during the run).
pub fn second_core_free() -> bool {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if cores < 2 {
        return false;
    }
    let mut least = usize::MAX;
    for look in 0..PROBE_LOOKS {
        if look > 0 {
            std::thread::sleep(PROBE_APART);
        }
        let Some(running) = std::fs::read_to_string("/proc/stat")
            .ok()
            .as_deref()
            .and_then(procs_running)
        else {
            return true;
        };
        least = least.min(running);
    }
    free_cores(cores, least) >= 2
}

/// Looks at the kernel's count of running threads before deciding.
const PROBE_LOOKS: u32 = 4;
/// Between two looks: a busy neighbour is running at each; a short-lived
/// process (a shell's fork, a `grep`) rarely at all four.
const PROBE_APART: std::time::Duration = std::time::Duration::from_micros(250);

/// The `procs_running` count of `/proc/stat`'s text.
fn procs_running(stat: &str) -> Option<usize> {
    stat.lines()
        .find_map(|line| line.strip_prefix("procs_running "))
        .and_then(|count| count.trim().parse().ok())
}

/// Of `cores` this process may use, those left free when `running` threads
/// run or wait to run, the asking thread among them.
fn free_cores(cores: usize, running: usize) -> usize {
    cores.saturating_sub(running.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_free_cores_are_counted_from_the_kernel_s_running_threads() {
        let stat = "cpu  1 2 3\nctxt 9\nprocs_running 3\nprocs_blocked 0\n";
        assert_eq!(procs_running(stat), Some(3));
        assert_eq!(procs_running("cpu 1\nprocs_blocked 0\n"), None);
        // The asking thread is one of those running.
        assert_eq!(free_cores(2, 1), 2);
        assert_eq!(free_cores(2, 2), 1);
        assert_eq!(free_cores(2, 5), 0);
        assert_eq!(free_cores(8, 3), 6);
        assert_eq!(free_cores(2, 0), 2);
    }

    /// With a thread spinning on every core but one, no second core is
    /// free (other tests running at once only take more).
    #[test]
    #[cfg(target_os = "linux")]
    fn no_second_core_is_free_beside_a_spinner_on_every_other() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        if cores > 16 || std::fs::read_to_string("/proc/stat").is_err() {
            return;
        }
        let stop = AtomicBool::new(false);
        let free = std::thread::scope(|scope| {
            for _ in 1..cores {
                scope.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            let free = second_core_free();
            stop.store(true, Ordering::Relaxed);
            free
        });
        assert!(!free, "{cores} cores, {} spinning", cores - 1);
    }
}
