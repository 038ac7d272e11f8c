//! Two settings sized together — a rate and its burst — for the cheapest
//! pair that keeps the worst second within capacity, printed as the lines
//! that go in the configuration.

use anyhow::Result;
use rayon::prelude::*;
use serde::Serialize;

use super::{Cost, Largest, Probe, largest};
use crate::limiter::{Companion, RateLimiter, Unit};
use crate::time::Nanos;

/// Two settings sized together: of the pairs that keep the worst second
/// within capacity, the one that turns away least of the workloads' demand.
#[derive(Clone, Debug, Serialize)]
pub struct Together {
    /// Within capacity on the workloads simulated.
    pub on_workloads: Option<Setting>,
    /// Within capacity for any traffic: its bound over 1 s holds it.
    pub any_traffic: Option<Setting>,
    /// What the settings are per: "per instance; ×N with N instances" for
    /// a cluster of local instances, "per client" for a limiter per key.
    pub per: Option<String>,
}

/// One setting of both values, and what it does.
#[derive(Clone, Debug, Serialize)]
pub struct Setting {
    /// The sizing parameter's name and value, then the companion's.
    pub values: Vec<Value>,
    /// The configuration as its gateway writes it (nginx's lines, Traefik's
    /// keys), or as burstsim's fields.
    pub lines: Vec<String>,
    /// The simulated worst second, over all workloads and replications.
    pub worst_1s: u64,
    /// The most it can admit in 1 s for any traffic (`null`: unbounded).
    #[serde(serialize_with = "crate::summary::unbounded::serialize")]
    pub bound_1s: u64,
    /// What it costs on each workload.
    pub costs: Vec<Cost>,
}

/// A setting's name and value.
#[derive(Clone, Debug, Serialize)]
pub struct Value {
    /// As the kind's field names it: `rate`, `burst`, `window`, a chain's
    /// `layer 2 rate`…
    pub name: String,
    /// Its value: a count, or a window's length in nanoseconds.
    pub value: u64,
    /// As a scenario writes it: `13`, `"100ms"`.
    pub toml: String,
}

impl Setting {
    /// Requests the workloads (not an adversary's patterns) had turned away.
    pub fn rejected(&self) -> u64 {
        self.costs
            .iter()
            .filter(|c| !c.adversary)
            .map(|c| c.rejected)
            .sum()
    }
}

/// Companion values tried first: every twelfth of the capacity and the
/// powers of two below it, and the current value.
const COARSE_STEPS: u64 = 12;

/// Up to this capacity, the setting for any traffic tries every companion
/// value (a bisection of bounds and one simulation each): the cheapest on
/// that frontier exactly.
const EVERY_VALUE_UP_TO: u64 = 256;

/// The parameter and its companion sized together: for each companion value
/// tried, the largest safe parameter (on the workloads; for any traffic);
/// of those, the one that rejects least of the workloads' requests, then
/// refined around it by halving the step.
pub(super) fn together(
    probe: Probe,
    capacity: u64,
    offered_ceiling: u64,
    companion: Companion,
) -> Result<Together> {
    let Companion {
        name,
        parameter: parameter_name,
        current,
        unit,
    } = companion;
    let ceiling = capacity.saturating_mul(4).saturating_add(4);
    let on_workloads = cheapest(probe, capacity, (current, unit), false, |probe| {
        let found = largest(probe.named.config.least_parameter(), offered_ceiling, |v| {
            probe.within(v, capacity)
        })?;
        // Safe whatever the parameter: it does not bind below the traffic.
        Ok(match found {
            Largest::All => Largest::Value(offered_ceiling),
            other => other,
        })
    })?;
    let every = capacity <= EVERY_VALUE_UP_TO;
    let any_traffic = cheapest(probe, capacity, (current, unit), every, |probe| {
        let found = largest(probe.named.config.least_parameter(), ceiling, |v| {
            Ok(probe.bound_1s(v)? <= capacity)
        })?;
        // Safe whatever the parameter: another layer holds the bound.
        Ok(match found {
            Largest::All => Largest::Value(offered_ceiling),
            other => other,
        })
    })?;
    let setting = |found: Option<(u64, u64)>| -> Result<Option<Setting>> {
        let Some((companion, value)) = found else {
            return Ok(None);
        };
        let mut slot = None;
        let probe = probe.with_companion(companion, &mut slot)?;
        let limiter = probe.limiter(value)?;
        let (worst_1s, _, costs) = probe.simulate(value)?;
        let (parameter, _) = limiter.config.parameter(probe.scenario.context());
        let values = vec![
            Value {
                name: parameter_name
                    .clone()
                    .unwrap_or_else(|| parameter.to_string()),
                value,
                toml: Unit::Count.toml(value),
            },
            Value {
                name: name.clone(),
                value: companion,
                toml: unit.toml(companion),
            },
        ];
        let mut lines = limiter
            .config
            .gateway_lines(&probe.named.zone)
            .unwrap_or_else(|| {
                values
                    .iter()
                    .map(|v| format!("{} = {}", v.name, v.toml))
                    .collect()
            });
        if value >= offered_ceiling {
            lines.push(format!(
                "# {parameter} does not bind at {value} (more than these workloads send): any value this large does the same; the other setting holds the backend"
            ));
        }
        Ok(Some(Setting {
            values,
            lines,
            worst_1s,
            bound_1s: limiter.limiter.bound(Nanos::SECOND),
            costs,
        }))
    };
    let per = match &probe.named.config {
        crate::limiter::LimiterConfig::Cluster(cluster)
            if matches!(cluster.cluster.mode, crate::limiter::cluster::Mode::Local) =>
        {
            Some(format!(
                "per instance; ×{0} with {0} instances",
                cluster.cluster.instances
            ))
        }
        crate::limiter::LimiterConfig::PerKey(_) => Some("per client".to_string()),
        _ => None,
    };
    Ok(Together {
        on_workloads: setting(on_workloads)?,
        any_traffic: setting(any_traffic)?,
        per,
    })
}

/// The (companion, parameter) pair whose largest safe parameter (as
/// `search` finds it at each companion value) rejects least; `None` when no
/// companion value tried has a safe parameter. A count tries every value up
/// to the capacity when `every`, else a coarse set refined around the best;
/// a window tries the round lengths ([`Unit::WINDOWS`]) and its own.
fn cheapest(
    probe: Probe,
    capacity: u64,
    (current, unit): (u64, Unit),
    every: bool,
    search: impl Fn(Probe) -> Result<Largest> + Sync,
) -> Result<Option<(u64, u64)>> {
    let top = capacity.max(1);
    // (rejected, companion, parameter) at companion `c`, if any parameter is safe.
    let at = |c: u64| -> Result<Option<(u64, u64, u64)>> {
        let mut slot = None;
        let probe = probe.with_companion(c, &mut slot)?;
        let value = match search(probe)? {
            Largest::None => return Ok(None),
            Largest::All => return Ok(None),
            Largest::Value(v) => v,
        };
        let (_, _, costs) = probe.simulate(value)?;
        let rejected = costs
            .iter()
            .filter(|c| !c.adversary)
            .map(|c| c.rejected)
            .sum();
        Ok(Some((rejected, c, value)))
    };
    let steps = if every { top } else { COARSE_STEPS };
    let coarse: std::collections::BTreeSet<u64> = match unit {
        Unit::Count => (1..=steps)
            .map(|i| (top * i).div_ceil(steps))
            .chain((0..64).map(|k| 1u64 << k).take_while(|&v| v < top))
            .chain((current <= top).then_some(current))
            .collect(),
        Unit::Window => Unit::WINDOWS
            .iter()
            .map(|w| w.get())
            .chain([current])
            .collect(),
    };
    let tried: Vec<Option<(u64, u64, u64)>> =
        coarse.par_iter().map(|&c| at(c)).collect::<Result<_>>()?;
    // Least rejected; then the larger companion (more room for the traffic).
    let better = |a: &(u64, u64, u64), b: &(u64, u64, u64)| {
        (a.0, std::cmp::Reverse(a.1)) < (b.0, std::cmp::Reverse(b.1))
    };
    let Some(mut best) = tried
        .into_iter()
        .flatten()
        .reduce(|a, b| if better(&b, &a) { b } else { a })
    else {
        return Ok(None);
    };
    let mut step = match unit {
        Unit::Count => top.div_ceil(steps) / 2,
        Unit::Window => 0,
    };
    while step > 0 {
        let around = [best.1.saturating_sub(step).max(1), (best.1 + step).min(top)];
        for found in around
            .par_iter()
            .map(|&c| at(c))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
        {
            if better(&found, &best) {
                best = found;
            }
        }
        step /= 2;
    }
    Ok(Some((best.1, best.2)))
}
