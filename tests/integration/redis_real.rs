//! The cluster model's shared counter against a real Redis: a gateway
//! fleet whose instances key a fixed window by their own skewed clocks (the
//! envoyproxy/ratelimit design), with atomic INCR and with GET-then-INCR over
//! a round trip, gets the same answers from Redis as from the model. Skipped,
//! with a message, without `redis-server`; `.ci/run` installs Debian's.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use burstsim::limiter::{Context, RateLimiter};
use burstsim::time::Nanos;

use super::common;

use common::{RedisServer, redis_server, required};

struct Redis {
    _server: RedisServer,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Redis {
    fn start(binary: &Path) -> Redis {
        let server = RedisServer::start(binary);
        let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        Redis {
            _server: server,
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    /// Sends one command; returns an integer reply (a missing key's GET is 0).
    fn command(&mut self, args: &[&str]) -> i64 {
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        self.writer.write_all(request.as_bytes()).unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        match line.as_bytes()[0] {
            b':' => line[1..].trim().parse().unwrap(),
            b'$' if line.starts_with("$-1") => 0,
            b'$' => {
                let mut value = String::new();
                self.reader.read_line(&mut value).unwrap();
                value.trim().parse().unwrap()
            }
            _ => panic!("unexpected reply {line:?}"),
        }
    }
}

const W: u64 = 1_000_000_000;
const N: i64 = 50;
const OFFSETS: [i64; 3] = [-400_000_000, 0, 400_000_000];

fn cluster(update: &str) -> burstsim::limiter::Limiter {
    let text = format!(
        "duration = \"10s\"\n[cluster]\ninstances = 3\nmode = \"shared-instance-clock\"\noffsets = [\"-400ms\", \"0s\", \"+400ms\"]\nstore = {{ rtt = \"3ms\", update = \"{update}\" }}\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = {N}\n"
    );
    let scenario = burstsim::scenario::parse(&text, std::path::Path::new("c.toml")).unwrap();
    scenario.limiters[0]
        .config
        .build(Context::default())
        .unwrap()
}

/// Bursts and a steady stream around window edges, in true time.
fn arrivals() -> Vec<u64> {
    let mut times: Vec<u64> = (0..400).map(|i| 500_000_000 + i * 5_000_000).collect();
    times.extend(std::iter::repeat_n(2_590_000_000, 120));
    times.extend((0..200).map(|i| 2_600_000_000 + i * 1_000_000));
    times.extend(std::iter::repeat_n(3_410_000_000, 150));
    times
}

/// The window key instance `i` (round-robin) computes at true time `t`.
fn key(index: usize, t: u64) -> String {
    let clock = (t as i64 + OFFSETS[index % 3]).max(0) as u64;
    format!("rl:{}", clock / W)
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn atomic_incr_in_redis_decides_as_the_model() {
    let _alone = super::common::real_time();
    let Some(binary) = redis_server() else {
        required("not installed: redis-server; .ci/run installs Debian's");
        return;
    };
    let mut redis = Redis::start(&binary);
    let mut model = cluster("atomic");
    for (index, t) in arrivals().into_iter().enumerate() {
        // INCR counts every hit; a hit is allowed while the count is within N.
        let theirs = redis.command(&["INCR", &key(index, t)]) <= N;
        assert_eq!(
            model.decide(Nanos(t)).admitted(),
            theirs,
            "request {index} at {t} ns"
        );
    }
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn get_then_incr_in_redis_over_a_round_trip_decides_as_the_model() {
    let _alone = super::common::real_time();
    let Some(binary) = redis_server() else {
        required("not installed: redis-server; .ci/run installs Debian's");
        return;
    };
    let mut redis = Redis::start(&binary);
    let mut model = cluster("read-then-increment");
    let rtt = 3_000_000;
    // Increments in flight, by the true time they land.
    let mut in_flight: BTreeMap<(u64, usize), String> = BTreeMap::new();
    for (index, t) in arrivals().into_iter().enumerate() {
        let landed: Vec<(u64, usize)> = in_flight
            .range(..=(t, usize::MAX))
            .map(|(k, _)| *k)
            .collect();
        for at in landed {
            let key = in_flight.remove(&at).unwrap();
            redis.command(&["INCR", &key]);
        }
        let key = key(index, t);
        let theirs = redis.command(&["GET", &key]) < N;
        if theirs {
            in_flight.insert((t + rtt, index), key);
        }
        assert_eq!(
            model.decide(Nanos(t)).admitted(),
            theirs,
            "request {index} at {t} ns"
        );
    }
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn incr_with_pexpire_in_redis_decides_as_the_store_clock_model() {
    let _alone = super::common::real_time();
    let Some(binary) = redis_server() else {
        required("not installed: redis-server; .ci/run installs Debian's");
        return;
    };
    let mut redis = Redis::start(&binary);
    // Windows of 400 ms that start at their first INCR and expire on Redis's
    // clock. Bursts sit well inside or well past a window, so scheduling
    // noise of a few milliseconds cannot change an answer.
    let text = format!(
        "duration = \"10s\"\n[cluster]\ninstances = 2\nmode = \"shared-store-clock\"\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"400ms\"\nthreshold = {N}\n"
    );
    let scenario = burstsim::scenario::parse(&text, std::path::Path::new("c.toml")).unwrap();
    let mut model = scenario.limiters[0]
        .config
        .build(Context::default())
        .unwrap();
    let schedule: [(usize, u64); 5] = [(30, 150), (40, 450), (70, 100), (20, 500), (60, 0)];
    let start = Instant::now();
    for (count, pause_ms) in schedule {
        for _ in 0..count {
            let at = start.elapsed().as_nanos() as u64;
            let count = redis.command(&["INCR", "rl:store"]);
            if count == 1 {
                redis.command(&["PEXPIRE", "rl:store", "400"]);
            }
            assert_eq!(
                model.decide(Nanos(at)).admitted(),
                count <= N,
                "request at {at} ns (count {count})"
            );
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
}
