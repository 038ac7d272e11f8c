//! Alibaba Sentinel's QPS flow rule (`FlowRule` with `grade = 1`), modelled
//! from its source (sentinel-core, 1.8.x / 2.0 line,
//! `slots/block/flow/controller/DefaultController.java`,
//! `ThrottlingController.java` and `slots/statistic/base/LeapArray.java`):
//!
//! - `control_behavior = "default"` (`DefaultController`): a request is
//!   blocked when `(int) passQps + 1 > count`, where `passQps` is the passed
//!   requests in the node's rolling second divided by the interval in
//!   seconds. The rolling second is a `LeapArray` of `sample_count` buckets
//!   of `interval / sample_count` milliseconds aligned on the epoch
//!   millisecond (`windowStart = t − t % length`), of which the last
//!   `sample_count` count (a bucket is dropped when `t − windowStart >
//!   interval`, which never keeps an older one). Blocked requests do not
//!   count. So it admits while the last buckets hold fewer than
//!   ⌈count · interval / 1 s⌉: the bucketed sliding window, 2N within one
//!   bucket and a millisecond at the default (two buckets of 500 ms).
//! - `control_behavior = "rate-limiter"` (`ThrottlingController`, the
//!   "uniform rate" behaviour): requests are spaced `cost = round(1 s /
//!   count)` apart: one passes at once when the last passed time plus `cost`
//!   is due, otherwise it waits for its turn (`latestPassedTime += cost`)
//!   when that wait is at most `max_queueing_time_ms`, and is blocked
//!   beyond it. The time is in cached milliseconds, or `System.nanoTime()`
//!   nanoseconds when `1000 % round(count) ≠ 0` or `count > 1000`, exactly
//!   as the controller chooses. The last passed time starts at −1, which a
//!   wall clock is always far past: the first request passes.
//!
//! A block is Sentinel's `FlowException`: the web adapters answer 429
//! "Blocked by Sentinel (flow limiting)" with no retry hint.
//! `control_behavior = "warm-up"` is `WarmUpController` (see [`warm_up`]).
//! `cluster_mode = true` is the token server's check (see
//! [`Config::token_server`]): one limiter for every instance; in a
//! `[cluster]` its outages fall back to each instance's own rule
//! (`fallbackToLocalWhenFail`, see `cluster/token_server.rs`). Not
//! modelled: the `warm-up-rate-limiter` behaviour, thread-count grade,
//! fractional counts, the client's 20 ms request timeout, the server's
//! namespace limit (`maxAllowedQps`, 30,000), prioritized waits.

use std::num::NonZeroU64;

use serde::Deserialize;

mod token_server;
mod warm_up;

pub use self::token_server::ThresholdType;

use self::warm_up::WarmUp;
use super::sliding_buckets::{self, SlidingBuckets};
use super::{Context, Decision, Hint, Kind, RateLimiter};
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

const NANOS_PER_MS: u64 = 1_000_000;

/// `kind = "sentinel"`, as a Sentinel flow rule's fields in snake_case.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `count`: the most passed per second (QPS).
    pub count: NonZeroU64,
    /// `controlBehavior`: `"default"` (reject at once, 0) or
    /// `"rate-limiter"` (queue at a uniform rate, 2).
    #[serde(default)]
    pub control_behavior: Behavior,
    /// `maxQueueingTimeMs` of the rate-limiter behaviour (default 500).
    #[serde(default = "default_queueing")]
    pub max_queueing_time_ms: u64,
    /// The rolling second's buckets (`SampleCountProperty.SAMPLE_COUNT`,
    /// default 2).
    #[serde(default = "default_sample_count")]
    pub sample_count: NonZeroU64,
    /// The rolling statistic's interval (`IntervalProperty.INTERVAL`,
    /// default 1 s), whole milliseconds.
    #[serde(default = "second")]
    pub interval: Nanos,
    /// `warmUpPeriodSec` of the warm-up behaviour (default 10).
    #[serde(default = "default_warm_up")]
    pub warm_up_period_sec: u64,
    /// `csp.sentinel.flow.cold.factor` (default 3), above 1.
    #[serde(default = "default_cold_factor")]
    pub cold_factor: u64,
    /// `clusterMode`: the token server decides (default false).
    #[serde(default)]
    pub cluster_mode: bool,
    /// `clusterConfig.thresholdType`: `"avg-local"` (0, the default: count
    /// per connected client) or `"global"` (1: count in all).
    #[serde(default)]
    pub threshold_type: ThresholdType,
    /// The clients connected to the token server, which AVG_LOCAL
    /// multiplies count by (default 1; in a `[cluster]`, its instances).
    pub connected_clients: Option<NonZeroU64>,
    /// `clusterConfig.fallbackToLocalWhenFail` (default true): when the
    /// server fails (`[cluster.store] outages`), each instance checks the
    /// rule itself; without it, everything passes.
    #[serde(default = "token_server::yes")]
    pub fallback_to_local_when_fail: bool,
    /// `clusterConfig.sampleCount`: the server's buckets (default 10).
    #[serde(default = "token_server::ten")]
    pub cluster_sample_count: NonZeroU64,
    /// `clusterConfig.windowIntervalMs` (default 1000).
    #[serde(default = "token_server::thousand")]
    pub cluster_window_interval_ms: u64,
}

fn default_warm_up() -> u64 {
    10
}

fn default_cold_factor() -> u64 {
    3
}

/// A flow rule's `controlBehavior`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Behavior {
    /// `CONTROL_BEHAVIOR_DEFAULT`: reject at once.
    #[default]
    Default,
    /// `CONTROL_BEHAVIOR_RATE_LIMITER`: queue, spaced at 1/count.
    RateLimiter,
    /// `CONTROL_BEHAVIOR_WARM_UP`: a ceiling that rises as tokens are used.
    WarmUp,
}

fn default_queueing() -> u64 {
    500
}

fn default_sample_count() -> NonZeroU64 {
    NonZeroU64::MIN.saturating_add(1)
}

fn second() -> Nanos {
    Nanos::SECOND
}

impl Kind for Config {
    const NAME: &'static str = "sentinel";
    type State = Sentinel;

    fn build(&self, _: Context) -> Result<Sentinel, FieldError> {
        let count = self.count.get();
        if count > 1_000_000_000 {
            return Err(field_error!("count", "at most 1000000000 per second (got {count})"));
        }
        if self.cluster_mode {
            return self.token_server();
        }
        match self.control_behavior {
            Behavior::Default | Behavior::WarmUp => {
                let interval = self.interval.get();
                let samples = self.sample_count.get();
                if interval == 0 || !interval.is_multiple_of(NANOS_PER_MS * samples) {
                    return Err(field_error!("interval", "Sentinel's buckets are whole milliseconds: {} does not split into {samples} of them",
                        self.interval
                    ));
                }
                // (int)(pass / (intervalMs / 1000.0)) + 1 > count blocks:
                // pass is admitted below the least pass whose passQps, in
                // doubles, reaches count — about count · interval / 1 s.
                let interval_ms = interval / NANOS_PER_MS;
                let exact = (u128::from(count) * u128::from(interval))
                    .div_ceil(u128::from(Nanos::SECOND.get()));
                let mut threshold = u64::try_from(exact)
                    .ok()
                    .filter(|&t| t < 1 << 52)
                    .ok_or_else(|| field_error!("count", "too large for its interval"))?;
                while threshold > 1 && warm_up::pass_qps(threshold - 1, interval_ms) >= count {
                    threshold -= 1;
                }
                while warm_up::pass_qps(threshold, interval_ms) < count {
                    threshold += 1;
                }
                let threshold = NonZeroU64::new(threshold).unwrap_or(NonZeroU64::MIN);
                let buckets = sliding_buckets::Config {
                    window: self.interval,
                    threshold,
                    buckets: self.sample_count,
                }
                .build(Context::default())
                .map_err(|e| FieldError::at("sample_count", e.message))?;
                if self.control_behavior == Behavior::Default {
                    return Ok(Sentinel::Default(buckets));
                }
                if self.cold_factor <= 1 || self.cold_factor > 1_000 {
                    return Err(field_error!("cold_factor", "from 2 to 1000 (Sentinel refuses 1 or less)"));
                }
                if self.warm_up_period_sec > 86_400 {
                    return Err(field_error!("warm_up_period_sec", "at most a day (86400)"));
                }
                Ok(Sentinel::WarmUp(Box::new(WarmUp::new(
                    buckets,
                    interval_ms,
                    count,
                    self.warm_up_period_sec,
                    self.cold_factor,
                ))))
            }
            Behavior::RateLimiter => {
                if self.max_queueing_time_ms > 3_600_000 {
                    return Err(field_error!("max_queueing_time_ms", "at most an hour (3600000)"));
                }
                // ThrottlingController's choice of clock.
                let nanos = !1_000u64.is_multiple_of(count) || count > 1_000;
                let (unit, cost) = if nanos {
                    // Math.round(1e9 / count): ⌊(2·10⁹ + count) / (2·count)⌋.
                    (1, (2 * Nanos::SECOND.get() + count) / (2 * count))
                } else {
                    (NANOS_PER_MS, 1_000 / count)
                };
                Ok(Sentinel::RateLimiter(Throttling {
                    unit,
                    cost,
                    max_queueing: self.max_queueing_time_ms * NANOS_PER_MS / unit,
                    count,
                    latest: None,
                    before: None,
                }))
            }
        }
    }

    super::parameter_is!(count);

    fn example(choice: u64) -> String {
        let count = [1, 3, 7, 10, 250, 1_000, 1_500, 3_000][(choice % 8) as usize];
        if choice % 5 == 4 {
            return format!(
                "count = {count}\ncluster_mode = true\nthreshold_type = \"{}\"\nconnected_clients = {}\ncluster_sample_count = {}\ncluster_window_interval_ms = {}",
                ["avg-local", "global"][(choice / 8 % 2) as usize],
                choice / 16 % 3 + 1,
                choice / 48 % 3 + 1,
                (choice / 144 % 2 + 1) * 1_200
            );
        }
        match choice / 8 % 3 {
            0 => format!(
                "count = {count}\nsample_count = {}\ninterval = \"{}ms\"",
                choice / 24 % 4 + 1,
                (choice / 96 % 3 + 1) * 1_200
            ),
            1 => format!(
                "count = {count}\ncontrol_behavior = \"warm-up\"\nwarm_up_period_sec = {}\ncold_factor = {}",
                choice / 24 % 4,
                choice / 96 % 3 + 2
            ),
            _ => format!(
                "count = {count}\ncontrol_behavior = \"rate-limiter\"\nmax_queueing_time_ms = {}",
                choice / 24 % 700
            ),
        }
    }
}

/// A Sentinel flow rule's controller.
#[derive(Clone, Debug)]
pub enum Sentinel {
    /// `DefaultController` over the node's `LeapArray`.
    Default(SlidingBuckets),
    /// `ThrottlingController`.
    RateLimiter(Throttling),
    /// `WarmUpController` (boxed: a limiter per key stays small).
    WarmUp(Box<WarmUp>),
    /// Cluster mode: the token server's `ClusterMetric`.
    TokenServer(SlidingBuckets),
}

/// `ThrottlingController`: the last passed time on its clock (`unit`
/// nanoseconds per tick), requests spaced `cost` ticks apart.
#[derive(Clone, Debug)]
pub struct Throttling {
    unit: u64,
    cost: u64,
    max_queueing: u64,
    count: u64,
    /// `latestPassedTime`, in ticks; `None` before the first pass.
    latest: Option<u64>,
    /// `latest` before the last pass, for a refund.
    before: Option<u64>,
}

impl Throttling {
    fn decide(&mut self, now: Nanos) -> Decision {
        let tick = now.get() / self.unit;
        let expected = self.latest.map(|latest| latest.saturating_add(self.cost));
        match expected {
            Some(expected) if expected > tick => {
                let wait = expected - tick;
                if wait > self.max_queueing {
                    return Decision::Reject(Hint::NONE);
                }
                self.before = self.latest;
                self.latest = Some(expected);
                // Thread.sleep(wait ms) / parkNanos(wait) from the call.
                Decision::Delay(Nanos(wait * self.unit))
            }
            _ => {
                self.before = self.latest;
                self.latest = Some(tick);
                Decision::Admit
            }
        }
    }

    /// Passed times (in ticks) are spaced at least `cost` apart and each
    /// request reaches the backend within its tick of its passed time (at
    /// it, on the nanosecond clock): k released in [s, s + L) have passed
    /// ticks within (L + unit − 1)/unit of each other, so (k − 1)·cost·unit
    /// ≤ L + unit − 2.
    fn bound(&self, interval: Nanos, ahead: u64) -> u64 {
        if interval == Nanos::ZERO {
            return 0;
        }
        if self.cost == 0 {
            return u64::MAX;
        }
        let span = u128::from(interval.get()) + u128::from(self.unit) - 2
            + u128::from(ahead) * u128::from(self.unit);
        let spaced = span / (u128::from(self.cost) * u128::from(self.unit));
        u64::try_from(spaced + 1).unwrap_or(u64::MAX)
    }
}

impl Sentinel {
    /// Counts a pass another check granted (the token server's) in the
    /// node's statistics, as `StatisticSlot` counts every pass;
    /// `ThrottlingController` keeps only its own last passed time.
    pub fn record(&mut self, now: Nanos) {
        match self {
            Sentinel::Default(buckets) | Sentinel::TokenServer(buckets) => {
                buckets.passed_at(now);
                buckets.count_one();
            }
            Sentinel::WarmUp(warm) => warm.record(now),
            Sentinel::RateLimiter(_) => {}
        }
    }

    /// Takes back the last [`Sentinel::record`].
    pub fn unrecord(&mut self, now: Nanos) {
        if !matches!(self, Sentinel::RateLimiter(_)) {
            self.refund(now);
        }
    }
}

impl RateLimiter for Sentinel {
    /// A block carries no hint (429 "Blocked by Sentinel").
    #[inline]
    fn decide_with<const HINTS: bool>(&mut self, now: Nanos) -> Decision {
        match self {
            Sentinel::Default(buckets) | Sentinel::TokenServer(buckets) => buckets.decide_with::<HINTS>(now),
            Sentinel::RateLimiter(throttling) => throttling.decide(now),
            Sentinel::WarmUp(warm) => warm.decide(now),
        }
    }

    fn refund(&mut self, now: Nanos) {
        match self {
            Sentinel::Default(buckets) | Sentinel::TokenServer(buckets) => buckets.refund(now),
            Sentinel::RateLimiter(throttling) => throttling.latest = throttling.before,
            Sentinel::WarmUp(warm) => warm.refund(now),
        }
    }

    /// The bucketed window's bound (2N in any interval of one bucket and a
    /// millisecond at the defaults), or the paced queue's: ⌊(L + 1 ms −
    /// 2 ns)/cost⌋ + 1 on the millisecond clock — N + 1 per second, since a
    /// request passed late in its millisecond and one passed early in a
    /// millisecond a second later are 999 ms and a bit apart.
    fn bound(&self, interval: Nanos) -> u64 {
        match self {
            Sentinel::Default(buckets) | Sentinel::TokenServer(buckets) => buckets.bound(interval),
            Sentinel::RateLimiter(throttling) => throttling.bound(interval, 0),
            Sentinel::WarmUp(warm) => warm.buckets().bound(interval),
        }
    }

    /// Passed at decision time, a queued request's passed tick is up to the
    /// queueing time after its decision.
    fn decision_bound(&self, interval: Nanos) -> u64 {
        match self {
            Sentinel::Default(buckets) | Sentinel::TokenServer(buckets) => buckets.bound(interval),
            Sentinel::RateLimiter(t) => t.bound(interval, t.max_queueing),
            Sentinel::WarmUp(warm) => warm.buckets().bound(interval),
        }
    }

    fn max_delay(&self) -> Nanos {
        match self {
            Sentinel::Default(_) | Sentinel::WarmUp(_) | Sentinel::TokenServer(_) => Nanos::ZERO,
            Sentinel::RateLimiter(t) => Nanos(t.max_queueing * t.unit),
        }
    }

    fn nominal(&self, interval: Nanos) -> f64 {
        match self {
            Sentinel::Default(buckets) | Sentinel::TokenServer(buckets) => buckets.nominal(interval),
            Sentinel::WarmUp(warm) => warm.buckets().nominal(interval),
            Sentinel::RateLimiter(t) => t.count as f64 * interval.as_secs_f64(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Sentinel::Default(buckets) => format!("Sentinel default: {}", buckets.describe()),
            Sentinel::TokenServer(buckets) => format!("Sentinel token server: {}", buckets.describe()),
            Sentinel::WarmUp(warm) => format!("Sentinel warm-up: {}", warm.buckets().describe()),
            Sentinel::RateLimiter(t) => format!(
                "Sentinel rate-limiter: {}/s, one per {}, queue ≤ {}",
                t.count,
                Nanos(t.cost * t.unit),
                Nanos(t.max_queueing * t.unit)
            ),
        }
    }

    fn window_edges(&self) -> Option<(Nanos, Nanos)> {
        match self {
            Sentinel::Default(buckets) | Sentinel::TokenServer(buckets) => buckets.window_edges(),
            Sentinel::WarmUp(warm) => warm.buckets().window_edges(),
            Sentinel::RateLimiter(_) => None,
        }
    }

    fn memory_at_most(&self, keys: u64, requests: u64, hashed: bool) -> u128 {
        match self {
            Sentinel::Default(buckets) | Sentinel::TokenServer(buckets) => buckets.memory_at_most(keys, requests, hashed),
            Sentinel::WarmUp(warm) => {
                super::allocation::<WarmUp>(1) + warm.buckets().memory_at_most(keys, requests, hashed)
            }
            Sentinel::RateLimiter(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NANOS_PER_MS;

    fn rule(text: &str) -> Sentinel {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    fn admitted(limiter: &mut Sentinel, at: u64, count: usize) -> usize {
        (0..count)
            .filter(|_| limiter.decide(Nanos(at)).admitted())
            .count()
    }

    #[test]
    fn the_default_lets_2n_through_within_half_a_second() {
        let mut l = rule("count = 10");
        assert_eq!(admitted(&mut l, 499 * MS, 15), 10, "bucket [0, 500)");
        assert_eq!(admitted(&mut l, 999 * MS, 5), 0, "it still counts");
        assert_eq!(admitted(&mut l, 1_000 * MS, 15), 10, "it left at 1000 ms");
        assert_eq!(l.bound(Nanos(501 * MS + 1)), 20);
        assert_eq!(l.bound(Nanos(500 * MS)), 10, "one bucket of 500 ms");
    }

    #[test]
    fn an_interval_other_than_a_second_scales_pass_to_a_second() {
        // Two seconds of statistics: (int)(pass / 2) + 1 > 10 blocks, so
        // 20 pass in the two seconds; with 1.5 s, (int)(pass / 1.5) + 1 >
        // 10 blocks from pass = 15.
        let mut l = rule("count = 10\ninterval = \"2s\"");
        assert_eq!(admitted(&mut l, 0, 30), 20);
        let mut l = rule("count = 10\ninterval = \"1500ms\"\nsample_count = 3");
        assert_eq!(admitted(&mut l, 0, 30), 15);
        let config: Config = toml::from_str("count = 10\ninterval = \"1001ms\"").unwrap();
        let err = config.build(Context::default()).unwrap_err().to_string();
        assert!(err.starts_with("interval: "), "{err}");
    }

    #[test]
    fn the_rate_limiter_queues_at_its_pace_and_blocks_past_the_queue() {
        let mut l = rule("count = 10\ncontrol_behavior = \"rate-limiter\"");
        let delays: Vec<Option<u64>> = (0..8)
            .map(|_| {
                let d = l.decide(Nanos(5 * MS + 300));
                d.admitted().then(|| d.delay().get())
            })
            .collect();
        // 100 ms apart on the millisecond clock, slept from the call;
        // 500 ms of queue is five more.
        let expected: Vec<Option<u64>> = [0, 100, 200, 300, 400, 500]
            .iter()
            .map(|ms| Some(ms * MS))
            .chain([None, None])
            .collect();
        assert_eq!(delays, expected);
        assert!(l.decide(Nanos(105 * MS)).delay() == Nanos(500 * MS), "the queue moved on");
    }

    #[test]
    fn the_rate_limiter_uses_nanoseconds_where_sentinel_does() {
        // 1000 % 3 ≠ 0: System.nanoTime(), cost round(1e9 / 3) = 333333333 ns.
        let mut l = rule("count = 3\ncontrol_behavior = \"rate-limiter\"\nmax_queueing_time_ms = 0");
        assert!(l.decide(Nanos(7)).admitted());
        assert!(!l.decide(Nanos(333_333_339)).admitted());
        assert!(l.decide(Nanos(333_333_340)).admitted());
        // 1500 per second: more than 1000, nanoseconds, cost 666667 ns.
        let Sentinel::RateLimiter(t) = rule("count = 1500\ncontrol_behavior = \"rate-limiter\"") else {
            panic!("rate limiter")
        };
        assert_eq!((t.unit, t.cost), (1, 666_667));
    }

    /// Admitted each second from 20 requests at its start, for `seconds`.
    fn per_second(l: &mut Sentinel, from: u64, seconds: u64) -> Vec<usize> {
        (from..from + seconds)
            .map(|s| admitted(l, s * 1_000 * MS, 20))
            .collect()
    }

    #[test]
    fn warm_up_starts_cold_and_rises_as_tokens_are_used() {
        // count 10 over 10 s, cold factor 3: warningToken (int)100 / 2 =
        // 50, maxToken 50 + (int)(200 / 4.0) = 100, slope 2.0 / 10 / 50.
        let mut l = rule("count = 10\ncontrol_behavior = \"warm-up\"");
        let Sentinel::WarmUp(warm) = &l else { panic!("warm-up") };
        assert_eq!(warm.tokens(), (0, 50, 100));
        // Full: ceiling nextUp(1 / (50 · 0.004 + 0.1)) = 3.33…: 3 pass;
        // each second takes its predecessor's passes from the store
        // (3 < (int)10 / 3 does not hold, so nothing is refilled).
        assert_eq!(per_second(&mut l, 0, 6), [3, 3, 3, 3, 3, 4]);
        let Sentinel::WarmUp(warm) = &l else { panic!("warm-up") };
        assert_eq!(warm.tokens().0, 85);
        let warm_by = per_second(&mut l, 6, 30);
        assert_eq!(warm_by[25..], [10; 5], "below the warning line: count");
        assert_eq!(l.bound(Nanos::SECOND), 20, "2N once warm");
        // Idle, it refills count a second from the last fill: cold again.
        assert_eq!(per_second(&mut l, 60, 1), [3]);
    }

    #[test]
    fn warm_up_under_four_tokens_blocks_everything_as_sentinel_does() {
        // maxToken = warningToken = 0: slope 1/0, and 0 · ∞ is NaN.
        let mut l = rule("count = 1\ncontrol_behavior = \"warm-up\"\nwarm_up_period_sec = 1");
        assert_eq!(per_second(&mut l, 0, 5), [0; 5]);
        // count 2 below the cold factor 3: a cold ceiling of 2/3 passes
        // nothing, so nothing ever takes the store down.
        let mut l = rule("count = 2\ncontrol_behavior = \"warm-up\"\nwarm_up_period_sec = 2");
        assert_eq!(per_second(&mut l, 0, 30), [0; 30]);
        let config: Config =
            toml::from_str("count = 10\ncontrol_behavior = \"warm-up\"\ncold_factor = 1").unwrap();
        let err = config.build(Context::default()).unwrap_err().to_string();
        assert!(err.contains("from 2"), "{err}");
    }

    #[test]
    fn pass_qps_is_a_double_division_as_sentinel_does_it() {
        // 33 / 1.1 is 29.999…96 in doubles: (long) 29, not 30.
        assert_eq!(warm_up::pass_qps(33, 1_100), 29);
        assert_eq!(warm_up::pass_qps(20, 2_000), 10);
        // So with 1.1 s of statistics at count 30, a 34th pass is let
        // through, not the 33 of exact arithmetic: (int)(33 / 1.1) + 1 = 30.
        let mut l = rule("count = 30\ninterval = \"1100ms\"\nsample_count = 1");
        assert_eq!(admitted(&mut l, 0, 60), 34);
    }

    proptest::proptest! {
        /// Released times, millisecond traffic around bucket and queue edges.
        #[test]
        fn never_releases_more_than_its_bound(
            choice in 0u64..10_000,
            mut times in proptest::collection::vec(0u64..3_000, 1..300),
            sub in 0u64..MS,
        ) {
            times.sort_unstable();
            let config: Config = toml::from_str(&Config::example(choice)).unwrap();
            let mut l = config.build(Context::default()).unwrap();
            let mut released: Vec<u64> = times
                .iter()
                .filter_map(|ms| {
                    let t = ms * MS + sub;
                    let d = l.decide(Nanos(t));
                    d.admitted().then(|| t + d.delay().get())
                })
                .collect();
            released.sort_unstable();
            for interval in [1, MS, 100 * MS, 400 * MS + 1, 1_000 * MS, 2_500 * MS] {
                let (worst, bound) = (crate::limiter::worst_in(&released, Nanos(interval)), l.bound(Nanos(interval)));
                proptest::prop_assert!(worst <= bound, "{}: {} > {} over {}", Config::example(choice), worst, bound, interval);
            }
        }
    }
}
