//! A model of burstsim's log replay done in one pass ("fused"): read and
//! check each combined line as burstsim's rules do (UTF-8, the head, the
//! quoted request with escapes, a three-digit status, the bytes field), the
//! address's FNV-1a id, one table entry per key holding its first-seen
//! number, its fixed window (5 per 1 s) and both limiters' figures per key
//! (worst count in one second, admitted, throttled), a global window of 600
//! per 1 s, the per-second timeline and worst seconds. Whole-second stamps:
//! a key's count in its current second is its trailing count over 1 s.
//! Not part of burstsim: a yardstick for docs/performance.md ("How far one
//! pass could go, modelled"), timed against `../shared/perf-floor`'s `floor
//! log` on the same file, in the same minute.
//!
//!     cd scripts/models/fused-log && cargo build --release
//!     target/release/fused-log-model ACCESS.log [one|two|split|parse]
//!
//! `one`: one thread. `two`: reading on one thread, the table on another.
//! `split`: reading and the global window on one thread, the keys split by
//! their id's top bit between two more (each with its half's figures and
//! timeline; merging the halves' seconds is left out). `parse`: reading alone.
use std::fs::File;
use std::io::Read;

const G_T: u32 = 600;
const K_T: u8 = 5;
const READ: usize = 1 << 16;
const B: usize = 32;

/// `dd/Mon/yyyy:HH:MM:SS +zzzz` to Unix seconds, as the floor's `log` reads it.
fn parse_clf(s: &[u8]) -> Option<i64> {
    if s.len() != 26
        || s[2] != b'/'
        || s[6] != b'/'
        || s[11] != b':'
        || s[14] != b':'
        || s[17] != b':'
        || s[20] != b' '
    {
        return None;
    }
    let d = |i: usize| -> Option<i64> {
        let (a, b) = (s[i].wrapping_sub(b'0'), s[i + 1].wrapping_sub(b'0'));
        (a < 10 && b < 10).then_some(a as i64 * 10 + b as i64)
    };
    let (day, year) = (d(0)?, d(7)? * 100 + d(9)?);
    let (hh, mm, ss) = (d(12)?, d(15)?, d(18)?);
    let (oh, om) = (d(22)?, d(24)?);
    let sign = match s[21] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    const MONTHS: [&[u8; 3]; 12] = [
        b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
        b"dec",
    ];
    let month = [s[3] | 0x20, s[4] | 0x20, s[5] | 0x20];
    let mon = MONTHS.iter().position(|m| **m == month)? as i64 + 1;
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let mdays = [31, 28 + leap as i64, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mon as usize - 1];
    if day < 1 || day > mdays || hh > 23 || mm > 59 || ss > 59 || om > 59 {
        return None;
    }
    // days since 1970-01-01 (Hinnant's days_from_civil)
    let y = year - (mon <= 2) as i64;
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (mon + if mon > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(days * 86400 + hh * 3600 + mm * 60 + ss - sign * (oh * 3600 + om * 60))
}

fn fnv1a(a: &[u8]) -> u64 {
    a.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One parsed line: (id, second), or None for a blank one.
struct Parser {
    c0: [u8; 26],
    csec: i64,
    statuses: u64,
}

impl Parser {
    #[inline]
    fn line(&mut self, l: &str, n: u64) -> Result<Option<(u64, i64)>, String> {
        let l = l.trim();
        if l.is_empty() {
            return Ok(None);
        }
        let b = l.as_bytes();
        let bad = || format!("line {n}: not a combined log line");
        let sp = memchr::memchr(b' ', b).ok_or_else(bad)?;
        let addr = &b[..sp];
        let rest = &b[sp + 1..];
        let sp2 = memchr::memchr(b' ', rest).ok_or_else(bad)?;
        let rest = &rest[sp2 + 1..];
        let br = memchr::memchr(b'[', rest).ok_or_else(bad)?;
        let rest = &rest[br + 1..];
        if rest.len() < 28 || &rest[26..28] != b"] " {
            return Err(bad());
        }
        let t = &rest[..26];
        let sec = if t == &self.c0[..] {
            self.csec
        } else {
            let s = parse_clf(t).ok_or_else(bad)?;
            self.c0.copy_from_slice(t);
            self.csec = s;
            s
        };
        let rest = &rest[28..];
        if rest.first() != Some(&b'"') {
            return Err(bad());
        }
        let mut at = 1;
        loop {
            let i = memchr::memchr2(b'"', b'\\', &rest[at..]).ok_or_else(bad)?;
            if rest[at + i] == b'\\' {
                at += i + 2;
                continue;
            }
            at += i + 1;
            break;
        }
        let rest = rest.get(at + 1..).ok_or_else(bad)?;
        match rest {
            [a @ b'0'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9', b' ', ..] => {
                let s = (a - b'0') as u64 * 100 + (b - b'0') as u64 * 10 + (c - b'0') as u64;
                self.statuses += (s == 429) as u64;
            }
            _ => return Err(bad()),
        }
        Ok(Some((fnv1a(addr), sec)))
    }
}

#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Entry {
    id: u64,
    number: u32,
    sec: u32,
    k_cnt: u8,
    g_cnt: u8,
    k_worst: u8,
    g_worst: u8,
    k_adm: u32,
    g_adm: u32,
}

/// Set in a row's second when the global window, decided on the reading
/// side, admitted it (`split`).
const GLOBAL_ADMITTED: i64 = 1 << 62;

struct Decider {
    /// Whether the global window is decided here (else it comes with each row).
    global: bool,
    table: Vec<Entry>,
    keys: u32,
    first: i64,
    cur_sec: i64,
    cur: u32,
    sec_counts: [u32; 3],
    tl: Vec<[u32; 3]>,
    worst: [u32; 2],
}

impl Decider {
    fn new(global: bool) -> Decider {
        Decider {
            global,
            table: vec![Entry::default(); 1 << 16],
            keys: 0,
            first: i64::MIN,
            cur_sec: i64::MIN,
            cur: 0,
            sec_counts: [0; 3],
            tl: Vec::new(),
            worst: [0; 2],
        }
    }

    #[inline]
    fn home(&self, id: u64) -> usize {
        (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.table.len().trailing_zeros()))
            as usize
    }

    fn close(&mut self) {
        self.tl.push(self.sec_counts);
        self.worst[0] = self.worst[0].max(self.sec_counts[1]);
        self.worst[1] = self.worst[1].max(self.sec_counts[2]);
        self.sec_counts = [0; 3];
    }

    fn batch(&mut self, rows: &[(u64, i64)]) -> Result<(), String> {
        let mut touched = 0u64;
        for &(id, _) in rows {
            touched = touched.wrapping_add(self.table[self.home(id | 1)].id);
        }
        std::hint::black_box(touched);
        for &(id, sec) in rows {
            let (sec, admitted) = if self.global {
                (sec, self.sec_counts[1] < G_T)
            } else {
                (sec & !GLOBAL_ADMITTED, sec & GLOBAL_ADMITTED != 0)
            };
            if sec != self.cur_sec {
                if self.first == i64::MIN {
                    (self.first, self.cur_sec) = (sec, sec);
                } else if sec < self.cur_sec {
                    return Err("unsorted".into());
                } else {
                    self.close();
                    for _ in self.cur_sec + 1..sec {
                        self.close();
                    }
                    self.cur_sec = sec;
                }
                self.cur = (sec - self.first) as u32 + 1;
            }
            if (self.keys as usize + 1) * 4 > self.table.len() * 3 {
                self.grow();
            }
            let mask = self.table.len() - 1;
            let stored = id | 1; // model: ids nonzero
            let mut at = self.home(stored);
            let e = loop {
                let e = &mut self.table[at];
                if e.id == stored {
                    break e;
                }
                if e.id == 0 {
                    *e = Entry {
                        id: stored,
                        number: self.keys,
                        ..Entry::default()
                    };
                    self.keys += 1;
                    break e;
                }
                at = (at + 1) & mask;
            };
            if e.sec != self.cur {
                e.sec = self.cur;
                e.k_cnt = 0;
                e.g_cnt = 0;
            }
            self.sec_counts[0] += 1;
            if admitted {
                self.sec_counts[1] += 1;
                e.g_cnt += 1;
                e.g_worst = e.g_worst.max(e.g_cnt);
                e.g_adm += 1;
            } else {
                e.g_adm |= 1 << 31;
            }
            if e.k_cnt < K_T {
                self.sec_counts[2] += 1;
                e.k_cnt += 1;
                e.k_worst = e.k_worst.max(e.k_cnt);
                e.k_adm += 1;
            } else {
                e.k_adm |= 1 << 31;
            }
        }
        Ok(())
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.table);
        self.table = vec![Entry::default(); old.len() * 2];
        let mask = self.table.len() - 1;
        for e in old.into_iter().filter(|e| e.id != 0) {
            let mut at = self.home(e.id);
            while self.table[at].id != 0 {
                at = (at + 1) & mask;
            }
            self.table[at] = e;
        }
    }

    fn finish(mut self) -> String {
        self.close();
        // Figures per key, in first-seen order: worst p50/p99/max, throttled, admitted.
        let mut by_number = vec![(0u8, 0u8, 0u32, 0u32); self.keys as usize];
        for e in self.table.iter().filter(|e| e.id != 0) {
            by_number[e.number as usize] = (e.k_worst, e.g_worst, e.k_adm, e.g_adm);
        }
        let mut hist = [[0u64; 256]; 2];
        let (mut thr, mut adm) = ([0u64; 2], [0u64; 2]);
        for &(kw, gw, ka, ga) in &by_number {
            hist[0][kw as usize] += 1;
            hist[1][gw as usize] += 1;
            thr[0] += (ka >> 31) as u64;
            thr[1] += (ga >> 31) as u64;
            adm[0] += (ka & !(1 << 31)) as u64;
            adm[1] += (ga & !(1 << 31)) as u64;
        }
        let max = |h: &[u64; 256]| h.iter().rposition(|&c| c > 0).unwrap_or(0);
        let total: u64 = self.tl.iter().map(|t| t[0] as u64).sum();
        format!(
            "lines {total} keys {} seconds {} worst g {} k {} admitted g {} k {} throttled keys g {} k {} key worst max g {} k {}",
            self.keys, self.tl.len(), self.worst[0], self.worst[1], adm[1], adm[0], thr[1], thr[0], max(&hist[1]), max(&hist[0])
        )
    }
}

/// Reads `path`'s lines as text, checked as UTF-8 a read at a time, handing each on.
fn read(path: &str, mut each: impl FnMut(&str, u64) -> Result<(), String>) -> Result<u64, String> {
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; READ * 2];
    let (mut have, mut n) = (0usize, 0u64);
    loop {
        if buf.len() - have < READ {
            buf.resize(have + READ, 0);
        }
        let r = f.read(&mut buf[have..]).map_err(|e| e.to_string())?;
        have += r;
        let end = if r == 0 {
            have
        } else {
            memchr::memrchr(b'\n', &buf[..have]).map_or(0, |i| i + 1)
        };
        let text =
            std::str::from_utf8(&buf[..end]).map_err(|_| format!("line {}: not UTF-8", n + 1))?;
        let mut start = 0;
        while start < text.len() {
            let nl =
                memchr::memchr(b'\n', &text.as_bytes()[start..]).map_or(text.len(), |i| start + i);
            n += 1;
            each(&text[start..nl], n)?;
            start = nl + 1;
        }
        buf.copy_within(end..have, 0);
        have -= end;
        if r == 0 {
            return Ok(n);
        }
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let two = args.get(2).map(String::as_str) == Some("two");
    let parse_only = args.get(2).map(String::as_str) == Some("parse");
    let split = args.get(2).map(String::as_str) == Some("split");
    let t = std::time::Instant::now();
    let mut parser = Parser {
        c0: [0; 26],
        csec: 0,
        statuses: 0,
    };
    let out = if split {
        const HAND: usize = 8192;
        let mut txs = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..2 {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(u64, i64)>>(8);
            txs.push(tx);
            handles.push(std::thread::spawn(move || -> Result<String, String> {
                let mut decider = Decider::new(false);
                while let Ok(rows) = rx.recv() {
                    for chunk in rows.chunks(B) {
                        decider.batch(chunk)?;
                    }
                }
                Ok(decider.finish())
            }));
        }
        let mut rows = [Vec::with_capacity(HAND), Vec::with_capacity(HAND)];
        let (mut second, mut in_second, mut global_worst) = (i64::MIN, 0u32, 0u32);
        read(path, |l, n| {
            if let Some((id, sec)) = parser.line(l, n)? {
                if sec != second {
                    (second, in_second) = (sec, 0);
                }
                let admitted = in_second < G_T;
                in_second += u32::from(admitted);
                global_worst = global_worst.max(in_second);
                let half = (id >> 63) as usize;
                rows[half].push((id, if admitted { sec | GLOBAL_ADMITTED } else { sec }));
                if rows[half].len() == HAND {
                    let full = std::mem::replace(&mut rows[half], Vec::with_capacity(HAND));
                    txs[half].send(full).map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        })?;
        for (half, rest) in rows.into_iter().enumerate() {
            txs[half].send(rest).map_err(|e| e.to_string())?;
        }
        drop(txs);
        let outs: Vec<String> = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Result<_, _>>()?;
        format!("global worst {global_worst} | {}", outs.join(" | "))
    } else if !two {
        let mut decider = Decider::new(true);
        let mut rows = Vec::with_capacity(B);
        read(path, |l, n| {
            if let Some(row) = parser.line(l, n)? {
                if parse_only {
                    std::hint::black_box(row);
                    return Ok(());
                }
                rows.push(row);
                if rows.len() == B {
                    decider.batch(&rows)?;
                    rows.clear();
                }
            }
            Ok(())
        })?;
        decider.batch(&rows)?;
        decider.finish()
    } else {
        const HAND: usize = 16384;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(u64, i64)>>(4);
        let (back_tx, back_rx) = std::sync::mpsc::sync_channel::<Vec<(u64, i64)>>(6);
        let decider = std::thread::spawn(move || -> Result<String, String> {
            let mut decider = Decider::new(true);
            while let Ok(rows) = rx.recv() {
                for chunk in rows.chunks(B) {
                    decider.batch(chunk)?;
                }
                let _ = back_tx.try_send(rows);
            }
            Ok(decider.finish())
        });
        let mut rows = Vec::with_capacity(HAND);
        read(path, |l, n| {
            if let Some(row) = parser.line(l, n)? {
                rows.push(row);
                if rows.len() == HAND {
                    let empty = back_rx
                        .try_recv()
                        .map(|mut v| {
                            v.clear();
                            v
                        })
                        .unwrap_or_else(|_| Vec::with_capacity(HAND));
                    tx.send(std::mem::replace(&mut rows, empty))
                        .map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        })?;
        tx.send(rows).map_err(|e| e.to_string())?;
        drop(tx);
        decider.join().unwrap()?
    };
    println!(
        "{out} 429s {} in {:.3} s",
        parser.statuses,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
