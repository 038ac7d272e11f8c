//! Which files a trace replays and how each is opened: `path` (a file, a
//! name pattern, or `-` for standard input) or `paths`; each file's part as
//! its check found it.

use super::*;

/// One file of a trace, as its check found it.
#[derive(Clone, Debug)]
pub(super) struct Part {
    /// The file to open (`-` for standard input).
    pub(super) path: PathBuf,
    /// The file as checked; a replay refuses any other.
    pub(super) identity: FileIdentity,
    /// A hash of every byte as checked; a replay that reads other bytes
    /// fails. Taken only for replays that read the file again (see
    /// [`Config::hash_parts`]): `None` while its checked rows are kept.
    pub(super) checksum: Option<u64>,
    pub(super) layout: Layout,
}

/// The most files one trace may name (by a list or a pattern).
const MAX_FILES: usize = 10_000;

impl Config {
    /// `path = "-"`: the trace is standard input, read once.
    pub(super) fn is_stdin(&self) -> bool {
        self.paths.is_none() && self.path.as_os_str() == "-"
    }

    /// The trace's file (or files) as errors about all of it name it.
    pub(super) fn shown(&self, base_dir: &Path) -> PathBuf {
        match &self.paths {
            _ if self.is_stdin() => PathBuf::from("<standard input>"),
            Some(paths) if paths.len() > 1 => PathBuf::from(format!(
                "{} (and {} more files)",
                base_dir.join(&paths[0]).display(),
                paths.len() - 1
            )),
            Some(paths) => base_dir.join(paths.first().map_or(Path::new(""), |p| p.as_path())),
            None => base_dir.join(&self.path),
        }
    }

    /// One of its files as errors about it name it.
    pub(super) fn named(file: &Path) -> PathBuf {
        if file == Path::new("-") {
            PathBuf::from("<standard input>")
        } else {
            file.to_path_buf()
        }
    }

    /// The files to replay, in order: `paths` as listed, the files a
    /// pattern in `path` matches (oldest first, as logrotate names them),
    /// `path` itself, or `-` for standard input.
    pub(super) fn files(&self, base_dir: &Path) -> Result<Vec<PathBuf>, FieldError> {
        let given = !self.path.as_os_str().is_empty();
        let files = match (&self.paths, given) {
            (Some(_), true) => {
                return Err(field_error!("paths", "give path or paths, not both"));
            }
            (None, false) => {
                return Err(field_error!(
                    "path",
                    "missing: give the trace's file (path = \"access.log\"), a pattern (\"access.log*\"), several (paths = [\"access.log.1\", \"access.log\"]) or \"-\" for standard input"
                ));
            }
            (Some(paths), false) => {
                if paths.iter().any(|p| p.as_os_str() == "-") {
                    return Err(field_error!("paths", "standard input (\"-\") is a trace of its own: path = \"-\""));
                }
                paths.iter().map(|p| base_dir.join(p)).collect()
            }
            (None, true) if self.is_stdin() => vec![PathBuf::from("-")],
            (None, true) if pattern::is_pattern(&self.path) => {
                pattern::matching(&base_dir.join(&self.path)).map_err(|why| FieldError::at("path", why))?
            }
            (None, true) => vec![base_dir.join(&self.path)],
        };
        if files.is_empty() {
            return Err(field_error!("paths", "lists no file"));
        }
        if files.len() > MAX_FILES {
            return Err(field_error!(
                "path",
                "names {} files; a trace replays at most {MAX_FILES}",
                files.len()
            ));
        }
        Ok(files)
    }

    /// Opens the file once as a regular file and, when it was checked
    /// before, insists it is the same one; its bytes are hashed as they
    /// are read if `hashed`.
    pub(super) fn open(
        &self,
        file: &Path,
        expected: Option<FileIdentity>,
        hashed: bool,
    ) -> Result<(Input, FileIdentity), FieldError> {
        let path = Self::named(file);
        let (file, identity) = Self::stored(file, expected)?;
        let decoded = Decoded::of(Hashing::new(file.take(identity.len), hashed))
            .map_err(|err| field_error!("path", "cannot replay {}: {err}", path.display()))?;
        let capped = Capped {
            decoded,
            since_row: 0,
            capped: true,
            handed: 0,
            last: None,
            ended: false,
        };
        let input = match self.format {
            Format::Csv => Input::Csv {
                reader: Box::new(
                    csv::ReaderBuilder::new()
                        .flexible(true)
                        .from_reader(BufReader::with_capacity(BUFFER_BYTES, capped)),
                ),
                record: csv::ByteRecord::new(),
                crlf: None,
                left_out: 0,
                turned_away: (0, 0),
                rejected_status: self.rejected_status.clone().unwrap_or_else(|| vec![429]),
            },
            _ => {
                Input::Lines {
                    header: Vec::new(),
                    reader: Box::new(LineReader::new(capped)),
                    number: 0,
                    left_out: 0,
                    turned_away: (0, 0),
                    rejected_status: self.rejected_status.clone().unwrap_or_else(|| vec![429]),
                    times: logs::TimeCache::default(),
                }
            }
        };
        Ok((input, identity))
    }

    /// Opens one of its files again, insisting it is the one checked, past
    /// its header; and how errors name it.
    pub(super) fn reopen(&self, part: &Part) -> Result<(Input, PathBuf), FieldError> {
        let (mut input, _) = self.open(&part.path, Some(part.identity), true)?;
        let named = Self::named(&part.path);
        self.locate(&named, &mut input)?;
        Ok((input, named))
    }

    /// The file as stored (standard input spooled) and its identity, which
    /// must be `expected` when given.
    fn stored(
        file: &Path,
        expected: Option<FileIdentity>,
    ) -> Result<(Stored, FileIdentity), FieldError> {
        let path = Self::named(file);
        let (file, meta) = if file == Path::new("-") {
            let file = spooled_stdin().map_err(|err| FieldError::at("path", err))?;
            let meta = file
                .metadata()
                .map_err(|err| field_error!("path", "cannot replay {}: {err}", path.display()))?;
            (Stored::Spool { file, at: 0 }, meta)
        } else {
            let (file, meta) = crate::input::open_regular(&path)
                .map_err(|err| field_error!("path", "cannot replay {}: {err}", path.display()))?;
            (Stored::File(file), meta)
        };
        let identity = FileIdentity::of(&meta);
        if let Some(expected) = expected
            && expected != identity
        {
            return Err(changed(&path, identity.grew_from(expected)).into());
        }
        Ok((file, identity))
    }

    /// Hashes every byte of each part's file as stored, read again, for
    /// replays that read the files rather than the checked rows (a trace
    /// past [`CHECKED_BYTES`], or rows that could not be written). The
    /// check itself does not hash: most traces' rows are kept, and the
    /// hash was 2% of a large log's run (measured: 0.98× the time without
    /// it). A file must still be the one checked, by its identity, before
    /// and after.
    pub(super) fn hash_parts(parts: &mut [Part]) -> Result<(), FieldError> {
        for part in parts {
            let named = Self::named(&part.path);
            let (file, identity) = Self::stored(&part.path, Some(part.identity))?;
            let mut hashing = Hashing::new(file.take(identity.len), true);
            std::io::copy(&mut hashing, &mut std::io::sink())
                .map_err(|err| format!("{}: {err}", named.display()))?;
            if let Some(change) = hashing.change(identity, &named) {
                return Err(change.into());
            }
            part.checksum = hashing.digest();
        }
        Ok(())
    }
}
