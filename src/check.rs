//! What `burstsim check` objects to in a run, as data: more admitted in one
//! second than the backend serves, or requests the backend had to drop. The
//! command, the sweep's cells and the report read these; none decides again.

use crate::limiter::cluster::{FAILOVERS, OWN_COUNTERS};
use crate::summary::RunSummary;
use crate::time::seconds;

/// One way a run fails the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// More admitted in one second than the backend serves.
    Over {
        /// The most admitted in one second (the worst over replications).
        worst_1s: u64,
        /// What the backend serves in one.
        capacity: u64,
        /// Where that second starts, when one run shows it.
        from_ns: Option<u64>,
        /// The replications it is the worst of, when replicated.
        replications: Option<u64>,
        /// The most in one second as seeded (the worst over replications):
        /// `worst_1s` too, unless packing let more through.
        seeded: u64,
        /// For a log of whole seconds: `worst_1s` is the count of its
        /// requests packed against the seconds' edges, a placement the log
        /// allows, which let more through than as seeded.
        packed: bool,
    },
    /// Requests the backend had to drop from its full queue.
    Drops {
        /// How many (the most over replications).
        dropped: u64,
        /// The queue's size.
        queue: u64,
        /// The replications it is the worst of, when replicated.
        replications: Option<u64>,
    },
}

/// Every way `run` fails its backend; none when it stays within it (or has
/// no backend to fail).
pub fn failures(run: &RunSummary) -> Vec<Failure> {
    let Some(backend) = &run.backend else {
        return Vec::new();
    };
    let replications = run.replications.as_ref().map(|r| r.count);
    let mut failures = Vec::new();
    let seeded = run.worst_1s_max().unwrap_or(backend.worst_1s);
    let worst_1s = run.judged_1s().unwrap_or(seeded);
    if worst_1s > backend.capacity {
        // Where the worst second starts is known for replication 0 only.
        let start = run
            .profile
            .iter()
            .find(|p| p.interval_ns == 1_000_000_000)
            .map(|p| p.worst_start_ns);
        let start =
            start.or((run.rolling_ns == 1_000_000_000).then_some(run.worst_rolling_start_ns));
        failures.push(Failure::Over {
            worst_1s,
            capacity: backend.capacity,
            from_ns: start.filter(|_| replications.is_none() && seeded > backend.capacity),
            replications,
            seeded,
            packed: worst_1s > seeded,
        });
    }
    if let (Some(queue), Some(dropped)) =
        (backend.queue.as_ref(), run.dropped_max().filter(|&d| d > 0))
    {
        failures.push(Failure::Drops {
            dropped,
            queue: queue.size,
            replications,
        });
    }
    failures
}

impl Failure {
    /// The failure in one line, naming the run as `workload × limiter`.
    pub fn line(&self, run: &RunSummary) -> String {
        let name = format!("{} × {}", run.workload, run.limiter);
        let of = |replications: &Option<u64>| {
            replications.map_or(String::new(), |count| {
                format!(" (worst of {count} replications)")
            })
        };
        match self {
            Failure::Over {
                worst_1s,
                capacity,
                from_ns,
                replications,
                seeded,
                packed,
            } => {
                let at = match (replications, from_ns) {
                    (Some(_), _) => of(replications),
                    (None, Some(ns)) => format!(" from {}", seconds(*ns)),
                    (None, None) => String::new(),
                };
                let over = worst_1s - capacity;
                match (packed, seeded > capacity) {
                    (false, _) => format!(
                        "OVER  {name}: {worst_1s} admitted in one second{at}, {over} over the backend's {capacity}/s"
                    ),
                    // The seeded second is over too: both, each where it is.
                    (true, true) => format!(
                        "OVER  {name}: {seeded} admitted in one second{at} as seeded, {worst_1s} {PACKED}, {over} over the backend's {capacity}/s"
                    ),
                    (true, false) => format!(
                        "OVER  {name}: {worst_1s} admitted in one second {PACKED}, {over} over the backend's {capacity}/s"
                    ),
                }
            }
            Failure::Drops {
                dropped,
                queue,
                replications,
            } => format!(
                "DROPS {name}: the backend dropped {dropped} requests{} (queue of {queue})",
                of(replications)
            ),
        }
    }
}

/// How a whole-second log's packed figure is told.
const PACKED: &str = "with each second's requests of the log packed against the next's (its whole-second stamps allow it)";

/// Why a limiter let more through in a second than the backend serves, and
/// what fixes it: read from the limiter's kind and setup, for the verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// Its limit itself is above the backend's capacity.
    Limit,
    /// Each of several instances allows the whole limit.
    Instances,
    /// Instances share one count but read it on clocks that disagree, or
    /// stale.
    SharedClocks,
    /// The shared store went down and the instances went on without it,
    /// or it failed over and forgot increments.
    Outages,
    /// Requests whose key names nothing pass a limit kept per key
    /// unlimited, as its gateway leaves them.
    Unkeyed,
    /// Many clients, each within a limit of its own.
    Clients,
    /// A window's allowance on both sides of a window edge.
    WindowEdges,
    /// A full bucket's burst on top of its rate.
    Bursts,
}

/// Kinds that count in windows: two windows' allowances meet at an edge
/// (Sentinel's buckets, Resilience4j's cycles, the Node and Python
/// libraries' windows and Redisson's millisecond log among them; Sentinel's paced behaviour never exceeds its count).
const WINDOWS: [&str; 14] = [
    "fixed-window",
    "smaller-window",
    "buffered",
    "sliding-counter",
    "sliding-buckets",
    "envoy-ratelimit",
    "haproxy-rate",
    "kong",
    "sentinel",
    "resilience4j",
    "express-rate-limit",
    "rate-limiter-flexible",
    "django-ratelimit",
    "redisson",
];

/// Whether `run`'s limiter counts in windows: a kind of [`WINDOWS`], a
/// Bucket4j bandwidth refilled all at once, Upstash's windows, a Bottleneck
/// reservoir refreshed at its heartbeat, slowapi's fixed window.
fn counts_in_windows(run: &RunSummary) -> bool {
    match run.kind.as_str() {
        "slowapi" => !run.description.contains("moving"),
        "bucket4j" => run.description.contains("intervally"),
        "upstash" => !run.description.contains("token bucket"),
        "bottleneck" => run.description.contains("refreshed"),
        kind => WINDOWS.contains(&kind),
    }
}

impl Cause {
    /// The cause of `run`'s excess over `capacity` a second.
    pub fn of(run: &RunSummary, capacity: u64) -> Cause {
        let limit_1s = run.nominal * 1e9 / run.rolling_ns as f64;
        let per_key = run.keys.as_ref().is_some_and(|k| k.state.is_some());
        let several = run.instances.as_ref().is_some_and(|i| i.len() > 1);
        if several && run.description.contains(OWN_COUNTERS) {
            Cause::Instances
        } else if several && (run.outages.is_some() || run.description.contains(FAILOVERS)) {
            Cause::Outages
        } else if several {
            Cause::SharedClocks
        } else if run.keys.as_ref().is_some_and(|k| k.empty_unlimited) {
            Cause::Unkeyed
        } else if per_key {
            Cause::Clients
        } else if limit_1s > capacity as f64 {
            Cause::Limit
        } else if counts_in_windows(run) {
            Cause::WindowEdges
        } else {
            Cause::Bursts
        }
    }

    /// The cause in a few words: `window edges`.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Limit => "a limit above capacity",
            Cause::Instances => "instances",
            Cause::SharedClocks => "clocks apart",
            Cause::Outages => "store faults",
            Cause::Unkeyed => "requests without a key",
            Cause::Clients => "many clients",
            Cause::WindowEdges => "window edges",
            Cause::Bursts => "bursts",
        }
    }

    /// What lets the excess through, and what fixes it.
    pub fn explanation(self) -> &'static str {
        match self {
            Cause::Limit => {
                "the limit itself is above what the backend serves; set it at most the capacity"
            }
            Cause::Instances => {
                "each instance allows the whole limit; divide it among the instances or share one counter"
            }
            Cause::SharedClocks => {
                "the instances share one count but each reads it on its own clock (or reads it stale): the one ahead opens or expires the count early; keep the clocks within a small part of the window, or count on the store's clock"
            }
            Cause::Outages => {
                "the instances share one count and went on without it while the store was down, or the store forgot increments in a failover; fail closed, or fall back to the limit divided among the instances"
            }
            Cause::Unkeyed => {
                "requests whose key was missing (a log's `-`) pass the limit kept per key unlimited, as the gateway leaves them; limit them too (a global limit in front, or a key every request has)"
            }
            Cause::Clients => {
                "every client stays within its own limit and together they pass the backend's; put a global limit in front"
            }
            Cause::WindowEdges => {
                "one window's allowance just before an edge and the next just after; a threshold of half the capacity or a sliding log holds it (`burstsim size` gives the number)"
            }
            Cause::Bursts => {
                "a full burst on top of the rate; keep rate + burst within capacity (`burstsim size` sets the two together)"
            }
        }
    }
}

/// Below this share of its limit, admitted while demand exceeded it, a
/// limiter is flagged as turning away traffic its own limit allows.
pub const UNDER_LIMIT: f64 = 0.8;

/// The verdict on a run's results, as data, built once: the run's last
/// lines and the report's verdict only say it.
#[derive(Clone, Debug)]
pub struct Verdict<'a> {
    /// The backend's capacity a second.
    pub capacity: u64,
    /// How many runs there are, and how many fail ([`failures`]).
    pub runs: usize,
    pub failing: usize,
    /// The limiters over capacity on some workload.
    pub over: std::collections::HashSet<&'a str>,
    /// Each cause of an excess and the limiters it explains.
    pub causes: Vec<(Cause, Vec<&'a str>)>,
    /// The limiter to set, if one holds the backend on every workload.
    pub recommendation: Option<Recommendation<'a>>,
    /// Runs that admit well below their limit while demand exceeds it.
    pub under_limit: Vec<&'a RunSummary>,
    /// For each limiter within the backend, its dearest busiest second.
    pub peak_costs: Vec<&'a RunSummary>,
}

impl<'a> Verdict<'a> {
    /// The verdict on `runs`; `None` without a backend to judge against.
    pub fn of(runs: &'a [RunSummary]) -> Option<Verdict<'a>> {
        let capacity = runs.iter().find_map(|run| run.backend.as_ref())?.capacity;
        Some(Verdict {
            capacity,
            runs: runs.len(),
            failing: runs.iter().filter(|run| !failures(run).is_empty()).count(),
            over: runs
                .iter()
                .filter(|run| run.exceeds_capacity())
                .map(|run| run.limiter.as_str())
                .collect(),
            causes: causes(runs),
            recommendation: recommendation(runs),
            under_limit: runs
                .iter()
                .filter(|run| {
                    run.overload
                        .as_ref()
                        .is_some_and(|o| o.limit_share < UNDER_LIMIT)
                })
                .collect(),
            peak_costs: peak_costs(runs),
        })
    }
}

/// The causes among `runs` over their capacity, each with the limiters it
/// explains (in order of first appearance), causes in a fixed order.
pub fn causes(runs: &[RunSummary]) -> Vec<(Cause, Vec<&str>)> {
    let mut by_cause: std::collections::BTreeMap<Cause, Vec<&str>> = Default::default();
    for run in runs {
        let Some(backend) = &run.backend else {
            continue;
        };
        if !failures(run)
            .iter()
            .any(|f| matches!(f, Failure::Over { .. }))
        {
            continue;
        }
        let names = by_cause
            .entry(Cause::of(run, backend.capacity))
            .or_default();
        if !names.contains(&run.limiter.as_str()) {
            names.push(&run.limiter);
        }
    }
    by_cause.into_iter().collect()
}

/// The limiter to recommend: of those whose every run passes, one whose
/// bound holds the backend for any traffic if there is one, and of those the
/// one that turns away the fewest requests over all its workloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recommendation<'a> {
    /// Its name.
    pub limiter: &'a str,
    /// The most it admits in 1 s for any traffic (`u64::MAX`: unbounded).
    pub bound_1s: u64,
    /// That bound is within the backend's capacity.
    pub any_traffic: bool,
    /// Requests it turned away, over all its runs.
    pub rejected: u64,
    /// Requests that came, over all its runs.
    pub offered: u64,
}

impl Recommendation<'_> {
    /// Why it, after its name: `holds the backend for any traffic (its bound
    /// is 100 in 1 s), and of those that do turns away the fewest: 11112 of
    /// 27922 requests (39.8%)`.
    pub fn words(&self) -> String {
        let bound = match self.bound_1s {
            u64::MAX => "it has no bound".to_string(),
            b => format!("its bound is {b} in 1 s"),
        };
        let (holds, of) = if self.any_traffic {
            ("holds the backend for any traffic", "of those that do")
        } else {
            (
                "within the backend on every workload, not for any traffic",
                "none holds any traffic; of those within on every workload",
            )
        };
        format!(
            "{holds} ({bound}), and {of} turns away the fewest: {} of {} requests ({:.1}%)",
            self.rejected,
            self.offered,
            self.rejected as f64 * 100.0 / self.offered.max(1) as f64
        )
    }
}

/// The recommendation among `runs` (the first of equals, in their order);
/// `None` when no limiter passes on every workload or there is no backend.
pub fn recommendation(runs: &[RunSummary]) -> Option<Recommendation<'_>> {
    let mut totals: Vec<Recommendation> = Vec::new();
    let mut failing = std::collections::HashSet::new();
    for run in runs {
        let backend = run.backend.as_ref()?;
        if !failures(run).is_empty() {
            failing.insert(run.limiter.as_str());
        }
        match totals.iter_mut().find(|t| t.limiter == run.limiter) {
            Some(total) => {
                total.rejected += run.rejected;
                total.offered += run.offered;
            }
            None => totals.push(Recommendation {
                limiter: &run.limiter,
                bound_1s: backend.bound_1s,
                any_traffic: backend.bound_1s <= backend.capacity,
                rejected: run.rejected,
                offered: run.offered,
            }),
        }
    }
    let rank = |t: &Recommendation| (!t.any_traffic, t.rejected);
    totals
        .into_iter()
        .filter(|t| !failing.contains(t.limiter))
        .reduce(|best, t| if rank(&t) < rank(&best) { t } else { best })
}

/// What holding the backend costs: for each limiter whose every run passes
/// ([`failures`] is empty), in the order of `runs`, its run that turned away
/// the largest share of its busiest second's demand (the first of equals) —
/// when that share is above 0.
pub fn peak_costs(runs: &[RunSummary]) -> Vec<&RunSummary> {
    let mut costs: Vec<&RunSummary> = Vec::new();
    let failing: std::collections::HashSet<&str> = runs
        .iter()
        .filter(|run| !failures(run).is_empty())
        .map(|run| run.limiter.as_str())
        .collect();
    for run in runs {
        if failing.contains(run.limiter.as_str()) {
            continue;
        }
        let Some(peak) = run.peak.as_ref().filter(|p| p.turned_away > 0) else {
            continue;
        };
        match costs.iter_mut().find(|c| c.limiter == run.limiter) {
            Some(cost) => {
                if peak.share() > cost.peak.as_ref().map_or(0.0, |p| p.share()) {
                    *cost = run;
                }
            }
            None => costs.push(run),
        }
    }
    let share = |run: &RunSummary| run.peak.as_ref().map_or(0.0, |p| p.share());
    costs.sort_by(|a, b| share(b).total_cmp(&share(a)));
    costs
}

/// `51% of flash-sale's busiest second (412 requests from 21.000s)`.
pub fn peak_cost_words(run: &RunSummary) -> String {
    match &run.peak {
        Some(peak) => format!(
            "{:.0}% of {}'s busiest second ({} requests from {})",
            peak.share() * 100.0,
            run.workload,
            peak.offered,
            crate::time::seconds(peak.start_ns)
        ),
        None => "nothing".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: &str, nominal_1s: f64) -> RunSummary {
        serde_json::from_value(serde_json::json!({
            "workload": "w", "limiter": kind, "kind": kind, "description": "",
            "offered": 300, "admitted": 200, "rejected": 100,
            "rolling_ns": 1_000_000_000u64, "worst_rolling": 200, "worst_rolling_start_ns": 0,
            "nominal": nominal_1s, "spike_ratio": 2.0, "bound": 200, "profile": [],
            "backend": {
                "capacity": 150, "worst_1s": 200, "bound_1s": 200, "nominal_1s": nominal_1s,
                "rejected_with_spare_capacity": 0, "over_capacity": 50,
                "seconds_over_capacity": 0.1, "queue": null
            },
            "replications": null
        }))
        .unwrap()
    }

    /// A run of `limiter` that admits `worst` in its worst second against a
    /// backend of 150/s, with bound `bound` and `rejected` turned away.
    fn judged(limiter: &str, worst: u64, bound: u64, rejected: u64) -> RunSummary {
        let mut run = run("sliding-log", 100.0);
        run.limiter = limiter.to_string();
        run.rejected = rejected;
        let backend = run.backend.as_mut().unwrap();
        (backend.worst_1s, backend.bound_1s) = (worst, bound);
        backend.over_capacity = worst.saturating_sub(150);
        run
    }

    /// The verdict is the runs' figures gathered once: who is over, how many
    /// fail, who runs below its limit under overload; none without a backend.
    #[test]
    fn the_verdict_gathers_what_its_readers_say() {
        let mut slow = judged("slow", 100, 100, 10);
        slow.overload = Some(crate::metrics::overload::Overload {
            seconds: 5,
            admitted_per_second: 40.0,
            limit_share: 0.4,
        });
        let runs = [
            judged("over", 200, 200, 0),
            slow,
            judged("safe", 100, 100, 100),
        ];
        let verdict = Verdict::of(&runs).unwrap();
        assert_eq!(
            (verdict.capacity, verdict.runs, verdict.failing),
            (150, 3, 1)
        );
        assert_eq!(verdict.over, std::collections::HashSet::from(["over"]));
        let under: Vec<&str> = verdict
            .under_limit
            .iter()
            .map(|r| r.limiter.as_str())
            .collect();
        assert_eq!(under, ["slow"]);
        assert_eq!(verdict.recommendation.map(|r| r.limiter), Some("slow"));
        let mut alone = runs[2].clone();
        alone.backend = None;
        assert!(Verdict::of(&[alone]).is_none());
    }

    #[test]
    fn the_recommendation_holds_any_traffic_first_then_costs_least() {
        let over = judged("over", 200, 200, 0);
        let safe = judged("safe", 100, 100, 100);
        let cheap = judged("cheap", 140, 200, 50);
        let pick = |runs: &[RunSummary]| {
            recommendation(runs).map(|r| (r.limiter.to_string(), r.any_traffic, r.rejected))
        };
        let all = [over.clone(), safe.clone(), cheap.clone()];
        assert_eq!(pick(&all), Some(("safe".into(), true, 100)));
        let unsafe_only = [over.clone(), cheap.clone()];
        assert_eq!(pick(&unsafe_only), Some(("cheap".into(), false, 50)));
        // One failing workload rules a limiter out, whatever its others do.
        let mut cheap_fails = cheap.clone();
        cheap_fails.workload = "other".into();
        cheap_fails.backend.as_mut().unwrap().worst_1s = 151;
        cheap_fails.backend.as_mut().unwrap().over_capacity = 1;
        assert_eq!(pick(&[over.clone(), cheap, cheap_fails]), None);
        // Rejections add up over the workloads.
        let mut safe2 = safe.clone();
        safe2.workload = "other".into();
        assert_eq!(pick(&[safe, safe2]), Some(("safe".into(), true, 200)));
        assert!(recommendation(&[over]).is_none());
    }

    #[test]
    fn a_cause_is_named_from_the_kind_and_the_limit() {
        assert_eq!(
            Cause::of(&run("fixed-window", 100.0), 150),
            Cause::WindowEdges
        );
        assert_eq!(Cause::of(&run("token-bucket", 100.0), 150), Cause::Bursts);
        let mut bucket4j = run("bucket4j", 100.0);
        bucket4j.description = "100 tokens, 100 per 1s greedy".into();
        assert_eq!(Cause::of(&bucket4j, 150), Cause::Bursts);
        bucket4j.description = "100 tokens, 100 per 1s intervally".into();
        assert_eq!(
            Cause::of(&bucket4j, 150),
            Cause::WindowEdges,
            "a refill all at once is a window's edge"
        );
        assert_eq!(Cause::of(&run("sliding-log", 200.0), 150), Cause::Limit);
        let mut clustered = run("fixed-window", 100.0);
        clustered.instances = Some(vec![100, 100]);
        clustered.description = format!("100 per 1s, 2 instances, {OWN_COUNTERS}");
        assert_eq!(Cause::of(&clustered, 150), Cause::Instances);
        clustered.description =
            "100 per 1s, 2 instances, one shared counter, windows by each instance's clock".into();
        assert_eq!(Cause::of(&clustered, 150), Cause::SharedClocks);
        clustered.outages = Some(Vec::new());
        assert_eq!(Cause::of(&clustered, 150), Cause::Outages);
        // Kept per key: many clients, unless requests without a key pass.
        let mut per_key = run("nginx-limit-req", 100.0);
        per_key.keys = Some(
            serde_json::from_value(serde_json::json!({
                "keys": 3, "throttled": 1, "worst_rolling_p50": 2, "worst_rolling_p99": 9,
                "worst_rolling_max": 9, "worst_key": 7, "top_1pct_share": 0.5,
                "state": { "keys_alive_max": 2, "bytes_per_key": null, "bytes": null,
                    "store_ops_per_request": null, "resets_per_sec": 0.0 }
            }))
            .unwrap(),
        );
        assert_eq!(Cause::of(&per_key, 150), Cause::Clients);
        per_key.keys.as_mut().unwrap().empty_unlimited = true;
        assert_eq!(Cause::of(&per_key, 150), Cause::Unkeyed);
        let runs = [
            run("fixed-window", 100.0),
            run("token-bucket", 100.0),
            run("kong", 100.0),
        ];
        let causes = causes(&runs);
        assert_eq!(
            causes,
            [
                (Cause::WindowEdges, vec!["fixed-window", "kong"]),
                (Cause::Bursts, vec!["token-bucket"])
            ]
        );
    }
}
