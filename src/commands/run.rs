//! `burstsim run`: simulate, then write the results folder and print the table.

use std::num::NonZeroU64;

use anyhow::Result;

use super::{load, print_results, progress_bar, results_folder, warn};
use crate::cli::RunArgs;
use crate::job;
use crate::report::table;
/// `burstsim run`.
pub fn run(args: &RunArgs) -> Result<()> {
    if args.shard.is_some() {
        return super::shard::shard(args);
    }
    let bar = progress_bar(None, args.quiet, "workload runs");
    let mut scenario = match &args.part {
        None => load(&args.scenario)?,
        Some(dir) => super::partition::load_part(&args.scenario, dir)?,
    };
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    let replications = args
        .replications
        .map_or(scenario.replications, NonZeroU64::get);
    let mut name = scenario.name.clone();
    if let Some(part) = &scenario.part {
        let (dir, identity) = (&part.dir, &part.file.identity);
        if identity.seed != scenario.seed {
            anyhow::bail!(
                "{}: split with seed {}, and this run's is {}; partition this scenario again",
                dir.join("part.json").display(),
                identity.seed,
                scenario.seed
            );
        }
        if replications > 1 {
            anyhow::bail!(
                "--part {}: a part holds the arrivals of one replication, and this run asks for {replications}",
                dir.display()
            );
        }
        name = format!("{name}-part-{}-of-{}", part.file.index, identity.parts);
        use crate::limiter::RateLimiter as _;
        for named in scenario
            .limiters
            .iter()
            .filter(|l| !l.limiter.keys_matter())
        {
            eprintln!(
                "{}limiter {:?} is not kept per key: what it lets through of a part is not its share of the whole (a split by key is exact only for limits per key)",
                crate::colour::warning_prefix(),
                named.name
            );
        }
    }
    let plan = job::Plan {
        replications,
        charts: !args.no_charts,
        decisions: args.decisions,
        stats: args.stats,
        max_requests: args.limits.max_requests,
        max_memory: args.limits.max_memory,
    };
    let target = results_folder(args.out.as_deref(), &name);
    let done = job::run(&scenario, &plan, &target, &warn, &bar)?;
    bar.finish_and_clear();
    if let Some(line) = &done.throughput {
        eprintln!("{line}");
    }
    let runs = &done.summary.runs;
    let verdict = crate::check::Verdict::of(runs);
    let tables = [
        Some(table::render_table(runs)),
        table::render_closed_loop(runs),
        table::render_outages(runs),
    ];
    let mut tables = tables
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n\n")
        + "\n";
    for line in crate::report::log_comparison(runs)
        .iter()
        .chain(&done.disagreements)
    {
        tables += &format!("{line}\n");
    }
    match &scenario.part {
        // The backend takes every part's traffic: a part's alone says
        // nothing of it, nor which limiter to choose.
        Some(part) => {
            tables += &format!(
                "part {} of {}: the requests of this part's keys alone; no verdict on the backend or recommendation, which need every part's traffic\n",
                part.file.index, part.file.identity.parts
            );
        }
        None => tables.extend(verdict.as_ref().map(verdict_lines)),
    }
    let printed = print_results(
        args.quiet,
        args.format,
        &target,
        tables,
        &done.json,
        &done.summary_csv,
    );
    // The process ends next, and the system takes its memory back at once:
    // a log's key tables, tens of megabytes, took 10 ms to free page by page.
    std::mem::forget(scenario);
    printed
}

/// The run in one line, as `check` judges it: `3 of 28 runs exceed the
/// backend's 150/s`, or that all stay within it; then a line per cause,
/// naming its limiters and the fix, the recommendation, the runs that turn
/// away traffic their own limit allows, and the cost at the peak.
pub(super) fn verdict_lines(verdict: &crate::check::Verdict) -> String {
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
