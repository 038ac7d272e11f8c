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

/// Hears every decision a chunk's deciding hands on; asks for the keys'
/// state ahead of their decisions when `ahead`, and counts the asks.
struct Heard {
    decisions: Vec<(crate::traffic::Arrival, Decision)>,
    ahead: bool,
    asked: std::cell::Cell<usize>,
}

impl Decisions for Heard {
    fn decided(&mut self, arrival: crate::traffic::Arrival, decision: Decision) {
        self.decisions.push((arrival, decision));
    }

    fn prefetches(&self) -> bool {
        self.ahead
    }

    fn prefetch(&self, key: Key, ahead: usize) {
        let _ = (key, ahead);
        self.asked.set(self.asked.get() + 1);
    }
}

proptest::proptest! {
    /// A chunk decided at once (the open loop's path, the kind matched
    /// once a chunk) is decided as one request at a time: a fixed window
    /// per key or per Host (its packed cells, on a grid or from each key's
    /// first request), another kind per key, small keys and hashed ones,
    /// the state asked for ahead or not, chunks of any size.
    #[test]
    fn a_chunk_decided_at_once_is_decided_as_one_request_at_a_time(
        steps in proptest::collection::vec((0u64..3_000_000, 0u64..40), 1..400),
        kind in proptest::prop_oneof![
            proptest::strategy::Just("kind = \"fixed-window\"\nwindow = \"1ms\"\nthreshold = 2"),
            proptest::strategy::Just("kind = \"fixed-window\"\nwindow = \"1ms\"\nthreshold = 2\nalign = \"first-request\""),
            proptest::strategy::Just("kind = \"token-bucket\"\nrate = 1000\nburst = 2"),
        ],
        by_host: bool,
        hashed: bool,
        ahead: bool,
        chunk in 1usize..150,
    ) {
        let per = if by_host { "host" } else { "key" };
        let limiter = parse(&format!("{kind}\nper = \"{per}\""))
            .unwrap()
            .build(Context::default())
            .unwrap();
        let mut time = 0;
        let arrivals: Vec<crate::traffic::Arrival> = steps
            .iter()
            .map(|&(gap, key)| {
                time += gap;
                let client = if hashed { u64::MAX - key } else { key };
                crate::traffic::Arrival {
                    time: Nanos(time),
                    key: Key { client, host: key % 7 },
                }
            })
            .collect();
        let mut one = limiter.clone();
        let expected: Vec<_> = arrivals
            .iter()
            .map(|a| (*a, one.decide_keyed::<false>(a.time, a.key)))
            .collect();
        let mut all = limiter;
        let mut heard = Heard { decisions: Vec::new(), ahead, asked: std::cell::Cell::new(0) };
        for part in arrivals.chunks(chunk) {
            all.decide_all(part, &mut heard);
        }
        proptest::prop_assert_eq!(heard.decisions, expected);
        // Asked for once per request with one `AHEAD` later in its chunk, when asked to.
        let later: usize = arrivals
            .chunks(chunk)
            .map(|part| part.len().saturating_sub(per_key::AHEAD))
            .sum();
        proptest::prop_assert_eq!(heard.asked.get(), if ahead { later } else { 0 });
    }
}

/// A per-key limiter of `text`, in its initial state.
fn built(text: &str) -> Limiter {
    parse(text).unwrap().build(Context::default()).unwrap()
}

/// A log's absent (`-`) and blank keys, and the workload's list of them.
fn keys_naming_nothing() -> (Key, Key, crate::traffic::EmptyKeys) {
    let (absent, blank) = (Key::named(b"-"), Key::named(b""));
    let empty = crate::traffic::EmptyKeys {
        absent: vec![absent.client],
        blank: vec![blank.client],
    };
    (absent, blank, empty)
}

/// How many of ten requests of `key`, a millisecond apart from 0, `limiter` admits.
fn admitted_of_ten(limiter: &mut Limiter, key: Key) -> usize {
    (0..10)
        .filter(|&i| {
            limiter
                .decide_keyed::<false>(Nanos(i * 1_000_000), key)
                .admitted()
        })
        .count()
}

/// nginx skips a zone whose key is empty for the request, HAProxy tracks
/// no request whose key it cannot fetch, and Envoy asks its rate limit
/// service nothing without the header: per key, `nginx-limit-req` admits
/// every request of a key absent or blank, and `haproxy-rate` and
/// `envoy-ratelimit` of an absent one (a blank header is a key to them),
/// with no state, no refund
/// to give and no bound to claim; the other requests' keys are limited as
/// before, and other kinds keep such a key a client of its own.
#[test]
fn a_key_left_unlimited_passes_nginx_haproxy_and_envoy_and_no_other_kind() {
    let nginx = "kind = \"nginx-limit-req\"\nrate = \"1r/s\"\nper = \"key\"";
    let haproxy = "kind = \"haproxy-rate\"\nlimit = 1\nper = \"key\"";
    let fixed = "kind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 1\nper = \"key\"";
    let (absent, blank, empty) = keys_naming_nothing();
    let client = Key::named(b"198.51.100.7");
    let mut limiter = built(nginx);
    limiter.treat_empty_keys(&empty);
    assert_eq!(admitted_of_ten(&mut limiter, absent), 10);
    assert_eq!(admitted_of_ten(&mut limiter, blank), 10);
    limiter.refund(Nanos(10_000_000));
    assert_eq!(admitted_of_ten(&mut limiter, client), 1);
    let Limiter::PerKey(per) = &limiter else {
        panic!("per key")
    };
    assert_eq!((per.keys(), per.unaccounted()), (1, 20));
    assert_eq!(limiter.bound(Nanos::SECOND), u64::MAX);
    // HAProxy: the absent key untracked, the blank one a key (limit 1: 2 pass).
    let mut limiter = built(haproxy);
    limiter.treat_empty_keys(&empty);
    assert_eq!(admitted_of_ten(&mut limiter, absent), 10);
    assert_eq!(admitted_of_ten(&mut limiter, blank), 1);
    assert_eq!(limiter.bound(Nanos::SECOND), u64::MAX);
    // Without them, either is one more client, limited as any.
    let mut limiter = built(nginx);
    assert_eq!(admitted_of_ten(&mut limiter, absent), 1);
    assert!(limiter.bound(Nanos::SECOND) < u64::MAX);
    // In a chain's layer too; a fixed window keeps its state for it.
    let mut chain = built(&format!(
        "kind = \"chain\"\nlayers = [{{ {} }}, {{ {} }}]",
        nginx.replace('\n', ", "),
        "kind = \"fixed-window\", window = \"1s\", threshold = 100"
    ));
    chain.treat_empty_keys(&empty);
    assert_eq!(admitted_of_ten(&mut chain, absent), 10);
    let mut limiter = built(fixed);
    limiter.treat_empty_keys(&empty);
    assert_eq!(admitted_of_ten(&mut limiter, absent), 1);
    // Envoy asks its rate limit service nothing without the header; a blank
    // one is a descriptor value like any (1 a second).
    let mut limiter = built(
        "kind = \"envoy-ratelimit\"\nrequests_per_unit = 1\nunit = \"second\"\nper = \"key\"",
    );
    limiter.treat_empty_keys(&empty);
    assert_eq!(admitted_of_ten(&mut limiter, absent), 10);
    assert_eq!(admitted_of_ten(&mut limiter, blank), 1);
    assert_eq!(limiter.bound(Nanos::SECOND), u64::MAX);
}

#[test]
fn spring_turns_away_a_request_without_a_key_before_its_bucket_unless_told_not_to() {
    let spring =
        "kind = \"spring-cloud-gateway\"\nreplenish_rate = 1\nburst_capacity = 2\nper = \"key\"";
    let (absent, blank, empty) = keys_naming_nothing();
    let client = Key::named(b"alice");
    // Default (deny-empty-key): the absent key's requests turned away with
    // a 403 (a final refusal, no hint), none of them reaching a bucket; the
    // blank key (resolved as "") is a key like any, with its own bucket of 2.
    let mut limiter = built(spring);
    limiter.treat_empty_keys(&empty);
    assert_eq!(
        limiter.decide_keyed::<true>(Nanos(0), absent),
        Decision::Reject(crate::limiter::Hint::FORBIDDEN)
    );
    assert_eq!(admitted_of_ten(&mut limiter, absent), 0);
    assert_eq!(admitted_of_ten(&mut limiter, blank), 2);
    assert_eq!(admitted_of_ten(&mut limiter, client), 2);
    let Limiter::PerKey(per) = &limiter else {
        panic!("per key")
    };
    assert_eq!(
        (per.keys(), per.turned_away_keyless(), per.unaccounted()),
        (2, 11, 0)
    );
    assert!(per.denies_keyless() && !per.leaves_keys_unlimited());
    // Turning requests away adds nothing: the two keys' buckets bound it.
    assert_eq!(limiter.bound(Nanos::SECOND), 2 * 3);
    // deny_empty_key = false: let through unlimited, so no bound.
    let mut limiter = built(&format!("{spring}\ndeny_empty_key = false"));
    limiter.treat_empty_keys(&empty);
    assert_eq!(admitted_of_ten(&mut limiter, absent), 10);
    assert_eq!(admitted_of_ten(&mut limiter, blank), 2);
    assert_eq!(limiter.bound(Nanos::SECOND), u64::MAX);
    // Without such keys in the workload, `-` is a client like any.
    let mut limiter = built(spring);
    assert_eq!(admitted_of_ten(&mut limiter, absent), 2);
    // A merge counts the shards' keys less those turned away.
    let Limiter::PerKey(mut per) = built(spring) else {
        panic!("per key")
    };
    per.count_keys_elsewhere(5, [1, 1]);
    assert_eq!((per.keys(), per.denies_keyless()), (4, true));
}
