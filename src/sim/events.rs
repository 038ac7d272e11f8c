//! A run's future events — delayed requests reaching the backend, clients'
//! requests scheduled in reaction to an answer — in one queue: in time order,
//! and at the same instant in the order they were scheduled, so every run
//! breaks ties the same way.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

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

/// An event at a time, numbered in scheduling order.
#[derive(Debug)]
struct Entry {
    time: Nanos,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

/// The queue of a run's future events.
#[derive(Debug, Default)]
pub struct Events {
    heap: BinaryHeap<Reverse<Entry>>,
    scheduled: u64,
}

impl Events {
    /// `event` at `time`, after every event already scheduled for `time`.
    pub fn schedule(&mut self, time: Nanos, event: Event) {
        self.heap.push(Reverse(Entry {
            time,
            seq: self.scheduled,
            event,
        }));
        self.scheduled += 1;
    }

    /// The time of the next event, if any.
    #[inline]
    pub fn next_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse(entry)| entry.time)
    }

    /// Takes the next event if it is a release due by `now`: its time and key.
    #[inline]
    pub fn release_due(&mut self, now: Nanos) -> Option<(Nanos, Key)> {
        let Reverse(next) = self.heap.peek()?;
        match next.event {
            Event::Release(key) if next.time <= now => {
                let time = next.time;
                self.heap.pop();
                Some((time, key))
            }
            _ => None,
        }
    }

    /// Takes the next event.
    pub fn pop(&mut self) -> Option<(Nanos, Event)> {
        self.heap
            .pop()
            .map(|Reverse(entry)| (entry.time, entry.event))
    }

    /// How many events are scheduled.
    #[inline]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is scheduled.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
}
