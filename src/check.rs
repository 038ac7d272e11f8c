//! What `burstsim check` objects to in a run: more admitted in one second than
//! the backend serves, or requests the backend had to drop.

use crate::summary::RunSummary;
use crate::time::seconds;

/// One line per problem of `run`; none when it stays within the backend.
pub fn failures(run: &RunSummary) -> Vec<String> {
    let Some(backend) = &run.backend else {
        return Vec::new();
    };
    let name = format!("{} × {}", run.workload, run.limiter);
    let mut lines = Vec::new();
    let worst_1s = run.worst_1s_max().unwrap_or(backend.worst_1s);
    let replicated = run.replications.as_ref().map_or(String::new(), |r| {
        format!(" (worst of {} replications)", r.count)
    });
    if worst_1s > backend.capacity {
        // Where the worst second starts is known for replication 0 only.
        let start = run
            .profile
            .iter()
            .find(|p| p.interval_ns == 1_000_000_000)
            .map(|p| p.worst_start_ns);
        let start =
            start.or((run.rolling_ns == 1_000_000_000).then_some(run.worst_rolling_start_ns));
        let at = match (&run.replications, start) {
            (Some(_), _) => replicated.clone(),
            (None, Some(ns)) => format!(" from {}", seconds(ns)),
            (None, None) => String::new(),
        };
        lines.push(format!(
            "OVER  {name}: {worst_1s} admitted in one second{at}, {} over the backend's {}/s",
            worst_1s - backend.capacity,
            backend.capacity
        ));
    }
    if let (Some(queue), Some(dropped)) =
        (backend.queue.as_ref(), run.dropped_max().filter(|&d| d > 0))
    {
        lines.push(format!(
            "DROPS {name}: the backend dropped {dropped} requests{replicated} (queue of {})",
            queue.size
        ));
    }
    lines
}
