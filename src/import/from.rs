//! Limiters taken from a configuration at run time (`from = { file, … }`
//! in a scenario), and the places where a gateway applies several limits
//! to one request (an nginx location, a Traefik router), as one chain.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::{Block, Dialect, comment, import, one_line, safe_name, write_table};
use crate::error::{FieldError, ScenarioError, field_error};

/// Where a gateway applies several limits to one request: an nginx
/// `location` with the `limit_req`s nginx applies there, or a Traefik
/// router with its rateLimit middlewares.
#[derive(Clone, Debug)]
pub struct Place {
    /// What the gateway calls it: `location`, `router`.
    pub kind: &'static str,
    /// Its argument as written: `/api/`, `= /login`, `~ \.php$`.
    pub name: String,
    /// The names of the server it is in (nginx `server_name`).
    pub servers: Vec<String>,
    /// Where it opens and what it is in: `shop:12: http › server › location /api/`.
    pub at: String,
    /// The block its limits are written in, when it inherits them.
    pub inherited: Option<String>,
    /// The limits applied there, in the order the gateway checks them.
    pub layers: Arc<[Block]>,
    /// Whether a request a later limit rejects still counts in the earlier
    /// ones (false for nginx, which counts it in none).
    pub count_rejected: bool,
    /// When a layer delays a request, whether the next hears it then and
    /// the waits add up (Traefik's middlewares), or all hear it at once
    /// (nginx's zones).
    pub delays_add_up: bool,
    /// Whether a dry run holds there (then nothing is limited).
    pub dry_run: bool,
    /// What the reader should know: middlewares that limit nothing here.
    pub notes: Vec<String>,
}

impl Place {
    /// Its limiter table: the one limit, or a chain of them in order.
    pub fn table(&self) -> toml::Table {
        match &self.layers[..] {
            [one] => one.table(),
            layers => {
                let mut table = toml::Table::new();
                table.insert("kind".into(), "chain".into());
                table.insert("count_rejected".into(), self.count_rejected.into());
                if self.delays_add_up {
                    table.insert("delays".into(), "add-up".into());
                }
                table.insert(
                    "layers".into(),
                    toml::Value::Array(layers.iter().map(|l| l.table().into()).collect()),
                );
                table
            }
        }
    }

    /// `location /api/`.
    fn title(&self) -> String {
        format!("{} {}", self.kind, self.name)
    }

    /// A scenario name for it: its path's letters (`/api/` → `api`).
    fn limiter_name(&self) -> String {
        let name = safe_name(&self.name);
        let name = name.trim_matches(['-', '.']);
        if name.is_empty() {
            "root".into()
        } else {
            name.into()
        }
    }

    /// Its kept-per-instance note, from its first limit that has one.
    fn per_instance(&self) -> Option<&'static str> {
        self.layers.iter().find_map(|l| l.per_instance)
    }
}

/// A limiter taken from a configuration with `from`.
pub struct FromImport {
    /// Its name in the configuration (a zone, a route, a location).
    pub name: String,
    /// Its fields.
    pub table: toml::Table,
    /// What keeps its state, when each instance keeps its own.
    pub per_instance: Option<&'static str>,
}

/// `from = { file = "…", zone = "…" | location = "…" [, server = "…"],
/// format = "…" }` in a limiter block: the imported block's table (a
/// location's: the chain of its limits), the file taken from `base_dir`.
pub fn from_table(value: toml::Value, base_dir: &Path) -> Result<FromImport, FieldError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct From {
        file: std::path::PathBuf,
        zone: Option<String>,
        location: Option<String>,
        server: Option<String>,
        router: Option<String>,
        route: Option<String>,
        service: Option<String>,
        format: Option<Dialect>,
    }
    let from: From = crate::config::parse_table(match value {
        toml::Value::Table(table) => table,
        other => {
            return Err(format!(
                "expected a table like {{ file = \"nginx.conf\", zone = \"api\" }}, got {}",
                other.type_str()
            )
            .into());
        }
    })?;
    let path = base_dir.join(&from.file);
    // What the file skips (a connection limit, say) is not the limiter
    // taken from it: `burstsim import` shows those warnings.
    let imported = import(&path, from.format).map_err(|err| compact(&err))?;
    let file = from.file.display();
    // A location (nginx), a router (Traefik), a route or service (Kong).
    let places: Vec<(&'static str, &String)> = [
        ("location", &from.location),
        ("router", &from.router),
        ("route", &from.route),
        ("service", &from.service),
    ]
    .into_iter()
    .filter_map(|(kind, name)| name.as_ref().map(|name| (kind, name)))
    .collect();
    let place = match places[..] {
        [] => None,
        [one] => Some(one),
        [(first, _), (second, _), ..] => {
            return Err(FieldError::at(
                second,
                format!(
                    "give one of location (nginx), router (Traefik), route or service (Kong), not both {first} and {second}"
                ),
            ));
        }
    };
    if let Some((kind, name)) = place {
        if from.zone.is_some() {
            return Err(field_error!(
                "zone",
                "give zone or {kind}, not both: a {kind} takes every limit it applies"
            ));
        }
        if kind == "router" && from.server.is_some() {
            return Err(field_error!(
                "server",
                "picks among nginx locations; a router's name is unique"
            ));
        }
        let place = one_place(&imported.places, kind, name, from.server.as_deref())
            .map_err(|why| FieldError::at(kind, format!("{file}: {why}")))?;
        return Ok(FromImport {
            name: place.title(),
            table: place.table(),
            per_instance: place.per_instance(),
        });
    }
    if from.server.is_some() {
        return Err(field_error!(
            "server",
            "names the server of a location; give location = \"…\" too"
        ));
    }
    let blocks = imported.blocks;
    let names = || {
        blocks
            .iter()
            .map(|b| format!("{:?}", b.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let block = match (&from.zone, blocks.len()) {
        (Some(zone), _) => blocks.iter().find(|b| &b.name == zone).ok_or_else(|| {
            field_error!("zone", "{file} has no limiter {zone:?}; it has {}", names())
        })?,
        (None, 1) => &blocks[0],
        (None, _) => {
            return Err(field_error!(
                "zone",
                "{file} has {} limiters; say which with zone = one of {}",
                blocks.len(),
                names()
            ));
        }
    };
    Ok(FromImport {
        name: block.name.clone(),
        table: block.table(),
        per_instance: block.per_instance,
    })
}

/// Why no one place of a kind and name was found (the text follows the
/// file's name in the error).
#[derive(Debug, thiserror::Error)]
enum NoPlace {
    #[error("{kind} {name:?} ({at}) is under limit_req_dry_run on: nginx rejects nothing there")]
    DryRun {
        kind: String,
        name: String,
        at: String,
    },
    #[error("no limit_req applies in location {name:?} ({at}), in it or in a block around it")]
    NoLimitReq { name: String, at: String },
    #[error("router {name:?} ({at}) applies no rateLimit middleware")]
    NoRateLimit { name: String, at: String },
    #[error(
        "no rate-limiting plugin applies on {kind} {name:?} ({at}): none on it, its service or globally"
    )]
    NoPlugin {
        kind: String,
        name: String,
        at: String,
    },
    #[error("has no {kind} {name:?}; it has no {kind} at all")]
    NoneOfKind { kind: String, name: String },
    #[error("has no {kind} {name:?}; it has {listed}")]
    NotNamed {
        kind: String,
        name: String,
        listed: String,
    },
    #[error(
        "no server named {server:?} has {kind} {name:?}; the servers that do are named {servers}"
    )]
    NotInServer {
        kind: String,
        name: String,
        server: String,
        servers: String,
    },
    #[error(
        "{count} blocks are {kind} {name:?} ({at}); say which with server = one of its server_names"
    )]
    Several {
        kind: String,
        name: String,
        count: usize,
        at: String,
    },
}

/// The place of `kind` named `name` (in the server named `server`, if
/// given) with at least one limit, or why there is none.
fn one_place<'a>(
    places: &'a [Place],
    kind: &str,
    name: &str,
    server: Option<&str>,
) -> Result<&'a Place, NoPlace> {
    let listed = |places: &mut dyn Iterator<Item = &Place>| {
        let all: Vec<String> = places.map(|p| format!("{:?}", p.name)).collect();
        let more = all.len().saturating_sub(20);
        let mut text = all.into_iter().take(20).collect::<Vec<_>>().join(", ");
        if more > 0 {
            let _ = write!(text, " and {more} more");
        }
        text
    };
    let of_kind = || places.iter().filter(|p| p.kind == kind);
    let named: Vec<&Place> = of_kind().filter(|p| p.name == name.trim()).collect();
    if named.is_empty() {
        let (kind, name) = (kind.to_string(), name.to_string());
        return Err(if of_kind().next().is_none() {
            NoPlace::NoneOfKind { kind, name }
        } else {
            NoPlace::NotNamed {
                kind,
                name,
                listed: listed(&mut of_kind()),
            }
        });
    }
    let chosen: Vec<&Place> = named
        .iter()
        .copied()
        .filter(|p| server.is_none_or(|s| p.servers.iter().any(|n| n == s)))
        .collect();
    let place = match (&chosen[..], server) {
        ([one], _) => *one,
        ([], Some(server)) => {
            return Err(NoPlace::NotInServer {
                kind: kind.to_string(),
                name: name.to_string(),
                server: server.to_string(),
                servers: named
                    .iter()
                    .map(|p| format!("[{}]", p.servers.join(" ")))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        (several, _) => {
            return Err(NoPlace::Several {
                kind: kind.to_string(),
                name: name.to_string(),
                count: several.len(),
                at: several
                    .iter()
                    .map(|p| p.at.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
    };
    let (name, at) = (name.to_string(), place.at.clone());
    if place.dry_run {
        return Err(NoPlace::DryRun {
            kind: kind.to_string(),
            name,
            at,
        });
    }
    if place.layers.is_empty() {
        return Err(match kind {
            "location" => NoPlace::NoLimitReq { name, at },
            "router" => NoPlace::NoRateLimit { name, at },
            _ => NoPlace::NoPlugin {
                kind: kind.to_string(),
                name,
                at,
            },
        });
    }
    Ok(place)
}

/// Chain layers written `{ from = { … } }` replaced by the limiter they
/// import (the layer's own fields kept over it), at any depth; what keeps
/// the state of the first imported layer kept per instance.
pub fn resolve_layers(
    table: &mut toml::Table,
    base_dir: &Path,
) -> Result<Option<&'static str>, FieldError> {
    let Some(toml::Value::Array(layers)) = table.get_mut("layers") else {
        return Ok(None);
    };
    let mut per_instance = None;
    for (i, layer) in layers.iter_mut().enumerate() {
        let toml::Value::Table(layer) = layer else {
            continue;
        };
        let within = |err: FieldError| err.at_index(i).within("layers");
        if let Some(from) = layer.remove("from") {
            let imported = from_table(from, base_dir).map_err(|e| within(e.within("from")))?;
            for (key, value) in imported.table {
                layer.entry(key).or_insert(value);
            }
            per_instance = per_instance.or(imported.per_instance);
        }
        let inner = resolve_layers(layer, base_dir).map_err(within)?;
        per_instance = per_instance.or(inner);
    }
    Ok(per_instance)
}

/// An import error on one line (its file, line and column kept), to sit
/// inside a scenario's error.
fn compact(err: &anyhow::Error) -> String {
    match err.downcast_ref::<ScenarioError>() {
        Some(err) => one_line(err),
        None => err.to_string(),
    }
}

/// Each place that applies a limit as scenario text: a limiter per
/// location, a chain of its limits in the gateway's order when it has
/// several, each value with where it came from (`burstsim import --chain`).
pub fn render_places(path: &Path, dialect: Dialect, places: &[Place]) -> String {
    let limited: Vec<&Place> = places
        .iter()
        .filter(|p| !p.dry_run && !p.layers.is_empty())
        .collect();
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    // nginx's locations, or Traefik's routers: what they are, and how the
    // gateway applies their limits.
    let (kind, gateway, limits) = match dialect {
        Dialect::Traefik => ("router", "Traefik", "rateLimit middleware"),
        Dialect::Kong => ("route", "Kong", "rate-limiting plugin"),
        _ => ("location", "nginx", "limit_req"),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# `burstsim import --chain {}` ({}): {} {} with limits, each as {gateway} applies them.",
        comment(&path.display().to_string()),
        dialect.name(),
        limited.len(),
        match (limited.len(), dialect) {
            (1, Dialect::Kong) => "route or service".to_string(),
            (_, Dialect::Kong) => "routes and services".to_string(),
            (1, _) => kind.to_string(),
            _ => format!("{kind}s"),
        }
    );
    let _ = writeln!(
        out,
        "# Each value says where it came from. Paste these blocks into a scenario, or\n# import at run time: [[limiter]] name = \"…\" from = {{ file = \"{}\", {kind} = \"<{kind}>\" }}",
        comment(&file)
    );
    let mut names = std::collections::HashMap::<String, usize>::new();
    for place in limited {
        let mut name = place.limiter_name();
        let seen = names.entry(name.clone()).or_insert(0);
        *seen += 1;
        if *seen > 1 {
            name = format!("{name}-{seen}");
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "# {} ({})",
            comment(&place.title()),
            comment(&place.at)
        );
        if let Some(level) = &place.inherited {
            let _ = writeln!(
                out,
                "# note: it has no limit_req of its own and inherits those of {}",
                comment(level)
            );
        }
        for note in &place.notes {
            let _ = writeln!(out, "# note: {}", comment(note));
        }
        if let Some(instance) = place.per_instance() {
            let _ = writeln!(
                out,
                "# note: kept by each {instance}: N of them behind a load balancer let through N times this; add cluster = {{ instances = N }} to this block to model them"
            );
        }
        let name_line = (
            format!("name = {}", toml::Value::from(name)),
            format!("named after {}", place.title()),
        );
        match &place.layers[..] {
            [one] => {
                let lines = std::iter::once(name_line)
                    .chain(one.lines())
                    .collect::<Vec<_>>();
                write_notes(&mut out, one);
                write_table(&mut out, "[[limiter]]", &lines);
            }
            layers => {
                let mut lines = vec![
                    name_line,
                    (
                        "kind = \"chain\"".into(),
                        format!(
                            "{gateway} applies every {limits} here, in this order ({} of them)",
                            layers.len()
                        ),
                    ),
                    (
                        format!("count_rejected = {}", place.count_rejected),
                        if place.count_rejected {
                            format!(
                                "each {limits} counts what it passed, even when a later one rejects it"
                            )
                        } else {
                            format!(
                                "{gateway} counts a request in its zones only when every zone passes it"
                            )
                        },
                    ),
                ];
                if place.delays_add_up {
                    lines.push((
                        "delays = \"add-up\"".into(),
                        format!("the next {limits} hears a request when the one before lets it go"),
                    ));
                }
                write_table(&mut out, "[[limiter]]", &lines);
                for (i, layer) in layers.iter().enumerate() {
                    let _ = writeln!(out, "# layer {}: {}", i + 1, comment(&layer.heading));
                    write_notes(&mut out, layer);
                    let lines = layer.lines().collect::<Vec<_>>();
                    write_table(&mut out, "[[limiter.layers]]", &lines);
                }
            }
        }
    }
    out
}

/// A block's notes as comments, the per-instance one aside (said once per
/// place).
fn write_notes(out: &mut String, block: &Block) {
    // Said once for the place; and the chain is the advice of the other.
    let said = |n: &&String| n.starts_with("kept by each") || n.contains("limit_req apply in");
    for note in block.notes.iter().filter(|n| !said(n)) {
        let _ = writeln!(out, "# note: {}", comment(note));
    }
}
