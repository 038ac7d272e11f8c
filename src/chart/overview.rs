//! `overview-<workload>.svg`: the whole run at a glance — for every limiter,
//! the requests admitted in the *trailing* rolling interval at every instant,
//! exact (never aligned buckets, which hide a fixed window's 2×), against its
//! limit, its bound over any traffic and the backend's capacity in that unit.

use anyhow::Result;
use plotters::prelude::*;

use super::style::{BOUND, CAPACITY, FONT, REFERENCE, TITLE_SIZE, WIDTH};
use super::{
    Canvas, Chart, DASHED, DOTTED, NOTE_LINE, PanelAxes, Reference, Results, X_AXIS_HEIGHT,
    add_overlay, count_words, draw_panel_note, draw_references, interval_words, note_lines,
    panel_plot, step_points, whole_seconds_line,
};
use crate::results::{RunResult, WorkloadResults};
use crate::time::{NANOS_PER_SEC, Nanos};

/// Columns drawn at most: about one per two pixels of the plot; each is the
/// most of the buckets it spans, so every peak keeps its exact height.
const COLUMNS: usize = 560;
const PANEL_HEIGHT: u32 = 160;

/// The chart for `workload`.
pub fn render(results: &Results, workload: &WorkloadResults) -> Result<Chart> {
    let runs = &workload.runs;
    let colours = super::colours(results);
    let name = &workload.name;
    let rolling = results.metrics.rolling;
    let seconds = |ns: u64| ns as f64 / NANOS_PER_SEC as f64;
    let capacity = results
        .capacity()
        .map(|per_sec| per_sec as f64 * seconds(rolling.get()));
    let bound = |run: &RunResult| Some(run.summary.bound).filter(|&b| b != u64::MAX);
    let data_top = runs
        .iter()
        .map(|run| run.summary.worst_rolling as f64)
        .chain(capacity)
        .fold(1.0, f64::max);
    // Limits and bounds join the scale unless one would squash the lines:
    // a per-key limit summed over hundreds of keys, say.
    let top = runs
        .iter()
        .filter_map(bound)
        .map(|b| b as f64)
        .chain(runs.iter().map(|run| run.summary.nominal))
        .filter(|&reference| reference <= data_top * 2.5)
        .fold(data_top, f64::max)
        * 1.12;
    let end = seconds(results.duration.get());
    let title = format!(
        "{name}: requests admitted in the trailing {} at every instant (exact)",
        interval_words(rolling)
    );
    let note_lines = note_lines(runs);
    let panel_height = PANEL_HEIGHT + NOTE_LINE * (note_lines - 1);
    let mut svg = String::new();
    let mut overlay = String::new();
    {
        let panels = runs.len() as u32;
        let height = TITLE_SIZE * 3 + panel_height * panels + X_AXIS_HEIGHT;
        let canvas = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        canvas.fill(&WHITE)?;
        let root = canvas.titled(&title, (FONT, TITLE_SIZE))?;
        let breaks: Vec<u32> = (1..panels).map(|i| i * panel_height).collect();
        let areas = root.split_by_breakpoints::<u32, u32, _, _>([], breaks);
        for (i, (run, area)) in runs.iter().zip(&areas).enumerate() {
            let panel = Panel {
                run,
                colour: colours[i],
                end,
                top,
                capacity,
                bound: bound(run),
                last: i + 1 == runs.len(),
                note_lines,
                y_desc: (i == runs.len() / 2)
                    .then(|| format!("admitted in the trailing {}", interval_words(rolling))),
            };
            panel.draw(area, &canvas, &mut overlay)?;
        }
        canvas.present()?;
    }
    add_overlay(&mut svg, &overlay);
    let caption = format!(
        "Each line is the number of requests admitted in the {} before each instant, exact at every peak (never counted in aligned buckets, which would hide a fixed window's spike at its edge). Where a line rises above the red capacity line, the backend gets more than it can serve.",
        interval_words(rolling)
    );
    Ok(Chart {
        file: format!("overview-{name}.svg"),
        caption,
        svg,
    })
}

struct Panel<'a> {
    run: &'a RunResult,
    colour: RGBColor,
    end: f64,
    top: f64,
    capacity: Option<f64>,
    bound: Option<u64>,
    last: bool,
    note_lines: u32,
    y_desc: Option<String>,
}

impl Panel<'_> {
    fn draw(&self, area: &Canvas, canvas: &Canvas, overlay: &mut String) -> Result<()> {
        let axes = PanelAxes {
            last: self.last,
            y_desc: self.y_desc.as_deref(),
            y_labels: 4,
            x_decimals: 1,
            x_grid: true,
            note_lines: self.note_lines,
        };
        let mut chart = panel_plot(area, 0.0..self.end, self.top, &axes)?;

        let summary = &self.run.summary;
        let per_key = super::per_key_ratio(summary);
        let mut references = Vec::new();
        if summary.nominal <= self.top && per_key.is_none() {
            references.push(Reference {
                level: summary.nominal,
                label: format!("limit {}", count_words(summary.nominal)),
                colour: REFERENCE,
                dash: DASHED,
            });
        }
        if let Some(bound) = self.bound.filter(|&b| (b as f64) <= self.top) {
            references.push(Reference {
                level: bound as f64,
                label: format!("bound {bound}"),
                colour: BOUND,
                dash: DOTTED,
            });
        }
        if let Some(capacity) = self.capacity {
            references.push(Reference {
                level: capacity,
                label: format!("capacity {}", count_words(capacity)),
                colour: CAPACITY,
                dash: DASHED,
            });
        }
        if let Some(trailing) = &self.run.trailing {
            let factor = trailing.most.len().div_ceil(COLUMNS);
            let column = (trailing.column.get() * factor as u64) as f64 / NANOS_PER_SEC as f64;
            // A step per column: flat across it at the most it reached.
            let most = trailing.coarsened(factor);
            let steps = step_points(most.iter().map(|&m| f64::from(m)), |j| {
                (j as f64 * column).min(self.end)
            });
            chart.draw_series(LineSeries::new(steps, self.colour.stroke_width(2)))?;
        }
        draw_references(&mut chart, canvas, 0.0..self.end, references, overlay)?;
        let against = match per_key {
            Some(ratio) => format!("its worst client at {ratio:.2}× its own quota"),
            None => format!("{:.2}× its limit", summary.spike_ratio),
        };
        let mut note = format!(
            "{}: at most {} in any {} (from {:.3} s), {against}",
            summary.limiter,
            summary.worst_rolling,
            interval_words(Nanos(summary.rolling_ns)),
            summary.worst_rolling_start_ns as f64 / NANOS_PER_SEC as f64,
        );
        if let Some(capacity) = self.capacity {
            let over = summary.worst_rolling as f64 - capacity;
            if over > 0.0 {
                note.push_str(&format!(" — {} over capacity", count_words(over)));
            }
        }
        if summary.nominal > self.top && per_key.is_none() {
            note.push_str(&format!(
                "; limit {}, above this scale",
                count_words(summary.nominal)
            ));
        }
        if let Some(bound) = self.bound.filter(|&b| (b as f64) > self.top) {
            note.push_str(&format!("; bound {bound}, above this scale"));
        }
        let whole = whole_seconds_line(summary, self.capacity);
        let lines: Vec<String> = std::iter::once(note).chain(whole).collect();
        draw_panel_note(canvas, area, &lines)?;
        Ok(())
    }
}
