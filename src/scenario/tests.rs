use super::*;

const MINIMAL: &str = r#"
duration = "10s"

[[workload]]
name = "steady"
sources = [{ kind = "poisson", rate = 80 }]

[[limiter]]
name = "fixed"
kind = "fixed-window"
window = "1s"
threshold = 100
"#;

fn error(text: &str) -> String {
    parse(text, Path::new("s.toml")).unwrap_err().to_string()
}

#[test]
fn reads_a_minimal_scenario_with_defaults() {
    let scenario = parse(MINIMAL, Path::new("dir/minimal.toml")).unwrap();
    assert_eq!(scenario.name, "minimal");
    assert_eq!(scenario.metrics.rolling, Nanos::SECOND);
    assert_eq!(scenario.metrics.profile.len(), 6);
    assert_eq!(scenario.limiters[0].description, "100 per 1s (epoch)");
}

#[test]
fn a_misspelt_top_level_key_is_an_error_with_its_line() {
    let err = error(&MINIMAL.replace("duration", "durration"));
    assert!(
        err.starts_with("s.toml:2:1: unknown key \"durration\""),
        "{err}"
    );
}

#[test]
fn a_limiter_error_names_the_file_line_limiter_and_field() {
    let err = error(&MINIMAL.replace("threshold = 100", "threshold = 0"));
    // At the value itself, not at the [[limiter]] header four lines up.
    assert!(
        err.starts_with(
            "s.toml:12:13: limiter \"fixed\": threshold: expected a whole number ≥ 1, got 0"
        ),
        "{err}"
    );
    assert!(
        err.ends_with("12 | threshold = 0\n   |             ^"),
        "{err}"
    );
}

#[test]
fn a_source_error_names_the_workload_and_source() {
    let err = error(&MINIMAL.replace("rate = 80", "rate = 80, burst = 3"));
    assert!(
        err.starts_with("s.toml:6:43: workload \"steady\", source 1: "),
        "{err}"
    );
    assert!(err.contains("unknown key \"burst\""), "{err}");
}

#[test]
fn duplicate_limiter_names_are_an_error() {
    let twice = format!(
        "{MINIMAL}\n[[limiter]]\nname = \"fixed\"\nkind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 5\n"
    );
    assert!(error(&twice).contains("used twice"));
}

#[test]
fn a_zero_duration_or_window_is_an_error() {
    assert!(
        error(&MINIMAL.replace("\"10s\"", "\"0s\"")).contains("duration: must be longer than 0")
    );
    assert!(
        error(&MINIMAL.replace("window = \"1s\"", "window = \"0s\""))
            .contains("window: must be longer than 0")
    );
}

#[test]
fn a_source_ending_after_the_run_is_an_error() {
    let err = error(&MINIMAL.replace("rate = 80", "rate = 80, end = \"20s\""));
    assert!(
        err.contains("end: 20s is after the end of the run (10s)"),
        "{err}"
    );
}

#[test]
fn a_limiter_can_override_the_scenarios_cluster() {
    let text = format!(
        "{MINIMAL}cluster = {{ mode = \"shared-instance-clock\" }}\n[cluster]\ninstances = 3\n"
    );
    let scenario = parse(&text, Path::new("c.toml")).unwrap();
    let description = &scenario.limiters[0].description;
    assert!(
        description.contains("3 instances, one shared counter, windows by each instance's clock"),
        "{description}"
    );
    let bad = format!("{MINIMAL}cluster = {{ mode = \"sideways\" }}\n[cluster]\ninstances = 3\n");
    let err = parse(&bad, Path::new("c.toml")).unwrap_err().to_string();
    assert!(
        err.contains("limiter \"fixed\" in the cluster: mode"),
        "{err}"
    );
}

#[test]
fn a_retry_error_names_the_file_line_workload_and_field() {
    let text = MINIMAL.replace(
        "rate = 80 }]",
        "rate = 80 }]\nretry = { policy = \"exponential\", max_attempts = 500 }",
    );
    let err = error(&text);
    assert!(
        err.starts_with("s.toml:7:50: workload \"steady\", retry: max_attempts: expected a whole number from 1 to 100"),
        "{err}"
    );
    let err = error(&MINIMAL.replace(
        "rate = 80 }]",
        "rate = 80 }]\nretry = { policy = \"sometimes\" }",
    ));
    assert!(err.starts_with("s.toml:7:20: workload \"steady\", retry: policy: unknown value \"sometimes\", expected one of \"none\""), "{err}");
    let scenario = parse(
        &MINIMAL.replace(
            "rate = 80 }]",
            "rate = 80 }]\nretry = { policy = \"honour-hint\" }",
        ),
        Path::new("s.toml"),
    )
    .unwrap();
    assert_eq!(
        scenario.workloads[0].retry.unwrap().describe(),
        "retry at the limiter's hint, else exponential backoff from 100ms ×2 up to 20s, at most 5 attempts"
    );
}

#[test]
fn count_rejected_is_refused_where_a_kind_has_no_such_behaviour() {
    let err = error(&MINIMAL.replace(
        "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 100",
        "kind = \"token-bucket\"\nrate = 100\nburst = 100\ncount_rejected = true",
    ));
    assert!(
        err.contains("limiter \"fixed\": count_rejected: only fixed-window, sliding-log, sliding-counter, envoy-ratelimit can count rejected requests"),
        "{err}"
    );
    let scenario = parse(
        &MINIMAL.replace("threshold = 100", "threshold = 100\ncount_rejected = true"),
        Path::new("s.toml"),
    )
    .unwrap();
    assert_eq!(
        scenario.limiters[0].description,
        "100 per 1s (epoch, counting rejected)"
    );
}

#[test]
fn names_that_could_escape_the_output_folder_are_refused() {
    for bad in ["../up", "a/b", ".hidden", ""] {
        let err = error(&format!("name = {bad:?}\n{MINIMAL}"));
        assert!(err.contains("name:"), "{bad}: {err}");
    }
}
