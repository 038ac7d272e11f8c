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
