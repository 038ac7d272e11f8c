//! `burstsim live`: replay a workload against a real Redis and compare.

use std::io::IsTerminal;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use super::{decided_results, load, results_folder, warn};
use crate::cli::LiveArgs;
use crate::output::Staging;
use crate::report::table;
/// `burstsim live`.
pub fn live(args: &LiveArgs) -> Result<()> {
    let scenario = load(&args.scenario)?;
    if !(args.speed.is_finite() && args.speed > 0.0) {
        bail!("--speed: must be a number above 0 (got {})", args.speed);
    }
    let workload = match &args.workload {
        None => 0,
        Some(name) => super::named_workload(&scenario, name)?,
    };
    if scenario.workloads[workload].retry.is_some() {
        bail!(
            "workload {:?}: its clients retry, and live replays open-loop traffic only (the answers of a real Redis would decide the retries, which the replay does not model); pick another with --workload",
            scenario.workloads[workload].name
        );
    }
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
        "live: fixed windows run in Redis as first-request windows (INCR, then PEXPIRE on the first hit: a window opens at a key's first request, as Redis counters do; an epoch-aligned window would need a key per window), once as one atomic script and once as a separate GET before INCR and its expiry; sliding logs run as sorted sets. The \"simulated\" column models exactly that, so it can differ from `burstsim run` for epoch windows."
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
        through_outages: args.through_outages,
        deadline: std::time::Instant::now()
            + std::time::Duration::from_nanos(args.max_wall_time.get()),
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
    let rows = results
        .iter()
        .map(|r| {
            let variant = variant_name(r.variant)?;
            Ok((
                r.limiter.as_str(),
                format!("{}-{variant}", r.limiter),
                format!("in Redis ({variant})"),
                r.decisions.as_slice(),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    super::write_decided(
        &staging,
        &decided_results(&scenario, workload, "live", &rows)?,
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
        let variant = variant_name(r.variant)?;
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
    let outages = results.iter().any(|r| r.on_error.is_some());
    let mut outage_table = comfy_table::Table::new();
    if outages {
        outage_table.load_style(table::STYLE).set_header(vec![
            "limiter",
            "enforced by",
            "unanswered",
            "fail open: admitted",
            "worst 1s",
            "fail closed: admitted",
            "worst 1s",
            "window per client: admitted",
            "worst 1s",
        ]);
        for r in &results {
            let variant = variant_name(r.variant)?;
            let Some(on_error) = &r.on_error else {
                continue;
            };
            let mut row = vec![r.limiter.clone(), variant, r.store_errors.to_string()];
            for policy in [&on_error.allow, &on_error.deny, &on_error.local] {
                row.push(format!(
                    "{} ({} unanswered)",
                    policy.admitted, policy.admitted_unanswered
                ));
                row.push(policy.worst_1s.to_string());
            }
            outage_table.add_row(row);
        }
    }
    let outage_text = if outages {
        format!(
            "\nRequests Redis did not answer within {}, and what each policy lets through with them (answered ones as Redis decided):\n{}",
            args.timeout,
            outage_table.trim_fmt()
        )
    } else {
        String::new()
    };
    println!(
        "{}{outage_text}\nworkload {:?} at {}× with {clients} clients; timing jitter up to {}; results in {}",
        table.trim_fmt(),
        scenario.workloads[workload].name,
        args.speed,
        crate::time::Nanos(results.iter().map(|r| r.jitter_ns).max().unwrap_or(0)),
        target.display()
    );
    Ok(())
}

/// A variant as `live.json` names it: `atomic-fixed-window`.
fn variant_name(variant: crate::live::Variant) -> Result<String> {
    Ok(serde_json::to_value(variant)?
        .as_str()
        .unwrap_or_default()
        .to_string())
}
