//! The figures of a run, as columns: one list says which figure goes in
//! `summary.csv`, the terminal table and the report's results table, under
//! which header and in which words. `summary.json` is the run itself
//! (serde); a new figure is its field in [`RunSummary`] plus one line here.

use super::rows::{Align, Rows};
use super::values::*;
use super::{bound, csv_bound, seconds};
use crate::summary::RunSummary;
use crate::time::Nanos;

/// What headers may depend on: the runs as a whole.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    /// The headline rolling interval.
    pub rolling: Nanos,
    /// The backend's capacity, when there is one.
    pub capacity: Option<u64>,
    /// Runs were replicated: worst figures are maxima over replications.
    pub replicated: bool,
    /// Some run's backend has a queue.
    pub queue: bool,
    /// Some run keeps state per key.
    pub per_key: bool,
    /// Some run's clients retry.
    pub closed: bool,
    /// Some run's limiter delayed requests (nginx without `nodelay`).
    pub delays: bool,
    /// There is a backend, so spare capacity is known.
    pub backend: bool,
    /// Some run's backend judges a whole-second log's second apart from
    /// the rolling interval (see [`crate::summary::BackendSummary::whole_seconds`]).
    pub backend_seconds: bool,
}

impl Frame {
    /// The frame of `runs`.
    pub fn of(runs: &[RunSummary]) -> Frame {
        Frame {
            rolling: runs
                .first()
                .map_or(Nanos::SECOND, |run| Nanos(run.rolling_ns)),
            capacity: runs
                .iter()
                .find_map(|run| run.backend.as_ref().map(|b| b.capacity)),
            replicated: runs.iter().any(|run| run.replications.is_some()),
            queue: runs
                .iter()
                .any(|run| run.backend.as_ref().is_some_and(|b| b.queue.is_some())),
            per_key: runs
                .iter()
                .any(|run| run.keys.as_ref().is_some_and(|k| k.state.is_some())),
            closed: runs.iter().any(|run| run.closed_loop.is_some()),
            delays: runs.iter().any(|run| run.delay.is_some()),
            backend: runs.iter().any(|run| run.backend.is_some()),
            backend_seconds: runs.iter().any(|run| {
                run.backend
                    .as_ref()
                    .is_some_and(|b| b.whole_seconds.is_some())
            }),
        }
    }
}

/// A header: fixed, or written from the [`Frame`].
#[derive(Clone, Copy)]
pub enum Header {
    /// Always these words.
    Fixed(&'static str),
    /// Words that depend on the runs.
    From(fn(&Frame) -> String),
}

impl Header {
    fn text(self, frame: &Frame) -> String {
        match self {
            Header::Fixed(text) => text.to_string(),
            Header::From(text) => text(frame),
        }
    }
}

/// When a column is there at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Always.
    Always,
    /// When some backend has a queue.
    Queue,
    /// When some run keeps state per key.
    PerKey,
    /// When some run's clients retry.
    Closed,
    /// When some limiter delayed requests.
    Delays,
    /// When there is a backend.
    Backend,
    /// When some backend judges a whole-second log's second apart from
    /// the rolling interval.
    BackendSeconds,
}

impl When {
    fn holds(self, frame: &Frame) -> bool {
        match self {
            When::Always => true,
            When::Queue => frame.queue,
            When::PerKey => frame.per_key,
            When::Closed => frame.closed,
            When::Delays => frame.delays,
            When::Backend => frame.backend,
            When::BackendSeconds => frame.backend_seconds,
        }
    }
}

/// A figure in one format: its header, its words and when it is there.
#[derive(Clone, Copy)]
pub struct Shown {
    header: Header,
    value: fn(&RunSummary) -> String,
    when: When,
}

/// One figure of a run, in the formats that show it.
#[derive(Clone, Copy)]
pub struct Column {
    csv: Option<Shown>,
    table: Option<Shown>,
    html: Option<Shown>,
    align: Align,
}

impl Column {
    /// A figure in `summary.csv` under `header`.
    const fn csv(header: &'static str, value: fn(&RunSummary) -> String) -> Column {
        Column {
            csv: Some(Shown {
                header: Header::Fixed(header),
                value,
                when: When::Always,
            }),
            table: None,
            html: None,
            align: Align::Right,
        }
    }

    /// A figure shown only in the tables (terminal and report).
    const fn shown(header: Header, value: fn(&RunSummary) -> String) -> Column {
        let shown = Shown {
            header,
            value,
            when: When::Always,
        };
        Column {
            csv: None,
            table: Some(shown),
            html: Some(shown),
            align: Align::Right,
        }
    }

    /// The same figure in the tables too, with `value`'s words.
    const fn and_shown(mut self, header: Header, value: fn(&RunSummary) -> String) -> Column {
        let shown = Shown {
            header,
            value,
            when: When::Always,
        };
        self.table = Some(shown);
        self.html = Some(shown);
        self
    }

    /// In the terminal table alone.
    const fn table_only(mut self) -> Column {
        self.html = None;
        self
    }

    /// In the report's table alone.
    const fn html_only(mut self) -> Column {
        self.table = None;
        self
    }

    /// The report's table says it in other words.
    const fn in_html(mut self, header: Header, value: fn(&RunSummary) -> String) -> Column {
        self.html = Some(Shown {
            header,
            value,
            when: When::Always,
        });
        self
    }

    /// Only when `when` holds, in every format.
    const fn when(mut self, when: When) -> Column {
        if let Some(shown) = &mut self.csv {
            shown.when = when;
        }
        if let Some(shown) = &mut self.table {
            shown.when = when;
        }
        if let Some(shown) = &mut self.html {
            shown.when = when;
        }
        self
    }

    /// In the tables only when `when` holds (`summary.csv` always has it).
    const fn shown_when(mut self, when: When) -> Column {
        if let Some(shown) = &mut self.table {
            shown.when = when;
        }
        if let Some(shown) = &mut self.html {
            shown.when = when;
        }
        self
    }

    /// Cells stand as `align` says.
    const fn align(mut self, align: Align) -> Column {
        self.align = align;
        self
    }
}

use Header::{Fixed, From};

/// Every figure of a run, in the order the formats show them.
pub const COLUMNS: &[Column] = &[
    Column::csv("workload", |r| r.workload.clone())
        .and_shown(Fixed("workload"), |r| r.workload.clone())
        .align(Align::Left),
    Column::csv("limiter", |r| r.limiter.clone())
        .and_shown(Fixed("limiter"), |r| r.limiter.clone())
        .align(Align::Left),
    Column::csv("kind", |r| r.kind.clone())
        .and_shown(Fixed("kind"), |r| r.kind.clone())
        .html_only()
        .align(Align::Left),
    Column::csv("offered", |r| r.offered.to_string()),
    Column::csv("admitted", |r| r.admitted.to_string()),
    Column::shown(Fixed("admitted"), |r| {
        format!("{}/{}", r.admitted, r.offered)
    })
    .in_html(Fixed("admitted / offered"), |r| {
        format!("{} / {}", r.admitted, r.offered)
    }),
    Column::csv("rejected", |r| r.rejected.to_string()),
    Column::csv("rolling_ns", |r| r.rolling_ns.to_string()),
    Column::csv("worst_rolling", |r| r.worst_rolling.to_string()),
    Column::shown(From(worst_header), worst)
        .in_html(From(|f| format!("worst {}", f.rolling)), |r| {
            up_to_the_most(r.worst_rolling, r)
        }),
    Column::csv("offered_worst_rolling_low", |r| {
        whole_seconds(r, |w| w.offered_low)
    }),
    Column::csv("offered_worst_rolling_high", |r| {
        whole_seconds(r, |w| w.offered_high)
    }),
    Column::csv("admitted_worst_rolling_at_least", |r| {
        whole_seconds(r, |w| w.admitted_at_least)
    }),
    Column::csv("admitted_worst_rolling_at_most", |r| {
        whole_seconds(r, |w| w.admitted_at_most)
    }),
    Column::csv("turned_away_in_log", |r| {
        r.turned_away_in_log
            .map_or(String::new(), |n| n.to_string())
    }),
    Column::csv("worst_rolling_start_ns", |r| {
        r.worst_rolling_start_ns.to_string()
    }),
    Column::shown(From(from_header), from)
        .in_html(Fixed("from"), |r| seconds(r.worst_rolling_start_ns)),
    Column::csv("nominal", |r| r.nominal.to_string()),
    Column::csv("spike_ratio", |r| r.spike_ratio.to_string()),
    Column::shown(Fixed("×limit"), times_limit).in_html(Fixed("× limit"), times_limit),
    Column::csv("bound", |r| csv_bound(r.bound))
        .and_shown(Fixed("bound"), |r| bound(r.bound))
        .in_html(Fixed("bound (theory)"), |r| bound(r.bound)),
    Column::shown(From(backend_header), verdict)
        .in_html(Fixed("worst 1 s vs backend"), verdict)
        .align(Align::Verdict),
    Column::csv("capacity", |r| backend(r, |b| b.capacity.to_string())),
    Column::csv("over_capacity", |r| {
        backend(r, |b| b.over_capacity.to_string())
    }),
    // The backend's second of a whole-second log judged at another rolling
    // interval: what `check` and the verdict read (`over_capacity` is the
    // seeded placement's).
    Column::csv("offered_worst_1s_low", |r| {
        backend_seconds(r, |w| w.offered_low)
    })
    .when(When::BackendSeconds),
    Column::csv("offered_worst_1s_high", |r| {
        backend_seconds(r, |w| w.offered_high)
    })
    .when(When::BackendSeconds),
    Column::csv("admitted_worst_1s_at_least", |r| {
        backend_seconds(r, |w| w.admitted_at_least)
    })
    .when(When::BackendSeconds),
    Column::csv("admitted_worst_1s_at_most", |r| {
        backend_seconds(r, |w| w.admitted_at_most)
    })
    .when(When::BackendSeconds),
    Column::csv("seconds_over_capacity", |r| {
        backend(r, |b| b.seconds_over_capacity.to_string())
    })
    .and_shown(Fixed("time over capacity"), |r| {
        r.backend.as_ref().map_or("-".to_string(), |b| {
            format!("{:.2} s", b.seconds_over_capacity)
        })
    })
    .html_only(),
    Column::csv("rejected_with_spare_capacity", |r| {
        backend(r, |b| b.rejected_with_spare_capacity.to_string())
    }),
    Column::shown(Fixed("turned away"), turned_away).in_html(Fixed("turned away"), turned_away),
    Column::csv("peak_start_ns", |r| peak(r, |p| p.start_ns.to_string())),
    Column::csv("peak_offered", |r| peak(r, |p| p.offered.to_string())),
    Column::csv("peak_turned_away", |r| {
        peak(r, |p| p.turned_away.to_string())
    })
    .and_shown(Fixed("at peak"), |r| {
        r.peak
            .as_ref()
            .map_or("-".to_string(), |p| format!("{:.0}%", p.share() * 100.0))
    })
    .in_html(Fixed("turned away in the busiest second"), |r| {
        r.peak.as_ref().map_or("-".to_string(), |p| {
            format!(
                "{:.0}% of {} (from {})",
                p.share() * 100.0,
                p.offered,
                seconds(p.start_ns)
            )
        })
    }),
    Column::shown(Fixed("spare"), |r| {
        backend(r, |b| b.rejected_with_spare_capacity.to_string())
    })
    .in_html(Fixed("turned away with room"), |r| {
        backend(r, |b| b.rejected_with_spare_capacity.to_string())
    })
    .shown_when(When::Backend),
    Column::shown(Fixed("added delay p50 / p99"), |r| {
        r.delay.as_ref().map_or("-".to_string(), |d| {
            format!("{} / {}", Nanos(d.p50_ns), Nanos(d.p99_ns))
        })
    })
    .html_only()
    .shown_when(When::Delays),
    Column::shown(Fixed("under overload"), under_overload).html_only(),
    Column::csv("overload_seconds", |r| {
        r.overload
            .as_ref()
            .map_or(String::new(), |o| o.seconds.to_string())
    }),
    Column::csv("overload_admitted_per_s", |r| {
        r.overload
            .as_ref()
            .map_or(String::new(), |o| o.admitted_per_second.to_string())
    }),
    Column::shown(Fixed("drops"), dropped)
        .table_only()
        .shown_when(When::Queue),
    Column::shown(Fixed("dropped by the backend"), dropped).html_only(),
    Column::csv("queue", |r| queue(r, |q| q.size)),
    Column::csv("dropped", |r| queue(r, |q| q.dropped)),
    Column::csv("max_queue", |r| queue(r, |q| q.max_queue)),
    Column::csv("wait_p50_ns", |r| queue(r, |q| q.wait_p50_ns)),
    Column::csv("wait_p99_ns", |r| queue(r, |q| q.wait_p99_ns)),
    Column::csv("wait_max_ns", |r| queue(r, |q| q.wait_max_ns)),
    Column::csv("delayed", |r| delay(r, |d| d.delayed)),
    Column::csv("delay_p50_ns", |r| delay(r, |d| d.p50_ns)),
    Column::csv("delay_p99_ns", |r| delay(r, |d| d.p99_ns)),
    Column::csv("delay_max_ns", |r| delay(r, |d| d.max_ns)),
    Column::csv("requests", |r| closed(r, |c| c.requests.to_string())).when(When::Closed),
    Column::csv("retries", |r| closed(r, |c| c.retries.to_string())).when(When::Closed),
    Column::csv("amplification", |r| {
        closed(r, |c| c.amplification.to_string())
    })
    .when(When::Closed),
    Column::csv("goodput", |r| closed(r, |c| c.goodput.to_string())).when(When::Closed),
    Column::csv("gave_up", |r| closed(r, |c| c.gave_up.to_string())).when(When::Closed),
    Column::csv("budget_refused", |r| {
        closed(r, |c| c.budget_refused.to_string())
    })
    .when(When::Closed),
    Column::csv("unfinished", |r| closed(r, |c| c.unfinished.to_string())).when(When::Closed),
    Column::csv("to_admission_p50_ns", |r| {
        closed(r, |c| c.to_admission_p50_ns.to_string())
    })
    .when(When::Closed),
    Column::csv("to_admission_p99_ns", |r| {
        closed(r, |c| c.to_admission_p99_ns.to_string())
    })
    .when(When::Closed),
    Column::csv("to_admission_max_ns", |r| {
        closed(r, |c| c.to_admission_max_ns.to_string())
    })
    .when(When::Closed),
    Column::csv("worst_rolling_attempts", |r| {
        closed(r, |c| c.worst_rolling_attempts.to_string())
    })
    .when(When::Closed),
    Column::csv("worst_rolling_attempts_start_ns", |r| {
        closed(r, |c| c.worst_rolling_attempts_start_ns.to_string())
    })
    .when(When::Closed),
    Column::csv("attempts_after_reset_share", |r| {
        closed(r, |c| share(c.attempts_after_reset_share))
    })
    .when(When::Closed),
    Column::csv("retries_after_reset_share", |r| {
        closed(r, |c| share(c.retries_after_reset_share))
    })
    .when(When::Closed),
    Column::csv("lockouts", |r| {
        closed(r, |c| c.lockout.lockouts.to_string())
    })
    .when(When::Closed),
    Column::csv("lockout_keys", |r| {
        closed(r, |c| c.lockout.keys.to_string())
    })
    .when(When::Closed),
    Column::csv("longest_lockout_ns", |r| {
        closed(r, |c| c.lockout.longest_ns.to_string())
    })
    .when(When::Closed),
    Column::csv("longest_lockout_start_ns", |r| {
        closed(r, |c| c.lockout.longest_start_ns.to_string())
    })
    .when(When::Closed),
    Column::shown(Fixed("keys"), |r| state(r)[0].clone())
        .in_html(Fixed("keys"), |r| state(r)[0].clone())
        .when(When::PerKey),
    Column::shown(Fixed("state"), |r| state(r)[1].clone())
        .in_html(Fixed("state kept"), |r| state(r)[1].clone())
        .when(When::PerKey),
    Column::shown(Fixed("ops/req"), |r| state(r)[2].clone())
        .in_html(Fixed("store ops / request"), |r| state(r)[2].clone())
        .when(When::PerKey),
    Column::shown(Fixed("resets/s"), |r| state(r)[3].clone())
        .in_html(Fixed("counter resets / s"), |r| state(r)[3].clone())
        .when(When::PerKey),
    Column::shown(Fixed("busiest client"), busiest)
        .align(Align::Left)
        .when(When::PerKey),
];

/// The formats a run's figures go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `summary.csv`.
    Csv,
    /// The terminal table.
    Table,
    /// The report's results table.
    Html,
}

/// `runs` as a table of the columns `format` shows.
pub fn rows(runs: &[RunSummary], format: Format) -> Rows {
    let frame = Frame::of(runs);
    let shown: Vec<(Shown, Align)> = COLUMNS
        .iter()
        .filter_map(|column| {
            let shown = match format {
                Format::Csv => column.csv,
                Format::Table => column.table,
                Format::Html => column.html,
            }?;
            shown.when.holds(&frame).then_some((shown, column.align))
        })
        .collect();
    let mut rows = Rows::new(
        shown
            .iter()
            .map(|(shown, align)| (shown.header.text(&frame), *align)),
    );
    for run in runs {
        let cells = shown.iter().map(|(shown, _)| (shown.value)(run)).collect();
        rows.push(cells, run.exceeds_capacity());
    }
    rows
}

/// A whole-second log's figure, or empty.
fn whole_seconds(run: &RunSummary, figure: fn(&crate::summary::WholeSeconds) -> u64) -> String {
    run.whole_seconds
        .as_ref()
        .map_or(String::new(), |w| figure(w).to_string())
}

/// A whole-second log's figure over the backend's second, when the
/// rolling interval is another, or empty.
fn backend_seconds(run: &RunSummary, figure: fn(&crate::summary::WholeSeconds) -> u64) -> String {
    run.backend
        .as_ref()
        .and_then(|b| b.whole_seconds.as_ref())
        .map_or(String::new(), |w| figure(w).to_string())
}

fn worst_header(frame: &Frame) -> String {
    match frame.replicated {
        true => format!("max {}", frame.rolling),
        false => format!("worst {}", frame.rolling),
    }
}

fn from_header(frame: &Frame) -> String {
    match frame.replicated {
        true => "p50/p99".to_string(),
        false => "from".to_string(),
    }
}

fn backend_header(frame: &Frame) -> String {
    frame
        .capacity
        .map_or("backend".to_string(), |c| format!("vs {c}/s"))
}
