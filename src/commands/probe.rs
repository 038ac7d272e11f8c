//! `burstsim probe`: send a schedule to a real endpoint and compare; and
//! `burstsim export`: write the schedule for k6 and vegeta.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::{decided_results, load, results_folder, warn, write_decided};
use crate::cli::{ExportArgs, ProbeArgs, ScheduleArgs};
use crate::output::Staging;
use crate::probe::{self, Agreement, Identity, Record, Schedule};
use crate::report::table;
use crate::scenario::{NamedLimiter, Scenario};
use crate::time::Nanos;

/// A scenario's schedule, as `probe` and `export` read it from their flags.
struct Planned {
    scenario: Scenario,
    workload: usize,
    limiter: NamedLimiter,
    identity: Identity,
    schedule: Schedule,
}

fn plan(args: &ScheduleArgs) -> Result<Planned> {
    let identity = match &args.key_as {
        Some(text) => Identity::parse(text)?,
        None => Identity::None,
    };
    if args.max_requests > probe::MAX_PROBE_REQUESTS {
        bail!(
            "--max-requests {}: at most {}",
            args.max_requests,
            probe::MAX_PROBE_REQUESTS
        );
    }
    let mut scenario = load(&args.scenario)?;
    let (limiter, note) = probe::limiter(&scenario, args.limiter.as_deref())?;
    let limiter = limiter.clone();
    if let Some(note) = note {
        eprintln!("note: {note}");
    }
    let workload = match &args.workload {
        Some(name) => super::named_workload(&scenario, name)?,
        // The scenario's adversary, or one made for the limiter.
        None => match scenario
            .workloads
            .iter()
            .position(|w| w.adversary().is_some())
        {
            Some(index) => index,
            None => {
                scenario
                    .workloads
                    .push(probe::adversary(&scenario, &limiter, args.max_rate));
                scenario.workloads.len() - 1
            }
        },
    };
    let caps = probe::Caps {
        requests: args.max_requests,
        rate: args.max_rate,
        wall: args.max_wall_time,
    };
    let schedule = probe::schedule(&scenario, workload, &limiter, &identity, &caps)?;
    Ok(Planned {
        scenario,
        workload,
        limiter,
        identity,
        schedule,
    })
}

/// `probe.json`: how the sending went and how the answers compare.
#[derive(Serialize)]
struct ProbeFile<'a> {
    target: String,
    limiter: &'a str,
    workload: &'a str,
    traffic: &'a str,
    /// The schedule's zero, in nanoseconds since the Unix epoch.
    zero_unix_ns: String,
    scheduled: usize,
    sent: usize,
    answered: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped: Option<&'a str>,
    /// With retrying clients: what became of the rejections.
    #[serde(skip_serializing_if = "Option::is_none")]
    retries: Option<crate::probe::RetryFigures>,
    statuses: BTreeMap<u16, u64>,
    errors: BTreeMap<String, u64>,
    /// How late sends began against their schedule (ns).
    lateness_ns: Spread,
    /// From the send to the answer's head (ns).
    latency_ns: Spread,
    rolling_interval_ns: u64,
    worst_rolling_target: u64,
    worst_rolling_model: u64,
    agreement: &'a Agreement,
}

#[derive(Serialize)]
struct Spread {
    p50: u64,
    p99: u64,
    max: u64,
}

fn spread(mut values: Vec<u64>) -> Spread {
    values.sort_unstable();
    let at = |q: usize| {
        values
            .get((values.len().saturating_sub(1) * q).div_ceil(100))
            .copied()
            .unwrap_or(0)
    };
    Spread {
        p50: at(50),
        p99: at(99),
        max: values.last().copied().unwrap_or(0),
    }
}

/// `burstsim probe`: exit 1 when some disagreement is unexplained.
pub fn probe(args: &ProbeArgs) -> Result<bool> {
    // The target first: a remote one is refused before anything else.
    let target = probe::target(&args.target, &args.allow_remote)?;
    let planned = plan(&args.schedule)?;
    if planned.identity == Identity::SourceAddress && !target.loopback {
        bail!(
            "--key-as source-address: source addresses of 127.0.0.0/8 reach loopback targets only, and {} is not one",
            target.host
        );
    }
    let Planned {
        scenario,
        workload,
        limiter,
        identity,
        schedule,
    } = &planned;
    let span = schedule.requests.last().map_or(Nanos::ZERO, |r| r.due);
    let retrying = scenario.workloads[*workload].retry.is_some();
    eprintln!(
        "probe: {} {} to {} over {span}, at most {} in any 1 s, from {} client identit{}; {}",
        schedule.requests.len(),
        if retrying {
            "first attempts (and the retries their clients make, within --max-requests and --max-rate)"
        } else {
            "requests"
        },
        target.url,
        schedule.peak_per_sec,
        schedule.identities,
        if schedule.identities == 1 { "y" } else { "ies" },
        schedule.description
    );
    let connection = probe::Connection {
        target: &target,
        identity,
        http2: args.http2,
        timeout: Duration::from_nanos(args.timeout.get()),
        max_wall: Duration::from_nanos(args.schedule.max_wall_time.get()),
        align: Duration::from_nanos(args.align.get()),
        retry: scenario.workloads[*workload].retry.map(|retry| {
            let work = &scenario.workloads[*workload];
            let rng =
                crate::random::stream(scenario.seed ^ crate::sim::RETRY_STREAM, &work.name, 0, 0);
            (retry, rng, scenario.duration)
        }),
        max_requests: args.schedule.max_requests,
        max_rate: args.schedule.max_rate,
    };
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(schedule.requests.len() as u64);
        if let Ok(style) =
            ProgressStyle::with_template("{elapsed:>4} [{bar:40}] {pos}/{len} answered")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let sent = probe::send(schedule, &connection, &|| bar.inc(1));
    bar.finish_and_clear();
    let sent = sent?;
    let (agreement, model) =
        probe::compare(&sent.records, &limiter.limiter, args.clock_granularity);
    let mut answered: Vec<&Record> = sent.records.iter().filter(|r| r.status.is_some()).collect();
    answered.sort_by_key(|r| (r.sent, r.index));
    // The target's admissions counted when their answers arrived: the
    // backend had them by then (and a delayed one no earlier than its release).
    let mut decided: Vec<(Nanos, bool)> = answered
        .iter()
        .map(|r| (Nanos(r.answered), r.admitted() == Some(true)))
        .collect();
    decided.sort_by_key(|&(at, _)| at);
    let rolling = scenario.metrics.rolling;
    let mut statuses = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for r in &sent.records {
        match (r.status, &r.error) {
            (Some(status), _) => *statuses.entry(status).or_insert(0) += 1,
            (None, Some(error)) => *errors.entry(error.clone()).or_insert(0) += 1,
            (None, None) => *errors.entry("dropped by Ctrl-C".to_string()).or_insert(0) += 1,
        }
    }
    let file = ProbeFile {
        target: target.url.to_string(),
        limiter: &limiter.name,
        workload: &scenario.workloads[*workload].name,
        traffic: &schedule.description,
        zero_unix_ns: sent.zero_unix_ns.to_string(),
        scheduled: schedule.requests.len(),
        sent: sent.records.len(),
        answered: answered.len(),
        stopped: sent.stopped.as_deref(),
        retries: sent.retries,
        statuses,
        errors,
        lateness_ns: spread(
            sent.records
                .iter()
                .map(|r| r.sent - r.due.min(r.sent))
                .collect(),
        ),
        latency_ns: spread(
            answered
                .iter()
                .map(|r| r.answered.saturating_sub(r.sent))
                .collect(),
        ),
        rolling_interval_ns: rolling.get(),
        worst_rolling_target: probe::worst(&decided, rolling),
        worst_rolling_model: probe::worst(&model, rolling),
        agreement: &agreement,
    };
    let out = results_folder(args.out.as_deref(), &format!("{}-probe", scenario.name));
    // A probe's answers cannot be had again by running it again: written
    // even after Ctrl-C (which stopped the sending).
    let staging = Staging::new(&out)?.despite_interrupt();
    warn(staging.notes());
    staging.write("probe.json", &(serde_json::to_string_pretty(&file)? + "\n"))?;
    staging.write("requests.csv", &requests_csv(&sent.records)?)?;
    let rows = [
        (
            limiter.name.as_str(),
            format!("{}-target", limiter.name),
            format!("as {} answered", target.url),
            decided.as_slice(),
        ),
        (
            limiter.name.as_str(),
            format!("{}-model", limiter.name),
            "(the model, on the actual send times)".to_string(),
            model.as_slice(),
        ),
    ];
    write_decided(
        &staging,
        &decided_results(scenario, *workload, "probe", &rows)?,
    )?;
    staging.commit()?;
    println!("{}", summary_table(&file, &agreement));
    if let Some(backend) = scenario.backend {
        let capacity = backend.capacity_per_sec.get();
        let worst = file.worst_rolling_target;
        println!(
            "the target let {worst} through in its worst {}: {} the backend's {capacity}/s{}",
            Nanos(file.rolling_interval_ns),
            crate::report::ratio(worst as f64 / capacity as f64),
            if worst > capacity { " — OVER" } else { "" }
        );
    }
    println!(
        "sends began late by p50 {} / p99 {} / max {}; answers took p50 {} / p99 {}; results in {}",
        Nanos(file.lateness_ns.p50),
        Nanos(file.lateness_ns.p99),
        Nanos(file.lateness_ns.max),
        Nanos(file.latency_ns.p50),
        Nanos(file.latency_ns.p99),
        out.display()
    );
    if let Some(why) = &sent.stopped {
        if crate::interrupt::requested() {
            return Ok(true);
        }
        bail!(
            "probe stopped early: {why}; what was measured is in {}",
            out.display()
        );
    }
    if answered.is_empty() && !sent.records.is_empty() {
        let (error, count) = file
            .errors
            .iter()
            .max_by_key(|&(_, count)| *count)
            .map_or(("no answer", 0), |(e, c)| (e.as_str(), *c));
        bail!(
            "none of the {} requests sent was answered ({count} of them: {error}){}; what was measured is in {}",
            sent.records.len(),
            if args.http2 {
                "; --http2 speaks HTTP/2 with prior knowledge, which an HTTP/1.1-only listener refuses"
            } else {
                ""
            },
            out.display()
        );
    }
    if agreement.unexplained > 0 {
        eprintln!(
            "probe: {} disagreement(s) with the model are unexplained (listed in probe.json): the model is not the target's twin there",
            agreement.unexplained
        );
    }
    Ok(agreement.unexplained == 0)
}

fn summary_table(file: &ProbeFile, agreement: &Agreement) -> String {
    let mut t = comfy_table::Table::new();
    t.load_style(table::STYLE).set_header(vec![
        "",
        "sent",
        "answered",
        "admitted",
        &format!("worst {}", Nanos(file.rolling_interval_ns)),
        "differ",
        "timing",
        "reordered",
        "unexplained",
    ]);
    t.add_row(vec![
        "target".to_string(),
        file.sent.to_string(),
        file.answered.to_string(),
        agreement.admitted_target.to_string(),
        file.worst_rolling_target.to_string(),
        agreement.disagreements.to_string(),
        agreement.timing.to_string(),
        agreement.reordered.to_string(),
        agreement.unexplained.to_string(),
    ]);
    t.add_row(vec![
        format!("model ({})", file.limiter),
        String::new(),
        agreement.compared.to_string(),
        agreement.admitted_model.to_string(),
        file.worst_rolling_model.to_string(),
    ]);
    t.trim_fmt()
}

/// Every request sent: schedule, send, answer, status, hint headers.
fn requests_csv(records: &[Record]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "index",
        "attempt",
        "due_ns",
        "sent_ns",
        "answered_ns",
        "identity",
        "status",
        "error",
        "hints",
    ])?;
    for r in records {
        let hints: Vec<String> = r.hints.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        w.write_record([
            r.index.to_string(),
            r.attempt.to_string(),
            r.due.to_string(),
            r.sent.to_string(),
            r.answered.to_string(),
            r.who.to_string(),
            r.status.map(|s| s.to_string()).unwrap_or_default(),
            r.error.clone().unwrap_or_default(),
            hints.join("; "),
        ])?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// `burstsim export`.
pub fn export(args: &ExportArgs) -> Result<()> {
    let planned = plan(&args.schedule)?;
    let (k6, vegeta) = match (args.k6, args.vegeta) {
        (false, false) => (true, true),
        both => both,
    };
    let about = format!(
        "scenario {:?}, {}",
        planned.scenario.name, planned.schedule.description
    );
    let out = results_folder(
        args.out.as_deref(),
        &format!("{}-export", planned.scenario.name),
    );
    let files = [
        (k6, "probe.k6.js"),
        (vegeta, "vegeta-targets.jsonl"),
        (vegeta, "vegeta-pacing.txt"),
    ];
    let mut contents = Vec::new();
    for (wanted, name) in files {
        if !wanted {
            continue;
        }
        let text = match name {
            "probe.k6.js" => {
                probe::export::k6(&planned.schedule, &args.target, &planned.identity, &about)?
            }
            "vegeta-targets.jsonl" => {
                probe::export::vegeta_targets(&planned.schedule, &args.target, &planned.identity)?
            }
            _ => probe::export::vegeta_pacing(&planned.schedule, &args.target, &about)?,
        };
        contents.push((name, text));
    }
    let staging = Staging::new(&out)?;
    warn(staging.notes());
    for (name, text) in &contents {
        staging.write(name, text)?;
    }
    staging.write("offsets.csv", &probe::export::offsets(&planned.schedule))?;
    staging.commit()?;
    println!(
        "{} requests over {}, at most {} in any 1 s; {} written in {}",
        planned.schedule.requests.len(),
        planned
            .schedule
            .requests
            .last()
            .map_or(Nanos::ZERO, |r| r.due),
        planned.schedule.peak_per_sec,
        contents
            .iter()
            .map(|(name, _)| *name)
            .chain(["offsets.csv"])
            .collect::<Vec<_>>()
            .join(", "),
        out.display()
    );
    Ok(())
}
