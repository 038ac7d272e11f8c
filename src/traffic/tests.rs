use super::*;

const NANOS: u64 = 1_000_000_000;

fn merged(lists: &[&[u64]]) -> Vec<u64> {
    keyed(lists).into_iter().map(|(t, _)| t).collect()
}

/// Merged times, each with its source's number as its key.
fn keyed(lists: &[&[u64]]) -> Vec<(u64, u64)> {
    let sources = lists
        .iter()
        .enumerate()
        .map(|(source, list)| {
            let arrivals = list
                .iter()
                .map(|&t| Arrival {
                    time: Nanos(t),
                    key: Key::client(source as u64),
                })
                .collect();
            Source::Trace(trace::Arrivals::from_sorted(arrivals))
        })
        .collect();
    Merge::new(sources)
        .map(|a| (a.time.get(), a.key.client))
        .collect()
}

#[test]
fn giving_a_source_clients_spreads_its_keys_and_keeps_its_times() {
    let source = |extra: &str| {
        SourceConfig::from_table(
            toml::from_str(&format!("kind = \"poisson\"\nrate = 1000\n{extra}")).unwrap(),
        )
        .unwrap()
    };
    let run = |config: &SourceConfig| -> Vec<Arrival> {
        config
            .arrivals(
                Nanos::SECOND,
                Path::new("."),
                (stream(1, "w", 0, 0), keys_stream(1, "w", 0, 0)),
            )
            .unwrap()
            .collect()
    };
    let (plain, keyed) = (run(&source("")), run(&source("clients = { count = 50 }")));
    assert_eq!(
        plain.iter().map(|a| a.time).collect::<Vec<_>>(),
        keyed.iter().map(|a| a.time).collect::<Vec<_>>()
    );
    assert!(plain.iter().all(|a| a.key == Key::DEFAULT));
    let keys: std::collections::BTreeSet<u64> = keyed.iter().map(|a| a.key.client).collect();
    assert!(keys.len() > 40 && keys.iter().all(|&k| k < 50), "{keys:?}");
    assert!(source("clients = { count = 50 }").is_stochastic());
    // Refused where the source is checked in its place, before any file is read.
    let err = SourceConfig::from_table(
        toml::from_str("kind = \"trace\"\npath = \"t.csv\"\nclients = { count = 5 }").unwrap(),
    )
    .unwrap()
    .validate(Nanos(NANOS), Path::new("."))
    .unwrap_err();
    assert!(err.to_string().contains("key column"), "{err}");
}

#[test]
fn per_client_bursts_come_around_each_clients_own_boundaries() {
    let source = SourceConfig::from_table(
        toml::from_str("kind = \"boundary\"\nperiod = \"1s\"\nbefore = 2\nafter = 3\nspread = \"10ms\"\nevery = 1\nper_client = true\nclients = { count = 20 }").unwrap(),
    )
    .unwrap();
    let arrivals: Vec<Arrival> = source
        .arrivals(
            Nanos(5 * NANOS),
            Path::new("."),
            (stream(1, "w", 0, 0), keys_stream(1, "w", 0, 0)),
        )
        .unwrap()
        .collect();
    assert!(arrivals.is_sorted_by_key(|a| a.time));
    let spread = 10_000_000;
    let mut phases = std::collections::BTreeSet::new();
    for client in 0..20 {
        let times: Vec<u64> = arrivals
            .iter()
            .filter(|a| a.key == Key::client(client))
            .map(|a| a.time.get())
            .collect();
        // Boundaries at p + k s for k = 1..=4 lie inside the run (p < 1 s): 5 arrivals each.
        assert!(times.len() >= 4 * 5, "client {client}: {}", times.len());
        // Every arrival lies within one burst pair's width (2 spreads)
        // of the client's first, modulo the period: its own boundaries.
        let first = times[0] % NANOS;
        phases.insert(first / (2 * spread));
        for t in &times {
            let off = (t % NANOS + NANOS - first) % NANOS;
            assert!(
                off < 2 * spread || off > NANOS - 2 * spread,
                "client {client} at {t}, first {first}"
            );
        }
    }
    assert!(
        phases.len() > 10,
        "clients burst at their own instants: {phases:?}"
    );
    let err = SourceConfig::from_table(
        toml::from_str("kind = \"boundary\"\nperiod = \"1s\"\nbefore = 2\nafter = 3\nspread = \"10ms\"\nper_client = true").unwrap(),
    )
    .unwrap()
    .validate(Nanos(5 * NANOS), Path::new("."))
    .unwrap_err();
    assert!(
        err.to_string().contains("per_client") && err.to_string().contains("clients"),
        "{err}"
    );
}

#[test]
fn simultaneous_arrivals_keep_their_sources_order_and_keys() {
    assert_eq!(
        keyed(&[&[5, 5], &[1, 5], &[5]]),
        [(1, 1), (5, 0), (5, 0), (5, 1), (5, 2)]
    );
}

#[test]
fn merges_sources_by_time() {
    assert_eq!(
        merged(&[&[1, 5, 9], &[2, 3, 10], &[]]),
        vec![1, 2, 3, 5, 9, 10]
    );
}

#[test]
fn streams_differ_by_workload_and_source_but_repeat_for_the_same_inputs() {
    use rand::Rng as _;
    let first = |mut rng: Rng| rng.next_u64();
    assert_eq!(
        first(stream(42, "steady", 0, 0)),
        first(stream(42, "steady", 0, 0))
    );
    assert_ne!(
        first(stream(42, "steady", 0, 0)),
        first(stream(42, "burst", 0, 0))
    );
    assert_ne!(
        first(stream(42, "steady", 0, 0)),
        first(stream(42, "steady", 1, 0))
    );
    assert_ne!(
        first(stream(42, "steady", 0, 0)),
        first(stream(43, "steady", 0, 0))
    );
}
