//! burstsim's integration tests, one binary: each module is what used to be
//! a test file of its own (a file per subject), sharing `common`. One binary
//! links the crate once, so touching a source file rebuilds one test binary.
//!
//! Run one subject with `cargo test --test integration golden::`.

mod common;

mod access_logs;
mod bound_cases;
mod bound_properties;
mod charts;
mod cli;
mod docs;
mod express_real;
mod golden;
mod governor_equivalence;
mod guava_real;
mod haproxy_freq_ctr;
mod haproxy_real;
mod hostile;
mod import;
mod limiter_contracts;
mod live_redis;
mod nginx_real;
mod node_limiters;
mod output_races;
mod output_safety;
mod partition;
mod probe_real;
mod python_limiters;
mod redis_cell_real;
mod redis_memory;
mod redis_real;
mod retry_properties;
mod retry_reference;
mod size_check;
mod sweep;
mod xtime_rate;
