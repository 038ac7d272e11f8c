//! Reading back what partitions and shards store: a part's arrivals, and a
//! shard's decisions. Either file is checked as it streams against what its
//! json says — its records and the fingerprint of its bytes — and one that
//! is not (cut short, corrupt, another part's, longer) is an error naming it.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::{Code, HashingReader, PartStream, hex};
use crate::time::Nanos;
use crate::traffic::{Arrival, Key};

/// A gzipped file of varints, counted and hashed as it is read.
struct Stored {
    input: BufReader<flate2::read::GzDecoder<HashingReader<BufReader<std::fs::File>>>>,
    path: PathBuf,
    expected: PartStream,
    rows: u64,
    /// The json that describes it: `part.json` or `shard.json`.
    json: &'static str,
}

impl Stored {
    fn open(
        path: &Path,
        expected: PartStream,
        buffer: usize,
        json: &'static str,
    ) -> Result<Stored, String> {
        let file = std::fs::File::open(path)
            .map_err(|err| format!("{}: cannot open: {err}", path.display()))?;
        Ok(Stored {
            input: BufReader::with_capacity(
                buffer,
                flate2::read::GzDecoder::new(HashingReader {
                    inner: BufReader::with_capacity(buffer, file),
                    hasher: xxhash_rust::xxh3::Xxh3::new(),
                }),
            ),
            path: path.to_owned(),
            expected,
            rows: 0,
            json,
        })
    }

    /// A varint; `None` at the end of the file where `may_end`.
    fn varint(&mut self, may_end: bool) -> Result<Option<u64>, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let mut byte = [0u8];
            match self.input.read(&mut byte) {
                Ok(0) if shift == 0 && may_end => return Ok(None),
                Ok(0) => return Err(self.broken("cut short inside a record")),
                Ok(_) => {}
                Err(err) => return Err(self.broken(&err.to_string())),
            }
            let bits = u64::from(byte[0] & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(self.broken("a number past the end of u64"));
            }
            value |= bits << shift;
            if byte[0] & 0x80 == 0 {
                return Ok(Some(value));
            }
        }
        Err(self.broken("a number past the end of u64"))
    }

    /// Counts a record read, refusing one past what its json says.
    fn counted(&mut self) -> Result<(), String> {
        self.rows += 1;
        if self.rows > self.expected.rows {
            return Err(self.broken(&format!(
                "more than the {} records its {} says",
                self.expected.rows, self.json
            )));
        }
        Ok(())
    }

    /// Checks, at a clean end, that the file is the one its json names.
    fn end(&mut self) -> Result<(), String> {
        if self.rows != self.expected.rows {
            return Err(self.broken(&format!(
                "{} records where its {} says {}",
                self.rows, self.json, self.expected.rows
            )));
        }
        // The hash covers every stored byte, the gzip trailer included.
        let mut rest = Vec::new();
        self.input
            .get_mut()
            .get_mut()
            .inner
            .read_to_end(&mut rest)
            .map_err(|err| self.broken(&err.to_string()))?;
        let hashing = self.input.get_mut().get_mut();
        hashing.hasher.update(&rest);
        let hash = hex(hashing.hasher.digest());
        if hash != self.expected.hash {
            return Err(self.broken(&format!(
                "fingerprint {hash} where its {} says {}: not the file written with it",
                self.json, self.expected.hash
            )));
        }
        Ok(())
    }

    /// The message for a file that is not what its json says.
    fn broken(&self, what: &str) -> String {
        format!("{}: {what}", self.path.display())
    }
}

/// One part's records of one workload, read back: arrivals and their places
/// in the whole workload. A file that is not what its `part.json` says —
/// cut short, corrupt, another part's, or longer — ends the stream with an
/// error naming it ([`PartReader::take_error`]).
pub struct PartReader {
    stored: Stored,
    previous: (u64, u64),
    error: Option<String>,
    /// Whether its workload names clients, and Hosts.
    pub(super) keys: [bool; 2],
}

impl std::fmt::Debug for PartReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PartReader({})", self.stored.path.display())
    }
}

impl PartReader {
    /// Reads `path`, which `part.json` says is `expected`.
    pub fn open(path: &Path, expected: PartStream) -> Result<PartReader, String> {
        Ok(PartReader {
            stored: Stored::open(path, expected, 1 << 16, "part.json")?,
            previous: (0, 0),
            error: None,
            keys: [true; 2],
        })
    }

    /// Which of client and Host its workload names (a record naming
    /// another is an error).
    pub fn set_keys(&mut self, keys: [bool; 2]) {
        self.keys = keys;
    }

    /// Why the stream ended early, if it did.
    pub fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    /// The next arrival and its place, or `Ok(None)` at a clean end.
    fn record(&mut self) -> Result<Option<(Arrival, u64)>, String> {
        let Some(gap) = self.stored.varint(true)? else {
            return self.stored.end().map(|()| None);
        };
        let [skip, client, host] = [0; 3].map(|_| self.stored.varint(false));
        let (skip, client, host) = (skip?, client?, host?);
        let (skip, client, host) = (skip.unwrap_or(0), client.unwrap_or(0), host.unwrap_or(0));
        let (time, last) = self.previous;
        let at = time
            .checked_add(gap)
            .ok_or_else(|| self.broken("a time past the end of u64"))?;
        let seq = if self.stored.rows == 0 {
            Some(skip)
        } else {
            last.checked_add(skip).and_then(|s| s.checked_add(1))
        }
        .ok_or_else(|| self.broken("a place past the end of u64"))?;
        for (named, id, what) in [
            (self.keys[0], client, "client"),
            (self.keys[1], host, "Host"),
        ] {
            if !named && id != 0 {
                return Err(self.broken(&format!(
                    "a record names a {what}, and its workload names none"
                )));
            }
        }
        self.previous = (at, seq);
        self.stored.counted()?;
        Ok(Some((
            Arrival {
                time: Nanos(at),
                key: Key { client, host },
            },
            seq,
        )))
    }

    fn broken(&self, what: &str) -> String {
        self.stored.broken(what)
    }
}

impl Iterator for PartReader {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        if self.error.is_some() {
            return None;
        }
        match self.record() {
            Ok(next) => next.map(|(arrival, _)| arrival),
            Err(message) => {
                self.error = Some(message);
                None
            }
        }
    }
}

impl PartReader {
    /// The next arrival with its place in the whole workload.
    pub fn next_with_place(&mut self) -> Option<(Arrival, u64)> {
        if self.error.is_some() {
            return None;
        }
        self.record().unwrap_or_else(|message| {
            self.error = Some(message);
            None
        })
    }
}

/// A shard's decisions of one limiter, read back in order.
pub struct CodesReader {
    stored: Stored,
}

impl CodesReader {
    /// Reads `path`, which its shard.json says is `expected`: a small
    /// buffer, as a merge holds one per shard, limiter and placement.
    pub fn open(path: &Path, expected: PartStream) -> Result<CodesReader, String> {
        Ok(CodesReader {
            stored: Stored::open(path, expected, 1 << 13, "shard.json")?,
        })
    }

    /// The next decision; an error past the last its json says.
    pub fn next_code(&mut self) -> Result<Code, String> {
        let Some(value) = self.stored.varint(true)? else {
            return Err(self.stored.broken(&format!(
                "{} decisions, and the stream it decides goes on",
                self.stored.rows
            )));
        };
        self.stored.counted()?;
        Ok(Code::from_varint(value))
    }

    /// Checks that every decision was read and the file is the one its
    /// json names.
    pub fn finish(&mut self) -> Result<(), String> {
        if self.stored.varint(true)?.is_some() {
            return Err(self.stored.broken(&format!(
                "more than the {} decisions of the stream it decides",
                self.stored.rows
            )));
        }
        self.stored.end()
    }
}
