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
