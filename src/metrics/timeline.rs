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
}

impl Timeline {
    /// Empty buckets of width `bucket` covering `duration`.
    pub fn new(bucket: Nanos, duration: Nanos) -> Timeline {
        let buckets = usize::try_from(duration.get().div_ceil(bucket.get())).unwrap_or(usize::MAX);
        Timeline {
            bucket,
            admitted: vec![0; buckets],
            rejected: vec![0; buckets],
        }
    }

    /// Counts one decision at `now` (inside the run).
    #[inline]
    pub fn record(&mut self, now: Nanos, admitted: bool) {
        let index = (now.get() / self.bucket.get()) as usize;
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
