//! SVG charts drawn with plotters' SVG backend. Charts only read results;
//! they never simulate.

mod arrival_curve;
mod overview;
mod sizing;
pub mod style;
mod timeline;

pub use sizing::render_sizing;
mod worst_rolling;

use anyhow::Result;
use plotters::coord::CoordTranslate;
use plotters::prelude::*;

use crate::limiter::{Context, RateLimiter};
use crate::scenario::Scenario;
use crate::sim::RunResult;
use crate::time::Nanos;

/// How many interval lengths the arrival curve samples.
const CURVE_POINTS: u32 = 48;

/// A rendered chart: its file name under `charts/`, a one-sentence caption
/// saying what to look at, and the SVG.
#[derive(Clone, Debug)]
pub struct Chart {
    /// File name, like `timeline-edge-burst.svg`.
    pub file: String,
    /// Its title, as drawn.
    pub title: String,
    /// What to look at, for the report.
    pub caption: String,
    /// The SVG document.
    pub svg: String,
}

/// Everything the charts read about one scenario's results.
pub struct Results<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// Its runs, workloads in file order, each with every limiter in order.
    pub runs: &'a [RunResult],
}

impl Results<'_> {
    /// The runs of workload number `index`.
    fn workload(&self, index: usize) -> &[RunResult] {
        let per = self.scenario.limiters.len();
        &self.runs[index * per..(index + 1) * per]
    }

    fn capacity(&self) -> Option<u64> {
        self.scenario.backend.map(|b| b.capacity_per_sec.get())
    }
}

/// Interval lengths for the arrival curve: log-spaced from the smallest
/// profile interval to four times the longest window or rolling interval,
/// plus the profile's own points.
pub fn curve_intervals(scenario: &Scenario) -> Vec<Nanos> {
    let metrics = &scenario.metrics;
    let context = Context {
        backend_capacity_per_sec: scenario.backend.map(|b| b.capacity_per_sec.get()),
    };
    let longest_window = scenario
        .limiters
        .iter()
        .filter_map(|limiter| Some(limiter.config.build(context).ok()?.window_edges()?.0))
        .max()
        .unwrap_or(metrics.rolling);
    let low = metrics
        .profile
        .iter()
        .copied()
        .chain([metrics.rolling])
        .min()
        .unwrap_or(Nanos::SECOND);
    let high = metrics
        .rolling
        .max(longest_window)
        .max(Nanos::SECOND)
        .get()
        .saturating_mul(4);
    let (low_f, high_f) = (low.get() as f64, high as f64);
    let step = (high_f / low_f).ln() / f64::from(CURVE_POINTS - 1);
    let mut intervals: Vec<Nanos> = (0..CURVE_POINTS)
        .map(|i| Nanos(((low_f.ln() + step * f64::from(i)).exp().round() as u64).max(1)))
        .chain(metrics.profile.iter().copied())
        .chain([metrics.rolling])
        .collect();
    intervals.sort_unstable();
    intervals.dedup();
    intervals
}

/// Every chart for a scenario's results.
pub fn render_charts(results: &Results) -> Result<Vec<Chart>> {
    let mut charts = Vec::new();
    for (index, workload) in results.scenario.workloads.iter().enumerate() {
        charts.push(timeline::render(results, index, &workload.name)?);
        charts.push(overview::render(results, index, &workload.name)?);
    }
    charts.push(worst_rolling::render(results)?);
    charts.push(arrival_curve::render(results)?);
    Ok(charts)
}

/// Draws the series' legend box, in one style for every chart.
fn draw_series_legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((style::FONT, style::LABEL_SIZE))
        .background_style(WHITE.mix(0.9))
        .border_style(style::FAINT)
        .draw()?;
    Ok(())
}

/// The legend's sample for a line series of `colour`.
fn line_sample(colour: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
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
