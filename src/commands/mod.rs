//! The subcommands, one file each: the only code besides `main` that prints
//! or writes files. What they share — the results folder, warnings, the
//! progress bar, the work limits and printing a result — is here.

mod check;
mod import;
mod live;
mod run;
mod size;
mod sweep;
mod validate;

use std::io::{IsTerminal, Write};
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

pub use self::check::check;
pub use self::import::import;
pub use self::live::live;
pub use self::run::run;
pub use self::size::size;
pub use self::sweep::{merge, sweep};
pub use self::validate::validate;
use crate::cli::{Format, Limits};
use crate::colour;
use crate::scenario::{Backend, Scenario};

/// What a run of a scenario would take, estimated before any work.
struct Work {
    /// Requests decided, every attempt and replication counted.
    requests: u128,
    /// Memory it would need.
    memory: crate::memory::Estimate,
    /// A workload whose sources offer no request at all (a burst of 0, a
    /// trace with no row in the run), which a run refuses.
    silent: Option<String>,
}

/// Estimates the work of running `scenario` with `replications`.
fn work(scenario: &Scenario, replications: u64, charts: bool) -> Result<Work> {
    let mut total: u128 = 0;
    let mut per_workload = Vec::with_capacity(scenario.workloads.len());
    let mut keys_per_workload = Vec::with_capacity(scenario.workloads.len());
    let mut silent = None;
    let mut sorting: u128 = 0;
    for workload in &scenario.workloads {
        let (mut requests, mut keys): (u128, u128) = (0, 0);
        for source in workload.sources() {
            sorting += u128::from(
                source
                    .sort_bytes(scenario.duration, &scenario.base_dir)
                    .map_err(anyhow::Error::msg)?,
            );
            requests += source
                .estimated_arrivals(scenario.duration, &scenario.base_dir)
                .map_err(anyhow::Error::msg)?;
            keys += u128::from(
                source
                    .keys(scenario.duration, &scenario.base_dir)
                    .map_err(anyhow::Error::msg)?,
            );
        }
        keys_per_workload.push(if workload.is_keyed() { keys } else { 0 });
        let runs = if workload.is_stochastic() {
            u128::from(replications)
        } else {
            1
        };
        // Every attempt is decided: a request may come back max_attempts times.
        let attempts = workload
            .retry
            .map_or(1, |retry| u128::from(retry.max_attempts));
        total += requests * runs * attempts;
        // Estimates of rate sources count one more than they can offer, so
        // only a workload that cannot offer any is zero.
        if requests == 0 && silent.is_none() {
            silent = Some(workload.name.clone());
        }
        per_workload.push(requests);
    }
    let mut memory = crate::memory::estimate(
        scenario,
        replications,
        charts,
        &per_workload,
        &keys_per_workload,
    );
    memory.sorting = sorting;
    Ok(Work {
        requests: total,
        memory,
        silent,
    })
}

/// Refuses, before any work, a run of more than `max_requests` requests or
/// one that would need more than `max_memory` bytes.
fn check_work(scenario: &Scenario, replications: u64, limits: Limits, charts: bool) -> Result<()> {
    let Limits {
        max_requests,
        max_memory,
    } = limits;
    let Work {
        requests: total,
        memory,
        ..
    } = work(scenario, replications, charts)?;
    if total > u128::from(max_requests) {
        bail!(
            "{}: this would simulate about {total} requests (every attempt of clients that retry), more than --max-requests {max_requests}; shorten the run, lower the rates, or raise --max-requests if that much is intended",
            scenario.path.display()
        );
    }
    if memory.total() > u128::from(max_memory) {
        use crate::memory::words;
        bail!(
            "{}: this would need about {} of memory ({} for timelines at a {} bucket, {} for the rolling windows of the limiters' worst cases, {} for replications, {} for state per client key, {} for clients that retry, {} for sorting traces out of order, {} for the figures of {} runs), more than --max-memory {}; use a coarser metrics.bucket, fewer replications, fewer clients, fewer attempts or --no-charts, sort the traces, or raise --max-memory if the machine has it",
            scenario.path.display(),
            words(memory.total()),
            words(memory.timelines),
            scenario.metrics.bucket,
            words(memory.rings),
            words(memory.replications),
            words(memory.keys),
            words(memory.retries),
            words(memory.sorting),
            words(memory.runs),
            scenario.workloads.len() * scenario.limiters.len(),
            words(u128::from(max_memory))
        );
    }
    Ok(())
}

/// The scenario in front of a backend of `capacity` (its limiters built
/// anew for it), or as it is when it has a capacity of its own; an error
/// when it has neither.
fn with_capacity(scenario: Scenario, capacity: Option<NonZeroU64>) -> Result<Scenario> {
    let backend = match (capacity, scenario.backend) {
        (None, Some(_)) => return Ok(scenario),
        (Some(capacity), backend) => Backend {
            capacity_per_sec: capacity,
            queue: backend.and_then(|b| b.queue),
        },
        (None, None) => bail!(
            "{}: no [backend] capacity to check against; add `[backend] capacity = N` (requests per second) or pass --capacity N",
            scenario.path.display()
        ),
    };
    let path = scenario.path.clone();
    scenario
        .with_backend(backend)
        .map_err(anyhow::Error::msg)
        .with_context(|| {
            format!(
                "{} with --capacity {}",
                path.display(),
                backend.capacity_per_sec
            )
        })
}

/// A progress bar on standard error when it is a terminal and the work has
/// several parts; hidden otherwise.
fn progress_bar(units: u64, quiet: bool, what: &str) -> ProgressBar {
    if quiet || units < 2 || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(units);
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{elapsed:>4}} [{{bar:40}}] {{pos}}/{{len}} {what} {{eta}} left"
    )) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// The scenario at `path`, its warnings shown.
fn load(path: &Path) -> Result<Scenario> {
    let scenario = crate::scenario::load(path)?;
    warn(&scenario.warnings);
    Ok(scenario)
}

/// `--out DIR`, or `output/<name>` in the current directory.
fn results_folder(out: Option<&Path>, name: &str) -> PathBuf {
    out.map_or_else(|| PathBuf::from("output").join(name), Path::to_path_buf)
}

/// Warnings go to standard error even with `--quiet`: a trace's dropped rows
/// or a tidied leftover change what the results mean.
fn warn(warnings: &[String]) {
    for warning in warnings {
        eprintln!(
            "{}{}",
            colour::warning_prefix(),
            crate::input::escape_controls(warning)
        );
    }
}

/// A table for standard output, its verdicts coloured when that is wanted.
fn coloured(table: String) -> String {
    if colour::stdout() {
        colour::verdicts(&table)
    } else {
        table
    }
}

/// Prints a command's result on standard output, unless `--quiet`.
fn print(quiet: bool, text: &str) -> Result<()> {
    if !quiet {
        std::io::stdout().write_all(text.as_bytes())?;
    }
    Ok(())
}

/// Prints results written to `target` in `format`, unless `--quiet`: the
/// table (coloured when wanted) and where the files are, or the JSON or CSV
/// exactly as written.
fn print_results(
    quiet: bool,
    format: Format,
    target: &Path,
    table: String,
    json: &str,
    csv: &str,
) -> Result<()> {
    if quiet {
        return Ok(());
    }
    let text = match format {
        Format::Table => format!("{}results in {}\n", coloured(table), target.display()),
        Format::Json => json.to_string(),
        Format::Csv => csv.to_string(),
    };
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(())
}
