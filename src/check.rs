//! What `burstsim check` objects to in a run, as data: more admitted in one
//! second than the backend serves, or requests the backend had to drop. The
//! command, the sweep's cells and the report read these; none decides again.

use crate::summary::RunSummary;
use crate::time::seconds;

/// One way a run fails the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// More admitted in one second than the backend serves.
    Over {
        /// The most admitted in one second (the worst over replications).
        worst_1s: u64,
        /// What the backend serves in one.
        capacity: u64,
        /// Where that second starts, when one run shows it.
        from_ns: Option<u64>,
        /// The replications it is the worst of, when replicated.
        replications: Option<u64>,
    },
    /// Requests the backend had to drop from its full queue.
    Drops {
        /// How many (the most over replications).
        dropped: u64,
        /// The queue's size.
        queue: u64,
        /// The replications it is the worst of, when replicated.
        replications: Option<u64>,
    },
}

/// Every way `run` fails its backend; none when it stays within it (or has
/// no backend to fail).
pub fn failures(run: &RunSummary) -> Vec<Failure> {
    let Some(backend) = &run.backend else {
        return Vec::new();
    };
    let replications = run.replications.as_ref().map(|r| r.count);
    let mut failures = Vec::new();
    let worst_1s = run.worst_1s_max().unwrap_or(backend.worst_1s);
    if worst_1s > backend.capacity {
        // Where the worst second starts is known for replication 0 only.
        let start = run
            .profile
            .iter()
            .find(|p| p.interval_ns == 1_000_000_000)
            .map(|p| p.worst_start_ns);
        let start =
            start.or((run.rolling_ns == 1_000_000_000).then_some(run.worst_rolling_start_ns));
        failures.push(Failure::Over {
            worst_1s,
            capacity: backend.capacity,
            from_ns: start.filter(|_| replications.is_none()),
            replications,
        });
    }
    if let (Some(queue), Some(dropped)) =
        (backend.queue.as_ref(), run.dropped_max().filter(|&d| d > 0))
    {
        failures.push(Failure::Drops {
            dropped,
            queue: queue.size,
            replications,
        });
    }
    failures
}

impl Failure {
    /// The failure in one line, naming the run as `workload × limiter`.
    pub fn line(&self, run: &RunSummary) -> String {
        let name = format!("{} × {}", run.workload, run.limiter);
        let of = |replications: &Option<u64>| {
            replications.map_or(String::new(), |count| {
                format!(" (worst of {count} replications)")
            })
        };
        match self {
            Failure::Over {
                worst_1s,
                capacity,
                from_ns,
                replications,
            } => {
                let at = match (replications, from_ns) {
                    (Some(_), _) => of(replications),
                    (None, Some(ns)) => format!(" from {}", seconds(*ns)),
                    (None, None) => String::new(),
                };
                format!(
                    "OVER  {name}: {worst_1s} admitted in one second{at}, {} over the backend's {capacity}/s",
                    worst_1s - capacity
                )
            }
            Failure::Drops {
                dropped,
                queue,
                replications,
            } => format!(
                "DROPS {name}: the backend dropped {dropped} requests{} (queue of {queue})",
                of(replications)
            ),
        }
    }
}
