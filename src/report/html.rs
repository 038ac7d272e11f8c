//! `report.html`: one self-contained page for a design review: the scenario,
//! the results table with verdicts and bounds, every chart inlined with a
//! caption, and what the results mean, in words.

use std::fmt::Write;

pub(super) use super::rows::{escape, join};
use super::{ratio, seconds};
use crate::chart::Chart;
use crate::results::Results;
use crate::summary::RunSummary;
use crate::time::Nanos;

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; max-width: 1320px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } .sub { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #ddd; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td:nth-child(-n+3) { white-space: nowrap; }
.over { color: #b00000; font-weight: 600; } .ok { color: #006b3c; }
figure { margin: 2em 0; } figure svg { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #444; margin-top: 0.4em; }
.verdict { font-size: 1.15em; } ul.causes { margin-top: -0.6em; } .note { color: #555; font-size: 0.9em; margin-top: -0.5em; }
pre { font-size: 0.85em; overflow-x: auto; } .wide { overflow-x: auto; }
.meaning { background: #f5f7fa; border-left: 4px solid #0072b2; padding: 0.6em 1em; }
@media print { body { max-width: none; margin: 0; } figure, table, .meaning { break-inside: avoid; } }
";

/// The whole page: the verdict over every run of `results`, the tables of
/// `drawn` (what [`Results::drawn`] selected for the charts), the `charts`.
///
/// `verdict` is [`crate::check::Verdict::of`] the runs of `results`.
pub fn render_report(
    results: &Results,
    drawn: &Results,
    charts: &[Chart],
    verdict: Option<&crate::check::Verdict>,
) -> String {
    let summary = results.summary();
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>burstsim: {name}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>burstsim report: {name}</h1>\n<p class=\"sub\">{file} · {duration} · seed {seed} · burstsim {version}</p>\n",
        name = escape(&results.scenario),
        file = escape(&results.file.display().to_string()),
        duration = results.duration,
        seed = summary.seed,
        version = env!("CARGO_PKG_VERSION"),
    );
    let _ = writeln!(
        page,
        "<p class=\"verdict\">{}</p>",
        super::verdict::sentence(results, &summary.runs, verdict)
    );
    // The tables show what the charts draw: of a scenario too large, the
    // limiters and workloads with the largest worst counts, said so.
    let drawn_runs = drawn.summary().runs;
    if let Some(left_out) = &drawn.left_out {
        let _ = writeln!(
            page,
            "<p class=\"sub\">{} runs: the tables and charts below show {}; every run is in summary.csv and summary.json.</p>",
            summary.runs.len(),
            escape(left_out)
        );
    }
    // The first screen: the verdict, then the figure that shows the
    // spike; the tables and the worst counts side by side after it.
    let focus = focus_workload(&summary.runs).map(|w| format!("overview-{w}.svg"));
    let first: Vec<&Chart> = [focus.as_deref(), Some("worst-rolling.svg")]
        .into_iter()
        .flatten()
        .filter_map(|file| charts.iter().find(|c| c.file == file))
        .collect();
    let overview = first
        .first()
        .is_some_and(|chart| Some(chart.file.as_str()) == focus.as_deref());
    let (focused, rest) = first.split_at(usize::from(overview));
    for chart in focused {
        page.push_str(&figure(chart));
    }
    page.push_str(&results_table(&drawn_runs));
    page.push_str(&closed_loop_section(drawn, &drawn_runs));
    page.push_str(&outage_section(&drawn_runs));
    for chart in rest {
        page.push_str(&figure(chart));
    }
    let _ = writeln!(page, "{SIZING_START}{SIZING_END}");
    let _ = write!(
        page,
        "<h2>What this means</h2>\n<div class=\"meaning\">{}</div>\n",
        meaning(results, &summary.runs)
    );
    page.push_str("<h2>Details</h2>\n");
    for chart in charts
        .iter()
        .filter(|c| !first.iter().any(|f| f.file == c.file))
    {
        page.push_str(&figure(chart));
    }
    page.push_str(&parameters(drawn));
    page.push_str("</body>\n</html>\n");
    page
}

/// A page of its own around `body` (HTML), styled like the report.
pub(super) fn page(title: &str, sub: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n<p class=\"sub\">{sub}</p>\n{body}</body>\n</html>\n",
        title = escape(title),
        sub = escape(sub),
    )
}

/// Where `burstsim size` puts its section in an existing report.
pub(super) const SIZING_START: &str = "<!-- burstsim:sizing -->";
const SIZING_END: &str = "<!-- /burstsim:sizing -->";

/// `report` with its sizing section replaced by `section` (HTML); `None`
/// when `report` has no place for one (not a report of this version).
pub fn with_sizing(report: &str, section: &str) -> Option<String> {
    let start = report.find(SIZING_START)? + SIZING_START.len();
    let end = start + report[start..].find(SIZING_END)?;
    Some(format!("{}{section}{}", &report[..start], &report[end..]))
}

/// The sizing section: the recommendation table, its legend and the chart.
pub fn sizing_section(
    table: &super::rows::Rows,
    legend: &str,
    together: Option<&super::rows::Rows>,
    chart: &Chart,
) -> String {
    let legend: String = legend
        .lines()
        .map(|line| format!("<li>{}</li>\n", escape(line)))
        .collect();
    let together = together.map_or(String::new(), |rows| {
        format!(
            "<h3>Settings sized together</h3>\n<p>The cheapest pair found that keeps the worst second within capacity: the lines to set.</p>\n{}",
            rows.html()
        )
    });
    format!(
        "\n<h2>Sizing</h2>\n{}<ul class=\"note\">\n{legend}</ul>\n{together}{}",
        table.html(),
        figure(chart)
    )
}

pub(super) fn figure(chart: &Chart) -> String {
    format!(
        "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
        inline_svg(&chart.svg),
        escape(&chart.caption)
    )
}

/// The workload of the largest spike (the first, on a tie): the one whose
/// overview opens the report, as "What this means" starts with it too.
fn focus_workload(runs: &[RunSummary]) -> Option<&str> {
    runs.iter()
        .reduce(|a, b| if b.spike_ratio > a.spike_ratio { b } else { a })
        .map(|r| r.workload.as_str())
}

/// The results in a few sentences, generated from the figures.
fn meaning(results: &Results, runs: &[RunSummary]) -> String {
    let rolling = results.metrics.rolling;
    let mut text = String::new();
    // The largest spike is the most requests through in one interval (a
    // ratio to a limit summed over thousands of keys would name the wrong
    // limiter); on a tie, the larger ratio.
    if let Some(top) = runs.iter().reduce(|a, b| {
        if (b.worst_rolling, b.spike_ratio) > (a.worst_rolling, a.spike_ratio) {
            b
        } else {
            a
        }
    }) {
        let against = match top.keys.as_ref().and_then(|k| k.spike_ratio) {
            Some(per_key) => format!("its worst client at {} its own quota", ratio(per_key.max)),
            None => format!("{} its advertised limit", ratio(top.spike_ratio)),
        };
        let _ = write!(
            text,
            "<p>The largest spike: <b>{}</b> let <b>{}</b> requests through in {} on <i>{}</i>, {against} ({}).</p>",
            escape(&top.limiter),
            top.worst_rolling,
            Nanos(top.rolling_ns),
            escape(&top.workload),
            if top.bound == u64::MAX {
                "it has no bound over any traffic".to_string()
            } else if let Some(keys) = top.keys.as_ref().filter(|k| k.spike_ratio.is_some()) {
                // A limit per key has a bound per key: over its keys, this many.
                format!(
                    "its bound for any traffic of these {} clients is {}; with more clients, more",
                    keys.keys, top.bound
                )
            } else {
                format!("its bound for any traffic is {}", top.bound)
            }
        );
    }
    let Some(backend) = results.backend else {
        let _ = write!(
            text,
            "<p>No <code>[backend]</code> is given, so no run is judged against a capacity; add one to see which limiters keep the backend safe. The worst interval measured is {rolling}.</p>"
        );
        return text;
    };
    let capacity = backend.capacity_per_sec.get();
    // Each limiter's worst run over capacity and its first run, found in one
    // pass (per limiter, a scan of every run was quadratic in limiters).
    let mut worst_over: std::collections::HashMap<&str, &RunSummary> =
        std::collections::HashMap::new();
    let mut first_run: std::collections::HashMap<&str, &RunSummary> =
        std::collections::HashMap::new();
    for run in runs {
        first_run.entry(run.limiter.as_str()).or_insert(run);
        if run.exceeds_capacity() {
            let worst = worst_over.entry(run.limiter.as_str()).or_insert(run);
            if run.judged_1s().unwrap_or(0) > worst.judged_1s().unwrap_or(0) {
                *worst = run;
            }
        }
    }
    let over_somewhere = |limiter: &str| worst_over.get(limiter).copied();
    let (mut safe, mut unsafe_) = (Vec::new(), Vec::new());
    for limiter in &results.limiters {
        match over_somewhere(&limiter.name) {
            None => safe.push(format!("<b>{}</b>", escape(&limiter.name))),
            Some(run) => unsafe_.push(format!(
                "<b>{}</b> (up to {} in one second, on <i>{}</i>)",
                escape(&run.limiter),
                run.judged_1s().unwrap_or(0),
                escape(&run.workload)
            )),
        }
    }
    let _ = write!(
        text,
        "<p>Against a backend that serves {capacity} requests per second: "
    );
    match (safe.is_empty(), unsafe_.is_empty()) {
        (false, true) => {
            let _ = write!(
                text,
                "every limiter stayed under capacity on every workload."
            );
        }
        (true, false) => {
            let _ = write!(
                text,
                "every limiter let more through than the backend can take on some workload: {}.",
                join(&unsafe_)
            );
        }
        _ => {
            let _ = write!(
                text,
                "{} stayed under capacity on every workload; {} did not.",
                join(&safe),
                join(&unsafe_)
            );
        }
    }
    text.push_str("</p>");
    let risky: Vec<String> = results
        .limiters
        .iter()
        .filter_map(|limiter| {
            let run = first_run.get(limiter.name.as_str())?;
            let bound_1s = run.backend.as_ref()?.bound_1s;
            (bound_1s > capacity && over_somewhere(&limiter.name).is_none()).then(|| {
                format!(
                    "<b>{}</b> (bound {})",
                    escape(&limiter.name),
                    super::bound(bound_1s)
                )
            })
        })
        .collect();
    if !risky.is_empty() {
        let _ = write!(
            text,
            "<p>No workload here pushed {} over capacity, but their bounds say some traffic would: {} can exceed {capacity} in one second.</p>",
            if risky.len() == 1 { "it" } else { "them" },
            join(&risky)
        );
    }
    text
}

/// The one sentence a whole-second log needs: its worst second is an
/// interval, and what the table's `83–120` means; and, when the backend's
/// second is judged apart from another rolling interval, what its column's
/// `OVER 2000/s packed` reads.
fn whole_seconds_note(runs: &[RunSummary]) -> String {
    let per_second = runs
        .first()
        .is_some_and(|run| run.rolling_ns == crate::time::NANOS_PER_SEC);
    let mut text = String::new();
    let rolling = logs_seconds(runs, |run| run.whole_seconds.as_ref());
    if !rolling.is_empty() {
        let each = intervals(&rolling, |seconds| {
            format!(
                "between {} (its busiest second{}) and {} (its busiest two adjacent seconds)",
                seconds.offered_low,
                if per_second {
                    ""
                } else {
                    " over the intervals that cover it"
                },
                seconds.offered_high
            )
        });
        let _ = writeln!(
            text,
            "<p class=\"note\">Logs stamped in whole seconds do not say when within its second each request came, so the worst {} of demand is an interval — {each} — and a worst figure shown as <i>a</i>–<i>b</i> is the seeded placement's and the most any placement could let through (summary.csv's <code>admitted_worst_rolling_at_least</code> is the most a placement run let through: each second's requests packed against the next second's).</p>",
            if per_second {
                "second".to_string()
            } else {
                Nanos(runs[0].rolling_ns).to_string()
            },
        );
    }
    let backend = logs_seconds(runs, |run| {
        run.backend.as_ref().and_then(|b| b.whole_seconds.as_ref())
    });
    if !backend.is_empty() {
        let each = intervals(&backend, |seconds| {
            format!(
                "between {} and {} requests",
                seconds.offered_low, seconds.offered_high
            )
        });
        let _ = writeln!(
            text,
            "<p class=\"note\">The backend takes a second at a time, and a log stamped in whole seconds leaves its busiest second an interval — {each} — so <i>worst 1 s vs backend</i> judges the most a placement the log allows lets through in one second (its requests packed against the next second's), as <code>burstsim check</code> does: <i>OVER n/s packed</i> when that is over the capacity while the seeded placement is not (summary.csv's <code>admitted_worst_1s_at_least</code> and <code>admitted_worst_1s_at_most</code>).</p>"
        );
    }
    text
}

/// The first figures of each workload that has them, by workload.
fn logs_seconds<'a>(
    runs: &'a [RunSummary],
    figures: impl Fn(&'a RunSummary) -> Option<&'a crate::summary::WholeSeconds>,
) -> Vec<(&'a str, &'a crate::summary::WholeSeconds)> {
    let mut logs: Vec<(&str, &crate::summary::WholeSeconds)> = Vec::new();
    for run in runs {
        if let Some(seconds) = figures(run)
            && !logs.iter().any(|(name, _)| *name == run.workload)
        {
            logs.push((&run.workload, seconds));
        }
    }
    logs
}

/// `name's <words>; …` for each workload's figures.
fn intervals(
    logs: &[(&str, &crate::summary::WholeSeconds)],
    words: impl Fn(&crate::summary::WholeSeconds) -> String,
) -> String {
    logs.iter()
        .map(|(name, seconds)| format!("{}'s {}", super::rows::escape(name), words(seconds)))
        .collect::<Vec<_>>()
        .join("; ")
}

fn results_table(runs: &[RunSummary]) -> String {
    let table = super::columns::rows(runs, super::columns::Format::Html);
    let logged: String = super::log_comparison(runs)
        .iter()
        .map(|line| format!("<p class=\"note\">{}.</p>\n", super::rows::escape(line)))
        .collect();
    format!(
        "<h2>Results</h2>\n{}{}{logged}",
        table.grouped().html(),
        whole_seconds_note(runs)
    )
}

/// Clusters whose store goes down: what got through meanwhile, in a table
/// and in words.
fn outage_section(runs: &[RunSummary]) -> String {
    let Some(table) = super::table::outage_rows(runs) else {
        return String::new();
    };
    let mut html = String::from("<h2>When the store is down</h2>\n");
    let _ = writeln!(
        html,
        "{}<p class=\"note\">{}</p>\n<ul>",
        table.html(),
        escape(super::table::OUTAGE_NOTE.trim())
    );
    for run in runs {
        for outage in run.outages.iter().flatten() {
            let what = match outage.on_error.as_str() {
                "allow" => "lets every request through (fail open)",
                "deny" => "rejects every request (fail closed)",
                _ => "falls back to a counter per instance",
            };
            let capacity = run.backend.as_ref().map_or(String::new(), |b| {
                format!(
                    " — {:.1}× its capacity of {}/s",
                    outage.worst_1s_during as f64 / b.capacity as f64,
                    b.capacity
                )
            });
            let got = if outage.admitted == 0 {
                format!(
                    "the backend gets none of the {} requests offered",
                    outage.offered
                )
            } else {
                format!(
                    "the backend gets up to {} requests in a second of the outage, of {} offered{capacity}",
                    outage.worst_1s_during, outage.offered_worst_1s
                )
            };
            let _ = writeln!(
                html,
                "<li><b>{}</b> {what}: from {} for {}, {got}.</li>",
                escape(&run.limiter),
                seconds(outage.at_ns),
                Nanos(outage.for_ns),
            );
        }
    }
    html.push_str("</ul>\n");
    html
}

/// Workloads whose clients retry: their table, and what it shows in words.
fn closed_loop_section(results: &Results, runs: &[RunSummary]) -> String {
    let Some(table) = super::table::closed_loop_rows(runs) else {
        return String::new();
    };
    let rolling = results.metrics.rolling;
    let mut findings = Vec::new();
    for run in runs {
        let Some(c) = &run.closed_loop else { continue };
        let times = c.worst_rolling_attempts as f64 / run.nominal.max(1.0);
        if let Some(share) = c.retries_after_reset_share.filter(|&s| s >= 0.5) {
            findings.push(format!(
                "<b>{}</b> through <b>{}</b>: {:.0}% of retries arrive within 10 ms after a window reset — the herd — and up to {} attempts reach the limiter in {rolling}, {:.1}× its limit.",
                escape(&run.workload),
                escape(&run.limiter),
                share * 100.0,
                c.worst_rolling_attempts,
                times
            ));
        }
        if c.lockout.lockouts > 0 {
            findings.push(format!(
                "<b>{}</b> locked <b>{}</b> out for {:.1} s from {}: every attempt rejected while its clients sent no more than the limit; goodput {:.1}% at {:.1} attempts per request.",
                escape(&run.limiter),
                escape(&run.workload),
                c.lockout.longest_ns as f64 / 1e9,
                seconds(c.lockout.longest_start_ns),
                c.goodput_share * 100.0,
                c.amplification
            ));
        }
    }
    let mut html = String::from("<h2>Clients that retry</h2>\n<ul>\n");
    for workload in &results.workloads {
        if let Some(retry) = runs
            .iter()
            .find(|r| r.workload == workload.name)
            .and_then(|r| r.closed_loop.as_ref())
        {
            let _ = writeln!(
                html,
                "<li><b>{}</b>: {}</li>",
                escape(&workload.name),
                escape(&retry.retry)
            );
        }
    }
    html.push_str("</ul>\n");
    let note = super::table::CLOSED_LOOP_NOTE
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(
        html,
        "{}<p class=\"note\">{}</p>",
        table.html(),
        escape(&note)
    );
    if !findings.is_empty() {
        html.push_str("<ul>\n");
        for finding in findings {
            let _ = writeln!(html, "<li>{finding}</li>");
        }
        html.push_str("</ul>\n");
    }
    html
}

fn parameters(results: &Results) -> String {
    let mut html = String::from("<h2>Scenario</h2>\n<table>\n");
    let backend = results
        .backend
        .map_or("none".to_string(), |b| match b.queue {
            Some(queue) => format!(
                "{} requests per second, queue of {queue}",
                b.capacity_per_sec
            ),
            None => format!("{} requests per second", b.capacity_per_sec),
        });
    let metrics = &results.metrics;
    let profile: Vec<String> = metrics.profile.iter().map(Nanos::to_string).collect();
    let rows = [
        ("duration", results.duration.to_string()),
        ("seed", results.seed.to_string()),
        ("backend", backend),
        ("rolling interval", metrics.rolling.to_string()),
        ("profile intervals", profile.join(", ")),
        ("timeline bucket", metrics.bucket.to_string()),
    ];
    for (key, value) in rows {
        let _ = writeln!(html, "<tr><th>{key}</th><td>{}</td></tr>", escape(&value));
    }
    for workload in &results.workloads {
        let sources: Vec<String> = workload.sources.iter().map(|s| escape(s)).collect();
        let _ = writeln!(
            html,
            "<tr><th>workload {}</th><td>{}</td></tr>",
            escape(&workload.name),
            sources.join("<br>")
        );
    }
    for limiter in &results.limiters {
        let _ = writeln!(
            html,
            "<tr><th>limiter {}</th><td>{}: {}</td></tr>",
            escape(&limiter.name),
            limiter.kind,
            escape(&limiter.description)
        );
    }
    html.push_str("</table>\n");
    html
}

/// The SVG element as HTML wants it: no XML declaration, and no namespace
/// attribute (HTML puts `<svg>` in the SVG namespace by itself), so the page
/// names no address at all.
fn inline_svg(svg: &str) -> String {
    let svg = svg.find("<svg").map_or(svg, |start| &svg[start..]);
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sentence names at most 12 limiters and counts the rest.
    #[test]
    fn a_list_in_a_sentence_joins_with_and_and_counts_past_twelve() {
        let names = |n: usize| (1..=n).map(|i| format!("l{i}")).collect::<Vec<_>>();
        assert_eq!(join(&[]), "");
        assert_eq!(join(&names(1)), "l1");
        assert_eq!(join(&names(3)), "l1, l2 and l3");
        assert_eq!(join(&names(12)).matches(", ").count(), 10);
        assert_eq!(
            join(&names(15)),
            "l1, l2, l3, l4, l5, l6, l7, l8, l9, l10, l11, l12 and 3 more"
        );
    }
}
