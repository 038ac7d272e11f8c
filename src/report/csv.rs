//! `summary.csv` (one row per run) and `timeline.csv` (one row per run and bucket).

use super::columns::{self, Format};
use crate::results::RunResult;
use crate::summary::RunSummary;
use crate::time::Nanos;

/// `summary.csv`: the figures [`columns::COLUMNS`] puts in it, then one
/// `worst_<L>` column per profile interval.
pub fn render_summary(runs: &[RunSummary]) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let table = columns::rows(runs, Format::Csv);
    let profile = runs.first().map_or(&[][..], |run| &run.profile[..]);
    let header = table.header.iter().cloned().chain(
        profile
            .iter()
            .map(|p| format!("worst_{}", Nanos(p.interval_ns))),
    );
    writer.write_record(header).expect("writing to memory");
    for (row, run) in table.rows.iter().zip(runs) {
        let profile = run.profile.iter().map(|p| p.worst.to_string());
        let record = row.cells.iter().cloned().chain(profile);
        writer.write_record(record).expect("writing to memory");
    }
    into_string(writer)
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
