//! `burstsim size` output: the recommendation table, and sizing.csv.

use super::rows::{Align, Rows};
use crate::size::{Safe, Setting, Sizing, SizingReport};

/// The recommendation table, with a legend under it, then the settings
/// sized together as they go in the configuration.
pub fn render_sizing_table(report: &SizingReport) -> String {
    format!(
        "{}\n{}{}",
        sizing_rows(report).terminal(),
        legend(report),
        together_text(report)
    )
}

/// Each pair sized together, for the terminal: what it does, then its
/// configuration lines indented, ready to paste.
pub fn together_text(report: &SizingReport) -> String {
    let mut text = String::new();
    for (sizing, choice, setting) in together(report) {
        let per = sizing
            .together
            .as_ref()
            .and_then(|t| t.per.as_deref())
            .map_or(String::new(), |per| format!(" ({per})"));
        text += &format!(
            "  {}, {choice}{per}: {}\n",
            sizing.limiter,
            effect(setting, report.capacity)
        );
        for line in &setting.lines {
            text += &format!("      {line}\n");
        }
    }
    for (sizing, per) in none_safe(report) {
        text += &format!(
            "  {}{per}: no setting tried keeps the worst second within {}/s; it cannot hold the backend alone\n",
            sizing.limiter, report.capacity
        );
    }
    if text.is_empty() {
        return text;
    }
    format!(
        "\nSet together, the cheapest found that keeps the worst second within {}/s:\n{text}",
        report.capacity
    )
}

/// The limiters with a pair to size for which no pair tried is safe.
fn none_safe(report: &SizingReport) -> impl Iterator<Item = (&Sizing, String)> {
    report.limiters.iter().filter_map(|sizing| {
        let together = sizing.together.as_ref()?;
        if together.on_workloads.is_some() || together.any_traffic.is_some() {
            return None;
        }
        let per = together
            .per
            .as_deref()
            .map_or(String::new(), |per| format!(" ({per})"));
        Some((sizing, per))
    })
}

/// The same, a row per setting, for the report.
pub fn together_rows(report: &SizingReport) -> Option<Rows> {
    let mut rows = Rows::new(
        [
            ("limiter", Align::Left),
            ("within capacity", Align::Left),
            ("setting", Align::Left),
            ("worst 1 s", Align::Right),
            ("bound 1 s", Align::Right),
            ("turns away", Align::Left),
        ]
        .map(|(h, a)| (h.to_string(), a)),
    );
    let mut any = false;
    for (sizing, choice, setting) in together(report) {
        any = true;
        let per = sizing
            .together
            .as_ref()
            .and_then(|t| t.per.as_deref())
            .map_or(String::new(), |per| format!(" ({per})"));
        rows.push(
            vec![
                sizing.limiter.clone(),
                choice.to_string(),
                format!("{}{per}", setting.lines.join(" ")),
                setting.worst_1s.to_string(),
                super::bound(setting.bound_1s),
                turned_away(setting),
            ],
            false,
        );
    }
    for (sizing, per) in none_safe(report) {
        any = true;
        rows.push(
            vec![
                sizing.limiter.clone(),
                "none".to_string(),
                format!("no setting tried is within capacity{per}"),
                "-".to_string(),
                "-".to_string(),
                "-".to_string(),
            ],
            false,
        );
    }
    any.then_some(rows)
}

/// Every setting sized together: the one for the workloads, and the one for
/// any traffic unless the first is safe for any traffic already.
fn together(report: &SizingReport) -> Vec<(&Sizing, &'static str, &Setting)> {
    let mut all = Vec::new();
    for sizing in &report.limiters {
        let Some(together) = &sizing.together else {
            continue;
        };
        let holds = |s: &Setting| s.bound_1s <= report.capacity;
        match (&together.on_workloads, &together.any_traffic) {
            (Some(w), _) if holds(w) => all.push((sizing, "for any traffic", w)),
            (w, a) => {
                all.extend(w.iter().map(|w| (sizing, "on these workloads", w)));
                all.extend(a.iter().map(|a| (sizing, "for any traffic", a)));
            }
        }
    }
    all
}

/// "worst second 119, bound 120 (safe for any traffic); turns away 4.1% of sale-opening"
fn effect(setting: &Setting, capacity: u64) -> String {
    let safe = if setting.bound_1s <= capacity {
        " (safe for any traffic)"
    } else {
        ""
    };
    format!(
        "worst second {}, bound {}{safe}; turns away {}",
        setting.worst_1s,
        super::bound(setting.bound_1s),
        turned_away(setting)
    )
}

/// The largest share of a workload's requests turned away, and whose.
fn turned_away(setting: &Setting) -> String {
    setting
        .costs
        .iter()
        .filter(|c| !c.adversary)
        .max_by(|a, b| a.rejected_share.total_cmp(&b.rejected_share))
        .map_or(
            "nothing measured (adversary workloads only)".to_string(),
            |c| {
                format!(
                    "{:.1}% of {}; {} requests in all",
                    c.rejected_share * 100.0,
                    c.workload,
                    setting.rejected()
                )
            },
        )
}

/// The recommendation table as rows: one per limiter.
pub fn sizing_rows(report: &SizingReport) -> Rows {
    let header = [
        "limiter",
        "parameter",
        "now",
        "bound now",
        "any traffic",
        "on workloads",
        "rejected",
        "spare",
    ];
    let mut rows = Rows::new(header.into_iter().enumerate().map(|(i, h)| {
        let align = if i >= 2 { Align::Right } else { Align::Left };
        (h.to_string(), align)
    }));
    for sizing in &report.limiters {
        let mark = if sizing.current_bound_1s > report.capacity {
            "✗"
        } else {
            "✓"
        };
        let (rejected, spare) = cost(sizing, report.replications);
        let cells = vec![
            sizing.limiter.clone(),
            sizing.parameter.clone(),
            sizing.current.to_string(),
            format!("{} {mark}", super::bound(sizing.current_bound_1s)),
            safe_cell(&sizing.safe_any_traffic),
            safe_cell(&sizing.safe_on_workloads),
            rejected,
            spare,
        ];
        rows.push(cells, false);
    }
    rows
}

/// What the recommendation table's columns mean.
pub fn legend(report: &SizingReport) -> String {
    format!(
        "Sized against {capacity} requests per second; simulated over {replications} replication(s).\n\
         bound now     the most the current setting can admit in 1 s, for any traffic (✗: above {capacity})\n\
         any traffic   the largest setting whose bound over 1 s is at most {capacity}, and that bound\n\
         on workloads  the largest setting whose simulated worst second stays at most {capacity}, and that worst\n\
         rejected      at the any-traffic setting: the largest share of a workload's requests rejected (never admitted, for clients that retry), over all replications\n\
         spare         at the any-traffic setting: requests rejected while the backend had room for them, per replication (mean), all workloads together\n\
         Adversary workloads are patterns, not traffic: rejected and spare leave them out.\n",
        capacity = report.capacity,
        replications = report.replications
    )
}

fn safe_cell(safe: &Safe) -> String {
    match safe {
        Safe::Any => "any".to_string(),
        Safe::None => "none".to_string(),
        Safe::Value {
            value, worst_1s, ..
        } => format!("{value} ({worst_1s})"),
    }
}

/// The largest rejected share (and its workload) and the spare-capacity rejections.
fn cost(sizing: &Sizing, replications: u64) -> (String, String) {
    let Safe::Value { costs, .. } = &sizing.safe_any_traffic else {
        return ("-".to_string(), "-".to_string());
    };
    let traffic = || costs.iter().filter(|c| !c.adversary);
    let worst = traffic().max_by(|a, b| a.rejected_share.total_cmp(&b.rejected_share));
    if worst.is_none() {
        return ("-".to_string(), "-".to_string());
    }
    // Both per replication: a share is one already; the count is averaged.
    let spare: u64 = traffic().map(|c| c.rejected_with_spare_capacity).sum();
    let per_replication = spare as f64 / replications.max(1) as f64;
    (
        worst.map_or("-".to_string(), |c| {
            format!("{:.1}% {}", c.rejected_share * 100.0, c.workload)
        }),
        if per_replication.fract() == 0.0 {
            format!("{per_replication:.0}")
        } else {
            format!("{per_replication:.1}")
        },
    )
}

/// `sizing.csv`: one row per limiter and choice (`any-traffic`, `workloads`) and workload.
pub fn render_sizing_csv(report: &SizingReport) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let header = [
        "limiter",
        "kind",
        "parameter",
        "current",
        "current_bound_1s",
        "choice",
        "safe",
        "value",
        "worst_1s",
        "workload",
        "offered",
        "rejected",
        "rejected_share",
        "rejected_with_spare_capacity",
        "companion",
        "companion_value",
    ];
    writer.write_record(header).expect("writing to memory");
    for sizing in &report.limiters {
        // (choice, rows after the choice), the pair's companion last.
        let mut choices: Vec<(&str, Vec<Vec<String>>)> = Vec::new();
        for (choice, safe) in [
            ("any-traffic", &sizing.safe_any_traffic),
            ("workloads", &sizing.safe_on_workloads),
        ] {
            let rows = match safe {
                Safe::Any => vec![unsized_row("any")],
                Safe::None => vec![unsized_row("none")],
                Safe::Value {
                    value,
                    worst_1s,
                    costs,
                    ..
                } => costs
                    .iter()
                    .map(|c| cost_row(*value, *worst_1s, c, None))
                    .collect(),
            };
            choices.push((choice, rows));
        }
        if let Some(together) = &sizing.together {
            for (choice, setting) in [
                ("together-workloads", &together.on_workloads),
                ("together-any-traffic", &together.any_traffic),
            ] {
                let rows = match setting.as_ref().map(|s| (s, &s.values[..])) {
                    Some((setting, [value, companion])) => setting
                        .costs
                        .iter()
                        .map(|c| cost_row(value.value, setting.worst_1s, c, Some(companion)))
                        .collect(),
                    _ => vec![unsized_row("none")],
                };
                choices.push((choice, rows));
            }
        }
        for (choice, rows) in choices {
            let head = [
                sizing.limiter.clone(),
                sizing.kind.clone(),
                sizing.parameter.clone(),
                sizing.current.to_string(),
                super::csv_bound(sizing.current_bound_1s),
                choice.to_string(),
            ];
            for row in rows {
                writer
                    .write_record(head.iter().chain(&row))
                    .expect("writing to memory");
            }
        }
    }
    String::from_utf8(writer.into_inner().expect("flushing to memory"))
        .expect("every field is UTF-8")
}

/// A choice with no value: its name, then empty value, cost and companion columns.
fn unsized_row(safe: &str) -> Vec<String> {
    std::iter::once(safe.to_string())
        .chain(std::iter::repeat_n(String::new(), 9))
        .collect()
}

/// A setting's value, worst second and cost on one workload, and the
/// companion it was sized with, if any.
fn cost_row(
    value: u64,
    worst_1s: u64,
    c: &crate::size::Cost,
    companion: Option<&crate::size::Value>,
) -> Vec<String> {
    vec![
        "value".into(),
        value.to_string(),
        worst_1s.to_string(),
        c.workload.clone(),
        c.offered.to_string(),
        c.rejected.to_string(),
        c.rejected_share.to_string(),
        c.rejected_with_spare_capacity.to_string(),
        companion.map_or(String::new(), |v| v.name.clone()),
        companion.map_or(String::new(), |v| v.value.to_string()),
    ]
}
