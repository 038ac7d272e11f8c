//! The subcommands, one file each: the only code besides `main` that prints
//! or writes files. What they share — the results folder, warnings, the
//! progress bar, the work limits and printing a result — is here.

mod check;
mod import;
mod live;
mod partition;
mod probe;
mod run;
mod shard;
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
pub use self::partition::partition;
pub use self::probe::{export, probe};
pub use self::run::run;
pub use self::size::size;
pub use self::sweep::{merge, sweep};
pub use self::validate::validate;
use crate::cli::Format;
use crate::colour;
use crate::scenario::{Backend, Scenario};

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
/// several parts; hidden otherwise. `units` is None when the work learns
/// its length itself ([`crate::replicate::Progress::start`]).
fn progress_bar(units: Option<u64>, quiet: bool, what: &str) -> ProgressBar {
    if quiet || units.is_some_and(|n| n < 2) || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(units.unwrap_or(0));
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

/// One row of decisions made outside the simulator: the scenario's limiter
/// it stands for, its name and how the description ends, and the decisions
/// (time, admitted) in time order.
type Decided<'a> = (&'a str, String, String, &'a [(crate::time::Nanos, bool)]);

/// Decisions made outside the simulator (a real Redis, a real gateway)
/// summarised as the results of a scenario of workload `workload` alone,
/// named `<scenario>-<suffix>`, with one limiter per row.
fn decided_results(
    scenario: &Scenario,
    workload: usize,
    suffix: &str,
    rows: &[Decided],
) -> Result<crate::results::Results> {
    let mut decided = scenario.clone();
    decided.name = format!("{}-{suffix}", scenario.name);
    decided.workloads = vec![scenario.workloads[workload].clone()];
    decided.limiters = rows
        .iter()
        .map(|(limiter, name, description, _)| {
            let base = scenario
                .limiters
                .iter()
                .find(|l| l.name == *limiter)
                .with_context(|| format!("no limiter {limiter:?}"))?;
            Ok(crate::scenario::NamedLimiter {
                name: name.clone(),
                description: format!("{} {description}", base.description),
                ..base.clone()
            })
        })
        .collect::<Result<_>>()?;
    let options = crate::sim::for_charts(&decided);
    let workload_name = decided.workloads[0].name.clone();
    let runs = decided
        .limiters
        .iter()
        .zip(rows)
        .map(|(named, (_, _, _, decisions))| {
            crate::sim::summarise(
                &decided,
                &options,
                named,
                &workload_name,
                decisions.iter().copied(),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let workloads = vec![crate::results::WorkloadResults::new(
        &decided.workloads[0],
        runs,
    )];
    Ok(crate::results::Results::new(
        &decided,
        options.curve,
        workloads,
    ))
}

/// Writes decided results as a run writes its own: summary.json, the
/// charts and report.html.
fn write_decided(
    staging: &crate::output::Staging,
    results: &crate::results::Results,
) -> Result<()> {
    let summary = results.summary();
    staging.write("summary.json", &crate::report::render_json(&summary))?;
    let drawn = results.drawn();
    let charts = crate::chart::render_charts(&drawn)?;
    for chart in &charts {
        staging.write(&format!("charts/{}", chart.file), &chart.svg)?;
    }
    staging.write(
        "report.html",
        &crate::report::html::render_report(
            results,
            &drawn,
            &charts,
            crate::check::Verdict::of(&summary.runs).as_ref(),
        ),
    )
}

/// The index of workload `name` (`--workload`), or an error naming the file.
fn named_workload(scenario: &Scenario, name: &str) -> Result<usize> {
    scenario
        .workloads
        .iter()
        .position(|w| w.name == name)
        .with_context(|| {
            format!(
                "--workload: no workload {name:?} in {}",
                scenario.path.display()
            )
        })
}
