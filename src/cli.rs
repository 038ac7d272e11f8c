//! The command line, as clap sees it.

use std::path::PathBuf;

use std::num::NonZeroU64;

use clap::{Parser, Subcommand, ValueEnum};

/// Four billion requests: about a minute and a half of simulation here.
pub const DEFAULT_MAX_REQUESTS: u64 = 4_000_000_000;

/// Shows how much traffic a rate limiter really lets through in any rolling
/// interval — the 2× burst at a fixed window's boundary — and what the backend
/// behind it has to take.
#[derive(Debug, Parser)]
#[command(name = "burstsim", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Colour verdicts and messages: on a terminal unless NO_COLOR is set
    /// (auto), always, or never.
    #[arg(long, global = true, value_enum, default_value_t = crate::colour::When::Auto)]
    pub color: crate::colour::When,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Simulate every workload through every limiter; print a table and write
    /// summary.json, summary.csv, timeline.csv, charts/*.svg and report.html
    /// under output/<name>/.
    Run(RunArgs),
    /// Find, for each limiter, the largest threshold (or rate) that keeps the
    /// worst second within the backend's capacity, and what it costs; writes
    /// sizing.json, sizing.csv and charts/sizing.svg under output/<name>/.
    Size(SizeArgs),
    /// Run the scenario at every point of a grid of values (--vary PATH=VALUES,
    /// or the scenario's [[sweep]] entries) on all cores, or one shard of it
    /// (--shard I/N); writes sweep.csv, sweep.json, charts/sweep-*.svg and a
    /// report section under output/<name>/.
    Sweep(SweepArgs),
    /// Put the shards of a sweep back together: check that the parts belong
    /// to one sweep and cover it exactly once, and write what the whole sweep
    /// would have written.
    Merge(MergeArgs),
    /// Split a scenario's traffic by key hash into parts that separate
    /// machines replay with `run --part DIR/I`: each workload's arrivals, as
    /// a run makes them, in a compact gzipped form under DIR/0 … DIR/P-1.
    Partition(PartitionArgs),
    /// Exit 1 if any run lets more through in one second than the backend's
    /// capacity, or the backend drops requests; for CI of gateway configurations.
    Check(CheckArgs),
    /// Replay a workload in real time against a real Redis, enforcing each
    /// fixed window (as a first-request window) and sliding log with
    /// server-side scripts, and compare Redis's decisions with the
    /// simulator's; writes live.json, summary.json, charts and report.html
    /// under output/<name>-live/.
    Live(LiveArgs),
    /// Send a workload's requests (by default the adversary's worst pattern
    /// for the limiter) to a real HTTP endpoint at their scheduled instants,
    /// and compare its answers with the scenario's model on the actual send
    /// times; writes probe.json, summary.json, charts and report.html under
    /// output/<name>-probe/. Loopback targets only, unless --allow-remote.
    Probe(ProbeArgs),
    /// Write a workload's schedule for k6 (a script sending each request at
    /// its exact offset) and vegeta (targets and a pacing note) under
    /// output/<name>-export/.
    Export(ExportArgs),
    /// Read a gateway's configuration (nginx, Envoy, envoyproxy/ratelimit,
    /// Kong, Traefik, HAProxy or Spring Cloud Gateway) and print its rate
    /// limits as scenario [[limiter]] blocks, each value commented with the
    /// line it came from.
    Import(ImportArgs),
    /// Print a shell completion script: `burstsim completions bash > /etc/bash_completion.d/burstsim`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Read and check a scenario without simulating it.
    Validate {
        /// The scenario file (TOML).
        scenario: PathBuf,
    },
}

/// How much work a command may start: refused before any is done.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct Limits {
    /// Refuse to start work of more than this many requests (all workloads
    /// and replications together).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_REQUESTS)]
    pub max_requests: u64,
    /// Refuse to start work that the scenario makes need more memory than
    /// this (timelines, rolling windows, replications), like 2GB or 512MiB.
    #[arg(long, value_name = "SIZE", default_value = "2GiB", value_parser = crate::memory::parse_size)]
    pub max_memory: u64,
}

/// `burstsim import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The configuration file.
    pub file: PathBuf,
    /// Its dialect, when the file's name does not tell (nginx.conf,
    /// haproxy.cfg, *.properties, kong.yaml, traefik*.yaml, envoy*.yaml,
    /// ratelimit*.yaml).
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub format: Option<crate::import::Dialect>,
    /// Refuse (exit 2) a configuration holding anything burstsim would skip
    /// with a warning — a connection limit, an include not found — for CI
    /// that must model everything.
    #[arg(long)]
    pub strict: bool,
    /// Print a limiter per location instead of per limit: the chain of
    /// every limit the gateway applies there, in its order (nginx).
    #[arg(long)]
    pub chain: bool,
}

/// `burstsim run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// Write results into this folder instead of output/<name>/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Use this seed instead of the scenario's.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Run each stochastic workload with N seeds derived from the scenario's,
    /// on all cores, and report mean, p50, p99 and max of each figure
    /// (default: the scenario's `replications`, else 1).
    #[arg(long, value_name = "N")]
    pub replications: Option<NonZeroU64>,
    /// The most work to start.
    #[command(flatten)]
    pub limits: Limits,
    /// Also write every decision to decisions/<workload>/<limiter>.csv.
    #[arg(long)]
    pub decisions: bool,
    /// Replay part I of a partitioning (`burstsim partition`) in place of
    /// the workloads' own traffic: the folder DIR/I.
    #[arg(long, value_name = "DIR/I", conflicts_with = "shard")]
    pub part: Option<PathBuf>,
    /// Decide shard I of N of the partitioning --partition DIR (N its
    /// parts): its part's requests for the limiters kept per key, its slice
    /// of time's for the global ones; written for `burstsim merge`. auto/N
    /// reads I from JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID,
    /// AWS_BATCH_JOB_ARRAY_INDEX or PARALLEL_SEQ (from 1).
    #[arg(long, value_name = "I/N", requires = "partition")]
    pub shard: Option<crate::sweep::shard::ShardArg>,
    /// The partitioning a shard decides a part of (`burstsim partition`'s folder).
    #[arg(long, value_name = "DIR", requires = "shard")]
    pub partition: Option<PathBuf>,
    /// Write no charts and no report.html (faster on very large runs).
    #[arg(long)]
    pub no_charts: bool,
    /// Print nothing on standard output (warnings still go to standard error).
    #[arg(long, short)]
    pub quiet: bool,
    /// Print on standard error how many requests were simulated, how fast,
    /// and the peak memory used.
    #[arg(long)]
    pub stats: bool,
}

/// `burstsim partition`.
#[derive(Debug, clap::Args)]
pub struct PartitionArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// How many parts (at most 256).
    #[arg(long, value_name = "P")]
    pub parts: u64,
    /// The folder of the parts (written whole, or left as it was).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Use this seed instead of the scenario's.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Print nothing on standard output (warnings still go to standard error).
    #[arg(long, short)]
    pub quiet: bool,
}

/// `burstsim size`.
#[derive(Debug, clap::Args)]
pub struct SizeArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// Size against this capacity (requests per second) instead of [backend] capacity.
    #[arg(long, value_name = "REQ_PER_S")]
    pub capacity: Option<NonZeroU64>,
    /// Simulate each setting with this many seeds (default: the scenario's `replications`, else 1).
    #[arg(long, value_name = "N")]
    pub replications: Option<NonZeroU64>,
    /// The most work to start.
    #[command(flatten)]
    pub limits: Limits,
    /// Write sizing files into this folder instead of output/<name>/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print nothing on standard output (warnings still go to standard error).
    #[arg(long, short)]
    pub quiet: bool,
}

/// `burstsim sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// A value path and its values: a list (threshold=50,100,150), a range
    /// with a step, end included when a step lands on it (50..200:25,
    /// 10ms..1s:10ms, 0.5..0.9:0.1) or a geometric range (1000..100000:*10).
    /// A path names a table's key, an array entry as [i], and a limiter or
    /// workload by its name: limiter.fixed-1s.threshold,
    /// workload.edge-burst.sources[1].before, backend.capacity. Several make
    /// a grid of every combination; they replace the scenario's [[sweep]].
    #[arg(long, value_name = "PATH=VALUES")]
    pub vary: Vec<String>,
    /// Move every --vary together (all with as many values) instead of
    /// making a grid of them.
    #[arg(long)]
    pub zip: bool,
    /// Run only shard I of N (from 0): a deterministic slice balanced by
    /// estimated work, written as a part for `burstsim merge`; a shard already
    /// complete in its folder is skipped. auto/N takes I from
    /// JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID or AWS_BATCH_JOB_ARRAY_INDEX.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<crate::sweep::shard::ShardArg>,
    /// Use this seed at every point instead of the scenario's.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Run each stochastic workload with N seeds at every point (default:
    /// the scenario's `replications`, else 1).
    #[arg(long, value_name = "N")]
    pub replications: Option<NonZeroU64>,
    /// The most work to start (the whole sweep, or the shard).
    #[command(flatten)]
    pub limits: Limits,
    /// Where and how to write the results.
    #[command(flatten)]
    pub output: SweepOutput,
}

/// `burstsim merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' folders (or their sweep-part.json files), every one of
    /// one sweep.
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<PathBuf>,
    /// The partitioning the parts are shards of (`run --shard`): merge
    /// them into the whole run's results.
    #[arg(long, value_name = "DIR")]
    pub partition: Option<PathBuf>,
    /// Refuse parts that would need more memory than this to merge (about
    /// four times their size on disk), like 2GB or 512MiB.
    #[arg(long, value_name = "SIZE", default_value = "2GiB", value_parser = crate::memory::parse_size)]
    pub max_memory: u64,
    /// Where and how to write the results.
    #[command(flatten)]
    pub output: SweepOutput,
}

/// Where and how `sweep` and `merge` write a sweep's results.
#[derive(Debug, clap::Args)]
pub struct SweepOutput {
    /// Write into this folder instead of output/<name>/ (a shard's part:
    /// instead of output/<name>-shard-I-of-N/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write no charts and no report section.
    #[arg(long)]
    pub no_charts: bool,
    /// Print nothing on standard output (warnings still go to standard error).
    #[arg(long, short)]
    pub quiet: bool,
}

/// `burstsim check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// Check against this capacity (requests per second) instead of [backend] capacity.
    #[arg(long, value_name = "REQ_PER_S")]
    pub capacity: Option<NonZeroU64>,
    /// The most work to start.
    #[command(flatten)]
    pub limits: Limits,
    /// What to print on standard output: a line per problem (table), or
    /// the verdict and every problem as JSON.
    #[arg(long, value_enum, default_value_t = CheckFormat::Table)]
    pub format: CheckFormat,
    /// Print nothing on standard output; the exit status tells (warnings
    /// still go to standard error).
    #[arg(long, short)]
    pub quiet: bool,
}

/// What `check` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// A line per problem and a verdict line.
    Table,
    /// `{"scenario", "capacity", "runs", "ok", "failures": [...]}`.
    Json,
}

/// `burstsim live`.
#[derive(Debug, clap::Args)]
pub struct LiveArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// The Redis server, like redis://127.0.0.1:6379.
    #[arg(long, value_name = "URL")]
    pub redis: String,
    /// Replay this many times faster than the scenario's time.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub speed: f64,
    /// Concurrent clients sending the requests.
    #[arg(long, value_name = "K", default_value = "4")]
    pub clients: NonZeroU64,
    /// The workload to replay (default: the first).
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
    /// Write the results into this folder instead of output/<name>-live/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The most a connection, a command or a reply may take before the run
    /// stops with an error (or, with --through-outages, the request counts
    /// as one the store did not answer).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub timeout: crate::time::Nanos,
    /// Keep replaying when Redis stops answering (stopped, paused, failing
    /// over): each unanswered request is counted, the client reconnects for
    /// the next, and the results say what failing open, failing closed and a
    /// window per client would have let through.
    #[arg(long)]
    pub through_outages: bool,
    /// Refuse a replay that would take longer than this in real time
    /// (the scenario's duration divided by --speed).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub max_wall_time: crate::time::Nanos,
}

/// Which requests a probe or an export sends, and how they carry their keys.
#[derive(Debug, clap::Args)]
pub struct ScheduleArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// The workload to send (default: the scenario's adversary workload, or
    /// an adversary searching against --limiter within twice its bound per
    /// second).
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
    /// The limiter the target enforces: the model compared with it, and the
    /// one an adversary workload searches against (default: the scenario's
    /// first).
    #[arg(long, value_name = "NAME")]
    pub limiter: Option<String>,
    /// How a request carries its client key: header:NAME (like
    /// header:X-Api-Key, value client-N), forwarded-for (X-Forwarded-For,
    /// an address of 10.0.0.0/8) or source-address (a connection from an
    /// address of 127.0.0.0/8; loopback targets only).
    #[arg(long, value_name = "HOW")]
    pub key_as: Option<String>,
    /// Refuse a schedule of more requests than this (at most 1000000).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_requests: u64,
    /// Refuse a schedule with more requests than this due in any 1 s.
    #[arg(long, value_name = "N", default_value_t = 5_000)]
    pub max_rate: u64,
    /// Refuse a schedule longer than this in real time; a probe also stops
    /// sending here.
    #[arg(long, value_name = "DURATION", default_value = "2m")]
    pub max_wall_time: crate::time::Nanos,
}

/// `burstsim probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    // Which requests: the same flags for probe and export.
    #[allow(missing_docs)]
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// The endpoint, like http://127.0.0.1:8080/ (plain HTTP).
    #[arg(long, value_name = "URL")]
    pub target: String,
    /// Allow a target on this host (not loopback): name it exactly as the
    /// URL does. Repeat for several.
    #[arg(long, value_name = "HOST")]
    pub allow_remote: Vec<String>,
    /// Speak HTTP/2 with prior knowledge (h2c) instead of HTTP/1.1.
    #[arg(long)]
    pub http2: bool,
    /// The most a connection and an answer may take.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub timeout: crate::time::Nanos,
    /// How coarsely the target's clock ticks (nginx and HAProxy read
    /// milliseconds): a disagreement within it is explained by timing.
    #[arg(long, value_name = "DURATION", default_value = "1ms")]
    pub clock_granularity: crate::time::Nanos,
    /// Place the schedule's zero on a whole multiple of this much wall-clock
    /// time, so the target's epoch-aligned windows line up with the model's.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub align: crate::time::Nanos,
    /// Write the results into this folder instead of output/<name>-probe/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `burstsim export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    // Which requests: the same flags for probe and export.
    #[allow(missing_docs)]
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Write the k6 script (probe.k6.js); with neither flag, both are written.
    #[arg(long)]
    pub k6: bool,
    /// Write vegeta's targets and pacing note (vegeta-targets.jsonl,
    /// vegeta-pacing.txt).
    #[arg(long)]
    pub vegeta: bool,
    /// The URL the exported requests go to (k6 also takes -e TARGET=…).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080/")]
    pub target: String,
    /// Write the files into this folder instead of output/<name>-export/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// What `run` and `size` print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people.
    Table,
    /// The results as JSON: summary.json's content for run, sizing.json's for size.
    Json,
    /// The results as CSV: summary.csv's content for run, sizing.csv's for size.
    Csv,
}
