//! The `redis-cell` kind against redis-cell itself: the module from
//! crates.io (the version `tests/redis_cell/Cargo.lock` pins) loaded into a
//! real redis-server whose wall clock is the test's (`tests/redis_cell/clock.c`,
//! preloaded, answers `clock_gettime` and `gettimeofday` with the time the
//! test writes), so every `CL.THROTTLE` is asked at the request's exact
//! nanosecond and Redis expires keys on the same clock. The model, a
//! limiter per key, must give every request the same answer, `retry_after`
//! and `reset_after`. `.ci/run` builds the module and the preload.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use burstsim::limiter::{Decision, RateLimiter};
use burstsim::time::Nanos;
use burstsim::traffic::Key;

use super::common;

const SECOND: u64 = 1_000_000_000;
/// The schedule's zero on the server's clock: 2026-01-01T00:00:00Z, a whole
/// second, so Redis's milliseconds are the schedule's.
const EPOCH: u64 = 1_767_225_600 * SECOND;

/// redis-server with redis-cell loaded, on the clock in `clock`'s file.
struct Cell {
    _server: common::RedisServer,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    clock: std::fs::File,
}

impl Cell {
    fn start(server: &Path, built: &Path, clock: &Path) -> Cell {
        let file = std::fs::File::create(clock).unwrap();
        file.write_all_at(&EPOCH.to_le_bytes(), 0).unwrap();
        let server = common::RedisServer::start_with(server, |command| {
            command
                .args(["--enable-debug-command", "local", "--loadmodule"])
                .arg(built.join("libredis_cell.so"))
                .env("LD_PRELOAD", built.join("clock.so"))
                .env("BURSTSIM_FAKE_CLOCK", clock);
        });
        let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let mut cell = Cell {
            _server: server,
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            clock: file,
        };
        // Keys expire as a command reads them, on the clock the test set,
        // never in the background while the clock is being written.
        assert_eq!(cell.command(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ["OK"]);
        assert_eq!(
            cell.command(&["TIME"])[0],
            (EPOCH / SECOND).to_string(),
            "the preload sets Redis's clock"
        );
        cell
    }

    /// Sends one command; the reply's elements as text.
    fn command(&mut self, args: &[&str]) -> Vec<String> {
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        self.writer.write_all(request.as_bytes()).unwrap();
        let line = self.line();
        match line.as_bytes().first() {
            Some(b'*') => {
                let n: usize = line[1..].parse().unwrap();
                (0..n).map(|_| self.element()).collect()
            }
            _ => vec![self.value(line)],
        }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    fn element(&mut self) -> String {
        let line = self.line();
        self.value(line)
    }

    fn value(&mut self, line: String) -> String {
        match line.as_bytes().first() {
            Some(b':' | b'+') => line[1..].to_string(),
            Some(b'$') => self.line(),
            _ => panic!("unexpected reply {line:?}"),
        }
    }

    /// `CL.THROTTLE` at `t` ns after the epoch.
    fn throttle(&mut self, t: u64, key: &str, args: &[u64; 4]) -> Vec<i64> {
        self.clock
            .write_all_at(&(EPOCH + t).to_le_bytes(), 0)
            .unwrap();
        let args: Vec<String> = args.iter().map(u64::to_string).collect();
        let mut command = vec!["CL.THROTTLE", key];
        command.extend(args.iter().map(String::as_str));
        self.command(&command)
            .iter()
            .map(|v| v.parse().unwrap())
            .collect()
    }
}

#[test]
#[ignore = "needs redis-server and redis-cell built by .ci/run: run with --include-ignored, as .ci/run does"]
fn redis_cell_decides_every_throttle_as_the_module_does() {
    let _alone = common::real_time();
    let built = PathBuf::from("target/redis-cell");
    let (Some(server), true) = (
        common::redis_server(),
        built.join("libredis_cell.so").is_file() && built.join("clock.so").is_file(),
    ) else {
        common::required(
            "not built: redis-server or target/redis-cell (.ci/run installs Debian's redis-server and builds redis-cell and tests/redis_cell/clock.c)",
        );
        return;
    };
    let clock =
        std::env::temp_dir().join(format!("burstsim-redis-cell-clock-{}", std::process::id()));
    let mut cell = Cell::start(&server, &std::fs::canonicalize(&built).unwrap(), &clock);
    let mut seed = 20_261_203;
    let (mut compared, mut refused, mut hinted) = (0, 0, 0);
    // (max_burst, count per period, period, quantity): a second's rate, a
    // slow minute, an emission interval below a millisecond (keys Redis
    // expires before their TAT), a truncated 10⁹/7 ns, a quantity of 2,
    // and one the burst can never hold.
    for (case, args) in [
        [2u64, 10, 1, 1],
        [5, 3, 1, 1],
        [0, 1_000, 1, 1],
        [0, 10_000, 1, 1],
        [3, 30, 60, 1],
        [1, 7, 3, 1],
        [2, 100, 1, 2],
        [0, 1, 1, 2],
    ]
    .into_iter()
    .enumerate()
    {
        let [burst, count, period, quantity] = args;
        let tolerance_ms = (period * 1_000 / count * (burst + 1)).max(1);
        let requests = common::millisecond_requests(&mut seed, 2_500, tolerance_ms, 3);
        let mut model = common::model(&format!(
            "kind = \"redis-cell\"\nmax_burst = {burst}\ncount_per_period = {count}\nperiod = {period}\nquantity = {quantity}\nper = \"key\""
        ));
        for (i, &(key, t)) in requests.iter().enumerate() {
            let theirs = cell.throttle(t, &format!("c{case}k{key}"), &args);
            let ours = match model.decide_keyed::<true>(Nanos(t), Key::client(key)) {
                Decision::Reject(hint) => {
                    let seconds =
                        |at: Option<Nanos>| at.map_or(-1, |at| ((at.get() - t) / SECOND) as i64);
                    hinted += usize::from(hint.retry_at.is_some_and(|at| at.get() > t));
                    vec![1, seconds(hint.retry_at), seconds(hint.reset_at)]
                }
                _ => vec![0],
            };
            let compared_part = if theirs[0] == 1 {
                vec![1, theirs[3], theirs[4]]
            } else {
                vec![theirs[0]]
            };
            assert_eq!(
                ours, compared_part,
                "CL.THROTTLE {args:?}: request {i} (key {key}) at {t} ns, reply {theirs:?}"
            );
            refused += usize::from(theirs[0] == 1);
            compared += 1;
        }
    }
    drop(cell);
    let _ = std::fs::remove_file(&clock);
    assert_eq!(compared, 8 * 2_500);
    assert!(
        refused > 3_000 && compared - refused > 3_000 && hinted > 20,
        "every answer exercised: {refused} refused ({hinted} told to wait a second or more) of {compared}"
    );
}
