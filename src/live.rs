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

/// The most requests a live replay sends.
pub const MAX_LIVE_REQUESTS: usize = 200_000;

/// INCR, and PEXPIRE on the first hit, in one atomic script.
const FIXED_WINDOW: &str = "local c = redis.call('INCR', KEYS[1]) if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return c";
/// A sorted set of admitted times: drop those older than the window, count,
/// add — and keep the key no longer than a window past its last use (ARGV[5]
/// ms of real time), so a run cut short leaves nothing behind for good.
const SLIDING_LOG: &str = "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2])) \
    local admit = 0 \
    if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4]) admit = 1 end \
    if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end return admit";

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

/// The Redis key of one limiter's replay: unique to this run, so two runs
/// against one Redis (in two containers, each its own PID 1) never count
/// each other's requests nor delete each other's key.
fn run_key(limiter: &str, variant: Variant) -> String {
    format!(
        "burstsim:{}:{limiter}:{variant:?}",
        crate::random::unique_id()
    )
}

/// `url` with its password shown as `****`: errors go to CI logs, and the
/// URL often comes from a secret.
pub fn masked(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    let user = rest[..at].split_once(':').map_or("", |(user, _)| user);
    format!("{scheme}://{user}:****{}", &rest[at..])
}

/// An error's text without the password of `url`, wherever a library
/// quoted it.
fn without_password(text: String, url: &str) -> String {
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .and_then(|authority| authority.rsplit_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':').map(|(_, p)| p).or(Some(userinfo)))
        .filter(|password| !password.is_empty());
    match password {
        Some(password) => text.replace(password, "****"),
        None => text,
    }
}

/// A connection whose connect, commands and replies all time out.
fn connect(client: &redis::Client, redis: &Connection) -> Result<redis::Connection> {
    let fail = |err: redis::RedisError| {
        let why = if err.is_timeout() {
            "no answer".to_string()
        } else {
            without_password(err.to_string(), redis.url)
        };
        anyhow::anyhow!(
            "cannot connect to Redis at {} within {:?}: {why}",
            masked(redis.url),
            redis.timeout
        )
    };
    let con = client
        .get_connection_with_timeout(redis.timeout)
        .map_err(fail)?;
    con.set_read_timeout(Some(redis.timeout)).map_err(fail)?;
    con.set_write_timeout(Some(redis.timeout)).map_err(fail)?;
    Ok(con)
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

/// One request's command to Redis.
struct Ask<'a> {
    key: &'a str,
    variant: Variant,
    window: u64,
    threshold: u64,
    window_ms: u64,
    /// When it was sent, scenario time.
    sent: u64,
    /// Its number in the workload (a unique sorted-set member).
    index: usize,
}

impl Ask<'_> {
    /// Redis's answer: admitted, and for the atomic fixed window the count.
    fn ask(
        &self,
        con: &mut redis::Connection,
        (fixed, log): &(redis::Script, redis::Script),
    ) -> Result<(bool, u64)> {
        let (key, threshold, window_ms) = (self.key, self.threshold, self.window_ms);
        Ok(match self.variant {
            Variant::AtomicFixedWindow => {
                let count = fixed.key(key).arg(window_ms).invoke::<i64>(con)? as u64;
                (count <= threshold, count)
            }
            Variant::NaiveFixedWindow => {
                let count: Option<u64> = redis::cmd("GET").arg(key).query(con)?;
                let count = count.unwrap_or(0);
                if count < threshold {
                    // The INCR and its expiry (set only on a key without one,
                    // as "on the first hit" does) in one transaction: the
                    // GET-then-INCR race stays, and no kill between the two
                    // leaves a key that never expires.
                    let _: (u64, i64) = redis::pipe()
                        .atomic()
                        .cmd("INCR")
                        .arg(key)
                        .cmd("PEXPIRE")
                        .arg(key)
                        .arg(window_ms)
                        .arg("NX")
                        .query(con)?;
                }
                (count < threshold, 0)
            }
            Variant::SlidingLog => {
                let admitted = log
                    .key(key)
                    .arg(self.sent)
                    .arg(self.window)
                    .arg(threshold)
                    .arg(self.index)
                    .arg(window_ms.saturating_mul(2))
                    .invoke::<i64>(con)?
                    == 1;
                (admitted, 0)
            }
        })
    }
}

/// Sends every arrival at its (sped-up) time from `redis.clients` threads;
/// the first error stops every client, unless `redis.through_outages`.
fn send(
    client: &redis::Client,
    redis: &Connection,
    key: &str,
    variant: Variant,
    arrivals: &[u64],
    (window, threshold): (u64, u64),
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<Sent>> {
    let (speed, clients) = (redis.speed, redis.clients);
    let results = Mutex::new(Vec::with_capacity(arrivals.len()));
    let stop = AtomicBool::new(false);
    let begun = Instant::now();
    let start = begun + Duration::from_millis(50);
    // Redis expires keys in real time, which runs `speed` times faster than the scenario's.
    let window_ms = ((window as f64 / speed / 1e6).round() as u64).max(1);
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..clients)
            .map(|c| {
                let (results, stop) = (&results, &stop);
                scope.spawn(move || -> Result<()> {
                    let run = || -> Result<()> {
                        // None after a failure, until the next request reconnects.
                        let mut con = Some(connect(client, redis)?);
                        let scripts = (
                            redis::Script::new(FIXED_WINDOW),
                            redis::Script::new(SLIDING_LOG),
                        );
                        for (i, &due) in arrivals.iter().enumerate().skip(c).step_by(clients) {
                            let at = start + Duration::from_nanos((due as f64 / speed) as u64);
                            // Sleep in slices, so another client's failure stops this one.
                            let stopped = || -> Result<bool> {
                                crate::interrupt::check()?;
                                if Instant::now() >= redis.deadline {
                                    return Err(OutOfTime(
                                        redis.deadline.saturating_duration_since(begun),
                                    )
                                    .into());
                                }
                                Ok(stop.load(Ordering::Relaxed))
                            };
                            while let Some(wait) = at.checked_duration_since(Instant::now()) {
                                if stopped()? {
                                    return Ok(());
                                }
                                std::thread::sleep(wait.min(Duration::from_millis(50)));
                            }
                            if stopped()? {
                                return Ok(());
                            }
                            let now = || {
                                (Instant::now().saturating_duration_since(start).as_nanos() as f64
                                    * speed) as u64
                            };
                            let sent = now();
                            let asked = Ask {
                                key,
                                variant,
                                window,
                                threshold,
                                window_ms,
                                sent,
                                index: i,
                            };
                            let reply = match con.as_mut() {
                                Some(con) => asked.ask(con, &scripts),
                                None => connect(client, redis).and_then(|mut fresh| {
                                    let reply = asked.ask(&mut fresh, &scripts);
                                    con = Some(fresh);
                                    reply
                                }),
                            };
                            let (admitted, count) = match reply {
                                Ok((admitted, count)) => (Some(admitted), count),
                                Err(_) if redis.through_outages => {
                                    // A connection that timed out may be out of step: start afresh.
                                    con = None;
                                    (None, 0)
                                }
                                Err(err) => return Err(err),
                            };
                            let replied = now();
                            progress();
                            results
                                .lock()
                                .expect("no client panics holding the lock")
                                .push(Sent {
                                    due,
                                    at: sent,
                                    admitted,
                                    count,
                                    rtt: replied.saturating_sub(sent),
                                    client: c,
                                });
                        }
                        Ok(())
                    };
                    let timed_out = |err: &anyhow::Error| {
                        err.chain().any(|cause| {
                            cause
                                .downcast_ref::<redis::RedisError>()
                                .is_some_and(redis::RedisError::is_timeout)
                        })
                    };
                    let outcome = run().map_err(|err| {
                        if timed_out(&err) {
                            anyhow::anyhow!("no reply from Redis within {:?}", redis.timeout)
                        } else {
                            err
                        }
                    });
                    if outcome.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    outcome
                })
            })
            .collect();
        // Every client is joined; the first error is the one reported.
        let mut first = Ok(());
        for worker in workers {
            let outcome = worker.join().expect("a client thread ran to its end");
            if first.is_ok() {
                first = outcome;
            }
        }
        first.map_err(|err| {
            if crate::interrupt::caused(&err) || err.is::<OutOfTime>() {
                return err;
            }
            anyhow::anyhow!(
                "a client's request to Redis at {} failed; every client stopped: {}",
                masked(redis.url),
                without_password(format!("{err:#}"), redis.url)
            )
        })
    })?;
    let mut sent = results.into_inner().expect("every client finished");
    sent.sort_by_key(|s| s.at);
    Ok(sent)
}

/// Replays the send times through the simulator's model of the same script.
fn compare(
    named: &NamedLimiter,
    variant: Variant,
    sent: &[Sent],
    window: u64,
    threshold: u64,
    speed: f64,
) -> LiveResult {
    let mut model = match variant {
        // The script is the scenario's sliding log.
        Variant::SlidingLog => named.limiter.clone(),
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
    let all = sent;
    // The comparison is of the requests Redis answered.
    let sent: Vec<Sent> = all
        .iter()
        .filter(|s| s.admitted.is_some())
        .copied()
        .collect();
    let sent = sent.as_slice();
    // How far Redis's order and clock can be from the send times: how late a
    // request was sent, or how long its round trip took (Redis ran it
    // somewhere within), whichever is larger.
    let jitter = sent
        .iter()
        .map(|s| s.at.saturating_sub(s.due).max(s.rtt))
        .max()
        .unwrap_or(0)
        .max((1_000_000.0 * speed) as u64);
    // A window's two ends are each uncertain by that much: the instant
    // Redis opened it, and the instant it ran the request at the edge.
    let edge_tolerance = jitter.saturating_mul(2);
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
    for &Sent {
        at,
        admitted,
        count: replied,
        ..
    } in sent
    {
        let theirs = admitted == Some(true);
        let ours = if variant == Variant::AtomicFixedWindow {
            // Redis's key opens at the request whose INCR returns 1. Where the
            // model's window would open within the timing jitter of that
            // moment, it follows Redis, so one late or early edge is not
            // counted again at every later request of the window.
            let model_opens = window_start.is_none_or(|start| at.saturating_sub(start) >= window);
            let edge = window_start.map_or(0, |start| start + window);
            let follow = model_opens != (replied == 1) && at.abs_diff(edge) <= edge_tolerance;
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
            model.decide(Nanos(at)).admitted()
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
            !p && (since <= edge_tolerance || window.saturating_sub(since) <= edge_tolerance)
        })
        .count() as u64;
    LiveResult {
        limiter: named.name.clone(),
        variant,
        sent: all.len() as u64,
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
            .map(|s| (Nanos(s.at), s.admitted == Some(true)))
            .collect(),
        worst_1s_live: live.worst()[0].count,
        worst_1s_model: simulated.worst()[0].count,
        store_errors: (all.len() - sent.len()) as u64,
        on_error: (all.len() > sent.len()).then(|| on_error(all, window, threshold)),
    }
}

/// What failing open, failing closed and a window per client let through,
/// with Redis's answers where it gave them; `sent` in time order.
fn on_error(sent: &[Sent], window: u64, threshold: u64) -> OnErrorFigures {
    let figures = |decide: &mut dyn FnMut(&Sent) -> bool| {
        let mut rolling = RollingCounts::new(&[Nanos::SECOND]);
        let (mut admitted, mut admitted_unanswered) = (0, 0);
        for s in sent {
            // The policy hears every request; it decides the unanswered ones.
            let decided = decide(s);
            let admit = match s.admitted {
                Some(answer) => answer,
                None => {
                    admitted_unanswered += u64::from(decided);
                    decided
                }
            };
            if admit {
                admitted += 1;
                rolling.push(Nanos(s.at));
            }
        }
        PolicyFigures {
            admitted,
            admitted_unanswered,
            worst_1s: rolling.worst()[0].count,
        }
    };
    // Each client's own window, fresh at each of its runs of unanswered
    // requests: an answered request of the client ends the run.
    let clients = sent.iter().map(|s| s.client + 1).max().unwrap_or(0);
    let mut own: Vec<Option<FixedWindow>> = vec![None; clients];
    let mut local = |s: &Sent| {
        if s.admitted.is_some() {
            own[s.client] = None;
            return false;
        }
        own[s.client]
            .get_or_insert_with(|| {
                FixedWindow::new(Nanos(window), threshold, Align::Epoch).expect("a valid window")
            })
            .decide(Nanos(s.at))
            .admitted()
    };
    OnErrorFigures {
        allow: figures(&mut |_| true),
        deny: figures(&mut |_| false),
        local: figures(&mut local),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_password_never_shows() {
        assert_eq!(
            masked("redis://user:hunter2@10.0.0.1:6379/0"),
            "redis://user:****@10.0.0.1:6379/0"
        );
        assert_eq!(
            masked("rediss://:hunter2@cache:6380"),
            "rediss://:****@cache:6380"
        );
        assert_eq!(masked("redis://hunter2@cache"), "redis://:****@cache");
        assert_eq!(masked("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(
            without_password("auth hunter2 failed".into(), "redis://u:hunter2@h"),
            "auth **** failed"
        );
    }

    #[test]
    fn each_run_has_keys_of_its_own_even_with_the_same_process_id() {
        let first = run_key("fixed-1s", Variant::AtomicFixedWindow);
        let second = run_key("fixed-1s", Variant::AtomicFixedWindow);
        assert_ne!(first, second);
        assert!(first.starts_with(&format!("burstsim:{}-", std::process::id())));
    }
}
