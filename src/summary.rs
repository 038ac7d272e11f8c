//! The one result type of a run, read by every output format.

use serde::Serialize;

/// The figures of one workload run through one limiter.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// The workload's name.
    pub workload: String,
    /// The limiter's name.
    pub limiter: String,
    /// The limiter's kind, as in the scenario file.
    pub kind: String,
    /// The limiter's effective parameters, like `10 per 100ms (epoch)`.
    pub description: String,
    /// Requests that arrived.
    pub offered: u64,
    /// Requests the limiter let through.
    pub admitted: u64,
    /// Requests the limiter turned away.
    pub rejected: u64,
    /// The headline interval L, in nanoseconds.
    pub rolling_ns: u64,
    /// The most admitted requests in any interval `[s, s + L)`.
    pub worst_rolling: u64,
    /// Start (ns) of the first interval holding `worst_rolling`: the time of its first admitted request.
    pub worst_rolling_start_ns: u64,
    /// What the limiter advertises over L (N·L/W, or rate·L).
    pub nominal: f64,
    /// `worst_rolling / nominal`: the "2×".
    pub spike_ratio: f64,
    /// The most this limiter can admit in any interval of L, over any traffic.
    pub bound: u64,
    /// The worst count for each interval of the profile (the arrival curve).
    pub profile: Vec<ProfilePoint>,
    /// How the admitted traffic compares with the backend, when one is given.
    pub backend: Option<BackendSummary>,
}

/// One point of the arrival curve.
#[derive(Clone, Debug, Serialize)]
pub struct ProfilePoint {
    /// The interval length, in nanoseconds.
    pub interval_ns: u64,
    /// The most admitted in any interval of that length.
    pub worst: u64,
    /// Start (ns) of the first such interval: the time of its first admitted request.
    pub worst_start_ns: u64,
    /// The limiter's bound for that length, over any traffic.
    pub bound: u64,
}

/// Admitted traffic against the backend's capacity.
#[derive(Clone, Debug, Serialize)]
pub struct BackendSummary {
    /// Requests per second the backend serves.
    pub capacity: u64,
    /// The most admitted in any 1 s interval.
    pub worst_1s: u64,
    /// The limiter's bound over 1 s: what it could admit in a second for any traffic.
    pub bound_1s: u64,
    /// The limiter's nominal allowance over 1 s.
    pub nominal_1s: f64,
    /// Requests rejected while fewer than `capacity` had been admitted in the
    /// trailing second: turned away although the backend had room.
    pub rejected_with_spare_capacity: u64,
    /// `max(0, worst_1s − capacity)`.
    pub over_capacity: u64,
    /// Total time during which the trailing-1 s admitted count exceeded capacity.
    pub seconds_over_capacity: f64,
    /// The backend as a server with a bounded queue, when `queue` is given.
    pub queue: Option<QueueSummary>,
}

/// The admitted requests served at `capacity` per second with a bounded queue.
#[derive(Clone, Debug, Serialize)]
pub struct QueueSummary {
    /// Requests the backend can hold waiting.
    pub size: u64,
    /// Requests that found the queue full.
    pub dropped: u64,
    /// The most requests waiting at once.
    pub max_queue: u64,
    /// Median wait before service, in nanoseconds (3 significant digits).
    pub wait_p50_ns: u64,
    /// 99th percentile of the wait, in nanoseconds (3 significant digits).
    pub wait_p99_ns: u64,
    /// Longest wait, in nanoseconds (3 significant digits).
    pub wait_max_ns: u64,
}

impl RunSummary {
    /// True when the run let through more in 1 s than the backend can take.
    pub fn exceeds_capacity(&self) -> bool {
        self.backend.as_ref().is_some_and(|b| b.over_capacity > 0)
    }
}

/// Everything `burstsim run` reports, as written to `summary.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The scenario's name.
    pub scenario: String,
    /// The seed used.
    pub seed: u64,
    /// The run's length, in nanoseconds.
    pub duration_ns: u64,
    /// One entry per workload × limiter, workloads in file order, then limiters.
    pub runs: Vec<RunSummary>,
}
