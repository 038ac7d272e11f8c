//! `arrival-curve.svg`: the most requests admitted in any interval, against the
//! interval's length, one line per limiter — the whole curve, not one number.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::{
    AXIS_SIZE, CAPACITY, FAINT, FONT, HEIGHT, LABEL_SIZE, REFERENCE, TITLE_SIZE, WIDTH,
};
use super::{Chart, Results, interval_words, per_second};
use crate::time::{NANOS_PER_SEC, Nanos};

/// The chart: for each limiter, the worst count over all workloads at each length.
/// Room right of the plot for the legend.
const LEGEND_ROOM: u32 = 290;

/// How a legend entry's sample is drawn.
enum Sample {
    Dashed(RGBColor),
    Line(RGBColor, u32),
    Triangle,
}

/// The legend, an entry a row, in its own area beside the plot.
fn draw_legend(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    entries: &[(String, Sample)],
) -> Result<()> {
    let font = (FONT, LABEL_SIZE)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (row, (label, sample)) in entries.iter().enumerate() {
        let y = 40 + 24 * row as i32;
        match sample {
            Sample::Dashed(colour) => {
                for x in [4, 16] {
                    area.draw(&PathElement::new(
                        vec![(x, y), (x + 8, y)],
                        colour.stroke_width(2),
                    ))?;
                }
            }
            Sample::Line(colour, width) => {
                area.draw(&PathElement::new(
                    vec![(4, y), (28, y)],
                    colour.stroke_width(*width),
                ))?;
            }
            Sample::Triangle => {
                area.draw(&TriangleMarker::new((16, y), 7, BLACK.stroke_width(2)))?;
            }
        }
        area.draw(&Text::new(label.clone(), (36, y), font.clone()))?;
    }
    Ok(())
}

pub fn render(results: &Results) -> Result<Chart> {
    let limiters = results.limiters.len();
    let intervals = &results.curve;
    let curves: Vec<Vec<(f64, f64)>> = (0..limiters)
        .map(|limiter| {
            intervals
                .iter()
                .enumerate()
                .map(|(j, interval)| {
                    let worst = results
                        .runs_of(limiter)
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
        .runs()
        .next()
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
        let canvas = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        canvas.fill(&WHITE)?;
        let root = canvas.titled(&title, (FONT, TITLE_SIZE))?;
        // The legend stands right of the plot, where no line can run.
        let (plot, legend) = root.split_horizontally(WIDTH - LEGEND_ROOM);
        let mut chart = ChartBuilder::on(&plot)
            .margin(18)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x_low * 0.9..x_high * 1.1).log_scale(),
                (0.8..top * 1.6)
                    .log_scale()
                    .with_key_points(one_two_five(top * 1.6)),
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
        let mut entries: Vec<(String, Sample)> = Vec::new();
        let references = std::iter::once((nominal_rate, REFERENCE, "advertised limit"))
            .chain(capacity.map(|c| (c, CAPACITY, "backend capacity")));
        for (rate, colour, label) in references {
            chart.draw_series(DashedLineSeries::new(
                reference(rate),
                8,
                5,
                colour.stroke_width(2),
            ))?;
            entries.push((
                format!("{label} {}", per_second(rate)),
                Sample::Dashed(colour),
            ));
        }
        let rolling = results.metrics.rolling;
        let at = secs(rolling);
        // Earlier lines are wider, so a line drawn over another leaves it
        // showing on both sides: overlapping limiters stay distinguishable.
        let colours = super::colours(results);
        let width = |index: usize| 2 + 2 * (limiters - 1 - index).min(6) as u32;
        for (index, (curve, limiter)) in curves.iter().zip(&results.limiters).enumerate() {
            let (colour, width) = (colours[index], width(index));
            chart.draw_series(LineSeries::new(
                curve.iter().copied(),
                colour.stroke_width(width),
            ))?;
            entries.push((limiter.name.clone(), Sample::Line(colour, width)));
        }
        // Each limiter's bound over any traffic at the rolling interval (the
        // same on every workload: the first one's runs say it).
        let bounds = results.workloads[0]
            .runs
            .iter()
            .enumerate()
            .filter_map(|(index, run)| {
                let bound = Some(run.summary.bound).filter(|&b| b != u64::MAX && b > 0)?;
                Some(TriangleMarker::new(
                    (at, bound as f64),
                    7,
                    colours[index].stroke_width(2),
                ))
            });
        chart.draw_series(bounds)?;
        entries.push((
            format!("bound over any traffic, at {}", interval_words(rolling)),
            Sample::Triangle,
        ));
        // The values a reader looks for, written where the lines cross the
        // rolling interval.
        let mut values = vec![(nominal_rate * at, REFERENCE)];
        values.extend(capacity.map(|c| (c * at, CAPACITY)));
        // Each on a pale backdrop: the curves of a busy chart cross just
        // there, and a line through "150" made it read as another number.
        for (level, colour) in values {
            chart.draw_series([Circle::new((at, level), 4, colour.filled())])?;
            let text = format!("{level:.0} in {}", interval_words(rolling));
            let size = LABEL_SIZE as i32;
            // About half an em a character in the sans-serif face.
            let wide = text.chars().count() as i32 * size * 11 / 20;
            chart.draw_series([EmptyElement::at((at, level))
                + Rectangle::new([(6, 1), (12 + wide, size + 5)], WHITE.mix(0.8).filled())
                + Text::new(
                    text,
                    (9, 3),
                    (FONT, LABEL_SIZE)
                        .into_font()
                        .color(&colour)
                        .pos(Pos::new(HPos::Left, VPos::Top)),
                )])?;
        }
        draw_legend(&legend, &entries)?;
        canvas.present()?;
    }
    let caption = format!(
        "For each interval length, the most requests a limiter admitted in any interval that long. Where a line rises above the dashed limit, the limiter lets bursts through that its rate promises to prevent; above the red line, more than the backend can serve in that interval. Triangles mark each limiter's bound over any traffic at {}; lines drawn over others are thinner, so overlapping limiters show as stripes.",
        interval_words(results.metrics.rolling)
    );
    Ok(Chart {
        file: "arrival-curve.svg".into(),
        caption,
        svg,
    })
}

fn secs(interval: Nanos) -> f64 {
    interval.as_secs_f64()
}

/// 1, 2, 5, 10, 20, 50, … up to `top`: ticks a reader can interpolate between.
fn one_two_five(top: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let mut decade = 1.0;
    while decade <= top {
        ticks.extend(
            [decade, 2.0 * decade, 5.0 * decade]
                .into_iter()
                .filter(|&t| t <= top),
        );
        decade *= 10.0;
    }
    ticks
}
