//! The charts and the report as a reviewer gets them: well-formed SVG with a
//! title, axis labels and every limiter; the shaded interval where the
//! summary says; a report that needs nothing from the network.

use super::common;

use common::required;

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

struct Run {
    _dir: tempfile::TempDir,
    out: PathBuf,
    summary: Value,
}

fn run(scenario: &str, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", scenario, "--quiet", "--out"])
        .arg(&out)
        .args(extra)
        .assert()
        .success();
    let summary =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    Run {
        _dir: dir,
        out,
        summary,
    }
}

fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

fn limiters(summary: &Value) -> Vec<String> {
    let mut names: Vec<String> = summary["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["limiter"].as_str().unwrap().to_string())
        .collect();
    names.dedup();
    names.sort();
    names.dedup();
    names
}

/// A chart's width in pixels, as its root element says.
fn chart_width(doc: &roxmltree::Document) -> f64 {
    doc.root_element()
        .attribute("width")
        .unwrap()
        .parse()
        .unwrap()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn every_chart_is_well_formed_with_a_title_axis_labels_and_every_limiter() {
    let promo = run("scenarios/promo.toml", &[]);
    let names = limiters(&promo.summary);
    let charts = promo.out.join("charts");
    let expected = [
        (
            "timeline-edge-burst.svg",
            "edge-burst: requests per second, in 10 ms buckets",
            ["time since the start of the run (s)", "requests per second"],
        ),
        (
            "worst-rolling.svg",
            "Worst 1 s admitted",
            ["most requests admitted in any 1 s", "edge-burst"],
        ),
        (
            "arrival-curve.svg",
            "Arrival curve",
            [
                "interval length (log scale)",
                "most requests admitted (log scale)",
            ],
        ),
    ];
    for (file, title, axes) in expected {
        let texts = texts(&read(&charts.join(file)));
        assert!(
            texts.iter().any(|t| t.starts_with(title)),
            "{file}: no title {title:?}"
        );
        for axis in axes {
            assert!(texts.iter().any(|t| t == axis), "{file}: no label {axis:?}");
        }
        for name in &names {
            assert!(
                texts
                    .iter()
                    .any(|t| t == name || t.starts_with(&format!("{name}: "))),
                "{file}: no series for {name}"
            );
        }
    }
    for workload in ["steady", "edge-burst", "noisy-edge-burst", "flash-sale"] {
        texts(&read(&charts.join(format!("timeline-{workload}.svg"))));
    }
}

/// The arrival curve's values at the rolling interval ("100 in 1 s", "150
/// in 1 s") stand on a pale backdrop drawn just before them: the curves
/// cross right there, and a line through "150" read as another number.
#[test]
fn the_arrival_curve_s_values_stand_on_a_backdrop() {
    let promo = run("scenarios/promo.toml", &[]);
    let svg = read(&promo.out.join("charts/arrival-curve.svg"));
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let number = |node: roxmltree::Node, name: &str| -> f64 {
        node.attribute(name).unwrap().parse().unwrap()
    };
    let mut labels = 0;
    for text in doc.descendants().filter(|n| n.has_tag_name("text")) {
        let Some(words) = text
            .text()
            .map(str::trim)
            .filter(|t| t.ends_with(" in 1 s"))
        else {
            continue;
        };
        labels += 1;
        let backdrop = text
            .prev_sibling_element()
            .filter(|r| r.has_tag_name("rect") && r.attribute("fill") == Some("#FFFFFF"))
            .unwrap_or_else(|| panic!("{words:?} has no backdrop before it"));
        let (x, y) = (number(text, "x"), number(text, "y"));
        let (left, top) = (number(backdrop, "x"), number(backdrop, "y"));
        let (width, height) = (number(backdrop, "width"), number(backdrop, "height"));
        let size = number(text, "font-size");
        // The text's box: about 0.6 em a character, an em tall from its top.
        let wide = words.chars().count() as f64 * size * 0.6;
        assert!(
            left <= x && x + wide <= left + width && top <= y && y + size <= top + height,
            "{words:?} at ({x}, {y}), {wide} wide, outside its backdrop ({left}, {top}) {width}×{height}"
        );
    }
    assert_eq!(
        labels, 2,
        "the advertised limit's and the capacity's values"
    );
}

/// Pixel x of a time in seconds, from two labelled ticks of the x axis.
fn x_axis(svg: &str) -> impl Fn(f64) -> f64 {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let ticks: Vec<(f64, f64)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| {
            let text = n.text()?.trim();
            // x tick labels have two decimals; y tick labels have none.
            if text.len() < 4 || text.as_bytes()[text.len() - 3] != b'.' {
                return None;
            }
            Some((
                text.parse::<f64>().ok()?,
                n.attribute("x")?.parse::<f64>().ok()?,
            ))
        })
        .collect();
    let ((s0, x0), (s1, x1)) = (ticks[0], ticks[ticks.len() - 1]);
    move |s| x0 + (s - s0) * (x1 - x0) / (s1 - s0)
}

#[test]
fn the_shaded_interval_is_the_worst_rolling_interval_of_the_summary() {
    let promo = run("scenarios/promo.toml", &[]);
    let fixed = promo.summary["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["workload"] == "edge-burst" && r["limiter"] == "fixed-1s")
        .unwrap();
    let start = fixed["worst_rolling_start_ns"].as_u64().unwrap() as f64 / 1e9;
    let length = fixed["rolling_ns"].as_u64().unwrap() as f64 / 1e9;
    let svg = read(&promo.out.join("charts/timeline-edge-burst.svg"));
    let x = x_axis(&svg);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let shaded = doc
        .descendants()
        .find(|n| {
            n.has_tag_name("rect")
                && n.attribute("fill") == Some("#FFDD78")
                && n.attribute("opacity") != Some("1")
        })
        .expect("the first panel (fixed-1s) has a shaded interval");
    let left: f64 = shaded.attribute("x").unwrap().parse().unwrap();
    let width: f64 = shaded.attribute("width").unwrap().parse().unwrap();
    assert!(
        (left - x(start)).abs() <= 1.5,
        "shade starts at {left}, expected {}",
        x(start)
    );
    assert!(
        (left + width - x(start + length)).abs() <= 1.5,
        "shade ends at {}, expected {}",
        left + width,
        x(start + length)
    );
    let texts = texts(&svg);
    assert!(texts.iter().any(|t| t.starts_with("fixed-1s: 200 admitted in 1 s from 0.901 s — 2.00× the limit of 100/s, 1.33× backend capacity")), "{texts:?}");
}

#[test]
fn the_report_is_self_contained_and_has_every_chart_and_verdict() {
    let promo = run("scenarios/promo.toml", &[]);
    let html = read(&promo.out.join("report.html"));
    for external in [
        "http://", "https://", "src=", "<link", "<script", "url(", "@import",
    ] {
        assert!(
            !html.contains(external),
            "report.html references {external}"
        );
    }
    assert_eq!(
        html.matches("<svg").count(),
        fs::read_dir(promo.out.join("charts")).unwrap().count()
    );
    assert_eq!(
        html.matches("<figcaption>").count(),
        html.matches("<svg").count()
    );
    assert!(html.contains("What this means"));
    assert!(html.contains("OVER 200/s"));
    assert!(html.contains("bound (theory)"));
}

#[test]
fn no_charts_writes_no_charts_and_no_report() {
    let basic = run("scenarios/basic.toml", &["--no-charts"]);
    assert!(!basic.out.join("charts").exists());
    assert!(!basic.out.join("report.html").exists());
    assert!(basic.out.join("summary.json").is_file());
}

#[test]
#[ignore = "needs Chromium (Debian's chromium): run with --include-ignored, as .ci/run does"]
fn the_report_renders_non_blank_in_a_headless_browser() {
    let _alone = super::common::real_time();
    let promo = run("scenarios/promo.toml", &[]);
    let Some((pixels, channels)) = screenshot(&promo.out, 1280, 2400) else {
        return;
    };
    let inked = pixels
        .chunks(channels)
        .filter(|px| px.iter().take(3).any(|&c| c < 200))
        .count();
    let share = inked as f64 / (pixels.len() / channels) as f64;
    assert!(
        share > 0.02,
        "the page looks blank: {:.2}% of pixels are not white",
        share * 100.0
    );
}

/// The limiters' legend of a worst-rolling chart: each name and the fill of
/// its swatch, in the order drawn.
fn legend(svg: &str) -> Vec<(String, String)> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    let elements: Vec<_> = doc.descendants().filter(|n| n.is_element()).collect();
    elements
        .windows(2)
        .filter(|pair| {
            let swatch = pair[0];
            swatch.has_tag_name("rect")
                && swatch.attribute("width") == Some("14")
                && swatch.attribute("height") == Some("12")
                && pair[1].has_tag_name("text")
        })
        .map(|pair| {
            let name = pair[1].text().unwrap_or_default().trim().to_string();
            (name, pair[0].attribute("fill").unwrap().to_string())
        })
        .collect()
}

/// A limiter is drawn in one colour by its name in every report, whatever
/// its place in the file and whichever limiters stand beside it; the
/// limiters of one chart never share a colour.
#[test]
fn a_limiter_keeps_its_colour_by_name_across_reports() {
    let promo = fs::read_to_string("scenarios/promo.toml").unwrap();
    let header = &promo[..promo.find("[[limiter]]").unwrap()];
    let other = tempfile::tempdir().unwrap();
    let file = other.path().join("reordered.toml");
    fs::write(
        &file,
        format!(
            "{header}[[limiter]]\nname = \"a-new-one\"\nkind = \"fixed-window\"\nwindow = \"2s\"\nthreshold = 200\n\n\
             [[limiter]]\nname = \"token-bucket\"\nkind = \"token-bucket\"\nrate = 100\nburst = 100\n\n\
             [[limiter]]\nname = \"fixed-1s\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100\n"
        ),
    )
    .unwrap();
    let legends = [
        run("scenarios/promo.toml", &[]),
        run(file.to_str().unwrap(), &[]),
    ]
    .map(|run| legend(&fs::read_to_string(run.out.join("charts/worst-rolling.svg")).unwrap()));
    for legend in &legends {
        let mut fills: Vec<&String> = legend.iter().map(|(_, fill)| fill).collect();
        fills.sort();
        fills.dedup();
        assert_eq!(
            fills.len(),
            legend.len(),
            "two limiters share a colour: {legend:?}"
        );
    }
    assert_eq!(legends[0].len(), 7);
    assert_eq!(legends[1].len(), 3);
    for name in ["fixed-1s", "token-bucket"] {
        let fill = |legend: &[(String, String)]| {
            legend
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, f)| f.clone())
                .unwrap()
        };
        assert_eq!(
            fill(&legends[0]),
            fill(&legends[1]),
            "{name} changed colour"
        );
    }
}

/// A design review opens the report on a laptop: its first screen (1400 ×
/// 900) holds the verdict (in the red of "over") and the chart of the spike
/// (the first limiter's lines, in its colour), before any table.
#[test]
#[ignore = "needs Chromium (Debian's chromium): run with --include-ignored, as .ci/run does"]
fn the_reports_first_screen_holds_the_verdict_and_a_chart() {
    let _alone = super::common::real_time();
    let promo = run("scenarios/promo.toml", &[]);
    let html = fs::read_to_string(promo.out.join("report.html")).unwrap();
    let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("no {needle}"));
    assert!(at("class=\"verdict\"") < at("<figure>") && at("<figure>") < at("<table>"));
    // The cause and the recommendation come before the chart, too.
    assert!(at("Cause: window edges") < at("<figure>"));
    assert!(at("<b>Recommended: sliding-log</b>") < at("<figure>"));
    let Some((pixels, channels)) = screenshot(&promo.out, 1400, 900) else {
        return;
    };
    let near = |px: &[u8], (r, g, b): (u8, u8, u8)| {
        px[0].abs_diff(r) < 24 && px[1].abs_diff(g) < 24 && px[2].abs_diff(b) < 24
    };
    let count = |colour| {
        pixels
            .chunks(channels)
            .filter(|px| near(px, colour))
            .count()
    };
    // The verdict's red (#b00000) and the chart's first limiter, in the
    // colour its legend gives it.
    let worst_rolling = fs::read_to_string(promo.out.join("charts/worst-rolling.svg")).unwrap();
    let (first, fill) = legend(&worst_rolling).swap_remove(0);
    let hex = |at: usize| u8::from_str_radix(&fill[at..at + 2], 16).unwrap();
    let colour = (hex(1), hex(3), hex(5));
    assert!(
        count((0xb0, 0x00, 0x00)) > 200,
        "no red verdict on the first screen"
    );
    assert!(
        count(colour) > 2_000,
        "no chart on the first screen: too few pixels in {first}'s {fill}"
    );
}

/// The report in `out` as a headless Chromium draws it in a window of
/// `width` × `height`: its pixels and the channels a pixel has. `None` (after
/// saying so) where Chromium is not installed.
fn screenshot(out: &std::path::Path, width: u32, height: u32) -> Option<(Vec<u8>, usize)> {
    let Some(browser) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| which(b))
    else {
        required("not installed: chromium on PATH; .ci/run installs Debian's chromium");
        return None;
    };
    let shot = out.join(format!("shot-{width}x{height}.png"));
    let profile = tempfile::tempdir().unwrap();
    let report = fs::canonicalize(out.join("report.html")).unwrap();
    let status = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
        ])
        .args([
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", report.display()))
        .output()
        .expect("the browser starts");
    assert!(
        shot.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    pixels.truncate(info.buffer_size());
    Some((pixels, info.color_type.samples()))
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Per panel, top to bottom: (pixel y, value) of its y-axis tick labels.
fn y_ticks_per_panel(svg: &str) -> Vec<Vec<(f64, f64)>> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let mut ticks: Vec<(f64, f64)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text") && n.attribute("text-anchor") == Some("end"))
        .filter_map(|n| {
            let value = n.text()?.trim().parse::<f64>().ok()?;
            Some((n.attribute("y")?.parse::<f64>().ok()?, value))
        })
        .collect();
    ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut panels: Vec<Vec<(f64, f64)>> = Vec::new();
    for tick in ticks {
        // Within a panel values fall as y grows; a rise starts the next panel.
        match panels.last_mut() {
            Some(panel) if panel.last().unwrap().1 > tick.1 => panel.push(tick),
            _ => panels.push(vec![tick]),
        }
    }
    panels
}

/// The highest value a line of `colour` reaches within a panel.
fn peak_of_line(svg: &str, colour: &str, panel: &[(f64, f64)]) -> f64 {
    let ((y0, v0), (y1, v1)) = (panel[0], panel[panel.len() - 1]);
    let value = |y: f64| v1 + (y - y1) * (v0 - v1) / (y0 - y1);
    let doc = roxmltree::Document::parse(svg).unwrap();
    let top_px = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(colour))
        .filter_map(|n| n.attribute("points"))
        .flat_map(|points| {
            points
                .split_whitespace()
                .filter_map(|p| p.split(',').nth(1)?.parse::<f64>().ok())
                .collect::<Vec<_>>()
        })
        .filter(|&y| y <= y1 + 1.0 && y >= y0 - 40.0)
        .fold(f64::INFINITY, f64::min);
    value(top_px)
}

#[test]
fn the_overview_shows_the_fixed_window_at_200_and_the_sliding_log_at_100_on_edge_burst() {
    let promo = run("scenarios/promo.toml", &[]);
    let svg = read(&promo.out.join("charts/overview-edge-burst.svg"));
    let panels = y_ticks_per_panel(&svg);
    // Panels follow the scenario's limiters: fixed-1s first, sliding-log fourth.
    assert_eq!(panels.len(), 7, "{panels:?}");
    let colours = legend(&read(&promo.out.join("charts/worst-rolling.svg")));
    let colour = |name: &str| colours.iter().find(|(n, _)| n == name).unwrap().1.clone();
    let fixed = peak_of_line(&svg, &colour("fixed-1s"), &panels[0]);
    let sliding = peak_of_line(&svg, &colour("sliding-log"), &panels[3]);
    assert!((fixed - 200.0).abs() < 2.0, "fixed-1s peaks at {fixed}");
    assert!(
        (sliding - 100.0).abs() < 2.0,
        "sliding-log peaks at {sliding}"
    );
    let texts = texts(&svg);
    assert!(texts.iter().any(|t| t == "capacity 150"), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("fixed-1s: at most 200 in any 1 s"))
    );
}

#[test]
fn every_chart_text_is_at_least_14_pixels() {
    let promo = run("scenarios/promo.toml", &[]);
    for entry in fs::read_dir(promo.out.join("charts")).unwrap() {
        let path = entry.unwrap().path();
        let svg = read(&path);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        for text in doc.descendants().filter(|n| n.has_tag_name("text")) {
            let size: f64 = text.attribute("font-size").unwrap().parse().unwrap();
            assert!(
                size >= 14.0,
                "{}: {:?} is {size} px",
                path.display(),
                text.text()
            );
        }
    }
}

#[test]
fn the_report_opens_with_the_verdict_then_the_spike_then_the_table_and_gains_sizing() {
    let promo = run("scenarios/promo.toml", &[]);
    Command::cargo_bin("burstsim")
        .unwrap()
        .args(["size", "scenarios/promo.toml", "--quiet", "--out"])
        .arg(&promo.out)
        .assert()
        .success();
    let html = read(&promo.out.join("report.html"));
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in report.html"))
    };
    let order = [
        at("<b>Verdict:</b>"),
        at("edge-burst: requests admitted in the trailing 1 s"),
        at("<h2>Results</h2>"),
        at("Worst 1 s admitted per workload"),
        at("<h2>Sizing</h2>"),
        at("<h2>What this means</h2>"),
        at("<h2>Details</h2>"),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "out of order: {order:?}"
    );
    assert!(
        html.contains("fixed-1s</b>, <b>buffered-70</b> and <b>token-bucket</b> let more through")
    );
    assert!(
        html.len() < 1_000_000,
        "report.html is {} bytes",
        html.len()
    );
}

/// A per-key limit summed over hundreds of keys (3190 for 319 clients of
/// 10 per second) must not squash the lines and bars it stands far above:
/// it is named at the top of the scale instead of setting it.
#[test]
fn limits_far_above_the_traffic_do_not_squash_the_charts() {
    let gateway = run("scenarios/my-gateway/my-gateway.toml", &[]);
    let bars = texts(&read(&gateway.out.join("charts/worst-rolling.svg")));
    // A per-key limit summed over 319 keys (3190) is no line to read a spike
    // against: it is neither drawn nor written; the bound is written at the top.
    assert!(!bars.iter().any(|t| t.contains("3190")), "{bars:?}");
    assert!(bars.iter().any(|t| t == "↑ bound 9889"), "{bars:?}");
    // The y axis ends just above the data (400 at most, the adversary's 20
    // keys; a bound of 620 beside them), not near 10000.
    let ticks: Vec<f64> = bars.iter().filter_map(|t| t.parse().ok()).collect();
    let top = ticks.iter().copied().fold(0.0, f64::max);
    assert!(
        (400.0..1_000.0).contains(&top),
        "axis up to {top}: {ticks:?}"
    );
    let lines = texts(&read(&gateway.out.join("charts/overview-sale-opening.svg")));
    assert!(
        lines.iter().any(|t| t.starts_with("nginx-per-client:")
            && t.contains("its worst client at 3.00× its own quota")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|t| t.contains("3190")), "{lines:?}");
}

/// Twelve limiters (the most a chart draws): every name in the bar chart's
/// legend lies inside the chart, and no two limiters share a colour there.
#[test]
fn twelve_limiters_each_have_a_legend_entry_inside_the_chart_and_their_own_colour() {
    let real = run("scenarios/real-limiters.toml", &[]);
    let names = limiters(&real.summary);
    assert_eq!(names.len(), 12);
    let svg = read(&real.out.join("charts/worst-rolling.svg"));
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let width = chart_width(&doc);
    for name in &names {
        let text = doc
            .descendants()
            .find(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(name.as_str()))
            .unwrap_or_else(|| panic!("{name} is in the legend"));
        let x: f64 = text.attribute("x").unwrap().parse().unwrap();
        // The name starts well inside the chart, with room for its letters.
        assert!(
            x + name.len() as f64 * 7.0 < width,
            "{name} at x = {x} runs off a {width} px chart"
        );
    }
    // The legend's swatches: one fill per limiter, all different.
    let swatches: std::collections::BTreeSet<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter(|n| n.attribute("height") == Some("12") || n.attribute("height") == Some("13"))
        .filter_map(|n| n.attribute("fill"))
        .collect();
    assert!(
        swatches.len() >= 12,
        "{} legend colours: {swatches:?}",
        swatches.len()
    );
}

/// Bars taller than the timeline's scale are cut with a dark cap, and the
/// legend says what the cap means only where some bar is cut.
#[test]
fn the_timeline_legend_names_the_cut_only_where_bars_are_cut() {
    let promo = run("scenarios/promo.toml", &[]);
    let svg = read(&promo.out.join("charts/timeline-edge-burst.svg"));
    assert!(
        texts(&svg).iter().any(|t| t == "cut off"),
        "edge-burst's bars pass the scale"
    );
    assert!(svg.contains("fill=\"#3C3C3C\""), "no cap drawn");
    // A steady 10 a second in 100 ms buckets: every bar is 10/s, within
    // the scale the trailing count sets.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("steady.toml");
    fs::write(
        &file,
        "name = \"steady\"\nduration = \"5s\"\n[metrics]\nbucket = \"100ms\"\n[[workload]]\nname = \"even\"\nsources = [{ kind = \"uniform\", rate = 10 }]\n[[limiter]]\nname = \"log\"\nkind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 20\n",
    )
    .unwrap();
    let steady = run(file.to_str().unwrap(), &[]);
    let svg = read(&steady.out.join("charts/timeline-even.svg"));
    assert!(
        !texts(&svg).iter().any(|t| t == "cut off"),
        "nothing is cut: {:?}",
        texts(&svg)
    );
    assert!(!svg.contains("fill=\"#3C3C3C\""), "a cap drawn");
}

/// What a whole-second log's worst rolling second can become — the table's
/// `47–187` — is on every chart that shows the worst: a second line under
/// each overview and timeline panel's note, and the range on each bar. A
/// chart that showed the seeded placement's figure alone would hide that
/// the same log can give far more.
#[test]
fn a_whole_second_logs_range_is_on_every_chart_that_shows_its_worst() {
    let log = run("scenarios/access-log.toml", &[]);
    let charts = log.out.join("charts");
    let overview = texts(&read(&charts.join("overview-black-friday.svg")));
    let timeline = texts(&read(&charts.join("timeline-black-friday.svg")));
    let bars = texts(&read(&charts.join("worst-rolling.svg")));
    let capacity = log.summary["runs"][0]["backend"]["capacity"]
        .as_u64()
        .unwrap();
    let mut ranged = 0;
    for run in log.summary["runs"].as_array().unwrap() {
        let limiter = run["limiter"].as_str().unwrap();
        let worst = run["worst_rolling"].as_u64().unwrap();
        let seconds = &run["whole_seconds"];
        let (least, most) = (
            seconds["admitted_at_least"].as_u64().unwrap(),
            seconds["admitted_at_most"].as_u64().unwrap(),
        );
        if most <= worst {
            continue;
        }
        ranged += 1;
        let over = |n: u64| {
            if n > capacity {
                format!(" ({} over capacity)", n - capacity)
            } else {
                String::new()
            }
        };
        let mut line = format!("whole-second log: {worst} as drawn within each second");
        if least > worst {
            line += &format!("; {least} packed at the seconds' edges{}", over(least));
            if most == least {
                line += ", the most for any placement";
            }
        }
        if most > least {
            line += &format!("; at most {most} for any placement{}", over(most));
        }
        for (chart, texts) in [("overview", &overview), ("timeline", &timeline)] {
            let note = texts
                .iter()
                .position(|t| t.starts_with(&format!("{limiter}: ")))
                .unwrap_or_else(|| panic!("{chart}: no note for {limiter}: {texts:?}"));
            assert_eq!(texts.get(note + 1), Some(&line), "{chart}, {limiter}");
        }
        let range = format!("{worst}–{most}");
        assert!(bars.contains(&range), "worst-rolling: no {range}: {bars:?}");
    }
    assert!(ranged >= 2, "access-log has whole-second ranges to show");
}

/// scenarios/access-log.toml's text, its log copied into `dir` where a
/// variant of the scenario written there finds it.
fn access_log_beside(dir: &Path) -> String {
    fs::create_dir(dir.join("traces")).unwrap();
    fs::copy(
        "scenarios/traces/checkout-access.log",
        dir.join("traces/checkout-access.log"),
    )
    .unwrap();
    fs::read_to_string("scenarios/access-log.toml").unwrap()
}

/// The backend takes a second at a time: with a rolling minute, the bars
/// of the worst second still span what the log's whole seconds allow (the
/// backend's own interval), as the table's verdict does — a bar drawn at
/// the seeded figure alone would sit under the capacity line beside a
/// verdict of OVER.
#[test]
fn the_worst_second_bars_of_a_whole_second_log_show_its_range_over_any_rolling_interval() {
    let dir = tempfile::tempdir().unwrap();
    let toml = access_log_beside(dir.path());
    let scenario = dir.path().join("minute.toml");
    fs::write(
        &scenario,
        toml.replace("[backend]", "[metrics]\nrolling = \"1m\"\n\n[backend]"),
    )
    .unwrap();
    let log = run(scenario.to_str().unwrap(), &[]);
    let bars = texts(&read(&log.out.join("charts/worst-rolling.svg")));
    let mut ranged = 0;
    for run in log.summary["runs"].as_array().unwrap() {
        let limiter = run["limiter"].as_str().unwrap();
        assert_eq!(run["rolling_ns"], 60_000_000_000u64, "{limiter}");
        let backend = &run["backend"];
        let worst = backend["worst_1s"].as_u64().unwrap();
        let most = backend["whole_seconds"]["admitted_at_most"]
            .as_u64()
            .unwrap_or_else(|| panic!("{limiter}: no backend.whole_seconds: {backend}"));
        if most > worst {
            ranged += 1;
            let range = format!("{worst}–{most}");
            assert!(bars.contains(&range), "{limiter}: no {range}: {bars:?}");
        }
    }
    assert!(ranged >= 2, "access-log has whole-second ranges to show");
}

/// The worst-rolling chart's legend names the whisker only when a bar has
/// one (the most any placement gives above the packed placement): with
/// the access log's per-client limiters it does, with its global fixed
/// window alone (packed = the most) each paler top is the most, and the
/// legend says so instead of naming a mark no bar carries.
#[test]
fn the_whisker_is_in_the_legend_only_when_a_bar_has_one() {
    let dir = tempfile::tempdir().unwrap();
    let toml = access_log_beside(dir.path());
    // The first limiter alone: everything from the second [[limiter]] on goes.
    let second = toml.match_indices("[[limiter]]").nth(1).unwrap().0;
    let global = dir.path().join("global.toml");
    fs::write(&global, &toml[..second]).unwrap();
    let mut seen = [false; 2];
    for scenario in ["scenarios/access-log.toml", global.to_str().unwrap()] {
        let ran = run(scenario, &[]);
        let texts = texts(&read(&ran.out.join("charts/worst-rolling.svg")));
        let whiskered = ran.summary["runs"].as_array().unwrap().iter().any(|run| {
            let seconds = &run["whole_seconds"];
            seconds["admitted_at_most"].as_u64() > seconds["admitted_at_least"].as_u64()
        });
        seen[usize::from(whiskered)] = true;
        let named = texts
            .iter()
            .any(|t| t == "the most for any placement within their seconds");
        assert_eq!(named, whiskered, "{scenario}: {texts:?}");
        let paler = texts
            .iter()
            .find(|t| t.starts_with("whole-second log: paler"));
        assert!(paler.is_some(), "{scenario}: {texts:?}");
        assert_eq!(
            paler.unwrap().ends_with("the most for any placement"),
            !whiskered,
            "{scenario}"
        );
    }
    assert_eq!(
        seen,
        [true, true],
        "one scenario with whiskers, one without"
    );
}

/// A line of text's width in ems, as DejaVu Sans (the sans-serif rsvg and
/// browsers here draw with) sets it, within about 1% on the charts' notes
/// and labels measured in rendered PNGs.
fn ems(text: &str) -> f64 {
    text.chars()
        .map(|c| match c {
            ' ' | '.' | ',' | ';' | ':' | '\'' | '|' | '!' | 'i' | 'l' | 'j' => 0.30,
            'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' => 0.40,
            'm' | 'w' | '×' | '–' | '—' => 0.85,
            c if c.is_uppercase() => 0.85,
            _ => 0.61,
        })
        .sum()
}

/// Every line of text that starts at its x fits inside its chart: a note
/// cut off at the edge is a note a reviewer never reads.
#[test]
fn no_chart_text_runs_past_the_charts_edge() {
    for scenario in ["scenarios/promo.toml", "scenarios/access-log.toml"] {
        let ran = run(scenario, &[]);
        for entry in fs::read_dir(ran.out.join("charts")).unwrap() {
            let path = entry.unwrap().path();
            let svg = read(&path);
            let doc = roxmltree::Document::parse(&svg).unwrap();
            let width = chart_width(&doc);
            for text in doc.descendants().filter(|n| n.has_tag_name("text")) {
                if text.attribute("text-anchor").is_some_and(|a| a != "start") {
                    continue;
                }
                let content = text.text().unwrap_or("").trim();
                let x: f64 = text.attribute("x").unwrap().parse().unwrap();
                let size: f64 = text.attribute("font-size").unwrap().parse().unwrap();
                let end = x + ems(content) * size;
                assert!(
                    end <= width,
                    "{}: {content:?} ends near x = {end:.0}, past {width}",
                    path.display()
                );
            }
        }
    }
}
