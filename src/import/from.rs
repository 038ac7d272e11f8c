//! Limiters taken from a configuration at run time (`from = { file, … }`
//! in a scenario), and the places where a gateway applies several limits
//! to one request (an nginx location), as one chain.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::{Block, Dialect, comment, import, one_line, safe_name, write_table};
use crate::error::{FieldError, ScenarioError, field_error};

/// Where a gateway applies several limits to one request: an nginx
/// `location`, with the `limit_req`s nginx applies there.
#[derive(Clone, Debug)]
pub struct Place {
    /// What the gateway calls it: `location`.
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
    /// Whether a dry run holds there (then nothing is limited).
    pub dry_run: bool,
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
    if let Some(location) = &from.location {
        if from.zone.is_some() {
            return Err(field_error!(
                "zone",
                "give zone or location, not both: a location takes every zone it applies"
            ));
        }
        let place = one_place(&imported.places, location, from.server.as_deref())
            .map_err(|err| field_error!("location", "{file}: {err}"))?;
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

/// The place named `location` (in the server named `server`, if given)
/// with at least one limit, or why there is none.
fn one_place<'a>(
    places: &'a [Place],
    location: &str,
    server: Option<&str>,
) -> Result<&'a Place, String> {
    let listed = |places: &mut dyn Iterator<Item = &Place>| {
        let all: Vec<String> = places.map(|p| format!("{:?}", p.name)).collect();
        let more = all.len().saturating_sub(20);
        let mut text = all.into_iter().take(20).collect::<Vec<_>>().join(", ");
        if more > 0 {
            let _ = write!(text, " and {more} more");
        }
        text
    };
    let named: Vec<&Place> = places
        .iter()
        .filter(|p| p.name == location.trim())
        .collect();
    if named.is_empty() {
        return Err(if places.is_empty() {
            format!("has no location {location:?}; it has no location block at all")
        } else {
            format!(
                "has no location {location:?}; it has {}",
                listed(&mut places.iter())
            )
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
            return Err(format!(
                "no server named {server:?} has location {location:?}; the servers that do are named {}",
                named
                    .iter()
                    .map(|p| format!("[{}]", p.servers.join(" ")))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        (several, _) => {
            return Err(format!(
                "{} blocks are location {location:?} ({}); say which with server = one of its server_names",
                several.len(),
                several
                    .iter()
                    .map(|p| p.at.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    };
    if place.dry_run {
        return Err(format!(
            "location {location:?} ({}) is under limit_req_dry_run on: nginx rejects nothing there",
            place.at
        ));
    }
    if place.layers.is_empty() {
        return Err(format!(
            "no limit_req applies in location {location:?} ({}), in it or in a block around it",
            place.at
        ));
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
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# `burstsim import --chain {}` ({}): {} location{} with limits, each as nginx applies them.",
        comment(&path.display().to_string()),
        dialect.name(),
        limited.len(),
        if limited.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "# Each value says where it came from. Paste these blocks into a scenario, or\n# import at run time: [[limiter]] name = \"…\" from = {{ file = \"{}\", location = \"<location>\" }}",
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
                let lines = [
                    name_line,
                    (
                        "kind = \"chain\"".into(),
                        format!(
                            "nginx applies every limit_req here, in this order ({} of them)",
                            layers.len()
                        ),
                    ),
                    (
                        format!("count_rejected = {}", place.count_rejected),
                        "nginx counts a request in its zones only when every zone passes it".into(),
                    ),
                ];
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
