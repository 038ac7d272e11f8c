//! What the check keeps of a trace for its replays: its keys numbered in
//! the order first seen, and its rows as the replay yields them, written
//! once to an unnamed temporary file — so the file is read and parsed once,
//! and every replay replays exactly the rows that were checked.

use std::io::{BufWriter, Write};

use super::*;

/// A trace's keys numbered 0, 1, 2, … in the order the check first saw
/// them: replayed by number, every table a run keeps per key is a flat
/// array indexed by it.
#[derive(Debug, Default)]
pub(super) struct Numbered {
    pub(super) numbers: crate::traffic::slots::Numbers,
    /// Each number's key as its text hashes ([`Key::named`]), as the results name it.
    pub(super) hashes: Vec<u64>,
}

impl Numbered {
    /// The number of `hash`, and whether it is new.
    pub(super) fn insert(&mut self, hash: u64) -> (u32, bool) {
        let (number, new) = self.numbers.number(hash);
        if new {
            self.hashes.push(hash);
        }
        (number, new)
    }
}

/// The numbering a workload's trace sources share when it has several, so
/// that every source's replay names a client by one small number and each
/// table a run keeps per key stays a flat array (a hashed key costs every
/// such table a lookup of its own: 3–4× the replay's time and memory on
/// the yardstick's log split in two). The sources are checked one after
/// the other, each numbering its keys on from the one before; then it is
/// closed, and the replays and the results read the whole numbering.
#[derive(Debug, Default)]
pub(crate) struct Book {
    /// The numbering so far, while the sources are checked.
    open: std::sync::Mutex<Numbered>,
    /// Whether a source reads its file again for each replay, and so looks
    /// each row's key up in the table.
    rereads: std::sync::atomic::AtomicBool,
    /// The whole numbering, once every source is checked.
    done: OnceLock<Arc<Numbered>>,
}

impl Book {
    /// The numbering so far, for a source's check to go on with.
    pub(super) fn take(&self) -> Numbered {
        std::mem::take(&mut *self.open.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Hands the numbering back after a source's check; `rereads` when
    /// that source's replays will look its keys up again.
    pub(super) fn put(&self, numbered: Numbered, rereads: bool) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = numbered;
        self.rereads
            .fetch_or(rereads, std::sync::atomic::Ordering::Relaxed);
    }

    /// Ends the numbering once every source is checked: the table of
    /// numbers is freed unless a replay looks keys up in it.
    pub(crate) fn close(&self) {
        let mut numbered = self.take();
        if !self.rereads.load(std::sync::atomic::Ordering::Relaxed) {
            numbered.numbers = crate::traffic::slots::Numbers::default();
        }
        let _ = self.done.set(Arc::new(numbered));
    }

    /// The whole numbering, once closed.
    pub(super) fn done(&self) -> Option<&Arc<Numbered>> {
        self.done.get()
    }
}

/// The most bytes of checked rows kept (about 130 million rows of a sorted
/// log with numbered keys): a longer trace is read from its file again for
/// each replay instead.
pub(super) const CHECKED_BYTES: u64 = 1 << 30;

/// The checked rows, each as a word of 8 bytes when it can be (the rows
/// of a numbered, sorted log always can): the low 32 bits its time's step
/// from the row before (wrapping), the high 32 its client (its number when
/// the keys are numbered, else its hash) shifted left by two over the
/// log's own verdict (0 unknown, 1 let through, 2 turned away). A step
/// that does not fit is [`ESCAPE`] and the time follows whole (8 bytes);
/// a client that does not fit is `ESCAPE` and the client (8) and the
/// verdict (1) follow; then, when the trace names Hosts, the Host's hash
/// (8). Half the bytes of whole fields, written and read back once each.
#[derive(Debug)]
pub(super) struct Checked {
    file: File,
    hosted: bool,
}

/// A half of a row's word whose figure follows whole.
const ESCAPE: u32 = u32::MAX;
/// The most bytes one row takes.
const MOST_ROW: usize = 8 + 8 + 9 + 8;

/// The word's low half for a step from the last time, if it fits.
#[inline(always)]
fn step_half(step: u64) -> Option<u32> {
    u32::try_from(step).ok().filter(|&s| s != ESCAPE)
}

/// The word's high half for a client and the log's verdict, if it fits.
#[inline(always)]
fn client_half(client: u64, verdict: u8) -> Option<u32> {
    let client = u32::try_from(client).ok().filter(|&c| c < ESCAPE >> 2)?;
    Some(client << 2 | u32::from(verdict & 3))
}

/// A row's word from its halves, [`ESCAPE`] for one that does not fit.
#[inline(always)]
fn word(step: Option<u32>, client: Option<u32>) -> u64 {
    u64::from(step.unwrap_or(ESCAPE)) | u64::from(client.unwrap_or(ESCAPE)) << 32
}

/// Writing the checked rows while the check reads them; given up (the
/// replay reads the file again) when they outgrow [`CHECKED_BYTES`] or the
/// temporary file cannot be written.
pub(super) struct CheckedWriter {
    out: Option<BufWriter<File>>,
    hosted: bool,
    written: u64,
    /// The last row's time.
    last: u64,
}

impl CheckedWriter {
    /// Keeping the rows if `keep`, and unless the environment says
    /// `BURSTSIM_KEEP_ROWS=0` (a test hook: every trace is then replayed
    /// from its file, as one past [`CHECKED_BYTES`] is).
    pub(super) fn new(hosted: bool, keep: bool) -> CheckedWriter {
        let hook = std::env::var_os("BURSTSIM_KEEP_ROWS").is_some_and(|v| v == "0");
        CheckedWriter {
            out: (keep && !hook)
                .then(tempfile::tempfile)
                .and_then(Result::ok)
                .map(|file| BufWriter::with_capacity(1 << 15, file)),
            hosted,
            written: 0,
            last: 0,
        }
    }

    #[inline(always)]
    pub(super) fn row(&mut self, time: u64, client: u64, host: u64, verdict: u8) {
        let Some(out) = &mut self.out else {
            return;
        };
        let step = time.wrapping_sub(self.last);
        self.last = time;
        let (len, written) = match (step_half(step), client_half(client, verdict)) {
            // A constant length: the copy is one move, not a call to `memcpy`.
            (Some(step), Some(small)) if !self.hosted => (
                8,
                out.write_all(&word(Some(step), Some(small)).to_le_bytes()),
            ),
            (step, small) => Self::whole(out, [step, small], time, client, host, verdict, self.hosted),
        };
        self.written += len as u64;
        if self.written > CHECKED_BYTES || written.is_err() {
            self.out = None;
        }
    }

    /// A row with a Host, or with a field that does not fit its word.
    #[cold]
    fn whole(
        out: &mut BufWriter<File>,
        [step, small]: [Option<u32>; 2],
        time: u64,
        client: u64,
        host: u64,
        verdict: u8,
        hosted: bool,
    ) -> (usize, std::io::Result<()>) {
        let mut row = [0u8; MOST_ROW];
        row[..8].copy_from_slice(&word(step, small).to_le_bytes());
        let mut len = 8;
        let mut put = |bytes: &[u8]| {
            row[len..len + bytes.len()].copy_from_slice(bytes);
            len += bytes.len();
        };
        if step.is_none() {
            put(&time.to_le_bytes());
        }
        if small.is_none() {
            put(&client.to_le_bytes());
            put(&[verdict]);
        }
        if hosted {
            put(&host.to_le_bytes());
        }
        (len, out.write_all(&row[..len]))
    }

    /// The rows, unless given up.
    pub(super) fn finish(self) -> Option<Arc<Checked>> {
        let file = self.out?.into_inner().ok()?;
        Some(Arc::new(Checked {
            file,
            hosted: self.hosted,
        }))
    }
}

/// Reading the checked rows back, at an offset of its own (replays may
/// read them side by side).
pub(super) struct CheckedRows {
    checked: Arc<Checked>,
    at: u64,
    buffer: Vec<u8>,
    /// Unread bytes of `buffer`, from `next`.
    next: usize,
    filled: usize,
    /// Yield the log's verdict as the key (see [`Config::verdicts`]).
    verdicts: bool,
    /// The last row's time.
    last: u64,
}

impl CheckedRows {
    pub(super) fn new(checked: Arc<Checked>, verdicts: bool) -> CheckedRows {
        CheckedRows {
            checked,
            at: 0,
            buffer: vec![0; 1 << 16],
            next: 0,
            filled: 0,
            verdicts,
            last: 0,
        }
    }

    /// The next row as the replay yields it.
    #[inline]
    pub(super) fn next_row(&mut self) -> std::io::Result<Option<(u64, Key)>> {
        if self.filled - self.next < MOST_ROW {
            self.fill()?;
            if self.filled == self.next {
                return Ok(None);
            }
        }
        let word = self.take(8)?;
        let (step, small) = (word as u32, (word >> 32) as u32);
        if step != ESCAPE && small != ESCAPE && !self.checked.hosted {
            // The usual row: the word alone.
            self.last = self.last.wrapping_add(u64::from(step));
            let client = if self.verdicts { small & 3 } else { small >> 2 };
            return Ok(Some((self.last, Key::client(u64::from(client)))));
        }
        let time = if step == ESCAPE {
            self.take(8)?
        } else {
            self.last.wrapping_add(u64::from(step))
        };
        self.last = time;
        let (client, verdict) = if small == ESCAPE {
            let client = self.take(8)?;
            (client, self.take(1)? as u8)
        } else {
            (u64::from(small >> 2), (small & 3) as u8)
        };
        let host = if self.checked.hosted { self.take(8)? } else { 0 };
        let key = if self.verdicts {
            Key::client(u64::from(verdict))
        } else {
            Key { client, host }
        };
        Ok(Some((time, key)))
    }

    /// Replaces what `out` holds with up to `count` rows as arrivals, each
    /// time shifted by `offset` (clamped to u64), those before `start`
    /// passed over, as [`Arrivals`]'s iterator yields them — in one loop,
    /// without its per-row dispatch. Whether the rows ended: at their end,
    /// or at the first at or past `end` (the rows are in time order).
    #[inline]
    pub(super) fn fill_arrivals<T: Timed>(
        &mut self,
        out: &mut Vec<T>,
        count: usize,
        offset: i128,
        [start, end]: [u64; 2],
    ) -> std::io::Result<bool> {
        out.clear();
        while out.len() < count {
            let Some((raw, key)) = self.next_row()? else {
                return Ok(true);
            };
            let time = shifted(raw, offset);
            if time >= end {
                return Ok(true);
            }
            if time >= start {
                out.push(T::of(Arrival {
                    time: Nanos(time),
                    key,
                }));
            }
        }
        Ok(false)
    }

    /// The next `len` (1 or 8) bytes as a little-endian number.
    #[inline(always)]
    fn take(&mut self, len: usize) -> std::io::Result<u64> {
        let end = self.next + len;
        if end > self.filled {
            return Err(std::io::Error::other("the checked rows end within a row"));
        }
        let mut word = [0u8; 8];
        word[..len].copy_from_slice(&self.buffer[self.next..end]);
        self.next = end;
        Ok(u64::from_le_bytes(word))
    }

    /// Moves the unread bytes to the front and reads on until a whole row
    /// of the longest kind is in, or the rows end.
    #[cold]
    fn fill(&mut self) -> std::io::Result<()> {
        self.buffer.copy_within(self.next..self.filled, 0);
        self.filled -= self.next;
        self.next = 0;
        while self.filled < MOST_ROW {
            let n = read_at(&self.checked.file, &mut self.buffer[self.filled..], self.at)?;
            if n == 0 {
                break;
            }
            self.at += n as u64;
            self.filled += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rows written and read back, as the replay reads them.
    fn round_trip(rows: &[(u64, u64, u64, u8)], hosted: bool, verdicts: bool) -> Vec<(u64, Key)> {
        let mut writer = CheckedWriter::new(hosted, true);
        for &(time, client, host, verdict) in rows {
            writer.row(time, client, host, verdict);
        }
        let mut read = CheckedRows::new(writer.finish().expect("rows kept"), verdicts);
        std::iter::from_fn(|| read.next_row().expect("every row whole")).collect()
    }

    /// A row's fields: times anywhere, often close to the last (a sorted
    /// log's steps) and at u64's ends; clients small (numbered) or any
    /// hash, the edges of the word's 30 bits included.
    fn rows() -> impl Strategy<Value = Vec<(u64, u64, u64, u8)>> {
        let time = prop_oneof![
            0..4_000_000_000u64,
            Just(u64::MAX),
            Just(u64::MAX - 1),
            Just(u64::from(u32::MAX)),
            Just(u64::from(u32::MAX) - 1),
            any::<u64>(),
        ];
        let client = prop_oneof![
            0..2_000u64,
            (1u64 << 30) - 3..(1u64 << 30) + 3,
            Just(u64::from(u32::MAX)),
            any::<u64>(),
        ];
        prop::collection::vec((time, client, any::<u64>(), 0..3u8), 0..300)
    }

    proptest! {
        /// Every row comes back as written: its time, its client (or, for
        /// the log's verdicts, its verdict) and its Host, whatever fits the
        /// word and whatever does not.
        #[test]
        fn every_row_comes_back_as_written(rows in rows(), hosted: bool, verdicts: bool) {
            let sorted: Vec<_> = {
                // Sorted rows too: a sorted log's steps are small.
                let mut sorted = rows.clone();
                sorted.sort_by_key(|row| row.0);
                sorted
            };
            for rows in [rows, sorted] {
                let expected: Vec<(u64, Key)> = rows
                    .iter()
                    .map(|&(time, client, host, verdict)| {
                        let key = if verdicts {
                            Key::client(u64::from(verdict))
                        } else {
                            Key { client, host: if hosted { host } else { 0 } }
                        };
                        (time, key)
                    })
                    .collect();
                prop_assert_eq!(round_trip(&rows, hosted, verdicts), expected);
            }
        }
    }

    #[test]
    fn a_numbered_sorted_rows_word_is_8_bytes_and_a_cut_row_is_an_error() {
        let mut writer = CheckedWriter::new(false, true);
        // The first time's step from 0 does not fit: 8 + 8 bytes.
        writer.row(1_700_000_000_000_000_000, 7, 0, 1);
        writer.row(1_700_000_001_000_000_000, 8, 0, 2);
        assert_eq!(writer.written, 16 + 8);
        let checked = writer.finish().unwrap();
        assert_eq!(checked.file.metadata().unwrap().len(), 24);
        // Cut within the second row's word.
        checked.file.set_len(20).unwrap();
        let mut read = CheckedRows::new(checked, false);
        assert_eq!(
            read.next_row().unwrap(),
            Some((1_700_000_000_000_000_000, Key::client(7)))
        );
        let err = read.next_row().unwrap_err();
        assert!(err.to_string().contains("end within a row"), "{err}");
    }
}
