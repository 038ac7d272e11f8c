//! `charts/sizing.svg`: each limiter's simulated worst second against its
//! setting, with the capacity line and the safe settings marked.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Chart;
use super::style::{
    AXIS_SIZE, CAPACITY, FAINT, FONT, LABEL_SIZE, REFERENCE, TITLE_SIZE, WIDTH, limiter_colours,
};
use crate::size::{Safe, SizingReport};

/// Height of one limiter's panel.
const SIZING_PANEL: u32 = 300;
/// Panels side by side.
const COLUMNS: usize = 2;

/// The chart: a panel per limiter, its setting on the x axis in the
/// parameter's own units (a threshold, a rate per second, a burst), the
/// worst second on these workloads against it, the capacity, today's value
/// and the safe settings marked.
pub fn render_sizing(report: &SizingReport) -> Result<Chart> {
    let title = "Sizing: most admitted in any second against each limiter's setting".to_string();
    let mut svg = String::new();
    {
        let panels = report.limiters.len().max(1);
        let grid_rows = panels.div_ceil(COLUMNS) as u32;
        let plot_height = 70 + SIZING_PANEL * grid_rows;
        let rows = report.limiters.len() as u32 + 1;
        let height = plot_height + RECOMMENDATIONS_TOP * 2 + ROW * rows;
        let canvas = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        canvas.fill(&WHITE)?;
        let (plot, below) = canvas.split_vertically(plot_height);
        draw_recommendations(&below, report)?;
        let root = plot.titled(&title, (FONT, TITLE_SIZE))?;
        let (note_area, grid) = root.split_vertically(30);
        let note = "red line: backend capacity · grey line: today's setting · filled dot: largest safe for any traffic (from the bound) · ring: largest safe on these workloads";
        let style = (FONT, LABEL_SIZE)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        note_area.draw(&Text::new(note, (WIDTH as i32 / 2, 4), style))?;
        let cells = grid.split_evenly((grid_rows as usize, COLUMNS));
        let colours = colours(report);
        for (index, (sizing, area)) in report.limiters.iter().zip(&cells).enumerate() {
            draw_panel(area, report.capacity, colours[index], sizing)?;
        }
        canvas.present()?;
    }
    let caption = "One panel per limiter, its setting in the parameter's own units: each line is that limiter's worst second on these workloads as the setting varies, everything else as configured. Settings left of where a line crosses the red capacity line keep these workloads safe; the filled dot is the largest that keeps any traffic safe (from the bound), the ring the largest safe on these workloads, the grey line today's value. The settings printed under the chart are those largest values.".to_string();
    Ok(Chart {
        file: "sizing.svg".into(),
        caption,
        svg,
    })
}

/// Each sized limiter's colour, by name.
fn colours(report: &SizingReport) -> Vec<RGBColor> {
    let names: Vec<&str> = report.limiters.iter().map(|s| s.limiter.as_str()).collect();
    limiter_colours(&names)
}

/// One limiter's panel.
fn draw_panel(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    capacity: u64,
    colour: RGBColor,
    sizing: &crate::size::Sizing,
) -> Result<()> {
    let x_max = sizing
        .sweep
        .iter()
        .map(|&(v, _, _)| v as f64)
        .fold(sizing.current as f64 * 1.05, f64::max)
        .max(1.0);
    let y_max = sizing
        .sweep
        .iter()
        .map(|&(_, worst, _)| worst as f64)
        .fold(capacity as f64, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_right(24)
        .caption(
            format!(
                "{}: {} (now {})",
                sizing.limiter, sizing.parameter, sizing.current
            ),
            (FONT, AXIS_SIZE).into_font().color(&colour),
        )
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .max_light_lines(0)
        .bold_line_style(FAINT.mix(0.6))
        .label_style((FONT, LABEL_SIZE))
        .axis_desc_style((FONT, LABEL_SIZE))
        .x_desc(sizing.parameter.as_str())
        .y_desc("worst 1 s")
        .x_labels(6)
        .y_labels(5)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    chart.draw_series([PathElement::new(
        vec![(0.0, capacity as f64), (x_max, capacity as f64)],
        CAPACITY.stroke_width(2),
    )])?;
    let now = sizing.current as f64;
    chart.draw_series([PathElement::new(
        vec![(now, 0.0), (now, y_max)],
        REFERENCE.stroke_width(1),
    )])?;
    let points: Vec<(f64, f64)> = sizing
        .sweep
        .iter()
        .map(|&(v, worst, _)| (v as f64, worst as f64))
        .collect();
    chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
    for (safe, filled) in [
        (&sizing.safe_any_traffic, true),
        (&sizing.safe_on_workloads, false),
    ] {
        if let Safe::Value {
            value,
            simulated_1s,
            ..
        } = safe
        {
            let at = (*value as f64, *simulated_1s as f64);
            let style = if filled {
                colour.filled()
            } else {
                colour.stroke_width(2)
            };
            chart.draw_series([Circle::new(at, if filled { 6 } else { 9 }, style)])?;
        }
    }
    Ok(())
}

const RECOMMENDATIONS_TOP: u32 = 16;
const ROW: u32 = 26;

/// The recommended settings as a small table under the chart.
fn draw_recommendations(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    report: &SizingReport,
) -> Result<()> {
    let font = (FONT, LABEL_SIZE).into_font();
    let columns = [90, 380, 720];
    let header = [
        "limiter".to_string(),
        format!("largest safe for any traffic (≤ {}/s)", report.capacity),
        "largest safe on these workloads".to_string(),
    ];
    let y = |row: u32| (RECOMMENDATIONS_TOP + row * ROW) as i32;
    for (x, text) in columns.iter().zip(&header) {
        area.draw(&Text::new(
            text.clone(),
            (*x, y(0)),
            font.clone().color(&BLACK),
        ))?;
    }
    let setting = |sizing: &crate::size::Sizing, safe: &Safe| match safe {
        Safe::Value { value, .. } => format!("{} {value}", sizing.parameter),
        Safe::Any => "any value".to_string(),
        Safe::None => "none: even the smallest is over".to_string(),
    };
    let colours = colours(report);
    for (i, sizing) in report.limiters.iter().enumerate() {
        let row = y(i as u32 + 1);
        let colour = colours[i];
        area.draw(&Rectangle::new(
            [(columns[0] - 24, row + 3), (columns[0] - 10, row + 15)],
            colour.filled(),
        ))?;
        let cells = [
            sizing.limiter.clone(),
            setting(sizing, &sizing.safe_any_traffic),
            setting(sizing, &sizing.safe_on_workloads),
        ];
        for (x, text) in columns.iter().zip(cells) {
            area.draw(&Text::new(text, (*x, row), font.clone().color(&BLACK)))?;
        }
    }
    Ok(())
}
