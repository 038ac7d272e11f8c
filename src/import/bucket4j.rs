//! bucket4j-spring-boot-starter's properties (`bucket4j.filters[i]` and
//! `bucket4j.methods[i]` in `application.yml` or `.properties`, read from
//! the starter's `Bucket4JBootProperties`, `Bucket4JConfiguration`,
//! `RateLimit` and `BandWidth`, and how `RateLimitService` builds them): each
//! filter's rate limits become `bucket4j` limiters, their bandwidths as the
//! starter hands them to Bucket4j. Both property formats are read: 0.10 on
//! (`refill-capacity`, `refill-speed`, `initial-capacity`) and before
//! (`fixed-refill-interval`, whose refill ignores `time`). Keys use Spring's
//! relaxed binding; a setting that changes what is admitted and that
//! burstsim does not model is an error at its line.

use std::collections::BTreeMap;

use super::spring::{Property, at, boolean, index, normalise, settings, whole_number};
use super::{Block, Field, Source};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str = "supported: bucket4j.filters[i] (id, url, strategy, hide-http-response-headers, rate-limits) and bucket4j.methods[i] (name, rate-limit); a rate limit's cache-key (or expression), num-tokens 1, execute/skip conditions and predicates (noted) and bandwidths with capacity, time, unit, refill-capacity, refill-speed, initial-capacity (0.10 on) or fixed-refill-interval and fixed-refill-interval-unit (before 0.10); the response, metrics, cache and ordering settings, which limit nothing";

/// Filter and method settings that change nothing about what is admitted.
const IGNORED: [&str; 11] = [
    "cachename",
    "filtermethod",
    "filterorder",
    "httpcontenttype",
    "httpstatuscode",
    "httpresponsebody",
    "httpresponseheaders",
    "metrics",
    "majorversion",
    "minorversion",
    "name",
];

/// Whether a setting names a filter (`filters[i]`) or a method (`methods[i]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    Filter,
    Method,
}

/// One filter's or method's settings, by what follows `filters[i].` (normalised).
type Settings = BTreeMap<String, Property>;

/// One rate limit read: a `bucket4j` limiter's fields (kind aside), where
/// it is, and what to say of it.
struct Layer {
    fields: Vec<Field>,
    from: String,
    notes: Vec<String>,
}

impl Layer {
    fn set(&mut self, key: &str, value: impl Into<toml::Value>, from: String) {
        self.fields.push(Field {
            key: key.into(),
            value: value.into(),
            from,
        });
    }

    /// As a chain's layer.
    fn table(&self) -> toml::Table {
        std::iter::once(("kind".to_string(), toml::Value::from("bucket4j")))
            .chain(self.fields.iter().map(|f| (f.key.clone(), f.value.clone())))
            .collect()
    }
}

pub(super) fn read(source: &Source) -> Result<Vec<Block>, ScenarioError> {
    let mut owners: BTreeMap<(Owner, usize), Settings> = BTreeMap::new();
    let mut cache = None;
    for property in settings(source)? {
        let key = normalise(&property.key);
        let Some(rest) = key.strip_prefix("bucket4j.") else {
            continue;
        };
        let (owner, after) = if let Some(after) = rest.strip_prefix("filters[") {
            (Owner::Filter, after)
        } else if let Some(after) = rest.strip_prefix("methods[") {
            (Owner::Method, after)
        } else {
            match rest {
                "enabled" if property.value.trim().eq_ignore_ascii_case("false") => {
                    return Err(at(
                        source,
                        &property,
                        "bucket4j.enabled is false: the starter limits nothing".into(),
                    ));
                }
                "cachetouse" => cache = Some(property),
                _ => {}
            }
            continue;
        };
        let Some((i, suffix)) = index(after) else {
            continue;
        };
        let suffix = suffix.trim_start_matches('.').to_string();
        owners
            .entry((owner, i))
            .or_default()
            .insert(suffix, property);
    }
    super::refuse_too_many(
        source,
        owners
            .values()
            .map(|s| (first_line(s), 0))
            .collect::<Vec<_>>()
            .into_iter(),
    )?;
    let mut blocks = Vec::new();
    for ((owner, i), settings) in &owners {
        let mut block = match owner {
            Owner::Filter => filter(source, *i, settings)?,
            Owner::Method => method(source, *i, settings)?,
        };
        match &cache {
            Some(p) if p.value.to_lowercase().contains("caffeine") => {
                block.per_instance("application instance");
            }
            Some(_) => block.notes.push("the buckets live in the shared cache (bucket4j.cache-to-use): every instance draws on them, each deciding on its own millisecond clock; a [cluster] with clock offsets models that".into()),
            None => block.notes.push("bucket4j.cache-to-use not set: the starter takes the cache on the classpath; with Caffeine each instance keeps its own buckets (cluster = { instances = N } models them), with JCache, Redis or Hazelcast they share them".into()),
        }
        blocks.push(block);
    }
    Ok(blocks)
}

/// A servlet or reactive filter: its rate limits in order, the first whose
/// conditions hold (`strategy: first`, the default) or all of them.
fn filter(source: &Source, i: usize, settings: &Settings) -> Result<Block, ScenarioError> {
    let mut limits: BTreeMap<usize, Settings> = BTreeMap::new();
    let mut all = false;
    let mut headers = true;
    for (suffix, property) in settings {
        if let Some(after) = suffix.strip_prefix("ratelimits[") {
            let Some((j, rest)) = index(after) else {
                return Err(not_understood(source, property));
            };
            let rest = rest.trim_start_matches('.').to_string();
            limits.entry(j).or_default().insert(rest, property.clone());
            continue;
        }
        match suffix.as_str() {
            "strategy" => match normalise(&property.value).as_str() {
                "first" => all = false,
                "all" => all = true,
                _ => {
                    return Err(at(
                        source,
                        property,
                        format!(
                            "{}: expected first or all, got {:?}",
                            property.key, property.value
                        ),
                    ));
                }
            },
            "hidehttpresponseheaders" => headers = !boolean(source, property)?,
            "url" | "id" => {}
            other
                if IGNORED
                    .iter()
                    .any(|ignored| other.split(['.', '[']).next() == Some(ignored)) => {}
            _ => {
                return Err(not_understood(source, property));
            }
        }
    }
    let first = first_line(settings);
    let label = settings
        .get("id")
        .map(|p| p.value.trim().to_string())
        .unwrap_or_else(|| format!("filter-{i}"));
    if limits.is_empty() {
        return Err(source.error(
            first,
            0,
            format!("bucket4j.filters[{i}] has no rate-limits"),
        ));
    }
    let mut layers = Vec::new();
    for (j, limit) in &limits {
        let conditional = conditions(limit);
        let last = !all && conditional.is_none();
        layers.push((
            rate_limit(
                source,
                &format!("bucket4j.filters[{i}].rate-limits[{j}]"),
                limit,
                headers,
            )?,
            conditional,
        ));
        // The first rate limit without conditions stops a `first` filter.
        if last {
            break;
        }
    }
    let heading = source.at(first, format!("bucket4j.filters[{i}] ({label})"));
    let mut block = if let [(only, _)] = &layers[..] {
        let mut block = Block::new(&label, heading, "bucket4j", only.from.clone());
        block.fields.extend(only.fields.iter().cloned());
        block
    } else {
        let mut block = Block::new(
            &label,
            heading,
            "chain",
            source.at(
                first,
                format!("bucket4j.filters[{i}]: {} rate limits", layers.len()),
            ),
        );
        if all {
            block.set("count_rejected", true, source.at(first, "strategy: all — a refusal by a later rate limit leaves the tokens taken by the earlier ones"));
        } else {
            block.notes.push("strategy first: a request is limited by the first rate limit whose conditions hold; burstsim cannot evaluate them, so this chain applies them all to every request — import each with its conditions' traffic in mind".into());
        }
        let tables = layers
            .iter()
            .map(|(layer, _)| toml::Value::Table(layer.table()))
            .collect::<Vec<_>>();
        block.set("layers", tables, source.at(first, "rate-limits, in order"));
        block
    };
    if settings.contains_key("id") {
        block = block.named("the filter's id");
    }
    if let Some(url) = settings.get("url") {
        block.notes.push(format!(
            "applies to request paths matching {:?}: give this limiter the traffic of those paths",
            url.value.trim()
        ));
    }
    for (layer, conditional) in &layers {
        block.notes.extend(layer.notes.iter().cloned());
        if let Some(what) = conditional {
            block.notes.push(format!("{what}: the starter limits only the requests it selects; burstsim limits every request it is given"));
        }
    }
    Ok(block)
}

/// A `@RateLimiting(name = …)` method: its one rate limit; a refusal is
/// the application's `RateLimitException`, with no header.
fn method(source: &Source, i: usize, settings: &Settings) -> Result<Block, ScenarioError> {
    let mut limit = Settings::new();
    for (suffix, property) in settings {
        if let Some(rest) = suffix.strip_prefix("ratelimit.") {
            limit.insert(rest.to_string(), property.clone());
        } else if !matches!(suffix.as_str(), "name" | "cachename") {
            return Err(not_understood(source, property));
        }
    }
    let first = first_line(settings);
    let label = settings
        .get("name")
        .map(|p| p.value.trim().to_string())
        .unwrap_or_else(|| format!("method-{i}"));
    let layer = rate_limit(
        source,
        &format!("bucket4j.methods[{i}].rate-limit"),
        &limit,
        false,
    )?;
    let mut block = Block::new(
        &label,
        source.at(first, format!("bucket4j.methods[{i}] ({label})")),
        "bucket4j",
        layer.from.clone(),
    )
    .named("the method's name");
    block.fields.extend(layer.fields.iter().cloned());
    block.notes.extend(layer.notes);
    if let Some(what) = conditions(&limit) {
        block.notes.push(format!("{what}: the starter limits only the calls it selects; burstsim limits every request it is given"));
    }
    Ok(block)
}

/// A setting this import does not read, at its value.
fn not_understood(source: &Source, property: &Property) -> ScenarioError {
    at(
        source,
        property,
        format!("{}: not understood; {SUPPORTED}", property.key),
    )
}

/// The first line any of `settings` is on.
fn first_line(settings: &Settings) -> usize {
    settings.values().map(|p| p.line).min().unwrap_or(1)
}

/// What selects the requests a rate limit applies to, if anything does.
fn conditions(limit: &Settings) -> Option<String> {
    let found: Vec<&str> = limit
        .iter()
        .filter(|(key, _)| {
            [
                "executecondition",
                "skipcondition",
                "executepredicates",
                "skippredicates",
            ]
            .iter()
            .any(|c| key.starts_with(c))
        })
        .map(|(_, p)| p.key.as_str())
        .collect();
    (!found.is_empty()).then(|| found.join(", "))
}

/// One rate limit as a `bucket4j` block's fields (kind aside): its
/// bandwidths, its key and the refusal header.
fn rate_limit(
    source: &Source,
    path: &str,
    limit: &Settings,
    headers: bool,
) -> Result<Layer, ScenarioError> {
    let mut bands: BTreeMap<usize, Settings> = BTreeMap::new();
    let mut block = Layer {
        fields: Vec::new(),
        from: String::new(),
        notes: Vec::new(),
    };
    let mut keyed = None;
    for (suffix, property) in limit {
        if let Some(after) = suffix.strip_prefix("bandwidths[") {
            let Some((k, rest)) = index(after) else {
                return Err(not_understood(source, property));
            };
            bands
                .entry(k)
                .or_default()
                .insert(rest.trim_start_matches('.').to_string(), property.clone());
            continue;
        }
        match suffix.split(['.', '[']).next().unwrap_or_default() {
            "cachekey" | "expression" => keyed = Some(property),
            "filterkeytype" => keyed = Some(property),
            "numtokens" => {
                if whole_number(source, property, &property.key)? != 1 {
                    return Err(at(
                        source,
                        property,
                        format!(
                            "{}: burstsim's requests each take one token; num-tokens {} is not modelled",
                            property.key,
                            property.value.trim()
                        ),
                    ));
                }
            }
            "postexecutecondition" => {
                return Err(at(
                    source,
                    property,
                    format!(
                        "{}: the starter then counts a request after its response, only when the condition holds (say, failures): not modelled",
                        property.key
                    ),
                ));
            }
            "executecondition"
            | "skipcondition"
            | "executepredicates"
            | "skippredicates"
            | "tokensinheritancestrategy" => {}
            _ => {
                return Err(not_understood(source, property));
            }
        }
    }
    if bands.is_empty() {
        let line = first_line(limit);
        return Err(source.error(line, 0, format!("{path} has no bandwidths")));
    }
    let tables = bands
        .iter()
        .map(|(k, band)| {
            bandwidth(source, &format!("{path}.bandwidths[{k}]"), band).map(toml::Value::Table)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let first = bands.values().map(first_line).min().unwrap_or(1);
    block.from = source.at(first, format!("{path}.bandwidths"));
    block.set(
        "bandwidths",
        tables,
        source.at(first, format!("{path}.bandwidths")),
    );
    if headers {
        block.set("retry_after_seconds", true, source.at(first, "a refusal answers X-Rate-Limit-Retry-After-Seconds (hide-http-response-headers is false)"));
    }
    match keyed {
        Some(p) if !constant(&p.value) => {
            block.set(
                "per",
                "key",
                source.at(
                    p.line,
                    format!(
                        "{}: {} — a bucket per value; the workload's client keys stand for them",
                        p.key,
                        p.value.trim()
                    ),
                ),
            );
        }
        Some(_) => {}
        None => block.notes.push(format!(
            "{path}: no cache-key, so \"1\": one bucket for every request the filter limits"
        )),
    }
    Ok(block)
}

/// A cache key every request evaluates alike: a number or a quoted string.
fn constant(expression: &str) -> bool {
    let e = expression.trim();
    e.parse::<i64>().is_ok()
        || (e.len() >= 2
            && ((e.starts_with('\'') && e.ends_with('\''))
                || (e.starts_with('"') && e.ends_with('"'))))
}

/// One bandwidth, as `RateLimitService.prepareBucket4jConfigurationBuilder`
/// (0.10 on) or `Bucket4JBaseConfiguration` (before 0.10) builds it.
fn bandwidth(source: &Source, path: &str, band: &Settings) -> Result<toml::Table, ScenarioError> {
    let line = first_line(band);
    let missing = |what: &str| source.error(line, 0, format!("{path}.{what} is required"));
    let old = band.get("fixedrefillinterval");
    let new = ["refillcapacity", "refillspeed", "initialcapacity"]
        .iter()
        .find_map(|k| band.get(*k));
    if let (Some(old), Some(new)) = (old, new) {
        return Err(at(
            source,
            old,
            format!(
                "{}: the starter's format before 0.10, beside {} of 0.10 on: write one",
                old.key, new.key
            ),
        ));
    }
    let mut table = toml::Table::new();
    let capacity = whole_number(
        source,
        band.get("capacity").ok_or_else(|| missing("capacity"))?,
        "capacity",
    )?;
    table.insert("capacity".into(), (capacity as i64).into());
    let period = |time: &Property,
                  unit: Option<&Property>,
                  default: &str|
     -> Result<String, ScenarioError> {
        let n = whole_number(source, time, &time.key)?;
        let unit_text = unit.map_or(default.to_string(), |u| normalise(&u.value));
        let ns = match unit_text.as_str() {
            "nanos" => Some(1u64),
            "micros" => Some(1_000),
            "millis" => Some(1_000_000),
            "seconds" => Some(1_000_000_000),
            "minutes" => Some(60_000_000_000),
            "hours" => Some(3_600_000_000_000),
            "halfdays" => Some(43_200_000_000_000),
            "days" => Some(86_400_000_000_000),
            _ => None,
        }
        .ok_or_else(|| match unit {
            Some(u) => at(source, u, format!("{}: expected a ChronoUnit of exact length (nanos, micros, millis, seconds, minutes, hours, half-days, days), got {:?}", u.key, u.value)),
            None => missing("unit"),
        })?;
        n.checked_mul(ns)
            .map(|ns| crate::time::Nanos(ns).exact_text())
            .ok_or_else(|| {
                at(
                    source,
                    time,
                    format!("{}: {n} {unit_text} is too long", time.key),
                )
            })
    };
    let time = band.get("time");
    for (key, property) in band {
        match key.as_str() {
            "capacity"
            | "time"
            | "unit"
            | "refillcapacity"
            | "refillspeed"
            | "initialcapacity"
            | "id"
            | "fixedrefillinterval"
            | "fixedrefillintervalunit" => {}
            _ => {
                return Err(not_understood(source, property));
            }
        }
    }
    match old.filter(|p| p.value.trim() != "0") {
        // Before 0.10: Refill.intervally(capacity, fixed-refill-interval).
        Some(fixed) => {
            table.insert(
                "refill_period".into(),
                period(fixed, band.get("fixedrefillintervalunit"), "minutes")?.into(),
            );
            table.insert("refill".into(), "intervally".into());
        }
        None => {
            let time = time.ok_or_else(|| missing("time"))?;
            let unit = band.get("unit").ok_or_else(|| missing("unit"))?;
            table.insert("refill_period".into(), period(time, Some(unit), "")?.into());
            if let Some(tokens) = band.get("refillcapacity") {
                table.insert(
                    "refill_tokens".into(),
                    (whole_number(source, tokens, &tokens.key)? as i64).into(),
                );
            }
            let refill = match band.get("refillspeed").map(|p| (p, normalise(&p.value))) {
                None => "greedy",
                Some((_, speed)) if speed == "greedy" => "greedy",
                Some((_, speed)) if speed == "interval" => "intervally",
                Some((p, _)) => {
                    return Err(at(
                        source,
                        p,
                        format!("{}: expected greedy or interval, got {:?}", p.key, p.value),
                    ));
                }
            };
            table.insert("refill".into(), refill.into());
            if let Some(initial) = band.get("initialcapacity") {
                let tokens = initial.value.trim().parse::<u64>().map_err(|_| {
                    at(
                        source,
                        initial,
                        format!(
                            "{}: expected a whole number ≥ 0, got {:?}",
                            initial.key, initial.value
                        ),
                    )
                })?;
                table.insert("initial_tokens".into(), (tokens as i64).into());
            }
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests;
