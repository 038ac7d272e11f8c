//! Poisson arrivals: exponential gaps at a constant rate, or at a
//! piecewise-constant rate given by a schedule.

use rand_distr::{Distribution, Exp1};
use serde::Deserialize;

use super::Rng;
use crate::decimal::Decimal;
use crate::time::{NANOS_PER_SEC, Nanos};

/// `kind = "poisson"`: exactly one of `rate` or `schedule`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Mean arrivals per second.
    pub rate: Option<Decimal>,
    /// `[["0s", 50], ["20s", 400]]`: from each time on, the given rate.
    pub schedule: Option<Vec<(Nanos, Decimal)>>,
}

impl Config {
    /// The schedule as validated segments: (from, rate per second).
    fn segments(&self) -> Vec<(u64, f64)> {
        match (&self.rate, &self.schedule) {
            (Some(rate), _) => vec![(0, rate.as_f64())],
            (None, Some(schedule)) => schedule
                .iter()
                .map(|(at, rate)| (at.get(), rate.as_f64()))
                .collect(),
            (None, None) => Vec::new(),
        }
    }

    /// Checks that exactly one of `rate` and `schedule` is given, and the schedule's order.
    pub fn validate(&self, end: Nanos) -> Result<(), String> {
        match (&self.rate, &self.schedule) {
            (Some(_), Some(_)) => Err("rate: give either `rate` or `schedule`, not both".into()),
            (None, None) => Err("rate: missing; give `rate` (per second) or `schedule`".into()),
            (Some(rate), None) if rate.is_zero() => Err("rate: must be above 0 per second".into()),
            (Some(_), None) => Ok(()),
            (None, Some(schedule)) => {
                if schedule.is_empty() {
                    return Err("schedule: needs at least one [time, rate] entry".into());
                }
                if !schedule.windows(2).all(|pair| pair[0].0 < pair[1].0) {
                    return Err("schedule: times must increase".into());
                }
                if let Some((at, _)) = schedule.iter().find(|(at, _)| *at >= end) {
                    return Err(format!(
                        "schedule: {at} is not before the source's end ({end})"
                    ));
                }
                Ok(())
            }
        }
    }

    /// Arrivals in `[start, end)`.
    pub fn arrivals(&self, start: Nanos, end: Nanos, rng: Rng) -> Arrivals {
        let segments = self.segments();
        let segment = segments.iter().rposition(|&(from, _)| from <= start.get());
        Arrivals {
            position: start.get() as f64,
            end: end.get(),
            segment: segment.unwrap_or(0),
            // Before the first scheduled time the rate is 0.
            idle_until: segment.is_none().then(|| segments[0].0),
            segments,
            rng,
        }
    }
}

/// The running source. With a schedule, a gap that would cross into the next
/// segment is cut at the boundary and redrawn at the new rate, which is exact
/// for a Poisson process (it has no memory).
pub struct Arrivals {
    /// The current time in ns, as a float so sub-nanosecond gaps accumulate.
    position: f64,
    end: u64,
    segments: Vec<(u64, f64)>,
    segment: usize,
    idle_until: Option<u64>,
    rng: Rng,
}

impl Arrivals {
    fn segment_end(&self) -> u64 {
        self.segments
            .get(self.segment + 1)
            .map_or(self.end, |&(from, _)| from.min(self.end))
    }
}

impl Iterator for Arrivals {
    type Item = Nanos;

    #[inline]
    fn next(&mut self) -> Option<Nanos> {
        if let Some(until) = self.idle_until.take() {
            self.position = until as f64;
        }
        loop {
            let (_, rate) = *self.segments.get(self.segment)?;
            let segment_end = self.segment_end();
            if rate > 0.0 {
                let gap: f64 = Exp1.sample(&mut self.rng);
                let next = self.position + gap * (NANOS_PER_SEC as f64 / rate);
                if next < segment_end as f64 {
                    self.position = next;
                    return Some(Nanos(next as u64));
                }
            }
            if segment_end >= self.end {
                self.segments.clear();
                return None;
            }
            self.position = segment_end as f64;
            self.segment += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn count(config: Config, from: u64, to: u64, end: u64) -> usize {
        let arrivals = config.arrivals(Nanos(0), Nanos(end), Rng::seed_from_u64(7));
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

    #[test]
    fn arrivals_are_sorted() {
        let config = Config {
            rate: Some(Decimal::whole(1_000_000)),
            schedule: None,
        };
        let times: Vec<Nanos> = config
            .arrivals(Nanos(0), Nanos(NANOS_PER_SEC), Rng::seed_from_u64(3))
            .collect();
        assert!(times.is_sorted());
    }

    #[test]
    fn refuses_both_or_neither_of_rate_and_schedule() {
        let neither = Config {
            rate: None,
            schedule: None,
        };
        assert!(neither.validate(Nanos::SECOND).is_err());
        let both = Config {
            rate: Some(Decimal::whole(1)),
            schedule: Some(vec![(Nanos(0), Decimal::whole(1))]),
        };
        assert!(both.validate(Nanos::SECOND).is_err());
    }
}
