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
/// every byte it hands out (as stored: compressed, if it is).
pub(super) struct Hashing {
    pub(super) file: std::io::Take<Stored>,
    pub(super) hasher: Box<xxhash_rust::xxh3::Xxh3Default>,
}

impl Read for Hashing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.hasher.update(&buf[..n]);
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
}

/// gzip's first two bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// A zstd frame's first four bytes.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The largest zstd window accepted (zstd's own default limit for
/// decompression, `--long` aside): what one stream may hold in memory.
const ZSTD_MAX_WINDOW: u64 = 128 << 20;

impl Decoded {
    /// Looks at the file's first bytes to tell how it is stored.
    pub(super) fn of(hashing: Hashing) -> std::io::Result<Decoded> {
        let mut raw = BufReader::with_capacity(BUFFER_BYTES, hashing);
        let head = raw.fill_buf()?;
        Ok(if head.starts_with(&GZIP_MAGIC) {
            Decoded::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(raw)))
        } else if head.starts_with(&ZSTD_MAGIC) {
            Decoded::Zstd(Box::new(Zstd::new(raw)?))
        } else {
            Decoded::Plain(raw)
        })
    }

    /// The file underneath, hashing as it is read.
    pub(super) fn hashing(&mut self) -> &mut Hashing {
        match self {
            Decoded::Plain(raw) => raw.get_mut(),
            Decoded::Gzip(gzip) => gzip.get_mut().get_mut(),
            Decoded::Zstd(zstd) => zstd.frames().get_mut().get_mut(),
        }
    }
}

impl Read for Decoded {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Decoded::Plain(raw) => raw.read(buf),
            Decoded::Gzip(gzip) => gzip.read(buf),
            Decoded::Zstd(zstd) => zstd.read(buf),
        }
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
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.decoded.read(buf)?;
        self.since_row += n as u64;
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

