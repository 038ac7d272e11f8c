//! The contract of a traffic source kind: what the `sources!` list in
//! `traffic/mod.rs` needs of each module it names.

use std::path::Path;

use serde::de::DeserializeOwned;

use super::clients::Clients;
use super::{Rng, Timed};
use crate::error::FieldError;
use crate::time::Nanos;

/// Where one source runs: its active part of the run, the folder its files
/// are read from, and the clients its requests come from (if it has them).
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    /// First instant it may produce.
    pub start: Nanos,
    /// End of its activity, exclusive.
    pub end: Nanos,
    /// Folder that relative paths in the scenario start from.
    pub base_dir: &'a Path,
    /// Its `clients`, if any.
    pub clients: Option<&'a Clients>,
}

impl Place<'_> {
    /// Nanoseconds from `start` to `end`.
    pub fn span(&self) -> u128 {
        u128::from(self.end.get() - self.start.get())
    }
}

/// A traffic source kind: its configuration (`kind = "…"` and its fields)
/// and the stream of arrivals it makes. Declare it with one line in
/// `sources!`; everything else (reading, describing, merging, spreading
/// over clients, time windows) is done once for every kind.
pub trait Kind: Clone + std::fmt::Debug + DeserializeOwned {
    /// How `kind = "…"` names it.
    const NAME: &'static str;

    /// What its stream yields: bare times of the default key, or whole
    /// arrivals when it names clients itself.
    type Item: Timed;

    /// Its running stream, in non-decreasing time order.
    type Arrivals: Iterator<Item = Self::Item> + Send;

    /// Checks everything that can be checked before generating traffic
    /// (a trace reads its file once), and returns warnings for the user.
    fn validate(&self, place: Place) -> Result<Vec<String>, FieldError>;

    /// Whether it draws random numbers, so replications differ (its
    /// clients aside).
    fn is_stochastic(&self) -> bool;

    /// The source in a few words, like `poisson 80/s`.
    fn describe(&self) -> String;

    /// About how many arrivals it makes in `place` (the mean, for random
    /// kinds): to refuse runaway work before starting it.
    fn estimated_arrivals(&self, place: Place) -> Result<u128, FieldError>;

    /// Its stream for one run, drawn from `rng`. A kind that
    /// [`keys_itself`](Kind::keys_itself) draws its clients' keys from
    /// `keys`; any other's arrivals are spread over its clients for it.
    fn arrivals(&self, place: Place, rng: Rng, keys: Rng) -> Result<Self::Arrivals, FieldError>;

    /// Whether it assigns its clients' keys itself.
    fn keys_itself(&self, clients: Option<&Clients>) -> bool {
        let _ = clients;
        false
    }

    /// Whether it names clients without `clients` (a trace's key column).
    fn names_keys(&self) -> bool {
        false
    }

    /// Whether its requests name Hosts (a trace's host column).
    fn names_hosts(&self) -> bool {
        false
    }

    /// The most distinct keys it names without `clients`.
    fn keys(&self, place: Place) -> Result<u64, FieldError> {
        let _ = place;
        Ok(1)
    }

    /// Bytes it holds to sort its input in memory (0 for most kinds).
    fn sort_bytes(&self, place: Place) -> Result<u64, FieldError> {
        let _ = place;
        Ok(0)
    }

    /// Replaces what `out` holds with the stream's next `count` arrivals,
    /// fewer only at its end.
    fn refill<T: Timed>(arrivals: &mut Self::Arrivals, out: &mut Vec<T>, count: usize) {
        out.clear();
        out.extend(arrivals.take(count).map(|a| T::of(a.arrival())));
    }

    /// For a log of responses: how many requests the log says its own
    /// limiter turned away.
    fn turned_away_in_log(&self) -> Option<u64> {
        None
    }

    /// For input stamped in whole seconds: its busiest labelled second and
    /// busiest two adjacent ones, between which its worst rolling second lies.
    fn labelled_seconds(&self) -> Option<super::trace::Labelled> {
        None
    }

    /// The key the results show for `key` as it streamed: itself, unless
    /// the source numbers its keys (a trace's are shown by their text's hash).
    fn key_value(&self, key: super::Key) -> Option<u64> {
        let _ = key;
        None
    }

    /// The text that names `key` in its input, if it names keys itself.
    fn key_name(&self, key: super::Key) -> Option<String> {
        let _ = key;
        None
    }

    /// The error that cut the stream short, if any (a file that changed).
    fn take_error(arrivals: &mut Self::Arrivals) -> Option<String> {
        let _ = arrivals;
        None
    }
}
