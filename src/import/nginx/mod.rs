//! nginx: `limit_req_zone KEY zone=NAME:SIZE rate=R;` defines a zone and
//! `limit_req zone=NAME [burst=N] [nodelay | delay=N];` applies it (in
//! `http`, `server` or `location`). Each `limit_req` becomes an
//! `nginx-limit-req` limiter; a key holding a variable (the client's
//! address, say) keeps one state per value, which is `per = "key"`.

mod files;
mod locations;

use super::{Block, HOST_KEY_NOTE, Source};
use crate::error::ScenarioError;
use files::{Files, Item, Token};

/// The deepest nesting of blocks read (real configurations nest a handful).
const MAX_NESTING: usize = 64;

pub(super) const SUPPORTED: &str = "supported: limit_req_zone (key, zone, rate), limit_req (zone, burst, nodelay, delay) and include";

/// A directive: its words (the name first), the blocks it sits in, and
/// which block it is directly in (numbered in file order).
struct Directive {
    words: Vec<Token>,
    /// The block it is in, numbered in [`Parsed::blocks`] (0: the main context).
    block: usize,
}

/// A block (`server { … }`, `location /api/ { … }`): the block it is in,
/// its words joined (`location /api/`) and its first word, where it opens
/// (`None` for the main context).
struct Head {
    parent: usize,
    name: String,
    at: Option<Token>,
}

/// A configuration's directives and its blocks: each block's parent and
/// name, kept once (not copied into every directive: deep nesting made that
/// quadratic).
struct Parsed {
    directives: Vec<Directive>,
    blocks: Vec<Head>,
}

impl Parsed {
    /// `http › server › location /api/`, or `main`.
    fn context(&self, mut block: usize) -> String {
        let mut names = Vec::new();
        while block != 0 {
            let head = &self.blocks[block];
            names.push(head.name.as_str());
            block = head.parent;
        }
        if names.is_empty() {
            return "main".to_string();
        }
        names.reverse();
        names.join(" › ")
    }
}

struct Zone {
    key: Token,
    rate: Token,
    /// The `limit_req_zone` word: where the zone is defined.
    defined: Token,
}

/// The configuration's `limit_req`s as blocks, and warnings for what it
/// holds that burstsim skips (connection and bandwidth limits, includes
/// that are not here, limits in a dry run).
pub(super) fn read(source: &Source) -> Result<super::Read, ScenarioError> {
    let (mut files, items) = Files::read(source)?;
    let parsed = directives(&files, items)?;
    let directives = &parsed.directives;
    let mut zones = std::collections::HashMap::new();
    // `limit_req_dry_run` per block: on or off there and inside.
    let mut dry_run: std::collections::HashMap<usize, bool> = Default::default();
    for directive in directives {
        let first = &directive.words[0];
        let name = first.text.as_str();
        match name {
            "limit_req_zone" => {
                let (zone, defined) = zone(&files, directive)?;
                zones.insert(zone, defined);
            }
            "limit_req" | "limit_req_status" | "limit_req_log_level" => {}
            "limit_req_dry_run" => {
                let on = directive.words.get(1).is_some_and(|w| w.text == "on");
                dry_run.insert(directive.block, on);
            }
            "limit_conn" | "limit_conn_zone" | "limit_rate" | "limit_rate_after" => {
                let warning = error(
                    &files,
                    first,
                    &format!(
                        "{name}: limits connections or bandwidth, which burstsim does not model; skipped"
                    ),
                );
                files.warnings.push(warning);
            }
            _ => {}
        }
    }
    // In force where set, and in every block inside unless set again.
    let in_dry_run = |mut block: usize| loop {
        if let Some(&on) = dry_run.get(&block) {
            return on;
        }
        if block == 0 {
            return false;
        }
        block = parsed.blocks[block].parent;
    };
    // Every limit_req, dry runs included: a location inherits a level's
    // limits whatever that level's own dry-run setting says.
    let limits: Vec<&Directive> = directives
        .iter()
        .filter(|d| d.words[0].text == "limit_req")
        .collect();
    if let Some(beyond) = limits.get(super::MAX_BLOCKS) {
        return Err(error(
            &files,
            &beyond.words[0],
            &format!(
                "{} rate limits, more than the {} one import may hold; this is the first beyond",
                limits.len(),
                super::MAX_BLOCKS
            ),
        ));
    }
    let mut per_block = std::collections::HashMap::new();
    for directive in &limits {
        *per_block.entry(directive.block).or_insert(0usize) += 1;
    }
    let built = limits
        .iter()
        .map(|directive| {
            let context = parsed.context(directive.block);
            let siblings = per_block[&directive.block];
            limit_req(&files, directive, &zones, (&context, siblings))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let places = locations::places(&files, &parsed, &limits, &built, &in_dry_run);
    let mut blocks = Vec::new();
    for (directive, block) in limits.iter().zip(built) {
        if in_dry_run(directive.block) {
            let warning = error(
                &files,
                &directive.words[0],
                "limit_req under limit_req_dry_run on: a dry run rejects nothing, so there is no limit to simulate; skipped",
            );
            files.warnings.push(warning);
        } else {
            blocks.push(block);
        }
    }
    Ok(super::Read {
        blocks,
        places,
        warnings: files.warnings,
        notes: files.notes,
    })
}

/// An error (or warning) at `at`, in the file it was written in.
fn error(files: &Files, at: &Token, message: &str) -> ScenarioError {
    files.source(at.file).error(at.line, at.column, message)
}

/// `conf.d/limits.conf:3: what`, for a field's comment.
fn here(files: &Files, at: &Token, what: impl AsRef<str>) -> String {
    files.source(at.file).at(at.line, what)
}

fn unsupported(files: &Files, at: &Token, what: &str) -> ScenarioError {
    error(files, at, &format!("{what}; {SUPPORTED}"))
}

/// `limit_req_zone KEY zone=NAME:SIZE rate=R [sync]`.
fn zone(files: &Files, directive: &Directive) -> Result<(String, Zone), ScenarioError> {
    let words = &directive.words;
    let key = words
        .get(1)
        .ok_or_else(|| unsupported(files, &words[0], "limit_req_zone: the key is missing"))?;
    let (mut name, mut rate) = (None, None);
    for word in &words[2..] {
        match word.text.split_once('=') {
            Some(("zone", value)) => {
                let zone = value.split(':').next().unwrap_or(value);
                name = Some(zone.to_string());
            }
            Some(("rate", _)) => rate = Some(word.clone()),
            _ => {
                return Err(unsupported(
                    files,
                    word,
                    &format!("limit_req_zone: {:?} is not understood", word.text),
                ));
            }
        }
    }
    let name = name.ok_or_else(|| {
        unsupported(
            files,
            &words[0],
            "limit_req_zone: zone=NAME:SIZE is missing",
        )
    })?;
    let rate =
        rate.ok_or_else(|| unsupported(files, &words[0], "limit_req_zone: rate=… is missing"))?;
    let value = &rate.text["rate=".len()..];
    let number = value
        .strip_suffix("r/s")
        .or_else(|| value.strip_suffix("r/m"))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if number.is_none() {
        return Err(error(
            files,
            &rate,
            &format!(
                "limit_req_zone: rate {value:?}: expected requests per second or minute, like 10r/s or 30r/m"
            ),
        ));
    }
    Ok((
        name,
        Zone {
            key: key.clone(),
            rate,
            defined: words[0].clone(),
        },
    ))
}

/// `limit_req zone=NAME [burst=N] [nodelay | delay=N]`.
fn limit_req(
    files: &Files,
    directive: &Directive,
    zones: &std::collections::HashMap<String, Zone>,
    (context, siblings): (&str, usize),
) -> Result<Block, ScenarioError> {
    let words = &directive.words;
    let said = |word: &Token| here(files, word, &word.text);
    let zone_word = words
        .iter()
        .find(|w| w.text.starts_with("zone="))
        .ok_or_else(|| unsupported(files, &words[0], "limit_req: zone=NAME is missing"))?;
    let name = &zone_word.text["zone=".len()..];
    let zone = zones.get(name).ok_or_else(|| {
        error(
            files,
            zone_word,
            &format!(
                "limit_req: zone {name:?} is not defined by a limit_req_zone in this configuration or any file it includes (import nginx.conf, or an `nginx -T` dump, rather than one site's file)"
            ),
        )
    })?;
    let defined = files.source(zone.defined.file).at(zone.defined.line, "");
    let mut block = Block::new(
        name,
        here(
            files,
            &words[0],
            format!(
                "{} (in {context}), zone defined at {}",
                words
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                defined.trim_end_matches([' ', ':'])
            ),
        ),
        "nginx-limit-req",
        said(&words[0]),
    )
    .named("its zone");
    block.per_instance("nginx server");
    block.set("rate", &zone.rate.text["rate=".len()..], said(&zone.rate));
    for word in &words[1..] {
        match word.text.split_once('=') {
            Some(("zone", _)) => {}
            Some(("burst" | "delay", value)) => {
                let key = &word.text[..word.text.find('=').unwrap_or(0)];
                // A TOML integer holds at most i64::MAX; nginx refuses 0
                // ("invalid burst value", "invalid delay value").
                let number: i64 = value
                    .parse::<u64>()
                    .ok()
                    .and_then(|n| i64::try_from(n).ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        error(
                            files,
                            word,
                            &format!(
                                "limit_req: {key}={value:?}: expected a whole number from 1 to {} (nginx refuses 0)",
                                i64::MAX
                            ),
                        )
                    })?;
                block.set(key, number, said(word));
            }
            None if word.text == "nodelay" => block.set("nodelay", true, said(word)),
            _ => {
                return Err(unsupported(
                    files,
                    word,
                    &format!("limit_req: {:?} is not understood", word.text),
                ));
            }
        }
    }
    match key_meaning(&zone.key.text) {
        Some(meaning) => {
            let by_host = ["$host", "$http_host"].contains(&zone.key.text.as_str());
            block.set(
                "per",
                if by_host { "host" } else { "key" },
                here(
                    files,
                    &zone.key,
                    format!("key {}: {meaning}", zone.key.text),
                ),
            );
            if by_host {
                block.notes.push(HOST_KEY_NOTE.to_string());
            }
            if zone.key.text.starts_with("$http_") && zone.key.text != "$http_host" {
                block.notes.push(
                    "nginx leaves a request whose key is empty (the header missing) unlimited, and so does this limiter for a replayed log's requests keyed `-` or empty; synthetic requests all have a key"
                        .to_string(),
                );
            }
        }
        None => block.notes.push(format!(
            "the zone's key {} is the same for every request of a server: one state for all",
            zone.key.text
        )),
    }
    if siblings > 1 {
        block.notes.push(format!(
            "{siblings} limit_req apply in {context}: nginx checks them all; import with --chain, or take them with from = {{ file, location = \"…\" }}, to run them as one"
        ));
    }
    Ok(block)
}

/// What a zone's key keeps a state per, as nginx evaluates it; `None` for
/// a key every request of a server shares (text, or a variable of the
/// server or machine).
fn key_meaning(key: &str) -> Option<String> {
    // One value per server block, or per machine.
    const PER_SERVER: [&str; 4] = ["$server_name", "$hostname", "$server_addr", "$server_port"];
    if !key.contains('$') || PER_SERVER.contains(&key) {
        return None;
    }
    Some(match key {
        "$binary_remote_addr" | "$remote_addr" => "one state per client address".to_string(),
        // The request's Host (lower-cased), else the server's name: one
        // state per tenant of a server with many names.
        "$host" | "$http_host" => "one state per Host the requests name".to_string(),
        _ => match key.strip_prefix("$http_") {
            Some(header)
                if header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                format!(
                    "one state per value of the {} header",
                    header.replace('_', "-")
                )
            }
            _ => "one state per value".to_string(),
        },
    })
}

/// The items as directives in their blocks (`include`s already followed
/// and braces balanced by [`Files::read`]).
fn directives(files: &Files, items: Vec<Item>) -> Result<Parsed, ScenarioError> {
    let mut directives = Vec::new();
    // Every block (0: the main context).
    let mut all = vec![Head {
        parent: 0,
        name: String::new(),
        at: None,
    }];
    // The blocks open now, innermost last.
    let mut open: Vec<usize> = vec![0];
    let mut words: Vec<Token> = Vec::new();
    for item in items {
        match item {
            Item::Word(word) => words.push(word),
            Item::Mark(mark) => match mark.text.as_str() {
                ";" if !words.is_empty() => directives.push(Directive {
                    words: std::mem::take(&mut words),
                    block: open.last().copied().unwrap_or(0),
                }),
                "{" => {
                    // Every location's limits are found by walking out of
                    // it: nesting is bounded so that stays linear.
                    if open.len() > MAX_NESTING {
                        return Err(error(
                            files,
                            &mark,
                            &format!(
                                "blocks nested more than {MAX_NESTING} deep; burstsim reads no deeper"
                            ),
                        ));
                    }
                    let name: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
                    all.push(Head {
                        parent: open.last().copied().unwrap_or(0),
                        name: name.join(" "),
                        at: words.first().cloned(),
                    });
                    open.push(all.len() - 1);
                    words.clear();
                }
                "}" => {
                    if open.len() > 1 {
                        open.pop();
                    }
                    words.clear();
                }
                _ => {}
            },
        }
    }
    Ok(Parsed {
        directives,
        blocks: all,
    })
}

#[cfg(test)]
mod tests {
    use crate::import::Dialect;
    use crate::import::testing::{field, read_text};

    fn read(text: &str) -> Result<Vec<crate::import::Block>, String> {
        read_text("nginx.conf", text, Dialect::Nginx)
    }

    /// `limit_req_dry_run on` holds where set and inside, unless set off
    /// again: those limits reject nothing, so they are warned of and skipped.
    #[test]
    fn limits_in_a_dry_run_are_skipped_with_a_warning() {
        let text = "http {\n limit_req_zone $a zone=z:1m rate=5r/s;\n limit_req_dry_run on;\n server {\n  location /a/ { limit_req zone=z; }\n  location /b/ { limit_req_dry_run off; limit_req zone=z burst=3; }\n }\n}\n";
        let source = crate::import::Source::new(std::path::Path::new("nginx.conf"), text);
        let read = super::read(&source).unwrap();
        assert_eq!(read.blocks.len(), 1);
        assert_eq!(field(&read.blocks[0], "burst").as_deref(), Some("3"));
        let warnings: Vec<String> = read.warnings.iter().map(crate::import::one_line).collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("nginx.conf:5:18: limit_req under limit_req_dry_run on"),
            "{warnings:?}"
        );
    }

    /// Which keys keep a state per value, as nginx evaluates them: the
    /// Host is the request's (a tenant each); the server's name is not.
    #[test]
    fn keys_mean_what_nginx_evaluates_them_to() {
        use super::key_meaning;
        assert_eq!(
            key_meaning("$host").as_deref(),
            Some("one state per Host the requests name")
        );
        assert_eq!(
            key_meaning("$http_x_api_key").as_deref(),
            Some("one state per value of the x-api-key header")
        );
        assert_eq!(
            key_meaning("$binary_remote_addr").as_deref(),
            Some("one state per client address")
        );
        assert_eq!(
            key_meaning("$server_name$uri").as_deref(),
            Some("one state per value")
        );
        for shared in [
            "$server_name",
            "$hostname",
            "$server_addr",
            "$server_port",
            "site",
        ] {
            assert_eq!(key_meaning(shared), None, "{shared}");
        }
    }

    #[test]
    fn quotes_comments_and_minutes_are_read() {
        let blocks = read(
            "http { # a comment; with { braces }\n limit_req_zone \"$binary_remote_addr\" zone=z:1m rate=30r/m;\n location / { limit_req zone=z; }\n}\n",
        )
        .unwrap();
        assert_eq!(blocks.len(), 1);
        assert_eq!(field(&blocks[0], "rate").as_deref(), Some("\"30r/m\""));
        assert_eq!(field(&blocks[0], "per").as_deref(), Some("\"key\""));
        assert_eq!(field(&blocks[0], "burst"), None);
    }

    #[test]
    fn a_burst_beyond_a_toml_integer_is_refused_at_its_column() {
        let err = read(
            "limit_req_zone $a zone=z:1m rate=5r/s;\nlimit_req zone=z burst=18446744073709551615;\n",
        )
        .unwrap_err();
        assert!(
            err.contains("nginx.conf:2:18: limit_req: burst=\"18446744073709551615\": expected a whole number from 1 to 9223372036854775807"),
            "{err}"
        );
    }

    #[test]
    fn bad_values_are_errors_at_their_column() {
        let err = read("limit_req_zone $a zone=z:1m rate=5r/h;\n").unwrap_err();
        assert!(
            err.contains("nginx.conf:1:29: limit_req_zone: rate \"5r/h\""),
            "{err}"
        );
        let err = read("limit_req_zone $a zone=z:1m rate=5r/s;\nlimit_req zone=z burst=x;\n")
            .unwrap_err();
        assert!(
            err.contains("nginx.conf:2:18: limit_req: burst=\"x\""),
            "{err}"
        );
        let err = read("limit_req_zone $a zone=z:1m rate=5r/s sync;\n").unwrap_err();
        assert!(
            err.contains("1:39: limit_req_zone: \"sync\" is not understood"),
            "{err}"
        );
        let err = read("}\n").unwrap_err();
        assert!(err.contains("closes no block"), "{err}");
    }
}
