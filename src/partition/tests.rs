use super::*;
use crate::time::Nanos;

/// Writes `arrivals` (in time order) into `parts` files under `dir` by
/// client, as `burstsim partition` does; what each part.json would say.
fn split(dir: &Path, arrivals: &[Arrival], parts: u64) -> Vec<PartStream> {
    let mut writers: Vec<_> = (0..parts)
        .map(|i| PartWriter::new(std::fs::File::create(dir.join(format!("{i}.rows"))).unwrap()))
        .collect();
    for (seq, &arrival) in arrivals.iter().enumerate() {
        writers[By::Client.part(arrival.key, parts) as usize]
            .push(arrival, seq as u64)
            .unwrap();
    }
    writers.into_iter().map(|w| w.finish().unwrap().0).collect()
}

/// Every record of part `i`, with its place, and the error that ended it.
fn read(dir: &Path, i: usize, expected: &PartStream) -> (Vec<(Arrival, u64)>, Option<String>) {
    let mut reader = PartReader::open(&dir.join(format!("{i}.rows")), expected.clone()).unwrap();
    let records = std::iter::from_fn(|| reader.next_with_place()).collect();
    (records, reader.take_error())
}

proptest::proptest! {
    /// Each part holds its keys' arrivals, in order, each with its place in
    /// the whole; merged by place they are the whole again. Equal times,
    /// keys and times at the end of u64, empty parts.
    #[test]
    fn the_parts_are_the_whole_split_by_key(
        steps in proptest::collection::vec(
            (
                proptest::prop_oneof![proptest::strategy::Just(0u64), 0u64..3, 0u64..1 << 40],
                proptest::prop_oneof![0u64..6, proptest::num::u64::ANY, proptest::strategy::Just(u64::MAX)],
                proptest::prop_oneof![proptest::strategy::Just(0u64), proptest::num::u64::ANY],
            ),
            0..300,
        ),
        parts in 1u64..6,
        late: bool,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let span: u64 = steps.iter().map(|s| s.0).sum();
        let mut at = if late { u64::MAX - span } else { 0 };
        let arrivals: Vec<Arrival> = steps
            .iter()
            .map(|&(gap, client, host)| {
                at += gap;
                Arrival { time: Nanos(at), key: Key { client, host } }
            })
            .collect();
        let files = split(dir.path(), &arrivals, parts);
        let mut merged = Vec::new();
        for (i, file) in files.iter().enumerate() {
            let (records, error) = read(dir.path(), i, file);
            proptest::prop_assert_eq!(error, None);
            proptest::prop_assert_eq!(records.len() as u64, file.rows);
            for &(arrival, seq) in &records {
                proptest::prop_assert_eq!(By::Client.part(arrival.key, parts), i as u64);
                proptest::prop_assert_eq!(arrivals[seq as usize], arrival);
            }
            merged.extend(records);
        }
        merged.sort_by_key(|&(_, seq)| seq);
        let places: Vec<u64> = merged.iter().map(|&(_, seq)| seq).collect();
        proptest::prop_assert_eq!(places, (0..arrivals.len() as u64).collect::<Vec<_>>());
    }
}

/// Some arrivals of 40 keys over 10 ms.
fn some_arrivals() -> Vec<Arrival> {
    (0..2000u64)
        .map(|n| Arrival {
            time: Nanos(n * 5_000 + n % 3),
            key: Key::client(n * 7 % 40),
        })
        .collect()
}

#[test]
fn a_part_that_is_not_what_its_part_json_says_is_refused_naming_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = split(dir.path(), &some_arrivals(), 2);
    let path = dir.path().join("0.rows");
    let good = std::fs::read(&path).unwrap();
    let name = path.display().to_string();
    let refused = |bytes: &[u8], expected: &PartStream| {
        std::fs::write(&path, bytes).unwrap();
        let (_, error) = read(dir.path(), 0, expected);
        error.unwrap_or_else(|| panic!("{} bytes accepted", bytes.len()))
    };
    // Cut short, at every tenth byte.
    for cut in (0..good.len()).step_by(10) {
        let error = refused(&good[..cut], &files[0]);
        assert!(error.starts_with(&name), "{error}");
    }
    // Longer than written.
    let longer = [good.as_slice(), b"\0"].concat();
    assert!(refused(&longer, &files[0]).contains("fingerprint"));
    // A byte changed anywhere.
    for at in (0..good.len()).step_by(7) {
        let mut changed = good.clone();
        changed[at] ^= 0x20;
        refused(&changed, &files[0]);
    }
    // The other part's file.
    let other = std::fs::read(dir.path().join("1.rows")).unwrap();
    assert!(refused(&other, &files[0]).starts_with(&name));
    // Its own bytes, but a part.json that counts one more record.
    let more = PartStream {
        rows: files[0].rows + 1,
        ..files[0].clone()
    };
    assert!(refused(&good, &more).contains("records where its part.json says"));
    std::fs::write(&path, &good).unwrap();
    let (records, error) = read(dir.path(), 0, &files[0]);
    assert_eq!((records.len() as u64, error), (files[0].rows, None));
}

#[test]
fn varints_hold_every_u64_and_nothing_past_it() {
    let mut out = [0u8; 10];
    for value in [
        0,
        1,
        127,
        128,
        16_383,
        16_384,
        u64::MAX / 2,
        u64::MAX - 1,
        u64::MAX,
    ] {
        let len = put_varint(&mut out, value);
        let mut decoded = 0u64;
        for (i, byte) in out[..len].iter().enumerate() {
            decoded |= u64::from(byte & 0x7f) << (7 * i);
        }
        assert_eq!(decoded, value);
        assert_eq!(
            len,
            (64 - value.leading_zeros() as usize).div_ceil(7).max(1)
        );
    }
}

#[test]
fn a_record_naming_a_key_its_workload_does_not_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let arrivals = [
        Arrival {
            time: Nanos(1),
            key: Key::client(3),
        },
        Arrival {
            time: Nanos(2),
            key: Key { client: 3, host: 9 },
        },
    ];
    let files = split(dir.path(), &arrivals, 1);
    let replayed = Replayed {
        dir: dir.path().to_owned(),
        file: PartFile {
            identity: Identity {
                format: FORMAT.into(),
                scenario: "s".into(),
                scenario_hash: "0".into(),
                seed: 1,
                burstsim: "0".into(),
                parts: 1,
                by: By::Client,
                workloads: Vec::new(),
            },
            index: 0,
            files: files.clone(),
            keys: Vec::new(),
            slices: Vec::new(),
        },
        clients: vec![Vec::new()],
        logs: Vec::new(),
    };
    std::fs::rename(dir.path().join("0.rows"), dir.path().join(rows_file(0))).unwrap();
    for (keys, read, error) in [
        ([true, true], 2, None),
        (
            [true, false],
            1,
            Some("a record names a Host, and its workload names none"),
        ),
        (
            [false, true],
            0,
            Some("a record names a client, and its workload names none"),
        ),
    ] {
        let mut reader = replayed.arrivals(0, keys).unwrap();
        assert_eq!(reader.by_ref().count(), read);
        let taken = reader.take_error();
        assert_eq!(
            taken.as_deref().map(|e| e.split(": ").nth(1).unwrap()),
            error
        );
    }
}

#[test]
fn a_part_s_clients_read_back_as_written_and_a_changed_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(keys_file(0));
    let facts = vec![
        KeyFact {
            id: 0,
            value: 0xdead_beef,
            name: Some("198.51.100.7".into()),
        },
        KeyFact {
            id: u64::MAX,
            value: u64::MAX,
            name: None,
        },
        KeyFact {
            id: 7,
            value: 1,
            name: Some("é".repeat(64)),
        },
        KeyFact {
            id: 8,
            value: 2,
            name: Some(String::new()),
        },
    ];
    let mut writer = KeysWriter::new(std::fs::File::create(&path).unwrap());
    for fact in &facts {
        writer.push(fact).unwrap();
    }
    let (expected, _) = writer.finish().unwrap();
    assert_eq!(expected.rows, 4);
    assert_eq!(read_keys(&path, &expected).unwrap(), facts);
    let good = std::fs::read(&path).unwrap();
    for at in (0..good.len()).step_by(3) {
        let mut changed = good.clone();
        changed[at] ^= 0x04;
        std::fs::write(&path, &changed).unwrap();
        let error = read_keys(&path, &expected).unwrap_err();
        assert!(error.starts_with(&path.display().to_string()), "{error}");
    }
    for cut in (0..good.len()).step_by(5) {
        std::fs::write(&path, &good[..cut]).unwrap();
        assert!(read_keys(&path, &expected).is_err(), "cut at {cut}");
    }
    std::fs::write(&path, &good).unwrap();
    let fewer = PartStream {
        rows: 3,
        ..expected.clone()
    };
    assert!(
        read_keys(&path, &fewer)
            .unwrap_err()
            .contains("longer than its part.json allows")
            || read_keys(&path, &fewer)
                .unwrap_err()
                .contains("4 clients where its part.json says 3")
    );
}
