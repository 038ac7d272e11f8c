//! `burstsim probe`: a workload's requests sent to a real HTTP endpoint at
//! their scheduled instants, and the endpoint's answers compared with the
//! scenario's model of it replayed on the actual send times.
//!
//! The schedule ([`schedule`]) is the simulator's own arrivals (or the
//! adversary's pattern against the named limiter), checked against hard caps
//! before anything is sent; [`send`] sends it; [`compare`] replays the model.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU64;

use anyhow::{Context as _, Result, bail};
use serde::Serialize;

use crate::limiter::RateLimiter;
use crate::metrics::rolling::RollingCounts;
use crate::scenario::{NamedLimiter, Scenario, Traffic, Workload};
use crate::time::Nanos;
use crate::traffic::Key;

mod compare;
pub mod export;
mod retry;
mod send;
#[cfg(test)]
mod tests;

pub(crate) use self::compare::worst;
pub use self::compare::{Agreement, compare};
pub use self::retry::RetryFigures;
pub use self::send::{Connection, send};

/// The most requests one probe may send, whatever `--max-requests` says.
pub const MAX_PROBE_REQUESTS: u64 = 1_000_000;
/// The most client identities one probe carries (header values, forwarded
/// addresses).
pub const MAX_IDENTITIES: usize = 1 << 20;
/// The most source addresses from 127.0.0.0/8 one probe binds (each is a
/// connection pool of its own).
pub const MAX_SOURCE_ADDRESSES: usize = 1_024;
/// The most bytes of an answer's body read (the rest closes the connection).
pub const MAX_BODY: usize = 64 * 1024;

/// Where the requests go: an `http://` URL on loopback, or on a host named
/// by `--allow-remote`.
#[derive(Clone, Debug)]
pub struct Target {
    /// The whole URL, as given.
    pub url: hyper::Uri,
    /// Its host, as written (an address or a name).
    pub host: String,
    /// Whether the host is a loopback address (or `localhost`).
    pub loopback: bool,
}

/// Reads `--target` and refuses, before any connection or name lookup, a
/// host that is neither loopback nor named by `allow_remote`.
pub fn target(url: &str, allow_remote: &[String]) -> Result<Target> {
    let parsed: hyper::Uri = url
        .parse()
        .with_context(|| format!("--target {url:?}: not a URL (expected http://HOST:PORT/PATH)"))?;
    match parsed.scheme_str() {
        Some("http") => {}
        Some("https") => bail!(
            "--target {url:?}: probe speaks plain HTTP (HTTP/1.1 or HTTP/2 with prior knowledge) and has no TLS client; probe the gateway's plain-HTTP listener, or a loopback port forwarded to it"
        ),
        _ => bail!("--target {url:?}: expected an http:// URL, like http://127.0.0.1:8080/"),
    }
    let host = parsed
        .host()
        .with_context(|| format!("--target {url:?}: no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback && !allow_remote.iter().any(|h| h.eq_ignore_ascii_case(&host)) {
        bail!(
            "--target {url:?}: {host} is not a loopback address; probe sends real traffic, so a remote host must be named with --allow-remote {host}"
        );
    }
    Ok(Target {
        url: parsed,
        host,
        loopback,
    })
}

/// How each request carries its client key, as the gateway keys them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// Not at all: every request looks the same.
    None,
    /// In this header, as `client-N`.
    Header(String),
    /// In `X-Forwarded-For`, as an address of 10.0.0.0/8.
    ForwardedFor,
    /// As the connection's source address, from 127.0.0.0/8 (loopback only).
    SourceAddress,
}

impl Identity {
    /// Reads `--key-as`: `header:NAME`, `forwarded-for` or `source-address`.
    pub fn parse(text: &str) -> Result<Identity> {
        match text {
            "forwarded-for" => Ok(Identity::ForwardedFor),
            "source-address" => Ok(Identity::SourceAddress),
            _ => match text.strip_prefix("header:") {
                Some(name) if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_ok() => {
                    Ok(Identity::Header(name.to_string()))
                }
                _ => bail!(
                    "--key-as {text:?}: expected header:NAME (like header:X-Api-Key), forwarded-for or source-address"
                ),
            },
        }
    }

    /// The text that carries identity `n` (numbered in first-seen order).
    pub fn value(&self, n: u32) -> String {
        match self {
            Identity::None => String::new(),
            Identity::Header(_) => format!("client-{n}"),
            Identity::ForwardedFor => {
                let [_, a, b, c] = (n + 1).to_be_bytes();
                format!("10.{a}.{b}.{c}")
            }
            Identity::SourceAddress => {
                // 127.0.0.1 is left to unkeyed traffic and the tests' own.
                let [_, a, b, c] = (n + 2).to_be_bytes();
                format!("127.{a}.{b}.{c}")
            }
        }
    }
}

/// One request of the schedule.
#[derive(Clone, Copy, Debug)]
pub struct Planned {
    /// When it is due, scenario time.
    pub due: Nanos,
    /// Its key, for the model.
    pub key: Key,
    /// Its identity's number, in first-seen order.
    pub who: u32,
}

/// The requests to send and what they add up to.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// In time order.
    pub requests: Vec<Planned>,
    /// Distinct identities.
    pub identities: usize,
    /// The most requests due in any 1 s.
    pub peak_per_sec: u64,
    /// What the traffic is, in words (the adversary's pattern, say).
    pub description: String,
}

/// What a probe may do at most: refused before sending when the schedule
/// needs more.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Requests in all.
    pub requests: u64,
    /// Requests due in any 1 s.
    pub rate: u64,
    /// Real time from the first request due to the last.
    pub wall: Nanos,
}

/// The limiter the probe is about: `name`, or the scenario's first (with a
/// note saying so when it has several).
pub fn limiter<'a>(
    scenario: &'a Scenario,
    name: Option<&str>,
) -> Result<(&'a NamedLimiter, Option<String>)> {
    match name {
        Some(name) => scenario
            .limiters
            .iter()
            .find(|l| l.name == name)
            .map(|l| (l, None))
            .with_context(|| {
                format!(
                    "--limiter: no limiter {name:?} in {} (it has {})",
                    scenario.path.display(),
                    names(scenario)
                )
            }),
        None => {
            let first = &scenario.limiters[0];
            let note = (scenario.limiters.len() > 1).then(|| {
                format!(
                    "comparing with limiter {:?}, the first of {} ({}); name the one the target enforces with --limiter",
                    first.name,
                    scenario.path.display(),
                    names(scenario)
                )
            });
            Ok((first, note))
        }
    }
}

fn names(scenario: &Scenario) -> String {
    scenario
        .limiters
        .iter()
        .map(|l| l.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// An adversary workload for a scenario that has none: within twice the
/// limiter's bound over the rolling interval per second (enough to reach
/// it, and 2N, against any window), and within `max_rate`.
pub fn adversary(scenario: &Scenario, named: &NamedLimiter, max_rate: u64) -> Workload {
    let bound = named.limiter.bound(scenario.metrics.rolling);
    let budget = bound.saturating_mul(2).min(max_rate).max(1);
    Workload {
        name: "worst-case".to_string(),
        traffic: Traffic::Adversary(crate::adversary::Config {
            budget: NonZeroU64::new(budget).unwrap_or(NonZeroU64::MIN),
        }),
        retry: None,
    }
}

/// The requests of workload `workload` (the adversary's pattern against
/// `named` for an adversary), numbered by identity, within `caps`.
pub fn schedule(
    scenario: &Scenario,
    workload: usize,
    named: &NamedLimiter,
    identity: &Identity,
    caps: &Caps,
) -> Result<Schedule> {
    let work = &scenario.workloads[workload];
    let too_many = || {
        format!(
            "workload {:?}: more than --max-requests {} requests; shorten the scenario, pick another workload, or raise --max-requests (at most {MAX_PROBE_REQUESTS})",
            work.name, caps.requests
        )
    };
    let mut arrivals: Vec<(Nanos, Key)> = Vec::new();
    let description;
    if let Some(adversary) = work.adversary() {
        let found = crate::adversary::search(
            &named.limiter,
            adversary.budget.get(),
            scenario.metrics.rolling,
            scenario.duration,
        )
        .with_context(|| {
            format!(
                "workload {:?}: the run ({}) is too short for an adversary; make it at least a few windows long",
                work.name, scenario.duration
            )
        })?;
        let keys = found.keys.max(1);
        if (found.arrivals.len() as u64).saturating_mul(keys) > caps.requests {
            bail!(too_many());
        }
        for &time in &found.arrivals {
            arrivals.extend((0..keys).map(|k| (time, Key::client(k))));
        }
        description = format!(
            "the adversary's pattern against {}: {}",
            named.name, found.description
        );
    } else {
        let mut stream = crate::sim::arrivals(scenario, work, 0)?;
        for arrival in stream.by_ref() {
            if arrivals.len() as u64 >= caps.requests {
                bail!(too_many());
            }
            arrivals.push((arrival.time, arrival.key));
        }
        if let Some(err) = stream.take_error() {
            bail!("workload {:?}: {err}", work.name);
        }
        description = format!("workload {:?}: {}", work.name, work.describe().join("; "));
    }
    let mut numbers: HashMap<Key, u32> = HashMap::new();
    let mut requests = Vec::with_capacity(arrivals.len());
    let mut rolling = RollingCounts::new(&[Nanos::SECOND]);
    for (due, key) in arrivals {
        let next = numbers.len() as u32;
        let who = *numbers.entry(key).or_insert(next);
        if numbers.len() > identity_limit(identity) {
            bail!(
                "workload {:?}: more than {} client keys, the most a probe carries {}",
                work.name,
                identity_limit(identity),
                match identity {
                    Identity::SourceAddress => "as source addresses (a connection pool each)",
                    _ => "as identities",
                }
            );
        }
        rolling.push(due);
        requests.push(Planned { due, key, who });
    }
    let peak_per_sec = rolling.worst()[0].count;
    if peak_per_sec > caps.rate {
        bail!(
            "workload {:?}: {peak_per_sec} requests due within 1 s, more than --max-rate {}; raise --max-rate if the target is meant to take it",
            work.name,
            caps.rate
        );
    }
    let span = requests.last().map_or(Nanos::ZERO, |r| r.due);
    if span > caps.wall {
        bail!(
            "workload {:?}: its requests span {span} of real time, more than --max-wall-time {}",
            work.name,
            caps.wall
        );
    }
    if identity == &Identity::None && numbers.len() > 1 && named.limiter.keys_matter() {
        bail!(
            "limiter {:?} keeps state per client key and workload {:?} has {} keys; say how the target tells them apart with --key-as (header:NAME, forwarded-for or source-address)",
            named.name,
            work.name,
            numbers.len()
        );
    }
    Ok(Schedule {
        requests,
        identities: numbers.len(),
        peak_per_sec,
        description,
    })
}

fn identity_limit(identity: &Identity) -> usize {
    match identity {
        Identity::SourceAddress => MAX_SOURCE_ADDRESSES,
        _ => MAX_IDENTITIES,
    }
}

/// One request as sent and answered; times in scenario nanoseconds (from
/// the instant the schedule's zero was placed at).
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    /// Its place among the requests sent: the schedule's first, then the
    /// retries in the order they were sent.
    pub index: usize,
    /// 1 for a first attempt, 2 for its first retry, and so on.
    pub attempt: u32,
    /// When it was due.
    pub due: u64,
    /// When its sending began.
    pub sent: u64,
    /// When the answer's head arrived (or the request failed).
    pub answered: u64,
    /// Its identity's number.
    pub who: u32,
    /// The HTTP status; None when no answer came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why no answer came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The hint headers, as the target sent them (`Retry-After`,
    /// `RateLimit-*`, `X-RateLimit-*`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<(String, String)>,
    /// The key, for the model.
    #[serde(skip)]
    pub key: Key,
}

impl Record {
    /// Whether the target admitted it: a 2xx answer.
    pub fn admitted(&self) -> Option<bool> {
        self.status.map(|s| (200..300).contains(&s))
    }
}
