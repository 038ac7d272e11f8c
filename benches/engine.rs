//! Criterion benchmarks of the engine's parts: each limiter's decision, each
//! traffic generator, and the exact rolling metric.
//!
//!     cargo bench --bench engine            # all
//!     cargo bench --bench engine -- limiter # one group

// criterion_group! generates undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::Path;

use burstsim::decimal::Decimal;
use burstsim::limiter::{Context, Limiter, LimiterConfig, RateLimiter};
use burstsim::metrics::rolling::RollingCounts;
use burstsim::time::Nanos;
use burstsim::traffic::{Chunks, SourceConfig, stream};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Requests per benchmark iteration.
const REQUESTS: usize = 100_000;

fn table(text: &str) -> toml::Table {
    toml::from_str(text).expect("benchmark configurations are valid TOML")
}

/// Poisson arrivals at 10^6 per second, as in `scenarios/bench-100m.toml`.
fn arrivals() -> Vec<Nanos> {
    let source = SourceConfig::from_table(table("kind = \"poisson\"\nrate = 1000000")).unwrap();
    source
        .arrivals(
            Nanos(u64::MAX / 2),
            Path::new("."),
            (stream(1, "bench", 0, 0), stream(2, "bench", 0, 0)),
        )
        .unwrap()
        .take(REQUESTS)
        .map(|arrival| arrival.time)
        .collect()
}

const LIMITERS: [(&str, &str); 7] = [
    (
        "fixed-window",
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 500000",
    ),
    (
        "smaller-window",
        "kind = \"smaller-window\"\nwindow = \"1s\"\nthreshold = 500000\nsplits = 10",
    ),
    (
        "buffered",
        "kind = \"buffered\"\nwindow = \"1s\"\ncapacity = 700000",
    ),
    (
        "sliding-log",
        "kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 500000",
    ),
    (
        "sliding-counter",
        "kind = \"sliding-counter\"\nwindow = \"1s\"\nthreshold = 500000",
    ),
    (
        "token-bucket",
        "kind = \"token-bucket\"\nrate = 500000\nburst = 1000",
    ),
    (
        "chain",
        "kind = \"chain\"\nlayers = [{ kind = \"fixed-window\", window = \"1s\", threshold = 500000 }, { kind = \"token-bucket\", rate = 600000, burst = 1000 }]",
    ),
];

fn limiter(config: &str) -> Limiter {
    LimiterConfig::from_table(table(config))
        .and_then(|c| c.build(Context::default()))
        .unwrap()
}

fn limiters(c: &mut Criterion) {
    let times = arrivals();
    let mut group = c.benchmark_group("limiter");
    group.throughput(Throughput::Elements(REQUESTS as u64));
    for (name, config) in LIMITERS {
        let fresh = limiter(config);
        group.bench_with_input(BenchmarkId::from_parameter(name), &times, |b, times| {
            b.iter(|| {
                let mut limiter = fresh.clone();
                times
                    .iter()
                    .filter(|&&t| limiter.decide(black_box(t)).admitted())
                    .count()
            });
        });
    }
    group.finish();
}

fn generators(c: &mut Criterion) {
    let sources = [
        ("poisson", "kind = \"poisson\"\nrate = 1000000"),
        (
            "poisson-schedule",
            "kind = \"poisson\"\nschedule = [[\"0s\", 500000], [\"1s\", 1500000]]",
        ),
        ("uniform", "kind = \"uniform\"\nrate = 1000000"),
        (
            "uniform-jitter",
            "kind = \"uniform\"\nrate = 1000000\njitter = 0.5",
        ),
        (
            "boundary",
            "kind = \"boundary\"\nperiod = \"1s\"\nbefore = 100000\nafter = 100000\nspread = \"100ms\"",
        ),
    ];
    let mut group = c.benchmark_group("traffic");
    group.throughput(Throughput::Elements(REQUESTS as u64));
    // A trace of the same Poisson arrivals, as a time_ns CSV read from disk.
    let dir = std::env::temp_dir().join(format!("burstsim-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rows: String = arrivals()
        .iter()
        .map(|t| format!("{}\n", t.get()))
        .collect();
    std::fs::write(dir.join("trace.csv"), format!("time_ns\n{rows}")).unwrap();
    let trace = SourceConfig::from_table(table("kind = \"trace\"\npath = \"trace.csv\"")).unwrap();
    group.bench_function("trace", |b| {
        b.iter(|| {
            trace
                .arrivals(
                    Nanos(u64::MAX / 2),
                    &dir,
                    (stream(1, "bench", 0, 0), stream(2, "bench", 0, 0)),
                )
                .unwrap()
                .count()
        });
    });
    for (name, config) in sources {
        let source = SourceConfig::from_table(table(config)).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| {
                let arrivals = source
                    .arrivals(
                        Nanos(1_000 * 1_000_000_000),
                        Path::new("."),
                        (stream(1, "bench", 0, 0), stream(2, "bench", 0, 0)),
                    )
                    .unwrap();
                arrivals
                    .take(REQUESTS)
                    .fold(0u64, |sum, a| sum.wrapping_add(a.time.get()))
            });
        });
    }
    // What the generating thread of a pipelined run does: a lone Poisson
    // source writing bare times into recycled chunks of 4096.
    let poisson = burstsim::traffic::poisson::Config {
        rate: Some(Decimal::whole(1_000_000)),
        schedule: None,
    };
    group.bench_function("poisson-chunks", |b| {
        let mut chunk: Vec<Nanos> = Vec::with_capacity(4096);
        b.iter(|| {
            let mut arrivals = poisson.stream(
                Nanos::ZERO,
                Nanos(1_000 * 1_000_000_000),
                stream(1, "bench", 0, 0),
            );
            let (mut sum, mut left) = (0u64, REQUESTS);
            while left > 0 {
                arrivals.refill(&mut chunk, left.min(4096));
                sum = sum.wrapping_add(chunk[chunk.len() - 1].get());
                left -= chunk.len();
            }
            sum
        });
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn rolling(c: &mut Criterion) {
    let times = arrivals();
    let profile: Vec<Nanos> = [10, 100, 200, 500, 1_000, 2_000]
        .iter()
        .map(|ms| Nanos(ms * 1_000_000))
        .collect();
    let mut group = c.benchmark_group("rolling");
    group.throughput(Throughput::Elements(REQUESTS as u64));
    for (name, intervals) in [
        ("one-interval", &profile[4..5]),
        ("default-profile", &profile[..]),
    ] {
        group.bench_with_input(BenchmarkId::from_parameter(name), &times, |b, times| {
            b.iter(|| {
                let mut counts = RollingCounts::new(intervals);
                times.iter().for_each(|&t| counts.push(black_box(t)));
                counts.worst()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, limiters, generators, rolling);
criterion_main!(benches);
