//! nginx: `limit_req_zone KEY zone=NAME:SIZE rate=R;` defines a zone and
//! `limit_req zone=NAME [burst=N] [nodelay | delay=N];` applies it (in
//! `http`, `server` or `location`). Each `limit_req` becomes an
//! `nginx-limit-req` limiter; a key holding a variable (the client's
//! address, say) keeps one state per value, which is `per = "key"`.

use super::{Block, Source};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str =
    "supported: limit_req_zone (key, zone, rate) and limit_req (zone, burst, nodelay, delay)";

/// A word of the configuration and where it starts.
#[derive(Clone, Debug)]
struct Token {
    text: String,
    line: usize,
    column: usize,
}

/// A directive: its words (the name first), the blocks it sits in, and
/// which block it is directly in (numbered in file order).
struct Directive {
    words: Vec<Token>,
    /// The block it is in, numbered in [`Parsed::blocks`] (0: the main context).
    block: usize,
}

/// A configuration's directives and its blocks: each block's parent and
/// name, kept once (not copied into every directive: deep nesting made that
/// quadratic).
struct Parsed {
    directives: Vec<Directive>,
    blocks: Vec<(usize, String)>,
}

impl Parsed {
    /// `http › server › location /api/`, or `main`.
    fn context(&self, mut block: usize) -> String {
        let mut names = Vec::new();
        while block != 0 {
            let (parent, name) = &self.blocks[block];
            names.push(name.as_str());
            block = *parent;
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
    line: usize,
}

pub(super) fn read(source: &Source) -> Result<Vec<Block>, ScenarioError> {
    let parsed = directives(source)?;
    let directives = &parsed.directives;
    let mut zones = std::collections::HashMap::new();
    let mut includes = Vec::new();
    for directive in directives {
        let name = directive.words[0].text.as_str();
        match name {
            "limit_req_zone" => {
                let (zone, defined) = zone(source, directive)?;
                zones.insert(zone, defined);
            }
            "include" => includes.push(directive.words[0].line),
            "limit_req" | "limit_req_status" | "limit_req_log_level" => {}
            "limit_req_dry_run" => {
                return Err(unsupported(
                    source,
                    &directive.words[0],
                    "limit_req_dry_run: a dry run rejects nothing, so there is no limit to simulate",
                ));
            }
            "limit_conn" | "limit_conn_zone" | "limit_rate" | "limit_rate_after" => {
                return Err(unsupported(
                    source,
                    &directive.words[0],
                    &format!(
                        "{name}: limits connections or bandwidth, which burstsim does not model"
                    ),
                ));
            }
            _ => {}
        }
    }
    let limits: Vec<&Directive> = directives
        .iter()
        .filter(|d| d.words[0].text == "limit_req")
        .collect();
    super::refuse_too_many(
        source,
        limits.iter().map(|d| (d.words[0].line, d.words[0].column)),
    )?;
    let mut per_block = std::collections::HashMap::new();
    for directive in &limits {
        *per_block.entry(directive.block).or_insert(0usize) += 1;
    }
    limits
        .iter()
        .map(|directive| {
            let context = parsed.context(directive.block);
            let siblings = per_block[&directive.block];
            limit_req(source, directive, &zones, &includes, (&context, siblings))
        })
        .collect()
}

fn unsupported(source: &Source, at: &Token, what: &str) -> ScenarioError {
    source.error(at.line, at.column, format!("{what}; {SUPPORTED}"))
}

/// `limit_req_zone KEY zone=NAME:SIZE rate=R [sync]`.
fn zone(source: &Source, directive: &Directive) -> Result<(String, Zone), ScenarioError> {
    let words = &directive.words;
    let key = words
        .get(1)
        .ok_or_else(|| unsupported(source, &words[0], "limit_req_zone: the key is missing"))?;
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
                    source,
                    word,
                    &format!("limit_req_zone: {:?} is not understood", word.text),
                ));
            }
        }
    }
    let name = name.ok_or_else(|| {
        unsupported(
            source,
            &words[0],
            "limit_req_zone: zone=NAME:SIZE is missing",
        )
    })?;
    let rate =
        rate.ok_or_else(|| unsupported(source, &words[0], "limit_req_zone: rate=… is missing"))?;
    let value = &rate.text["rate=".len()..];
    let number = value
        .strip_suffix("r/s")
        .or_else(|| value.strip_suffix("r/m"))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if number.is_none() {
        return Err(source.error(
            rate.line,
            rate.column,
            format!("limit_req_zone: rate {value:?}: expected requests per second or minute, like 10r/s or 30r/m"),
        ));
    }
    Ok((
        name,
        Zone {
            key: key.clone(),
            rate,
            line: words[0].line,
        },
    ))
}

/// `limit_req zone=NAME [burst=N] [nodelay | delay=N]`.
fn limit_req(
    source: &Source,
    directive: &Directive,
    zones: &std::collections::HashMap<String, Zone>,
    includes: &[usize],
    (context, siblings): (&str, usize),
) -> Result<Block, ScenarioError> {
    let words = &directive.words;
    let here = |word: &Token| source.at(word.line, &word.text);
    let zone_word = words
        .iter()
        .find(|w| w.text.starts_with("zone="))
        .ok_or_else(|| unsupported(source, &words[0], "limit_req: zone=NAME is missing"))?;
    let name = &zone_word.text["zone=".len()..];
    let zone = zones.get(name).ok_or_else(|| {
        let include = includes
            .first()
            .map(|line| {
                format!(
                    " (the include at line {line} is not followed: import the file that defines it)"
                )
            })
            .unwrap_or_default();
        source.error(
            zone_word.line,
            zone_word.column,
            format!(
                "limit_req: zone {name:?} is not defined by a limit_req_zone in this file{include}"
            ),
        )
    })?;
    let mut block = Block::new(
        name,
        source.at(
            words[0].line,
            format!(
                "{} (in {context}), zone defined at line {}",
                words
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                zone.line
            ),
        ),
        "nginx-limit-req",
        here(&words[0]),
    )
    .named("its zone");
    block.set("rate", &zone.rate.text["rate=".len()..], here(&zone.rate));
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
                        source.error(
                            word.line,
                            word.column,
                            format!(
                                "limit_req: {key}={value:?}: expected a whole number from 1 to {} (nginx refuses 0)",
                                i64::MAX
                            ),
                        )
                    })?;
                block.set(key, number, here(word));
            }
            None if word.text == "nodelay" => block.set("nodelay", true, here(word)),
            _ => {
                return Err(unsupported(
                    source,
                    word,
                    &format!("limit_req: {:?} is not understood", word.text),
                ));
            }
        }
    }
    // Variables with one value per server name every request shares.
    let per_server = [
        "$server_name",
        "$host",
        "$hostname",
        "$server_addr",
        "$server_port",
    ];
    if zone.key.text.contains('$') && !per_server.contains(&zone.key.text.as_str()) {
        block.set(
            "per",
            "key",
            source.at(
                zone.key.line,
                format!("key {}: one state per value", zone.key.text),
            ),
        );
    } else {
        block.notes.push(format!(
            "the zone's key {} is the same for every request of a server: one state for all",
            zone.key.text
        ));
    }
    if siblings > 1 {
        block.notes.push(format!(
            "{siblings} limit_req apply in {context}: nginx checks them all; to see them as one, put their blocks in a chain"
        ));
    }
    Ok(block)
}

/// The configuration as directives, with comments and quoting handled.
fn directives(source: &Source) -> Result<Parsed, ScenarioError> {
    let mut directives = Vec::new();
    // Every block: its parent and its name (0: the main context).
    let mut all: Vec<(usize, String)> = vec![(0, String::new())];
    // The blocks open now, innermost last.
    let mut open: Vec<usize> = vec![0];
    let mut words: Vec<Token> = Vec::new();
    let mut chars = source.text.chars().peekable();
    let (mut line, mut column) = (1usize, 0usize);
    let mut word: Option<Token> = None;
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        let (at_line, at_column) = (line, column);
        if c == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        if let Some(q) = quote {
            let token = word.get_or_insert_with(|| Token {
                text: String::new(),
                line: at_line,
                column: at_column,
            });
            if c == q {
                quote = None;
            } else if c == '\\' {
                if let Some(next) = chars.next() {
                    column += 1;
                    token.text.push(next);
                }
            } else {
                token.text.push(c);
            }
            continue;
        }
        match c {
            '#' => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        line += 1;
                        column = 0;
                        break;
                    }
                }
                words.extend(word.take());
            }
            '"' | '\'' => {
                word.get_or_insert_with(|| Token {
                    text: String::new(),
                    line: at_line,
                    column: at_column,
                });
                quote = Some(c);
            }
            ';' | '{' | '}' => {
                words.extend(word.take());
                match c {
                    ';' if !words.is_empty() => directives.push(Directive {
                        words: std::mem::take(&mut words),
                        block: open.last().copied().unwrap_or(0),
                    }),
                    '{' => {
                        let name: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
                        all.push((open.last().copied().unwrap_or(0), name.join(" ")));
                        open.push(all.len() - 1);
                        words.clear();
                    }
                    '}' => {
                        if open.len() == 1 {
                            return Err(source.error(at_line, at_column, "a '}' closes no block"));
                        }
                        open.pop();
                        words.clear();
                    }
                    _ => {}
                }
            }
            c if c.is_whitespace() => words.extend(word.take()),
            c => word
                .get_or_insert_with(|| Token {
                    text: String::new(),
                    line: at_line,
                    column: at_column,
                })
                .text
                .push(c),
        }
    }
    if quote.is_some() {
        return Err(source.error(line, column, "a quoted string is not closed"));
    }
    if let [.., innermost] = open[..]
        && innermost != 0
    {
        return Err(source.error(
            line,
            column,
            format!("the block {:?} is not closed with '}}'", all[innermost].1),
        ));
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
