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

/// Generates `arrivals` in chunks on a second thread while `decide` takes
/// them in order on this one: the same chunks in the same order as one
/// thread makes them, so results do not depend on it. Returns the stream, to
/// ask for the error that cut a trace short.
fn pipeline<T: Timed, S: Chunks<T>>(
    mut arrivals: S,
    decide: &mut dyn FnMut(&[T]) -> Result<()>,
) -> Result<S> {
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<T>>(PIPELINE_DEPTH);
    let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<T>>();
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || {
            loop {
                // Chunks come back once decided, so a few are reused all along.
                let mut chunk = empty_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
                arrivals.refill(&mut chunk, CHUNK);
                // An empty chunk ends the stream; a failed send means the
                // decisions stopped on an error.
                if chunk.is_empty() || !hand_over(&full_tx, chunk) {
                    return arrivals;
                }
            }
        });
        let mut outcome = Ok(());
        while let Some(chunk) = next_chunk(&full_rx) {
            outcome = crate::interrupt::check()
                .map_err(anyhow::Error::from)
                .and_then(|()| decide(&chunk));
            if outcome.is_err() {
                break;
            }
            let _ = empty_tx.send(chunk);
        }
        // Unblocks a producer waiting to send after an error.
        drop(full_rx);
        let arrivals = producer
            .join()
            .expect("the arrival generator does not panic");
        outcome.map(|()| arrivals)
    })
}

/// The next chunk from the generator, or `None` when it has finished. The
/// decisions usually outrun the generator: waiting a few microseconds on the
/// core before sleeping saves a wake-up (a system call on each side) per chunk.
fn next_chunk<T>(chunks: &std::sync::mpsc::Receiver<Vec<T>>) -> Option<Vec<T>> {
    use std::sync::mpsc::TryRecvError;
    for _ in 0..SPINS_BEFORE_SLEEP {
        match chunks.try_recv() {
            Ok(chunk) => return Some(chunk),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
    chunks.recv().ok()
}

/// Sends `chunk` to the decisions, false when they have stopped. When the
/// queue is full the generator, too, waits a few microseconds on the core
/// before sleeping: with the two sides about as fast, each would otherwise
/// put the other to sleep and wake it up again chunk after chunk.
fn hand_over<T>(chunks: &std::sync::mpsc::SyncSender<Vec<T>>, mut chunk: Vec<T>) -> bool {
    use std::sync::mpsc::TrySendError;
    for _ in 0..SPINS_BEFORE_SLEEP {
        match chunks.try_send(chunk) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(back)) => chunk = back,
        }
        std::hint::spin_loop();
    }
    chunks.send(chunk).is_ok()
}

/// How often the decisions look for a chunk before sleeping until one comes
/// (a few microseconds: a chunk takes tens to generate).
const SPINS_BEFORE_SLEEP: u32 = 2_000;

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
