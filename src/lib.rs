//! burstsim: a discrete-event simulator that shows exactly how much traffic a
//! rate limiter lets through in any rolling interval.

pub mod adversary;
pub mod chart;
pub mod check;
pub mod cli;
pub mod colour;
pub mod commands;
pub mod config;
pub mod decimal;
pub mod error;
pub mod import;
pub mod input;
pub mod interrupt;
pub mod limiter;
pub mod live;
pub mod memory;
pub mod metrics;
pub mod output;
pub mod random;
pub mod replicate;
pub mod report;
pub mod results;
pub mod retry;
pub mod scenario;
pub mod sim;
pub mod size;
pub mod summary;
pub mod sweep;
pub mod time;
pub mod traffic;
