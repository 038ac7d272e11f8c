//! SVG charts drawn with plotters' SVG backend. Charts only read results;
//! they never simulate.

mod arrival_curve;
mod overview;
mod sizing;
pub mod style;
mod sweep;
mod timeline;

pub use sizing::render_sizing;
pub use sweep::{MAX_HEAT_CELLS, render_sweep};
mod worst_rolling;

use std::fmt::Write as _;

use anyhow::Result;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub use crate::results::Results;
use crate::time::Nanos;

/// A rendered chart: its file name under `charts/`, a one-sentence caption
/// saying what to look at, and the SVG.
#[derive(Clone, Debug)]
pub struct Chart {
    /// File name, like `timeline-edge-burst.svg`.
    pub file: String,
    /// What to look at, for the report.
    pub caption: String,
    /// The SVG document.
    pub svg: String,
}

/// Each of `results`' limiters' colour, by name ([`style::limiter_colours`]).
fn colours(results: &Results) -> Vec<RGBColor> {
    let names: Vec<&str> = results.limiters.iter().map(|l| l.name.as_str()).collect();
    style::limiter_colours(&names)
}

/// For a limit per client key, the worst key's count against its own
/// quota: what its `×limit` means (a quota summed over the keys is no line
/// to read a spike against). `None` for any other limiter.
pub(crate) fn per_key_ratio(summary: &crate::summary::RunSummary) -> Option<f64> {
    Some(summary.keys.as_ref()?.spike_ratio?.max)
}

/// Every chart for `drawn`, a scenario's results as [`Results::drawn`]
/// selects them: of a scenario too large to draw whole, the limiters and
/// workloads with the largest worst counts, said in every title and caption.
pub fn render_charts(drawn: &Results) -> Result<Vec<Chart>> {
    let results = drawn;
    let mut charts = Vec::new();
    for workload in &results.workloads {
        charts.push(timeline::render(results, workload)?);
        charts.push(overview::render(results, workload)?);
    }
    charts.push(worst_rolling::render(results)?);
    charts.push(arrival_curve::render(results)?);
    if let Some(left_out) = &results.left_out {
        let note = format!("{left_out}; every run is in summary.csv");
        for chart in &mut charts {
            chart.caption = format!("{} ({note}.)", chart.caption);
            chart.svg = with_note_band(&chart.svg, &note);
        }
    }
    Ok(charts)
}

/// Height of the band above a chart that says what it leaves out.
const NOTE_BAND: u32 = 28;

/// `svg` moved down into a taller canvas, with `note` in the band above it:
/// said on the chart itself, never over anything drawn.
fn with_note_band(svg: &str, note: &str) -> String {
    let Some(header_end) = svg.find('>') else {
        return svg.to_string();
    };
    let number = |name: &str| -> Option<u32> {
        let at = svg[..header_end].find(&format!(" {name}=\""))? + name.len() + 3;
        svg[at..header_end].split('"').next()?.parse().ok()
    };
    let (Some(width), Some(height)) = (number("width"), number("height")) else {
        return svg.to_string();
    };
    let body = svg[header_end + 1..].trim_end().trim_end_matches("</svg>");
    let tall = height + NOTE_BAND;
    format!(
        "<svg width=\"{width}\" height=\"{tall}\" viewBox=\"0 0 {width} {tall}\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{NOTE_BAND}\" fill=\"#FFF4D6\" stroke=\"none\"/>\n\
         <text x=\"12\" y=\"19\" font-family=\"{font}\" font-size=\"{size}\" fill=\"#000000\">{note}</text>\n\
         <g transform=\"translate(0,{NOTE_BAND})\">{body}</g>\n</svg>\n",
        font = style::FONT,
        size = style::LABEL_SIZE,
        note = xml_escape(note),
    )
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

type Canvas<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Room above each small-multiple panel's plot for the first line of its note.
pub(super) const NOTE_HEIGHT: u32 = 24;
/// Room for each further line of a panel's note.
pub(super) const NOTE_LINE: u32 = 21;
/// Width of a panel's y tick labels.
const Y_LABELS: u32 = 80;
/// Room right of each panel for the labels of its reference lines.
const REFERENCE_LABELS: u32 = 150;
/// Height of the time axis under the last panel.
pub(super) const X_AXIS_HEIGHT: u32 = 56;

/// How one panel of a small-multiples chart differs from the others.
struct PanelAxes<'s> {
    /// Only the last panel shows the time axis.
    last: bool,
    /// The y axis's description, on the middle panel only.
    y_desc: Option<&'s str>,
    y_labels: usize,
    /// Digits after the point on the time axis.
    x_decimals: usize,
    /// Vertical grid lines (off where window edges are drawn instead).
    x_grid: bool,
    /// Lines of the note above the plot (every panel of a chart the same,
    /// so that their plots are the same height).
    note_lines: u32,
}

/// Room above a panel's plot for `lines` lines of note.
fn note_room(lines: u32) -> u32 {
    NOTE_HEIGHT + NOTE_LINE * lines.saturating_sub(1)
}

/// A panel's plot over `x` and `0..y_max` in `area`, with the axes style
/// every small-multiples chart shares.
fn panel_plot<'b, 'a>(
    area: &'b Canvas<'a>,
    x: std::ops::Range<f64>,
    y_max: f64,
    axes: &PanelAxes,
) -> Result<ChartContext<'b, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    let mut chart = ChartBuilder::on(area)
        .margin_left(12)
        .margin_right(REFERENCE_LABELS)
        .margin_top(note_room(axes.note_lines))
        .x_label_area_size(if axes.last { X_AXIS_HEIGHT } else { 0 })
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(x, 0.0..y_max)?;
    let decimals = axes.x_decimals;
    let x_format = move |x: &f64| format!("{x:.decimals$}");
    let mut mesh = chart.configure_mesh();
    if !axes.x_grid {
        mesh.disable_x_mesh();
    }
    mesh.light_line_style(WHITE)
        .bold_line_style(style::FAINT.mix(0.5))
        .y_labels(axes.y_labels)
        .label_style((style::FONT, style::LABEL_SIZE))
        .axis_desc_style((style::FONT, style::AXIS_SIZE))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .x_label_formatter(&x_format);
    if axes.last {
        mesh.x_desc("time since the start of the run (s)")
            .x_labels(12);
    } else {
        mesh.x_labels(0);
    }
    if let Some(desc) = axes.y_desc {
        mesh.y_desc(desc);
    }
    mesh.draw()?;
    Ok(chart)
}

/// A panel's note, a line or two, above its plot.
fn draw_panel_note(canvas: &Canvas, area: &Canvas, lines: &[String]) -> Result<()> {
    let (left, top) = area.get_base_pixel();
    for (i, line) in lines.iter().enumerate() {
        canvas.draw(&Text::new(
            line.as_str(),
            (
                left + Y_LABELS as i32 + 14,
                top + 4 + (NOTE_LINE * i as u32) as i32,
            ),
            (style::FONT, style::LABEL_SIZE).into_font().color(&BLACK),
        ))?;
    }
    Ok(())
}

/// Lines of note each panel of `runs` gets: two when a run's note needs
/// its [`whole_seconds_line`] (every panel then gets the room, so that all
/// plots are the same height), else one.
fn note_lines(runs: &[crate::results::RunResult]) -> u32 {
    if runs
        .iter()
        .any(|run| whole_seconds_line(&run.summary, None).is_some())
    {
        2
    } else {
        1
    }
}

/// For a run of a log stamped in whole seconds whose requests could fall
/// elsewhere within their seconds and give more, what its worst count in
/// the rolling interval (the seeded placement's) can become — the table's
/// `47–187` in words, so that no chart shows the seeded figure alone:
/// "whole-second log: 47 as drawn within each second; 77 packed at the
/// seconds' edges; at most 187 for any placement". `capacity` is the
/// backend's in the rolling interval.
fn whole_seconds_line(
    summary: &crate::summary::RunSummary,
    capacity: Option<f64>,
) -> Option<String> {
    let seconds = summary.whole_seconds.as_ref()?;
    let count = summary.worst_rolling;
    if seconds.admitted_at_most <= count {
        return None;
    }
    let over = |n: u64| match capacity {
        Some(capacity) if n as f64 > capacity => {
            format!(" ({} over capacity)", count_words(n as f64 - capacity))
        }
        _ => String::new(),
    };
    let mut line = format!("whole-second log: {count} as drawn within each second");
    if seconds.admitted_at_least > count {
        let packed = seconds.admitted_at_least;
        line.push_str(&format!(
            "; {packed} packed at the seconds' edges{}",
            over(packed)
        ));
        if seconds.admitted_at_most == packed {
            line.push_str(", the most for any placement");
        }
    }
    if seconds.admitted_at_most > seconds.admitted_at_least {
        let most = seconds.admitted_at_most;
        line.push_str(&format!("; at most {most} for any placement{}", over(most)));
    }
    Some(line)
}

/// A count as labelled: whole numbers without decimals.
fn count_words(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{}", value.round())
    } else {
        format!("{value:.1}")
    }
}

/// A horizontal reference line across a panel: a limit, a bound, a capacity.
struct Reference {
    level: f64,
    label: String,
    colour: RGBColor,
    /// Dash length and gap in pixels.
    dash: (u32, u32),
}

/// Limits and capacities.
const DASHED: (u32, u32) = (8, 5);
/// Bounds, apart from limits and from solid data lines.
const DOTTED: (u32, u32) = (2, 4);

/// Draws `references` across `x` and labels each in the margin right of the
/// plot, where no data hides them; labels of nearby lines are moved apart
/// so that none overlaps another. The lines go into `overlay`, raw SVG to
/// add with [`add_overlay`]: plotters would draw each dash as an element.
fn draw_references(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    canvas: &Canvas,
    x: std::ops::Range<f64>,
    mut references: Vec<Reference>,
    overlay: &mut String,
) -> Result<()> {
    references.sort_by(|a, b| b.level.total_cmp(&a.level));
    let (x0, x1) = (
        chart.backend_coord(&(x.start, 0.0)).0,
        chart.backend_coord(&(x.end, 0.0)).0,
    );
    for r in &references {
        let y = chart.backend_coord(&(x.end, r.level)).1;
        let RGBColor(red, green, blue) = r.colour;
        let (dash, gap) = r.dash;
        let _ = writeln!(
            overlay,
            r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#{red:02X}{green:02X}{blue:02X}" stroke-width="2" stroke-dasharray="{dash} {gap}"/>"##
        );
    }
    let gap = style::LABEL_SIZE as i32 + 2;
    let bottom = chart.backend_coord(&(x.end, chart.y_range().start)).1;
    let top = chart.backend_coord(&(x.end, chart.y_range().end)).1;
    let mut ys: Vec<i32> = references
        .iter()
        .map(|r| chart.backend_coord(&(x.end, r.level)).1)
        .collect();
    for i in 1..ys.len() {
        ys[i] = ys[i].max(ys[i - 1] + gap);
    }
    if let Some(last) = ys.last_mut() {
        *last = (*last).min(bottom);
    }
    for i in (0..ys.len().saturating_sub(1)).rev() {
        ys[i] = ys[i].min(ys[i + 1] - gap).max(top);
    }
    for (r, y) in references.iter().zip(ys) {
        let font = (style::FONT, style::LABEL_SIZE)
            .into_font()
            .color(&r.colour);
        canvas.draw(&Text::new(
            r.label.clone(),
            (x1 + 8, y),
            font.pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// A step line through `values`, value j spanning `[x(j), x(j + 1))`, with
/// each run of equal values drawn as one flat segment.
fn step_points(values: impl IntoIterator<Item = f64>, x: impl Fn(usize) -> f64) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    let mut last = None;
    let mut count = 0;
    for (j, y) in values.into_iter().enumerate() {
        if last != Some(y) {
            if let Some(previous) = last {
                points.push((x(j), previous));
            }
            points.push((x(j), y));
            last = Some(y);
        }
        count = j + 1;
    }
    if let Some(y) = last {
        points.push((x(count), y));
    }
    points
}

/// Adds raw SVG elements on top of a finished plotters document.
fn add_overlay(svg: &mut String, overlay: &str) {
    let end = svg.rfind("</svg>").unwrap_or(svg.len());
    svg.insert_str(end, overlay);
}

/// A count per second or per interval, in words: `100/s`.
fn per_second(count: f64) -> String {
    if (count - count.round()).abs() < 1e-9 {
        format!("{}/s", count.round())
    } else {
        format!("{count:.1}/s")
    }
}

/// An interval length for axis labels and annotations: `1 s`, `100 ms`.
fn interval_words(interval: Nanos) -> String {
    let text = interval.to_string();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    format!("{} {}", &text[..split], &text[split..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step line: each run of equal values is one flat segment, with a
    /// vertical step where the value changes, ending at the last value's end.
    #[test]
    fn a_step_line_has_one_segment_per_run_of_equal_values() {
        let points = step_points([1.0, 1.0, 3.0, 3.0, 3.0, 2.0], |j| j as f64 * 10.0);
        assert_eq!(
            points,
            [
                (0.0, 1.0),
                (20.0, 1.0),
                (20.0, 3.0),
                (50.0, 3.0),
                (50.0, 2.0),
                (60.0, 2.0)
            ]
        );
        assert!(step_points([], |j| j as f64).is_empty());
    }

    /// The note band keeps the chart whole and below it, escapes the note,
    /// and leaves a document it cannot read as it was.
    #[test]
    fn the_note_band_moves_the_chart_down_and_escapes_the_note() {
        let svg = "<svg width=\"400\" height=\"300\" viewBox=\"0 0 400 300\" xmlns=\"http://www.w3.org/2000/svg\">\n<rect x=\"1\"/>\n</svg>\n";
        let banded = with_note_band(svg, "12 of 40 <limiters> & more");
        assert!(banded.starts_with("<svg width=\"400\" height=\"328\" viewBox=\"0 0 400 328\""));
        assert!(banded.contains("12 of 40 &lt;limiters&gt; &amp; more"));
        assert!(banded.contains("<g transform=\"translate(0,28)\">\n<rect x=\"1\"/>\n</g>"));
        assert_eq!(banded.matches("</svg>").count(), 1);
        assert_eq!(with_note_band("not svg", "x"), "not svg");
    }

    #[test]
    fn rates_and_intervals_read_as_words() {
        assert_eq!(per_second(100.0), "100/s");
        assert_eq!(per_second(99.96), "100.0/s");
        assert_eq!(per_second(12.25), "12.2/s");
        assert_eq!(interval_words(Nanos::SECOND), "1 s");
        assert_eq!(interval_words(Nanos(100_000_000)), "100 ms");
        assert_eq!(interval_words(Nanos(1_500_000_000)), "1.5 s");
    }
}
