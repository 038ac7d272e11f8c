//! What `burstsim check` objects to in a run: more admitted in one second than
//! the backend serves, or requests the backend had to drop.

use crate::report::seconds;
use crate::summary::RunSummary;

/// One line per problem of `run`; none when it stays within the backend.
pub fn failures(run: &RunSummary) -> Vec<String> {
    let Some(backend) = &run.backend else {
        return Vec::new();
    };
    let name = format!("{} × {}", run.workload, run.limiter);
    let mut lines = Vec::new();
    if backend.over_capacity > 0 {
        let start = run
            .profile
            .iter()
            .find(|p| p.interval_ns == 1_000_000_000)
            .map(|p| p.worst_start_ns);
        let start =
            start.or((run.rolling_ns == 1_000_000_000).then_some(run.worst_rolling_start_ns));
        let at = start.map_or(String::new(), |ns| format!(" from {}", seconds(ns)));
        lines.push(format!(
            "OVER  {name}: {} admitted in one second{at}, {} over the backend's {}/s",
            backend.worst_1s, backend.over_capacity, backend.capacity
        ));
    }
    if let Some(queue) = backend.queue.as_ref().filter(|q| q.dropped > 0) {
        lines.push(format!(
            "DROPS {name}: the backend dropped {} requests (queue of {})",
            queue.dropped, queue.size
        ));
    }
    lines
}
