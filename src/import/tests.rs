//! The importer's own tests (each dialect's are in its file).
use super::*;

#[test]
fn a_byte_order_mark_does_not_hide_the_first_directive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nginx.conf");
    std::fs::write(
        &path,
        "\u{feff}limit_req_zone $a zone=z:1m rate=5r/s;\nserver { location / { limit_req zone=z burst=5; } }\n",
    )
    .unwrap();
    let blocks = import(&path, None).unwrap().blocks;
    assert_eq!(blocks.len(), 1);
    assert_eq!(testing::field(&blocks[0], "burst").as_deref(), Some("5"));
}

#[test]
fn file_names_tell_the_dialect() {
    let of = |name: &str| Dialect::from_name(Path::new(name));
    assert_eq!(of("nginx.conf"), Some(Dialect::Nginx));
    assert_eq!(of("site.conf"), Some(Dialect::Nginx));
    assert_eq!(of("haproxy.cfg"), Some(Dialect::Haproxy));
    assert_eq!(of("application.properties"), Some(Dialect::Spring));
    assert_eq!(of("kong.yaml"), Some(Dialect::Kong));
    assert_eq!(of("traefik-dynamic.yml"), Some(Dialect::Traefik));
    assert_eq!(of("envoy-local-ratelimit.yaml"), Some(Dialect::EnvoyLocal));
    assert_eq!(of("ratelimit-config.yaml"), Some(Dialect::EnvoyRatelimit));
    assert_eq!(of("envoy.yaml"), Some(Dialect::EnvoyLocal));
    assert_eq!(of("config.yaml"), None);
}

#[test]
fn durations_are_exact() {
    assert_eq!(go_duration("1m30s"), Some(Nanos(90_000_000_000)));
    assert_eq!(go_duration("1.5s"), Some(Nanos(1_500_000_000)));
    assert_eq!(go_duration("250ms"), Some(Nanos(250_000_000)));
    assert_eq!(go_duration("10"), None);
    assert_eq!(go_duration("1x"), None);
    assert_eq!(decimal_seconds("0.000000001"), Some(1));
    assert_eq!(decimal_seconds("1.0000000001"), None);
    assert_eq!(duration(1_500_000_000), "1500ms");
    assert_eq!(duration(60_000_000_000), "60s");
}

#[test]
fn text_from_the_file_cannot_break_out_of_a_comment() {
    let mut block = Block::new(
        "a",
        "plugin of x\n[[limiter]]\nkind = \"evil\"".into(),
        "kong",
        "k.yaml:1".into(),
    );
    block.set("second", 5, "k.yaml:2: a\rb".into());
    let text = render(Path::new("k.yaml"), Dialect::Kong, &[block]);
    assert_eq!(
        text.lines().filter(|l| *l == "[[limiter]]").count(),
        1,
        "{text}"
    );
    assert!(text.parse::<toml::Table>().is_ok(), "{text}");
    assert_eq!(comment(&"x".repeat(300)).chars().count(), 201);
}

#[test]
fn names_are_made_safe_and_unique() {
    assert_eq!(safe_name("/api/v1 checkout"), "-api-v1-checkout");
    assert_eq!(safe_name("..x"), "x");
    let block = |name: &str| Block::new(name, String::new(), "kong", String::new());
    let names: Vec<String> = unique_names(vec![block("a"), block("a"), block("b")])
        .into_iter()
        .map(|b| b.name)
        .collect();
    assert_eq!(names, ["a", "a-2", "b"]);
}

/// A location applies its own limit_reqs; one with none inherits all of
/// the nearest enclosing block's (none from further out), as nginx merges
/// them; a dry run there limits nothing.
#[test]
fn a_location_applies_the_limits_nginx_merges_into_it() {
    let text = "http {\n  limit_req_zone $a zone=a:1m rate=1r/s;\n  limit_req_zone $b zone=b:1m rate=2r/s;\n  limit_req zone=a;\n  server {\n    server_name one.example;\n    location /x/ { }\n    location /y/ { limit_req zone=b burst=3; limit_req zone=a; }\n    location /z/ { limit_req_dry_run on; }\n  }\n  server {\n    server_name two.example www.two.example;\n    limit_req zone=b;\n    location /x/ { location /x/deep/ { } }\n  }\n}\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nginx.conf");
    std::fs::write(&path, text).unwrap();
    let places = import(&path, None).unwrap().places;
    let zones =
        |place: &Place| -> Vec<String> { place.layers.iter().map(|l| l.name.clone()).collect() };
    type Found<'a> = (&'a str, Vec<String>, Vec<String>, Option<&'a str>, bool);
    let found: Vec<Found> = places
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.servers.clone(),
                zones(p),
                p.inherited.as_deref(),
                p.dry_run,
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        found,
        [
            ("/x/", s(&["one.example"]), s(&["a"]), Some("http"), false),
            ("/y/", s(&["one.example"]), s(&["b", "a"]), None, false),
            ("/z/", s(&["one.example"]), s(&["a"]), Some("http"), true),
            (
                "/x/",
                s(&["two.example", "www.two.example"]),
                s(&["b"]),
                Some("http › server"),
                false
            ),
            (
                "/x/deep/",
                s(&["two.example", "www.two.example"]),
                s(&["b"]),
                Some("http › server"),
                false
            ),
        ]
    );
    let y = &places[1];
    assert!(
        y.at.starts_with("nginx.conf:8: http › server › location /y/"),
        "{}",
        y.at
    );
    // Two limits: a chain that counts nothing a later layer rejects.
    let table = y.table();
    assert_eq!(table["kind"].as_str(), Some("chain"));
    assert_eq!(table["count_rejected"].as_bool(), Some(false));
    let layers = table["layers"].as_array().unwrap();
    assert_eq!(layers[0]["rate"].as_str(), Some("2r/s"));
    assert_eq!(layers[0]["burst"].as_integer(), Some(3));
    assert_eq!(layers[1]["rate"].as_str(), Some("1r/s"));
    // One limit: the limit itself.
    assert_eq!(places[0].table()["kind"].as_str(), Some("nginx-limit-req"));

    // Chosen by `from`, by location and, where it is ambiguous, server.
    let from = |extra: &str| taken(dir.path(), "nginx.conf", extra);
    let (name, table) = from("location = \"/y/\"").unwrap();
    assert_eq!(name, "location /y/");
    assert_eq!(table["kind"].as_str(), Some("chain"));
    let err = from("location = \"/x/\"").unwrap_err();
    assert!(err.contains("2 blocks are location \"/x/\""), "{err}");
    assert!(err.contains("say which with server"), "{err}");
    let (_, table) = from("location = \"/x/\", server = \"www.two.example\"").unwrap();
    assert_eq!(table["rate"].as_str(), Some("2r/s"));
    let err = from("location = \"/x/\", server = \"three.example\"").unwrap_err();
    assert!(err.contains("no server named \"three.example\""), "{err}");
    let err = from("location = \"/z/\"").unwrap_err();
    assert!(err.contains("limit_req_dry_run on"), "{err}");
    let err = from("location = \"/w/\"").unwrap_err();
    assert!(
        err.contains(
            "has no location \"/w/\"; it has \"/x/\", \"/y/\", \"/z/\", \"/x/\", \"/x/deep/\""
        ),
        "{err}"
    );
    let err = from("location = \"/y/\", zone = \"a\"").unwrap_err();
    assert!(err.contains("not both"), "{err}");
}

/// `from = { file, router }` takes a Traefik router's rateLimit middlewares
/// as the chain Traefik applies: each counts what it passed, and a delayed
/// request reaches the next one late.
#[test]
fn a_router_is_taken_whole_from_a_traefik_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("traefik.yaml"),
        "http:\n  routers:\n    api:\n      middlewares: [site, client]\n    one:\n      middlewares: [client]\n  middlewares:\n    site:\n      rateLimit: { average: 100, burst: 50 }\n    client:\n      rateLimit: { average: 10 }\n",
    )
    .unwrap();
    let from = |extra: &str| taken(dir.path(), "traefik.yaml", extra);
    let (name, table) = from("router = \"api\"").unwrap();
    assert_eq!(name, "router api");
    assert_eq!(table["kind"].as_str(), Some("chain"));
    assert_eq!(table["delays"].as_str(), Some("add-up"));
    let config = crate::limiter::LimiterConfig::from_table(table).unwrap();
    assert!(config.build(crate::limiter::Context::default()).is_ok());
    let (_, table) = from("router = \"one\"").unwrap();
    assert_eq!(table["kind"].as_str(), Some("traefik"));
    let err = from("router = \"web\"").unwrap_err();
    assert!(
        err.contains("has no router \"web\"; it has \"api\", \"one\""),
        "{err}"
    );
    let err = from("router = \"api\", location = \"/\"").unwrap_err();
    assert!(err.contains("not both"), "{err}");
}

/// What `from = { file = "<file>", <extra> }` takes from `dir`: its name and
/// table, or the error as text.
fn taken(dir: &Path, file: &str, extra: &str) -> Result<(String, toml::Table), String> {
    let value = toml::from_str::<toml::Table>(&format!("v = {{ file = {file:?}, {extra} }}"))
        .unwrap()["v"]
        .clone();
    from_table(value, dir)
        .map(|f| (f.name, f.table))
        .map_err(|e| e.to_string())
}
