//! Slices of time for the limiters a split by key cannot serve: a global
//! limiter decides each request from every key's. A fixed window whose
//! edges are fixed in time starts each window empty, with nothing carried
//! over, so the requests of one window decide that window alone: cut at an
//! edge of every global window, each slice of time is decided exactly by
//! itself. Nothing else resets so (a sliding window or a bucket carries its
//! past across any instant): those are refused, with the reason.

use anyhow::{Result, bail};

use super::LogFacts;
use crate::limiter::{Limiter, RateLimiter as _};
use crate::scenario::Scenario;
use crate::time::NANOS_PER_SEC;

/// The most edges of the longest window looked at for one every other
/// window shares, per cut.
const MAX_STEPS: u64 = 1_000_000;

/// Where each of `parts` slices of time but the last ends, for the
/// scenario's global limiters: the first instant at or after each `i/parts`
/// of the run that is an edge of every global fixed window (and, for a log
/// whose requests a run also packs against its whole seconds' edges, of its
/// seconds: a packed request stays in its slice). `None` when no limiter is
/// global; refused when a global limiter is not a fixed window with fixed
/// edges.
pub fn cuts(scenario: &Scenario, logs: &[LogFacts], parts: u64) -> Result<Option<Vec<u64>>> {
    let mut edges = Vec::new();
    for named in scenario
        .limiters
        .iter()
        .filter(|l| !l.limiter.keys_matter())
    {
        match (&named.limiter, named.limiter.window_edges()) {
            (Limiter::FixedWindow(_), Some((length, phase))) => {
                edges.push((length.get(), phase.get()))
            }
            (Limiter::FixedWindow(_), None) => bail!(
                "{}: limiter {:?} is global (not per key), so no split by key is exact for it, and its windows start at its first request, so no instant is known to start one: it cannot be split by time either; give it align = \"epoch\" or an anchor, or partition a copy without it",
                scenario.path.display(),
                named.name
            ),
            _ => bail!(
                "{}: limiter {:?} ({}) is global (not per key), so no split by key is exact for it, and it carries its past across every instant, so no split by time is either; only a global fixed window (fixed edges, nothing carried over) is split by time: partition a copy without it",
                scenario.path.display(),
                named.name,
                named.config.kind()
            ),
        }
    }
    if edges.is_empty() {
        return Ok(None);
    }
    edges.extend(
        logs.iter()
            .filter_map(|log| Some((NANOS_PER_SEC, log.origin?))),
    );
    edges.sort_unstable_by_key(|&(length, _)| std::cmp::Reverse(length));
    let (longest, phase) = edges[0];
    let duration = u128::from(scenario.duration.get());
    let mut cuts = Vec::new();
    for i in 1..parts {
        let target = (duration * u128::from(i) / u128::from(parts)) as u64;
        let mut at = target.checked_add((phase % longest + longest - target % longest) % longest);
        let mut steps = 0;
        let cut = loop {
            match at {
                Some(t)
                    if edges
                        .iter()
                        .all(|&(length, phase)| t % length == phase % length) =>
                {
                    break t;
                }
                Some(t) if steps < MAX_STEPS => {
                    at = t.checked_add(longest);
                    steps += 1;
                }
                _ => bail!(
                    "{}: the global windows (and a packed log's seconds) share no edge within {MAX_STEPS} of the longest window's after {}: no instant splits them all by time; give them lengths that divide one another",
                    scenario.path.display(),
                    crate::time::Nanos(target)
                ),
            }
        };
        cuts.push(cut);
    }
    Ok(Some(cuts))
}
