//! Chart size, fonts and colours, in one place.

use plotters::style::RGBColor;

/// Width of every chart, in pixels.
pub const WIDTH: u32 = 1280;
/// Height of a single-panel chart, in pixels.
pub const HEIGHT: u32 = 720;
/// Height of one small-multiple panel of the timeline chart.
pub const PANEL_HEIGHT: u32 = 110;

/// Font family for all text; SVG viewers pick their own sans-serif.
pub const FONT: &str = "sans-serif";
/// Chart titles.
pub const TITLE_SIZE: u32 = 28;
/// Axis descriptions.
pub const AXIS_SIZE: u32 = 20;
/// Tick labels, legends and annotations: legible when a 1280-pixel chart
/// is put on a slide (plotters writes 1/1.24 of these sizes into the SVG,
/// so 18 gives 14.5 px).
pub const LABEL_SIZE: u32 = 18;

/// Okabe–Ito's eight, distinguishable with every common colour-vision
/// deficiency, then four darker hues from Paul Tol's palettes (wine, indigo,
/// olive) and a brown: charts draw at most 12 limiters
/// ([`crate::results::MAX_DRAWN_LIMITERS`]), so no two drawn limiters share a
/// colour. Limiter i is drawn in `PALETTE[i % 12]` in every chart.
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(240, 228, 66),  // yellow
    RGBColor(136, 34, 85),   // wine
    RGBColor(51, 34, 136),   // indigo
    RGBColor(153, 153, 51),  // olive
    RGBColor(120, 72, 20),   // brown
];

/// The backend's capacity line.
pub const CAPACITY: RGBColor = RGBColor(200, 0, 0);
/// The exact trailing-interval count drawn over a timeline's bars.
pub const TRAILING: RGBColor = RGBColor(30, 30, 30);
/// A limiter's bound over any traffic.
pub const BOUND: RGBColor = RGBColor(60, 60, 60);
/// Nominal allowances, window boundaries and other quiet references.
pub const REFERENCE: RGBColor = RGBColor(90, 90, 90);
/// Shading of the worst rolling interval.
pub const HIGHLIGHT: RGBColor = RGBColor(255, 221, 120);
/// Opacity of rejected requests stacked over admitted ones.
pub const REJECTED_ALPHA: f64 = 0.28;
/// Retries stacked over first attempts, in every panel.
pub const RETRY: RGBColor = RGBColor(120, 60, 160);
/// Thin grid and boundary lines.
pub const FAINT: RGBColor = RGBColor(205, 205, 205);

/// The colour of limiter number `index` (in scenario order).
pub fn limiter_colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}
