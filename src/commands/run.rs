//! `burstsim run`: simulate, then write the results folder and print the table.

use std::num::NonZeroU64;

use anyhow::{Context as _, Result};

use super::{Bar, load, print_results, results_folder, warn};
use crate::cli::RunArgs;
use crate::output::{DecisionFiles, Staging};
use crate::report::{self, csv, html, table};
use crate::{chart, replicate, sim};
/// `burstsim run`.
pub fn run(args: &RunArgs) -> Result<()> {
    let bar = Bar::new(args.quiet, "workload runs");
    let mut scenario = load(&args.scenario)?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    let replications = args
        .replications
        .map_or(scenario.replications, NonZeroU64::get);
    // Before any work, the decisions pass included.
    crate::memory::check(
        &scenario,
        replications,
        !args.no_charts,
        args.limits.max_requests,
        args.limits.max_memory,
    )?;
    let target = results_folder(args.out.as_deref(), &scenario.name);
    let staging = Staging::new(&target)?;
    warn(staging.notes());
    let options = if args.no_charts {
        sim::Options::default()
    } else {
        sim::for_charts(&scenario)
    };
    let started = std::time::Instant::now();
    let results = replicate::simulate_replicated(&scenario, &options, replications, &bar)?;
    bar.finish();
    if args.stats {
        eprintln!("{}", replicate::throughput(&results, started.elapsed()));
    }
    if args.decisions {
        // Decisions are replication 0's, streamed in a pass of their own.
        let mut files = DecisionFiles::create(staging.path(), &scenario)?;
        sim::simulate(&scenario, &sim::Options::default(), Some(&mut files))?;
        files.finish()?;
    }
    let summary = results.summary();
    let verdict = crate::check::Verdict::of(&summary.runs);
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
            &html::render_report(&results, &drawn, &charts, verdict.as_ref()),
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
    tables.extend(verdict.as_ref().map(verdict_lines));
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
/// backend's 150/s`, or that all stay within it; then a line per cause,
/// naming its limiters and the fix, the recommendation, the runs that turn
/// away traffic their own limit allows, and the cost at the peak.
fn verdict_lines(verdict: &crate::check::Verdict) -> String {
    let (capacity, runs) = (verdict.capacity, verdict.runs);
    let mut text = match verdict.failing {
        0 => format!("ok: all {runs} runs stay within the backend's {capacity}/s\n"),
        n => format!(
            "{n} of {runs} runs exceed the backend's {capacity}/s or make it drop requests\n"
        ),
    };
    for (cause, limiters) in &verdict.causes {
        text += &format!(
            "  {} ({}): {}\n",
            cause.name(),
            limiters.join(", "),
            cause.explanation()
        );
    }
    match &verdict.recommendation {
        Some(best) => text += &format!("  recommended: {}: {}\n", best.limiter, best.words()),
        None => {
            text += "  recommended: none of these holds the backend on every workload (the causes above say why); `burstsim size` sizes those a setting can fix\n"
        }
    }
    for run in &verdict.under_limit {
        text += &format!(
            "  below its limit under overload: {} on {} admits {} while demand exceeds it\n",
            run.limiter,
            run.workload,
            crate::report::values::under_overload(run)
        );
    }
    for run in &verdict.peak_costs {
        text += &format!(
            "  cost at the peak: {} turns away {}\n",
            run.limiter,
            crate::check::peak_cost_words(run)
        );
    }
    text
}
