//! Sentinel's cluster mode: the token server's check for a flow rule
//! (`ClusterFlowChecker.acquireClusterToken` and `calcGlobalThreshold` of
//! sentinel-cluster-server-default 1.8, `ClusterMetric` over the rule's
//! `clusterConfig.sampleCount` and `windowIntervalMs`): one limiter for
//! every instance, on the server's clock.

use std::num::NonZeroU64;

use serde::Deserialize;

use super::{Config, Sentinel, sliding_buckets};
use crate::error::{FieldError, field_error};
use crate::limiter::{Context, Kind};
use crate::time::Nanos;

const NANOS_PER_MS: u64 = 1_000_000;

/// `clusterConfig.thresholdType`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ThresholdType {
    /// `FLOW_THRESHOLD_AVG_LOCAL`: count × connected clients.
    #[default]
    AvgLocal,
    /// `FLOW_THRESHOLD_GLOBAL`: count.
    Global,
}

pub(super) fn yes() -> bool {
    true
}

pub(super) fn ten() -> NonZeroU64 {
    NonZeroU64::MIN.saturating_add(9)
}

pub(super) fn thousand() -> u64 {
    1_000
}

/// The token server's `ClusterFlowChecker.acquireClusterToken`: passes
/// while `threshold − pass / (windowIntervalMs / 1000.0) − 1 ≥ 0` in
/// doubles, so blocks from the least pass whose rate exceeds threshold − 1.
fn server_threshold(threshold: u64, interval_ms: u64) -> u64 {
    use rustc_apfloat::Float;
    use rustc_apfloat::ieee::Double;
    let double = |v: u64| Double::from_u128(u128::from(v)).value;
    let seconds = (double(interval_ms) / double(1_000)).value;
    let limit = double(threshold - 1);
    let over = |pass: u64| (double(pass) / seconds).value > limit;
    let mut least = ((u128::from(threshold - 1) * u128::from(interval_ms)) / 1_000) as u64;
    while least > 0 && over(least - 1) {
        least -= 1;
    }
    while !over(least) {
        least += 1;
    }
    least.max(1)
}

impl Config {
    /// The token server's check (`ClusterFlowChecker`, sentinel-cluster-server
    /// 1.8): the flow's `ClusterMetric`, `cluster_sample_count` buckets over
    /// `cluster_window_interval_ms` on the server's clock, and a threshold
    /// of count (global) or count × connected clients (AVG_LOCAL). The
    /// server answers OK or BLOCKED; the rule's control behaviour is not
    /// applied in cluster mode.
    pub(super) fn token_server(&self) -> Result<Sentinel, FieldError> {
        let clients = match self.threshold_type {
            ThresholdType::AvgLocal => self.connected_clients.map_or(1, NonZeroU64::get),
            ThresholdType::Global => 1,
        };
        if clients > 100_000 {
            return Err(field_error!("connected_clients", "at most 100000"));
        }
        let interval_ms = self.cluster_window_interval_ms;
        let samples = self.cluster_sample_count.get();
        if interval_ms == 0 || interval_ms > 3_600_000 || !interval_ms.is_multiple_of(samples) {
            return Err(field_error!("cluster_window_interval_ms", "whole milliseconds up to an hour that split into cluster_sample_count ({samples}) buckets, not {interval_ms}"));
        }
        let threshold = server_threshold(self.count.get() * clients, interval_ms);
        let buckets = sliding_buckets::Config {
            window: Nanos(interval_ms * NANOS_PER_MS),
            threshold: NonZeroU64::new(threshold).unwrap_or(NonZeroU64::MIN),
            buckets: self.cluster_sample_count,
        }
        .build(Context::default())
        .map_err(|e| FieldError::at("cluster_sample_count", e.message))?;
        Ok(Sentinel::TokenServer(buckets))
    }
}

impl Config {
    /// In a `[cluster]` of `instances`: the token server, whose connected
    /// clients they are, the rule's own controller each instance checks
    /// when the server fails (`FlowRuleUtil.generateRater`: the rule's
    /// `count` and behaviour on the node's statistics), and whether it
    /// does (`fallbackToLocalWhenFail`).
    pub fn for_cluster(&self, instances: u64) -> Result<(Sentinel, Sentinel, bool), FieldError> {
        if let Some(given) = self.connected_clients.filter(|c| c.get() != instances) {
            return Err(field_error!("connected_clients", "in a [cluster] the token server's clients are its {instances} instances; drop connected_clients (got {given})"));
        }
        let server = Config {
            connected_clients: NonZeroU64::new(instances),
            ..self.clone()
        }
        .token_server()?;
        let local = Config {
            cluster_mode: false,
            ..self.clone()
        }
        .build(Context::default())?;
        Ok((server, local, self.fallback_to_local_when_fail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::{Decision, RateLimiter};

    fn server(text: &str) -> Sentinel {
        let config: Config = toml::from_str(text).unwrap();
        config.build(Context::default()).unwrap()
    }

    #[test]
    fn avg_local_multiplies_count_by_the_connected_clients() {
        // 3 clients × 10: 30 per rolling second of ten 100 ms buckets.
        let mut s = server("count = 10\ncluster_mode = true\nconnected_clients = 3");
        let passed = (0..40).filter(|_| s.decide(Nanos(950 * NANOS_PER_MS)).admitted()).count();
        assert_eq!(passed, 30);
        // The bucket of 900 ms is reused for 1.9 s: counted until then.
        assert!(!s.decide(Nanos(1_900 * NANOS_PER_MS - 1)).admitted());
        assert_eq!(s.decide(Nanos(1_900 * NANOS_PER_MS)), Decision::Admit);
        let mut global = server("count = 10\ncluster_mode = true\nthreshold_type = \"global\"\nconnected_clients = 3");
        let passed = (0..40).filter(|_| global.decide(Nanos(0)).admitted()).count();
        assert_eq!(passed, 10);
        // 2N within a bucket (900 ms) and a millisecond.
        assert_eq!(global.bound(Nanos(901 * NANOS_PER_MS)), 20);
        assert_eq!(global.bound(Nanos(900 * NANOS_PER_MS)), 10);
    }

    #[test]
    fn the_threshold_is_the_servers_double_comparison() {
        // Over 1.2 s: pass / 1.2 > 9 blocks, so 11 pass (10/1.2 = 8.33…,
        // 11/1.2 = 9.17 blocks the twelfth): the rule's count is per second.
        assert_eq!(server_threshold(10, 1_200), 11);
        assert_eq!(server_threshold(10, 1_000), 10);
        assert_eq!(server_threshold(1, 1_000), 1);
        // 0.3 s: 3 / 0.3 = 10.000000000000002 > 9 and 2 / 0.3 = 6.67 ≤ 9.
        assert_eq!(server_threshold(10, 300), 3);
    }

}
