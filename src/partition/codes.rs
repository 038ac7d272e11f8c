//! A shard's decisions of one limiter on one stream of a partitioning, in
//! the stream's order: per request a varint, 0 for turned away and 1 + its
//! delay in nanoseconds for let through (1 when not held). Gzipped, a run
//! of admissions costs next to nothing.

use std::io::Write;

use super::{PartStream, Records, put_varint};
use crate::time::Nanos;

/// One decision as a shard stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    /// Whether the request was let through.
    pub admitted: bool,
    /// How long it was held first (nginx's delay), when let through.
    pub delay: Nanos,
}

impl Code {
    /// The decision a stored varint says.
    pub fn from_varint(value: u64) -> Code {
        Code {
            admitted: value > 0,
            delay: Nanos(value.saturating_sub(1)),
        }
    }
}

/// Writes a shard's decisions of one limiter, counting and hashing them.
pub struct CodesWriter<W: Write> {
    out: Records<W>,
}

impl<W: Write> CodesWriter<W> {
    /// Decisions go to `out`, gzipped.
    pub fn new(out: W) -> CodesWriter<W> {
        CodesWriter {
            out: Records::new(out),
        }
    }

    /// Appends `code`.
    pub fn push(&mut self, code: Code) -> std::io::Result<()> {
        let value = match code {
            Code {
                admitted: false, ..
            } => 0,
            Code { delay, .. } => delay.get().checked_add(1).ok_or_else(|| {
                std::io::Error::other("a delay of u64::MAX nanoseconds cannot be stored")
            })?,
        };
        let mut bytes = [0u8; 10];
        let len = put_varint(&mut bytes, value);
        self.out.push(&[&bytes[..len]])
    }

    /// Finishes the file: its count and fingerprint, and the writer back.
    pub fn finish(self) -> std::io::Result<(PartStream, W)> {
        self.out.finish()
    }
}
