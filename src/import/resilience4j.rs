//! Resilience4j rate limiters as a Spring Boot application configures them:
//! `resilience4j.ratelimiter.instances.NAME.*` in `application.yml` or
//! `application.properties`, with `configs.NAME.*` shared through
//! `baseConfig` (or the config named `default` when an instance names
//! none, as the Spring Boot starter does). Keys use Spring's relaxed binding
//! (`limit-for-period`, `limitForPeriod`); durations are Spring's (`500ms`,
//! `5s`, `PT1S`, or a bare number of milliseconds). Each instance becomes a
//! `resilience4j` limiter; a setting burstsim does not model is an error at
//! its line.

use std::collections::BTreeMap;

use super::spring::{Property, normalise, settings, whole_number};
use super::{Block, Source};
use crate::error::ScenarioError;
use crate::time::Nanos;

pub(super) const SUPPORTED: &str = "supported: resilience4j.ratelimiter.instances.NAME and configs.NAME with limitForPeriod, limitRefreshPeriod, timeoutDuration, baseConfig (and the health-indicator and event settings, which limit nothing)";

/// Settings that change nothing about what is admitted.
const IGNORED: [&str; 5] = [
    "registerhealthindicator",
    "eventconsumerbuffersize",
    "subscribeforevents",
    "allowhealthindicatortofail",
    "writablestacktraceenabled",
];

/// The settings read, by `(instances|configs, name)`, each by field.
type Settings = BTreeMap<(bool, String), BTreeMap<String, Property>>;

pub(super) fn read(source: &Source) -> Result<Vec<Block>, ScenarioError> {
    let properties = settings(source)?;
    let mut settings = Settings::new();
    for property in properties {
        let segments: Vec<&str> = property.key.split('.').collect();
        let [first, second, group, name, field @ ..] = &segments[..] else {
            continue;
        };
        if normalise(first) != "resilience4j" || normalise(second) != "ratelimiter" {
            continue;
        }
        let instances = match normalise(group).as_str() {
            "instances" => true,
            "configs" => false,
            _ => continue,
        };
        let field = normalise(&field.join("."));
        settings
            .entry((instances, name.to_string()))
            .or_default()
            .insert(field, property);
    }
    let places = settings
        .iter()
        .filter(|((instances, _), _)| *instances)
        .map(|(_, fields)| fields.values().next().map_or((1, 0), |p| (p.line, 0)));
    super::refuse_too_many(source, places.collect::<Vec<_>>().into_iter())?;
    settings
        .iter()
        .filter(|((instances, _), _)| *instances)
        .map(|((_, name), fields)| limiter(source, name, fields, &settings))
        .collect()
}

fn limiter(
    source: &Source,
    name: &str,
    fields: &BTreeMap<String, Property>,
    settings: &Settings,
) -> Result<Block, ScenarioError> {
    let at = |p: &Property, message: String| source.error(p.line, p.value_column, message);
    for (field, property) in fields {
        check(field, property).map_err(|message| at(property, message))?;
    }
    // The instance's own settings, then its base config's (or `default`'s).
    let base = match fields.get("baseconfig") {
        Some(p) => {
            let base = p.value.trim().to_string();
            let found = settings.get(&(false, base.clone())).ok_or_else(|| {
                at(
                    p,
                    format!("baseConfig: no resilience4j.ratelimiter.configs.{base} in this file"),
                )
            })?;
            for (field, property) in found {
                check(field, property).map_err(|message| at(property, message))?;
            }
            Some((base, found))
        }
        None => settings
            .get(&(false, "default".to_string()))
            .map(|found| ("default".to_string(), found)),
    };
    let first = fields.values().next().map_or(1, |p| p.line);
    let mut block = Block::new(
        name,
        source.at(first, format!("rate limiter instance {name}")),
        "resilience4j",
        source.at(first, format!("resilience4j.ratelimiter.instances.{name}")),
    )
    .named("its instance name");
    let lookup = |field: &str| {
        fields.get(field).map(|p| (p, String::new())).or_else(|| {
            let (base, found) = base.as_ref()?;
            found
                .get(field)
                .map(|p| (p, format!(" (from configs.{base})")))
        })
    };
    let here = |p: &Property, via: &str| source.at(p.line, format!("{}: {}{via}", p.key, p.value));
    match lookup("limitforperiod") {
        Some((p, via)) => {
            let limit = whole_number(source, p, "limitForPeriod")?;
            block.set("limit_for_period", limit as i64, here(p, &via));
        }
        None => block.set(
            "limit_for_period",
            50,
            "not set: RateLimiterConfig's default, 50".into(),
        ),
    }
    for (field, key, default, default_text) in [
        ("limitrefreshperiod", "limit_refresh_period", 500, "500ns"),
        ("timeoutduration", "timeout_duration", 5_000_000_000, "5s"),
    ] {
        match lookup(field) {
            Some((p, via)) => {
                let ns = spring_duration(&p.value).ok_or_else(|| {
                    at(p, format!("{}: expected a duration like 500ms, 5s or PT1S (a bare number is milliseconds), got {:?}", p.key, p.value))
                })?;
                if field == "limitrefreshperiod" && ns == 0 {
                    return Err(at(p, format!("{}: must be at least 1ns", p.key)));
                }
                block.set(key, Nanos(ns).exact_text(), here(p, &via));
            }
            None => block.set(
                key,
                Nanos(default).exact_text(),
                format!("not set: RateLimiterConfig's default, {default_text}"),
            ),
        }
    }
    block.per_instance("application instance");
    Ok(block)
}

/// Whether `field` is one burstsim reads or may skip.
fn check(field: &str, property: &Property) -> Result<(), String> {
    match field {
        "limitforperiod" | "limitrefreshperiod" | "timeoutduration" | "baseconfig" => Ok(()),
        field if IGNORED.contains(&field) => Ok(()),
        _ => Err(format!("{}: not understood; {SUPPORTED}", property.key)),
    }
}

/// A Spring `Duration`: `500ms`, `5s`, `1m`, `2h`, `1d`, `100us`, `10ns`,
/// ISO-8601 `PT1.5S` / `PT1M30S`, or a bare number of milliseconds.
fn spring_duration(text: &str) -> Option<u64> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return ms.checked_mul(1_000_000);
    }
    if let Some(iso) = text.strip_prefix("PT").or_else(|| text.strip_prefix("pt")) {
        let mut total: u64 = 0;
        let mut rest = iso;
        while !rest.is_empty() {
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
            let (number, after) = rest.split_at(end);
            let unit = after.chars().next()?;
            let per = match unit.to_ascii_uppercase() {
                'H' => 3_600,
                'M' => 60,
                'S' => 1,
                _ => return None,
            };
            let ns = u128::from(super::decimal_seconds(number)?) * per;
            total = total.checked_add(u64::try_from(ns).ok()?)?;
            rest = &after[1..];
        }
        return Some(total);
    }
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let per: u64 = match unit.trim() {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return None,
    };
    number.checked_mul(per)
}

#[cfg(test)]
mod tests {
    use super::spring_duration;
    use crate::import::Dialect;
    use crate::import::testing::{field, read_text};

    const YAML: &str = "\
resilience4j:
  ratelimiter:
    configs:
      default:
        limit-refresh-period: 1s
        timeout-duration: 0
      strict:
        limitForPeriod: 5
        limitRefreshPeriod: PT0.5S
    instances:
      checkout:
        limitForPeriod: 100
        registerHealthIndicator: true
      search:
        baseConfig: strict
        timeoutDuration: 250ms
";

    #[test]
    fn instances_inherit_their_base_config_or_default() {
        let blocks = read_text("application.yml", YAML, Dialect::Resilience4j).unwrap();
        assert_eq!(blocks.len(), 2);
        let (checkout, search) = (&blocks[0], &blocks[1]);
        assert_eq!(checkout.name, "checkout");
        assert_eq!(field(checkout, "limit_for_period").as_deref(), Some("100"));
        assert_eq!(
            field(checkout, "limit_refresh_period").as_deref(),
            Some("\"1s\"")
        );
        assert_eq!(
            field(checkout, "timeout_duration").as_deref(),
            Some("\"0s\"")
        );
        assert_eq!(field(search, "limit_for_period").as_deref(), Some("5"));
        assert_eq!(
            field(search, "limit_refresh_period").as_deref(),
            Some("\"500ms\"")
        );
        assert_eq!(
            field(search, "timeout_duration").as_deref(),
            Some("\"250ms\"")
        );
        let from = &search
            .fields
            .iter()
            .find(|f| f.key == "limit_for_period")
            .unwrap()
            .from;
        assert!(
            from.contains("application.yml:8:") && from.contains("configs.strict"),
            "{from}"
        );
    }

    #[test]
    fn properties_read_the_same() {
        let text = "resilience4j.ratelimiter.instances.checkout.limit-for-period=100\n\
                    resilience4j.ratelimiter.instances.checkout.limit-refresh-period=1s\n";
        let blocks = read_text("application.properties", text, Dialect::Resilience4j).unwrap();
        assert_eq!(
            field(&blocks[0], "limit_for_period").as_deref(),
            Some("100")
        );
        assert_eq!(
            field(&blocks[0], "timeout_duration").as_deref(),
            Some("\"5s\""),
            "the default"
        );
    }

    #[test]
    fn an_unknown_setting_or_a_bad_duration_is_an_error_at_its_value() {
        let err = read_text(
            "application.yml",
            "resilience4j:\n  ratelimiter:\n    instances:\n      a:\n        drainPermissionsOnResult: x\n",
            Dialect::Resilience4j,
        )
        .unwrap_err();
        assert!(
            err.contains("application.yml:5:35: ") && err.contains("not understood"),
            "{err}"
        );
        let err = read_text(
            "application.yml",
            "resilience4j.ratelimiter.instances.a.timeoutDuration: 5 seconds\n",
            Dialect::Resilience4j,
        )
        .unwrap_err();
        assert!(err.contains("expected a duration"), "{err}");
        let err = read_text(
            "application.yml",
            "resilience4j.ratelimiter.instances.a.baseConfig: nope\n",
            Dialect::Resilience4j,
        )
        .unwrap_err();
        assert!(
            err.contains("no resilience4j.ratelimiter.configs.nope"),
            "{err}"
        );
    }

    #[test]
    fn spring_durations() {
        assert_eq!(spring_duration("500"), Some(500_000_000));
        assert_eq!(spring_duration("1s"), Some(1_000_000_000));
        assert_eq!(spring_duration("PT1M30S"), Some(90_000_000_000));
        assert_eq!(spring_duration("PT0.5S"), Some(500_000_000));
        assert_eq!(spring_duration("10ns"), Some(10));
        assert_eq!(spring_duration("1.5s"), None);
        assert_eq!(spring_duration("5 seconds"), None);
    }
}
