//! `summary.csv` (one row per run) and `timeline.csv` (one row per run and bucket).

use crate::results::RunResult;
use crate::summary::RunSummary;
use crate::time::Nanos;

/// `summary.csv`: the scalar figures of each run, then one `worst_<L>` column
/// per profile interval.
pub fn render_summary(runs: &[RunSummary]) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let profile: Vec<String> = runs
        .first()
        .map(|run| {
            run.profile
                .iter()
                .map(|p| format!("worst_{}", Nanos(p.interval_ns)))
                .collect()
        })
        .unwrap_or_default();
    let header = [
        "workload",
        "limiter",
        "kind",
        "offered",
        "admitted",
        "rejected",
        "rolling_ns",
        "worst_rolling",
        "worst_rolling_start_ns",
        "nominal",
        "spike_ratio",
        "bound",
        "capacity",
        "over_capacity",
        "seconds_over_capacity",
        "rejected_with_spare_capacity",
        "queue",
        "dropped",
        "max_queue",
        "wait_p50_ns",
        "wait_p99_ns",
        "wait_max_ns",
        "delayed",
        "delay_p50_ns",
        "delay_p99_ns",
        "delay_max_ns",
    ];
    // Columns of clients that retry, when a workload's do.
    let closed = runs.iter().any(|run| run.closed_loop.is_some());
    let closed_header: &[&str] = if closed {
        &[
            "requests",
            "retries",
            "amplification",
            "goodput",
            "gave_up",
            "budget_refused",
            "unfinished",
            "to_admission_p50_ns",
            "to_admission_p99_ns",
            "to_admission_max_ns",
            "worst_rolling_attempts",
            "worst_rolling_attempts_start_ns",
            "attempts_after_reset_share",
            "retries_after_reset_share",
            "lockouts",
            "lockout_keys",
            "longest_lockout_ns",
            "longest_lockout_start_ns",
        ]
    } else {
        &[]
    };
    let header = header
        .iter()
        .chain(closed_header)
        .map(|h| h.to_string())
        .chain(profile);
    writer.write_record(header).expect("writing to memory");
    for run in runs {
        let backend = run.backend.as_ref();
        let optional = |value: Option<String>| value.unwrap_or_default();
        let mut row = vec![
            run.workload.clone(),
            run.limiter.clone(),
            run.kind.clone(),
            run.offered.to_string(),
            run.admitted.to_string(),
            run.rejected.to_string(),
            run.rolling_ns.to_string(),
            run.worst_rolling.to_string(),
            run.worst_rolling_start_ns.to_string(),
            run.nominal.to_string(),
            run.spike_ratio.to_string(),
            run.bound.to_string(),
            optional(backend.map(|b| b.capacity.to_string())),
            optional(backend.map(|b| b.over_capacity.to_string())),
            optional(backend.map(|b| b.seconds_over_capacity.to_string())),
            optional(backend.map(|b| b.rejected_with_spare_capacity.to_string())),
        ];
        let queue = backend.and_then(|b| b.queue.as_ref());
        let queue_fields = [
            queue.map(|q| q.size),
            queue.map(|q| q.dropped),
            queue.map(|q| q.max_queue),
            queue.map(|q| q.wait_p50_ns),
            queue.map(|q| q.wait_p99_ns),
            queue.map(|q| q.wait_max_ns),
        ];
        row.extend(queue_fields.map(|field| optional(field.map(|v| v.to_string()))));
        let delay = run.delay.as_ref();
        let delay_fields = [
            delay.map(|d| d.delayed),
            delay.map(|d| d.p50_ns),
            delay.map(|d| d.p99_ns),
            delay.map(|d| d.max_ns),
        ];
        row.extend(delay_fields.map(|field| optional(field.map(|v| v.to_string()))));
        if closed {
            row.extend(closed_fields(run));
        }
        row.extend(run.profile.iter().map(|p| p.worst.to_string()));
        writer.write_record(&row).expect("writing to memory");
    }
    into_string(writer)
}

/// The closed-loop figures of `run`, empty for an open loop.
fn closed_fields(run: &RunSummary) -> Vec<String> {
    let Some(c) = &run.closed_loop else {
        return vec![String::new(); 18];
    };
    let share = |s: Option<f64>| s.map_or_else(String::new, |s| s.to_string());
    vec![
        c.requests.to_string(),
        c.retries.to_string(),
        c.amplification.to_string(),
        c.goodput.to_string(),
        c.gave_up.to_string(),
        c.budget_refused.to_string(),
        c.unfinished.to_string(),
        c.to_admission_p50_ns.to_string(),
        c.to_admission_p99_ns.to_string(),
        c.to_admission_max_ns.to_string(),
        c.worst_rolling_attempts.to_string(),
        c.worst_rolling_attempts_start_ns.to_string(),
        share(c.attempts_after_reset_share),
        share(c.retries_after_reset_share),
        c.lockout.lockouts.to_string(),
        c.lockout.keys.to_string(),
        c.lockout.longest_ns.to_string(),
        c.lockout.longest_start_ns.to_string(),
    ]
}

/// `timeline.csv`: admitted and rejected per bucket, every run one after
/// another; with clients that retry, first attempts and retries too.
pub fn write_timeline<'a>(
    runs: impl IntoIterator<Item = &'a RunResult> + Clone,
    out: impl std::io::Write,
) -> std::io::Result<()> {
    // Streamed: a run of ten million buckets would otherwise be a gigabyte
    // of text in memory before a byte reached the disk.
    let mut writer = csv::Writer::from_writer(out);
    let attempts = runs
        .clone()
        .into_iter()
        .any(|run| run.timeline.has_attempts());
    let mut header = vec![
        "workload",
        "limiter",
        "bucket_start_ns",
        "admitted",
        "rejected",
    ];
    if attempts {
        header.extend(["first_attempts", "retries"]);
    }
    writer.write_record(&header)?;
    for run in runs {
        let timeline = &run.timeline;
        for (index, (admitted, rejected)) in
            timeline.admitted.iter().zip(&timeline.rejected).enumerate()
        {
            let start = timeline.bucket_start(index).get().to_string();
            let row = [
                &run.summary.workload,
                &run.summary.limiter,
                &start,
                &admitted.to_string(),
                &rejected.to_string(),
            ];
            if attempts {
                let at = |counts: &[u32]| counts.get(index).copied().unwrap_or(0).to_string();
                let (first, retries) = (at(&timeline.first_attempts), at(&timeline.retries));
                writer.write_record(row.into_iter().chain([&first, &retries]))?;
            } else {
                writer.write_record(row)?;
            }
        }
    }
    writer.flush()
}

fn into_string(writer: csv::Writer<Vec<u8>>) -> String {
    let bytes = writer.into_inner().expect("flushing to memory");
    String::from_utf8(bytes).expect("every field is UTF-8")
}
