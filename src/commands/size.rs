//! `burstsim size`: the largest safe parameter per limiter, added to the results folder.

use std::num::NonZeroU64;

use anyhow::Result;

use super::{load, print_results, progress_bar, results_folder, warn, with_capacity};
use crate::chart;
use crate::cli::SizeArgs;
use crate::output::Staging;
use crate::report::{html, sizing};
/// `burstsim size`.
pub fn size(args: &SizeArgs) -> Result<()> {
    let scenario = load(&args.scenario)?;
    let scenario = with_capacity(scenario, args.capacity)?;
    let capacity = scenario.backend.map_or(0, |b| b.capacity_per_sec.get());
    let replications = args
        .replications
        .map_or(scenario.replications, NonZeroU64::get);
    crate::memory::check(
        &scenario,
        replications,
        false,
        args.limits.max_requests,
        args.limits.max_memory,
    )?;
    let bar = progress_bar(
        Some(scenario.limiters.len() as u64),
        args.quiet,
        "limiters sized",
    );
    let report = crate::size::size(&scenario, capacity, replications, &|| bar.inc(1));
    bar.finish_and_clear();
    let report = report?;
    let json = serde_json::to_string_pretty(&report)? + "\n";
    let sizing_csv = sizing::render_sizing_csv(&report);
    let target = results_folder(args.out.as_deref(), &scenario.name);
    let chart = chart::render_sizing(&report)?;
    // Added to the run's results, if any, through the same staging and commit.
    let staging = Staging::update(&target)?;
    warn(staging.notes());
    staging.write("sizing.json", &json)?;
    staging.write("sizing.csv", &sizing_csv)?;
    staging.write("charts/sizing.svg", &chart.svg)?;
    // The run's report, if there is one, gains (or renews) its sizing
    // section: at the commit, from the run's results there then.
    let table = sizing::render_sizing_table(&report);
    let section = html::sizing_section(
        &sizing::sizing_rows(&report),
        &sizing::legend(&report),
        sizing::together_rows(&report).as_ref(),
        &chart,
    );
    staging.commit_with(|staging| {
        if let Ok(page) = std::fs::read_to_string(staging.path().join("report.html"))
            && let Some(page) = html::with_sizing(&page, &section)
        {
            staging.write("report.html", &page)?;
        }
        Ok(())
    })?;
    print_results(args.quiet, args.format, &target, table, &json, &sizing_csv)
}
