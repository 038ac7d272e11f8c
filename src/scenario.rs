//! Scenario files: read the TOML, check every field and every cross-field
//! rule once, and hand the simulator a validated [`Scenario`].

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{FieldError, ScenarioError};
use crate::limiter::{Context, Limiter, LimiterConfig, RateLimiter};
use crate::retry::Retry;
use crate::time::Nanos;
use crate::traffic::SourceConfig;

/// The interval lengths of the default arrival-curve profile.
pub const DEFAULT_PROFILE: [u64; 6] = [
    10_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
];
/// Most timeline buckets in one run, to keep memory bounded.
pub const MAX_BUCKETS: u64 = 10_000_000;

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name of the scenario, used for `output/<name>/`.
    pub name: String,
    /// The file it was read from.
    pub path: PathBuf,
    /// Folder that relative paths in the file (traces) start from.
    pub base_dir: PathBuf,
    /// Length of the run.
    pub duration: Nanos,
    /// Seed of every random stream.
    pub seed: u64,
    /// How many seeds each stochastic workload runs with.
    pub replications: u64,
    /// The backend behind the limiters, if described.
    pub backend: Option<Backend>,
    /// What to measure.
    pub metrics: Metrics,
    /// Traffic, each run through every limiter.
    pub workloads: Vec<Workload>,
    /// Limiters, each fed every workload.
    pub limiters: Vec<NamedLimiter>,
    /// Things worth telling the user that do not stop the run.
    pub warnings: Vec<String>,
    /// A part of a partitioning, replayed in place of every workload's own
    /// traffic (`run --part`).
    pub part: Option<std::sync::Arc<crate::partition::Replayed>>,
}

/// The service the limiters protect.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backend {
    /// Requests per second it can serve.
    #[serde(rename = "capacity")]
    pub capacity_per_sec: NonZeroU64,
    /// Requests it can hold waiting before it drops them.
    pub queue: Option<u64>,
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Interval of the headline worst-rolling figure.
    pub rolling: Nanos,
    /// Intervals of the arrival-curve profile.
    pub profile: Vec<Nanos>,
    /// Timeline resolution.
    pub bucket: Nanos,
    /// Figures per client key (`keys` in summary.json) for keyed workloads.
    pub per_key: bool,
}

/// A named traffic mix.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Unique name.
    pub name: String,
    /// What it sends.
    pub traffic: Traffic,
    /// How its clients retry rejected requests, if they do.
    pub retry: Option<Retry>,
}

/// What a workload sends.
#[derive(Clone, Debug)]
pub enum Traffic {
    /// Sources merged by time: with `retry`, the requests' first attempts.
    Open(Vec<SourceConfig>),
    /// A search, for each limiter, for the traffic it admits the most of
    /// (written as the workload's only source, `kind = "adversary"`).
    Adversary(crate::adversary::Config),
}

impl Workload {
    /// Its sources (none for an adversary).
    pub fn sources(&self) -> &[SourceConfig] {
        match &self.traffic {
            Traffic::Open(sources) => sources,
            Traffic::Adversary(_) => &[],
        }
    }

    /// Its adversary, if it is one.
    pub fn adversary(&self) -> Option<&crate::adversary::Config> {
        match &self.traffic {
            Traffic::Open(_) => None,
            Traffic::Adversary(adversary) => Some(adversary),
        }
    }

    /// Whether its requests name their clients (a source with `clients`, or
    /// a trace with a key column): then runs keep figures per key.
    pub fn is_keyed(&self) -> bool {
        self.sources().iter().any(SourceConfig::is_keyed)
    }

    /// Whether its requests name Hosts (a trace's host column).
    pub fn names_hosts(&self) -> bool {
        self.sources().iter().any(SourceConfig::names_hosts)
    }

    /// The clients of its requests whose key is empty (a log's `-` where
    /// the key's header was missing), which some gateways leave unlimited
    /// ([`crate::limiter::Limiter::treat_empty_keys`]); known once its
    /// traces are checked.
    pub fn empty_keys(&self) -> crate::traffic::EmptyKeys {
        let mut empty = crate::traffic::EmptyKeys::default();
        for source in self.sources() {
            empty.add(source.empty_keys());
        }
        empty
    }

    /// When its sources are logs of responses: the requests the logs say
    /// their own limiter turned away.
    pub fn turned_away_in_log(&self) -> Option<u64> {
        match self.sources() {
            [one] => one.turned_away_in_log(),
            several @ [_, _, ..] => SourceConfig::turned_away_together(several),
            [] => None,
        }
    }

    /// Where, within a second, its traces' whole seconds start in the run
    /// (see [`SourceConfig::second_origin`]): several traces' when the same.
    pub fn second_origin(&self, duration: Nanos) -> Option<u64> {
        let mut origins = self
            .sources()
            .iter()
            .map(|source| source.second_origin(duration));
        let first = origins.next()??;
        origins.all(|origin| origin == Some(first)).then_some(first)
    }

    /// Its one trace streaming the log's own verdict on each request in
    /// place of its key, in the order the limiters see the requests: for a
    /// log whose every row says it, and requests sent once (no retries).
    pub fn verdicts(&self) -> Option<Workload> {
        match &self.traffic {
            Traffic::Open(sources)
                if sources.len() == 1
                    && self.retry.is_none()
                    && self.turned_away_in_log().is_some() =>
            {
                Some(Workload {
                    traffic: Traffic::Open(vec![sources[0].verdicts()?]),
                    ..self.clone()
                })
            }
            _ => None,
        }
    }

    /// When its sources are stamped in whole seconds, where its worst
    /// rolling second of demand lies (see [`SourceConfig::labelled_seconds`];
    /// several traces' seconds counted together, [`SourceConfig::labelled_together`]).
    pub fn labelled_seconds(&self) -> Option<crate::traffic::trace::Labelled> {
        match self.sources() {
            [one] => one.labelled_seconds(),
            several @ [_, _, ..] => SourceConfig::labelled_together(several),
            [] => None,
        }
    }

    /// The key the results show for client `key` as it streamed (see
    /// [`SourceConfig::key_value`]).
    pub fn key_value(&self, key: crate::traffic::Key) -> u64 {
        self.sources()
            .iter()
            .find_map(|source| source.key_value(key))
            .unwrap_or(key.client)
    }

    /// How the results name client `key` (see [`SourceConfig::key_name`]).
    pub fn key_name(&self, key: crate::traffic::Key) -> Option<String> {
        self.sources()
            .iter()
            .find_map(|source| source.key_name(key))
    }

    /// Whether it draws random numbers, so replications differ.
    pub fn is_stochastic(&self) -> bool {
        self.sources().iter().any(SourceConfig::is_stochastic)
    }

    /// What it sends, a few words a source.
    pub fn describe(&self) -> Vec<String> {
        match &self.traffic {
            Traffic::Open(sources) => sources.iter().map(SourceConfig::describe).collect(),
            Traffic::Adversary(adversary) => vec![adversary.describe()],
        }
    }
}

/// A named limiter, built: validation has already turned its configuration
/// into a limiter, so nothing downstream builds or checks it again.
#[derive(Clone, Debug)]
pub struct NamedLimiter {
    /// Unique name.
    pub name: String,
    /// Its configuration as written (for sizing, which varies it).
    pub config: LimiterConfig,
    /// The limiter in its initial state: every run starts from a clone.
    pub limiter: Limiter,
    /// Its effective parameters in words.
    pub description: String,
    /// The name its gateway knows it by: the zone (or route) it was imported
    /// from with `from = { file, zone }`, or its own name.
    pub zone: String,
}

impl NamedLimiter {
    /// The same limiter (its name and zone) with `config` instead, built as
    /// [`NamedLimiter::build`] builds it.
    pub fn rebuilt(
        &self,
        config: LimiterConfig,
        context: Context,
        duration: Nanos,
    ) -> Result<NamedLimiter, FieldError> {
        Ok(NamedLimiter {
            zone: self.zone.clone(),
            ..NamedLimiter::build(self.name.clone(), config, context, duration)?
        })
    }

    /// `config` built in `context`, or what is wrong with it: including a
    /// run of `duration` beyond where its time arithmetic is exact.
    pub fn build(
        name: String,
        config: LimiterConfig,
        context: Context,
        duration: Nanos,
    ) -> Result<NamedLimiter, FieldError> {
        let limiter = config.build(context)?;
        if duration > limiter.horizon() {
            return Err(format!(
                "its time arithmetic is exact only for arrivals up to {} (delays and tolerances are added to them), and the run lasts {duration}; shorten the run",
                limiter.horizon()
            ).into());
        }
        Ok(NamedLimiter {
            zone: name.clone(),
            name,
            description: limiter.describe(),
            config,
            limiter,
        })
    }
}

impl Scenario {
    /// What limiters may depend on outside themselves: the backend's capacity.
    pub fn context(&self) -> Context {
        Context {
            backend_capacity_per_sec: self.backend.map(|b| b.capacity_per_sec.get()),
        }
    }

    /// The same scenario in front of `backend`, its limiters built anew (a
    /// buffered threshold follows the backend's capacity).
    pub fn with_backend(mut self, backend: Backend) -> Result<Scenario, FieldError> {
        self.backend = Some(backend);
        let (context, duration) = (self.context(), self.duration);
        self.limiters = std::mem::take(&mut self.limiters)
            .into_iter()
            .map(|named| {
                named
                    .rebuilt(named.config.clone(), context, duration)
                    .map_err(|err| format!("limiter {:?}: {err}", named.name))
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }
}

/// Reads and validates the scenario at `path`.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    parse(
        &crate::input::read_text(path, crate::input::MAX_SCENARIO_BYTES).map_err(|cause| {
            ScenarioError::Read {
                path: path.to_owned(),
                cause,
            }
        })?,
        path,
    )
}

/// The text of the scenario file at `path` (bounded in size).
pub fn read(path: &Path) -> Result<String, ScenarioError> {
    crate::input::read_text(path, crate::input::MAX_SCENARIO_BYTES).map_err(|cause| {
        ScenarioError::Read {
            path: path.to_owned(),
            cause,
        }
    })
}

/// Validates scenario `text`, read from `path`.
pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
    validated(text, path, None)
}

/// Validates scenario `text`, read from `path`, to replay `part` in place of
/// its workloads' traffic: its traces' files are not read (see
/// [`crate::traffic::SourceConfig::preset`]).
pub fn parse_part(
    text: &str,
    path: &Path,
    part: std::sync::Arc<crate::partition::Replayed>,
) -> Result<Scenario, ScenarioError> {
    let mut scenario = validated(text, path, Some(&part))?;
    scenario.part = Some(part);
    Ok(scenario)
}

/// [`parse`], with a part in place of the traffic if given.
fn validated(
    text: &str,
    path: &Path,
    part: Option<&crate::partition::Replayed>,
) -> Result<Scenario, ScenarioError> {
    let file: validate::ScenarioFile = toml::from_str(text).map_err(|err| {
        let offset = err.span().map_or(0, |span| span.start);
        ScenarioError::at(path, text, offset, err.message().trim_end())
    })?;
    validate::Validator { text, path, part }.scenario(file)
}

#[cfg(test)]
mod tests;
mod validate;
