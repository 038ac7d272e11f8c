//! Sentinel flow rules as its data sources and dashboard write them: a JSON
//! array of `FlowRule` objects (`resource`, `grade`, `count`,
//! `controlBehavior`, `maxQueueingTimeMs`, …). Each QPS rule becomes a
//! `sentinel` limiter named after its resource. What the model does not
//! cover — thread-count rules, the warm-up rate limiter, a cluster config's borrowing, relate or
//! chain strategies, fractional counts — is an error at its line, never a
//! different limit.

use super::yaml::Node;
use super::{Block, Source};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str = "supported: a JSON array of flow rules with resource, grade 1 (QPS), a whole count, controlBehavior 0 (default), 1 (warm up, with warmUpPeriodSec) or 2 (rate limiter), maxQueueingTimeMs, strategy 0 (direct), limitApp, clusterMode with clusterConfig thresholdType, sampleCount, windowIntervalMs";

/// Keys a rule may carry that change nothing about the limit (the
/// dashboard's bookkeeping, settings of behaviours not in use).
const IGNORED: [&str; 9] = [
    "id",
    "app",
    "ip",
    "port",
    "gmtCreate",
    "gmtModified",
    "limitApp",
    "clusterConfig",
    "refResource",
];

pub(super) fn read(source: &Source, documents: &[Node]) -> Result<Vec<Block>, ScenarioError> {
    let Some(rules) = documents.first() else {
        return Ok(Vec::new());
    };
    if rules.text().is_some() || !rules.entries().is_empty() {
        return Err(rules.error(
            source,
            format!("expected a JSON array of flow rules; {SUPPORTED}"),
        ));
    }
    super::refuse_too_many(source, rules.items().iter().map(|r| (r.line, r.column)))?;
    rules
        .items()
        .iter()
        .map(|rule| limiter(source, rule))
        .collect()
}

fn limiter(source: &Source, rule: &Node) -> Result<Block, ScenarioError> {
    let resource = rule
        .require(
            source,
            "resource",
            format!("a flow rule needs its resource; {SUPPORTED}"),
        )?
        .string(source, "resource")?;
    let here = |key: &str, node: &Node| {
        source.at(
            node.line,
            format!("\"{key}\": {}", node.text().unwrap_or("…")),
        )
    };
    let whole = |key: &str, node: &Node| -> Result<u64, ScenarioError> {
        let text = node.text().unwrap_or("").trim();
        // JSON writes 100.0 for a double count; a fraction is refused.
        let integral = text.strip_suffix(".0").unwrap_or(text);
        integral.parse::<u64>().map_err(|_| {
            node.error(
                source,
                format!("{key}: expected a whole number, got {text:?} (fractional counts are not modelled)"),
            )
        })
    };
    let mut block = Block::new(
        &resource,
        source.at(rule.line, format!("flow rule of resource {resource}")),
        "sentinel",
        source.at(rule.line, "FlowRule"),
    )
    .named("its resource");
    let mut has_count = false;
    let mut behavior_rate_limiter = None;
    let mut behavior_warm_up = None;
    let mut queueing = None;
    let mut warm_up = None;
    let mut cluster = None;
    for (key, node) in rule.entries() {
        match key.as_str() {
            "resource" => {}
            key if IGNORED.contains(&key) => {
                if key == "limitApp" && node.text() != Some("default") {
                    block.notes.push(format!(
                        "limitApp {:?}: the rule applies to calls from that origin only; the model limits every request it is given",
                        node.text().unwrap_or("")
                    ));
                }
            }
            "grade" => match node.text() {
                Some("1") => {}
                _ => {
                    return Err(node.error(
                        source,
                        format!("grade: only 1 (QPS) is modelled; 0 limits threads, not requests; {SUPPORTED}"),
                    ));
                }
            },
            "count" => {
                let count = whole(key, node)?;
                if count == 0 {
                    return Err(
                        node.error(source, "count: 0 blocks every request; expected at least 1")
                    );
                }
                block.set("count", count as i64, here(key, node));
                has_count = true;
            }
            "strategy" => {
                if node.text() != Some("0") {
                    return Err(node.error(
                        source,
                        format!("strategy: only 0 (direct) is modelled; relate and chain strategies count another resource's or entrance's traffic; {SUPPORTED}"),
                    ));
                }
            }
            "controlBehavior" => match node.text() {
                Some("0") => {}
                Some("1") => behavior_warm_up = Some(here(key, node)),
                Some("2") => behavior_rate_limiter = Some(here(key, node)),
                Some("3") => {
                    return Err(node.error(
                        source,
                        format!("controlBehavior: the warm-up rate limiter (3) is not modelled yet; {SUPPORTED}"),
                    ));
                }
                _ => {
                    return Err(node.error(
                        source,
                        format!("controlBehavior: expected 0, 1, 2 or 3; {SUPPORTED}"),
                    ));
                }
            },
            "maxQueueingTimeMs" => queueing = Some((whole(key, node)?, here(key, node))),
            "warmUpPeriodSec" => warm_up = Some((whole(key, node)?, here(key, node))),
            "clusterMode" => {
                if node.boolean(source, key)? {
                    cluster = Some(here(key, node));
                }
            }
            "regex" => {
                if node.boolean(source, key)? {
                    block.notes.push("regex: the resource is a pattern, and every resource it matches keeps its own count".into());
                }
            }
            other => {
                return Err(node.error(source, format!("{other}: not understood; {SUPPORTED}")));
            }
        }
    }
    if !has_count {
        return Err(rule.error(
            source,
            format!("the flow rule of {resource} has no count; {SUPPORTED}"),
        ));
    }
    if let Some(from) = behavior_rate_limiter {
        block.set("control_behavior", "rate-limiter", from);
        let (ms, from) = queueing.unwrap_or((500, "not set: FlowRule's default, 500".into()));
        block.set("max_queueing_time_ms", ms as i64, from);
    }
    if let Some(from) = behavior_warm_up {
        block.set("control_behavior", "warm-up", from);
        let (sec, from) = warm_up.unwrap_or((10, "not set: FlowRule's default, 10".into()));
        block.set("warm_up_period_sec", sec as i64, from);
    }
    match cluster {
        Some(from) => cluster_config(source, rule, &mut block, from)?,
        None => block.per_instance("application instance"),
    }
    Ok(block)
}

/// `clusterMode: true`: the token server decides with the rule's
/// `clusterConfig` (thresholdType, sampleCount, windowIntervalMs); what
/// only matters when the server fails is noted, never modelled away.
fn cluster_config(
    source: &Source,
    rule: &Node,
    block: &mut Block,
    from: String,
) -> Result<(), ScenarioError> {
    block.set("cluster_mode", true, from);
    let Some(config) = rule.get("clusterConfig") else {
        block.notes.push("clusterMode without clusterConfig: thresholdType AVG_LOCAL (0), the server's default; run it in a [cluster] of the instances connected to the token server, or set connected_clients to their number (1 assumed)".into());
        return Ok(());
    };
    let at = |key: &str, node: &Node| {
        source.at(
            node.line,
            format!("clusterConfig \"{key}\": {}", node.text().unwrap_or("…")),
        )
    };
    let mut average = true;
    for (key, node) in config.entries() {
        match key.as_str() {
            "thresholdType" => match node.text() {
                Some("0") => block.set("threshold_type", "avg-local", at(key, node)),
                Some("1") => {
                    average = false;
                    block.set("threshold_type", "global", at(key, node));
                }
                _ => return Err(node.error(source, "clusterConfig.thresholdType: expected 0 (AVG_LOCAL) or 1 (GLOBAL)")),
            },
            "sampleCount" => block.set("cluster_sample_count", node.number(source, key)? as i64, at(key, node)),
            "windowIntervalMs" => block.set("cluster_window_interval_ms", node.number(source, key)? as i64, at(key, node)),
            "fallbackToLocalWhenFail" => {
                let fallback = node.boolean(source, key)?;
                block.set("fallback_to_local_when_fail", fallback, at(key, node));
            }
            "strategy" if node.text() == Some("0") => {}
            "strategy" => return Err(node.error(source, "clusterConfig.strategy: only 0 (normal) is modelled; borrowing from a reference resource is not")),
            "flowId" | "clientOfflineTime" | "resourceTimeout" | "resourceTimeoutStrategy" | "acquireRefuseStrategy" => {}
            other => return Err(node.error(source, format!("clusterConfig.{other}: not understood; supported: thresholdType, sampleCount, windowIntervalMs, fallbackToLocalWhenFail, strategy 0, flowId"))),
        }
    }
    if average {
        block.notes.push("thresholdType AVG_LOCAL: the token server multiplies count by the clients connected to it; run it in a [cluster] of that many instances, or set connected_clients to their number (1 assumed)".into());
    }
    block.notes.push("the token server fails only in a [cluster]'s store outages (then fallbackToLocalWhenFail applies); the client's 20 ms timeout and the server's namespace limit (30000 QPS) are not modelled".into());
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::import::Dialect;
    use crate::import::testing::{field, read_text};

    fn read(text: &str) -> Result<Vec<crate::import::Block>, String> {
        read_text("flow-rules.json", text, Dialect::Sentinel)
    }

    #[test]
    fn reads_a_dashboard_export() {
        let blocks = read(
            r#"[
  {"id": 3, "app": "shop", "resource": "checkout", "limitApp": "default", "grade": 1,
   "count": 100.0, "strategy": 0, "controlBehavior": 0, "clusterMode": false},
  {"resource": "GET:/api/cart", "grade": 1, "count": 20, "controlBehavior": 2, "maxQueueingTimeMs": 800}
]"#,
        )
        .unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].name, "checkout");
        assert_eq!(field(&blocks[0], "count").as_deref(), Some("100"));
        assert_eq!(field(&blocks[0], "control_behavior"), None);
        assert_eq!(
            field(&blocks[1], "control_behavior").as_deref(),
            Some("\"rate-limiter\"")
        );
        assert_eq!(
            field(&blocks[1], "max_queueing_time_ms").as_deref(),
            Some("800")
        );
        assert_eq!(blocks[1].name, "GET--api-cart");
    }

    #[test]
    fn a_warm_up_rule_keeps_its_period_or_takes_the_default() {
        let blocks = read(
            r#"[{"resource": "a", "count": 50, "controlBehavior": 1, "warmUpPeriodSec": 5},
  {"resource": "b", "count": 50, "controlBehavior": 1}]"#,
        )
        .unwrap();
        assert_eq!(
            field(&blocks[0], "control_behavior").as_deref(),
            Some("\"warm-up\"")
        );
        assert_eq!(
            field(&blocks[0], "warm_up_period_sec").as_deref(),
            Some("5")
        );
        assert_eq!(
            field(&blocks[1], "warm_up_period_sec").as_deref(),
            Some("10")
        );
    }

    #[test]
    fn a_cluster_rule_is_decided_by_the_token_server() {
        let blocks = read(
            r#"[{"resource": "pay", "grade": 1, "count": 50, "clusterMode": true,
  "clusterConfig": {"flowId": 7, "thresholdType": 1, "fallbackToLocalWhenFail": false, "sampleCount": 10, "windowIntervalMs": 1000}}]"#,
        )
        .unwrap();
        let block = &blocks[0];
        assert_eq!(field(block, "cluster_mode").as_deref(), Some("true"));
        assert_eq!(
            field(block, "threshold_type").as_deref(),
            Some("\"global\"")
        );
        assert_eq!(
            field(block, "fallback_to_local_when_fail").as_deref(),
            Some("false")
        );
        assert_eq!(
            field(block, "cluster_window_interval_ms").as_deref(),
            Some("1000")
        );
        assert!(
            block
                .notes
                .iter()
                .any(|n| n.contains("fails only in a [cluster]")),
            "{:?}",
            block.notes
        );
        assert!(
            !block
                .notes
                .iter()
                .any(|n| n.contains("each application instance")),
            "one server, not per instance"
        );
        let average = read(r#"[{"resource": "pay", "count": 50, "clusterMode": true, "clusterConfig": {"thresholdType": 0}}]"#).unwrap();
        assert!(
            average[0]
                .notes
                .iter()
                .any(|n| n.contains("connected_clients"))
        );
    }

    #[test]
    fn what_the_model_lacks_is_an_error_at_its_value() {
        for (rule, key, expected) in [
            (
                r#"{"resource": "a", "grade": 0, "count": 5}"#,
                "grade",
                "grade: only 1",
            ),
            (
                r#"{"resource": "a", "count": 5, "controlBehavior": 3}"#,
                "controlBehavior",
                "controlBehavior: the warm-up rate limiter",
            ),
            (
                r#"{"resource": "a", "count": 5, "clusterMode": true, "clusterConfig": {"strategy": 1}}"#,
                "strategy",
                "clusterConfig.strategy: only 0",
            ),
            (
                r#"{"resource": "a", "count": 2.5}"#,
                "count",
                "count: expected a whole number",
            ),
            (
                r#"{"resource": "a", "count": 5, "strategy": 1}"#,
                "strategy",
                "strategy: only 0",
            ),
            (
                r#"{"resource": "a", "cuont": 5}"#,
                "cuont",
                "cuont: not understood",
            ),
        ] {
            let text = format!("[{rule}]");
            // The caret's column: the value's, 1-based.
            let column = text.find(&format!("\"{key}\": ")).unwrap() + key.len() + 5;
            let err = read(&text).unwrap_err();
            assert!(
                err.contains(&format!("flow-rules.json:1:{column}: {expected}")),
                "{rule}: {err}"
            );
        }
        let err = read(r#"[{"resource": "a"}]"#).unwrap_err();
        assert!(err.contains("has no count"), "{err}");
        let err = read(r#"{"resource": "a", "count": 5}"#).unwrap_err();
        assert!(err.contains("expected a JSON array"), "{err}");
    }
}
