//! `burstsim sweep` and `burstsim merge`: a scenario at every point of a
//! grid, on every core or as one shard of many; and shards put back together.

use std::io::Read as _;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use rayon::prelude::*;

use super::{print, print_results, progress_bar, results_folder, warn};
use crate::cli::{MergeArgs, SweepArgs, SweepOutput};
use crate::memory::Work;
use crate::output::Staging;
use crate::report::sweep as render;
use crate::scenario::Scenario;
use crate::sweep::results::SweepResults;
use crate::sweep::shard::{self, Identity, Part, PointResult, Shard};
use crate::sweep::{Base, Grid, fingerprint};
use crate::{chart, replicate};

/// The file a shard writes in its folder.
const PART: &str = "sweep-part.json";
/// What one run's figures take while a sweep keeps them, and in its files.
const RESULT_BYTES: u128 = 8 << 10;
/// The largest part `merge` reads.
const MAX_PART_BYTES: u64 = 4 << 30;

/// `burstsim sweep`.
pub fn sweep(args: &SweepArgs) -> Result<()> {
    let path = &args.scenario;
    let text = crate::scenario::read(path)?;
    let scenario = crate::scenario::parse(&text, path)?;
    warn(&scenario.warnings);
    if args.zip && args.vary.is_empty() {
        bail!("--zip zips the --vary axes, and none is given");
    }
    let grid = if args.vary.is_empty() {
        Grid::from_scenario(&text, path)?.with_context(|| {
            format!(
                "{}: nothing to vary; give --vary PATH=VALUES (like --vary limiter.{}.threshold=50..200:25) or add [[sweep]] entries to the scenario",
                path.display(),
                scenario.limiters.first().map_or("NAME", |l| l.name.as_str())
            )
        })?
    } else {
        Grid::from_args(&args.vary, args.zip)
            .map_err(anyhow::Error::msg)
            .with_context(|| path.display().to_string())?
    };
    let identity = Identity {
        scenario: scenario.name.clone(),
        scenario_hash: fingerprint(text.as_bytes()),
        seed: args.seed.unwrap_or(scenario.seed),
        replications: args
            .replications
            .map_or(scenario.replications, NonZeroU64::get),
        burstsim: env!("CARGO_PKG_VERSION").into(),
        grid: grid.spec(),
    };
    let base = Base::new(text, path)?;
    let shard = args
        .shard
        .map(|s| s.resolve(|name| std::env::var(name).ok()))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let target = match (&args.output.out, shard) {
        (Some(out), _) => out.clone(),
        (None, None) => results_folder(None, &scenario.name),
        (None, Some(s)) => results_folder(
            None,
            &format!("{}-shard-{}-of-{}", scenario.name, s.index, s.count),
        ),
    };
    if let Some(shard) = shard
        && complete(&target, &identity, shard)
    {
        return print(
            args.output.quiet,
            &format!(
                "shard {shard} of this sweep is already complete in {}; skipped\n",
                target.display()
            ),
        );
    }
    // Every point checked, and the whole sweep's work estimated, before any is done.
    let point = |p: usize| -> Result<Scenario> {
        let mut scenario = base.at(&grid, p).map_err(anyhow::Error::msg)?;
        if let Some(seed) = args.seed {
            scenario.seed = seed;
        }
        Ok(scenario)
    };
    let replications = |scenario: &Scenario| {
        args.replications
            .map_or(scenario.replications, NonZeroU64::get)
    };
    // Axes that leave the workloads alone leave every point the scenario's
    // requests: a sweep too large is refused from the scenario alone, before
    // any point is built (building 10^5 points of a large scenario takes
    // minutes).
    if grid.leaves_requests_alone() {
        let base = Work::of(&scenario, replications(&scenario), false)?;
        let share = match shard {
            Some(s) => grid.points() as u128 / u128::from(s.count),
            None => grid.points() as u128,
        };
        check_requests(base.requests * share, share, args, path)?;
    }
    let estimates: Vec<Result<Work>> = (0..grid.points())
        .into_par_iter()
        .map(|p| {
            let work = point(p).and_then(|s| Ok(Work::of(&s, replications(&s), false)?))?;
            if let Some(workload) = &work.silent {
                bail!(
                    "{}: at {}: workload {workload:?} offers no requests; every point is checked before any runs",
                    path.display(),
                    grid.named(p)
                );
            }
            Ok(work)
        })
        .collect();
    let estimates: Vec<Work> = estimates.into_iter().collect::<Result<_>>()?;
    let units: Vec<u128> = estimates
        .iter()
        .map(|w| w.requests.max(1) * scenario.limiters.len().max(1) as u128)
        .collect();
    let mine: Vec<usize> = match shard {
        Some(s) => shard::partition(&units, s.count)[s.index as usize].clone(),
        None => (0..grid.points()).collect(),
    };
    let runs_per_point = (scenario.workloads.len() * scenario.limiters.len()) as u128;
    check_sweep(&estimates, &mine, runs_per_point, args, path)?;
    let bar = progress_bar(Some(mine.len() as u64), args.output.quiet, "points");
    let results: Vec<Result<PointResult>> = mine
        .par_iter()
        .map(|&p| {
            let scenario = point(p)?;
            let results = replicate::simulate_replicated(
                &scenario,
                replicate::Keep::Figures,
                replications(&scenario),
                None,
                &(),
            )
            .with_context(|| format!("{}: at {}", path.display(), grid.named(p)))?;
            bar.inc(1);
            Ok(PointResult {
                point: p,
                runs: results.summary().runs,
            })
        })
        .collect();
    bar.finish_and_clear();
    let points: Vec<PointResult> = results.into_iter().collect::<Result<_>>()?;
    match shard {
        Some(shard) => write_part(&target, identity, shard, points, args.output.quiet),
        None => write_sweep(&target, &identity, &points, &args.output),
    }
}

/// Refuses a sweep, or a shard of one, bigger than the limits.
fn check_sweep(
    estimates: &[Work],
    mine: &[usize],
    runs_per_point: u128,
    args: &SweepArgs,
    path: &Path,
) -> Result<()> {
    let requests: u128 = mine.iter().map(|&p| estimates[p].requests).sum();
    check_requests(requests, mine.len() as u128, args, path)?;
    // Points run side by side, one per core; every run's figures are kept
    // until the end.
    let at_once = rayon::current_num_threads().min(mine.len()).max(1) as u128;
    let running = mine
        .iter()
        .map(|&p| estimates[p].memory.total())
        .max()
        .unwrap_or(0)
        * at_once;
    let kept = mine.len() as u128 * runs_per_point * RESULT_BYTES;
    let memory = running + kept;
    if memory > u128::from(args.limits.max_memory) {
        bail!(
            "{}: this sweep would need about {} of memory ({} for {at_once} points at once, {} for the figures of {} runs), more than --max-memory {}; split it with --shard I/N, or raise --max-memory if the machine has it",
            path.display(),
            crate::memory::words(memory),
            crate::memory::words(running),
            crate::memory::words(kept),
            mine.len() as u128 * runs_per_point,
            crate::memory::words(u128::from(args.limits.max_memory))
        );
    }
    Ok(())
}

/// Refuses `requests` over `points` points beyond --max-requests.
fn check_requests(requests: u128, points: u128, args: &SweepArgs, path: &Path) -> Result<()> {
    let max_requests = args.limits.max_requests;
    if requests > u128::from(max_requests) {
        bail!(
            "{}: this sweep would simulate about {requests} requests over {points} points, more than --max-requests {max_requests}; use fewer points or shorter runs, split it with --shard I/N, or raise --max-requests if that much is intended",
            path.display(),
        );
    }
    Ok(())
}

/// Whether `target` already holds this shard of this sweep, complete.
fn complete(target: &Path, identity: &Identity, shard: Shard) -> bool {
    let path = target.join(PART);
    crate::input::open_regular(&path)
        .ok()
        .and_then(|(file, _)| read_part(&path, file).ok())
        .is_some_and(|part| part.identity == *identity && part.shard == shard)
}

/// Reads a part as a stream: a file that is not JSON (a gigabyte of NUL
/// bytes, say) is refused at its first bytes, and the text is never held
/// whole. Its header is checked before its points are used.
fn read_part(path: &Path, file: std::fs::File) -> Result<Part> {
    let reader = std::io::BufReader::with_capacity(1 << 16, file.take(MAX_PART_BYTES));
    let part: Part = serde_json::from_reader(reader).with_context(|| {
        format!(
            "{} is not a part of a sweep written by burstsim {}",
            path.display(),
            env!("CARGO_PKG_VERSION")
        )
    })?;
    shard::check_header(&part).map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?;
    Ok(part)
}

/// Merging holds every part's figures at once: about this many bytes of
/// memory for each byte of JSON.
const MERGE_BYTES_PER_PART_BYTE: u128 = 4;

fn write_part(
    target: &Path,
    identity: Identity,
    shard: Shard,
    points: Vec<PointResult>,
    quiet: bool,
) -> Result<()> {
    let count = points.len();
    let part = Part {
        identity,
        shard,
        points,
    };
    let staging = Staging::new(target)?;
    warn(staging.notes());
    staging.write(PART, &(serde_json::to_string(&part)? + "\n"))?;
    staging.commit()?;
    print(
        quiet,
        &format!(
            "shard {shard}: {count} points in {}\n",
            target.join(PART).display()
        ),
    )
}

/// Writes a whole sweep's results into `target`, beside any run's there.
fn write_sweep(
    target: &Path,
    identity: &Identity,
    points: &[PointResult],
    output: &SweepOutput,
) -> Result<()> {
    let grid = Grid::from_spec(&identity.grid).map_err(anyhow::Error::msg)?;
    let sweep = SweepResults {
        identity,
        grid,
        points,
    };
    let json = render::render_json(&sweep);
    let csv = render::render_csv(&sweep);
    let table = render::render_table(&sweep);
    let staging = Staging::update(target)?;
    warn(staging.notes());
    staging.write("sweep.json", &json)?;
    staging.write("sweep.csv", &csv)?;
    if !output.no_charts {
        let charts = chart::render_sweep(&sweep)?;
        for chart in &charts {
            staging.write(&format!("charts/{}", chart.file), &chart.svg)?;
        }
        // The report gains its sweep section at the commit, from the
        // results there then.
        let section = render::section(&sweep, &charts);
        staging.commit_with(|staging| {
            let page = match std::fs::read_to_string(staging.path().join("report.html")) {
                Ok(report) => render::with_section(&report, &section),
                Err(_) => render::page(&sweep, &section),
            };
            staging.write("report.html", &page)
        })?;
    } else {
        staging.commit()?;
    }
    print_results(output.quiet, output.format, target, table, &json, &csv)
}

/// `burstsim merge`.
pub fn merge(args: &MergeArgs) -> Result<()> {
    if let Some(partition) = &args.partition {
        return super::shard::merge(args, partition);
    }
    // Every part opened and its size known before any is read.
    let mut opened = Vec::with_capacity(args.parts.len());
    let mut bytes: u128 = 0;
    for given in &args.parts {
        let path: PathBuf = if given.is_dir() {
            given.join(PART)
        } else {
            given.clone()
        };
        let (file, meta) = crate::input::open_regular(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if meta.len() > MAX_PART_BYTES {
            bail!(
                "{}: {} bytes, more than the {MAX_PART_BYTES} a part may hold",
                path.display(),
                meta.len()
            );
        }
        bytes += u128::from(meta.len());
        opened.push((path, file));
    }
    let memory = bytes * MERGE_BYTES_PER_PART_BYTE;
    if memory > u128::from(args.max_memory) {
        bail!(
            "these parts hold {} and would need about {} of memory to merge, more than --max-memory {}; raise --max-memory if the machine has it",
            crate::memory::words(bytes),
            crate::memory::words(memory),
            crate::memory::words(u128::from(args.max_memory))
        );
    }
    let mut parts = Vec::with_capacity(opened.len());
    for (path, file) in opened {
        let part = read_part(&path, file)?;
        parts.push((path, part));
    }
    let (identity, points) = shard::merge(parts).map_err(anyhow::Error::msg)?;
    let target = results_folder(args.output.out.as_deref(), &identity.scenario);
    write_sweep(&target, &identity, &points, &args.output)
}
