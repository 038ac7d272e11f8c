use super::*;
use crate::traffic::Key;

/// A keyed workload and a fixed window per key.
fn keyed_scenario() -> Scenario {
    crate::scenario::parse(
        "duration = \"3s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 10, clients = { count = 3 } }]\n[[limiter]]\nname = \"per-key\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 2\nper = \"key\"\n",
        std::path::Path::new("s.toml"),
    )
    .unwrap()
}

#[test]
fn a_packed_placement_keeps_no_figures_per_key() {
    let scenario = keyed_scenario();
    let limiter = &scenario.limiters[0];
    let chunk: Vec<Arrival> = (0..12u64)
        .map(|i| Arrival {
            time: Nanos(i * 100_000_000),
            key: Key::client(i % 3),
        })
        .collect();
    let mut packed = Packed::run(&scenario, limiter);
    packed.observe_all(&chunk);
    // The same requests counted by the workload's own run have figures:
    // the packed one's absence is its own.
    let mut own = RunState::new(&scenario, &Options::default(), limiter, true);
    own.observe_all(&chunk);
    assert!(own.tallies().0.is_some());
    assert!(packed.tallies().0.is_none());
    assert_eq!(packed.offered(), own.offered());
}
