//! A cluster as a scenario writes it: instances, how requests are balanced,
//! where the counter lives, the store (round trip, update, faults) and the
//! clocks, checked before any instance is built.

use super::*;

use crate::error::{FieldError, field_error};

/// How requests are spread over instances.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Request i to instance i mod K.
    #[default]
    RoundRobin,
    /// Uniformly at random (a fixed generator, so runs repeat).
    Random,
    /// By a hash of a client key drawn per request from `clients` keys.
    Hash,
}

/// Where the counter lives and whose clock cuts its windows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Each instance has its own limiter, on its own clock.
    #[default]
    Local,
    /// One shared counter per window, the window key computed from each
    /// instance's clock (the envoyproxy/ratelimit design).
    SharedInstanceClock,
    /// One shared counter whose window starts at its first increment and
    /// expires W later on the store's clock (Redis INCR + EXPIRE).
    SharedStoreClock,
}

/// How a shared counter is updated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Update {
    /// INCR and decide on its reply: no request sees a stale count.
    #[default]
    Atomic,
    /// GET, decide, then INCR: the increment lands one round trip later, so
    /// requests within that round trip all see the count before it.
    ReadThenIncrement,
}

/// The shared store.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// Round-trip time to the store (default 0).
    #[serde(default)]
    pub rtt: Nanos,
    /// How the counter is updated (default atomic).
    #[serde(default)]
    pub update: Update,
    /// The store clock's offset from true time (default 0).
    #[serde(default)]
    pub offset: Offset,
    /// Spans of time when no instance reaches the store.
    #[serde(default)]
    pub outages: Vec<Outage>,
    /// What instances do then (default allow, as Kong, Envoy and Spring do).
    #[serde(default)]
    pub on_error: OnError,
    /// Failovers that lose the increments of their last moments.
    #[serde(default)]
    pub failover: Vec<Failover>,
}

/// `[cluster]` in a scenario: applied to every limiter.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// How many instances.
    pub instances: NonZeroU64,
    /// How requests are spread (default round-robin).
    #[serde(default)]
    pub balance: Balance,
    /// Client keys for `balance = "hash"` (default 1000).
    pub clients: Option<NonZeroU64>,
    /// Where the counter lives (default local).
    #[serde(default)]
    pub mode: Mode,
    /// In local mode, give each instance threshold / instances (default false).
    #[serde(default)]
    pub divide: bool,
    /// Each instance's clock offset (one value for all, or one per instance).
    #[serde(default)]
    pub offsets: Vec<Offset>,
    /// Each instance's clock drift in parts per million (one, or one per instance).
    #[serde(default)]
    pub drift_ppm: Vec<i64>,
    /// Clock corrections.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The shared store.
    #[serde(default)]
    pub store: Store,
    /// Instead of `offsets`: clock offsets drawn uniformly from ±spread/2
    /// (a fixed generator, so runs repeat).
    pub offset_spread: Option<Nanos>,
    /// Batched counters (Kong's `sync_rate`): each instance counts locally and
    /// adds its counts to the shared counter every `sync_interval`, deciding
    /// on the shared count as of its last sync plus its own unsynced ones.
    pub sync_interval: Option<Nanos>,
}

impl ClusterConfig {
    /// Checks the lists against the number of instances and the mode against
    /// `inner`, a limiter of kind `kind`.
    /// `library` is the store-backed library `inner` is, when shared.
    pub fn check(
        &self,
        kind: &str,
        inner: &Limiter,
        library: Option<&library::Shared>,
    ) -> Result<(), FieldError> {
        let k = self.instances.get() as usize;
        if k > 10_000 {
            return Err(field_error!("cluster.instances", "at most 10000"));
        }
        for (field, len) in [
            ("offsets", self.offsets.len()),
            ("drift_ppm", self.drift_ppm.len()),
        ] {
            if len > 1 && len != k {
                return Err(FieldError::at(
                    field,
                    format!("give one value or one per instance ({k}), not {len}"),
                )
                .within("cluster"));
            }
        }
        if let Some(step) = self
            .steps
            .iter()
            .find(|s| matches!(s.on, Target::Instance(i) if i >= k))
        {
            return Err(field_error!(
                "cluster.steps",
                "instance {:?} does not exist (instances are numbered from 0)",
                step.on
            ));
        }
        if self.offset_spread.is_some() && !self.offsets.is_empty() {
            return Err(field_error!(
                "cluster.offset_spread",
                "give either `offsets` or `offset_spread`, not both"
            ));
        }
        if self.store.update == Update::ReadThenIncrement && self.mode == Mode::SharedStoreClock {
            return Err(field_error!(
                "cluster.store.update",
                "\"read-then-increment\" models instances that read the counter, then increment it, on their own clocks; the store-clock mode is INCR + PEXPIRE in one step on the store: set mode = \"shared-instance-clock\" or drop `update`"
            ));
        }
        if self.sync_interval.is_some() && self.mode != Mode::SharedInstanceClock {
            return Err(field_error!(
                "cluster.sync_interval",
                "batched counters share a counter keyed by instance clocks; set mode = \"shared-instance-clock\""
            ));
        }
        if self.sync_interval == Some(Nanos::ZERO) {
            return Err(field_error!(
                "cluster.sync_interval",
                "must be longer than 0"
            ));
        }
        if self.drift_ppm.iter().any(|d| d.abs() > 1_000_000) {
            return Err(field_error!("cluster.drift_ppm", "at most ±1000000"));
        }
        if let Some(shared) = library {
            return library::check(shared, self);
        }
        if let Limiter::Redisson(log) = inner {
            return self.check_redisson(log.per_client());
        }
        if let Limiter::Sentinel(crate::limiter::sentinel::Sentinel::TokenServer(_)) = inner {
            return self.check_token_server();
        }
        if self.mode != Mode::Local && inner.fixed_window().is_none() {
            return Err(field_error!(
                "cluster.mode",
                "shared counters model fixed windows; a {kind} can only run locally"
            ));
        }
        let faults = !self.store.outages.is_empty() || !self.store.failover.is_empty();
        if faults && self.mode == Mode::Local {
            return Err(field_error!(
                "cluster.store",
                "outages and failovers are of a shared store; in mode = \"local\" there is none"
            ));
        }
        if !self.store.failover.is_empty()
            && (self.sync_interval.is_some() || self.store.update == Update::ReadThenIncrement)
        {
            return Err(field_error!(
                "cluster.store.failover",
                "modelled for atomic shared counters only; drop sync_interval and update = \"read-then-increment\", or the failover"
            ));
        }
        if self.mode != Mode::Local && inner.fixed_window().is_some_and(|f| f.counts_rejected()) {
            return Err(field_error!(
                "cluster.mode",
                "shared counters are modelled counting admitted requests only; drop count_rejected or use mode = \"local\""
            ));
        }
        Ok(())
    }

    /// Redisson keeps its log in the store by `rate_type`, scored by each
    /// client's clock, in one atomic script, and throws when the store fails.
    fn check_redisson(&self, per_client: bool) -> Result<(), FieldError> {
        let refused = if self.mode == Mode::SharedStoreClock {
            Some((
                "cluster.mode",
                "Redisson scores permits with each client's clock (System.currentTimeMillis()), never the store's; drop `mode` (rate_type = \"overall\" shares the log)",
            ))
        } else if per_client && self.mode != Mode::Local {
            Some((
                "cluster.mode",
                "rate_type = \"per-client\" keeps a log per client; drop `mode`, or set rate_type = \"overall\" to share one",
            ))
        } else if self.sync_interval.is_some() {
            Some((
                "cluster.sync_interval",
                "Redisson writes every permit to the store at once; drop sync_interval",
            ))
        } else if self.divide && !per_client {
            Some((
                "cluster.divide",
                "rate_type = \"overall\" shares one rate between the clients; drop divide, or set rate_type = \"per-client\"",
            ))
        } else if self.store.update == Update::ReadThenIncrement {
            Some((
                "cluster.store.update",
                "Redisson's script reads and adds in one atomic EVAL; drop `update`",
            ))
        } else if !self.store.outages.is_empty() || !self.store.failover.is_empty() {
            Some((
                "cluster.store",
                "when Redis fails, Redisson's tryAcquire throws and what follows is the application's own code: not modelled; drop the outages and failovers for this limiter",
            ))
        } else {
            None
        };
        refused.map_or(Ok(()), |(field, message)| {
            Err(FieldError::at(field, message.to_owned()))
        })
    }

    /// Sentinel's token server is the shared count, on its own clock (the
    /// store's), and the rule says what a failed request for a token does.
    fn check_token_server(&self) -> Result<(), FieldError> {
        let refused = if self.mode != Mode::Local {
            Some((
                "cluster.mode",
                "Sentinel's token server is the shared count whatever the mode, on its own clock (store.offset and steps on \"store\"); drop `mode`",
            ))
        } else if self.divide {
            Some((
                "cluster.divide",
                "the token server's threshold_type says how count is shared (\"avg-local\": count per instance); drop divide",
            ))
        } else if self.sync_interval.is_some() {
            Some((
                "cluster.sync_interval",
                "every request asks the token server; drop sync_interval",
            ))
        } else if self.store.update == Update::ReadThenIncrement {
            Some((
                "cluster.store.update",
                "the token server checks and counts in one step; drop `update`",
            ))
        } else if self.store.on_error != OnError::Allow {
            Some((
                "cluster.store.on_error",
                "a failed token request does what the rule's fallback_to_local_when_fail says (its own check, or pass); drop on_error",
            ))
        } else if !self.store.failover.is_empty() {
            Some((
                "cluster.store.failover",
                "the token server keeps its counts in memory, with no replica to fail over to; model a restart as an outage",
            ))
        } else {
            None
        };
        refused.map_or(Ok(()), |(field, message)| {
            Err(FieldError::at(field, message.to_owned()))
        })
    }

    pub(super) fn clock(&self, instance: usize) -> Clock {
        let pick = |values: &[Offset]| {
            values
                .get(instance)
                .or(values.first())
                .copied()
                .unwrap_or_default()
                .0
        };
        let drift = self
            .drift_ppm
            .get(instance)
            .or(self.drift_ppm.first())
            .copied()
            .unwrap_or(0);
        let steps = self
            .steps
            .iter()
            .filter(|s| s.on == Target::Instance(instance))
            .map(|s| (s.at.get(), s.by.0))
            .collect();
        let offset = match self.offset_spread {
            // A draw in ±spread/2 from a fixed generator, so runs repeat.
            Some(spread) => {
                let half = i128::from(spread.get() / 2);
                let unit = i128::from(random::mix(0x5eed ^ instance as u64) >> 11);
                i64::try_from((unit * 2 * half) / (1i128 << 53) - half).unwrap_or(0)
            }
            None => pick(&self.offsets),
        };
        Clock {
            offset,
            drift_ppm: drift,
            steps,
        }
    }

    pub(super) fn store_clock(&self) -> Clock {
        let steps = self
            .steps
            .iter()
            .filter(|s| s.on == Target::Store)
            .map(|s| (s.at.get(), s.by.0))
            .collect();
        Clock {
            offset: self.store.offset.0,
            drift_ppm: 0,
            steps,
        }
    }
}
