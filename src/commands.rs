//! The subcommands: the only code besides `main` that prints or writes files.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::num::NonZeroU64;

use std::io::IsTerminal;

use anyhow::{Context as _, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{CheckArgs, CheckFormat, Format, LiveArgs, RunArgs, SizeArgs};
use crate::output::{DecisionFiles, Staging};
use crate::report::{self, csv, html, sizing, table};
use crate::scenario::{Backend, Scenario};
use crate::{chart, check, colour, replicate, scenario, sim, size};

/// `burstsim run`.
pub fn run(args: &RunArgs) -> Result<()> {
    let mut scenario = scenario::load(&args.scenario)?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    warn(&scenario.warnings);
    let replications = args
        .replications
        .map_or(scenario.replications, NonZeroU64::get);
    // Before any work, the decisions pass included.
    check_work(
        &scenario,
        replications,
        args.max_requests,
        args.max_memory,
        !args.no_charts,
    )?;
    let target = results_folder(args.out.as_deref(), &scenario.name);
    let staging = Staging::new(&target)?;
    warn(staging.notes());
    let options = if args.no_charts {
        sim::Options::default()
    } else {
        chart::sim_options(&scenario)
    };
    if args.decisions {
        // Decisions are replication 0's, streamed in a pass of their own.
        let mut files = DecisionFiles::create(staging.path(), &scenario)?;
        sim::simulate(&scenario, &sim::Options::default(), Some(&mut files))?;
        files.finish()?;
    }
    let started = std::time::Instant::now();
    let bar = progress_bar(
        replicate::units(&scenario, replications),
        args.quiet,
        "workload runs",
    );
    let outcome =
        replicate::simulate_replicated(&scenario, &options, replications, &|| bar.inc(1))?;
    bar.finish_and_clear();
    if args.stats {
        eprintln!("{}", run_stats(&outcome, started.elapsed()));
    }
    let summary = outcome.summary(&scenario);
    let json = report::render_json(&summary);
    let summary_csv = csv::render_summary(&summary.runs);
    staging.write("summary.json", &json)?;
    staging.write("summary.csv", &summary_csv)?;
    csv::write_timeline(&outcome.runs, staging.create("timeline.csv")?)
        .context("writing timeline.csv")?;
    if !args.no_charts {
        let results = chart::Results {
            scenario: &scenario,
            runs: &outcome.runs,
        };
        let charts = chart::render_charts(&results)?;
        for chart in &charts {
            staging.write(&format!("charts/{}", chart.file), &chart.svg)?;
        }
        staging.write(
            "report.html",
            &html::render_report(&scenario, &summary, &charts),
        )?;
    }
    staging.commit()?;
    if !args.quiet {
        let text = match args.format {
            Format::Table => format!(
                "{}\nresults in {}\n",
                coloured(table::render_table(&summary.runs)),
                target.display()
            ),
            Format::Json => json,
            Format::Csv => summary_csv,
        };
        std::io::stdout().write_all(text.as_bytes())?;
    }
    Ok(())
}

/// `burstsim size`.
pub fn size(args: &SizeArgs) -> Result<()> {
    let mut scenario = scenario::load(&args.scenario)?;
    warn(&scenario.warnings);
    with_capacity(&mut scenario, args.capacity)?;
    let capacity = scenario.backend.map_or(0, |b| b.capacity_per_sec.get());
    let replications = args
        .replications
        .map_or(scenario.replications, NonZeroU64::get);
    check_work(
        &scenario,
        replications,
        args.max_requests,
        args.max_memory,
        false,
    )?;
    let bar = progress_bar(scenario.limiters.len() as u64, args.quiet, "limiters sized");
    let report = size::size(&scenario, capacity, replications, &|| bar.inc(1));
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
    // The run's report, if there is one, gains (or renews) its sizing section.
    let table = sizing::render_sizing_table(&report);
    if let Ok(page) = std::fs::read_to_string(staging.path().join("report.html"))
        && let Some(page) = html::with_sizing(&page, &html::sizing_section(&table, &chart))
    {
        staging.write("report.html", &page)?;
    }
    staging.commit()?;
    if !args.quiet {
        let text = match args.format {
            Format::Table => format!("{}results in {}\n", coloured(table), target.display()),
            Format::Json => json,
            Format::Csv => sizing_csv,
        };
        std::io::stdout().write_all(text.as_bytes())?;
    }
    Ok(())
}

/// `burstsim live`.
pub fn live(args: &LiveArgs) -> Result<()> {
    let scenario = scenario::load(&args.scenario)?;
    warn(&scenario.warnings);
    if !(args.speed.is_finite() && args.speed > 0.0) {
        bail!("--speed: must be a number above 0 (got {})", args.speed);
    }
    let workload = match &args.workload {
        None => 0,
        Some(name) => scenario
            .workloads
            .iter()
            .position(|w| &w.name == name)
            .with_context(|| {
                format!(
                    "--workload: no workload {name:?} in {}",
                    args.scenario.display()
                )
            })?,
    };
    let wall_secs = scenario.duration.as_secs_f64() / args.speed;
    if wall_secs > args.max_wall_time.as_secs_f64() {
        // Debug prints 1e-300 as such, where Display writes 300 zeros.
        let wall = if wall_secs < 1e6 {
            format!("{wall_secs:.0}")
        } else {
            format!("{wall_secs:.1e}")
        };
        bail!(
            "--speed {:?}: replaying {} at {:?}× would take {wall} s of real time, more than --max-wall-time {}; raise --speed or --max-wall-time",
            args.speed,
            scenario.duration,
            args.speed,
            args.max_wall_time
        );
    }
    let plan = crate::live::plan(&scenario);
    if plan.iter().all(|(_, variants)| variants.is_empty()) {
        bail!(
            "{}: live enforces fixed windows (also smaller and buffered ones) and sliding logs in Redis; this scenario has none",
            args.scenario.display()
        );
    }
    eprintln!(
        "live: fixed windows run in Redis as first-request windows (INCR, then PEXPIRE on the first hit: a window opens at a key's first request, as Redis counters do; an epoch-aligned window would need a key per window), once as one atomic script and once as separate GET, INCR and PEXPIRE round trips; sliding logs run as sorted sets. The \"simulated\" column models exactly that, so it can differ from `burstsim run` for epoch windows."
    );
    let skipped: Vec<&str> = plan
        .iter()
        .filter(|(_, variants)| variants.is_empty())
        .map(|(name, _)| *name)
        .collect();
    if !skipped.is_empty() {
        eprintln!(
            "live: not enforced, for want of a Redis script of their kind: {}",
            skipped.join(", ")
        );
    }
    let clients = usize::try_from(args.clients.get())
        .unwrap_or(usize::MAX)
        .min(256);
    let redis = crate::live::Connection {
        url: &args.redis,
        timeout: std::time::Duration::from_nanos(args.timeout.get()),
        clients,
        speed: args.speed,
    };
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new_spinner();
        if let Ok(style) =
            ProgressStyle::with_template("{elapsed:>4} {spinner} {pos} requests sent to Redis")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let results = crate::live::replay(&scenario, workload, &redis, &|| bar.inc(1));
    bar.finish_and_clear();
    let results = results?;
    let target = results_folder(args.out.as_deref(), &format!("{}-live", scenario.name));
    let staging = Staging::new(&target)?;
    warn(staging.notes());
    staging.write(
        "live.json",
        &(serde_json::to_string_pretty(&results)? + "\n"),
    )?;
    // The live decisions through the same metrics, charts and report as a run.
    let (live_scenario, runs) = live_runs(&scenario, workload, &results)?;
    let summary = sim::Outcome { runs: runs.clone() }.summary(&live_scenario);
    staging.write("summary.json", &report::render_json(&summary))?;
    let charts = chart::render_charts(&chart::Results {
        scenario: &live_scenario,
        runs: &runs,
    })?;
    for chart in &charts {
        staging.write(&format!("charts/{}", chart.file), &chart.svg)?;
    }
    staging.write(
        "report.html",
        &html::render_report(&live_scenario, &summary, &charts),
    )?;
    staging.commit()?;
    let mut table = comfy_table::Table::new();
    table.load_style(table::STYLE).set_header(vec![
        "limiter",
        "enforced by",
        "sent",
        "admitted live",
        "simulated",
        "differ",
        "reordered",
        "at edges",
        "other",
        "edges followed",
        "worst 1s live",
        "simulated",
    ]);
    for r in &results {
        let variant = serde_json::to_value(r.variant)?
            .as_str()
            .unwrap_or_default()
            .to_string();
        table.add_row(vec![
            r.limiter.clone(),
            variant,
            r.sent.to_string(),
            r.admitted_live.to_string(),
            r.admitted_model.to_string(),
            r.disagreements.to_string(),
            r.reordered.to_string(),
            r.at_edges.to_string(),
            r.unexplained.to_string(),
            r.edges_followed.to_string(),
            r.worst_1s_live.to_string(),
            r.worst_1s_model.to_string(),
        ]);
    }
    println!(
        "{}\nworkload {:?} at {}× with {clients} clients; timing jitter up to {}; results in {}",
        table.trim_fmt(),
        scenario.workloads[workload].name,
        args.speed,
        crate::time::Nanos(results.iter().map(|r| r.jitter_ns).max().unwrap_or(0)),
        target.display()
    );
    Ok(())
}

/// A scenario of the replayed workload with one limiter per Redis script,
/// and the live decisions summarised as runs of it.
fn live_runs(
    scenario: &Scenario,
    workload: usize,
    results: &[crate::live::LiveResult],
) -> Result<(Scenario, Vec<sim::RunResult>)> {
    let mut live = scenario.clone();
    live.name = format!("{}-live", scenario.name);
    live.workloads = vec![scenario.workloads[workload].clone()];
    live.limiters = results
        .iter()
        .map(|r| {
            let base = scenario
                .limiters
                .iter()
                .find(|l| l.name == r.limiter)
                .expect("results name the scenario's limiters");
            let variant = serde_json::to_value(r.variant)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            scenario::NamedLimiter {
                name: format!("{}-{variant}", r.limiter),
                config: base.config.clone(),
                description: format!("{} in Redis ({variant})", base.description),
            }
        })
        .collect();
    let options = chart::sim_options(&live);
    let workload_name = live.workloads[0].name.clone();
    let runs = live
        .limiters
        .iter()
        .zip(results)
        .map(|(named, r)| {
            sim::summarise(
                &live,
                &options,
                named,
                &workload_name,
                r.decisions.iter().copied(),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((live, runs))
}

/// `burstsim check`: true when every run stays within the backend.
pub fn check(args: &CheckArgs) -> Result<bool> {
    let mut scenario = scenario::load(&args.scenario)?;
    warn(&scenario.warnings);
    with_capacity(&mut scenario, args.capacity)?;
    let replications = scenario.replications;
    check_work(
        &scenario,
        replications,
        args.max_requests,
        args.max_memory,
        false,
    )?;
    let outcome =
        replicate::simulate_replicated(&scenario, &sim::Options::default(), replications, &|| {})?;
    let capacity = scenario.backend.map_or(0, |b| b.capacity_per_sec.get());
    let failures: Vec<(&sim::RunResult, Vec<String>)> = outcome
        .runs
        .iter()
        .map(|run| (run, check::failures(&run.summary)))
        .filter(|(_, lines)| !lines.is_empty())
        .collect();
    let ok = failures.is_empty();
    if args.quiet {
        return Ok(ok);
    }
    let text = match args.format {
        CheckFormat::Json => {
            let report = serde_json::json!({
                "scenario": scenario.name,
                "capacity": capacity,
                "runs": outcome.runs.len(),
                "ok": ok,
                "failures": failures.iter().map(|(run, lines)| serde_json::json!({
                    "workload": run.summary.workload,
                    "limiter": run.summary.limiter,
                    "worst_1s": run.summary.worst_1s_max(),
                    "dropped": run.summary.dropped_max(),
                    "problems": lines,
                })).collect::<Vec<_>>(),
            });
            serde_json::to_string_pretty(&report)? + "\n"
        }
        CheckFormat::Table if ok => coloured(format!(
            "ok: all {} runs of {} stay within the backend's {capacity}/s\n",
            outcome.runs.len(),
            scenario.name
        )),
        CheckFormat::Table => {
            let mut text = String::new();
            for line in failures.iter().flat_map(|(_, lines)| lines) {
                text.push_str(line);
                text.push('\n');
            }
            text.push_str(&format!(
                "check failed: {} of {} runs of {} exceed the backend's {capacity}/s\n",
                failures.len(),
                outcome.runs.len(),
                scenario.name
            ));
            coloured(text)
        }
    };
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(ok)
}

/// Refuses, before any work, a run of more than `max_requests` requests or
/// one that would need more than `max_memory` bytes.
fn check_work(
    scenario: &Scenario,
    replications: u64,
    max_requests: u64,
    max_memory: u64,
    charts: bool,
) -> Result<()> {
    let mut total: u128 = 0;
    let mut per_workload = Vec::with_capacity(scenario.workloads.len());
    for workload in &scenario.workloads {
        let mut requests: u128 = 0;
        for source in &workload.sources {
            requests += source
                .estimated_arrivals(scenario.duration, &scenario.base_dir)
                .map_err(anyhow::Error::msg)?;
        }
        let runs = if workload.sources.iter().any(|s| s.is_stochastic()) {
            u128::from(replications)
        } else {
            1
        };
        total += requests * runs;
        per_workload.push(requests);
    }
    if total > u128::from(max_requests) {
        bail!(
            "{}: this would simulate about {total} requests, more than --max-requests {max_requests}; shorten the run, lower the rates, or raise --max-requests if that much is intended",
            scenario.path.display()
        );
    }
    let memory = crate::memory::estimate(scenario, replications, charts, &per_workload);
    if memory.total() > u128::from(max_memory) {
        use crate::memory::words;
        bail!(
            "{}: this would need about {} of memory ({} for timelines at a {} bucket, {} for the rolling windows of the limiters' worst cases, {} for replications), more than --max-memory {}; use a coarser metrics.bucket, fewer replications or --no-charts, or raise --max-memory if the machine has it",
            scenario.path.display(),
            words(memory.total()),
            words(memory.timelines),
            scenario.metrics.bucket,
            words(memory.rings),
            words(memory.replications),
            words(u128::from(max_memory))
        );
    }
    Ok(())
}

/// Puts `capacity` in place of the scenario's, or insists there is one.
fn with_capacity(scenario: &mut Scenario, capacity: Option<NonZeroU64>) -> Result<()> {
    match (capacity, &mut scenario.backend) {
        (Some(capacity), Some(backend)) => backend.capacity_per_sec = capacity,
        (Some(capacity), None) => {
            scenario.backend = Some(Backend {
                capacity_per_sec: capacity,
                queue: None,
            })
        }
        (None, Some(_)) => {}
        (None, None) => bail!(
            "{}: no [backend] capacity to check against; add `[backend] capacity = N` (requests per second) or pass --capacity N",
            scenario.path.display()
        ),
    }
    Ok(())
}

/// `burstsim validate`.
pub fn validate(path: &std::path::Path) -> Result<()> {
    let scenario = scenario::load(path)?;
    warn(&scenario.warnings);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: scenario {:?} is valid: {} workloads × {} limiters over {}",
        path.display(),
        scenario.name,
        scenario.workloads.len(),
        scenario.limiters.len(),
        scenario.duration
    )?;
    for limiter in &scenario.limiters {
        writeln!(
            out,
            "  {:<20} {:<16} {}",
            limiter.name,
            limiter.config.kind(),
            limiter.description
        )?;
    }
    Ok(())
}

/// "simulated 100000000 requests (100000000 decisions) in 1.90 s: …; peak memory 12.8 MB"
fn run_stats(outcome: &sim::Outcome, elapsed: std::time::Duration) -> String {
    // Every replication's requests count: mean × count is their exact sum.
    let total = |run: &sim::RunResult| match &run.summary.replications {
        Some(r) => (r.offered.mean * r.count as f64).round() as u64,
        None => run.summary.offered,
    };
    let decisions: u64 = outcome.runs.iter().map(total).sum();
    let mut workloads: Vec<&str> = outcome
        .runs
        .iter()
        .map(|run| run.summary.workload.as_str())
        .collect();
    workloads.dedup();
    let requests: u64 = workloads
        .iter()
        .filter_map(|w| outcome.runs.iter().find(|run| run.summary.workload == *w))
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

/// `--out DIR`, or `output/<name>` in the current directory.
fn results_folder(out: Option<&Path>, name: &str) -> PathBuf {
    out.map_or_else(|| PathBuf::from("output").join(name), Path::to_path_buf)
}

/// Warnings go to standard error even with `--quiet`: a trace's dropped rows
/// or a tidied leftover change what the results mean.
fn warn(warnings: &[String]) {
    for warning in warnings {
        eprintln!("{}{warning}", colour::warning_prefix());
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
