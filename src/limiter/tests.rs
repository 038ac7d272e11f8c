use super::*;

/// What building a `K` from `text` refuses with: the kinds' module tests
/// of their configuration checks.
pub(super) fn refusal<K: Kind>(text: &str) -> String {
    let config: K = toml::from_str(text).unwrap();
    config.build(Context::default()).unwrap_err().to_string()
}

fn parse(text: &str) -> Result<LimiterConfig, String> {
    LimiterConfig::from_table(toml::from_str(text).unwrap()).map_err(|e| e.to_string())
}

#[test]
fn reads_each_kind_from_a_table() {
    let config = parse("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100").unwrap();
    assert_eq!(config.kind(), "fixed-window");
}

#[test]
fn names_the_misspelt_field() {
    let err = parse("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshhold = 100").unwrap_err();
    assert!(err.contains("threshhold"), "{err}");
}

#[test]
fn names_the_field_with_a_bad_value() {
    let err = parse("kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 0").unwrap_err();
    assert!(err.starts_with("threshold: "), "{err}");
}

#[test]
fn lists_the_kinds_for_an_unknown_kind() {
    let err = parse("kind = \"leaky-bucket\"").unwrap_err();
    assert!(
        err.contains("leaky-bucket") && err.contains("token-bucket"),
        "{err}"
    );
}

/// A limiter per key keeps a whole [`Limiter`] for each key, so its size is
/// memory per key: a kind with a large state (Guava's soft-float doubles
/// are 32 bytes each) keeps it in a compact form or boxed, not inline.
#[test]
fn a_limiter_state_stays_within_112_bytes() {
    assert!(
        std::mem::size_of::<Limiter>() <= 112,
        "{} bytes",
        std::mem::size_of::<Limiter>()
    );
}
