//! Checking a scenario file's every field and cross-field rule once, with
//! each error blamed on the value at fault.

use std::collections::HashSet;
use std::num::NonZeroU64;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{
    Backend, DEFAULT_PROFILE, MAX_BUCKETS, Metrics, NamedLimiter, Scenario, Traffic, Workload,
};
use crate::error::{FieldError, ScenarioError, Step, field_error, locate};
use crate::limiter::cluster::{ClusterConfig, Config as ClusterRun};
use crate::limiter::per_key::MAX_KEYS;
use crate::limiter::{Context, LimiterConfig};
use crate::retry::Retry;
use crate::time::Nanos;
use crate::traffic::{MAX_BURST, SourceConfig};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScenarioFile {
    name: Option<Spanned<String>>,
    duration: Spanned<Nanos>,
    #[serde(default)]
    seed: u64,
    replications: Option<NonZeroU64>,
    backend: Option<Backend>,
    cluster: Option<Spanned<toml::Table>>,
    #[serde(default)]
    metrics: MetricsFile,
    #[serde(default)]
    workload: Vec<Spanned<WorkloadFile>>,
    #[serde(default)]
    limiter: Vec<Spanned<toml::Table>>,
    /// `[[sweep]]` entries: read by `burstsim sweep` alone.
    #[serde(default, rename = "sweep")]
    _sweep: Option<serde::de::IgnoredAny>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsFile {
    rolling: Option<Spanned<Nanos>>,
    profile: Option<Spanned<Vec<Nanos>>>,
    bucket: Option<Spanned<Nanos>>,
    per_key: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    name: Spanned<String>,
    sources: Vec<Spanned<toml::Table>>,
    retry: Option<Spanned<toml::Table>>,
}

pub(super) struct Validator<'a> {
    pub(super) text: &'a str,
    pub(super) path: &'a Path,
    /// A part replayed in place of the workloads' traffic: its traces'
    /// files are not read.
    pub(super) part: Option<&'a crate::partition::Replayed>,
}

impl Validator<'_> {
    fn error(
        &self,
        span: std::ops::Range<usize>,
        message: impl std::fmt::Display,
    ) -> ScenarioError {
        ScenarioError::at(self.path, self.text, span.start, &message.to_string())
    }

    /// An error from the table at `base` (spanning `span`), blamed on the
    /// very value its message names when the file holds it there.
    fn error_in(
        &self,
        span: std::ops::Range<usize>,
        base: &[Step],
        prefix: &str,
        err: &FieldError,
    ) -> ScenarioError {
        let mut path = base.to_vec();
        path.extend(err.path.iter().cloned());
        let at = locate(self.text, &path, err.at_key).unwrap_or(span);
        self.error(at, format!("{prefix}: {err}"))
    }

    pub(super) fn scenario(&self, file: ScenarioFile) -> Result<Scenario, ScenarioError> {
        let name = match &file.name {
            Some(name) => {
                check_name(name.get_ref())
                    .map_err(|err| self.error(name.span(), err.within("name")))?;
                name.get_ref().clone()
            }
            None => {
                let stem = self
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                check_name(&stem).map_err(|err| {
                    self.error(
                        0..0,
                        field_error!(
                            "name",
                            "none given, and the file name {stem:?} cannot stand in: {err}"
                        ),
                    )
                })?;
                stem
            }
        };
        let duration = *file.duration.get_ref();
        if duration == Nanos::ZERO {
            return Err(self.error(
                file.duration.span(),
                field_error!("duration", "must be longer than 0"),
            ));
        }
        let metrics = self.metrics(&file.metrics, duration)?;
        let base_dir = self.path.parent().map(Path::to_owned).unwrap_or_default();
        let mut warnings = Vec::new();
        let workloads = self.workloads(&file.workload, duration, &base_dir, &mut warnings)?;
        let context = Context {
            backend_capacity_per_sec: file.backend.map(|b| b.capacity_per_sec.get()),
        };
        let mut per_instance = Vec::new();
        let (mut limiters, overrides) = self.limiters(
            file.limiter,
            (context, duration),
            &base_dir,
            &mut per_instance,
        )?;
        if file.cluster.is_none() && !per_instance.is_empty() {
            warnings.push(format!(
                "{} imported: each {} keeps its own count, and this scenario models one; with N of them, add [cluster] instances = N (or cluster = {{ instances = N }} to the limiter)",
                per_instance
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                per_instance
                    .iter()
                    .map(|(_, instance)| *instance)
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(" / "),
            ));
        }
        // The scenario's [cluster] alone first, so its mistakes are blamed on it.
        if let Some(shared) = &file.cluster {
            crate::config::parse_table::<ClusterConfig>(shared.get_ref().clone()).map_err(
                |err| {
                    self.error_in(
                        shared.span(),
                        &[Step::Name("cluster".into())],
                        "cluster",
                        &err,
                    )
                },
            )?;
        }
        for (i, (limiter, (own, own_span))) in limiters.iter_mut().zip(overrides).enumerate() {
            // The scenario's [cluster], with the limiter's own `cluster = { … }` over it.
            let (mut table, span) = match &file.cluster {
                Some(shared) => (shared.get_ref().clone(), shared.span()),
                None => (toml::Table::new(), own_span.clone()),
            };
            let merged = match own {
                Some(own) => {
                    table.extend(own);
                    Some(table)
                }
                None => file.cluster.is_some().then_some(table),
            };
            let Some(merged) = merged else { continue };
            let base = [
                Step::Name("limiter".into()),
                Step::Index(i),
                Step::Name("cluster".into()),
            ];
            let fail = |err: FieldError| {
                self.error_in(
                    span.clone(),
                    &base,
                    &format!("limiter {:?} in the cluster", limiter.name),
                    &err,
                )
            };
            let cluster: ClusterConfig = crate::config::parse_table(merged).map_err(fail)?;
            let config = LimiterConfig::Cluster(ClusterRun {
                inner: Box::new(limiter.config.clone()),
                cluster,
                duration,
            });
            *limiter = limiter.rebuilt(config, context, duration).map_err(fail)?;
        }
        Ok(Scenario {
            name,
            path: self.path.to_owned(),
            base_dir,
            duration,
            seed: file.seed,
            replications: file.replications.map_or(1, NonZeroU64::get),
            backend: file.backend,
            metrics,
            workloads,
            limiters,
            warnings,
            part: None,
        })
    }

    fn metrics(&self, file: &MetricsFile, duration: Nanos) -> Result<Metrics, ScenarioError> {
        let positive = |value: &Spanned<Nanos>, field: &str| {
            if value.get_ref().get() == 0 {
                Err(self.error(
                    value.span(),
                    format!("metrics.{field}: must be longer than 0"),
                ))
            } else {
                Ok(*value.get_ref())
            }
        };
        let rolling = file
            .rolling
            .as_ref()
            .map(|r| positive(r, "rolling"))
            .transpose()?
            .unwrap_or(Nanos::SECOND);
        let bucket = file
            .bucket
            .as_ref()
            .map(|b| positive(b, "bucket"))
            .transpose()?
            .unwrap_or(Nanos(10_000_000));
        if duration.get().div_ceil(bucket.get()) > MAX_BUCKETS {
            let span = file.bucket.as_ref().map_or(0..0, Spanned::span);
            let smallest = Nanos(duration.get().div_ceil(MAX_BUCKETS));
            return Err(self.error(span, field_error!("metrics.bucket", "{bucket} makes more than {MAX_BUCKETS} timeline buckets over {duration}; use a bucket of at least {smallest}")));
        }
        let profile = match &file.profile {
            None => DEFAULT_PROFILE.iter().map(|&ns| Nanos(ns)).collect(),
            Some(profile) => {
                if profile.get_ref().iter().any(|p| p.get() == 0) {
                    return Err(self.error(
                        profile.span(),
                        field_error!("metrics.profile", "every interval must be longer than 0"),
                    ));
                }
                let mut intervals = profile.get_ref().clone();
                intervals.sort_unstable();
                intervals.dedup();
                intervals
            }
        };
        Ok(Metrics {
            rolling,
            profile,
            bucket,
            per_key: file.per_key.unwrap_or(true),
        })
    }

    fn workloads(
        &self,
        files: &[Spanned<WorkloadFile>],
        duration: Nanos,
        base_dir: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Workload>, ScenarioError> {
        if files.is_empty() {
            return Err(self.error(
                0..0,
                field_error!(
                    "workload",
                    "none given; add at least one [[workload]] with sources"
                ),
            ));
        }
        let mut names = HashSet::new();
        files
            .iter()
            .enumerate()
            .map(|(w, file)| {
                let name = file.get_ref().name.get_ref();
                let at = file.get_ref().name.span();
                check_name(name).map_err(|err| self.error(at.clone(), format!("workload name: {err}")))?;
                if !names.insert(name.clone()) {
                    return Err(self.error(at, format!("workload {name:?}: the name is used twice; workload names must be unique")));
                }
                if file.get_ref().sources.is_empty() {
                    return Err(self.error(file.span(), format!("workload {name:?}: sources: needs at least one source")));
                }
                if let Some(traffic) = self.adversary(file, w, name)? {
                    return Ok(Workload { name: name.clone(), traffic, retry: None });
                }
                let base = |i: usize| [Step::Name("workload".into()), Step::Index(w), Step::Name("sources".into()), Step::Index(i)];
                // Reads and checks the sources, rebased from `origin` when given
                // (read anew: a clone would share the first check's findings).
                let check = |origin: Option<u64>| {
                    let mut sources = file.get_ref().sources.iter().enumerate().map(|(i, table)| {
                        let fail = |err: FieldError| self.error_in(table.span(), &base(i), &format!("workload {name:?}, source {}", i + 1), &err);
                        SourceConfig::from_table(table.get_ref().clone()).map_err(fail)
                    }).collect::<Result<Vec<_>, _>>()?;
                    // Several servers' logs keep their places in time: their
                    // rebasing shares one origin (a part's rows are placed already).
                    SourceConfig::mark_several(&mut sources);
                    if self.part.is_none() {
                        SourceConfig::rebase_together(&mut sources, base_dir, origin);
                    }
                    // A lone source numbers its keys; several traces naming
                    // keys share one numbering, checked one after the other.
                    let book = SourceConfig::number_together(&mut sources, self.part.is_none());
                    let mut found = Vec::new();
                    let sources = file.get_ref().sources.iter().zip(sources).enumerate().map(|(i, (table, source))| {
                        let base = base(i);
                        let fail = |err: FieldError| self.error_in(table.span(), &base, &format!("workload {name:?}, source {}", i + 1), &err);
                        if let Some(part) = self.part {
                            let (rows, clients) = part.workload(w).ok_or_else(|| {
                                self.error(file.span(), format!("workload {name:?}: not in part {}", part.dir.display()))
                            })?;
                            source.preset(rows, clients, part.logs.get(w)).map_err(fail)?;
                        }
                        let fail = |err: FieldError| self.error_in(table.span(), &base, &format!("workload {name:?}, source {} ({})", i + 1, source.kind_name()), &err);
                        found.extend(source.validate(duration, base_dir).map_err(fail)?);
                        Ok(source)
                    }).collect::<Result<Vec<SourceConfig>, _>>()?;
                    if let Some(book) = book {
                        book.close();
                    }
                    Ok::<_, ScenarioError>((sources, found))
                };
                let (mut sources, mut found) = check(None)?;
                // An unsorted trace's earliest row past its first (or none
                // read ahead): checked again from the earliest of all.
                let anew = if self.part.is_none() {
                    SourceConfig::rebased_anew(&sources, base_dir).map_err(|err| self.error(file.span(), format!("workload {name:?}: {err}")))?
                } else {
                    None
                };
                if let Some(earliest) = anew {
                    (sources, found) = check(Some(earliest))?;
                }
                warnings.extend(found);
                // Several sources are run packed only together, as logs of
                // whole seconds rebased together (their seconds gathered and
                // sorted once here: up to MAX_COUNTED_SECONDS of them).
                if sources.len() > 1 && self.part.is_none() {
                    let says = |packed: fn(Option<bool>) -> bool| sources.iter().any(|source| matches!(&source.kind, crate::traffic::SourceKind::Trace(trace) if packed(trace.packed)));
                    match SourceConfig::labelled_together(&sources) {
                        // As one trace of more rows than packing takes by default says.
                        Some(labelled) if !labelled.packed && !says(|packed| packed.is_some()) => {
                            warnings.push(format!("workload {name:?}: its logs hold more than {} rows together, so their requests are not also run packed against their seconds' edges (admitted_at_least is the seeded figure); set packed = true on them to run them, with two more sets of each limiter's state", crate::traffic::trace::PACKED_ROWS));
                        }
                        // Asked for, but not possible.
                        None if says(|packed| packed == Some(true)) => {
                            warnings.push(format!("workload {name:?}: packed = true is not applied: a workload's sources are run packed against their seconds' edges only together, when all are logs stamped in whole seconds and rebased together (rebase = true, the default for logs)"));
                        }
                        _ => {}
                    }
                }
                // State is kept per key: the keys a workload can send are bounded before any work.
                let keys = sources.iter().map(|s| s.keys(duration, base_dir).map_err(|err| self.error(file.span(), format!("workload {name:?}: {err}")))).sum::<Result<u64, _>>()?;
                if keys > MAX_KEYS as u64 {
                    return Err(self.error(file.span(), format!("workload {name:?}: its sources name up to {keys} distinct client keys; at most {MAX_KEYS} are allowed, since state is kept per key")));
                }
                let retry = match &file.get_ref().retry {
                    None => None,
                    Some(table) => {
                        let base = [Step::Name("workload".into()), Step::Index(w), Step::Name("retry".into())];
                        Some(Retry::from_table(table.get_ref().clone()).map_err(|err| self.error_in(table.span(), &base, &format!("workload {name:?}, retry"), &err))?)
                    }
                };
                Ok(Workload { name: name.clone(), traffic: Traffic::Open(sources), retry })
            })
            .collect()
    }

    /// The adversary of the workload at index `w` named `name`, if its
    /// sources hold one: then it must be the only one, without retries.
    fn adversary(
        &self,
        file: &Spanned<WorkloadFile>,
        w: usize,
        name: &str,
    ) -> Result<Option<Traffic>, ScenarioError> {
        let tables = &file.get_ref().sources;
        let is_adversary = |table: &Spanned<toml::Table>| {
            table.get_ref().get("kind").and_then(toml::Value::as_str)
                == Some(crate::adversary::Config::NAME)
        };
        let Some(i) = tables.iter().position(is_adversary) else {
            return Ok(None);
        };
        if tables.len() > 1 {
            return Err(self.error(
                file.span(),
                format!(
                    "workload {name:?}: an adversary source must be the workload's only source"
                ),
            ));
        }
        if let Some(retry) = &file.get_ref().retry {
            return Err(self.error(
                retry.span(),
                format!("workload {name:?}: retry: an adversary's requests are a pattern, not clients; give retries to a workload of traffic"),
            ));
        }
        let table = &tables[i];
        let base = [
            Step::Name("workload".into()),
            Step::Index(w),
            Step::Name("sources".into()),
            Step::Index(i),
        ];
        let fail = |err: FieldError| {
            self.error_in(
                table.span(),
                &base,
                &format!("workload {name:?}, source {} (adversary)", i + 1),
                &err,
            )
        };
        let mut fields = table.get_ref().clone();
        fields.remove("kind");
        let adversary: crate::adversary::Config =
            crate::config::parse_table(fields).map_err(fail)?;
        if adversary.budget.get() > MAX_BURST {
            return Err(fail(field_error!(
                "budget",
                "at most {MAX_BURST} requests per second (got {})",
                adversary.budget
            )));
        }
        Ok(Some(Traffic::Adversary(adversary)))
    }

    /// The limiters, and each one's own `cluster = { … }` table (with its span), if any.
    #[allow(clippy::type_complexity)]
    /// The limiters; `per_instance` gets each imported one that is kept
    /// per instance (an nginx server) and has no cluster of its own.
    fn limiters(
        &self,
        tables: Vec<Spanned<toml::Table>>,
        (context, duration): (Context, Nanos),
        base_dir: &Path,
        per_instance: &mut Vec<(String, &'static str)>,
    ) -> Result<
        (
            Vec<NamedLimiter>,
            Vec<(Option<toml::Table>, std::ops::Range<usize>)>,
        ),
        ScenarioError,
    > {
        if tables.is_empty() {
            return Err(self.error(
                0..0,
                field_error!("limiter", "none given; add at least one [[limiter]]"),
            ));
        }
        let mut names = HashSet::new();
        tables
            .into_iter()
            .enumerate()
            .map(|(i, table)| {
                let span = table.span();
                let mut table = table.into_inner();
                let own_cluster = match table.remove("cluster") {
                    Some(toml::Value::Table(cluster)) => Some(cluster),
                    Some(other) => {
                        return Err(self.error(
                            span,
                            format!(
                                "limiter {}: cluster: expected a table, got {}",
                                i + 1,
                                other.type_str()
                            ),
                        ));
                    }
                    None => None,
                };
                let name = match table.remove("name") {
                    Some(toml::Value::String(name)) => name,
                    Some(other) => {
                        return Err(self.error(
                            span,
                            format!(
                                "limiter {}: name: expected a string, got {}",
                                i + 1,
                                other.type_str()
                            ),
                        ));
                    }
                    None => {
                        return Err(self.error(span, format!("limiter {}: name: missing", i + 1)));
                    }
                };
                let base = [Step::Name("limiter".into()), Step::Index(i)];
                let fail = |err: FieldError| {
                    self.error_in(span.clone(), &base, &format!("limiter {name:?}"), &err)
                };
                check_name(&name).map_err(|err| fail(err.within("name")))?;
                if !names.insert(name.clone()) {
                    return Err(fail(
                        "the name is used twice; limiter names must be unique".into(),
                    ));
                }
                // `from = { file, zone }`: the imported block, under the block's own fields.
                let mut zone = None;
                if let Some(from) = table.remove("from") {
                    let imported = crate::import::from_table(from, base_dir)
                        .map_err(|err| fail(err.within("from")))?;
                    for (key, value) in imported.table {
                        table.entry(key).or_insert(value);
                    }
                    // Envoy's own `instances` field models its pods.
                    if let Some(instance) = imported.per_instance
                        && own_cluster.is_none()
                        && !table.contains_key("instances")
                    {
                        per_instance.push((name.clone(), instance));
                    }
                    zone = Some(imported.name);
                }
                // A chain's layers may each be taken `from` a configuration.
                if let Some(instance) =
                    crate::import::resolve_layers(&mut table, base_dir).map_err(fail)?
                    && own_cluster.is_none()
                    && !per_instance.iter().any(|(n, _)| n == &name)
                {
                    per_instance.push((name.clone(), instance));
                }
                let config = LimiterConfig::from_table(table).map_err(fail)?;
                let mut named =
                    NamedLimiter::build(name.clone(), config, context, duration).map_err(fail)?;
                named.zone = zone.unwrap_or(named.zone);
                Ok((named, (own_cluster, span.clone())))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|pairs| pairs.into_iter().unzip())
    }
}

/// Names become file and folder names, so they are kept to a safe alphabet.
fn check_name(name: &str) -> Result<(), FieldError> {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() {
        Err("must not be empty".into())
    } else if name.len() > 64 {
        Err(format!(
            "{:?} is longer than 64 characters",
            crate::input::quote_at_most(name, 64)
        )
        .into())
    } else if name.starts_with('.') || !name.chars().all(safe) {
        Err(format!(
            "{:?} may hold only letters, digits, '-', '_' and '.', and not start with '.'",
            crate::input::quote_at_most(name, 64)
        )
        .into())
    } else {
        Ok(())
    }
}
