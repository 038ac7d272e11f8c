//! One `burstsim run` of a loaded scenario, phase by phase: the work bound,
//! the results folder staged, the simulations (with the decisions recorded
//! as replication 0 runs), the files, charts and report, then the commit.
//! The command reads its arguments and prints; this does the rest.

use anyhow::{Context as _, Result};

use crate::chart;
use crate::check::Verdict;
use crate::memory;
use crate::output::{DecisionFiles, Staging};
use crate::replicate::{self, Keep, Progress};
use crate::report::{self, csv, html};
use crate::results::Results;
use crate::scenario::Scenario;
use crate::summary::Summary;

/// What a run is asked for, beyond the scenario.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Runs of each stochastic workload.
    pub replications: u64,
    /// Draw the charts and write report.html.
    pub charts: bool,
    /// Write every decision of replication 0 under `decisions/`.
    pub decisions: bool,
    /// Time the simulations for the `--stats` line.
    pub stats: bool,
    /// The work bound: requests over all runs.
    pub max_requests: u64,
    /// The work bound: estimated memory, in bytes.
    pub max_memory: u64,
}

/// A run's results, written and committed.
#[derive(Debug)]
pub struct Done {
    /// The figures of every run.
    pub summary: Summary,
    /// summary.json's text.
    pub json: String,
    /// summary.csv's text.
    pub summary_csv: String,
    /// With `stats`: requests and decisions a second, and peak memory.
    pub throughput: Option<String>,
    /// With `decisions`, for a log that says what its own limiter did: on
    /// how many requests each model and the log disagree, a line each.
    pub disagreements: Vec<String>,
}

/// Runs `scenario` as `plan` says into the results folder `target`:
/// refused before any work when over the plan's bounds; the staging
/// folder's `notes` (leftovers tidied) told as soon as it exists; every
/// file written in staging and committed at once at the end.
pub fn run(
    scenario: &Scenario,
    plan: &Plan,
    target: &std::path::Path,
    notes: &dyn Fn(&[String]),
    progress: &dyn Progress,
) -> Result<Done> {
    memory::check(
        scenario,
        plan.replications,
        plan.charts,
        plan.max_requests,
        plan.max_memory,
    )?;
    let staging = Staging::new(target)?;
    notes(staging.notes());
    let mut decisions = if plan.decisions {
        Some(DecisionFiles::create(staging.path(), scenario)?)
    } else {
        None
    };
    let keep = if plan.charts {
        Keep::Charts
    } else {
        Keep::Timeline
    };
    let started = std::time::Instant::now();
    let results = replicate::simulate_replicated(
        scenario,
        keep,
        plan.replications,
        decisions
            .as_mut()
            .map(|files| files as replicate::Decisions<'_>),
        progress,
    )?;
    let throughput = plan.stats.then(|| throughput(&results, started.elapsed()));
    let mut disagreements = Vec::new();
    if let Some(files) = decisions {
        for (workload, limiter, count) in files.disagreements(scenario) {
            disagreements.push(format!(
                "decisions/{workload}/{limiter}.csv: the model and the log's own limiter disagree on {count} requests (its log_admitted column)"
            ));
        }
        files.finish()?;
    }
    let (summary, json, summary_csv) = write(&results, plan.charts, &staging)?;
    staging.commit()?;
    Ok(Done {
        summary,
        json,
        summary_csv,
        throughput,
        disagreements,
    })
}

/// "simulated 100000000 requests (100000000 decisions) in 1.90 s: …; peak
/// memory 12.8 MB": what `results` took in `elapsed` (`run --stats`).
fn throughput(results: &Results, elapsed: std::time::Duration) -> String {
    // Every replication's requests count: mean × count is their exact sum.
    let total = |run: &crate::results::RunResult| match &run.summary.replications {
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
    let peak = crate::memory::peak_kb().map_or(String::new(), |kb| {
        format!("; peak memory {:.1} MB", kb as f64 / 1024.0)
    });
    format!(
        "simulated {requests} requests ({decisions} decisions) in {secs:.2} s: {:.1} M requests/s, {:.1} M decisions/s{peak}",
        requests as f64 / secs / 1e6,
        decisions as f64 / secs / 1e6
    )
}

/// Writes `results` into `staging`: summary.json, summary.csv,
/// timeline.csv and, with `charts`, the charts and report.html; the
/// summary and the two files' texts.
pub fn write(
    results: &Results,
    charts: bool,
    staging: &Staging,
) -> Result<(Summary, String, String)> {
    let summary = results.summary();
    let verdict = Verdict::of(&summary.runs);
    let json = report::render_json(&summary);
    let summary_csv = csv::render_summary(&summary.runs);
    staging.write("summary.json", &json)?;
    staging.write("summary.csv", &summary_csv)?;
    csv::write_timeline(results.runs(), staging.create("timeline.csv")?)
        .context("writing timeline.csv")?;
    if charts {
        // The charts and the report's tables draw the same selection.
        let drawn = results.drawn();
        let charts = chart::render_charts(&drawn)?;
        for chart in &charts {
            staging.write(&format!("charts/{}", chart.file), &chart.svg)?;
        }
        staging.write(
            "report.html",
            &html::render_report(results, &drawn, &charts, verdict.as_ref()),
        )?;
    }
    Ok((summary, json, summary_csv))
}
