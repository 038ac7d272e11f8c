//! The target's answers against the model's on the actual send times.
//!
//! The target decided each request at an instant we cannot see: after we
//! began sending it, before its answer arrived, read on a clock that may
//! tick coarsely (nginx and HAProxy read milliseconds). So the model is
//! replayed request by request in send order and *follows* the target where
//! timing explains a difference: a disagreement is
//!
//! - **timing**: the model gives the target's answer when this request and
//!   the key's earlier ones are decided at instants the target could have
//!   decided them: the send time, the earliest (the send less the clock
//!   granularity), the latest (the answer's arrival), or for a flight longer
//!   than two ticks its quarter points. The states each such
//!   choice leads to are carried along (at most [`BEAM`] per key), so the
//!   model follows the target wherever timing explains it;
//! - **reordered**: two requests of one key in flight together, answered in
//!   the other order (one admitted instead of the other);
//! - **unexplained**: anything else — the model is not the target's twin
//!   there (or the target is not what the scenario says it is).
//!
//! Only those instants of each flight are tried: a decision that needs
//! an instant between them (a window that must open between two quarter
//! points of a long flight) is counted unexplained. Which fraction of a tick the target's clock is ahead of
//! ours is unknown too: eight phases over two ticks are tried and the one
//! explaining the most is reported.

use std::collections::HashMap;

use serde::Serialize;

use super::Record;
use crate::limiter::{Decision, Limiter, RateLimiter};
use crate::metrics::rolling::RollingCounts;
use crate::time::Nanos;

/// The most disagreements listed one by one in `probe.json`.
pub const MAX_LISTED: usize = 1_000;

/// How the target's answers compare with the model's.
#[derive(Clone, Debug, Serialize)]
pub struct Agreement {
    /// Requests answered, and so compared.
    pub compared: u64,
    /// Of them, admitted (2xx) by the target.
    pub admitted_target: u64,
    /// Admitted by the model replayed on the actual send times (on its own,
    /// never following the target).
    pub admitted_model: u64,
    /// Requests the following model decided otherwise than the target.
    pub disagreements: u64,
    /// Of those, explained by when the target could have decided.
    pub timing: u64,
    /// Of those, pairs in flight together decided in the other order.
    pub reordered: u64,
    /// Neither.
    pub unexplained: u64,
    /// The clock granularity allowed for the target, in ns.
    pub clock_granularity_ns: u64,
    /// How far ahead of the send times the target's clock was taken to be
    /// (the phase, of eight tried over two ticks, that explained the most).
    pub clock_phase_ns: u64,
    /// Requests both admitted that the model held back (nginx's `limit_req`
    /// without `nodelay`): the target's answer should come at the model's
    /// release.
    pub delayed: u64,
    /// The k-th admission's answer from the target against the model's k-th
    /// release (its send time plus its delay), the largest difference in ns:
    /// a round trip where nothing is delayed, and with delays whether the
    /// target released them when the model did. Matched by order, not by
    /// request: the target delays requests in the order they reached it,
    /// which for a burst on several connections is not the send order.
    pub release_error_max_ns: u64,
    /// The disagreements, in send order (at most [`MAX_LISTED`]).
    pub listed: Vec<Disagreement>,
}

/// One request decided otherwise.
#[derive(Clone, Debug, Serialize)]
pub struct Disagreement {
    /// Its place in the schedule.
    pub index: usize,
    /// When it was sent, scenario ns.
    pub sent: u64,
    /// When its answer arrived.
    pub answered: u64,
    /// Its identity's number.
    pub who: u32,
    /// The target admitted it.
    pub target: bool,
    /// `timing`, `reordered` or `unexplained`.
    pub class: &'static str,
}

/// The model: one limiter, or for a limiter per key one copy per key (a
/// whole per-key table cloned at every request would cost its size).
/// For each key, the states the target may be in (the model's own first),
/// each with the time of its last decision: a limiter's time never goes
/// back, so a decision moved later holds the next ones at least there.
enum Model {
    Whole(Vec<State>),
    PerKey {
        by: Box<crate::limiter::per_key::PerKey>,
        keys: HashMap<u64, Vec<State>>,
    },
}

/// The most states kept per key.
const BEAM: usize = 64;
/// Of them, the most too large to describe (never merged, and costly to copy).
const BEAM_UNDESCRIBED: usize = 16;

#[derive(Clone, Debug)]
struct State {
    limiter: Limiter,
    last: u64,
}

impl State {
    /// Decides `record` at `at`, or at the last decision's time if later.
    fn decide(&mut self, at: u64, record: &Record) -> Decision {
        self.last = self.last.max(at);
        self.limiter
            .decide_keyed::<false>(Nanos(self.last), record.key)
    }
}

impl Model {
    fn new(limiter: &Limiter) -> Model {
        match limiter {
            Limiter::PerKey(per_key) => Model::PerKey {
                by: per_key.clone(),
                keys: HashMap::new(),
            },
            other => Model::Whole(vec![State {
                limiter: other.clone(),
                last: 0,
            }]),
        }
    }

    /// The states that may decide `record`: never empty.
    fn states(&mut self, record: &Record) -> &mut Vec<State> {
        match self {
            Model::Whole(states) => states,
            Model::PerKey { by, keys } => keys.entry(by.id(record.key)).or_insert_with(|| {
                vec![State {
                    limiter: by.prototype().clone(),
                    last: 0,
                }]
            }),
        }
    }
}

/// Compares the answered `records` with `limiter`, allowing the target's
/// clock `granularity`; also returns the model's own decisions on the send
/// times, in send order, for the report.
pub fn compare(
    records: &[Record],
    limiter: &Limiter,
    granularity: Nanos,
) -> (Agreement, Vec<(Nanos, bool)>) {
    let mut answered: Vec<&Record> = records.iter().filter(|r| r.status.is_some()).collect();
    answered.sort_by_key(|r| (r.sent, r.index));
    let mut own = Model::new(limiter);
    // Counted when the backend gets them, as a run counts: a delayed
    // admission at its release.
    let mut own_decisions: Vec<(Nanos, bool)> = answered
        .iter()
        .map(|r| {
            let decision = own.states(r)[0].decide(r.sent, r);
            (
                Nanos(r.sent.saturating_add(decision.delay().get())),
                decision.admitted(),
            )
        })
        .collect();
    own_decisions.sort_by_key(|&(at, _)| at);
    // The target's clock may tick on other instants than ours: which
    // fraction of its granularity ours is ahead by is unknown, so up to
    // eight phases over two ticks (HAProxy's periods start on even
    // milliseconds) are tried, and the one explaining the most kept.
    let g = granularity.get();
    // The first phase that explains everything is kept: the others are
    // tried only while something is unexplained.
    let mut best: Option<Followed> = None;
    for k in 0..PHASES {
        let followed = follow(&answered, limiter, g, k * g.saturating_mul(2) / PHASES);
        let key = |f: &Followed| (f.unexplained(), f.differing.len());
        if best.as_ref().is_none_or(|b| key(&followed) < key(b)) {
            best = Some(followed);
        }
        if best.as_ref().is_some_and(|b| b.unexplained() == 0) {
            break;
        }
    }
    let best = best.expect("phases are tried");
    let Followed {
        differing,
        timing,
        delayed,
        reordered_at,
        phase,
    } = best;
    let reordered = reordered_at.iter().filter(|&&r| r).count() as u64;
    let disagreements = differing.len() as u64;
    let listed = differing
        .iter()
        .take(MAX_LISTED)
        .map(|&(i, explained)| {
            let r = answered[i];
            Disagreement {
                index: r.index,
                sent: r.sent,
                answered: r.answered,
                who: r.who,
                target: r.admitted() == Some(true),
                class: if explained {
                    "timing"
                } else if reordered_at[i] {
                    "reordered"
                } else {
                    "unexplained"
                },
            }
        })
        .collect();
    let agreement = Agreement {
        compared: answered.len() as u64,
        admitted_target: answered
            .iter()
            .filter(|r| r.admitted() == Some(true))
            .count() as u64,
        admitted_model: own_decisions.iter().filter(|(_, a)| *a).count() as u64,
        disagreements,
        timing,
        reordered,
        unexplained: disagreements - timing - reordered,
        clock_granularity_ns: g,
        clock_phase_ns: phase,
        delayed,
        release_error_max_ns: release_error(&answered, &own_decisions),
        listed,
    };
    (agreement, own_decisions)
}

/// The longest description of a state compared to tell equal states apart;
/// a longer one (a sliding log of many entries) is taken as unlike any
/// other, so comparing costs at most this much formatting.
const DESCRIBED: usize = 512;

/// `limiter`'s state as text, if it is short: two states with the same text
/// decide alike from here on.
pub(super) fn described(limiter: &Limiter) -> Option<String> {
    struct Bounded(String);
    impl std::fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            if self.0.len() + s.len() > DESCRIBED {
                return Err(std::fmt::Error);
            }
            self.0.push_str(s);
            Ok(())
        }
    }
    let mut text = Bounded(String::with_capacity(DESCRIBED));
    std::fmt::write(&mut text, format_args!("{limiter:?}")).ok()?;
    Some(text.0)
}

/// Clock phases tried.
const PHASES: u64 = 8;

/// The model following the target at one clock phase.
struct Followed {
    /// The requests decided otherwise (their place in send order), and
    /// whether timing explains each.
    differing: Vec<(usize, bool)>,
    timing: u64,
    delayed: u64,
    /// By place in send order: one of a reordered pair.
    reordered_at: Vec<bool>,
    phase: u64,
}

impl Followed {
    fn unexplained(&self) -> usize {
        self.differing
            .iter()
            .filter(|(_, explained)| !explained)
            .count()
            - self.reordered_at.iter().filter(|&&r| r).count()
    }
}

/// Replays `answered` (in send order) through `limiter` on the target's
/// clock taken to be `phase` ahead, following the target where timing
/// explains an answer, then pairs the rest that reordering explains.
fn follow(answered: &[&Record], limiter: &Limiter, g: u64, phase: u64) -> Followed {
    let mut following = Model::new(limiter);
    let mut differing: Vec<(usize, bool)> = Vec::new();
    let (mut timing, mut delayed) = (0, 0);
    for (i, r) in answered.iter().enumerate() {
        let target = r.admitted() == Some(true);
        let sent = r.sent.saturating_add(phase);
        let latest = r.answered.max(r.sent).saturating_add(phase);
        let beam = following.states(r);
        // The model as it runs: its first state, deciding at the send time.
        let mut main = beam[0].clone();
        let decision = main.decide(sent, r);
        let agrees = decision.admitted() == target;
        if agrees && target && decision.delay() > Nanos::ZERO {
            delayed += 1;
        }
        // Every state the target may be in: each candidate deciding at the
        // send time, the earliest or the latest instant, where that gives
        // the target's answer.
        // Candidates whose limiters are in the same state are one, kept
        // with the earliest time of last decision (it holds later ones back
        // the least).
        let mut next: Vec<State> = Vec::with_capacity(BEAM);
        let mut seen: Vec<Option<String>> = Vec::with_capacity(BEAM);
        if agrees {
            seen.push(described(&main.limiter));
            next.push(main.clone());
        }
        // The send, a tick before it, the answer, and — for a flight longer
        // than two ticks — its quarter points.
        let flight = latest - sent;
        let quarters = if flight > g.saturating_mul(2) { 3 } else { 0 };
        let instants = [sent, sent.saturating_sub(g), latest]
            .into_iter()
            .chain((1..=quarters).map(|q| sent + flight / 4 * q));
        let instants: Vec<u64> = instants.collect();
        for state in beam.iter() {
            for &at in &instants {
                let mut candidate = state.clone();
                if candidate.decide(at, r).admitted() != target {
                    continue;
                }
                let text = described(&candidate.limiter);
                let same = text
                    .as_ref()
                    .and_then(|text| seen.iter().position(|t| t.as_ref() == Some(text)));
                let room = next.len() < BEAM
                    && (text.is_some()
                        || seen.iter().filter(|t| t.is_none()).count() < BEAM_UNDESCRIBED);
                match same {
                    Some(same) => next[same].last = next[same].last.min(candidate.last),
                    None if room => {
                        seen.push(text);
                        next.push(candidate);
                    }
                    None => {}
                }
            }
        }
        if !agrees {
            if next.is_empty() {
                // Not explained: the model goes on from its own decision.
                differing.push((i, false));
                next.push(main);
            } else {
                timing += 1;
                differing.push((i, true));
            }
        }
        *beam = next;
    }
    // Pair unexplained ones of one key, in flight together, decided in
    // opposite ways.
    let open: Vec<usize> = differing
        .iter()
        .filter(|(_, explained)| !explained)
        .map(|&(i, _)| i)
        .collect();
    let mut reordered_at = vec![false; answered.len()];
    for (n, &i) in open.iter().enumerate() {
        if reordered_at[i] {
            continue;
        }
        let a = answered[i];
        let partner = open[n + 1..].iter().copied().find(|&j| {
            let b = answered[j];
            !reordered_at[j]
                && b.who == a.who
                && b.admitted() != a.admitted()
                && b.sent.saturating_sub(g) <= a.answered.max(a.sent)
        });
        if let Some(j) = partner {
            reordered_at[i] = true;
            reordered_at[j] = true;
        }
    }
    Followed {
        differing,
        timing,
        delayed,
        reordered_at,
        phase,
    }
}

/// The largest difference between the k-th admitted answer of the target and
/// the k-th admission of the model (`model` in time order).
fn release_error(answered: &[&Record], model: &[(Nanos, bool)]) -> u64 {
    let mut target: Vec<u64> = answered
        .iter()
        .filter(|r| r.admitted() == Some(true))
        .map(|r| r.answered)
        .collect();
    target.sort_unstable();
    let model = model.iter().filter(|(_, a)| *a).map(|(at, _)| at.get());
    target
        .iter()
        .zip(model)
        .map(|(&t, m)| t.abs_diff(m))
        .max()
        .unwrap_or(0)
}

/// The most admitted in any `interval` of `decisions` (in time order).
pub fn worst(decisions: &[(Nanos, bool)], interval: Nanos) -> u64 {
    let mut rolling = RollingCounts::new(&[interval]);
    for &(at, admitted) in decisions {
        if admitted {
            rolling.push(at);
        }
    }
    rolling.worst()[0].count
}
