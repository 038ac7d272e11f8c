//! Spring Cloud Gateway properties: a `RequestRateLimiter` filter of a route
//! (`spring.cloud.gateway[.server.webflux].routes[i].filters[j]…`) or of the
//! `default-filters`, with `args.redis-rate-limiter.replenishRate`,
//! `burstCapacity` and `requestedTokens`, becomes a `spring-cloud-gateway`
//! limiter; its `deny-empty-key`, or the factory's
//! (`spring.cloud.gateway.filter.request-rate-limiter.deny-empty-key`), its
//! `deny_empty_key`. Keys are read with Spring's relaxed binding (case, `-`
//! and `_` do not matter). A custom `rate-limiter` bean or an argument not
//! listed is an error at its line.

use std::collections::BTreeMap;

use super::{Block, Source};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str = "supported: RequestRateLimiter filters of routes and default-filters with args.redis-rate-limiter.replenishRate, burstCapacity, requestedTokens, args.key-resolver, deny-empty-key and empty-key-status-code";

/// One property: its value and where it is.
#[derive(Clone)]
pub(super) struct Property {
    pub(super) key: String,
    pub(super) value: String,
    pub(super) line: usize,
    pub(super) value_column: usize,
}

/// A filter's properties, by what follows `filters[j]` (normalised).
type Filter = BTreeMap<String, Property>;

pub(super) fn read(source: &Source) -> Result<Vec<Block>, ScenarioError> {
    // (route index or None for default-filters, filter index) → properties.
    let mut filters: BTreeMap<(Option<usize>, usize), Filter> = BTreeMap::new();
    let mut ids: BTreeMap<usize, Property> = BTreeMap::new();
    // The factory's own settings, every filter's defaults.
    let mut factory = Filter::new();
    for property in properties(source) {
        let key = normalise(&property.key);
        let Some(rest) = key
            .strip_prefix("spring.cloud.gateway.server.webflux.")
            .or_else(|| key.strip_prefix("spring.cloud.gateway."))
        else {
            continue;
        };
        if let Some(setting) = rest.strip_prefix("filter.requestratelimiter.") {
            factory.insert(format!("args.{setting}"), property);
            continue;
        }
        let (route, rest) = if let Some(after) = rest.strip_prefix("routes[") {
            let Some((index, after)) = index(after) else {
                continue;
            };
            if after == ".id" {
                ids.insert(index, property);
                continue;
            }
            let Some(after) = after.strip_prefix(".filters[") else {
                continue;
            };
            (Some(index), after)
        } else if let Some(after) = rest.strip_prefix("defaultfilters[") {
            (None, after)
        } else {
            continue;
        };
        let Some((filter, suffix)) = index(rest) else {
            continue;
        };
        let suffix = suffix.trim_start_matches('.').to_string();
        filters
            .entry((route, filter))
            .or_default()
            .insert(suffix, property);
    }
    let mut blocks = Vec::new();
    for ((route, _), filter) in &filters {
        if let Some(shortcut) = filter.get("") {
            if shortcut
                .value
                .trim_start()
                .starts_with("RequestRateLimiter")
            {
                return Err(at(
                    source,
                    shortcut,
                    format!(
                        "the shortcut form {:?} is not read: write name=RequestRateLimiter and its args; {SUPPORTED}",
                        shortcut.value
                    ),
                ));
            }
            continue;
        }
        let Some(name) = filter.get("name") else {
            continue;
        };
        if name.value.trim() != "RequestRateLimiter" {
            continue;
        }
        let id = route.and_then(|r| ids.get(&r));
        let label = match (route, id) {
            (_, Some(id)) => id.value.trim().to_string(),
            (Some(r), None) => format!("route-{r}"),
            (None, _) => "default-filters".to_string(),
        };
        blocks.push(limiter(
            source,
            &label,
            id.is_some(),
            name,
            filter,
            &factory,
        )?);
    }
    Ok(blocks)
}

fn limiter(
    source: &Source,
    label: &str,
    route_id: bool,
    name: &Property,
    filter: &Filter,
    factory: &Filter,
) -> Result<Block, ScenarioError> {
    let here = |p: &Property| source.at(p.line, format!("{}={}", p.key, p.value));
    let mut block = Block::new(
        label,
        source.at(name.line, format!("RequestRateLimiter of {label}")),
        "spring-cloud-gateway",
        here(name),
    )
    .named(if route_id {
        "the route's id"
    } else {
        "its route"
    });
    let number = |p: &Property| whole_number(source, p, &p.key);
    let mut has_rate = false;
    let mut resolver = None;
    for (suffix, property) in filter {
        match suffix.as_str() {
            "name" | "args.denyemptykey" | "args.statuscode" => {}
            "args.emptykeystatus" | "args.emptykeystatuscode" => block.notes.push(format!(
                "{}: a status other than Spring's default 403 for a request turned away for want of a key is not modelled (a 403, which clients that retry do not retry); it counts as turned away",
                property.key
            )),
            "args.redisratelimiter.replenishrate" => {
                block.set("replenish_rate", number(property)? as i64, here(property));
                has_rate = true;
            }
            "args.redisratelimiter.burstcapacity" => {
                block.set("burst_capacity", number(property)? as i64, here(property));
            }
            "args.redisratelimiter.requestedtokens" => {
                block.set("requested_tokens", number(property)? as i64, here(property));
            }
            "args.keyresolver" => resolver = Some(property),
            "args.ratelimiter" => {
                return Err(at(
                    source,
                    property,
                    format!(
                        "{}: a custom rate limiter bean is not modelled; {SUPPORTED}",
                        property.key
                    ),
                ));
            }
            _ => {
                return Err(at(
                    source,
                    property,
                    format!("{}: not understood; {SUPPORTED}", property.key),
                ));
            }
        }
    }
    if !has_rate {
        return Err(at(
            source,
            name,
            format!(
                "RequestRateLimiter of {label} has no args.redis-rate-limiter.replenishRate; {SUPPORTED}"
            ),
        ));
    }
    if !block.fields.iter().any(|f| f.key == "burst_capacity") {
        block.set(
            "burst_capacity",
            1,
            "not set: RedisRateLimiter.Config's default".into(),
        );
    }
    let from = match resolver {
        Some(p) => source.at(
            p.line,
            format!("{}: one bucket per resolved key", p.value.trim()),
        ),
        None => {
            block.notes.push("no key-resolver: Spring's PrincipalNameKeyResolver keys by the authenticated user, and with deny-empty-key (its default) denies requests that have none".into());
            "not set: PrincipalNameKeyResolver, one bucket per user".into()
        }
    };
    block.set("per", "key", from);
    if let Some(status) = factory.get("args.emptykeystatuscode")
        && !filter.contains_key("args.emptykeystatus")
    {
        block.notes.push(format!(
            "{}: a status other than Spring's default 403 for a request turned away for want of a key is not modelled (a 403, which clients that retry do not retry); it counts as turned away",
            status.key
        ));
    }
    // The filter's own setting, else the factory's, else Spring's default.
    match filter
        .get("args.denyemptykey")
        .map(|p| (p, "the filter's"))
        .or_else(|| factory.get("args.denyemptykey").map(|p| (p, "the factory's, for every filter")))
    {
        Some((p, whose)) => {
            let deny = boolean(source, p)?;
            let what = if deny {
                "a request whose key resolves to nothing is turned away (403)"
            } else {
                "a request whose key resolves to nothing passes unlimited"
            };
            block.set("deny_empty_key", deny, format!("{}: {what}", here(p)));
            if !filter.contains_key("args.denyemptykey") {
                block.notes.push(format!("deny-empty-key is {whose}"));
            }
        }
        None => block.set(
            "deny_empty_key",
            true,
            "not set: Spring's default, a request whose key resolves to nothing is turned away (403)".into(),
        ),
    }
    Ok(block)
}

/// A property's value as Spring binds a `Boolean`: `true`/`false`, `on`/`off`,
/// `yes`/`no`, `1`/`0`, in any case.
pub(super) fn boolean(source: &Source, p: &Property) -> Result<bool, ScenarioError> {
    match p.value.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(at(
            source,
            p,
            format!("{}: expected true or false, got {:?}", p.key, p.value),
        )),
    }
}

/// A property's value as a whole number ≥ 1, or an error at the value
/// naming it `name`.
pub(super) fn whole_number(
    source: &Source,
    p: &Property,
    name: &str,
) -> Result<u64, ScenarioError> {
    p.value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            at(
                source,
                p,
                format!("{name}: expected a whole number ≥ 1, got {:?}", p.value),
            )
        })
}

pub(super) fn at(source: &Source, property: &Property, message: String) -> ScenarioError {
    source.error(property.line, property.value_column, message)
}

/// `12]rest` → (12, "rest").
pub(super) fn index(text: &str) -> Option<(usize, &str)> {
    let (number, rest) = text.split_once(']')?;
    Some((number.parse().ok()?, rest))
}

/// Spring's relaxed binding: lower case, without `-` and `_`.
pub(super) fn normalise(key: &str) -> String {
    key.chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// `key=value`, `key: value` or `key value` lines, comments (`#`, `!`)
/// skipped, lines ending in `\` joined to the next.
pub(super) fn properties(source: &Source) -> Vec<Property> {
    let mut out = Vec::new();
    let mut pending: Option<(String, usize)> = None;
    for (index, raw) in source.text.lines().enumerate() {
        let trimmed = raw.trim_start();
        let (mut text, line) = match pending.take() {
            Some((before, line)) => (before + trimmed, line),
            None if trimmed.is_empty() || trimmed.starts_with(['#', '!']) => continue,
            None => (raw.to_string(), index + 1),
        };
        if text.ends_with('\\') && !text.ends_with("\\\\") {
            text.pop();
            pending = Some((text, line));
            continue;
        }
        let body = text.trim_start();
        let indent = text.len() - body.len();
        let split = body.find(['=', ':', ' ', '\t']).unwrap_or(body.len());
        let key = body[..split].trim().to_string();
        let after = &body[split..];
        // Blanks, then at most one '=' or ':', then blanks: the separator.
        let blanks = |s: &str| s.len() - s.trim_start_matches([' ', '\t']).len();
        let mut value_start = blanks(after);
        if after[value_start..].starts_with(['=', ':']) {
            value_start += 1;
            value_start += blanks(&after[value_start..]);
        }
        let value = after[value_start..].trim_end().to_string();
        let value_column = text[..indent + split + value_start].chars().count();
        out.push(Property {
            key,
            value,
            line,
            value_column,
        });
    }
    out
}

/// A Spring Boot configuration's settings as properties: an
/// `application.properties` line by line, an `application.yml` flattened.
pub(super) fn settings(source: &Source) -> Result<Vec<Property>, ScenarioError> {
    if source.path.extension().is_some_and(|e| e == "properties") {
        return Ok(properties(source));
    }
    let mut out = Vec::new();
    for document in super::yaml::parse(source)? {
        flatten(&document, String::new(), &mut out);
    }
    Ok(out)
}

/// A YAML tree as `a.b[0].c` properties, each scalar with its place.
fn flatten(node: &super::yaml::Node, key: String, out: &mut Vec<Property>) {
    match &node.value {
        super::yaml::Value::Map(entries) => {
            for (k, v) in entries {
                let key = if key.is_empty() {
                    k.clone()
                } else {
                    format!("{key}.{k}")
                };
                flatten(v, key, out);
            }
        }
        super::yaml::Value::List(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten(item, format!("{key}[{i}]"), out);
            }
        }
        super::yaml::Value::Scalar(text) => out.push(Property {
            key,
            value: text.clone(),
            line: node.line,
            value_column: node.column,
        }),
        super::yaml::Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::import::Dialect;
    use crate::import::testing::{field, read_text};

    fn read(text: &str) -> Result<Vec<crate::import::Block>, String> {
        read_text("app.properties", text, Dialect::Spring)
    }

    #[test]
    fn relaxed_binding_separators_and_default_filters() {
        let blocks = read(
            "! a comment\nspring.cloud.gateway.server.webflux.default-filters[0].name = RequestRateLimiter\n\
             spring.cloud.gateway.server.webflux.default-filters[0].args.redis-rate-limiter.replenish_rate: 7\n\
             SPRING.CLOUD.GATEWAY.SERVER.WEBFLUX.DEFAULT-FILTERS[0].ARGS.REDIS-RATE-LIMITER.BURST-CAPACITY 9\n",
        )
        .unwrap();
        assert_eq!(blocks[0].name, "default-filters");
        assert_eq!(field(&blocks[0], "replenish_rate").as_deref(), Some("7"));
        assert_eq!(field(&blocks[0], "burst_capacity").as_deref(), Some("9"));
    }

    #[test]
    fn a_missing_rate_or_a_bad_number_is_an_error_at_the_value() {
        let route = "spring.cloud.gateway.routes[0].filters[0].";
        let err = read(&format!("{route}name=RequestRateLimiter\n")).unwrap_err();
        assert!(
            err.contains("app.properties:1:")
                && err.contains("no args.redis-rate-limiter.replenishRate"),
            "{err}"
        );
        let err = read(&format!(
            "{route}name=RequestRateLimiter\n{route}args.redis-rate-limiter.replenishRate=ten\n"
        ))
        .unwrap_err();
        assert!(err.contains("app.properties:2:81: "), "{err}");
    }

    #[test]
    fn deny_empty_key_is_the_filter_s_else_the_factory_s_else_spring_s_default() {
        let route = |i: usize| format!("spring.cloud.gateway.routes[{i}].filters[0].");
        let filter = |i: usize| {
            format!(
                "{r}name=RequestRateLimiter\n{r}args.redis-rate-limiter.replenishRate=5\n",
                r = route(i)
            )
        };
        let deny = |blocks: &[crate::import::Block], i: usize| field(&blocks[i], "deny_empty_key");
        // Unset anywhere: Spring's default, turned away.
        let blocks = read(&filter(0)).unwrap();
        assert_eq!(deny(&blocks, 0).as_deref(), Some("true"));
        // The factory's setting is every filter's default; a filter's own wins.
        let text = format!(
            "spring.cloud.gateway.filter.request-rate-limiter.deny-empty-key=false\n{}{}{}args.deny-empty-key=TRUE\n",
            filter(0),
            filter(1),
            route(1)
        );
        let blocks = read(&text).unwrap();
        assert_eq!(deny(&blocks, 0).as_deref(), Some("false"));
        assert!(
            blocks[0].notes.iter().any(|n| n.contains("the factory's")),
            "{:?}",
            blocks[0].notes
        );
        assert_eq!(deny(&blocks, 1).as_deref(), Some("true"));
        // Spring's relaxed booleans; anything else is an error at the value.
        let text = format!("{}{}args.denyEmptyKey: off\n", filter(0), route(0));
        assert_eq!(deny(&read(&text).unwrap(), 0).as_deref(), Some("false"));
        let err = read(&format!(
            "{}{}args.deny-empty-key=maybe\n",
            filter(0),
            route(0)
        ))
        .unwrap_err();
        assert!(
            err.contains("app.properties:3:")
                && err.contains("expected true or false, got \"maybe\""),
            "{err}"
        );
        // The status is said not to be modelled, not silently taken.
        for setting in [
            format!("{}args.empty-key-status=UNAUTHORIZED\n", route(0)),
            "spring.cloud.gateway.filter.request-rate-limiter.empty-key-status-code=UNAUTHORIZED\n"
                .to_string(),
        ] {
            let blocks = read(&format!("{}{setting}", filter(0))).unwrap();
            assert!(
                blocks[0].notes.iter().any(|n| n.contains("not modelled")),
                "{setting}: {:?}",
                blocks[0].notes
            );
        }
    }
}
