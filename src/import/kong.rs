//! Kong's declarative configuration: every plugin named `rate-limiting`
//! (global, or on a service, route or consumer) becomes a `kong` limiter
//! with its periods, `policy` and `sync_rate`; `limit_by` other than
//! `service` keeps counters per consumer, credential, address, header or
//! path, which is `per = "key"`. `rate-limiting-advanced` and
//! `response-ratelimiting` are errors at their line.

use super::yaml::Node;
use super::{Block, Source};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str = "supported: plugins named rate-limiting with second, minute, hour, day, month, year, policy (local, cluster, redis), sync_rate -1 or 0, limit_by, and fields that change no decision (redis connection, headers, error messages)";

const PERIODS: [&str; 6] = ["second", "minute", "hour", "day", "month", "year"];

/// Config fields that change no decision.
const IGNORED: &[&str] = &[
    "header_name",
    "path",
    "fault_tolerant",
    "error_code",
    "error_message",
    "redis",
    "redis_host",
    "redis_port",
    "redis_password",
    "redis_username",
    "redis_ssl",
    "redis_ssl_verify",
    "redis_server_name",
    "redis_timeout",
    "redis_database",
];

pub(super) fn read(source: &Source, documents: &[Node]) -> Result<Vec<Block>, ScenarioError> {
    let mut blocks = Vec::new();
    for document in documents {
        visit(source, document, "", None, &mut blocks)?;
    }
    Ok(blocks)
}

/// The entity a plugin is on: what it is (`consumer`, `service`, `route`;
/// empty when the list does not say) and its name; `None` for global.
type Owner<'a> = Option<(&'a str, &'a str)>;

/// A node, and the plugins listed in it, inside `owner`; `kind` is what the
/// node is when it is an entity of a `consumers`, `services` or `routes` list.
fn visit<'a>(
    source: &Source,
    node: &'a Node,
    kind: &'a str,
    owner: Owner<'a>,
    blocks: &mut Vec<Block>,
) -> Result<(), ScenarioError> {
    // A consumer is named by its username or custom_id, not a name.
    let name = ["name", "username", "custom_id"]
        .iter()
        .find_map(|key| node.get(key).and_then(Node::text));
    let owner = match name {
        Some(name) if node.get("config").is_none() => Some((kind, name)),
        _ => owner,
    };
    if let Some(plugins) = node.get("plugins") {
        for plugin in plugins.items() {
            if let Some(block) = plugin_block(source, plugin, owner)? {
                blocks.push(block);
            }
        }
    }
    for (key, value) in node.entries() {
        if key == "plugins" {
            continue;
        }
        let kind = match key.as_str() {
            "consumers" => "consumer",
            "services" => "service",
            "routes" => "route",
            _ => "",
        };
        for child in std::iter::once(value).chain(value.items()) {
            visit(source, child, kind, owner, blocks)?;
        }
    }
    Ok(())
}

fn plugin_block(
    source: &Source,
    plugin: &Node,
    owner: Owner,
) -> Result<Option<Block>, ScenarioError> {
    let Some(name) = plugin.get("name") else {
        return Ok(None);
    };
    match name.text() {
        Some("rate-limiting") => {}
        Some(other @ ("rate-limiting-advanced" | "response-ratelimiting")) => {
            return Err(name.error(source, format!("{other}: not modelled; {SUPPORTED}")));
        }
        _ => return Ok(None),
    }
    if let Some(enabled) = plugin.get("enabled")
        && !enabled.boolean(source, "enabled")?
    {
        return Ok(None);
    }
    let label = match (plugin.get("instance_name").and_then(Node::text), owner) {
        (Some(instance), _) => instance.to_string(),
        (None, Some((_, name))) => name.to_string(),
        (None, None) => "kong-global".to_string(),
    };
    let on = match owner {
        Some(("", name)) => name.to_string(),
        Some((kind, name)) => format!("{kind} {name}"),
        None => "global".to_string(),
    };
    let config = plugin.require(
        source,
        "config",
        format!("rate-limiting has no config; {SUPPORTED}"),
    )?;
    let mut block = Block::new(
        &label,
        source.at(plugin.line, format!("rate-limiting plugin of {on}")),
        "kong",
        source.at(name.line, "name: rate-limiting"),
    )
    .named(if plugin.get("instance_name").is_some() {
        "instance_name"
    } else {
        "the service, route or consumer it is on"
    });
    let mut limit_by = None;
    for (key, value) in config.entries() {
        let here = source.at(value.line, key);
        match key.as_str() {
            period if PERIODS.contains(&period) => {
                if matches!(value.value, super::yaml::Value::Null) {
                    continue;
                }
                let limit = value.number(source, period)?;
                if limit == 0 {
                    return Err(value.error(source, format!("{period}: 0 rejects every request")));
                }
                block.set(period, limit as i64, here);
            }
            "policy" => {
                let policy = value.string(source, "policy")?;
                if !["local", "cluster", "redis"].contains(&policy.as_str()) {
                    return Err(value.error(
                        source,
                        format!("policy {policy:?}: expected local, cluster or redis"),
                    ));
                }
                block.set("policy", policy, here);
            }
            "sync_rate" => {
                let text = value.string(source, "sync_rate")?;
                let rate: i64 = text.trim().parse().map_err(|_| {
                    value.error(
                        source,
                        "sync_rate: expected -1, 0 or a whole number of seconds",
                    )
                })?;
                if rate > 0 {
                    let advice = crate::limiter::kong::sync_rate_advice(rate);
                    return Err(value.error(source, advice.to_string()));
                }
                block.set("sync_rate", rate, here);
            }
            "limit_by" => limit_by = Some((value.string(source, "limit_by")?, value.line)),
            "hide_client_headers" => {
                if value.boolean(source, key)? {
                    block.set(key, true, format!("{here}: no Retry-After on a 429"));
                }
            }
            key if IGNORED.contains(&key) => {}
            other => {
                return Err(value.error(source, format!("{other}: not understood; {SUPPORTED}")));
            }
        }
    }
    let periods = block
        .fields
        .iter()
        .filter(|f| PERIODS.contains(&f.key.as_str()))
        .count();
    if periods == 0 {
        return Err(config.error(
            source,
            "give at least one of second, minute, hour, day, month, year (Kong requires one)",
        ));
    }
    match limit_by {
        Some((by, _)) if by == "service" => {}
        Some((by, line)) => block.set(
            "per",
            "key",
            source.at(line, format!("limit_by: {by}: counters per {by}")),
        ),
        None => block.set(
            "per",
            "key",
            "not set: limit_by consumer, counters per consumer (or address)".into(),
        ),
    }
    if block
        .fields
        .iter()
        .any(|f| f.key != "second" && PERIODS.contains(&f.key.as_str()))
    {
        block.notes.push("Kong's windows fall on the UTC calendar: the run starts at 1970-01-01T00:00:00Z unless the block says start = \"…\"".into());
    }
    // policy local (Kong's default) counts in each node's memory.
    let policy = block.fields.iter().find(|f| f.key == "policy");
    if policy.is_none_or(|f| f.value.as_str() == Some("local")) {
        block.per_instance("Kong node");
    }
    if let Some(("consumer", name)) = owner {
        block.notes.push(format!(
            "on consumer {name}: Kong applies it to that consumer's requests only (over a route's or service's plugin); the workload stands for that consumer"
        ));
    }
    Ok(Some(block))
}

#[cfg(test)]
mod tests {
    use crate::import::Dialect;
    use crate::import::testing::{field, read_text};

    fn read(text: &str) -> Result<Vec<crate::import::Block>, String> {
        read_text("kong.yaml", text, Dialect::Kong)
    }

    #[test]
    fn plugins_on_routes_and_consumers_are_found_and_disabled_ones_skipped() {
        let blocks = read(
            "consumers:\n  - username: bot\n    plugins:\n      - name: rate-limiting\n        config: { hour: 50, limit_by: service, hide_client_headers: true }\n\
             routes:\n  - name: r\n    plugins:\n      - name: rate-limiting\n        enabled: false\n        config: { second: 1 }\n",
        )
        .unwrap();
        assert_eq!(blocks.len(), 1);
        // A consumer is named by its username (it was labelled kong-global).
        assert_eq!(blocks[0].name, "bot");
        assert!(
            blocks[0]
                .heading
                .ends_with("rate-limiting plugin of consumer bot"),
            "{}",
            blocks[0].heading
        );
        assert!(
            blocks[0]
                .notes
                .iter()
                .any(|n| n.contains("that consumer's requests only")),
            "{:?}",
            blocks[0].notes
        );
        assert_eq!(field(&blocks[0], "hour").as_deref(), Some("50"));
        assert_eq!(
            field(&blocks[0], "hide_client_headers").as_deref(),
            Some("true")
        );
        assert_eq!(
            field(&blocks[0], "per"),
            None,
            "limit_by service is one counter"
        );
    }

    #[test]
    fn unknown_fields_and_fractions_are_errors() {
        let err = read("plugins:\n  - name: rate-limiting\n    config: { second: 5, window: 3 }\n")
            .unwrap_err();
        assert!(
            err.contains("kong.yaml:3:34: window: not understood"),
            "{err}"
        );
        let err =
            read("plugins:\n  - name: rate-limiting\n    config: { second: 0.5 }\n").unwrap_err();
        assert!(err.contains("second: expected a whole number"), "{err}");
        let err =
            read("plugins:\n  - name: rate-limiting\n    config: { policy: redis }\n").unwrap_err();
        assert!(err.contains("at least one of second"), "{err}");
    }
}
