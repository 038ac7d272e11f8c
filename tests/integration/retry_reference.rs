//! Clients that retry, checked against a reference written apart from the
//! engine: a plain event loop over a list, its own fixed window and sliding
//! log, its own retry policies and budget, sharing no code with burstsim.
//! Many small random scenarios run through the real binary with
//! `--decisions`, and every attempt must agree: time, client, decision and
//! attempt number, in order.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const MS: u64 = 1_000_000;
const DURATION: u64 = 3_000 * MS;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    FixedWindow,
    SlidingLog,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    HonourHint,
    Fixed(u64),
    Exponential { base: u64, cap: u64 },
    Immediate,
}

#[derive(Clone, Debug)]
struct Case {
    kind: Kind,
    window: u64,
    threshold: u64,
    count_rejected: bool,
    per_key: bool,
    policy: Policy,
    max_attempts: u32,
    budget: Option<u64>,
    /// First attempts: time and client, in time order.
    requests: Vec<(u64, u32)>,
}

impl Case {
    fn random(g: &mut Gen) -> Case {
        let kind = if g.below(2) == 0 {
            Kind::FixedWindow
        } else {
            Kind::SlidingLog
        };
        let window = [100, 250, 1000][g.below(3) as usize] * MS;
        let policy = match g.below(4) {
            0 => Policy::HonourHint,
            1 => Policy::Fixed((20 + g.below(100)) * MS),
            2 => Policy::Exponential {
                base: (10 + g.below(50)) * MS,
                cap: (100 + g.below(400)) * MS,
            },
            _ => Policy::Immediate,
        };
        let count = 5 + g.below(60);
        let mut requests: Vec<(u64, u32)> = (0..count)
            .map(|_| {
                // Often exactly on a 50 ms grid: at window edges, and equal.
                let time = if g.below(2) == 0 {
                    g.below(DURATION / (50 * MS)) * 50 * MS
                } else {
                    g.below(DURATION)
                };
                (time, 1 + g.below(4) as u32)
            })
            .collect();
        requests.sort_by_key(|&(time, _)| time);
        Case {
            kind,
            window,
            threshold: 1 + g.below(5),
            count_rejected: g.below(2) == 0,
            per_key: g.below(3) == 0,
            policy,
            max_attempts: 1 + g.below(6) as u32,
            budget: (g.below(3) == 0).then(|| 5 + g.below(40)),
            requests,
        }
    }

    fn scenario(&self) -> String {
        let kind = match self.kind {
            Kind::FixedWindow => "fixed-window",
            Kind::SlidingLog => "sliding-log",
        };
        let policy = match self.policy {
            Policy::HonourHint => "policy = \"honour-hint\"".to_string(),
            Policy::Fixed(base) => format!("policy = \"fixed\", base = \"{base}ns\""),
            Policy::Exponential { base, cap } => format!(
                "policy = \"exponential\", base = \"{base}ns\", cap = \"{cap}ns\", multiplier = 2"
            ),
            Policy::Immediate => "policy = \"immediate\"".to_string(),
        };
        let budget = self
            .budget
            .map_or(String::new(), |b| format!(", budget = {b}"));
        format!(
            "name = \"ref\"\nduration = \"{DURATION}ns\"\n\n[[workload]]\nname = \"w\"\nsources = [{{ kind = \"trace\", path = \"trace.csv\", key = \"client\" }}]\nretry = {{ {policy}, max_attempts = {}{budget} }}\n\n[[limiter]]\nname = \"l\"\nkind = \"{kind}\"\nwindow = \"{}ns\"\nthreshold = {}\ncount_rejected = {}\nper = \"{}\"\n",
            self.max_attempts,
            self.window,
            self.threshold,
            self.count_rejected,
            if self.per_key { "key" } else { "global" },
        )
    }

    fn trace(&self) -> String {
        let mut text = String::from("time_ns,client\n");
        for (time, client) in &self.requests {
            text.push_str(&format!("{time},c{client}\n"));
        }
        text
    }
}

/// One attempt as decided: time, client, admitted, attempt number.
type Attempt = (u64, u32, bool, u32);

/// The reference limiter: counted times per client (or for all).
struct Reference {
    kind: Kind,
    window: u64,
    threshold: u64,
    count_rejected: bool,
    per_key: bool,
    counted: HashMap<u32, Vec<u64>>,
}

impl Reference {
    /// Admitted or not, and the instant the answer names for a retry.
    fn decide(&mut self, time: u64, client: u32) -> (bool, u64) {
        let key = if self.per_key { client } else { 0 };
        let counted = self.counted.entry(key).or_default();
        let (w, n) = (self.window, self.threshold);
        match self.kind {
            Kind::FixedWindow => {
                let start = time / w * w;
                let in_window = counted.iter().filter(|&&t| t >= start).count() as u64;
                let admit = in_window < n;
                if admit || self.count_rejected {
                    counted.push(time);
                }
                (admit, start + w)
            }
            Kind::SlidingLog => {
                let in_window = counted.iter().filter(|&&t| time - t < w).count() as u64;
                let admit = in_window < n;
                if admit || self.count_rejected {
                    counted.push(time);
                }
                let mut recent: Vec<u64> =
                    counted.iter().copied().filter(|&t| time - t < w).collect();
                recent.sort_unstable();
                // The count drops below N once the N-th newest has left.
                let retry = if recent.len() as u64 >= n {
                    recent[recent.len() - n as usize] + w
                } else {
                    time
                };
                (admit, retry)
            }
        }
    }
}

/// Runs `case` through the reference: every attempt in the order decided.
fn reference(case: &Case) -> Vec<Attempt> {
    let mut limiter = Reference {
        kind: case.kind,
        window: case.window,
        threshold: case.threshold,
        count_rejected: case.count_rejected,
        per_key: case.per_key,
        counted: HashMap::new(),
    };
    // Waiting retries: (time, order scheduled, client, attempt number).
    let mut waiting: Vec<(u64, u64, u32, u32)> = Vec::new();
    let mut scheduled = 0;
    let mut tokens = case.budget;
    let mut next_request = 0;
    let mut decided = Vec::new();
    loop {
        let soonest = waiting
            .iter()
            .enumerate()
            .min_by_key(|&(_, &(time, order, ..))| (time, order))
            .map(|(i, _)| i);
        let request = case.requests.get(next_request);
        // A retry goes before a new request at the same instant.
        let (time, client, number) = match (soonest, request) {
            (Some(i), Some(&(t, _))) if waiting[i].0 <= t => {
                let (time, _, client, number) = waiting.remove(i);
                (time, client, number)
            }
            (_, Some(&(time, client))) => {
                next_request += 1;
                (time, client, 1)
            }
            (Some(i), None) => {
                let (time, _, client, number) = waiting.remove(i);
                (time, client, number)
            }
            (None, None) => return decided,
        };
        let (admitted, hint) = limiter.decide(time, client);
        decided.push((time, client, admitted, number));
        if admitted {
            if let (Some(tokens), Some(full)) = (&mut tokens, case.budget) {
                *tokens = (*tokens + if number == 1 { 1 } else { 5 }).min(full);
            }
            continue;
        }
        if number >= case.max_attempts {
            continue;
        }
        let at = match case.policy {
            Policy::HonourHint => hint,
            Policy::Fixed(base) => time + base,
            Policy::Exponential { base, cap } => {
                let mut wait = base.min(cap);
                for _ in 1..number {
                    wait = (wait * 2).min(cap);
                }
                time + wait
            }
            Policy::Immediate => time,
        };
        if at >= DURATION {
            continue;
        }
        if let Some(tokens) = &mut tokens {
            if *tokens < 5 {
                continue;
            }
            *tokens -= 5;
        }
        waiting.push((at, scheduled, client, number + 1));
        scheduled += 1;
    }
}

/// FNV-1a, as the trace format documents for key text.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Runs `case` through burstsim: every attempt from `--decisions`.
fn engine(case: &Case, dir: &Path) -> Vec<Attempt> {
    std::fs::write(dir.join("ref.toml"), case.scenario()).unwrap();
    std::fs::write(dir.join("trace.csv"), case.trace()).unwrap();
    let out = dir.join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_burstsim"))
        .args(["run", "--decisions", "--no-charts", "--quiet", "--out"])
        .arg(&out)
        .arg(dir.join("ref.toml"))
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}\n{}",
        case.scenario(),
        String::from_utf8_lossy(&status.stderr)
    );
    let clients: HashMap<u64, u32> = (1..=4).map(|c| (fnv1a(&format!("c{c}")), c)).collect();
    let text = std::fs::read_to_string(out.join("decisions/w/l.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time_ns,key,admitted,attempt,client"));
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            let client = clients[&fields[1].parse::<u64>().unwrap()];
            assert_eq!(
                fields[4],
                format!("c{client}"),
                "the client as the trace names it"
            );
            (
                fields[0].parse().unwrap(),
                clients[&fields[1].parse::<u64>().unwrap()],
                fields[2] == "true",
                fields[3].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_engine_agrees_with_a_plain_event_loop_attempt_by_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let (mut retries, mut rejected_retries) = (0, 0);
    for i in 0..80 {
        let case = Case::random(&mut g);
        let expected = reference(&case);
        let got = engine(&case, dir.path());
        if let Some(at) =
            (0..expected.len().max(got.len())).find(|&j| expected.get(j) != got.get(j))
        {
            panic!(
                "case {i} differs at attempt {at}: reference {:?}, engine {:?}\n{case:?}",
                expected.get(at),
                got.get(at)
            );
        }
        retries += expected.iter().filter(|a| a.3 > 1).count();
        rejected_retries += expected.iter().filter(|a| a.3 > 1 && !a.2).count();
    }
    // The cases exercise what they are meant to: retries, some rejected again.
    assert!(
        retries > 200 && rejected_retries > 50,
        "{retries} retries, {rejected_retries} rejected"
    );
}

#[test]
fn hint_honouring_clients_of_an_epoch_window_all_come_back_at_its_reset() {
    // 30 requests in the first half second against 10 per second: the 20
    // rejected all retry at exactly 1 s, where 10 get in.
    let case = Case {
        kind: Kind::FixedWindow,
        window: 1_000 * MS,
        threshold: 10,
        count_rejected: false,
        per_key: false,
        policy: Policy::HonourHint,
        max_attempts: 2,
        budget: None,
        requests: (0..30).map(|i| (i * 15 * MS, 1 + (i % 4) as u32)).collect(),
    };
    let dir = tempfile::tempdir().unwrap();
    let got = engine(&case, dir.path());
    assert_eq!(got, reference(&case));
    let retries: Vec<&Attempt> = got.iter().filter(|a| a.3 == 2).collect();
    assert_eq!(retries.len(), 20);
    assert!(retries.iter().all(|a| a.0 == 1_000 * MS));
    assert_eq!(retries.iter().filter(|a| a.2).count(), 10);
}
