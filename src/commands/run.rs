//! `burstsim run`: simulate, then write the results folder and print the table.

use std::num::NonZeroU64;

use anyhow::{Context as _, Result};

use super::{check_work, load, print_results, progress_bar, results_folder, warn};
use crate::cli::RunArgs;
use crate::output::{DecisionFiles, Staging};
use crate::report::{self, csv, html, table};
use crate::results::{Results, RunResult};
use crate::{chart, replicate, sim};
/// `burstsim run`.
pub fn run(args: &RunArgs) -> Result<()> {
    let mut scenario = load(&args.scenario)?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    let replications = args
        .replications
        .map_or(scenario.replications, NonZeroU64::get);
    // Before any work, the decisions pass included.
    check_work(&scenario, replications, args.limits, !args.no_charts)?;
    let target = results_folder(args.out.as_deref(), &scenario.name);
    let staging = Staging::new(&target)?;
    warn(staging.notes());
    if args.decisions {
        // Decisions are replication 0's, streamed in a pass of their own.
        let mut files = DecisionFiles::create(staging.path(), &scenario)?;
        sim::simulate(&scenario, &sim::Options::default(), Some(&mut files))?;
        files.finish()?;
    }
    let options = if args.no_charts {
        sim::Options::default()
    } else {
        sim::for_charts(&scenario)
    };
    let started = std::time::Instant::now();
    let bar = progress_bar(
        replicate::units(&scenario, replications),
        args.quiet,
        "workload runs",
    );
    let results =
        replicate::simulate_replicated(&scenario, &options, replications, &|| bar.inc(1))?;
    bar.finish_and_clear();
    if args.stats {
        eprintln!("{}", run_stats(&results, started.elapsed()));
    }
    let summary = results.summary();
    let json = report::render_json(&summary);
    let summary_csv = csv::render_summary(&summary.runs);
    staging.write("summary.json", &json)?;
    staging.write("summary.csv", &summary_csv)?;
    csv::write_timeline(results.runs(), staging.create("timeline.csv")?)
        .context("writing timeline.csv")?;
    if !args.no_charts {
        // The charts and the report's tables draw the same selection.
        let drawn = results.drawn();
        let charts = chart::render_charts(&drawn)?;
        for chart in &charts {
            staging.write(&format!("charts/{}", chart.file), &chart.svg)?;
        }
        staging.write(
            "report.html",
            &html::render_report(&results, &drawn, &charts),
        )?;
    }
    staging.commit()?;
    let tables = [
        Some(table::render_table(&summary.runs)),
        table::render_closed_loop(&summary.runs),
        table::render_outages(&summary.runs),
    ];
    let mut tables = tables
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n\n")
        + "\n";
    tables.extend(verdict(&summary.runs));
    print_results(
        args.quiet,
        args.format,
        &target,
        tables,
        &json,
        &summary_csv,
    )
}

/// The run in one line, as `check` judges it: `3 of 28 runs exceed the
/// backend's 150/s`, or that all stay within it; none without a backend.
fn verdict(runs: &[crate::summary::RunSummary]) -> Option<String> {
    let capacity = runs.iter().find_map(|run| run.backend.as_ref())?.capacity;
    let failing = runs
        .iter()
        .filter(|run| !crate::check::failures(run).is_empty())
        .count();
    Some(match failing {
        0 => format!(
            "ok: all {} runs stay within the backend's {capacity}/s\n",
            runs.len()
        ),
        n => format!(
            "{n} of {} runs exceed the backend's {capacity}/s or make it drop requests\n",
            runs.len()
        ),
    })
}

/// "simulated 100000000 requests (100000000 decisions) in 1.90 s: …; peak memory 12.8 MB"
fn run_stats(results: &Results, elapsed: std::time::Duration) -> String {
    // Every replication's requests count: mean × count is their exact sum.
    let total = |run: &RunResult| match &run.summary.replications {
        Some(r) => (r.offered.mean * r.count as f64).round() as u64,
        None => run.summary.offered,
    };
    let decisions: u64 = results.runs().map(total).sum();
    // Every limiter of a workload is offered the same requests (open loop).
    let requests: u64 = results
        .workloads
        .iter()
        .filter_map(|w| w.runs.first())
        .map(total)
        .sum();
    let secs = elapsed.as_secs_f64();
    let peak = peak_memory_kb().map_or(String::new(), |kb| {
        format!("; peak memory {:.1} MB", kb as f64 / 1024.0)
    });
    format!(
        "simulated {requests} requests ({decisions} decisions) in {secs:.2} s: {:.1} M requests/s, {:.1} M decisions/s{peak}",
        requests as f64 / secs / 1e6,
        decisions as f64 / secs / 1e6
    )
}

/// The process's peak resident memory, where the system tells it (Linux).
fn peak_memory_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
