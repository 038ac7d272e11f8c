//! One figure of a run in words, as the columns show it: the worst count,
//! its ratio to the limit, what was turned away, the verdict.

use super::{ratio, seconds};
use crate::summary::RunSummary;

/// The worst interval's count: with replications, the maximum over them.
pub(super) fn worst(run: &RunSummary) -> String {
    let worst = match &run.replications {
        Some(r) => r.worst_rolling.max as u64,
        None => run.worst_rolling,
    };
    up_to_the_most(worst, run)
}

/// `worst`, or for a whole-second log `worst–most`: the seeded placement's
/// figure up to the most any placement within the seconds could give.
pub(super) fn up_to_the_most(worst: u64, run: &RunSummary) -> String {
    match &run.whole_seconds {
        Some(seconds) if seconds.admitted_at_most > worst => {
            format!("{worst}–{}", seconds.admitted_at_most)
        }
        _ => worst.to_string(),
    }
}

/// Where the worst interval starts; with replications, the worst count's
/// median and 99th percentile instead.
pub(super) fn from(run: &RunSummary) -> String {
    match &run.replications {
        Some(r) => format!("{:.0}/{:.0}", r.worst_rolling.p50, r.worst_rolling.p99),
        None => seconds(run.worst_rolling_start_ns),
    }
}

/// The worst interval against the limit's nominal count; for a limit per
/// key, the worst key's against its own quota (`2.20×/key`): the sum of
/// every key's quota says nothing of a spike.
pub(super) fn times_limit(run: &RunSummary) -> String {
    if let Some(per_key) = run.keys.as_ref().and_then(|k| k.spike_ratio) {
        return format!("{}/key", ratio(per_key.max));
    }
    match &run.replications {
        Some(r) => ratio(r.worst_rolling.max / run.nominal),
        None => ratio(run.spike_ratio),
    }
}

/// A figure of the run's peak second, empty when no request came.
pub(super) fn peak(
    run: &RunSummary,
    figure: impl Fn(&crate::metrics::overload::Peak) -> String,
) -> String {
    run.peak.as_ref().map_or(String::new(), figure)
}

/// The share of the offered requests rejected: `38.0%`.
pub(super) fn turned_away(run: &RunSummary) -> String {
    if run.offered == 0 {
        return "-".to_string();
    }
    format!("{:.1}%", run.rejected as f64 * 100.0 / run.offered as f64)
}

use crate::check::UNDER_LIMIT;

/// `45/s, 45% of its limit, over 52 s` when a limiter admits well below its
/// limit while demand exceeds it; `ok` when it admits near it; `-` when
/// demand never exceeded it.
pub fn under_overload(run: &RunSummary) -> String {
    match &run.overload {
        None => "-".to_string(),
        Some(o) if o.limit_share < UNDER_LIMIT => format!(
            "{:.0}/s, {:.0}% of its limit, over {} s",
            o.admitted_per_second,
            o.limit_share * 100.0,
            o.seconds
        ),
        Some(o) => format!("{:.0}% of its limit", o.limit_share * 100.0),
    }
}

/// What the backend dropped (at most, over replications), or `-`.
pub(super) fn dropped(run: &RunSummary) -> String {
    run.dropped_max().map_or("-".to_string(), |d| d.to_string())
}

/// A backend figure, empty without a backend.
pub(super) fn backend(
    run: &RunSummary,
    value: fn(&crate::summary::BackendSummary) -> String,
) -> String {
    run.backend.as_ref().map(value).unwrap_or_default()
}

/// A queue figure, empty without a queue.
pub(super) fn queue(run: &RunSummary, value: fn(&crate::summary::QueueSummary) -> u64) -> String {
    run.backend
        .as_ref()
        .and_then(|b| b.queue.as_ref())
        .map(|q| value(q).to_string())
        .unwrap_or_default()
}

/// A delay figure, empty for a limiter that never delays.
pub(super) fn delay(run: &RunSummary, value: fn(&crate::summary::DelaySummary) -> u64) -> String {
    run.delay
        .as_ref()
        .map(|d| value(d).to_string())
        .unwrap_or_default()
}

/// A figure of clients that retry, empty for an open loop.
pub(super) fn closed(
    run: &RunSummary,
    value: fn(&crate::metrics::closed_loop::ClosedLoopSummary) -> String,
) -> String {
    run.closed_loop.as_ref().map(value).unwrap_or_default()
}

/// A share, empty when there was nothing to share.
pub(super) fn share(value: Option<f64>) -> String {
    value.map_or_else(String::new, |s| s.to_string())
}

/// The client with the most in one interval, as its input names it, and
/// that count: `203.0.113.7 (22)`; `-` where keys are not told apart.
pub(super) fn busiest(run: &RunSummary) -> String {
    run.keys
        .as_ref()
        .and_then(|k| {
            Some(format!(
                "{} ({})",
                k.worst_key_name.as_ref()?,
                k.worst_rolling_max
            ))
        })
        .unwrap_or_else(|| "-".to_string())
}

/// The most admitted in any second against the backend's capacity:
/// `OVER 200/s`, `ok 108/s` (`ok 47/s, up to 187` when a whole-second log
/// could put more than the capacity in a second; `OVER 112/s packed` when
/// its requests packed against the seconds' edges do; `OVER 83/s, 120
/// packed` or `OVER 83/s, up to 187` when the seeded placement is over and
/// another gives more), or `-` without a backend.
pub fn verdict(run: &RunSummary) -> String {
    match &run.backend {
        None => "-".to_string(),
        Some(backend) => {
            let worst = run.worst_1s_max().unwrap_or(backend.worst_1s);
            let (least, most) = run
                .whole_seconds_per_second()
                .map_or((0, 0), |w| (w.admitted_at_least, w.admitted_at_most));
            if worst > backend.capacity {
                // Over as seeded: how much more the log's seconds allow.
                if least > worst {
                    format!("OVER {worst}/s, {least} packed")
                } else if most > worst {
                    format!("OVER {worst}/s, up to {most}")
                } else {
                    format!("OVER {worst}/s")
                }
            } else if least > backend.capacity {
                // Within as seeded, over with the log's seconds packed.
                format!("OVER {least}/s packed")
            } else if most > backend.capacity {
                // A whole-second log: another placement within its seconds
                // could pass more than the backend takes.
                format!("ok {worst}/s, up to {most}")
            } else {
                format!("ok {worst}/s")
            }
        }
    }
}

/// Keys alive at most, their state in bytes (per key and in all), store
/// commands per request, and counter resets per second: `10000`,
/// `129 B/key, 1 MB`, `1.07`, `10000`.
pub fn state(run: &RunSummary) -> [String; 4] {
    let dash = || "-".to_string();
    let Some(state) = run.keys.as_ref().and_then(|k| k.state.as_ref()) else {
        return [dash(), dash(), dash(), dash()];
    };
    let bytes = match (state.bytes_per_key, state.bytes) {
        (Some(per_key), Some(total)) => format!(
            "{per_key} B/key, {}",
            crate::memory::words(u128::from(total))
        ),
        _ => dash(),
    };
    [
        state.keys_alive_max.to_string(),
        bytes,
        state
            .store_ops_per_request
            .map_or_else(dash, |ops| format!("{ops:.2}")),
        format!("{:.0}", state.resets_per_sec),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::WholeSeconds;

    /// A run of a whole-second log admitting `worst` in its seeded worst
    /// second, `least` packed and at most `most`, against 80/s.
    fn logged(worst: u64, least: u64, most: u64) -> RunSummary {
        let mut run: RunSummary = serde_json::from_value(serde_json::json!({
            "workload": "w", "limiter": "l", "kind": "fixed-window", "description": "",
            "offered": 300, "admitted": 200, "rejected": 100,
            "rolling_ns": 1_000_000_000u64, "worst_rolling": worst, "worst_rolling_start_ns": 0,
            "nominal": 60.0, "spike_ratio": 1.0, "bound": 120, "profile": [],
            "backend": {
                "capacity": 80, "worst_1s": worst, "bound_1s": 120, "nominal_1s": 60.0,
                "rejected_with_spare_capacity": 0, "over_capacity": 0,
                "seconds_over_capacity": 0.0, "queue": null
            },
            "replications": null
        }))
        .unwrap();
        run.whole_seconds = Some(WholeSeconds {
            offered_low: 98,
            offered_high: 187,
            admitted_at_least: least,
            admitted_at_most: most,
        });
        run
    }

    /// The backend column says the most a placement the log allows was
    /// seen to pass, and the most any could, beside the seeded figure —
    /// never the seeded figure alone when the log allows more.
    #[test]
    fn a_whole_second_logs_verdict_says_what_another_placement_gives() {
        assert_eq!(verdict(&logged(83, 120, 120)), "OVER 83/s, 120 packed");
        assert_eq!(verdict(&logged(83, 83, 187)), "OVER 83/s, up to 187");
        assert_eq!(verdict(&logged(83, 83, 83)), "OVER 83/s");
        assert_eq!(verdict(&logged(47, 77, 187)), "ok 47/s, up to 187");
        assert_eq!(verdict(&logged(47, 90, 187)), "OVER 90/s packed");
        assert_eq!(verdict(&logged(47, 50, 60)), "ok 47/s");
        let mut plain = logged(83, 120, 120);
        plain.whole_seconds = None;
        assert_eq!(verdict(&plain), "OVER 83/s");
    }

    /// Wherever a run's second is set against the backend — the report's
    /// words, a sweep's cell and chart — the figure shown is the one judged:
    /// the packed placement's when it passes more than the seeded one, so
    /// that no "over" run shows a second within the capacity.
    #[test]
    fn a_whole_second_log_shows_the_second_it_is_judged_on() {
        use crate::sweep::results::{within_capacity, worst_second};
        let packed = logged(47, 90, 187);
        assert_eq!(packed.judged_1s(), Some(90));
        assert_eq!(worst_second(&packed), Some((90, 80)));
        assert_eq!(within_capacity(&packed), Some(false));
        let seeded = logged(83, 60, 187);
        assert_eq!(seeded.judged_1s(), Some(83));
        assert_eq!(worst_second(&seeded), Some((83, 80)));
        let within = logged(47, 50, 187);
        assert_eq!(worst_second(&within), Some((50, 80)));
        assert_eq!(within_capacity(&within), Some(true));
        let mut plain = logged(47, 90, 187);
        plain.whole_seconds = None;
        assert_eq!(plain.judged_1s(), Some(47));
        assert_eq!(within_capacity(&plain), Some(true));
    }
}
