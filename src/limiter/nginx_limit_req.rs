//! nginx's `limit_req`, with nginx's own arithmetic: the excess counted in
//! thousandths of a request, time in whole milliseconds, and a request over
//! the allowance either delayed to its paced time or, beyond the burst, rejected.

use serde::Deserialize;

use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const NANOS_PER_MS: u64 = 1_000_000;

/// `kind = "nginx-limit-req"`, as `limit_req_zone … rate=10r/s;` and
/// `limit_req zone=… burst=20 nodelay;` (or `delay=8`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// nginx's notation: `"10r/s"` or `"30r/m"`.
    pub rate: String,
    /// Requests beyond the rate that may wait (or, with `nodelay`, pass) (default 0).
    #[serde(default)]
    pub burst: u64,
    /// Pass the burst at once instead of delaying it.
    #[serde(default)]
    pub nodelay: bool,
    /// Pass this many of the burst at once and delay the rest (nginx ≥ 1.15.7).
    pub delay: Option<u64>,
}

impl Kind for Config {
    const NAME: &'static str = "nginx-limit-req";
    type State = NginxLimitReq;

    /// A zone with no request seen yet.
    fn build(&self, _: Context) -> Result<NginxLimitReq, FieldError> {
        let rate = self.rate()?;
        if rate == 0 {
            return Err(field_error!("rate", "{} rounds to 0 in nginx's arithmetic",
                self.rate
            ));
        }
        if self.burst > 1_000_000_000 {
            return Err(field_error!("burst", "at most 1000000000"));
        }
        let delay = match (self.nodelay, self.delay) {
            (true, Some(_)) => {
                return Err(field_error!("delay", "give either `nodelay` or `delay`, not both"));
            }
            (true, None) => i64::MAX,
            (false, Some(delay)) => i64::try_from(delay.min(self.burst)).unwrap_or(i64::MAX) * 1000,
            (false, None) => 0,
        };
        Ok(NginxLimitReq {
            rate,
            burst: self.burst as i64 * 1000,
            delay,
            excess: None,
            last_ms: 0,
            before: (None, 0),
        })
    }

    /// The sizing parameter: the burst.
    fn parameter(&self, _: Context) -> (&'static str, u64) {
        ("burst", self.burst)
    }

    /// The same zone with burst `value`.
    fn with_parameter(&self, value: u64) -> Config {
        Config {
            burst: value,
            ..self.clone()
        }
    }

    /// `burst=0` (or none written) is nginx's strictest setting: one request
    /// per 1/rate, no queue.
    fn least_parameter(&self) -> u64 {
        0
    }

    /// Sized with the burst: the rate, when written per second.
    fn companion(&self, _: Context) -> Option<super::Companion> {
        let per_second = self.rate.trim().strip_suffix("r/s")?;
        super::count_companion("rate", per_second.parse().ok()?)
    }

    /// The same zone at `value` requests per second.
    fn with_companion(&self, value: u64) -> Config {
        Config {
            rate: format!("{}r/s", value.max(1)),
            ..self.clone()
        }
    }

    /// `limit_req_zone … zone=site rate=120r/s;` and
    /// `limit_req zone=site burst=29 nodelay;` (the key and the zone's size
    /// are nginx.conf's own).
    fn gateway_lines(&self, zone: &str) -> Option<Vec<String>> {
        let pass = match (self.nodelay, self.delay) {
            (true, _) => " nodelay".to_string(),
            (false, Some(delay)) => format!(" delay={delay}"),
            (false, None) => String::new(),
        };
        Some(vec![
            format!("limit_req_zone … zone={zone} rate={};", self.rate.trim()),
            format!("limit_req zone={zone} burst={}{pass};", self.burst),
        ])
    }

    fn example(choice: u64) -> String {
        let rate = choice % 1_999 + 1;
        let delay = choice / 5_997 % 30;
        format!(
            "rate = \"{rate}{}\"\nburst = {}\n{}",
            if rate.is_multiple_of(2) { "r/s" } else { "r/m" },
            choice / 1_999 % 30,
            [
                "nodelay = true".to_string(),
                String::new(),
                format!("delay = {delay}")
            ][(choice / 59_970 % 3) as usize]
        )
    }
}

impl Config {
    /// nginx's `ctx->rate`: thousandths of a request per second.
    fn rate(&self) -> Result<i64, FieldError> {
        let text = self.rate.trim();
        let (number, scale) = match (text.strip_suffix("r/s"), text.strip_suffix("r/m")) {
            (Some(number), _) => (number, 1),
            (_, Some(number)) => (number, 60),
            _ => {
                return Err(field_error!("rate", "{text:?} is not nginx's notation; expected like \"10r/s\" or \"30r/m\""
                ));
            }
        };
        let rate: i64 = number
            .parse()
            .ok()
            .filter(|&r| r > 0 && r <= 1_000_000_000)
            .ok_or_else(|| field_error!("rate", "{text:?} needs a whole number of requests above 0"))?;
        Ok(rate * 1000 / scale)
    }
}

/// One key's node of nginx's zone. At `t`, with `ms` whole milliseconds since
/// the last accepted request: `excess = max(0, excess − rate·ms/1000 + 1000)`
/// (integer division, as in C); the request is rejected if `excess > burst`,
/// otherwise accepted, and delayed by `(excess − delay)·1000/rate` ms when
/// `excess > delay`. The first request finds no node and has an excess of 0.
/// Requests in the same millisecond see no drain at all.
#[derive(Clone, Debug)]
pub struct NginxLimitReq {
    rate: i64,
    burst: i64,
    /// Thousandths of a request passed at once before delays start (`i64::MAX`: nodelay).
    delay: i64,
    excess: Option<i64>,
    last_ms: u64,
    /// `(excess, last_ms)` before the last accepted request, so that taking
    /// it back leaves the node as if it had been rejected.
    before: (Option<i64>, u64),
}

impl NginxLimitReq {
    fn excess_at(&self, now_ms: u64) -> i64 {
        let Some(excess) = self.excess else { return 0 };
        let ms = i64::try_from(now_ms - self.last_ms).unwrap_or(i64::MAX);
        (excess - self.rate.saturating_mul(ms) / 1000 + 1000).max(0)
    }
}

impl RateLimiter for NginxLimitReq {
    /// Rejects with 503 and no hint at all (`limit_req_status` changes the
    /// status, never adds `Retry-After`); delays what it passes beyond the
    /// `delay` allowance.
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        let now_ms = now.get() / NANOS_PER_MS;
        let excess = self.excess_at(now_ms);
        if excess > self.burst {
            return Decision::Reject(Hint::NONE);
        }
        self.before = (self.excess, self.last_ms);
        self.excess = Some(excess);
        self.last_ms = now_ms;
        let delay_ms = if excess > self.delay {
            (excess - self.delay) * 1000 / self.rate
        } else {
            0
        };
        match delay_ms {
            0 => Decision::Admit,
            ms => Decision::Delay(Nanos(ms as u64 * NANOS_PER_MS)),
        }
    }

    /// As if the last accepted request had been rejected: a rejected
    /// request leaves nginx's node untouched (excess and last time alike), as
    /// when a later `limit_req` zone rejects it.
    fn refund(&mut self, _now: Nanos) {
        (self.excess, self.last_ms) = self.before;
    }

    /// Passed with `nodelay`, in an interval of L with Δ = ⌊(L − 1)/1 ms⌋ + 1
    /// whole milliseconds: at most B + 1 + ⌊rate·Δ⌋ — each request adds one,
    /// the excess stays within the burst B and drains at most rate·Δ.
    ///
    /// Released, with delays (D requests passed at once, `delay = D`; 0 by
    /// default), T = 1/rate: give each accepted request, accepted at t with
    /// excess e, the exact time W = t + (e − D)·T. Between consecutive
    /// acceptances e grows by one request less the (floored, clamped at 0)
    /// drain rate·Δms, so W grows by at least T + (t_j − t_i) − Δms·1 ms;
    /// summed over a run of acceptances the second part telescopes to more
    /// than −1 ms, so k requests have W spread over more than (k − 1)·T −
    /// 1 ms. A delayed request is released at t + ⌊(e − D)·T⌋ms, within 1 ms
    /// before its W; an undelayed one at t, within D·T after its W. So the k
    /// released in [s, s + L) have W in [s − D·T, s + L + 1 ms): (k − 1)·T <
    /// L + 2 ms + D·T, k ≤ D + ⌈(L + 2 ms)·rate⌉. At high rates whole
    /// milliseconds let many through at once (10000r/s: 21 in 2 ns, nginx
    /// itself included); at 100r/s it is 101 per second, which is reached.
    fn bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        if self.delay == i64::MAX {
            let ms = (interval.get() - 1) / NANOS_PER_MS + 1;
            let drained = (i128::from(self.rate) * i128::from(ms) / 1_000_000) as u64;
            return ((self.burst / 1000) as u64)
                .saturating_add(1)
                .saturating_add(drained);
        }
        // rate is in thousandths per second: (L + 2 ms)·rate/(1000·10⁹), rounded up.
        let span = i128::from(interval.get()) + 2 * i128::from(NANOS_PER_MS);
        let paced = (span * i128::from(self.rate) + 999_999_999_999) / 1_000_000_000_000;
        let at_once = self.delay.min(self.burst) / 1000;
        u64::try_from(paced)
            .unwrap_or(u64::MAX)
            .saturating_add(at_once as u64)
    }

    /// Accepted at their decision times (before any delay), as for
    /// `nodelay`: what a chain can count on for this layer when another
    /// layer's delay moves the release.
    fn decision_bound(&self, interval: Nanos) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        let ms = (interval.get() - 1) / NANOS_PER_MS + 1;
        let drained = (i128::from(self.rate) * i128::from(ms) / 1_000_000) as u64;
        ((self.burst / 1000) as u64)
            .saturating_add(1)
            .saturating_add(drained)
    }

    /// The longest delay: the whole burst beyond `delay`, paced.
    fn max_delay(&self) -> Nanos {
        if self.delay == i64::MAX {
            return Nanos::ZERO;
        }
        let ms = i128::from((self.burst - self.delay.min(self.burst)).max(0)) * 1000
            / i128::from(self.rate);
        Nanos(u64::try_from(ms * i128::from(NANOS_PER_MS)).unwrap_or(u64::MAX))
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        self.rate as f64 / 1000.0 * interval.as_secs_f64()
    }

    /// A node of the shared-memory zone: 128 B on 64-bit platforms (nginx's
    /// documentation: "one megabyte zone can keep about 16 thousand 64-byte
    /// states or about 8 thousand 128-byte states"). No store commands.
    fn state_bytes(&self) -> Option<u64> {
        Some(128)
    }

    fn describe(&self) -> String {
        let mode = match self.delay {
            i64::MAX => "nodelay".to_string(),
            0 => "delayed".to_string(),
            delay => format!("delay={}", delay / 1000),
        };
        format!(
            "{}/s, burst {}, {mode}",
            self.rate as f64 / 1000.0,
            self.burst / 1000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(rate: &str, burst: u64, nodelay: bool) -> NginxLimitReq {
        Config {
            rate: rate.into(),
            burst,
            nodelay,
            delay: None,
        }
        .build(Context::default())
        .unwrap()
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn reads_nginx_rates() {
        assert_eq!(zone("10r/s", 0, false).rate, 10_000);
        assert_eq!(zone("30r/m", 0, false).rate, 500);
        assert!(
            Config {
                rate: "10 per second".into(),
                burst: 0,
                nodelay: false,
                delay: None
            }
            .build(Context::default())
            .is_err()
        );
    }

    #[test]
    fn nodelay_passes_burst_plus_one_at_once() {
        let mut z = zone("10r/s", 5, true);
        let decisions: Vec<Decision> = (0..10).map(|_| z.decide(Nanos(0))).collect();
        assert_eq!(
            decisions.iter().filter(|d| **d == Decision::Admit).count(),
            6
        );
        assert_eq!(decisions[6], Decision::Reject(Hint::NONE), "503, no hint");
        // 100 ms drains one request's 1000: one more passes.
        assert!(!z.decide(Nanos(99 * MS)).admitted());
        assert!(z.decide(Nanos(100 * MS)).admitted());
    }

    #[test]
    fn without_nodelay_the_burst_waits_its_turn() {
        let mut z = zone("10r/s", 5, false);
        let delays: Vec<u64> = (0..6)
            .map(|_| z.decide(Nanos(0)))
            .filter(|d| d.admitted())
            .map(|d| d.delay().get() / MS)
            .collect();
        assert_eq!(delays, [0, 100, 200, 300, 400, 500]);
    }

    #[test]
    fn thirty_per_minute_never_drains_at_one_request_per_millisecond() {
        // 500 thousandths per second is half a thousandth per millisecond,
        // which nginx's integer arithmetic rounds to nothing.
        let mut z = zone("30r/m", 3, true);
        let passed = (0..100)
            .filter(|i| z.decide(Nanos(i * MS)).admitted())
            .count();
        assert_eq!(passed, 4);
    }
}
