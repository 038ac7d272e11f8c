//! A scenario's traffic split by key into parts that separate machines can
//! replay: every workload's arrivals, exactly as a run of the scenario makes
//! them (rebased, spread and numbered as a run does, one replication), each
//! sent to the part its key hashes to. A limiter kept per key sees in a part
//! exactly the requests of its keys it sees in the whole, so its decisions
//! there are the whole run's.
//!
//! On disk, `DIR/partition.json` says what was split and how; `DIR/I/`
//! holds part `I`: its `part.json` (the same identity, its index, its rows)
//! and a gzipped `wN.rows` per workload: one record per arrival, in time
//! order, of LEB128 varints — the time since the previous record of the
//! part, the arrival's place in the whole workload less the previous
//! record's less one, its client and its Host.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::time::Nanos;
use crate::traffic::{Arrival, Key};

/// The most parts of one partitioning: each open part holds a compressor
/// (under 400 KiB) while the traffic streams through.
pub const MAX_PARTS: u64 = 256;

/// What `partition.json` and every `part.json` say, and what the
/// partitioning's format is.
pub const FORMAT: &str = "burstsim-partition 2";

/// What a partitioning is: two parts of one partitioning say the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// [`FORMAT`].
    pub format: String,
    /// The scenario's name.
    pub scenario: String,
    /// A fingerprint of the scenario file's text.
    pub scenario_hash: String,
    /// The seed its arrivals were drawn with.
    pub seed: u64,
    /// The burstsim version that split it.
    pub burstsim: String,
    /// How many parts.
    pub parts: u64,
    /// What a part is chosen by: `"client"` or `"host"`.
    pub by: By,
    /// Each workload's arrivals, whole.
    pub workloads: Vec<Stream>,
}

/// What `DIR/partition.json` says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partitioning {
    /// What was split.
    pub identity: Identity,
    /// The scenario file as it was given, and its text: a merge reads no
    /// other copy.
    pub scenario_file: String,
    /// The scenario file's text.
    pub text: String,
    /// Per workload, what its log says as a whole.
    pub logs: Vec<LogFacts>,
    /// Where each slice of time but the last ends: an edge of every global
    /// fixed window's (empty when no limiter is global).
    pub cuts: Vec<u64>,
}

/// The slice of time `time` falls in, of those `cuts` end.
pub fn slice_of(cuts: &[u64], time: Nanos) -> usize {
    cuts.partition_point(|&cut| cut <= time.get())
}

/// A workload's whole arrival stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stream {
    /// The workload's name.
    pub name: String,
    /// Its arrivals.
    pub rows: u64,
    /// A fingerprint (xxh3) of every arrival's time, client and Host, in order.
    pub hash: String,
}

/// What a part is chosen by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    /// The client key (`per = "key"` limiters).
    Client,
    /// The Host (`per = "host"` limiters).
    Host,
}

impl By {
    /// As `partition.json` writes it.
    pub fn name(self) -> &'static str {
        match self {
            By::Client => "client",
            By::Host => "host",
        }
    }

    /// The part `key` goes to, of `parts`.
    pub fn part(self, key: Key, parts: u64) -> u64 {
        let id = match self {
            By::Client => key.client,
            By::Host => key.host,
        };
        crate::random::mix(id) % parts
    }
}

/// What `DIR/I/part.json` says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartFile {
    /// The partitioning it belongs to.
    pub identity: Identity,
    /// Which part, from 0.
    pub index: u64,
    /// Per workload: its arrivals in this part, and a fingerprint (xxh3) of
    /// the records as stored, compressed.
    pub files: Vec<PartStream>,
    /// Per workload: the clients of its arrivals in this part (`rows`
    /// counts them), and the fingerprint of their file.
    pub keys: Vec<PartStream>,
    /// Per workload: its arrivals in this part's slice of time, every
    /// key's (none when no limiter is global).
    pub slices: Vec<PartStream>,
}

/// The file of workload `w`'s arrivals in a part's slice of time.
pub fn slice_file(w: usize) -> String {
    format!("w{w}.slice")
}

/// What the results say of a client of a part, as the whole run says it:
/// its key as it streams, its value (a trace's numbered key's hash) and its
/// name as the input writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFact {
    /// The client as it streams.
    pub id: u64,
    /// As the results show it.
    pub value: u64,
    /// As the input names it, for the first keys of a trace.
    pub name: Option<String>,
}

/// The file of workload `w`'s clients in a part's folder.
pub fn keys_file(w: usize) -> String {
    format!("w{w}.keys")
}

/// Writes a part's clients of one workload: per client, varints of its id,
/// its value and its name's length plus one (0 for none), then the name.
pub struct KeysWriter<W: Write> {
    out: Records<W>,
}

impl<W: Write> KeysWriter<W> {
    /// Clients go to `out`, gzipped.
    pub fn new(out: W) -> KeysWriter<W> {
        KeysWriter {
            out: Records::new(out),
        }
    }

    /// Appends `fact`.
    pub fn push(&mut self, fact: &KeyFact) -> std::io::Result<()> {
        let mut head = [0u8; 30];
        let name = fact.name.as_deref().map(str::as_bytes);
        let mut len = 0;
        for value in [fact.id, fact.value, name.map_or(0, |n| n.len() as u64 + 1)] {
            len += put_varint(&mut head[len..], value);
        }
        self.out.push(&[&head[..len], name.unwrap_or_default()])
    }

    /// Finishes the file: its count and fingerprint, and the writer back.
    pub fn finish(self) -> std::io::Result<(PartStream, W)> {
        self.out.finish()
    }
}

/// The most bytes of a client's name in a part (64 characters of UTF-8).
const MAX_NAME_BYTES: u64 = 256;

/// Reads a part's clients of one workload, checked against `expected`.
pub fn read_keys(path: &Path, expected: &PartStream) -> Result<Vec<KeyFact>, String> {
    let broken = |what: &str| format!("{}: {what}", path.display());
    if expected.rows > crate::traffic::trace::MAX_KEYS {
        return Err(broken(&format!(
            "its part.json says {} clients, past the {} keys a workload may name",
            expected.rows,
            crate::traffic::trace::MAX_KEYS
        )));
    }
    let file = std::fs::File::open(path).map_err(|err| broken(&format!("cannot open: {err}")))?;
    let mut hashing = HashingReader {
        inner: BufReader::new(file),
        hasher: xxhash_rust::xxh3::Xxh3::new(),
    };
    let mut text = Vec::new();
    // At most the keys a workload may name, each at most its three varints and its name.
    let most = expected.rows.saturating_mul(30 + MAX_NAME_BYTES);
    flate2::read::GzDecoder::new(&mut hashing)
        .take(most + 1)
        .read_to_end(&mut text)
        .map_err(|err| broken(&err.to_string()))?;
    if text.len() as u64 > most {
        return Err(broken("longer than its part.json allows"));
    }
    std::io::copy(&mut hashing, &mut std::io::sink()).map_err(|err| broken(&err.to_string()))?;
    let hash = hex(hashing.hasher.digest());
    if hash != expected.hash {
        return Err(broken(&format!(
            "fingerprint {hash} where its part.json says {}: not the file written with it",
            expected.hash
        )));
    }
    let mut at = 0;
    let varint = |at: &mut usize| -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *text
                .get(*at)
                .ok_or_else(|| broken("cut short inside a record"))?;
            *at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(broken("a number past the end of u64"))
    };
    let mut facts = Vec::new();
    while at < text.len() {
        let (id, value, len) = (varint(&mut at)?, varint(&mut at)?, varint(&mut at)?);
        let name = match len {
            0 => None,
            n if n - 1 > MAX_NAME_BYTES => return Err(broken("a name longer than 64 characters")),
            n => {
                let end = at + (n - 1) as usize;
                let bytes = text
                    .get(at..end)
                    .ok_or_else(|| broken("cut short inside a name"))?;
                at = end;
                Some(
                    String::from_utf8(bytes.to_vec())
                        .map_err(|_| broken("a name that is not UTF-8"))?,
                )
            }
        };
        facts.push(KeyFact { id, value, name });
    }
    if facts.len() as u64 != expected.rows {
        return Err(broken(&format!(
            "{} clients where its part.json says {}",
            facts.len(),
            expected.rows
        )));
    }
    Ok(facts)
}

/// One workload's records in one part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartStream {
    /// Arrivals.
    pub rows: u64,
    /// xxh3 of the file's bytes.
    pub hash: String,
}

/// A part a run replays: its folder, what its part.json says, and its
/// clients per workload.
#[derive(Clone, Debug)]
pub struct Replayed {
    /// `DIR/I`.
    pub dir: PathBuf,
    /// Its part.json.
    pub file: PartFile,
    /// Per workload, its clients in this part.
    pub clients: Vec<Vec<KeyFact>>,
    /// Per workload, what its log says as a whole: for a merge of every
    /// part (a part alone leaves these out).
    pub logs: Vec<LogFacts>,
}

/// What a workload's log says as a whole, which no part can: kept in
/// `partition.json` for the merge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogFacts {
    /// Distinct keys of the whole workload.
    pub keys: u64,
    /// Requests its own limiter turned away, when it logs statuses.
    pub turned_away: Option<u64>,
    /// For whole seconds: its busiest labelled second, and busiest two.
    pub labelled: Option<[u64; 2]>,
    /// Whether a run also decides its requests packed against its seconds' edges.
    pub packed: bool,
    /// Where its whole seconds start, when a run packs them: shards and
    /// merge pack at the same instants.
    pub origin: Option<u64>,
    /// Its distinct keys that name nothing, absent (`-`) and blank, which
    /// a gateway may leave unlimited ([`crate::limiter::Limiter::treat_empty_keys`]):
    /// counted in `keys`, then never given a state.
    #[serde(default)]
    pub absent: u64,
    /// See `absent`.
    #[serde(default)]
    pub blank: u64,
}

impl Replayed {
    /// Part `dir` as its part.json `file` says, its clients read.
    pub fn open(dir: &Path, file: PartFile) -> Result<Replayed, String> {
        if file.keys.len() != file.files.len() {
            return Err(format!(
                "{}: part.json names {} files of arrivals and {} of clients",
                dir.display(),
                file.files.len(),
                file.keys.len()
            ));
        }
        let clients = file
            .keys
            .iter()
            .enumerate()
            .map(|(w, expected)| read_keys(&dir.join(keys_file(w)), expected))
            .collect::<Result<_, _>>()?;
        Ok(Replayed {
            dir: dir.to_owned(),
            file,
            clients,
            logs: Vec::new(),
        })
    }

    /// Workload `w`'s arrivals in this part and its clients, if it has it.
    pub fn workload(&self, w: usize) -> Option<(u64, &[KeyFact])> {
        Some((self.file.files.get(w)?.rows, self.clients.get(w)?))
    }

    /// The arrivals of workload `w` in this part's slice of time.
    pub fn slice(&self, w: usize) -> Result<PartReader, String> {
        let expected = self.file.slices.get(w).cloned().ok_or_else(|| {
            format!(
                "{}: no slice of time of workload {w} in this part",
                self.dir.display()
            )
        })?;
        PartReader::open(&self.dir.join(slice_file(w)), expected)
    }

    /// The arrivals of workload `w` in this part; `keys` says which of
    /// client and Host the workload names (a record naming another is an
    /// error: the run keeps only those).
    pub fn arrivals(&self, w: usize, keys: [bool; 2]) -> Result<PartReader, String> {
        let expected = self
            .file
            .files
            .get(w)
            .cloned()
            .ok_or_else(|| format!("{}: no workload {w} in this part", self.dir.display()))?;
        let mut reader = PartReader::open(&self.dir.join(rows_file(w)), expected)?;
        reader.keys = keys;
        Ok(reader)
    }
}

/// The file of workload `w` in a part's folder.
pub fn rows_file(w: usize) -> String {
    format!("w{w}.rows")
}

/// A fingerprint as the partition files write it.
fn hex(hash: u64) -> String {
    format!("{hash:016x}")
}

/// Writes one part's records of one workload, counting and hashing them.
pub struct PartWriter<W: Write> {
    out: Records<W>,
    previous: (u64, u64),
}

impl<W: Write> PartWriter<W> {
    /// Records go to `out`, gzipped.
    pub fn new(out: W) -> PartWriter<W> {
        PartWriter {
            out: Records::new(out),
            previous: (0, 0),
        }
    }

    /// Appends the arrival at place `seq` of its workload (both after the previous's).
    pub fn push(&mut self, arrival: Arrival, seq: u64) -> std::io::Result<()> {
        let (time, last) = self.previous;
        let at = arrival.time.get();
        let gap = if self.out.rows == 0 {
            seq
        } else {
            seq - last - 1
        };
        let mut record = [0u8; 40];
        let mut len = 0;
        for value in [at - time, gap, arrival.key.client, arrival.key.host] {
            len += put_varint(&mut record[len..], value);
        }
        self.out.push(&[&record[..len]])?;
        self.previous = (at, seq);
        Ok(())
    }

    /// Finishes the file: its rows and fingerprint, and the writer back.
    pub fn finish(self) -> std::io::Result<(PartStream, W)> {
        self.out.finish()
    }
}

/// A gzipped file of records, counted and hashed as written: what every
/// file of a partitioning or a shard is.
pub(crate) struct Records<W: Write> {
    out: flate2::write::GzEncoder<HashingWriter<W>>,
    rows: u64,
}

impl<W: Write> Records<W> {
    /// Records go to `out`, gzipped (fast).
    pub(crate) fn new(out: W) -> Records<W> {
        Records {
            out: flate2::write::GzEncoder::new(
                HashingWriter {
                    inner: out,
                    hasher: xxhash_rust::xxh3::Xxh3::new(),
                },
                flate2::Compression::fast(),
            ),
            rows: 0,
        }
    }

    /// Appends one record, written in `pieces`.
    pub(crate) fn push(&mut self, pieces: &[&[u8]]) -> std::io::Result<()> {
        for piece in pieces {
            self.out.write_all(piece)?;
        }
        self.rows += 1;
        Ok(())
    }

    /// Finishes the file: its records and fingerprint, and the writer back.
    pub(crate) fn finish(self) -> std::io::Result<(PartStream, W)> {
        let hashing = self.out.finish()?;
        Ok((
            PartStream {
                rows: self.rows,
                hash: hex(hashing.hasher.digest()),
            },
            hashing.inner,
        ))
    }
}

/// A writer that hashes what it passes on.
struct HashingWriter<W> {
    inner: W,
    hasher: xxhash_rust::xxh3::Xxh3,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(bytes)?;
        self.hasher.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that hashes what it reads.
struct HashingReader<R> {
    inner: R,
    hasher: xxhash_rust::xxh3::Xxh3,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.hasher.update(&buffer[..read]);
        Ok(read)
    }
}

/// Writes `value` as a LEB128 varint at the start of `out`; its length.
fn put_varint(out: &mut [u8], mut value: u64) -> usize {
    let mut len = 0;
    while value >= 0x80 {
        out[len] = (value as u8) | 0x80;
        value >>= 7;
        len += 1;
    }
    out[len] = value as u8;
    len + 1
}

/// The hash of a whole workload's arrival stream, fed an arrival at a time.
#[derive(Default)]
pub struct StreamHash(xxhash_rust::xxh3::Xxh3);

impl StreamHash {
    /// Adds `arrival`.
    pub fn push(&mut self, arrival: Arrival) {
        let mut bytes = [0u8; 24];
        bytes[..8].copy_from_slice(&arrival.time.get().to_le_bytes());
        bytes[8..16].copy_from_slice(&arrival.key.client.to_le_bytes());
        bytes[16..].copy_from_slice(&arrival.key.host.to_le_bytes());
        self.0.update(&bytes);
    }

    /// The fingerprint, as the files write it.
    pub fn finish(&self) -> String {
        hex(self.0.digest())
    }
}

mod read;
pub use self::read::{CodesReader, PartReader};
mod codes;
pub mod shard;
mod slices;
pub use self::codes::{Code, CodesWriter};
pub use self::slices::cuts;

#[cfg(test)]
mod tests;
