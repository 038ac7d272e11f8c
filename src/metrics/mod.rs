//! Metrics over the stream of decisions: exact rolling-interval counts and the
//! per-bucket timeline. Memory depends on the intervals, never on the number
//! of requests.

pub mod backend;
pub mod closed_loop;
mod key_counts;
pub mod outage;
pub mod overload;
pub mod per_key;
pub mod rolling;
pub mod timeline;
pub mod trailing;
