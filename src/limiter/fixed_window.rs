//! The fixed-window counter: at most N admitted per window of length W.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Align, Context, Decision, Hint, Kind, RateLimiter, StoreOps};
use crate::error::{FieldError, field_error};
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "fixed-window"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Window length W.
    pub window: Nanos,
    /// Admitted requests per window, N.
    pub threshold: NonZeroU64,
    /// Where windows start.
    #[serde(default)]
    pub align: Align,
    /// Rejected requests count in the window too (HAProxy's `track-sc`,
    /// Kong's redis policy, envoyproxy/ratelimit).
    #[serde(default)]
    pub count_rejected: bool,
}

impl Kind for Config {
    const NAME: &'static str = "fixed-window";
    type State = FixedWindow;

    fn build(&self, _: Context) -> Result<FixedWindow, FieldError> {
        Ok(FixedWindow::new(self.window, self.threshold.get(), self.align)?
            .counting_rejected(self.count_rejected))
    }

    super::parameter_is!(threshold, window);

    fn example(choice: u64) -> String {
        let window = [1_000, 997, 250, 3_000][(choice % 4) as usize];
        let align =
            ["\"epoch\"", "\"first-request\"", "{ anchor = \"130ns\" }"][(choice / 4 % 3) as usize];
        format!(
            "window = \"{window}ns\"\nthreshold = {}\nalign = {align}\ncount_rejected = {}",
            choice / 12 % 29 + 1,
            choice / 348 % 2 == 1
        )
    }
}

/// A fixed-window counter.
///
/// - `epoch`: windows are `[k·W, (k+1)·W)`; an arrival exactly at `k·W`
///   belongs to the new window k and finds a fresh count.
/// - `anchor` a: windows are `[a + k·W, a + (k+1)·W)`, edges as with epoch.
/// - `first-request`: a window starts at the first arrival and lasts W; an
///   arrival exactly W after the window's start opens a new window (the
///   Redis `INCR` + `EXPIRE` pattern). Rejected arrivals can open windows too.
#[derive(Clone, Debug)]
pub struct FixedWindow {
    window: u64,
    threshold: u64,
    align: Align,
    current: Window,
    /// Windows opened so far.
    opened: u64,
    /// Whether rejected requests count too.
    count_rejected: bool,
    /// Whether the real limiter's hint is a whole number of seconds after
    /// the response (`Retry-After: 1`), not an instant.
    whole_second_hints: bool,
}

impl FixedWindow {
    /// A counter of `threshold` per `window`.
    pub fn new(window: Nanos, threshold: u64, align: Align) -> Result<FixedWindow, FieldError> {
        if window == Nanos::ZERO {
            return Err(field_error!("window", "must be longer than 0"));
        }
        if threshold == 0 {
            return Err(field_error!("threshold", "must be at least 1"));
        }
        Ok(FixedWindow {
            window: window.get(),
            threshold,
            align,
            current: Window::default(),
            opened: 0,
            count_rejected: false,
            whole_second_hints: false,
        })
    }

    /// The same counter, its rejections hinting as Kong and envoyproxy/
    /// ratelimit do: `Retry-After` (or `RateLimit-Reset`) is the whole
    /// seconds from the response to the window's end on the gateway's
    /// whole-second clock, so a client told "1" at 0.45 s comes back at
    /// 1.45 s: the rejected of one second return spread over the next as
    /// they arrived, not all at the window's edge.
    pub fn hinting_whole_seconds(self) -> FixedWindow {
        FixedWindow {
            whole_second_hints: true,
            ..self
        }
    }

    /// The same counter, counting rejected requests too when `count`.
    pub fn counting_rejected(self, count: bool) -> FixedWindow {
        FixedWindow {
            count_rejected: count,
            ..self
        }
    }

    /// The window length W.
    pub fn window(&self) -> Nanos {
        Nanos(self.window)
    }

    /// The threshold N.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// The alignment of windows.
    pub fn align(&self) -> Align {
        self.align
    }

    /// Whether rejected requests count too.
    pub fn counts_rejected(&self) -> bool {
        self.count_rejected
    }
}

/// When a client told to wait the whole seconds from `now` to `end` (rounded
/// up, at least 1, as a header of whole seconds counted on a whole-second
/// clock gives them) comes back.
pub(crate) fn after_whole_seconds(now: u64, end: u64) -> u64 {
    let seconds = end.saturating_sub(now).div_ceil(NANOS_PER_SEC).max(1);
    now.saturating_add(seconds.saturating_mul(NANOS_PER_SEC))
}

/// One fixed window's running count: all a key's fixed window keeps
/// (16 bytes), so that a limiter per key holds this per key and the rules once.
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    /// End of the current window (exclusive); 0 before the first arrival.
    end: u64,
    count: u64,
}

impl Window {
    /// The window ending at `end` (0: none yet) holding `count`.
    pub fn at(end: u64, count: u64) -> Window {
        Window { end, count }
    }

    /// Whether it has seen a request (a window has opened).
    pub fn is_open(&self) -> bool {
        self.end != 0
    }
}

impl FixedWindow {
    /// Decides a request at `now` against `window` by these rules, and says
    /// whether it opened a new window.
    ///
    /// Rejects with the end of the current window as both `Retry-After` and
    /// the reset: with epoch windows every client rejected in a window is
    /// told the same instant. With `count_rejected` a rejection counts too,
    /// which changes nothing within the window (it is full already).
    #[inline]
    pub fn decide_in<const HINTS: bool>(&self, window: &mut Window, now: Nanos) -> (Decision, bool) {
        let now = now.get();
        let opened = now >= window.end;
        if opened {
            // Compare against the cached end instead of dividing on every request.
            let remaining = match self.align {
                Align::FirstRequest => self.window,
                // Up to the next edge `phase + k·W` after `now` (the window
                // holding `now` may have started before the scenario did).
                align => {
                    let phase = align.phase(self.window).unwrap_or(0);
                    self.window - (now % self.window + self.window - phase) % self.window
                }
            };
            window.end = now.saturating_add(remaining);
            window.count = 0;
        }
        let admit = window.count < self.threshold;
        window.count += u64::from(admit | self.count_rejected);
        let end = window.end;
        (Decision::admit_or::<HINTS>(admit, || self.hint(now, end)), opened)
    }

    /// What a request rejected at `now` in a window ending at `end` is told.
    pub(super) fn hint(&self, now: u64, end: u64) -> Hint {
        if self.whole_second_hints {
            Hint::at_reset(after_whole_seconds(now, end))
        } else {
            Hint::at_reset(end)
        }
    }

    /// Takes back the last admission of `window` (see `refund`), and says
    /// whether that closes the window it had opened.
    pub fn refund_in(&self, window: &mut Window, now: Nanos) -> bool {
        if self.count_rejected {
            return false;
        }
        window.count -= 1;
        let closed = window.count == 0;
        if closed {
            window.end = window.end.min(now.get());
        }
        closed
    }
}

impl RateLimiter for FixedWindow {
    fn hint_granularity(&self) -> Nanos {
        if self.whole_second_hints {
            Nanos::SECOND
        } else {
            Nanos::ZERO
        }
    }

    /// By [`FixedWindow::decide_in`], on its one window.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let mut current = self.current;
        let (decision, opened) = self.decide_in::<HINTS>(&mut current, now);
        self.current = current;
        self.opened += u64::from(opened);
        decision
    }

    /// As if the last admitted request had been rejected: when it was the
    /// only one its window counted, it opened that window, which a rejected
    /// request would not have done — so the window closes again and the next
    /// request opens (or finds) its own.
    /// As if rejected: a window counting rejected requests keeps the count.
    fn refund(&mut self, now: Nanos) {
        let mut current = self.current;
        let closed = self.refund_in(&mut current, now);
        self.current = current;
        self.opened -= u64::from(closed);
    }

    /// Any interval of L ns meets at most m = ⌈(L−1)/W⌉ + 1 windows (2 when
    /// L = W), each admitting at most N: mN with epoch windows. A first-request
    /// window's opening request is admitted and lies W before the next window
    /// opens, so an interval meeting m windows misses the first one's opener:
    /// max(N·⌈L/W⌉, mN − 1), which is 2N − 1 for L = W.
    fn bound(&self, interval: Nanos) -> u64 {
        let (interval, n) = (interval.get(), self.threshold);
        let met = windows_met(interval, self.window).saturating_mul(n);
        match self.align {
            Align::Epoch | Align::Anchor(_) => met,
            Align::FirstRequest => {
                let whole = interval.div_ceil(self.window).saturating_mul(n);
                whole.max(met.saturating_sub(1))
            }
        }
    }

    /// A window's end is then never past u64::MAX: every window is whole.
    fn horizon(&self) -> Nanos {
        Nanos(u64::MAX - self.window)
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.threshold as f64 * interval.get() as f64 / self.window as f64
    }

    fn describe(&self) -> String {
        format!(
            "{} per {} ({}{})",
            self.threshold,
            Nanos(self.window),
            self.align.name(),
            if self.count_rejected {
                ", counting rejected"
            } else {
                ""
            }
        )
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        self.align
            .phase(self.window)
            .map(|phase| (Nanos(self.window), Nanos(phase)))
    }

    fn fixed_window(&self) -> Option<&FixedWindow> {
        Some(self)
    }

    /// A Redis counter with its expiry: 129 B per key (measured).
    fn state_bytes(&self) -> Option<u64> {
        Some(129)
    }

    /// `INCR` per request, `PEXPIRE` when it opens a window.
    fn store_ops(&self) -> Option<StoreOps> {
        Some(StoreOps {
            per_request: 1,
            per_reset: 1,
        })
    }

    fn resets(&self) -> u64 {
        self.opened
    }
}

/// How many windows of length `window` (disjoint, back to back or apart) an
/// interval of `interval` whole nanoseconds can meet: ⌈(L−1)/W⌉ + 1.
pub fn windows_met(interval: u64, window: u64) -> u64 {
    if interval == 0 {
        return 0;
    }
    (interval - 1).div_ceil(window) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(align: Align) -> FixedWindow {
        FixedWindow::new(Nanos::SECOND, 10, align).unwrap()
    }

    fn admitted(limiter: &mut FixedWindow, times: &[u64]) -> usize {
        times
            .iter()
            .filter(|&&t| limiter.decide(Nanos(t)).admitted())
            .count()
    }

    #[test]
    fn admits_the_tenth_request_and_rejects_the_eleventh() {
        let mut fw = limiter(Align::Epoch);
        let decisions: Vec<bool> = (0..11)
            .map(|i| fw.decide(Nanos(i * 1_000)).admitted())
            .collect();
        assert!(decisions[..10].iter().all(|&d| d));
        assert!(!decisions[10]);
    }

    #[test]
    fn an_arrival_exactly_at_the_epoch_edge_belongs_to_the_new_window() {
        let mut fw = limiter(Align::Epoch);
        assert_eq!(admitted(&mut fw, &[999_999_999; 10]), 10);
        assert!(!fw.decide(Nanos(999_999_999)).admitted());
        assert!(fw.decide(Nanos(1_000_000_000)).admitted());
    }

    #[test]
    fn first_request_alignment_restarts_exactly_one_window_after_the_start() {
        let mut fw = limiter(Align::FirstRequest);
        let start = 300_000_000;
        assert_eq!(admitted(&mut fw, &[start; 10]), 10);
        assert!(
            !fw.decide(Nanos(start + 999_999_999)).admitted(),
            "still the first window"
        );
        assert!(
            fw.decide(Nanos(start + 1_000_000_000)).admitted(),
            "a new window opens at start + W"
        );
    }

    #[test]
    fn a_rejected_arrival_can_open_a_first_request_window() {
        let mut fw = limiter(Align::FirstRequest);
        assert_eq!(admitted(&mut fw, &[0; 11]), 10);
        // The arrival at 1.5 s opens a window [1.5 s, 2.5 s), so 2.2 s is in it.
        assert_eq!(admitted(&mut fw, &[1_500_000_000; 10]), 10);
        assert!(!fw.decide(Nanos(2_200_000_000)).admitted());
    }

    #[test]
    fn anchored_windows_turn_over_at_the_anchor_phase() {
        let mut fw = limiter(Align::Anchor(Nanos(250_000_000)));
        assert_eq!(
            admitted(&mut fw, &[1_249_999_999; 11]),
            10,
            "window [0.25 s, 1.25 s)"
        );
        assert!(
            fw.decide(Nanos(1_250_000_000)).admitted(),
            "a new window at exactly 1.25 s"
        );
        let mut early = limiter(Align::Anchor(Nanos(2_250_000_000)));
        assert_eq!(
            admitted(&mut early, &[100_000_000; 11]),
            10,
            "before the anchor, windows extend backwards"
        );
        assert!(early.decide(Nanos(250_000_000)).admitted());
    }

    #[test]
    fn lets_two_thresholds_through_across_an_edge() {
        let mut fw = limiter(Align::Epoch);
        let mut times = vec![999_999_999; 10];
        times.extend([1_000_000_000; 10]);
        assert_eq!(admitted(&mut fw, &times) as u64, fw.bound(Nanos::SECOND));
    }

    #[test]
    fn counts_the_windows_an_interval_meets() {
        let w = 1_000;
        assert_eq!(windows_met(1, w), 1);
        assert_eq!(windows_met(w, w), 2);
        assert_eq!(windows_met(w + 1, w), 2);
        assert_eq!(windows_met(w + 2, w), 3);
        assert_eq!(windows_met(2 * w, w), 3);
    }
}
