//! The terminal table: one row per run, readable in 100 columns.

use comfy_table::{CellAlignment, ContentArrangement, LineStyle, Table, TableStyle};

use super::{ratio, seconds};
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
    let mut header = vec![
        "workload".to_string(),
        "limiter".to_string(),
        "admitted".to_string(),
        format!("worst {rolling}"),
        "from".to_string(),
        "×limit".to_string(),
        "bound".to_string(),
        backend_header,
    ];
    if queue {
        header.push("drops".to_string());
    }
    let mut table = Table::new();
    table
        .load_style(STYLE)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
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
            run.worst_rolling.to_string(),
            seconds(run.worst_rolling_start_ns),
            ratio(run.spike_ratio),
            run.bound.to_string(),
            verdict(run),
        ];
        if queue {
            let dropped = run
                .backend
                .as_ref()
                .and_then(|b| b.queue.as_ref())
                .map(|q| q.dropped);
            row.push(dropped.map_or("-".to_string(), |d| d.to_string()));
        }
        table.add_row(row);
    }
    for (index, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 1));
        if (2..7).contains(&index) || index == 8 {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.trim_fmt()
}

/// The most admitted in any second against the backend's capacity:
/// `OVER 200/s`, `ok 108/s`, or `-` without a backend.
pub fn verdict(run: &RunSummary) -> String {
    match &run.backend {
        None => "-".to_string(),
        Some(backend) if backend.over_capacity > 0 => format!("OVER {}/s", backend.worst_1s),
        Some(backend) => format!("ok {}/s", backend.worst_1s),
    }
}
