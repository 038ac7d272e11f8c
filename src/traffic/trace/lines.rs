//! A log's lines, each handed out in place: no allocation per line (a
//! `read_line` into a `String` copied every byte once more). What is read
//! is checked to be UTF-8 once, up to its last line break, rather than
//! line by line (a call per line was a seventh of a log's reading), and
//! becomes the text the lines are handed out from without a copy: the read
//! buffer itself turns into that `String`, and the last text's bytes become
//! the next read buffer (copying every byte into the text was about a
//! twelfth of the reading thread's time). The last line stays readable
//! until the next is read, for the few rows whose key's text is kept.

use super::*;

/// Lines read from `source` (a trace's capped text).
pub(super) struct LineReader<R = Capped> {
    source: R,
    /// The bytes read but not yet in `text`: `..end`. Past `end`, bytes of
    /// an earlier text, there to be read over without being cleared first.
    buffer: Vec<u8>,
    end: usize,
    /// How far no line break was found (so a long line is searched once).
    searched: usize,
    /// Whole lines, checked, each with its break: handed out from `at`.
    text: String,
    at: usize,
    /// Whether the line after `text` is not UTF-8 (refused once the lines
    /// before it are handed out).
    bad: bool,
    /// The last line handed out, its break left out.
    line: (usize, usize),
    done: bool,
    /// Whether the file's first text was made (its byte-order mark, if
    /// it has one, then left out of its first line).
    begun: bool,
    /// Whether the last line handed out ended the text without a line break.
    unbroken: bool,
}

impl<R: Read> LineReader<R> {
    pub(super) fn new(source: R) -> LineReader<R> {
        LineReader {
            source,
            buffer: vec![0; 2 * BUFFER_BYTES],
            end: 0,
            searched: 0,
            text: String::with_capacity(2 * BUFFER_BYTES),
            at: 0,
            bad: false,
            line: (0, 0),
            done: false,
            begun: false,
            unbroken: false,
        }
    }

    /// What the lines are read from.
    pub(super) fn get_mut(&mut self) -> &mut R {
        &mut self.source
    }

    /// Reads the next line (without its line break); `None` at the end.
    /// Text that is not UTF-8 is an error, as `read_line` made it.
    pub(super) fn advance(&mut self) -> std::io::Result<Option<&str>> {
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.text.as_bytes()[self.at..]) {
                let (line, end) = (self.at, self.at + at);
                (self.line, self.at) = ((line, end), end + 1);
                return Ok(Some(&self.text[line..end]));
            }
            // Every line of `text` is handed out.
            if self.bad {
                return Err(not_utf8());
            }
            if self.take_lines() {
                continue;
            }
            if self.done {
                if self.end == 0 {
                    return Ok(None);
                }
                // The last line, without a break.
                let mut last =
                    std::str::from_utf8(&self.buffer[..self.end]).map_err(|_| not_utf8())?;
                if !std::mem::replace(&mut self.begun, true) {
                    last = last.strip_prefix(BOM).unwrap_or(last);
                }
                self.text.clear();
                self.text.push_str(last);
                (self.end, self.searched) = (0, 0);
                (self.line, self.at) = ((0, self.text.len()), self.text.len());
                self.unbroken = true;
                return Ok(Some(&self.text));
            }
            self.fill()?;
        }
    }

    /// The last line read (without its line break).
    pub(super) fn line(&self) -> &str {
        &self.text[self.line.0..self.line.1]
    }

    /// Whether the last line read ends the text without a line break
    /// after it (as a line a writer is still writing does).
    pub(super) fn unbroken(&self) -> bool {
        self.unbroken
    }

    /// Makes the whole lines read the text, checked, and the last text's
    /// bytes the buffer, what follows the lines at its front; whether there
    /// was a line.
    fn take_lines(&mut self) -> bool {
        let unread = &self.buffer[self.searched..self.end];
        let Some(last) = memchr::memrchr(b'\n', unread) else {
            self.searched = self.end;
            return false;
        };
        let cut = self.searched + last + 1;
        let rest = self.end - cut;
        let mut next = std::mem::take(&mut self.text).into_bytes();
        if next.len() < rest {
            next.resize(rest, 0);
        }
        next[..rest].copy_from_slice(&self.buffer[cut..self.end]);
        let mut lines = std::mem::replace(&mut self.buffer, next);
        lines.truncate(cut);
        self.text = String::from_utf8(lines).unwrap_or_else(|err| {
            // Up to the first byte that is not UTF-8: the lines before its
            // line are handed out, and that line, its break not in `text`,
            // is refused.
            self.bad = true;
            let valid = err.utf8_error().valid_up_to();
            let mut bytes = err.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        });
        (self.at, self.line) = (0, (0, 0));
        (self.end, self.searched) = (rest, 0);
        if !std::mem::replace(&mut self.begun, true) && self.text.starts_with(BOM) {
            self.at = BOM.len_utf8();
        }
        true
    }

    /// Reads more (at most `BUFFER_BYTES` at once, as the source caps a
    /// row by what was read since it began), first growing the buffer if
    /// that much does not fit past what it holds: it then holds a line
    /// longer than it, or a text shorter than the last read.
    fn fill(&mut self) -> std::io::Result<()> {
        if self.end + BUFFER_BYTES > self.buffer.len() {
            self.buffer.resize(self.end + BUFFER_BYTES, 0);
        }
        let n = loop {
            match self.source.read(&mut self.buffer[self.end..self.end + BUFFER_BYTES]) {
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                read => break read?,
            }
        };
        self.end += n;
        self.done = n == 0;
        Ok(())
    }
}

/// The byte-order mark some editors and Windows tools write at the start
/// of a UTF-8 file: not text of its first line (in a combined log it
/// would be part of the first client's address: a key of its own).
const BOM: char = '\u{feff}';

fn not_utf8() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "stream did not contain valid UTF-8",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out at most `step` bytes a read, as a pipe or a decoder may.
    struct Trickle<'a> {
        text: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.text.len());
            buf[..n].copy_from_slice(&self.text[..n]);
            self.text = &self.text[n..];
            Ok(n)
        }
    }

    fn read_all(text: &[u8], step: usize) -> std::io::Result<Vec<String>> {
        let mut reader = LineReader::new(Trickle { text, step });
        let mut lines = Vec::new();
        while let Some(line) = reader.advance()? {
            lines.push(line.to_string());
            assert_eq!(reader.line(), lines[lines.len() - 1]);
        }
        Ok(lines)
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// The lines `BufRead::lines` gives, across reads of any size and
        /// lines longer than the buffer (a CR before a break is left to the
        /// rows' trimming, so it is taken off here).
        #[test]
        fn lines_are_the_text_between_line_breaks(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => "[ -~é€]{0,40}",
                    1 => (0usize..3).prop_map(|n| "x".repeat(n * BUFFER_BYTES + 7)),
                ],
                0..40,
            ),
            last_break: bool,
            crlf: bool,
            step in proptest::prop_oneof![1usize..9, proptest::strategy::Just(BUFFER_BYTES)],
        ) {
            let mut text = lines.join(if crlf { "\r\n" } else { "\n" });
            if last_break && !lines.is_empty() {
                text.push('\n');
            }
            let expected: Vec<String> = std::io::BufRead::lines(text.as_bytes())
                .map(Result::unwrap)
                .collect();
            let got: Vec<String> = read_all(text.as_bytes(), step)?
                .into_iter()
                .map(|line| line.strip_suffix('\r').map_or(line.clone(), str::to_string))
                .collect();
            proptest::prop_assert_eq!(got, expected);
        }
    }

    proptest::proptest! {
        /// A line that is not UTF-8 (a stray byte, or a character cut
        /// short), anywhere in text read in pieces of any size: every line
        /// before it is handed out, then it is refused.
        #[test]
        fn the_lines_before_one_that_is_not_utf8_are_handed_out_first(
            lines in proptest::collection::vec("[ -~é€]{0,40}", 1..60),
            long in 0usize..3,
            bad in 0usize..60,
            cut_short: bool,
            step in proptest::prop_oneof![1usize..9, proptest::strategy::Just(BUFFER_BYTES)],
        ) {
            let mut lines = lines;
            lines.push("y".repeat(long * BUFFER_BYTES + 3));
            let bad = bad % lines.len();
            let mut text = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                text.extend_from_slice(line.as_bytes());
                if i == bad {
                    // Half of "é", or a byte that starts nothing.
                    text.extend_from_slice(if cut_short { b"\xc3" } else { b"\xff" });
                }
                text.push(b'\n');
            }
            let mut reader = LineReader::new(Trickle { text: &text, step });
            for line in &lines[..bad] {
                proptest::prop_assert_eq!(reader.advance()?, Some(line.as_str()));
            }
            let err = reader.advance().unwrap_err();
            proptest::prop_assert_eq!(err.to_string(), "stream did not contain valid UTF-8");
        }
    }

    /// Many buffers' worth of lines, their characters cut across reads:
    /// each text's bytes become the next buffer, what is left of the last
    /// line at its front, and no byte of an earlier text shows through.
    #[test]
    fn lines_over_many_buffers_come_out_whole_as_buffers_trade_places() {
        let mut text = String::new();
        for i in 0..40_000usize {
            let width = (i * 7919) % 301;
            let line: String = (0..width).map(|j| ['a', 'é', '€', '7'][(i + j) % 4]).collect();
            text.push_str(&line);
            text.push('\n');
        }
        let expected: Vec<&str> = text.lines().collect();
        for step in [BUFFER_BYTES, BUFFER_BYTES - 1, 4093, 1 << 20] {
            assert_eq!(read_all(text.as_bytes(), step).unwrap(), expected, "reads of {step}");
        }
    }

    /// A byte-order mark at the start of the file is left out of the
    /// first line, however the reads cut it; anywhere else it is text.
    #[test]
    fn a_byte_order_mark_starting_the_file_is_not_part_of_its_first_line() {
        for step in [1, 2, 4, BUFFER_BYTES] {
            assert_eq!(
                read_all("\u{feff}10.0.0.1 a\n\u{feff}b\n".as_bytes(), step).unwrap(),
                ["10.0.0.1 a", "\u{feff}b"],
                "reads of {step}"
            );
            assert_eq!(read_all("\u{feff}one".as_bytes(), step).unwrap(), ["one"]);
            assert_eq!(read_all("\u{feff}\n".as_bytes(), step).unwrap(), [""]);
            assert_eq!(read_all("x\u{feff}".as_bytes(), step).unwrap(), ["x\u{feff}"]);
        }
    }

    #[test]
    fn a_last_line_without_a_break_is_told_apart() {
        for (text, unbroken) in [("a\nb", true), ("a\nb\n", false), ("a\nb\r\n", false)] {
            let mut reader = LineReader::new(text.as_bytes());
            assert_eq!(reader.advance().unwrap(), Some("a"));
            assert!(!reader.unbroken());
            assert!(reader.advance().unwrap().unwrap().starts_with('b'));
            assert_eq!(reader.unbroken(), unbroken, "{text:?}");
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_at_its_line() {
        let mut reader = LineReader::new(&b"fine\n\xff\xfe\nnever\n"[..]);
        assert_eq!(reader.advance().unwrap(), Some("fine"));
        assert_eq!(reader.line(), "fine");
        let err = reader.advance().unwrap_err();
        assert_eq!(err.to_string(), "stream did not contain valid UTF-8");
    }
}
