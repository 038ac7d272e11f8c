use super::*;
use rand::SeedableRng as _;

fn rng() -> Rng {
    Rng::seed_from_u64(7)
}

/// `counts[i]` rows stamped at second `first + i`, keyed 0, 1, 2, … in each.
fn seconds(counts: &[u64], first: u64) -> Vec<Arrival> {
    counts
        .iter()
        .enumerate()
        .flat_map(|(second, &count)| {
            (0..count).map(move |place| Arrival {
                time: Nanos((first + second as u64) * NANOS_PER_SEC),
                key: Key::client(place),
            })
        })
        .collect()
}

/// `rows` spread with the tests' seed, for a run of `[start, end)` shifted by `offset`.
fn spreading(rows: &[Arrival], start: u64, end: u64, offset: i128) -> Arrivals {
    let mut arrivals = Arrivals::from_sorted(rows.to_vec());
    arrivals.spread = Some(Spreader::new(rng()));
    (arrivals.start, arrivals.end, arrivals.offset) = (start, end, offset);
    arrivals
}

fn trace(contents: &str, extra: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.csv"), contents).unwrap();
    let config: Config = toml::from_str(&format!("path = \"t.csv\"\n{extra}")).unwrap();
    (dir, config)
}

fn times(contents: &str, extra: &str) -> Result<Vec<u64>, String> {
    let (dir, config) = trace(contents, extra);
    let arrivals = config
        .replay(dir.path(), Nanos(0), Nanos(u64::MAX), rng())
        .map_err(|e| e.to_string())?;
    Ok(arrivals.map(|a| a.time.get()).collect())
}

fn file(name: &str, contents: &str, extra: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), contents).unwrap();
    let config: Config = toml::from_str(&format!("path = \"{name}\"\n{extra}")).unwrap();
    (dir, config)
}

/// Times and keys as replayed.
type Replayed = Vec<(u64, Key)>;

/// Times and keys as replayed from `[0, end)`, and the first pass's warnings.
fn replay(name: &str, contents: &str, extra: &str) -> Result<(Replayed, Vec<String>), String> {
    replay_bytes(name, contents.as_bytes(), extra)
}

const COMBINED: &str = r#"198.51.100.1 - - [27/Nov/2026:09:00:00 +0100] "GET / HTTP/1.1" 200 5 "-" "a"
198.51.100.2 - bob [27/Nov/2026:09:00:00 +0100] "POST /x HTTP/1.1" 429 0 "-" "b"

203.0.113.7 - - [27/Nov/2026:08:00:02 +0000] "GET / HTTP/1.1" 200 5 "-" "c"
"#;

#[test]
fn a_combined_log_replays_rebased_with_its_addresses_as_keys() {
    let (rows, warnings) = replay(
        "a.log",
        COMBINED,
        "format = \"combined\"\nkey_field = \"remote_addr\"\nspread = \"none\"",
    )
    .unwrap();
    // 08:00:02 UTC is 09:00:02 +0100: two seconds after the first rows.
    assert_eq!(
        rows,
        [
            (0, Key::named(b"198.51.100.1")),
            (0, Key::named(b"198.51.100.2")),
            (2_000_000_000, Key::named(b"203.0.113.7")),
        ]
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    let (rows, _) = replay(
        "a.log",
        COMBINED,
        "format = \"combined\"\nkey_field = \"remote_user\"\nspread = \"none\"",
    )
    .unwrap();
    assert_eq!(rows[1].1, Key::named(b"bob"));
}

/// nginx's `main` log format (the combined one and a quoted
/// "$http_x_forwarded_for"): behind a load balancer every line has its
/// address, the client is in the forwarded-for field, and keyed by it each
/// client is its own key ("-", no header, one more). A line without the
/// field is refused at its line rather than given a key of its own.
#[test]
fn a_log_in_nginx_main_format_is_keyed_by_its_forwarded_for_field() {
    let main = "10.0.0.1 - - [27/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a\" \"198.51.100.1\"\n\
        10.0.0.1 - - [27/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a \\\"q\\\"\" \"198.51.100.2, 10.0.0.7\"\n\
        10.0.0.1 - - [27/Nov/2026:09:00:01 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"b\" \"-\"\n";
    let keyed = "format = \"combined\"\nkey_field = \"http_x_forwarded_for\"\nspread = \"none\"";
    let (rows, _) = replay("a.log", main, keyed).unwrap();
    assert_eq!(
        rows,
        [
            (0, Key::named(b"198.51.100.1")),
            (0, Key::named(b"198.51.100.2, 10.0.0.7")),
            (NANOS_PER_SEC, Key::named(b"-")),
        ]
    );
    // The same lines keyed by address: one client.
    let (rows, _) = replay("a.log", main, &keyed.replace("http_x_forwarded_for", "remote_addr")).unwrap();
    assert!(rows.iter().all(|row| row.1 == Key::named(b"10.0.0.1")), "{rows:?}");
    let err = replay("a.log", COMBINED, keyed).unwrap_err();
    assert!(err.contains("a.log:1: \"198.51.100.1 - - [27/Nov") && err.contains("has no http_x_forwarded_for"), "{err}");
}

/// A JSON line's key member missing or `null` is absent, as a text log's
/// `-` is (Kong's file-log leaves a header out of `request.headers` when
/// the request has none); an empty string is blank, `0` and `"null"` are
/// keys like any. With `key_fallback`, an absent key is the fallback's:
/// Kong's `limit_by = "header"` counts a request without the header by its
/// client's address. Where the fallback is absent too, the key is absent.
#[test]
fn an_absent_key_is_the_fallback_fields_where_one_is_named() {
    let lines = [
        r#"{"time": 1, "ip": "10.0.0.1", "request": {"headers": {"x-api-key": "alpha"}}}"#,
        r#"{"time": 2, "ip": "10.0.0.2", "request": {"headers": {}}}"#,
        r#"{"time": 3, "ip": "10.0.0.3", "request": {"headers": {"x-api-key": null}}}"#,
        r#"{"time": 4, "ip": "10.0.0.4", "request": {"headers": {"x-api-key": ""}}}"#,
        r#"{"time": 5, "ip": "10.0.0.5", "request": {"headers": {"x-api-key": "null"}}}"#,
        r#"{"time": 6, "request": {"headers": {"x-api-key": 0}}}"#,
        r#"{"time": 7, "request": {"headers": {}}}"#,
    ]
    .join("\n");
    let keyed = "format = \"jsonl\"\nkey_field = \"request.headers.x-api-key\"\nspread = \"none\"";
    let keys = |extra: &str| -> Vec<Key> {
        let (rows, _) = replay("k.jsonl", &lines, extra).unwrap();
        rows.into_iter().map(|(_, key)| key).collect()
    };
    let absent = Key::named(logs::ABSENT_MEMBER);
    let named = |text: &str| Key::named(text.as_bytes());
    assert_eq!(
        keys(keyed),
        [named("alpha"), absent, absent, named(""), named("null"), named("0"), absent]
    );
    assert_eq!(
        keys(&format!("{keyed}\nkey_fallback = \"ip\"")),
        [named("alpha"), named("10.0.0.2"), named("10.0.0.3"), named(""), named("null"), named("0"), absent]
    );
    // The check says which rows name nothing, and what sets them apart.
    let (dir, config) = file("k.jsonl", &lines, keyed);
    let warnings = config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    let said = warnings.iter().find(|w| w.contains("4 of 7 rows have no request.headers.x-api-key (missing or null, or empty)"));
    assert!(said.is_some_and(|w| w.contains("set key_fallback")), "{warnings:?}");
    assert_eq!(*config.empty_keys(), EmptyKeys { absent: vec![absent.client], blank: vec![named("").client] });
    let (dir, config) = file("k.jsonl", &lines, &format!("{keyed}\nkey_fallback = \"ip\""));
    let warnings = config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    let said = warnings.iter().find(|w| w.contains("2 of 7 rows have no request.headers.x-api-key (nor \"ip\")"));
    assert!(said.is_some_and(|w| !w.contains("set key_fallback")), "{warnings:?}");
    // A text log's `-`: nginx's forwarded-for of a request without the
    // header, keyed by its address instead; a vendor's log the same.
    let main = "10.0.0.1 - - [27/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a\" \"198.51.100.1\"\n\
        10.0.0.2 - - [27/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a\" \"-\"\n\
        10.0.0.3 - - [27/Nov/2026:09:00:01 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"b\" \"\"\n";
    let (rows, _) = replay(
        "a.log",
        main,
        "format = \"combined\"\nkey_field = \"http_x_forwarded_for\"\nkey_fallback = \"remote_addr\"\nspread = \"none\"",
    )
    .unwrap();
    let keys: Vec<Key> = rows.into_iter().map(|(_, key)| key).collect();
    assert_eq!(keys, [named("198.51.100.1"), named("10.0.0.2"), named("")]);
    let envoy = "[2026-11-27T09:00:00.000Z] \"GET / HTTP/1.1\" 200 - 0 5 1 1 \"-\" \"a\" \"id\" \"shop\" \"10.0.1.1:80\"\n";
    let (rows, _) = replay(
        "e.log",
        envoy,
        "format = \"envoy\"\nkey_field = \"x_forwarded_for\"\nkey_fallback = \"authority\"\nspread = \"none\"",
    )
    .unwrap();
    assert_eq!(rows.into_iter().map(|(_, key)| key).collect::<Vec<_>>(), [named("shop")]);
}

/// nginx writes a line when the request ends: `elapsed_field` takes each
/// request's `$request_time` from its `$msec`, so a slow request replays
/// where it started, before requests that ended earlier (sorted, in
/// JSON lines and in CSV). A time to the whole second is refused (the
/// start would be known only to the second), as are a duration that is no
/// number or longer than the time, and logs that have no such field.
#[test]
fn elapsed_field_replays_each_request_where_it_started() {
    let lines = r#"{"msec": "1764230400.900", "request_time": 0.850}
{"msec": 1764230401.1, "request_time": "0.000"}
{"msec": "1764230401.500", "request_time": "1.400"}
"#;
    let json = "format = \"jsonl\"\ntime_field = \"msec\"\nunit = \"s\"\nelapsed_field = \"request_time\"";
    let (rows, warnings) = replay("n.jsonl", lines, json).unwrap();
    let times: Vec<u64> = rows.iter().map(|row| row.0).collect();
    assert_eq!(times, [0, 50_000_000, 1_050_000_000]);
    assert!(warnings.iter().any(|w| w.contains("1 of 3 rows are earlier than the row before them")), "{warnings:?}");
    let csv = "time_ms,took\n1764230400900,0.850\n1764230401100,0\n1764230401500,1.4\n";
    let (dir, config) = file("n.csv", csv, "elapsed_field = \"took\"\nrebase = true");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    let replayed: Vec<u64> = config
        .replay(dir.path(), Nanos(0), Nanos(u64::MAX), rng())
        .unwrap()
        .map(|a| a.time.get())
        .collect();
    assert_eq!(replayed, [0, 50_000_000, 1_050_000_000]);
    for (name, contents, extra, expected) in [
        (
            "n.jsonl",
            "{\"msec\": \"1764230400.900\", \"request_time\": 0.1}\n{\"msec\": \"1764230401\", \"request_time\": 0.1}\n",
            json,
            "n.jsonl:2: \"1764230401\" is a whole second, so a start request_time before it is known only to the second",
        ),
        (
            "n.jsonl",
            "{\"time\": \"2026-11-27T09:00:00Z\", \"request_time\": 0.1}\n",
            "format = \"jsonl\"\nelapsed_field = \"request_time\"",
            "n.jsonl:1: \"2026-11-27T09:00:00Z\" is a whole second",
        ),
        (
            "n.jsonl",
            "{\"msec\": \"1764230400.900\", \"request_time\": \"-\"}\n",
            json,
            "n.jsonl:1: request_time: \"-\" is not a non-negative number of seconds",
        ),
        (
            "n.jsonl",
            "{\"msec\": \"1764230400.900\"}\n",
            json,
            "n.jsonl:1: no field \"request_time\" (elapsed_field)",
        ),
        (
            "n.jsonl",
            "{\"msec\": \"0.5\", \"request_time\": 0.6}\n",
            json,
            "n.jsonl:1: request_time: 0.6 s is longer than the time itself",
        ),
        (
            "n.jsonl",
            "{\"msec\": \"1764230400.900\", \"request_time\": 99999999999}\n",
            json,
            "n.jsonl:1: request_time: 99999999999 s is longer than the time itself",
        ),
        (
            "n.csv",
            "time_ms,took\n5,x\n",
            "elapsed_field = \"took\"",
            "n.csv:2: elapsed_field: \"x\" is not a non-negative number of seconds",
        ),
        (
            "n.csv",
            "time_ms\n5\n",
            "elapsed_field = \"took\"",
            "no elapsed column \"took\" in the header",
        ),
        (
            "a.log",
            COMBINED,
            "format = \"combined\"\nelapsed_field = \"request_time\"",
            "elapsed_field: combined logs write no duration",
        ),
    ] {
        let err = replay(name, contents, extra).unwrap_err();
        assert!(err.contains(expected), "{expected:?} not in {err}");
    }
}

/// A key field logged `-` (nginx's `$http_x_forwarded_for` of a request
/// without the header) names an absent key, an empty one a blank key: the
/// check counts those rows, says what the kinds do with them, and hands the
/// runs their clients — by their numbers when the keys are numbered. In CSV
/// only an empty cell names nothing; a log keyed by address has none.
#[test]
fn rows_whose_key_names_nothing_are_counted_and_their_clients_found() {
    let main = "10.0.0.1 - - [27/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a\" \"198.51.100.1\"\n\
        10.0.0.1 - - [27/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"a\" \"-\"\n\
        10.0.0.1 - - [27/Nov/2026:09:00:01 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"b\" \"\"\n\
        10.0.0.1 - - [27/Nov/2026:09:00:01 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"b\" \"-\"\n";
    let keyed = "format = \"combined\"\nkey_field = \"http_x_forwarded_for\"\nspread = \"none\"";
    for interned in [false, true] {
        let (dir, mut config) = file("a.log", main, keyed);
        config.interned = interned;
        let warnings = config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
        let said = warnings.iter().find(|w| w.contains("rows have no http_x_forwarded_for (`-`, or empty)"));
        assert!(
            said.is_some_and(|w| ["3 of 4 rows", "nginx-limit-req", "haproxy-rate", "envoy-ratelimit", "spring-cloud-gateway", "Kong"]
                .iter()
                .all(|says| w.contains(says))),
            "{warnings:?}"
        );
        let expected = if interned {
            EmptyKeys { absent: vec![1], blank: vec![2] }
        } else {
            EmptyKeys { absent: vec![Key::named(b"-").client], blank: vec![Key::named(b"").client] }
        };
        assert_eq!(*config.empty_keys(), expected, "numbered: {interned}");
    }
    let (dir, config) = file("a.log", main, &keyed.replace("http_x_forwarded_for", "remote_addr"));
    let warnings = config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert!(config.empty_keys().is_empty() && !warnings.iter().any(|w| w.contains("rows have no")), "{warnings:?}");
    let csv = "time_ns,user\n1,-\n2,\n3,ann\n";
    let (dir, config) = file("t.csv", csv, "key_field = \"user\"");
    let warnings = config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(*config.empty_keys(), EmptyKeys { absent: vec![], blank: vec![Key::named(b"").client] });
    let said = warnings.iter().find(|w| w.contains("1 of 3 rows have no user (empty)"));
    assert!(said.is_some_and(|w| !w.contains("haproxy")), "{warnings:?}");
}

/// A CSV file cut in its last record (copied while written, or truncated)
/// is refused at that record, which it says ends the file unbroken; a bad
/// record elsewhere, or a last one with its line break, is just bad.
#[test]
fn a_csv_cut_in_its_last_record_says_so() {
    let unbroken = "it is the file's last line and has no line break";
    for (contents, says, cut) in [
        ("time_ns,user\n1000,a\n2000,b\n30", "t.csv:4: the row has no key column 2", true),
        ("time_ns,user\n1000,a\n30\n", "t.csv:3: the row has no key column 2", false),
        ("time_ns,user\n1000,a\n30\n4000,c", "t.csv:3: the row has no key column 2", false),
        ("time_ns,user\r\n1000,a\r\n30\r\n", "t.csv:3: the row has no key column 2", false),
    ] {
        let err = replay("t.csv", contents, "key_field = \"user\"").unwrap_err();
        assert!(err.contains(says), "{contents:?}: {err}");
        assert_eq!(err.contains(unbroken), cut, "{contents:?}: {err}");
    }
    let gzipped = gzip(b"time_ns,user\n1000,a\n20");
    let err = replay_bytes("t.csv.gz", &gzipped, "key_field = \"user\"").unwrap_err();
    assert!(err.contains(unbroken), "{err}");
}

#[test]
fn whole_seconds_of_a_log_are_spread_within_their_second_and_said_so() {
    let (rows, warnings) = replay("a.log", COMBINED, "format = \"combined\"").unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("whole seconds")),
        "{warnings:?}"
    );
    let times: Vec<u64> = rows.iter().map(|r| r.0).collect();
    assert!(times.is_sorted(), "{times:?}");
    assert!(times[..2].iter().all(|&t| t < NANOS_PER_SEC), "{times:?}");
    assert!(
        (2 * NANOS_PER_SEC..3 * NANOS_PER_SEC).contains(&times[2]),
        "{times:?}"
    );
    // Drawn, not left on the second (a draw of exactly 0 has chance 10^-9).
    assert!(times.iter().all(|t| t % NANOS_PER_SEC != 0), "{times:?}");
    // Seeded: the same seed, the same instants.
    assert_eq!(
        replay("a.log", COMBINED, "format = \"combined\"")
            .unwrap()
            .0,
        rows
    );
}

/// Spreading hands a second's rows out as drawing an instant for each in
/// the file's order and sorting the rows stably by time would, over
/// seconds of 0 to 3,000 rows (the key tells equal rows apart).
#[test]
fn spread_rows_come_out_as_a_stable_sort_of_their_draws() {
    let mut rows = Vec::new();
    for (second, count) in [1u64, 0, 2, 3000, 7, 0, 555, 64].into_iter().enumerate() {
        for place in 0..count {
            rows.push(Arrival {
                time: Nanos(second as u64 * NANOS_PER_SEC),
                key: Key::client(place),
            });
        }
    }
    let mut spread = Arrivals::from_sorted(rows.clone());
    spread.spread = Some(Spreader::new(rng()));
    let spread: Vec<(u64, u64)> = spread.map(|a| (a.time.get(), a.key.client)).collect();
    let mut draws = rng();
    let mut expected = Vec::new();
    for second in rows.chunk_by(|a, b| a.time == b.time) {
        let mut drawn: Vec<(u64, u64)> = second
            .iter()
            .map(|a| (a.time.get() + draws.random_range(0..NANOS_PER_SEC), a.key.client))
            .collect();
        drawn.sort_by_key(|&(time, _)| time);
        expected.extend(drawn);
    }
    assert_eq!(spread.len(), rows.len());
    assert_eq!(spread, expected);
}

/// Only the seconds some of whose instants may fall in the run are held to
/// be spread: one wholly before its start is read through with its draws
/// made (what follows is spread as if it had been held), and one wholly
/// past its end is not gathered at all. The run's rows are those of
/// spreading everything and keeping `[start, end)`, at any offset.
#[test]
fn only_seconds_that_reach_into_the_run_are_held_to_be_spread() {
    let rows = seconds(&[900, 3, 5, 2, 4000], 0);
    let spread_all = |start: u64, end: u64, offset: i128| {
        let mut arrivals = spreading(&rows, start, end, offset);
        let times: Vec<(u64, u64)> = arrivals.by_ref().map(|a| (a.time.get(), a.key.client)).collect();
        let held = arrivals.spread.as_ref().map_or(0, |spread| spread.rows.capacity());
        (times, held)
    };
    let (everything, _) = spread_all(0, u64::MAX, 0);
    // Seconds 1 to 3 reach into each run; 0 (900 rows) and 4 (4,000) do not.
    for (start, end, offset) in [
        (NANOS_PER_SEC, 4 * NANOS_PER_SEC, 0i128),
        (NANOS_PER_SEC + 1, 3 * NANOS_PER_SEC + 7, 0),
        (5 * NANOS_PER_SEC, 8 * NANOS_PER_SEC, 4 * NANOS_PER_SEC as i128),
    ] {
        let (run, held) = spread_all(start, end, offset);
        let expected: Vec<(u64, u64)> = everything
            .iter()
            .map(|&(time, key)| ((i128::from(time) + offset) as u64, key))
            .filter(|&(time, _)| (start..end).contains(&time))
            .collect();
        assert!(!expected.is_empty());
        assert_eq!(run, expected, "[{start}, {end}) at {offset}");
        assert!(held < 900, "held {held} rows for a second outside [{start}, {end})");
    }
}

/// Spread, a row is left out only when no instant of its second is in the
/// run, and a second straddling an edge is said to be; kept on its second,
/// a row is left out when its stamp is outside. The same in order or not.
#[test]
fn spread_rows_are_left_out_only_when_their_second_cannot_reach_the_run() {
    let s = NANOS_PER_SEC;
    for contents in ["time_s\n0\n0\n0\n1\n1\n2\n", "time_s\n1\n0\n2\n0\n1\n0\n"] {
        let check = |spread: &str, start: u64, end: u64| {
            let (dir, config) = trace(contents, &format!("spread = \"{spread}\""));
            config
                .check(dir.path(), Nanos(start), Nanos(end))
                .unwrap()
                .into_iter()
                .filter(|w| !w.contains("whole seconds") && !w.contains("earlier than"))
                .collect::<Vec<_>>()
        };
        let left_out = |n: u64| format!("{n} rows fall outside");
        let straddles = "straddles an edge of";
        // The edges on the seconds: the same both ways.
        for spread in ["uniform", "none"] {
            let warnings = check(spread, s, 2 * s);
            assert_eq!(warnings.len(), 1, "{contents:?} {spread}: {warnings:?}");
            assert!(warnings[0].contains(&left_out(4)), "{warnings:?}");
        }
        // Half a second in: the three rows at 0 s reach past 0.5 s when
        // spread, and the row at 2 s starts past 1.5 s.
        let warnings = check("uniform", s / 2, 3 * s / 2);
        assert_eq!(warnings.len(), 2, "{contents:?}: {warnings:?}");
        assert!(warnings[0].contains(&left_out(1)), "{warnings:?}");
        assert!(warnings[1].contains(straddles), "{warnings:?}");
        let warnings = check("none", s / 2, 3 * s / 2);
        assert_eq!(warnings.len(), 1, "{contents:?}: {warnings:?}");
        assert!(warnings[0].contains(&left_out(4)), "{warnings:?}");
        // Every stamp before a start within the first second: refused kept on
        // it, replayed in part when spread.
        let (dir, config) = trace(contents, "spread = \"none\"");
        let refused = config.check(dir.path(), Nanos(5 * s / 2), Nanos(3 * s)).unwrap_err();
        assert!(refused.to_string().contains("all 6 rows fall outside"), "{refused}");
        let warnings = check("uniform", 5 * s / 2, 3 * s);
        assert!(warnings.iter().any(|w| w.contains(&left_out(5))), "{warnings:?}");
    }
}

/// A spread trace's chunks, of any size, hold what its iterator yields, in
/// order, whatever part of it the run keeps.
#[test]
fn a_spread_trace_fills_chunks_as_its_iterator_yields() {
    let rows = seconds(&[5, 0, 1, 300, 2, 17], 0);
    let arrivals = |start: u64, end: u64| spreading(&rows, start, end, 0);
    for (start, end) in [(0, u64::MAX), (NANOS_PER_SEC / 2, 3 * NANOS_PER_SEC + 1), (2 * NANOS_PER_SEC, 2 * NANOS_PER_SEC)] {
        let expected: Vec<Arrival> = arrivals(start, end).collect();
        for size in [1, 2, 7, 64, 1000] {
            let mut filled = Vec::new();
            let mut chunk: Vec<Arrival> = Vec::new();
            let mut source = arrivals(start, end);
            loop {
                source.fill_spread(&mut chunk, size);
                assert!(chunk.len() <= size);
                if chunk.is_empty() {
                    break;
                }
                filled.extend_from_slice(&chunk);
            }
            assert_eq!(filled, expected, "[{start}, {end}) in chunks of {size}");
        }
    }
}

proptest::proptest! {
    /// Over any seconds of up to 40 rows, any run window and shift, and
    /// chunks of any size: the chunks hold exactly what spreading every
    /// second in the file's order and keeping `[start, end)` gives, and no
    /// second that cannot reach the run is held.
    #[test]
    fn spread_chunks_are_the_spread_rows_of_the_run(
        counts in proptest::collection::vec(0u64..40, 1..8),
        start in 0u64..10_000_000_000,
        length in 0u64..10_000_000_000,
        shift in -3_000_000_000i128..3_000_000_000,
        size in 1usize..100,
    ) {
        let end = start + length;
        let rows = seconds(&counts, 3);
        let expected: Vec<Arrival> = spreading(&rows, 0, u64::MAX, 0)
            .map(|a| Arrival { time: Nanos(shifted(a.time.get(), shift)), ..a })
            .filter(|a| (start..end).contains(&a.time.get()))
            .collect();
        let mut source = spreading(&rows, start, end, shift);
        let (mut filled, mut chunk) = (Vec::new(), Vec::<Arrival>::new());
        loop {
            source.fill_spread(&mut chunk, size);
            proptest::prop_assert!(chunk.len() <= size);
            if chunk.is_empty() {
                break;
            }
            filled.extend_from_slice(&chunk);
        }
        proptest::prop_assert_eq!(&filled, &expected);
        // Held: at most the rows of one second reaching into the run (a
        // vector's doubling aside), or the one row that ends the stream.
        let reaching = counts
            .iter()
            .enumerate()
            .filter(|&(second, _)| {
                let stamp = shifted((second as u64 + 3) * NANOS_PER_SEC, shift);
                stamp < end && stamp + NANOS_PER_SEC > start
            })
            .map(|(_, &count)| count as usize)
            .max()
            .unwrap_or(0);
        let held = source.spread.as_ref().map_or(0, |spread| spread.rows.capacity());
        proptest::prop_assert!(held <= (2 * reaching).max(4), "held {} for {}", held, reaching);
    }
}

/// The last whole second of u64 nanoseconds is spread within what is left
/// of it, in order: an instant past the end of time would wrap to its start.
#[test]
fn the_last_second_of_time_is_spread_within_what_is_left_of_it() {
    let last = u64::MAX - u64::MAX % NANOS_PER_SEC;
    let rows: Vec<Arrival> = [last - NANOS_PER_SEC, last]
        .into_iter()
        .flat_map(|time| {
            (0..200).map(move |place| Arrival {
                time: Nanos(time),
                key: Key::client(place),
            })
        })
        .collect();
    let mut spread = Arrivals::from_sorted(rows);
    spread.spread = Some(Spreader::new(rng()));
    let times: Vec<u64> = spread.map(|a| a.time.get()).collect();
    assert_eq!(times.len(), 400);
    assert!(times.is_sorted(), "in order");
    assert!(times[..200].iter().all(|&t| t / NANOS_PER_SEC == last / NANOS_PER_SEC - 1));
    assert!(times[200..].iter().all(|&t| t >= last), "within the last second");
    // Spread over what is left of it, not piled at its end.
    assert!(times[200..].iter().any(|&t| t < last + 300_000_000));
}

#[test]
fn json_lines_and_date_times_in_csv_read_as_the_combined_log_does() {
    let json = r#"{"time": "2026-11-27T09:00:00+01:00", "ip": "198.51.100.1"}
{"time": "2026-11-27T08:00:00Z", "ip": "198.51.100.2"}
{"time": "2026-11-27T09:00:02.000+01:00", "ip": "203.0.113.7"}
"#;
    let csv = "when,ip\n2026-11-27T09:00:00+01:00,198.51.100.1\n2026-11-27 08:00:00Z,198.51.100.2\n2026-11-27T08:00:02Z,203.0.113.7\n";
    let combined = replay(
        "a.log",
        COMBINED,
        "format = \"combined\"\nkey_field = \"remote_addr\"",
    )
    .unwrap()
    .0;
    let from_json = replay("a.jsonl", json, "format = \"jsonl\"\nkey_field = \"ip\"")
        .unwrap()
        .0;
    let from_csv = replay(
        "a.csv",
        csv,
        "time_field = \"when\"\nunit = \"rfc3339\"\nkey_field = \"ip\"",
    )
    .unwrap()
    .0;
    assert_eq!(from_json, combined);
    assert_eq!(from_csv, combined);
}

#[test]
fn a_row_longer_than_the_cap_is_refused_as_it_is_read() {
    let long = "x".repeat(MAX_ROW_BYTES as usize + 200_000);
    let cases = [
        (
            "a.jsonl",
            format!("{{\"time\": 1.5}}\n[{long}"),
            "format = \"jsonl\"",
        ),
        ("a.log", format!("{long}\n"), "format = \"combined\""),
        (
            "a.csv",
            format!("time_ns,k\n1,a\n2,{}\n", ",".repeat(2 << 20)),
            "",
        ),
        (
            "a.csv",
            format!("time_ns,k\n1,a\n2,\"{}\"\n", "ab\n".repeat(1 << 20)),
            "",
        ),
    ];
    for (name, contents, extra) in cases {
        let err = replay(name, &contents, extra).unwrap_err();
        assert!(
            err.contains("a row longer than 1048576 bytes"),
            "{name}: {err}"
        );
        assert!(err.contains(&format!("{name}:")), "{name}: {err}");
    }
    // Just under the cap is a row like any other.
    let wide = format!(
        "time_ns,k\n1,{}\n",
        "k".repeat(MAX_ROW_BYTES as usize - 100)
    );
    assert_eq!(replay("a.csv", &wide, "key = \"k\"").unwrap().0.len(), 1);
}

#[test]
fn epoch_seconds_in_json_are_as_exact_as_in_csv() {
    let json = "{\"ts\": 1764460800.999999999}\n{\"ts\": 1764460801.000000001}\n";
    let (rows, _) = replay("a.jsonl", json, "format = \"jsonl\"\ntime_field = \"ts\"").unwrap();
    let csv = "time_s\n1764460800.999999999\n1764460801.000000001\n";
    let (from_csv, _) = replay("a.csv", csv, "").unwrap();
    assert_eq!(from_csv[1].0 - from_csv[0].0, 2, "{from_csv:?}");
    // Through a float the first would be 1764460801.0, the same instant
    // as the second, on the other side of a whole second.
    assert_eq!(rows[1].0 - rows[0].0, 2, "{rows:?}");
}

#[test]
fn epoch_numbers_in_json_and_milliseconds_in_csv() {
    let json = "{\"ts\": 1764230400.5}\n{\"ts\": 1764230401}\n";
    let (rows, _) = replay("a.jsonl", json, "format = \"jsonl\"\ntime_field = \"ts\"").unwrap();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 500_000_000]
    );
    let json = "{\"ts\": 1764230400500}\n{\"ts\": 1764230401000}\n";
    let (rows, _) = replay(
        "a.jsonl",
        json,
        "format = \"jsonl\"\ntime_field = \"ts\"\nunit = \"ms\"",
    )
    .unwrap();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 500_000_000]
    );
    let (rows, _) = replay("a.csv", "time_ms\n1.5\n3\n", "").unwrap();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [1_500_000, 3_000_000]
    );
}

#[test]
fn bad_log_lines_name_their_line_and_what_is_expected() {
    for (name, contents, extra, expected) in [
        (
            "a.log",
            "198.51.100.1 - - [27/Nov/2026:09:00:00 +0100] \"GET / HTTP/1.1\" 200 5\nnonsense\n",
            "format = \"combined\"",
            "a.log:2: \"nonsense\" is not a combined log line",
        ),
        (
            "a.log",
            "1.2.3.4 - - [27/Nov/2026:25:00:00 +0100] \"GET / HTTP/1.1\" 200 5\n",
            "format = \"combined\"",
            "a.log:1:13: time_local: [27/Nov/2026:25:00:00 +0100] is not a time",
        ),
        (
            "a.log",
            COMBINED,
            "format = \"combined\"\nkey_field = \"client\"",
            "a combined log has no field \"client\"",
        ),
        (
            "a.log",
            COMBINED,
            "format = \"combined\"\nunit = \"s\"",
            "a combined log's time is its",
        ),
        (
            "a.jsonl",
            "{\"time\": \"2026-11-27T09:00:00Z\"}\n[1]\n",
            "format = \"jsonl\"",
            "a.jsonl:2: not a JSON object",
        ),
        (
            "a.jsonl",
            "{\"t\": 1}\n",
            "format = \"jsonl\"",
            "a.jsonl:1: no field \"time\"; set time_field",
        ),
        // The column counts characters, not bytes; CSV names its column.
        (
            "a.jsonl",
            "{\"user\": \"zoë\", \"at\": [1]}\n",
            "format = \"jsonl\"\ntime_field = \"at\"",
            "a.jsonl:1:23: at: [1] is not a time",
        ),
        (
            "a.csv",
            "client,time_s\nalice,noon\n",
            "",
            "a.csv:2: time_s (column 2): \"noon\" is not a non-negative number of seconds",
        ),
        (
            "a.log",
            "[2026-11-27T25:00:00.000Z] \"GET / HTTP/1.1\" 200 - 0 0 1 - \"-\" \"-\" \"-\" \"-\" \"-\"\n",
            "format = \"envoy\"",
            "a.log:1:2: start_time: \"2026-11-27T25:00:00.000Z\" is not an ISO 8601 time",
        ),
        (
            "a.jsonl",
            "{\"time\": \"noon\"}\n",
            "format = \"jsonl\"",
            "a.jsonl:1:10: time: \"noon\" is not an RFC 3339 date-time",
        ),
        // Written as times, but past the last nanosecond 64 bits hold (or
        // before the epoch): said so, not called malformed.
        (
            "a.jsonl",
            "{\"time\": \"1969-12-31T23:59:59Z\"}\n",
            "format = \"jsonl\"",
            "a.jsonl:1:10: time: \"1969-12-31T23:59:59Z\" is outside the times burstsim holds: nanoseconds since 1970-01-01T00:00:00Z in 64 bits, up to 2554-07-21T23:34:33.709551615Z",
        ),
        (
            "a.jsonl",
            "{\"time\": \"2554-07-21T23:34:34Z\"}\n",
            "format = \"jsonl\"",
            "a.jsonl:1:10: time: \"2554-07-21T23:34:34Z\" is outside the times burstsim holds",
        ),
        (
            "a.csv",
            "time_ns\n18446744073709551616\n",
            "",
            "a.csv:2: time_ns (column 1): \"18446744073709551616\" is outside the times burstsim holds",
        ),
        (
            "a.csv",
            "time_ms\n1764230400900000000\n",
            "",
            "a.csv:2: time_ms (column 1): \"1764230400900000000\" is outside the times burstsim holds: nanoseconds since 1970-01-01T00:00:00Z in 64 bits, up to 2554-07-21T23:34:33.709551615Z; is it in a smaller unit than milliseconds?",
        ),
        (
            "a.jsonl",
            "{\"msec\": \"1764230400.137\"}\n",
            "format = \"jsonl\"\ntime_field = \"msec\"",
            "date-time with an offset, like 2026-11-30T12:00:00.250Z; it is a number: set unit = \"s\"",
        ),
        (
            "a.jsonl",
            "{\"time\": \"2026-11-27 09:00:00.123\"}\n",
            "format = \"jsonl\"",
            "2026-11-30T12:00:00.250Z; it has no offset from UTC, and burstsim does not guess",
        ),
        (
            "a.jsonl",
            "{\"time\": 1, \"k\": 2}\n",
            "format = \"jsonl\"\nkey_fallback = \"ip\"",
            "key_fallback: it keys the rows whose key_field is absent; set key_field",
        ),
        (
            "a.csv",
            "time_ns,user,ip\n1,,10.0.0.1\n",
            "key_field = \"user\"\nkey_fallback = \"ip\"",
            "key_fallback: a CSV cell is never absent",
        ),
        (
            "a.log",
            COMBINED,
            "format = \"combined\"\nkey_field = \"remote_user\"\nkey_fallback = \"ip\"",
            "key_fallback: a combined log has no field \"ip\"; it has remote_addr",
        ),
        (
            "a.log",
            "https 2026-11-27T08:00:00.000000Z app/x/1 10.0.0.1:1 - 0 0 0 200 - 0 0 \"GET http://x:80/ HTTP/1.1\" \"-\"\n",
            "format = \"alb\"\nkey_field = \"client\"\nkey_fallback = \"ip\"",
            "key_fallback: alb logs have no field \"ip\"",
        ),
        (
            "a.csv",
            "time_s\n1.5\n",
            "spread = \"uniform\"",
            "spread: \"uniform\" spreads whole-second timestamps",
        ),
        (
            "a.log",
            "",
            "format = \"combined\"",
            "the trace has no rows",
        ),
    ] {
        let err = replay(name, contents, extra).unwrap_err();
        assert!(err.contains(expected), "{expected:?} not in {err}");
    }
}

#[test]
fn reads_nanoseconds_and_decimal_seconds() {
    assert_eq!(times("time_ns\n5\n7\n", "").unwrap(), [5, 7]);
    assert_eq!(
        times("host,time_s\na,1.5\nb,2.000000001\n", "").unwrap(),
        [1_500_000_000, 2_000_000_001]
    );
}

#[test]
fn sorts_an_unsorted_trace_and_says_so() {
    let (dir, config) = trace("time_ns\n9\n3\n5\n", "");
    let warnings = config.check(dir.path(), Nanos(0), Nanos(100)).unwrap();
    assert!(warnings[0].contains("1 of 3 rows"), "{warnings:?}");
    assert_eq!(times("time_ns\n9\n3\n5\n", "").unwrap(), [3, 5, 9]);
}

#[test]
fn names_the_line_of_a_bad_row() {
    let (dir, config) = trace("time_ns\n1\n2\nsoon\n", "");
    let err = config
        .check(dir.path(), Nanos(0), Nanos(100))
        .unwrap_err();
    assert!(
        err.to_string().contains("t.csv:4:") && err.to_string().contains("soon"),
        "{err}"
    );
}

#[test]
fn handles_a_byte_order_mark_crlf_and_extra_columns() {
    assert_eq!(
        times("\u{feff}time_ns,extra\r\n1,x\r\n2,y,z\r\n", "").unwrap(),
        [1, 2]
    );
}

#[test]
fn rebases_absolute_timestamps_to_the_start() {
    assert_eq!(
        times("time_s\n1700000000.25\n1700000001\n", "rebase = true").unwrap(),
        [0, 750_000_000]
    );
}

/// Times and keys, both as replayed.
fn keyed(contents: &str, extra: &str) -> Result<Vec<(u64, Key)>, String> {
    let (dir, config) = trace(contents, extra);
    config
        .check(dir.path(), Nanos(0), Nanos(u64::MAX))
        .map_err(|e| e.to_string())?;
    let arrivals = config
        .replay(dir.path(), Nanos(0), Nanos(u64::MAX), rng())
        .map_err(|e| e.to_string())?;
    Ok(arrivals.map(|a| (a.time.get(), a.key)).collect())
}

#[test]
fn a_key_column_names_each_requests_client() {
    let (alice, bob) = (Key::named(b"alice"), Key::named(b"bob"));
    assert_ne!(alice, bob);
    assert_eq!(
        keyed(
            "time_ns,client\n5,alice\n7, bob \n9,alice\n",
            "key = \"client\""
        )
        .unwrap(),
        [(5, alice), (7, bob), (9, alice)]
    );
    assert_eq!(
        keyed("time_ns,client\n5,alice\n", "").unwrap(),
        [(5, Key::DEFAULT)],
        "without `key`, every request is the default key's"
    );
}

#[test]
fn an_unsorted_keyed_trace_keeps_file_order_at_equal_times() {
    let rows = keyed("time_ns,k\n9,c\n5,a\n5,b\n1,d\n", "key = \"k\"").unwrap();
    let keys: Vec<Key> = [b"d", b"a", b"b", b"c"]
        .iter()
        .map(|k| Key::named(*k))
        .collect();
    assert_eq!(rows.iter().map(|r| r.1).collect::<Vec<_>>(), keys);
}

#[test]
fn a_missing_key_column_or_field_is_an_error_with_its_line() {
    let err = keyed("time_ns\n5\n", "key = \"client\"").unwrap_err();
    assert!(err.contains(":1: no key column \"client\""), "{err}");
    let err = keyed("time_ns,client\n5,a\n6\n", "key = \"client\"").unwrap_err();
    assert!(err.contains(":3: the row has no key column 2"), "{err}");
}

#[test]
fn parses_seconds_exactly() {
    assert_eq!(parse_seconds("0.1"), Some(100_000_000));
    assert_eq!(parse_seconds(".5"), Some(500_000_000));
    assert_eq!(parse_seconds("3"), Some(3_000_000_000));
    assert_eq!(parse_seconds("1.0000000019"), Some(1_000_000_001));
    assert_eq!(parse_seconds("-1"), None);
    assert_eq!(parse_seconds("1e3"), None);
}

/// Checks a trace, changes it as `change` does, and replays it.
/// Checks a trace, changes its file, and replays it as a trace too long
/// to keep its checked rows does: from the file again.
fn replay_after(change: impl Fn(&Path)) -> Result<Vec<u64>, String> {
    let (dir, mut config) = trace("time_ns\n100\n200\n300\n", "");
    config.reread = true;
    config
        .check(dir.path(), Nanos(0), Nanos(1000))
        .map_err(|e| e.to_string())?;
    change(&dir.path().join("t.csv"));
    let mut arrivals = config
        .replay(dir.path(), Nanos(0), Nanos(250), rng())
        .map_err(|e| e.to_string())?;
    let times: Vec<u64> = arrivals.by_ref().map(|a| a.time.get()).collect();
    arrivals.take_error().map_or(Ok(times), Err)
}

#[test]
fn replays_an_unchanged_trace_cut_at_the_run_end() {
    assert_eq!(replay_after(|_| {}).unwrap(), [100, 200]);
}

#[test]
fn a_trace_changed_after_its_check_replays_the_rows_that_were_checked() {
    let (dir, config) = trace("time_ns\n100\n200\n300\n", "");
    config.check(dir.path(), Nanos(0), Nanos(1000)).unwrap();
    std::fs::write(dir.path().join("t.csv"), "time_ns\n150\n").unwrap();
    for _ in 0..2 {
        let mut arrivals = config
            .replay(dir.path(), Nanos(0), Nanos(250), rng())
            .unwrap();
        let times: Vec<u64> = arrivals.by_ref().map(|a| a.time.get()).collect();
        assert_eq!(times, [100, 200]);
        assert_eq!(arrivals.take_error(), None);
    }
}

/// A trace read again by each replay is hashed at the end of its check, as
/// stored: compressed or not, an unchanged file replays whole, and one whose
/// stored bytes changed (same size, same time) is refused.
#[test]
fn a_trace_read_again_is_hashed_as_stored_after_its_check() {
    let text: String = (1..=30_000).map(|i| format!("{i}\n")).collect();
    let csv = format!("time_ns\n{text}");
    for (kind, bytes) in [
        ("plain", csv.as_bytes().to_vec()),
        ("gzip", gzip(csv.as_bytes())),
        ("zstd", zstd(csv.as_bytes())),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, &bytes).unwrap();
        let mut config: Config = toml::from_str("path = \"t.csv\"").unwrap();
        config.reread = true;
        config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
        let replayed = |config: &Config| {
            let mut arrivals = config.replay(dir.path(), Nanos(0), Nanos(u64::MAX), rng()).unwrap();
            let rows = arrivals.by_ref().count();
            (rows, arrivals.take_error())
        };
        assert_eq!(replayed(&config), (30_000, None), "{kind}");
        // The last stored byte changed, size and time kept.
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let mut changed = bytes.clone();
        *changed.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &changed).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
        let (_, err) = replayed(&config);
        let err = err.unwrap_or_else(|| panic!("{kind}: a changed file replayed"));
        assert!(err.contains("changed after burstsim checked it") || err.contains("t.csv"), "{kind}: {err}");
    }
}

#[test]
fn refuses_a_trace_that_changed_after_it_was_checked() {
    let same_size_and_time = |path: &Path| {
        let modified = std::fs::metadata(path).unwrap().modified().unwrap();
        std::fs::write(path, "time_ns\n100\n201\n300\n").unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(modified).unwrap();
    };
    let appended = |path: &Path| {
        let mut file = std::fs::File::options().append(true).open(path).unwrap();
        std::io::Write::write_all(&mut file, b"1\n").unwrap();
    };
    let replaced = |path: &Path| {
        std::fs::remove_file(path).unwrap();
        std::fs::write(path, "time_ns\n100\n250\n300\n").unwrap();
    };
    let truncated = |path: &Path| std::fs::write(path, "time_ns\n").unwrap();
    for (name, change, says) in [
        (
            "same size and time",
            &same_size_and_time as &dyn Fn(&Path),
            "changed after burstsim checked it",
        ),
        ("appended", &appended, "grew since burstsim opened it (a log still being written)"),
        ("replaced", &replaced, "changed after burstsim checked it"),
        ("truncated", &truncated, "changed after burstsim checked it"),
    ] {
        let err = replay_after(change).unwrap_err();
        assert!(err.contains(says), "{name}: {err}");
    }
}

#[test]
fn refuses_a_fifo_or_device_swapped_in_after_the_check_without_hanging() {
    let fifo = |path: &Path| {
        std::fs::remove_file(path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    };
    let zero = |path: &Path| {
        std::fs::remove_file(path).unwrap();
        std::os::unix::fs::symlink("/dev/zero", path).unwrap();
    };
    for change in [&fifo as &dyn Fn(&Path), &zero] {
        let err = replay_after(change).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }
}

#[test]
fn only_the_first_named_keys_keep_their_text() {
    use crate::traffic::kind::Kind as _;
    let mut csv = String::from("time_ns,client\n");
    for i in 0..=NAMED_KEYS {
        csv.push_str(&format!("{i},client-{i}\n"));
    }
    let (dir, config) = trace(&csv, "key = \"client\"");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    let name = |i: usize| config.key_name(Key::named(format!("client-{i}").as_bytes()));
    assert_eq!(name(0).as_deref(), Some("client-0"));
    assert_eq!(name(NAMED_KEYS - 1), Some(format!("client-{}", NAMED_KEYS - 1)));
    assert_eq!(name(NAMED_KEYS), None, "the text kept is bounded");
    let kept = config.scanned.get().unwrap().names.len();
    assert_eq!(kept, NAMED_KEYS);
}

/// Times and keys replayed from a file of `bytes`, and the check's warnings.
fn replay_bytes(name: &str, bytes: &[u8], extra: &str) -> Result<(Replayed, Vec<String>), String> {
    replay_files(&[(name, bytes.to_vec())], &format!("path = \"{name}\"\n{extra}"))
}

fn gzip(text: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(text).unwrap();
    encoder.finish().unwrap()
}

fn zstd(text: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(text, ruzstd::encoding::CompressionLevel::Fastest)
}

/// A combined log of `lines` requests from a few addresses over a few seconds.
fn combined_log(lines: u32) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "198.51.100.{} - - [27/Nov/2026:09:00:{:02} +0000] \"{} /{}/{i} HTTP/1.1\" {} 5 \"-\" \"a\"\n",
                i % 7,
                i * 60 / lines,
                if i % 3 == 0 { "POST" } else { "GET" },
                if i % 2 == 0 { "api" } else { "static" },
                if i % 5 == 0 { 429 } else { 200 },
            )
        })
        .collect()
}

#[test]
fn a_gzip_or_zstd_log_replays_as_the_plain_one_whatever_its_name() {
    let plain = combined_log(3_000);
    let (half, rest) = plain.split_at(plain.len() / 2 + 7);
    // The halves as two gzip members and as two zstd frames, as `cat a.gz
    // b.gz` and `zstd -c a b` make them; the names say nothing.
    let gzipped = [gzip(half.as_bytes()), gzip(rest.as_bytes())].concat();
    let zstded = [zstd(half.as_bytes()), zstd(rest.as_bytes())].concat();
    let extra = "format = \"combined\"\nkey_field = \"remote_addr\"\nspread = \"none\"";
    let (expected, _) = replay_bytes("access.log", plain.as_bytes(), extra).unwrap();
    assert_eq!(expected.len(), 3_000);
    for (name, bytes) in [("access.log.1", &gzipped), ("access.log.2.gz", &gzipped), ("x.txt", &zstded)] {
        let (rows, warnings) = replay_bytes(name, bytes, extra).unwrap();
        assert_eq!(rows, expected, "{name}");
        assert!(warnings.is_empty(), "{name}: {warnings:?}");
    }
    // A broken stream is an error naming the file and line, not a short replay.
    let mut cut = gzipped.clone();
    cut.truncate(gzipped.len() / 3);
    let err = replay_bytes("cut.gz", &cut, extra).unwrap_err();
    assert!(err.contains("cut.gz:"), "{err}");
}

#[test]
fn a_compressed_row_is_capped_by_its_text_not_its_bytes() {
    // 4 MiB of one line compress to a few kilobytes: the cap still holds.
    let line = format!("time_ns\n{}\n", "1".repeat(4 << 20));
    for bytes in [gzip(line.as_bytes()), zstd(line.as_bytes())] {
        assert!(bytes.len() < 64 << 10);
        let err = replay_bytes("t.csv", &bytes, "").unwrap_err();
        assert!(err.contains("longer than 1048576 bytes"), "{err}");
    }
}

#[test]
fn where_keeps_the_rows_of_one_path_method_and_status() {
    let log = combined_log(600);
    let extra = "format = \"combined\"\nspread = \"none\"\n";
    let kept = |conditions: &str| {
        replay_bytes("a.log", log.as_bytes(), &format!("{extra}where = {{ {conditions} }}"))
    };
    let count = |f: &dyn Fn(u32) -> bool| (0..600).filter(|&i| f(i)).count();
    let (rows, warnings) = kept("path_prefix = \"/api/\"").unwrap();
    assert_eq!(rows.len(), count(&|i| i % 2 == 0));
    assert!(warnings[0].contains("300 of 600 rows do not match `where`"), "{warnings:?}");
    let (rows, _) = kept("path_prefix = \"/api/\", method = \"post\", status = \"2xx\"").unwrap();
    assert_eq!(rows.len(), count(&|i| i % 2 == 0 && i % 3 == 0 && i % 5 != 0));
    let (rows, _) = kept("status = [429, \"3xx\"]").unwrap();
    assert_eq!(rows.len(), count(&|i| i % 5 == 0));
    let err = kept("method = \"DELETE\"").unwrap_err();
    assert!(err.contains("none of the 600 rows"), "{err}");
    let err = kept("host = \"shop.example\"").unwrap_err();
    assert!(err.contains("names no Host"), "{err}");
    // JSON lines and CSV read the fields by name (or as named in `where`).
    let json = "{\"time\": 1.5, \"uri\": \"/api/a\", \"method\": \"GET\", \"host\": \"Shop.example\"}\n\
                {\"time\": 2.5, \"uri\": \"/static/a\", \"method\": \"GET\", \"host\": \"shop.example\"}\n\
                {\"time\": 3.5, \"uri\": \"/api/b\", \"method\": \"GET\", \"host\": \"blog.example\"}\n";
    let (rows, _) = replay_bytes(
        "a.jsonl",
        json.as_bytes(),
        "format = \"jsonl\"\nhost_field = \"host\"\nwhere = { path_prefix = \"/api/\", path_field = \"uri\", host = \"shop.example\" }",
    )
    .unwrap();
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [0]);
    let csv = "time_ns,path,status\n1,/api/a,200\n2,/api/b,503\n3,/x,200\n";
    let (rows, _) = replay_bytes("t.csv", csv.as_bytes(), "where = { path_prefix = \"/api\", status = 200 }").unwrap();
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [1]);
    let err = replay_bytes("t.csv", csv.as_bytes(), "where = { method = \"GET\" }").unwrap_err();
    assert!(err.contains("no method column \"method\""), "{err}");
}

#[test]
fn labelled_seconds_are_counted_as_brute_force_counts_them() {
    use rand::RngExt as _;
    let mut rng = rng();
    for _ in 0..200 {
        let mut labels: Vec<u64> = (0..rng.random_range(1..60))
            .map(|_| rng.random_range(0..12))
            .collect();
        labels.sort_unstable();
        let mut labelled = Labelled::default();
        labels.iter().for_each(|&l| labelled.count(l));
        let count = |l: u64| labels.iter().filter(|&&x| x == l).count() as u64;
        let busiest = (0..13).map(count).max().unwrap();
        let pair = (0..13).map(|l| count(l) + count(l + 1)).max().unwrap();
        assert_eq!((labelled.busiest, labelled.busiest_pair), (busiest, pair), "{labels:?}");
    }
}

#[test]
fn a_sorted_whole_second_log_knows_its_busiest_second_and_pair() {
    // 09:00:00 ×2, 09:00:02 ×1 (a gap), then 3 and 1 in adjacent seconds.
    let log = "1.1.1.1 - - [27/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5\n\
               1.1.1.1 - - [27/Nov/2026:09:00:00 +0000] \"GET / HTTP/1.1\" 200 5\n\
               1.1.1.1 - - [27/Nov/2026:09:00:02 +0000] \"GET / HTTP/1.1\" 200 5\n\
               1.1.1.1 - - [27/Nov/2026:09:00:04 +0000] \"GET / HTTP/1.1\" 200 5\n\
               1.1.1.1 - - [27/Nov/2026:09:00:04 +0000] \"GET / HTTP/1.1\" 200 5\n\
               1.1.1.1 - - [27/Nov/2026:09:00:04 +0000] \"GET / HTTP/1.1\" 200 5\n\
               1.1.1.1 - - [27/Nov/2026:09:00:05 +0000] \"GET / HTTP/1.1\" 200 5\n";
    let (dir, config) = file("a.log", log, "format = \"combined\"");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    let labelled = config.labelled_seconds().unwrap();
    assert_eq!((labelled.busiest, labelled.busiest_pair), (3, 4));
    // Rows outside the run are not counted: from 4.5 s the 4th second's are out.
    let (dir, config) = file("a.log", log, "format = \"combined\"");
    config.check(dir.path(), Nanos(0), Nanos(4_500_000_000)).unwrap();
    let labelled = config.labelled_seconds().unwrap();
    assert_eq!((labelled.busiest, labelled.busiest_pair), (3, 3));
    // Finer timestamps have no labelled seconds.
    let (dir, config) = file("t.csv", "time_ns\n1\n2\n", "");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.labelled_seconds(), None);
}

/// Times and keys replayed from the files `files` (name, bytes) of one folder
/// by the trace `extra` (which names them), and the check's warnings.
fn replay_files(files: &[(&str, Vec<u8>)], extra: &str) -> Result<(Replayed, Vec<String>), String> {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let config: Config = toml::from_str(extra).unwrap();
    let warnings = config
        .check(dir.path(), Nanos(0), Nanos(u64::MAX))
        .map_err(|e| e.to_string())?;
    let mut arrivals = config
        .replay(dir.path(), Nanos(0), Nanos(u64::MAX), rng())
        .map_err(|e| e.to_string())?;
    let rows: Vec<(u64, Key)> = arrivals.by_ref().map(|a| (a.time.get(), a.key)).collect();
    arrivals.take_error().map_or(Ok((rows, warnings)), Err)
}

#[test]
fn rotated_files_replay_as_the_one_log_they_were() {
    let whole = combined_log(900);
    let lines: Vec<&str> = whole.split_inclusive('\n').collect();
    let (old, rest) = lines.split_at(300);
    let (middle, new) = rest.split_at(300);
    let files = [
        ("access.log.2.gz", gzip(old.concat().as_bytes())),
        ("access.log.1", middle.concat().into_bytes()),
        ("access.log", new.concat().into_bytes()),
    ];
    let log = "format = \"combined\"\nkey_field = \"remote_addr\"\nspread = \"none\"\n";
    let (expected, _) = replay_bytes("all.log", whole.as_bytes(), log).unwrap();
    let (globbed, warnings) = replay_files(&files, &format!("{log}path = \"access.log*\"")).unwrap();
    assert_eq!(globbed, expected);
    assert!(warnings.is_empty(), "{warnings:?}");
    let listed = format!("{log}paths = [\"access.log.2.gz\", \"access.log.1\", \"access.log\"]");
    assert_eq!(replay_files(&files, &listed).unwrap().0, expected);
    // Listed newest first, the files are out of order: sorted, and said so.
    let backwards = format!("{log}paths = [\"access.log\", \"access.log.1\", \"access.log.2.gz\"]");
    let (rows, warnings) = replay_files(&files, &backwards).unwrap();
    assert_eq!(rows.len(), 900);
    assert!(warnings.iter().any(|w| w.contains("earlier than the row before them")), "{warnings:?}");
    // CSV files each with their header.
    let csv = [("a.csv", b"time_ns\n1\n2\n".to_vec()), ("b.csv", b"time_ns\n3\n".to_vec())];
    let (rows, _) = replay_files(&csv, "paths = [\"a.csv\", \"b.csv\"]").unwrap();
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2, 3]);
    // A bad line names its own file and line.
    let bad = [("a.log", b"".to_vec()), ("b.log", b"\nnot a log line\n".to_vec())];
    let err = replay_files(&bad, "format = \"combined\"\npaths = [\"a.log\", \"b.log\"]").unwrap_err();
    assert!(err.contains("b.log:2: "), "{err}");
    // Neither or both of path and paths; a pattern matching nothing.
    assert!(replay_files(&csv, "format = \"csv\"").unwrap_err().contains("path: missing"));
    let both = "path = \"a.csv\"\npaths = [\"b.csv\"]";
    assert!(replay_files(&csv, both).unwrap_err().contains("not both"));
    let none = replay_files(&csv, "path = \"x*.csv\"").unwrap_err();
    assert!(none.contains("no file matches"), "{none}");
}

#[test]
fn a_later_file_that_changed_after_the_check_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.csv"), "time_ns\n1\n2\n").unwrap();
    std::fs::write(dir.path().join("b.csv"), "time_ns\n3\n4\n").unwrap();
    let mut config: Config = toml::from_str("paths = [\"a.csv\", \"b.csv\"]").unwrap();
    config.reread = true;
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    std::fs::write(dir.path().join("b.csv"), "time_ns\n3\n5\n").unwrap();
    let mut arrivals = config
        .replay(dir.path(), Nanos(0), Nanos(u64::MAX), rng())
        .unwrap();
    let times: Vec<u64> = arrivals.by_ref().map(|a| a.time.get()).collect();
    let err = arrivals.take_error().expect("the change is caught");
    assert!(err.contains("b.csv"), "{err}");
    assert!(times.len() < 4, "{times:?}");
}

#[test]
fn the_logs_own_rejections_are_counted_from_its_statuses() {
    let log = combined_log(600); // every 5th request logged 429
    let (dir, config) = file("a.log", &log, "format = \"combined\"");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), Some(120));
    let (dir, config) = file("a.log", &log, "format = \"combined\"\nrejected_status = [200]");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), Some(480));
    // Only the rows `where` keeps count.
    let (dir, config) = file("a.log", &log, "format = \"combined\"\nwhere = { path_prefix = \"/api/\" }");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), Some((0..600).filter(|i| i % 10 == 0).count() as u64));
    // JSON lines by the status field; a row without it leaves the count unknown.
    let json = "{\"time\": 1, \"status\": 429}\n{\"time\": 2, \"status\": \"200\"}\n";
    let (dir, config) = file("a.jsonl", json, "format = \"jsonl\"");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), Some(1));
    let (dir, config) = file("a.jsonl", &format!("{json}{{\"time\": 3}}\n"), "format = \"jsonl\"");
    let warnings = config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), None);
    // ... and says so, and where, as it does of a combined line whose status is not a number.
    assert!(warnings.iter().any(|w| w.contains("a.jsonl:3)")), "{warnings:?}");
    let said = |warnings: &[String]| warnings.iter().any(|w| w.contains("1 of 3 rows have no status") && w.contains("turned_away_in_log"));
    assert!(said(&warnings), "{warnings:?}");
    let broken = log.lines().take(3).collect::<Vec<_>>().join("\n").replacen(" 200 ", " 2x0 ", 1) + "\n";
    assert!(broken.contains(" 2x0 "), "{broken}");
    let (dir, config) = file("a.log", &broken, "format = \"combined\"");
    let warnings = config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), None);
    assert!(said(&warnings), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("the first at ") && w.contains("a.log:2)")), "{warnings:?}");
    // Every row with a status, or none: nothing to say.
    let (dir, config) = file("a.log", &log, "format = \"combined\"");
    let warnings = config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert!(!warnings.iter().any(|w| w.contains("no status")), "{warnings:?}");
    // Cloudflare's own flag where a row has it, its status where not: an
    // action other than empty, "log" or "simulate" (any case) turned it away.
    let flagged = [
        r#""EdgeRateLimitAction":"block""#,
        r#""EdgeRateLimitAction":"Log""#,
        r#""EdgeRateLimitAction":"SIMULATE""#,
        r#""EdgeRateLimitAction":"""#,
        r#""EdgeRateLimitAction":" challenge ""#,
        r#""EdgeResponseStatus":429"#,
        r#""EdgeRateLimitAction":"null""#,
    ];
    let lines: String = flagged
        .iter()
        .enumerate()
        .map(|(i, member)| format!("{{\"ClientIP\":\"a\",\"EdgeStartTimestamp\":{}000000000,{member}}}\n", i + 1))
        .collect();
    let (dir, config) = file("a.json", &lines, "format = \"cloudflare\"");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), Some(3), "block, challenge and the 429");
    let (dir, config) = file("t.csv", "time_ns,status\n1,429\n2,200\n", "");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), Some(1));
    let (dir, config) = file("t.csv", "time_ns\n1\n", "");
    config.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap();
    assert_eq!(config.turned_away_in_log(), None, "no status column");
}

#[test]
fn a_truncated_compressed_file_is_an_error_not_a_shorter_log() {
    let text: String = (1..=20_000).map(|i| format!("{i}\n")).collect();
    let csv = format!("time_ns\n{text}");
    for (kind, bytes) in [("gzip", gzip(csv.as_bytes())), ("zstd", zstd(csv.as_bytes()))] {
        for keep in [bytes.len() / 2, bytes.len() - 9, bytes.len() - 1] {
            let err = replay_bytes("t.csv", &bytes[..keep], "")
                .err()
                .unwrap_or_else(|| panic!("{kind} cut to {keep} of {} bytes replayed", bytes.len()));
            assert!(err.contains("t.csv"), "{kind}: {err}");
        }
    }
}

/// The checked rows decoded straight into chunks are the rows the iterator
/// yields, one by one: rebased or not, cut at the run's start and end (an
/// arrival exactly at the end left out), with escaped steps and keys, in
/// chunks of any size.
#[test]
fn checked_rows_fill_chunks_as_they_iterate() {
    // Steps of 0, a few ns, and past 2^32 ns (escaped); many clients.
    let mut csv = String::from("time_ns,client\n");
    let mut time = 1_700_000_000_000_000_000u64;
    for i in 0..5_000u64 {
        time += match i % 5 {
            0 => 0,
            1 => 3,
            2 => 1 << 33,
            _ => 1_000_000,
        };
        csv.push_str(&format!("{time},c{}\n", (i * 7919) % 1_237));
    }
    for (extra, start, end) in [
        ("rebase = true", 0, u64::MAX),
        ("rebase = true", 20_000_000_000, 5_000_000_000_000),
        ("", 1_700_000_100_000_000_000, 1_700_000_400_000_000_000),
        ("", 0, 1_700_000_000_000_000_003),
    ] {
        let (dir, config) = trace(&csv, &format!("key = \"client\"\n{extra}"));
        config.check(dir.path(), Nanos(start), Nanos(end)).unwrap();
        let replay = || config.replay(dir.path(), Nanos(start), Nanos(end), rng()).unwrap();
        let one_by_one: Vec<Arrival> = replay().collect();
        assert!(!one_by_one.is_empty(), "{extra} [{start}, {end})");
        assert!(end == u64::MAX || one_by_one.len() < 5_000, "{extra} [{start}, {end})");
        assert!(one_by_one.iter().all(|a| (start..end).contains(&a.time.get())));
        for size in [1, 7, 4096] {
            let mut arrivals = replay();
            let (mut chunks, mut chunk): (Vec<Arrival>, Vec<Arrival>) = (Vec::new(), Vec::new());
            loop {
                <Config as Kind>::refill(&mut arrivals, &mut chunk, size);
                chunks.extend_from_slice(&chunk);
                if chunk.len() < size {
                    break;
                }
            }
            assert_eq!(arrivals.take_error(), None);
            assert_eq!(chunks, one_by_one, "{extra} [{start}, {end}) in chunks of {size}");
        }
    }
}

/// Several whole-second traces sharing an origin keep their seconds'
/// counts together only up to the limit they share: at it, their busiest
/// second together is found; one past it, by any of them (sorted, or
/// unsorted and counted once sorted), it is not, and one of them warns.
#[test]
fn several_traces_keep_their_seconds_counts_together_up_to_a_shared_limit() {
    let dir = tempfile::tempdir().unwrap();
    // a: seconds 100 ×2, 101, 103 (three busy seconds); b: 101 ×2, 104,
    // sorted or not (two busy seconds). Together: 101 holds 3, 100–101 5.
    std::fs::write(dir.path().join("a.csv"), "time_s\n100\n100\n101\n103\n").unwrap();
    std::fs::write(dir.path().join("b.csv"), "time_s\n101\n101\n104\n").unwrap();
    std::fs::write(dir.path().join("b-unsorted.csv"), "time_s\n104\n101\n101\n").unwrap();
    for b in ["b.csv", "b-unsorted.csv"] {
        for (limit, kept) in [(5, true), (4, false), (2, false)] {
            let counted = Arc::new(Counted::new(limit));
            let traces: Vec<Config> = ["a.csv", b]
                .iter()
                .map(|path| {
                    let mut config: Config =
                        toml::from_str(&format!("path = \"{path}\"\nrebase = true\nspread = \"none\"")).unwrap();
                    config.origin = Some(100 * NANOS_PER_SEC);
                    config.counted = Some(Arc::clone(&counted));
                    config
                })
                .collect();
            let warnings: Vec<String> = traces
                .iter()
                .flat_map(|trace| trace.check(dir.path(), Nanos(0), Nanos(u64::MAX)).unwrap())
                .filter(|warning| warning.contains("busy seconds together"))
                .collect();
            let together = Config::labelled_together(&traces);
            let case = format!("{b}, limit {limit}: {warnings:?}");
            assert_eq!(
                together.map(|labelled| (labelled.busiest, labelled.busiest_pair)),
                kept.then_some((3, 5)),
                "{case}"
            );
            assert_eq!(warnings.len(), usize::from(!kept), "{case}");
        }
    }
}
