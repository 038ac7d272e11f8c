//! The check's reading side: every file of a trace opened, its layout
//! found, its rows parsed and its bytes hashed, in order. It hands the rows
//! to the counting side ([`Config::scan`]) either directly or, for a large
//! plain log with a core free, from a thread of its own: parsing the text
//! and numbering the keys are about even, so each gets a core.

use std::collections::HashSet;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use super::*;

/// A row as read: its time as written, its key, and the log's own verdict
/// (see [`verdict`]).
pub(super) type ReadRow = (u64, Key, u8);

/// What the reading side hands on, in the files' order.
pub(super) trait ReadInto {
    /// The next row; `text` reads its key's text (while the row is the
    /// last read), for the first keys seen, which are named.
    fn row(
        &mut self,
        row: ReadRow,
        text: impl FnOnce() -> Option<String>,
    ) -> Result<(), FieldError>;
    /// A file read to its end and checked unchanged.
    fn file(&mut self, file: FileRead) -> Result<(), FieldError>;
    /// `done` of the file's `total` bytes read, now and then, for a file
    /// read as it is stored (a hint: see `scan::Foresight`).
    fn bytes_read(&mut self, _done: u64, _total: u64) {}
}

/// Rows read between two tellings of the bytes read.
const TOLD_EVERY: u32 = 1 << 14;

/// One file read to its end.
pub(super) struct FileRead {
    pub(super) part: Part,
    /// ReadInto `where` left out.
    pub(super) left_out: u64,
    /// See [`Input::turned_away`].
    pub(super) turned_away: (u64, u64),
    /// The line of the first row kept that logs no status.
    pub(super) no_status: Option<u64>,
}

/// Which keys' texts are kept: those of the first [`NAMED_KEYS`] distinct
/// keys whose row gives one, in the order first seen. The counting side
/// knows a key is new from its numbering; a reading thread, whose rows are
/// numbered later, picks the same texts with this.
#[derive(Default)]
struct Naming {
    seen: HashSet<u64, crate::random::MixState>,
    named: usize,
}

impl Naming {
    #[inline]
    fn name(&mut self, client: u64, text: impl FnOnce() -> Option<String>) -> Option<String> {
        if self.named >= NAMED_KEYS || !self.seen.insert(client) {
            return None;
        }
        let text = text()?;
        self.named += 1;
        Some(text)
    }
}

/// Plain logs at least this large are read on a thread of their own when a
/// core is free for it.
const THREADED_FROM: u64 = 8 << 20;
/// Rows handed over at once from the reading thread: each hand-over may
/// wake the other side, so they are few (122 for two million rows).
const HANDED: usize = 16384;
/// Hand-overs the reading thread may hold ready: the rows it runs ahead
/// (at most 8 MiB of them, sixteen of 512 KiB) — enough to read on through
/// the counting side's longest pauses, the growths of its numbering table.
/// With four it stalled on the doublings (the yardstick log's last, to a
/// million keys, about 15 ms): sixteen took 0.97× the time on two cores,
/// the peak 5 MB higher. Since the table grows at once to the keys foreseen
/// (`scan::Foresight`), four and eight took 1.030× and 1.017× of sixteen.
const AHEAD: usize = 16;

/// What the reading thread sends.
enum Reading {
    /// Rows, their names by place, and the bytes read when last told.
    Rows(Vec<ReadRow>, Vec<(usize, String)>, Option<[u64; 2]>),
    /// Boxed: a file's part (its layout) is far larger than a hand-over.
    File(Box<FileRead>),
    Failed(FieldError),
}

impl Config {
    /// Reads every row of `files` into `rows`, in order.
    pub(super) fn read_files(
        &self,
        files: &[PathBuf],
        rows: &mut impl ReadInto,
    ) -> Result<(), FieldError> {
        let keyed = self.key.is_some();
        for file in files {
            let (mut input, identity) = self.open(file, None, false)?;
            let named = Self::named(file);
            let layout = self.locate(&named, &mut input)?;
            let (mut untold, mut no_status) = (0u32, None);
            loop {
                let before = input.turned_away();
                // A line a writer left cut short (or one overwritten) is
                // the file's change, not its text's fault: say so instead;
                // and a last line cut short by the end of the file, so.
                let Some((time, key)) = input.next(&layout, &named).map_err(|err| {
                    match input.hashing().change(identity, &named) {
                        Some(change) => FieldError::new(change),
                        None if input.unbroken() => FieldError::new(format!(
                            "{}; it is the file's last line and has no line break: the file ends in the middle of a line (a log still being written?), so replay a copy once it is whole",
                            err.message
                        )),
                        None => err,
                    }
                })?
                else {
                    break;
                };
                let verdict = verdict(before, input.turned_away());
                if verdict == 0 && no_status.is_none() {
                    no_status = Some(input.line());
                }
                rows.row((time, key, verdict), || {
                    keyed.then(|| input.key_text(&layout)).flatten()
                })?;
                untold += 1;
                if untold == TOLD_EVERY {
                    untold = 0;
                    if let Some(done) = input.bytes_read() {
                        rows.bytes_read(done, identity.len);
                    }
                }
            }
            let left_out = input.left_out();
            let turned_away = input.turned_away();
            let checksum = input
                .drain()
                .map_err(|err| format!("{}: {err}", named.display()))?;
            if let Some(change) = input.hashing().change(identity, &named) {
                return Err(change.into());
            }
            rows.file(FileRead {
                part: Part {
                    path: file.clone(),
                    identity,
                    checksum,
                    layout,
                },
                left_out,
                turned_away,
                no_status,
            })?;
        }
        Ok(())
    }

    /// Whether `files` are read on a thread of their own: plain (not
    /// compressed: those are decompressed on one already), at least
    /// [`THREADED_FROM`] bytes in all, and a core free for it.
    pub(super) fn read_threaded(files: &[PathBuf]) -> bool {
        let mut bytes = 0u64;
        for file in files {
            // Standard input, or anything but a regular file (a FIFO would
            // wait for a writer), is read as it is: here, and by the check.
            if file == Path::new("-") {
                return false;
            }
            let Ok((mut opened, meta)) = crate::input::open_regular(file) else {
                return false;
            };
            let mut head = [0u8; 4];
            let Ok(n) = opened.read(&mut head) else {
                return false;
            };
            if Decoded::is_compressed(&head[..n]) {
                return false;
            }
            bytes += meta.len();
        }
        bytes >= THREADED_FROM && crate::cores::second_core_free()
    }

    /// [`Config::read_files`] on a thread of its own, handing its rows to
    /// `rows` on this one. When `rows` refuses one, the thread stops at its
    /// next hand-over.
    pub(super) fn read_files_threaded(
        &self,
        files: &[PathBuf],
        rows: &mut impl ReadInto,
    ) -> Result<(), FieldError> {
        let (sender, receiver) = sync_channel(AHEAD);
        // The emptied hand-overs go back to be filled again: a fresh one is
        // half a megabyte of pages to fault in.
        let (give_back, given_back) = sync_channel(AHEAD + 2);
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let mut handing = Handing {
                    sender,
                    given_back,
                    rows: Vec::with_capacity(HANDED),
                    names: Vec::new(),
                    naming: Naming::default(),
                    told: None,
                };
                let read = self.read_files(files, &mut handing);
                // The rows before an error are counted first, as they are
                // when read directly. A closed channel means the counting
                // side stopped first: nothing is left to tell it.
                let _ = handing.hand().and_then(|()| match read {
                    Ok(()) => Ok(()),
                    Err(err) => handing.send(Reading::Failed(err)),
                });
            });
            // Dropped when this side stops, so a thread waiting to hand
            // over more finds the channel closed and ends.
            take(receiver, &give_back, rows)
        })
    }
}

/// The counting side of a threaded read: every hand-over in order, until
/// the reading side's end or error, or `rows`'s own.
fn take(
    receiver: Receiver<Reading>,
    give_back: &SyncSender<Vec<ReadRow>>,
    rows: &mut impl ReadInto,
) -> Result<(), FieldError> {
    while let Ok(reading) = receiver.recv() {
        match reading {
            Reading::Rows(mut read, names, told) => {
                let mut names = names.into_iter().peekable();
                for (at, row) in read.drain(..).enumerate() {
                    let name = names.next_if(|(named, _)| *named == at).map(|(_, name)| name);
                    rows.row(row, || name)?;
                }
                if let Some([done, total]) = told {
                    rows.bytes_read(done, total);
                }
                // Full only if the reader holds as many as it may: then it
                // allocates one, as it would have anyway.
                let _ = give_back.try_send(read);
            }
            Reading::File(file) => rows.file(*file)?,
            Reading::Failed(err) => return Err(err),
        }
    }
    Ok(())
}

/// The reading thread's side of the channel: rows gathered into hand-overs.
struct Handing {
    sender: SyncSender<Reading>,
    /// Emptied hand-overs, back from the counting side.
    given_back: Receiver<Vec<ReadRow>>,
    rows: Vec<ReadRow>,
    /// The names among `rows`, by place.
    names: Vec<(usize, String)>,
    naming: Naming,
    /// The bytes read when last told, since the last hand-over (told after
    /// its rows: a few rows later than read, which a hint may be).
    told: Option<[u64; 2]>,
}

impl Handing {
    fn send(&self, reading: Reading) -> Result<(), FieldError> {
        self.sender
            .send(reading)
            .map_err(|_| FieldError::new("the check stopped".to_string()))
    }

    /// Sends the rows gathered so far.
    fn hand(&mut self) -> Result<(), FieldError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let empty = self
            .given_back
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(HANDED));
        let rows = std::mem::replace(&mut self.rows, empty);
        let names = std::mem::take(&mut self.names);
        let told = self.told.take();
        self.send(Reading::Rows(rows, names, told))
    }
}

impl ReadInto for Handing {
    #[inline]
    fn row(
        &mut self,
        row: ReadRow,
        text: impl FnOnce() -> Option<String>,
    ) -> Result<(), FieldError> {
        if let Some(name) = self.naming.name(row.1.client, text) {
            self.names.push((self.rows.len(), name));
        }
        self.rows.push(row);
        if self.rows.len() == HANDED {
            self.hand()?;
        }
        Ok(())
    }

    fn file(&mut self, file: FileRead) -> Result<(), FieldError> {
        self.hand()?;
        self.send(Reading::File(Box::new(file)))
    }

    fn bytes_read(&mut self, done: u64, total: u64) {
        self.told = Some([done, total]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything handed on, and a refusal after `refuse_after` rows.
    #[derive(Default)]
    struct Collected {
        rows: Vec<(ReadRow, Option<String>)>,
        files: Vec<(PathBuf, u64, (u64, u64))>,
        refuse_after: Option<usize>,
        naming: Naming,
    }

    impl PartialEq for Collected {
        fn eq(&self, other: &Collected) -> bool {
            (&self.rows, &self.files) == (&other.rows, &other.files)
        }
    }

    impl ReadInto for Collected {
        fn row(
            &mut self,
            row: ReadRow,
            text: impl FnOnce() -> Option<String>,
        ) -> Result<(), FieldError> {
            if self.refuse_after == Some(self.rows.len()) {
                return Err(FieldError::new("refused".to_string()));
            }
            // As the counting side names keys: the first seen, while any is left to name.
            let name = self.naming.name(row.1.client, text);
            self.rows.push((row, name));
            Ok(())
        }

        fn file(&mut self, file: FileRead) -> Result<(), FieldError> {
            let part = file.part;
            self.files.push((part.path, file.left_out, file.turned_away));
            Ok(())
        }
    }

    /// A combined log of `lines` lines over `addresses` addresses (each
    /// line's address a multiplicative hash of its place), a 429 in 7, and
    /// a line that is not one at `bad`.
    fn log(lines: u32, addresses: u32, bad: Option<u32>) -> String {
        (0..lines)
            .map(|i| {
                if Some(i) == bad {
                    return "not a log line\n".to_string();
                }
                let address = i.wrapping_mul(2_654_435_761) % addresses;
                let status = if i % 7 == 3 { 429 } else { 200 };
                format!(
                    "10.{}.{}.{} - - [27/Nov/2026:09:{:02}:{:02} +0000] \"GET /{i} HTTP/1.1\" {status} 5 \"-\" \"a\"\n",
                    address >> 16,
                    (address >> 8) & 255,
                    address & 255,
                    i / 60_000 % 60,
                    i / 1000 % 60,
                )
            })
            .collect()
    }

    /// Reads two files of a trace both ways, into `refuse_after`.
    fn both_ways(
        logs: [String; 2],
        refuse_after: Option<usize>,
    ) -> [(Result<(), String>, Collected); 2] {
        let dir = tempfile::tempdir().unwrap();
        for (i, text) in logs.iter().enumerate() {
            std::fs::write(dir.path().join(format!("{i}.log")), text).unwrap();
        }
        let config: Config = toml::from_str(
            "paths = [\"0.log\", \"1.log\"]\nformat = \"combined\"\nkey_field = \"remote_addr\"",
        )
        .unwrap();
        let files = config.files(dir.path()).unwrap();
        let read = |threaded: bool| {
            let mut collected = Collected {
                refuse_after,
                ..Collected::default()
            };
            let read = if threaded {
                config.read_files_threaded(&files, &mut collected)
            } else {
                config.read_files(&files, &mut collected)
            };
            (read.map_err(|err| err.to_string()), collected)
        };
        [read(false), read(true)]
    }

    #[test]
    fn only_a_large_plain_regular_file_may_be_read_on_a_thread() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.log");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Opened plainly, a FIFO waits for a writer: this answers at once.
        assert!(!Config::read_threaded(std::slice::from_ref(&fifo)));
        assert!(!Config::read_threaded(&[PathBuf::from("-")]));
        let mut gzip = vec![0u8; THREADED_FROM as usize];
        gzip[..2].copy_from_slice(&[0x1f, 0x8b]);
        std::fs::write(dir.path().join("a.log.gz"), &gzip).unwrap();
        assert!(!Config::read_threaded(&[dir.path().join("a.log.gz")]));
        std::fs::write(dir.path().join("small.log"), vec![b'x'; 1 << 20]).unwrap();
        assert!(!Config::read_threaded(&[dir.path().join("small.log")]));
        // A large plain file waits for nothing either (whether a core is
        // free for it is the machine's to say).
        std::fs::write(dir.path().join("large.log"), vec![b'x'; THREADED_FROM as usize]).unwrap();
        let _ = Config::read_threaded(&[dir.path().join("large.log"), fifo]);
    }

    #[test]
    fn a_thread_hands_on_the_rows_names_and_files_read_directly() {
        // More distinct addresses than are named, over several hand-overs.
        let [direct, threaded] = both_ways([log(30_000, 25_000, None), log(5_000, 300, None)], None);
        assert_eq!(direct.0, Ok(()));
        assert_eq!(direct.1.rows.len(), 35_000);
        assert_eq!(direct.1.files.len(), 2);
        let named = direct.1.rows.iter().filter(|(_, name)| name.is_some()).count();
        assert_eq!(named, NAMED_KEYS);
        assert_eq!(direct.1.files[0].2, (30_000 / 7 + 1, 30_000), "429s counted");
        assert!(threaded == direct, "read on a thread: {:?}, {} rows", threaded.0, threaded.1.rows.len());
    }

    /// A log written to while it is read (the writer's steps taken from
    /// the reader's first row, not from timing): burstsim read the file up
    /// to its length when opened, and says the file grew — not that the
    /// line the writer had only begun is bad, nor that the file changed
    /// when it is merely longer. A log that ends mid-line without a writer
    /// is refused at that line, which it says is the last and unbroken.
    #[test]
    fn a_log_still_being_written_is_refused_for_growing_not_for_its_cut_line() {
        struct Writer<'a> {
            path: &'a Path,
            then: &'a [u8],
            rows: usize,
        }
        impl ReadInto for Writer<'_> {
            fn row(&mut self, _: ReadRow, _: impl FnOnce() -> Option<String>) -> Result<(), FieldError> {
                if self.rows == 0 {
                    let mut file = std::fs::File::options().append(true).open(self.path).unwrap();
                    std::io::Write::write_all(&mut file, self.then).unwrap();
                }
                self.rows += 1;
                Ok(())
            }
            fn file(&mut self, _: FileRead) -> Result<(), FieldError> {
                Ok(())
            }
        }
        let whole = log(3, 3, None);
        let last = whole.lines().last().unwrap();
        let cut = &whole[..whole.len() - last.len() + 20];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        let config: Config =
            toml::from_str("path = \"0.log\"\nformat = \"combined\"\nkey_field = \"remote_addr\"").unwrap();
        let files = config.files(dir.path()).unwrap();
        // (written before, appended at the first row, what it says)
        for (before, then, says) in [
            (cut, &whole[cut.len()..], "0.log: the file grew since burstsim opened it (a log still being written)"),
            (&whole[..], &whole[..], "0.log: the file grew since burstsim opened it"),
            (cut, "", "0.log:3: "),
        ] {
            std::fs::write(&path, before).unwrap();
            let mut writer = Writer { path: &path, then: then.as_bytes(), rows: 0 };
            let err = config.read_files(&files, &mut writer).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
            let unbroken = "it is the file's last line and has no line break";
            assert_eq!(err.contains(unbroken), then.is_empty(), "{err}");
            assert!(!err.contains("changed after"), "{err}");
        }
    }

    #[test]
    fn a_bad_line_read_on_a_thread_fails_after_the_rows_before_it() {
        let [direct, threaded] = both_ways([log(20_000, 100, None), log(20_000, 100, Some(12_345))], None);
        let err = direct.0.clone().unwrap_err();
        assert!(err.contains("1.log:12346"), "{err}");
        assert_eq!(direct.1.rows.len(), 32_345);
        assert!(threaded == direct, "read on a thread: {:?}, {} rows", threaded.0, threaded.1.rows.len());
    }

    #[test]
    fn a_refusal_stops_the_reading_thread_without_waiting_for_it_to_finish() {
        // The thread fills the channel long before the refusal is seen: it
        // must find it closed rather than wait for room forever.
        let [direct, threaded] = both_ways([log(60_000, 100, None), log(60_000, 100, None)], Some(10));
        assert_eq!(direct.0, Err("refused".to_string()));
        assert_eq!(direct.1.rows.len(), 10);
        assert!(threaded == direct, "read on a thread: {:?}, {} rows", threaded.0, threaded.1.rows.len());
    }
}
