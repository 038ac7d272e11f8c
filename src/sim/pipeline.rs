//! Arrivals in chunks to the decisions: on this thread, or generated on a
//! second one while this one decides — the same chunks in the same order
//! either way, so results never depend on it.

use anyhow::Result;

use crate::traffic::{Chunks, Timed};

/// Arrivals generated at a time and shared by every limiter of a workload.
const CHUNK: usize = 4096;

/// Hands `decide` the stream's chunks in order, from a second thread when
/// `pipelined`; returns the stream, to ask for the error that cut a trace short.
pub(super) fn in_chunks<T: Timed, S: Chunks<T>>(
    mut stream: S,
    pipelined: bool,
    decide: &mut dyn FnMut(&[T]) -> Result<()>,
) -> Result<S> {
    if pipelined {
        return pipeline(stream, decide);
    }
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        crate::interrupt::check()?;
        stream.refill(&mut chunk, CHUNK);
        if chunk.is_empty() {
            return Ok(stream);
        }
        decide(&chunk)?;
    }
}

/// Workloads of at least this many requests generate their arrivals on a
/// thread of their own while the limiters decide on this one.
pub(super) const PIPELINE_FROM: u128 = 1 << 20;
/// Chunks generated ahead of the decisions, at most.
const PIPELINE_DEPTH: usize = 4;

/// The stream and how far it has gone, shared by the two threads: whoever
/// holds it makes the next chunk, so chunks are made one at a time, in order.
struct Shared<S> {
    stream: S,
    /// Whether the stream has ended (or the decisions stopped).
    done: bool,
}

/// Generates `arrivals` in chunks on a second thread while `decide` takes
/// them in order on this one: the same chunks in the same order as one
/// thread makes them, so results do not depend on it. When the generator
/// falls behind — its core busy with another program — this thread makes
/// the next chunk itself instead of waiting, so two threads are never much
/// slower than one. Returns the stream, to ask for the error that cut a
/// trace short.
fn pipeline<T: Timed, S: Chunks<T>>(
    arrivals: S,
    decide: &mut dyn FnMut(&[T]) -> Result<()>,
) -> Result<S> {
    pipeline_judged(arrivals, decide, &Core::judge)
}

/// Whether the calling thread's core is shared, asked once per chunk.
pub(super) type Judge = Box<dyn FnMut() -> bool>;

/// [`pipeline`], each thread judging its core by a judge of `judge`'s.
fn pipeline_judged<T: Timed, S: Chunks<T>>(
    arrivals: S,
    decide: &mut dyn FnMut(&[T]) -> Result<()>,
    judge: &(dyn Fn() -> Judge + Sync),
) -> Result<S> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
    use std::time::Instant;

    let shared = Mutex::new(Shared {
        stream: arrivals,
        done: false,
    });
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<T>>(PIPELINE_DEPTH);
    let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<T>>();
    // Set while the decisions make chunks themselves.
    let wanted = AtomicBool::new(false);
    // Set once the decisions are over.
    let over = AtomicBool::new(false);
    // Set when either thread found its core shared: the generator stops,
    // and the decisions make every chunk from then on.
    let retired = AtomicBool::new(false);
    fn lock<S>(shared: &Mutex<Shared<S>>) -> std::sync::MutexGuard<'_, Shared<S>> {
        shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    let outcome = std::thread::scope(|scope| {
        let shared = &shared;
        let (wanted, over, retired) = (&wanted, &over, &retired);
        scope.spawn(move || {
            let mut shared_core = judge();
            loop {
                if shared_core() || retired.load(Ordering::Relaxed) {
                    // Dropping the sender tells the decisions, once they
                    // have taken every chunk sent.
                    retired.store(true, Ordering::Relaxed);
                    return;
                }
                // The decisions are making chunks themselves: stay out of
                // their way until they ask again.
                // (Looking at a flag, not the stream: taking the stream
                // only to look would make the decisions wait for it.)
                if wanted.load(Ordering::Relaxed) {
                    std::thread::sleep(BEHIND_AFTER);
                    if over.load(Ordering::Relaxed) {
                        return;
                    }
                    continue;
                }
                // Chunks come back once decided, so a few are reused all along.
                let mut chunk = empty_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
                // Made and sent while holding the stream: every chunk made
                // before is in the queue when the decisions take the stream.
                let mut held = lock(shared);
                if held.done {
                    return;
                }
                held.stream.refill(&mut chunk, CHUNK);
                if chunk.is_empty() {
                    held.done = true;
                    return;
                }
                // A failed send means the decisions stopped on an error.
                if full_tx.send(chunk).is_err() {
                    held.done = true;
                    return;
                }
            }
        });
        let mut ready = std::collections::VecDeque::new();
        let mut spare = Vec::with_capacity(CHUNK);
        let mut outcome = Ok(());
        // Chunks made here since the generator was last given the stream,
        // and waits in a row for the one it is making.
        let (mut made_here, mut waiting_since) = (0u32, None::<Instant>);
        // Times the generator was found behind.
        let mut takeovers = 0u32;
        let mut shared_core = judge();
        'decide: loop {
            if ready.is_empty() {
                match full_rx.try_recv() {
                    Ok(chunk) => ready.push_back(chunk),
                    Err(TryRecvError::Empty) => match shared.try_lock() {
                        // The generator is behind: take what it sent, then
                        // make the next chunk here, and go on making them
                        // (it is asked to stay out) until the generator is
                        // tried again.
                        Ok(mut held) => {
                            waiting_since = None;
                            made_here += 1;
                            // Given back a few times; lost again each time,
                            // the core is not coming back: keep it here.
                            if made_here >= RETRY_GENERATOR_AFTER && takeovers < GIVE_BACK_TIMES {
                                made_here = 0;
                                wanted.store(false, Ordering::Relaxed);
                            }
                            ready.extend(full_rx.try_iter());
                            if !held.done {
                                let mut chunk = std::mem::take(&mut spare);
                                held.stream.refill(&mut chunk, CHUNK);
                                if chunk.is_empty() {
                                    held.done = true;
                                } else {
                                    ready.push_back(chunk);
                                }
                            }
                            if ready.is_empty() && held.done {
                                break 'decide;
                            }
                        }
                        // It is making a chunk now: wait for it. Far
                        // longer than a chunk takes, and it has lost its
                        // core: ask for the stream after this chunk.
                        Err(_) => match full_rx.recv_timeout(WAIT) {
                            Ok(chunk) => {
                                waiting_since = None;
                                ready.push_back(chunk);
                            }
                            Err(RecvTimeoutError::Timeout) => {
                                let since = *waiting_since.get_or_insert_with(Instant::now);
                                if since.elapsed() >= BEHIND_AFTER
                                    && !wanted.swap(true, Ordering::Relaxed)
                                {
                                    takeovers += 1;
                                    made_here = 0;
                                }
                            }
                            Err(RecvTimeoutError::Disconnected) => break 'decide,
                        },
                    },
                    Err(TryRecvError::Disconnected) => break 'decide,
                }
                continue;
            }
            if shared_core() {
                retired.store(true, Ordering::Relaxed);
            }
            while let Some(chunk) = ready.pop_front() {
                outcome = crate::interrupt::check()
                    .map_err(anyhow::Error::from)
                    .and_then(|()| decide(&chunk));
                if outcome.is_err() {
                    break 'decide;
                }
                if spare.capacity() == 0 {
                    spare = chunk;
                } else {
                    let _ = empty_tx.send(chunk);
                }
            }
        }
        // The generator retired: every chunk it made is decided, and the
        // rest are made here, in order.
        if outcome.is_ok() && retired.load(Ordering::Relaxed) {
            let mut held = lock(shared);
            while !held.done {
                spare.clear();
                held.stream.refill(&mut spare, CHUNK);
                if spare.is_empty() {
                    held.done = true;
                    break;
                }
                outcome = crate::interrupt::check()
                    .map_err(anyhow::Error::from)
                    .and_then(|()| decide(&spare));
                if outcome.is_err() {
                    break;
                }
            }
        }
        // Unblocks a generator waiting to send (it holds the stream then),
        // and stops it.
        drop(full_rx);
        over.store(true, Ordering::Relaxed);
        lock(shared).done = true;
        outcome
    });
    outcome.map(|()| {
        shared
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .stream
    })
}

/// How a thread's core is shared, from the kernel's count of the time the
/// thread ran and the time it waited to run (`/proc/thread-self/schedstat`,
/// nanoseconds): a thread that waits half as long as it runs, twice in a
/// row over [`LOOKED_AT`] of running, shares its core with another program
/// (one that shares it evenly makes it wait about as long as it runs; a
/// quiet machine's interruptions and wake-ups, far less), and two threads
/// are then slower than one — if the kernel also took it off its core in
/// that window (`nonvoluntary_ctxt_switches` in `/proc/thread-self/status`):
/// a thread that sleeps for its work at every chunk may wait as long to be
/// woken on a virtual machine's idle core, but is never taken off it. Where
/// the kernel does not say, a core is never found shared.
#[derive(Default)]
pub(super) struct Core {
    /// The kernel's counts, opened by the thread they are of, on its first
    /// look, and read again in place.
    file: Option<std::fs::File>,
    /// The thread's status, to count the times it was taken off its core.
    status: Option<std::fs::File>,
    /// Running and waiting when last looked at.
    last: Option<(u64, u64)>,
    /// Times taken off its core, when last looked at.
    preempted: Option<u64>,
    /// Windows in a row found shared.
    shared_windows: u32,
    /// Calls since the kernel was last asked.
    calls: u32,
}

/// Running time over which waiting is judged.
const LOOKED_AT: u64 = 5_000_000;

impl Core {
    /// Whether the calling thread's core has been found shared (looked at
    /// every 16th call: a chunk's work is tens of microseconds).
    pub(super) fn shared(&mut self) -> bool {
        self.calls += 1;
        if !self.calls.is_multiple_of(16) {
            return false;
        }
        if self.file.is_none() {
            self.file = std::fs::File::open("/proc/thread-self/schedstat").ok();
            self.status = std::fs::File::open("/proc/thread-self/status").ok();
        }
        let Some(now) = self.file.as_ref().and_then(Self::times) else {
            return false;
        };
        let Some(last) = self.last else {
            self.last = Some(now);
            self.preempted = self.status.as_ref().and_then(Self::preempted);
            return false;
        };
        let (ran, waited) = (now.0.saturating_sub(last.0), now.1.saturating_sub(last.1));
        if ran < LOOKED_AT {
            return false;
        }
        self.last = Some(now);
        let before = self.preempted;
        self.preempted = self.status.as_ref().and_then(Self::preempted);
        let taken_off = match (before, self.preempted) {
            (Some(before), Some(now)) => now > before,
            _ => true,
        };
        self.shared_windows = if taken_off && waited.saturating_mul(2) >= ran {
            self.shared_windows + 1
        } else {
            0
        };
        self.shared_windows >= 2
    }

    /// The judge of whether the calling thread's core is shared.
    pub(super) fn judge() -> Judge {
        let mut core = Core::default();
        Box::new(move || core.shared())
    }

    /// The times the thread was taken off its core, from its status.
    fn preempted(file: &std::fs::File) -> Option<u64> {
        preempted_in(Self::text(file, &mut [0u8; 4096])?)
    }

    /// The thread's time run and time waited to run, in nanoseconds.
    fn times(file: &std::fs::File) -> Option<(u64, u64)> {
        let mut buffer = [0u8; 128];
        let text = Self::text(file, &mut buffer)?;
        let mut fields = text.split_ascii_whitespace().map(str::parse::<u64>);
        Some((fields.next()?.ok()?, fields.next()?.ok()?))
    }

    /// `file`'s text from its start, as much as fits `buffer` (read again
    /// in place: the kernel's counts are current at each read).
    fn text<'a>(file: &std::fs::File, buffer: &'a mut [u8]) -> Option<&'a str> {
        #[cfg(unix)]
        let read = std::os::unix::fs::FileExt::read_at(file, buffer, 0).ok()?;
        #[cfg(not(unix))]
        let read = {
            let _ = file;
            0
        };
        std::str::from_utf8(&buffer[..read]).ok()
    }
}

/// The `nonvoluntary_ctxt_switches` count of a thread's status text.
fn preempted_in(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("nonvoluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// Chunks the decisions make themselves before the generator is given the
/// stream again (it may have its core back): some tens of milliseconds, so
/// the millisecond lost finding out again costs a few percent at most.
const RETRY_GENERATOR_AFTER: u32 = 1024;

/// Times the decisions give the stream back to a generator found behind
/// before they keep it to the end.
const GIVE_BACK_TIMES: u32 = 3;

/// How long the decisions wait for the chunk the generator is making before
/// taking it that the generator has lost its core (a chunk takes tens of
/// microseconds; a busy neighbour takes the core for milliseconds).
const BEHIND_AFTER: std::time::Duration = std::time::Duration::from_millis(1);

/// How long the decisions wait for the chunk the generator is making before
/// looking again, and the generator for the stream while the decisions make
/// chunks (a chunk takes tens of microseconds to make).
const WAIT: std::time::Duration = std::time::Duration::from_micros(20);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use crate::sim::arrivals;
    use crate::time::Nanos;
    use crate::traffic::{Arrival, Chunks};

    fn scenario() -> Scenario {
        crate::scenario::parse(
            "duration = \"2s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 50000 }, { kind = \"uniform\", rate = 7000, clients = { count = 9 } }]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
            std::path::Path::new("p.toml"),
        )
        .unwrap()
    }

    #[test]
    fn the_pipeline_hands_over_exactly_the_chunks_one_thread_makes() {
        let scenario = scenario();
        let mut alone = arrivals(&scenario, &scenario.workloads[0], 0).unwrap();
        let mut expected = Vec::new();
        let mut chunk: Vec<Arrival> = Vec::new();
        loop {
            alone.refill(&mut chunk, CHUNK);
            if chunk.is_empty() {
                break;
            }
            expected.push(chunk.clone());
        }
        let mut got = Vec::new();
        let merge = arrivals(&scenario, &scenario.workloads[0], 0).unwrap();
        pipeline(merge, &mut |chunk: &[Arrival]| {
            got.push(chunk.to_vec());
            Ok(())
        })
        .unwrap();
        assert!(expected.len() > 10, "{} chunks", expected.len());
        assert_eq!(got, expected);
    }

    /// The chunks of the scenario's first workload as one thread makes them.
    fn one_thread_chunks(scenario: &Scenario) -> Vec<Vec<Arrival>> {
        let mut chunks = Vec::new();
        in_chunks(
            arrivals(scenario, &scenario.workloads[0], 0).unwrap(),
            false,
            &mut |chunk: &[Arrival]| {
                chunks.push(chunk.to_vec());
                Ok(())
            },
        )
        .unwrap();
        chunks
    }

    /// A stream whose chunks are slow to make on any thread but the test's
    /// own (the generator's core busy elsewhere), counting who made each.
    struct SlowOffThread<S> {
        inner: S,
        made_here: usize,
        made_there: usize,
    }

    impl<T: Timed, S: Chunks<T>> Chunks<T> for SlowOffThread<S> {
        fn refill(&mut self, out: &mut Vec<T>, count: usize) {
            if std::thread::current().name().is_none() {
                std::thread::sleep(std::time::Duration::from_millis(3));
                self.made_there += 1;
            } else {
                self.made_here += 1;
            }
            self.inner.refill(out, count);
        }
    }

    /// When the generator falls behind, the deciding thread makes chunks
    /// itself — still the same chunks in the same order.
    #[test]
    fn a_slow_generator_is_overtaken_without_reordering_a_chunk() {
        let scenario = scenario();
        let expected = one_thread_chunks(&scenario);
        let slow = SlowOffThread {
            inner: arrivals(&scenario, &scenario.workloads[0], 0).unwrap(),
            made_here: 0,
            made_there: 0,
        };
        let mut got = Vec::new();
        let slow = pipeline(slow, &mut |chunk: &[Arrival]| {
            got.push(chunk.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(got, expected);
        assert!(
            slow.made_here > slow.made_there,
            "made here {}, by the generator {}",
            slow.made_here,
            slow.made_there
        );
    }

    /// A thread that finds its core shared retires the generator: every
    /// chunk is still decided once, in order, the rest made by the
    /// decisions — whichever thread finds it, and however early.
    #[test]
    fn a_generator_retired_for_a_shared_core_leaves_the_same_chunks() {
        let scenario = scenario();
        let expected = one_thread_chunks(&scenario);
        for (on_generator, after) in [(true, 0), (true, 3), (false, 1), (false, 5), (true, 10_000)]
        {
            let judge = move || -> Judge {
                let mut calls = 0;
                let generator = std::thread::current().name().is_none();
                Box::new(move || {
                    calls += 1;
                    generator == on_generator && calls > after
                })
            };
            let mut got = Vec::new();
            pipeline_judged(
                arrivals(&scenario, &scenario.workloads[0], 0).unwrap(),
                &mut |chunk: &[Arrival]| {
                    got.push(chunk.to_vec());
                    Ok(())
                },
                &judge,
            )
            .unwrap();
            assert_eq!(
                got, expected,
                "retired by the generator: {on_generator}, after {after}"
            );
        }
    }

    #[test]
    fn a_lone_poisson_source_gives_bare_times_in_the_same_chunks() {
        let two_sources = scenario();
        let scenario = crate::scenario::parse(
            "duration = \"2s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"poisson\", rate = 50000 }]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
            std::path::Path::new("p.toml"),
        )
        .unwrap();
        let merge = || arrivals(&scenario, &scenario.workloads[0], 0).unwrap();
        let mut whole = Vec::new();
        in_chunks(merge(), false, &mut |chunk: &[Arrival]| {
            whole.push(chunk.iter().map(|a| a.time).collect::<Vec<_>>());
            Ok(())
        })
        .unwrap();
        let mut bare = Vec::new();
        let Ok(times) = merge().into_poisson() else {
            panic!("a lone Poisson source makes bare times")
        };
        pipeline(times, &mut |chunk: &[Nanos]| {
            bare.push(chunk.to_vec());
            Ok(())
        })
        .unwrap();
        assert!(whole.len() > 10, "{} chunks", whole.len());
        assert_eq!(bare, whole);
        // Anything else stays a merge, its sources in order.
        let fresh = || arrivals(&two_sources, &two_sources.workloads[0], 0).unwrap();
        let Err(kept) = fresh().into_poisson() else {
            panic!("two sources are not a lone Poisson source")
        };
        assert!(kept.take(5000).eq(fresh().take(5000)));
    }

    #[test]
    fn the_times_a_thread_was_taken_off_its_core_are_read_from_its_status() {
        let status =
            "Name:\tburstsim\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t345\n";
        assert_eq!(preempted_in(status), Some(345));
        assert_eq!(
            preempted_in("Name:\tx\nvoluntary_ctxt_switches:\t1\n"),
            None
        );
        #[cfg(target_os = "linux")]
        {
            let file = std::fs::File::open("/proc/thread-self/status").unwrap();
            assert!(Core::preempted(&file).is_some());
        }
    }

    #[test]
    fn a_decision_error_stops_the_pipeline_without_hanging() {
        let scenario = scenario();
        let merge = arrivals(&scenario, &scenario.workloads[0], 0).unwrap();
        let mut seen = 0;
        let err = pipeline(merge, &mut |_: &[Arrival]| {
            seen += 1;
            if seen == 3 {
                anyhow::bail!("disk full")
            }
            Ok(())
        })
        .err()
        .expect("the error comes back");
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(seen, 3);
    }
}
