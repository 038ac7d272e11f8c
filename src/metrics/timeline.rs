//! Admitted and rejected requests per fixed-width bucket of time.

use serde::Serialize;

use crate::time::Nanos;

/// Counts per bucket over the whole run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timeline {
    /// Width of each bucket.
    pub bucket: Nanos,
    /// Admitted requests per bucket, from the run's start.
    pub admitted: Vec<u32>,
    /// Rejected requests per bucket.
    pub rejected: Vec<u32>,
    /// The bucket of the last decision and where it ends, so that most
    /// decisions need no division.
    #[serde(skip)]
    cursor: (usize, u64),
}

impl Timeline {
    /// Empty buckets of width `bucket` covering `duration`.
    pub fn new(bucket: Nanos, duration: Nanos) -> Timeline {
        let buckets = usize::try_from(duration.get().div_ceil(bucket.get())).unwrap_or(usize::MAX);
        Timeline {
            bucket,
            admitted: vec![0; buckets],
            rejected: vec![0; buckets],
            cursor: (0, 0),
        }
    }

    /// Counts one decision at `now` (inside the run).
    #[inline]
    pub fn record(&mut self, now: Nanos, admitted: bool) {
        let now = now.get();
        if now >= self.cursor.1 {
            let index = now / self.bucket.get();
            self.cursor = (
                index as usize,
                (index + 1).saturating_mul(self.bucket.get()),
            );
        }
        let index = self.cursor.0;
        let counts = if admitted {
            &mut self.admitted
        } else {
            &mut self.rejected
        };
        if let Some(count) = counts.get_mut(index) {
            *count = count.saturating_add(1);
        }
    }

    /// Start of bucket `index`.
    pub fn bucket_start(&self, index: usize) -> Nanos {
        Nanos(index as u64 * self.bucket.get())
    }
}
