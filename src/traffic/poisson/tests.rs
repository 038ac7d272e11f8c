use super::*;
use crate::traffic::Arrival;
use rand::SeedableRng;

fn count(config: Config, from: u64, to: u64, end: u64) -> usize {
    let arrivals = config.stream(Nanos(0), Nanos(end), Rng::seed_from_u64(7));
    arrivals.filter(|t| (from..to).contains(&t.get())).count()
}

#[test]
fn a_constant_rate_gives_about_rate_times_duration_arrivals() {
    let config = Config {
        rate: Some(Decimal::whole(1000)),
        schedule: None,
    };
    let n = count(config, 0, u64::MAX, 100 * NANOS_PER_SEC);
    assert!((99_000..101_000).contains(&n), "{n}");
}

#[test]
fn a_schedule_switches_rates_at_its_times() {
    let schedule = vec![
        (Nanos(0), Decimal::whole(100)),
        (Nanos(10 * NANOS_PER_SEC), Decimal::whole(0)),
        (Nanos(20 * NANOS_PER_SEC), Decimal::whole(1000)),
    ];
    let config = || Config {
        rate: None,
        schedule: Some(schedule.clone()),
    };
    let end = 30 * NANOS_PER_SEC;
    let first = count(config(), 0, 10 * NANOS_PER_SEC, end);
    assert!((900..1100).contains(&first), "{first}");
    assert_eq!(
        count(config(), 10 * NANOS_PER_SEC, 20 * NANOS_PER_SEC, end),
        0
    );
    let last = count(config(), 20 * NANOS_PER_SEC, end, end);
    assert!((9_500..10_500).contains(&last), "{last}");
}

/// The chunked path must make exactly the iterator's arrivals, whatever
/// the chunk size, across segment changes (where a draw is thrown away
/// in the middle of a batch) and with the two paths taking turns.
#[test]
fn filling_chunks_gives_exactly_the_iterators_arrivals() {
    let schedule = vec![
        (Nanos(0), Decimal::whole(30_000)),
        (Nanos(NANOS_PER_SEC / 10), Decimal::whole(0)),
        (Nanos(NANOS_PER_SEC / 5), Decimal::whole(7)),
        (Nanos(NANOS_PER_SEC / 4), Decimal::whole(90_000)),
    ];
    let config = Config {
        rate: None,
        schedule: Some(schedule),
    };
    let (start, end) = (Nanos(NANOS_PER_SEC / 20), Nanos(NANOS_PER_SEC / 2));
    let source = || config.stream(start, end, Rng::seed_from_u64(11));
    let expected: Vec<Nanos> = source().collect();
    assert!(expected.len() > 20_000, "{}", expected.len());
    for size in [1, 2, 63, 64, 65, 1000, 4096] {
        let mut arrivals = source();
        let mut got = Vec::new();
        let mut slots = vec![Arrival::at(Nanos::ZERO); size];
        for turn in 0.. {
            // Every third turn one arrival from the iterator instead.
            if turn % 3 == 2 {
                match arrivals.next() {
                    Some(t) => got.push(t),
                    None => break,
                }
                continue;
            }
            let filled = arrivals.fill(&mut slots);
            got.extend(slots[..filled].iter().map(|a| a.time));
            if filled < size {
                break;
            }
        }
        assert!(arrivals.next().is_none(), "chunks of {size}");
        assert_eq!(got, expected, "chunks of {size}");
    }
}

/// Across 2^52 ns, where the chunked path changes how it converts, and
/// across 2^63 ns, near the end of the clock.
#[test]
fn filling_chunks_agrees_with_the_iterator_where_conversions_change() {
    let config = Config {
        rate: Some(Decimal::whole(1_000_000)),
        schedule: None,
    };
    let mut spans = Vec::new();
    for edge in [1u64 << 52, 1 << 63] {
        spans.push((edge - 20_000_000, edge));
        spans.push((edge - 10_000_000, edge + 10_000_000));
    }
    for (start, end) in spans {
        let source = || config.stream(Nanos(start), Nanos(end), Rng::seed_from_u64(5));
        let expected: Vec<Nanos> = source().collect();
        let mut slots = vec![Nanos::ZERO; 1000];
        let mut arrivals = source();
        let mut got = Vec::new();
        loop {
            let filled = arrivals.fill(&mut slots);
            got.extend_from_slice(&slots[..filled]);
            if filled < slots.len() {
                break;
            }
        }
        assert!(expected.len() > 5_000, "{}", expected.len());
        assert_eq!(got, expected);
        assert!(got.iter().all(|t| (start..end).contains(&t.get())));
    }
}

#[test]
fn the_fast_conversion_truncates_as_as_does() {
    let two_pow_52 = 1u64 << 52;
    let mut values = vec![
        0.0,
        f64::MIN_POSITIVE,
        1e-300,
        0.25,
        0.5,
        0.75,
        1.0 - f64::EPSILON / 2.0,
        1.0,
        1.5,
        2.5,
        3.5,
        1e9 + 0.5,
        1e9 + 0.5000001,
        TWO_POW_52 - 1.0,
        TWO_POW_52 - 0.5,
        TWO_POW_52 - 1.5,
        (two_pow_52 - 1) as f64 - 0.25,
    ];
    // Whole numbers, halves (rounding ties) and their neighbours.
    for k in [1u64, 2, 3, 1 << 20, 1 << 40, (1 << 51) + 1, two_pow_52 - 2] {
        for t in [k as f64, k as f64 + 0.5, k as f64 - 0.5] {
            values.extend([t, t.next_down(), t.next_up()]);
        }
    }
    // Random floats over every binade below 2^52.
    let mut rng = Rng::seed_from_u64(52);
    values.extend((0..1_000_000).map(|_| {
        let bits = rng.next_u64();
        let exponent = 1023 - 40 + (bits >> 52) % 92;
        f64::from_bits(exponent << 52 | bits & ((1 << 52) - 1))
    }));
    for t in values
        .into_iter()
        .filter(|&t| (0.0..TWO_POW_52).contains(&t))
    {
        assert_eq!(whole_below_2_pow_52(t), t as u64, "{t:?}");
    }
}

#[test]
fn draws_are_exactly_exp1s_from_the_same_outputs() {
    let layers = Layers::get();
    assert!(layers.known(), "the ziggurat's widths were not read back");
    let (mut ours, mut theirs) = (Rng::seed_from_u64(9), Rng::seed_from_u64(9));
    let mut slow = 0;
    for _ in 0..1_000_000 {
        let drawn = layers.draw(&mut ours);
        let expected: f64 = Exp1.sample(&mut theirs);
        assert_eq!(drawn.to_bits(), expected.to_bits());
        slow += usize::from(drawn >= 7.0);
    }
    // The generators stayed in step, through the tail (draws >= 7, from
    // the first layer's slow path) as well.
    assert!(slow > 100, "{slow}");
    assert_eq!(ours.next_u64(), theirs.next_u64());
}

#[test]
fn reading_the_widths_notices_a_draw_that_asks_for_more() {
    for extra in 1..4 {
        let mut once = Replay {
            first: Some(7),
            rng: None,
            ran_out: false,
        };
        assert_eq!(once.next_u64(), 7);
        assert!(!once.ran_out);
        for _ in 0..extra {
            assert_eq!(once.next_u64(), 0);
        }
        assert!(once.ran_out, "{extra} more");
    }
}

#[test]
fn without_the_widths_every_draw_goes_to_exp1() {
    let none = Layers::none();
    assert!(!none.known());
    let (mut ours, mut theirs) = (Rng::seed_from_u64(4), Rng::seed_from_u64(4));
    for _ in 0..10_000 {
        let expected: f64 = Exp1.sample(&mut theirs);
        assert_eq!(none.draw(&mut ours).to_bits(), expected.to_bits());
    }
}

#[test]
fn arrivals_are_sorted() {
    let config = Config {
        rate: Some(Decimal::whole(1_000_000)),
        schedule: None,
    };
    let times: Vec<Nanos> = config
        .stream(Nanos(0), Nanos(NANOS_PER_SEC), Rng::seed_from_u64(3))
        .collect();
    assert!(times.is_sorted());
}

#[test]
fn refuses_both_or_neither_of_rate_and_schedule() {
    let neither = Config {
        rate: None,
        schedule: None,
    };
    assert!(neither.check(Nanos::SECOND).is_err());
    let both = Config {
        rate: Some(Decimal::whole(1)),
        schedule: Some(vec![(Nanos(0), Decimal::whole(1))]),
    };
    assert!(both.check(Nanos::SECOND).is_err());
}
