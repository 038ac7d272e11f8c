//! `burstsim import`: a gateway's own configuration turned into scenario
//! `[[limiter]]` blocks, each value with a comment saying where in the file
//! it came from. One file per dialect; each reads only what it understands,
//! and a rate-limiting construct it does not understand is an error at its
//! line naming what is supported — nothing is guessed silently.

mod bucket4j;
mod envoy;
mod from;
mod haproxy;
mod kong;
mod nginx;
mod resilience4j;
mod sentinel;
mod spring;
mod traefik;
mod yaml;

pub use from::{Place, from_table, render_places, resolve_layers};

use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::error::ScenarioError;
use crate::time::Nanos;

/// The most limiters one file may turn into.
pub const MAX_BLOCKS: usize = 1_000;

/// The largest configuration file read (16 MiB).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The configuration languages `burstsim import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// An nginx configuration: `limit_req_zone` and `limit_req`.
    Nginx,
    /// Envoy's local rate limit HTTP filter (YAML).
    EnvoyLocal,
    /// An envoyproxy/ratelimit service configuration (YAML): a limiter per descriptor.
    EnvoyRatelimit,
    /// Kong's `rate-limiting` plugin in a declarative configuration (YAML).
    Kong,
    /// Traefik's `rateLimit` middleware: file provider or Kubernetes CRD (YAML).
    Traefik,
    /// An HAProxy configuration: `stick-table … http_req_rate(P)`, `track-sc`, `deny`.
    Haproxy,
    /// Spring Cloud Gateway properties: `RequestRateLimiter` filters.
    Spring,
    /// Sentinel flow rules (JSON, as its data sources and dashboard write them).
    Sentinel,
    /// Resilience4j rate limiters in a Spring Boot `application.yml` or `.properties`.
    Resilience4j,
    /// bucket4j-spring-boot-starter's filters and methods in a Spring Boot
    /// `application.yml` or `.properties`.
    Bucket4j,
}

impl Dialect {
    /// As `--format` names it.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Nginx => "nginx",
            Dialect::EnvoyLocal => "envoy-local",
            Dialect::EnvoyRatelimit => "envoy-ratelimit",
            Dialect::Kong => "kong",
            Dialect::Traefik => "traefik",
            Dialect::Haproxy => "haproxy",
            Dialect::Spring => "spring",
            Dialect::Sentinel => "sentinel",
            Dialect::Resilience4j => "resilience4j",
            Dialect::Bucket4j => "bucket4j",
        }
    }

    /// The dialect a file's name tells, if it does.
    pub fn from_name(path: &Path) -> Option<Dialect> {
        let name = path.file_name()?.to_string_lossy().to_lowercase();
        let yaml = [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e));
        let has = |word: &str| name.contains(word);
        Some(if has("resilience4j") {
            Dialect::Resilience4j
        } else if has("bucket4j") {
            Dialect::Bucket4j
        } else if has("sentinel") || has("flow-rule") || has("flowrule") {
            Dialect::Sentinel
        } else if name.ends_with(".properties") {
            Dialect::Spring
        } else if has("haproxy") || name.ends_with(".cfg") {
            Dialect::Haproxy
        } else if has("nginx") || name.ends_with(".conf") {
            Dialect::Nginx
        } else if !yaml {
            return None;
        } else if has("kong") {
            Dialect::Kong
        } else if has("traefik") {
            Dialect::Traefik
        } else if has("envoy") && has("local") {
            Dialect::EnvoyLocal
        } else if has("ratelimit") || has("rate-limit") || has("rate_limit") {
            Dialect::EnvoyRatelimit
        } else if has("envoy") {
            Dialect::EnvoyLocal
        } else {
            return None;
        })
    }
}

/// One limiter read from a configuration.
#[derive(Clone, Debug)]
pub struct Block {
    /// Its name in the scenario (a zone, a descriptor, a route…).
    pub name: String,
    /// What in the file the name comes from.
    pub name_from: &'static str,
    /// Where it was found and what it is, for the comment above it.
    pub heading: String,
    /// Its fields, `kind` first, each with where it came from.
    pub fields: Vec<Field>,
    /// What the reader should know that the fields cannot say.
    pub notes: Vec<String>,
    /// What keeps the limit's state, when each of several instances keeps
    /// its own (`nginx server`, `Envoy instance`): `None` when it is shared.
    pub per_instance: Option<&'static str>,
}

/// One field of a limiter block.
#[derive(Clone, Debug)]
pub struct Field {
    /// The scenario key.
    pub key: String,
    /// Its value.
    pub value: toml::Value,
    /// Where it came from: `nginx.conf:3: rate=10r/s`, or a default named.
    pub from: String,
}

impl Block {
    fn new(name: &str, heading: String, kind: &str, from: String) -> Block {
        Block {
            name: safe_name(name),
            name_from: "named after it",
            heading,
            fields: vec![Field {
                key: "kind".into(),
                value: kind.into(),
                from,
            }],
            notes: Vec::new(),
            per_instance: None,
        }
    }

    /// The limit is kept by each `instance` (an nginx server, a Kong node):
    /// said in a note with the field that models several.
    fn per_instance(&mut self, instance: &'static str) {
        self.per_instance_by(instance, "cluster = { instances = N }");
    }

    /// The same, modelled by the block's own `field` (Envoy's `instances`).
    fn per_instance_by(&mut self, instance: &'static str, field: &str) {
        self.per_instance = Some(instance);
        self.notes.push(format!(
            "kept by each {instance}: N of them behind a load balancer let through N times this; add {field} to this block to model them"
        ));
    }

    fn named(self, name_from: &'static str) -> Block {
        Block { name_from, ..self }
    }

    fn set(&mut self, key: &str, value: impl Into<toml::Value>, from: String) {
        self.fields.push(Field {
            key: key.into(),
            value: value.into(),
            from,
        });
    }

    /// The block as a limiter table (without its name), as a scenario reads it.
    pub fn table(&self) -> toml::Table {
        self.fields
            .iter()
            .map(|f| (f.key.clone(), f.value.clone()))
            .collect()
    }
}

/// A configuration file's text and name, for errors and provenance.
pub(crate) struct Source<'a> {
    pub(super) path: &'a Path,
    text: &'a str,
    name: String,
}

impl<'a> Source<'a> {
    fn new(path: &'a Path, text: &'a str) -> Source<'a> {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        Source { path, text, name }
    }

    /// An error at 1-based `line` and 0-based `column` (in characters).
    fn error(&self, line: usize, column: usize, message: impl AsRef<str>) -> ScenarioError {
        let start = self
            .text
            .split_inclusive('\n')
            .take(line.saturating_sub(1))
            .map(str::len)
            .sum::<usize>();
        let rest = &self.text[start.min(self.text.len())..];
        let offset = start
            + rest
                .char_indices()
                .nth(column)
                .map_or(rest.len(), |(i, _)| i);
        ScenarioError::at(self.path, self.text, offset, message.as_ref())
    }

    /// `file:line: what`, for a field's comment.
    fn at(&self, line: usize, what: impl AsRef<str>) -> String {
        format!("{}:{line}: {}", self.name, what.as_ref())
    }
}

/// A limit keyed by the request's Host keeps a state per Host, which a
/// trace names with `host_field`; synthetic requests all name one.
pub(crate) const HOST_KEY_NOTE: &str = "keyed by the request's Host (per = \"host\"): a trace names each request's Host with host_field; synthetic requests all name the one site, so they share one state";

/// What an import found in a configuration.
pub struct Imported {
    /// The configuration's dialect.
    pub dialect: Dialect,
    /// A limiter block per rate limit.
    pub blocks: Vec<Block>,
    /// Where the gateway applies several limits to one request (nginx
    /// locations), each with its limits in the gateway's order.
    pub places: Vec<Place>,
    /// What it skipped, each at its file, line and column: constructs that
    /// limit something burstsim does not model, includes not found.
    pub warnings: Vec<ScenarioError>,
    /// How it was read, where that is worth saying (which folder stands in
    /// for `/etc/nginx/`).
    pub notes: Vec<String>,
}

/// What a dialect read from a configuration (see [`Imported`]).
#[derive(Default)]
struct Read {
    blocks: Vec<Block>,
    places: Vec<Place>,
    warnings: Vec<ScenarioError>,
    notes: Vec<String>,
}

/// Reads the configuration at `path` in `dialect` (or the one its name
/// tells) into limiter blocks.
pub fn import(path: &Path, dialect: Option<Dialect>) -> Result<Imported, anyhow::Error> {
    let text = crate::input::read_text(path, MAX_CONFIG_BYTES)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", path.display()))?;
    // A byte-order mark (Windows editors write one) is not part of the
    // first directive.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let dialect = match dialect.or_else(|| Dialect::from_name(path)) {
        // A Spring Boot application.yml or .properties names no dialect:
        // Resilience4j's settings say which, when Spring Cloud Gateway's do not.
        Some(Dialect::Spring) | None
            if text.contains("ratelimiter")
                && text.contains("resilience4j")
                && !text.contains("RequestRateLimiter") =>
        {
            Dialect::Resilience4j
        }
        Some(Dialect::Spring) | None
            if text.contains("bucket4j")
                && text.contains("bandwidths")
                && !text.contains("RequestRateLimiter") =>
        {
            Dialect::Bucket4j
        }
        Some(dialect) => dialect,
        None => anyhow::bail!(
            "cannot tell the dialect of {} from its name; give --format {}",
            path.display(),
            dialects()
        ),
    };
    let Read {
        blocks,
        places,
        warnings,
        notes,
    } = read(&Source::new(path, text), dialect)?;
    if blocks.is_empty() {
        anyhow::bail!(
            "{}: no rate limit found in this {} configuration ({})",
            path.display(),
            dialect.name(),
            supported(dialect)
        );
    }
    if blocks.len() > MAX_BLOCKS {
        anyhow::bail!(
            "{}: {} rate limits, more than the {MAX_BLOCKS} one import may hold",
            path.display(),
            blocks.len()
        );
    }
    Ok(Imported {
        dialect,
        blocks: unique_names(blocks),
        places,
        warnings,
        notes,
    })
}

/// A warning (or error) as one line: `file:line:column: message`.
pub fn one_line(err: &ScenarioError) -> String {
    match err {
        ScenarioError::At {
            path,
            line,
            column,
            message,
            ..
        } => format!("{}:{line}:{column}: {message}", path.display()),
        other => other.to_string(),
    }
}

/// The blocks of `source` in `dialect`.
fn read(source: &Source, dialect: Dialect) -> Result<Read, ScenarioError> {
    let blocks = match dialect {
        Dialect::Nginx => return nginx::read(source),
        Dialect::Traefik => return traefik::read(source, &yaml::parse(source)?),
        Dialect::Kong => return kong::read(source, &yaml::parse(source)?),
        Dialect::Haproxy => haproxy::read(source),
        Dialect::Spring => spring::read(source),
        Dialect::Resilience4j => resilience4j::read(source),
        Dialect::Bucket4j => bucket4j::read(source),
        Dialect::Sentinel => sentinel::read(source, &yaml::parse(source)?),
        yaml_dialect => {
            let documents = yaml::parse(source)?;
            match yaml_dialect {
                Dialect::EnvoyLocal => envoy::read_local(source, &documents),
                _ => envoy::read_service(source, &documents),
            }
        }
    }?;
    Ok(Read {
        blocks,
        ..Read::default()
    })
}

/// Refuses a configuration with more than [`MAX_BLOCKS`] rate limits as
/// soon as a dialect has found them, before it builds any: `places` are the
/// line and column of each.
fn refuse_too_many(
    source: &Source,
    mut places: impl ExactSizeIterator<Item = (usize, usize)>,
) -> Result<(), ScenarioError> {
    let count = places.len();
    match places.nth(MAX_BLOCKS) {
        Some((line, column)) => Err(source.error(
            line,
            column,
            format!("{count} rate limits, more than the {MAX_BLOCKS} one import may hold; this is the first beyond"),
        )),
        None => Ok(()),
    }
}

/// What each dialect reads, for errors.
fn supported(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Nginx => nginx::SUPPORTED,
        Dialect::EnvoyLocal => envoy::LOCAL_SUPPORTED,
        Dialect::EnvoyRatelimit => envoy::SERVICE_SUPPORTED,
        Dialect::Kong => kong::SUPPORTED,
        Dialect::Traefik => traefik::SUPPORTED,
        Dialect::Haproxy => haproxy::SUPPORTED,
        Dialect::Spring => spring::SUPPORTED,
        Dialect::Sentinel => sentinel::SUPPORTED,
        Dialect::Resilience4j => resilience4j::SUPPORTED,
        Dialect::Bucket4j => bucket4j::SUPPORTED,
    }
}

fn dialects() -> String {
    use clap::ValueEnum as _;
    Dialect::value_variants()
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join("|")
}

/// Names kept to the scenario's alphabet (letters, digits, `-`, `_`, `.`;
/// not starting with `.`; at most 64 characters).
fn safe_name(name: &str) -> String {
    let mut safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    safe = safe.trim_start_matches('.').to_string();
    safe.truncate(56);
    if safe.is_empty() {
        "limiter".into()
    } else {
        safe
    }
}

/// Names made unique by a suffix `-2`, `-3`… in file order.
fn unique_names(mut blocks: Vec<Block>) -> Vec<Block> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for block in &mut blocks {
        let count = seen.entry(block.name.clone()).or_insert(0);
        *count += 1;
        if *count > 1 {
            block.name = format!("{}-{count}", block.name);
        }
    }
    blocks
}

/// A duration as a scenario writes it, in the largest unit that is exact.
fn duration(ns: u64) -> String {
    Nanos(ns).exact_text()
}

/// A decimal number of seconds (`"1.5"`, `"0.25"`) as nanoseconds, exactly.
fn decimal_seconds(text: &str) -> Option<u64> {
    crate::decimal::scaled_exactly(text, 1_000_000_000, 9)
}

/// A Go-style duration (`"1s"`, `"1m30s"`, `"500ms"`, `"1.5s"`), exactly.
fn go_duration(text: &str) -> Option<Nanos> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let per: u64 = match unit {
            "h" => 3_600_000_000_000,
            "m" => 60_000_000_000,
            "s" => 1_000_000_000,
            "ms" => 1_000_000,
            "us" | "µs" => 1_000,
            "ns" => 1,
            _ => return None,
        };
        // number × per, with number a decimal: (ns of number seconds) × per / 1 s.
        let scaled = u128::from(decimal_seconds(number)?) * u128::from(per) / 1_000_000_000;
        total = total.checked_add(u64::try_from(scaled).ok()?)?;
        rest = next;
    }
    Some(Nanos(total))
}

/// The blocks as scenario text: a header, then each block with a comment
/// per field saying where it came from.
pub fn render(path: &Path, dialect: Dialect, blocks: &[Block]) -> String {
    let file = path.display();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# `burstsim import {}` ({}): {} limiter{}.",
        comment(&file.to_string()),
        dialect.name(),
        blocks.len(),
        if blocks.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "# Each value says where it came from. Paste these blocks into a scenario, or\n# import at run time: [[limiter]] name = \"…\" from = {{ file = \"{}\", zone = \"<name>\" }}",
        comment(
            &path
                .file_name()
                .map_or_else(|| file.to_string(), |n| n.to_string_lossy().into())
        )
    );
    for block in blocks {
        out.push('\n');
        let _ = writeln!(out, "# {}", comment(&block.heading));
        for note in &block.notes {
            let _ = writeln!(out, "# note: {}", comment(note));
        }
        let name = toml::Value::from(block.name.clone());
        let lines = std::iter::once((format!("name = {name}"), block.name_from.to_string()))
            .chain(block.lines())
            .collect::<Vec<_>>();
        write_table(&mut out, "[[limiter]]", &lines);
    }
    out
}

impl Block {
    /// Each field as `key = value` with where it came from.
    fn lines(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.fields
            .iter()
            .map(|f| (format!("{} = {}", f.key, f.value), f.from.clone()))
    }
}

/// `header`, then each line with its comment, the comments aligned.
fn write_table(out: &mut String, header: &str, lines: &[(String, String)]) {
    let width = lines
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    out.push_str(header);
    out.push('\n');
    for (line, from) in lines {
        let pad = width - line.chars().count();
        let _ = writeln!(out, "{line}{}  # {}", " ".repeat(pad), comment(from));
    }
}

/// Text from the file made safe for a TOML comment: on one line (a newline
/// in a quoted value must not start a line of TOML) and at most 200
/// characters.
fn comment(text: &str) -> String {
    let mut safe: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    if text.chars().nth(200).is_some() {
        safe.push('…');
    }
    safe
}

/// Reading configuration text without a file, for the dialects' tests.
#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests;
