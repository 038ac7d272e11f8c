//! The report's verdict: which limiters kept the backend within capacity,
//! the cause of each excess and its fix, and what the limits cost.

use super::ratio;
use super::rows::{escape, join};
use crate::check::Verdict;
use crate::results::Results;
use crate::summary::RunSummary;
use crate::time::Nanos;

/// One sentence: which limiters kept the backend safe, or the largest spike;
/// then the causes, the recommendation and the costs `verdict` holds.
pub(super) fn sentence(
    results: &Results,
    runs: &[RunSummary],
    verdict: Option<&Verdict>,
) -> String {
    let Some(verdict) = verdict else {
        return match runs
            .iter()
            .reduce(|a, b| if b.spike_ratio > a.spike_ratio { b } else { a })
        {
            Some(top) => format!(
                "<b>Verdict:</b> the largest spike is <b>{}</b> on <i>{}</i>: {} requests in {}, {} its limit (no <code>[backend]</code> to judge against).",
                escape(&top.limiter),
                escape(&top.workload),
                top.worst_rolling,
                Nanos(top.rolling_ns),
                ratio(top.spike_ratio)
            ),
            None => "<b>Verdict:</b> no runs.".to_string(),
        };
    };
    let capacity = verdict.capacity;
    let over_any = &verdict.over;
    let (over, within): (Vec<&str>, Vec<&str>) = results
        .limiters
        .iter()
        .map(|l| l.name.as_str())
        .partition(|name| over_any.contains(name));
    let names = |list: &[&str]| {
        join(
            &list
                .iter()
                .map(|n| format!("<b>{}</b>", escape(n)))
                .collect::<Vec<_>>(),
        )
    };
    let mut points: Vec<String> = verdict
        .causes
        .iter()
        .map(|(cause, limiters)| {
            format!(
                "<li><b>Cause: {}</b> ({}): {}.</li>",
                cause.name(),
                escape(&limiters.join(", ")),
                code(&escape(cause.explanation()))
            )
        })
        .collect();
    // The answer straight after the causes, before what the others cost.
    let causes = points.len();
    points.insert(causes, match &verdict.recommendation {
        Some(best) => format!(
            "<li><b>Recommended: {}</b>: {}.</li>",
            escape(best.limiter),
            escape(&best.words())
        ),
        None => "<li><b>Recommended:</b> none of these holds the backend on every workload (the causes above say why); <code>burstsim size</code> sizes those a setting can fix.</li>".to_string(),
    });
    // Within as the log's whole seconds were placed, not for every placement.
    let doubtful: Vec<String> = runs
        .iter()
        .filter(|run| !verdict.over.contains(&run.limiter.as_str()))
        .filter_map(|run| {
            let seconds = run.whole_seconds_per_second()?;
            let (least, most) = (seconds.admitted_at_least, seconds.admitted_at_most);
            (most > capacity).then(|| {
                format!(
                    "<b>{}</b> on <i>{}</i> up to {most} ({least} with each second's requests packed against the next's)",
                    escape(&run.limiter),
                    escape(&run.workload)
                )
            })
        })
        .collect();
    if !doubtful.is_empty() {
        points.insert(causes, format!(
            "<li><b>Within as placed:</b> the log stamps whole seconds, so within is said of the seeded placement of each request in its second; another placement could let more than {capacity} through in a second: {}.</li>",
            join(&doubtful)
        ));
    }
    let under: Vec<String> = verdict
        .under_limit
        .iter()
        .filter_map(|run| {
            let o = run.overload.as_ref()?;
            Some(format!(
                "<b>{}</b> on <i>{}</i> {:.0}/s ({:.0}%)",
                escape(&run.limiter),
                escape(&run.workload),
                o.admitted_per_second,
                o.limit_share * 100.0
            ))
        })
        .collect();
    if !under.is_empty() {
        points.push(format!(
            "<li><b>Cost: below their limit while demand exceeds it</b> (admitted per second in those seconds, share of the limit): {}.</li>",
            join(&under)
        ));
    }
    let costs: Vec<String> = verdict
        .peak_costs
        .iter()
        .map(|run| {
            format!(
                "<b>{}</b> {}",
                escape(&run.limiter),
                escape(&crate::check::peak_cost_words(run))
            )
        })
        .collect();
    if !costs.is_empty() {
        points.push(format!(
            "<li><b>Cost at the peak</b> (of those within capacity, the share turned away of a workload's busiest second): {}.</li>",
            join(&costs)
        ));
    }
    let points = if points.is_empty() {
        String::new()
    } else {
        format!(
            "</p>\n<ul class=\"causes\">\n{}\n</ul>\n<p>",
            points.join("\n")
        )
    };
    let sentence = match (over.is_empty(), within.is_empty()) {
        (true, _) => format!(
            "<b>Verdict:</b> every limiter kept the backend within its {capacity}/s on every workload."
        ),
        (false, true) => format!(
            "<b>Verdict:</b> every limiter let more through than the backend's {capacity}/s on some workload: {}.",
            names(&over)
        ),
        (false, false) => format!(
            "<b>Verdict:</b> <span class=\"over\">{} let more through than the backend's {capacity}/s</span> on some workload; {} stayed within it.",
            names(&over),
            names(&within)
        ),
    };
    sentence + &points
}

/// `text` (escaped HTML) with each `quoted` span set as code.
fn code(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out += &format!("<code>{part}</code>");
        } else {
            out += part;
        }
    }
    out
}
