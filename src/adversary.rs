//! The adversary: for one limiter, try families of arrival patterns known to
//! defeat rate limiters, over the limiter's window, phases and the rolling
//! interval, and keep the one that gets the most admitted in one interval.
//!
//! Families (each within `budget` requests in any second):
//! - boundary pair: c at b − 1 ns and c at b, b swept over phases of the window;
//! - spread pair: c at the last nanosecond of a bucket and c at the first of
//!   the bucket one window later (bucketed sliding windows);
//! - opened pair: one request W before the pair, so a window that starts at
//!   its first request ends exactly at b (first-request windows);
//! - edge comb: c at b − 1 ns, then c at the first nanosecond of every window
//!   within the interval (smaller windows, bucket edges);
//! - late ramp: c at b − 1 ns, then requests evenly through the next window
//!   (the weighted sliding counter's weighting lets them in one by one);
//! - burst then sustained: c at once, then evenly through the interval (a
//!   token bucket's burst, then every token as it completes).
//!
//! Ramps and sustained traffic are tried at four densities. The search is
//! exhaustive over this small space (about 240 patterns of at most `budget`
//! requests per limiter), not random: the same scenario finds the same pattern.

use crate::limiter::{Limiter, RateLimiter};
use crate::metrics::rolling::RollingCounts;
use crate::time::{NANOS_PER_SEC, Nanos};

/// Phases tried per window.
const PHASES: u64 = 16;

/// The pattern that made the limiter admit the most.
#[derive(Clone, Debug)]
pub struct Found {
    /// Its arrival times, sorted.
    pub arrivals: Vec<Nanos>,
    /// Its most admitted in one rolling interval.
    pub worst: u64,
    /// What it is, in words.
    pub description: String,
}

/// Searches patterns for `limiter` (in its initial state) within `budget`
/// requests per second, maximising the admitted count in any `rolling`
/// interval; every pattern fits in `[0, duration)`.
pub fn search(limiter: &Limiter, budget: u64, rolling: Nanos, duration: Nanos) -> Option<Found> {
    let rolling = rolling.get();
    // Candidate windows: the limiter's own (with its phase), the rolling
    // interval and one second; each swept over 16 phases.
    let mut windows: Vec<(u64, u64)> = limiter
        .window_edges()
        .map(|(length, phase)| (length.get(), phase.get()))
        .into_iter()
        .chain([(rolling, 0), (NANOS_PER_SEC, 0)])
        .collect();
    windows.sort_unstable();
    windows.dedup();
    let mut best: Option<Found> = None;
    for &(window, phase_of_edges) in &windows {
        for phase in 0..PHASES {
            let offset = (phase_of_edges + window * phase / PHASES) % window;
            // Leave room for a whole window before the boundary.
            let b = window.saturating_mul(2).max(rolling) + offset;
            for (description, arrivals) in patterns(b, window, rolling, budget) {
                if arrivals.last().is_none_or(|&t| t >= duration.get()) {
                    continue;
                }
                let worst = admitted_worst(limiter.clone(), &arrivals, rolling);
                if best.as_ref().is_none_or(|found| worst > found.worst) {
                    let description = format!(
                        "{description} (window {}, boundary at {})",
                        Nanos(window),
                        Nanos(b)
                    );
                    best = Some(Found {
                        arrivals: arrivals.into_iter().map(Nanos).collect(),
                        worst,
                        description,
                    });
                }
            }
        }
    }
    best
}

/// The most `limiter` admits from `arrivals` in any interval of `rolling`,
/// counting each admitted request when it is released (after any delay).
fn admitted_worst(mut limiter: Limiter, arrivals: &[u64], rolling: u64) -> u64 {
    let mut released = Vec::new();
    for &t in arrivals {
        if limiter.decide(Nanos(t)) {
            released.push(t.saturating_add(limiter.delay().get()));
        }
    }
    released.sort_unstable();
    let mut counts = RollingCounts::new(&[Nanos(rolling)]);
    released.iter().for_each(|&t| counts.push(Nanos(t)));
    counts.worst()[0].count
}

/// Every family's pattern around boundary `b` for `window` and `rolling`.
fn patterns(b: u64, window: u64, rolling: u64, budget: u64) -> Vec<(String, Vec<u64>)> {
    let half = (budget / 2).max(1);
    let mut out = Vec::new();
    out.push((
        format!("boundary pair: {half} just before and {half} at a boundary"),
        [burst(b - 1, half), burst(b, half)].concat(),
    ));
    out.push((
        format!(
            "opened pair: 1 request, then {} and {half} a window later",
            half - 1
        ),
        [
            vec![b - window],
            burst(b - 1, half.saturating_sub(1)),
            burst(b, half),
        ]
        .concat(),
    ));
    if window < rolling {
        // Against bucketed sliding windows: the last nanosecond of one bucket
        // and the first of the bucket a whole window later.
        let far = b + rolling - window;
        out.push((
            format!("spread pair: {half} at a bucket's end and {half} one window later"),
            [burst(b - 1, half), burst(far, half)].concat(),
        ));
    }
    let teeth = (rolling - 1) / window + 1;
    let per_tooth = (budget / (teeth + 1)).max(1);
    let comb: Vec<u64> = burst(b - 1, per_tooth)
        .into_iter()
        .chain((0..teeth).flat_map(|i| burst(b + i * window, per_tooth)))
        .collect();
    out.push((
        format!(
            "edge comb: {per_tooth} at each of {} window edges",
            teeth + 1
        ),
        comb,
    ));
    // Ramps at several densities: in a chain, requests an earlier layer
    // passes but a later one rejects still use up the earlier layer's count,
    // so the best ramp is as dense as the later layer admits, no denser.
    for density in 0..4 {
        let count = (budget - half) >> density;
        if count == 0 {
            break;
        }
        let ramp: Vec<u64> = burst(b - 1, half)
            .into_iter()
            .chain(evenly(b + 1, window - 1, count))
            .collect();
        out.push((
            format!("late ramp: {half} at the end of a window, {count} evenly through the next"),
            ramp,
        ));
        let sustained: Vec<u64> = burst(b, half)
            .into_iter()
            .chain(evenly(b + 1, rolling - 1, count))
            .collect();
        out.push((
            format!("burst then sustained: {half} at once, {count} evenly over the interval"),
            sustained,
        ));
    }
    out
}

fn burst(at: u64, count: u64) -> Vec<u64> {
    vec![at; count as usize]
}

/// `count` times spread evenly over `[from, from + width)`.
fn evenly(from: u64, width: u64, count: u64) -> impl Iterator<Item = u64> {
    (0..count)
        .map(move |i| from + (u128::from(i) * u128::from(width) / u128::from(count.max(1))) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::{Context, LimiterConfig};

    fn found(config: &str, budget: u64) -> (u64, u64, String) {
        let table: toml::Table = toml::from_str(config).unwrap();
        let limiter = LimiterConfig::from_table(table)
            .unwrap()
            .build(Context::default())
            .unwrap();
        let found = search(&limiter, budget, Nanos::SECOND, Nanos(60 * NANOS_PER_SEC)).unwrap();
        (found.worst, limiter.bound(Nanos::SECOND), found.description)
    }

    #[test]
    fn finds_2n_for_an_epoch_fixed_window() {
        let (worst, bound, how) = found(
            "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100",
            400,
        );
        assert_eq!((worst, bound), (200, 200), "{how}");
    }

    #[test]
    fn finds_2n_minus_1_for_a_first_request_window() {
        let (worst, bound, how) = found(
            "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100\nalign = \"first-request\"",
            400,
        );
        assert_eq!((worst, bound), (199, 199), "{how}");
    }

    #[test]
    fn finds_about_2n_for_the_sliding_counter() {
        let (worst, _, how) = found(
            "kind = \"sliding-counter\"\nwindow = \"1s\"\nthreshold = 100",
            200,
        );
        assert!(worst >= 198, "{worst}: {how}");
    }

    #[test]
    fn finds_about_2n_for_a_token_bucket_with_burst_n() {
        let (worst, bound, how) = found("kind = \"token-bucket\"\nrate = 100\nburst = 100", 400);
        assert!(worst >= 198 && worst <= bound, "{worst} of {bound}: {how}");
    }

    #[test]
    fn finds_k_plus_1_windows_for_smaller_windows() {
        let (worst, bound, how) = found(
            "kind = \"smaller-window\"\nwindow = \"1s\"\nthreshold = 100\nsplits = 10",
            400,
        );
        assert_eq!((worst, bound), (110, 110), "{how}");
    }

    #[test]
    fn finds_a_window_then_bucket_chains_bound() {
        let chain = "kind = \"chain\"\nlayers = [{ kind = \"fixed-window\", window = \"1s\", threshold = 100 }, { kind = \"token-bucket\", rate = 100, burst = 20 }]";
        let (worst, bound, how) = found(chain, 400);
        assert_eq!((worst, bound), (119, 119), "{how}");
    }

    #[test]
    fn finds_the_bound_of_governors_gcra() {
        let (worst, bound, how) = found("kind = \"gcra\"\nquota = \"per_second(100)\"", 400);
        assert_eq!((worst, bound), (199, 199), "{how}");
    }

    #[test]
    fn finds_2n_for_sliding_buckets_however_many() {
        for buckets in [2, 10] {
            let config = format!(
                "kind = \"sliding-buckets\"\nwindow = \"1s\"\nthreshold = 100\nbuckets = {buckets}"
            );
            let (worst, bound, how) = found(&config, 400);
            assert_eq!((worst, bound), (200, 200), "{buckets} buckets: {how}");
        }
    }

    #[test]
    fn finds_k_times_the_limit_for_envoy_instances() {
        let config = "kind = \"envoy-local\"\nmax_tokens = 50\ntokens_per_fill = 50\nfill_interval = \"1s\"\ninstances = 2";
        let (worst, bound, how) = found(config, 400);
        assert_eq!((worst, bound), (200, 200), "{how}");
    }

    #[test]
    fn finds_exactly_n_for_the_sliding_log() {
        let (worst, bound, how) = found(
            "kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 100",
            400,
        );
        assert_eq!((worst, bound), (100, 100), "{how}");
    }
}
