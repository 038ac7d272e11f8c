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

/// The most bytes of checked rows kept (about 60 million rows): a longer
/// trace is read from its file again for each replay instead.
pub(super) const CHECKED_BYTES: u64 = 1 << 30;

/// The checked rows: per row its time (8 bytes), its client (8: its number
/// when the keys are numbered, else its hash), its Host's hash when the
/// trace names Hosts (8), and the log's own verdict (1: 0 unknown, 1 let
/// through, 2 turned away).
#[derive(Debug)]
pub(super) struct Checked {
    file: File,
    hosted: bool,
}

impl Checked {
    /// Bytes of a row without a Host, and with one.
    const PLAIN: usize = 17;
    const HOSTED: usize = 25;

    fn row_bytes(hosted: bool) -> usize {
        if hosted { Self::HOSTED } else { Self::PLAIN }
    }
}

/// Writing the checked rows while the check reads them; given up (the
/// replay reads the file again) when they outgrow [`CHECKED_BYTES`] or the
/// temporary file cannot be written.
pub(super) struct CheckedWriter {
    out: Option<BufWriter<File>>,
    hosted: bool,
    written: u64,
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
        }
    }

    #[inline]
    pub(super) fn row(&mut self, time: u64, client: u64, host: u64, verdict: u8) {
        let Some(out) = &mut self.out else {
            return;
        };
        let mut row = [0u8; Checked::HOSTED];
        row[..8].copy_from_slice(&time.to_le_bytes());
        row[8..16].copy_from_slice(&client.to_le_bytes());
        row[16..24].copy_from_slice(&host.to_le_bytes());
        // Each length written as a constant: the copy is then two moves,
        // not a call to `memcpy` (8% of the counting thread).
        let (len, written) = if self.hosted {
            row[Checked::HOSTED - 1] = verdict;
            (Checked::HOSTED, out.write_all(&row[..Checked::HOSTED]))
        } else {
            row[Checked::PLAIN - 1] = verdict;
            (Checked::PLAIN, out.write_all(&row[..Checked::PLAIN]))
        };
        self.written += len as u64;
        if self.written > CHECKED_BYTES || written.is_err() {
            self.out = None;
        }
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
        }
    }

    /// The next row as the replay yields it.
    #[inline]
    pub(super) fn next_row(&mut self) -> std::io::Result<Option<(u64, Key)>> {
        let len = Checked::row_bytes(self.checked.hosted);
        if self.filled - self.next < len {
            self.buffer.copy_within(self.next..self.filled, 0);
            self.filled -= self.next;
            self.next = 0;
            // Whole rows only: the file holds nothing else.
            while self.filled < len {
                let n = read_at(&self.checked.file, &mut self.buffer[self.filled..], self.at)?;
                if n == 0 {
                    return if self.filled == 0 {
                        Ok(None)
                    } else {
                        Err(std::io::Error::other("the checked rows end within a row"))
                    };
                }
                self.at += n as u64;
                self.filled += n;
            }
        }
        let row = &self.buffer[self.next..self.next + len];
        self.next += len;
        let word = |at: usize| u64::from_le_bytes(row[at..at + 8].try_into().expect("8 bytes"));
        let time = word(0);
        let key = if self.verdicts {
            Key::client(u64::from(row[len - 1]))
        } else {
            Key {
                client: word(8),
                host: if self.checked.hosted { word(16) } else { 0 },
            }
        };
        Ok(Some((time, key)))
    }
}
