//! The terminal table: one row per run, readable in 100 columns.

use comfy_table::{CellAlignment, ContentArrangement, LineStyle, Table, TableStyle};

use super::{bound, ratio, seconds};
use crate::summary::RunSummary;
use crate::time::Nanos;

/// No borders, one rule under the header: quiet enough to read 28 rows.
pub const STYLE: TableStyle =
    TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

/// The table printed by `burstsim run`. A workload's name is printed on its
/// first row only, so the eye groups its limiters.
pub fn render_table(runs: &[RunSummary]) -> String {
    let rolling = runs
        .first()
        .map_or(Nanos::SECOND, |run| Nanos(run.rolling_ns));
    let capacity = runs
        .iter()
        .find_map(|run| run.backend.as_ref().map(|b| b.capacity));
    let backend_header = capacity.map_or("backend".to_string(), |c| format!("vs {c}/s"));
    let queue = runs
        .iter()
        .any(|run| run.backend.as_ref().is_some_and(|b| b.queue.is_some()));
    // With replications, the worst column is the maximum over them, and its
    // median and 99th percentile replace the start of replication 0's.
    let replicated = runs.iter().any(|run| run.replications.is_some());
    let mut header = vec![
        "workload".to_string(),
        "limiter".to_string(),
        "admitted".to_string(),
        if replicated {
            format!("max {rolling}")
        } else {
            format!("worst {rolling}")
        },
        if replicated { "p50/p99" } else { "from" }.to_string(),
        "×limit".to_string(),
        "bound".to_string(),
        backend_header,
    ];
    if queue {
        header.push("drops".to_string());
    }
    // Limiters per key: what their state costs to keep, beside each.
    let per_key = runs
        .iter()
        .any(|run| run.keys.as_ref().is_some_and(|k| k.state.is_some()));
    if per_key {
        header.extend(["keys", "state", "ops/req", "resets/s"].map(String::from));
    }
    let mut table = quiet_table(header);
    for (i, run) in runs.iter().enumerate() {
        let first_of_workload = i == 0 || runs[i - 1].workload != run.workload;
        let mut row = vec![
            if first_of_workload {
                run.workload.clone()
            } else {
                String::new()
            },
            run.limiter.clone(),
            format!("{}/{}", run.admitted, run.offered),
            match &run.replications {
                Some(r) => format!("{:.0}", r.worst_rolling.max),
                None => run.worst_rolling.to_string(),
            },
            match &run.replications {
                Some(r) => format!("{:.0}/{:.0}", r.worst_rolling.p50, r.worst_rolling.p99),
                None => seconds(run.worst_rolling_start_ns),
            },
            match &run.replications {
                Some(r) => ratio(r.worst_rolling.max / run.nominal),
                None => ratio(run.spike_ratio),
            },
            bound(run.bound),
            verdict(run),
        ];
        if queue {
            let dropped = run.dropped_max();
            row.push(dropped.map_or("-".to_string(), |d| d.to_string()));
        }
        if per_key {
            row.extend(state_columns(run));
        }
        table.add_row(row);
    }
    align_right(&mut table, |index| (2..7).contains(&index) || index >= 8);
    table.trim_fmt()
}

/// A table in [`STYLE`] with `header`, its rows left as they are.
fn quiet_table<T: Into<comfy_table::Row>>(header: T) -> Table {
    let mut table = Table::new();
    table
        .load_style(STYLE)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    table
}

/// One space after each column; the columns `right` picks aligned right.
fn align_right(table: &mut Table, right: impl Fn(usize) -> bool) {
    for (index, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 1));
        if right(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// The second table, for workloads whose clients retry: requests against
/// attempts, goodput, the wait to get in, the attempts' own worst interval,
/// the herd after resets and lockouts.
pub fn render_closed_loop(runs: &[RunSummary]) -> Option<String> {
    let closed: Vec<_> = runs
        .iter()
        .filter_map(|run| Some((run, run.closed_loop.as_ref()?)))
        .collect();
    let rolling = Nanos(closed.first()?.0.rolling_ns);
    let header = [
        "retrying".to_string(),
        "limiter".to_string(),
        "requests".to_string(),
        "tries/req".to_string(),
        "goodput".to_string(),
        "gave up".to_string(),
        "wait p50/p99".to_string(),
        format!("attempts {rolling}"),
        "at reset".to_string(),
        "lockout".to_string(),
    ];
    let mut table = quiet_table(header);
    for (i, (run, c)) in closed.iter().enumerate() {
        let first_of_workload = i == 0 || closed[i - 1].0.workload != run.workload;
        let lockout = &c.lockout;
        table.add_row([
            if first_of_workload {
                run.workload.clone()
            } else {
                String::new()
            },
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
        ]);
    }
    align_right(&mut table, |index| index >= 2);
    Some(format!(
        "{}\n  tries/req: attempts per request. goodput: requests admitted. wait: from a request's first attempt to its admission.\n  at reset: retries arriving within 10 ms after a window reset. lockout: the longest time a limit (a client's, or the shared
  one) rejected every attempt while no more new requests than it allows were sent under it.",
        table.trim_fmt()
    ))
}

/// The table of store outages, for clusters whose store goes down: what
/// each limiter let through while it was down and after.
pub fn render_outages(runs: &[RunSummary]) -> Option<String> {
    let rows: Vec<_> = runs
        .iter()
        .flat_map(|run| {
            run.outages
                .iter()
                .flatten()
                .map(move |outage| (run, outage))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut table = quiet_table([
        "store down",
        "limiter",
        "outage",
        "on error",
        "offered",
        "admitted",
        "worst 1s offered",
        "worst 1s admitted",
        "worst 1s after",
    ]);
    for (i, (run, outage)) in rows.iter().enumerate() {
        let first_of_workload = i == 0 || rows[i - 1].0.workload != run.workload;
        table.add_row([
            if first_of_workload {
                run.workload.clone()
            } else {
                String::new()
            },
            run.limiter.clone(),
            format!("{} for {}", Nanos(outage.at_ns), Nanos(outage.for_ns)),
            outage.on_error.clone(),
            outage.offered.to_string(),
            outage.admitted.to_string(),
            outage.offered_worst_1s.to_string(),
            outage.worst_1s_during.to_string(),
            outage.worst_1s_after.to_string(),
        ]);
    }
    align_right(&mut table, |index| index >= 4);
    Some(format!(
        "{}\n  worst 1s: the most in any second counting only requests of the outage (offered, admitted), or of the ten seconds after it.",
        table.trim_fmt()
    ))
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

/// Keys alive at most, their state in bytes (per key and in all), store
/// commands per request, and counter resets per second: `10000`,
/// `129 B/key, 1 MB`, `1.07`, `10000`.
pub fn state_columns(run: &RunSummary) -> [String; 4] {
    let dash = || "-".to_string();
    let Some(state) = run.keys.as_ref().and_then(|k| k.state.as_ref()) else {
        return [dash(), dash(), dash(), dash()];
    };
    let bytes = match (state.bytes_per_key, state.bytes) {
        (Some(per_key), Some(total)) => format!(
            "{per_key} B/key, {}",
            crate::memory::words(u128::from(total))
        ),
        _ => dash(),
    };
    [
        state.keys_alive_max.to_string(),
        bytes,
        state
            .store_ops_per_request
            .map_or_else(dash, |ops| format!("{ops:.2}")),
        format!("{:.0}", state.resets_per_sec),
    ]
}

/// The most admitted in any second against the backend's capacity:
/// `OVER 200/s`, `ok 108/s`, or `-` without a backend.
pub fn verdict(run: &RunSummary) -> String {
    match &run.backend {
        None => "-".to_string(),
        Some(backend) => {
            let worst = run.worst_1s_max().unwrap_or(backend.worst_1s);
            if run.exceeds_capacity() {
                format!("OVER {worst}/s")
            } else {
                format!("ok {worst}/s")
            }
        }
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
