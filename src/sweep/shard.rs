//! Sharding a sweep for any batch scheduler: shard I of N runs a
//! deterministic slice of the points, balanced by estimated work, and writes
//! a part that carries the sweep's identity; merging checks that the parts
//! belong together and cover every point exactly once.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::AxisSpec;
use crate::error::FieldError;
use crate::summary::RunSummary;

/// Most shards of one sweep.
pub const MAX_SHARDS: u64 = 10_000;

/// Environment variables that batch schedulers set to a task's index, read
/// in this order by `--shard auto/N`.
pub const INDEX_VARIABLES: [&str; 3] = [
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "AWS_BATCH_JOB_ARRAY_INDEX",
];

/// What makes two parts parts of the same sweep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The scenario's name.
    pub scenario: String,
    /// A fingerprint of the scenario file's text.
    pub scenario_hash: String,
    /// The seed of every point (before any point varies it).
    pub seed: u64,
    /// Replications of each stochastic workload.
    pub replications: u64,
    /// The burstsim version that ran it.
    pub burstsim: String,
    /// The grid: groups of zipped axes.
    pub grid: Vec<Vec<AxisSpec>>,
}

impl Identity {
    /// How many points the grid has.
    pub fn points(&self) -> usize {
        self.grid.iter().map(|g| g[0].values.len()).product()
    }

    /// The first way `other` differs, in words; `None` when it does not.
    fn difference(&self, other: &Identity) -> Option<String> {
        let field = |name: &str, a: &dyn fmt::Display, b: &dyn fmt::Display| {
            Some(format!("{name} {a} instead of {b}"))
        };
        if self.scenario != other.scenario {
            field("scenario", &other.scenario, &self.scenario)
        } else if self.scenario_hash != other.scenario_hash {
            Some(format!(
                "a different text of scenario {} (fingerprint {} instead of {})",
                self.scenario, other.scenario_hash, self.scenario_hash
            ))
        } else if self.seed != other.seed {
            field("seed", &other.seed, &self.seed)
        } else if self.replications != other.replications {
            field("replications", &other.replications, &self.replications)
        } else if self.burstsim != other.burstsim {
            field("burstsim version", &other.burstsim, &self.burstsim)
        } else if self.grid != other.grid {
            Some("a different grid (--vary paths or values)".into())
        } else {
            None
        }
    }
}

/// The results of one point: every workload × limiter run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointResult {
    /// The point's index in the grid.
    pub point: usize,
    /// Its runs, as in `summary.json`.
    pub runs: Vec<RunSummary>,
}

/// Which slice of a sweep: shard `index` of `count`, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// From 0.
    pub index: u64,
    /// How many shards in all.
    pub count: u64,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `--shard I/N`, or `auto/N` to take I from the scheduler's variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardArg {
    /// `None` for `auto`.
    pub index: Option<u64>,
    /// N.
    pub count: u64,
}

impl FromStr for ShardArg {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let expected = || {
            format!("expected I/N with 0 ≤ I < N ≤ {MAX_SHARDS}, like 3/8, or auto/N; got {text:?}")
        };
        let (index, count) = text.split_once('/').ok_or_else(expected)?;
        let count = count
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=MAX_SHARDS).contains(n))
            .ok_or_else(expected)?;
        let index = match index.trim() {
            "auto" => None,
            i => Some(
                i.parse::<u64>()
                    .ok()
                    .filter(|&i| i < count)
                    .ok_or_else(expected)?,
            ),
        };
        Ok(ShardArg { index, count })
    }
}

impl ShardArg {
    /// The shard, its index read from `variable` (like `std::env::var`) for
    /// `auto`.
    pub fn resolve(self, variable: impl Fn(&str) -> Option<String>) -> Result<Shard, FieldError> {
        let count = self.count;
        let index = match self.index {
            Some(index) => index,
            None => {
                // GNU parallel numbers its jobs from 1 ({#}, PARALLEL_SEQ).
                let (name, value, base) = INDEX_VARIABLES
                    .iter()
                    .map(|&name| (name, 0))
                    .chain([("PARALLEL_SEQ", 1)])
                    .find_map(|(name, base)| variable(name).map(|value| (name, value, base)))
                    .ok_or_else(|| {
                        format!(
                            "--shard auto/{count}: none of {}, PARALLEL_SEQ is set; give the index, like --shard 0/{count}",
                            INDEX_VARIABLES.join(", ")
                        )
                    })?;
                value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .and_then(|i| i.checked_sub(base))
                    .filter(|&i| i < count)
                    .ok_or_else(|| {
                        format!(
                            "--shard auto/{count}: {name}={value:?} is not an index from {base} to {}; with Slurm, number the array from 0 (--array=0-{})",
                            count - 1 + base,
                            count - 1
                        )
                    })?
            }
        };
        Ok(Shard { index, count })
    }
}

/// A shard's results, as written to `sweep-part.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Part {
    /// The sweep it belongs to.
    pub identity: Identity,
    /// Which slice.
    pub shard: Shard,
    /// The points of its slice, in order.
    pub points: Vec<PointResult>,
}

/// The points of each of `count` shards: the largest estimated work first,
/// each to the least loaded shard (the lowest index on a tie), so shards
/// take about equal time whatever the grid's order; each slice in order.
pub fn partition(work: &[u128], count: u64) -> Vec<Vec<usize>> {
    let count = usize::try_from(count).expect("at most MAX_SHARDS");
    let mut order: Vec<usize> = (0..work.len()).collect();
    order.sort_by(|&a, &b| work[b].cmp(&work[a]).then(a.cmp(&b)));
    let mut load = vec![0u128; count];
    let mut slices = vec![Vec::new(); count];
    for point in order {
        let lightest = (0..count)
            .min_by_key(|&s| (load[s], s))
            .expect("at least one shard");
        // Every point costs something, so empty points still spread out.
        load[lightest] += work[point].max(1);
        slices[lightest].push(point);
    }
    for slice in &mut slices {
        slice.sort_unstable();
    }
    slices
}

/// Checks what a part says of itself before anything is sized from it: its
/// shard within 1 to [`MAX_SHARDS`], its grid within the most points a sweep
/// may have, its points within the grid.
pub fn check_header(part: &Part) -> Result<(), FieldError> {
    let Shard { index, count } = part.shard;
    if count == 0 || count > MAX_SHARDS || index >= count {
        return Err(
            format!("shard {index}/{count}: expected I/N with 0 ≤ I < N ≤ {MAX_SHARDS}").into(),
        );
    }
    let grid = super::Grid::from_spec(&part.identity.grid)?;
    if let Some(point) = part.points.iter().find(|p| p.point >= grid.points()) {
        return Err(format!(
            "point {} is outside the grid of {}",
            point.point,
            grid.points()
        )
        .into());
    }
    Ok(())
}

/// The parts' identity and every point's result in order, once each; or
/// why the parts do not make one whole sweep.
pub fn merge(parts: Vec<(PathBuf, Part)>) -> Result<(Identity, Vec<PointResult>), FieldError> {
    let Some((first_path, first)) = parts.first() else {
        return Err("no parts to merge".into());
    };
    for (path, part) in &parts {
        check_header(part).map_err(|err| format!("{}: {err}", path.display()))?;
    }
    let identity = first.identity.clone();
    let count = first.shard.count;
    let mut seen: Vec<Option<PathBuf>> = vec![None; usize::try_from(count).unwrap_or(0)];
    for (path, part) in &parts {
        if let Some(difference) = identity.difference(&part.identity) {
            return Err(format!(
                "{} is not part of the same sweep as {}: it has {difference}",
                path.display(),
                first_path.display()
            )
            .into());
        }
        if part.shard.count != count {
            return Err(format!(
                "{} is shard {} but {} is shard {}: the sweep was split two ways",
                path.display(),
                part.shard,
                first_path.display(),
                first.shard
            )
            .into());
        }
        let slot = usize::try_from(part.shard.index)
            .ok()
            .and_then(|i| seen.get_mut(i))
            .ok_or_else(|| format!("{}: shard {} is out of range", path.display(), part.shard))?;
        if let Some(other) = slot {
            return Err(format!(
                "shard {} is given twice: {} and {}",
                part.shard,
                other.display(),
                path.display()
            )
            .into());
        }
        *slot = Some(path.clone());
    }
    let missing: Vec<String> = seen
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_none())
        .map(|(i, _)| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "missing shard{} {} of {count}: run them (resuming skips the shards already complete), then merge again",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        ).into());
    }
    let total = identity.points();
    let mut points: Vec<Option<PointResult>> = (0..total).map(|_| None).collect();
    for (path, part) in parts {
        for result in part.points {
            let slot = points.get_mut(result.point).ok_or_else(|| {
                format!(
                    "{}: point {} is outside the grid of {total}",
                    path.display(),
                    result.point
                )
            })?;
            if slot.is_some() {
                return Err(
                    format!("{}: point {} is in two parts", path.display(), result.point).into(),
                );
            }
            *slot = Some(result);
        }
    }
    let points: Vec<PointResult> = points
        .into_iter()
        .enumerate()
        .map(|(i, p)| p.ok_or_else(|| format!("no part holds point {i}")))
        .collect::<Result<_, _>>()?;
    Ok((identity, points))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_balances_work_and_covers_every_point_once() {
        let work: Vec<u128> = (0..37).map(|i| (i * 7919 % 101) as u128).collect();
        let slices = partition(&work, 5);
        let mut all: Vec<usize> = slices.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..37).collect::<Vec<_>>());
        let loads: Vec<u128> = slices
            .iter()
            .map(|s| s.iter().map(|&p| work[p].max(1)).sum())
            .collect();
        let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        // Longest-first greedy: no shard exceeds another by more than the largest point.
        assert!(max - min <= *work.iter().max().unwrap(), "{loads:?}");
    }

    #[test]
    fn shard_arguments() {
        assert_eq!(
            "3/8".parse(),
            Ok(ShardArg {
                index: Some(3),
                count: 8
            })
        );
        assert_eq!(
            "auto/8".parse(),
            Ok(ShardArg {
                index: None,
                count: 8
            })
        );
        for bad in ["8/8", "1", "0/0", "a/2", "-1/2"] {
            assert!(bad.parse::<ShardArg>().is_err(), "{bad}");
        }
        let env = |name: &str| (name == "SLURM_ARRAY_TASK_ID").then(|| "2".to_string());
        let auto = ShardArg {
            index: None,
            count: 4,
        };
        assert_eq!(auto.resolve(env), Ok(Shard { index: 2, count: 4 }));
        let far = |_: &str| Some("4".to_string());
        assert!(
            auto.resolve(far)
                .unwrap_err()
                .to_string()
                .contains("--array=0-3")
        );
        assert!(
            auto.resolve(|_| None)
                .unwrap_err()
                .to_string()
                .contains("JOB_COMPLETION_INDEX")
        );
    }
}
