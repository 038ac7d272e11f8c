//! `burstsim live`: replays a workload in real time against a real Redis,
//! through server-side scripts, and compares Redis's decisions with the
//! simulator's for the same arrivals.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde::Serialize;

use crate::limiter::fixed_window::FixedWindow;
use crate::limiter::{Align, Limiter, LimiterConfig, RateLimiter};
use crate::metrics::rolling::RollingCounts;
use crate::scenario::{NamedLimiter, Scenario};
use crate::time::Nanos;

mod compare;
mod store;
#[cfg(test)]
mod tests;

use self::compare::*;
pub use self::store::masked;
use self::store::*;

/// The most requests a live replay sends.
pub const MAX_LIVE_REQUESTS: usize = 200_000;

/// How one limiter is enforced in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// The fixed window as one Lua script (INCR, then PEXPIRE on the first hit).
    AtomicFixedWindow,
    /// The same with a separate GET, then INCR and its expiry in one transaction.
    NaiveFixedWindow,
    /// A sorted-set sliding log as one Lua script.
    SlidingLog,
}

/// What a live replay found for one limiter and variant.
#[derive(Clone, Debug, Serialize)]
pub struct LiveResult {
    /// The limiter's name.
    pub limiter: String,
    /// How Redis enforced it.
    pub variant: Variant,
    /// Requests sent.
    pub sent: u64,
    /// Admitted by Redis.
    pub admitted_live: u64,
    /// Admitted by the simulator for the same send times.
    pub admitted_model: u64,
    /// Requests Redis and the simulator decided differently.
    pub disagreements: u64,
    /// Of those, pairs of near-simultaneous requests from different clients
    /// that Redis served in the other order (one admitted instead of the other).
    pub reordered: u64,
    /// Of the rest, within the measured timing jitter of a window edge.
    pub at_edges: u64,
    /// Disagreements neither reordering nor edge jitter explains.
    pub unexplained: u64,
    /// Atomic fixed window: window edges where Redis's key expired within the
    /// timing jitter of the model's edge but on the other side of a request;
    /// the model followed Redis there.
    pub edges_followed: u64,
    /// The largest lateness of a send against its schedule, scenario time.
    pub jitter_ns: u64,
    /// Every request's send time (scenario time) and Redis's answer, in time order.
    #[serde(skip)]
    pub decisions: Vec<(Nanos, bool)>,
    /// The most admitted by Redis in any 1 s of scenario time.
    pub worst_1s_live: u64,
    /// The same for the simulator.
    pub worst_1s_model: u64,
    /// Requests Redis did not answer (with --through-outages); the
    /// comparison above is of the answered ones.
    pub store_errors: u64,
    /// With unanswered requests: what each way of answering them lets through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_error: Option<OnErrorFigures>,
}

/// What each policy for requests the store does not answer lets through,
/// answered requests as Redis decided them.
#[derive(Clone, Debug, Serialize)]
pub struct OnErrorFigures {
    /// Fail open: every unanswered request admitted.
    pub allow: PolicyFigures,
    /// Fail closed: every unanswered request rejected.
    pub deny: PolicyFigures,
    /// Each client's own fixed window of the same N per W (epoch), fresh at
    /// the start of each run of unanswered requests.
    pub local: PolicyFigures,
}

/// One policy's result.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyFigures {
    /// Requests admitted in all.
    pub admitted: u64,
    /// Of the unanswered requests, admitted.
    pub admitted_unanswered: u64,
    /// The most admitted in any 1 s of scenario time.
    pub worst_1s: u64,
}

/// How to talk to Redis.
pub struct Connection<'a> {
    /// The server, like `redis://127.0.0.1:6379`.
    pub url: &'a str,
    /// The most a connect, a command or a reply may take.
    pub timeout: Duration,
    /// Concurrent clients.
    pub clients: usize,
    /// Real time runs this many times faster than the scenario's.
    pub speed: f64,
    /// Whether an unanswered request is counted and the replay goes on
    /// (rather than stopping every client).
    pub through_outages: bool,
    /// The replay stops here, however slowly Redis answers
    /// (`--max-wall-time`): at most one `timeout` later.
    pub deadline: Instant,
}

/// The replay ran past `--max-wall-time`.
#[derive(Debug, thiserror::Error)]
#[error(
    "the replay ran past --max-wall-time ({0:?} of real time); Redis answered too slowly or not at all"
)]
pub struct OutOfTime(pub Duration);

/// How `live` enforces each limiter of a scenario: the Redis variants, or
/// none for a kind it has no script for.
pub fn plan(scenario: &Scenario) -> Vec<(&str, &'static [Variant])> {
    scenario
        .limiters
        .iter()
        .map(|named| {
            let variants: &'static [Variant] = match &named.config {
                LimiterConfig::FixedWindow(_)
                | LimiterConfig::SmallerWindow(_)
                | LimiterConfig::Buffered(_) => {
                    &[Variant::AtomicFixedWindow, Variant::NaiveFixedWindow]
                }
                LimiterConfig::SlidingLog(_) => &[Variant::SlidingLog],
                _ => &[],
            };
            (named.name.as_str(), variants)
        })
        .collect()
}

/// Replays workload `workload` of `scenario` against Redis as [`plan`]
/// says; `progress` is called once per request sent.
pub fn replay(
    scenario: &Scenario,
    workload: usize,
    redis: &Connection,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<LiveResult>> {
    let client = redis::Client::open(redis.url).map_err(|err| {
        anyhow::anyhow!(
            "--redis {}: not a Redis address: {}",
            masked(redis.url),
            without_password(err.to_string(), redis.url)
        )
    })?;
    connect(&client, redis)?;
    crate::interrupt::pause_point("live:arrivals");
    let arrivals = arrivals(scenario, workload)?;
    let mut results = Vec::new();
    for (named, (_, variants)) in scenario.limiters.iter().zip(plan(scenario)) {
        let (window, threshold) = match (&named.config, named.limiter.fixed_window()) {
            (_, Some(fixed)) => (fixed.window().get(), fixed.threshold()),
            (LimiterConfig::SlidingLog(config), None) if !config.count_rejected => {
                (config.window.get(), config.threshold.get())
            }
            _ => continue,
        };
        for &variant in variants {
            let key = run_key(&named.name, variant);
            let sent = send(
                &client,
                redis,
                &key,
                variant,
                &arrivals,
                (window, threshold),
                progress,
            );
            // The key goes whatever happened, so none is left without expiry.
            let _: redis::RedisResult<i64> = connect(&client, redis)
                .map_err(|err| {
                    redis::RedisError::from((redis::ErrorKind::Io, "reconnect", err.to_string()))
                })
                .and_then(|mut con| redis::cmd("DEL").arg(&key).query(&mut con));
            results.push(compare(
                named,
                variant,
                &sent?,
                window,
                threshold,
                redis.speed,
            ));
        }
    }
    Ok(results)
}

fn arrivals(scenario: &Scenario, index: usize) -> Result<Vec<u64>> {
    let workload = &scenario.workloads[index];
    let mut stream = crate::sim::arrivals(scenario, workload, 0)?;
    let times: Vec<u64> = stream
        .by_ref()
        .take(MAX_LIVE_REQUESTS + 1)
        .map(|arrival| arrival.time.get())
        .collect();
    // A trace cut short by an error is refused as `run` refuses it.
    if let Some(err) = stream.take_error() {
        bail!("workload {:?}: {err}", workload.name);
    }
    if times.len() > MAX_LIVE_REQUESTS {
        bail!(
            "workload {:?}: live replays at most {MAX_LIVE_REQUESTS} requests; shorten it or pick another with --workload",
            workload.name
        );
    }
    Ok(times)
}

/// One sent request, in scenario time.
#[derive(Clone, Copy, Debug)]
struct Sent {
    /// When it was due.
    due: u64,
    /// When it was sent.
    at: u64,
    /// Redis's answer; None when it gave none (with --through-outages).
    admitted: Option<bool>,
    /// For the atomic fixed window, the count INCR returned.
    count: u64,
    /// Its round trip.
    rtt: u64,
    /// The client that sent it.
    client: usize,
}
