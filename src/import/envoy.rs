//! Envoy, two ways:
//!
//! - the local rate limit HTTP filter (`envoy.filters.http.local_ratelimit`,
//!   its `LocalRateLimit` typed config anywhere in the file, per-route ones
//!   included): its `token_bucket` becomes an `envoy-local` limiter, when
//!   `filter_enabled` and `filter_enforced` are 100% — Envoy's default for
//!   both is 0%, which limits nothing, and is an error here;
//! - an envoyproxy/ratelimit service configuration: every descriptor with a
//!   `rate_limit`, nested ones included, becomes an `envoy-ratelimit`
//!   limiter named `domain.key_value…`; a descriptor without a value keeps a
//!   counter per value, which is `per = "key"`.

use super::yaml::{Node, Value};
use super::{Block, Source, duration, go_duration};
use crate::error::ScenarioError;

const LOCAL_TYPE: &str = "envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit";
const NETWORK_TYPE: &str = "envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit";

pub(super) const LOCAL_SUPPORTED: &str = "supported: token_bucket (max_tokens, tokens_per_fill, fill_interval), filter_enabled and filter_enforced at 100%, stat_prefix, and response fields that change no decision";

/// Fields of `LocalRateLimit` that change no decision.
const LOCAL_IGNORED: &[&str] = &[
    "@type",
    "stat_prefix",
    "status",
    "response_headers_to_add",
    "request_headers_to_add_when_not_enforced",
    "enable_x_ratelimit_headers",
    "vh_rate_limits",
    "stage",
    "always_consume_default_token_bucket",
    "rate_limited_as_resource_exhausted",
];

pub(super) fn read_local(source: &Source, documents: &[Node]) -> Result<Vec<Block>, ScenarioError> {
    let mut configs = Vec::new();
    for document in documents {
        document.walk(None, &mut |_, node| {
            if let Some(kind) = node.get("@type").and_then(Node::text)
                && (kind.ends_with(LOCAL_TYPE) || kind.ends_with(NETWORK_TYPE))
            {
                configs.push(node);
            }
        });
    }
    configs
        .into_iter()
        .map(|node| local(source, node))
        .collect()
}

fn local(source: &Source, config: &Node) -> Result<Block, ScenarioError> {
    let kind = config.get("@type").and_then(Node::text).unwrap_or("");
    if kind.ends_with(NETWORK_TYPE) {
        return Err(config.error(source, format!("the network local rate limit filter limits connections, which burstsim does not model; {LOCAL_SUPPORTED}")));
    }
    let name = match config.get("stat_prefix") {
        Some(prefix) => prefix.string(source, "stat_prefix")?,
        None => format!("envoy-local-{}", config.line),
    };
    let here = |node: &Node, what: &str| source.at(node.line, what);
    let mut block = Block::new(
        &name,
        source.at(config.line, format!("Envoy local rate limit {name:?}")),
        "envoy-local",
        here(config, kind),
    )
    .named(if config.get("stat_prefix").is_some() {
        "stat_prefix"
    } else {
        "no stat_prefix: its line"
    });
    block.per_instance_by("Envoy instance", "instances = N");
    for (key, value) in config.entries() {
        match key.as_str() {
            "token_bucket" | "filter_enabled" | "filter_enforced" => {}
            "descriptors" if value.items().is_empty() => {}
            "local_rate_limit_per_downstream_connection" if !value.boolean(source, key)? => {}
            "descriptors" | "local_rate_limit_per_downstream_connection" => {
                return Err(value.error(source, format!("{key}: not modelled; {LOCAL_SUPPORTED}")));
            }
            key if LOCAL_IGNORED.contains(&key) => {}
            key => {
                return Err(
                    value.error(source, format!("{key}: not understood; {LOCAL_SUPPORTED}"))
                );
            }
        }
    }
    for field in ["filter_enabled", "filter_enforced"] {
        let Some(fraction) = config.get(field) else {
            return Err(config.error(source, format!("{field} is not set: Envoy then applies the limit to 0% of requests, so it limits nothing; set it to 100%")));
        };
        let percent = fraction
            .get("default_value")
            .map(|v| percent(source, v))
            .transpose()?;
        if percent != Some((100, 100)) {
            return Err(fraction.error(source, format!("{field}: only 100% of requests is modelled (a runtime_key's value, if any, is not read); {LOCAL_SUPPORTED}")));
        }
    }
    let bucket = config.require(
        source,
        "token_bucket",
        format!("token_bucket is missing; {LOCAL_SUPPORTED}"),
    )?;
    let max = bucket.require(source, "max_tokens", "token_bucket.max_tokens is missing")?;
    block.set(
        "max_tokens",
        max.number(source, "max_tokens")? as i64,
        here(max, "max_tokens"),
    );
    match bucket.get("tokens_per_fill") {
        Some(fill) => block.set(
            "tokens_per_fill",
            fill_tokens(source, fill)? as i64,
            here(fill, "tokens_per_fill"),
        ),
        None => block.set("tokens_per_fill", 1, "not set: Envoy's default".into()),
    }
    let interval = bucket.require(
        source,
        "fill_interval",
        "token_bucket.fill_interval is missing",
    )?;
    let ns = proto_duration(source, interval)?;
    block.set(
        "fill_interval",
        duration(ns),
        here(interval, "fill_interval"),
    );
    block.set(
        "instances",
        1,
        "one Envoy: set this to your replicas, each with its own bucket".into(),
    );
    Ok(block)
}

/// `tokens_per_fill` is a `UInt32Value`: a number, or `{ value: N }`.
fn fill_tokens(source: &Source, node: &Node) -> Result<u64, ScenarioError> {
    match node.get("value") {
        Some(value) => value.number(source, "tokens_per_fill.value"),
        None => node.number(source, "tokens_per_fill"),
    }
}

/// A `FractionalPercent`: (numerator scaled to a hundred, 100) when exact.
fn percent(source: &Source, node: &Node) -> Result<(u64, u64), ScenarioError> {
    let numerator = match node.get("numerator") {
        Some(n) => n.number(source, "numerator")?,
        None => 0,
    };
    let denominator = match node.get("denominator").and_then(Node::text) {
        None | Some("HUNDRED") => 100,
        Some("TEN_THOUSAND") => 10_000,
        Some("MILLION") => 1_000_000,
        Some(other) => {
            return Err(node.error(
                source,
                format!("denominator {other:?}: expected HUNDRED, TEN_THOUSAND or MILLION"),
            ));
        }
    };
    Ok((numerator.saturating_mul(100) / denominator, 100))
}

/// A protobuf `Duration`: `"1s"`, `"0.5s"`, or `{ seconds, nanos }`.
fn proto_duration(source: &Source, node: &Node) -> Result<u64, ScenarioError> {
    let ns = match &node.value {
        Value::Scalar(text) => go_duration(text).map(|d| d.get()),
        Value::Map(_) => {
            let seconds = node
                .get("seconds")
                .map(|s| s.number(source, "seconds"))
                .transpose()?;
            let nanos = node
                .get("nanos")
                .map(|n| n.number(source, "nanos"))
                .transpose()?;
            seconds
                .unwrap_or(0)
                .checked_mul(1_000_000_000)
                .and_then(|s| s.checked_add(nanos.unwrap_or(0)))
        }
        _ => None,
    };
    ns.filter(|&ns| ns > 0).ok_or_else(|| {
        node.error(
            source,
            "fill_interval: expected a duration like \"1s\" or \"0.5s\", or { seconds: 1 }",
        )
    })
}

pub(super) const SERVICE_SUPPORTED: &str = "supported: domain, descriptors (key, value, rate_limit { unit, requests_per_unit, unlimited, name }, nested descriptors, detailed_metric)";

pub(super) fn read_service(
    source: &Source,
    documents: &[Node],
) -> Result<Vec<Block>, ScenarioError> {
    let mut blocks = Vec::new();
    for document in documents {
        if matches!(document.value, Value::Null) {
            continue;
        }
        for (key, value) in document.entries() {
            if !matches!(key.as_str(), "domain" | "descriptors") {
                return Err(value.error(
                    source,
                    format!("{key}: not understood; {SERVICE_SUPPORTED}"),
                ));
            }
        }
        let domain = document
            .require(
                source,
                "domain",
                format!("domain is missing; {SERVICE_SUPPORTED}"),
            )?
            .string(source, "domain")?;
        if let Some(descriptors) = document.get("descriptors") {
            for descriptor in descriptors.items() {
                descend(source, descriptor, &domain, false, &mut blocks)?;
            }
        }
    }
    Ok(blocks)
}

/// One descriptor and those nested in it; `keyed` when an enclosing one has no value.
fn descend(
    source: &Source,
    descriptor: &Node,
    path: &str,
    keyed: bool,
    blocks: &mut Vec<Block>,
) -> Result<(), ScenarioError> {
    for (key, value) in descriptor.entries() {
        match key.as_str() {
            "key" | "value" | "rate_limit" | "descriptors" | "detailed_metric"
            | "value_to_metric" => {}
            "share_threshold" => {
                value.boolean(source, key)?;
            }
            "shadow_mode" if !value.boolean(source, key)? => {}
            "shadow_mode" => {
                return Err(value.error(source, "shadow_mode: the service lets over-limit requests through and only counts them: nothing to simulate; drop it to import this descriptor"));
            }
            other => {
                return Err(value.error(
                    source,
                    format!("{other}: not understood; {SERVICE_SUPPORTED}"),
                ));
            }
        }
    }
    let key = descriptor
        .require(
            source,
            "key",
            format!("a descriptor needs a key; {SERVICE_SUPPORTED}"),
        )?
        .string(source, "key")?;
    let value = descriptor
        .get("value")
        .map(|v| v.string(source, "value"))
        .transpose()?;
    let path = match &value {
        Some(value) => format!("{path}.{key}_{value}"),
        None => format!("{path}.{key}"),
    };
    // envoyproxy/ratelimit (README, "Sharing thresholds for wildcard
    // matches", at f2fb157): a value with `*` matches many, each with its
    // own counter unless share_threshold is true, which only a wildcard may set.
    let share = match descriptor.get("share_threshold") {
        Some(node) => node.boolean(source, "share_threshold")?,
        None => false,
    };
    let wildcard = value.as_ref().is_some_and(|v| v.contains('*'));
    if share && !wildcard {
        return Err(descriptor
            .get("share_threshold")
            .expect("just read")
            .error(source, "share_threshold: only a wildcard value (with '*') may share its threshold, as the service refuses otherwise"));
    }
    let keyed = keyed || value.is_none() || (wildcard && !share);
    if let Some(limit) = descriptor.get("rate_limit")
        && let Some(block) = rate_limit(source, descriptor, limit, &path, keyed, &key)?
    {
        blocks.push(block);
    }
    if let Some(nested) = descriptor.get("descriptors") {
        for inner in nested.items() {
            descend(source, inner, &path, keyed, blocks)?;
        }
    }
    Ok(())
}

fn rate_limit(
    source: &Source,
    descriptor: &Node,
    limit: &Node,
    path: &str,
    keyed: bool,
    key: &str,
) -> Result<Option<Block>, ScenarioError> {
    for (field, value) in limit.entries() {
        match field.as_str() {
            "unit" | "requests_per_unit" | "name" | "replaces" => {}
            "unlimited" if value.boolean(source, field)? => return Ok(None),
            "unlimited" => {}
            other => {
                return Err(value.error(
                    source,
                    format!("rate_limit.{other}: not understood; {SERVICE_SUPPORTED}"),
                ));
            }
        }
    }
    let unit_node = limit.require(source, "unit", "rate_limit.unit is missing")?;
    let unit = unit_node.string(source, "unit")?.to_lowercase();
    if !["second", "minute", "hour", "day", "week", "month", "year"].contains(&unit.as_str()) {
        return Err(unit_node.error(
            source,
            format!("unit {unit:?}: expected second, minute, hour, day, week, month or year"),
        ));
    }
    let requests = limit.require(
        source,
        "requests_per_unit",
        "rate_limit.requests_per_unit is missing",
    )?;
    let count = requests.number(source, "requests_per_unit")?;
    if count == 0 {
        return Err(requests.error(
            source,
            "requests_per_unit: 0 rejects every request; nothing to simulate",
        ));
    }
    let mut block = Block::new(
        path,
        source.at(descriptor.line, format!("descriptor {path}")),
        "envoy-ratelimit",
        source.at(limit.line, "rate_limit"),
    )
    .named("domain and descriptor keys and values");
    block.set(
        "requests_per_unit",
        count as i64,
        source.at(requests.line, "requests_per_unit"),
    );
    block.set("unit", unit, source.at(unit_node.line, "unit"));
    if keyed {
        block.set(
            "per",
            "key",
            source.at(
                descriptor.line,
                match descriptor.get("value").and_then(|v| v.string(source, "value").ok()) {
                    Some(value) if value.contains('*') => format!(
                        "value {value:?} is a wildcard without share_threshold: one counter per matching value of {key:?}"
                    ),
                    _ => format!("a descriptor without a value: one counter per value of {key:?}"),
                },
            ),
        );
        block.notes.push(format!(
            "where {key:?} is a request header, a request without it is not limited here: Envoy sends no descriptor (request_headers' skip_if_absent: false, its default), and a replayed log's `-` key passes"
        ));
    }
    Ok(Some(block))
}

#[cfg(test)]
mod tests {
    use crate::import::Dialect;
    use crate::import::testing::{field, read_text};

    const FILTER: &str = "\"@type\": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit\n";
    const FULL: &str = "filter_enabled: { default_value: { numerator: 1000000, denominator: MILLION } }\nfilter_enforced: { default_value: { numerator: 100 } }\n";

    /// A wildcard value keeps a counter per matching value unless
    /// share_threshold says they share one (envoyproxy/ratelimit's README).
    #[test]
    fn a_wildcard_value_counts_per_value_unless_it_shares_its_threshold() {
        let config = |share: &str| {
            format!(
                "domain: d\ndescriptors:\n  - key: tenant\n    value: \"acme*\"\n{share}    rate_limit: {{ unit: second, requests_per_unit: 5 }}\n"
            )
        };
        let blocks = read_text("ratelimit.yaml", &config(""), Dialect::EnvoyRatelimit).unwrap();
        assert_eq!(field(&blocks[0], "per").as_deref(), Some("\"key\""));
        let blocks = read_text(
            "ratelimit.yaml",
            &config("    share_threshold: true\n"),
            Dialect::EnvoyRatelimit,
        )
        .unwrap();
        assert_eq!(field(&blocks[0], "per"), None);
        let plain = config("    share_threshold: true\n").replace("acme*", "acme");
        let err = read_text("ratelimit.yaml", &plain, Dialect::EnvoyRatelimit).unwrap_err();
        assert!(
            err.contains("share_threshold: only a wildcard value"),
            "{err}"
        );
    }

    #[test]
    fn a_seconds_and_nanos_interval_and_a_value_wrapper() {
        let text = format!(
            "{FILTER}stat_prefix: rl\ntoken_bucket: {{ max_tokens: 5, tokens_per_fill: {{ value: 2 }}, fill_interval: {{ seconds: 0, nanos: 250000000 }} }}\n{FULL}"
        );
        let blocks = read_text("envoy.yaml", &text, Dialect::EnvoyLocal).unwrap();
        assert_eq!(
            field(&blocks[0], "fill_interval").as_deref(),
            Some("\"250ms\"")
        );
        assert_eq!(field(&blocks[0], "tokens_per_fill").as_deref(), Some("2"));
    }

    #[test]
    fn half_enforced_and_descriptors_are_refused() {
        let bucket = "stat_prefix: rl\ntoken_bucket: { max_tokens: 5, fill_interval: 1s }\n";
        let half = format!(
            "{FILTER}{bucket}filter_enabled: {{ default_value: {{ numerator: 50 }} }}\nfilter_enforced: {{ default_value: {{ numerator: 100 }} }}\n"
        );
        let err = read_text("envoy.yaml", &half, Dialect::EnvoyLocal).unwrap_err();
        assert!(
            err.contains("envoy.yaml:4:17: filter_enabled: only 100%"),
            "{err}"
        );
        let descriptors = format!(
            "{FILTER}{bucket}{FULL}descriptors: [{{ entries: [{{ key: a, value: b }}] }}]\n"
        );
        let err = read_text("envoy.yaml", &descriptors, Dialect::EnvoyLocal).unwrap_err();
        assert!(
            err.contains("envoy.yaml:6:14: descriptors: not modelled"),
            "{err}"
        );
    }

    #[test]
    fn service_units_are_case_blind_and_checked() {
        let text = "domain: d\ndescriptors:\n  - key: k\n    value: v\n    rate_limit: { unit: MINUTE, requests_per_unit: 3 }\n";
        let blocks = read_text("ratelimit.yaml", text, Dialect::EnvoyRatelimit).unwrap();
        assert_eq!(
            (
                blocks[0].name.as_str(),
                field(&blocks[0], "unit").as_deref()
            ),
            ("d.k_v", Some("\"minute\""))
        );
        let err = read_text(
            "ratelimit.yaml",
            &text.replace("MINUTE", "fortnight"),
            Dialect::EnvoyRatelimit,
        )
        .unwrap_err();
        assert!(
            err.contains("ratelimit.yaml:5:25: unit \"fortnight\""),
            "{err}"
        );
    }
}
