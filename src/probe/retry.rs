//! Clients that retry, against a real target: a rejected request (429 or
//! 503) comes back as the workload's retry policy says, reading the hint
//! headers the target really sent — as the simulator's retrying clients
//! read the model's hints.

use std::sync::Mutex;

use serde::Serialize;

use crate::limiter::Hint;
use crate::random::Rng;
use crate::retry::{Budget, Retry};
use crate::time::{NANOS_PER_SEC, Nanos};
use crate::traffic::Key;

/// One request to send: a first attempt from the schedule, or a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Job {
    /// When it is due, scenario ns (first: the heap orders by it).
    pub due: u64,
    /// Its place among the requests sent: the schedule's first, retries after.
    pub index: usize,
    /// 1 for a first attempt.
    pub attempt: u32,
    /// The wait before this attempt (for decorrelated jitter's next draw).
    pub slept: u64,
    /// Its identity's number.
    pub who: u32,
    /// Its key, for the model.
    pub key: Key,
}

/// What became of the rejected requests.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RetryFigures {
    /// Retries sent.
    pub sent: u64,
    /// Rejected requests given up: out of attempts, no retry by the policy,
    /// or no budget.
    pub gave_up: u64,
    /// Of those, for want of retry budget.
    pub budget_refused: u64,
    /// Retries due at or after the scenario's end, not made.
    pub unfinished: u64,
    /// Retries not sent because they would pass --max-requests or
    /// --max-rate.
    pub capped: u64,
    /// Rejections whose answer carried a hint the policy could read
    /// (`Retry-After` or a reset in seconds).
    pub hinted: u64,
}

/// The retry policy and its state, shared by the answers as they come.
pub struct Retrying {
    retry: Retry,
    /// The scenario's end: a retry due then or later is not made.
    end: u64,
    state: Mutex<State>,
}

struct State {
    rng: Rng,
    budget: Option<Budget>,
    figures: RetryFigures,
}

impl Retrying {
    /// Clients retrying as `retry` says, drawing jitter from `rng`, over a
    /// scenario ending at `end`.
    pub fn new(retry: Retry, rng: Rng, end: Nanos) -> Retrying {
        Retrying {
            state: Mutex::new(State {
                rng,
                budget: retry.budget.map(Budget::new),
                figures: RetryFigures::default(),
            }),
            retry,
            end: end.get(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Hears the answer to `job` (`status`, at `answered`, with `hint`): the
    /// retry to send, if the policy makes one (its index not yet given).
    pub fn answered(&self, job: &Job, status: u16, answered: u64, hint: Hint) -> Option<Job> {
        let mut state = self.state();
        if (200..300).contains(&status) {
            if let Some(budget) = &mut state.budget {
                budget.admitted(job.attempt);
            }
            return None;
        }
        if status != 429 && status != 503 {
            return None;
        }
        if hint.retry_at.is_some() || hint.reset_at.is_some() {
            state.figures.hinted += 1;
        }
        if job.attempt >= self.retry.max_attempts {
            state.figures.gave_up += 1;
            return None;
        }
        let State {
            rng,
            budget,
            figures,
        } = &mut *state;
        let Some((at, slept)) =
            self.retry
                .next_attempt(Nanos(answered), hint, job.attempt, Nanos(job.slept), rng)
        else {
            figures.gave_up += 1;
            return None;
        };
        if at.get() >= self.end {
            figures.unfinished += 1;
            return None;
        }
        if let Some(budget) = budget
            && !budget.take()
        {
            figures.gave_up += 1;
            figures.budget_refused += 1;
            return None;
        }
        Some(Job {
            due: at.get(),
            attempt: job.attempt + 1,
            slept: slept.get(),
            ..*job
        })
    }

    /// A retry was sent.
    pub fn sent(&self) {
        self.state().figures.sent += 1;
    }

    /// A retry was not sent, for a cap.
    pub fn capped(&self) {
        self.state().figures.capped += 1;
    }

    /// What became of the rejections.
    pub fn figures(&self) -> RetryFigures {
        self.state().figures
    }
}

/// What an answer's headers tell a client, as instants on the probe's clock
/// (`answered` is when the answer came, `zero_unix_ns` the schedule's zero):
/// `Retry-After` in seconds; a reset in seconds from `RateLimit-Reset`, the
/// `reset=` of a combined `RateLimit` header, or `X-RateLimit-Reset` (taken
/// as a Unix time when it is past 10^9, as GitHub's is). An HTTP-date
/// `Retry-After` is not read.
pub fn hint_of(headers: &[(String, String)], answered: u64, zero_unix_ns: u128) -> Hint {
    let seconds = |text: &str| text.trim().parse::<u64>().ok();
    let after = |s: u64| Nanos(answered.saturating_add(s.saturating_mul(NANOS_PER_SEC)));
    let mut hint = Hint::NONE;
    for (name, value) in headers {
        match name.as_str() {
            "retry-after" => hint.retry_at = seconds(value).map(after).or(hint.retry_at),
            "ratelimit-reset" => hint.reset_at = seconds(value).map(after).or(hint.reset_at),
            "ratelimit" => {
                let reset = value
                    .split([',', ';'])
                    .find_map(|part| part.trim().strip_prefix("reset="))
                    .and_then(seconds);
                hint.reset_at = reset.map(after).or(hint.reset_at);
            }
            "x-ratelimit-reset" => {
                hint.reset_at = seconds(value)
                    .map(|s| {
                        if s > 1_000_000_000 {
                            let at = u128::from(s) * u128::from(NANOS_PER_SEC);
                            Nanos(
                                u64::try_from(at.saturating_sub(zero_unix_ns)).unwrap_or(u64::MAX),
                            )
                        } else {
                            after(s)
                        }
                    })
                    .or(hint.reset_at);
            }
            _ => {}
        }
    }
    hint
}
