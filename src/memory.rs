//! What a run will hold in memory, estimated from the scenario before any
//! work, so that a small scenario cannot ask for gigabytes: `--max-memory`.

use crate::error::FieldError;
use crate::limiter::RateLimiter;
use crate::scenario::Scenario;
use crate::time::Nanos;

/// The parts of the estimate, in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Estimate {
    /// Timelines (admitted, rejected) and, with charts, the trailing counts.
    pub timelines: u128,
    /// The rolling-window rings: the admitted times within the longest
    /// interval tracked, as many as the limiter's bound lets in.
    pub rings: u128,
    /// Each run's figures tallied over replications: at worst every value
    /// distinct, seven figures of about 32 bytes per value each.
    pub replications: u128,
    /// State per client key: every run's figures per key, and every per-key
    /// limiter's states.
    pub keys: u128,
    /// Clients that retry: requests waiting to retry, the attempts within
    /// the rolling interval, and clients being rejected.
    pub retries: u128,
    /// Traces whose rows are out of order, held and sorted in memory, and
    /// the busiest second of each trace whose whole seconds are spread.
    pub sorting: u128,
    /// Each run's figures, its arrival curve and its lines of summary.json
    /// and summary.csv, held until they are written.
    pub runs: u128,
}

impl Estimate {
    /// All parts together.
    pub fn total(&self) -> u128 {
        self.timelines
            + self.rings
            + self.replications
            + self.keys
            + self.retries
            + self.sorting
            + self.runs
    }
}

/// Each run's figures and text until written (measured: 20,000 runs of one
/// workload took 6 kB each beyond the other parts, with charts).
const PER_RUN: u128 = 8 << 10;
/// A replication's figures of one run in their tallies, when every value is new.
const PER_REPLICATION: u128 = 7 * 32;
/// Each key's figures in a run: its counts (8 bytes, 12 once widened), its
/// id in the order seen (8), its share of the ring (8 bytes an admission,
/// up to twice that in a ring that doubles), rounded up; the key table's
/// own on top.
const PER_KEY_FIGURES: u128 = 40;
/// A trace's key's hash, kept in the order the check numbered it (8 bytes,
/// up to twice that in a vector that doubles).
const PER_KEY_HASH: u128 = 16;
/// A request waiting to retry, in the run's event queue: the event (56
/// bytes), its free-list slot once taken (4), and its time and place in a
/// bucket (16) up to three times over (refiled, and a vector's doubling).
const PER_PENDING_RETRY: u128 = 112;
/// A client being rejected: its entry in the lockout map.
const PER_REJECTED_CLIENT: u128 = 48;

/// What a run of a scenario would take, estimated before any work.
pub struct Work {
    /// Requests decided, every attempt and replication counted.
    pub requests: u128,
    /// Memory it would need.
    pub memory: Estimate,
    /// A workload whose sources offer no request at all (a burst of 0, a
    /// trace with no row in the run), which a run refuses.
    pub silent: Option<String>,
}

/// Why a run is refused before any work.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// A source could not say what it offers (a trace that cannot be read).
    #[error(transparent)]
    Source(#[from] FieldError),
    /// More requests than `--max-requests`.
    #[error(
        "{}: this would simulate about {total} requests (every attempt of clients that retry), more than --max-requests {max}; shorten the run, lower the rates, or raise --max-requests if that much is intended",
        path.display()
    )]
    Requests {
        path: std::path::PathBuf,
        total: u128,
        max: u64,
    },
    /// More memory than `--max-memory`.
    #[error(
        "{}: this would need about {} of memory ({} for timelines at a {bucket} bucket, {} for the rolling windows of the limiters' worst cases, {} for replications, {} for state per client key, {} for clients that retry, {} for sorting traces (out of order, or a second spread), {} for the figures of {runs} runs), more than --max-memory {}; use a coarser metrics.bucket, fewer replications, fewer clients, fewer attempts or --no-charts, sort the traces (or keep their seconds: spread = \"none\"), or raise --max-memory if the machine has it",
        path.display(),
        words(memory.total()),
        words(memory.timelines),
        words(memory.rings),
        words(memory.replications),
        words(memory.keys),
        words(memory.retries),
        words(memory.sorting),
        words(memory.runs),
        words(u128::from(*max))
    )]
    Memory {
        path: std::path::PathBuf,
        memory: Box<Estimate>,
        bucket: Nanos,
        runs: usize,
        max: u64,
    },
}

/// Refuses, before any work, a run of `scenario` with `replications` (and
/// charts or not) of more than `max_requests` requests or one that would
/// need more than `max_memory` bytes.
pub fn check(
    scenario: &Scenario,
    replications: u64,
    charts: bool,
    max_requests: u64,
    max_memory: u64,
) -> Result<(), Refused> {
    let Work {
        requests, memory, ..
    } = Work::of(scenario, replications, charts)?;
    if requests > u128::from(max_requests) {
        return Err(Refused::Requests {
            path: scenario.path.clone(),
            total: requests,
            max: max_requests,
        });
    }
    if memory.total() > u128::from(max_memory) {
        return Err(Refused::Memory {
            path: scenario.path.clone(),
            memory: Box::new(memory),
            bucket: scenario.metrics.bucket,
            runs: scenario.workloads.len() * scenario.limiters.len(),
            max: max_memory,
        });
    }
    Ok(())
}

impl Work {
    /// Estimates the work of running `scenario` with `replications`, with or
    /// without charts.
    pub fn of(scenario: &Scenario, replications: u64, charts: bool) -> Result<Work, FieldError> {
        let longest = longest_interval(scenario, charts);
        let mut total: u128 = 0;
        let mut per_workload = Vec::with_capacity(scenario.workloads.len());
        let mut keys_per_workload = Vec::with_capacity(scenario.workloads.len());
        let mut silent = None;
        let mut sorting: u128 = 0;
        let mut numbering: u128 = 0;
        for workload in &scenario.workloads {
            let (mut requests, mut keys, mut hashed): (u128, u128, bool) = (0, 0, false);
            for source in workload.sources() {
                sorting += u128::from(source.sort_bytes(scenario.duration, &scenario.base_dir)?);
                requests += source.estimated_arrivals(scenario.duration, &scenario.base_dir)?;
                let own = u128::from(source.keys(scenario.duration, &scenario.base_dir)?);
                keys += own;
                if let Some(numbered) = source.numbers_keys() {
                    // The check numbers a trace's keys, and keeps each one's hash.
                    numbering += own * (crate::traffic::slots::NUMBERING + PER_KEY_HASH);
                    hashed |= !numbered;
                }
            }
            keys_per_workload.push(if workload.is_keyed() {
                (keys, hashed)
            } else {
                (0, false)
            });
            let runs = if workload.is_stochastic() {
                u128::from(replications)
            } else {
                1
            };
            // Every attempt is decided: a request may come back max_attempts times.
            let attempts = workload
                .retry
                .map_or(1, |retry| u128::from(retry.max_attempts));
            total += requests * runs * attempts;
            // Estimates of rate sources count one more than they can offer, so
            // only a workload that cannot offer any is zero. An adversary has
            // no sources: its pattern is built for each limiter, never empty.
            if requests == 0 && silent.is_none() && workload.adversary().is_none() {
                silent = Some(workload.name.clone());
            }
            per_workload.push(requests);
        }
        let mut memory = estimate(
            scenario,
            replications,
            charts,
            longest,
            &per_workload,
            &keys_per_workload,
        );
        memory.sorting = sorting;
        memory.keys += numbering;
        Ok(Work {
            requests: total,
            memory,
            silent,
        })
    }
}

/// The process's peak resident memory in kB, where the system tells it (Linux).
pub fn peak_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The longest interval the metrics track: the charts' arrival curve goes
/// to four times the longest window or rolling interval.
fn longest_interval(scenario: &Scenario, charts: bool) -> Nanos {
    if charts {
        crate::sim::curve_intervals(scenario)
            .into_iter()
            .max()
            .unwrap_or(Nanos::SECOND)
    } else {
        let metrics = &scenario.metrics;
        metrics
            .profile
            .iter()
            .copied()
            .chain([metrics.rolling, Nanos::SECOND])
            .max()
            .unwrap_or(Nanos::SECOND)
    }
}

/// The estimate for `scenario` run with `replications` seeds, with or
/// without charts, tracking intervals up to `longest`; `requests` and `keys`
/// are the estimated arrivals and distinct client keys of each workload
/// (keys 0 when it names none; more than its requests when it has more
/// clients than requests), and whether the replay knows them by their
/// hashes rather than by number.
fn estimate(
    scenario: &Scenario,
    replications: u64,
    charts: bool,
    longest: Nanos,
    requests: &[u128],
    keys: &[(u128, bool)],
) -> Estimate {
    let runs = (scenario.workloads.len() * scenario.limiters.len()) as u128;
    let buckets = u128::from(
        scenario
            .duration
            .get()
            .div_ceil(scenario.metrics.bucket.get()),
    );
    let per_bucket = if charts { 12 } else { 8 };
    // A log of whole seconds run packed too has three sets of runs.
    let sets: Vec<u128> = scenario
        .workloads
        .iter()
        .map(|w| {
            if w.labelled_seconds().is_some_and(|l| l.packed) {
                3
            } else {
                1
            }
        })
        .collect();
    let mut rings = 0u128;
    for (&offered, &sets) in requests.iter().zip(&sets) {
        for limiter in &scenario.limiters {
            let bound = limiter.limiter.bound(longest);
            // A power-of-two ring of 8-byte times, up to twice what it holds.
            let held = u128::from(bound).min(offered);
            rings += sets * held.next_power_of_two().max(1024) * 8;
        }
    }
    // Each run's figures per key, and each limiter's state as it says: a
    // limiter per key (or a cluster of instances, each with a limiter per
    // key) grows with the keys; workloads run side by side.
    let key_state: u128 = keys
        .iter()
        .zip(requests)
        .zip(&sets)
        .map(|((&(keys, hashed), &requests), &sets)| {
            let limiters: u128 = scenario
                .limiters
                .iter()
                .map(|named| {
                    named.limiter.memory_at_most(
                        u64::try_from(keys).unwrap_or(u64::MAX),
                        u64::try_from(requests).unwrap_or(u64::MAX),
                        hashed,
                    )
                })
                .sum();
            let figures = if keys == 0 || !scenario.metrics.per_key {
                0
            } else {
                crate::traffic::slots::table_bytes(
                    u64::try_from(keys).unwrap_or(u64::MAX),
                    PER_KEY_FIGURES,
                    hashed,
                )
            };
            // The packed sets keep the limiters' states, not the figures.
            figures * scenario.limiters.len() as u128 + sets * limiters
        })
        .sum();
    // Clients that retry, per run: at most every request waiting at once
    // (and never more than the stated limit), at most every attempt within
    // the rolling interval, a lockout entry per client, and first attempts
    // and retries per timeline bucket.
    let limiters = scenario.limiters.len() as u128;
    let retries: u128 = scenario
        .workloads
        .iter()
        .zip(requests.iter().zip(keys))
        .filter_map(|(workload, (&requests, &(keys, _)))| {
            let retry = workload.retry?;
            let pending = requests.min(crate::retry::MAX_PENDING as u128);
            let attempts = requests.saturating_mul(u128::from(retry.max_attempts));
            let ring = attempts.next_power_of_two().max(1024) * 8;
            let clients = keys.max(1).min(requests);
            Some(
                limiters
                    * (pending * PER_PENDING_RETRY
                        + ring
                        + clients * PER_REJECTED_CLIENT
                        + buckets * 8),
            )
        })
        .sum();
    Estimate {
        keys: key_state,
        retries,
        timelines: runs * buckets * per_bucket,
        rings,
        replications: if replications > 1 {
            runs * u128::from(replications) * PER_REPLICATION
        } else {
            0
        },
        // Known from the traces' first pass, added by the caller.
        sorting: 0,
        runs: runs * PER_RUN,
    }
}

/// Reads a size like `2GB`, `512MiB`, `100MB` or a number of bytes.
pub fn parse_size(text: &str) -> Result<u64, FieldError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a size like \"2GB\" or \"512MiB\""))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "kib" => 1 << 10,
        "mb" => 1_000_000,
        "mib" => 1 << 20,
        "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?}; use B, KB, MB, GB, KiB, MiB or GiB"
            )
            .into());
        }
    };
    number
        .checked_mul(scale)
        .ok_or_else(|| FieldError::new(format!("{text:?} is too large")))
}

/// `1.5 GB`: bytes in words.
pub fn words(bytes: u128) -> String {
    let bytes = bytes as f64;
    match bytes {
        b if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.0} MB", b / 1e6),
        b => format!("{:.0} kB", b / 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sizes_with_units() {
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("2 parsecs").is_err());
        assert!(parse_size("99999999999999TB").is_err());
    }
}
