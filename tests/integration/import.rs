//! `burstsim import`: each sample configuration under `scenarios/configs/`
//! becomes limiter blocks that `validate` accepts and `run` simulates; a
//! construct it does not understand is an error at its line; `from = { … }`
//! imports at run time to the same results as the pasted blocks.

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn burstsim() -> Command {
    Command::cargo_bin("burstsim").unwrap()
}

/// `burstsim import` of `path`, which must succeed: its standard output.
fn import(path: &Path, extra: &[&str]) -> String {
    let output = burstsim()
        .arg("import")
        .arg(path)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "import {}: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs the scenario `file` into `out`, which must succeed: its summary.json.
fn run(file: &Path, out: &Path) -> Vec<u8> {
    burstsim()
        .args(["run", "-q", "--no-charts", "--out"])
        .arg(out)
        .arg(file)
        .assert()
        .success();
    fs::read(out.join("summary.json")).unwrap()
}

/// A scenario replaying keyed traffic through `limiters` (scenario text).
fn scenario(limiters: &str) -> String {
    format!(
        "name = \"imported\"\nduration = \"3s\"\nseed = 5\n[backend]\ncapacity = 150\n\
         [[workload]]\nname = \"crowd\"\nsources = [\n  {{ kind = \"poisson\", rate = 400, clients = {{ count = 50 }} }},\n  \
         {{ kind = \"boundary\", period = \"1s\", before = 200, after = 200, spread = \"50ms\", clients = {{ count = 50 }} }},\n]\n\n{limiters}"
    )
}

/// Every sample: a file; a folder's `nginx.conf` where the folder is a tree
/// it includes (it has folders of its own); or each file of a folder of
/// samples (`probe/`, the configurations `burstsim probe` is tested against).
fn configs() -> Vec<std::path::PathBuf> {
    let entries = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    let mut paths = Vec::new();
    for path in entries(std::path::Path::new("scenarios/configs")) {
        if !path.is_dir() {
            paths.push(path);
        } else if entries(&path).iter().any(|p| p.is_dir()) {
            paths.push(path.join("nginx.conf"));
        } else {
            paths.extend(entries(&path));
        }
    }
    paths.sort();
    paths
}

#[test]
fn every_sample_config_imports_to_blocks_that_validate_and_run() {
    let paths = configs();
    assert_eq!(
        paths.len(),
        13,
        "the seven gateway dialects' samples, the Debian tree, probe's nginx and HAProxy, and java's Sentinel rules, Spring Boot application.yml and Bucket4j starter properties: {paths:?}"
    );
    let mut kinds = std::collections::BTreeSet::new();
    for path in paths {
        let blocks = import(&path, &[]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("imported.toml");
        fs::write(&file, scenario(&blocks)).unwrap();
        burstsim()
            .arg("validate")
            .arg(&file)
            .assert()
            .success()
            .stdout(predicate::str::contains("is valid"));
        let summary: Value = serde_json::from_slice(&run(&file, &dir.path().join("out"))).unwrap();
        let runs = summary["runs"].as_array().unwrap();
        let blocks_in_text = blocks.lines().filter(|l| *l == "[[limiter]]").count();
        assert_eq!(runs.len(), blocks_in_text, "{}: {blocks}", path.display());
        for run in runs {
            assert!(
                run["admitted"].as_u64().unwrap() > 0,
                "{}: {run}",
                path.display()
            );
            kinds.insert(run["kind"].as_str().unwrap_or_default().to_string());
        }
        // Every value line says where it came from.
        for line in blocks
            .lines()
            .filter(|l| l.contains(" = ") && !l.starts_with('#'))
        {
            assert!(
                line.contains("  # "),
                "{}: no provenance on {line:?}",
                path.display()
            );
        }
    }
    for kind in [
        "nginx-limit-req",
        "envoy-local",
        "envoy-ratelimit",
        "kong",
        "traefik",
        "haproxy-rate",
        "spring-cloud-gateway",
        "sentinel",
        "resilience4j",
        "bucket4j",
    ] {
        assert!(kinds.contains(kind), "no {kind} among {kinds:?}");
    }
}

#[test]
fn imported_values_are_the_files_own() {
    let nginx = import(Path::new("scenarios/configs/nginx.conf"), &[]);
    assert!(nginx.contains("rate = \"20r/s\""), "{nginx}");
    assert!(nginx.contains("burst = 40"), "{nginx}");
    assert!(nginx.contains("# nginx.conf:12: rate=20r/s"), "{nginx}");
    // $server_name is one value per server: one state for every request.
    let site = nginx.split("name = \"site\"").nth(1).unwrap();
    assert!(!site.contains("per = "), "{site}");
    let haproxy = import(Path::new("scenarios/configs/haproxy.cfg"), &[]);
    assert!(
        haproxy.contains("limit = 20") && haproxy.contains("period = \"1s\""),
        "{haproxy}"
    );
    let kong = import(Path::new("scenarios/configs/kong.yaml"), &[]);
    assert!(
        kong.contains("minute = 3000") && kong.contains("policy = \"redis\""),
        "{kong}"
    );
    let service = import(Path::new("scenarios/configs/ratelimit-config.yaml"), &[]);
    // The unlimited descriptor gives no limiter; the nested one does.
    assert_eq!(
        service.lines().filter(|l| *l == "[[limiter]]").count(),
        3,
        "{service}"
    );
    assert!(service.contains("unit = \"minute\""), "{service}");
}

/// Writes `text` as `name` in a fresh folder and imports it, expecting exit 2.
fn refused(name: &str, text: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::write(&path, text).unwrap();
    let output = burstsim()
        .arg("import")
        .arg(&path)
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{name}: {output:?}");
    assert!(output.stdout.is_empty(), "{name}: printed blocks anyway");
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn an_unsupported_construct_is_an_error_at_its_line() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "nginx.conf",
            "http {\n  limit_req zone=missing burst=5;\n}\n",
            "nginx.conf:2:13: limit_req: zone \"missing\" is not defined",
        ),
        (
            "haproxy.cfg",
            "frontend f\n  stick-table type ip size 1k store http_req_rate(1s)\n  http-request track-sc0 src\n  http-request tarpit if { sc_http_req_rate(0) gt 5 }\n",
            "haproxy.cfg:4:16: http-request tarpit on a rate: only http-request deny",
        ),
        (
            "haproxy.cfg",
            "frontend f\n  stick-table type ip size 1k store conn_rate(1s)\n  http-request track-sc0 src\n  http-request deny if { sc_conn_rate(0) gt 5 }\n",
            "haproxy.cfg:4:26: sc_conn_rate(0): only the tracked HTTP request rate",
        ),
        (
            "envoy.yaml",
            "typed_config:\n  \"@type\": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit\n  stat_prefix: rl\n  token_bucket: { max_tokens: 5, fill_interval: 1s }\n",
            "envoy.yaml:2:3: filter_enabled is not set: Envoy then applies the limit to 0% of requests",
        ),
        (
            "ratelimit.yaml",
            "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: true\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
            "ratelimit.yaml:4:18: shadow_mode",
        ),
        (
            "kong.yaml",
            "_format_version: \"3.0\"\nplugins:\n  - name: rate-limiting-advanced\n    config: { limit: [5], window_size: [30] }\n",
            "kong.yaml:3:11: rate-limiting-advanced: not modelled",
        ),
        (
            "kong.yaml",
            "plugins:\n  - name: rate-limiting\n    config: { second: 5, sync_rate: 10 }\n",
            "kong.yaml:3:37: sync_rate: 10 batches counters",
        ),
        (
            "traefik.yaml",
            "http:\n  middlewares:\n    rl:\n      rateLimit:\n        average: 5\n        redis: { endpoints: [\"r:6379\"] }\n",
            "traefik.yaml:6:16: redis: a distributed rate limiter is not modelled",
        ),
        (
            "app.properties",
            "spring.cloud.gateway.routes[0].id=a\nspring.cloud.gateway.routes[0].filters[0].name=RequestRateLimiter\nspring.cloud.gateway.routes[0].filters[0].args.rate-limiter=#{@mine}\n",
            "app.properties:3:",
        ),
    ];
    for (name, text, expected) in cases {
        let err = refused(name, text, &[]);
        assert!(
            err.contains(expected),
            "{name}: expected {expected:?} in:\n{err}"
        );
        assert!(
            err.contains("supported")
                || err.contains("set it")
                || err.contains("nothing to")
                || err.contains("model it")
                || err.contains("not defined"),
            "{name}: no way out in {err}"
        );
    }
}

#[test]
fn the_dialect_comes_from_the_name_or_format() {
    let text = fs::read_to_string("scenarios/configs/kong.yaml").unwrap();
    let err = refused("gateway.yaml", &text, &[]);
    assert!(
        err.contains("give --format nginx|envoy-local|envoy-ratelimit|kong|traefik|haproxy|spring"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.yaml");
    fs::write(&path, &text).unwrap();
    let blocks = import(&path, &["--format", "kong"]);
    assert_eq!(blocks.matches("kind = \"kong\"").count(), 2, "{blocks}");
}

#[test]
fn a_config_without_limits_says_what_it_reads() {
    let err = refused("nginx.conf", "http { server { listen 80; } }\n", &[]);
    assert!(
        err.contains("no rate limit found") && err.contains("limit_req_zone"),
        "{err}"
    );
}

#[test]
fn from_at_run_time_gives_the_results_of_the_pasted_blocks() {
    let configs = fs::canonicalize("scenarios/configs").unwrap();
    for (file, zones) in [
        ("nginx.conf", ["per_client", "site"]),
        ("java/bucket4j.yml", ["checkout", "api-per-client"]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let pasted = import(&configs.join(file), &[]);
        let from: String = zones
            .iter()
            .map(|zone| {
                format!(
                    "[[limiter]]\nname = \"{zone}\"\nfrom = {{ file = \"{}/{file}\", zone = \"{zone}\" }}\n\n",
                    configs.display()
                )
            })
            .collect();
        let mut summaries = Vec::new();
        for (name, limiters) in [("pasted", pasted.as_str()), ("from", from.as_str())] {
            let file = dir.path().join(format!("{name}.toml"));
            fs::write(&file, scenario(limiters)).unwrap();
            summaries.push(run(&file, &dir.path().join(name)));
        }
        assert!(
            summaries[0] == summaries[1],
            "{file}: from = {{ … }} differs from the pasted blocks"
        );
    }
}

#[test]
fn a_bad_from_is_an_error_at_the_scenarios_line() {
    let dir = tempfile::tempdir().unwrap();
    let configs = fs::canonicalize("scenarios/configs").unwrap();
    let file = dir.path().join("s.toml");
    let limiter = format!(
        "[[limiter]]\nname = \"x\"\nfrom = {{ file = \"{}/nginx.conf\", zone = \"nope\" }}\n",
        configs.display()
    );
    let text = scenario(&limiter);
    fs::write(&file, &text).unwrap();
    let line = text.lines().position(|l| l.starts_with("from")).unwrap() + 1;
    // The caret stands under the zone's value itself, not the table.
    let column = text
        .lines()
        .nth(line - 1)
        .unwrap()
        .find("\"nope\"")
        .unwrap()
        + 1;
    burstsim()
        .arg("validate")
        .arg(&file)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "s.toml:{line}:{column}: limiter \"x\": from.zone: "
        )))
        .stderr(predicate::str::contains(
            "has no limiter \"nope\"; it has \"per_client\", \"site\"",
        ));
}

/// Imports `text` as `name`, within `seconds`: its exit code and stderr.
fn import_within(name: &str, text: &str, seconds: u64) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::write(&path, text).unwrap();
    let started = std::time::Instant::now();
    let output = burstsim()
        .arg("import")
        .arg(&path)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(seconds),
        "{name}: {:?}",
        started.elapsed()
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn deep_nginx_nesting_with_long_names_imports_in_linear_time() {
    // Once every directive copied its whole context: 14 s and 5.9 GB here
    // for 60 blocks of 10 kB names over 10,000 directives.
    let mut text =
        String::from("http {\nlimit_req_zone $binary_remote_addr zone=z:10m rate=5r/s;\n");
    for depth in 0..60 {
        text.push_str(&format!("location /{}{depth} {{\n", "a".repeat(10_000)));
    }
    for k in 0..10_000 {
        text.push_str(&format!("set $v{k} {k};\n"));
    }
    text.push_str("limit_req zone=z;\n");
    text.push_str(&"}\n".repeat(61));
    let (code, stderr) = import_within("nginx.conf", &text, 10);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn many_rate_limits_are_refused_at_the_first_beyond_the_limit_in_linear_time() {
    // nginx: 5,000 locations with a limit each.
    let mut text = String::from("http {\n");
    for i in 0..5_000 {
        text.push_str(&format!(
            "limit_req_zone $binary_remote_addr zone=z{i}:10m rate=5r/s;\n"
        ));
    }
    text.push_str("server {\n");
    for i in 0..5_000 {
        text.push_str(&format!("location /p{i} {{ limit_req zone=z{i}; }}\n"));
    }
    text.push_str("}\n}\n");
    let (code, stderr) = import_within("nginx.conf", &text, 10);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("nginx.conf:6003:")
            && stderr.contains("5000 rate limits, more than the 1000"),
        "{stderr}"
    );
    // HAProxy: 30,000 named acls, each used by a deny: looking each acl's
    // line up again from the top was quadratic (1.4 s for half as many).
    let mut text = String::from(
        "frontend f\n  stick-table type ip size 100k expire 30s store http_req_rate(10s)\n  http-request track-sc0 src\n",
    );
    for i in 0..30_000 {
        text.push_str(&format!("  acl a{i} sc_http_req_rate(0) gt 20\n"));
    }
    for i in 0..30_000 {
        text.push_str(&format!("  http-request deny if a{i}\n"));
    }
    let (code, stderr) = import_within("haproxy.cfg", &text, 5);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("haproxy.cfg:31004:"), "{stderr}");
}

/// Writes `files` (path, text) under a fresh folder.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    dir
}

/// The Debian layout: zones in conf.d, limits in sites-enabled, a
/// connection limit beside them. Imported from nginx.conf, the includes are
/// followed (absolute /etc/nginx/ paths read in the tree), each value says
/// the real file and line, and the connection limits are warnings; with
/// `--strict` they refuse the import.
#[test]
fn a_debian_tree_is_imported_through_its_includes_with_warnings() {
    let path = Path::new("scenarios/configs/debian-nginx/nginx.conf");
    let output = burstsim().arg("import").arg(path).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let (stdout, stderr) = (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    );
    assert_eq!(
        stdout.lines().filter(|l| *l == "[[limiter]]").count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.contains("rate = \"100r/s\"           # conf.d/ratelimit.conf:4: rate=100r/s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("burst = 50                # sites-enabled/shop:7: burst=50"),
        "{stdout}"
    );
    assert!(
        stdout.contains("per = \"key\"               # conf.d/ratelimit.conf:3"),
        "{stdout}"
    );
    for warning in [
        "conf.d/ratelimit.conf:5:1: limit_conn_zone: limits connections",
        "sites-enabled/shop:4:5: limit_conn: limits connections",
    ] {
        assert!(stderr.contains(warning), "{warning} not in {stderr}");
    }
    assert!(stderr.contains("stands in for /etc/nginx/"), "{stderr}");
    let err = refused(
        "nginx.conf",
        &fs::read_to_string(path).unwrap(),
        &["--strict"],
    );
    // Copied alone, its includes find nothing: a warning each for the
    // plain file it names, and no limit at all.
    assert!(err.contains("no rate limit found"), "{err}");
    let output = burstsim()
        .args(["import", "--strict"])
        .arg(path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("--strict: 2 constructs"), "{stderr}");
    assert!(stderr.contains("conf.d/ratelimit.conf:5:1"), "{stderr}");
}

/// Includes as nginx reads them: relative to the imported file's folder, a
/// glob's files in sorted order inside the including block, a missing plain
/// file a warning, a cycle an error naming its chain.
#[test]
fn includes_follow_nginx_order_and_refuse_cycles() {
    let dir = tree(&[
        (
            "nginx.conf",
            "http {\n  include zones/*.conf;\n  include missing.conf;\n  server { location / { limit_req zone=b; limit_req zone=a; } }\n}\n",
        ),
        (
            "zones/b.conf",
            "limit_req_zone $host zone=b:1m rate=2r/s;\n",
        ),
        (
            "zones/a.conf",
            "limit_req_zone $host zone=a:1m rate=1r/s;\n",
        ),
        ("zones/.hidden.conf", "this is not nginx;\n"),
    ]);
    let output = burstsim()
        .arg("import")
        .arg(dir.path().join("nginx.conf"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    // Blocks in the order of the limit_req lines; values from each zone's file.
    let b = stdout.find("name = \"b\"").unwrap();
    let a = stdout.find("name = \"a\"").unwrap();
    assert!(b < a, "{stdout}");
    assert!(stdout.contains("# zones/a.conf:1: rate=1r/s"), "{stdout}");
    assert!(
        stdout.contains("(in http › server › location /)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("nginx.conf:3:11: include missing.conf: no such file"),
        "{stderr}"
    );

    let dir = tree(&[
        ("nginx.conf", "http {\n  include a.conf;\n}\n"),
        (
            "a.conf",
            "limit_req_zone $host zone=z:1m rate=1r/s;\ninclude b.conf;\n",
        ),
        ("b.conf", "include a.conf;\n"),
    ]);
    let output = burstsim()
        .arg("import")
        .arg(dir.path().join("nginx.conf"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("a cycle of includes: nginx.conf:2 → a.conf:2 → b.conf:1 → a.conf"),
        "{stderr}"
    );
}

/// An `nginx -T` dump is read as the files it holds: includes find them by
/// the paths nginx wrote, and each value names its real file and line.
#[test]
fn an_nginx_dump_is_read_as_its_files() {
    let dump = "# configuration file /etc/nginx/nginx.conf:\nhttp {\n    include /etc/nginx/conf.d/*.conf;\n    server {\n        location /api/ { limit_req zone=api burst=5; }\n    }\n}\n\n# configuration file /etc/nginx/conf.d/zones.conf:\nlimit_req_zone $binary_remote_addr zone=api:1m rate=20r/s;\n";
    let dir = tree(&[("dump.conf", dump)]);
    let stdout = import(&dir.path().join("dump.conf"), &["--format", "nginx"]);
    assert!(
        stdout.contains("rate = \"20r/s\"            # /etc/nginx/conf.d/zones.conf:1: rate=20r/s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# /etc/nginx/nginx.conf:4: burst=5"),
        "{stdout}"
    );
}

/// Limits each instance keeps on its own say so with the lines that model
/// several; shared ones (a Redis-backed service, Kong's redis policy) do
/// not. A scenario that imports one with `from` and has no cluster warns
/// once, naming them all.
#[test]
fn per_instance_limits_say_so_and_a_scenario_without_a_cluster_warns_once() {
    let note = "kept by each";
    for (sample, instance) in [
        ("nginx.conf", Some("nginx server")),
        ("envoy-local.yaml", Some("Envoy instance")),
        ("traefik.yaml", Some("Traefik instance")),
        ("haproxy.cfg", Some("HAProxy process")),
        ("ratelimit-config.yaml", None),
        ("gateway.properties", None),
    ] {
        let blocks = import(&Path::new("scenarios/configs").join(sample), &[]);
        match instance {
            Some(instance) => assert!(
                blocks.contains(&format!("{note} {instance}")),
                "{sample}: {blocks}"
            ),
            None => assert!(!blocks.contains(note), "{sample}: {blocks}"),
        }
    }
    let dir = tree(&[
        (
            "kong.yaml",
            "plugins:\n  - name: rate-limiting\n    config: { second: 5, policy: redis }\nservices:\n  - name: s\n    plugins:\n      - name: rate-limiting\n        instance_name: local\n        config: { second: 5 }\n",
        ),
        (
            "nginx.conf",
            "limit_req_zone $server_name zone=site:1m rate=5r/s;\nlimit_req zone=site burst=2;\n",
        ),
    ]);
    let kong = import(&dir.path().join("kong.yaml"), &[]);
    assert_eq!(
        kong.matches("kept by each Kong node").count(),
        1,
        "only policy local: {kong}"
    );
    let scenario = |cluster: &str| {
        format!(
            "name = \"s\"\nduration = \"2s\"\n{cluster}[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 10 }}]\n\
             [[limiter]]\nname = \"a\"\nfrom = {{ file = \"nginx.conf\", zone = \"site\" }}\n\
             [[limiter]]\nname = \"b\"\nfrom = {{ file = \"nginx.conf\", zone = \"site\" }}\n"
        )
    };
    let file = dir.path().join("s.toml");
    fs::write(&file, scenario("")).unwrap();
    let output = burstsim().arg("validate").arg(&file).output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.matches("warning:").count(), 1, "{stderr}");
    assert!(
        stderr.contains("a, b imported: each nginx server keeps its own count"),
        "{stderr}"
    );
    fs::write(&file, scenario("[cluster]\ninstances = 2\n")).unwrap();
    let output = burstsim().arg("validate").arg(&file).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        !String::from_utf8(output.stderr)
            .unwrap()
            .contains("keeps its own count")
    );
}

/// `import --chain` prints each location as nginx applies it: the sample
/// tree's /api/ as a chain of its two zones in the order written, which
/// `count_rejected = false` keeps from counting what a later zone rejects;
/// pasted into a scenario it runs. A scenario takes the same chain with
/// `from = { file, location }`, and a chain's layers may each be `from`;
/// a location or zone that is not there is an error at its column.
#[test]
fn a_location_is_imported_as_the_chain_nginx_applies() {
    let path = Path::new("scenarios/configs/debian-nginx/nginx.conf");
    let output = burstsim()
        .args(["import", "--chain"])
        .arg(path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let document: toml::Table = toml::from_str(&stdout).unwrap();
    let limiters = document["limiter"].as_array().unwrap();
    assert_eq!(limiters.len(), 1, "/static/ applies no limit: {stdout}");
    let api = limiters[0].as_table().unwrap();
    assert_eq!(api["name"].as_str(), Some("api"));
    assert_eq!(api["kind"].as_str(), Some("chain"));
    assert_eq!(api["count_rejected"].as_bool(), Some(false));
    let rates: Vec<&str> = api["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["rate"].as_str().unwrap())
        .collect();
    assert_eq!(
        rates,
        ["100r/s", "10r/s"],
        "in the order of the limit_req lines"
    );
    assert!(
        stdout.contains("# location /api/ (sites-enabled/shop:6: http › server › location /api/)"),
        "{stdout}"
    );

    let dir = tempfile::tempdir().unwrap();
    let scenario = |limiter: &str| {
        let file = dir.path().join("s.toml");
        fs::write(
            &file,
            format!(
                "name = \"s\"\nduration = \"2s\"\n[backend]\ncapacity = 120\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"poisson\", rate = 300 }}]\n{limiter}\n"
            ),
        )
        .unwrap();
        file
    };
    // Runs `limiter` into folder `out` and reads its summary's runs.
    let runs = |out: &str, limiter: &str| -> Value {
        let file = scenario(limiter);
        let folder = dir.path().join(out);
        burstsim()
            .args(["run", "--no-charts", "--quiet", "--out"])
            .arg(&folder)
            .arg(&file)
            .assert()
            .success();
        let summary: Value =
            serde_json::from_slice(&fs::read(folder.join("summary.json")).unwrap()).unwrap();
        summary["runs"].clone()
    };
    let pasted = runs("pasted", &stdout);
    let root = fs::canonicalize(".").unwrap();
    let config = root.join(path);
    let config = config.display();
    let taken = runs(
        "taken",
        &format!(
            "[[limiter]]\nname = \"api\"\nfrom = {{ file = {config:?}, location = \"/api/\" }}"
        ),
    );
    assert!(taken.as_array().is_some_and(|r| r.len() == 1), "{taken}");
    assert_eq!(pasted, taken);

    let layered = runs(
        "layered",
        &format!(
            "[[limiter]]\nname = \"api\"\nkind = \"chain\"\ncount_rejected = false\nlayers = [{{ from = {{ file = {config:?}, zone = \"site\" }} }}, {{ from = {{ file = {config:?}, zone = \"per_client\" }} }}]"
        ),
    );
    assert_eq!(layered, taken);

    let missing = scenario(&format!(
        "[[limiter]]\nname = \"api\"\nkind = \"chain\"\nlayers = [{{ kind = \"sliding-log\", window = \"1s\", threshold = 5 }}, {{ from = {{ file = {config:?}, zone = \"nope\" }} }}]"
    ));
    burstsim()
        .args(["run", "--out"])
        .arg(dir.path().join("missing"))
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "limiter \"api\": layers[1].from.zone: ",
        ))
        .stderr(predicate::str::contains(
            "has no limiter \"nope\"; it has \"site\", \"per_client\"",
        ));
    let nowhere = scenario(&format!(
        "[[limiter]]\nname = \"api\"\nfrom = {{ file = {config:?}, location = \"/static/\" }}"
    ));
    burstsim()
        .args(["run", "--out"])
        .arg(dir.path().join("nowhere"))
        .arg(&nowhere)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("from.location: "))
        .stderr(predicate::str::contains(
            "no limit_req applies in location \"/static/\"",
        ));
}

/// A limit keyed by the request's Host (Traefik's `requestHost`, nginx's
/// `$host`) imports as `per = "host"`: synthetic clients of one site share
/// its one bucket, as Traefik holds them (a bucket per client, as the import
/// made it before, let 3× the site's limit through); a trace naming each
/// request's Host with `host_field` gives each tenant its own.
#[test]
fn a_host_keyed_limit_keeps_a_state_per_host_not_per_client() {
    let dir = tree(&[
        (
            "traefik.yaml",
            "http:\n  middlewares:\n    site:\n      rateLimit:\n        average: 100\n        burst: 50\n        sourceCriterion:\n          requestHost: true\n",
        ),
        (
            "nginx.conf",
            "http {\n  limit_req_zone $host zone=tenant:1m rate=10r/s;\n  server { location / { limit_req zone=tenant burst=3 nodelay; } }\n}\n",
        ),
        (
            "tenants.csv",
            "time_ns,host,client\n0,a.shop,1\n0,b.shop,2\n0,a.shop,3\n0,b.shop,4\n0,a.shop,5\n0,b.shop,6\n0,a.shop,7\n0,b.shop,8\n0,a.shop,9\n0,b.shop,10\n0,a.shop,11\n0,b.shop,12\n",
        ),
    ]);
    let traefik = import(&dir.path().join("traefik.yaml"), &[]);
    assert!(traefik.contains("per = \"host\""), "{traefik}");
    let nginx = import(&dir.path().join("nginx.conf"), &[]);
    assert!(nginx.contains("per = \"host\""), "{nginx}");

    let worst = |limiter: &str, workload: &str| -> (u64, u64) {
        let scenario = dir.path().join("s.toml");
        fs::write(
            &scenario,
            format!(
                "name = \"s\"\nduration = \"4s\"\nseed = 1\n[backend]\ncapacity = 150\n[[workload]]\nname = \"w\"\n{workload}\n[[limiter]]\nname = \"l\"\n{limiter}\n"
            ),
        )
        .unwrap();
        let out = dir.path().join("out");
        burstsim()
            .args(["run", "--no-charts", "--quiet", "--out"])
            .arg(&out)
            .arg(&scenario)
            .assert()
            .success();
        let summary: Value =
            serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
        let run = &summary["runs"][0];
        (
            run["admitted"].as_u64().unwrap(),
            run["worst_rolling"].as_u64().unwrap(),
        )
    };
    let crowd = "sources = [{ kind = \"poisson\", rate = 600, clients = { count = 1000 } }]";
    let (_, per_host) = worst("from = { file = \"traefik.yaml\" }", crowd);
    assert!(per_host <= 151, "one site, one bucket: {per_host}");
    let (_, per_client) = worst("from = { file = \"traefik.yaml\" }\nper = \"key\"", crowd);
    assert!(per_client > 300, "a bucket per client: {per_client}");

    let trace = |host: &str| {
        format!(
            "sources = [{{ kind = \"trace\", path = \"tenants.csv\", key_field = \"client\"{host} }}]"
        )
    };
    // 12 requests at once, alternating two Hosts: burst 3 + 1 each.
    let (tenants, _) = worst(
        "from = { file = \"nginx.conf\" }",
        &trace(", host_field = \"host\""),
    );
    assert_eq!(tenants, 8);
    let (one_site, _) = worst("from = { file = \"nginx.conf\" }", &trace(""));
    assert_eq!(
        one_site, 4,
        "without host_field every request names one site"
    );
}

/// What a configuration can make large is refused before the work: blocks
/// nested past 64 (every location's limits are found by walking out of it),
/// and `--chain` printing more than 10,000 limits over all its places
/// (locations share a level's limits, so a file of 1,000 can print millions).
#[test]
fn deep_nesting_and_a_huge_chain_listing_are_refused() {
    let deep = format!(
        "http {{ limit_req_zone $a zone=z:1m rate=1r/s; limit_req zone=z;\n{}{}}}\n",
        "location /x { ".repeat(100),
        "} ".repeat(100)
    );
    let err = refused("nginx.conf", &deep, &["--chain"]);
    assert!(err.contains("blocks nested more than 64 deep"), "{err}");

    let mut wide = String::from("http {\n  limit_req_zone $a zone=z:1m rate=1r/s;\n  server {\n");
    for _ in 0..1_000 {
        wide.push_str("    limit_req zone=z;\n");
    }
    for i in 0..11 {
        wide.push_str(&format!("    location /{i}/ {{ }}\n"));
    }
    wide.push_str("  }\n}\n");
    let err = refused("nginx.conf", &wide, &["--chain"]);
    assert!(
        err.contains(
            "--chain: 11000 limits over all the places that apply them, more than the 10000"
        ),
        "{err}"
    );
    // Without --chain the same file imports: its 1,000 limits are within bounds.
    let dir = tree(&[("nginx.conf", &wide)]);
    burstsim()
        .arg("import")
        .arg(dir.path().join("nginx.conf"))
        .assert()
        .success();
}
