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
//! Ramps and sustained traffic are tried at four densities. A local search
//! then refines the best of them — moving, adding, duplicating and removing
//! requests, within the budget — until it reaches the limiter's bound or
//! runs out of tries. All of it is deterministic (xoshiro256++ seeded by the
//! budget): the same scenario finds the same pattern.
//!
//! Monotone in the budget by construction: the search runs at every budget
//! of a fixed ladder up to the one given (1–16, then about 9% apart, and
//! every multiple of 50 up to 1,000) and keeps the best, so a larger budget
//! tries everything a smaller one did.
//!
//! A limiter that keeps state per client key is attacked from many keys:
//! at each rung r of the ladder the best one-key pattern is sent by
//! ⌊budget / r⌋ keys at once (at most [`MAX_KEYS`]), so the budget still
//! holds in every second, and the keys' admissions add up. The pattern, the
//! number of keys and the bound for that many keys are reported together.

use std::num::NonZeroU64;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Deserialize;

use crate::limiter::{Limiter, RateLimiter};
use crate::time::{NANOS_PER_SEC, Nanos};
use crate::traffic::Key;

/// A workload's `sources = [{ kind = "adversary", budget = … }]`: not a
/// stream but this search, run for each limiter; the workload's only source.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The most requests the adversary may send in any 1 s.
    pub budget: NonZeroU64,
}

impl Config {
    /// How `kind = "…"` names it.
    pub const NAME: &'static str = "adversary";

    /// The search in a few words.
    pub fn describe(&self) -> String {
        format!(
            "adversary searching for each limiter's worst traffic, at most {} requests per second",
            self.budget
        )
    }
}

/// Phases tried per window.
const PHASES: u64 = 16;
/// Up to this budget the ladder holds every multiple of 50.
const FINE_RUNGS_UP_TO: u64 = 1_000;
/// Patterns the local search tries from each start.
const LOCAL_TRIES: u32 = 300;
/// The most instants of change (outages, failovers, clock steps) after which
/// the patterns are tried again.
const MAX_CHANGES: usize = 8;
/// The most client keys the adversary sends from, against a per-key limiter.
pub const MAX_KEYS: u64 = 10_000;

/// The pattern that made the limiter admit the most.
#[derive(Clone, Debug)]
pub struct Found {
    /// Its arrival times, sorted: each sent once by every one of `keys` keys.
    pub arrivals: Vec<Nanos>,
    /// How many client keys send the pattern (1 for a limiter without
    /// per-key state; keys 0 to `keys − 1`).
    pub keys: u64,
    /// Its most admitted in one rolling interval.
    pub worst: u64,
    /// What it is, in words.
    pub description: String,
    /// Whether `worst` reaches the limiter's bound for the rolling interval.
    pub tight: bool,
}

/// The budgets searched for `budget`: a fixed ladder, cut at `budget`.
fn ladder(budget: u64) -> Vec<u64> {
    let mut rungs: Vec<u64> = (1..=16).collect();
    let mut x = 16.0f64;
    while (x as u64) < budget {
        x *= 2f64.powf(1.0 / 8.0);
        rungs.push(x as u64);
    }
    // Every multiple of 50 up to 1,000; past that the 9% steps alone, so a
    // large budget costs tens of rungs, not thousands.
    rungs.extend((1..=budget.min(FINE_RUNGS_UP_TO) / 50).map(|k| k * 50));
    rungs.retain(|&b| b <= budget);
    rungs.sort_unstable();
    rungs.dedup();
    rungs
}

/// Searches patterns for `limiter` (in its initial state) within `budget`
/// requests per second, maximising the admitted count in any `rolling`
/// interval; every pattern fits in `[0, duration)`.
pub fn search(limiter: &Limiter, budget: u64, rolling: Nanos, duration: Nanos) -> Option<Found> {
    if limiter.keys_matter() {
        return search_keyed(limiter, budget, rolling, duration);
    }
    let bound = limiter.bound(rolling);
    let mut best: Option<Found> = None;
    for rung in ladder(budget) {
        let Some(found) = search_at(limiter, rung, rolling, duration) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| found.worst > b.worst) {
            best = Some(found);
        }
        if best.as_ref().is_some_and(|b| b.worst >= bound) {
            break;
        }
    }
    best.map(|found| Found {
        tight: found.worst >= bound,
        ..found
    })
}

/// The many-key search: at each rung the best one-key pattern, sent by as
/// many keys as the budget allows, simulated through the limiter with all of
/// them; the most admitted wins (on a tie, the fewest keys). It stops at the
/// first rung whose one-key pattern reaches the one-key bound, since larger
/// rungs only spread the budget over fewer keys.
fn search_keyed(limiter: &Limiter, budget: u64, rolling: Nanos, duration: Nanos) -> Option<Found> {
    let mut best: Option<Found> = None;
    for rung in ladder(budget) {
        let Some(single) = search_at(limiter, rung, rolling, duration) else {
            continue;
        };
        let peak = peak_per_second(&single.arrivals.iter().map(|t| t.get()).collect::<Vec<_>>());
        let keys = (budget / peak.max(1)).clamp(1, MAX_KEYS);
        let (worst, bound, one_key_bound) = keyed_worst(limiter, &single.arrivals, keys, rolling);
        let reached = single.worst >= one_key_bound;
        // Rungs ascend, keys descend: on a tie the later rung, fewer keys.
        if best.as_ref().is_none_or(|b| worst >= b.worst) {
            best = Some(Found {
                description: format!("{keys} keys at once, each sending {}", single.description),
                arrivals: single.arrivals,
                keys,
                worst,
                tight: worst >= bound,
            });
        }
        if reached {
            break;
        }
    }
    best
}

/// The most `limiter` admits in any `rolling` interval when each of `keys`
/// keys sends `arrivals` (in time order, keys in turn at each instant); its
/// bound for that many keys; and its bound after one key's.
fn keyed_worst(
    limiter: &Limiter,
    arrivals: &[Nanos],
    keys: u64,
    rolling: Nanos,
) -> (u64, u64, u64) {
    let mut one = limiter.clone();
    arrivals.iter().for_each(|&t| {
        one.decide_keyed::<false>(t, Key::client(0));
    });
    let mut all = limiter.clone();
    let mut released = Vec::new();
    for &t in arrivals {
        for key in 0..keys {
            let decision = all.decide_keyed::<false>(t, Key::client(key));
            if decision.admitted() {
                released.push(t.get().saturating_add(decision.delay().get()));
            }
        }
    }
    let bound = all.bound(rolling);
    (worst_released(released, rolling), bound, one.bound(rolling))
}

/// The families at exactly `budget`, then the local search from the best.
fn search_at(limiter: &Limiter, budget: u64, rolling: Nanos, duration: Nanos) -> Option<Found> {
    let rolling = rolling.get();
    // Candidate windows: the limiter's own (with their phases: every period
    // of Kong's, every layer's of a chain), the rolling interval and one
    // second; each swept over 16 phases.
    let mut windows: Vec<(u64, u64)> = limiter
        .every_window_edges()
        .into_iter()
        .map(|(length, phase)| (length.get(), phase.get()))
        .chain([(rolling, 0), (NANOS_PER_SEC, 0)])
        .collect();
    windows.sort_unstable();
    windows.dedup();
    // Where its behaviour changes on its own (a store's outage, a clock
    // step): the patterns are tried after each, not only at the start.
    let mut changes: Vec<u64> = limiter.changes().iter().map(|t| t.get()).collect();
    changes.sort_unstable();
    changes.dedup();
    changes.truncate(MAX_CHANGES);
    let mut best: Option<(u64, Vec<u64>, String)> = None;
    for &(window, phase_of_edges) in &windows {
        // Leave room for two windows (or the rolling interval) before the boundary.
        let room = window.saturating_mul(2).max(rolling);
        let mut bases = vec![room];
        for &change in &changes {
            let edge = change.div_ceil(window).saturating_mul(window);
            bases.extend([edge.max(room), edge.saturating_add(room)]);
        }
        bases.sort_unstable();
        bases.dedup();
        for (base, phase) in bases
            .iter()
            .flat_map(|&base| (0..PHASES).map(move |p| (base, p)))
        {
            let offset = (phase_of_edges + window * phase / PHASES) % window;
            let b = base.saturating_add(offset);
            if b >= duration.get() {
                continue;
            }
            for (description, arrivals) in patterns(b, window, rolling, budget) {
                if arrivals.last().is_none_or(|&t| t >= duration.get())
                    || peak_per_second(&arrivals) > budget
                {
                    continue;
                }
                let worst = admitted_worst(limiter.clone(), &arrivals, rolling);
                if best.as_ref().is_none_or(|(w, _, _)| worst > *w) {
                    let description = format!(
                        "{description} (window {}, boundary at {})",
                        Nanos(window),
                        Nanos(b)
                    );
                    best = Some((worst, arrivals, description));
                }
            }
        }
    }
    let (worst, arrivals, description) = best?;
    let edges: Vec<u64> = windows.iter().map(|&(w, _)| w).collect();
    let refined = LocalSearch {
        limiter,
        budget,
        rolling,
        duration: duration.get(),
        edges: &edges,
    }
    .refine(arrivals, worst);
    let (arrivals, improved) = refined;
    let (worst, description) = match improved {
        Some(more) => (
            more,
            format!("{description}, refined by local search from {worst} to {more}"),
        ),
        None => (worst, description),
    };
    Some(Found {
        arrivals: arrivals.into_iter().map(Nanos).collect(),
        keys: 1,
        worst,
        description: format!("{description}; budget {budget} per second"),
        tight: false,
    })
}

/// Moves, adds, duplicates and removes requests of a pattern, keeping every
/// change that admits at least as many, within the budget per second.
struct LocalSearch<'a> {
    limiter: &'a Limiter,
    budget: u64,
    rolling: u64,
    duration: u64,
    /// Window lengths whose edges (±1 ns) are worth moving a request to.
    edges: &'a [u64],
}

impl LocalSearch<'_> {
    /// The refined pattern, and its count if it improved on `worst`.
    fn refine(&self, mut arrivals: Vec<u64>, worst: u64) -> (Vec<u64>, Option<u64>) {
        let bound = self.limiter.bound(Nanos(self.rolling));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.budget);
        let mut current = worst;
        for _ in 0..LOCAL_TRIES {
            if current >= bound || arrivals.is_empty() {
                break;
            }
            let mut candidate = arrivals.clone();
            let pick = rng.random_range(0..candidate.len());
            // Kept sorted by moving one time to its place: the vector a
            // sort of the changed pattern gives (equal times are alike).
            match rng.random_range(0..4u8) {
                0 => {
                    candidate.remove(pick);
                }
                1 => {
                    let t = self.nudge(candidate[pick], &mut rng);
                    candidate.remove(pick);
                    insert_sorted(&mut candidate, t);
                }
                _ => {
                    let t = self.nudge(candidate[pick], &mut rng);
                    insert_sorted(&mut candidate, t);
                }
            }
            if candidate.last().is_some_and(|&t| t >= self.duration)
                || !self.within_budget(&candidate)
            {
                continue;
            }
            let count = admitted_worst(self.limiter.clone(), &candidate, self.rolling);
            if count >= current {
                (arrivals, current) = (candidate, count);
            }
        }
        (arrivals, (current > worst).then_some(current))
    }

    /// A time near `t`: the same instant, a nanosecond either side, an edge
    /// of a window (or rolling interval) after or before it, or anywhere
    /// within a rolling interval of it.
    fn nudge(&self, t: u64, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let window = self.edges[rng.random_range(0..self.edges.len())];
        let edge = (t / window + u64::from(rng.random_bool(0.5))) * window;
        match rng.random_range(0..6u8) {
            0 => t,
            1 => t.saturating_add(1),
            2 => t.saturating_sub(1),
            3 => edge,
            4 => edge.saturating_sub(1),
            _ => t
                .saturating_sub(self.rolling / 2)
                .saturating_add(rng.random_range(0..self.rolling.max(1))),
        }
    }

    /// No more than `budget` arrivals in any second; `arrivals` sorted.
    fn within_budget(&self, arrivals: &[u64]) -> bool {
        peak_per_second(arrivals) <= self.budget
    }
}

/// `t` put in its place among `sorted`.
fn insert_sorted(sorted: &mut Vec<u64>, t: u64) {
    let at = sorted.partition_point(|&u| u <= t);
    sorted.insert(at, t);
}

/// The most of `arrivals` (sorted) in any second.
fn peak_per_second(arrivals: &[u64]) -> u64 {
    peak_within(arrivals, NANOS_PER_SEC)
}

/// The most of `times` (sorted) in any half-open interval `[t, t + interval)`,
/// as [`crate::metrics::rolling::RollingCounts`] counts it (without its ring, which a search
/// allocating one per try spent a tenth of its time filling).
fn peak_within(times: &[u64], interval: u64) -> u64 {
    let (mut first, mut peak) = (0, 0);
    for (i, &t) in times.iter().enumerate() {
        while times[first].saturating_add(interval) <= t {
            first += 1;
        }
        peak = peak.max((i - first + 1) as u64);
    }
    peak
}

/// The most `limiter` admits from `arrivals` in any interval of `rolling`,
/// counting each admitted request when it is released (after any delay).
fn admitted_worst(mut limiter: Limiter, arrivals: &[u64], rolling: u64) -> u64 {
    let mut released = Vec::with_capacity(arrivals.len());
    for &t in arrivals {
        // Only admissions count here: no hint is worked out.
        let decision = limiter.decide_with::<false>(Nanos(t));
        if decision.admitted() {
            released.push(t.saturating_add(decision.delay().get()));
        }
    }
    worst_released(released, Nanos(rolling))
}

/// The most of `released` (release times, any order) in one `rolling` interval.
fn worst_released(mut released: Vec<u64>, rolling: Nanos) -> u64 {
    released.sort_unstable();
    peak_within(&released, rolling.get())
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
        // Anchored two windows before (a period opened by its first
        // request, rotated once), a full window at the end of the next, and
        // the ramp back-loaded: its i-th request at i/count of the window, so
        // the previous window's full weight, shrinking as the window goes,
        // leaves room for each (HAProxy's freq_ctr).
        let opened: Vec<u64> = [b - 2 * window]
            .into_iter()
            .chain(burst(b - 1, half))
            // The last at b + W − 2: within a rolling W of b − 1.
            .chain((1..=count).map(|i| {
                b + (u128::from(i) * u128::from(window.saturating_sub(2)) / u128::from(count))
                    as u64
            }))
            .collect();
        out.push((
            format!(
                "opened late ramp: 1 request, {half} at the end of the window after next, {count} back-loaded through the one after"
            ),
            opened,
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
mod tests;

#[cfg(test)]
mod named_configurations {
    fn run(config: &str, budget: u64) -> (u64, u64, bool) {
        let (found, bound) = super::tests::searched(config, budget);
        (found.worst, bound, found.tight)
    }

    #[test]
    fn reaches_the_bounds_the_families_alone_missed() {
        for config in [
            "kind = \"smaller-window\"\nwindow = \"999ms\"\nthreshold = 7\nsplits = 3",
            "kind = \"smaller-window\"\nwindow = \"1s\"\nthreshold = 10\nsplits = 4\nalign = \"first-request\"",
            "kind = \"gcra\"\nquota = \"per_second(3).allow_burst(5)\"",
            "kind = \"nginx-limit-req\"\nrate = \"100r/s\"\nburst = 100",
            "kind = \"chain\"\nlayers = [{ kind = \"sliding-counter\", window = \"1s\", threshold = 80 }, { kind = \"sliding-log\", window = \"1s\", threshold = 200 }]",
        ] {
            let (worst, bound, tight) = run(config, 400);
            assert!(tight && worst == bound, "{config}: {worst} of {bound}");
        }
    }

    #[test]
    fn says_so_when_it_does_not_reach_the_bound() {
        // 101 at the last nanosecond of a millisecond, then one per 10 ms in
        // whole milliseconds, reaches 201; the search stops at 200.
        let (worst, bound, tight) = run(
            "kind = \"nginx-limit-req\"\nrate = \"100r/s\"\nburst = 100\nnodelay = true",
            400,
        );
        assert!(
            worst >= 200 && worst <= bound && bound == 201,
            "{worst} of {bound}"
        );
        assert_eq!(tight, worst == bound);
    }

    #[test]
    fn a_larger_budget_never_finds_less() {
        for config in [
            "kind = \"chain\"\nlayers = [{ kind = \"fixed-window\", window = \"1s\", threshold = 100 }, { kind = \"token-bucket\", rate = 100, burst = 20 }]",
            "kind = \"sliding-counter\"\nwindow = \"1s\"\nthreshold = 100",
            "kind = \"nginx-limit-req\"\nrate = \"50r/s\"\nburst = 30\ndelay = 10",
        ] {
            let found: Vec<u64> = [10, 60, 150, 200, 230, 300, 500, 1000]
                .iter()
                .map(|&b| run(config, b).0)
                .collect();
            assert!(
                found.windows(2).all(|w| w[0] <= w[1]),
                "{config}: {found:?}"
            );
        }
    }
}
