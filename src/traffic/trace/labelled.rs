//! A whole-second trace's busiest labelled second and busiest adjacent
//! pair, counted as it is checked.

/// A whole-second trace's busiest labelled second and its busiest two
/// adjacent seconds (counting the rows inside the run): its worst rolling
/// second of demand lies between them, whatever the true instants were, and
/// both ends happen for some placement within the seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Labelled {
    /// Requests of the busiest labelled second.
    pub busiest: u64,
    /// Requests of the busiest two adjacent labelled seconds.
    pub busiest_pair: u64,
    /// Whether a run also decides its requests packed against the seconds'
    /// edges (the trace's `packed`; by default when it holds at most
    /// [`PACKED_ROWS`] rows).
    pub packed: bool,
    /// The label being counted, its count and the one before's (while scanning).
    current: Option<(u64, u64, u64)>,
}

/// The most rows of a whole-second trace a run also decides packed against
/// the seconds' edges unless told (`packed = true`): that takes two more
/// sets of every limiter's state and decisions.
pub const PACKED_ROWS: u64 = 1_000_000;

impl Labelled {
    /// From each labelled second's count, in order of the seconds.
    pub(super) fn of_counts(counts: impl IntoIterator<Item = (u64, u64)>) -> Labelled {
        let mut labelled = Labelled::default();
        let mut previous: Option<(u64, u64)> = None;
        for (second, count) in counts {
            let before = match previous {
                Some((label, n)) if label + 1 == second => n,
                _ => 0,
            };
            labelled.busiest = labelled.busiest.max(count);
            labelled.busiest_pair = labelled.busiest_pair.max(count + before);
            previous = Some((second, count));
        }
        labelled
    }

    /// Counts a row labelled `second`, in order.
    pub(super) fn count(&mut self, second: u64) {
        let (label, count, before) = match self.current {
            Some((label, count, before)) if label == second => (label, count + 1, before),
            Some((label, count, _)) if label + 1 == second => (second, 1, count),
            _ => (second, 1, 0),
        };
        self.current = Some((label, count, before));
        self.busiest = self.busiest.max(count);
        self.busiest_pair = self.busiest_pair.max(count + before);
    }
}
