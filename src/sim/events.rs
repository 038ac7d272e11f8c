//! A run's future events — delayed requests reaching the backend, clients'
//! requests scheduled in reaction to an answer — in one queue: in time order,
//! and at the same instant in the order they were scheduled, so every run
//! breaks ties the same way.

use std::collections::VecDeque;

use crate::time::Nanos;
use crate::traffic::{Arrival, Key};

/// Something that happens later in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// An admitted request of this key, held by the limiter (nginx's
    /// delay), reaches the backend.
    Release(Key),
    /// A client sends a request (a retry, say): it is decided then.
    Arrive(Arrival, Attempt),
}

/// Which attempt of its request an arrival is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the first attempt, 2 for the first retry, …
    pub number: u32,
    /// When the request's first attempt arrived.
    pub first: Nanos,
    /// How long the client waited before this attempt (0 for the first).
    pub slept: Nanos,
}

impl Attempt {
    /// The first attempt of a request arriving at `at`.
    pub fn first(at: Nanos) -> Attempt {
        Attempt {
            number: 1,
            first: at,
            slept: Nanos::ZERO,
        }
    }
}

/// Room an emptied bucket keeps, in events.
const KEPT_CAPACITY: usize = 1024;

/// The queue of a run's future events: a radix heap on time (events are
/// never scheduled before the last one taken, as simulation time only moves
/// on), with the events of one instant in the order scheduled. An event is
/// filed by the highest bit in which its time differs from the last time
/// taken, and moved at most once per bit as time advances: no comparison
/// tree to climb per event, which a binary heap of a herd's thousands of
/// waiting retries paid on every push and pop.
#[derive(Debug, Default)]
pub struct Events {
    /// The events at `last`, in the order scheduled (by their place in `slab`).
    current: VecDeque<(Nanos, u32)>,
    /// `buckets[i]`: events whose time first differs from `last` at bit
    /// `i`; equal times in the order scheduled. Events move between buckets
    /// as time and place (16 bytes), not whole.
    buckets: Vec<Vec<(Nanos, u32)>>,
    /// Every scheduled event, where its time and place point.
    slab: Vec<Event>,
    /// Places in `slab` free for the next event.
    free: Vec<u32>,
    /// Which buckets hold events (bit `i` for `buckets[i]`).
    occupied: u64,
    /// The time of the last event taken (every scheduled one is at or after it).
    last: u64,
    len: usize,
    /// Where the earliest event outside `current` is, once looked for.
    earliest: Option<(usize, usize)>,
}

impl Events {
    /// `event` at `time`, after every event already scheduled for `time`;
    /// `time` is never before the last event taken.
    pub fn schedule(&mut self, time: Nanos, event: Event) {
        debug_assert!(time.get() >= self.last, "an event scheduled in the past");
        self.len += 1;
        let place = match self.free.pop() {
            Some(place) => {
                self.slab[place as usize] = event;
                place
            }
            None => {
                self.slab.push(event);
                u32::try_from(self.slab.len() - 1).expect("fewer than 2^32 events pending")
            }
        };
        if time.get() == self.last {
            self.current.push_back((time, place));
            return;
        }
        let bucket = Self::bucket(time.get() ^ self.last);
        if self.buckets.is_empty() {
            self.buckets.resize_with(64, Vec::new);
        }
        let at = self.buckets[bucket].len();
        self.buckets[bucket].push((time, place));
        self.occupied |= 1 << bucket;
        // Still the earliest unless this one is before it.
        if let Some((b, i)) = self.earliest
            && (bucket < b || (bucket == b && time < self.buckets[b][i].0))
        {
            self.earliest = Some((bucket, at));
        }
    }

    fn bucket(difference: u64) -> usize {
        63 - difference.leading_zeros() as usize
    }

    /// Where the earliest event outside `current` is: the first at the
    /// least time in the lowest occupied bucket.
    fn find_earliest(&mut self) -> Option<(usize, usize)> {
        if self.occupied == 0 {
            return None;
        }
        if self.earliest.is_none() {
            let bucket = self.occupied.trailing_zeros() as usize;
            let mut best = 0;
            for (i, entry) in self.buckets[bucket].iter().enumerate().skip(1) {
                if entry.0 < self.buckets[bucket][best].0 {
                    best = i;
                }
            }
            self.earliest = Some((bucket, best));
        }
        self.earliest
    }

    /// The next event's time and place, without taking it.
    #[inline]
    fn peek(&mut self) -> Option<(Nanos, u32)> {
        if let Some(&front) = self.current.front() {
            return Some(front);
        }
        let (bucket, i) = self.find_earliest()?;
        Some(self.buckets[bucket][i])
    }

    /// The time of the next event, if any.
    #[inline]
    pub fn next_time(&mut self) -> Option<Nanos> {
        self.peek().map(|entry| entry.0)
    }

    /// Takes the next event if it is a release due by `now`: its time and key.
    #[inline]
    pub fn release_due(&mut self, now: Nanos) -> Option<(Nanos, Key)> {
        let (time, place) = self.peek()?;
        match self.slab[place as usize] {
            Event::Release(key) if time <= now => {
                self.pop();
                Some((time, key))
            }
            _ => None,
        }
    }

    /// Takes the next event.
    pub fn pop(&mut self) -> Option<(Nanos, Event)> {
        if self.current.is_empty() {
            // Time moves on to the earliest event: its bucket's events are
            // filed again against it, in their order.
            let (bucket, i) = self.find_earliest()?;
            let last = self.buckets[bucket][i].0.get();
            self.last = last;
            self.earliest = None;
            self.occupied &= !(1 << bucket);
            let mut moving = std::mem::take(&mut self.buckets[bucket]);
            for (time, place) in moving.drain(..) {
                if time.get() == last {
                    self.current.push_back((time, place));
                } else {
                    let lower = Self::bucket(time.get() ^ last);
                    self.buckets[lower].push((time, place));
                    self.occupied |= 1 << lower;
                }
            }
            // An emptied bucket keeps a small allocation only: left at its
            // high-water mark, every bucket a herd passed through would hold
            // room for the whole herd.
            if moving.capacity() <= KEPT_CAPACITY {
                self.buckets[bucket] = moving;
            }
        }
        let (time, place) = self.current.pop_front()?;
        self.len -= 1;
        self.free.push(place);
        Some((time, self.slab[place as usize]))
    }

    /// How many events are scheduled.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is scheduled.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrive(key: u64) -> Event {
        Event::Arrive(
            Arrival {
                time: Nanos(5),
                key: Key::client(key),
            },
            Attempt::first(Nanos(5)),
        )
    }

    #[test]
    fn events_come_in_time_order_then_in_the_order_scheduled() {
        let mut events = Events::default();
        events.schedule(Nanos(5), arrive(1));
        events.schedule(Nanos(3), Event::Release(Key::client(0)));
        events.schedule(Nanos(5), Event::Release(Key::client(0)));
        events.schedule(Nanos(5), arrive(2));
        let order: Vec<(u64, Event)> =
            std::iter::from_fn(|| events.pop().map(|(t, e)| (t.get(), e))).collect();
        assert_eq!(
            order,
            [
                (3, Event::Release(Key::client(0))),
                (5, arrive(1)),
                (5, Event::Release(Key::client(0))),
                (5, arrive(2))
            ]
        );
    }

    #[test]
    fn only_releases_due_by_now_are_taken_as_releases() {
        let mut events = Events::default();
        events.schedule(Nanos(2), Event::Release(Key::client(0)));
        events.schedule(Nanos(4), arrive(1));
        events.schedule(Nanos(4), Event::Release(Key::client(0)));
        assert_eq!(events.release_due(Nanos(1)), None);
        assert_eq!(
            events.release_due(Nanos(9)),
            Some((Nanos(2), Key::client(0)))
        );
        assert_eq!(
            events.release_due(Nanos(9)),
            None,
            "a client's request is next"
        );
        assert_eq!(events.pop(), Some((Nanos(4), arrive(1))));
        assert_eq!(
            events.release_due(Nanos(4)),
            Some((Nanos(4), Key::client(0)))
        );
        assert!(events.is_empty());
    }

    proptest::proptest! {
        /// The queue gives what a sorted list of (time, order scheduled)
        /// gives, whatever is scheduled, as long as no event is scheduled
        /// before the last one taken: equal times, gaps of one nanosecond,
        /// times near the end of u64, pushes between peeks.
        #[test]
        fn events_come_as_a_sorted_list_gives_them(
            steps in proptest::collection::vec((0u8..4, 0u64..6, 0u64..64), 1..400),
            high in proptest::bool::ANY,
        ) {
            let base = if high { u64::MAX - (1 << 20) } else { 0 };
            let mut events = Events::default();
            let mut reference = std::collections::BTreeMap::new();
            let (mut last, mut seq) = (base, 0u64);
            for (what, small, shift) in steps {
                if what < 3 {
                    // Later than the last taken by a little or by a power of two.
                    let ahead = if what == 0 { small } else { (1u64 << (shift % 20)) + small };
                    let time = Nanos(last.saturating_add(ahead));
                    let event = if small % 2 == 0 { Event::Release(Key::client(seq)) } else { arrive(seq) };
                    events.schedule(time, event);
                    reference.insert((time, seq), event);
                    seq += 1;
                } else {
                    let expected = reference.pop_first().map(|((t, _), e)| (t, e));
                    proptest::prop_assert_eq!(events.next_time(), expected.map(|(t, _)| t));
                    proptest::prop_assert_eq!(events.pop(), expected);
                    if let Some((t, _)) = expected {
                        last = t.get();
                    }
                }
                proptest::prop_assert_eq!(events.len(), reference.len());
            }
            while let Some(expected) = reference.pop_first().map(|((t, _), e)| (t, e)) {
                proptest::prop_assert_eq!(events.pop(), Some(expected));
            }
            proptest::prop_assert!(events.is_empty());
        }
    }
}
