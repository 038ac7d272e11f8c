//! Kong's declarative configuration: every plugin named `rate-limiting`
//! (global, or on a service, route or consumer) becomes a `kong` limiter
//! with its periods, `policy` and `sync_rate`; `limit_by` other than
//! `service` keeps counters per consumer, credential, address, header or
//! path, which is `per = "key"`. `rate-limiting-advanced` and
//! `response-ratelimiting` are errors at their line.

use std::collections::HashMap;

use super::yaml::Node;
use super::{Block, Place, Source};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str = "supported: plugins named rate-limiting with second, minute, hour, day, month, year, policy (local, cluster, redis), sync_rate -1 or 0, limit_by, and fields that change no decision (redis connection, headers, error messages)";

const PERIODS: [&str; 6] = ["second", "minute", "hour", "day", "month", "year"];

/// Config fields that change no decision.
const IGNORED: &[&str] = &[
    "header_name",
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

pub(super) fn read(source: &Source, documents: &[Node]) -> Result<super::Read, ScenarioError> {
    let mut found = Found::default();
    for document in documents {
        visit(source, document, "", Scope::default(), &mut found)?;
    }
    let places = places(source, &found);
    Ok(super::Read {
        blocks: found.plugins.into_iter().map(|(block, _)| block).collect(),
        places,
        ..super::Read::default()
    })
}

/// Where a plugin is: on a service, a route, a consumer (each `None` when
/// not), or in a list of entities of another kind (`other`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Scope<'a> {
    service: Option<&'a str>,
    route: Option<&'a str>,
    consumer: Option<&'a str>,
    other: Option<&'a str>,
    /// Whether a plugin on a route names its service itself (then Kong
    /// keys it by both).
    names_service: bool,
}

/// Route, service, consumer, other: where Kong runs a plugin.
type ScopeKey<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
);

impl<'a> Scope<'a> {
    /// `consumer bot`, `route orders`, `service checkout`, or `global`.
    fn on(&self) -> String {
        match (self.consumer, self.route, self.service, self.other) {
            (Some(consumer), ..) => format!("consumer {consumer}"),
            (None, Some(route), ..) => format!("route {route}"),
            (None, None, Some(service), _) => format!("service {service}"),
            (None, None, None, Some(other)) => other.to_string(),
            (None, None, None, None) => "global".to_string(),
        }
    }

    /// The entity's name, if on one.
    fn name(&self) -> Option<&str> {
        self.consumer.or(self.route).or(self.service).or(self.other)
    }

    /// Kong's compound key of a plugin here (route, service, consumer):
    /// a plugin on a route is keyed by the route alone unless it names its
    /// service itself.
    fn key(&self) -> ScopeKey<'a> {
        let service = if self.route.is_some() && !self.names_service {
            None
        } else {
            self.service
        };
        (self.route, service, self.consumer, self.other)
    }
}

/// The plugins read, each with its scope, and the routes (with their
/// service) and services declared.
#[derive(Default)]
struct Found<'a> {
    plugins: Vec<(Block, Scope<'a>)>,
    /// Each plugin's number in `plugins`, by Kong's key of where it is.
    by_key: HashMap<ScopeKey<'a>, usize>,
    routes: Vec<(&'a str, Option<&'a str>, usize)>,
    services: Vec<(&'a str, usize)>,
}

/// A node, and the plugins listed in it, inside `scope`; `kind` is what the
/// node is when it is an entity of a `consumers`, `services` or `routes` list.
fn visit<'a>(
    source: &Source,
    node: &'a Node,
    kind: &'a str,
    mut scope: Scope<'a>,
    found: &mut Found<'a>,
) -> Result<(), ScenarioError> {
    // A consumer is named by its username or custom_id, not a name.
    let name = ["name", "username", "custom_id"]
        .iter()
        .find_map(|key| node.get(key).and_then(Node::text));
    if let Some(name) = name
        && node.get("config").is_none()
    {
        match kind {
            "consumer" => scope.consumer = Some(name),
            "route" => {
                // A route at the top names its service.
                let service = node
                    .get("service")
                    .and_then(|s| s.text().or_else(|| s.get("name").and_then(Node::text)));
                scope.route = Some(name);
                scope.service = service.or(scope.service);
                found.routes.push((name, scope.service, node.line));
            }
            "service" => {
                scope.service = Some(name);
                found.services.push((name, node.line));
            }
            _ => scope.other = Some(name),
        }
    }
    if let Some(plugins) = node.get("plugins") {
        for plugin in plugins.items() {
            // A plugin listed at the top names what it is on.
            let mut at = scope;
            for (field, slot) in [
                ("service", &mut at.service),
                ("route", &mut at.route),
                ("consumer", &mut at.consumer),
            ] {
                if let Some(named) = plugin
                    .get(field)
                    .and_then(|s| s.text().or_else(|| s.get("name").and_then(Node::text)))
                {
                    *slot = Some(named);
                    at.names_service |= field == "service";
                }
            }
            if let Some(block) = plugin_block(source, plugin, &at)? {
                if let Some(&first) = found.by_key.get(&at.key()) {
                    return Err(plugin.error(
                        source,
                        format!(
                            "a second rate-limiting plugin on {}: Kong keeps one plugin of a name per service, route and consumer (its cache key) and refuses this configuration; the first is {}",
                            at.on(),
                            found.plugins[first].0.heading
                        ),
                    ));
                }
                found.by_key.insert(at.key(), found.plugins.len());
                found.plugins.push((block, at));
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
            visit(source, child, kind, scope, found)?;
        }
    }
    Ok(())
}

/// Each route and service with the one rate-limiting plugin Kong runs for
/// a request on it without a consumer's own: the route's, else its
/// service's, else the global one (Kong runs a plugin once per request,
/// the most specific configuration: `lookup_cfg` in
/// `kong/runloop/plugins_iterator.lua`, read at 22246ef).
fn places(source: &Source, found: &Found) -> Vec<Place> {
    let plugin = |wanted: Scope| {
        found
            .by_key
            .get(&wanted.key())
            .map(|&i| found.plugins[i].0.clone())
    };
    let global = plugin(Scope::default());
    let on_service = |service: Option<&str>| {
        service.and_then(|service| {
            plugin(Scope {
                service: Some(service),
                ..Scope::default()
            })
        })
    };
    let place = |kind, name: &str, line: usize, chosen: Option<Block>, notes| Place {
        kind,
        name: name.to_string(),
        servers: Vec::new(),
        at: source.at(line, format!("{kind} {name}")),
        inherited: None,
        layers: chosen.into_iter().collect::<Vec<_>>().into(),
        count_rejected: true,
        delays_add_up: false,
        dry_run: false,
        notes,
    };
    // The first configuration found runs; the next one, if any, is what it
    // hides, said where it is hidden.
    let most_specific = |levels: Vec<Option<Block>>| -> (Option<Block>, Vec<String>) {
        let mut found = levels.into_iter().flatten();
        let chosen = found.next();
        let notes = match (&chosen, found.next()) {
            (Some(chosen), Some(wider)) => vec![format!(
                "Kong runs one rate-limiting plugin per request, the most specific: {} applies here and {} does not",
                chosen.heading, wider.heading
            )],
            _ => Vec::new(),
        };
        (chosen, notes)
    };
    let mut places: Vec<Place> = found
        .routes
        .iter()
        .map(|&(route, service, line)| {
            // Route and service, then route (plugins_iterator.lua, lookup_cfg).
            let both = plugin(Scope {
                route: Some(route),
                service,
                names_service: true,
                ..Scope::default()
            });
            let own = plugin(Scope {
                route: Some(route),
                ..Scope::default()
            });
            let (chosen, notes) =
                most_specific(vec![both, own, on_service(service), global.clone()]);
            place("route", route, line, chosen, notes)
        })
        .collect();
    places.extend(found.services.iter().map(|&(service, line)| {
        let (chosen, notes) = most_specific(vec![on_service(Some(service)), global.clone()]);
        place("service", service, line, chosen, notes)
    }));
    places
}

fn plugin_block(
    source: &Source,
    plugin: &Node,
    scope: &Scope,
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
    let label = match (
        plugin.get("instance_name").and_then(Node::text),
        scope.name(),
    ) {
        (Some(instance), _) => instance.to_string(),
        (None, Some(name)) => name.to_string(),
        (None, None) => "kong-global".to_string(),
    };
    let on = scope.on();
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
    let (mut path, mut fault_tolerant) = (None, true);
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
            "path" => path = Some(value.string(source, "path")?),
            "fault_tolerant" => fault_tolerant = value.boolean(source, key)?,
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
    // get_identifier: `identifier or kong.client.get_forwarded_ip()`.
    let (by, without) = match limit_by.as_ref().map(|(by, _)| by.as_str()) {
        None | Some("consumer") => ("consumer", "without a consumer or credential"),
        Some("credential") => ("credential", "without a credential"),
        Some("header") => ("header", "without the header"),
        Some(_) => ("", ""),
    };
    if !by.is_empty() {
        block.notes.push(format!("limit_by {by}: Kong counts a request {without} by its address (get_identifier's fallback); for a log keyed by the {by}, set the trace's key_fallback to the address field"));
    }
    if limit_by.as_ref().is_some_and(|(by, _)| by == "path") {
        let path = path.as_deref().unwrap_or("(no path set)");
        block.notes.push(format!("limit_by path: Kong keeps one counter for the requests to {path} and counts every other request by its address; key the trace by path for those, by address for the rest"));
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
    } else if !fault_tolerant {
        block.notes.push("fault_tolerant false: Kong answers 500 while its counters' store fails (the handler raises the store's error); with store outages, set on_error = \"deny\" in the cluster's store".into());
    }
    if let Some(name) = scope.consumer {
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
    fn limit_by_header_says_a_request_without_it_is_counted_by_address_and_how_to_replay_it() {
        let note = |limit_by: &str| {
            let blocks = read(&format!(
                "plugins:\n  - name: rate-limiting\n    config: {{ second: 5, limit_by: {limit_by}, header_name: x-api-key }}\n"
            ))
            .unwrap();
            blocks[0]
                .notes
                .iter()
                .any(|n| n.contains("set the trace's key_fallback"))
        };
        assert!(note("header"));
        assert!(note("consumer"));
        assert!(!note("ip"));
        assert!(!note("service"));
    }

    /// Settings that change decisions only in some cases are noted where
    /// they do: `path` under `limit_by: path` (the requests elsewhere are
    /// counted by address), `fault_tolerant: false` with a shared store
    /// (a store error becomes a 500).
    #[test]
    fn path_and_fault_tolerant_are_noted_where_they_change_decisions() {
        let notes = |config: &str| {
            let blocks = read(&format!(
                "plugins:\n  - name: rate-limiting\n    config: {{ second: 5, {config} }}\n"
            ))
            .unwrap();
            blocks[0].notes.join("\n")
        };
        let path = notes("limit_by: path, path: /login");
        assert!(path.contains("one counter for the requests to /login and counts every other request by its address"), "{path}");
        assert!(!notes("limit_by: ip, path: /login").contains("limit_by path"));
        let strict = notes("policy: redis, fault_tolerant: false");
        assert!(strict.contains("on_error = \"deny\""), "{strict}");
        assert!(!notes("policy: redis, fault_tolerant: true").contains("fault_tolerant"));
        assert!(!notes("policy: local, fault_tolerant: false").contains("fault_tolerant"));
    }

    /// Kong runs one rate-limiting configuration per request, the most
    /// specific: a route's own, else its service's, else the global one;
    /// a plugin listed at the top names what it is on. Two on one entity
    /// are an error, as Kong refuses them.
    #[test]
    fn a_route_gets_the_one_plugin_kong_runs_there() {
        let text = "plugins:\n  - name: rate-limiting\n    config: { second: 1 }\n  - name: rate-limiting\n    route: top\n    config: { second: 4 }\nservices:\n  - name: shop\n    plugins:\n      - name: rate-limiting\n        config: { second: 2 }\n    routes:\n      - name: own\n        plugins:\n          - name: rate-limiting\n            config: { second: 3 }\n      - name: plain\n  - name: bare\n    routes:\n      - name: lone\nroutes:\n  - name: top\n    service: bare\n";
        let source = crate::import::Source::new(std::path::Path::new("kong.yaml"), text);
        let read = super::read(&source, &crate::import::yaml::parse(&source).unwrap()).unwrap();
        let second = |kind: &str, name: &str| {
            let place = read
                .places
                .iter()
                .find(|p| p.kind == kind && p.name == name)
                .unwrap_or_else(|| panic!("{kind} {name}"));
            assert_eq!(place.layers.len(), 1);
            (
                field(&place.layers[0], "second").unwrap(),
                place.notes.len(),
            )
        };
        assert_eq!(
            second("route", "own"),
            ("3".into(), 1),
            "its own hides the service's"
        );
        assert_eq!(
            second("route", "plain"),
            ("2".into(), 1),
            "the service's hides the global"
        );
        assert_eq!(second("route", "lone"), ("1".into(), 0), "the global one");
        assert_eq!(second("route", "top"), ("4".into(), 1), "named at the top");
        assert_eq!(second("service", "shop"), ("2".into(), 1));
        assert_eq!(second("service", "bare"), ("1".into(), 0));

        let twice = "services:\n  - name: shop\n    plugins:\n      - name: rate-limiting\n        config: { second: 2 }\n      - name: rate-limiting\n        instance_name: other\n        config: { second: 5 }\n";
        let err = read_text("kong.yaml", twice, Dialect::Kong).unwrap_err();
        assert!(
            err.contains("kong.yaml:6:9: a second rate-limiting plugin on service shop"),
            "{err}"
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
