//! `haproxy-rate` against a real HAProxy: a frontend with a stick table
//! storing `http_req_rate(1s)`, `track-sc0 src` and `deny if { sc_http_req_rate(0)
//! gt L }`, sent the same requests at recorded moments. Every answer must be
//! the model's at the moment it was sent, or within the timing tolerance of
//! it (HAProxy's millisecond clock and when it ran the request); none may be
//! unexplained. Skipped, with a message, where no `haproxy` is installed;
//! `.ci/run` installs Debian's so CI runs it.

use super::common;

use common::required;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use burstsim::limiter::{Context, Limiter, LimiterConfig, RateLimiter};
use burstsim::time::Nanos;

/// How far HAProxy's clock and scheduling may put a request from its send time.
const TOLERANCE_MS: u64 = 3;
const LIMIT: u64 = 20;

fn haproxy() -> Option<PathBuf> {
    common::installed(&["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"])
}

/// A foreground HAProxy on a free port, stopped by its pid when dropped.
struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(binary: &Path) -> Server {
        Server::start_with(
            binary,
            "stick-table type ip size 1k expire 60s store http_req_rate(1s)",
            LIMIT,
        )
    }

    /// A frontend whose table is `table` (its stick-table line) and whose
    /// deny is above `limit`.
    fn start_with(binary: &Path, table: &str, limit: u64) -> Server {
        Server::start_tracking(binary, table, "src", limit)
    }

    /// [`Server::start_with`], tracking each request by `key` (a sample
    /// expression) instead of its address.
    fn start_tracking(binary: &Path, table: &str, key: &str, limit: u64) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let _starting = common::STARTING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let port = common::free_port();
        let conf = format!(
            "global
    maxconn 256
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend limited
    bind 127.0.0.1:{port}
    {table}
    http-request track-sc0 {key}
    http-request deny deny_status 429 if {{ sc_http_req_rate(0) gt {limit} }}
    http-request return status 200 content-type text/plain string ok
"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(binary)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts");
        common::wait_for_listener(port, "haproxy");
        Server {
            child,
            port,
            _dir: dir,
        }
    }

    /// Sends one request and returns its status.
    fn get(&self) -> u16 {
        self.get_with("")
    }

    /// Sends one request with the header lines `headers` (each ending in
    /// `\r\n`) and returns its status.
    fn get_with(&self, headers: &str) -> u16 {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream
            .write_all(format!("GET / HTTP/1.0\r\nHost: burstsim\r\n{headers}\r\n").as_bytes())
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The block `burstsim import` makes of a frontend with the stick-table
/// line `table`, tracking by `key` and denying above `limit`, as a user
/// would paste it.
fn imported(table: &str, key: &str, limit: u64) -> toml::Table {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("haproxy.cfg");
    std::fs::write(
        &conf,
        format!("frontend web\n    {table}\n    http-request track-sc0 {key}\n    http-request deny deny_status 429 if {{ sc_http_req_rate(0) gt {limit} }}\n"),
    )
    .unwrap();
    common::imported_limiter(&conf, &[])
}

/// Bursts sent back to back with pauses between them: (requests, pause after, in ms).
/// They cross period edges with the previous period's weight high and low
/// (a period starting 300 ms after its predecessor ended weighs it by 70%),
/// and idle for two periods once.
const SCHEDULE: [(usize, u64); 8] = [
    (22, 1_300),
    (12, 450),
    (15, 250),
    (20, 900),
    (8, 2_100),
    (25, 600),
    (18, 1_150),
    (10, 0),
];

/// The model with HAProxy's clock at `clock_offset` ns (mod 2 ms) when the
/// first request is sent: which milliseconds are odd for it is unknown here.
fn model(clock_offset: u64) -> Limiter {
    let table: toml::Table = toml::from_str(&format!(
        "kind = \"haproxy-rate\"\nperiod = \"1s\"\nlimit = {LIMIT}\nclock_offset = \"{clock_offset}ns\""
    ))
    .unwrap();
    LimiterConfig::from_table(table)
        .unwrap()
        .build(Context::default())
        .unwrap()
}

/// Each request decided at its send time; where HAProxy answered otherwise,
/// the answer looked for within the tolerance (never before the previous
/// request's time), going on from the state that gave it: the requests
/// explained by timing (sent, decided at), and those not explained at all.
#[allow(clippy::type_complexity)]
fn compare(sent: &[(u64, u16)], clock_offset: u64) -> (Vec<(u64, u64)>, Vec<(u64, u16)>) {
    let mut limiter = model(clock_offset);
    let (mut previous, mut explained, mut unexplained) = (0u64, Vec::new(), Vec::new());
    for &(at, status) in sent {
        let theirs = status == 200;
        let mut exact = limiter.clone();
        if exact.decide(Nanos(at)).admitted() == theirs {
            limiter = exact;
            previous = at;
            continue;
        }
        let tolerance = TOLERANCE_MS * 1_000_000;
        let shifted = (at.saturating_sub(tolerance).max(previous)..=at + tolerance)
            .step_by(250_000)
            .find_map(|t| {
                let mut shifted = limiter.clone();
                (shifted.decide(Nanos(t)).admitted() == theirs).then_some((t, shifted))
            });
        match shifted {
            Some((t, state)) => {
                explained.push((at, t));
                limiter = state;
                previous = t;
            }
            None => {
                unexplained.push((at, status));
                limiter = exact;
                previous = at;
            }
        }
    }
    (explained, unexplained)
}

#[test]
#[ignore = "needs HAProxy (Debian's haproxy): run with --include-ignored, as .ci/run does"]
fn haproxy_admits_and_denies_as_the_freq_ctr_model() {
    let _alone = super::common::real_time();
    let Some(binary) = haproxy() else {
        required("not installed: haproxy; .ci/run installs Debian's haproxy");
        return;
    };
    let server = Server::start(&binary);
    let start = Instant::now();
    let mut sent = Vec::new();
    for (count, pause_ms) in SCHEDULE {
        for _ in 0..count {
            let at = start.elapsed().as_nanos() as u64;
            sent.push((at, server.get()));
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
    assert!(
        sent.iter()
            .all(|&(_, status)| status == 200 || status == 429),
        "{sent:?}"
    );
    // HAProxy's ticks are even, and where its clock's milliseconds fall
    // against the send times is unknown: the parity (and phase) best
    // explaining the answers, tried every quarter millisecond.
    let (explained, unexplained) = (0..8u64)
        .map(|quarter| compare(&sent, quarter * 250_000))
        .min_by_key(|(explained, unexplained)| (unexplained.len(), explained.len()))
        .unwrap();
    assert!(
        unexplained.is_empty(),
        "HAProxy answered {unexplained:?} (ns since the first request, status) unlike the model at any time within {TOLERANCE_MS} ms; explained by timing: {explained:?}"
    );
    let denied = sent.iter().filter(|&&(_, s)| s == 429).count();
    let admitted = sent.len() - denied;
    assert!(
        denied > 20 && admitted > 30,
        "the schedule exercises both answers: {admitted} admitted, {denied} denied"
    );
    // Timing explains a few answers at most, not the comparison.
    eprintln!(
        "{} of {} answers explained by timing: {explained:?}",
        explained.len(),
        sent.len()
    );
    assert!(
        explained.len() <= 6,
        "{} answers needed the tolerance: {explained:?}",
        explained.len()
    );
}

/// `expire` forgets an idle client in HAProxy, its rate with it, and the
/// limiter `burstsim import` makes of the same configuration forgets it too
/// (`evict_after`): after a pause longer than `expire` and far shorter than
/// the rate's period, a second burst passes as the first did. Without the
/// expiry the rate of the first burst would still deny it.
#[test]
#[ignore = "needs HAProxy (Debian's haproxy): run with --include-ignored, as .ci/run does"]
fn an_expired_entry_is_forgotten_as_the_imported_model_forgets_it() {
    let _alone = super::common::real_time();
    let Some(binary) = haproxy() else {
        required("not installed: haproxy; .ci/run installs Debian's haproxy");
        return;
    };
    let table = "stick-table type ip size 1k expire 1s store http_req_rate(10s)";
    let mut block = imported(table, "src", 5);
    assert_eq!(block["evict_after"].as_str(), Some("1s"), "{block:?}");
    let mut ours = common::built(block.clone());
    block.remove("evict_after");
    let mut remembering = common::built(block);

    let server = Server::start_with(&binary, table, 5);
    let start = Instant::now();
    let mut answers = Vec::new();
    for pause_ms in [1_600u64, 0] {
        for _ in 0..8 {
            let now = Nanos(start.elapsed().as_nanos() as u64);
            let key = burstsim::traffic::Key::DEFAULT;
            answers.push((
                server.get() == 200,
                ours.decide_keyed::<false>(now, key).admitted(),
                remembering.decide_keyed::<false>(now, key).admitted(),
            ));
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
    let theirs: Vec<bool> = answers.iter().map(|a| a.0).collect();
    let model: Vec<bool> = answers.iter().map(|a| a.1).collect();
    assert_eq!(theirs, model, "HAProxy vs the imported model");
    assert_eq!(
        theirs.iter().filter(|&&ok| ok).count(),
        10,
        "5 of each burst"
    );
    assert!(
        answers.iter().any(|a| a.1 != a.2),
        "without the expiry the second burst is denied: {answers:?}"
    );
}

/// Tracked by a header, HAProxy counts and limits each value, an empty one
/// too, and tracks nothing for a request without the header: its deny never
/// applies. The limiter `burstsim import` makes of the configuration, told
/// which keys are absent (a log's `-`) and blank, answers as HAProxy does,
/// request by request. (A 10 s period: the burst is far from its edges.)
#[test]
#[ignore = "needs HAProxy (Debian's haproxy): run with --include-ignored, as .ci/run does"]
fn a_request_without_the_tracked_header_is_not_limited_as_in_haproxy() {
    let _alone = super::common::real_time();
    let Some(binary) = haproxy() else {
        required("not installed: haproxy; .ci/run installs Debian's haproxy");
        return;
    };
    let table = "stick-table type string len 64 size 1k expire 60s store http_req_rate(10s)";
    let key = "req.hdr(x-forwarded-for)";
    let block = imported(table, key, 3);
    assert_eq!(
        block.get("per").and_then(|p| p.as_str()),
        Some("key"),
        "{block:?}"
    );
    let mut ours = common::built(block);
    let named = |text: &[u8]| burstsim::traffic::Key::named(text);
    ours.treat_empty_keys(&burstsim::traffic::EmptyKeys {
        absent: vec![named(b"-").client],
        blank: vec![named(b"").client],
    });

    let server = Server::start_tracking(&binary, table, key, 3);
    let start = Instant::now();
    let mut answers = Vec::new();
    for i in 0..24 {
        let (header, key, what) = match i % 3 {
            0 => ("", named(b"-"), "without"),
            1 => (
                "X-Forwarded-For: 198.51.100.7\r\n",
                named(b"198.51.100.7"),
                "an address",
            ),
            _ => ("X-Forwarded-For: \r\n", named(b""), "empty"),
        };
        let now = Nanos(start.elapsed().as_nanos() as u64);
        let theirs = server.get_with(header);
        answers.push((
            what,
            theirs,
            ours.decide_keyed::<false>(now, key).admitted(),
        ));
    }
    for &(what, theirs, model) in &answers {
        assert!(theirs == 200 || theirs == 429, "{answers:?}");
        assert_eq!(theirs == 200, model, "{what}: {answers:?}");
    }
    let passed = |what: &str| answers.iter().filter(|a| a.0 == what && a.1 == 200).count();
    assert_eq!(
        [passed("without"), passed("an address"), passed("empty")],
        [8, 3, 3],
        "{answers:?}"
    );
}

/// HAProxy's own `option httplog` lines, as a real HAProxy writes them to
/// its log, replay with `format = "haproxy"`: every request it logged, the
/// Host its capture put in braces (`host_field` and `where.host`), the 429s
/// it answered counted as its limiter's, and the `haproxy-rate` model of
/// its configuration replayed at its own millisecond stamps answering as it
/// did (0 of 130 disagreements in 3 runs here; up to 3 allowed for its
/// clock's sub-millisecond phase).
#[test]
#[ignore = "needs HAProxy (Debian's haproxy): run with --include-ignored, as .ci/run does"]
fn haproxy_httplog_lines_replay_with_its_own_answers() {
    let _alone = super::common::real_time();
    let Some(binary) = haproxy() else {
        required("not installed: haproxy; .ci/run installs Debian's haproxy");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("haproxy.log");
    let (child, port) = {
        let _starting = common::STARTING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let port = common::free_port();
        let conf = dir.path().join("haproxy.cfg");
        std::fs::write(
            &conf,
            format!(
                "global
    maxconn 256
    log stdout format raw local0
defaults
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend limited
    bind 127.0.0.1:{port}
    capture request header Host len 64
    stick-table type ip size 1k expire 60s store http_req_rate(1s)
    http-request track-sc0 src
    http-request deny deny_status 429 if {{ sc_http_req_rate(0) gt {LIMIT} }}
    http-request return status 200 content-type text/plain string ok
"
            ),
        )
        .unwrap();
        let child = Command::new(&binary)
            .arg("-db")
            .arg("-f")
            .arg(&conf)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts");
        common::wait_for_listener(port, "haproxy");
        (child, port)
    };
    let server = Server {
        child,
        port,
        _dir: tempfile::tempdir().unwrap(),
    };
    let mut statuses = Vec::new();
    for (count, pause_ms) in SCHEDULE {
        for _ in 0..count {
            statuses.push(server.get());
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
    // The listener check's own connection may be logged too: count ours.
    // HAProxy writes a request's line after answering it: wait until every
    // line is there (at most 5 s) before stopping it, rather than a fixed
    // 200 ms, after which a CI run beside a build found 129 of 130.
    let ours = |text: &str| {
        text.lines()
            .filter(|line| line.contains("{burstsim}"))
            .count()
    };
    let waited = Instant::now();
    while ours(&std::fs::read_to_string(&log).unwrap()) < statuses.len()
        && waited.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(ours(&text), statuses.len(), "{text}");
    let denied = statuses.iter().filter(|&&s| s == 429).count() as u64;
    assert!(denied > 20, "{statuses:?}");
    let scenario = dir.path().join("replay.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"duration = "60s"
[[workload]]
name = "logged"
sources = [{{ kind = "trace", format = "haproxy", path = "haproxy.log", key_field = "client_ip", host_field = "captured_request_headers", where = {{ host = "burstsim" }} }}]
[[limiter]]
name = "model"
kind = "haproxy-rate"
limit = {LIMIT}
period = "1s"
per = "key"
"#
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_burstsim"))
        .args(["run", "-q", "--no-charts", "--decisions", "--out"])
        .arg(dir.path().join("out"))
        .arg(&scenario)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out/summary.json")).unwrap())
            .unwrap();
    let run = &summary["runs"][0];
    assert_eq!(
        run["offered"].as_u64(),
        Some(statuses.len() as u64),
        "{run}"
    );
    assert_eq!(run["turned_away_in_log"].as_u64(), Some(denied), "{run}");
    let decisions =
        std::fs::read_to_string(dir.path().join("out/decisions/logged/model.csv")).unwrap();
    let disagree = decisions
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            fields[2] != fields[4]
        })
        .count();
    eprintln!(
        "the model and HAProxy's log disagree on {disagree} of {} requests",
        statuses.len()
    );
    assert!(disagree <= 3, "{disagree} disagreements: {stderr}");
}
