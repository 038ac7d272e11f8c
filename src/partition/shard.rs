//! What a shard of a partitioning writes: per workload and limiter, its
//! decisions on the stream it decided (its part's requests, for a limiter
//! kept per key; its slice of time's, for a global one), in that stream's
//! order, and the figures per key as counts by value. A merge reads these
//! beside the partitioning's streams; nothing else of a shard's run is kept.

use serde::{Deserialize, Serialize};

use super::{Identity, PartStream};
use crate::metrics::per_key::KeyTallies;

/// What `shard.json` says, and the shards' format.
pub const SHARD_FORMAT: &str = "burstsim-shard 1";

/// The file a shard's results are told by.
pub const SHARD_FILE: &str = "shard.json";

/// What `shard.json` says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardFile {
    /// [`SHARD_FORMAT`].
    pub format: String,
    /// The partitioning it decided a part of.
    pub identity: Identity,
    /// Which part (and slice of time), from 0.
    pub index: u64,
    /// Per workload, per limiter in the scenario's order.
    pub workloads: Vec<Vec<ShardLimiter>>,
}

/// What a shard decided of one limiter on one workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardLimiter {
    /// The limiter's name.
    pub name: String,
    /// Which stream it decided: `"key"` (the part's) or `"time"` (the slice's).
    pub over: Over,
    /// Its decisions, one file per placement (the run's, then for a packed
    /// log the two packed ones).
    pub decisions: Vec<PartStream>,
    /// Its figures per key in this part, for a limiter kept per key.
    pub tallies: Option<KeyTallies>,
    /// For a limiter kept per key: the most keys it held at once, and its resets.
    pub state: Option<(u64, u64)>,
}

/// Which stream of a part a shard decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Over {
    /// The part's own keys' requests.
    Key,
    /// Every key's requests in the part's slice of time.
    Time,
}

/// The file of the decisions of limiter `l` on workload `w` in placement `p`.
pub fn codes_file(w: usize, l: usize, p: usize) -> String {
    format!("w{w}.l{l}.p{p}")
}
