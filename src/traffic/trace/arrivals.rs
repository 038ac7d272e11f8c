//! The running trace: rows in time order (streamed when the file is
//! sorted, else sorted in memory), whole seconds spread within their second.

use super::*;

pub(super) enum Rows {
    Stream {
        /// Boxed: the reader's buffers dwarf the other variant.
        input: Box<Input>,
        /// The hash of the file's bytes when it was checked.
        checksum: Option<u64>,
        /// Boxed: a JSON log's field names are most of the source's size.
        layout: Box<Layout>,
        path: PathBuf,
        /// The last timestamp read, to catch a file that changed after it was checked.
        previous: u64,
        /// Whether the first pass found the file sorted.
        sorted: bool,
        /// The files still to read after this one.
        rest: VecDeque<Part>,
        /// To open them.
        config: Box<Config>,
        /// The check's numbers of the keys, to replay them by number.
        numbered: Option<Arc<Numbered>>,
    },
    Sorted(std::vec::IntoIter<(u64, Key)>),
    /// The rows the check read and kept.
    Checked(Box<CheckedRows>),
}

/// The log's own verdict on the row just read, from how its counts of
/// (turned away, statuses logged) moved: 0 when it logged no status, 1 let
/// through, 2 turned away.
pub(super) fn verdict(before: (u64, u64), after: (u64, u64)) -> u8 {
    match (after.1 > before.1, after.0 > before.0) {
        (false, _) => 0,
        (true, false) => 1,
        (true, true) => 2,
    }
}

/// A row's time as written, shifted by `offset` (rebasing), clamped to u64.
#[inline(always)]
pub(super) fn shifted(raw: u64, offset: i128) -> u64 {
    if offset == 0 {
        raw
    } else {
        (i128::from(raw) + offset).clamp(0, i128::from(u64::MAX)) as u64
    }
}

/// Whole-second rows spread within their second: one second's rows at a
/// time, an instant drawn for each in the file's order, then handed out
/// by instant (equal draws keep the file's order).
pub(super) struct Spreader {
    rng: Rng,
    /// The second's rows, as read.
    pub(super) rows: Vec<(u64, Key)>,
    /// Each row's draw and place among `rows`, `draw << 32 | place`, in
    /// the order handed out: sorting these 8 bytes a row, the place
    /// breaking ties, orders as a stable sort of the rows by time does.
    order: Vec<u64>,
    /// How many of `order` were handed out.
    next: usize,
    /// The first row of the next second, read while gathering this one's.
    carry: Option<(u64, Key)>,
}

// A draw (below 2^30) and a place (below 2^32) share one u64.
const _: () = assert!(NANOS_PER_SEC < 1 << 30 && (MAX_SPREAD_ROWS as u64) < 1 << 32);

impl Spreader {
    pub(super) fn new(rng: Rng) -> Spreader {
        Spreader {
            rng,
            rows: Vec::new(),
            order: Vec::new(),
            next: 0,
            carry: None,
        }
    }

    /// The next row of the second gathered, spread; `None` once all are.
    #[inline]
    fn take(&mut self) -> Option<(u64, Key)> {
        let drawn = *self.order.get(self.next)?;
        self.next += 1;
        let (time, key) = self.rows[(drawn & u64::from(u32::MAX)) as usize];
        Some((time + (drawn >> 32), key))
    }
}

/// The running source. A row that fails to parse now (the file changed since
/// it was checked) ends the stream and is kept in [`Arrivals::take_error`].
pub struct Arrivals {
    pub(super) rows: Rows,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) offset: i128,
    pub(super) spread: Option<Spreader>,
    pub(super) error: Option<String>,
}

impl Arrivals {
    /// Arrivals already in time order (for tests and callers that hold them).
    pub fn from_sorted(arrivals: Vec<Arrival>) -> Arrivals {
        let rows: Vec<(u64, Key)> = arrivals.iter().map(|a| (a.time.get(), a.key)).collect();
        Arrivals {
            rows: Rows::Sorted(rows.into_iter()),
            start: 0,
            end: u64::MAX,
            offset: 0,
            spread: None,
            error: None,
        }
    }

    /// The error that cut the stream short, if any.
    pub fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    /// The next timestamp as written, before shifting and filtering, and its key.
    #[inline]
    pub(super) fn next_raw(&mut self) -> Option<(u64, Key)> {
        match &mut self.rows {
            Rows::Sorted(times) => times.next(),
            Rows::Checked(rows) => match rows.next_row() {
                Ok(row) => row,
                Err(err) => {
                    self.error = Some(format!("reading the checked rows again: {err}"));
                    None
                }
            },
            Rows::Stream {
                input,
                checksum,
                layout,
                path,
                previous,
                sorted,
                rest,
                config,
                numbered,
            } => loop {
                // The log's own verdict, when asked, from how its counts moved.
                let before = config.verdicts.then(|| input.turned_away());
                let row = input.next(layout, path).map(|row| {
                    let Some(before) = before else {
                        return row;
                    };
                    let verdict = verdict(before, input.turned_away());
                    row.map(|(time, _)| (time, Key::client(u64::from(verdict))))
                });
                let row = row.and_then(|row| match row {
                    None => verify(input, *checksum, path).map(|()| None),
                    Some((time, _)) if *sorted && time < *previous => Err(format!(
                        "{}:{}: the row is earlier than the one before it; the file changed while burstsim read it",
                        path.display(),
                        input.line()
                    ).into()),
                    Some((time, key)) => {
                        *previous = time;
                        match numbered {
                            None => Ok(Some((time, key))),
                            Some(numbered) => match numbered.numbers.get(key.client) {
                                Some(number) => Ok(Some((
                                    time,
                                    Key {
                                        client: u64::from(number),
                                        ..key
                                    },
                                ))),
                                None => Err(format!(
                                    "{}:{}: the row's key was not in the file when it was checked; the file changed while burstsim read it",
                                    path.display(),
                                    input.line()
                                ).into()),
                            },
                        }
                    }
                });
                match row {
                    Ok(Some(row)) => return Some(row),
                    // This file is done: the next one, if any.
                    Ok(None) => {
                        let part = rest.pop_front()?;
                        match config.reopen(&part) {
                            Ok((next, named)) => {
                                **input = next;
                                (*checksum, **layout, *path) = (part.checksum, part.layout, named);
                            }
                            Err(err) => {
                                self.error = Some(err.to_string());
                                return None;
                            }
                        }
                    }
                    Err(err) => {
                        self.error = Some(err.to_string());
                        return None;
                    }
                }
            },
        }
    }

    /// The next row, spread within its second when the trace's are whole seconds.
    #[inline]
    pub(super) fn next_spread(&mut self) -> Option<(u64, Key)> {
        match &mut self.spread {
            None => self.next_raw(),
            // Taken where it lies: moving the spreader out and back for
            // each row copied it twice (a tenth of what spreading cost).
            Some(spread) => spread.take().or_else(|| self.next_second()),
        }
    }

    /// Replaces what `out` holds with up to `count` arrivals of a spread
    /// trace, as its iterator yields them, taking each second's rows in one
    /// loop without the iterator's per-row dispatch.
    pub(super) fn fill_spread<T: Timed>(&mut self, out: &mut Vec<T>, count: usize) {
        out.clear();
        let (start, end, offset) = (self.start, self.end, self.offset);
        let Some(spread) = &mut self.spread else {
            return;
        };
        let mut next = spread.take();
        loop {
            let Some((raw, key)) = next else {
                // This second is done: the next one's first row, if any.
                match self.next_second() {
                    Some(row) => {
                        next = Some(row);
                        continue;
                    }
                    None => return,
                }
            };
            let time = shifted(raw, offset);
            if time >= end {
                self.finish_early();
                return;
            }
            if time >= start {
                out.push(T::of(Arrival {
                    time: Nanos(time),
                    key,
                }));
                if out.len() == count {
                    return;
                }
            }
            next = self.spread.as_mut().and_then(Spreader::take);
        }
    }

    /// The first row of the next second, spread, once its rows are read.
    #[inline(never)]
    fn next_second(&mut self) -> Option<(u64, Key)> {
        let mut spread = self.spread.take()?;
        self.gather(&mut spread);
        let row = spread.take();
        self.spread = Some(spread);
        row
    }

    /// Reads the next second's rows into `spread` and draws their instants.
    /// Only a second some of whose instants may fall in the run is held: one
    /// wholly past its end hands out its first row as it is (which ends the
    /// stream), and one wholly before its start is read through with its
    /// draws made, so the seed's sequence is the same, but its rows not kept.
    fn gather(&mut self, spread: &mut Spreader) {
        spread.rows.clear();
        spread.order.clear();
        spread.next = 0;
        loop {
            let Some(first) = spread.carry.take().or_else(|| self.next_raw()) else {
                return;
            };
            if shifted(first.0, self.offset) >= self.end {
                spread.rows.push(first);
                spread.order.push(0);
                return;
            }
            // Drawn in the file's order, as the seed's sequence is the run's,
            // within what time has left of the second: the last whole second
            // of u64 nanoseconds ends 709,551,615 ns in.
            let span = NANOS_PER_SEC.min((u64::MAX - first.0).saturating_add(1));
            let keep = shifted(first.0 + (span - 1), self.offset) >= self.start;
            let second = first.0 / NANOS_PER_SEC;
            let mut rows = 1usize;
            if keep {
                spread.rows.push(first);
            } else {
                spread.rng.random_range(0..span);
            }
            while let Some(row) = self.next_raw() {
                if row.0 / NANOS_PER_SEC != second {
                    spread.carry = Some(row);
                    break;
                }
                rows += 1;
                if !keep {
                    spread.rng.random_range(0..span);
                    continue;
                }
                spread.rows.push(row);
                if rows > MAX_SPREAD_ROWS {
                    self.error = Some(format!(
                        "more than {MAX_SPREAD_ROWS} requests in one second of the trace are spread in memory, and more is refused; set spread = \"none\""
                    ));
                    spread.rows.clear();
                    return;
                }
            }
            if keep {
                for place in 0..rows as u64 {
                    spread.order.push(spread.rng.random_range(0..span) << 32 | place);
                }
                spread.order.sort_unstable();
                return;
            }
        }
    }

    /// Ends a stream cut short at the run's end: the rest of the file is
    /// read too, so the whole of it is checked against the first pass.
    pub(super) fn finish_early(&mut self) {
        if let Rows::Stream {
            input,
            checksum,
            path,
            ..
        } = &mut self.rows
            && let Err(err) = verify(input, *checksum, path)
        {
            self.error.get_or_insert(err.to_string());
        }
    }

    pub(super) fn raw(&mut self) -> impl Iterator<Item = (u64, Key)> + '_ {
        std::iter::from_fn(move || self.next_raw())
    }
}

impl Iterator for Arrivals {
    type Item = Arrival;

    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        loop {
            let (raw, key) = self.next_spread()?;
            let time = shifted(raw, self.offset);
            if time >= self.end {
                self.finish_early();
                return None;
            }
            if time >= self.start {
                return Some(Arrival {
                    time: Nanos(time),
                    key,
                });
            }
        }
    }
}
