use crate::import::Dialect;
use crate::import::testing::{field, read_text};

const NEW: &str = "\
bucket4j:
  cache-to-use: jcache
  filters:
  - id: api
    cache-name: buckets
    url: /api/.*
    rate-limits:
    - cache-key: getRemoteAddr()
      bandwidths:
      - capacity: 10
        time: 1
        unit: minutes
        refill-speed: interval
      - capacity: 5
        refill-capacity: 1
        time: 200
        unit: millis
        initial-capacity: 2
  - url: /checkout
    strategy: all
    hide-http-response-headers: true
    rate-limits:
    - bandwidths:
      - capacity: 100
        time: 1
        unit: seconds
    - cache-key: \"@user.name()\"
      bandwidths:
      - capacity: 3
        time: 1
        unit: seconds
";

#[test]
fn filters_become_buckets_with_their_bandwidths_keys_and_header() {
    let blocks = read_text("application.yml", NEW, Dialect::Bucket4j).unwrap();
    assert_eq!(blocks.len(), 2);
    let api = &blocks[0];
    assert_eq!(api.name, "api");
    assert_eq!(field(api, "kind").as_deref(), Some("\"bucket4j\""));
    assert_eq!(
        field(api, "bandwidths").as_deref(),
        Some(
            "[{ capacity = 10, refill = \"intervally\", refill_period = \"60s\" }, { capacity = 5, initial_tokens = 2, refill = \"greedy\", refill_period = \"200ms\", refill_tokens = 1 }]"
        )
    );
    assert_eq!(field(api, "per").as_deref(), Some("\"key\""));
    assert_eq!(field(api, "retry_after_seconds").as_deref(), Some("true"));
    assert!(
        api.notes.iter().any(|n| n.contains("/api/.*")),
        "{:?}",
        api.notes
    );
    assert!(
        api.notes.iter().any(|n| n.contains("shared cache")),
        "{:?}",
        api.notes
    );
    // strategy all: a chain, the tokens an earlier layer took kept; no header.
    let checkout = &blocks[1];
    assert_eq!(checkout.name, "filter-1");
    assert_eq!(field(checkout, "kind").as_deref(), Some("\"chain\""));
    assert_eq!(field(checkout, "count_rejected").as_deref(), Some("true"));
    let layers = field(checkout, "layers").unwrap();
    assert!(!layers.contains("retry_after_seconds"), "{layers}");
    assert!(layers.contains("per = \"key\""), "{layers}");
    // Each imported limiter builds as burstsim's own.
    for block in &blocks {
        let config = crate::limiter::LimiterConfig::from_table(block.table()).unwrap();
        config
            .build(crate::limiter::Context::default())
            .unwrap_or_else(|e| panic!("{}: {e}", block.name));
    }
}

#[test]
fn the_format_before_0_10_refills_intervally_over_its_own_interval() {
    let text = "\
bucket4j.filters[0].rate-limits[0].expression=getRemoteAddr()
bucket4j.filters[0].rate-limits[0].bandwidths[0].capacity=20
bucket4j.filters[0].rate-limits[0].bandwidths[0].time=1
bucket4j.filters[0].rate-limits[0].bandwidths[0].unit=seconds
bucket4j.filters[0].rate-limits[0].bandwidths[0].fixed-refill-interval=2
bucket4j.filters[0].rate-limits[0].bandwidths[0].fixed-refill-interval-unit=seconds
bucket4j.filters[0].rate-limits[0].bandwidths[1].capacity=100
bucket4j.filters[0].rate-limits[0].bandwidths[1].time=1
bucket4j.filters[0].rate-limits[0].bandwidths[1].unit=MINUTES
";
    let blocks = read_text("application.properties", text, Dialect::Bucket4j).unwrap();
    assert_eq!(
        field(&blocks[0], "bandwidths").as_deref(),
        Some(
            "[{ capacity = 20, refill = \"intervally\", refill_period = \"2s\" }, { capacity = 100, refill = \"greedy\", refill_period = \"60s\" }]"
        ),
        "Refill.intervally(capacity, fixed-refill-interval): time is not used"
    );
    assert!(
        blocks[0]
            .notes
            .iter()
            .any(|n| n.contains("cache-to-use not set"))
    );
}

#[test]
fn first_strategy_stops_at_the_first_rate_limit_without_conditions() {
    let text = "\
bucket4j:
  filters:
  - rate-limits:
    - execute-condition: getRequestURI().contains('admin')
      bandwidths: [{capacity: 1, time: 1, unit: seconds}]
    - bandwidths: [{capacity: 2, time: 1, unit: seconds}]
    - bandwidths: [{capacity: 3, time: 1, unit: seconds}]
  methods:
  - name: search
    rate-limit:
      bandwidths: [{capacity: 4, time: 1, unit: seconds}]
";
    let blocks = read_text("application.yml", text, Dialect::Bucket4j).unwrap();
    let layers = field(&blocks[0], "layers").unwrap();
    assert!(
        layers.contains("capacity = 1")
            && layers.contains("capacity = 2")
            && !layers.contains("capacity = 3"),
        "{layers}"
    );
    assert!(
        blocks[0]
            .notes
            .iter()
            .any(|n| n.contains("execute-condition")),
        "{:?}",
        blocks[0].notes
    );
    // A method's refusal is a RateLimitException: no header.
    assert_eq!(blocks[1].name, "search");
    assert_eq!(field(&blocks[1], "retry_after_seconds"), None);
}

#[test]
fn what_the_model_lacks_is_an_error_at_its_line() {
    let base = "bucket4j.filters[0].rate-limits[0].bandwidths[0]";
    for (extra, unit) in [
        ("bucket4j.filters[0].rate-limits[0].num-tokens=2", "seconds"),
        (
            "bucket4j.filters[0].rate-limits[0].post-execute-condition=getStatus() == 500",
            "seconds",
        ),
        (&format!("{base}.refill-speed=sometimes"), "seconds"),
        (
            &format!("{base}.fixed-refill-interval=1\n{base}.refill-capacity=1"),
            "seconds",
        ),
        ("bucket4j.enabled=false", "seconds"),
        ("bucket4j.filters[0].wat=1", "seconds"),
        ("# the unit", "weeks"),
    ] {
        let text = format!("{base}.capacity=1\n{base}.time=1\n{base}.unit={unit}\n{extra}\n");
        let line = if unit == "weeks" { 3 } else { 4 };
        let err = read_text("application.properties", &text, Dialect::Bucket4j).unwrap_err();
        assert!(
            err.contains(&format!("application.properties:{line}:")),
            "{extra}: {err}"
        );
    }
    let err = read_text(
        "application.properties",
        &format!("{base}.capacity=1\n"),
        Dialect::Bucket4j,
    )
    .unwrap_err();
    assert!(err.contains("time is required"), "{err}");
}

/// `hide-http-response-headers` binds as Spring binds a `Boolean`: `on`
/// hides the header as `true` does, and a value that is neither is an
/// error at its line, not taken for `false`.
#[test]
fn hide_http_response_headers_is_read_as_spring_reads_a_boolean() {
    let hidden = |value: &str| {
        let text = NEW.replace(
            "    hide-http-response-headers: true\n",
            &format!("    hide-http-response-headers: {value}\n"),
        );
        read_text("application.yml", &text, Dialect::Bucket4j).map(|blocks| {
            let layers = field(&blocks[1], "layers").unwrap();
            !layers.contains("retry_after_seconds")
        })
    };
    assert_eq!(hidden("true"), Ok(true));
    assert_eq!(hidden("on"), Ok(true));
    assert_eq!(hidden("FALSE"), Ok(false));
    let err = hidden("maybe").unwrap_err();
    assert!(
        err.contains("application.yml:21:33:") && err.contains("expected true or false"),
        "{err}"
    );
}
