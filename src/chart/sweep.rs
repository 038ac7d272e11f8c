//! `charts/sweep-<workload>.svg`: for two varied groups, a heat map per
//! limiter of the worst second ÷ the backend's capacity, the points within
//! capacity outlined, and `sweep-cost-<workload>.svg` of the share each
//! point turns away; for one group, each limiter's worst second as a line
//! against the capacity. Every figure is the exact worst rolling second of
//! its point (the worst over replications), never one read off buckets.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Chart;
use super::style::{
    AXIS_SIZE, CAPACITY, FAINT, FONT, HEIGHT, LABEL_SIZE, TITLE_SIZE, WIDTH, limiter_colours,
};
use crate::summary::RunSummary;
use crate::sweep::results::{SweepResults, within_capacity, worst_second};

/// Most cells in one heat map panel (64 × 64): beyond, the SVG would be
/// megabytes of rectangles no one can read; the files hold every point.
pub const MAX_HEAT_CELLS: usize = 4096;
/// Most points marked with a dot on a line chart.
const MAX_MARKERS: usize = 200;

/// The sweep's charts: one per workload for one group, or for two groups of
/// at most [`MAX_HEAT_CELLS`] points; none otherwise.
pub fn render_sweep(sweep: &SweepResults) -> Result<Vec<Chart>> {
    let workloads = sweep.workloads();
    match sweep.grid.groups.len() {
        1 => workloads.iter().map(|w| lines(sweep, w)).collect(),
        2 if sweep.grid.points() <= MAX_HEAT_CELLS => workloads
            .iter()
            .flat_map(|w| [Map::Safety, Map::Cost].map(|map| heat_map(sweep, w, map)))
            .collect(),
        _ => Ok(Vec::new()),
    }
}

/// What a heat map shows: how near capacity each point runs, or what it
/// turns away.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Map {
    Safety,
    Cost,
}

/// The share of a run's requests rejected (the most over replications is
/// not kept, so replication 0's).
fn turned_away(run: &RunSummary) -> f64 {
    run.rejected as f64 / run.offered.max(1) as f64
}

/// What a cell shows: the worst second ÷ capacity, or without a backend the
/// worst rolling count ÷ the limit; and whether it stayed within the backend.
fn figure(run: &RunSummary) -> (f64, Option<bool>) {
    match worst_second(run) {
        Some((worst, capacity)) => (worst as f64 / capacity.max(1) as f64, within_capacity(run)),
        None => {
            let worst = run
                .replications
                .as_ref()
                .map_or(run.worst_rolling as f64, |r| r.worst_rolling.max);
            (worst / run.nominal.max(f64::MIN_POSITIVE), None)
        }
    }
}

/// `a` to `b` at `t` in [0, 1].
fn mix(a: (f64, f64, f64), b: (f64, f64, f64), t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    RGBColor(
        (a.0 + (b.0 - a.0) * t).round() as u8,
        (a.1 + (b.1 - a.1) * t).round() as u8,
        (a.2 + (b.2 - a.2) * t).round() as u8,
    )
}

/// Centred on capacity: dark blue far below it, paling to near white as it
/// nears capacity (the riskiest safe points are the faintest), then light
/// orange just over it to dark red at 2 and beyond.
fn colour(ratio: f64) -> RGBColor {
    if ratio <= 1.0 {
        mix((8.0, 69.0, 148.0), (236.0, 240.0, 245.0), ratio)
    } else {
        mix((253.0, 190.0, 133.0), (165.0, 15.0, 21.0), ratio - 1.0)
    }
}

/// The share turned away: white at none to dark purple at all.
fn cost_colour(share: f64) -> RGBColor {
    mix((250.0, 250.0, 252.0), (63.0, 0.0, 125.0), share)
}

/// Black text on light cells, white on dark.
fn text_colour(fill: RGBColor) -> RGBColor {
    let RGBColor(r, g, b) = fill;
    let light = 299 * u32::from(r) + 587 * u32::from(g) + 114 * u32::from(b);
    if light > 140_000 { BLACK } else { WHITE }
}

const PANEL_PLOT_HEIGHT: i32 = 380;
const PANEL_TOP: i32 = 34;
const PANEL_LEFT: i32 = 84;
const PANEL_BOTTOM: i32 = 74;
const HEADER: i32 = 112;
const LEGEND: i32 = 90;

fn heat_map(sweep: &SweepResults, workload: &str, map: Map) -> Result<Chart> {
    let limiters = sweep.limiters();
    let colours = limiter_colours(&limiters);
    let (x_group, y_group) = (&sweep.grid.groups[0], &sweep.grid.groups[1]);
    let (nx, ny) = (x_group[0].values.len(), y_group[0].values.len());
    let columns = match limiters.len() {
        1 => 1,
        2 | 4 => 2,
        _ => 3,
    };
    let rows = limiters.len().div_ceil(columns);
    let panel_width = (WIDTH as i32 - 20) / columns as i32;
    let panel_height = PANEL_TOP + PANEL_PLOT_HEIGHT + PANEL_BOTTOM;
    let height = HEADER + panel_height * rows as i32 + LEGEND;
    let backend = limiters.iter().any(|l| {
        sweep
            .run(0, workload, l)
            .is_some_and(|r| r.backend.is_some())
    });
    let title = match (map, backend) {
        (Map::Cost, _) => format!("{workload}: share of the requests turned away"),
        (Map::Safety, true) => {
            format!("{workload}: most admitted in any second ÷ the backend's capacity")
        }
        (Map::Safety, false) => {
            format!("{workload}: most admitted in any rolling interval ÷ the limit")
        }
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let centred = |size: u32| {
            (FONT, size)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Top))
        };
        root.draw(&Text::new(
            title.clone(),
            (WIDTH as i32 / 2, 10),
            centred(TITLE_SIZE),
        ))?;
        for (line, g) in [(0, "across"), (1, "up")] {
            let text = format!("{g}: v{} = {}", line + 1, sweep.group_name(line));
            root.draw(&Text::new(
                text,
                (WIDTH as i32 / 2, 50 + 22 * line as i32),
                centred(LABEL_SIZE),
            ))?;
        }
        for (index, limiter) in limiters.iter().enumerate() {
            let left = 10 + panel_width * (index % columns) as i32;
            let top = HEADER + panel_height * (index / columns) as i32;
            let plot = (
                left + PANEL_LEFT,
                top + PANEL_TOP,
                panel_width - PANEL_LEFT - 16,
                PANEL_PLOT_HEIGHT,
            );
            root.draw(&Text::new(
                (*limiter).to_string(),
                (plot.0 + plot.2 / 2, top + 4),
                (FONT, AXIS_SIZE)
                    .into_font()
                    .color(&colours[index])
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
            let cell_w = plot.2 as f64 / nx as f64;
            let cell_h = plot.3 as f64 / ny as f64;
            let corner = |i: usize, j: usize| {
                (
                    plot.0 + (i as f64 * cell_w).round() as i32,
                    plot.1 + plot.3 - (j as f64 * cell_h).round() as i32,
                )
            };
            let mut safe = vec![false; nx * ny];
            for i in 0..nx {
                for j in 0..ny {
                    let point = i * ny + j;
                    let Some(run) = sweep.run(point, workload, limiter) else {
                        continue;
                    };
                    let (ratio, ok) = figure(run);
                    safe[point] = ok == Some(true);
                    let (fill, text) = match map {
                        Map::Safety => (colour(ratio), format!("{ratio:.2}")),
                        Map::Cost => {
                            let share = turned_away(run);
                            (cost_colour(share), format!("{:.0}%", share * 100.0))
                        }
                    };
                    let (x0, y0) = corner(i, j);
                    let (x1, y1) = corner(i + 1, j + 1);
                    root.draw(&Rectangle::new([(x0, y1), (x1, y0)], fill.filled()))?;
                    root.draw(&Rectangle::new([(x0, y1), (x1, y0)], WHITE.stroke_width(1)))?;
                    if cell_w >= 40.0 && cell_h >= 18.0 {
                        root.draw(&Text::new(
                            text,
                            ((x0 + x1) / 2, (y0 + y1) / 2),
                            (FONT, LABEL_SIZE - 4)
                                .into_font()
                                .color(&text_colour(fill))
                                .pos(Pos::new(HPos::Center, VPos::Center)),
                        ))?;
                    }
                    // Within capacity in every second, yet not within the
                    // backend: its queue dropped requests.
                    if map == Map::Safety && ok == Some(false) && ratio <= 1.0 {
                        let r = (cell_w.min(cell_h) / 6.0).clamp(2.0, 6.0) as i32;
                        root.draw(&Circle::new((x1 - r - 3, y1 + r + 3), r, CAPACITY.filled()))?;
                    }
                }
            }
            // The safe region's outline: every side of a safe cell that
            // faces a cell over capacity, or the edge of the grid.
            let outline = BLACK.stroke_width(3);
            for i in 0..nx {
                for j in 0..ny {
                    let safe = |i: usize, j: usize| safe[i * ny + j];
                    if !safe(i, j) {
                        continue;
                    }
                    let (x0, y0) = corner(i, j);
                    let (x1, y1) = corner(i + 1, j + 1);
                    let sides = [
                        (i == 0 || !safe(i - 1, j), [(x0, y0), (x0, y1)]),
                        (i + 1 == nx || !safe(i + 1, j), [(x1, y0), (x1, y1)]),
                        (j == 0 || !safe(i, j - 1), [(x0, y0), (x1, y0)]),
                        (j + 1 == ny || !safe(i, j + 1), [(x0, y1), (x1, y1)]),
                    ];
                    for (edge, line) in sides {
                        if edge {
                            root.draw(&PathElement::new(line.to_vec(), outline))?;
                        }
                    }
                }
            }
            // Tick labels at cell centres, thinned so they never overlap.
            let label = |text: String, at: (i32, i32), pos: Pos| {
                Text::new(
                    text,
                    at,
                    (FONT, LABEL_SIZE).into_font().color(&BLACK).pos(pos),
                )
            };
            let x_every = (70.0 / cell_w).ceil().max(1.0) as usize;
            for i in (0..nx).step_by(x_every) {
                let x = plot.0 + ((i as f64 + 0.5) * cell_w).round() as i32;
                let text = crate::sweep::values::label(&x_group[0].values[i]);
                root.draw(&label(
                    text,
                    (x, plot.1 + plot.3 + 6),
                    Pos::new(HPos::Center, VPos::Top),
                ))?;
            }
            let y_every = (24.0 / cell_h).ceil().max(1.0) as usize;
            for j in (0..ny).step_by(y_every) {
                let y = plot.1 + plot.3 - ((j as f64 + 0.5) * cell_h).round() as i32;
                let text = crate::sweep::values::label(&y_group[0].values[j]);
                root.draw(&label(
                    text,
                    (plot.0 - 8, y),
                    Pos::new(HPos::Right, VPos::Center),
                ))?;
            }
            root.draw(&label(
                format!("v1 ({}) →", short_name(x_group)),
                (plot.0 + plot.2 / 2, plot.1 + plot.3 + 34),
                Pos::new(HPos::Center, VPos::Top),
            ))?;
            root.draw(&label(
                format!("v2 ({}) ↑", short_name(y_group)),
                (left + 4, plot.1 - 4),
                Pos::new(HPos::Left, VPos::Bottom),
            ))?;
        }
        match map {
            Map::Safety => draw_scale(&root, height - LEGEND + 20, backend)?,
            Map::Cost => draw_cost_scale(&root, height - LEGEND + 20)?,
        }
        root.present()?;
    }
    let caption = match (map, backend) {
        (Map::Cost, _) => {
            "Each cell is one point of the sweep: the share of the workload's requests the limiter rejected (replication 0's), white for none to dark purple for all. The black outline is the safety map's: the points within the backend. The cheapest safe setting is the palest cell inside the outline."
        }
        (Map::Safety, true) => {
            "Each cell is one point of the sweep: the most requests the limiter admitted in any rolling second (the worst over replications), divided by the backend's capacity. The scale is centred on capacity: blue cells stay within it, paler as they near it (the faintest are the riskiest safe settings), orange to red ones exceed it; the black outline surrounds the points where the run stayed within the backend (no second over capacity, no drops); a red dot marks a point within capacity whose backend queue still dropped requests. The cost map beside it shows what each point turns away."
        }
        (Map::Safety, false) => {
            "Each cell is one point of the sweep: the most requests the limiter admitted in any rolling interval (the worst over replications), divided by the limit it advertises over that interval. There is no [backend] to judge it against, so nothing is outlined."
        }
    };
    Ok(Chart {
        file: match map {
            Map::Safety => format!("sweep-{workload}.svg"),
            Map::Cost => format!("sweep-cost-{workload}.svg"),
        },
        caption: caption.into(),
        svg,
    })
}

/// The last key of a group's first path: `threshold` for `limiter.fixed-1s.threshold`.
fn short_name(group: &[crate::sweep::Axis]) -> String {
    group[0].path.last_key().to_string()
}

/// The colour scale under the panels, from 0 to 2 and beyond.
fn draw_scale(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    top: i32,
    backend: bool,
) -> Result<()> {
    let (left, width, height) = (SCALE_LEFT, SCALE_WIDTH, SCALE_HEIGHT);
    draw_gradient(root, top, 120, |step| colour(f64::from(step) / 60.0))?;
    let font = (FONT, LABEL_SIZE).into_font().color(&BLACK);
    for (ratio, text) in [
        (0.0, "0"),
        (0.5, "0.5"),
        (1.0, "1"),
        (1.5, "1.5"),
        (2.0, "2 and over"),
    ] {
        let x = left + (ratio * f64::from(width) / 2.0).round() as i32;
        root.draw(&Text::new(
            text,
            (x, top + height + 4),
            font.clone().pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    let lines: &[&str] = if backend {
        &[
            "worst second ÷ capacity;  outlined: within the backend;",
            "red dot: within capacity, but the queue dropped requests",
        ]
    } else {
        &["worst interval ÷ the limit"]
    };
    for (row, text) in lines.iter().enumerate() {
        root.draw(&Text::new(
            *text,
            (left + width + 70, top + height / 2 + 24 * row as i32),
            font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// Where a heat map's colour scale stands under the panels, and its size.
const SCALE_LEFT: i32 = 40;
const SCALE_WIDTH: i32 = 420;
const SCALE_HEIGHT: i32 = 18;

/// A colour scale's bar: `steps` slices, slice i coloured `colour(i)`, framed.
fn draw_gradient(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    top: i32,
    steps: i32,
    colour: impl Fn(i32) -> RGBColor,
) -> Result<()> {
    let (left, width, height) = (SCALE_LEFT, SCALE_WIDTH, SCALE_HEIGHT);
    for step in 0..steps {
        root.draw(&Rectangle::new(
            [
                (left + step * width / steps, top),
                (left + (step + 1) * width / steps, top + height),
            ],
            colour(step).filled(),
        ))?;
    }
    root.draw(&Rectangle::new(
        [(left, top), (left + width, top + height)],
        FAINT.stroke_width(1),
    ))?;
    Ok(())
}

/// The cost map's scale: 0% to 100% turned away.
fn draw_cost_scale(root: &DrawingArea<SVGBackend, plotters::coord::Shift>, top: i32) -> Result<()> {
    let (left, width, height) = (SCALE_LEFT, SCALE_WIDTH, SCALE_HEIGHT);
    draw_gradient(root, top, 100, |step| cost_colour(f64::from(step) / 99.0))?;
    let font = (FONT, LABEL_SIZE).into_font().color(&BLACK);
    for (share, text) in [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")] {
        let x = left + (share * f64::from(width)).round() as i32;
        root.draw(&Text::new(
            text,
            (x, top + height + 4),
            font.clone().pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    root.draw(&Text::new(
        "requests turned away;  outlined: within the backend",
        (left + width + 70, top + height / 2),
        font.pos(Pos::new(HPos::Left, VPos::Center)),
    ))?;
    Ok(())
}

/// Room right of the line chart's plot for its legend.
const LEGEND_WIDTH: u32 = 240;

/// A point's worst figure and the capacity it is held to, if any.
type Figure = Option<(u64, Option<u64>)>;

fn lines(sweep: &SweepResults, workload: &str) -> Result<Chart> {
    let limiters = sweep.limiters();
    let colours = limiter_colours(&limiters);
    let n = sweep.points.len();
    let figures: Vec<Vec<Figure>> = limiters
        .iter()
        .map(|limiter| {
            (0..n)
                .map(|p| {
                    sweep
                        .run(p, workload, limiter)
                        .map(|run| match worst_second(run) {
                            Some((worst, capacity)) => (worst, Some(capacity)),
                            None => (run.worst_rolling, None),
                        })
                })
                .collect()
        })
        .collect();
    let capacity: Vec<Option<u64>> = (0..n)
        .map(|p| figures.iter().find_map(|f| f[p].and_then(|(_, c)| c)))
        .collect();
    let backend = capacity.iter().any(Option::is_some);
    let y_max = figures
        .iter()
        .flatten()
        .flatten()
        .map(|&(w, _)| w as f64)
        .chain(capacity.iter().flatten().map(|&c| c as f64))
        .fold(1.0, f64::max)
        * 1.12;
    let title = if backend {
        format!("{workload}: most admitted in any second at each point of the sweep")
    } else {
        format!("{workload}: most admitted in any rolling interval at each point of the sweep")
    };
    let x_desc = format!("v1 = {}", sweep.group_name(0));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let area = root.titled(&title, (FONT, TITLE_SIZE))?;
        let mut chart = ChartBuilder::on(&area)
            .margin(18)
            .margin_right(LEGEND_WIDTH)
            .x_label_area_size(70)
            .y_label_area_size(80)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..y_max)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .light_line_style(WHITE)
            .bold_line_style(FAINT.mix(0.6))
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_SIZE))
            .x_desc(x_desc)
            .y_desc(if backend {
                "most requests admitted in any 1 s"
            } else {
                "most admitted in any rolling interval"
            })
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        let mut legend: Vec<(RGBColor, bool, String)> = Vec::new();
        if backend {
            let points: Vec<(f64, f64)> = capacity
                .iter()
                .enumerate()
                .filter_map(|(p, c)| c.map(|c| (p as f64, c as f64)))
                .collect();
            let label = match capacity.iter().flatten().min() == capacity.iter().flatten().max() {
                true => format!(
                    "backend capacity {}/s",
                    capacity.iter().flatten().next().unwrap_or(&0)
                ),
                false => "backend capacity (varied)".to_string(),
            };
            let points = if points.len() == 1 {
                vec![(-0.5, points[0].1), (n as f64 - 0.5, points[0].1)]
            } else {
                points
            };
            chart.draw_series(DashedLineSeries::new(
                points,
                8,
                5,
                CAPACITY.stroke_width(2),
            ))?;
            legend.push((CAPACITY, true, label));
        }
        for (index, limiter) in limiters.iter().enumerate() {
            let colour = colours[index];
            let points: Vec<(f64, f64)> = figures[index]
                .iter()
                .enumerate()
                .filter_map(|(p, f)| f.map(|(w, _)| (p as f64, w as f64)))
                .collect();
            chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
            legend.push((colour, false, (*limiter).to_string()));
            if points.len() <= MAX_MARKERS {
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
            }
        }
        // Right of the plot, where it hides no line.
        let (right, top) = chart.backend_coord(&(n as f64 - 0.5, y_max));
        for (row, (colour, dashed, text)) in legend.into_iter().enumerate() {
            let y = top + 8 + 26 * row as i32;
            let (x0, x1) = (right + 24, right + 56);
            if dashed {
                for x in (x0..x1).step_by(12) {
                    root.draw(&PathElement::new(
                        vec![(x, y), ((x + 7).min(x1), y)],
                        colour.stroke_width(2),
                    ))?;
                }
            } else {
                root.draw(&PathElement::new(
                    vec![(x0, y), (x1, y)],
                    colour.stroke_width(3),
                ))?;
            }
            root.draw(&Text::new(
                text,
                (x1 + 8, y),
                (FONT, LABEL_SIZE)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        // The varied values under their points, thinned so they never overlap.
        let width =
            chart.backend_coord(&(n as f64 - 0.5, 0.0)).0 - chart.backend_coord(&(-0.5, 0.0)).0;
        let every = (70 * n).div_ceil(width.max(1) as usize).max(1);
        for p in (0..n).step_by(every) {
            let (x, y) = chart.backend_coord(&(p as f64, 0.0));
            root.draw(&Text::new(
                sweep.group_labels(p).join(""),
                (x, y + 8),
                (FONT, LABEL_SIZE)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        root.present()?;
    }
    let caption = if backend {
        "Each point is one setting of the sweep: the most requests each limiter admitted in any rolling second (the worst over replications). Points above the red capacity line let through more than the backend can take."
    } else {
        "Each point is one setting of the sweep: the most requests each limiter admitted in any rolling interval (the worst over replications)."
    };
    Ok(Chart {
        file: format!("sweep-{workload}.svg"),
        caption: caption.into(),
        svg,
    })
}
