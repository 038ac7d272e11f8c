use super::*;
use crate::limiter::Hint;
use crate::summary::RunSummary;
use crate::traffic::Key;

/// Sends `count` requests at `at`, each from its own key; a rejected one
/// comes back once, when the limiter says it may.
struct RetryOnce {
    sent: Vec<Arrival>,
    next: usize,
}

impl Driver for RetryOnce {
    fn next_time(&self) -> Option<Nanos> {
        self.sent.get(self.next).map(|a| a.time)
    }

    fn next(&mut self) -> Option<Arrival> {
        self.next += 1;
        self.sent.get(self.next - 1).copied()
    }

    fn answer(
        &mut self,
        arrival: Arrival,
        attempt: Attempt,
        decision: Decision,
        events: &mut Events,
    ) {
        if let Decision::Reject(Hint {
            retry_at: Some(at), ..
        }) = decision
            && arrival.time < at
        {
            let retry = Arrival {
                time: at,
                ..arrival
            };
            let next = Attempt {
                number: attempt.number + 1,
                ..attempt
            };
            events.schedule(at, Event::Arrive(retry, next));
        }
    }

    fn annotate(&self, _: &mut RunSummary) {}
}

fn scenario() -> Scenario {
    crate::scenario::parse(
        "duration = \"3s\"\n[[workload]]\nname = \"w\"\nsources = [{ kind = \"uniform\", rate = 1 }]\n[[limiter]]\nname = \"l\"\nkind = \"fixed-window\"\nwindow = \"1s\"\nthreshold = 10\n",
        std::path::Path::new("s.toml"),
    )
    .unwrap()
}

#[test]
fn a_driver_hears_every_answer_and_its_retries_come_first_at_equal_times() {
    let scenario = scenario();
    let mut run = RunState::new(&scenario, &Options::default(), &scenario.limiters[0], true);
    let at = |time: u64, key: u64| Arrival {
        time: Nanos(time),
        key: Key::client(key),
    };
    // 15 at 0.5 s, then one more at exactly 1 s, when the retries are due.
    let mut sent: Vec<Arrival> = (0..15).map(|k| at(500_000_000, k)).collect();
    sent.push(at(1_000_000_000, 99));
    let mut driver = RetryOnce { sent, next: 0 };
    let mut decided = Vec::new();
    run.drive(&mut driver, |arrival, _, decision| {
        decided.push((arrival.time.get(), arrival.key.client, decision.admitted()));
        Ok(())
    })
    .unwrap();
    assert_eq!(decided.len(), 21, "15 + 5 retries + 1");
    let retries: Vec<_> = decided[15..20].to_vec();
    assert_eq!(
        retries,
        (10..15)
            .map(|k| (1_000_000_000, k, true))
            .collect::<Vec<_>>(),
        "the fixed window told them its end; they come before the new request at that instant"
    );
    assert_eq!(decided[20], (1_000_000_000, 99, true));
    assert_eq!((run.offered(), run.m.admitted), (21, 16));
}
