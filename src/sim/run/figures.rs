//! The figures per key counted on a second thread while the limiters decide
//! on this one. They are most of a keyed run's time when the keys outgrow
//! the cache (each admission touches its key's counts and, a rolling
//! interval later, again), and they depend on nothing but the decisions
//! before them: each run's decisions are kept a chunk at a time and sent
//! over in order, so the figures are exactly those one thread counts. The
//! thread retires when it finds its core shared (as the pipeline's
//! generator does), and the figures come back to be counted here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::thread::JoinHandle;

use super::{KeyEvent, PerKeyCounts, RunState};
use crate::sim::pipeline::{Core, Judge};

/// Each run's decisions of one chunk, by run (none for a run without figures).
type Batch = Vec<Vec<KeyEvent>>;

/// Batches sent ahead of their counting, at most.
const DEPTH: usize = 4;

/// Decisions gathered over chunks before they are sent: each send may wake
/// the other side, so they are few (about 250 for two million requests
/// through two limiters).
const GATHERED: usize = 16384;

/// Makes the thread's judge of whether its core is shared, on the thread.
pub(in super::super) type JudgeMaker = Box<dyn FnOnce() -> Judge + Send>;

/// The figures per key of a workload's runs, counted on a thread of their own.
pub(in super::super) struct Away {
    send: SyncSender<Batch>,
    /// Batches counted, to be filled again.
    spent: Receiver<Batch>,
    /// Set by the thread when it finds its core shared.
    retired: Arc<AtomicBool>,
    /// Gives back every run's figures once every batch sent is counted.
    worker: JoinHandle<Vec<Option<PerKeyCounts>>>,
}

impl Away {
    /// Takes the figures per key of `runs` to a thread of their own, judging
    /// its core as the kernel tells; `None` (nothing taken) when no run
    /// keeps figures or no thread can be started.
    pub(in super::super) fn start(runs: &mut [RunState]) -> Option<Away> {
        Self::judged(runs, Box::new(Core::judge))
    }

    /// [`Away::start`] with the thread's judge made by `judge`.
    pub(in super::super) fn judged(runs: &mut [RunState], judge: JudgeMaker) -> Option<Away> {
        if runs.iter().all(|run| run.m.keys.is_none()) {
            return None;
        }
        let (send, batches) = std::sync::mpsc::sync_channel::<Batch>(DEPTH);
        let (spend, spent) = std::sync::mpsc::channel::<Batch>();
        // The figures go over once the thread is running: a thread that
        // cannot start leaves them where they are.
        let (give, take) = std::sync::mpsc::channel::<Vec<Option<PerKeyCounts>>>();
        let retired = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&retired);
        let worker = std::thread::Builder::new()
            .name("figures".into())
            .spawn(move || {
                let Ok(mut counts) = take.recv() else {
                    return Vec::new();
                };
                let mut shared = judge();
                // Until every sender is gone: every batch sent is counted.
                for mut batch in batches {
                    for (counts, events) in counts.iter_mut().zip(&mut batch) {
                        if let Some(counts) = counts {
                            counts.count(events);
                        }
                        events.clear();
                    }
                    let _ = spend.send(batch);
                    if !flag.load(Ordering::Relaxed) && shared() {
                        flag.store(true, Ordering::Relaxed);
                    }
                }
                counts
            })
            .ok()?;
        let counts = runs
            .iter_mut()
            .map(|run| {
                let counts = run.m.keys.take();
                run.m.keys_away = counts.as_ref().map(|_| Vec::new());
                counts
            })
            .collect();
        give.send(counts).expect("the thread waits for the figures");
        Some(Away {
            send,
            spent,
            retired,
            worker,
        })
    }

    /// Sends what `runs` decided since the last call to be counted; when
    /// the thread has retired, brings the figures back to be counted here.
    pub(in super::super) fn after_chunk(away: &mut Option<Away>, runs: &mut [RunState]) {
        let Some(this) = away else {
            return;
        };
        let gathered: usize = runs
            .iter()
            .filter_map(|run| run.m.keys_away.as_ref().map(Vec::len))
            .sum();
        if gathered < GATHERED {
            return;
        }
        let mut batch = this
            .spent
            .try_recv()
            .unwrap_or_else(|_| runs.iter().map(|_| Vec::new()).collect());
        for (run, events) in runs.iter_mut().zip(&mut batch) {
            if let Some(decided) = &mut run.m.keys_away {
                std::mem::swap(decided, events);
            }
        }
        // A send fails only when the thread is gone: its panic is raised below.
        if this.send.send(batch).is_err() || this.retired.load(Ordering::Relaxed) {
            away.take().expect("away").bring_back(runs);
        }
    }

    /// Every decision counted, the figures back in their runs.
    pub(in super::super) fn finish(away: Option<Away>, runs: &mut [RunState]) {
        if let Some(this) = away {
            this.bring_back(runs);
        }
    }

    fn bring_back(self, runs: &mut [RunState]) {
        let rest = runs
            .iter_mut()
            .map(|run| {
                run.m
                    .keys_away
                    .as_mut()
                    .map(std::mem::take)
                    .unwrap_or_default()
            })
            .collect();
        let _ = self.send.send(rest);
        drop(self.send);
        let counts = match self.worker.join() {
            Ok(counts) => counts,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        for (run, counts) in runs.iter_mut().zip(counts) {
            if counts.is_some() {
                (run.m.keys, run.m.keys_away) = (counts, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use crate::sim::Options;
    use crate::sim::pipeline::in_chunks;
    use crate::traffic::Arrival;

    /// Keyed traffic with rejections through a limiter per key and a global
    /// one, both keeping figures per key; a nginx-style delay holds some
    /// requests to be released at the end.
    fn scenario() -> Scenario {
        crate::scenario::parse(
            r#"duration = "2s"
[metrics]
rolling = "100ms"
[[workload]]
name = "w"
sources = [{ kind = "poisson", rate = 150000, clients = { count = 3000 } }, { kind = "uniform", rate = 9000, clients = { count = 7 } }]
[[limiter]]
name = "per-key"
kind = "fixed-window"
window = "100ms"
threshold = 3
per = "key"
[[limiter]]
name = "global"
kind = "token-bucket"
rate = 100000
burst = 500
[[limiter]]
name = "delayed"
kind = "nginx-limit-req"
rate = "120000r/s"
burst = 40
"#,
            std::path::Path::new("p.toml"),
        )
        .unwrap()
    }

    /// Every run's result, the figures counted here or, with `away`, on a
    /// thread whose judge finds its core shared at its `away`-th batch.
    fn results(scenario: &Scenario, away: Option<u32>) -> Vec<String> {
        let options = Options::default();
        let mut runs: Vec<RunState> = scenario
            .limiters
            .iter()
            .map(|limiter| RunState::new(scenario, &options, limiter, true))
            .collect();
        let mut figures = away.map(|after| {
            let judge: JudgeMaker = Box::new(move || {
                let mut calls = 0;
                Box::new(move || {
                    calls += 1;
                    calls >= after
                })
            });
            Away::judged(&mut runs, judge).expect("the runs keep figures per key")
        });
        let mut chunks = 0;
        let stream = crate::sim::arrivals(scenario, &scenario.workloads[0], 0).unwrap();
        in_chunks(stream, false, &mut |chunk: &[Arrival]| {
            for run in &mut runs {
                run.observe_all(chunk);
            }
            Away::after_chunk(&mut figures, &mut runs);
            chunks += 1;
            Ok(())
        })
        .unwrap();
        assert!(chunks > 50, "{chunks} chunks");
        Away::finish(figures, &mut runs);
        runs.into_iter()
            .zip(&scenario.limiters)
            .map(|(run, limiter)| {
                format!("{:?}", run.finish(scenario, &options, "w", &limiter.name))
            })
            .collect()
    }

    /// The figures per key counted on a thread of their own are those
    /// counted here — whether the thread counts to the end, or retires at
    /// once, early or late and the rest are counted here.
    #[test]
    fn figures_counted_away_are_the_figures_counted_here() {
        let scenario = scenario();
        let here = results(&scenario, None);
        assert!(here.iter().all(|run| run.contains("worst_key")), "{here:?}");
        assert!(here[0].contains("throttled: ") && !here[0].contains("throttled: 0,"));
        // At least 25 batches are sent (more than 50 chunks, 2 chunks of
        // decisions or fewer a batch): each retirement comes before the end.
        for after in [u32::MAX, 1, 2, 9, 20] {
            assert_eq!(
                results(&scenario, Some(after)),
                here,
                "retired at batch {after}"
            );
        }
    }

    /// No run keeping figures per key, no thread.
    #[test]
    fn nothing_to_count_starts_no_thread() {
        let mut scenario = scenario();
        scenario.metrics.per_key = false;
        let mut runs: Vec<RunState> = scenario
            .limiters
            .iter()
            .map(|limiter| RunState::new(&scenario, &Options::default(), limiter, true))
            .collect();
        assert!(Away::start(&mut runs).is_none());
    }
}
