//! The terminal table: one row per run, readable in 100 columns.

use super::columns::{self, Format};
use super::rows::{Align, Rows};
use super::seconds;
use crate::summary::RunSummary;
use crate::time::Nanos;

pub use super::rows::STYLE;

/// The table printed by `burstsim run`: the columns [`columns::COLUMNS`]
/// shows in it. A workload's name is printed on its first row only, so the
/// eye groups its limiters.
pub fn render_table(runs: &[RunSummary]) -> String {
    columns::rows(runs, Format::Table).grouped().terminal()
}

/// The second table, for workloads whose clients retry: requests against
/// attempts, goodput, the wait to get in, the attempts' own worst interval,
/// the herd after resets and lockouts.
pub fn render_closed_loop(runs: &[RunSummary]) -> Option<String> {
    let rows = closed_loop_rows(runs)?;
    Some(format!("{}\n{CLOSED_LOOP_NOTE}", rows.terminal()))
}

/// What the closed-loop table's columns mean.
pub const CLOSED_LOOP_NOTE: &str = "  tries/req: attempts per request. goodput: requests admitted. wait: from a request's first attempt to its admission.\n  at reset: retries arriving within 10 ms after a window reset. lockout: the longest time a limit (a client's, or the shared\n  one) rejected every attempt while no more new requests than it allows were sent under it.";

/// The closed-loop table as rows, if some workload's clients retry.
pub fn closed_loop_rows(runs: &[RunSummary]) -> Option<Rows> {
    let closed: Vec<_> = runs
        .iter()
        .filter_map(|run| Some((run, run.closed_loop.as_ref()?)))
        .collect();
    let rolling = Nanos(closed.first()?.0.rolling_ns);
    let mut rows = Rows::new(
        [
            "retrying",
            "limiter",
            "requests",
            "tries/req",
            "goodput",
            "gave up",
            "wait p50/p99",
            &format!("attempts {rolling}"),
            "at reset",
            "lockout",
        ]
        .into_iter()
        .enumerate()
        .map(|(i, header)| (header.to_string(), figures_from(i, 2))),
    );
    for (run, c) in closed {
        let lockout = &c.lockout;
        let cells = vec![
            run.workload.clone(),
            run.limiter.clone(),
            c.requests.to_string(),
            format!("{:.2}", c.amplification),
            format!("{:.1}%", c.goodput_share * 100.0),
            c.gave_up.to_string(),
            format!(
                "{}/{}",
                short_time(c.to_admission_p50_ns),
                short_time(c.to_admission_p99_ns)
            ),
            c.worst_rolling_attempts.to_string(),
            c.retries_after_reset_share
                .map_or("-".to_string(), |share| format!("{:.0}%", share * 100.0)),
            if lockout.lockouts == 0 {
                "none".to_string()
            } else {
                format!(
                    "{:.1}s @{}",
                    lockout.longest_ns as f64 / 1e9,
                    seconds(lockout.longest_start_ns)
                )
            },
        ];
        rows.push(cells, false);
    }
    Some(rows.grouped())
}

/// The table of store outages, for clusters whose store goes down: what
/// each limiter let through while it was down and after.
pub fn render_outages(runs: &[RunSummary]) -> Option<String> {
    let rows = outage_rows(runs)?;
    Some(format!("{}\n{OUTAGE_NOTE}", rows.terminal()))
}

/// What the outage table's columns mean.
pub const OUTAGE_NOTE: &str = "  worst 1s: the most in any second counting only requests of the outage (offered, admitted), or of the ten seconds after it.";

/// The outage table as rows, if some store goes down.
pub fn outage_rows(runs: &[RunSummary]) -> Option<Rows> {
    let outages: Vec<_> = runs
        .iter()
        .flat_map(|run| {
            run.outages
                .iter()
                .flatten()
                .map(move |outage| (run, outage))
        })
        .collect();
    if outages.is_empty() {
        return None;
    }
    let mut rows = Rows::new(
        [
            "store down",
            "limiter",
            "outage",
            "on error",
            "offered",
            "admitted",
            "worst 1s offered",
            "worst 1s admitted",
            "worst 1s after",
        ]
        .into_iter()
        .enumerate()
        .map(|(i, header)| (header.to_string(), figures_from(i, 4))),
    );
    for (run, outage) in outages {
        let cells = vec![
            run.workload.clone(),
            run.limiter.clone(),
            format!("{} for {}", Nanos(outage.at_ns), Nanos(outage.for_ns)),
            outage.on_error.clone(),
            outage.offered.to_string(),
            outage.admitted.to_string(),
            outage.offered_worst_1s.to_string(),
            outage.worst_1s_during.to_string(),
            outage.worst_1s_after.to_string(),
        ];
        rows.push(cells, false);
    }
    Some(rows.grouped())
}

/// Text up to column `first`, figures from it on.
fn figures_from(index: usize, first: usize) -> Align {
    if index >= first {
        Align::Right
    } else {
        Align::Left
    }
}

/// A wait in the unit that suits it: `0`, `850µs`, `12ms`, `3.4s`.
fn short_time(ns: u64) -> String {
    match ns {
        0 => "0".to_string(),
        ns if ns < 1_000_000 => format!("{}µs", ns / 1_000),
        ns if ns < 1_000_000_000 => format!("{}ms", ns / 1_000_000),
        ns => format!("{:.1}s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_written_in_the_unit_that_suits_it() {
        assert_eq!(short_time(0), "0");
        assert_eq!(short_time(850_000), "850µs");
        assert_eq!(short_time(999_999), "999µs");
        assert_eq!(short_time(12_000_000), "12ms");
        assert_eq!(short_time(3_400_000_000), "3.4s");
    }
}
