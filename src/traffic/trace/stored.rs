//! How a trace's bytes are stored and read: its file or the copy of
//! standard input, every stored byte hashed, gzip and zstd decompressed by
//! content, and the text capped per row.

use super::*;

/// Where a trace's bytes are: its file, or the copy of standard input (read
/// at an offset of its own, so runs may read it side by side).
pub(super) enum Stored {
    File(File),
    Spool { file: &'static File, at: u64 },
}

impl Stored {
    pub(super) fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        match self {
            Stored::File(file) => file.metadata(),
            Stored::Spool { file, .. } => file.metadata(),
        }
    }
}

impl Read for Stored {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stored::File(file) => file.read(buf),
            Stored::Spool { file, at } => {
                let n = read_at(file, buf, *at)?;
                *at += n as u64;
                Ok(n)
            }
        }
    }
}

/// Reads `file` from byte `at` without moving its shared offset, so
/// several readers can read one file side by side.
pub(super) fn read_at(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    return std::os::unix::fs::FileExt::read_at(file, buf, at);
    #[cfg(windows)]
    return std::os::windows::fs::FileExt::seek_read(file, buf, at);
}

/// Standard input, copied once to a file of its own that nothing else
/// names (removed by the system when burstsim exits): `path = "-"`.
pub(super) fn spooled_stdin() -> Result<&'static File, String> {
    static SPOOL: std::sync::OnceLock<Result<File, String>> = std::sync::OnceLock::new();
    SPOOL
        .get_or_init(|| {
            let mut file = tempfile::tempfile().map_err(|err| err.to_string())?;
            std::io::copy(&mut std::io::stdin().lock(), &mut file)
                .map_err(|err| err.to_string())?;
            Ok(file)
        })
        .as_ref()
        .map_err(|err| format!("cannot read standard input: {err}"))
}

/// The opened file, read no further than its length when opened, hashing
/// every byte it hands out (as stored: compressed, if it is) when asked to.
pub(super) struct Hashing {
    pub(super) file: std::io::Take<Stored>,
    hasher: Option<Box<xxhash_rust::xxh3::Xxh3Default>>,
}

impl Hashing {
    /// `file`, its bytes hashed as they are read if `hashed`.
    pub(super) fn new(file: std::io::Take<Stored>, hashed: bool) -> Hashing {
        Hashing {
            file,
            hasher: hashed.then(Box::default),
        }
    }

    /// The error of the file opened as `identity` when it is no longer
    /// that file (its metadata read now), else `None`.
    pub(super) fn change(&self, identity: FileIdentity, path: &Path) -> Option<String> {
        let now = self.now();
        (now != Some(identity))
            .then(|| super::input::changed(path, now.is_some_and(|now| now.grew_from(identity))))
    }

    /// The file's identity by its metadata read now.
    fn now(&self) -> Option<FileIdentity> {
        let now = self.file.get_ref().metadata();
        now.map(|meta| FileIdentity::of(&meta)).ok()
    }

    /// The hash of the bytes read so far, if they are hashed.
    pub(super) fn digest(&self) -> Option<u64> {
        self.hasher.as_ref().map(|hasher| hasher.digest())
    }
}

impl Read for Hashing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        if let Some(hasher) = &mut self.hasher {
            hasher.update(&buf[..n]);
        }
        Ok(n)
    }
}

/// The file's bytes as text: as stored, or decompressed when its first bytes
/// say it is gzip (one member or several, as `zcat` reads them) or zstd (one
/// frame or several) — by content, whatever its name.
pub(super) enum Decoded {
    Plain(BufReader<Hashing>),
    Gzip(Box<flate2::bufread::MultiGzDecoder<BufReader<Hashing>>>),
    Zstd(Box<Zstd>),
    /// Either of those, decompressed on a thread of its own.
    Threaded(Box<Threaded>),
}

/// Compressed files at least this large are decompressed on a second
/// thread when a second core is free.
const THREADED_FROM: u64 = 1 << 20;

/// gzip's first two bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// A zstd frame's first four bytes.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The largest zstd window accepted (zstd's own default limit for
/// decompression, `--long` aside): what one stream may hold in memory.
const ZSTD_MAX_WINDOW: u64 = 128 << 20;

impl Decoded {
    /// Whether a file starting with `head` is compressed (gzip or zstd).
    pub(super) fn is_compressed(head: &[u8]) -> bool {
        head.starts_with(&GZIP_MAGIC) || head.starts_with(&ZSTD_MAGIC)
    }

    /// Looks at the file's first bytes to tell how it is stored.
    /// A large compressed file is decompressed on a thread of its own
    /// while the rows are read on this one, when a core is free for it.
    pub(super) fn of(hashing: Hashing) -> std::io::Result<Decoded> {
        let len = hashing.file.limit();
        let mut raw = BufReader::with_capacity(BUFFER_BYTES, hashing);
        let head = raw.fill_buf()?;
        let decoded = if head.starts_with(&GZIP_MAGIC) {
            Decoded::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(raw)))
        } else if head.starts_with(&ZSTD_MAGIC) {
            Decoded::Zstd(Box::new(Zstd::new(raw)?))
        } else {
            return Ok(Decoded::Plain(raw));
        };
        Ok(
            if len >= THREADED_FROM && crate::cores::second_core_free() {
                Decoded::Threaded(Box::new(Threaded::spawn(decoded)))
            } else {
                decoded
            },
        )
    }

    /// The file underneath, hashing as it is read.
    pub(super) fn hashing(&mut self) -> &mut Hashing {
        match self {
            Decoded::Plain(raw) => raw.get_mut(),
            Decoded::Gzip(gzip) => gzip.get_mut().get_mut(),
            Decoded::Zstd(zstd) => zstd.frames().get_mut().get_mut(),
            Decoded::Threaded(threaded) => threaded.decoder().hashing(),
        }
    }
}

impl Read for Decoded {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Decoded::Plain(raw) => raw.read(buf),
            Decoded::Gzip(gzip) => gzip.read(buf),
            Decoded::Zstd(zstd) => zstd.read(buf),
            Decoded::Threaded(threaded) => threaded.read(buf),
        }
    }
}

/// A decoder reading on a thread of its own: what it decompresses comes
/// over a channel a few chunks deep (so it is never more than that ahead),
/// in order, its error in place. Dropped early, the thread stops at its
/// next chunk; at the end of the stream the decoder comes back, to hash
/// the rest of the file.
pub(super) struct Threaded {
    chunks: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    /// Chunks read, sent back to be filled again.
    spare: std::sync::mpsc::Sender<Vec<u8>>,
    chunk: Vec<u8>,
    /// How far `chunk` is read.
    at: usize,
    /// The thread, until its stream has ended; then the decoder.
    worker: Option<std::thread::JoinHandle<Decoded>>,
    decoder: Option<Decoded>,
}

/// Bytes decompressed at a time on the thread.
const THREADED_CHUNK: usize = 4 * BUFFER_BYTES;
/// Chunks decompressed ahead of the reader, at most.
const THREADED_AHEAD: usize = 4;

impl Threaded {
    fn spawn(mut decoder: Decoded) -> Threaded {
        let (send, chunks) = std::sync::mpsc::sync_channel(THREADED_AHEAD);
        let (spare, spares) = std::sync::mpsc::channel::<Vec<u8>>();
        let worker = std::thread::spawn(move || {
            loop {
                let mut chunk = spares.try_recv().unwrap_or_default();
                chunk.resize(THREADED_CHUNK, 0);
                let read = match decoder.read(&mut chunk) {
                    Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                    Ok(0) => return decoder,
                    Ok(n) => {
                        chunk.truncate(n);
                        Ok(chunk)
                    }
                    Err(err) => Err(err),
                };
                let failed = read.is_err();
                // A failed send: the reader is gone.
                if send.send(read).is_err() || failed {
                    return decoder;
                }
            }
        });
        Threaded {
            chunks,
            spare,
            chunk: Vec::new(),
            at: 0,
            worker: Some(worker),
            decoder: None,
        }
    }

    /// The decoder, once the stream is read to its end (what is left of
    /// it is read now, and dropped).
    fn decoder(&mut self) -> &mut Decoded {
        while self.worker.is_some() {
            if self.chunks.recv().is_err() {
                self.join();
            }
        }
        self.decoder
            .as_mut()
            .expect("the decompressing thread hands its decoder back")
    }

    /// Takes the decoder back from the thread, which has returned.
    fn join(&mut self) {
        if let Some(worker) = self.worker.take() {
            self.decoder = worker.join().ok();
        }
    }
}

impl Read for Threaded {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() && !buf.is_empty() {
            if self.worker.is_none() {
                return Ok(0);
            }
            match self.chunks.recv() {
                Ok(Ok(chunk)) => {
                    let read = std::mem::replace(&mut self.chunk, chunk);
                    self.at = 0;
                    let _ = self.spare.send(read);
                }
                Ok(Err(err)) => {
                    self.join();
                    return Err(err);
                }
                // The stream ended: the thread returned the decoder.
                Err(_) => self.join(),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Concatenated zstd frames (what `zstd -c a b` or `cat a.zst b.zst` make),
/// read one after the other.
pub(super) struct Zstd {
    /// Always there but while moving on to the next frame.
    frames: Option<Frames>,
}

type Frames =
    ruzstd::decoding::StreamingDecoder<BufReader<Hashing>, ruzstd::decoding::FrameDecoder>;

impl Zstd {
    fn new(raw: BufReader<Hashing>) -> std::io::Result<Zstd> {
        let frames =
            ruzstd::decoding::StreamingDecoder::new_with_max_window_size(raw, ZSTD_MAX_WINDOW)
                .map_err(std::io::Error::other)?;
        Ok(Zstd {
            frames: Some(frames),
        })
    }

    fn frames(&mut self) -> &mut Frames {
        self.frames.as_mut().expect("a zstd stream between frames")
    }
}

impl Read for Zstd {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.frames().read(buf)?;
            if n > 0 || buf.is_empty() || self.frames().get_mut().fill_buf()?.is_empty() {
                return Ok(n);
            }
            // A frame ended and more bytes follow: the next frame's header.
            let (source, decoder) = self.frames.take().expect("a zstd stream").into_parts();
            self.frames = Some(
                ruzstd::decoding::StreamingDecoder::new_with_decoder(source, decoder)
                    .map_err(std::io::Error::other)?,
            );
        }
    }
}

/// The text of the file, refusing to hand out more than a row's worth (and
/// the buffer) before the row is done: counted after decompression, so a
/// small compressed file cannot hold a row larger than that.
pub(super) struct Capped {
    pub(super) decoded: Decoded,
    /// Bytes handed out since the last row was done: at most the row and
    /// the buffer read ahead of it.
    pub(super) since_row: u64,
    /// Whether rows are capped (not while draining the rest for its hash).
    pub(super) capped: bool,
    /// Bytes handed out in all, the last of them, and whether a read found
    /// the end: so that a CSV record can be known to end the file unbroken
    /// ([`super::Input::unbroken`]).
    pub(super) handed: u64,
    pub(super) last: Option<u8>,
    pub(super) ended: bool,
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.decoded.read(buf)?;
        self.since_row += n as u64;
        self.handed += n as u64;
        match n.checked_sub(1) {
            Some(last) => self.last = Some(buf[last]),
            None => self.ended |= !buf.is_empty(),
        }
        if self.capped && self.since_row > MAX_ROW_BYTES + BUFFER_BYTES as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "a row longer than {MAX_ROW_BYTES} bytes (1 MiB), the most a trace's line or record may hold"
                ),
            ));
        }
        Ok(n)
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// `bytes` in an unnamed file, opened as a trace's file is.
    fn stored(bytes: &[u8]) -> Hashing {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        std::io::Seek::rewind(&mut file).unwrap();
        Hashing::new(Stored::File(file).take(bytes.len() as u64), true)
    }

    /// `text` gzipped, as two members when `split`.
    fn gzipped(text: &[u8], split: bool) -> Vec<u8> {
        let half = if split { text.len() / 2 } else { text.len() };
        let mut gz = Vec::new();
        for part in [&text[..half], &text[half..]] {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            encoder.write_all(part).unwrap();
            gz.extend(encoder.finish().unwrap());
        }
        gz
    }

    fn gzip(hashing: Hashing) -> Decoded {
        let raw = BufReader::with_capacity(BUFFER_BYTES, hashing);
        Decoded::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(raw)))
    }

    /// Reads `decoded` in reads of `step` bytes to its end or its error,
    /// then the rest of the file as the check does: the text, the error,
    /// and the whole file's hash.
    fn read_all(mut decoded: Decoded, step: usize) -> (Vec<u8>, Option<std::io::Error>, u64) {
        let mut text = Vec::new();
        let mut buf = vec![0; step];
        let error = loop {
            match decoded.read(&mut buf) {
                Ok(0) => break None,
                Ok(n) => text.extend_from_slice(&buf[..n]),
                Err(err) => break Some(err),
            }
        };
        std::io::copy(decoded.hashing(), &mut std::io::sink()).unwrap();
        (text, error, decoded.hashing().digest().expect("hashed"))
    }

    /// Several chunks' worth of lines, in one gzip member or two:
    /// decompressed on a thread, the same text and the same hash of every
    /// stored byte as on this one, whatever the reads' sizes.
    #[test]
    fn a_thread_decompresses_the_same_text_and_hashes_the_same_bytes() {
        let text: Vec<u8> = (0..60_000u32)
            .flat_map(|i| format!("{i},{:x}\n", i.wrapping_mul(2_654_435_761)).into_bytes())
            .collect();
        assert!(text.len() > 3 * THREADED_CHUNK, "{} bytes", text.len());
        for (split, step) in [(false, 1 << 16), (true, 7)] {
            let gz = gzipped(&text, split);
            let here = read_all(gzip(stored(&gz)), step);
            let threaded = Decoded::Threaded(Box::new(Threaded::spawn(gzip(stored(&gz)))));
            let there = read_all(threaded, step);
            assert_eq!((here.0 == text, here.1.is_none()), (true, true));
            assert!(there.0 == text, "split {split}, step {step}");
            assert!(there.1.is_none());
            assert_eq!(there.2, here.2, "the same bytes hashed");
        }
    }

    /// A stream broken part way gives its error in place, after the text
    /// before it; a reader that stops early does not wait for the thread.
    #[test]
    fn a_threaded_stream_s_error_comes_in_order_and_an_early_stop_does_not_hang() {
        let text: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("{:x}\n", i.wrapping_mul(2_654_435_761)).into_bytes())
            .collect();
        let mut gz = gzipped(&text, false);
        let middle = gz.len() / 2;
        gz[middle..middle + 64].fill(0xff);
        let here = read_all(gzip(stored(&gz)), 1 << 16);
        let there = read_all(
            Decoded::Threaded(Box::new(Threaded::spawn(gzip(stored(&gz))))),
            1 << 16,
        );
        let (Some(expected), Some(err)) = (here.1, there.1) else {
            panic!("the broken stream read to an end")
        };
        assert_eq!(err.kind(), expected.kind());
        assert!(there.0 == here.0, "the text before the error, in order");
        assert_eq!(there.2, here.2, "the same bytes hashed");
        // Stopping after one read: dropping it returns at once.
        let mut early = Threaded::spawn(gzip(stored(&gzipped(&text, false))));
        let mut buf = [0u8; 10];
        early.read_exact(&mut buf).unwrap();
        assert_eq!(&buf[..], &text[..10]);
        drop(early);
    }
}
