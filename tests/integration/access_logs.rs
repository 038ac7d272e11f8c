//! Access logs replay as they are: the same requests as an nginx combined
//! log, JSON lines and CSV with RFC 3339 times give byte-identical results,
//! and, kept on the second, the same as a CSV of epoch seconds.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

const SCENARIO: &str = "scenarios/access-log.toml";
const SOURCE: &str = r#"{ kind = "trace", format = "combined", path = "traces/checkout-access.log", key_field = "remote_addr" }"#;

/// `summary.json` of access-log.toml with its source replaced by `source`
/// (paths relative to the shipped traces), and what it warned.
fn summary(dir: &Path, name: &str, source: &str) -> (Vec<u8>, String) {
    summary_with_input(dir, name, source, &[])
}

/// [`summary`], with `stdin` on the program's standard input.
fn summary_with_input(dir: &Path, name: &str, source: &str, stdin: &[u8]) -> (Vec<u8>, String) {
    let text = fs::read_to_string(SCENARIO).unwrap();
    assert!(text.contains(SOURCE), "the scenario's source changed");
    let traces = fs::canonicalize("scenarios/traces").unwrap();
    let source = source.replace("traces/", &format!("{}/", traces.display()));
    let file = dir.join(format!("{name}.toml"));
    fs::write(&file, text.replace(SOURCE, &source)).unwrap();
    let out = dir.join(name);
    let assert = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("run")
        .arg(&file)
        .args(["-q", "--no-charts", "--out"])
        .arg(&out)
        .write_stdin(stdin)
        .assert()
        .success();
    let warnings = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    (fs::read(out.join("summary.json")).unwrap(), warnings)
}

/// `summary.json` of `burstsim run` of `scenario` into `out`, which must succeed.
fn run_summary(scenario: &Path, out: &Path) -> serde_json::Value {
    run_table(scenario, out).0
}

/// `summary.json` and the printed table of `burstsim run` of `scenario`
/// into `out`, which must succeed.
fn run_table(scenario: &Path, out: &Path) -> (serde_json::Value, String) {
    let run = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "--no-charts", "--out"])
        .arg(out)
        .arg(scenario)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary = serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    (summary, String::from_utf8_lossy(&run.stdout).into_owned())
}

/// The exit status and standard output of `burstsim check` of `scenario`.
fn check(scenario: &Path) -> (Option<i32>, String) {
    let check = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("check")
        .arg(scenario)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout).into_owned();
    (check.status.code(), text)
}

#[test]
fn a_gzipped_log_on_standard_input_replays_as_the_file_does() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let (plain, _) = summary(dir.path(), "plain", SOURCE);
    let log = fs::read("scenarios/traces/checkout-access.log").unwrap();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(&log).unwrap();
    let gzipped = gzip.finish().unwrap();
    // `zcat access.log.gz | burstsim run` and `burstsim run < access.log.gz`:
    // decompressed or not, standard input is read once, for every replication.
    for (name, input) in [("piped", &log), ("piped-gzip", &gzipped)] {
        let (piped, warnings) = summary_with_input(
            dir.path(),
            name,
            &SOURCE.replace("traces/checkout-access.log", "-"),
            input,
        );
        assert!(plain == piped, "{name}: standard input replays differently");
        assert!(
            warnings.contains("<standard input>: its timestamps are whole seconds"),
            "{warnings}"
        );
    }
}

/// Each vendor's sample of the same requests as the combined log (written
/// by scripts/vendor_samples.py), and the field naming its client.
const VENDORS: [(&str, &str, &str); 8] = [
    ("traefik", "checkout-access.traefik.json", "ClientHost"),
    ("kong", "checkout-access.kong.json", "client_ip"),
    ("cloudflare", "checkout-access.cloudflare.json", "ClientIP"),
    ("gcp", "checkout-access.gcp.json", "httpRequest.remoteIp"),
    ("alb", "checkout-access.alb.log", "client"),
    ("cloudfront", "checkout-access.cloudfront.log", "c-ip"),
    ("envoy", "checkout-access.envoy.log", "x_forwarded_for"),
    ("haproxy", "checkout-access.haproxy.log", "client_ip"),
];

/// A vendor's log filtered by a Host it does not name keeps no row (the
/// Host read where the vendor writes it: a URL, a header, `:authority`);
/// HAProxy logs a Host only where a capture puts it, named by host_field.
#[test]
fn each_vendor_log_is_filtered_by_the_host_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = fs::read_to_string(SCENARIO).unwrap();
    let traces = fs::canonicalize("scenarios/traces").unwrap();
    for (format, file, key) in VENDORS {
        let host_field = if format == "haproxy" {
            r#", host_field = "captured_request_headers""#
        } else {
            ""
        };
        for (host, kept) in [("Shop.Example", true), ("blog.example", false)] {
            let source = format!(
                r#"{{ kind = "trace", format = "{format}", path = "{}/{file}", key_field = "{key}"{host_field}, where = {{ host = "{host}" }} }}"#,
                traces.display()
            );
            let path = dir.path().join(format!("{format}-{kept}.toml"));
            fs::write(&path, scenario.replace(SOURCE, &source)).unwrap();
            let out = Command::cargo_bin("burstsim")
                .unwrap()
                .args(["run", "-q", "--no-charts", "--out"])
                .arg(dir.path().join(format!("{format}-{kept}")))
                .arg(&path)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if kept {
                assert!(out.status.success(), "{format}: {stderr}");
            } else {
                assert_eq!(out.status.code(), Some(2), "{format}: {stderr}");
                assert!(
                    stderr.contains("none of the 2308 rows"),
                    "{format}: {stderr}"
                );
            }
        }
    }
    // Without a capture named, HAProxy's where.host is refused with the reason.
    let source = format!(
        r#"{{ kind = "trace", format = "haproxy", path = "{}/checkout-access.haproxy.log", where = {{ host = "shop.example" }} }}"#,
        traces.display()
    );
    let path = dir.path().join("haproxy-no-host.toml");
    fs::write(&path, scenario.replace(SOURCE, &source)).unwrap();
    let out = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("where.host") && stderr.contains("host_field"),
        "{stderr}"
    );
}

#[test]
fn a_combined_log_json_lines_and_rfc3339_csv_replay_to_the_same_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (combined, warnings) = summary(dir.path(), "combined", SOURCE);
    assert!(warnings.contains("whole seconds"), "{warnings}");
    let (json, _) = summary(
        dir.path(),
        "json",
        r#"{ kind = "trace", format = "jsonl", path = "traces/checkout-access.jsonl", key_field = "remote_addr" }"#,
    );
    let (csv, _) = summary(
        dir.path(),
        "csv",
        r#"{ kind = "trace", path = "traces/checkout-access.csv", time_field = "time", unit = "rfc3339", key_field = "client" }"#,
    );
    assert!(
        combined == json,
        "JSON lines replay differently from the combined log"
    );
    // Traefik's and Cloudflare's JSON logs of the same requests, by their
    // own field names and time units.
    for (format, file, key) in VENDORS {
        let (vendor, _) = summary(
            dir.path(),
            format,
            &format!(
                r#"{{ kind = "trace", format = "{format}", path = "traces/{file}", key_field = "{key}" }}"#
            ),
        );
        assert!(
            combined == vendor,
            "{format}'s log replays differently from the combined log"
        );
        // The same part of the log, by each format's own fields.
        let part = r#"where = { path_prefix = "/api/checkout", method = "POST", status = "2xx" }"#;
        let (combined_part, _) = summary(
            dir.path(),
            "combined-part",
            &SOURCE.replace(" }", &format!(", {part} }}")),
        );
        let (vendor_part, warnings) = summary(
            dir.path(),
            &format!("{format}-part"),
            &format!(
                r#"{{ kind = "trace", format = "{format}", path = "traces/{file}", key_field = "{key}", {part} }}"#
            ),
        );
        assert!(
            combined_part == vendor_part,
            "{format}: where keeps other rows"
        );
        assert!(warnings.contains("rows do not match `where`"), "{warnings}");
        assert!(combined_part != combined);
    }
    assert!(
        combined == csv,
        "the RFC 3339 CSV replays differently from the combined log"
    );
    let figures: serde_json::Value = serde_json::from_slice(&combined).unwrap();
    let per_client = figures["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["limiter"] == "per-client-fixed")
        .unwrap();
    // 2308 requests in the log, every one replayed.
    assert_eq!(per_client["offered"], 2308);
}

/// A log saved with a UTF-8 byte-order mark (as Windows tools and some
/// editors write it) replays as the same log without: the mark is not part
/// of the first client's address (which made it a key of its own) nor of
/// the first JSON line (which was refused).
#[test]
fn a_log_starting_with_a_byte_order_mark_replays_as_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let (combined, _) = summary(dir.path(), "combined", SOURCE);
    for (format, file, key) in [
        ("combined", "checkout-access.log", "remote_addr"),
        ("jsonl", "checkout-access.jsonl", "remote_addr"),
    ] {
        let marked = dir.path().join(format!("marked-{file}"));
        let mut text = "\u{feff}".as_bytes().to_vec();
        text.extend(fs::read(format!("scenarios/traces/{file}")).unwrap());
        fs::write(&marked, text).unwrap();
        let (replayed, _) = summary(
            dir.path(),
            &format!("marked-{format}"),
            &format!(
                r#"{{ kind = "trace", format = "{format}", path = "{}", key_field = "{key}" }}"#,
                marked.display()
            ),
        );
        assert!(
            replayed == combined,
            "{format} with a byte-order mark replays differently"
        );
    }
}

#[test]
fn kept_on_the_second_a_log_replays_as_a_csv_of_epoch_seconds() {
    let dir = tempfile::tempdir().unwrap();
    // The CSV's times (all within 09:00 +01:00 on 27 Nov 2026) as epoch seconds.
    let iso = fs::read_to_string("scenarios/traces/checkout-access.csv").unwrap();
    let mut epoch = String::from("time_s,client,status\n");
    for line in iso.lines().skip(1) {
        let (time, rest) = line.split_once(',').unwrap();
        let client = rest.split(',').next().unwrap();
        let status = rest.rsplit(',').next().unwrap();
        assert!(
            time.starts_with("2026-11-27T09:00:") && time.ends_with("+01:00"),
            "{time}"
        );
        let second: u64 = time[17..19].parse().unwrap();
        epoch.push_str(&format!("{},{client},{status}\n", 1_764_230_400 + second));
    }
    let epoch_file: PathBuf = dir.path().join("epoch.csv");
    fs::write(&epoch_file, epoch).unwrap();
    let (log, warnings) = summary(
        dir.path(),
        "log",
        r#"{ kind = "trace", format = "combined", path = "traces/checkout-access.log", key_field = "remote_addr", spread = "none" }"#,
    );
    assert!(!warnings.contains("whole seconds"), "{warnings}");
    let (csv, _) = summary(
        dir.path(),
        "epoch",
        &format!(
            r#"{{ kind = "trace", path = "{}", rebase = true, key_field = "client" }}"#,
            epoch_file.display()
        ),
    );
    assert!(
        log == csv,
        "the log kept on the second replays differently from epoch seconds"
    );
}

#[test]
fn a_whole_second_log_reports_the_interval_its_worst_second_lies_in() {
    let dir = tempfile::tempdir().unwrap();
    let traces = fs::canonicalize("scenarios/traces").unwrap();
    // A limiter that passes everything shows the demand itself.
    let run = |spread: &str| {
        let file = dir.path().join(format!("{spread}.toml"));
        fs::write(
            &file,
            format!(
                "name = \"w\"\nduration = \"60s\"\nseed = 3\n[[workload]]\nname = \"log\"\nsources = [{{ kind = \"trace\", format = \"combined\", path = \"{}/checkout-access.log\", spread = \"{spread}\" }}]\n[[limiter]]\nname = \"all\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 1000000\n",
                traces.display()
            ),
        )
        .unwrap();
        let out = dir.path().join(spread);
        Command::cargo_bin("burstsim")
            .unwrap()
            .arg("run")
            .arg(&file)
            .args(["-q", "--no-charts", "--out"])
            .arg(&out)
            .assert()
            .success();
        let summary: serde_json::Value =
            serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
        let run = summary["runs"][0].clone();
        let figure = |name: &str| run["whole_seconds"][name].as_u64().unwrap();
        let worst = run["worst_rolling"].as_u64().unwrap();
        (
            worst,
            figure("offered_low"),
            figure("offered_high"),
            figure("admitted_at_most"),
        )
    };
    // Every request at its second's start: the busiest second is the worst.
    let (worst, low, high, most) = run("none");
    assert_eq!(worst, low);
    assert!(
        low < high,
        "the log's busiest pair is busier than its busiest second"
    );
    assert_eq!(most, high, "a limiter that passes all could pass the pair");
    // Spread at random: somewhere in between.
    let (worst, spread_low, spread_high, _) = run("uniform");
    assert_eq!((spread_low, spread_high), (low, high));
    assert!((low..=high).contains(&worst), "{low} ≤ {worst} ≤ {high}");
}

/// A whole-second log's worst as drawn (`seeded`), packed, and at most
/// (of its `whole_seconds`).
fn placements(seeded: &serde_json::Value, seconds: &serde_json::Value) -> (u64, u64, u64) {
    (
        seeded.as_u64().unwrap(),
        seconds["admitted_at_least"].as_u64().unwrap(),
        seconds["admitted_at_most"].as_u64().unwrap(),
    )
}

/// A log of whole seconds is also run with each second's requests packed
/// against the next's: a placement its stamps allow. Ten requests in each
/// of two adjacent seconds, kept on the second (`spread = "none"`), pass a
/// fixed window of 8 a second as 8 in any second; packed, 16 meet at one
/// instant — the fixed window's 2N, exactly its ceiling — and `check`
/// fails the 12/s backend on it, saying how. Every limiter's figure lies
/// between the seeded one and the ceiling.
#[test]
fn a_whole_second_log_is_also_run_packed_against_its_seconds_edges() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for second in 0..6 {
        let count = if second == 2 || second == 3 { 10 } else { 3 };
        for i in 0..count {
            log.push_str(&format!(
                "10.0.0.{i} - - [27/Nov/2026:09:00:0{second} +0100] \"GET /api/cart HTTP/1.1\" 200 5 \"-\" \"t\"\n"
            ));
        }
    }
    fs::write(dir.path().join("edge.log"), log).unwrap();
    let scenario = dir.path().join("edge.toml");
    fs::write(
        &scenario,
        r#"duration = "10s"
[backend]
capacity = 12
[[workload]]
name = "log"
sources = [{ kind = "trace", format = "combined", path = "edge.log", key_field = "remote_addr", spread = "none" }]
[[limiter]]
name = "fixed"
kind = "fixed-window"
window = "1s"
threshold = 8
[[limiter]]
name = "bucket"
kind = "token-bucket"
rate = 8
burst = 8
[[limiter]]
name = "log"
kind = "sliding-log"
window = "1s"
threshold = 8
[[limiter]]
name = "per-client"
kind = "fixed-window"
window = "1s"
threshold = 1
per = "key"
"#,
    )
    .unwrap();
    let summary = run_summary(&scenario, &dir.path().join("out"));
    for run in summary["runs"].as_array().unwrap() {
        let name = run["limiter"].as_str().unwrap();
        let seconds = &run["whole_seconds"];
        let (seeded, least, most) = placements(&run["worst_rolling"], seconds);
        assert!(
            seeded <= least && least <= most,
            "{name}: {seeded} {least} {most}"
        );
        assert_eq!(
            (
                seconds["offered_low"].as_u64(),
                seconds["offered_high"].as_u64()
            ),
            (Some(10), Some(20))
        );
        match name {
            "fixed" => assert_eq!((seeded, least, most), (8, 16, 16), "{name}"),
            // One per client a second: ten clients' 1 + 1 across the edge.
            "per-client" => assert_eq!((seeded, least), (10, 20), "{name}"),
            // The bucket's 8 then 1 ns of refill; the log holds 8 in any second.
            "bucket" | "log" => assert_eq!((seeded, least), (8, 8), "{name}"),
            _ => unreachable!(),
        }
    }
    // Over a rolling 100 ms: at least the busiest second's 10 over the ten
    // intervals that cover it, at most the pair's 20; packed, the fixed
    // window's 16 meet within 1 ns, its bound over 100 ms.
    let toml = fs::read_to_string(&scenario).unwrap();
    // The same scenario over another rolling interval.
    let rolling = |name: &str, interval: &str| {
        let path = dir.path().join(format!("{name}.toml"));
        let metrics = format!("[metrics]\nrolling = \"{interval}\"\n[backend]");
        fs::write(&path, toml.replace("[backend]", &metrics)).unwrap();
        path
    };
    let short = rolling("short", "100ms");
    let shorter = run_summary(&short, &dir.path().join("short"));
    assert_eq!(
        shorter["runs"][0]["whole_seconds"],
        serde_json::json!({"offered_low": 1, "offered_high": 20, "admitted_at_least": 16, "admitted_at_most": 16})
    );
    // The backend takes a second at a time whatever the rolling interval:
    // over 100 ms and over a minute the backend's own interval holds the
    // second's figures (the packed 16 over the 12/s capacity), and `check`
    // fails on it as it does over a rolling second.
    assert_eq!(
        shorter["runs"][0]["backend"]["whole_seconds"],
        serde_json::json!({"offered_low": 10, "offered_high": 20, "admitted_at_least": 16, "admitted_at_most": 16})
    );
    let minute = rolling("minute", "1m");
    let longer = run_summary(&minute, &dir.path().join("minute"));
    for run in longer["runs"].as_array().unwrap() {
        let name = run["limiter"].as_str().unwrap();
        assert_eq!(
            run["whole_seconds"],
            serde_json::Value::Null,
            "{name}: none over a minute"
        );
        let backend = &run["backend"];
        let (seeded, least, most) = placements(&backend["worst_1s"], &backend["whole_seconds"]);
        assert!(
            seeded <= least && least <= most,
            "{name}: {seeded} {least} {most}"
        );
        if name == "fixed" {
            assert_eq!((seeded, least, most), (8, 16, 16), "{name}");
        }
    }
    // summary.csv carries the backend's second beside the seeded
    // `over_capacity` (0 here: the seeded 8 is within 12), so that a CI
    // reading the CSV sees the 16 `check` fails on; a run whose rolling
    // interval is the second has no such columns (its own are the second's).
    let csv_row = |out: &str, limiter: &str| -> Vec<(String, String)> {
        let text = fs::read_to_string(dir.path().join(out).join("summary.csv")).unwrap();
        let mut lines = text.lines();
        let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
        let row = lines
            .find(|line| line.split(',').nth(1) == Some(limiter))
            .unwrap();
        header
            .into_iter()
            .zip(row.split(',').map(String::from))
            .collect()
    };
    let field = |row: &[(String, String)], name: &str| {
        row.iter().find(|(h, _)| h == name).map(|(_, v)| v.clone())
    };
    for out in ["minute", "short"] {
        let fixed = csv_row(out, "fixed");
        let figures: Vec<Option<String>> = [
            "over_capacity",
            "offered_worst_1s_low",
            "offered_worst_1s_high",
            "admitted_worst_1s_at_least",
            "admitted_worst_1s_at_most",
        ]
        .iter()
        .map(|name| field(&fixed, name))
        .collect();
        let expected = ["0", "10", "20", "16", "16"].map(|v| Some(v.to_string()));
        assert_eq!(figures, expected, "{out}");
    }
    assert_eq!(
        field(&csv_row("out", "fixed"), "admitted_worst_1s_at_least"),
        None
    );
    assert_eq!(
        field(&csv_row("out", "fixed"), "admitted_worst_rolling_at_least").as_deref(),
        Some("16")
    );
    // The report says what the backend's column judges.
    let charted = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "-q", "--out"])
        .arg(dir.path().join("charted"))
        .arg(&minute)
        .output()
        .unwrap();
    assert!(
        charted.status.success(),
        "{}",
        String::from_utf8_lossy(&charted.stderr)
    );
    let report = fs::read_to_string(dir.path().join("charted/report.html")).unwrap();
    assert!(
        report.contains("log's between 10 and 20 requests") && report.contains("OVER n/s packed"),
        "{report}"
    );
    // Its words name the second judged (16 packed), not the seeded 8 that
    // the capacity holds; check's JSON gives both.
    assert!(
        report.contains("<b>fixed</b> (up to 16 in one second, on <i>log</i>)"),
        "{report}"
    );
    let json = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["check", "--format", "json"])
        .arg(&minute)
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let fixed = json["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["limiter"] == "fixed")
        .unwrap();
    assert_eq!(
        (fixed["worst_1s"].as_u64(), fixed["packed_1s"].as_u64()),
        (Some(8), Some(16))
    );
    for short in [&short, &minute] {
        let (code, text) = check(short);
        assert_eq!(code, Some(1), "{}: {text}", short.display());
        assert!(
            text.contains(
                "log × fixed: 16 admitted in one second with each second's requests of the log packed"
            ),
            "{}: {text}",
            short.display()
        );
    }
    // The same log out of order (sorted in memory): the same interval and
    // the same packed figures.
    let sorted = fs::read_to_string(dir.path().join("edge.log")).unwrap();
    let reversed: Vec<&str> = sorted.lines().rev().collect();
    fs::write(dir.path().join("edge.log"), reversed.join("\n") + "\n").unwrap();
    let unsorted = run_summary(&scenario, &dir.path().join("reversed"));
    for (a, b) in summary["runs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(unsorted["runs"].as_array().unwrap())
    {
        assert_eq!(a["whole_seconds"], b["whole_seconds"], "{}", a["limiter"]);
    }
    let (code, text) = check(&scenario);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(
            "log × fixed: 16 admitted in one second with each second's requests of the log packed"
        ),
        "{text}"
    );
    // A capacity the seeded second passes too: check names both figures,
    // each where it is, not the packed count at the seeded second's start.
    let toml = fs::read_to_string(&scenario).unwrap();
    let low = dir.path().join("low.toml");
    fs::write(&low, toml.replace("capacity = 12", "capacity = 6")).unwrap();
    let (code, text) = check(&low);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(
            "log × fixed: 8 admitted in one second from 2.000s as seeded, 16 with each second's requests of the log packed against the next's (its whole-second stamps allow it), 10 over the backend's 6/s"
        ),
        "{text}"
    );
    // Told not to (as past 1,000,000 rows by default): the seeded figure
    // alone, and check judges it.
    let toml = fs::read_to_string(&scenario).unwrap();
    fs::write(
        &scenario,
        toml.replace("spread = \"none\"", "spread = \"none\", packed = false"),
    )
    .unwrap();
    run_summary(&scenario, &dir.path().join("unpacked"));
    let csv = fs::read_to_string(dir.path().join("unpacked/summary.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let fixed: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(fixed[column("limiter")], "fixed", "{csv}");
    assert_eq!(
        (
            fixed[column("admitted_worst_rolling_at_least")],
            fixed[column("admitted_worst_rolling_at_most")]
        ),
        ("8", "16")
    );
    let (code, text) = check(&scenario);
    assert_eq!(code, Some(0), "{text}");
    // Asked of a trace with finer stamps: refused, naming the field.
    let fine = r#"duration = "10s"
[[workload]]
name = "log"
sources = [{ kind = "trace", path = "fine.csv", packed = true }]
[[limiter]]
name = "fixed"
kind = "fixed-window"
window = "1s"
threshold = 8
"#;
    fs::write(dir.path().join("fine.csv"), "time_ns\n5\n1000000007\n").unwrap();
    fs::write(&scenario, fine).unwrap();
    let check = Command::cargo_bin("burstsim")
        .unwrap()
        .arg("check")
        .arg(&scenario)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("packed: packs the requests of a log stamped in whole seconds"),
        "{stderr}"
    );
}

/// A log of more rows than are run packed by default is told how to have
/// them packed only where that works: alone in its workload. Beside another
/// source (here a second log, not rebased, so not sharing an origin) the
/// sources are run packed together or not at all, so no source is told to
/// set `packed`, and a `packed = true` that cannot apply is said not to.
#[test]
fn the_advice_to_set_packed_is_given_only_where_it_would_apply() {
    let dir = tempfile::tempdir().unwrap();
    let mut big = String::from("time_s\n");
    for row in 0..=1_000_000u32 {
        big.push_str(&(row / 1000).to_string());
        big.push('\n');
    }
    fs::write(dir.path().join("big.csv"), big).unwrap();
    fs::write(dir.path().join("small.csv"), "time_s\n3\n4\n4\n").unwrap();
    let stderr = |sources: &str| {
        let scenario = dir.path().join("s.toml");
        fs::write(
            &scenario,
            format!(
                "duration = \"20m\"\n[[workload]]\nname = \"logs\"\nsources = [{sources}]\n\
                 [[limiter]]\nname = \"fixed\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 8\n"
            ),
        )
        .unwrap();
        let out = Command::cargo_bin("burstsim")
            .unwrap()
            .arg("validate")
            .arg(&scenario)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        stderr
    };
    let advice = "set packed = true to run them";
    let alone = stderr(r#"{ kind = "trace", path = "big.csv" }"#);
    assert!(alone.contains(advice), "{alone}");
    let beside =
        stderr(r#"{ kind = "trace", path = "big.csv" }, { kind = "trace", path = "small.csv" }"#);
    assert!(
        !beside.contains(advice) && !beside.contains("not applied"),
        "{beside}"
    );
    let asked = stderr(
        r#"{ kind = "trace", path = "big.csv", packed = true }, { kind = "trace", path = "small.csv" }"#,
    );
    assert!(!asked.contains(advice), "{asked}");
    assert!(
        asked.contains("workload \"logs\": packed = true is not applied"),
        "{asked}"
    );
}

/// Kong's `limit_by = "header"` counts a request without the header by its
/// client's address. Kong's file-log leaves the header out of
/// `request.headers` then: replayed keyed by the header, the ten requests
/// from ten addresses without one are one absent client, and a limit of 2
/// a second per key lets 2 of them through; with `key_fallback =
/// "client_ip"`, each is its address's, and all ten pass, as in Kong.
#[test]
fn kong_counts_a_request_without_its_header_by_address_with_key_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for row in 0..12u64 {
        let headers = if row < 2 {
            r#"{"x-api-key":"alpha"}"#.to_string()
        } else {
            "{}".to_string()
        };
        log.push_str(&format!(
            "{{\"started_at\":{},\"client_ip\":\"10.0.0.{row}\",\"request\":{{\"method\":\"GET\",\"uri\":\"/\",\"headers\":{headers}}},\"response\":{{\"status\":200}}}}\n",
            1_764_230_400_000 + row * 10
        ));
    }
    fs::write(dir.path().join("kong.jsonl"), log).unwrap();
    let scenario = |fallback: &str| {
        let path = dir.path().join(format!("s{}.toml", fallback.len()));
        fs::write(
            &path,
            format!(
                r#"duration = "10s"
[[workload]]
name = "kong"
sources = [{{ kind = "trace", format = "jsonl", path = "kong.jsonl", time_field = "started_at", unit = "ms", key_field = "request.headers.x-api-key"{fallback}, spread = "none" }}]
[[limiter]]
name = "kong"
kind = "kong"
second = 2
per = "key"
"#
            ),
        )
        .unwrap();
        let summary = run_summary(&path, &dir.path().join(format!("out{}", fallback.len())));
        let run = &summary["runs"][0];
        (run["admitted"].as_u64(), run["keys"]["keys"].as_u64())
    };
    assert_eq!(scenario(""), (Some(4), Some(2)));
    assert_eq!(
        scenario(r#", key_fallback = "client_ip""#),
        (Some(12), Some(11))
    );
}

/// Spring Cloud Gateway answers a request whose key resolves to nothing
/// with 403 (`deny-empty-key`), not a rate limit's 429: clients that retry
/// rejections do not retry that one. Replayed from a log whose every other
/// row has no user, behind a per-user limit no user reaches, with clients
/// retrying after 100 ms: each keyless request is given up at its first
/// attempt. Beside it, a per-user fixed window of one a second, whose 429s
/// the same clients do retry.
#[test]
fn a_spring_403_to_a_request_without_a_key_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for row in 0..40 {
        let user = if row % 2 == 0 {
            format!("u{}", row % 3)
        } else {
            "-".into()
        };
        log.push_str(&format!(
            "10.0.0.{} - {user} [27/Nov/2026:08:00:{:02} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"x\"\n",
            row % 5,
            row / 4
        ));
    }
    fs::write(dir.path().join("users.log"), log).unwrap();
    let scenario = dir.path().join("s.toml");
    fs::write(
        &scenario,
        r#"duration = "30s"
[[workload]]
name = "log"
sources = [{ kind = "trace", format = "combined", path = "users.log", key_field = "remote_user", spread = "none" }]
retry = { policy = "fixed", base = "100ms", max_attempts = 3 }
[[limiter]]
name = "spring"
kind = "spring-cloud-gateway"
replenish_rate = 100
burst_capacity = 100
per = "key"
[[limiter]]
name = "fixed"
kind = "fixed-window"
window = "1s"
threshold = 1
per = "key"
"#,
    )
    .unwrap();
    let (summary, stdout) = run_table(&scenario, &dir.path().join("out"));
    let run = |name: &str| {
        summary["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|run| run["limiter"] == name)
            .unwrap()
            .clone()
    };
    let spring = run("spring");
    let closed = &spring["closed_loop"];
    assert_eq!(
        (
            spring["offered"].as_u64(),
            spring["admitted"].as_u64(),
            closed["retries"].as_u64(),
            closed["gave_up"].as_u64()
        ),
        (Some(40), Some(20), Some(0), Some(20)),
        "{spring}"
    );
    // Refused, not limited: no lockout (a limit's) for the keyless.
    assert_eq!(closed["lockout"]["lockouts"].as_u64(), Some(0), "{spring}");
    let fixed = run("fixed");
    assert!(
        fixed["closed_loop"]["retries"].as_u64() > Some(0),
        "{fixed}"
    );
    // Beside the log's own limiter, the log's 40 rows are the requests, and
    // a model turns away the requests its clients give up on, its rejected
    // attempts (retries included) beside.
    let line = format!(
        "log: the log's own limiter turned away 0 of 40 requests; the models turn away spring 20 (20 of 40 attempts), fixed {} ({} of {} attempts)\n",
        fixed["closed_loop"]["gave_up"], fixed["rejected"], fixed["offered"]
    );
    assert!(stdout.contains(&line), "{line}{stdout}");
}

/// `--decisions` beside each model's answer writes the log's own: every
/// request of a client the log always answered 429 reads `false`, of the
/// other `true`, in whatever order the seconds' spreading put them; the
/// run counts the requests on which a model and the log disagree.
#[test]
fn decisions_carry_the_logs_own_answer_request_by_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::new();
    for second in 0..5 {
        for i in 0..12 {
            let (client, status) = if i % 3 == 0 {
                ("10.0.0.66", 429)
            } else {
                ("10.0.0.1", 200)
            };
            log.push_str(&format!(
                "{client} - - [27/Nov/2026:09:00:0{second} +0100] \"GET /api/cart HTTP/1.1\" {status} 5 \"-\" \"t\"\n"
            ));
        }
    }
    fs::write(dir.path().join("mixed.log"), log).unwrap();
    let scenario = dir.path().join("mixed.toml");
    fs::write(
        &scenario,
        r#"duration = "10s"
[[workload]]
name = "log"
sources = [{ kind = "trace", format = "combined", path = "mixed.log", key_field = "remote_addr" }]
[[limiter]]
name = "five"
kind = "fixed-window"
window = "1s"
threshold = 5
"#,
    )
    .unwrap();
    let out = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "--no-charts", "--decisions", "--out"])
        .arg(dir.path().join("out"))
        .arg(&scenario)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = fs::read_to_string(dir.path().join("out/decisions/log/five.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("time_ns,key,admitted,client,log_admitted")
    );
    let (mut rows, mut disagree) = (0, 0);
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        let expected = if fields[3] == "10.0.0.66" {
            "false"
        } else {
            "true"
        };
        assert_eq!(fields[4], expected, "{line}");
        disagree += usize::from(fields[2] != fields[4]);
        rows += 1;
    }
    assert_eq!(rows, 60);
    // Said beside the table, after the log's own count: a finding, not a warning.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("decisions/log/five.csv: the model and the log's own limiter disagree on {disagree} requests")),
        "{stdout}"
    );
    assert!(!stderr.contains("disagree"), "{stderr}");
}

/// Peak memory of `burstsim run --stats` over a combined log of `lines`
/// lines over the same 600 seconds and 300 addresses, in MB, and its summary.
fn peak_over_log(dir: &Path, lines: u64) -> (f64, serde_json::Value) {
    use std::io::Write as _;
    let log = dir.join(format!("access-{lines}.log"));
    let mut out = std::io::BufWriter::new(fs::File::create(&log).unwrap());
    for i in 0..lines {
        let second = i * 600 / lines;
        writeln!(
            out,
            "10.0.{}.{} - - [27/Nov/2026:09:{:02}:{:02} +0100] \"GET /api/cart?id={i} HTTP/1.1\" 200 512 \"-\" \"curl/8.5\"",
            i * 7 % 300 / 100,
            i * 7 % 100,
            second / 60,
            second % 60
        )
        .unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let scenario = dir.join(format!("s{lines}.toml"));
    fs::write(
        &scenario,
        format!(
            "duration = \"10m\"\n[metrics]\nbucket = \"1s\"\n[[workload]]\nname = \"log\"\nsources = [{{ kind = \"trace\", format = \"combined\", path = \"{}\", key_field = \"remote_addr\", spread = \"none\" }}]\n[[limiter]]\nname = \"global\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 600\n[[limiter]]\nname = \"per-client\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5\nper = \"key\"\n",
            log.display()
        ),
    )
    .unwrap();
    let results = dir.join(format!("out{lines}"));
    let run = Command::cargo_bin("burstsim")
        .unwrap()
        .args(["run", "-q", "--no-charts", "--stats", "--out"])
        .arg(&results)
        .arg(&scenario)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let mb = stderr
        .split("peak memory ")
        .nth(1)
        .and_then(|rest| rest.split(" MB").next())
        .and_then(|mb| mb.parse().ok())
        .unwrap_or_else(|| panic!("no peak memory in {stderr:?}"));
    let summary = serde_json::from_slice(&fs::read(results.join("summary.json")).unwrap()).unwrap();
    (mb, summary)
}

/// An in-order log's memory is bounded by its keys and seconds, not its
/// lines: ten times the lines over the same seconds and addresses (10^6
/// rows, which held as 24-byte times and keys would take 24 MB) peak within
/// a few MB of a tenth of them.
#[cfg(target_os = "linux")]
#[test]
fn a_logs_memory_does_not_grow_with_its_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (small, small_summary) = peak_over_log(dir.path(), 100_000);
    let (large, large_summary) = peak_over_log(dir.path(), 1_000_000);
    for (summary, lines) in [(&small_summary, 100_000), (&large_summary, 1_000_000)] {
        assert_eq!(summary["runs"][0]["offered"], lines, "{summary}");
        assert_eq!(summary["runs"][1]["keys"]["keys"], 300, "{summary}");
    }
    eprintln!("10^5 lines peaked at {small} MB, 10^6 at {large} MB");
    assert!(
        large < small + 6.0,
        "10^5 lines peaked at {small} MB, 10^6 at {large} MB"
    );
}

/// A log whose new keys outgrow the numbering's growth by doubling (more
/// than 2^18 of them, most rows a new address: the table grows at once to
/// the keys foreseen at the file's end) numbers every key once and keeps
/// each key's rows together: every fourth row comes back to the address of
/// the row two before it, in the same second.
#[test]
fn a_log_of_many_new_keys_numbers_each_once() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let (rows, per_second) = (1_000_000u64, 2000);
    let address = |row: u64| {
        let key = if row % 4 == 3 { row - 2 } else { row };
        format!("10.{}.{}.{}", key >> 16, (key >> 8) & 255, key & 255)
    };
    let log = dir.path().join("access.log");
    let mut out = std::io::BufWriter::new(fs::File::create(&log).unwrap());
    for row in 0..rows {
        let second = row / per_second;
        writeln!(
            out,
            "{} - - [27/Nov/2026:{:02}:{:02}:{:02} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl\"",
            address(row),
            9 + second / 3600,
            second / 60 % 60,
            second % 60
        )
        .unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let scenario = dir.path().join("many.toml");
    fs::write(
        &scenario,
        "duration = \"10m\"\n[[workload]]\nname = \"log\"\nsources = [{ kind = \"trace\", format = \"combined\", path = \"access.log\", key_field = \"remote_addr\", spread = \"none\" }]\n\
         [[limiter]]\nname = \"per-client\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5\nper = \"key\"\n",
    )
    .unwrap();
    let summary = run_summary(&scenario, &dir.path().join("out"));
    let run = &summary["runs"][0];
    assert_eq!(run["offered"], rows, "{run}");
    assert_eq!(run["admitted"], rows, "{run}");
    let keys = &run["keys"];
    assert_eq!(keys["keys"], rows / 4 * 3, "{keys}");
    assert_eq!(keys["worst_rolling_max"], 2, "{keys}");
    assert_eq!(keys["worst_rolling_p50"], 1, "{keys}");
    assert_eq!(keys["worst_key_name"], address(1), "{keys}");
}

/// Several servers' logs replay as one log of all their lines would: each
/// rebased from the earliest row of any of them, not each from its own
/// first, so a server whose first request came later keeps its place —
/// also when that earliest row lies deep in an unsorted file, found only
/// by the check, which then checks them again. (Rebased each from its own
/// first row, the second server's requests moved to the run's start and
/// doubled the worst second.) Their labelled seconds are counted together,
/// their requests run packed and their limiter's answers summed, as one
/// log's are. Standard input, read
/// once, cannot be checked again: where its rows come first, that is an
/// error.
#[test]
fn several_servers_logs_keep_their_places_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let line = |(addr, second): (&str, u32)| {
        format!(
            "{addr} - - [27/Nov/2026:09:00:{second:02} +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl\"\n"
        )
    };
    let web1 = [
        ("10.0.0.1", 2),
        ("10.0.0.2", 2),
        ("10.0.0.3", 2),
        ("10.0.0.1", 6),
        ("10.0.0.1", 12),
    ];
    let web2 = [
        ("10.0.1.1", 7),
        ("10.0.1.2", 7),
        ("10.0.1.3", 7),
        ("10.0.0.1", 7),
        ("10.0.0.1", 7),
    ];
    let scenario = |name: &str, paths: &[&str]| {
        let sources: Vec<String> = paths
            .iter()
            .map(|path| format!("{{ kind = \"trace\", format = \"combined\", path = {path:?}, key_field = \"remote_addr\", spread = \"none\" }}"))
            .collect();
        let file = dir.path().join(format!("{name}.toml"));
        fs::write(
            &file,
            format!(
                "duration = \"30s\"\n[[workload]]\nname = \"w\"\nsources = [{}]\n\
                 [[limiter]]\nname = \"global\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 4\n\
                 [[limiter]]\nname = \"per-client\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 2\nper = \"key\"\n",
                sources.join(", ")
            ),
        )
        .unwrap();
        file
    };
    let runs = |summary: &serde_json::Value| summary["runs"].clone();
    // Sorted: the first rows say where each log starts. Unsorted: web2's
    // earliest row (09:00:01) comes last.
    for late in [None, Some(("10.0.1.9", 1))] {
        let web2: Vec<_> = web2.iter().copied().chain(late).collect();
        let text = |rows: &[(&str, u32)]| rows.iter().map(|&row| line(row)).collect::<String>();
        fs::write(dir.path().join("web1.log"), text(&web1)).unwrap();
        fs::write(dir.path().join("web2.log"), text(&web2)).unwrap();
        let mut all: Vec<_> = web1.iter().chain(&web2).copied().collect();
        all.sort_by_key(|&(_, second)| second);
        fs::write(dir.path().join("all.log"), text(&all)).unwrap();
        let one = run_summary(&scenario("one", &["all.log"]), &dir.path().join("one"));
        let two = run_summary(
            &scenario("two", &["web1.log", "web2.log"]),
            &dir.path().join("two"),
        );
        assert_eq!(runs(&two), runs(&one), "late row {late:?}");
        let global = &two["runs"][0];
        // The busiest labelled second, web2's :07, and the busiest two,
        // web1's :06 with it: counted together.
        assert_eq!(global["whole_seconds"]["offered_low"], 5, "{global}");
        assert_eq!(global["whole_seconds"]["offered_high"], 6, "{global}");
        assert_eq!(global["turned_away_in_log"], 0, "{global}");
        // web2's five at :07 are the worst second, 5 s (6 s with its
        // earliest at :01) after the run's start; the global window lets 4 through.
        let after = if late.is_some() { 6 } else { 5 };
        assert_eq!(
            global["worst_rolling_start_ns"],
            after * 1_000_000_000u64,
            "{global}"
        );
        assert_eq!(
            global["admitted"],
            9 + u64::from(late.is_some()),
            "{global}"
        );
        // 10.0.0.1's two at :07 and its one at :02 (all at 0 s, rebased each
        // from its own first) are seconds apart.
        assert_eq!(two["runs"][1]["rejected"], 0, "{}", two["runs"][1]);
    }
    // Standard input after a file: its rows from 09:00:05 keep their place
    // after the file's first row at :02; before it (at :01), refused.
    let piped = scenario("piped", &["web1.log", "-"]);
    for (stdin, ok) in [
        (line(("10.0.2.1", 5)), true),
        (line(("10.0.2.1", 1)), false),
    ] {
        let run = Command::cargo_bin("burstsim")
            .unwrap()
            .args(["run", "-q", "--no-charts", "--decisions", "--out"])
            .arg(dir.path().join("piped-out"))
            .arg(&piped)
            .write_stdin(stdin)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        if ok {
            assert!(run.status.success(), "{stderr}");
            let decisions =
                fs::read_to_string(dir.path().join("piped-out/decisions/w/global.csv")).unwrap();
            assert!(decisions.contains("\n3000000000,"), "{decisions}");
        } else {
            assert_eq!(run.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains("standard input is read once"), "{stderr}");
        }
    }
}

/// A workload's several traces (one log per server, say) replay as their
/// rows would in one file: the keys they share are one client each, a key
/// only the second names is named as it writes it, and per-key limiters
/// decide every request alike. (Its sources share one numbering of their
/// keys, checked one after the other; with a numbering each, or none,
/// their keys would part or collide.)
#[test]
fn a_workloads_traces_replay_as_their_rows_in_one_file() {
    let dir = tempfile::tempdir().unwrap();
    // 6,000 rows 997,003 ns apart over 30 clients; every ninth from one of
    // two clients only the second file names, the busiest two (the first
    // row of all is theirs, and the second file is numbered second).
    let rows: Vec<(u64, String)> = (0..6000u64)
        .map(|i| {
            let key = if i % 9 == 0 {
                format!("only-b-{}", i % 2)
            } else {
                format!("k{}", (i * 7919) % 30)
            };
            (i * 997_003 + 5, key)
        })
        .collect();
    let write = |name: &str, keep: &dyn Fn(u64, &str) -> bool| {
        let mut text = String::from("time_ns,client\n");
        for (i, (time, key)) in rows.iter().enumerate() {
            if keep(i as u64, key) {
                text += &format!("{time},{key}\n");
            }
        }
        fs::write(dir.path().join(name), text).unwrap();
    };
    write("all.csv", &|_, _| true);
    write("a.csv", &|i, key| i % 2 == 0 && !key.starts_with("only-b"));
    write("b.csv", &|i, key| i % 2 == 1 || key.starts_with("only-b"));
    let source = |file: &str| format!("{{ kind = \"trace\", path = {file:?}, key = \"client\" }}");
    let limiters = "[[limiter]]\nname = \"per-key\"\nkind = \"fixed-window\"\nwindow = \"100ms\"\nthreshold = 3\nper = \"key\"\n\
         [[limiter]]\nname = \"bucket\"\nkind = \"token-bucket\"\nrate = 20\nburst = 4\nper = \"key\"\n\
         [[limiter]]\nname = \"global\"\nkind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 500\n";
    let mut summaries = Vec::new();
    for (name, sources) in [
        ("one", source("all.csv")),
        ("two", format!("{}, {}", source("a.csv"), source("b.csv"))),
    ] {
        let scenario = dir.path().join("s.toml");
        fs::write(
            &scenario,
            format!(
                "duration = \"7s\"\n[[workload]]\nname = \"w\"\nsources = [{sources}]\n{limiters}"
            ),
        )
        .unwrap();
        summaries.push(run_summary(&scenario, &dir.path().join(name)));
    }
    let per_key = |summary: &serde_json::Value| summary["runs"][0].clone();
    assert_eq!(per_key(&summaries[0])["keys"]["keys"], 32);
    assert_eq!(per_key(&summaries[0])["offered"], 6000);
    assert!(
        per_key(&summaries[0])["rejected"].as_u64().unwrap() > 0,
        "the per-key window turns none away: the test would not tell keys apart"
    );
    assert!(
        summaries[0]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|run| run["keys"]["worst_key_name"]
                .as_str()
                .is_some_and(|name| name.starts_with("only-b"))),
        "no worst key of the second file's own: {}",
        summaries[0]["runs"]
    );
    assert_eq!(summaries[0]["runs"], summaries[1]["runs"]);
}

/// Each of a workload's traces names its own first keys in the results,
/// also a key an earlier trace numbered past the ones it names.
#[test]
fn a_key_the_first_trace_leaves_unnamed_is_named_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    // The first file: 10,100 clients once each, "busy" the 10,050th (past
    // the first 10,000 a file names); the second: "busy" 50 times.
    let mut first = String::from("time_ns,client\n");
    for i in 0..10_100u64 {
        let key = if i == 10_049 {
            "busy".to_string()
        } else {
            format!("c{i}")
        };
        first += &format!("{},{key}\n", i * 1000 + 1);
    }
    let mut second = String::from("time_ns,client\n");
    for i in 0..50u64 {
        second += &format!("{},busy\n", 20_000_000 + i * 1000);
    }
    fs::write(dir.path().join("a.csv"), first).unwrap();
    fs::write(dir.path().join("b.csv"), second).unwrap();
    let scenario = dir.path().join("s.toml");
    fs::write(
        &scenario,
        "duration = \"1s\"\n[[workload]]\nname = \"w\"\nsources = [\
         { kind = \"trace\", path = \"a.csv\", key = \"client\" }, \
         { kind = \"trace\", path = \"b.csv\", key = \"client\" }]\n\
         [[limiter]]\nname = \"per-key\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\nper = \"key\"\n",
    )
    .unwrap();
    let summary = run_summary(&scenario, &dir.path().join("out"));
    let keys = &summary["runs"][0]["keys"];
    assert_eq!(keys["keys"], 10_100, "{keys}");
    assert_eq!(keys["worst_key_name"], "busy", "{keys}");
}

/// The counts of busy seconds several whole-second logs keep, to find
/// their busiest second together, are bounded by a stated limit
/// (`MAX_COUNTED_SECONDS`, 2^22 in all): at it, the workload's seconds
/// interval is given; one busy second past it, a warning says it is not,
/// and the run goes on with the seeded figures. (Unbounded, a year of busy
/// seconds kept half a gigabyte.)
#[test]
fn several_logs_count_their_busy_seconds_together_up_to_a_stated_limit() {
    let dir = tempfile::tempdir().unwrap();
    let limit = burstsim::traffic::trace::MAX_COUNTED_SECONDS;
    let write = |name: &str, seconds: u64| {
        let mut text = String::from("time_s\n");
        for second in 0..seconds {
            text += &format!("{second}\n");
        }
        fs::write(dir.path().join(name), text).unwrap();
    };
    write("a.csv", limit / 2);
    let scenario = dir.path().join("s.toml");
    fs::write(
        &scenario,
        "duration = \"25d\"\n[metrics]\nbucket = \"1h\"\n[[workload]]\nname = \"w\"\n\
         sources = [{ kind = \"trace\", path = \"a.csv\", rebase = true }, { kind = \"trace\", path = \"b.csv\", rebase = true }]\n\
         [[limiter]]\nname = \"global\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 4\n",
    )
    .unwrap();
    for (b, kept) in [(limit / 2, true), (limit / 2 + 1, false)] {
        write("b.csv", b);
        let out = dir.path().join(format!("out-{b}"));
        let run = Command::cargo_bin("burstsim")
            .unwrap()
            .args(["run", "-q", "--no-charts", "--out"])
            .arg(&out)
            .arg(&scenario)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        assert_eq!(
            stderr.contains(&format!("more than {limit} busy seconds together")),
            !kept,
            "{stderr}"
        );
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        let global = &summary["runs"][0];
        assert_eq!(global["offered"], limit / 2 + b, "{global}");
        // Every second holds one request of each log (the last of b's, alone).
        assert_eq!(
            global["whole_seconds"]["offered_low"].as_u64(),
            kept.then_some(2),
            "{global}"
        );
    }
}

/// Reading a log allocates nothing per line, in any format (issue #36: a
/// JSON line's status was copied into a `String` of its own, two million
/// allocations for two million lines): checking each shipped sample with
/// every row written four times allocates, on the reading thread (a small
/// file is read on the thread that checks it), what checking the sample
/// does — the same keys, seconds and statuses in four times the lines —
/// give or take a table grown once more.
#[test]
fn reading_a_log_allocates_nothing_per_line_in_any_format() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = fs::read_to_string(SCENARIO).unwrap();
    let mut formats = vec![
        ("combined", "checkout-access.log", "remote_addr", ""),
        ("jsonl", "checkout-access.jsonl", "remote_addr", ""),
        (
            "csv",
            "checkout-access.csv",
            "client",
            r#", time_field = "time", unit = "rfc3339""#,
        ),
    ];
    formats.extend(
        VENDORS
            .iter()
            .map(|&(format, file, key)| (format, file, key, "")),
    );
    for (format, file, key, extra) in formats {
        let text = fs::read_to_string(format!("scenarios/traces/{file}")).unwrap();
        // CSV's header and CloudFront's directives once, each row `times` times.
        let written = |times: usize| {
            let mut out = String::new();
            for (i, line) in text.lines().enumerate() {
                let head = (format == "csv" && i == 0) || line.starts_with('#');
                for _ in 0..if head { 1 } else { times } {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            out
        };
        let checked = |times: usize| {
            let path = dir.path().join(format!("{times}-{file}"));
            fs::write(&path, written(times)).unwrap();
            let source = format!(
                r#"{{ kind = "trace", format = "{format}", path = "{}", key_field = "{key}"{extra} }}"#,
                path.display()
            );
            let text = scenario.replace(SOURCE, &source);
            let scenario_path = dir.path().join("s.toml");
            let mut parsed = None;
            let made = allocation_counter::measure(|| {
                parsed = Some(burstsim::scenario::parse(&text, &scenario_path));
            });
            if let Some(Err(err)) = parsed {
                panic!("{format}: {err}");
            }
            made.count_total
        };
        let rows = text.lines().count() as u64;
        let (once, four) = (checked(1), checked(4));
        assert!(once > 0, "{format}: the allocations are not counted");
        // One allocation per line would be 3 × rows more.
        assert!(
            four <= once + 64,
            "{format}: {once} allocations checking {rows} lines, {four} checking them four times over"
        );
    }
}
