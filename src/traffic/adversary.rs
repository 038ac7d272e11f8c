//! `kind = "adversary"`: not a fixed arrival stream but a search, for each
//! limiter, for the traffic that makes it admit the most in one rolling
//! interval, within a budget of requests per second. See `crate::adversary`.

use std::num::NonZeroU64;

use serde::Deserialize;

/// `kind = "adversary"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The most requests the adversary may send in any 1 s.
    pub budget: NonZeroU64,
}
