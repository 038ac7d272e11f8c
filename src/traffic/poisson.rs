//! Poisson arrivals: exponential gaps at a constant rate, or at a
//! piecewise-constant rate given by a schedule.

use std::convert::Infallible;

use rand::{Rng as _, TryRng};
use rand_distr::{Distribution, Exp1};
use serde::Deserialize;

use super::{Chunks, Kind, Place, Rng, Timed};
use crate::decimal::Decimal;
use crate::error::{FieldError, field_error};
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
    /// The schedule as segments: (from, mean gap in ns, or 0 for a rate of 0).
    fn segments(&self) -> Vec<(u64, f64)> {
        let mean_gap = |rate: &Decimal| {
            if rate.is_zero() {
                0.0
            } else {
                NANOS_PER_SEC as f64 / rate.as_f64()
            }
        };
        match (&self.rate, &self.schedule) {
            (Some(rate), _) => vec![(0, mean_gap(rate))],
            (None, Some(schedule)) => schedule
                .iter()
                .map(|(at, rate)| (at.get(), mean_gap(rate)))
                .collect(),
            (None, None) => Vec::new(),
        }
    }

    /// Checks that exactly one of `rate` and `schedule` is given, and the schedule's order.
    fn check(&self, end: Nanos) -> Result<(), FieldError> {
        match (&self.rate, &self.schedule) {
            (Some(_), Some(_)) => Err(field_error!(
                "rate",
                "give either `rate` or `schedule`, not both"
            )),
            (None, None) => Err(field_error!(
                "rate",
                "missing; give `rate` (per second) or `schedule`"
            )),
            (Some(rate), None) if rate.is_zero() => {
                Err(field_error!("rate", "must be above 0 per second"))
            }
            (Some(_), None) => Ok(()),
            (None, Some(schedule)) => {
                if schedule.is_empty() {
                    return Err(field_error!(
                        "schedule",
                        "needs at least one [time, rate] entry"
                    ));
                }
                if !schedule.windows(2).all(|pair| pair[0].0 < pair[1].0) {
                    return Err(field_error!("schedule", "times must increase"));
                }
                if let Some((at, _)) = schedule.iter().find(|(at, _)| *at >= end) {
                    return Err(field_error!(
                        "schedule",
                        "{at} is not before the source's end ({end})"
                    ));
                }
                Ok(())
            }
        }
    }

    /// Arrivals in `[start, end)`.
    pub fn stream(&self, start: Nanos, end: Nanos, rng: Rng) -> Arrivals {
        let mut segments = self.segments();
        // Before the first scheduled time the rate is 0.
        if segments
            .first()
            .is_some_and(|&(from, _)| from > start.get())
        {
            segments.insert(0, (start.get(), 0.0));
        }
        let segment = segments
            .iter()
            .rposition(|&(from, _)| from <= start.get())
            .unwrap_or(0);
        let mut arrivals = Arrivals {
            position: start.get() as f64,
            mean_gap: 0.0,
            limit: 0.0,
            end: end.get(),
            segments,
            segment,
            rng,
            layers: Layers::get(),
        };
        arrivals.enter(segment);
        arrivals
    }
}

impl Kind for Config {
    const NAME: &'static str = "poisson";
    type Item = Nanos;
    type Arrivals = Arrivals;

    fn validate(&self, place: Place) -> Result<Vec<String>, FieldError> {
        self.check(place.end).map(|()| Vec::new())
    }

    fn is_stochastic(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        match (&self.rate, &self.schedule) {
            (Some(rate), _) => format!("poisson {rate}/s"),
            (None, Some(schedule)) => {
                let steps: Vec<String> = schedule
                    .iter()
                    .map(|(at, rate)| format!("{rate}/s from {at}"))
                    .collect();
                format!("poisson {}", steps.join(", "))
            }
            (None, None) => "poisson".to_string(),
        }
    }

    fn estimated_arrivals(&self, place: Place) -> Result<u128, FieldError> {
        Ok(match (&self.rate, &self.schedule) {
            (Some(rate), _) => super::at_rate(place, rate),
            // Bounded by the highest rate over the whole span.
            (None, Some(schedule)) => schedule
                .iter()
                .map(|(_, rate)| super::at_rate(place, rate))
                .max()
                .unwrap_or(0),
            (None, None) => 0,
        })
    }

    fn arrivals(&self, place: Place, rng: Rng, _: Rng) -> Result<Arrivals, FieldError> {
        Ok(self.stream(place.start, place.end, rng))
    }

    fn refill<T: Timed>(arrivals: &mut Arrivals, out: &mut Vec<T>, count: usize) {
        Chunks::refill(arrivals, out, count);
    }
}

/// The running source. With a schedule, a gap that would cross into the next
/// segment is cut at the boundary and redrawn at the new rate, which is exact
/// for a Poisson process (it has no memory).
pub struct Arrivals {
    /// The current time in ns, as a float so sub-nanosecond gaps accumulate.
    position: f64,
    /// The current segment's mean gap in ns (0 for a rate of 0).
    mean_gap: f64,
    /// Where the current segment ends, in ns.
    limit: f64,
    end: u64,
    segments: Vec<(u64, f64)>,
    segment: usize,
    rng: Rng,
    layers: &'static Layers,
}

/// `Exp1`'s draws, the common case made here. `rand_distr` draws an
/// exponential with a ziggurat: a raw 64-bit output picks a layer from its low
/// 8 bits and a uniform `u` from its high 52, and in nearly every draw
/// `u` times the layer's width is under the next layer's width and is the
/// draw. Made inline, that test is about half the instructions of a call to
/// `Exp1::sample` with the generator's state around it; every other draw is
/// handed to `Exp1` with the same raw output first, so the draws are exactly
/// `Exp1`'s, in the same order, from the same outputs.
struct Layers {
    /// Each layer's width.
    width: [f64; 256],
    /// The next layer's width, 0 where not known (the last two layers): a
    /// draw there always goes to `Exp1`.
    next_width: [f64; 256],
}

impl Layers {
    /// The widths, read back through `Exp1` once per process.
    fn get() -> &'static Layers {
        static LAYERS: std::sync::OnceLock<Layers> = std::sync::OnceLock::new();
        LAYERS.get_or_init(Layers::read)
    }

    /// A raw output of layer `i` whose uniform bits are all 0 gives
    /// `u = 2^-53`, so `Exp1` returns exactly `2^-53` times the layer's width,
    /// having asked for one output. The last layer's test never passes (the
    /// next width is 0), so its width cannot be read this way and the last
    /// two layers are left to `Exp1`. Should a later `rand_distr` draw
    /// differently, either the widths read fail the checks below and every
    /// draw goes to `Exp1` (slower, still exact), or the test comparing a
    /// million draws with `Exp1`'s fails.
    fn read() -> Layers {
        let mut width = [1.0_f64; 256];
        for (layer, width) in width.iter_mut().enumerate().take(255) {
            let mut once = Replay {
                first: Some(layer as u64),
                rng: None,
                ran_out: false,
            };
            let drawn: f64 = Exp1.sample(&mut once);
            *width = drawn * TWO_POW_53;
            if once.ran_out {
                return Layers::none();
            }
        }
        let known = &width[..255];
        if !known.iter().all(|w| w.is_finite() && *w > 0.0) || !known.is_sorted_by(|a, b| a > b) {
            return Layers::none();
        }
        let mut next_width = [0.0; 256];
        next_width[..254].copy_from_slice(&width[1..255]);
        Layers { width, next_width }
    }

    /// Every draw to `Exp1`.
    fn none() -> Layers {
        Layers {
            width: [1.0; 256],
            next_width: [0.0; 256],
        }
    }

    /// Whether the common case is made here at all.
    #[cfg(test)]
    fn known(&self) -> bool {
        self.next_width[0] > 0.0
    }

    /// The next draw from `rng`, exactly as `Exp1.sample(rng)`.
    #[inline(always)]
    fn draw(&self, rng: &mut Rng) -> f64 {
        let bits = rng.next_u64();
        let layer = usize::from(bits as u8);
        // As `rand_distr` makes it: 52 bits as a float in [1, 2), less just under 1.
        let u = f64::from_bits(bits >> 12 | 1.0_f64.to_bits()) - (1.0 - f64::EPSILON / 2.0);
        let x = u * self.width[layer];
        if x < self.next_width[layer] {
            x
        } else {
            let drawn;
            (drawn, *rng) = Layers::draw_in_full(bits, rng.clone());
            drawn
        }
    }

    /// The rest of the draw whose raw output was `bits`, by `Exp1`. The
    /// generator goes in and out by value, so that the hot loop keeps it in
    /// registers.
    #[cold]
    #[inline(never)]
    fn draw_in_full(bits: u64, mut rng: Rng) -> (f64, Rng) {
        let drawn = Exp1.sample(&mut Replay {
            first: Some(bits),
            rng: Some(&mut rng),
            ran_out: false,
        });
        (drawn, rng)
    }
}

/// 2^53 as a float.
const TWO_POW_53: f64 = 9_007_199_254_740_992.0;

/// A generator that gives `first`, then `rng`'s outputs; without `rng`, zeros,
/// and it notes that it ran out.
struct Replay<'a> {
    first: Option<u64>,
    rng: Option<&'a mut Rng>,
    ran_out: bool,
}

impl TryRng for Replay<'_> {
    type Error = Infallible;

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(match (self.first.take(), &mut self.rng) {
            (Some(first), _) => first,
            (None, Some(rng)) => rng.next_u64(),
            (None, None) => {
                self.ran_out = true;
                0
            }
        })
    }

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        // As the generator does: the upper half of a 64-bit output.
        Ok((self.next_u64() >> 32) as u32)
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), Infallible> {
        rand::rand_core::utils::fill_bytes_via_next_word(dest, || self.try_next_u64())
    }
}

impl Arrivals {
    fn segment_end(&self, segment: usize) -> u64 {
        self.segments
            .get(segment + 1)
            .map_or(self.end, |&(from, _)| from.min(self.end))
    }

    fn enter(&mut self, segment: usize) {
        self.segment = segment;
        self.mean_gap = self.segments.get(segment).map_or(0.0, |&(_, gap)| gap);
        self.limit = self.segment_end(segment) as f64;
    }

    /// Moves to the next segment; false when the source has ended.
    fn advance(&mut self) -> bool {
        let end = self.segment_end(self.segment);
        if end >= self.end || self.segment + 1 >= self.segments.len() {
            self.mean_gap = 0.0;
            self.limit = f64::NEG_INFINITY;
            return false;
        }
        self.position = end as f64;
        self.enter(self.segment + 1);
        true
    }
}

impl Arrivals {
    /// Writes its next arrivals into `slots`, and returns how many: all of
    /// them but at the end. The same draws as [`Iterator::next`], placed by a
    /// loop that keeps the generator and the position in registers (the
    /// draws' rare slow path is a call out of line, see [`Layers`]) and
    /// writes each arrival straight to its slot.
    #[inline]
    pub fn fill<T: Timed>(&mut self, slots: &mut [T]) -> usize {
        let mut filled = 0;
        while filled < slots.len() {
            if self.mean_gap > 0.0 {
                let free = &mut slots[filled..];
                let (written, crossed) = if self.limit <= TWO_POW_52 {
                    self.fill_segment(free, whole_below_2_pow_52)
                } else {
                    self.fill_segment(free, |t| t as u64)
                };
                filled += written;
                if !crossed {
                    break;
                }
            }
            if !self.advance() {
                break;
            }
        }
        filled
    }

    /// Fills `slots` within the current segment; returns how many, and
    /// whether a draw crossed the segment's end.
    #[inline(always)]
    fn fill_segment<T: Timed>(
        &mut self,
        slots: &mut [T],
        whole: impl Fn(f64) -> u64,
    ) -> (usize, bool) {
        let (layers, mean_gap, limit) = (self.layers, self.mean_gap, self.limit);
        let mut position = self.position;
        let mut rng = self.rng.clone();
        let mut written = 0;
        let mut crossed = false;
        for slot in slots.iter_mut() {
            let next = position + layers.draw(&mut rng) * mean_gap;
            if next >= limit {
                // Into the next segment: the draw is redrawn there, as `next` does.
                crossed = true;
                break;
            }
            position = next;
            *slot = T::at(Nanos(whole(next)));
            written += 1;
        }
        self.rng = rng;
        self.position = position;
        (written, crossed)
    }
}

impl<T: Timed> Chunks<T> for Arrivals {
    fn refill(&mut self, out: &mut Vec<T>, count: usize) {
        // A chunk handed back full is written over as it is, without a pass
        // to clear it first.
        out.resize(count, T::at(Nanos::ZERO));
        let filled = self.fill(out);
        out.truncate(filled);
    }
}

/// 2^52 as a float: from it to 2^53 the floats are exactly the whole numbers.
const TWO_POW_52: f64 = 4_503_599_627_370_496.0;

/// `t as u64` for `0 <= t < 2^52`, without the checks for NaN and for values
/// out of range that `as` makes (a quarter of the generating thread's time):
/// adding 2^52 rounds `t` to the nearest whole number, which the sum's bits
/// then hold; one less if that rounded up.
#[inline(always)]
fn whole_below_2_pow_52(t: f64) -> u64 {
    let rounded = t + TWO_POW_52;
    (rounded.to_bits() - TWO_POW_52.to_bits()) - u64::from(rounded - TWO_POW_52 > t)
}

impl Iterator for Arrivals {
    type Item = Nanos;

    #[inline]
    fn next(&mut self) -> Option<Nanos> {
        loop {
            if self.mean_gap > 0.0 {
                let gap = self.layers.draw(&mut self.rng);
                let next = self.position + gap * self.mean_gap;
                if next < self.limit {
                    self.position = next;
                    return Some(Nanos(next as u64));
                }
            }
            if !self.advance() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests;
