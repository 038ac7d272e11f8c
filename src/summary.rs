//! The one result type of a run, read by every output format.

use serde::{Deserialize, Serialize};

/// A whole-second log's worst rolling second, as far as the log can tell.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct WholeSeconds {
    /// Requests of the busiest labelled second: the least the worst rolling
    /// second of demand can be (a second's requests all fall inside it);
    /// with a shorter rolling interval r, the least its worst can be, ⌈that
    /// ÷ ⌈1 s / r⌉⌉ (the second's requests lie in that many intervals).
    pub offered_low: u64,
    /// Requests of the busiest two adjacent labelled seconds: the most it
    /// can be (one second's at its end, the next's at its start).
    pub offered_high: u64,
    /// The most the limiter let through in a rolling second over the
    /// placements run: the seeded one and each second's requests packed
    /// against the next second's (even seconds at their end and odd at their
    /// start, and the reverse) — a placement the log allows, so the worst
    /// over every placement is at least this.
    pub admitted_at_least: u64,
    /// The most the limiter can let through in a rolling second for any
    /// placement within the seconds: its bound over 1 s or `offered_high`,
    /// whichever is less (a ceiling; `worst_rolling` is the seeded placement's).
    pub admitted_at_most: u64,
}

/// The figures of one workload run through one limiter.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    #[serde(with = "unbounded")]
    pub bound: u64,
    /// The worst count for each interval of the profile (the arrival curve).
    pub profile: Vec<ProfilePoint>,
    /// How the admitted traffic compares with the backend, when one is given.
    pub backend: Option<BackendSummary>,
    /// Requests the limiter delayed rather than passed at once (nginx's
    /// `limit_req` without `nodelay`); every other figure counts them when
    /// they are released.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<DelaySummary>,
    /// The seconds in which demand exceeded the limit and what the limiter
    /// admitted in them (not for a limit per key, whose limit is each key's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overload: Option<crate::metrics::overload::Overload>,
    /// The busiest whole second of demand (clock-aligned from the run's
    /// start) and how much of it the limiter turned away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<crate::metrics::overload::Peak>,
    /// With a `[cluster]`: requests admitted by each instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<Vec<u64>>,
    /// When the workload's requests name their clients: figures per key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys: Option<crate::metrics::per_key::KeysSummary>,
    /// When the workload replays a log stamped in whole seconds (and the
    /// rolling interval is 1 s): where the true worst second can lie, since
    /// the log does not say when within its second each request came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_seconds: Option<WholeSeconds>,
    /// When the workload replays a log of responses: the requests the log
    /// says the real limiter turned away (`rejected_status`, default 429),
    /// beside `rejected`, the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turned_away_in_log: Option<u64>,
    /// When the workload's clients retry: attempts, goodput, the herd, lockouts.
    /// `offered` then counts attempts, and `admitted` requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_loop: Option<crate::metrics::closed_loop::ClosedLoopSummary>,
    /// With a cluster whose store goes down: each outage, what got through
    /// during it and in the ten seconds after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outages: Option<Vec<crate::metrics::outage::OutageSummary>>,
    /// For an adversary workload: the pattern that made this limiter admit the most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adversary: Option<String>,
    /// For an adversary workload: whether the search reached `bound`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tight: Option<bool>,
    /// For an adversary workload: the most the search got through in one
    /// rolling interval — a lower bound on the true worst case, which lies
    /// between it and `bound`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<u64>,
    /// With several replications: each figure over all of them. The figures
    /// above are replication 0's, drawn from the scenario's own seed.
    pub replications: Option<Replications>,
}

/// Figures over every replication of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Replications {
    /// How many replications (seeds) were run.
    pub count: u64,
    /// `worst_rolling`.
    pub worst_rolling: Stat,
    /// `offered`.
    pub offered: Stat,
    /// `admitted`.
    pub admitted: Stat,
    /// `backend.worst_1s`, with a backend.
    pub worst_1s: Option<Stat>,
    /// `backend.over_capacity`, with a backend.
    pub over_capacity: Option<Stat>,
    /// `backend.seconds_over_capacity`, with a backend.
    pub seconds_over_capacity: Option<Stat>,
    /// `backend.queue.dropped`, with a queue.
    pub dropped: Option<Stat>,
}

/// Mean, median, 99th percentile (nearest rank) and maximum of one figure.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Stat {
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Stat {
    /// The statistics of `values` (in replication order; at least one).
    pub fn of(values: &[f64]) -> Stat {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank =
            |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        Stat {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            p50: rank(0.5),
            p99: rank(0.99),
            max: sorted[sorted.len() - 1],
        }
    }
}

/// One point of the arrival curve.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProfilePoint {
    /// The interval length, in nanoseconds.
    pub interval_ns: u64,
    /// The most admitted in any interval of that length.
    pub worst: u64,
    /// Start (ns) of the first such interval: the time of its first admitted request.
    pub worst_start_ns: u64,
    /// The limiter's bound for that length, over any traffic.
    #[serde(with = "unbounded")]
    pub bound: u64,
}

/// How long delayed requests waited (3 significant digits).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DelaySummary {
    /// Requests delayed.
    pub delayed: u64,
    /// Median delay of the delayed requests, in nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile of the delay, in nanoseconds.
    pub p99_ns: u64,
    /// Longest delay, in nanoseconds.
    pub max_ns: u64,
}

/// Admitted traffic against the backend's capacity.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BackendSummary {
    /// Requests per second the backend serves.
    pub capacity: u64,
    /// The most admitted in any 1 s interval.
    pub worst_1s: u64,
    /// The limiter's bound over 1 s: what it could admit in a second for any traffic.
    #[serde(with = "unbounded")]
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
    /// For a log stamped in whole seconds, when the rolling interval is not
    /// 1 s: the interval its worst second lies in, as the run's own
    /// `whole_seconds` gives it for a rolling second (`worst_1s` is the
    /// seeded placement's; `admitted_at_least` also counts the requests
    /// packed against the seconds' edges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_seconds: Option<WholeSeconds>,
}

/// The admitted requests served at `capacity` per second with a bounded queue.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// A whole-second log's interval over a second, as the backend's
    /// capacity is: the run's own when its rolling interval is a second,
    /// else the backend's.
    pub fn whole_seconds_per_second(&self) -> Option<WholeSeconds> {
        if self.rolling_ns == crate::time::NANOS_PER_SEC {
            self.whole_seconds
        } else {
            self.backend.as_ref()?.whole_seconds
        }
    }

    /// True when the run let through more in 1 s than the backend can take,
    /// in any replication, or a whole-second log packed against its
    /// seconds' edges did.
    pub fn exceeds_capacity(&self) -> bool {
        self.judged_1s()
            .zip(self.backend.as_ref())
            .is_some_and(|(worst, b)| worst > b.capacity)
    }

    /// The most admitted in one second that the backend is judged on: the
    /// worst over every replication, or a whole-second log's requests
    /// packed against its seconds' edges when they let more through; `None`
    /// without a backend.
    pub fn judged_1s(&self) -> Option<u64> {
        self.worst_1s_max().map(|worst| {
            worst.max(
                self.whole_seconds_per_second()
                    .map_or(0, |w| w.admitted_at_least),
            )
        })
    }

    /// The most admitted in any second, over every replication.
    pub fn worst_1s_max(&self) -> Option<u64> {
        let replicated = self
            .replications
            .as_ref()
            .and_then(|r| r.worst_1s)
            .map(|s| s.max as u64);
        self.backend
            .as_ref()
            .map(|b| replicated.unwrap_or(0).max(b.worst_1s))
    }

    /// Requests the backend dropped, over every replication.
    pub fn dropped_max(&self) -> Option<u64> {
        let replicated = self
            .replications
            .as_ref()
            .and_then(|r| r.dropped)
            .map(|s| s.max as u64);
        let queue = self.backend.as_ref()?.queue.as_ref()?;
        Some(replicated.unwrap_or(0).max(queue.dropped))
    }
}

/// Everything `burstsim run` reports, as written to `summary.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// A bound in JSON: a number, or `null` for none over any traffic (held
/// inside as `u64::MAX`, written nowhere as that number).
pub mod unbounded {
    use serde::{Deserialize, Deserializer, Serializer};

    /// `None` for `u64::MAX` (no bound), else the bound.
    pub fn option(bound: u64) -> Option<u64> {
        Some(bound).filter(|&b| b != u64::MAX)
    }

    /// `null` for `u64::MAX`, else the number.
    pub fn serialize<S: Serializer>(bound: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        match option(*bound) {
            None => serializer.serialize_none(),
            Some(bound) => serializer.serialize_some(&bound),
        }
    }

    /// `u64::MAX` for `null`, else the number.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.unwrap_or(u64::MAX))
    }
}
