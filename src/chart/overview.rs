//! `overview-<workload>.svg`: the whole run at a glance — admitted requests
//! per second (or per coarser step on long runs), one line per limiter,
//! against the backend's capacity.

use anyhow::Result;
use plotters::prelude::*;

use super::style::{
    AXIS_SIZE, CAPACITY, FAINT, FONT, HEIGHT, LABEL_SIZE, TITLE_SIZE, WIDTH, limiter_colour,
};
use super::{Chart, Results, interval_words};
use crate::time::{NANOS_PER_SEC, Nanos};

/// The most points a line gets; longer runs are summed into wider steps.
const POINTS: u64 = 600;

/// The chart for workload number `index`.
pub fn render(results: &Results, index: usize, workload: &str) -> Result<Chart> {
    let runs = results.workload(index);
    let scenario = results.scenario;
    let bucket = scenario.metrics.bucket.get();
    let duration = scenario.duration.get();
    // A step of whole buckets, at least one second when the run allows it.
    let step_buckets = (NANOS_PER_SEC / bucket)
        .max(duration / bucket / POINTS)
        .max(1);
    let step = step_buckets * bucket;
    let per_step: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|run| {
            run.timeline
                .admitted
                .chunks(step_buckets as usize)
                .enumerate()
                .map(|(i, counts)| {
                    (
                        (i as u64 * step) as f64 / NANOS_PER_SEC as f64,
                        counts.iter().map(|&c| f64::from(c)).sum(),
                    )
                })
                .collect()
        })
        .collect();
    let capacity = results
        .capacity()
        .map(|c| c as f64 * step as f64 / NANOS_PER_SEC as f64);
    let top = per_step
        .iter()
        .flatten()
        .map(|&(_, y)| y)
        .chain(capacity)
        .fold(1.0, f64::max)
        * 1.15;
    let end = duration as f64 / NANOS_PER_SEC as f64;
    let title = format!(
        "{workload}: requests admitted per {} over the whole run",
        interval_words(Nanos(step))
    );
    let mut svg = String::new();
    {
        let canvas = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        canvas.fill(&WHITE)?;
        let root = canvas.titled(&title, (FONT, TITLE_SIZE))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(18)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..end, 0.0..top)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .bold_line_style(FAINT.mix(0.6))
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_SIZE))
            .x_desc("time since the start of the run (s)")
            .y_desc(format!(
                "requests admitted per {}",
                interval_words(Nanos(step))
            ))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        if let Some(capacity) = capacity {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, capacity), (end, capacity)],
                    8,
                    5,
                    CAPACITY.stroke_width(2),
                ))?
                .label(format!(
                    "backend capacity per {}",
                    interval_words(Nanos(step))
                ))
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], CAPACITY.stroke_width(2))
                });
        }
        for (limiter, (points, run)) in per_step.into_iter().zip(runs).enumerate() {
            let colour = limiter_colour(limiter);
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
                .label(run.summary.limiter.clone())
                .legend(super::line_sample(colour));
        }
        super::draw_series_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        canvas.present()?;
    }
    let caption = format!(
        "The whole run per {}: where a line rises above the red one, the backend gets more than it serves in that step.",
        interval_words(Nanos(step))
    );
    Ok(Chart {
        file: format!("overview-{workload}.svg"),
        title,
        caption,
        svg,
    })
}
