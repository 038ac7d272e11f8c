//! Redis's answers against the simulator's for the same arrivals: where
//! they differ and why (reordered, at window edges, other), and what the
//! store being unreachable did.

use super::*;

/// Replays the send times through the simulator's model of the same script.
pub(super) fn compare(
    named: &NamedLimiter,
    variant: Variant,
    sent: &[Sent],
    window: u64,
    threshold: u64,
    speed: f64,
) -> LiveResult {
    let mut model = model(named, variant, window, threshold);
    // The atomic script's window, fresh: the model starts over from it
    // where it follows Redis's opening of a window.
    let fresh = model.clone();
    let all = sent;
    // The comparison is of the requests Redis answered.
    let sent: Vec<Sent> = all
        .iter()
        .filter(|s| s.admitted.is_some())
        .copied()
        .collect();
    let sent = sent.as_slice();
    // How far Redis's order and clock can be from the send times: how late a
    // request was sent, or how long its round trip took (Redis ran it
    // somewhere within), whichever is larger.
    let jitter = sent
        .iter()
        .map(|s| s.at.saturating_sub(s.due).max(s.rtt))
        .max()
        .unwrap_or(0)
        .max((1_000_000.0 * speed) as u64);
    // A window's two ends are each uncertain by that much: the instant
    // Redis opened it, and the instant it ran the request at the edge.
    let edge_tolerance = jitter.saturating_mul(2);
    let (mut live, mut simulated) = (
        RollingCounts::new(&[Nanos::SECOND]),
        RollingCounts::new(&[Nanos::SECOND]),
    );
    let (mut admitted_live, mut admitted_model) = (0, 0);
    let mut window_start: Option<u64> = None;
    let mut edges_followed = 0;
    let mut last_followed = None;
    // (time, Redis admitted it, time since the model's window opened)
    let mut differing: Vec<(u64, bool, u64)> = Vec::new();
    for &Sent {
        at,
        admitted,
        count: replied,
        ..
    } in sent
    {
        let theirs = admitted == Some(true);
        let ours = if variant == Variant::AtomicFixedWindow {
            // Redis's key opens at the request whose INCR returns 1. Where the
            // model's window would open within the timing jitter of that
            // moment, it follows Redis, so one late or early edge is not
            // counted again at every later request of the window.
            let model_opens = window_start.is_none_or(|start| at.saturating_sub(start) >= window);
            let edge = window_start.map_or(0, |start| start + window);
            let follow = model_opens != (replied == 1) && at.abs_diff(edge) <= edge_tolerance;
            if follow && last_followed != Some(edge) {
                edges_followed += 1;
                last_followed = Some(edge);
            }
            let opens = if follow { replied == 1 } else { model_opens };
            // The model decides; where it follows Redis, at the instant
            // Redis's order puts the request: a window opened afresh, or
            // the last nanosecond of the window still running.
            let decided_at = match (opens, model_opens) {
                (true, false) => {
                    model = fresh.clone();
                    at
                }
                (false, true) => window_start.map_or(at, |start| start + window - 1),
                _ => at,
            };
            if opens {
                window_start = Some(at);
            }
            model.decide(Nanos(decided_at)).admitted()
        } else {
            if window_start.is_none_or(|start| at.saturating_sub(start) >= window) {
                window_start = Some(at);
            }
            model.decide(Nanos(at)).admitted()
        };
        if theirs {
            admitted_live += 1;
            live.push(Nanos(at));
        }
        if ours {
            admitted_model += 1;
            simulated.push(Nanos(at));
        }
        if theirs != ours {
            differing.push((at, theirs, at.saturating_sub(window_start.unwrap_or(at))));
        }
    }
    let disagreements = differing.len() as u64;
    // Pair each "Redis admitted, model rejected" with a nearby opposite one.
    let mut paired = vec![false; differing.len()];
    for i in 0..differing.len() {
        if paired[i] {
            continue;
        }
        let partner = (i + 1..differing.len())
            .take_while(|&j| differing[j].0 - differing[i].0 <= jitter)
            .find(|&j| !paired[j] && differing[j].1 != differing[i].1);
        if let Some(j) = partner {
            paired[i] = true;
            paired[j] = true;
        }
    }
    let reordered = paired.iter().filter(|&&p| p).count() as u64;
    let at_edges = differing
        .iter()
        .zip(&paired)
        .filter(|&(&(_, _, since), &p)| {
            !p && (since <= edge_tolerance || window.saturating_sub(since) <= edge_tolerance)
        })
        .count() as u64;
    LiveResult {
        limiter: named.name.clone(),
        variant,
        sent: all.len() as u64,
        admitted_live,
        admitted_model,
        disagreements,
        reordered,
        at_edges,
        unexplained: disagreements - reordered - at_edges,
        edges_followed,
        jitter_ns: jitter,
        decisions: sent
            .iter()
            .map(|s| (Nanos(s.at), s.admitted == Some(true)))
            .collect(),
        worst_1s_live: live.worst()[0].count,
        worst_1s_model: simulated.worst()[0].count,
        store_errors: (all.len() - sent.len()) as u64,
        on_error: (all.len() > sent.len()).then(|| on_error(all, window, threshold)),
    }
}

/// What failing open, failing closed and a window per client let through,
/// with Redis's answers where it gave them; `sent` in time order.
pub(super) fn on_error(sent: &[Sent], window: u64, threshold: u64) -> OnErrorFigures {
    let figures = |decide: &mut dyn FnMut(&Sent) -> bool| {
        let mut rolling = RollingCounts::new(&[Nanos::SECOND]);
        let (mut admitted, mut admitted_unanswered) = (0, 0);
        for s in sent {
            // The policy hears every request; it decides the unanswered ones.
            let decided = decide(s);
            let admit = match s.admitted {
                Some(answer) => answer,
                None => {
                    admitted_unanswered += u64::from(decided);
                    decided
                }
            };
            if admit {
                admitted += 1;
                rolling.push(Nanos(s.at));
            }
        }
        PolicyFigures {
            admitted,
            admitted_unanswered,
            worst_1s: rolling.worst()[0].count,
        }
    };
    // Each client's own window, fresh at each of its runs of unanswered
    // requests: an answered request of the client ends the run.
    let clients = sent.iter().map(|s| s.client + 1).max().unwrap_or(0);
    let mut own: Vec<Option<FixedWindow>> = vec![None; clients];
    let mut local = |s: &Sent| {
        if s.admitted.is_some() {
            own[s.client] = None;
            return false;
        }
        own[s.client]
            .get_or_insert_with(|| {
                FixedWindow::new(Nanos(window), threshold, Align::Epoch).expect("a valid window")
            })
            .decide(Nanos(s.at))
            .admitted()
    };
    OnErrorFigures {
        allow: figures(&mut |_| true),
        deny: figures(&mut |_| false),
        local: figures(&mut local),
    }
}

/// The simulator's model of `variant`'s script: the scenario's sliding log,
/// or a fixed window opening at its first request and lasting W, as Redis's
/// key does from its first INCR to its expiry.
fn model(named: &NamedLimiter, variant: Variant, window: u64, threshold: u64) -> Limiter {
    match variant {
        Variant::SlidingLog => named.limiter.clone(),
        _ => Limiter::FixedWindow(
            crate::limiter::fixed_window::FixedWindow::new(
                Nanos(window),
                threshold,
                Align::FirstRequest,
            )
            .expect("a valid window"),
        ),
    }
}
