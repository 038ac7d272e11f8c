//! Sizing: for each limiter, the largest threshold (or rate) that keeps the
//! worst second within the backend's capacity — for any traffic, from the
//! bound, and on the scenario's workloads, simulated — and what it costs.

use anyhow::{Context as _, Result};
use rayon::prelude::*;
use serde::Serialize;

use crate::limiter::RateLimiter;
use crate::limiter::Setting::Companion;
use crate::scenario::{Backend, NamedLimiter, Scenario};
use crate::sim::{self, Options};
use crate::time::Nanos;

mod together;

use self::together::together;
pub use self::together::{Setting, Together, Value};

/// How many settings the sizing chart samples per limiter.
const SWEEP_POINTS: u64 = 24;

/// A safe setting, if there is one.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Safe {
    /// Every value is safe (another layer, or the traffic itself, stays under capacity).
    Any,
    /// Not even the smallest value is safe.
    None,
    /// The largest safe value.
    Value {
        /// The parameter's value.
        value: u64,
        /// The limiter's effective parameters at that value.
        description: String,
        /// Its worst second: the bound, or the simulated worst over all workloads and replications.
        worst_1s: u64,
        /// The simulated worst second at this value, over all workloads and replications.
        simulated_1s: u64,
        /// What this setting costs on each workload.
        costs: Vec<Cost>,
    },
}

/// What a setting costs on one workload (summed over replications).
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    /// The workload.
    pub workload: String,
    /// Requests offered (of clients that retry: requests, not attempts).
    pub offered: u64,
    /// Requests rejected (of clients that retry: never admitted).
    pub rejected: u64,
    /// Share of the offered requests rejected.
    pub rejected_share: f64,
    /// Rejected while fewer than `capacity` had been admitted in the trailing second.
    pub rejected_with_spare_capacity: u64,
    /// Whether the workload is an adversary's pattern, not traffic: its
    /// rejections cost no real client anything.
    pub adversary: bool,
}

/// The sizing of one limiter.
#[derive(Clone, Debug, Serialize)]
pub struct Sizing {
    /// The limiter's name.
    pub limiter: String,
    /// Its kind.
    pub kind: String,
    /// What is varied, like `threshold` or `rate`.
    pub parameter: String,
    /// The parameter's value in the scenario.
    pub current: u64,
    /// Its bound over 1 s at the current value.
    #[serde(serialize_with = "crate::summary::unbounded::serialize")]
    pub current_bound_1s: u64,
    /// Largest value whose bound over 1 s is within capacity.
    pub safe_any_traffic: Safe,
    /// Largest value whose simulated worst second is within capacity on every
    /// workload, and (with a queue) with no request dropped.
    pub safe_on_workloads: Safe,
    /// The sizing parameter and its companion (a rate and its burst) set
    /// together: the cheapest settings found; `None` for a kind with one
    /// setting to size.
    pub together: Option<Together>,
    /// (value, simulated worst 1 s, bound over 1 s) over a range of values,
    /// for the chart; no bound is `null` in JSON.
    #[serde(serialize_with = "sweep_points")]
    pub sweep: Vec<(u64, u64, u64)>,
}

/// The sizing sweep's points, their bounds as [`crate::summary::unbounded`] writes them.
fn sweep_points<S: serde::Serializer>(
    points: &[(u64, u64, u64)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(
        points
            .iter()
            .map(|&(value, worst, bound)| (value, worst, crate::summary::unbounded::option(bound))),
    )
}

/// The whole sizing report.
#[derive(Clone, Debug, Serialize)]
pub struct SizingReport {
    /// The scenario's name.
    pub scenario: String,
    /// The capacity sized against, requests per second.
    pub capacity: u64,
    /// Replications simulated per setting.
    pub replications: u64,
    /// One entry per limiter.
    pub limiters: Vec<Sizing>,
}

/// Sizes every limiter of `scenario` against `capacity` requests per second;
/// `progress` is called as each limiter is done.
pub fn size(
    scenario: &Scenario,
    capacity: u64,
    replications: u64,
    progress: &(dyn Fn() + Sync),
) -> Result<SizingReport> {
    let queue = scenario.backend.and_then(|b| b.queue);
    let capacity_per_sec =
        std::num::NonZeroU64::new(capacity).context("the capacity must be at least 1")?;
    let scenario = &scenario
        .clone()
        .with_backend(Backend {
            capacity_per_sec,
            queue,
        })
        .map_err(anyhow::Error::msg)?;
    let limiters = scenario
        .limiters
        .par_iter()
        .map(|limiter| {
            let sized = size_limiter(scenario, limiter, capacity, replications);
            progress();
            sized
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SizingReport {
        scenario: scenario.name.clone(),
        capacity,
        replications,
        limiters,
    })
}

#[derive(Clone, Copy)]
struct Probe<'a> {
    scenario: &'a Scenario,
    named: &'a NamedLimiter,
    replications: u64,
}

impl<'a> Probe<'a> {
    /// The same probe with the companion setting at `value`.
    fn with_companion(&self, value: u64, named: &'a mut Option<NamedLimiter>) -> Result<Probe<'a>> {
        let config = self.named.config.with_setting(Companion, value);
        *named = Some(
            self.named
                .rebuilt(config, self.scenario.context(), self.scenario.duration)
                .map_err(anyhow::Error::msg)?,
        );
        Ok(Probe {
            named: named.as_ref().expect("just set"),
            ..*self
        })
    }

    /// The limiter with its sizing parameter at `value`, or why that value
    /// cannot be built (a sliding log longer than memory allows, say).
    fn limiter(&self, value: u64) -> Result<NamedLimiter> {
        let (parameter, _) = self.named.config.parameter(self.scenario.context());
        self.named
            .rebuilt(
                self.named.config.with_parameter(value.max(1)),
                self.scenario.context(),
                self.scenario.duration,
            )
            .map_err(anyhow::Error::msg)
            .with_context(|| {
                format!(
                    "sizing limiter {:?}: {parameter} = {value}",
                    self.named.name
                )
            })
    }

    fn bound_1s(&self, value: u64) -> Result<u64> {
        Ok(self.limiter(value)?.limiter.bound(Nanos::SECOND))
    }

    /// The worst second over all workloads and replications, the requests
    /// the backend dropped (with a queue), and the costs.
    fn simulate(&self, value: u64) -> Result<(u64, u64, Vec<Cost>)> {
        self.simulate_within(value, None)
    }

    /// Whether the setting at `value` keeps the worst second of every
    /// workload and replication within `capacity`, nothing dropped: its
    /// runs stop as soon as one is not (most of a bisection's settings
    /// are found unsafe early, a log's runs often in their first minutes).
    fn within(&self, value: u64, capacity: u64) -> Result<bool> {
        match self.simulate_within(value, Some(capacity)) {
            Ok((worst, dropped, _)) => Ok(worst <= capacity && dropped == 0),
            Err(err) if err.chain().any(|cause| cause.is::<sim::Exceeded>()) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// [`Probe::simulate`], stopped early past `stop_above` ([`Options::stop_above`]).
    fn simulate_within(
        &self,
        value: u64,
        stop_above: Option<u64>,
    ) -> Result<(u64, u64, Vec<Cost>)> {
        let mut scenario = self.scenario.clone();
        scenario.limiters = vec![self.limiter(value)?];
        // Sizing reads each run's worst second, its backend's figures and
        // what it turned away: not the figures per key, nor the profile's
        // other intervals (a replayed log's figures per key were a third
        // of each of its runs).
        scenario.metrics.per_key = false;
        scenario.metrics.profile.clear();
        let mut costs: Vec<Cost> = scenario
            .workloads
            .iter()
            .map(|w| Cost {
                workload: w.name.clone(),
                offered: 0,
                rejected: 0,
                rejected_share: 0.0,
                rejected_with_spare_capacity: 0,
                adversary: w.adversary().is_some(),
            })
            .collect();
        let (mut worst, mut dropped) = (0, 0);
        for replication in 0..self.replications {
            let outcome = sim::simulate(
                &scenario,
                &Options {
                    replication,
                    skip_timeline: true,
                    // A whole-second log is safe only if every placement
                    // of its seconds run is, as `check` judges it (packed
                    // in replication 0, as a run packs it).
                    packed: replication == 0,
                    stop_above,
                    ..Options::default()
                },
            )?;
            // One limiter: one run per workload.
            for (cost, run) in costs.iter_mut().zip(outcome.runs()) {
                let summary = &run.summary;
                let backend = summary
                    .backend
                    .as_ref()
                    .expect("sizing always has a backend");
                // The second `check` judges: the packed one when more.
                worst = worst.max(summary.judged_1s().unwrap_or(backend.worst_1s));
                dropped += backend.queue.as_ref().map_or(0, |q| q.dropped);
                match &summary.closed_loop {
                    // A retried request rejected then admitted cost its client a wait, not the request.
                    Some(closed) => {
                        cost.offered += closed.requests;
                        cost.rejected += closed.requests - closed.goodput;
                    }
                    None => {
                        cost.offered += summary.offered;
                        cost.rejected += summary.rejected;
                    }
                }
                cost.rejected_with_spare_capacity += backend.rejected_with_spare_capacity;
            }
        }
        for cost in &mut costs {
            cost.rejected_share = if cost.offered == 0 {
                0.0
            } else {
                cost.rejected as f64 / cost.offered as f64
            };
        }
        Ok((worst, dropped, costs))
    }

    /// The safe setting at `value`, simulated once: its worst second is
    /// `bound_1s` when safe for any traffic, else the simulated one.
    fn safe(&self, value: u64, bound_1s: Option<u64>) -> Result<Safe> {
        let (simulated_1s, _, costs) = self.simulate(value)?;
        Ok(Safe::Value {
            value,
            description: self.limiter(value)?.description,
            worst_1s: bound_1s.unwrap_or(simulated_1s),
            simulated_1s,
            costs,
        })
    }
}

fn size_limiter(
    scenario: &Scenario,
    named: &NamedLimiter,
    capacity: u64,
    replications: u64,
) -> Result<Sizing> {
    let probe = Probe {
        scenario,
        named,
        replications,
    };
    let (parameter, current) = named.config.parameter(scenario.context());
    // Every bound grows at least as fast as the parameter, so no safe value
    // exceeds a few times the capacity; past that, a bound within capacity
    // means another layer caps the limiter whatever this value is.
    let ceiling = capacity.saturating_mul(4).saturating_add(4);
    let least = named.config.least_parameter();
    let safe_any_traffic = match largest(least, ceiling, |v| Ok(probe.bound_1s(v)? <= capacity))? {
        Largest::All => Safe::Any,
        Largest::None => Safe::None,
        Largest::Value(v) => probe.safe(v, Some(probe.bound_1s(v)?))?,
    };
    // Past the most requests a workload offers, a window lets everything through.
    let offered = probe
        .simulate(current)?
        .2
        .iter()
        .map(|c| c.offered)
        .max()
        .unwrap_or(0);
    let offered_ceiling = offered.saturating_add(1).max(ceiling);
    let safe_on_workloads = match largest(least, offered_ceiling, |v| probe.within(v, capacity))? {
        Largest::All => Safe::Any,
        Largest::None => Safe::None,
        Largest::Value(v) => probe.safe(v, None)?,
    };
    let top = (current.max(1) * 2).max(match &safe_on_workloads {
        Safe::Value { value, .. } => value + value / 4,
        _ => 0,
    });
    // The sweep passes through both safe values, so the chart's marks sit on its lines.
    let marks = [&safe_any_traffic, &safe_on_workloads]
        .into_iter()
        .filter_map(|safe| match safe {
            Safe::Value { value, .. } => Some(*value),
            _ => None,
        });
    let values: Vec<u64> = (1..=SWEEP_POINTS)
        .map(|i| (top * i).div_ceil(SWEEP_POINTS))
        .chain(marks)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let sweep = values
        .par_iter()
        .map(|&v| Ok((v, probe.simulate(v)?.0, probe.bound_1s(v)?)))
        .collect::<Result<Vec<_>>>()?;
    let together = match named.config.companion(probe.scenario.context()) {
        Some(companion) => Some(together(probe, capacity, offered_ceiling, companion)?),
        None => None,
    };
    Ok(Sizing {
        together,
        limiter: named.name.clone(),
        kind: named.config.kind().to_string(),
        parameter: parameter.to_string(),
        current,
        current_bound_1s: probe.bound_1s(current)?,
        safe_any_traffic,
        safe_on_workloads,
        sweep,
    })
}

enum Largest {
    All,
    None,
    Value(u64),
}

/// The largest v in [low, high] for which `safe(v)` holds, assuming safety
/// only fails from some value on; `All` when even `high` is safe. Bounds are
/// monotone in the parameter; simulated worst counts are assumed to be (a
/// larger threshold admits a superset for fixed windows, and in practice for
/// the others), so the search is a bisection.
fn largest(low: u64, high: u64, mut safe: impl FnMut(u64) -> Result<bool>) -> Result<Largest> {
    if !safe(low)? {
        return Ok(Largest::None);
    }
    if safe(high)? {
        return Ok(Largest::All);
    }
    let (mut good, mut bad) = (low, high);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if safe(mid)? { good = mid } else { bad = mid }
    }
    Ok(Largest::Value(good))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe of the scenario's first limiter, one replication.
    fn first_probe(scenario: &Scenario) -> Probe<'_> {
        Probe {
            scenario,
            named: &scenario.limiters[0],
            replications: 1,
        }
    }

    /// A small shop: a steady 20/s with bursts of 40 at window edges, an
    /// nginx zone in front of a backend of 30/s.
    fn shop() -> Scenario {
        shop_with(
            r#"kind = "nginx-limit-req"
rate = "25r/s"
burst = 10
nodelay = true"#,
        )
    }

    /// The shop with the limiter `edge` of these fields.
    fn shop_with(limiter: &str) -> Scenario {
        crate::scenario::parse(&shop_text(limiter), std::path::Path::new("shop.toml")).unwrap()
    }

    /// [`shop_with`]'s scenario file.
    fn shop_text(limiter: &str) -> String {
        format!(
            r#"
name = "shop"
duration = "6s"
seed = 5
[backend]
capacity = 30
[[workload]]
name = "sale"
sources = [
  {{ kind = "uniform", rate = 20 }},
  {{ kind = "boundary", period = "1s", before = 20, after = 20, spread = "50ms" }},
]
[[limiter]]
name = "edge"
{limiter}
"#
        )
    }

    #[test]
    fn rate_and_burst_sized_together_are_the_cheapest_safe_pair() {
        let scenario = shop();
        let report = size(&scenario, 30, 1, &|| {}).unwrap();
        let sized = &report.limiters[0];
        let together = sized
            .together
            .as_ref()
            .expect("nginx has a rate and a burst");
        let any = together.any_traffic.as_ref().expect("some pair is safe");
        assert!(any.bound_1s <= 30, "{any:?}");
        // Brute force: every rate and burst whose bound holds 30 in 1 s.
        let probe = first_probe(&scenario);
        let mut least = u64::MAX;
        for rate in 1..=30 {
            let mut slot = None;
            let at_rate = probe.with_companion(rate, &mut slot).unwrap();
            for burst in 0..=124 {
                if at_rate.bound_1s(burst).unwrap() <= 30 {
                    let (_, _, costs) = at_rate.simulate(burst).unwrap();
                    least = least.min(costs.iter().map(|c| c.rejected).sum());
                }
            }
        }
        assert_eq!(any.rejected(), least, "{any:?}");
        assert_eq!(
            any.lines,
            [
                format!(
                    "limit_req_zone … zone=edge rate={}r/s;",
                    any.values[1].value
                ),
                format!("limit_req zone=edge burst={} nodelay;", any.values[0].value),
            ]
        );
        // On the workloads: within capacity there, and never dearer than
        // sizing the burst alone at today's rate.
        let on = together.on_workloads.as_ref().expect("some pair is safe");
        assert!(on.worst_1s <= 30, "{on:?}");
        let Safe::Value { value, .. } = &sized.safe_on_workloads else {
            panic!(
                "the burst alone has a safe value: {:?}",
                sized.safe_on_workloads
            );
        };
        let alone: u64 = probe
            .simulate(*value)
            .unwrap()
            .2
            .iter()
            .map(|c| c.rejected)
            .sum();
        assert!(on.rejected() <= alone, "{} > {alone}", on.rejected());
    }

    /// A fixed window's threshold and length together: the cheapest of every
    /// round length and every threshold whose bound holds the backend.
    #[test]
    fn a_window_and_its_threshold_sized_together_are_the_cheapest_safe_pair() {
        let scenario = shop_with("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 25");
        let report = size(&scenario, 30, 1, &|| {}).unwrap();
        let together = report.limiters[0]
            .together
            .as_ref()
            .expect("a window has a length");
        let any = together.any_traffic.as_ref().expect("some pair is safe");
        assert!(any.bound_1s <= 30, "{any:?}");
        let probe = first_probe(&scenario);
        let mut least = (u64::MAX, 0);
        for window in crate::limiter::Unit::WINDOWS {
            let mut slot = None;
            let at = probe.with_companion(window.get(), &mut slot).unwrap();
            for threshold in 1..=124 {
                if at.bound_1s(threshold).unwrap() <= 30 {
                    let (_, _, costs) = at.simulate(threshold).unwrap();
                    let rejected = costs.iter().map(|c| c.rejected).sum();
                    least = least.min((rejected, window.get()));
                }
            }
        }
        assert_eq!(any.rejected(), least.0, "{any:?}");
        assert_eq!(any.values[1].name, "window");
        assert_eq!(
            any.lines,
            [
                format!("threshold = {}", any.values[0].value),
                format!("window = \"{}\"", Nanos(any.values[1].value).exact_text()),
            ]
        );
        // Here the cheapest window is not today's second: sizing the
        // threshold alone would have missed it.
        assert_ne!(least.1, Nanos::SECOND.get(), "{least:?}");
    }

    /// A chain's two layers together: the first layer's threshold and the
    /// bucket's rate, each written where it goes in `layers`.
    #[test]
    fn a_chain_s_layers_are_sized_together() {
        let scenario = shop_with(
            "kind = \"chain\"\nlayers = [{ kind = \"fixed-window\", window = \"1s\", threshold = 25 }, { kind = \"token-bucket\", rate = 25, burst = 5 }]",
        );
        let report = size(&scenario, 30, 1, &|| {}).unwrap();
        let together = report.limiters[0]
            .together
            .as_ref()
            .expect("a chain has two layers");
        let any = together.any_traffic.as_ref().expect("some pair is safe");
        assert!(any.bound_1s <= 30, "{any:?}");
        let names: Vec<&str> = any.values.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["layers[0].threshold", "layers[1].rate"]);
        // The bucket's rate alone holds 30 (rate + burst 5 within it): the
        // window need not bind, and the cheapest pair is at most as dear as
        // today's window with the safe rate.
        let probe = first_probe(&scenario);
        let mut slot = None;
        let at = probe.with_companion(25, &mut slot).unwrap();
        let today: u64 = at.simulate(25).unwrap().2.iter().map(|c| c.rejected).sum();
        assert!(at.bound_1s(25).unwrap() <= 30);
        assert!(any.rejected() <= today, "{} > {today}", any.rejected());
    }

    /// A setting's runs stopped at their first second over capacity give
    /// the whole runs' verdict: stopped only when the whole runs go over
    /// (or their queue drops a request), and safe exactly when they are —
    /// on runs of many chunks, so that they do stop early.
    #[test]
    fn runs_stopped_early_give_the_whole_runs_verdict() {
        let limiters = [
            "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 30",
            "kind = \"token-bucket\"\nrate = 25\nburst = 30",
            "kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 30",
            "kind = \"nginx-limit-req\"\nrate = \"25r/s\"\nburst = 10\nnodelay = true",
        ];
        let mut stopped = 0;
        for limiter in limiters {
            for backend in ["capacity = 30", "capacity = 30\nqueue = 4"] {
                let scenario = crate::scenario::parse(
                    &shop_text(limiter)
                        .replace("duration = \"6s\"", "duration = \"900s\"")
                        .replace("capacity = 30", backend),
                    std::path::Path::new("shop.toml"),
                )
                .unwrap();
                let probe = first_probe(&scenario);
                for capacity in [20, 45, 60] {
                    for value in [1, 10, 25, 30, 40, 60, 200] {
                        let (worst, dropped, _) = probe.simulate(value).unwrap();
                        let whole = worst <= capacity && dropped == 0;
                        let said = format!("{limiter} ({backend}) at {value} against {capacity}");
                        assert_eq!(probe.within(value, capacity).unwrap(), whole, "{said}");
                        if let Err(err) = probe.simulate_within(value, Some(capacity)) {
                            assert!(err.is::<sim::Exceeded>(), "{said}: {err}");
                            assert!(!whole, "{said}: stopped, yet safe");
                            stopped += 1;
                        }
                    }
                }
            }
        }
        assert!(stopped > 20, "only {stopped} runs stopped early");
    }

    #[test]
    fn finds_the_last_safe_value() {
        let found = largest(1, 1_000, |v| Ok(v * 2 <= 150)).unwrap();
        assert!(matches!(found, Largest::Value(75)));
        assert!(matches!(
            largest(1, 10, |_| Ok(true)).unwrap(),
            Largest::All
        ));
        assert!(matches!(
            largest(1, 10, |_| Ok(false)).unwrap(),
            Largest::None
        ));
    }
}
