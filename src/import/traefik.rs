//! Traefik's `rateLimit` middleware, from a file provider's
//! `http.middlewares.<name>.rateLimit` or a Kubernetes `Middleware`
//! resource's `spec.rateLimit`: `average`, `period`, `burst` become a
//! `traefik` limiter. Traefik always limits per source (the client's
//! address unless `sourceCriterion` says otherwise), which is
//! `per = "key"`. A distributed `redis` limiter is an error at its line.

use super::yaml::{Node, Value};
use super::{Block, Source, duration, go_duration};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str = "supported: rateLimit with average, period, burst and sourceCriterion, under http.middlewares or in a Middleware resource";

pub(super) fn read(source: &Source, documents: &[Node]) -> Result<Vec<Block>, ScenarioError> {
    let mut found: Vec<(String, &Node)> = Vec::new();
    for document in documents {
        if let Some(middlewares) = document.get("http").and_then(|h| h.get("middlewares")) {
            for (name, middleware) in middlewares.entries() {
                if let Some(limit) = middleware.get("rateLimit") {
                    found.push((name.clone(), limit));
                }
            }
        }
        if document.get("kind").and_then(Node::text) == Some("Middleware") {
            let name = document
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Node::text)
                .unwrap_or("middleware");
            if let Some(limit) = document.get("spec").and_then(|s| s.get("rateLimit")) {
                found.push((name.to_string(), limit));
            }
        }
    }
    found
        .into_iter()
        .map(|(name, limit)| middleware(source, &name, limit))
        .collect()
}

fn middleware(source: &Source, name: &str, limit: &Node) -> Result<Block, ScenarioError> {
    let mut block = Block::new(
        name,
        source.at(limit.line, format!("rateLimit middleware {name:?}")),
        "traefik",
        source.at(limit.line, "rateLimit"),
    )
    .named("the middleware's name");
    block.per_instance("Traefik instance");
    let mut criterion = None;
    for (key, value) in limit.entries() {
        let here = source.at(value.line, key);
        match key.as_str() {
            "average" => {
                let average = value.number(source, "average")?;
                if average == 0 {
                    return Err(value.error(
                        source,
                        "average: 0 turns Traefik's rate limiting off: nothing to simulate",
                    ));
                }
                block.set("average", average as i64, here);
            }
            "burst" => {
                let burst = value.number(source, "burst")?;
                block.set("burst", burst.max(1) as i64, here);
            }
            "period" => {
                let text = value.string(source, "period")?;
                let ns = match text.trim().parse::<u64>() {
                    // A bare number is seconds, as Traefik reads it.
                    Ok(seconds) => seconds.checked_mul(1_000_000_000),
                    Err(_) => go_duration(&text).map(|d| d.get()),
                }
                .filter(|&ns| ns > 0)
                .ok_or_else(|| {
                    value.error(
                        source,
                        "period: expected a duration like \"1s\" or \"1m\", or seconds",
                    )
                })?;
                block.set("period", duration(ns), here);
            }
            "sourceCriterion" => criterion = Some(value),
            "redis" => {
                return Err(value.error(
                    source,
                    format!("redis: a distributed rate limiter is not modelled; {SUPPORTED}"),
                ));
            }
            other => {
                return Err(value.error(source, format!("{other}: not understood; {SUPPORTED}")));
            }
        }
    }
    if !block.fields.iter().any(|f| f.key == "average") {
        return Err(limit.error(
            source,
            "average is missing: without it Traefik does not limit",
        ));
    }
    let from = match criterion {
        Some(node) => {
            let what = match &node.value {
                Value::Map(entries) => entries
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => "?".into(),
            };
            source.at(
                node.line,
                format!("sourceCriterion ({what}): a bucket per source"),
            )
        }
        None => "not set: Traefik keeps a bucket per client address".into(),
    };
    block.set("per", "key", from);
    let by_host = criterion.is_some_and(|node| match &node.value {
        Value::Map(entries) => entries.iter().any(|(k, v)| {
            k == "requestHost" && matches!(&v.value, Value::Scalar(s) if s == "true")
        }),
        _ => false,
    });
    if by_host {
        block.notes.push(super::HOST_KEY_NOTE.to_string());
    }
    Ok(block)
}

#[cfg(test)]
mod tests {
    use crate::import::Dialect;

    /// `requestHost: true` keys by Host: the block says a workload's key
    /// must be the host for the states to be Traefik's.
    #[test]
    fn a_host_criterion_says_what_must_play_the_key() {
        let text = "http:\n  middlewares:\n    site:\n      rateLimit:\n        average: 100\n        sourceCriterion:\n          requestHost: true\n";
        let blocks =
            crate::import::testing::read_text("traefik.yaml", text, Dialect::Traefik).unwrap();
        assert!(
            blocks[0]
                .notes
                .iter()
                .any(|n| n.starts_with("keyed by the request's Host")),
            "{:?}",
            blocks[0].notes
        );
        let plain = text.replace("requestHost: true", "requestHeaderName: X-Key");
        let blocks =
            crate::import::testing::read_text("traefik.yaml", &plain, Dialect::Traefik).unwrap();
        assert!(
            !blocks[0].notes.iter().any(|n| n.contains("Host")),
            "{:?}",
            blocks[0].notes
        );
    }
    use crate::import::testing::{field, read_text};

    #[test]
    fn a_kubernetes_middleware_with_a_period_in_seconds() {
        let text = "apiVersion: traefik.io/v1alpha1\nkind: Middleware\nmetadata:\n  name: api-rl\nspec:\n  rateLimit:\n    average: 300\n    period: 60\n    sourceCriterion:\n      requestHeaderName: X-Api-Key\n---\nkind: Service\n";
        let blocks = read_text("traefik.yaml", text, Dialect::Traefik).unwrap();
        assert_eq!(blocks[0].name, "api-rl");
        assert_eq!(field(&blocks[0], "period").as_deref(), Some("\"60s\""));
        assert!(
            blocks[0]
                .fields
                .iter()
                .any(|f| f.from.contains("requestHeaderName"))
        );
    }

    #[test]
    fn average_zero_or_missing_is_refused() {
        let rl = |body: &str| format!("http:\n  middlewares:\n    rl:\n      rateLimit:\n{body}");
        let err = read_text(
            "traefik.yaml",
            &rl("        average: 0\n"),
            Dialect::Traefik,
        )
        .unwrap_err();
        assert!(err.contains("traefik.yaml:5:18: average: 0 turns"), "{err}");
        let err =
            read_text("traefik.yaml", &rl("        burst: 5\n"), Dialect::Traefik).unwrap_err();
        assert!(err.contains("average is missing"), "{err}");
    }
}
