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
    /// With clients that retry: requests' first attempts per bucket.
    pub first_attempts: Vec<u32>,
    /// With clients that retry: retries per bucket.
    pub retries: Vec<u32>,
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
            first_attempts: Vec::new(),
            retries: Vec::new(),
            cursor: (0, 0),
        }
    }

    /// Counts first attempts and retries too.
    pub fn track_attempts(&mut self) {
        self.first_attempts = vec![0; self.admitted.len()];
        self.retries = vec![0; self.admitted.len()];
    }

    /// Counts an attempt arriving at `now`: a retry, or a request's first.
    pub fn record_attempt(&mut self, now: Nanos, retry: bool) {
        let counts = if retry {
            &mut self.retries
        } else {
            &mut self.first_attempts
        };
        if let Some(count) = usize::try_from(now.get() / self.bucket.get())
            .ok()
            .and_then(|index| counts.get_mut(index))
        {
            *count = count.saturating_add(1);
        }
    }

    /// Whether it counts attempts.
    pub fn has_attempts(&self) -> bool {
        !self.retries.is_empty()
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
