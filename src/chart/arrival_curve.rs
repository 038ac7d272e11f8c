//! `arrival-curve.svg`: the most requests admitted in any interval, against the
//! interval's length, one line per limiter — the whole curve, not one number.

use anyhow::Result;
use plotters::prelude::*;

use super::style::{
    AXIS_SIZE, CAPACITY, FAINT, FONT, HEIGHT, LABEL_SIZE, REFERENCE, TITLE_SIZE, WIDTH,
    limiter_colour,
};
use super::{Chart, Results, interval_words, per_second};
use crate::time::{NANOS_PER_SEC, Nanos};

/// The chart: for each limiter, the worst count over all workloads at each length.
pub fn render(results: &Results) -> Result<Chart> {
    let scenario = results.scenario;
    let limiters = scenario.limiters.len();
    let intervals: Vec<Nanos> = results
        .runs
        .first()
        .map(|run| run.curve.iter().map(|w| w.interval).collect())
        .unwrap_or_default();
    let curves: Vec<Vec<(f64, f64)>> = (0..limiters)
        .map(|limiter| {
            intervals
                .iter()
                .enumerate()
                .map(|(j, interval)| {
                    let worst = results
                        .runs
                        .iter()
                        .skip(limiter)
                        .step_by(limiters)
                        .map(|run| run.curve[j].count)
                        .max()
                        .unwrap_or(0);
                    (secs(*interval), worst as f64)
                })
                .filter(|&(_, count)| count > 0.0)
                .collect()
        })
        .collect();
    let (x_low, x_high) = match (intervals.first(), intervals.last()) {
        (Some(low), Some(high)) => (secs(*low), secs(*high)),
        _ => (0.001, 1.0),
    };
    let capacity = results.capacity().map(|c| c as f64);
    let nominal_rate = results
        .runs
        .first()
        .map(|run| run.summary.nominal / secs(Nanos(run.summary.rolling_ns)))
        .unwrap_or(1.0);
    let top = curves
        .iter()
        .flatten()
        .map(|&(_, c)| c)
        .chain(capacity.map(|c| c * x_high))
        .chain([nominal_rate * x_high])
        .fold(1.0, f64::max);
    let title = "Arrival curve: most requests admitted in any interval of each length (worst over all workloads)".to_string();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(&title, (FONT, TITLE_SIZE))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(18)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x_low * 0.9..x_high * 1.1).log_scale(),
                (0.8..top * 1.6).log_scale(),
            )?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .bold_line_style(FAINT.mix(0.6))
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_SIZE))
            .x_desc("interval length (log scale)")
            .y_desc("most requests admitted (log scale)")
            .x_label_formatter(&|x| {
                interval_words(Nanos((x * NANOS_PER_SEC as f64).round() as u64))
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        let reference = |rate: f64| vec![(x_low, rate * x_low), (x_high, rate * x_high)];
        chart
            .draw_series(DashedLineSeries::new(
                reference(nominal_rate),
                8,
                5,
                REFERENCE.stroke_width(2),
            ))?
            .label(format!("advertised limit {}", per_second(nominal_rate)))
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], REFERENCE.stroke_width(2))
            });
        if let Some(capacity) = capacity {
            chart
                .draw_series(DashedLineSeries::new(
                    reference(capacity),
                    8,
                    5,
                    CAPACITY.stroke_width(2),
                ))?
                .label(format!("backend capacity {}", per_second(capacity)))
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], CAPACITY.stroke_width(2))
                });
        }
        for (index, (curve, limiter)) in curves.iter().zip(&scenario.limiters).enumerate() {
            let colour = limiter_colour(index);
            chart
                .draw_series(LineSeries::new(
                    curve.iter().copied(),
                    colour.stroke_width(2),
                ))?
                .label(limiter.name.clone())
                .legend(super::line_sample(colour));
        }
        super::draw_series_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present()?;
    }
    let caption = "Where a limiter's line rises above the dashed limit it lets bursts through that its rate promises to prevent; above the red line, more than the backend can serve in that interval.".to_string();
    Ok(Chart {
        file: "arrival-curve.svg".into(),
        title,
        caption,
        svg,
    })
}

fn secs(interval: Nanos) -> f64 {
    interval.as_secs_f64()
}
