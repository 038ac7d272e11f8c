//! Output formats: small pure functions from results to text.

pub mod columns;
pub mod csv;
pub mod html;
pub mod rows;
pub mod sizing;
pub mod sweep;
pub mod table;
pub mod values;
mod verdict;

use crate::summary::Summary;

/// `summary.json`: pretty-printed, keys in a fixed order, a newline at the end.
pub fn render_json(summary: &Summary) -> String {
    let mut text = serde_json::to_string_pretty(summary).expect("a summary always serialises");
    text.push('\n');
    text
}

/// A bound as printed: `u64::MAX` means no bound over any traffic.
pub fn bound(value: u64) -> String {
    if value == u64::MAX {
        "unbounded".to_string()
    } else {
        value.to_string()
    }
}

/// A bound in a CSV file: empty where there is none over any traffic.
pub fn csv_bound(value: u64) -> String {
    crate::summary::unbounded::option(value).map_or_else(String::new, |b| b.to_string())
}

/// A ratio as `2.00×`.
pub fn ratio(value: f64) -> String {
    format!("{value:.2}×")
}

pub use crate::time::seconds;

/// For each workload replaying a log of responses, what its own limiter
/// did beside what each model does: `black-friday: the log's own limiter
/// turned away 176 of 2308 requests; the models turn away global-fixed 256,
/// …`. With clients that retry, the log's rows are the requests (first
/// attempts) and a model turns a request away when its client gives up on
/// it; its rejected attempts, retries included, are shown beside.
pub fn log_comparison(runs: &[crate::summary::RunSummary]) -> Vec<String> {
    let mut lines: Vec<(String, u64, u64, Vec<String>)> = Vec::new();
    for run in runs {
        let Some(logged) = run.turned_away_in_log else {
            continue;
        };
        let (requests, model) = match &run.closed_loop {
            Some(clients) => (
                clients.requests,
                format!(
                    "{} {} ({} of {} attempts)",
                    run.limiter, clients.gave_up, run.rejected, run.offered
                ),
            ),
            None => (run.offered, format!("{} {}", run.limiter, run.rejected)),
        };
        match lines.iter_mut().find(|line| line.0 == run.workload) {
            Some(line) => line.3.push(model),
            None => lines.push((run.workload.clone(), logged, requests, vec![model])),
        }
    }
    lines
        .into_iter()
        .map(|(workload, logged, requests, models)| {
            format!(
                "{workload}: the log's own limiter turned away {logged} of {requests} requests; the models turn away {}",
                models.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_ratios_and_seconds_print_as_the_table_shows_them() {
        assert_eq!(bound(200), "200");
        assert_eq!(bound(u64::MAX), "unbounded");
        assert_eq!(ratio(2.0), "2.00×");
        assert_eq!(ratio(0.054), "0.05×");
        assert_eq!(seconds(43_588_000_001), "43.588s");
        assert_eq!(seconds(0), "0.000s");
    }
}
