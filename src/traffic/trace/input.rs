//! Reading a trace file's rows: what identifies the file (so a file changed
//! after its check is caught), and its rows as CSV records,
//! JSON lines or a web server's log.

use super::*;

use crate::error::FieldError;
use std::borrow::Cow;

/// What tells one file's content from another's without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileIdentity {
    pub(super) device: u64,
    pub(super) inode: u64,
    pub(super) len: u64,
    pub(super) modified: Option<SystemTime>,
}

impl FileIdentity {
    pub(super) fn of(meta: &std::fs::Metadata) -> FileIdentity {
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let (device, inode) = (0, 0);
        FileIdentity {
            device,
            inode,
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }

    /// Whether it is the file `before` is, only longer: a log still being
    /// written (or appended to) since.
    pub(super) fn grew_from(&self, before: FileIdentity) -> bool {
        (self.device, self.inode) == (before.device, before.inode) && self.len > before.len
    }
}

/// The most bytes one row (a line, or a CSV record over several lines) may
/// hold: a file with no line break (a JSON array exported on one line) or a
/// row of 10^8 commas is refused as it is read, not once it fills memory.
pub const MAX_ROW_BYTES: u64 = 1 << 20;
/// What the reader holds ahead of the row it is reading.
pub(super) const BUFFER_BYTES: usize = 1 << 16;

pub(super) type Reader = csv::Reader<BufReader<Capped>>;

/// The opened file, read as CSV records or as lines.
pub(super) enum Input {
    Csv {
        reader: Box<Reader>,
        /// Reused for every row, so streaming allocates nothing per row.
        record: csv::ByteRecord,
        /// Whether its lines end in CRLF (see [`record_line`]): known at
        /// the first record, past the header.
        crlf: Option<bool>,
        /// Rows `where` left out so far.
        left_out: u64,
        /// As for lines.
        turned_away: (u64, u64),
        rejected_status: Vec<u16>,
    },
    Lines {
        /// The lines, the last one read still readable.
        reader: Box<LineReader>,
        /// CloudFront's columns by its `#Fields` line (empty: as documented).
        header: Vec<u8>,
        number: u64,
        /// Rows `where` left out so far.
        left_out: u64,
        /// Rows kept so far whose logged status says the real limiter turned
        /// them away, and rows kept whose status was logged at all.
        turned_away: (u64, u64),
        /// The statuses that say so.
        rejected_status: Vec<u16>,
        /// The last time text read and its value.
        times: logs::TimeCache,
    },
}

impl Input {
    /// The line of the last row read.
    pub(super) fn line(&self) -> u64 {
        match self {
            Input::Csv { record, crlf, .. } => record_line(record, crlf.unwrap_or(false)),
            Input::Lines { number, .. } => *number,
        }
    }

    /// Rows kept so far that the log says its own limiter turned away, and
    /// rows kept whose status it logged (a combined log or JSON lines).
    pub(super) fn turned_away(&self) -> (u64, u64) {
        match self {
            Input::Csv { turned_away, .. } | Input::Lines { turned_away, .. } => *turned_away,
        }
    }

    /// Rows `where` left out so far.
    pub(super) fn left_out(&self) -> u64 {
        match self {
            Input::Csv { left_out, .. } | Input::Lines { left_out, .. } => *left_out,
        }
    }

    /// Whether the last line or record read ends the file without a line
    /// break: for CSV, when the csv crate has read all there was and the
    /// last byte is not one.
    pub(super) fn unbroken(&self) -> bool {
        match self {
            Input::Csv { reader, .. } => {
                let capped = reader.get_ref().get_ref();
                capped.ended
                    && reader.position().byte() == capped.handed
                    && capped.last.is_some_and(|byte| byte != b'\n')
            }
            Input::Lines { reader, .. } => reader.unbroken(),
        }
    }

    pub(super) fn capped(&mut self) -> &mut Capped {
        match self {
            Input::Csv { reader, .. } => reader.get_mut().get_mut(),
            Input::Lines { reader, .. } => reader.get_mut(),
        }
    }

    /// Bytes of the file read so far, for a file read as it is stored (a
    /// compressed file's bytes decompressed say nothing of its length).
    pub(super) fn bytes_read(&mut self) -> Option<u64> {
        let capped = self.capped();
        matches!(capped.decoded, Decoded::Plain(_)).then_some(capped.handed)
    }

    pub(super) fn hashing(&mut self) -> &mut Hashing {
        self.capped().decoded.hashing()
    }

    /// Reads what is left of the file and returns the hash of all of it
    /// (after the compressed stream's end too: every byte stored), if it
    /// was opened hashed.
    pub(super) fn drain(&mut self) -> std::io::Result<Option<u64>> {
        self.capped().capped = false;
        match self {
            Input::Csv { reader, .. } => std::io::copy(reader.get_mut(), &mut std::io::sink())?,
            // What it holds read ahead is hashed already.
            Input::Lines { reader, .. } => std::io::copy(reader.get_mut(), &mut std::io::sink())?,
        };
        std::io::copy(self.hashing(), &mut std::io::sink())?;
        Ok(self.hashing().digest())
    }

    /// The key of the row last read as its text names it (trimmed as the
    /// key is), for the few rows whose key is new: read again only then, so
    /// streaming pays nothing for it.
    pub(super) fn key_text(&self, layout: &Layout) -> Option<String> {
        let text = match (self, layout) {
            (Input::Csv { record, .. }, Layout::Csv { key, .. }) => {
                String::from_utf8_lossy(record.get((*key)?)?.trim_ascii()).into_owned()
            }
            (Input::Lines { reader, .. }, Layout::Combined { key, fallback, .. }) => {
                let fields = Combined::parse(reader.line().trim())?;
                logs::or_fallback(fields.get((*key)?)?, fallback.and_then(|f| fields.get(f))).to_string()
            }
            (Input::Lines { reader, header, .. }, Layout::Text { format, key, fallback, .. }) => {
                let fields = format.split(reader.line().trim(), header)?;
                logs::or_fallback(fields[(*key)?].trim(), fallback.map(|f| fields[f].trim())).to_string()
            }
            (Input::Lines { reader, .. }, Layout::Json { key, fallback, .. }) => {
                let [raw, other] = super::json::members(
                    reader.line().trim(),
                    [key.as_deref(), fallback.as_deref()],
                )
                .ok()?;
                match json_present(raw).or_else(|| json_present(other)).map(json_text) {
                    Some(JsonText::String(text)) => text.trim().to_string(),
                    Some(JsonText::Number(text) | JsonText::Other(text)) => text.to_string(),
                    None => "-".to_string(),
                }
            }
            _ => return None,
        };
        Some(crate::input::quote_at_most(&text, KEY_TEXT_CHARS))
    }

    /// The next row's time as written and its key; `None` at the end.
    pub(super) fn next(
        &mut self,
        layout: &Layout,
        path: &Path,
    ) -> Result<Option<(u64, Key)>, FieldError> {
        match (self, layout) {
            (
                Input::Csv {
                    reader,
                    record,
                    crlf,
                    left_out,
                    turned_away,
                    rejected_status,
                },
                Layout::Csv {
                    column,
                    unit,
                    elapsed,
                    key,
                    host,
                    filter,
                    status,
                },
            ) => loop {
                let crlf = *crlf.get_or_insert_with(|| {
                    // Past the header: still on line 1 after a CRLF.
                    let at = reader.position();
                    at.byte() > 0 && at.line() == 1
                });
                let line = record.position().map_or(1, |_| record_line(record, crlf) + 1);
                let more = reader
                    .read_byte_record(record)
                    .map_err(|err| match err.kind() {
                        csv::ErrorKind::Io(io) => format!("{}:{line}: {io}", path.display()),
                        _ => format!("{}: {err}", path.display()),
                    })?;
                if !more {
                    return Ok(None);
                }
                reader.get_mut().get_mut().since_row = 0;
                if let Some((conditions, columns)) = filter.as_deref() {
                    let field = |i: usize| {
                        columns[i]
                            .and_then(|column| record.get(column))
                            .and_then(|bytes| std::str::from_utf8(bytes).ok())
                    };
                    let row = Row {
                        method: field(0),
                        path: field(1),
                        status: field(2),
                        host: field(3),
                    };
                    if !conditions.keeps(&row) {
                        *left_out += 1;
                        continue;
                    }
                }
                let at = || record_line(record, crlf);
                let name = || {
                    let header = reader.byte_headers().ok().and_then(|header| header.get(*column));
                    String::from_utf8_lossy(header.unwrap_or_default()).into_owned()
                };
                let mut time = parse(record, (*column, name), *unit, path, at)?;
                if let Some(took) = *elapsed {
                    let text = |column| {
                        record.get(column).map_or("", |bytes| {
                            std::str::from_utf8(bytes).unwrap_or_default()
                        })
                    };
                    time = started(time, (text(*column), *unit), text(took), "elapsed_field")
                        .map_err(|err| format!("{}:{}: {err}", path.display(), at()))?;
                }
                let key = match *key {
                    Some(column) => parse_key(record, column, path, at)?,
                    None => Key::DEFAULT,
                };
                let key = match *host {
                    Some(column) => key.on_host_of(parse_key(record, column, path, at)?),
                    None => key,
                };
                let logged = status
                    .and_then(|column| record.get(column))
                    .and_then(|bytes| std::str::from_utf8(bytes).ok());
                count_status(turned_away, rejected_status, logged);
                return Ok(Some((time, key)));
            },
            (
                Input::Lines {
                    reader,
                    header,
                    number,
                    left_out,
                    turned_away,
                    rejected_status,
                    times,
                },
                layout,
            ) => loop {
                // The row cap counts what is read from here.
                reader.get_mut().since_row = 0;
                let Some(text) = reader
                    .advance()
                    .map_err(|err| format!("{}:{}: {err}", path.display(), *number + 1))?
                else {
                    return Ok(None);
                };
                *number += 1;
                let text = logs::trim(text);
                if text.is_empty() {
                    continue;
                }
                let at = |fault: LineFault| fault.located(path, *number);
                return match layout {
                    Layout::Combined {
                        key,
                        fallback,
                        host,
                        filter,
                        tail,
                    } => {
                        let fields = Combined::parse_fields(text, *tail).ok_or_else(|| {
                            at(FieldError::new(format!(
                                "{:?} is not a combined log line (ADDR IDENT USER [TIME] \"REQUEST\" STATUS BYTES …)",
                                crate::input::quote_at_most(text, 64)
                            ))
                            .into())
                        })?;
                        if let Some(conditions) = filter {
                            let row = Row::of_request(
                                fields.field("request").unwrap_or_default(),
                                fields.field("status").unwrap_or_default(),
                            );
                            if !conditions.keeps(&row) {
                                *left_out += 1;
                                continue;
                            }
                        }
                        let time = times.combined(fields.time).ok_or_else(|| {
                            // nginx's name for it; the column of its `[`.
                            at(LineFault::in_field(
                                text,
                                fields.time,
                                format!(
                                    "time_local: [{}] is not a time like [10/Oct/2000:13:55:36 -0700]",
                                    crate::input::quote_at_most(fields.time, 64)
                                ),
                            )
                            .before(1))
                        })?;
                        let key = match *key {
                            None => Key::DEFAULT,
                            Some(place) => {
                                let named = fields
                                    .get(place)
                                    .ok_or_else(|| at(no_forwarded_for(text).into()))?;
                                let named = match fallback {
                                    Some(other) if named == "-" => fields
                                        .get(*other)
                                        .ok_or_else(|| at(no_forwarded_for(text).into()))?,
                                    _ => named,
                                };
                                Key::named(named.as_bytes())
                            }
                        };
                        let key = match host.and_then(|at| fields.get(at)) {
                            Some(host) => key.on_host(host.as_bytes()),
                            None => key,
                        };
                        count_status(turned_away, rejected_status, fields.get(logs::STATUS));
                        Ok(Some((time, key)))
                    }
                    Layout::Text { .. } | Layout::Json { .. } => {
                        match other_line(text, layout, (header, times), (left_out, turned_away, rejected_status)) {
                            Ok(None) => continue,
                            row => row.map_err(at),
                        }
                    }
                    Layout::Csv { .. } => unreachable!("CSV is read as records"),
                };
            },
            (Input::Csv { .. }, _) => unreachable!("a CSV layout comes with CSV input"),
        }
    }
}

/// The error of a combined log's line keyed by `$http_x_forwarded_for`
/// that does not have it (out of line: it is never on the hot path).
#[cold]
#[inline(never)]
fn no_forwarded_for(text: &str) -> FieldError {
    FieldError::new(format!(
        "{:?} has no http_x_forwarded_for: the quoted field after the user agent that nginx's main log format ends its lines with (\"$http_x_forwarded_for\"); key by remote_addr, or log it",
        crate::input::quote_at_most(text, 64)
    ))
}

/// A line of a text format's log or a JSON line, as [`Input::next`] reads
/// it: `Ok(None)` for a line that is not a row (a directive, or left out
/// by `where`). Out of line, so that a combined log's loop stays small.
#[inline(never)]
fn other_line(
    text: &str,
    layout: &Layout,
    (header, times): (&mut Vec<u8>, &mut logs::TimeCache),
    (left_out, turned_away, rejected_status): (&mut u64, &mut (u64, u64), &[u16]),
) -> Result<Option<(u64, Key)>, LineFault> {
    match layout {
        Layout::Text {
            format,
            time,
            key,
            fallback,
            host,
            filter,
            status,
        } => {
            if format.is_directive(text) {
                if let Some(columns) = format.header(text) {
                    *header = columns;
                }
                return Ok(None);
            }
            let fields = format.split(text, header).ok_or_else(|| {
                FieldError::new(format!(
                    "{:?} is not a line of {} logs",
                    crate::input::quote_at_most(text, 64),
                    format.format().name()
                ))
            })?;
            if let Some(conditions) = filter
                && !conditions.keeps(&Row::of_text(*format, &fields, *host))
            {
                *left_out += 1;
                return Ok(None);
            }
            let when = format.time(&fields, *time, times).ok_or_else(|| {
                LineFault::in_field(
                    text,
                    format.time_start(&fields, *time),
                    format!(
                        "{}: {:?} is not {}",
                        format.names()[*time],
                        crate::input::quote_at_most(&format.time_text(&fields, *time), 64),
                        format.time_expected()
                    ),
                )
            })?;
            let key = key.map_or(Key::DEFAULT, |at| {
                Key::named(logs::or_fallback(fields[at].trim(), fallback.map(|f| fields[f].trim())).as_bytes())
            });
            let key = match host {
                Some(at) => key.on_host(fields[*at].trim().as_bytes()),
                None => key,
            };
            match format.flagged(&fields) {
                Some(flagged) => {
                    turned_away.1 += 1;
                    turned_away.0 += u64::from(flagged);
                }
                None => count_status(turned_away, rejected_status, Some(fields[*status])),
            }
            Ok(Some((when, key)))
        }
        Layout::Json {
            time,
            unit,
            numbers,
            elapsed,
            key,
            fallback,
            host,
            filter,
            status,
            flag,
        } => match json_row(
            text,
            times,
            (time, elapsed.as_deref()),
            (*unit, *numbers),
            (key.as_deref(), fallback.as_deref(), host.as_deref()),
            (filter.as_deref(), status, *flag),
        ) {
            Ok(None) => {
                *left_out += 1;
                Ok(None)
            }
            Ok(Some((row, Logged::Flag(flagged)))) => {
                turned_away.1 += 1;
                turned_away.0 += u64::from(flagged);
                Ok(Some(row))
            }
            Ok(Some((row, Logged::Status(logged)))) => {
                count_status(turned_away, rejected_status, logged.as_deref());
                Ok(Some(row))
            }
            Err(err) => Err(err),
        },
        Layout::Combined { .. } | Layout::Csv { .. } => {
            unreachable!("read by Input::next")
        }
    }
}

/// A JSON line's time and key, and what it says the gateway did.
pub(super) type JsonRow<'a> = ((u64, Key), Logged<'a>);

/// What a row says its gateway's rate limit did.
pub(super) enum Logged<'a> {
    /// The gateway's own flag (Cloudflare's `EdgeRateLimitAction`): whether
    /// it turned the request away.
    Flag(bool),
    /// The response's status as written, if logged (borrowed from the line
    /// unless it has escapes: nothing allocated per line).
    Status(Option<Cow<'a, str>>),
}

/// `where`, and the JSON fields it reads.
pub(super) type JsonFilter = (Where, [Option<String>; 4]);

/// Counts a kept row whose logged `status` is one of `rejected`.
#[inline]
fn count_status(counts: &mut (u64, u64), rejected: &[u16], status: Option<&str>) {
    if let Some(status) = status.and_then(status_code) {
        counts.1 += 1;
        counts.0 += u64::from(rejected.contains(&status));
    }
}

/// A status as written, as `text.trim().parse::<u16>()` reads it: the
/// three digits of almost every line read without the general parser.
#[inline]
fn status_code(text: &str) -> Option<u16> {
    match *text.as_bytes() {
        [a @ b'0'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => text.trim().parse().ok(),
    }
}

/// The most characters of a key's text kept to name it.
pub(super) const KEY_TEXT_CHARS: usize = 64;

/// The time and key of one JSON line, and its `status` field as written;
/// None when `filter` leaves it out.
pub(super) fn json_row<'a>(
    text: &'a str,
    times: &mut logs::TimeCache,
    (field, elapsed): (&str, Option<&str>),
    (unit, numbers): (Option<Unit>, Unit),
    (key, fallback, host): (Option<&str>, Option<&str>, Option<&str>),
    (filter, status, flag): (Option<&JsonFilter>, &str, Option<&str>),
) -> Result<Option<JsonRow<'a>>, LineFault> {
    // Values as written: a number of epoch seconds goes through the same
    // decimal parser as CSV's time_s, never through a float (which would turn
    // 1764460800.999999999 into 1764460801).
    let no_filter = [None, None, None, None];
    let wanted = filter.map_or(&no_filter, |(_, fields)| fields);
    let mut found = [None; 10];
    super::json::members_into(
        text,
        &[
            Some(field),
            elapsed,
            key,
            host,
            flag,
            Some(status),
            wanted[0].as_deref(),
            wanted[1].as_deref(),
            wanted[2].as_deref(),
            wanted[3].as_deref(),
        ],
        &mut found,
    )
    .map_err(|err| format!("not a JSON object ({err})"))?;
    let [value, took, key_raw, host_raw, flag_raw, status_raw, method, path, status_field, host_field] = found;
    if let Some((conditions, _)) = filter {
        let texts = [method, path, status_field, host_field].map(|raw| raw.map(|raw| json_text(raw).text()));
        let row = Row {
            method: texts[0].as_deref(),
            path: texts[1].as_deref(),
            status: texts[2].as_deref(),
            host: texts[3].as_deref(),
        };
        if !conditions.keeps(&row) {
            return Ok(None);
        }
    }
    let value = value.ok_or_else(|| {
        format!("no field {field:?}; set time_field to the field holding the time")
    })?;
    let (written, unit) = match json_text(value) {
        JsonText::String(text) => (text, unit.unwrap_or(Unit::DateTime)),
        JsonText::Number(text) => (Cow::Borrowed(text), unit.unwrap_or(numbers)),
        JsonText::Other(raw) => {
            return Err(LineFault::in_field(
                text,
                raw,
                format!("{field}: {} is not a time", crate::input::quote_at_most(raw, 64)),
            ));
        }
    };
    let time = match unit {
        // Most lines share their second with the line before.
        Unit::DateTime => times.iso(&written),
        _ => parse_text(&written, unit),
    };
    let mut time = time
        .ok_or_else(|| LineFault::in_field(text, value, format!("{field}: {}", invalid(&written, unit))))?;
    if let Some(name) = elapsed {
        let Some(took) = took.map(|raw| json_text(raw).text()) else {
            return Err(format!("no field {name:?} (elapsed_field)").into());
        };
        time = started(time, (&written, unit), &took, name)?;
    }
    let named = |name: &str, raw: Option<_>, what: &str| match raw.map(json_text) {
        Some(JsonText::String(text)) => Ok(Key::named(text.trim().as_bytes())),
        Some(JsonText::Number(text) | JsonText::Other(text)) => Ok(Key::named(text.as_bytes())),
        None => Err(FieldError::new(format!("no {what} field {name:?}"))),
    };
    // A key member missing or null is absent: the fallback's, if named and
    // present (looked for only then), else the absent key (as a text log's `-`).
    let key = match key {
        None => Key::DEFAULT,
        Some(name) => match json_present(key_raw).or_else(|| json_fallback(text, fallback)) {
            Some(raw) => named(name, Some(raw), "key")?,
            None => Key::named(logs::ABSENT_MEMBER),
        },
    };
    let key = match host {
        None => key,
        Some(name) => key.on_host_of(named(name, host_raw, "host")?),
    };
    let as_text = |raw| json_text(raw).text();
    // The gateway's flag where the row has it: Cloudflare's action, empty
    // when no rate limit acted; "log" and "simulate" let the request through.
    let logged = match flag_raw {
        Some(raw) => {
            let action = as_text(raw);
            let action = action.trim();
            Logged::Flag(
                !action.is_empty()
                    && !["log", "simulate", "null"]
                        .iter()
                        .any(|word| action.eq_ignore_ascii_case(word)),
            )
        }
        None => Logged::Status(status_raw.map(as_text)),
    };
    Ok(Some(((time, key), logged)))
}

/// What is wrong with a line, and where in it: the column (a character,
/// counted from 1) where the field at fault starts, when it is one field.
pub(super) struct LineFault {
    column: Option<usize>,
    error: FieldError,
}

impl LineFault {
    /// A fault in `field`, a part of `line`.
    #[cold]
    pub(super) fn in_field(line: &str, field: &str, message: String) -> LineFault {
        let start = (field.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
        LineFault {
            column: line.get(..start).map(|before| before.chars().count() + 1),
            error: FieldError::new(message),
        }
    }

    /// Its column moved `chars` to the left (to a field's opening bracket).
    pub(super) fn before(mut self, chars: usize) -> LineFault {
        self.column = self.column.map(|column| column.saturating_sub(chars).max(1));
        self
    }

    /// The error as the file's `line` at `path` says it.
    #[cold]
    pub(super) fn located(self, path: &Path, line: u64) -> FieldError {
        match self.column {
            Some(column) => FieldError::new(format!("{}:{line}:{column}: {}", path.display(), self.error)),
            None => FieldError::new(format!("{}:{line}: {}", path.display(), self.error)),
        }
    }
}

impl From<FieldError> for LineFault {
    fn from(error: FieldError) -> LineFault {
        LineFault { column: None, error }
    }
}

impl From<String> for LineFault {
    fn from(message: String) -> LineFault {
        FieldError::new(message).into()
    }
}

/// A member's value unless it is missing or `null`.
fn json_present(raw: Option<&str>) -> Option<&str> {
    raw.filter(|raw| *raw != "null")
}

/// The `key_fallback` member of a line whose key is absent, if present:
/// read again only for such a line, so that the others pay nothing for it.
#[cold]
fn json_fallback<'a>(text: &'a str, fallback: Option<&str>) -> Option<&'a str> {
    let [raw] = super::json::members(text, [Some(fallback?)]).ok()?;
    json_present(raw)
}

/// A JSON value as written in the line.
pub(super) enum JsonText<'a> {
    /// A string, unescaped.
    String(Cow<'a, str>),
    /// A number, its digits as written.
    Number(&'a str),
    /// Anything else, as written.
    Other(&'a str),
}

impl<'a> JsonText<'a> {
    /// Its text: a string's unescaped, anything else's as written.
    pub(super) fn text(self) -> Cow<'a, str> {
        match self {
            JsonText::String(text) => text,
            JsonText::Number(text) | JsonText::Other(text) => Cow::Borrowed(text),
        }
    }
}

pub(super) fn json_text(text: &str) -> JsonText<'_> {
    match text.as_bytes().first() {
        Some(b'"') => super::json::string(text).map_or(JsonText::Other(text), JsonText::String),
        Some(b'-' | b'0'..=b'9') => JsonText::Number(text),
        _ => JsonText::Other(text),
    }
}

/// The error of a file that changed while burstsim read it, or since;
/// `grew` when it is the same file, only longer.
pub(super) fn changed(path: &Path, grew: bool) -> String {
    if grew {
        format!(
            "{}: the file grew since burstsim opened it (a log still being written); nothing was written: replay a copy of it, or a log already rotated",
            path.display()
        )
    } else {
        format!(
            "{}: the file changed after burstsim checked it; nothing was written, run again once it is stable",
            path.display()
        )
    }
}

/// Fails unless the bytes read, to the end, are those checked at first.
pub(super) fn verify(input: &mut Input, checksum: Option<u64>, path: &Path) -> Result<(), FieldError> {
    match input.drain() {
        Ok(Some(hash)) if Some(hash) == checksum => Ok(()),
        Ok(_) => Err(changed(path, false).into()),
        Err(err) => Err(format!("{}: {err}", path.display()).into()),
    }
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        /// Three digits are read as the general parser reads them, and
        /// everything else by it.
        #[test]
        fn a_status_reads_as_the_general_parser_reads_it(text in "[0-9 +a]{0,5}|[0-9]{3}") {
            proptest::prop_assert_eq!(super::status_code(&text), text.trim().parse::<u16>().ok());
        }
    }
}
