//! HAProxy: a `stick-table … store http_req_rate(P)`, a `track-scN KEY`
//! that counts every request in it, and `http-request deny if { sc_http_req_rate(N) gt L }`
//! (or `scN_http_req_rate`, `ge`, or a named `acl`) become a `haproxy-rate`
//! limiter per deny rule. A deny on another rate, another action on a rate
//! (`tarpit`, `reject`, `silent-drop`), `unless` or a compound condition is
//! an error at its line.

use std::collections::HashMap;
use std::rc::Rc;

use super::{Block, Source, duration};
use crate::error::ScenarioError;

pub(super) const SUPPORTED: &str = "supported: stick-table … store http_req_rate(P), track-scN KEY [table T], http-request deny if { sc_http_req_rate(N) gt L } (or sc<N>_http_req_rate, ge, or a named acl)";

const SECTIONS: &[&str] = &[
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "peers",
    "resolvers",
    "userlist",
    "program",
    "http-errors",
    "ring",
    "mailers",
    "cache",
];

/// A word of a line and its column.
#[derive(Clone, Debug)]
struct Word<'a> {
    text: &'a str,
    column: usize,
}

/// A table's `http_req_rate(P)` period in milliseconds, and its line.
struct Table {
    period_ms: u64,
    line: usize,
    /// `expire T`: an entry not updated for T is removed, its rate with it.
    expire_ms: Option<u64>,
}

/// `track-scN KEY [table T]`.
struct Track {
    key: String,
    table: Rc<str>,
    line: usize,
    /// `if { path_beg /api }`: the requests it is tracked for, when not all.
    condition: Option<String>,
}

/// A condition on a tracked rate: `sc_http_req_rate(N[,T]) OP VALUE`.
struct Condition {
    counter: usize,
    table: Option<String>,
    limit: u64,
    text: String,
    line: usize,
}

pub(super) fn read(source: &Source) -> Result<Vec<Block>, ScenarioError> {
    // Shared, not copied per directive: a section's name may be long.
    let mut section: Rc<str> = Rc::from("global");
    let mut tables: HashMap<Rc<str>, Table> = HashMap::new();
    let mut tracks: HashMap<(Rc<str>, usize), Track> = HashMap::new();
    // A named acl on a rate: its line and text, read when a deny uses it
    // (looking the line up again made many denies quadratic).
    let mut acls: HashMap<(Rc<str>, String), (usize, &str)> = HashMap::new();
    let mut denies: Vec<(Rc<str>, usize, Condition)> = Vec::new();
    for (index, raw) in source.text.lines().enumerate() {
        let line = index + 1;
        let words = words_of(raw);
        let Some(first) = words.first() else { continue };
        let error = |word: &Word, message: String| source.error(line, word.column, message);
        if SECTIONS.contains(&first.text) {
            section = Rc::from(words.get(1).map_or(first.text, |w| w.text));
            continue;
        }
        match first.text {
            "stick-table" => {
                if let Some(store) = words.iter().position(|w| w.text == "store") {
                    let Some(list) = words.get(store + 1) else {
                        return Err(error(
                            first,
                            format!("stick-table: store names nothing; {SUPPORTED}"),
                        ));
                    };
                    for item in list.text.split(',') {
                        if let Some(period) = item
                            .strip_prefix("http_req_rate(")
                            .and_then(|p| p.strip_suffix(')'))
                        {
                            let period_ms = time_ms(period).ok_or_else(|| {
                                error(list, format!("http_req_rate({period}): expected a period like 10s, 1m or 500 (milliseconds)"))
                            })?;
                            let expire_ms = match words.iter().position(|w| w.text == "expire") {
                                Some(at) => {
                                    let Some(value) = words.get(at + 1) else {
                                        return Err(error(
                                            &words[at],
                                            "stick-table: expire names no time".to_string(),
                                        ));
                                    };
                                    Some(time_ms(value.text).ok_or_else(|| {
                                        error(value, format!("expire {}: expected a time like 10s, 1m or 500 (milliseconds)", value.text))
                                    })?)
                                }
                                None => None,
                            };
                            tables.insert(
                                section.clone(),
                                Table {
                                    period_ms,
                                    line,
                                    expire_ms,
                                },
                            );
                        }
                    }
                }
            }
            "acl" if words.len() >= 3 && words[2].text.contains("_rate") => {
                let name = words[1].text.to_string();
                acls.insert((section.clone(), name), (line, raw));
            }
            "http-request" | "tcp-request" => {
                let action = words
                    .iter()
                    .skip(1)
                    .find(|w| !matches!(w.text, "connection" | "content" | "session"));
                let Some(action) = action else { continue };
                if let Some(counter) = action.text.strip_prefix("track-sc") {
                    let counter: usize = counter.parse().map_err(|_| {
                        error(
                            action,
                            format!("{}: expected track-sc0, track-sc1…", action.text),
                        )
                    })?;
                    let at = words
                        .iter()
                        .position(|w| w.text == action.text)
                        .unwrap_or(0);
                    let key = words.get(at + 1).map_or("", |w| w.text).to_string();
                    let table = words
                        .iter()
                        .position(|w| w.text == "table")
                        .and_then(|i| words.get(i + 1))
                        .map_or_else(|| section.clone(), |w| Rc::from(w.text));
                    // `track-sc0 src if { path_beg /api }`: only those are counted.
                    let condition = words
                        .iter()
                        .position(|w| w.text == "if" || w.text == "unless")
                        .map(|i| {
                            words[i..]
                                .iter()
                                .map(|w| w.text)
                                .collect::<Vec<_>>()
                                .join(" ")
                        });
                    tracks.insert(
                        (section.clone(), counter),
                        Track {
                            key,
                            table,
                            line,
                            condition,
                        },
                    );
                    continue;
                }
                let Some(cond_at) = words
                    .iter()
                    .position(|w| w.text == "if" || w.text == "unless")
                else {
                    continue;
                };
                let condition_words = &words[cond_at + 1..];
                let on_rate = condition_words.iter().any(|w| w.text.contains("_rate"))
                    || condition_words.iter().any(|w| {
                        acls.contains_key(&(
                            section.clone(),
                            w.text.trim_start_matches('!').to_string(),
                        ))
                    });
                if !on_rate {
                    continue;
                }
                if action.text != "deny" || first.text != "http-request" {
                    return Err(error(
                        action,
                        format!(
                            "{} {} on a rate: only http-request deny is modelled; {SUPPORTED}",
                            first.text, action.text
                        ),
                    ));
                }
                if words[cond_at].text == "unless" {
                    return Err(error(
                        &words[cond_at],
                        format!(
                            "unless: a deny unless a rate is high is not modelled; {SUPPORTED}"
                        ),
                    ));
                }
                let condition = match condition_words {
                    [only] if !only.text.starts_with('!') => {
                        match acls.get(&(section.clone(), only.text.to_string())) {
                            Some(&(at, text)) => condition(source, at, &words_of(text)[2..])?,
                            None => {
                                return Err(error(
                                    only,
                                    format!(
                                        "acl {:?} is not defined before this line in {section}; {SUPPORTED}",
                                        only.text
                                    ),
                                ));
                            }
                        }
                    }
                    [open, inner @ .., close] if open.text == "{" && close.text == "}" => {
                        condition(source, line, inner)?
                    }
                    _ => {
                        return Err(error(
                            &words[cond_at],
                            format!("a compound or negated condition is not modelled; {SUPPORTED}"),
                        ));
                    }
                };
                denies.push((section.clone(), line, condition));
            }
            _ => {}
        }
    }
    super::refuse_too_many(source, denies.iter().map(|(_, line, _)| (*line, 0)))?;
    denies
        .into_iter()
        .map(|(section, line, condition)| {
            deny(source, &section, line, &condition, &tables, &tracks)
        })
        .collect()
}

/// A line's words, comments dropped.
fn words_of(line: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (column, (i, c)) in line.char_indices().enumerate() {
        if c == '#' && start.is_none() {
            break;
        }
        match (c.is_whitespace(), start) {
            (false, None) => start = Some((i, column)),
            (true, Some((from, at))) => {
                out.push(Word {
                    text: &line[from..i],
                    column: at,
                });
                start = None;
            }
            _ => {}
        }
    }
    if let Some((from, at)) = start {
        out.push(Word {
            text: &line[from..],
            column: at,
        });
    }
    out
}

/// `sc_http_req_rate(N[,T]) gt L`, `scN_http_req_rate[(T)] ge L`.
fn condition(source: &Source, line: usize, words: &[Word]) -> Result<Condition, ScenarioError> {
    let error = |word: &Word, message: String| source.error(line, word.column, message);
    let [fetch, op, value] = words else {
        let at = words.first().map_or(0, |w| w.column);
        return Err(source.error(line, at, format!("expected FETCH gt LIMIT; {SUPPORTED}")));
    };
    let (counter, table) = if let Some(args) = fetch
        .text
        .strip_prefix("sc_http_req_rate(")
        .and_then(|a| a.strip_suffix(')'))
    {
        let (n, table) = args
            .split_once(',')
            .map_or((args, None), |(n, t)| (n, Some(t.to_string())));
        (n.trim().parse::<usize>().ok(), table)
    } else if let Some(rest) = fetch
        .text
        .strip_prefix("sc")
        .filter(|r| r.contains("_http_req_rate"))
    {
        let (n, after) = rest.split_once("_http_req_rate").unwrap_or(("", ""));
        let table = after
            .strip_prefix('(')
            .and_then(|t| t.strip_suffix(')'))
            .map(str::to_string);
        (n.parse::<usize>().ok(), table)
    } else {
        return Err(error(
            fetch,
            format!(
                "{}: only the tracked HTTP request rate is modelled; {SUPPORTED}",
                fetch.text
            ),
        ));
    };
    let counter = counter
        .ok_or_else(|| error(fetch, format!("{}: expected a counter number", fetch.text)))?;
    let number: u64 = value
        .text
        .parse()
        .map_err(|_| error(value, format!("{:?}: expected a whole number", value.text)))?;
    let limit = match op.text {
        "gt" => number,
        "ge" if number >= 2 => number - 1,
        "ge" => {
            return Err(error(
                value,
                format!("ge {number} denies every request; nothing to simulate"),
            ));
        }
        other => {
            return Err(error(
                op,
                format!("{other}: only gt and ge deny above a rate; {SUPPORTED}"),
            ));
        }
    };
    if limit == 0 {
        return Err(error(
            value,
            "gt 0 denies every request; nothing to simulate".into(),
        ));
    }
    Ok(Condition {
        counter,
        table,
        limit,
        text: format!("{} {} {}", fetch.text, op.text, value.text),
        line,
    })
}

/// A deny rule, joined with its tracking and its table.
fn deny(
    source: &Source,
    section: &Rc<str>,
    line: usize,
    condition: &Condition,
    tables: &HashMap<Rc<str>, Table>,
    tracks: &HashMap<(Rc<str>, usize), Track>,
) -> Result<Block, ScenarioError> {
    let n = condition.counter;
    let track = tracks.get(&(section.clone(), n)).ok_or_else(|| {
        source.error(line, 0, format!("sc{n} is not tracked in {section}: add http-request track-sc{n} src (or another key) before the deny"))
    })?;
    let table_name = condition.table.as_deref().unwrap_or(&track.table);
    let table = tables.get(table_name).ok_or_else(|| {
        source.error(
            track.line,
            0,
            format!(
                "table {table_name:?} has no stick-table storing http_req_rate(P); {SUPPORTED}"
            ),
        )
    })?;
    let mut block = Block::new(
        section,
        source.at(
            line,
            format!("http-request deny if {} (in {section})", condition.text),
        ),
        "haproxy-rate",
        source.at(line, "http-request deny"),
    )
    .named("the section it is in");
    // Peers copy a stick table's entries between processes, never adding
    // up their counts: each process limits on its own.
    block.per_instance("HAProxy process");
    block.set(
        "limit",
        condition.limit as i64,
        source.at(condition.line, &condition.text),
    );
    block.set(
        "period",
        duration(table.period_ms * 1_000_000),
        source.at(
            table.line,
            format!("stick-table of {table_name}: http_req_rate"),
        ),
    );
    block.set(
        "per",
        "key",
        source.at(
            track.line,
            format!("track-sc{n} {}: a rate per value", track.key),
        ),
    );
    if track.key.starts_with("req.hdr(") || track.key.starts_with("hdr(") {
        block.notes.push(format!(
            "HAProxy tracks nothing for a request without the header of track-sc{n} {} (its deny never applies), and so does this limiter for a replayed log's requests keyed `-`; a header present and empty is a key like any",
            track.key
        ));
    }
    if let Some(only) = &track.condition {
        block.notes.push(format!(
            "track-sc{n} holds only {only} (line {}): HAProxy counts and limits only those requests; the workload stands for them (replay a log filtered to them)",
            track.line
        ));
    }
    if let Some(expire_ms) = table.expire_ms {
        block.set(
            "evict_after",
            duration(expire_ms * 1_000_000),
            source.at(
                table.line,
                format!("stick-table of {table_name}: expire (an idle entry is removed)"),
            ),
        );
    }
    Ok(block)
}

/// An HAProxy time (`10s`, `1m`, `500` milliseconds, `250ms`) in whole milliseconds.
fn time_ms(text: &str) -> Option<u64> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let ms = match unit {
        "" | "ms" => number,
        "s" => number.checked_mul(1_000)?,
        "m" => number.checked_mul(60_000)?,
        "h" => number.checked_mul(3_600_000)?,
        "d" => number.checked_mul(86_400_000)?,
        _ => return None,
    };
    // Whole nanoseconds must hold it: every time becomes one.
    (ms > 0 && ms.checked_mul(1_000_000).is_some()).then_some(ms)
}

#[cfg(test)]
mod tests {
    use crate::import::Dialect;
    use crate::import::testing::{field, read_text};

    /// `expire` forgets an idle entry, as `evict_after` forgets an idle key;
    /// a time no nanosecond count holds is an error, not an overflow.
    #[test]
    fn a_tables_expire_becomes_evict_after() {
        let config = |expire: &str| {
            format!(
                "frontend f\n  stick-table type ip size 1k{expire} store http_req_rate(10s)\n  http-request track-sc0 src\n  http-request deny if {{ sc_http_req_rate(0) gt 5 }}\n"
            )
        };
        let blocks = read_text("haproxy.cfg", &config(" expire 10s"), Dialect::Haproxy).unwrap();
        assert_eq!(field(&blocks[0], "evict_after").as_deref(), Some("\"10s\""));
        let blocks = read_text("haproxy.cfg", &config(""), Dialect::Haproxy).unwrap();
        assert_eq!(field(&blocks[0], "evict_after"), None);
        let err = read_text(
            "haproxy.cfg",
            &config(" expire 99999999999999d"),
            Dialect::Haproxy,
        )
        .unwrap_err();
        assert!(
            err.contains("expire 99999999999999d: expected a time"),
            "{err}"
        );
    }

    fn read(text: &str) -> Result<Vec<crate::import::Block>, String> {
        read_text("haproxy.cfg", text, Dialect::Haproxy)
    }

    /// `track-sc0 src if { path_beg /api }` counts and limits only those
    /// requests: the block says so (it read as unconditional before).
    #[test]
    fn a_conditional_track_says_which_requests_it_limits() {
        let text = |condition: &str| {
            format!(
                "frontend f\n  stick-table type ip size 1k store http_req_rate(10s)\n  http-request track-sc0 src{condition}\n  http-request deny if {{ sc_http_req_rate(0) gt 5 }}\n"
            )
        };
        let blocks = read(&text(" if { path_beg /api }")).unwrap();
        assert!(
            blocks[0]
                .notes
                .iter()
                .any(|n| n.starts_with("track-sc0 holds only if { path_beg /api } (line 3)")),
            "{:?}",
            blocks[0].notes
        );
        let blocks = read(&text("")).unwrap();
        assert!(
            !blocks[0].notes.iter().any(|n| n.contains("holds only")),
            "{:?}",
            blocks[0].notes
        );
    }

    #[test]
    fn a_table_in_a_backend_and_the_scn_form_with_ge() {
        let blocks = read(
            "backend rates\n  stick-table type ip size 1k store http_req_rate(10s),conn_rate(1s)\n\
             frontend web\n  http-request track-sc1 src table rates\n  http-request deny if { sc1_http_req_rate ge 50 } # comment\n",
        )
        .unwrap();
        assert_eq!(field(&blocks[0], "limit").as_deref(), Some("49"));
        assert_eq!(field(&blocks[0], "period").as_deref(), Some("\"10s\""));
        assert_eq!(blocks[0].name, "web");
    }

    #[test]
    fn a_deny_on_an_untracked_counter_or_unless_is_refused() {
        let table = "frontend f\n  stick-table type ip size 1k store http_req_rate(500)\n";
        let err = read(&format!(
            "{table}  http-request deny if {{ sc_http_req_rate(2) gt 5 }}\n"
        ))
        .unwrap_err();
        assert!(err.contains("sc2 is not tracked in f"), "{err}");
        let err = read(&format!("{table}  http-request track-sc0 src\n  http-request deny unless {{ sc_http_req_rate(0) gt 5 }}\n")).unwrap_err();
        assert!(err.contains("haproxy.cfg:4:21: unless"), "{err}");
        // A deny on something else than a rate is not a limit, and is left alone.
        let blocks = read(&format!("{table}  http-request track-sc0 src\n  http-request deny if {{ path_beg /admin }}\n  http-request deny if {{ sc_http_req_rate(0) gt 5 }}\n")).unwrap();
        assert_eq!(
            (blocks.len(), field(&blocks[0], "period")),
            (1, Some("\"500ms\"".into()))
        );
    }
}
