//! Sending the schedule: one thread keeps the time and hands each request,
//! at its instant, to a small tokio runtime whose hyper client sends it on
//! a keep-alive connection (HTTP/1.1, or HTTP/2 with prior knowledge).
//!
//! tokio's timers tick in milliseconds, so the waiting is not theirs: the
//! timekeeper sleeps until shortly before an instant and spins the rest.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::{Identity, MAX_BODY, Record, Schedule, Target};

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

/// Sends `schedule` to the target; `progress` is called once per answer.
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
    let records: Arc<Mutex<Vec<Record>>> =
        Arc::new(Mutex::new(Vec::with_capacity(schedule.requests.len())));
    let refused_in_row = Arc::new(AtomicU32::new(0));
    let storm = Arc::new(AtomicBool::new(false));
    let (zero, zero_unix_ns) = place_zero(conn.align);
    let mut handles = Vec::with_capacity(schedule.requests.len());
    let mut stopped = None;
    for (index, planned) in schedule.requests.iter().enumerate() {
        let at = zero + Duration::from_nanos(planned.due.get());
        if at.saturating_duration_since(zero) > conn.max_wall {
            stopped = Some(format!("--max-wall-time {:?} reached", conn.max_wall));
            break;
        }
        if let Some(why) = wait_until(at, &storm) {
            stopped = Some(why);
            break;
        }
        let client = clients[if clients.len() == 1 {
            0
        } else {
            planned.who as usize
        }]
        .clone();
        let mut request = hyper::Request::get(conn.target.url.clone());
        if let Some(name) = &header {
            request = request.header(name, conn.identity.value(planned.who));
        }
        let request = request
            .body(Empty::<Bytes>::new())
            .context("building a request")?;
        let (records, refused_in_row, storm) =
            (records.clone(), refused_in_row.clone(), storm.clone());
        let timeout = conn.timeout;
        let planned = *planned;
        handles.push(runtime.spawn(async move {
            let sent = zero.elapsed();
            let mut record = Record {
                index,
                due: planned.due.get(),
                sent: nanos(sent),
                answered: 0,
                who: planned.who,
                status: None,
                error: None,
                hints: Vec::new(),
                key: planned.key,
            };
            match tokio::time::timeout(timeout, client.request(request)).await {
                Ok(Ok(response)) => {
                    record.answered = nanos(zero.elapsed());
                    refused_in_row.store(0, Ordering::Relaxed);
                    record.status = Some(response.status().as_u16());
                    record.hints = hints(response.headers());
                    // The body is read (up to a cap) so the connection can
                    // carry the next request.
                    let mut body = response.into_body();
                    let mut read = 0;
                    while read <= MAX_BODY {
                        match tokio::time::timeout(timeout, body.frame()).await {
                            Ok(Some(Ok(frame))) => {
                                read += frame.data_ref().map_or(0, Bytes::len);
                            }
                            _ => break,
                        }
                    }
                }
                Ok(Err(err)) => {
                    record.answered = nanos(zero.elapsed());
                    if err.is_connect() {
                        if refused_in_row.fetch_add(1, Ordering::Relaxed) + 1
                            >= super::send::REFUSED_STORM
                        {
                            storm.store(true, Ordering::Relaxed);
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
            records
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(record);
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
    let mut records = Arc::try_unwrap(records)
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
        .unwrap_or_else(|shared| shared.lock().map(|r| r.clone()).unwrap_or_default());
    records.sort_by_key(|r| r.index);
    Ok(Sent {
        records,
        stopped,
        zero_unix_ns,
    })
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

/// Waits for `at`: sleeps most of the way and spins the rest. Returns why
/// to stop instead, if a stop was asked for.
fn wait_until(at: Instant, storm: &AtomicBool) -> Option<String> {
    loop {
        if crate::interrupt::requested() {
            return Some("interrupted".to_string());
        }
        if storm.load(Ordering::Relaxed) {
            return Some(format!(
                "{REFUSED_STORM} connections in a row were refused: nothing is listening at the target"
            ));
        }
        let now = Instant::now();
        if now >= at {
            return None;
        }
        let left = at - now;
        if left > SPIN {
            // Short naps, so Ctrl-C and a refused storm are noticed.
            std::thread::sleep((left - SPIN).min(Duration::from_millis(50)));
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
