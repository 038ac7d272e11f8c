//! Traefik's `rateLimit` middleware, from a file provider's
//! `http.middlewares.<name>.rateLimit` or a Kubernetes `Middleware`
//! resource's `spec.rateLimit`: `average`, `period`, `burst` become a
//! `traefik` limiter. Traefik always limits per source (the client's
//! address unless `sourceCriterion` says otherwise), which is
//! `per = "key"`. A distributed `redis` limiter is an error at its line.

use std::collections::HashMap;

use super::yaml::{Node, Value};
use super::{Block, Place, Source, duration, go_duration};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str = "supported: rateLimit with average, period, burst and sourceCriterion, under http.middlewares or in a Middleware resource";

pub(super) fn read(source: &Source, documents: &[Node]) -> Result<super::Read, ScenarioError> {
    let mut found: Vec<(String, &Node)> = Vec::new();
    // `chain` middlewares: the names they list, in order.
    let mut chains: HashMap<String, Vec<String>> = HashMap::new();
    for document in documents {
        if let Some(middlewares) = document.get("http").and_then(|h| h.get("middlewares")) {
            for (name, middleware) in middlewares.entries() {
                if let Some(limit) = middleware.get("rateLimit") {
                    found.push((name.clone(), limit));
                }
                if let Some(chain) = middleware.get("chain") {
                    chains.insert(name.clone(), references(chain.get("middlewares")));
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
            if let Some(chain) = document.get("spec").and_then(|s| s.get("chain")) {
                chains.insert(name.to_string(), references(chain.get("middlewares")));
            }
        }
    }
    let blocks = found
        .iter()
        .map(|(name, limit)| middleware(source, name, limit))
        .collect::<Result<Vec<_>, _>>()?;
    let limits: HashMap<&str, &Block> = found
        .iter()
        .map(|(name, _)| name.as_str())
        .zip(&blocks)
        .collect();
    let places = routers(source, documents, &limits, &chains)?;
    Ok(super::Read {
        blocks,
        places,
        ..super::Read::default()
    })
}

/// The middleware names a router or a chain lists (`name@provider` as
/// `name`; a Kubernetes reference's `name`).
fn references(list: Option<&Node>) -> Vec<String> {
    list.map_or_else(Vec::new, |list| {
        list.items()
            .iter()
            .filter_map(|item| {
                item.text()
                    .or_else(|| item.get("name").and_then(Node::text))
            })
            .map(|name| name.split('@').next().unwrap_or(name).to_string())
            .collect()
    })
}

/// The deepest nesting of `chain` middlewares followed.
const MAX_CHAIN_DEPTH: usize = 16;
/// The most middleware references one router's chains are followed through.
const MAX_FOLLOWED: usize = 4_096;
/// The most rate limits all routers apply together (each a copy).
const MAX_ROUTER_LAYERS: usize = 10 * super::MAX_BLOCKS;

/// Every router (file provider `http.routers`, or each route of an
/// `IngressRoute`: `NAME`, or `NAME#N` when it has several) with the
/// rateLimit middlewares it applies, in its order, `chain`s followed.
fn routers(
    source: &Source,
    documents: &[Node],
    limits: &HashMap<&str, &Block>,
    chains: &HashMap<String, Vec<String>>,
) -> Result<Vec<Place>, ScenarioError> {
    let mut found: Vec<(String, &Node, Vec<String>)> = Vec::new();
    for document in documents {
        if let Some(routers) = document.get("http").and_then(|h| h.get("routers")) {
            for (name, router) in routers.entries() {
                found.push((name.clone(), router, references(router.get("middlewares"))));
            }
        }
        if document.get("kind").and_then(Node::text) == Some("IngressRoute") {
            let name = document
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Node::text)
                .unwrap_or("ingressroute");
            let routes = document
                .get("spec")
                .and_then(|s| s.get("routes"))
                .map_or(&[][..], Node::items);
            for (i, route) in routes.iter().enumerate() {
                let name = match routes.len() {
                    1 => name.to_string(),
                    _ => format!("{name}#{}", i + 1),
                };
                found.push((name, route, references(route.get("middlewares"))));
            }
        }
    }
    let mut places = Vec::new();
    // Limits over all routers: a chain shared by many is copied into each.
    let mut all_layers = 0usize;
    for (name, router, names) in found {
        let mut layers = Vec::new();
        let mut notes = Vec::new();
        let mut followed = 0usize;
        expand(
            &names,
            (limits, chains),
            (&mut Vec::new(), &mut followed),
            &mut layers,
            &mut notes,
        )
        .map_err(|err| router.error(source, format!("router {name:?}: {err}")))?;
        all_layers += layers.len();
        if all_layers > MAX_ROUTER_LAYERS {
            return Err(router.error(
                source,
                format!("routers applying more than {MAX_ROUTER_LAYERS} rate limits in all, this one included; burstsim reads no more"),
            ));
        }
        if layers.len() > super::MAX_BLOCKS {
            return Err(router.error(
                source,
                format!(
                    "router {name:?}: {} rate limits, more than the {} one import may hold",
                    layers.len(),
                    super::MAX_BLOCKS
                ),
            ));
        }
        places.push(Place {
            kind: "router",
            name: name.clone(),
            servers: Vec::new(),
            at: source.at(router.line, format!("router {name}")),
            inherited: None,
            layers: layers.into(),
            // Each middleware reserves its token before the next one runs
            // (rate_limiter.go: ReserveN, then next.ServeHTTP after the wait).
            count_rejected: true,
            delays_add_up: true,
            dry_run: false,
            notes,
        });
    }
    Ok(places)
}

/// Why a router's chains could not be followed.
#[derive(Debug, thiserror::Error)]
enum ChainError {
    #[error(
        "more than {MAX_FOLLOWED} middleware references followed through its chains; burstsim follows no more"
    )]
    TooManyReferences,
    #[error("a cycle of chain middlewares: {0}")]
    Cycle(String),
    #[error(
        "chain middlewares nested more than {MAX_CHAIN_DEPTH} deep, or more than {max} rate limits",
        max = super::MAX_BLOCKS
    )]
    TooDeep,
}

/// The rateLimit blocks of `names` in order, each `chain` replaced by what
/// it lists; `stack` is the chains being expanded (a cycle is an error).
fn expand(
    names: &[String],
    (limits, chains): (&HashMap<&str, &Block>, &HashMap<String, Vec<String>>),
    (stack, followed): (&mut Vec<String>, &mut usize),
    layers: &mut Vec<Block>,
    notes: &mut Vec<String>,
) -> Result<(), ChainError> {
    for name in names {
        // Chains listing chains many times over grow as a power of their
        // length without a limit in them: every reference counts.
        *followed += 1;
        if *followed > MAX_FOLLOWED {
            return Err(ChainError::TooManyReferences);
        }
        if let Some(block) = limits.get(name.as_str()) {
            layers.push((*block).clone());
        } else if let Some(inner) = chains.get(name) {
            if stack.contains(name) {
                return Err(ChainError::Cycle(format!("{} → {name}", stack.join(" → "))));
            }
            if stack.len() == MAX_CHAIN_DEPTH || layers.len() > super::MAX_BLOCKS {
                return Err(ChainError::TooDeep);
            }
            stack.push(name.clone());
            expand(inner, (limits, chains), (stack, followed), layers, notes)?;
            stack.pop();
        } else if !notes.iter().any(|n| n.contains(&format!("{name:?}"))) {
            notes.push(format!(
                "middleware {name:?} is not a rateLimit or chain of this file (another kind, or another provider's): it limits nothing here"
            ));
        }
    }
    Ok(())
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
    let by_host = criterion.is_some_and(|node| match &node.value {
        Value::Map(entries) => entries.iter().any(|(k, v)| {
            k == "requestHost" && matches!(&v.value, Value::Scalar(s) if s == "true")
        }),
        _ => false,
    });
    // requestHost keys the bucket by the request's Host: per Host, not client.
    block.set("per", if by_host { "host" } else { "key" }, from);
    if by_host {
        block.notes.push(super::HOST_KEY_NOTE.to_string());
    }
    Ok(block)
}

#[cfg(test)]
mod tests {
    use crate::import::Dialect;

    /// A router applies its rateLimit middlewares in the order listed,
    /// `chain`s followed and `@provider` suffixes read as the name; other
    /// middlewares limit nothing and are noted; a cycle of chains is an
    /// error at the router.
    #[test]
    fn a_router_applies_its_rate_limits_in_order() {
        let text = "http:\n  routers:\n    api:\n      middlewares: [gzip, site@file, clients]\n    plain:\n      middlewares: [gzip]\n  middlewares:\n    clients:\n      chain:\n        middlewares: [per-client]\n    site:\n      rateLimit: { average: 100, burst: 50 }\n    per-client:\n      rateLimit: { average: 10, burst: 20 }\n    gzip:\n      compress: {}\n";
        let source = crate::import::Source::new(std::path::Path::new("traefik.yaml"), text);
        let read = super::read(&source, &crate::import::yaml::parse(&source).unwrap()).unwrap();
        let api = &read.places[0];
        assert_eq!((api.kind, api.name.as_str()), ("router", "api"));
        let names: Vec<&str> = api.layers.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["site", "per-client"]);
        assert!(api.count_rejected && api.delays_add_up);
        assert!(
            api.notes[0].starts_with("middleware \"gzip\" is not a rateLimit"),
            "{:?}",
            api.notes
        );
        let table = api.table();
        assert_eq!(table["delays"].as_str(), Some("add-up"));
        assert_eq!(table["count_rejected"].as_bool(), Some(true));
        assert!(read.places[1].layers.is_empty());

        let cycle = text.replace("[per-client]", "[clients]");
        let source = crate::import::Source::new(std::path::Path::new("traefik.yaml"), &cycle);
        let err = super::read(&source, &crate::import::yaml::parse(&source).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("router \"api\": a cycle of chain middlewares: clients → clients"),
            "{err}"
        );

        // Chains listing chains 20 times over, 10 deep: 20^10 references
        // without a limit among them, refused after 4,096.
        let mut blowup =
            String::from("http:\n  routers:\n    api:\n      middlewares: [c0]\n  middlewares:\n");
        for level in 0..10 {
            let next = format!("c{}", level + 1);
            blowup.push_str(&format!(
                "    c{level}:\n      chain:\n        middlewares: [{}]\n",
                vec![next.as_str(); 20].join(", ")
            ));
        }
        blowup.push_str("    c10:\n      compress: {}\n");
        let source = crate::import::Source::new(std::path::Path::new("traefik.yaml"), &blowup);
        let err = super::read(&source, &crate::import::yaml::parse(&source).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("more than 4096 middleware references followed"),
            "{err}"
        );
    }

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
