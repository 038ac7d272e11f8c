//! Figures per client key, for workloads whose requests name their clients:
//! each key's worst rolling count (exact: one ring of the admissions in the
//! trailing interval, and a count per key), how many keys were throttled,
//! the worst key, and how much of what was admitted went to the busiest 1%.
//! Memory: 4 bytes of counts per key (8 once a key has 256 admissions in
//! one interval or 32,768 in all, 12 once it has 65,536 in one interval)
//! and 8 of id per key (none while the keys come numbered in order, as a
//! log's do), plus 8 bytes per admission in one interval (see
//! [`super::key_counts`]).

use serde::{Deserialize, Serialize};

use super::key_counts::{Admissions, Counts, Figures};
use crate::time::Nanos;
use crate::traffic::Key;

/// Admissions in the trailing interval from which those leaving it have
/// their keys' counts asked for ahead: with fewer, the counts of one
/// leaving were touched at most this many admissions before (each a cache
/// line at most, half a 512 KiB L2's lines), so they are still in the
/// cache, and asking costs more than it saves (a log of 555 admissions a
/// second: its replay with two limiters 0.92× the time without asking).
const ASK_LEAVING_FROM: usize = 1 << 12;

/// Counting, while a run streams.
#[derive(Clone, Debug)]
pub struct PerKeyCounts {
    interval: u64,
    /// The keys in the order first seen.
    keys: FirstSeen,
    /// Per key, its counts.
    counts: Counts,
    /// The admissions of the trailing interval, oldest first.
    ring: Admissions,
}

/// A decision the figures per key count, kept to be counted later (on
/// another thread): a request of a key admitted at a time, or rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEvent {
    /// See [`PerKeyCounts::admitted`].
    Admitted(Nanos, u64),
    /// See [`PerKeyCounts::rejected`].
    Rejected(u64),
}

impl KeyEvent {
    /// The key's id.
    fn client(self) -> u64 {
        match self {
            KeyEvent::Admitted(_, client) | KeyEvent::Rejected(client) => client,
        }
    }
}

/// The figures per key, in `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeysSummary {
    /// Distinct keys that sent requests.
    pub keys: u64,
    /// Keys with at least one request rejected.
    pub throttled: u64,
    /// Each key's worst rolling count: median, 99th percentile (nearest
    /// rank) and maximum over keys.
    pub worst_rolling_p50: u64,
    /// See `worst_rolling_p50`.
    pub worst_rolling_p99: u64,
    /// See `worst_rolling_p50`.
    pub worst_rolling_max: u64,
    /// The key with the largest worst rolling count (the first seen, on a tie).
    pub worst_key: u64,
    /// That key as the input names it: a trace's key column (at most 64
    /// characters), or `client N` for synthetic clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_key_name: Option<String>,
    /// With `per = "key"`: each key's worst rolling count over what one key
    /// is advertised (its "2×"), as median, 99th percentile and maximum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spike_ratio: Option<Spread>,
    /// Share of all admitted requests that went to the busiest 1% of keys
    /// (at least one key).
    pub top_1pct_share: f64,
    /// With `per = "key"`: what keeping a state per key costs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<StateCost>,
    /// With `per = "key"`: whether requests whose key names nothing (a
    /// log's `-`) pass it unlimited, as its gateway leaves them
    /// ([`crate::limiter::Limiter::treat_empty_keys`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty_unlimited: bool,
    /// With `per = "key"`: whether requests whose key names nothing are
    /// turned away before any state, as Spring Cloud Gateway's
    /// `deny-empty-key` does ([`crate::limiter::Limiter::treat_empty_keys`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty_denied: bool,
}

/// Median, 99th percentile (nearest rank) and maximum over keys.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// What a per-key limiter's state costs to keep, as real stores keep it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateCost {
    /// The most keys that had state at once.
    pub keys_alive_max: u64,
    /// One key's state where it is usually kept (a Redis key, an nginx
    /// zone node), in bytes, when known.
    pub bytes_per_key: Option<u64>,
    /// `bytes_per_key` for the most keys alive at once.
    pub bytes: Option<u64>,
    /// Store commands per request in the usual store-backed implementation.
    pub store_ops_per_request: Option<f64>,
    /// Counters reset (windows opened or rolled over), over all keys, per second.
    pub resets_per_sec: f64,
}

impl PerKeyCounts {
    /// Counting worst counts over intervals of `interval`.
    pub fn new(interval: Nanos) -> PerKeyCounts {
        PerKeyCounts {
            interval: interval.get(),
            keys: FirstSeen::Numbered(0),
            counts: Counts::new(),
            ring: Admissions::default(),
        }
    }

    /// Keys seen so far.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key was seen.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether both have counted nothing over the same interval: then the
    /// same decisions counted by each leave them alike.
    pub fn starts_as(&self, other: &PerKeyCounts) -> bool {
        self.is_empty() && other.is_empty() && self.interval == other.interval
    }

    /// Asks for the figures of `key`, to be counted `ahead` requests from
    /// now, and, while the trailing interval holds [`ASK_LEAVING_FROM`]
    /// admissions or more, those of its `ahead` oldest not asked for yet
    /// (about as many leave as come in) — see
    /// [`crate::traffic::slots::KeyTable::prefetch`].
    #[inline(always)]
    pub fn prefetch(&self, key: Key, ahead: usize) {
        if self.ring.len() >= ASK_LEAVING_FROM {
            self.ring.unasked(ahead, &self.counts);
        }
        self.counts.prefetch(key.client);
    }

    /// How many admissions ahead of leaving the trailing interval their
    /// keys' counts are asked for: none while the keys are few (their
    /// counts stay in the cache), nor while the interval holds fewer than
    /// [`ASK_LEAVING_FROM`] (a leaving admission's counts were then
    /// touched so few admissions ago that they are still there).
    #[inline(always)]
    fn leaving_ahead(&self) -> usize {
        use crate::limiter::per_key::{AHEAD, PREFETCH_FROM};
        if self.len() >= PREFETCH_FROM && self.ring.len() >= ASK_LEAVING_FROM {
            AHEAD
        } else {
            0
        }
    }

    /// A request of `key` reached the backend at `at` (non-decreasing).
    #[inline]
    pub fn admitted(&mut self, at: Nanos, key: Key) {
        let at = at.get();
        let ahead = self.leaving_ahead();
        self.ring
            .leave_before(at, self.interval, ahead, &mut self.counts);
        let (slot, new) = self.counts.admitted(key.client);
        if new {
            self.keys.push(key.client);
        }
        self.ring.push(at, slot);
    }

    /// A request of `key` was rejected.
    #[inline]
    pub fn rejected(&mut self, key: Key) {
        if self.counts.rejected(key.client) {
            self.keys.push(key.client);
        }
    }

    /// Counts `events` in order, as [`Self::admitted`] and
    /// [`Self::rejected`] one at a time would, each key's figures asked for
    /// some events ahead once the keys outgrow the cache.
    pub fn count(&mut self, events: &[KeyEvent]) {
        use crate::limiter::per_key::{AHEAD, PREFETCH_FROM};
        let ahead = self.len() >= PREFETCH_FROM;
        for (nth, &event) in events.iter().enumerate() {
            if ahead && let Some(later) = events.get(nth + AHEAD) {
                self.prefetch(Key::client(later.client()), AHEAD);
            }
            match event {
                KeyEvent::Admitted(at, client) => self.admitted(at, Key::client(client)),
                KeyEvent::Rejected(client) => self.rejected(Key::client(client)),
            }
        }
    }

    /// Every key's figures in the order first seen: its id, its worst
    /// rolling count, its admissions, and whether it was throttled.
    fn each(&self) -> impl Iterator<Item = (u64, Figures)> + '_ {
        self.keys.iter().map(|id| {
            let figures = self.counts.figures(id).expect("a key seen has figures");
            (id, figures)
        })
    }

    /// The figures, or `None` when no key sent anything; `per_key_nominal`
    /// is what one key is advertised over the interval, for a limiter per key.
    pub fn finish(
        &self,
        state: Option<StateCost>,
        per_key_nominal: Option<f64>,
    ) -> Option<KeysSummary> {
        Some(self.summed()?.finish(state, per_key_nominal))
    }

    /// The figures summed up over every key, or `None` when no key sent
    /// anything: what [`Self::finish`] says, but what a limiter adds.
    pub fn summed(&self) -> Option<Summed> {
        if self.keys.is_empty() {
            return None;
        }
        let (counts, worst, shares) = self.by_value().unwrap_or_else(|| self.by_list());
        Some(Summed {
            counts,
            worst,
            shares,
        })
    }

    /// The parts of [`Self::finish`]'s figures — [keys, throttled, the
    /// worst key], the worst counts' [p50, p99, max], [the busiest 1%'s
    /// admitted, all admitted] — from a list of every key's figures.
    fn by_list(&self) -> ([u64; 3], [u64; 3], [u64; 2]) {
        // One pass: the worst counts and admitted counts side by side, the
        // throttled keys counted, the busiest key found as they go by.
        let n = self.keys.len();
        let (mut worst, mut admitted) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut throttled, mut busiest) = (0u64, None::<(u32, u64)>);
        for (id, (most, sent, rejected)) in self.each() {
            worst.push(most);
            admitted.push(sent);
            throttled += u64::from(rejected);
            // Strictly more: the first seen keeps a tie.
            if busiest.is_none_or(|(best, _)| most > best) {
                busiest = Some((most, id));
            }
        }
        let (_, worst_key) = busiest.expect("at least one key");
        let ranks = nearest_ranks(&mut worst, [0.5, 0.99, 1.0]);
        let top = admitted.len().div_ceil(100);
        let total: u64 = admitted.iter().sum();
        (
            [n as u64, throttled, worst_key],
            ranks,
            [sum_of_largest(&mut admitted, top), total],
        )
    }

    /// [`Self::by_list`]'s parts without the list, when the keys are
    /// numbers 0, 1, …, n − 1 (as a log's are), first seen in that order or
    /// not (a log's seconds spread shuffle them), and every key's figures
    /// are below [`COUNTED_BELOW`]: two passes over the counts in place,
    /// the second counting them by value (the list of a million keys, and
    /// the selection over it, were most of the finish).
    fn by_value(&self) -> Option<([u64; 3], [u64; 3], [u64; 2])> {
        let n = self.keys.len();
        let (mut id, mut throttled, mut total) = (0u64, 0u64, 0u64);
        let (mut busiest, mut most_admitted) = ((0u32, 0u64), 0u64);
        let read = self.counts.each_numbered(n, |(most, sent, rejected)| {
            // Strictly more: the first seen keeps a tie.
            if id == 0 || most > busiest.0 {
                busiest = (most, id);
            }
            most_admitted = most_admitted.max(sent);
            throttled += u64::from(rejected);
            total += sent;
            id += 1;
        });
        if !read || busiest.0 >= COUNTED_BELOW || most_admitted >= u64::from(COUNTED_BELOW) {
            return None;
        }
        // Keys 0 … n − 1 each seen, and n keys listed: the list is those
        // numbers in the order first seen, whose first with the largest
        // count is the worst key.
        if let FirstSeen::Listed(listed) = &self.keys {
            busiest.1 = *listed.iter().find(|&&id| {
                self.counts
                    .figures(id)
                    .is_some_and(|(most, _, _)| most == busiest.0)
            })?;
        }
        let mut worst = vec![0usize; busiest.0 as usize + 1];
        let mut admitted = vec![0usize; most_admitted as usize + 1];
        self.counts.each_numbered(n, |(most, sent, _)| {
            worst[most as usize] += 1;
            admitted[sent as usize] += 1;
        });
        Some((
            [n as u64, throttled, busiest.1],
            ranks_of_tally(tally(&worst), n as u64, [0.5, 0.99, 1.0]),
            [
                sum_of_top(tally(&admitted).rev(), n.div_ceil(100) as u64),
                total,
            ],
        ))
    }
}

/// The figures per key summed up over every key ([`PerKeyCounts::summed`]),
/// to be finished for any run that counted them (several runs deciding
/// alike count them once: see `sim::run::figures`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summed {
    /// [keys, throttled, the worst key].
    counts: [u64; 3],
    /// The worst counts' [p50, p99, max].
    worst: [u64; 3],
    /// [the busiest 1%'s admitted, all admitted].
    shares: [u64; 2],
}

impl Summed {
    /// The figures, as [`PerKeyCounts::finish`] gives them.
    pub fn finish(self, state: Option<StateCost>, per_key_nominal: Option<f64>) -> KeysSummary {
        summarised(self.counts, self.worst, self.shares, state, per_key_nominal)
    }
}

/// The figures from their parts: [keys, throttled, the worst key], the
/// worst counts' [p50, p99, max], [the busiest 1%'s admitted, all admitted].
fn summarised(
    [keys, throttled, worst_key]: [u64; 3],
    [p50, p99, max]: [u64; 3],
    [top, total]: [u64; 2],
    state: Option<StateCost>,
    per_key_nominal: Option<f64>,
) -> KeysSummary {
    KeysSummary {
        keys,
        throttled,
        worst_rolling_p50: p50,
        worst_rolling_p99: p99,
        worst_rolling_max: max,
        worst_key,
        worst_key_name: None,
        spike_ratio: per_key_nominal.filter(|&n| n > 0.0).map(|nominal| Spread {
            p50: p50 as f64 / nominal,
            p99: p99 as f64 / nominal,
            max: max as f64 / nominal,
        }),
        top_1pct_share: if total == 0 {
            0.0
        } else {
            top as f64 / total as f64
        },
        state,
        empty_unlimited: false,
        empty_denied: false,
    }
}

/// Keys in the order first seen: while each new key is the next number, as
/// a trace's numbered keys come, only how many (a list of a million keys
/// was 8 MB a run to write and page in, a tenth of the figures' work).
#[derive(Clone, Debug)]
enum FirstSeen {
    /// Keys 0, 1, …, n − 1, in that order.
    Numbered(u64),
    Listed(Vec<u64>),
}

impl FirstSeen {
    #[inline]
    fn push(&mut self, id: u64) {
        match self {
            FirstSeen::Numbered(n) if id == *n => *n += 1,
            FirstSeen::Numbered(n) => {
                let mut listed: Vec<u64> = (0..*n).collect();
                listed.push(id);
                *self = FirstSeen::Listed(listed);
            }
            FirstSeen::Listed(listed) => listed.push(id),
        }
    }

    fn len(&self) -> usize {
        match self {
            FirstSeen::Numbered(n) => *n as usize,
            FirstSeen::Listed(listed) => listed.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let (numbered, listed) = match self {
            FirstSeen::Numbered(n) => (0..*n, &[][..]),
            FirstSeen::Listed(listed) => (0..0, &listed[..]),
        };
        numbered.chain(listed.iter().copied())
    }
}

impl PerKeyCounts {
    /// The figures as counts by value, to be added to other parts' (whose
    /// keys are other keys) and summed up by [`KeyTallies::summary`]; `None`
    /// when no key sent anything.
    pub fn tallies(&self) -> Option<KeyTallies> {
        if self.keys.is_empty() {
            return None;
        }
        let (mut worst, mut admitted) = (Vec::new(), Vec::new());
        let (mut throttled, mut busiest) = (0u64, None::<(u32, u64)>);
        for (id, (most, sent, rejected)) in self.each() {
            worst.push(u64::from(most));
            admitted.push(sent);
            throttled += u64::from(rejected);
            if busiest.is_none_or(|(best, _)| most > best) {
                busiest = Some((most, id));
            }
        }
        let (most, id) = busiest.expect("at least one key");
        Some(KeyTallies {
            keys: self.keys.len() as u64,
            throttled,
            worst: by_value(worst),
            admitted: by_value(admitted),
            busiest: (u64::from(most), id),
        })
    }
}

/// `values` as (value, how many) pairs, ascending.
fn by_value(mut values: Vec<u64>) -> Vec<(u64, u64)> {
    values.sort_unstable();
    let mut pairs: Vec<(u64, u64)> = Vec::new();
    for value in values {
        match pairs.last_mut() {
            Some((last, count)) if *last == value => *count += 1,
            _ => pairs.push((value, 1)),
        }
    }
    pairs
}

/// The figures per key of some keys, as counts by value: added over parts
/// whose keys are disjoint, they are the whole's, exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyTallies {
    /// Keys that sent anything.
    pub keys: u64,
    /// Keys with a request turned away.
    pub throttled: u64,
    /// (worst rolling count, keys with it), ascending.
    pub worst: Vec<(u64, u64)>,
    /// (requests admitted, keys with it), ascending.
    pub admitted: Vec<(u64, u64)>,
    /// The worst count and the first key seen with it.
    pub busiest: (u64, u64),
}

impl KeyTallies {
    /// The tallies of every part together; `None` for none.
    pub fn add(parts: &[KeyTallies]) -> Option<KeyTallies> {
        let first = parts.first()?;
        let together = |pick: fn(&KeyTallies) -> &Vec<(u64, u64)>| {
            let mut counts = std::collections::BTreeMap::new();
            for part in parts {
                for &(value, count) in pick(part) {
                    *counts.entry(value).or_insert(0u64) += count;
                }
            }
            counts.into_iter().collect::<Vec<_>>()
        };
        Some(KeyTallies {
            keys: parts.iter().map(|p| p.keys).sum(),
            throttled: parts.iter().map(|p| p.throttled).sum(),
            worst: together(|p| &p.worst),
            admitted: together(|p| &p.admitted),
            busiest: parts
                .iter()
                .map(|p| p.busiest)
                .fold(
                    first.busiest,
                    |best, next| if next.0 > best.0 { next } else { best },
                ),
        })
    }

    /// The figures [`PerKeyCounts::finish`] gives for these keys, the
    /// busiest being `worst_key` (the first seen of those with the most).
    pub fn summary(
        &self,
        worst_key: u64,
        state: Option<StateCost>,
        per_key_nominal: Option<f64>,
    ) -> KeysSummary {
        let n = self.keys.max(1);
        let [p50, p99, max] = ranks_of_tally(self.worst.iter().copied(), n, [0.5, 0.99, 1.0]);
        // The busiest 1% of keys: the largest admitted counts first.
        let top = sum_of_top(self.admitted.iter().rev().copied(), n.div_ceil(100));
        let total: u64 = self
            .admitted
            .iter()
            .map(|&(value, count)| value * count)
            .sum();
        summarised(
            [self.keys, self.throttled, worst_key],
            [p50, p99, max],
            [top, total],
            state,
            per_key_nominal,
        )
    }
}

/// The nearest-rank quantiles `qs` of `values` (reordered): counted by
/// value when the largest is small, as worst counts per key are (one pass,
/// and no random access), else selected.
fn nearest_ranks<const Q: usize>(values: &mut [u32], qs: [f64; Q]) -> [u64; Q] {
    let n = values.len();
    match counted_by_value(values.iter().map(|&value| u64::from(value))) {
        Some(counts) => ranks_of_tally(tally(&counts), n as u64, qs),
        None => {
            let rank = |q: f64| ((q * n as f64).ceil() as usize).clamp(1, n);
            qs.map(|q| u64::from(*values.select_nth_unstable(rank(q) - 1).1))
        }
    }
}

/// The sum of the `top` largest of `values` (`top` at least 1, at most
/// their number): counted by value when they are all small, as a key's
/// admissions mostly are (a selection over a million keys was a third of
/// the figures' finish), else selected.
fn sum_of_largest(values: &mut [u64], top: usize) -> u64 {
    match counted_by_value(values.iter().copied()) {
        Some(counts) => sum_of_top(tally(&counts).rev(), top as u64),
        None => {
            // The largest `top` first, in any order.
            values.select_nth_unstable_by(top - 1, |a, b| b.cmp(a));
            values[..top].iter().sum()
        }
    }
}

/// How many of `values` there are of each value (`counts[v]` of `v`), when
/// every one is below [`COUNTED_BELOW`].
fn counted_by_value(values: impl Iterator<Item = u64> + Clone) -> Option<Vec<usize>> {
    let largest = values.clone().max().unwrap_or(0);
    if largest >= u64::from(COUNTED_BELOW) {
        return None;
    }
    let mut counts = vec![0usize; largest as usize + 1];
    for value in values {
        counts[value as usize] += 1;
    }
    Some(counts)
}

/// Counts by value as (value, how many) pairs, ascending.
fn tally(counts: &[usize]) -> impl DoubleEndedIterator<Item = (u64, u64)> + Clone + '_ {
    counts
        .iter()
        .enumerate()
        .map(|(value, &count)| (value as u64, count as u64))
}

/// The nearest ranks at `qs` of `n` values (`n` at least 1) given as
/// (value, how many) pairs in ascending order of value.
fn ranks_of_tally<const Q: usize>(
    tally: impl Iterator<Item = (u64, u64)> + Clone,
    n: u64,
    qs: [f64; Q],
) -> [u64; Q] {
    qs.map(|q| {
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut below = 0;
        tally
            .clone()
            .find(|&(_, count)| {
                below += count;
                below >= rank
            })
            .map_or(0, |(value, _)| value)
    })
}

/// The sum of the `top` largest values given as (value, how many) pairs in
/// descending order of value.
fn sum_of_top(tally: impl Iterator<Item = (u64, u64)>, top: u64) -> u64 {
    let (mut left, mut sum) = (top, 0u64);
    for (value, count) in tally {
        let taken = count.min(left);
        sum += value * taken;
        left -= taken;
        if left == 0 {
            break;
        }
    }
    sum
}

/// Values below this are counted by value by [`nearest_ranks`] and
/// [`sum_of_largest`].
const COUNTED_BELOW: u32 = 1 << 16;

#[cfg(test)]
mod tests;
