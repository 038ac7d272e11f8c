//! The per-key state sizes burstsim reports (`keys.state.bytes_per_key` in
//! summary.json) against a real Redis: 10,000 keys written as each store-
//! backed limiter keeps them, measured with `INFO memory`. Skipped, with a
//! message, without `redis-server`; `.ci/run` installs Debian's.

use burstsim::limiter::{Context, LimiterConfig, RateLimiter};

use super::common;

use common::{RedisServer, redis_server, required};

const KEYS: usize = 10_000;

fn used_memory(con: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(con).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|value| value.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

/// Bytes per key that `write` adds, over `KEYS` keys.
fn per_key(con: &mut redis::Connection, write: impl Fn(&mut redis::Pipeline, &str)) -> i64 {
    redis::cmd("FLUSHALL").query::<()>(con).unwrap();
    let before = used_memory(con);
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            write(&mut pipe, &format!("rl:api-key-{i:05}"));
        }
        pipe.query::<()>(con).unwrap();
    }
    let keys: i64 = redis::cmd("DBSIZE").query(con).unwrap();
    assert!(keys >= KEYS as i64, "only {keys} keys were written");
    (used_memory(con) - before) / KEYS as i64
}

fn state_bytes(config: &str) -> i64 {
    let table: toml::Table = toml::from_str(config).unwrap();
    let limiter = LimiterConfig::from_table(table)
        .and_then(|c| c.build(Context::default()))
        .unwrap();
    limiter.state_bytes().expect("a store-backed kind") as i64
}

#[test]
#[ignore = "needs redis-server: run with --include-ignored, as .ci/run does"]
fn reported_state_sizes_match_what_redis_keeps() {
    let _alone = super::common::real_time();
    let Some(binary) = redis_server() else {
        required("not installed: redis-server; .ci/run installs Debian's");
        return;
    };
    let server = RedisServer::start(&binary);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    // Times and values as the implementations write them: a window's key
    // names its start; values are counts or nanosecond timestamps.
    let now = "1764460800123456789";
    let cases: Vec<(&str, i64)> = vec![
        (
            "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10",
            per_key(&mut con, |p, key| {
                p.cmd("SET")
                    .arg(format!("{key}:1764460800"))
                    .arg(7)
                    .arg("PX")
                    .arg(60_000)
                    .ignore();
            }),
        ),
        (
            "kind = \"gcra\"\nquota = \"per_second(10)\"",
            per_key(&mut con, |p, key| {
                p.cmd("SET")
                    .arg(key)
                    .arg(now)
                    .arg("PX")
                    .arg(60_000)
                    .ignore();
            }),
        ),
        (
            "kind = \"sliding-counter\"\nwindow = \"1s\"\nthreshold = 10",
            per_key(&mut con, |p, key| {
                for window in ["1764460800", "1764460801"] {
                    p.cmd("SET")
                        .arg(format!("{key}:{window}"))
                        .arg(7)
                        .arg("PX")
                        .arg(60_000)
                        .ignore();
                }
            }),
        ),
        (
            "kind = \"token-bucket\"\nrate = 10\nburst = 10",
            per_key(&mut con, |p, key| {
                p.cmd("HSET")
                    .arg(key)
                    .arg("tokens")
                    .arg(7)
                    .arg("ts")
                    .arg(now)
                    .ignore();
                p.cmd("PEXPIRE").arg(key).arg(60_000).ignore();
            }),
        ),
        (
            "kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 10",
            per_key(&mut con, |p, key| {
                let zadd = p.cmd("ZADD").arg(key);
                for j in 0..10u64 {
                    let at = 1_764_460_800_000_000_000 + j;
                    zadd.arg(at).arg(at);
                }
                zadd.ignore();
                p.cmd("PEXPIRE").arg(key).arg(60_000).ignore();
            }),
        ),
    ];
    for (config, measured) in cases {
        let reported = state_bytes(config);
        // Allocator rounding moves these by a few bytes between versions.
        assert!(
            (measured - reported).abs() * 100 <= reported * 15,
            "{config}: Redis keeps {measured} B per key, burstsim reports {reported} B"
        );
        println!("{config:?}: measured {measured} B, reported {reported} B");
    }
}
