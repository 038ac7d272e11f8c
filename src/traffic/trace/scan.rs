//! The check: one pass over a trace's files that finds everything the runs
//! need to know first (rows, keys, whether it is sorted and in whole
//! seconds, its busiest seconds, the log's own rejections) and keeps the
//! rows for the replays.

use super::*;

/// Rows whose keys are numbered together.
const BATCH: usize = 32;

/// Whether a whole second stamped `shifted`, spread over the second from
/// it, may reach into the run `[start, end)`: if so, whether it straddles
/// one of the run's edges.
#[inline(always)]
fn reach(shifted: u64, [start, end]: [u64; 2]) -> Option<bool> {
    let later = shifted.saturating_add(NANOS_PER_SEC);
    (shifted < end && later > start).then_some(shifted < start || later > end)
}

/// Rows whose keys are numbered together, a field to an array: each field
/// goes in and comes out as one word, read back as it was stored. (Kept as
/// rows of 32 bytes, a row stored field by field was copied in 16 bytes at
/// a time, and each such read waited for the two stores it straddled: the
/// yardstick's log ran 1.5% faster on one core without it.)
#[derive(Default)]
struct Batch {
    len: usize,
    times: [u64; BATCH],
    clients: [u64; BATCH],
    hosts: [u64; BATCH],
    verdicts: [u8; BATCH],
}

impl Batch {
    /// Adds a row; the rows held.
    #[inline(always)]
    fn push(&mut self, (time, key, verdict): ReadRow) -> usize {
        let at = self.len;
        self.times[at] = time;
        self.clients[at] = key.client;
        self.hosts[at] = key.host;
        self.verdicts[at] = verdict;
        self.len = at + 1;
        self.len
    }

    /// The row at `at`.
    #[inline(always)]
    fn row(&self, at: usize) -> ReadRow {
        let key = Key {
            client: self.clients[at],
            host: self.hosts[at],
        };
        (self.times[at], key, self.verdicts[at])
    }
}

/// Numbering tables of at least this many keys grow to the keys foreseen
/// at the file's end rather than to twice their size: past the cache, a
/// lookup is a miss whatever the table's size, while each doubling moves
/// every key numbered and faults in a table of fresh pages (the
/// yardstick's log of 1.39·10^6 keys: three doublings from here to its
/// 2^21, and all of its doublings about a twelfth of its time on one core).
const FORESEEN_FROM: usize = 1 << 18;
/// A table grows at once to at most this many keys (a 32 MB table, eight
/// times one of [`FORESEEN_FROM`]): a file whose new keys slow down (a
/// user's requests come back) is foreseen larger than it ends, and its
/// table then at most 24 MB larger than doubling makes it. Past it, the
/// table doubles.
const FORESEEN_KEYS: usize = 1 << 21;

/// The keys a numbering table of `capacity` keys, about to hold `keys`,
/// makes room for at once, `foreseen` at the file's end: `None` (it
/// doubles) below [`FORESEEN_FROM`]; else the keys foreseen, at least
/// `keys` and at most [`FORESEEN_KEYS`] (or `keys`, past that).
fn room(keys: usize, capacity: usize, foreseen: u64) -> Option<usize> {
    if capacity < FORESEEN_FROM {
        return None;
    }
    let most = FORESEEN_KEYS.max(keys);
    Some(usize::try_from(foreseen).unwrap_or(most).clamp(keys, most))
}

/// How many keys a file's numbering will hold at its end, foreseen from
/// how fast new keys came since the table last grew and how many of the
/// file's rows are left (from the bytes left, at the rows a byte so far),
/// while at least every other row brings a new key; else as many as now.
#[derive(Debug, Default)]
struct Foresight {
    /// The rows before the file being read.
    file_from: u64,
    /// The rows, the file's bytes read and all its bytes, when last told.
    read: Option<[u64; 3]>,
    /// The keys and the rows when the table last grew.
    grew: [u64; 2],
}

impl Foresight {
    /// The keys foreseen at the file's end, with `keys` numbered in
    /// `rows` rows now; `keys` when nothing can be foreseen (no bytes told,
    /// as of a compressed file; none left, as of a file grown since it was
    /// opened). Starts the next foresight here.
    fn keys(&mut self, keys: u64, rows: u64) -> u64 {
        let [keys_then, rows_then] = std::mem::replace(&mut self.grew, [keys, rows]);
        let Some([told, done, total]) = self.read else {
            return keys;
        };
        let (recent, new) = (rows.saturating_sub(rows_then), keys.saturating_sub(keys_then));
        // Fewer than one row in two with a new key: the keys are coming
        // back, and their number levels off sooner than a straight line says.
        if done == 0 || recent == 0 || new.saturating_mul(2) < recent {
            return keys;
        }
        let file_rows = u128::from(told.saturating_sub(self.file_from));
        let left = (file_rows * u128::from(total.saturating_sub(done)) / u128::from(done))
            .saturating_sub(u128::from(rows.saturating_sub(told)));
        let more = u128::from(new) * left / u128::from(recent);
        u64::try_from(u128::from(keys) + more).unwrap_or(u64::MAX)
    }
}

/// The counting side of the check: what it finds, row by row, in order.
struct Counting<'a> {
    config: &'a Config,
    shown: &'a Path,
    start: Nanos,
    end: Nanos,
    rows: u64,
    unsorted: u64,
    earliest: u64,
    previous: u64,
    first: Option<u64>,
    outside: u64,
    /// Whether the trace's whole seconds are spread if they are whole
    /// ([`Config::may_spread`]): else the three counts below are not needed.
    may_spread: bool,
    /// Rows whose second, spread, may reach into the run (see `spanning`).
    reaching: u64,
    /// Whether one of those seconds straddles an edge of the run.
    straddling: bool,
    whole_seconds: bool,
    labelled: Labelled,
    /// Each labelled second's rows inside the run, in order, when the
    /// trace shares its origin with its workload's others (whose seconds
    /// are then counted together: see [`Config::labelled_together`]).
    seconds: Option<Vec<(u64, u64)>>,
    /// The seconds some of whose spread instants may fall in the run
    /// (those inside it, and one straddling its start): its busiest is the
    /// most rows spreading holds at once.
    spanning: Labelled,
    keys: Numbered,
    hosts: std::collections::HashSet<u64, crate::random::MixState>,
    names: std::collections::HashMap<Key, String, crate::random::MixState>,
    parts: Vec<Part>,
    left_out: u64,
    turned_away: (u64, u64),
    /// The first row kept that logs no status: its file and line.
    no_status: Option<(PathBuf, u64)>,
    checked: CheckedWriter,
    /// Rows whose keys are numbered next, together (see `number_batch`).
    batch: Batch,
    foresight: Foresight,
    /// The hashes of a key that names nothing ([`Config::empty_hashes`]:
    /// absent, or blank twice where no text means absent), and the rows
    /// with one.
    empty: [u64; 2],
    empty_rows: u64,
}

impl Counting<'_> {
    fn too_many_keys(&self) -> FieldError {
        format!(
            "{}: more than {MAX_KEYS} distinct keys in column {:?}; state is kept per key, and that many is refused",
            self.shown.display(),
            self.config.key.as_deref().unwrap_or_default()
        )
        .into()
    }

    /// Numbers the keys of the batch in order and keeps its rows, emptying
    /// it: their places in the table are read first, one after the other,
    /// so that their cache misses overlap.
    fn number_batch(&mut self) -> Result<(), FieldError> {
        let len = self.batch.len;
        let (keys, capacity) = (self.keys.numbers.len() + len, self.keys.numbers.capacity());
        if keys > capacity {
            let foreseen = self.foresight.keys(keys as u64, self.rows);
            if let Some(room) = room(keys, capacity, foreseen) {
                self.keys.numbers.reserve(room);
            }
        }
        let touched = self.batch.clients[..len]
            .iter()
            .fold(0u64, |sum, &client| sum.wrapping_add(self.keys.numbers.touch(client)));
        std::hint::black_box(touched);
        self.batch.len = 0;
        for at in 0..len {
            let row = self.batch.row(at);
            self.number(row)?;
        }
        Ok(())
    }

    /// Numbers one row's key and keeps the row; whether the key is new.
    #[inline(always)]
    fn number(&mut self, (time, key, verdict): ReadRow) -> Result<bool, FieldError> {
        let (number, new) = self.keys.insert(key.client);
        self.empty_rows += u64::from(key.client == self.empty[0] || key.client == self.empty[1]);
        if new && self.keys.hashes.len() as u64 > MAX_KEYS {
            return Err(self.too_many_keys());
        }
        let client = if self.config.interned { u64::from(number) } else { key.client };
        self.checked.row(time, client, key.host, verdict);
        Ok(new)
    }
}

impl ReadInto for Counting<'_> {
    #[inline]
    fn row(
        &mut self,
        (time, key, verdict): ReadRow,
        text: impl FnOnce() -> Option<String>,
    ) -> Result<(), FieldError> {
        if self.config.key.is_some() && self.names.len() < NAMED_KEYS {
            // While keys are still named, each row is numbered at once, so
            // that a new key's text is read from its own row. (With a
            // numbering shared, a key new to this file may be known from
            // the one before: each file names its own first keys.)
            let new = self.number((time, key, verdict))?;
            if (new
                || self.config.book.is_some()
                    && !self.names.contains_key(&Key::client(key.client)))
                && let Some(text) = text()
            {
                self.names.insert(Key::client(key.client), text);
            }
        } else if self.config.key.is_some() {
            if self.batch.push((time, key, verdict)) == BATCH {
                self.number_batch()?;
            }
        } else {
            self.checked.row(time, key.client, key.host, verdict);
        }
        if self.config.host.is_some() && self.hosts.insert(key.host) && self.hosts.len() as u64 > MAX_KEYS {
            return Err(format!(
                "{}: more than {MAX_KEYS} distinct hosts in column {:?}; state is kept per key, and that many is refused",
                self.shown.display(),
                self.config.host.as_deref().unwrap_or_default()
            ).into());
        }
        self.unsorted += u64::from(time < self.previous);
        self.earliest = self.earliest.min(time);
        self.whole_seconds &= time % NANOS_PER_SEC == 0;
        self.previous = time;
        self.rows += 1;
        // While sorted, the first row is the earliest, so the rebased time is known now.
        let first = *self.first.get_or_insert(self.config.origin.unwrap_or(time));
        let shifted = if self.config.rebased() {
            (time - first.min(time)).saturating_add(self.start.get())
        } else {
            time
        };
        let (start, end) = (self.start.get(), self.end.get());
        let inside = (start..end).contains(&shifted);
        self.outside += u64::from(!inside);
        if self.unsorted == 0 {
            if inside {
                let second = (time - first.min(time)) / NANOS_PER_SEC;
                self.labelled.count(second);
                if let Some(seconds) = &mut self.seconds {
                    let full = seconds.len() >= MAX_COUNTED_SECONDS as usize;
                    match seconds.last_mut() {
                        Some((last, count)) if *last == second => *count += 1,
                        _ if !full => seconds.push((second, 1)),
                        // Too many to keep: see the check's warning below.
                        _ => self.seconds = None,
                    }
                }
            }
            if self.may_spread
                && let Some(straddles) = reach(shifted, [start, end])
            {
                self.spanning.count(time / NANOS_PER_SEC);
                self.reaching += 1;
                self.straddling |= straddles;
            }
        }
        Ok(())
    }

    fn bytes_read(&mut self, done: u64, total: u64) {
        self.foresight.read = Some([self.rows, done, total]);
    }

    fn file(&mut self, file: FileRead) -> Result<(), FieldError> {
        self.number_batch()?;
        self.foresight.file_from = self.rows;
        self.foresight.read = None;
        self.left_out += file.left_out;
        self.turned_away.0 += file.turned_away.0;
        self.turned_away.1 += file.turned_away.1;
        if self.no_status.is_none() {
            self.no_status = file.no_status.map(|line| (file.part.path.clone(), line));
        }
        self.parts.push(file.part);
        Ok(())
    }
}

impl Config {
    /// Reads the whole file once, streaming: every row must hold a timestamp.
    /// Also counts the rows outside `[start, end)` (after rebasing); for an
    /// unsorted file that takes a second pass.
    pub(super) fn scan(
        &self,
        base_dir: &Path,
        start: Nanos,
        end: Nanos,
    ) -> Result<(Scan, Vec<String>), FieldError> {
        let files = self.files(base_dir)?;
        let shown = self.shown(base_dir);
        let mut counting = Counting {
            config: self,
            shown: &shown,
            start,
            end,
            rows: 0,
            unsorted: 0,
            earliest: u64::MAX,
            previous: 0,
            first: None,
            outside: 0,
            may_spread: self.may_spread(),
            reaching: 0,
            straddling: false,
            whole_seconds: true,
            labelled: Labelled::default(),
            seconds: self.counted.as_ref().map(|_| Vec::new()),
            spanning: Labelled::default(),
            keys: self.book.as_ref().map(|book| book.take()).unwrap_or_default(),
            hosts: std::collections::HashSet::default(),
            names: std::collections::HashMap::default(),
            parts: Vec::with_capacity(files.len()),
            left_out: 0,
            turned_away: (0, 0),
            no_status: None,
            checked: CheckedWriter::new(self.host.is_some(), !self.reread),
            batch: Batch::default(),
            foresight: Foresight::default(),
            empty: {
                let (absent, blank) = self.empty_hashes();
                [absent.unwrap_or(blank), blank]
            },
            empty_rows: 0,
        };
        let before = counting.keys.hashes.len();
        if Self::read_threaded(&files) {
            self.read_files_threaded(&files, &mut counting)?;
        } else {
            self.read_files(&files, &mut counting)?;
        }
        let Counting {
            rows,
            unsorted,
            earliest,
            mut outside,
            mut reaching,
            mut straddling,
            whole_seconds,
            mut labelled,
            seconds: counted,
            spanning,
            mut keys,
            hosts,
            names,
            mut parts,
            left_out,
            turned_away,
            no_status,
            checked,
            empty_rows,
            ..
        } = counting;
        // Before the table of numbers may be freed: the empty keys' clients
        // (none where each row's verdict stands in for its client).
        let empty = self.empty_clients(|hash| {
            let number = keys.numbers.get(hash)?;
            Some(if self.interned { u64::from(number) } else { hash })
        });
        let checked = checked.finish();
        if checked.is_none() {
            Self::hash_parts(&mut parts)?;
        } else if self.book.is_none() {
            // Only a replay that reads the file again looks a key's number
            // up: replays of the checked rows read it with each row. Its
            // table (64-byte lines of five places, 32 MB at 1.4 million keys) is freed
            // before the runs begin.
            keys.numbers = crate::traffic::slots::Numbers::default();
        }
        let spreading = rows > 0 && whole_seconds && self.may_spread();
        if self.spread == Some(Spread::Uniform) && rows > 0 && !whole_seconds {
            return Err(field_error!(
                "spread",
                "\"uniform\" spreads whole-second timestamps within their second, and {} has finer ones; remove it",
                shown.display()
            ));
        }
        labelled.packed = self.packed.unwrap_or(rows <= PACKED_ROWS);
        // An unsorted trace's seconds are counted below, once sorted.
        let labelled = (rows > 0 && whole_seconds).then_some(labelled);
        if self.packed == Some(true) && labelled.is_none() {
            return Err(field_error!(
                "packed",
                "packs the requests of a log stamped in whole seconds, and {} has finer stamps; remove it",
                shown.display()
            ));
        }
        let mut scan = Scan {
            // Only when every row kept logged its status.
            turned_away: (turned_away.1 == rows && rows > 0).then_some(turned_away.0),
            whole_seconds: spreading,
            seconds: counted.filter(|_| labelled.is_some()).map(Arc::new),
            preset: false,
            labelled,
            spread_rows: if spreading { spanning.busiest } else { 0 },
            keys: ((keys.hashes.len() - before).max(hosts.len()) as u64).max(1),
            names: std::sync::Arc::new(names),
            numbered: Arc::new(keys),
            empty,
            checked,
            earliest,
            sorted: unsorted == 0,
            rows,
            parts,
        };
        if unsorted > 0 && rows > MAX_UNSORTED_ROWS {
            return Err(format!(
                "{}: {unsorted} of {rows} rows are out of order, and sorting more than {MAX_UNSORTED_ROWS} rows in memory is refused; sort the file first (sort -t, -k1,1n)",
                shown.display()
            ).into());
        }
        if unsorted > 0 {
            let offset = if self.rebased() {
                i128::from(start.get()) - i128::from(self.origin.unwrap_or(earliest))
            } else {
                0
            };
            let mut all = self.stream(base_dir, &scan, Nanos::ZERO, Nanos(u64::MAX))?;
            all.offset = offset;
            // Each labelled second's rows inside the run, counted in order
            // of the seconds (at most one entry per row, and the rows are
            // held in memory to be sorted anyway).
            let mut seconds = std::collections::BTreeMap::<u64, u64>::new();
            let mut spanning = Labelled::default();
            let mut inside = 0u64;
            (reaching, straddling) = (0, false);
            let run = [start.get(), end.get()];
            for (arrival, straddles) in all.filter_map(|a| Some((a, reach(a.time.get(), run)?))) {
                if whole_seconds {
                    spanning.count(arrival.time.get() / NANOS_PER_SEC);
                }
                reaching += 1;
                straddling |= straddles;
                if arrival.time < start {
                    continue;
                }
                inside += 1;
                if whole_seconds {
                    let since = arrival.time.get() - start.get().min(arrival.time.get());
                    *seconds.entry(since / NANOS_PER_SEC).or_default() += 1;
                }
            }
            if spreading {
                scan.spread_rows = spanning.busiest;
            }
            outside = rows - inside;
            if let Some(labelled) = &mut scan.labelled {
                let packed = labelled.packed;
                *labelled = Labelled::of_counts(seconds.iter().map(|(&second, &count)| (second, count)));
                labelled.packed = packed;
                if self.counted.is_some() {
                    scan.seconds = Some(Arc::new(seconds.into_iter().collect()));
                }
            }
        }
        if let Some(book) = &self.book {
            // Its keys numbered, the next source goes on from them.
            let numbered = Arc::into_inner(std::mem::take(&mut scan.numbered))
                .expect("the check's own replay is over");
            book.put(numbered, scan.checked.is_none());
        }
        // Spread, a row is left out only when no instant of its second is in the run.
        if spreading {
            outside = rows - reaching;
        }
        // Spreading holds a second's rows at once: refused before any work.
        if scan.spread_rows > MAX_SPREAD_ROWS as u64 {
            return Err(field_error!(
                "spread",
                "spreads each second's requests in memory, and {} has {} in one second, more than the {MAX_SPREAD_ROWS} a second may hold; set spread = \"none\"",
                shown.display(),
                scan.spread_rows
            ));
        }
        // A replay of nothing would pass every check: refuse it.
        if rows == 0 && left_out > 0 {
            return Err(field_error!(
                "where",
                "none of the {left_out} rows of {} matches; loosen the conditions",
                shown.display()
            ));
        }
        if rows == 0 {
            return Err(format!(
                "{}: the trace has no rows, so there is nothing to replay; give it one timestamp per row{}",
                shown.display(),
                if self.format == Format::Csv {
                    " under its header"
                } else {
                    ""
                }
            ).into());
        }
        if outside == rows {
            let hint = if self.rebased() {
                "; set the source's start and end to where the rows are, or lengthen the run"
            } else {
                "; if it holds absolute (epoch) timestamps, set rebase = true"
            };
            return Err(format!(
                "{}: all {rows} rows fall outside [{start}, {end}), so nothing would be replayed{hint}",
                shown.display()
            ).into());
        }
        let mut warnings = Vec::new();
        // The labelled seconds its workload's traces keep, to count them
        // together, are bounded together.
        if let Some(counted) = self.counted.as_ref().filter(|_| scan.labelled.is_some()) {
            let kept = scan.seconds.as_ref().map(|seconds| seconds.len() as u64);
            if !kept.is_some_and(|kept| counted.take(kept)) {
                scan.seconds = None;
                if counted.first_over() {
                    warnings.push(format!(
                        "{}: its workload's logs hold more than {MAX_COUNTED_SECONDS} busy seconds together, more than are counted to find their busiest second together; their worst rolling second is not also given as an interval of their seconds (whole_seconds), nor run packed",
                        shown.display()
                    ));
                }
            }
        }
        // (A workload's several sources are packed, or not, together: the
        // workload warns.)
        if scan.labelled.is_some_and(|l| !l.packed) && self.packed.is_none() && !self.several {
            warnings.push(format!(
                "{}: {} rows, so its requests are not also run packed against its seconds' edges (admitted_at_least is the seeded figure); set packed = true to run them, with two more sets of each limiter's state",
                shown.display(),
                scan.rows
            ));
        }
        if left_out > 0 {
            warnings.push(format!(
                "{}: {left_out} of {} rows do not match `where` and are left out",
                shown.display(),
                rows + left_out
            ));
        }
        if empty_rows > 0 {
            let absent = self.format.absent_words();
            let fallback = match &self.key_fallback {
                Some(fallback) => format!(" (nor {fallback:?})"),
                None => String::new(),
            };
            let kong = match (&self.key_fallback, absent) {
                (None, Some(_)) => " (Kong with limit_by = header counts each request without the header by its client's address: set key_fallback to the address's field)",
                _ => "",
            };
            warnings.push(format!(
                "{}: {empty_rows} of {rows} rows have no {}{fallback}{}: per key, kind \"nginx-limit-req\" does not limit them (nginx skips a zone whose key is empty){}; other kinds limit them together, as one client{kong}",
                shown.display(),
                self.key.as_deref().unwrap_or_default(),
                match absent {
                    Some(absent) => format!(" ({absent}, or empty)"),
                    None => " (empty)".into(),
                },
                match absent {
                    Some(absent) => format!(
                        ", nor do \"haproxy-rate\" and \"envoy-ratelimit\" the {absent} ones (HAProxy tracks, and Envoy asks its service, nothing without the header), and \"spring-cloud-gateway\" turns the {absent} ones away (deny_empty_key, Spring's default; false lets them through unlimited)"
                    ),
                    None => String::new(),
                }
            ));
        }
        // Some rows log a status and some do not (a `-`, a field missing,
        // a line written wrong): the log's own rejections are not counted,
        // and the summary would say nothing of why.
        if turned_away.1 > 0 && turned_away.1 < rows {
            let first = no_status
                .map(|(path, line)| format!("; the first at {}:{line}", Self::named(&path).display()))
                .unwrap_or_default();
            warnings.push(format!(
                "{}: {} of {rows} rows have no status (a `-`, none logged, or not a number{first}), so the requests the log's own limiter turned away are not counted (turned_away_in_log)",
                shown.display(),
                rows - turned_away.1
            ));
        }
        if unsorted > 0 {
            warnings.push(format!(
                "{}: {unsorted} of {rows} rows are earlier than the row before them; the trace was sorted in memory",
                shown.display()
            ));
        }
        if outside > 0 {
            let hint = if self.rebased() {
                ""
            } else {
                "; if it holds absolute timestamps, set rebase = true"
            };
            warnings.push(format!(
                "{}: {outside} rows fall outside [{start}, {end}) and are left out{hint}",
                shown.display()
            ));
        }
        if spreading && straddling {
            warnings.push(format!(
                "{}: a second of it straddles an edge of [{start}, {end}) and is spread across it, so only its requests drawn inside are replayed",
                shown.display()
            ));
        }
        if spreading {
            warnings.push(format!(
                "{}: its timestamps are whole seconds, so each request is spread at a uniformly drawn instant of its second (seeded; replications draw anew); set spread = \"none\" to keep them on the second",
                shown.display()
            ));
        }
        Ok((scan, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::{FORESEEN_FROM, FORESEEN_KEYS, Foresight, room};

    /// The room made at once is what is foreseen, but never less than the
    /// keys about to be held nor more than 2^21 keys (a 32 MB table) — and
    /// below 2^18 keys, none: the table doubles.
    #[test]
    fn room_made_at_once_is_bounded() {
        let small = FORESEEN_FROM / 2;
        assert_eq!(room(small + 1, small, u64::MAX), None);
        let from = FORESEEN_FROM;
        assert_eq!(room(from + 32, from, 1_400_000), Some(1_400_000));
        assert_eq!(room(from + 32, from, 0), Some(from + 32), "at least the keys");
        assert_eq!(room(from + 32, from, u64::MAX), Some(FORESEEN_KEYS), "a 32 MB table at most");
        assert_eq!(room(from + 32, from, 2_000_000), Some(2_000_000));
        assert_eq!(room(2 * from + 32, 2 * from, u64::MAX), Some(FORESEEN_KEYS));
        // Past the ceiling, only the keys: the table doubles to hold them.
        assert_eq!(room(FORESEEN_KEYS + 32, FORESEEN_KEYS, u64::MAX), Some(FORESEEN_KEYS + 32));
        assert_eq!(room(from / 4 + 1, from / 4, u64::MAX), None);
    }

    /// Told `done` of `total` bytes after `rows` rows.
    fn told(rows: u64, done: u64, total: u64) -> Foresight {
        Foresight {
            read: Some([rows, done, total]),
            ..Foresight::default()
        }
    }

    /// Keys coming at a steady share of the rows are foreseen at that
    /// share of the rows the bytes left hold.
    #[test]
    fn steady_new_keys_are_foreseen_to_the_file_s_end() {
        // A tenth of a 2·10^6-row file read, seven rows in ten a new key.
        let mut foresight = told(200_000, 25_000_000, 250_000_000);
        assert_eq!(foresight.keys(140_000, 200_000), 1_400_000);
        // Told the bytes a while ago: the rows read since are not left.
        let mut foresight = told(100_000, 12_500_000, 250_000_000);
        assert_eq!(foresight.keys(140_000, 200_000), 140_000 + 7 * (1_900_000 - 100_000) / 10);
        // Only the rows since it last grew say how fast keys come now.
        let mut foresight = told(200_000, 25_000_000, 250_000_000);
        foresight.grew = [80_000, 100_000];
        assert_eq!(foresight.keys(140_000, 200_000), 140_000 + 6 * 1_800_000 / 10);
        assert_eq!(foresight.grew, [140_000, 200_000], "the next foresight starts here");
    }

    /// Nothing is foreseen beyond the keys numbered without the bytes (a
    /// compressed file, standard input), or while keys come back.
    #[test]
    fn returning_keys_and_unknown_lengths_foresee_nothing_more() {
        assert_eq!(Foresight::default().keys(140_000, 200_000), 140_000);
        assert_eq!(told(200_000, 0, 250_000_000).keys(140_000, 200_000), 140_000);
        assert_eq!(told(200_000, 25_000_000, 250_000_000).keys(99_999, 200_000), 99_999);
        assert_eq!(told(200_000, 25_000_000, 250_000_000).keys(100_000, 200_000), 1_000_000);
        // No rows since it last grew, or read to the end.
        let mut foresight = told(200_000, 25_000_000, 250_000_000);
        foresight.grew = [140_000, 200_000];
        assert_eq!(foresight.keys(140_000, 200_000), 140_000);
        assert_eq!(told(200_000, 25_000_000, 25_000_000).keys(140_000, 200_000), 140_000);
    }

    /// A second file's rows are foreseen from its own rows and bytes.
    #[test]
    fn each_file_is_foreseen_from_its_own_rows() {
        let mut foresight = told(1_100_000, 10_000_000, 20_000_000);
        foresight.file_from = 1_000_000;
        foresight.grew = [500_000, 1_000_000];
        assert_eq!(foresight.keys(580_000, 1_100_000), 580_000 + 8 * 100_000 / 10);
    }
}
