//! Sending the schedule: one thread keeps the time and hands each request,
//! at its instant, to a small tokio runtime whose hyper client sends it on
//! a keep-alive connection (HTTP/1.1, or HTTP/2 with prior knowledge).
//!
//! tokio's timers tick in milliseconds, so the waiting is not theirs: the
//! timekeeper sleeps until shortly before an instant and spins the rest.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::retry::{Job, RetryFigures, Retrying};
use super::{Identity, MAX_BODY, Record, Schedule, Target};
use crate::time::NANOS_PER_SEC;

/// How long before an instant the timekeeper stops sleeping and spins.
const SPIN: Duration = Duration::from_micros(300);
/// Connections refused in a row that stop the probe: nothing listens.
pub const REFUSED_STORM: u32 = 20;

/// How to reach the target.
pub struct Connection<'a> {
    /// Where.
    pub target: &'a Target,
    /// How each request carries its key.
    pub identity: &'a Identity,
    /// HTTP/2 with prior knowledge instead of HTTP/1.1.
    pub http2: bool,
    /// The most a connection and its answer may take.
    pub timeout: Duration,
    /// The probe stops sending here (`--max-wall-time` past the start).
    pub max_wall: Duration,
    /// The schedule's zero is placed on a whole multiple of this much
    /// wall-clock time (so epoch-aligned windows line up with the model's).
    pub align: Duration,
    /// For clients that retry: their policy, the jitter's draws, and the
    /// scenario's end (no retry due then or later).
    pub retry: Option<(crate::retry::Retry, crate::random::Rng, crate::time::Nanos)>,
    /// The most requests sent in all, retries included.
    pub max_requests: u64,
    /// The most requests sent in any 1 s, retries included.
    pub max_rate: u64,
}

/// What was sent.
#[derive(Debug)]
pub struct Sent {
    /// Each request sent, in schedule order.
    pub records: Vec<Record>,
    /// Why sending stopped before the schedule's end, if it did.
    pub stopped: Option<String>,
    /// The schedule's zero, in nanoseconds since the Unix epoch.
    pub zero_unix_ns: u128,
    /// With retrying clients: what became of the rejections.
    pub retries: Option<RetryFigures>,
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn client(conn: &Connection, source: Option<IpAddr>) -> HttpClient {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(conn.timeout));
    http.set_local_address(source);
    Client::builder(TokioExecutor::new())
        .http2_only(conn.http2)
        .pool_idle_timeout(Duration::from_secs(30))
        .build(http)
}

/// Shared by the timekeeper and the requests in flight.
struct Shared {
    records: Mutex<Vec<Record>>,
    refused_in_row: AtomicU32,
    storm: AtomicBool,
    /// Requests sent and not yet answered (nor failed).
    in_flight: AtomicUsize,
    retrying: Option<Retrying>,
    zero: Instant,
    zero_unix_ns: u128,
}

/// Sends `schedule` to the target, and the retries its clients make;
/// `progress` is called once per answer.
pub fn send(schedule: &Schedule, conn: &Connection, progress: &(dyn Fn() + Sync)) -> Result<Sent> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the probe's network runtime")?;
    let _entered = runtime.enter();
    let clients: Vec<HttpClient> = match conn.identity {
        Identity::SourceAddress => (0..schedule.identities as u32)
            .map(|n| {
                let address: IpAddr = conn
                    .identity
                    .value(n)
                    .parse()
                    .expect("identities are addresses");
                client(conn, Some(address))
            })
            .collect(),
        _ => vec![client(conn, None)],
    };
    let header = match conn.identity {
        Identity::Header(name) => Some(hyper::header::HeaderName::from_bytes(name.as_bytes())?),
        Identity::ForwardedFor => Some(hyper::header::HeaderName::from_static("x-forwarded-for")),
        _ => None,
    };
    let (zero, zero_unix_ns) = place_zero(conn.align);
    let shared = Arc::new(Shared {
        records: Mutex::new(Vec::with_capacity(schedule.requests.len())),
        refused_in_row: AtomicU32::new(0),
        storm: AtomicBool::new(false),
        in_flight: AtomicUsize::new(0),
        retrying: conn
            .retry
            .clone()
            .map(|(retry, rng, end)| Retrying::new(retry, rng, end)),
        zero,
        zero_unix_ns,
    });
    let (retries_in, retries) = mpsc::channel::<Job>();
    let mut due_retries: BinaryHeap<Reverse<Job>> = BinaryHeap::new();
    let mut first = schedule.requests.iter().enumerate().peekable();
    let mut next_index = schedule.requests.len();
    // Send times of the last second, for --max-rate over the retries too.
    let mut last_second: VecDeque<u64> = VecDeque::new();
    let mut handles = Vec::with_capacity(schedule.requests.len());
    let mut stopped = None;
    loop {
        while let Ok(job) = retries.try_recv() {
            due_retries.push(Reverse(job));
        }
        let planned = first.peek().map(|&(index, p)| Job {
            due: p.due.get(),
            index,
            attempt: 1,
            slept: 0,
            who: p.who,
            key: p.key,
        });
        let retry = due_retries.peek().map(|Reverse(job)| *job);
        let job = match (planned, retry) {
            (Some(p), Some(r)) => Some(if r.due < p.due { r } else { p }),
            (p, r) => p.or(r),
        };
        let Some(job) = job else {
            // Nothing due: done once nothing is in flight to retry.
            if shared.in_flight.load(Ordering::SeqCst) == 0 {
                break;
            }
            if let Some(why) = stop_asked(&shared.storm) {
                stopped = Some(why);
                break;
            }
            if let Ok(job) = retries.recv_timeout(Duration::from_millis(20)) {
                due_retries.push(Reverse(job));
            }
            continue;
        };
        if Duration::from_nanos(job.due) > conn.max_wall {
            stopped = Some(format!("--max-wall-time {:?} reached", conn.max_wall));
            break;
        }
        match wait_until(
            zero + Duration::from_nanos(job.due),
            &shared.storm,
            &retries,
        ) {
            Woke::Due => {}
            Woke::Retry(retry) => {
                due_retries.push(Reverse(retry));
                continue;
            }
            Woke::Stop(why) => {
                stopped = Some(why);
                break;
            }
        }
        let mut job = job;
        if job.attempt == 1 {
            first.next();
        } else {
            due_retries.pop();
            let retrying = shared
                .retrying
                .as_ref()
                .expect("retries come from a policy");
            while last_second
                .front()
                .is_some_and(|&t| t + NANOS_PER_SEC <= job.due)
            {
                last_second.pop_front();
            }
            if next_index as u64 >= conn.max_requests || last_second.len() as u64 >= conn.max_rate {
                retrying.capped();
                continue;
            }
            retrying.sent();
            job.index = next_index;
            next_index += 1;
        }
        last_second.push_back(job.due);
        let client = clients[if clients.len() == 1 {
            0
        } else {
            job.who as usize
        }]
        .clone();
        let mut request = hyper::Request::get(conn.target.url.clone());
        if let Some(name) = &header {
            request = request.header(name, conn.identity.value(job.who));
        }
        let request = request
            .body(Empty::<Bytes>::new())
            .context("building a request")?;
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        let (shared, retries_in) = (shared.clone(), retries_in.clone());
        let timeout = conn.timeout;
        handles.push(runtime.spawn(async move {
            let record = exchange(&client, request, job, &shared, timeout).await;
            if let (Some(retrying), Some(status)) = (&shared.retrying, record.status) {
                let hint =
                    super::retry::hint_of(&record.hints, record.answered, shared.zero_unix_ns);
                if let Some(retry) = retrying.answered(&job, status, record.answered, hint) {
                    let _ = retries_in.send(retry);
                }
            }
            shared
                .records
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(record);
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        }));
    }
    // The answers still on their way, each bounded by its timeout; Ctrl-C
    // drops them at once.
    runtime.block_on(async {
        for mut handle in handles {
            loop {
                if crate::interrupt::requested() {
                    handle.abort();
                    break;
                }
                match tokio::time::timeout(Duration::from_millis(20), &mut handle).await {
                    Ok(_) => {
                        progress();
                        break;
                    }
                    Err(_) => continue,
                }
            }
        }
    });
    drop(clients);
    runtime.shutdown_timeout(Duration::from_millis(100));
    if crate::interrupt::requested() && stopped.is_none() {
        stopped = Some("interrupted".to_string());
    }
    let retries = shared.retrying.as_ref().map(Retrying::figures);
    let mut records = std::mem::take(
        &mut *shared
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    records.sort_by_key(|r| r.index);
    Ok(Sent {
        records,
        stopped,
        zero_unix_ns,
        retries,
    })
}

/// Sends one request and reads its answer (the head, then the body up to
/// a cap, so the connection can carry the next).
async fn exchange(
    client: &HttpClient,
    request: hyper::Request<Empty<Bytes>>,
    job: Job,
    shared: &Shared,
    timeout: Duration,
) -> Record {
    let zero = shared.zero;
    let mut record = Record {
        index: job.index,
        attempt: job.attempt,
        due: job.due,
        sent: nanos(zero.elapsed()),
        answered: 0,
        who: job.who,
        status: None,
        error: None,
        hints: Vec::new(),
        key: job.key,
    };
    match tokio::time::timeout(timeout, client.request(request)).await {
        Ok(Ok(response)) => {
            record.answered = nanos(zero.elapsed());
            shared.refused_in_row.store(0, Ordering::Relaxed);
            record.status = Some(response.status().as_u16());
            record.hints = hints(response.headers());
            let mut body = response.into_body();
            let mut read = 0;
            while read <= MAX_BODY {
                match tokio::time::timeout(timeout, body.frame()).await {
                    Ok(Some(Ok(frame))) => read += frame.data_ref().map_or(0, Bytes::len),
                    _ => break,
                }
            }
        }
        Ok(Err(err)) => {
            record.answered = nanos(zero.elapsed());
            if err.is_connect() {
                if shared.refused_in_row.fetch_add(1, Ordering::Relaxed) + 1 >= REFUSED_STORM {
                    shared.storm.store(true, Ordering::Relaxed);
                }
                record.error = Some(format!("connect: {}", source_text(&err)));
            } else {
                record.error = Some(source_text(&err));
            }
        }
        Err(_) => {
            record.answered = nanos(zero.elapsed());
            record.error = Some(format!("no answer within {timeout:?}"));
        }
    }
    record
}

/// An instant a little ahead, on a whole multiple of `align` of wall-clock
/// time: the schedule's zero, as an `Instant` and in Unix nanoseconds.
fn place_zero(align: Duration) -> (Instant, u128) {
    let now = Instant::now();
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let align = align.as_nanos().max(1);
    // At least 200 ms ahead, for the connections' first setup.
    let earliest = unix + 200_000_000;
    let zero_unix = earliest.div_ceil(align) * align;
    let lead = u64::try_from(zero_unix - unix).unwrap_or(u64::MAX);
    (now + Duration::from_nanos(lead), zero_unix)
}

/// What ended a wait.
enum Woke {
    /// The instant came.
    Due,
    /// A retry came first, to be placed among what is due.
    Retry(Job),
    /// Ctrl-C, or a refused storm: why.
    Stop(String),
}

/// Why to stop, if a stop was asked for.
fn stop_asked(storm: &AtomicBool) -> Option<String> {
    if crate::interrupt::requested() {
        return Some("interrupted".to_string());
    }
    storm.load(Ordering::Relaxed).then(|| {
        format!(
            "{REFUSED_STORM} connections in a row were refused: nothing is listening at the target"
        )
    })
}

/// Waits for `at`: sleeps most of the way (on the retries' channel, so a
/// retry due earlier wakes it) and spins the rest.
fn wait_until(at: Instant, storm: &AtomicBool, retries: &mpsc::Receiver<Job>) -> Woke {
    loop {
        if let Some(why) = stop_asked(storm) {
            return Woke::Stop(why);
        }
        let now = Instant::now();
        if now >= at {
            return Woke::Due;
        }
        let left = at - now;
        if left > SPIN {
            // Short naps, so Ctrl-C and a refused storm are noticed.
            if let Ok(job) = retries.recv_timeout((left - SPIN).min(Duration::from_millis(50))) {
                return Woke::Retry(job);
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// An error and its causes, `outer: inner`.
fn source_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        let next = inner.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        cause = inner.source();
    }
    text
}

/// The answer's hint headers, as sent.
fn hints(headers: &hyper::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.as_str();
            name == "retry-after"
                || name.starts_with("ratelimit")
                || name.starts_with("x-ratelimit")
        })
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}
