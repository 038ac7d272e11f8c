//! The subcommands: the only code besides `main` that prints or writes files.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::cli::{Format, RunArgs};
use crate::output::{DecisionFiles, Staging};
use crate::report::{self, csv, html, table};
use crate::{chart, scenario, sim};

/// `burstsim run`.
pub fn run(args: &RunArgs) -> Result<()> {
    let mut scenario = scenario::load(&args.scenario)?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    warn(&scenario.warnings, args.quiet);
    let target = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("output").join(&scenario.name));
    let staging = Staging::new(&target)?;
    let options = sim::Options {
        curve: if args.no_charts {
            Vec::new()
        } else {
            chart::curve_intervals(&scenario)
        },
    };
    let outcome = if args.decisions {
        let mut files = DecisionFiles::create(staging.path(), &scenario)?;
        let outcome = sim::simulate(&scenario, &options, Some(&mut files))?;
        files.finish()?;
        outcome
    } else {
        sim::simulate(&scenario, &options, None)?
    };
    let summary = outcome.summary(&scenario);
    let json = report::render_json(&summary);
    let summary_csv = csv::render_summary(&summary.runs);
    staging.write("summary.json", &json)?;
    staging.write("summary.csv", &summary_csv)?;
    staging.write("timeline.csv", &csv::render_timeline(&outcome.runs))?;
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
                table::render_table(&summary.runs),
                target.display()
            ),
            Format::Json => json,
            Format::Csv => summary_csv,
        };
        std::io::stdout().write_all(text.as_bytes())?;
    }
    Ok(())
}

/// `burstsim validate`.
pub fn validate(path: &std::path::Path) -> Result<()> {
    let scenario = scenario::load(path)?;
    warn(&scenario.warnings, false);
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

fn warn(warnings: &[String], quiet: bool) {
    if !quiet {
        for warning in warnings {
            eprintln!("warning: {warning}");
        }
    }
}
