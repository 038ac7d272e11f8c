//! The probe's pieces that need no server: the target's safety check, the
//! identities, and the comparison's classes on made-up answers.

use proptest::prelude::*;

use super::*;
use crate::limiter::{Context, Hint, Limiter, LimiterConfig, RateLimiter};
use crate::time::NANOS_PER_SEC;

fn limiter(toml: &str) -> Limiter {
    let table: toml::Table = toml::from_str(toml).unwrap();
    LimiterConfig::from_table(table)
        .unwrap()
        .build(Context::default())
        .unwrap()
}

const MS: u64 = 1_000_000;

/// A request sent at `sent` ms, answered `flight` ms later with `status`.
fn record(index: usize, sent: f64, flight: f64, status: u16) -> Record {
    let sent = (sent * MS as f64) as u64;
    Record {
        index,
        attempt: 1,
        due: sent,
        sent,
        answered: sent + (flight * MS as f64) as u64,
        who: 0,
        status: Some(status),
        error: None,
        hints: Vec::new(),
        key: Key::DEFAULT,
    }
}

#[test]
fn loopback_targets_pass_and_others_need_naming() {
    for url in [
        "http://127.0.0.1:8080/",
        "http://127.9.8.7/x",
        "http://[::1]:80/",
        "http://localhost:1/",
        "http://LOCALHOST/",
    ] {
        let t = target(url, &[]).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(t.loopback, "{url}");
    }
    for url in [
        "http://10.0.0.1/",
        "http://example.com/",
        "http://[2001:db8::1]/",
    ] {
        let err = target(url, &[]).unwrap_err().to_string();
        assert!(err.contains("--allow-remote"), "{url}: {err}");
    }
    let t = target(
        "http://Gateway.Example:8080/",
        &["gateway.example".to_string()],
    )
    .unwrap();
    assert!(!t.loopback);
    assert!(target("http://other.example/", &["gateway.example".to_string()]).is_err());
    for (url, expected) in [
        ("https://127.0.0.1/", "no TLS client"),
        ("ftp://127.0.0.1/", "expected an http:// URL"),
        ("not a url at all", "not a URL"),
        ("/just/a/path", "expected an http:// URL"),
    ] {
        let err = target(url, &[]).unwrap_err().to_string();
        assert!(err.contains(expected), "{url}: {err}");
    }
}

#[test]
fn identities_are_distinct_and_spare_127_0_0_1() {
    assert_eq!(
        Identity::parse("header:X-Api-Key").unwrap(),
        Identity::Header("X-Api-Key".into())
    );
    assert_eq!(
        Identity::parse("forwarded-for").unwrap(),
        Identity::ForwardedFor
    );
    assert_eq!(
        Identity::parse("source-address").unwrap(),
        Identity::SourceAddress
    );
    for bad in ["header:", "header:a b", "cookie", ""] {
        assert!(Identity::parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(Identity::ForwardedFor.value(0), "10.0.0.1");
    assert_eq!(Identity::ForwardedFor.value(255), "10.0.1.0");
    assert_eq!(Identity::Header("k".into()).value(7), "client-7");
    let sources: std::collections::HashSet<String> = (0..MAX_SOURCE_ADDRESSES as u32)
        .map(|n| Identity::SourceAddress.value(n))
        .collect();
    assert_eq!(sources.len(), MAX_SOURCE_ADDRESSES);
    assert!(!sources.contains("127.0.0.1"));
    assert!(
        sources
            .iter()
            .all(|s| s.parse::<IpAddr>().unwrap().is_loopback())
    );
}

#[test]
fn answers_the_model_gives_agree() {
    let model = limiter("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 2");
    let records = [
        record(0, 100.0, 0.3, 200),
        record(1, 200.0, 0.3, 200),
        record(2, 300.0, 0.3, 429),
    ];
    let (a, own) = compare(&records, &model, Nanos(MS));
    assert_eq!((a.compared, a.disagreements, a.unexplained), (3, 0, 0));
    assert_eq!((a.admitted_target, a.admitted_model), (2, 2));
    assert_eq!(own.iter().filter(|(_, admitted)| *admitted).count(), 2);
}

#[test]
fn an_answer_across_a_window_edge_in_flight_is_timing() {
    let model = limiter("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 2");
    // The third is sent in the full first window and answered in the
    // second: the target may have decided it on either side (sent 2 ms
    // before the edge: further than any clock phase tried).
    let records = [
        record(0, 100.0, 0.3, 200),
        record(1, 200.0, 0.3, 200),
        record(2, 998.0, 3.0, 200),
        record(3, 1_100.0, 0.3, 200),
        record(4, 1_200.0, 0.3, 429),
    ];
    let (a, _) = compare(&records, &model, Nanos(MS));
    assert_eq!(
        (a.disagreements, a.timing, a.unexplained),
        (1, 1, 0),
        "{a:?}"
    );
    assert_eq!(a.listed[0].index, 2);
    assert_eq!(a.listed[0].class, "timing");
    // Answered well before the edge, the same answer is not explained.
    let mut early = records.clone();
    early[2] = record(2, 900.0, 0.8, 200);
    let (a, _) = compare(&early, &model, Nanos(MS));
    assert!(a.unexplained >= 1, "{a:?}");
    assert_eq!(a.listed[0].class, "unexplained");
}

#[test]
fn two_in_flight_together_answered_the_other_way_round_are_reordered() {
    let model = limiter("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 1");
    let records = [record(0, 100.0, 0.5, 429), record(1, 100.2, 0.5, 200)];
    let (a, _) = compare(&records, &model, Nanos(MS));
    assert_eq!(
        (a.disagreements, a.reordered, a.unexplained),
        (2, 2, 0),
        "{a:?}"
    );
    // Not in flight together: unexplained.
    let apart = [record(0, 100.0, 0.5, 429), record(1, 300.0, 0.5, 200)];
    let (a, _) = compare(&apart, &model, Nanos(MS));
    assert_eq!((a.reordered, a.unexplained), (0, 2), "{a:?}");
}

#[test]
fn unanswered_requests_are_left_out_of_the_comparison() {
    let model = limiter("kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 1");
    let mut lost = record(0, 100.0, 5_000.0, 0);
    lost.status = None;
    lost.error = Some("no answer".into());
    let records = [lost, record(1, 200.0, 0.3, 200)];
    let (a, _) = compare(&records, &model, Nanos(MS));
    assert_eq!((a.compared, a.disagreements), (1, 0), "{a:?}");
}

#[test]
fn a_schedule_past_its_caps_is_refused() {
    let scenario = crate::scenario::parse(
        "name = \"s\"\nduration = \"4s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 10 }]\n[[limiter]]\nname = \"fw\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 5\n",
        std::path::Path::new("s.toml"),
    )
    .unwrap();
    let named = &scenario.limiters[0];
    let caps = Caps {
        requests: 100,
        rate: 100,
        wall: Nanos(10 * NANOS_PER_SEC),
    };
    let s = schedule(&scenario, 0, named, &Identity::None, &caps).unwrap();
    assert_eq!(
        (s.requests.len(), s.peak_per_sec, s.identities),
        (40, 10, 1)
    );
    let too = |caps: Caps, expected: &str| {
        let err = schedule(&scenario, 0, named, &Identity::None, &caps)
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{err}");
    };
    too(
        Caps {
            requests: 39,
            ..caps
        },
        "--max-requests 39",
    );
    too(Caps { rate: 9, ..caps }, "--max-rate 9");
    too(
        Caps {
            wall: Nanos::SECOND,
            ..caps
        },
        "--max-wall-time",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A target that answers exactly as the model does at the send times
    /// is never found to disagree, whatever the flights and the kind.
    #[test]
    fn a_target_answering_as_the_model_never_disagrees(
        kind in 0usize..4,
        gaps in proptest::collection::vec(0u64..300_000_000, 1..80),
        flights in proptest::collection::vec(0u64..3_000_000, 80),
    ) {
        let config = [
            "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 3",
            "kind = \"token-bucket\"\nrate = 5\nburst = 3",
            "kind = \"nginx-limit-req\"\nrate = \"5r/s\"\nburst = 2\nnodelay = true",
            "kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 3",
        ][kind];
        let model = limiter(config);
        let mut run = model.clone();
        let mut at = 0;
        let records: Vec<Record> = gaps
            .iter()
            .zip(&flights)
            .enumerate()
            .map(|(index, (&gap, &flight))| {
                at += gap;
                let admitted = run.decide(Nanos(at)).admitted();
                Record {
                    index,
                    attempt: 1,
                    due: at,
                    sent: at,
                    answered: at + flight,
                    who: 0,
                    status: Some(if admitted { 200 } else { 429 }),
                    error: None,
                    hints: Vec::new(),
                    key: Key::DEFAULT,
                }
            })
            .collect();
        let (a, _) = compare(&records, &model, Nanos(MS));
        prop_assert_eq!(a.disagreements, 0, "{:?}", a);
        prop_assert_eq!(a.admitted_target, a.admitted_model);
    }
}

#[test]
fn hints_are_read_as_the_headers_say() {
    let h = |pairs: &[(&str, &str)]| {
        let headers: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        retry::hint_of(
            &headers,
            5 * NANOS_PER_SEC,
            1_700_000_000 * u128::from(NANOS_PER_SEC),
        )
    };
    let s = |secs: u64| Some(Nanos(secs * NANOS_PER_SEC));
    assert_eq!(h(&[("retry-after", "2")]).retry_at, s(7));
    assert_eq!(
        h(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]).retry_at,
        None
    );
    assert_eq!(h(&[("ratelimit-reset", "3")]).reset_at, s(8));
    assert_eq!(
        h(&[("ratelimit", "limit=10, remaining=0, reset=1")]).reset_at,
        s(6)
    );
    assert_eq!(h(&[("x-ratelimit-reset", "4")]).reset_at, s(9));
    // A Unix time: 1,700,000,030 s is 30 s after the zero.
    assert_eq!(h(&[("x-ratelimit-reset", "1700000030")]).reset_at, s(30));
    assert_eq!(h(&[("x-ratelimit-remaining", "0")]), Hint::NONE);
}

/// A state too large to describe cheaply (a global sliding log of hundreds
/// of entries) is kept apart rather than compared, and a target answering
/// as that model still agrees throughout.
#[test]
fn large_states_are_not_compared_by_text_and_still_agree() {
    let model = limiter("kind = \"sliding-log\"\nwindow = \"1s\"\nthreshold = 600");
    let mut run = model.clone();
    assert!(compare::described(&run).is_some(), "empty, it is short");
    let records: Vec<Record> = (0..2_000u64)
        .map(|i| {
            let at = i * 700_000;
            let admitted = run.decide(Nanos(at)).admitted();
            let mut r = record(i as usize, 0.0, 0.0, if admitted { 200 } else { 429 });
            (r.due, r.sent, r.answered) = (at, at, at + 400_000);
            r
        })
        .collect();
    assert!(
        compare::described(&run).is_none(),
        "600 entries are not described"
    );
    let (a, _) = compare(&records, &model, Nanos(MS));
    assert_eq!((a.compared, a.disagreements), (2_000, 0), "{a:?}");
    assert!(a.admitted_target > 600 && a.admitted_target < 2_000);
}
