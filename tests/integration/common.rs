//! Helpers shared by the tests: the shipped scenarios, and real servers.

// Each test crate uses only some of these.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The times the backend gets `limiter`'s admitted `arrivals` (after any
/// delay), sorted: counts are taken at release times, as the metrics take them.
pub fn released(limiter: &mut burstsim::limiter::Limiter, arrivals: &[u64]) -> Vec<u64> {
    use burstsim::limiter::RateLimiter;
    let mut out = Vec::new();
    for &t in arrivals {
        let decision = limiter.decide(burstsim::time::Nanos(t));
        if decision.admitted() {
            out.push(t + decision.delay().get());
        }
    }
    out.sort_unstable();
    out
}

/// Every `scenarios/*.toml`, in name order.
pub fn shipped_scenarios() -> Vec<PathBuf> {
    let toml_in = |dir: &std::path::Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .expect("a readable folder")
            .map(|entry| entry.expect("readable entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
            .collect()
    };
    // scenarios/*.toml, and the scenarios in its folders (my-gateway/…).
    let mut paths = toml_in(std::path::Path::new("scenarios"));
    for entry in std::fs::read_dir("scenarios").expect("scenarios/ exists") {
        let path = entry.expect("readable entry").path();
        if path.is_dir() {
            paths.extend(toml_in(&path));
        }
    }
    paths.sort();
    paths
}

/// The first of `paths` that is an installed file.
pub fn installed(paths: &[&str]) -> Option<PathBuf> {
    paths.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Debian's redis-server, if installed.
pub fn redis_server() -> Option<PathBuf> {
    installed(&["/usr/bin/redis-server", "/usr/local/bin/redis-server"])
}

/// Waits up to 10 s for `what` to listen on loopback `port`.
pub fn wait_for_listener(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Held from picking a free port until the server listens on it: a port is
/// picked by binding port 0 and letting go, so two servers starting at once
/// could pick the same one — the second would fail to bind, and its test
/// would talk to the first test's server until that one is stopped.
pub static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A free loopback port; hold [`STARTING`] until something listens on it.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A redis-server on a free loopback port with no persistence, stopped by its pid when dropped.
pub struct RedisServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl RedisServer {
    /// Starts it and waits until it accepts connections.
    pub fn start(binary: &Path) -> RedisServer {
        RedisServer::start_with(binary, |_| {})
    }

    /// [`RedisServer::start`] with more arguments or environment (a module
    /// to load, a preload) set by `more`.
    pub fn start_with(binary: &Path, more: impl FnOnce(&mut Command)) -> RedisServer {
        let _starting = STARTING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let port = free_port();
        let mut command = Command::new(binary);
        command.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]);
        more(&mut command);
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        wait_for_listener(port, "redis-server");
        RedisServer { child, port }
    }
}

impl RedisServer {
    /// Sends it `signal` (`STOP`, `CONT`) by its pid, with the system's `kill`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fails a check against real software that is not installed, saying what
/// to install: these checks are `#[ignore]`d, so `cargo test` lists them as
/// ignored, and one that runs (`--include-ignored`, as `.ci/run` does) must
/// find what it checks against.
pub fn required(message: &str) {
    panic!("{message}");
}

/// What `driver` run with `args` prints for `lines` fed to its standard
/// input, one a line: the differential tests' drivers around real libraries.
pub fn piped(driver: &Path, args: &[String], lines: impl Iterator<Item = String>) -> String {
    use std::io::Write;
    let mut child = Command::new(driver)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = lines.map(|line| format!("{line}\n")).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{} failed", driver.display());
    String::from_utf8(output.stdout).unwrap()
}

/// Held by each check against real software for its whole run: they
/// measure wall-clock time (a server's clock, a replay's pacing), so they
/// run one at a time rather than all at once on a small machine.
pub fn real_time() -> std::sync::MutexGuard<'static, ()> {
    static REAL_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    REAL_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs of a check against real software at most, while a disagreement
/// is unexplained: a stall of this 2-core machine longer than the jitter a
/// comparison allows can shift a decision, and a stall does not repeat
/// three times; a model that is not the real one's twin disagrees on
/// every run of the same pattern.
pub const REAL_TRIES: u32 = 3;

/// `run(try)` (tries numbered from 1, each against a fresh server) again
/// while `unexplained` finds a disagreement in its result, at most
/// [`REAL_TRIES`] times; the last result. Each retried result goes to the
/// test's output as `shown` writes it.
pub fn unless_explained<T>(
    mut run: impl FnMut(u32) -> T,
    unexplained: impl Fn(&T) -> bool,
    shown: impl Fn(&T) -> String,
) -> T {
    let mut tries = 1;
    loop {
        let result = run(tries);
        if !unexplained(&result) || tries == REAL_TRIES {
            return result;
        }
        eprintln!(
            "unexplained disagreement (try {tries} of {REAL_TRIES}); again on a fresh server:\n{}",
            shown(&result)
        );
        tries += 1;
    }
}

/// The first `[[limiter]]` block `burstsim import [extra] conf` prints, its
/// name removed, as a user would paste it.
pub fn imported_limiter(conf: &std::path::Path, extra: &[&str]) -> toml::Table {
    let imported = std::process::Command::new(env!("CARGO_BIN_EXE_burstsim"))
        .arg("import")
        .args(extra)
        .arg(conf)
        .output()
        .unwrap();
    assert!(imported.status.success(), "{imported:?}");
    let document: toml::Table =
        toml::from_str(&String::from_utf8(imported.stdout).unwrap()).unwrap();
    let mut block = document["limiter"].as_array().unwrap()[0]
        .as_table()
        .unwrap()
        .clone();
    block.remove("name");
    block
}

/// A limiter built from a scenario's limiter table.
pub fn built(table: toml::Table) -> burstsim::limiter::Limiter {
    burstsim::limiter::LimiterConfig::from_table(table)
        .unwrap()
        .build(burstsim::limiter::Context::default())
        .unwrap()
}

/// A limiter built from a scenario's `[[limiter]]` fields (without its
/// name), with no backend: the differential tests' models.
pub fn model(text: &str) -> burstsim::limiter::Limiter {
    let table: toml::Table = toml::from_str(text).expect("test configs are valid TOML");
    burstsim::limiter::LimiterConfig::from_table(table)
        .and_then(|config| config.build(burstsim::limiter::Context::default()))
        .expect("test configs build")
}

/// `limiter` (a `[[limiter]]`'s fields) in a cluster of one instance
/// sharing a store, per key, the store down over [`from`, `to`) ns of a run
/// of `end` ns: the model of a library whose store fails.
pub fn down_in_a_shared_store(
    limiter: &str,
    from: u64,
    to: u64,
    end: u64,
) -> burstsim::limiter::Limiter {
    let text = format!(
        "duration = \"{end}ns\"\n[cluster]\ninstances = 1\nmode = \"shared-store-clock\"\nstore = {{ outages = [{{ at = \"{from}ns\", for = \"{}ns\" }}] }}\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\n{limiter}\nper = \"key\"\n",
        to - from
    );
    let scenario =
        burstsim::scenario::parse(&text, Path::new("down.toml")).expect("test scenarios parse");
    scenario.limiters[0]
        .config
        .build(burstsim::limiter::Context::default())
        .expect("test configs build")
}

/// `(key, time)` pairs for a limiter of `window_ms` windows on a
/// millisecond clock: bursts in one millisecond, steps of a millisecond or
/// two, jumps to just before, at and after a window's end, idle spells.
pub fn millisecond_requests(
    seed: &mut u64,
    count: usize,
    window_ms: u64,
    keys: u64,
) -> Vec<(u64, u64)> {
    const MS: u64 = 1_000_000;
    let mut next = || burstsim::random::splitmix64(seed);
    let mut t = next() % (1_000 * MS);
    (0..count)
        .map(|_| {
            t += match next() % 10 {
                0..=3 => next() % 1_000,
                4 | 5 => next() % (2 * MS),
                6 | 7 => (window_ms * MS + next() % (4 * MS)).saturating_sub(2 * MS),
                8 => next() % (window_ms * MS),
                _ => next() % (3 * window_ms * MS),
            };
            (next() % keys, t)
        })
        .collect()
}

#[test]
fn a_real_check_is_run_again_only_while_unexplained_and_at_most_three_times() {
    let mut runs = Vec::new();
    let last = unless_explained(
        |nth| {
            runs.push(nth);
            nth
        },
        |&nth| nth < 2,
        u32::to_string,
    );
    assert_eq!((last, runs.as_slice()), (2, [1, 2].as_slice()));
    let mut runs = 0;
    let last = unless_explained(
        |nth| {
            runs += 1;
            nth
        },
        |_| true,
        u32::to_string,
    );
    assert_eq!((last, runs), (REAL_TRIES, REAL_TRIES));
}
