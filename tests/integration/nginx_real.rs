//! `nginx-limit-req` against a real nginx: the same requests, sent at the
//! same moments, get the same answers (and, without `nodelay`, the same
//! delays to within scheduling noise). Skipped, with a message, where no
//! `nginx` is installed; `.ci/run` installs Debian's nginx so CI runs it.

use super::common;

use common::required;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use burstsim::limiter::{Context, LimiterConfig, RateLimiter};
use burstsim::time::Nanos;

fn nginx() -> Option<PathBuf> {
    common::installed(&[
        "/usr/sbin/nginx",
        "/usr/local/sbin/nginx",
        "/usr/local/nginx/sbin/nginx",
    ])
}

/// An nginx serving `limit_req` with `directive`'s parameters on a free port.
struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(binary: &Path, rate: &str, directive: &str) -> Server {
        Server::start_keyed(binary, "$server_name", rate, directive)
    }

    /// A server whose zone keys by `key` (an nginx variable).
    fn start_keyed(binary: &Path, key: &str, rate: &str, directive: &str) -> Server {
        Server::start_with(
            binary,
            &format!("limit_req_zone {key} zone=one:1m rate={rate};"),
            &format!("limit_req zone=one {directive};"),
        )
    }

    /// A server with the `zones` (http-level directives) whose one location
    /// applies `limits`.
    fn start_with(binary: &Path, zones: &str, limits: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let _starting = common::STARTING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let port = common::free_port();
        let d = dir.path().display();
        let conf = format!(
            "daemon off; master_process off; worker_processes 1; error_log {d}/error.log; pid {d}/nginx.pid;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  {zones}
  server {{
    listen 127.0.0.1:{port};
    server_name burstsim;
    # limit_req runs before the content phase; `return` would skip it.
    location / {{ {limits} root {d}/www; }}
  }}
}}
"
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        std::fs::create_dir_all(dir.path().join("www")).unwrap();
        std::fs::write(dir.path().join("www/index.html"), "ok").unwrap();
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        common::wait_for_listener(port, "nginx");
        Server {
            child,
            port,
            _dir: dir,
        }
    }

    /// Sends one request; its status and how long the answer took.
    fn get(&self) -> (u16, Duration) {
        self.get_for("burstsim")
    }

    /// Sends one request naming `host`.
    fn get_for(&self, host: &str) -> (u16, Duration) {
        self.get_with(host, "")
    }

    /// Sends one request naming `host`, with the header lines `headers`
    /// (each ending in `\r\n`).
    fn get_with(&self, host: &str, headers: &str) -> (u16, Duration) {
        let started = Instant::now();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .write_all(
                format!("GET /index.html HTTP/1.0\r\nHost: {host}\r\n{headers}\r\n").as_bytes(),
            )
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let status = answer
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, started.elapsed())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bursts sent back to back, with pauses between them: (requests, pause after, in ms).
/// The pauses sit between multiples of the 100 ms a request takes to drain,
/// so a few milliseconds of scheduling noise cannot change an answer.
const SCHEDULE: [(usize, u64); 4] = [(12, 350), (6, 1_250), (9, 150), (4, 0)];

fn model(config: &str) -> burstsim::limiter::Limiter {
    let table: toml::Table = toml::from_str(config).unwrap();
    LimiterConfig::from_table(table)
        .unwrap()
        .build(Context::default())
        .unwrap()
}

/// Sends the schedule; returns (time sent since the first request, status, latency).
fn replay(server: &Server) -> Vec<(Duration, u16, Duration)> {
    let start = Instant::now();
    let mut sent = Vec::new();
    for (count, pause_ms) in SCHEDULE {
        for _ in 0..count {
            let at = start.elapsed();
            let (status, latency) = server.get();
            sent.push((at, status, latency));
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
    sent
}

#[test]
#[ignore = "needs nginx (Debian's nginx-light): run with --include-ignored, as .ci/run does"]
fn nodelay_admits_and_rejects_exactly_as_nginx() {
    let _alone = super::common::real_time();
    let Some(binary) = nginx() else {
        required("not installed: nginx; .ci/run installs Debian's nginx");
        return;
    };
    let server = Server::start(&binary, "10r/s", "burst=5 nodelay");
    let sent = replay(&server);
    let mut limiter =
        model("kind = \"nginx-limit-req\"\nrate = \"10r/s\"\nburst = 5\nnodelay = true");
    let theirs: Vec<bool> = sent.iter().map(|&(_, status, _)| status == 200).collect();
    let ours: Vec<bool> = sent
        .iter()
        .map(|&(at, _, _)| limiter.decide(Nanos(at.as_nanos() as u64)).admitted())
        .collect();
    assert!(
        sent.iter()
            .all(|&(_, status, _)| status == 200 || status == 503),
        "{sent:?}"
    );
    assert_eq!(theirs, ours, "nginx vs burstsim on {sent:?}");
    assert!(
        theirs.iter().any(|&ok| !ok),
        "the schedule exercises rejections"
    );
}

#[test]
#[ignore = "needs nginx (Debian's nginx-light): run with --include-ignored, as .ci/run does"]
fn without_nodelay_nginx_delays_as_the_model_says() {
    let _alone = super::common::real_time();
    let Some(binary) = nginx() else {
        required("not installed: nginx; .ci/run installs Debian's nginx");
        return;
    };
    let server = Server::start(&binary, "20r/s", "burst=4");
    // Sequential requests: each waits out its delay before the next is sent.
    let start = Instant::now();
    let mut limiter = model("kind = \"nginx-limit-req\"\nrate = \"20r/s\"\nburst = 4");
    for _ in 0..6 {
        let at = start.elapsed();
        let (status, latency) = server.get();
        let decision = limiter.decide(Nanos(at.as_nanos() as u64));
        let admitted = decision.admitted();
        assert_eq!(status == 200, admitted, "request at {at:?}");
        if admitted {
            let expected = decision.delay().get() / 1_000_000;
            let measured = latency.as_millis() as u64;
            assert!(
                measured + 15 >= expected && measured <= expected + 60,
                "delay {measured} ms, model {expected} ms (at {at:?})"
            );
        }
    }
}

/// Whether `nginx -t` accepts a `limit_req` with `parameters`, and whether
/// `burstsim import` does: the two must agree, directive by directive.
#[test]
#[ignore = "needs nginx (Debian's nginx-light): run with --include-ignored, as .ci/run does"]
fn import_refuses_the_limit_req_parameters_nginx_refuses() {
    let _alone = super::common::real_time();
    let Some(binary) = nginx() else {
        common::required("not installed: nginx; .ci/run installs Debian's nginx");
        return;
    };
    for parameters in [
        "burst=0",
        "burst=5 delay=0",
        "burst=0 nodelay",
        "burst=5 delay=2",
        "burst=5 nodelay",
        "",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "events {{}}\npid {pid};\nerror_log {log};\nhttp {{\n  limit_req_zone $binary_remote_addr zone=z:1m rate=5r/s;\n  server {{ listen 127.0.0.1:1; location / {{ limit_req zone=z {parameters}; }} }}\n}}\n",
                pid = dir.path().join("nginx.pid").display(),
                log = dir.path().join("error.log").display(),
            ),
        )
        .unwrap();
        let nginx_accepts = Command::new(&binary)
            .arg("-t")
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .output()
            .unwrap()
            .status
            .success();
        let import = Command::new(env!("CARGO_BIN_EXE_burstsim"))
            .arg("import")
            .arg(&conf)
            .output()
            .unwrap();
        assert_eq!(
            import.status.success(),
            nginx_accepts,
            "limit_req zone=z {parameters}: nginx {}, import: {}",
            if nginx_accepts { "accepts" } else { "refuses" },
            String::from_utf8_lossy(&import.stderr)
        );
    }
}

/// The block `burstsim import EXTRA` makes of an nginx.conf whose http
/// block holds `zones` and whose one location applies `limits`, as a user
/// would paste it.
fn imported(zones: &str, limits: &str, extra: &[&str]) -> toml::Table {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!("http {{\n  {zones}\n  server {{ location / {{ {limits} }} }}\n}}\n"),
    )
    .unwrap();
    common::imported_limiter(&conf, extra)
}

/// The limiter `burstsim import` makes of a zone keyed by `key` at
/// 10r/s, burst=3 nodelay: kept per `per`.
fn imported_zone(key: &str, per: &str) -> burstsim::limiter::Limiter {
    let block = imported(
        &format!("limit_req_zone {key} zone=one:1m rate=10r/s;"),
        "limit_req zone=one burst=3 nodelay;",
        &[],
    );
    assert_eq!(
        block.get("per").and_then(|p| p.as_str()),
        Some(per),
        "{block:?}"
    );
    common::built(block)
}

/// A zone keyed by `$host` keeps one state per Host, in nginx and in the
/// limiter `burstsim import` makes of it: two tenants' bursts, interleaved,
/// get the same answers request by request (one shared state would admit
/// about half as many).
#[test]
#[ignore = "needs nginx (Debian's nginx-light): run with --include-ignored, as .ci/run does"]
fn a_host_keyed_zone_limits_each_host_as_nginx_does() {
    let _alone = super::common::real_time();
    let Some(binary) = nginx() else {
        required("not installed: nginx; .ci/run installs Debian's nginx");
        return;
    };
    let mut limiter = imported_zone("$host", "host");

    let server = Server::start_keyed(&binary, "$host", "10r/s", "burst=3 nodelay");
    let start = Instant::now();
    let mut answers = Vec::new();
    for (round, pause_ms) in [(0, 350u64), (1, 0)] {
        for i in 0..12 {
            let host = if i % 2 == 0 { "a.shop" } else { "b.shop" };
            let at = start.elapsed();
            let (status, _) = server.get_for(host);
            let ours = limiter
                .decide_keyed::<false>(
                    Nanos(at.as_nanos() as u64),
                    burstsim::traffic::Key::DEFAULT.on_host(host.as_bytes()),
                )
                .admitted();
            answers.push((round, host, status, ours));
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
    for &(round, host, status, ours) in &answers {
        assert!(status == 200 || status == 503, "{answers:?}");
        assert_eq!(status == 200, ours, "round {round}, {host}: {answers:?}");
    }
    let admitted = answers.iter().filter(|a| a.2 == 200).count();
    // 4 a host in each burst (burst 3 + 1), 16 in all; one shared state: 8.
    assert!(admitted >= 14, "{answers:?}");
}

/// A zone keyed by `$http_x_forwarded_for`: nginx limits each forwarded
/// address and leaves a request without the header (an empty key) alone,
/// logging its header as `-`. The limiter `burstsim import` makes of the
/// zone, told that the `-` key is empty (as a replay of such a log tells
/// it), answers as nginx does, request by request; one state for the `-`
/// requests would turn most of them away.
#[test]
#[ignore = "needs nginx (Debian's nginx-light): run with --include-ignored, as .ci/run does"]
fn a_request_without_the_zones_header_is_left_unlimited_as_nginx_does() {
    let _alone = super::common::real_time();
    let Some(binary) = nginx() else {
        required("not installed: nginx; .ci/run installs Debian's nginx");
        return;
    };
    let mut limiter = imported_zone("$http_x_forwarded_for", "key");
    let dir = tempfile::tempdir().unwrap();
    let empty = burstsim::traffic::Key::named(b"-");
    limiter.treat_empty_keys(&burstsim::traffic::EmptyKeys {
        absent: vec![empty.client],
        blank: Vec::new(),
    });

    let log = dir.path().join("access.log");
    let server = Server::start_with(
        &binary,
        "limit_req_zone $http_x_forwarded_for zone=one:1m rate=10r/s;\n  log_format main '$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\" \"$http_x_forwarded_for\"';",
        &format!(
            "limit_req zone=one burst=3 nodelay; access_log {} main;",
            log.display()
        ),
    );
    let start = Instant::now();
    let mut answers = Vec::new();
    for (round, pause_ms) in [(0, 350u64), (1, 0)] {
        for i in 0..15 {
            let (header, key) = if i % 3 == 0 {
                (
                    "X-Forwarded-For: 198.51.100.7\r\n",
                    burstsim::traffic::Key::named(b"198.51.100.7"),
                )
            } else {
                ("", empty)
            };
            let at = start.elapsed();
            let (status, _) = server.get_with("burstsim", header);
            let ours = limiter
                .decide_keyed::<false>(Nanos(at.as_nanos() as u64), key)
                .admitted();
            answers.push((round, header.is_empty(), status, ours));
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
    drop(server);
    for &(round, headerless, status, ours) in &answers {
        assert!(status == 200 || status == 503, "{answers:?}");
        assert_eq!(
            status == 200,
            ours,
            "round {round}, without the header: {headerless}: {answers:?}"
        );
    }
    // Every request without the header passed; the address's did not all.
    assert!(
        answers.iter().filter(|a| a.1).all(|a| a.2 == 200),
        "{answers:?}"
    );
    assert!(answers.iter().any(|a| !a.1 && a.2 == 503), "{answers:?}");
    // nginx logs the missing header as `-`, the text a replay takes as empty.
    let written = std::fs::read_to_string(&log).unwrap();
    let dashes = written
        .lines()
        .filter(|line| line.ends_with(" \"-\""))
        .count();
    assert_eq!(dashes, answers.iter().filter(|a| a.1).count(), "{written}");
}

/// A location applying two zones: nginx counts a request in neither when
/// the second rejects it, and the chain `burstsim import --chain` makes of
/// the location does the same, request by request. The schedule is one
/// where counting the rejected requests in the first zone (as chained
/// middleware would) answers differently.
#[test]
#[ignore = "needs nginx (Debian's nginx-light): run with --include-ignored, as .ci/run does"]
fn a_location_with_two_zones_is_the_chain_nginx_applies() {
    let _alone = super::common::real_time();
    let Some(binary) = nginx() else {
        required("not installed: nginx; .ci/run installs Debian's nginx");
        return;
    };
    let zones = "limit_req_zone $server_name zone=slow:1m rate=4r/s;\n  limit_req_zone $binary_remote_addr zone=fast:1m rate=10r/s;";
    let limits = "limit_req zone=slow burst=8 nodelay; limit_req zone=fast burst=2 nodelay;";
    // The chain as a user would paste it from `burstsim import --chain`.
    let mut chain = imported(zones, limits, &["--chain"]);
    assert_eq!(chain["kind"].as_str(), Some("chain"), "{chain:?}");
    assert_eq!(chain["count_rejected"].as_bool(), Some(false), "{chain:?}");
    let mut ours = common::built(chain.clone());
    chain.insert("count_rejected".into(), true.into());
    let mut counting = common::built(chain);

    let server = Server::start_with(&binary, zones, limits);
    let start = Instant::now();
    let mut answers = Vec::new();
    // Bursts of 10 with pauses away from the 100 ms and 250 ms drain steps.
    for pause_ms in [420u64, 430, 0] {
        for _ in 0..10 {
            let at = start.elapsed();
            let (status, _) = server.get();
            let now = Nanos(at.as_nanos() as u64);
            answers.push((
                at,
                status,
                ours.decide(now).admitted(),
                counting.decide(now).admitted(),
            ));
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
    for &(at, status, model, _) in &answers {
        assert!(status == 200 || status == 503, "{answers:?}");
        assert_eq!(status == 200, model, "request at {at:?}: {answers:?}");
    }
    assert!(
        answers.iter().any(|a| a.2 != a.3),
        "the schedule tells the two chains apart: {answers:?}"
    );
}
