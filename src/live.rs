//! `burstsim live`: replays a workload in real time against a real Redis,
//! through server-side scripts, and compares Redis's decisions with the
//! simulator's for the same arrivals.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde::Serialize;

use crate::limiter::{Align, Context, Limiter, LimiterConfig, RateLimiter};
use crate::metrics::rolling::RollingCounts;
use crate::scenario::Scenario;
use crate::time::Nanos;

/// The most requests a live replay sends.
pub const MAX_LIVE_REQUESTS: usize = 200_000;

/// INCR, and PEXPIRE on the first hit, in one atomic script.
const FIXED_WINDOW: &str = "local c = redis.call('INCR', KEYS[1]) if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return c";
/// A sorted set of admitted times: drop those older than the window, count, add.
const SLIDING_LOG: &str = "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2])) \
    if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4]) return 1 end return 0";

/// How one limiter is enforced in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// The fixed window as one Lua script (INCR, then PEXPIRE on the first hit).
    AtomicFixedWindow,
    /// The same with separate GET, INCR and PEXPIRE round trips.
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
}

/// Replays workload `workload` of `scenario` against the Redis at `url`.
pub fn replay(
    scenario: &Scenario,
    workload: usize,
    url: &str,
    speed: f64,
    clients: usize,
) -> Result<Vec<LiveResult>> {
    let client =
        redis::Client::open(url).with_context(|| format!("--redis {url}: not a Redis address"))?;
    client
        .get_connection()
        .with_context(|| format!("cannot connect to Redis at {url}"))?;
    let arrivals = arrivals(scenario, workload)?;
    let context = Context {
        backend_capacity_per_sec: scenario.backend.map(|b| b.capacity_per_sec.get()),
    };
    let mut results = Vec::new();
    for named in &scenario.limiters {
        let variants: &[Variant] = match &named.config {
            LimiterConfig::FixedWindow(_)
            | LimiterConfig::SmallerWindow(_)
            | LimiterConfig::Buffered(_) => {
                &[Variant::AtomicFixedWindow, Variant::NaiveFixedWindow]
            }
            LimiterConfig::SlidingLog(_) => &[Variant::SlidingLog],
            _ => continue,
        };
        let (window, threshold) = match named.config.build(context).map_err(anyhow::Error::msg)? {
            Limiter::FixedWindow(fixed) => (fixed.window().get(), fixed.threshold()),
            Limiter::SlidingLog(_) => {
                let LimiterConfig::SlidingLog(config) = &named.config else {
                    unreachable!("matched above")
                };
                (config.window.get(), config.threshold.get())
            }
            _ => continue,
        };
        for &variant in variants {
            let key = format!(
                "burstsim:{}:{}:{}:{variant:?}",
                std::process::id(),
                named.name,
                Instant::now().elapsed().as_nanos()
            );
            let sent = send(
                &client, &key, variant, &arrivals, window, threshold, speed, clients,
            )?;
            results.push(compare(
                &named.name,
                variant,
                &sent,
                window,
                threshold,
                speed,
            ));
        }
    }
    Ok(results)
}

fn arrivals(scenario: &Scenario, index: usize) -> Result<Vec<u64>> {
    let workload = &scenario.workloads[index];
    let times: Vec<u64> = crate::sim::arrivals(scenario, workload, 0)?
        .take(MAX_LIVE_REQUESTS + 1)
        .map(Nanos::get)
        .collect();
    if times.len() > MAX_LIVE_REQUESTS {
        bail!(
            "workload {:?}: live replays at most {MAX_LIVE_REQUESTS} requests; shorten it or pick another with --workload",
            workload.name
        );
    }
    Ok(times)
}

/// One sent request: scenario time it was due, scenario time it was sent,
/// Redis's answer, and (for the atomic fixed window) the count INCR returned.
type Sent = (u64, u64, bool, u64);

#[allow(clippy::too_many_arguments)]
fn send(
    client: &redis::Client,
    key: &str,
    variant: Variant,
    arrivals: &[u64],
    window: u64,
    threshold: u64,
    speed: f64,
    clients: usize,
) -> Result<Vec<Sent>> {
    let results = Mutex::new(Vec::with_capacity(arrivals.len()));
    let start = Instant::now() + Duration::from_millis(50);
    // Redis expires keys in real time, which runs `speed` times faster than the scenario's.
    let window_ms = ((window as f64 / speed / 1e6).round() as u64).max(1);
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..clients)
            .map(|c| {
                let results = &results;
                scope.spawn(move || -> Result<()> {
                    let mut con = client
                        .get_connection()
                        .context("connecting a client to Redis")?;
                    let fixed = redis::Script::new(FIXED_WINDOW);
                    let log = redis::Script::new(SLIDING_LOG);
                    for (i, &due) in arrivals.iter().enumerate().skip(c).step_by(clients) {
                        let at = start + Duration::from_nanos((due as f64 / speed) as u64);
                        if let Some(wait) = at.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        let sent = (Instant::now().saturating_duration_since(start).as_nanos()
                            as f64
                            * speed) as u64;
                        let mut count = 0;
                        let admitted = match variant {
                            Variant::AtomicFixedWindow => {
                                count =
                                    fixed.key(key).arg(window_ms).invoke::<i64>(&mut con)? as u64;
                                count <= threshold
                            }
                            Variant::NaiveFixedWindow => {
                                let count: Option<u64> =
                                    redis::cmd("GET").arg(key).query(&mut con)?;
                                let count = count.unwrap_or(0);
                                if count < threshold {
                                    let now: u64 = redis::cmd("INCR").arg(key).query(&mut con)?;
                                    if now == 1 {
                                        let _: i64 = redis::cmd("PEXPIRE")
                                            .arg(key)
                                            .arg(window_ms)
                                            .query(&mut con)?;
                                    }
                                }
                                count < threshold
                            }
                            Variant::SlidingLog => {
                                log.key(key)
                                    .arg(sent)
                                    .arg(window)
                                    .arg(threshold)
                                    .arg(i)
                                    .invoke::<i64>(&mut con)?
                                    == 1
                            }
                        };
                        results
                            .lock()
                            .expect("no client panics holding the lock")
                            .push((due, sent, admitted, count));
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|worker| worker.join().expect("a client thread ran to its end"))
    })?;
    let _: redis::RedisResult<i64> = redis::cmd("DEL")
        .arg(key)
        .query(&mut client.get_connection()?);
    let mut sent = results.into_inner().expect("every client finished");
    sent.sort_by_key(|&(_, at, _, _)| at);
    Ok(sent)
}

/// Replays the send times through the simulator's model of the same script.
fn compare(
    limiter: &str,
    variant: Variant,
    sent: &[Sent],
    window: u64,
    threshold: u64,
    speed: f64,
) -> LiveResult {
    let mut model = match variant {
        Variant::SlidingLog => {
            let table: toml::Table = toml::from_str(&format!(
                "kind = \"sliding-log\"\nwindow = \"{window}ns\"\nthreshold = {threshold}"
            ))
            .expect("a valid table");
            LimiterConfig::from_table(table)
                .and_then(|c| c.build(Context::default()))
                .expect("a valid sliding log")
        }
        // Redis's key opens at its first INCR and expires W later: a window that starts at its first request.
        _ => Limiter::FixedWindow(
            crate::limiter::fixed_window::FixedWindow::new(
                Nanos(window),
                threshold,
                Align::FirstRequest,
            )
            .expect("a valid window"),
        ),
    };
    let jitter = sent
        .iter()
        .map(|&(due, at, _, _)| at.saturating_sub(due))
        .max()
        .unwrap_or(0)
        .max((1_000_000.0 * speed) as u64);
    let (mut live, mut simulated) = (
        RollingCounts::new(&[Nanos::SECOND]),
        RollingCounts::new(&[Nanos::SECOND]),
    );
    let (mut admitted_live, mut admitted_model) = (0, 0);
    let mut window_start: Option<u64> = None;
    let mut count = 0;
    let mut edges_followed = 0;
    let mut last_followed = None;
    // (time, Redis admitted it, time since the model's window opened)
    let mut differing: Vec<(u64, bool, u64)> = Vec::new();
    for &(_, at, theirs, replied) in sent {
        let ours = if variant == Variant::AtomicFixedWindow {
            // Redis's key opens at the request whose INCR returns 1. Where the
            // model's window would open within the timing jitter of that
            // moment, it follows Redis, so one late or early edge is not
            // counted again at every later request of the window.
            let model_opens = window_start.is_none_or(|start| at.saturating_sub(start) >= window);
            let edge = window_start.map_or(0, |start| start + window);
            let follow = model_opens != (replied == 1) && at.abs_diff(edge) <= jitter;
            if follow && last_followed != Some(edge) {
                edges_followed += 1;
                last_followed = Some(edge);
            }
            let opens = if follow { replied == 1 } else { model_opens };
            if opens {
                window_start = Some(at);
                count = 0;
            }
            let admit = count < threshold;
            count += u64::from(admit);
            admit
        } else {
            if window_start.is_none_or(|start| at.saturating_sub(start) >= window) {
                window_start = Some(at);
            }
            model.decide(Nanos(at))
        };
        if theirs {
            admitted_live += 1;
            live.push(Nanos(at));
        }
        if ours {
            admitted_model += 1;
            simulated.push(Nanos(at));
        }
        if theirs != ours {
            differing.push((at, theirs, at.saturating_sub(window_start.unwrap_or(at))));
        }
    }
    let disagreements = differing.len() as u64;
    // Pair each "Redis admitted, model rejected" with a nearby opposite one.
    let mut paired = vec![false; differing.len()];
    for i in 0..differing.len() {
        if paired[i] {
            continue;
        }
        let partner = (i + 1..differing.len())
            .take_while(|&j| differing[j].0 - differing[i].0 <= jitter)
            .find(|&j| !paired[j] && differing[j].1 != differing[i].1);
        if let Some(j) = partner {
            paired[i] = true;
            paired[j] = true;
        }
    }
    let reordered = paired.iter().filter(|&&p| p).count() as u64;
    let at_edges = differing
        .iter()
        .zip(&paired)
        .filter(|&(&(_, _, since), &p)| {
            !p && (since <= jitter || window.saturating_sub(since) <= jitter)
        })
        .count() as u64;
    LiveResult {
        limiter: limiter.to_string(),
        variant,
        sent: sent.len() as u64,
        admitted_live,
        admitted_model,
        disagreements,
        reordered,
        at_edges,
        unexplained: disagreements - reordered - at_edges,
        edges_followed,
        jitter_ns: jitter,
        decisions: sent
            .iter()
            .map(|&(_, at, admitted, _)| (Nanos(at), admitted))
            .collect(),
        worst_1s_live: live.worst()[0].count,
        worst_1s_model: simulated.worst()[0].count,
    }
}
