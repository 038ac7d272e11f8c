//! `worst-rolling.svg`: the worst rolling count of every workload × limiter as
//! a bar, against its nominal allowance, its bound and the backend's capacity.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::{AXIS_SIZE, CAPACITY, FAINT, FONT, HEIGHT, LABEL_SIZE, TITLE_SIZE, WIDTH};
use super::{Chart, Results, interval_words};
use crate::summary::RunSummary;
use crate::time::Nanos;

/// Share of a workload's slot covered by its bars.
const GROUP_FILL: f64 = 0.84;
/// Height of one row of the legend.
const LEGEND_ROW: i32 = 24;
/// Where the legend's items start and must end, in pixels.
const LEGEND_LEFT: i32 = 80;
const LEGEND_RIGHT: i32 = WIDTH as i32 - 24;

/// The chart.
pub fn render(results: &Results) -> Result<Chart> {
    let groups = results.workloads.len();
    let limiters = results.limiters.len();
    let colours = super::colours(results);
    // With a backend, the figures that decide the verdict: those over 1 s.
    let interval = if results.capacity().is_some() {
        Nanos::SECOND
    } else {
        results.metrics.rolling
    };
    let bars: Vec<Bar> = results
        .runs()
        .map(|run| Bar::of(&run.summary, interval))
        .collect();
    let ranges = bars.iter().any(|bar| bar.most > bar.worst);
    // Whiskers are drawn only above a packed placement short of the most.
    let whiskers = bars.iter().any(|bar| bar.most > bar.packed);
    let capacity = results.capacity().map(|c| c as f64);
    let data_top = bars
        .iter()
        .map(|bar| bar.most as f64)
        .chain(capacity)
        .fold(1.0, f64::max);
    // Limits and bounds join the scale unless one would squash the bars (a
    // per-key limit summed over hundreds of keys): those are written at the top.
    let highest = bars
        .iter()
        .flat_map(|bar| {
            [
                bar.nominal.unwrap_or(0.0),
                bar.bound.map_or(0.0, |b| b as f64),
            ]
        })
        .filter(|&reference| reference <= data_top * 2.5)
        .fold(data_top, f64::max);
    let y_max = highest * 1.12;
    let rolling = interval;
    let title = format!(
        "Worst {} admitted per workload and limiter, against limit, bound and capacity",
        interval_words(rolling)
    );
    let mut svg = String::new();
    {
        let canvas = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        canvas.fill(&WHITE)?;
        let root = canvas.titled(&title, (FONT, TITLE_SIZE))?;
        let places = legend_places(results);
        let rows = places.last().map_or(0, |&(_, row)| row) + 1;
        let key_rows = if ranges { 2 } else { 1 };
        let (legend, body) = root.split_vertically(((rows + key_rows) * LEGEND_ROW + 8) as u32);
        draw_legend(&legend, results, &places, (ranges, whiskers))?;
        let mut chart = ChartBuilder::on(&body)
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(84)
            .build_cartesian_2d(0.0..groups as f64, 0.0..y_max)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .light_line_style(WHITE)
            .bold_line_style(FAINT.mix(0.6))
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_SIZE))
            .y_desc(format!(
                "most requests admitted in any {}",
                interval_words(rolling)
            ))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;

        let slot = GROUP_FILL / limiters as f64;
        let widest = bars
            .iter()
            .map(|bar| bar.label().chars().count())
            .max()
            .unwrap_or(1);
        let small = (FONT, LABEL_SIZE).into_font();
        let placed = results.workloads.iter().enumerate().flat_map(|(group, w)| {
            w.runs
                .iter()
                .enumerate()
                .map(move |(bar, run)| (group, bar, Bar::of(&run.summary, interval)))
        });
        for (group, bar, summary) in placed {
            let x0 = group as f64 + (1.0 - GROUP_FILL) / 2.0 + bar as f64 * slot;
            let (x1, mid) = (x0 + slot * 0.86, x0 + slot * 0.43);
            let worst = summary.worst as f64;
            chart.draw_series([Rectangle::new(
                [(x0, 0.0), (x1, worst)],
                colours[bar].filled(),
            )])?;
            // A whole-second log's worst can be more than the seeded
            // placement's: paler up to the placement packed at its seconds'
            // edges (run, so reached), a whisker up to the most any
            // placement can give.
            if summary.packed > summary.worst {
                chart.draw_series([
                    Rectangle::new(
                        [(x0, worst), (x1, summary.packed as f64)],
                        colours[bar].mix(PACKED_ALPHA).filled(),
                    ),
                    Rectangle::new([(x0, worst), (x1, summary.packed as f64)], colours[bar]),
                ])?;
            }
            if summary.most > summary.packed {
                let (from, to) = (summary.packed as f64, summary.most as f64);
                let cap = slot * 0.12;
                chart.draw_series([
                    PathElement::new(vec![(mid, from), (mid, to)], BLACK.stroke_width(2)),
                    PathElement::new(
                        vec![(mid - cap, to), (mid + cap, to)],
                        BLACK.stroke_width(2),
                    ),
                ])?;
            }
            let mut above = Vec::new();
            match summary.nominal {
                Some(nominal) if nominal <= highest => {
                    chart.draw_series([PathElement::new(
                        vec![(x0, nominal), (x1, nominal)],
                        BLACK.stroke_width(3),
                    )])?;
                }
                Some(nominal) => above.push(format!("limit {nominal:.0}")),
                None => {}
            }
            match summary.bound {
                Some(bound) if bound as f64 <= highest => {
                    let marker = TriangleMarker::new((mid, bound as f64), 6, BLACK.filled());
                    chart.draw_series([marker])?;
                }
                Some(bound) => above.push(format!("bound {bound}")),
                None => {}
            }
            // References off the scale, named at its top with an arrow.
            for (line, text) in above.iter().enumerate() {
                let (x, y) = chart.backend_coord(&(mid, y_max));
                canvas.draw(&Text::new(
                    format!("↑ {text}"),
                    (x, y + 2 + 14 * line as i32),
                    small.color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top)),
                ))?;
            }
            // The count sits at the foot of its bar, clear of the tick and the triangle.
            let (_, base) = chart.backend_coord(&(mid, 0.0));
            let (x, top) = chart.backend_coord(&(mid, worst));
            let (y, colour, v) = if base - top > 20 {
                (base - 4, text_colour(colours[bar]), VPos::Bottom)
            } else {
                (top - 3, BLACK, VPos::Bottom)
            };
            // Narrow bars (many limiters) get smaller counts, all the same
            // size, so that neighbouring counts never run into one another.
            let (left, _) = chart.backend_coord(&(x0, 0.0));
            let (right, _) = chart.backend_coord(&(x1, 0.0));
            let fits = (right - left) as f64 >= widest as f64 * 8.5 + 4.0;
            let size = if fits { LABEL_SIZE } else { LABEL_SIZE * 3 / 4 };
            canvas.draw(&Text::new(
                summary.label(),
                (x, y),
                (FONT, size)
                    .into_font()
                    .color(&colour)
                    .pos(Pos::new(HPos::Center, v)),
            ))?;
        }
        if let Some(capacity) = capacity {
            chart.draw_series(DashedLineSeries::new(
                vec![(0.0, capacity), (groups as f64, capacity)],
                8,
                5,
                CAPACITY.stroke_width(2),
            ))?;
        }
        for (group, workload) in results.workloads.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(group as f64 + 0.5, 0.0));
            canvas.draw(&Text::new(
                workload.name.clone(),
                (x, y + 8),
                (FONT, AXIS_SIZE)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        canvas.present()?;
    }
    let caption = format!(
        "Bars taller than the red line let more through in {} than the backend can serve; the black tick is what the limiter advertises, the triangle the most it can admit for any traffic (written at the top, with an arrow, when far above the bars).",
        interval_words(rolling)
    );
    Ok(Chart {
        file: "worst-rolling.svg".into(),
        caption,
        svg,
    })
}

/// Counts inside a bar: white on dark colours, black on light ones.
fn text_colour(fill: RGBColor) -> RGBColor {
    let RGBColor(r, g, b) = fill;
    let luminance = 0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b);
    if luminance > 150.0 { BLACK } else { WHITE }
}

/// How opaque the part of a bar reached only by packing a whole-second
/// log's requests at its seconds' edges is.
const PACKED_ALPHA: f64 = 0.35;

/// One bar's figures, over 1 s with a backend, else over the rolling interval.
struct Bar {
    /// The seeded placement's worst.
    worst: u64,
    /// For a whole-second log, the most of the placements run (packed at
    /// the seconds' edges); else `worst`.
    packed: u64,
    /// For a whole-second log, the most any placement within its seconds
    /// can give; else `worst`.
    most: u64,
    /// None for a limit per key, whose quotas summed over keys mean nothing here.
    nominal: Option<f64>,
    /// None when the limiter has no bound over any traffic.
    bound: Option<u64>,
}

impl Bar {
    /// `summary`'s bar over `interval`.
    fn of(summary: &RunSummary, interval: Nanos) -> Bar {
        let mut bar = Bar::seeded(summary);
        // A whole-second log's figures: over a second (the backend's, when
        // the rolling interval is another), else over the rolling interval.
        let seconds = if interval == Nanos::SECOND {
            summary.whole_seconds_per_second()
        } else {
            summary
                .whole_seconds
                .filter(|_| summary.rolling_ns == interval.get())
        };
        if let Some(seconds) = seconds {
            bar.packed = seconds.admitted_at_least.max(bar.worst);
            bar.most = seconds.admitted_at_most.max(bar.packed);
        }
        bar
    }

    /// The count written on the bar: as the table writes it, `83–120` for
    /// a whole-second log's range.
    fn label(&self) -> String {
        if self.most > self.worst {
            format!("{}–{}", self.worst, self.most)
        } else {
            self.worst.to_string()
        }
    }

    fn seeded(summary: &RunSummary) -> Bar {
        match &summary.backend {
            Some(b) => Bar {
                worst: b.worst_1s,
                packed: b.worst_1s,
                most: b.worst_1s,
                nominal: Some(b.nominal_1s).filter(|_| super::per_key_ratio(summary).is_none()),
                bound: Some(b.bound_1s).filter(|&b| b != u64::MAX),
            },
            None => Bar {
                worst: summary.worst_rolling,
                packed: summary.worst_rolling,
                most: summary.worst_rolling,
                nominal: Some(summary.nominal).filter(|_| super::per_key_ratio(summary).is_none()),
                bound: Some(summary.bound).filter(|&b| b != u64::MAX),
            },
        }
    }
}

/// Where each limiter's legend item goes: its x and its row, wrapping to a
/// new row rather than running off the chart.
fn legend_places(results: &Results) -> Vec<(i32, i32)> {
    let (mut x, mut row) = (LEGEND_LEFT, 0);
    results
        .limiters
        .iter()
        .map(|limiter| {
            // About 7.5 px a character at the label size, a 14 px swatch and a gap.
            let width = 44 + (limiter.name.chars().count() as i32 * 15 + 1) / 2;
            if x + width > LEGEND_RIGHT && x > LEGEND_LEFT {
                (x, row) = (LEGEND_LEFT, row + 1);
            }
            let place = (x, row);
            x += width;
            place
        })
        .collect()
}

fn draw_legend(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    results: &Results,
    places: &[(i32, i32)],
    (ranges, whiskers): (bool, bool),
) -> Result<()> {
    let font = (FONT, LABEL_SIZE).into_font().color(&BLACK);
    let colours = super::colours(results);
    for ((index, limiter), &(x, row)) in results.limiters.iter().enumerate().zip(places) {
        let y = 8 + row * LEGEND_ROW;
        area.draw(&Rectangle::new(
            [(x, y), (x + 14, y + 12)],
            colours[index].filled(),
        ))?;
        area.draw(&Text::new(
            limiter.name.clone(),
            (x + 20, y - 1),
            font.clone(),
        ))?;
    }
    let rows = places.last().map_or(0, |&(_, row)| row) + 1;
    let y = 8 + rows * LEGEND_ROW + 7;
    area.draw(&PathElement::new(
        vec![(80, y), (96, y)],
        BLACK.stroke_width(3),
    ))?;
    area.draw(&Text::new("nominal allowance", (102, y - 7), font.clone()))?;
    area.draw(&TriangleMarker::new((262, y), 6, BLACK.filled()))?;
    area.draw(&Text::new(
        "bound over any traffic",
        (272, y - 7),
        font.clone(),
    ))?;
    if results.capacity().is_some() {
        area.draw(&PathElement::new(
            vec![(462, y), (486, y)],
            CAPACITY.stroke_width(2),
        ))?;
        let label = format!(
            "backend capacity ({} per second)",
            results.capacity().unwrap_or(0)
        );
        area.draw(&Text::new(label, (492, y - 7), font.clone()))?;
    }
    if ranges {
        let y = y + LEGEND_ROW;
        area.draw(&Rectangle::new(
            [(80, y - 6), (94, y + 6)],
            FAINT.mix(1.0).filled(),
        ))?;
        area.draw(&Rectangle::new([(80, y - 6), (94, y + 6)], BLACK))?;
        if !whiskers {
            // Each paler top is then the most any placement gives.
            area.draw(&Text::new(
                "whole-second log: paler, its requests packed at their seconds' edges, the most for any placement",
                (102, y - 7),
                font,
            ))?;
            return Ok(());
        }
        area.draw(&Text::new(
            "whole-second log: paler, its requests packed at their seconds' edges;",
            (102, y - 7),
            font.clone(),
        ))?;
        area.draw(&PathElement::new(
            vec![(636, y - 7), (636, y + 7)],
            BLACK.stroke_width(2),
        ))?;
        area.draw(&PathElement::new(
            vec![(631, y - 7), (641, y - 7)],
            BLACK.stroke_width(2),
        ))?;
        area.draw(&Text::new(
            "the most for any placement within their seconds",
            (648, y - 7),
            font,
        ))?;
    }
    Ok(())
}
