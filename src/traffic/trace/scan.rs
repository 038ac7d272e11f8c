//! The check: one pass over a trace's files that finds everything the runs
//! need to know first (rows, keys, whether it is sorted and in whole
//! seconds, its busiest seconds, the log's own rejections) and keeps the
//! rows for the replays.

use super::*;

/// Rows whose keys are numbered together.
const BATCH: usize = 32;

impl Config {
    /// Numbers the keys of `batch` (time, key, the log's verdict) in order
    /// and keeps its rows, emptying it: their places in the table are read
    /// first, one after the other, so that their cache misses overlap.
    /// `Err` when the keys pass [`MAX_KEYS`].
    fn number_batch(
        &self,
        batch: &mut Vec<(u64, Key, u8)>,
        keys: &mut Numbered,
        checked: &mut CheckedWriter,
    ) -> Result<(), ()> {
        let touched = batch.iter().fold(0u64, |sum, (_, key, _)| {
            sum.wrapping_add(keys.numbers.touch(key.client))
        });
        std::hint::black_box(touched);
        for (time, key, verdict) in batch.drain(..) {
            let (number, new) = keys.insert(key.client);
            if new && keys.hashes.len() as u64 > MAX_KEYS {
                return Err(());
            }
            let client = if self.interned { u64::from(number) } else { key.client };
            checked.row(time, client, key.host, verdict);
        }
        Ok(())
    }

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
        let (mut rows, mut unsorted, mut earliest, mut previous) = (0u64, 0u64, u64::MAX, 0u64);
        let (mut first, mut outside, mut whole_seconds) = (None, 0u64, true);
        let mut labelled = Labelled::default();
        let mut keys = Numbered::default();
        let mut hosts: std::collections::HashSet<u64, crate::random::MixState> =
            std::collections::HashSet::default();
        let (keyed, hosted) = (self.key.is_some(), self.host.is_some());
        let mut names = std::collections::HashMap::default();
        let (mut parts, mut left_out) = (Vec::with_capacity(files.len()), 0u64);
        let mut turned_away = (0u64, 0u64);
        let mut checked = CheckedWriter::new(hosted, !self.reread);
        // Once the first keys' names are kept, rows are numbered in batches
        // (see `number_batch`); before, each row's key text is read as it is.
        let mut batch: Vec<(u64, Key, u8)> = Vec::with_capacity(BATCH);
        let too_many_keys = || {
            format!(
                "{}: more than {MAX_KEYS} distinct keys in column {:?}; state is kept per key, and that many is refused",
                shown.display(),
                self.key.as_deref().unwrap_or_default()
            )
        };
        for file in files {
        let (mut input, identity) = self.open(&file, None)?;
        let named = Self::named(&file);
        let layout = self.locate(&named, &mut input)?;
        loop {
            let before = input.turned_away();
            let Some((time, key)) = input.next(&layout, &named)? else {
                break;
            };
            let verdict = verdict(before, input.turned_away());
            if keyed && names.len() >= NAMED_KEYS {
                batch.push((time, key, verdict));
                if batch.len() == BATCH {
                    self.number_batch(&mut batch, &mut keys, &mut checked)
                        .map_err(|()| too_many_keys())?;
                }
            } else {
                let (number, new) = if keyed { keys.insert(key.client) } else { (0, false) };
                checked.row(
                    time,
                    if self.interned && keyed { u64::from(number) } else { key.client },
                    key.host,
                    verdict,
                );
                if new && names.len() < NAMED_KEYS {
                    names.extend(
                        input
                            .key_text(&layout)
                            .map(|text| (Key::client(key.client), text)),
                    );
                }
                if new && keys.hashes.len() as u64 > MAX_KEYS {
                    return Err(too_many_keys().into());
                }
            }
            if hosted && hosts.insert(key.host) && hosts.len() as u64 > MAX_KEYS {
                return Err(format!(
                    "{}: more than {MAX_KEYS} distinct hosts in column {:?}; state is kept per key, and that many is refused",
                    shown.display(),
                    self.host.as_deref().unwrap_or_default()
                ).into());
            }
            unsorted += u64::from(time < previous);
            earliest = earliest.min(time);
            whole_seconds &= time % NANOS_PER_SEC == 0;
            previous = time;
            rows += 1;
            // While sorted, the first row is the earliest, so the rebased time is known now.
            let first = *first.get_or_insert(time);
            let shifted = if self.rebased() {
                (time - first.min(time)).saturating_add(start.get())
            } else {
                time
            };
            let inside = (start.get()..end.get()).contains(&shifted);
            outside += u64::from(!inside);
            if inside && unsorted == 0 {
                labelled.count((time - first.min(time)) / NANOS_PER_SEC);
            }
        }
        self.number_batch(&mut batch, &mut keys, &mut checked)
            .map_err(|()| too_many_keys())?;
        left_out += input.left_out();
        let (rejected, logged) = input.turned_away();
        turned_away.0 += rejected;
        turned_away.1 += logged;
        let checksum = input
            .drain()
            .map_err(|err| format!("{}: {err}", named.display()))?;
        let now = input.hashing().file.get_ref().metadata();
        if now.map(|meta| FileIdentity::of(&meta)).ok() != Some(identity) {
            return Err(changed(&named).into());
        }
        parts.push(Part {
            path: file,
            identity,
            checksum,
            layout,
        });
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
            labelled,
            keys: (keys.hashes.len().max(hosts.len()) as u64).max(1),
            names: std::sync::Arc::new(names),
            numbered: Arc::new(keys),
            checked: checked.finish(),
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
                i128::from(start.get()) - i128::from(earliest)
            } else {
                0
            };
            let mut all = self.stream(base_dir, &scan, Nanos::ZERO, Nanos(u64::MAX))?;
            all.offset = offset;
            // Each labelled second's rows inside the run, counted in order
            // of the seconds (at most one entry per row, and the rows are
            // held in memory to be sorted anyway).
            let mut seconds = std::collections::BTreeMap::<u64, u64>::new();
            let mut inside = 0u64;
            for arrival in all.filter(|a| (start..end).contains(&a.time)) {
                inside += 1;
                if whole_seconds {
                    let since = arrival.time.get() - start.get().min(arrival.time.get());
                    *seconds.entry(since / NANOS_PER_SEC).or_default() += 1;
                }
            }
            outside = rows - inside;
            if let Some(labelled) = &mut scan.labelled {
                let packed = labelled.packed;
                *labelled = Labelled::of_counts(seconds);
                labelled.packed = packed;
            }
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
        if scan.labelled.is_some_and(|l| !l.packed) && self.packed.is_none() {
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
        if spreading {
            warnings.push(format!(
                "{}: its timestamps are whole seconds, so each request is spread at a uniformly drawn instant of its second (seeded; replications draw anew); set spread = \"none\" to keep them on the second",
                shown.display()
            ));
        }
        Ok((scan, warnings))
    }
}
