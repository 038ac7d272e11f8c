//! Clients that retry: `retry = { … }` on a workload. A rejected request
//! comes back after a wait its client works out from the policy, the
//! jitter, and (with `honour-hint`) the limiter's own `Retry-After`.
//!
//! Waits are whole nanoseconds; the jitter draws are whole nanoseconds from
//! the workload's own retry stream, so a run repeats exactly.

use rand::RngExt;
use serde::Deserialize;

use crate::error::{FieldError, field_error};
use crate::limiter::Hint;
use crate::time::Nanos;
use crate::traffic::Rng;

/// The most attempts one request may make, first included.
pub const MAX_ATTEMPTS: u32 = 100;
/// The most requests waiting to retry at once in one run (each held in the
/// run's event queue, about 64 bytes).
pub const MAX_PENDING: usize = 10_000_000;
/// The largest retry budget.
pub const MAX_BUDGET: u64 = 1_000_000_000;
/// What a retry costs from the budget (AWS SDKs' standard mode: `RETRY_COST`).
pub const RETRY_COST: u64 = 5;
/// What a request admitted at its first attempt returns to the budget
/// (`NO_RETRY_INCREMENT`); an admitted retry returns its own cost.
pub const NO_RETRY_INCREMENT: u64 = 1;

/// When a client retries a rejected request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Never: a rejected request is given up.
    None,
    /// At once, in the same nanosecond.
    Immediate,
    /// After `base`.
    Fixed,
    /// After `base · multiplierⁿ⁻¹` for the n-th retry, at most `cap`.
    Exponential,
    /// At the limiter's `Retry-After` (or its reset), then `fallback` when
    /// the limiter says nothing.
    HonourHint,
}

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Immediate => "immediate",
            Policy::Fixed => "fixed",
            Policy::Exponential => "exponential",
            Policy::HonourHint => "honour-hint",
        }
    }
}

/// How a wait is spread (Brooker, "Exponential Backoff and Jitter").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Jitter {
    /// The wait as computed.
    #[default]
    None,
    /// Uniform in `[0, wait]`.
    Full,
    /// `wait/2` plus uniform in `[0, wait/2]`.
    Equal,
    /// Uniform in `[base, 3 · previous wait]`, at most `cap`.
    Decorrelated,
}

impl Jitter {
    fn name(self) -> &'static str {
        match self {
            Jitter::None => "no jitter",
            Jitter::Full => "full jitter",
            Jitter::Equal => "equal jitter",
            Jitter::Decorrelated => "decorrelated jitter",
        }
    }
}

/// `retry = { … }` as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    policy: Policy,
    base: Option<Nanos>,
    multiplier: Option<Multiplier>,
    cap: Option<Nanos>,
    #[serde(default)]
    jitter: Jitter,
    fallback: Option<Policy>,
    max_attempts: Option<u32>,
    budget: Option<u64>,
    lockout: Option<Nanos>,
}

/// A multiplier in thousandths, read from a whole or decimal number with
/// at most three decimals, so that waits are exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Multiplier(u64);

impl<'de> Deserialize<'de> for Multiplier {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Multiplier;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number from 1 to 1000 with at most three decimals, like 2 or 1.5")
            }

            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Multiplier, E> {
                match u64::try_from(value) {
                    Ok(whole @ 1..=1000) => Ok(Multiplier(whole * 1000)),
                    _ => Err(E::custom(format!(
                        "expected a number from 1 to 1000, got {value}"
                    ))),
                }
            }

            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Multiplier, E> {
                let milli = (value * 1000.0).round();
                if !(1.0..=1000.0).contains(&value) || (value * 1000.0 - milli).abs() > 1e-6 {
                    return Err(E::custom(format!(
                        "expected a number from 1 to 1000 with at most three decimals, got {value}"
                    )));
                }
                Ok(Multiplier(milli as u64))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A workload's retry behaviour, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// When to retry.
    pub policy: Policy,
    /// The first wait of `fixed` and `exponential`; with `honour-hint`, the
    /// spread the jitter adds after the hint.
    pub base: Nanos,
    /// `exponential`'s growth per retry, in thousandths.
    pub multiplier_milli: u64,
    /// The longest wait a backoff computes.
    pub cap: Nanos,
    /// How waits are spread.
    pub jitter: Jitter,
    /// What `honour-hint` does when the limiter gives no hint.
    pub fallback: Policy,
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// A retry budget shared by the workload's clients: tokens, if any.
    pub budget: Option<u64>,
    /// How long a client must be rejected on every attempt to count as locked out.
    pub lockout: Nanos,
}

impl Retry {
    /// Reads and checks `retry = { … }`.
    pub fn from_table(table: toml::Table) -> Result<Retry, FieldError> {
        let file: File = crate::config::parse_table(table)?;
        let base = file.base.unwrap_or(Nanos(100_000_000));
        let cap = file.cap.unwrap_or(Nanos(20 * crate::time::NANOS_PER_SEC));
        let max_attempts = file.max_attempts.unwrap_or(5);
        if !(1..=MAX_ATTEMPTS).contains(&max_attempts) {
            return Err(field_error!(
                "max_attempts",
                "expected a whole number from 1 to {MAX_ATTEMPTS} (the first attempt included), got {max_attempts}"
            ));
        }
        let fallback = file.fallback.unwrap_or(Policy::Exponential);
        if fallback == Policy::HonourHint {
            return Err(field_error!(
                "fallback",
                "is what honour-hint does without a hint, so it cannot be honour-hint itself; use none, immediate, fixed or exponential"
            ));
        }
        if file.fallback.is_some() && file.policy != Policy::HonourHint {
            return Err(field_error!(
                "fallback",
                "applies only to policy = \"honour-hint\", and the policy is {:?}",
                file.policy.name()
            ));
        }
        let backs_off = |p: Policy| matches!(p, Policy::Fixed | Policy::Exponential);
        if (backs_off(file.policy)
            || (file.policy == Policy::HonourHint && backs_off(fallback))
            || file.jitter == Jitter::Decorrelated)
            && base == Nanos::ZERO
        {
            return Err(field_error!(
                "base",
                "must be longer than 0 for a backoff (use policy = \"immediate\" to retry at once)"
            ));
        }
        if cap < base {
            return Err(field_error!("cap", "{cap} is shorter than base ({base})"));
        }
        if let Some(budget) = file.budget
            && !(RETRY_COST..=MAX_BUDGET).contains(&budget)
        {
            return Err(field_error!(
                "budget",
                "expected tokens from {RETRY_COST} (one retry) to {MAX_BUDGET}, got {budget}"
            ));
        }
        let lockout = file
            .lockout
            .unwrap_or(Nanos(5 * crate::time::NANOS_PER_SEC));
        if lockout == Nanos::ZERO {
            return Err(field_error!("lockout", "must be longer than 0"));
        }
        Ok(Retry {
            policy: file.policy,
            base,
            multiplier_milli: file.multiplier.map_or(2000, |m| m.0),
            cap,
            jitter: file.jitter,
            fallback,
            max_attempts: if file.policy == Policy::None {
                1
            } else {
                max_attempts
            },
            budget: file.budget,
            lockout,
        })
    }

    /// The behaviour in words, for the table and report.
    pub fn describe(&self) -> String {
        let backoff = |policy: Policy| match policy {
            Policy::None => "no retry".to_string(),
            Policy::Immediate => "retry at once".to_string(),
            Policy::Fixed => format!("retry after {}", self.base),
            Policy::Exponential => format!(
                "exponential backoff from {} ×{} up to {}",
                self.base,
                milli_words(self.multiplier_milli),
                self.cap
            ),
            Policy::HonourHint => "retry at the limiter's hint".to_string(),
        };
        let mut words = backoff(self.policy);
        if self.policy == Policy::HonourHint {
            if self.jitter != Jitter::None {
                words.push_str(&format!(" + {} over {}", self.jitter.name(), self.base));
            }
            words.push_str(&format!(", else {}", backoff(self.fallback)));
        } else if self.jitter != Jitter::None && self.policy != Policy::None {
            words.push_str(&format!(", {}", self.jitter.name()));
        }
        if self.policy != Policy::None {
            words.push_str(&format!(", at most {} attempts", self.max_attempts));
        }
        if let Some(budget) = self.budget {
            words.push_str(&format!(", budget {budget}"));
        }
        words
    }

    /// When the `retry`-th retry (1 for the first) of a request rejected at
    /// `now` with `hint` comes back, and the wait it slept (for decorrelated
    /// jitter's next draw); `previous` is the wait before this one (zero
    /// before the first retry). None when the policy gives up.
    pub fn next_attempt(
        &self,
        now: Nanos,
        hint: Hint,
        retry: u32,
        previous: Nanos,
        rng: &mut Rng,
    ) -> Option<(Nanos, Nanos)> {
        let policy = match self.policy {
            Policy::HonourHint => match hint.retry_at.or(hint.reset_at) {
                Some(at) => {
                    let wait = at.get().saturating_sub(now.get());
                    // The jitter spreads retries over `base` after the hint.
                    let extra = match self.jitter {
                        Jitter::None => 0,
                        _ => self.spread(self.base.get(), previous, rng),
                    };
                    let slept = wait.saturating_add(extra);
                    return Some((Nanos(now.get().saturating_add(slept)), Nanos(slept)));
                }
                None => self.fallback,
            },
            policy => policy,
        };
        let wait = match policy {
            Policy::None | Policy::HonourHint => return None,
            Policy::Immediate => return Some((now, Nanos::ZERO)),
            Policy::Fixed => self.base.get(),
            Policy::Exponential => self.exponential(retry),
        };
        let slept = self.spread(wait, previous, rng);
        Some((Nanos(now.get().saturating_add(slept)), Nanos(slept)))
    }

    /// `base · multiplier^(retry − 1)`, at most `cap`, in whole nanoseconds
    /// (each step rounds down).
    fn exponential(&self, retry: u32) -> u64 {
        let cap = self.cap.get();
        let mut wait = self.base.get().min(cap);
        for _ in 1..retry {
            if wait >= cap {
                break;
            }
            let next = u128::from(wait) * u128::from(self.multiplier_milli) / 1000;
            wait = u64::try_from(next).unwrap_or(u64::MAX).min(cap);
        }
        wait
    }

    /// `wait` spread by the jitter.
    fn spread(&self, wait: u64, previous: Nanos, rng: &mut Rng) -> u64 {
        match self.jitter {
            Jitter::None => wait,
            Jitter::Full => rng.random_range(0..=wait),
            Jitter::Equal => wait / 2 + rng.random_range(0..=wait - wait / 2),
            // Brooker's "decorrelated jitter": sleep = min(cap,
            // random_between(base, sleep × 3)). The draw is made over the
            // whole range and capped after, so once 3 × the previous sleep
            // passes the cap, about half the sleeps are the cap itself.
            Jitter::Decorrelated => {
                let base = self.base.get();
                let previous = previous.get().max(base);
                let high = previous.saturating_mul(3).max(base);
                rng.random_range(base..=high).min(self.cap.get())
            }
        }
    }
}

/// `1.5` from 1500 thousandths.
fn milli_words(milli: u64) -> String {
    let text = format!("{}.{:03}", milli / 1000, milli % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The retry budget of one workload's clients (AWS SDKs' standard retry
/// quota): a retry takes [`RETRY_COST`] tokens and is not made without
/// them; an admitted first attempt returns [`NO_RETRY_INCREMENT`], an
/// admitted retry its cost; never above the starting amount.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    tokens: u64,
    capacity: u64,
}

impl Budget {
    /// A full budget of `capacity` tokens.
    pub fn new(capacity: u64) -> Budget {
        Budget {
            tokens: capacity,
            capacity,
        }
    }

    /// Takes a retry's cost; false (and nothing taken) when short.
    pub fn take(&mut self) -> bool {
        let enough = self.tokens >= RETRY_COST;
        if enough {
            self.tokens -= RETRY_COST;
        }
        enough
    }

    /// A request was admitted at attempt `attempt` (1 for the first).
    pub fn admitted(&mut self, attempt: u32) {
        let back = if attempt == 1 {
            NO_RETRY_INCREMENT
        } else {
            RETRY_COST
        };
        self.tokens = (self.tokens + back).min(self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn retry(fields: &str) -> Result<Retry, FieldError> {
        let table: toml::Table = toml::from_str(fields).unwrap();
        Retry::from_table(table)
    }

    fn rng() -> Rng {
        Rng::seed_from_u64(7)
    }

    const NO_HINT: Hint = Hint::NONE;

    #[test]
    fn exponential_backoff_doubles_up_to_the_cap() {
        let r = retry("policy = \"exponential\"\nbase = \"100ms\"\ncap = \"1s\"").unwrap();
        let waits: Vec<u64> = (1..=6)
            .map(|n| {
                r.next_attempt(Nanos(0), NO_HINT, n, Nanos::ZERO, &mut rng())
                    .unwrap()
                    .0
                    .get()
                    / 1_000_000
            })
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn a_decimal_multiplier_is_exact_in_thousandths() {
        let r = retry("policy = \"exponential\"\nbase = \"1s\"\nmultiplier = 1.5\ncap = \"1h\"")
            .unwrap();
        assert_eq!(r.exponential(3), 2_250_000_000);
        assert!(
            retry("policy = \"exponential\"\nmultiplier = 1.0005")
                .unwrap_err()
                .to_string()
                .contains("at most three decimals")
        );
        assert!(
            retry("policy = \"exponential\"\nmultiplier = 0")
                .unwrap_err()
                .to_string()
                .starts_with("multiplier: ")
        );
    }

    #[test]
    fn honour_hint_waits_for_the_hint_and_falls_back_without_one() {
        let r = retry("policy = \"honour-hint\"\nbase = \"50ms\"").unwrap();
        let hint = Hint::at_reset(2_000_000_000);
        let (at, _) = r
            .next_attempt(Nanos(1_300_000_000), hint, 1, Nanos::ZERO, &mut rng())
            .unwrap();
        assert_eq!(at, Nanos(2_000_000_000), "exactly at the reset");
        let (at, _) = r
            .next_attempt(Nanos(1_300_000_000), NO_HINT, 1, Nanos::ZERO, &mut rng())
            .unwrap();
        assert_eq!(at, Nanos(1_350_000_000), "the exponential fallback's base");
        let jittered =
            retry("policy = \"honour-hint\"\nbase = \"50ms\"\njitter = \"full\"").unwrap();
        let mut rng = rng();
        let spread: Vec<u64> = (0..200)
            .map(|_| {
                jittered
                    .next_attempt(Nanos(1_300_000_000), hint, 1, Nanos::ZERO, &mut rng)
                    .unwrap()
                    .0
                    .get()
            })
            .collect();
        assert!(
            spread
                .iter()
                .all(|&t| (2_000_000_000..=2_050_000_000).contains(&t))
        );
        assert!(
            spread.iter().any(|&t| t > 2_025_000_000) && spread.iter().any(|&t| t < 2_025_000_000)
        );
    }

    #[test]
    fn decorrelated_jitter_caps_after_the_draw_as_brooker_writes_it() {
        // sleep = min(cap, random_between(base, 3 × 300 ms)) with a 600 ms
        // cap: a draw above 600 ms (3/8 of them) sleeps exactly the cap.
        let r = retry(
            "policy = \"exponential\"\nbase = \"100ms\"\ncap = \"600ms\"\njitter = \"decorrelated\"",
        )
        .unwrap();
        let mut rng = rng();
        let waits: Vec<u64> = (0..4000)
            .map(|_| {
                r.next_attempt(Nanos(0), NO_HINT, 3, Nanos(300_000_000), &mut rng)
                    .unwrap()
                    .1
                    .get()
            })
            .collect();
        let at_cap = waits.iter().filter(|&&w| w == 600_000_000).count();
        assert!(
            waits
                .iter()
                .all(|&w| (100_000_000..=600_000_000).contains(&w))
        );
        // 3/8 of 4000 is 1500; a draw capped before would reach the cap
        // about never.
        assert!(
            (1350..=1650).contains(&at_cap),
            "{at_cap} of 4000 at the cap"
        );
    }

    #[test]
    fn jitter_stays_within_brookers_ranges() {
        let mut rng = rng();
        for (jitter, low, high) in [
            ("full", 0, 400),
            ("equal", 200, 400),
            ("decorrelated", 100, 900),
        ] {
            let r = retry(&format!(
                "policy = \"exponential\"\nbase = \"100ms\"\ncap = \"10s\"\njitter = \"{jitter}\""
            ))
            .unwrap();
            let waits: Vec<u64> = (0..500)
                .map(|_| {
                    r.next_attempt(Nanos(0), NO_HINT, 3, Nanos(300_000_000), &mut rng)
                        .unwrap()
                        .1
                        .get()
                        / 1_000_000
                })
                .collect();
            let (min, max) = (*waits.iter().min().unwrap(), *waits.iter().max().unwrap());
            assert!(min >= low && max <= high, "{jitter}: {min}..{max}");
            assert!(
                max - min > (high - low) / 2,
                "{jitter} spreads: {min}..{max}"
            );
        }
    }

    #[test]
    fn bad_settings_are_refused_with_the_field() {
        for (fields, expected) in [
            ("policy = \"sometimes\"", "policy: unknown variant"),
            (
                "policy = \"fixed\"\nmax_attempts = 0",
                "max_attempts: expected",
            ),
            (
                "policy = \"fixed\"\nmax_attempts = 101",
                "max_attempts: expected",
            ),
            (
                "policy = \"fixed\"\nbase = \"0s\"",
                "base: must be longer than 0",
            ),
            (
                "policy = \"fixed\"\ncap = \"1ms\"",
                "cap: 1ms is shorter than base",
            ),
            (
                "policy = \"fixed\"\nfallback = \"fixed\"",
                "fallback: applies only",
            ),
            (
                "policy = \"honour-hint\"\nfallback = \"honour-hint\"",
                "fallback: is what",
            ),
            (
                "policy = \"fixed\"\nbudget = 1",
                "budget: expected tokens from 5",
            ),
            (
                "policy = \"fixed\"\nlockout = \"0s\"",
                "lockout: must be longer than 0",
            ),
            ("policy = \"fixed\"\ntries = 3", "unknown field `tries`"),
        ] {
            let err = retry(fields).unwrap_err();
            assert!(err.to_string().contains(expected), "{fields}: {err}");
        }
    }

    #[test]
    fn the_budget_runs_out_and_refills_as_aws_does() {
        let mut budget = Budget::new(10);
        assert!(budget.take() && budget.take());
        assert!(!budget.take(), "0 tokens left");
        budget.admitted(1);
        assert!(!budget.take(), "1 token is not a retry");
        budget.admitted(2);
        assert!(budget.take(), "an admitted retry returns its cost");
        for _ in 0..100 {
            budget.admitted(1);
        }
        assert!(
            budget.take() && budget.take() && !budget.take(),
            "never above 10"
        );
    }
}
