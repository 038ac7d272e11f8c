//! `timeline-<workload>.svg`: admitted and rejected requests per bucket around
//! the workload's worst spike, one panel per limiter on shared axes.

use anyhow::Result;
use plotters::prelude::*;

use super::style::{
    CAPACITY, FAINT, FONT, HEIGHT, HIGHLIGHT, LABEL_SIZE, PANEL_HEIGHT, REFERENCE, REJECTED_ALPHA,
    RETRY, TITLE_SIZE, TRAILING, WIDTH,
};
use super::{
    Canvas, Chart, DASHED, PanelAxes, Reference, Results, X_AXIS_HEIGHT, add_overlay,
    draw_panel_note, draw_references, interval_words, note_lines, note_room, panel_plot,
    per_second, step_points, whole_seconds_line,
};
use crate::results::{RunResult, WorkloadResults};
use crate::time::{NANOS_PER_SEC, Nanos};

/// Room above the tallest bar.
const HEADROOM: f64 = 1.1;

/// The cap on a bar cut at the top of the scale, and its share of the height.
const CUT: RGBColor = RGBColor(60, 60, 60);
const CAP_SHARE: f64 = 0.04;
const LEGEND_HEIGHT: u32 = 34;
/// The most bars a panel draws (about two pixels each): finer buckets are
/// summed into wider ones, so the chart's size never depends on the bucket.
const MAX_BARS: usize = 500;
/// The most window edges a panel draws; denser ones are said in words.
const MAX_EDGES: u64 = 200;

/// The span shown: the focus run's worst interval, half a rolling interval
/// either side, in whole buckets.
struct View {
    from: u64,
    to: u64,
}

impl View {
    fn around(focus: &RunResult, rolling: u64, bucket: u64, duration: u64) -> View {
        let start = focus.summary.worst_rolling_start_ns;
        let from = start.saturating_sub(rolling / 2) / bucket * bucket;
        let to = start
            .saturating_add(rolling + rolling / 2)
            .min(duration)
            .div_ceil(bucket)
            * bucket;
        View {
            from,
            to: to.max(from + bucket),
        }
    }

    fn seconds(&self) -> std::ops::Range<f64> {
        secs(self.from)..secs(self.to)
    }

    fn buckets(&self, bucket: u64) -> std::ops::Range<usize> {
        (self.from / bucket) as usize..(self.to / bucket) as usize
    }

    /// The view's buckets in groups of `group`: the index range of each.
    fn groups(&self, bucket: u64, group: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
        let all = self.buckets(bucket);
        let end = all.end;
        all.step_by(group)
            .map(move |start| start..(start + group).min(end))
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / NANOS_PER_SEC as f64
}

/// The chart for `workload`.
pub fn render(results: &Results, workload: &WorkloadResults) -> Result<Chart> {
    let runs = &workload.runs;
    let colours = super::colours(results);
    let name = &workload.name;
    let (bucket, rolling) = (results.metrics.bucket.get(), results.metrics.rolling.get());
    // Clients that retry: the bars are their attempts, first ones and retries.
    let attempts = runs.iter().all(|run| run.timeline.has_attempts());
    let focus = runs
        .iter()
        .reduce(|best, run| {
            if run.summary.spike_ratio > best.summary.spike_ratio {
                run
            } else {
                best
            }
        })
        .expect("a scenario has at least one limiter");
    let view = View::around(focus, rolling, bucket, results.duration.get());

    // Bars are rates: each group of buckets' count scaled to requests per
    // second; a group is one bucket unless the view holds more than a chart
    // can draw.
    let group = view.buckets(bucket).len().div_ceil(MAX_BARS).max(1);
    let shown_bucket = bucket.saturating_mul(group as u64);
    let per_sec = NANOS_PER_SEC as f64 / shown_bucket as f64;
    let capacity = results.capacity().map(|c| c as f64);
    let sum = |counts: &[u32], range: std::ops::Range<usize>| -> u64 {
        counts
            .get(range)
            .map_or(0, |c| c.iter().map(|&n| u64::from(n)).sum())
    };
    let tallest = runs
        .iter()
        .flat_map(|run| {
            view.groups(bucket, group).map(|range| {
                let t = &run.timeline;
                if attempts {
                    sum(&t.first_attempts, range.clone()) + sum(&t.retries, range)
                } else {
                    sum(&t.admitted, range.clone()) + sum(&t.rejected, range)
                }
            })
        })
        .max()
        .unwrap_or(0) as f64
        * per_sec;
    // The scale follows what the backend gets — the exact trailing count,
    // per second — with the limit and the capacity: a 10 ms bucket of
    // random traffic scaled ×100 is noise, not load, and taller bars are cut
    // at the top and marked. Without the trailing count, the tallest bar.
    let trailing_top = runs
        .iter()
        .filter_map(|run| run.trailing.as_ref())
        .flat_map(|trailing| {
            view.buckets(bucket)
                .map(|i| trailing.most.get(i).copied().unwrap_or(0))
        })
        .max()
        .map(|most| f64::from(most) * NANOS_PER_SEC as f64 / rolling as f64);
    let data_top = trailing_top.unwrap_or(tallest).max(capacity.unwrap_or(0.0));
    // A limit joins the scale unless it would squash the bars: a limit per
    // key summed over a thousand keys is no line to read a spike against.
    let limit = |run: &RunResult| {
        Some(run.summary.nominal * NANOS_PER_SEC as f64 / rolling as f64)
            .filter(|&limit| limit <= data_top * 2.5)
            .filter(|_| super::per_key_ratio(&run.summary).is_none())
    };
    let nominal_max = runs.iter().filter_map(&limit).fold(0.0, f64::max);
    let y_max = (data_top.max(nominal_max) * HEADROOM).max(1.0);

    let title = format!(
        "{name}: {} per second, in {} buckets, around the worst {}",
        if attempts { "attempts" } else { "requests" },
        interval_words(Nanos(shown_bucket)),
        interval_words(Nanos(rolling))
    );
    let note_lines = note_lines(runs);
    let mut svg = String::new();
    let mut overlay = String::new();
    {
        let panels = runs.len() as u32;
        let chrome = TITLE_SIZE * 2 + LEGEND_HEIGHT + X_AXIS_HEIGHT;
        let height = HEIGHT.max(chrome + (PANEL_HEIGHT + note_room(note_lines)) * panels);
        // Every panel gets the same plot height; the last also holds the x axis.
        let panel_height = (height - chrome) / panels;
        let canvas = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        canvas.fill(&WHITE)?;
        let root = canvas.titled(&title, (FONT, TITLE_SIZE))?;
        let (legend, body) = root.split_vertically(LEGEND_HEIGHT);
        draw_legend(
            &legend,
            Legend {
                with_capacity: capacity.is_some(),
                rolling: Nanos(rolling),
                attempts,
                first: colours[0],
                cut: tallest > y_max,
            },
        )?;
        let breaks: Vec<u32> = (1..panels).map(|i| i * panel_height).collect();
        let areas = body.split_by_breakpoints::<u32, u32, _, _>([], breaks);
        for (i, (run, area)) in runs.iter().zip(&areas).enumerate() {
            let panel = Panel {
                run,
                colour: colours[i],
                view: &view,
                y_max,
                bucket,
                group,
                rolling,
                per_sec,
                nominal: limit(run),
                capacity,
                last: i + 1 == runs.len(),
                y_desc: (i == runs.len() / 2).then(|| {
                    if attempts {
                        "attempts per second"
                    } else {
                        "requests per second"
                    }
                    .to_string()
                }),
                attempts,
                note_lines,
            };
            panel.draw(area, &canvas, &mut overlay)?;
        }
        canvas.present()?;
    }
    add_overlay(&mut svg, &overlay);
    let bars = if attempts {
        "attempts per second reaching the limiter over each {} bucket: requests' first attempts, with retries stacked above in grey (the herd at each window reset)"
    } else {
        "requests per second over each {} bucket: admitted, with rejected ones lighter above"
    };
    let caption = format!(
        "Bars are {}. The shaded band in each panel is that limiter's worst {} interval; {} lets {} through there, {:.2}× its limit. Short buckets of random traffic flicker above the capacity line even when no second exceeds it, so the scale follows the trailing count, the limit and the capacity, and a bar taller than the scale is cut at its top and capped in dark grey; the dark line is the exact count admitted in the trailing {} at each instant, per second: what the backend really gets.",
        bars.replace("{}", &interval_words(Nanos(bucket))),
        interval_words(Nanos(rolling)),
        focus.summary.limiter,
        focus.summary.worst_rolling,
        focus.summary.spike_ratio,
        interval_words(Nanos(rolling)),
    );
    Ok(Chart {
        file: format!("timeline-{name}.svg"),
        caption,
        svg,
    })
}

/// What the timeline's legend shows.
struct Legend {
    with_capacity: bool,
    rolling: Nanos,
    /// Bars are attempts: first ones and retries.
    attempts: bool,
    /// The first panel's colour, for the swatches.
    first: RGBColor,
    /// Some bar is taller than the scale and cut, with a cap.
    cut: bool,
}

fn draw_legend(area: &Canvas, legend: Legend) -> Result<()> {
    let Legend {
        with_capacity,
        rolling,
        attempts,
        first,
        cut,
    } = legend;
    let font = (FONT, LABEL_SIZE).into_font().color(&BLACK);
    let boxes: [(&str, ShapeStyle); 3] = if attempts {
        [
            ("first attempts (panel colour)", first.filled()),
            ("retries (stacked)", RETRY.filled()),
            ("worst interval", HIGHLIGHT.filled()),
        ]
    } else {
        [
            ("admitted (panel colour)", first.filled()),
            ("rejected (lighter)", first.mix(REJECTED_ALPHA).filled()),
            ("worst interval", HIGHLIGHT.filled()),
        ]
    };
    // About 8 pixels a character at LABEL_SIZE.
    let width = |label: &str| 40 + (label.len() as i32) * 8;
    let mut x = 80;
    for (label, style) in boxes {
        area.draw(&Rectangle::new([(x, 9), (x + 14, 23)], style))?;
        area.draw(&Text::new(label, (x + 20, 8), font.clone()))?;
        x += width(label);
    }
    area.draw(&PathElement::new(
        vec![(x + 7, 7), (x + 7, 25)],
        FAINT.stroke_width(2),
    ))?;
    area.draw(&Text::new("window edge", (x + 20, 8), font.clone()))?;
    x += width("window edge");
    if cut {
        area.draw(&Rectangle::new([(x, 9), (x + 14, 14)], CUT.filled()))?;
        area.draw(&Text::new("cut off", (x + 20, 8), font.clone()))?;
        x += width("cut off");
    }
    let trailing = format!("trailing {}", interval_words(rolling));
    area.draw(&PathElement::new(
        vec![(x, 15), (x + 20, 15)],
        TRAILING.stroke_width(2),
    ))?;
    area.draw(&Text::new(trailing.as_str(), (x + 26, 8), font.clone()))?;
    x += width(&trailing) + 6;
    let lines = [("limit", REFERENCE), ("capacity", CAPACITY)];
    for (label, colour) in lines.into_iter().take(if with_capacity { 2 } else { 1 }) {
        area.draw(&PathElement::new(
            vec![(x, 15), (x + 8, 15)],
            colour.stroke_width(2),
        ))?;
        area.draw(&PathElement::new(
            vec![(x + 12, 15), (x + 20, 15)],
            colour.stroke_width(2),
        ))?;
        area.draw(&Text::new(label, (x + 26, 8), font.clone()))?;
        x += width(label) + 6;
    }
    Ok(())
}

struct Panel<'a> {
    run: &'a RunResult,
    colour: RGBColor,
    view: &'a View,
    y_max: f64,
    bucket: u64,
    /// Buckets drawn as one bar.
    group: usize,
    rolling: u64,
    /// Bars per second: a bar's count times this is its rate.
    per_sec: f64,
    /// The limit's line, per second; none where it would squash the bars
    /// or is a per-key limit summed over keys.
    nominal: Option<f64>,
    capacity: Option<f64>,
    last: bool,
    y_desc: Option<String>,
    /// Bars of first attempts and retries rather than admitted and rejected.
    attempts: bool,
    note_lines: u32,
}

impl Panel<'_> {
    /// Draws the panel in `area`; `canvas` is the whole image, for text placed
    /// at the absolute pixel positions that `backend_coord` returns.
    fn draw(&self, area: &Canvas, canvas: &Canvas, overlay: &mut String) -> Result<()> {
        let axes = PanelAxes {
            last: self.last,
            y_desc: self.y_desc.as_deref(),
            y_labels: 3,
            x_decimals: 2,
            x_grid: false,
            note_lines: self.note_lines,
        };
        let mut chart = panel_plot(area, self.view.seconds(), self.y_max, &axes)?;

        let summary = &self.run.summary;
        let (shade_from, shade_to) = (
            summary.worst_rolling_start_ns,
            summary.worst_rolling_start_ns + self.rolling,
        );
        let visible = shade_from < self.view.to && shade_to > self.view.from;
        if visible {
            let from = secs(shade_from.max(self.view.from));
            let to = secs(shade_to.min(self.view.to));
            chart.draw_series([Rectangle::new(
                [(from, 0.0), (to, self.y_max)],
                HIGHLIGHT.mix(0.55).filled(),
            )])?;
        }
        let mut too_dense = None;
        if let Some((window, phase)) = self.run.window_edges.map(|(w, p)| (w.get(), p.get())) {
            let (from, to) = (
                self.view.from.saturating_sub(phase),
                self.view.to.saturating_sub(phase),
            );
            let edges = from.div_ceil(window)..=to / window;
            if to / window - from.div_ceil(window) > MAX_EDGES {
                too_dense = Some(window);
            } else {
                chart.draw_series(edges.map(|k| secs(phase + k * window)).map(|x| {
                    PathElement::new(vec![(x, 0.0), (x, self.y_max)], FAINT.stroke_width(1))
                }))?;
            }
        }
        let bars = self.view.groups(self.bucket, self.group).flat_map(|range| {
            let rate = |counts: &[u32]| {
                counts
                    .get(range.clone())
                    .map_or(0, |c| c.iter().map(|&n| u64::from(n)).sum::<u64>())
                    as f64
                    * self.per_sec
            };
            let timeline = &self.run.timeline;
            let (lower, upper, upper_style) = if self.attempts {
                (
                    rate(&timeline.first_attempts),
                    rate(&timeline.retries),
                    RETRY.filled(),
                )
            } else {
                (
                    rate(&timeline.admitted),
                    rate(&timeline.rejected),
                    self.colour.mix(REJECTED_ALPHA).filled(),
                )
            };
            let (x0, x1) = (
                secs(range.start as u64 * self.bucket),
                secs(range.end as u64 * self.bucket),
            );
            // Cut at the top of the scale; the mark says so.
            let (lower, top) = (lower.min(self.y_max), (lower + upper).min(self.y_max));
            [
                (lower > 0.0)
                    .then(|| Rectangle::new([(x0, 0.0), (x1, lower)], self.colour.filled())),
                (top > lower).then(|| Rectangle::new([(x0, lower), (x1, top)], upper_style)),
            ]
            .into_iter()
            .flatten()
        });
        chart.draw_series(bars)?;
        // Bars cut at the top get a dark cap; neighbours share one.
        let mut caps: Vec<(f64, f64)> = Vec::new();
        for range in self.view.groups(self.bucket, self.group) {
            let t = &self.run.timeline;
            let (a, b) = if self.attempts {
                (&t.first_attempts, &t.retries)
            } else {
                (&t.admitted, &t.rejected)
            };
            let sum = |counts: &[u32]| {
                counts
                    .get(range.clone())
                    .map_or(0, |c| c.iter().map(|&n| u64::from(n)).sum::<u64>())
            };
            if (sum(a) + sum(b)) as f64 * self.per_sec <= self.y_max {
                continue;
            }
            let (x0, x1) = (
                secs(range.start as u64 * self.bucket),
                secs(range.end as u64 * self.bucket),
            );
            match caps.last_mut() {
                Some(last) if last.1 == x0 => last.1 = x1,
                _ => caps.push((x0, x1)),
            }
        }
        let cap = self.y_max * (1.0 - CAP_SHARE);
        chart.draw_series(
            caps.into_iter()
                .map(|(x0, x1)| Rectangle::new([(x0, cap), (x1, self.y_max)], CUT.filled())),
        )?;
        if let Some(trailing) = &self.run.trailing {
            // The exact count in the trailing interval, as a rate: what the
            // backend really gets per second, beside the flicker of buckets.
            let scale = NANOS_PER_SEC as f64 / self.rolling as f64;
            let buckets = self.view.buckets(self.bucket);
            let first = buckets.start;
            let values =
                buckets.map(|i| f64::from(trailing.most.get(i).copied().unwrap_or(0)) * scale);
            let steps = step_points(values, |j| secs((first + j) as u64 * self.bucket));
            chart.draw_series(LineSeries::new(
                steps.iter().copied(),
                WHITE.stroke_width(5),
            ))?;
            chart.draw_series(LineSeries::new(steps, TRAILING.stroke_width(2)))?;
        }

        let mut references: Vec<Reference> = self
            .nominal
            .map(|nominal| Reference {
                level: nominal,
                label: format!("limit {}", per_second(nominal)),
                colour: REFERENCE,
                dash: DASHED,
            })
            .into_iter()
            .collect();
        if let Some(capacity) = self.capacity {
            references.push(Reference {
                level: capacity,
                label: format!("capacity {}", per_second(capacity)),
                colour: CAPACITY,
                dash: DASHED,
            });
        }
        draw_references(&mut chart, canvas, self.view.seconds(), references, overlay)?;
        let mut note = self.annotation();
        if !visible {
            note.push_str(" (outside this view)");
        }
        if let Some(window) = too_dense {
            note.push_str(&format!(
                "; window edges every {}, too dense to draw",
                interval_words(Nanos(window))
            ));
        }
        let whole = whole_seconds_line(
            summary,
            self.capacity.map(|per_sec| per_sec * secs(self.rolling)),
        );
        let lines: Vec<String> = std::iter::once(note).chain(whole).collect();
        draw_panel_note(canvas, area, &lines)?;
        Ok(())
    }

    /// "fixed-1s: 200 admitted in 1 s from 0.901 s — 2.00× the limit of 100/s, 1.33× backend capacity"
    fn annotation(&self) -> String {
        let summary = &self.run.summary;
        let rolling_secs = secs(self.rolling);
        let against = match super::per_key_ratio(summary) {
            Some(per_key) => format!("its worst client at {per_key:.2}× its own quota"),
            None => format!(
                "{:.2}× the limit of {}{}",
                summary.spike_ratio,
                per_second(summary.nominal / rolling_secs),
                if self.nominal.is_none() {
                    ", above this scale"
                } else {
                    ""
                }
            ),
        };
        let mut note = format!(
            "{}: {} admitted in {} from {:.3} s — {against}",
            summary.limiter,
            summary.worst_rolling,
            interval_words(Nanos(self.rolling)),
            secs(summary.worst_rolling_start_ns),
        );
        if let Some(backend) = &summary.backend {
            let times = |count: u64| count as f64 / backend.capacity as f64;
            if self.rolling == NANOS_PER_SEC {
                note.push_str(&format!(
                    ", {:.2}× backend capacity",
                    times(summary.worst_rolling)
                ));
            } else {
                note.push_str(&format!(
                    "; worst 1 s {}, {:.2}× backend capacity",
                    backend.worst_1s,
                    times(backend.worst_1s)
                ));
            }
        }
        note
    }
}
