//! `burstsim check`: exit 1 when a limiter lets through more than the backend takes.

use anyhow::Result;

use super::{coloured, load, print, with_capacity};
use crate::cli::{CheckArgs, CheckFormat};
use crate::replicate;
use crate::results::RunResult;

/// `burstsim check`: true when every run stays within the backend.
pub fn check(args: &CheckArgs) -> Result<bool> {
    let scenario = load(&args.scenario)?;
    let mut scenario = with_capacity(scenario, args.capacity)?;
    // A check reads each run's worst second and its backend's drops: not
    // the figures per key, nor the timeline (a third of a log's runs).
    scenario.metrics.per_key = false;
    let replications = scenario.replications;
    crate::memory::check(
        &scenario,
        replications,
        false,
        args.limits.max_requests,
        args.limits.max_memory,
    )?;
    let results = replicate::simulate_replicated(
        &scenario,
        replicate::Keep::Figures,
        replications,
        None,
        &(),
    )?;
    let capacity = results.capacity().unwrap_or(0);
    let runs = results.runs().count();
    let failures: Vec<(&RunResult, Vec<String>)> = results
        .runs()
        .map(|run| {
            let failures = crate::check::failures(&run.summary);
            let lines = failures.iter().map(|f| f.line(&run.summary)).collect();
            (run, lines)
        })
        .filter(|(_, lines): &(_, Vec<String>)| !lines.is_empty())
        .collect();
    let ok = failures.is_empty();
    let text = match args.format {
        CheckFormat::Json => {
            let report = serde_json::json!({
                "scenario": results.scenario,
                "capacity": capacity,
                "runs": runs,
                "ok": ok,
                "failures": failures.iter().map(|(run, lines)| serde_json::json!({
                    "workload": run.summary.workload,
                    "limiter": run.summary.limiter,
                    "worst_1s": run.summary.worst_1s_max(),
                    "packed_1s": run.summary.whole_seconds_per_second().map(|w| w.admitted_at_least),
                    "dropped": run.summary.dropped_max(),
                    "problems": lines,
                })).collect::<Vec<_>>(),
            });
            serde_json::to_string_pretty(&report)? + "\n"
        }
        CheckFormat::Table if ok => coloured(format!(
            "ok: all {} runs of {} stay within the backend's {capacity}/s\n",
            runs, results.scenario
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
                runs,
                results.scenario
            ));
            coloured(text)
        }
    };
    print(args.quiet, &text)?;
    Ok(ok)
}
