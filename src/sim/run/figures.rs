//! The figures per key counted a chunk of decisions at a time: on a second
//! thread while the limiters decide on this one, or here after each chunk
//! when several runs keep them. They are most of a keyed run's time when
//! the keys outgrow the cache (each admission touches its key's counts and,
//! a rolling interval later, again), and they depend on nothing but the
//! decisions before them: each run's decisions are kept a chunk at a time
//! and counted in order, so the figures are exactly those counted one
//! decision at a time. Runs whose decisions have so far been the same (two
//! limiters that turn nobody away) share one count ([`Figures`]). The
//! thread retires when it finds its core shared (as the pipeline's
//! generator does), and the figures come back to be counted here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::thread::JoinHandle;

use super::{KeyEvent, PerKeyCounts, RunState, Summed};
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

/// The figures per key of a workload's runs, each stream of decisions
/// counted once: a run whose decisions have so far been exactly an earlier
/// run's follows it and counts nothing, until a batch of its decisions
/// differs — then it takes a copy of that run's counts as they stood
/// before the batch, and counts on its own. Limiters that turn nobody away
/// decide alike, and their figures are alike; counting them once is half a
/// log's figures for two such limiters.
#[derive(Debug)]
pub(in super::super) struct Figures {
    each: Vec<Share>,
}

/// One run's figures in [`Figures`].
#[derive(Debug)]
enum Share {
    /// The run keeps none.
    Off,
    /// Counted on their own (boxed: a [`Share::Same`] is a word).
    Own(Box<PerKeyCounts>),
    /// Those of this earlier run (always [`Share::Own`]), whose decisions
    /// it has made so far.
    Same(usize),
}

impl Figures {
    /// The runs' figures, each fresh one following the first fresh one with
    /// the same interval.
    pub(in super::super) fn new(counts: Vec<Option<PerKeyCounts>>) -> Figures {
        let mut each: Vec<Share> = Vec::with_capacity(counts.len());
        for counts in counts {
            let leader = counts.as_ref().and_then(|counts| {
                each.iter()
                    .position(|share| matches!(share, Share::Own(first) if first.starts_as(counts)))
            });
            each.push(match (counts, leader) {
                (None, _) => Share::Off,
                (Some(_), Some(leader)) => Share::Same(leader),
                (Some(counts), None) => Share::Own(Box::new(counts)),
            });
        }
        Figures { each }
    }

    /// Counts one batch of every run's decisions, in order, and empties it.
    pub(in super::super) fn count(&mut self, batch: &mut [Vec<KeyEvent>]) {
        for follower in 0..self.each.len() {
            if let Share::Same(leader) = self.each[follower]
                && batch[follower] != batch[leader]
            {
                self.each[follower] = Share::Own(Box::new(self.counts(leader).clone()));
            }
        }
        for (share, events) in self.each.iter_mut().zip(batch) {
            if let Share::Own(counts) = share {
                counts.count(events);
            }
            events.clear();
        }
    }

    /// The figures of the run at `leader`, which counts on its own.
    fn counts(&self, leader: usize) -> &PerKeyCounts {
        match &self.each[leader] {
            Share::Own(counts) => counts,
            _ => unreachable!("a run followed counts on its own"),
        }
    }

    /// How many runs follow another's count.
    fn following(&self) -> usize {
        let same = |share: &&Share| matches!(share, Share::Same(_));
        self.each.iter().filter(same).count()
    }

    /// Every run's figures at the end of the runs: a run counted with
    /// others (leading or following) gets its count summed up once for
    /// all; one counted alone, its own.
    fn into_ends(self) -> Vec<Option<Ended>> {
        let led = |run: usize| {
            (self.each.iter()).any(|share| matches!(share, Share::Same(l) if *l == run))
        };
        let sums: Vec<Option<Summed>> = (0..self.each.len())
            .map(|run| led(run).then(|| self.counts(run).summed()).flatten())
            .collect();
        (self.each.into_iter().enumerate())
            .map(|(run, share)| match share {
                Share::Off => None,
                Share::Same(leader) => sums[leader].map(Ended::Summed),
                Share::Own(counts) => Some(sums[run].map_or(Ended::Counts(counts), Ended::Summed)),
            })
            .collect()
    }

    /// Every run's figures, each follower given a copy of its leader's.
    fn into_counts(self) -> Vec<Option<PerKeyCounts>> {
        let copies: Vec<Option<PerKeyCounts>> = (self.each.iter())
            .map(|share| match share {
                Share::Same(leader) => Some(self.counts(*leader).clone()),
                _ => None,
            })
            .collect();
        (self.each.into_iter().zip(copies))
            .map(|(share, copy)| match share {
                Share::Own(counts) => Some(*counts),
                _ => copy,
            })
            .collect()
    }
}

/// A run's figures per key at the end of the runs.
enum Ended {
    /// Counted alone (boxed, as in [`Share::Own`]).
    Counts(Box<PerKeyCounts>),
    /// Counted with other runs deciding alike, and summed up once for all.
    Summed(Summed),
}

/// The figures per key of a workload's runs, counted a batch of decisions
/// at a time: on a thread of their own, or here.
pub(in super::super) enum Away {
    /// On a thread of their own, a batch of [`GATHERED`] decisions at a time.
    Thread(Thread),
    /// Here, after each chunk; with each run's decisions of the chunk.
    Here(Figures, Batch),
}

/// The figures per key of a workload's runs, counted on a thread of their own.
pub(in super::super) struct Thread {
    send: SyncSender<Batch>,
    /// Batches counted, to be filled again.
    spent: Receiver<Batch>,
    /// Set by the thread when it finds its core shared.
    retired: Arc<AtomicBool>,
    /// Gives back every run's figures once every batch sent is counted.
    worker: JoinHandle<Option<Figures>>,
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
        let (give, take) = std::sync::mpsc::channel::<Figures>();
        let retired = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&retired);
        let worker = std::thread::Builder::new()
            .name("figures".into())
            .spawn(move || {
                let Ok(mut figures) = take.recv() else {
                    return None;
                };
                let mut shared = judge();
                // Until every sender is gone: every batch sent is counted.
                for mut batch in batches {
                    figures.count(&mut batch);
                    let _ = spend.send(batch);
                    if !flag.load(Ordering::Relaxed) && shared() {
                        flag.store(true, Ordering::Relaxed);
                    }
                }
                Some(figures)
            })
            .ok()?;
        give.send(Figures::new(Self::take(runs)))
            .expect("the thread waits for the figures");
        Some(Away::Thread(Thread {
            send,
            spent,
            retired,
            worker,
        }))
    }

    /// Counts the figures per key of `runs` here, a chunk of decisions at a
    /// time, while runs decide alike (so that they count once); `None` when
    /// fewer than two runs keep them, and each run counts its own as it
    /// decides — as all do again once none decides as another.
    pub(in super::super) fn here(runs: &mut [RunState]) -> Option<Away> {
        if runs.iter().filter(|run| run.m.keys.is_some()).count() < 2 {
            return None;
        }
        let figures = Figures::new(Self::take(runs));
        Some(Away::Here(
            figures,
            runs.iter().map(|_| Vec::new()).collect(),
        ))
    }

    /// Whether the figures are counted on a thread of their own.
    pub(in super::super) fn threaded(away: &Option<Away>) -> bool {
        matches!(away, Some(Away::Thread(_)))
    }

    /// Each run's figures, taken to be counted a batch at a time.
    fn take(runs: &mut [RunState]) -> Vec<Option<PerKeyCounts>> {
        runs.iter_mut()
            .map(|run| {
                let counts = run.m.keys.take();
                run.m.keys_away = counts.as_ref().map(|_| Vec::new());
                counts
            })
            .collect()
    }

    /// Sends what `runs` decided since the last call to be counted; when
    /// the thread has retired, brings the figures back to be counted here.
    pub(in super::super) fn after_chunk(away: &mut Option<Away>, runs: &mut [RunState]) {
        let gathered = |runs: &[RunState]| -> usize {
            (runs.iter())
                .filter_map(|run| run.m.keys_away.as_ref().map(Vec::len))
                .sum()
        };
        match away {
            None => {}
            Some(Away::Here(figures, batch)) => {
                Self::gather(runs, batch);
                figures.count(batch);
                // Once every run counts on its own, each counts as it
                // decides again (a chunk's decisions kept and read back
                // cost a tenth of a run whose limiters part at once).
                if figures.following() == 0 {
                    away.take().expect("away").bring_back(runs, false);
                }
            }
            Some(Away::Thread(this)) if gathered(runs) >= GATHERED => {
                let mut batch = this
                    .spent
                    .try_recv()
                    .unwrap_or_else(|_| runs.iter().map(|_| Vec::new()).collect());
                Self::gather(runs, &mut batch);
                // A send fails only when the thread is gone: its panic is raised below.
                if this.send.send(batch).is_err() || this.retired.load(Ordering::Relaxed) {
                    away.take().expect("away").bring_back(runs, false);
                }
            }
            Some(Away::Thread(_)) => {}
        }
    }

    /// Swaps each run's decisions since the last batch into `batch`.
    fn gather(runs: &mut [RunState], batch: &mut Batch) {
        for (run, events) in runs.iter_mut().zip(batch) {
            if let Some(decided) = &mut run.m.keys_away {
                std::mem::swap(decided, events);
            }
        }
    }

    /// Every decision counted, the figures back in their runs.
    pub(in super::super) fn finish(away: Option<Away>, runs: &mut [RunState]) {
        if let Some(this) = away {
            this.bring_back(runs, true);
        }
    }

    /// Every decision sent counted, the figures back in `runs`: to count on
    /// as they decide, or at the `end`, to be finished.
    fn bring_back(self, runs: &mut [RunState], end: bool) {
        let mut rest: Batch = runs
            .iter_mut()
            .map(|run| {
                run.m
                    .keys_away
                    .as_mut()
                    .map(std::mem::take)
                    .unwrap_or_default()
            })
            .collect();
        let figures = match self {
            Away::Here(mut figures, _) => {
                figures.count(&mut rest);
                figures
            }
            Away::Thread(this) => {
                let _ = this.send.send(rest);
                drop(this.send);
                match this.worker.join() {
                    Ok(figures) => figures.expect("the thread was given the figures"),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        };
        if !end {
            for (run, counts) in runs.iter_mut().zip(figures.into_counts()) {
                if counts.is_some() {
                    (run.m.keys, run.m.keys_away) = (counts, None);
                }
            }
            return;
        }
        for (run, ended) in runs.iter_mut().zip(figures.into_ends()) {
            match ended {
                Some(Ended::Counts(counts)) => run.m.keys = Some(*counts),
                Some(Ended::Summed(summed)) => run.m.keys_summed = Some(summed),
                None => continue,
            }
            run.m.keys_away = None;
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
    use crate::traffic::Key;

    /// Keyed traffic with rejections through a limiter per key and a global
    /// one, both keeping figures per key; a nginx-style delay holds some
    /// requests to be released at the end.
    fn scenario() -> Scenario {
        keyed(
            r#"[[limiter]]
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
        )
    }

    /// Keyed traffic for two seconds, 159,000 requests a second from 3,007
    /// clients, through `limiters`.
    fn keyed(limiters: &str) -> Scenario {
        let traffic = r#"duration = "2s"
[metrics]
rolling = "100ms"
[[workload]]
name = "w"
sources = [{ kind = "poisson", rate = 150000, clients = { count = 3000 } }, { kind = "uniform", rate = 9000, clients = { count = 7 } }]
"#;
        crate::scenario::parse(
            &format!("{traffic}{limiters}"),
            std::path::Path::new("p.toml"),
        )
        .unwrap()
    }

    /// The same traffic through limiters that decide alike for a while: two
    /// that turn nobody away, one whose bucket of 100,000 runs dry after
    /// about 1.7 s (159,000 a second come, 100,000 go back in), one per key
    /// that turns keys away from the start.
    fn alike() -> Scenario {
        keyed(
            r#"[[limiter]]
name = "all"
kind = "fixed-window"
window = "100ms"
threshold = 1000000
[[limiter]]
name = "all-too"
kind = "token-bucket"
rate = 10000000
burst = 1000000
[[limiter]]
name = "late"
kind = "token-bucket"
rate = 100000
burst = 100000
[[limiter]]
name = "per-key"
kind = "fixed-window"
window = "100ms"
threshold = 3
per = "key"
"#,
        )
    }

    /// How the figures per key are counted in [`results`].
    #[derive(Clone, Copy, Debug)]
    enum Mode {
        /// By each run as it decides.
        Inline,
        /// On a thread whose judge finds its core shared at this batch.
        Thread(u32),
        /// Here, a chunk at a time ([`Away::here`]).
        Here,
    }

    /// Every run's result, the figures counted as `mode` says; and, counted
    /// here, how many runs followed another's count after each chunk.
    fn results(scenario: &Scenario, mode: Mode) -> (Vec<String>, Vec<usize>) {
        let options = Options::default();
        let mut runs: Vec<RunState> = scenario
            .limiters
            .iter()
            .map(|limiter| RunState::new(scenario, &options, limiter, true))
            .collect();
        let mut figures = match mode {
            Mode::Inline => None,
            Mode::Thread(after) => {
                let judge: JudgeMaker = Box::new(move || {
                    let mut calls = 0;
                    Box::new(move || {
                        calls += 1;
                        calls >= after
                    })
                });
                Some(Away::judged(&mut runs, judge).expect("the runs keep figures per key"))
            }
            Mode::Here => Some(Away::here(&mut runs).expect("several runs keep figures")),
        };
        let (mut chunks, mut following) = (0, Vec::new());
        let stream = crate::sim::arrivals(scenario, &scenario.workloads[0], 0).unwrap();
        in_chunks(stream, false, &mut |chunk: &[Arrival]| {
            for run in &mut runs {
                run.observe_all(chunk);
            }
            Away::after_chunk(&mut figures, &mut runs);
            if let Some(Away::Here(figures, _)) = &figures {
                following.push(figures.following());
            }
            chunks += 1;
            Ok(())
        })
        .unwrap();
        assert!(chunks > 50, "{chunks} chunks");
        Away::finish(figures, &mut runs);
        let results = runs
            .into_iter()
            .zip(&scenario.limiters)
            .map(|(run, limiter)| {
                format!("{:?}", run.finish(scenario, &options, "w", &limiter.name))
            })
            .collect();
        (results, following)
    }

    /// The figures per key counted on a thread of their own are those
    /// counted here — whether the thread counts to the end, or retires at
    /// once, early or late and the rest are counted here.
    #[test]
    fn figures_counted_away_are_the_figures_counted_here() {
        let scenario = scenario();
        let (here, _) = results(&scenario, Mode::Inline);
        assert!(here.iter().all(|run| run.contains("worst_key")), "{here:?}");
        assert!(here[0].contains("throttled: ") && !here[0].contains("throttled: 0,"));
        // At least 25 batches are sent (more than 50 chunks, 2 chunks of
        // decisions or fewer a batch): each retirement comes before the end.
        for after in [u32::MAX, 1, 2, 9, 20] {
            assert_eq!(
                results(&scenario, Mode::Thread(after)).0,
                here,
                "retired at batch {after}"
            );
        }
        // Counted apart until no run decides as another, then as they decide.
        let (apart, following) = results(&scenario, Mode::Here);
        assert_eq!(apart, here);
        assert!(following.len() < 5, "{following:?}");
    }

    /// Runs that decide alike share one count until they differ — the one
    /// whose bucket runs dry follows for most of the run, then copies — and
    /// every run's figures are those it counts alone, here or on a thread.
    #[test]
    fn runs_deciding_alike_count_once_and_part_exactly() {
        let scenario = alike();
        let (alone, _) = results(&scenario, Mode::Inline);
        let throttled = |run: &String| !run.contains("throttled: 0,");
        let parted: Vec<bool> = alone.iter().map(throttled).collect();
        assert_eq!(parted, [false, false, true, true], "{alone:?}");
        let (here, following) = results(&scenario, Mode::Here);
        assert_eq!(here, alone);
        // First the two that turn nobody away and the one whose bucket is
        // still full follow the first; the one per key parts at once.
        assert_eq!(following.first(), Some(&2), "{following:?}");
        assert_eq!(following.last(), Some(&1), "{following:?}");
        let parts = following.iter().position(|&n| n == 1).unwrap();
        assert!(
            parts > following.len() / 2,
            "parted at chunk {parts} of {}",
            following.len()
        );
        for after in [u32::MAX, 3] {
            assert_eq!(results(&scenario, Mode::Thread(after)).0, alone);
        }
    }

    /// Counts given to [`Figures`] follow only counts that start alike: a
    /// run with another interval, or one already counting, counts alone.
    #[test]
    fn only_fresh_counts_over_one_interval_follow() {
        let fresh = || Some(PerKeyCounts::new(crate::time::Nanos(100)));
        let mut used = PerKeyCounts::new(crate::time::Nanos(100));
        used.admitted(crate::time::Nanos(5), Key::client(1));
        let other = Some(PerKeyCounts::new(crate::time::Nanos(200)));
        let figures = Figures::new(vec![None, Some(used), fresh(), other, fresh(), fresh()]);
        let shares: Vec<String> = figures
            .each
            .iter()
            .map(|share| match share {
                Share::Off => "off".to_string(),
                Share::Own(_) => "own".to_string(),
                Share::Same(leader) => format!("same {leader}"),
            })
            .collect();
        assert_eq!(shares, ["off", "own", "own", "own", "same 2", "same 2"]);
        let counts = figures.into_counts();
        assert!(counts[0].is_none() && counts[1].as_ref().is_some_and(|c| c.len() == 1));
        assert!(
            counts[2..]
                .iter()
                .all(|c| c.as_ref().is_some_and(|c| c.is_empty()))
        );
    }

    /// No run keeping figures per key, no thread; fewer than two, nothing counted apart.
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
        assert!(Away::here(&mut runs).is_none());
        let scenario = crate::scenario::Scenario {
            limiters: scenario.limiters[..1].to_vec(),
            ..self::scenario()
        };
        let mut runs = vec![RunState::new(
            &scenario,
            &Options::default(),
            &scenario.limiters[0],
            true,
        )];
        assert!(Away::here(&mut runs).is_none());
        assert!(runs[0].m.keys.is_some(), "the figures stay with the run");
    }
}
