//! The figures of clients that retry: attempts against requests, how long a
//! request takes to get in, the herd of attempts at each window reset, and
//! clients locked out by their own retries.

use std::collections::{HashMap, HashSet};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::rolling::RollingCounts;
use crate::random::MixState;
use crate::time::Nanos;
use crate::traffic::{Arrival, Key};

/// How soon after a window reset an attempt counts as part of its herd.
pub const AFTER_RESET: Nanos = Nanos(10_000_000);

/// The closed-loop figures of one run, in `summary.json` as `closed_loop`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClosedLoopSummary {
    /// The clients' retry behaviour, in words.
    pub retry: String,
    /// Distinct requests: first attempts.
    pub requests: u64,
    /// Attempts after the first.
    pub retries: u64,
    /// Attempts per request: (requests + retries) / requests.
    pub amplification: f64,
    /// Requests eventually admitted (each at most once): the goodput.
    pub goodput: u64,
    /// `goodput / requests`.
    pub goodput_share: f64,
    /// Requests given up: rejected at their last attempt, or with no
    /// retry budget left, or never retried by the policy.
    pub gave_up: u64,
    /// Of those, requests whose retry the budget refused.
    pub budget_refused: u64,
    /// Requests still waiting to retry when the run ended.
    pub unfinished: u64,
    /// From first attempt to admission, for admitted requests (3 significant digits).
    pub to_admission_p50_ns: u64,
    /// 99th percentile of the same.
    pub to_admission_p99_ns: u64,
    /// The longest of the same.
    pub to_admission_max_ns: u64,
    /// The most attempts arriving at the limiter in any rolling interval.
    pub worst_rolling_attempts: u64,
    /// Where the first such interval starts.
    pub worst_rolling_attempts_start_ns: u64,
    /// For a limiter with window edges: the share of attempts arriving
    /// within 10 ms after a reset.
    pub attempts_after_reset_share: Option<f64>,
    /// The same, for retries alone.
    pub retries_after_reset_share: Option<f64>,
    /// Clients rejected on every attempt for at least `after_ns`.
    pub lockout: LockoutSummary,
}

/// Lockouts: a limit's key (a client's, with a limiter per key; else the
/// one shared limit) rejecting every attempt for at least `after_ns`, while
/// the requests sent under it stayed within the limit over that time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LockoutSummary {
    /// The shortest lockout counted.
    pub after_ns: u64,
    /// Keys locked out at least once: clients with a limiter per key, else
    /// 1 when the shared limit was.
    pub keys: u64,
    /// Lockouts in all.
    pub lockouts: u64,
    /// The longest, from its first rejected attempt to its admission (or its
    /// last rejected attempt when never admitted).
    pub longest_ns: u64,
    /// When the longest began.
    pub longest_start_ns: u64,
    /// The new requests sent under that key meanwhile.
    pub longest_requests: u64,
}

/// A client's rejections since its last admission.
#[derive(Clone, Copy, Debug)]
struct Streak {
    start: Nanos,
    last: Nanos,
    requests: u64,
}

/// Closed-loop figures as attempts stream through a limiter.
#[derive(Debug)]
pub struct ClosedLoop {
    retry: String,
    requests: u64,
    retries: u64,
    goodput: u64,
    to_admission: Histogram<u64>,
    attempts: RollingCounts,
    /// Window edges: period and phase.
    edges: Option<(u64, u64)>,
    after_reset: (u64, u64),
    /// The key's limit over an interval: its nominal allowance per nanosecond.
    limit_per_ns: f64,
    /// Whether the limiter keeps a limit per client key (else one for all).
    per_key: bool,
    lockout_after: Nanos,
    streaks: HashMap<Key, Streak, MixState>,
    locked_keys: HashSet<Key, MixState>,
    lockouts: u64,
    longest: Option<Streak>,
}

impl ClosedLoop {
    /// Figures for clients retrying as `retry` says, against a limiter with
    /// `edges` (period, phase) and `limit_per_sec` of nominal allowance, per
    /// client key when `per_key`; the worst attempts over `rolling`.
    pub fn new(
        retry: String,
        rolling: Nanos,
        edges: Option<(Nanos, Nanos)>,
        limit_per_sec: f64,
        per_key: bool,
        lockout_after: Nanos,
    ) -> ClosedLoop {
        ClosedLoop {
            retry,
            requests: 0,
            retries: 0,
            goodput: 0,
            to_admission: Histogram::new(3).expect("3 significant digits"),
            attempts: RollingCounts::new(&[rolling]),
            edges: edges.map(|(period, phase)| (period.get(), phase.get())),
            after_reset: (0, 0),
            limit_per_ns: limit_per_sec / 1e9,
            per_key,
            lockout_after,
            streaks: HashMap::default(),
            locked_keys: HashSet::default(),
            lockouts: 0,
            longest: None,
        }
    }

    /// Counts attempt `number` (1 for a request's first) of a request first
    /// sent at `first`, arriving as `arrival`; admitted (reaching the backend
    /// at `admitted_at`) or not.
    pub fn attempt(
        &mut self,
        arrival: Arrival,
        number: u32,
        first: Nanos,
        admitted_at: Option<Nanos>,
    ) {
        let Arrival { time, key } = arrival;
        // The key whose limit decided: the client's, or the one shared.
        let key = if self.per_key { key } else { Key::DEFAULT };
        self.count(time, number);
        let is_retry = number > 1;
        match admitted_at {
            Some(at) => {
                self.goodput += 1;
                let _ = self
                    .to_admission
                    .record(at.get().saturating_sub(first.get()));
                if let Some(streak) = self.streaks.remove(&key) {
                    self.close(key, streak, time);
                }
            }
            None => {
                let streak = self.streaks.entry(key).or_insert(Streak {
                    start: time,
                    last: time,
                    requests: 0,
                });
                streak.last = time;
                streak.requests += u64::from(!is_retry);
            }
        }
    }

    /// Counts attempt `number` of a request refused for a reason no retry
    /// changes (a 403, not a limit's 429): an attempt, but no part of a
    /// lockout, which is a limit's.
    pub fn refused(&mut self, arrival: Arrival, number: u32) {
        self.count(arrival.time, number);
    }

    /// Counts attempt `number`, sent at `time`.
    fn count(&mut self, time: Nanos, number: u32) {
        self.attempts.push(time);
        let is_retry = number > 1;
        if is_retry {
            self.retries += 1;
        } else {
            self.requests += 1;
        }
        if let Some((period, phase)) = self.edges
            && time.get() >= phase
            && (time.get() - phase) % period < AFTER_RESET.get()
        {
            self.after_reset.0 += 1;
            self.after_reset.1 += u64::from(is_retry);
        }
    }

    /// A streak of `key` ending at `end`: a lockout when long enough and
    /// its client kept within its limit.
    fn close(&mut self, key: Key, streak: Streak, end: Nanos) {
        let span = end.get() - streak.start.get();
        if span < self.lockout_after.get()
            || streak.requests as f64 > self.limit_per_ns * span as f64
        {
            return;
        }
        self.lockouts += 1;
        self.locked_keys.insert(key);
        let streak = Streak {
            last: end,
            ..streak
        };
        let longer = self
            .longest
            .is_none_or(|l| span > l.last.get() - l.start.get());
        if longer {
            self.longest = Some(streak);
        }
    }

    /// The figures, once every attempt is in; `gave_up`, `budget_refused`
    /// and `unfinished` are the clients' own count.
    pub fn finish(
        mut self,
        gave_up: u64,
        budget_refused: u64,
        unfinished: u64,
    ) -> ClosedLoopSummary {
        let mut open: Vec<(Key, Streak)> = self.streaks.drain().collect();
        // Closed in key order, so the longest among equals is the same every run.
        open.sort_unstable_by_key(|&(key, _)| key);
        for (key, streak) in open {
            self.close(key, streak, streak.last);
        }
        let attempts = self.requests + self.retries;
        let worst = self.attempts.worst()[0];
        let share = |count: u64, of: u64| {
            self.edges.map(|_| {
                if of == 0 {
                    0.0
                } else {
                    count as f64 / of as f64
                }
            })
        };
        let histogram = &self.to_admission;
        let quantile = |q: f64| {
            if histogram.is_empty() {
                0
            } else {
                histogram.value_at_quantile(q)
            }
        };
        ClosedLoopSummary {
            retry: self.retry,
            requests: self.requests,
            retries: self.retries,
            amplification: if self.requests == 0 {
                0.0
            } else {
                attempts as f64 / self.requests as f64
            },
            goodput: self.goodput,
            goodput_share: if self.requests == 0 {
                0.0
            } else {
                self.goodput as f64 / self.requests as f64
            },
            gave_up,
            budget_refused,
            unfinished,
            to_admission_p50_ns: quantile(0.5),
            to_admission_p99_ns: quantile(0.99),
            to_admission_max_ns: if histogram.is_empty() {
                0
            } else {
                histogram.max()
            },
            worst_rolling_attempts: worst.count,
            worst_rolling_attempts_start_ns: worst.start.get(),
            attempts_after_reset_share: share(self.after_reset.0, attempts),
            retries_after_reset_share: share(self.after_reset.1, self.retries),
            lockout: LockoutSummary {
                after_ns: self.lockout_after.get(),
                keys: self.locked_keys.len() as u64,
                lockouts: self.lockouts,
                longest_ns: self.longest.map_or(0, |l| l.last.get() - l.start.get()),
                longest_start_ns: self.longest.map_or(0, |l| l.start.get()),
                longest_requests: self.longest.map_or(0, |l| l.requests),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, key: u64) -> Arrival {
        Arrival {
            time: Nanos(ms * 1_000_000),
            key: Key::client(key),
        }
    }

    #[test]
    fn counts_requests_retries_goodput_and_the_herd_after_each_reset() {
        let mut loop_ = ClosedLoop::new(
            "r".into(),
            Nanos::SECOND,
            Some((Nanos::SECOND, Nanos::ZERO)),
            100.0,
            false,
            Nanos::SECOND,
        );
        let ms = |ms: u64| Some(Nanos(ms * 1_000_000));
        loop_.attempt(at(500, 1), 1, Nanos(500_000_000), None);
        loop_.attempt(at(1000, 1), 2, Nanos(500_000_000), ms(1000));
        loop_.attempt(at(1005, 2), 1, Nanos(1_005_000_000), ms(1005));
        loop_.attempt(at(1500, 3), 1, Nanos(1_500_000_000), None);
        let s = loop_.finish(1, 0, 0);
        assert_eq!((s.requests, s.retries, s.goodput), (3, 1, 2));
        assert_eq!(s.amplification, 4.0 / 3.0);
        assert_eq!(s.attempts_after_reset_share, Some(0.5));
        assert_eq!(s.retries_after_reset_share, Some(1.0));
        // Three significant digits.
        assert!(
            s.to_admission_max_ns.abs_diff(500_000_000) < 500_000,
            "{}",
            s.to_admission_max_ns
        );
        assert_eq!(
            s.worst_rolling_attempts, 3,
            "[500 ms, 1500 ms) or [1000 ms, 2000 ms)"
        );
        assert_eq!(s.lockout.lockouts, 0, "no streak lasted 1 s");
    }

    #[test]
    fn a_lockout_needs_the_time_and_a_client_within_its_limit() {
        // Limit 2 per second; lockouts from 1 s.
        let mut loop_ = ClosedLoop::new("r".into(), Nanos::SECOND, None, 2.0, true, Nanos::SECOND);
        let mut attempts = Vec::new();
        // Key 1: rejected from 0 to 3.1 s, 4 new requests (≤ 6.2): locked out.
        for (ms, number) in [(0, 1), (100, 2), (1000, 1), (2000, 1), (2500, 2), (3000, 1)] {
            attempts.push((ms, 1, number, false));
        }
        attempts.push((3100, 1, 2, true));
        // Key 2: rejected for 2 s but sent 11 new requests (> 4): overload, not a lockout.
        attempts.extend((0..=2000).step_by(200).map(|ms| (ms, 2, 1, false)));
        // Key 3: rejected for 0.5 s only.
        attempts.extend([(0, 3, 1, false), (500, 3, 1, false)]);
        attempts.sort_by_key(|&(ms, key, ..)| (ms, key));
        for (ms, key, number, admitted) in attempts {
            let admitted_at = admitted.then_some(Nanos(ms * 1_000_000));
            loop_.attempt(at(ms, key), number, Nanos::ZERO, admitted_at);
        }
        let s = loop_.finish(0, 0, 0).lockout;
        assert_eq!((s.keys, s.lockouts), (1, 1));
        assert_eq!(
            (s.longest_ns, s.longest_start_ns, s.longest_requests),
            (3_100_000_000, 0, 4)
        );
    }
}
