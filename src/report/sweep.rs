//! `burstsim sweep` output: `sweep.json` and `sweep.csv` (one row per point
//! × workload × limiter, with every figure of `summary.json` and the varied
//! values), the terminal table and the report's sweep section. Everything
//! here reads only a sweep's identity and its points' results, so a merge of
//! shards writes exactly what the whole sweep would have.

use std::fmt::Write as _;

use serde::Serialize;
use serde::ser::SerializeMap;

use super::rows::{Align, Rows};
use crate::chart::Chart;
use crate::summary::RunSummary;
use crate::sweep::results::{SweepResults, within_capacity, worst_second};
use crate::sweep::{AxisSpec, Grid, values};

/// Most points of each workload printed in the terminal table; the files hold all.
const TABLE_ROWS: usize = 100;
/// Most columns of a two-group sweep's matrix; wider grids print a row per point.
const MATRIX_COLUMNS: usize = 24;

#[derive(Serialize)]
struct SweepJson<'a> {
    scenario: &'a str,
    scenario_hash: &'a str,
    seed: u64,
    replications: u64,
    burstsim: &'a str,
    grid: &'a [Vec<AxisSpec>],
    points: usize,
    rows: Vec<Row<'a>>,
}

#[derive(Serialize)]
struct Row<'a> {
    point: usize,
    values: Values<'a>,
    within_capacity: Option<bool>,
    run: &'a RunSummary,
}

/// The varied values of a point, keyed by path in the grid's order.
struct Values<'a> {
    grid: &'a Grid,
    point: usize,
}

impl Serialize for Values<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let values = self.grid.values_at(self.point);
        let mut map = serializer.serialize_map(Some(values.len()))?;
        for (axis, value) in self.grid.axes().zip(values) {
            map.serialize_entry(&axis.path.to_string(), &values::json(value))?;
        }
        map.end()
    }
}

/// `sweep.json`: the sweep's identity, then one row per point × run.
pub fn render_json(sweep: &SweepResults) -> String {
    let id = sweep.identity;
    let json = SweepJson {
        scenario: &id.scenario,
        scenario_hash: &id.scenario_hash,
        seed: id.seed,
        replications: id.replications,
        burstsim: &id.burstsim,
        grid: &id.grid,
        points: sweep.points.len(),
        rows: sweep
            .rows()
            .map(|(point, run)| Row {
                point,
                values: Values {
                    grid: &sweep.grid,
                    point,
                },
                within_capacity: within_capacity(run),
                run,
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&json).expect("a sweep always serialises");
    text.push('\n');
    text
}

/// `sweep.csv`: `point`, each varied path, `within_capacity`, then the
/// columns of `summary.csv`.
pub fn render_csv(sweep: &SweepResults) -> String {
    let runs: Vec<RunSummary> = sweep.rows().map(|(_, run)| run.clone()).collect();
    let summary = super::csv::render_summary(&runs);
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(summary.as_bytes());
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["point".to_string()];
    header.extend(sweep.grid.axes().map(|a| a.path.to_string()));
    header.push("within_capacity".into());
    header.extend(
        reader
            .headers()
            .expect("summary.csv has a header")
            .iter()
            .map(str::to_owned),
    );
    writer.write_record(&header).expect("writing to memory");
    for ((point, run), record) in sweep.rows().zip(reader.records()) {
        let record = record.expect("summary.csv reads back");
        let mut row = vec![point.to_string()];
        row.extend(sweep.grid.values_at(point).into_iter().map(values::label));
        row.push(within_capacity(run).map_or(String::new(), |ok| ok.to_string()));
        row.extend(record.iter().map(str::to_owned));
        writer.write_record(&row).expect("writing to memory");
    }
    String::from_utf8(writer.into_inner().expect("writing to memory")).expect("CSV of UTF-8 text")
}

/// A piece of the sweep's tables: words, or a table.
pub enum Part {
    /// A line or more of words.
    Text(String),
    /// A table.
    Table(Rows),
}

/// The terminal table: per workload, a row per point (the first
/// [`TABLE_ROWS`]), each limiter's worst second against the backend.
pub fn render_table(sweep: &SweepResults) -> String {
    tables(sweep)
        .iter()
        .map(|part| match part {
            Part::Text(text) => text.clone(),
            Part::Table(rows) => format!("{}\n", rows.terminal()),
        })
        .collect()
}

/// The sweep's tables with the words around them.
pub fn tables(sweep: &SweepResults) -> Vec<Part> {
    let limiters = sweep.limiters();
    let backend = sweep.rows().any(|(_, run)| run.backend.is_some());
    let mut parts = Vec::new();
    for workload in sweep.workloads() {
        let groups = &sweep.grid.groups;
        if groups.len() == 2
            && groups[0][0].values.len() <= MATRIX_COLUMNS
            && groups[1][0].values.len() <= TABLE_ROWS
        {
            for limiter in &limiters {
                parts.push(Part::Text(format!("{workload} × {limiter}\n")));
                parts.push(Part::Table(matrix(sweep, workload, limiter)));
                parts.push(Part::Text("\n".to_string()));
            }
        } else {
            parts.push(Part::Text(format!("{workload}\n")));
            parts.push(Part::Table(point_rows(sweep, workload, &limiters)));
            if sweep.points.len() > TABLE_ROWS {
                parts.push(Part::Text(format!(
                    "… {} more points in sweep.csv\n",
                    sweep.points.len() - TABLE_ROWS
                )));
            }
        }
        if backend {
            let safe: Vec<String> = limiters
                .iter()
                .map(|limiter| {
                    let ok = sweep
                        .points
                        .iter()
                        .filter(|p| {
                            sweep
                                .run(p.point, workload, limiter)
                                .and_then(within_capacity)
                                .unwrap_or(false)
                        })
                        .count();
                    format!("{limiter} {ok}/{}", sweep.points.len())
                })
                .collect();
            parts.push(Part::Text(format!(
                "{workload} within the backend at: {}\n",
                safe.join(", ")
            )));
        }
        parts.push(Part::Text("\n".to_string()));
    }
    let mut legend = String::new();
    for g in 0..sweep.grid.groups.len() {
        let _ = writeln!(legend, "v{}  {}", g + 1, sweep.group_name(g));
    }
    if backend {
        legend.push_str("Each cell: the most admitted in any second (the worst over replications) — ✓ within the backend's capacity, ✗ over it or dropping requests.\n");
    } else {
        legend.push_str("Each cell: the most admitted in any rolling interval (no [backend] to judge it against).\n");
    }
    parts.push(Part::Text(legend));
    parts
}

/// Two varied groups: one matrix per limiter, v1 across and v2 up, as in the heat map.
fn matrix(sweep: &SweepResults, workload: &str, limiter: &str) -> Rows {
    let (x, y) = (&sweep.grid.groups[0][0], &sweep.grid.groups[1][0]);
    let (nx, ny) = (x.values.len(), y.values.len());
    let header = std::iter::once("v2 \\ v1".to_string()).chain(x.values.iter().map(values::label));
    let mut rows = Rows::new(header.map(|h| (h, Align::Right)));
    rows.gap = 2;
    for j in (0..ny).rev() {
        let mut row = vec![values::label(&y.values[j])];
        for i in 0..nx {
            row.push(
                sweep
                    .run(i * ny + j, workload, limiter)
                    .map_or(String::new(), cell),
            );
        }
        rows.push(row, false);
    }
    rows
}

/// One row per point (the first [`TABLE_ROWS`]), a column per limiter.
fn point_rows(sweep: &SweepResults, workload: &str, limiters: &[&str]) -> Rows {
    let header = (0..sweep.grid.groups.len())
        .map(|g| format!("v{}", g + 1))
        .chain(limiters.iter().map(|l| (*l).to_string()));
    let mut rows = Rows::new(header.map(|h| (h, Align::Right)));
    rows.gap = 2;
    for point in sweep.points.iter().take(TABLE_ROWS) {
        let mut row = sweep.group_labels(point.point);
        for limiter in limiters {
            row.push(
                sweep
                    .run(point.point, workload, limiter)
                    .map_or(String::new(), cell),
            );
        }
        rows.push(row, false);
    }
    rows
}

fn cell(run: &RunSummary) -> String {
    match (worst_second(run), within_capacity(run)) {
        (Some((worst, _)), Some(ok)) => format!("{worst} {}", if ok { "✓" } else { "✗" }),
        _ => match &run.replications {
            Some(r) => format!("{:.0}", r.worst_rolling.max),
            None => run.worst_rolling.to_string(),
        },
    }
}

/// Where `burstsim sweep` puts its section in a report.
const SWEEP_START: &str = "<!-- burstsim:sweep -->";
const SWEEP_END: &str = "<!-- /burstsim:sweep -->";

/// The report's sweep section: what was varied, the charts, the table.
pub fn section(sweep: &SweepResults, charts: &[Chart]) -> String {
    let id = sweep.identity;
    let mut html = format!(
        "{SWEEP_START}\n<h2>Sweep</h2>\n<p>{} points × {} workload(s) × {} limiter(s), seed {}, {} replication(s); scenario fingerprint {}.</p>\n<ul>\n",
        sweep.points.len(),
        sweep.workloads().len(),
        sweep.limiters().len(),
        id.seed,
        id.replications,
        id.scenario_hash
    );
    for (g, group) in sweep.grid.groups.iter().enumerate() {
        let values: Vec<String> = group[0].values.iter().map(values::label).collect();
        let _ = writeln!(
            html,
            "<li>v{}: <code>{}</code> = {}</li>",
            g + 1,
            super::html::escape(&sweep.group_name(g)),
            super::html::escape(&values.join(", "))
        );
    }
    html.push_str("</ul>\n");
    if charts.is_empty() {
        let _ = writeln!(
            html,
            "<p>Charts are drawn for one varied group, or two of at most {} points; this sweep's figures are in sweep.csv and sweep.json.</p>",
            crate::chart::MAX_HEAT_CELLS
        );
    }
    for chart in charts {
        html.push_str(&super::html::figure(chart));
    }
    for part in tables(sweep) {
        match part {
            Part::Text(text) => {
                for line in text.lines().filter(|line| !line.trim().is_empty()) {
                    let _ = writeln!(html, "<p>{}</p>", super::html::escape(line));
                }
            }
            Part::Table(rows) => html.push_str(&rows.html()),
        }
    }
    let _ = writeln!(html, "{SWEEP_END}");
    html
}

/// `report` with its sweep section replaced by (or, the first time, put
/// before the sizing section or at the end of) `section`.
pub fn with_section(report: &str, section: &str) -> String {
    if let Some(start) = report.find(SWEEP_START)
        && let Some(end) = report[start..].find(SWEEP_END)
    {
        let end = start + end + SWEEP_END.len();
        let end = end + usize::from(report[end..].starts_with('\n'));
        return format!("{}{section}{}", &report[..start], &report[end..]);
    }
    let at = report
        .find(super::html::SIZING_START)
        .or_else(|| report.rfind("</body>"))
        .unwrap_or(report.len());
    format!("{}{section}{}", &report[..at], &report[at..])
}

/// A page of its own for a sweep whose scenario was never `run` here.
pub fn page(sweep: &SweepResults, section: &str) -> String {
    super::html::page(
        &format!("burstsim sweep: {}", sweep.identity.scenario),
        &format!(
            "scenario {} · burstsim {}",
            sweep.identity.scenario, sweep.identity.burstsim
        ),
        section,
    )
}
