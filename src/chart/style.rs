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

/// Okabe–Ito's colours, distinguishable with every common colour-vision
/// deficiency, but for their black (axes and the trailing count are near
/// black) and their pale yellow (a thin line of it vanishes on white), then
/// darker hues from Paul Tol's palettes (wine, indigo, olive, green,
/// purple) and a brown: charts draw at most 12 limiters
/// ([`crate::results::MAX_DRAWN_LIMITERS`]), so no two drawn limiters share a
/// colour. Which limiter gets which is [`limiter_colours`]' choice, by name.
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(17, 119, 51),   // green
    RGBColor(170, 68, 153),  // purple
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
/// Retries stacked over first attempts, in every panel: a neutral grey, so
/// that no limiter's colour (first attempts) is mistaken for it.
pub const RETRY: RGBColor = RGBColor(150, 150, 150);
/// Thin grid and boundary lines.
pub const FAINT: RGBColor = RGBColor(205, 205, 205);

/// The colours of the limiters called `names`, in their order: a limiter
/// keeps its colour in every chart, report, sizing and sweep, whatever its
/// place in the file and whichever limiters stand beside it.
///
/// A name's own colour is `PALETTE[fnv1a(name) % 12]`. When two names of
/// one chart want the same colour, the one first in byte order keeps it and
/// the other takes the next free one along the palette; so a limiter changes
/// colour only beside a limiter that wants its colour and sorts before it.
/// Up to 12 names get 12 different colours; more (never drawn together, see
/// [`crate::results::MAX_DRAWN_LIMITERS`]) share them.
pub fn limiter_colours<S: AsRef<str>>(names: &[S]) -> Vec<RGBColor> {
    let own = |name: &str| (crate::random::fnv1a(name.as_bytes()) % PALETTE.len() as u64) as usize;
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| names[a].as_ref().cmp(names[b].as_ref()).then(a.cmp(&b)));
    let mut taken = [false; PALETTE.len()];
    let mut slots = vec![0; names.len()];
    for index in order {
        let first = own(names[index].as_ref());
        let slot = (0..PALETTE.len())
            .map(|step| (first + step) % PALETTE.len())
            .find(|&slot| !taken[slot])
            .unwrap_or(first);
        taken[slot] = true;
        slots[index] = slot;
    }
    slots.into_iter().map(|slot| PALETTE[slot]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limiter_keeps_its_colour_whatever_stands_beside_it() {
        let alone = |name: &str| limiter_colours(&[name])[0];
        for name in ["fixed-1s", "token-bucket", "nginx-site", "sliding-log"] {
            assert_eq!(
                alone(name),
                PALETTE[(crate::random::fnv1a(name.as_bytes()) % 12) as usize]
            );
        }
        // Order in the file does not matter.
        let ab = limiter_colours(&["fixed-1s", "token-bucket"]);
        let ba = limiter_colours(&["token-bucket", "fixed-1s"]);
        assert_eq!((ab[0], ab[1]), (ba[1], ba[0]));
    }

    #[test]
    fn names_that_want_one_colour_get_two_and_the_first_in_order_keeps_it() {
        // Find two names whose own colours are the same.
        let own = |name: &str| crate::random::fnv1a(name.as_bytes()) % 12;
        let names: Vec<String> = (0..100).map(|i| format!("limiter-{i}")).collect();
        let (a, b) = names
            .iter()
            .flat_map(|a| names.iter().map(move |b| (a, b)))
            .find(|(a, b)| a < b && own(a) == own(b))
            .expect("100 names over 12 colours share one");
        let colours = limiter_colours(&[b, a]);
        assert_eq!(
            colours[1],
            limiter_colours(&[a])[0],
            "{a} sorts first and keeps its colour"
        );
        assert_ne!(colours[0], colours[1]);
    }

    #[test]
    fn twelve_names_get_twelve_colours() {
        let names: Vec<String> = (0..12).map(|i| format!("l{i}")).collect();
        let mut colours = limiter_colours(&names);
        colours.sort_by_key(|c| (c.0, c.1, c.2));
        colours.dedup();
        assert_eq!(colours.len(), 12);
    }
}
