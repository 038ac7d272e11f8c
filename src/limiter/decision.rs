//! What a limiter answers one request: admitted, admitted after a delay,
//! or rejected with the hint the real limiter sends.

use crate::time::Nanos;

/// The answer a limiter gives one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Admitted: the backend gets it now.
    Admit,
    /// Admitted, and held this long before the backend gets it (nginx's
    /// `limit_req` without `nodelay`).
    Delay(Nanos),
    /// Rejected, with what the limiter tells the client.
    Reject(Hint),
}

impl Decision {
    /// Whether the request was admitted (now or after a delay).
    #[inline]
    pub fn admitted(self) -> bool {
        !matches!(self, Decision::Reject(_))
    }

    /// How long an admitted request waits before the backend gets it.
    #[inline]
    pub fn delay(self) -> Nanos {
        match self {
            Decision::Delay(delay) => delay,
            _ => Nanos::ZERO,
        }
    }

    /// Admitted, or rejected with `hint` — worked out only when `HINTS`.
    #[inline(always)]
    pub fn admit_or<const HINTS: bool>(admit: bool, hint: impl FnOnce() -> Hint) -> Decision {
        if admit {
            Decision::Admit
        } else {
            Decision::reject::<HINTS>(hint)
        }
    }

    /// Rejected with `hint` — worked out only when `HINTS`, since some hints
    /// cost a division and the open-loop fast path never reads them.
    #[inline(always)]
    pub fn reject<const HINTS: bool>(hint: impl FnOnce() -> Hint) -> Decision {
        Decision::Reject(if HINTS { hint() } else { Hint::NONE })
    }
}

/// What a rejection tells the client, as instants on the limiter's clock:
/// `Retry-After` and `RateLimit-Reset` are these minus the time of the
/// answer. Each limiter's `decide` says what it sends; `None` where the real
/// implementation sends nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hint {
    /// `Retry-After`: the earliest instant a retry can be admitted, as the
    /// limiter knows it at the rejection.
    pub retry_at: Option<Nanos>,
    /// `RateLimit-Reset`: when the limit's quota is whole again (the end of
    /// the current window, or a full bucket).
    pub reset_at: Option<Nanos>,
    /// A refusal no retry changes, not a rate limit's no: Spring Cloud
    /// Gateway's 403 to a request whose key resolves to nothing. Clients
    /// that retry a rate limit's rejections (429) do not retry it.
    pub forbidden: bool,
}

impl Hint {
    /// No hint: the client is told only no (nginx's 503).
    pub const NONE: Hint = Hint {
        retry_at: None,
        reset_at: None,
        forbidden: false,
    };

    /// A refusal no retry changes (403), with nothing more said.
    pub const FORBIDDEN: Hint = Hint {
        forbidden: true,
        ..Hint::NONE
    };

    /// Retry at `retry`; the quota is whole again at `reset`.
    pub fn new(retry: u64, reset: u64) -> Hint {
        Hint {
            retry_at: Some(Nanos(retry)),
            reset_at: Some(Nanos(reset)),
            ..Hint::NONE
        }
    }

    /// Retry when the window resets, at `reset`.
    pub fn at_reset(reset: u64) -> Hint {
        Hint::new(reset, reset)
    }
}
