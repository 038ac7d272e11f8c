//! burstsim: a discrete-event simulator that shows exactly how much traffic a
//! rate limiter lets through in any rolling interval.

pub(crate) mod adversary;
pub(crate) mod chart;
pub(crate) mod check;
pub mod cli;
pub mod colour;
pub mod commands;
pub(crate) mod config;
pub mod cores;
pub mod decimal;
pub mod error;
pub(crate) mod import;
pub mod input;
pub mod interrupt;
pub(crate) mod job;
pub mod limiter;
pub(crate) mod live;
pub(crate) mod memory;
pub mod metrics;
pub(crate) mod output;
pub mod partition;
pub(crate) mod probe;
pub mod random;
pub(crate) mod replicate;
pub(crate) mod report;
pub(crate) mod results;
pub mod retry;
pub mod scenario;
pub mod sim;
pub(crate) mod size;
pub(crate) mod summary;
pub(crate) mod sweep;
pub(crate) mod tally;
pub mod time;
pub mod traffic;
