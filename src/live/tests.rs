use super::*;

#[test]
fn a_redis_password_never_shows() {
    assert_eq!(
        masked("redis://user:hunter2@10.0.0.1:6379/0"),
        "redis://user:****@10.0.0.1:6379/0"
    );
    assert_eq!(
        masked("rediss://:hunter2@cache:6380"),
        "rediss://:****@cache:6380"
    );
    assert_eq!(masked("redis://hunter2@cache"), "redis://:****@cache");
    assert_eq!(masked("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    assert_eq!(
        without_password("auth hunter2 failed".into(), "redis://u:hunter2@h"),
        "auth **** failed"
    );
}

#[test]
fn each_run_has_keys_of_its_own_even_with_the_same_process_id() {
    let first = run_key("fixed-1s", Variant::AtomicFixedWindow);
    let second = run_key("fixed-1s", Variant::AtomicFixedWindow);
    assert_ne!(first, second);
    assert!(first.starts_with(&format!("burstsim:{}-", std::process::id())));
}

/// A scenario's first limiter, for comparisons.
fn named(limiter: &str) -> NamedLimiter {
    let text = format!(
        "name = \"t\"\nduration = \"10s\"\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"uniform\", rate = 1 }}]\n[[limiter]]\nname = \"l\"\n{limiter}\n"
    );
    crate::scenario::parse(&text, std::path::Path::new("t.toml"))
        .unwrap()
        .limiters
        .remove(0)
}

const MS: u64 = 1_000_000;

/// Requests sent on time with a 100 µs round trip; Redis's answers and counts.
fn sent(answers: &[(u64, bool, u64)]) -> Vec<Sent> {
    answers
        .iter()
        .map(|&(at, admitted, count)| Sent {
            due: at,
            at,
            admitted: Some(admitted),
            count,
            rtt: MS / 10,
            client: 0,
        })
        .collect()
}

/// Redis's `answers` against the model of an atomic fixed window of 2 a second.
fn atomic(answers: &[(u64, bool, u64)]) -> LiveResult {
    let named = named("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 2");
    compare::compare(
        &named,
        Variant::AtomicFixedWindow,
        &sent(answers),
        1_000 * MS,
        2,
        1.0,
    )
}

#[test]
fn an_atomic_window_that_agrees_with_the_model_shows_no_difference() {
    // First-request windows of 1 s, 2 a window: [0, 1 s) and [1.5 s, 2.5 s).
    let answers = [
        (0, true, 1),
        (100 * MS, true, 2),
        (200 * MS, false, 3),
        (1_500 * MS, true, 1),
        (1_600 * MS, true, 2),
        (1_700 * MS, false, 3),
    ];
    let result = atomic(&answers);
    assert_eq!((result.admitted_live, result.admitted_model), (4, 4));
    assert_eq!(result.disagreements, 0);
    assert_eq!(result.edges_followed, 0);
}

#[test]
fn a_window_redis_closed_a_moment_late_is_followed_not_counted_again() {
    // Redis ran the request at 1 s + 0.5 ms before the key expired (its
    // INCR said 3): within the timing jitter of the model's edge at 1 s.
    let answers = [
        (0, true, 1),
        (100 * MS, true, 2),
        (1_000 * MS + MS / 2, false, 3),
        (1_000 * MS + MS, true, 1),
        (1_100 * MS, true, 2),
        (1_200 * MS, false, 3),
    ];
    let result = atomic(&answers);
    assert_eq!(result.edges_followed, 1);
    assert_eq!(result.disagreements, 0, "{:?}", result.decisions);
    assert_eq!(result.admitted_model, 4);
}

#[test]
fn a_difference_far_from_any_edge_is_unexplained() {
    // Redis admits a third request in mid-window: nothing explains it.
    let answers = [(0, true, 1), (100 * MS, true, 2), (500 * MS, true, 3)];
    let result = atomic(&answers);
    assert_eq!(result.disagreements, 1);
    assert_eq!(result.unexplained, 1);
    assert_eq!((result.admitted_live, result.admitted_model), (3, 2));
}
