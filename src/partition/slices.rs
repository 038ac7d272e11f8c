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

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenario of `duration` whose limiters are `limiters` (TOML tables).
    fn scenario(duration: &str, limiters: &str) -> Scenario {
        let text = format!(
            "duration = \"{duration}\"\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 10 }}]\n{limiters}"
        );
        crate::scenario::parse(&text, std::path::Path::new("s.toml")).unwrap()
    }

    fn window(name: &str, window: &str, extra: &str) -> String {
        format!(
            "[[limiter]]\nname = \"{name}\"\nkind = \"fixed-window\"\nwindow = \"{window}\"\nthreshold = 5\n{extra}\n"
        )
    }

    fn log(origin: Option<u64>) -> LogFacts {
        LogFacts {
            keys: 1,
            turned_away: None,
            labelled: None,
            packed: origin.is_some(),
            origin,
            absent: 0,
            blank: 0,
        }
    }

    #[test]
    fn each_cut_is_the_first_edge_every_global_window_shares_after_its_share_of_the_run() {
        // 1 s and 300 ms windows share an edge every 3 s; a per-key limiter is not cut for.
        let limiters = window("a", "1s", "")
            + &window("b", "300ms", "")
            + &window("k", "7ms", "per = \"key\"");
        let s = scenario("100s", &limiters);
        let cuts = cuts(&s, &[log(None)], 7).unwrap().unwrap();
        assert_eq!(cuts.len(), 6);
        for (i, &cut) in cuts.iter().enumerate() {
            let target = 100 * NANOS_PER_SEC * (i as u64 + 1) / 7;
            assert!(
                cut >= target && cut < target + 3 * NANOS_PER_SEC,
                "{cut} for {target}"
            );
            assert_eq!(cut % (3 * NANOS_PER_SEC), 0, "{cut}");
        }
        // Anchored at 250 ms, with a packed log's seconds from 250 ms: edges at 250 ms + k s.
        let s = scenario(
            "10s",
            &window("a", "500ms", "align = { anchor = \"250ms\" }"),
        );
        let cuts = super::cuts(&s, &[log(Some(250_000_000))], 4)
            .unwrap()
            .unwrap();
        assert_eq!(cuts, vec![3_250_000_000, 5_250_000_000, 8_250_000_000]);
        // No global limiter: no slices.
        assert_eq!(
            super::cuts(
                &scenario("10s", &window("k", "1s", "per = \"key\"")),
                &[],
                4
            )
            .unwrap(),
            None
        );
    }

    #[test]
    fn a_global_limiter_that_carries_its_past_or_shares_no_edge_is_refused_with_the_reason() {
        let sliding =
            "[[limiter]]\nname = \"log\"\nkind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 5\n";
        let err = cuts(&scenario("10s", sliding), &[], 2)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("limiter \"log\" (sliding-log) is global")
                && err.contains("carries its past"),
            "{err}"
        );
        let first = window("f", "1s", "align = \"first-request\"");
        let err = cuts(&scenario("10s", &first), &[], 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("start at its first request"), "{err}");
        // Edges at k s and at 250 ms + k s never meet.
        let apart = window("a", "1s", "") + &window("b", "1s", "align = { anchor = \"250ms\" }");
        let err = cuts(&scenario("10s", &apart), &[], 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("share no edge"), "{err}");
    }
}
