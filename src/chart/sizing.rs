//! `charts/sizing.svg`: each limiter's simulated worst second against its
//! setting, with the capacity line and the safe settings marked.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::{
    AXIS_SIZE, CAPACITY, FAINT, FONT, HEIGHT, LABEL_SIZE, TITLE_SIZE, WIDTH, limiter_colour,
};
use super::{Chart, dashed_sample};
use crate::size::{Safe, SizingReport};

/// The chart. Settings are shown as a percentage of each limiter's current
/// value, so limiters with different parameters share one axis.
pub fn render_sizing(report: &SizingReport) -> Result<Chart> {
    let percent = |value: u64, current: u64| value as f64 * 100.0 / current.max(1) as f64;
    let x_max = report
        .limiters
        .iter()
        .flat_map(|s| s.sweep.iter().map(move |&(v, _, _)| percent(v, s.current)))
        .fold(200.0, f64::max);
    let y_max = report
        .limiters
        .iter()
        .flat_map(|s| s.sweep.iter().map(|&(_, worst, _)| worst as f64))
        .fold(report.capacity as f64, f64::max)
        * 1.12;
    let title = "Sizing: most admitted in any second against each limiter's setting".to_string();
    let mut svg = String::new();
    {
        let rows = report.limiters.len() as u32 + 1;
        let height = HEIGHT + RECOMMENDATIONS_TOP * 2 + ROW * rows;
        let canvas = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        canvas.fill(&WHITE)?;
        let (plot, below) = canvas.split_vertically(HEIGHT);
        draw_recommendations(&below, report)?;
        let root = plot.titled(&title, (FONT, TITLE_SIZE))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(18)
            .margin_top(30)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .bold_line_style(FAINT.mix(0.6))
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_SIZE))
            .x_desc("setting, % of the scenario's value (100% = as configured)")
            .y_desc("most requests admitted in any 1 s, on the workloads")
            .x_label_formatter(&|x| format!("{x:.0}%"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        chart
            .draw_series(DashedLineSeries::new(
                vec![
                    (0.0, report.capacity as f64),
                    (x_max, report.capacity as f64),
                ],
                8,
                5,
                CAPACITY.stroke_width(2),
            ))?
            .label(format!("backend capacity {}/s", report.capacity))
            .legend(dashed_sample(CAPACITY));
        for (index, sizing) in report.limiters.iter().enumerate() {
            let colour = limiter_colour(index);
            let points: Vec<(f64, f64)> = sizing
                .sweep
                .iter()
                .map(|&(v, worst, _)| (percent(v, sizing.current), worst as f64))
                .collect();
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
                .label(sizing.limiter.clone())
                .legend(super::line_sample(colour));
            if let Safe::Value {
                value,
                simulated_1s,
                ..
            } = &sizing.safe_any_traffic
            {
                chart.draw_series([Circle::new(
                    (percent(*value, sizing.current), *simulated_1s as f64),
                    6,
                    colour.filled(),
                )])?;
            }
            if let Safe::Value {
                value,
                simulated_1s,
                ..
            } = &sizing.safe_on_workloads
            {
                chart.draw_series([Circle::new(
                    (percent(*value, sizing.current), *simulated_1s as f64),
                    8,
                    colour.stroke_width(2),
                )])?;
            }
        }
        super::draw_series_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        let note = "filled dot: largest setting safe for any traffic (from the bound); ring: largest safe on these workloads";
        let style = (FONT, LABEL_SIZE)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        canvas.draw(&Text::new(note, (WIDTH as i32 / 2, 30), style))?;
        canvas.present()?;
    }
    let caption = "The settings printed under the chart are the largest that keep the worst second within capacity: for any traffic (from each limiter's bound), and on these workloads (simulated). Each line is one limiter's worst second as its threshold (or rate) varies; settings left of where a line crosses the red capacity line keep these workloads safe, the filled dot keeps any traffic safe.".to_string();
    Ok(Chart {
        file: "sizing.svg".into(),
        caption,
        svg,
    })
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
    for (i, sizing) in report.limiters.iter().enumerate() {
        let row = y(i as u32 + 1);
        let colour = limiter_colour(i);
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
