//! A log's lines, each handed out in place in one buffer: no copy and no
//! allocation per line (a `read_line` into a `String` copied every byte
//! once more). The last line stays readable until the next is read, for
//! the few rows whose key's text is kept.

use super::*;

/// Lines read from `source` (a trace's capped text).
pub(super) struct LineReader<R = Capped> {
    source: R,
    buffer: Vec<u8>,
    /// The bytes of `buffer` read but not handed out yet: `start..end`.
    start: usize,
    end: usize,
    /// How far past `start` no line break was found (so a long line is
    /// searched once).
    searched: usize,
    /// The last line handed out, its break left out.
    line: (usize, usize),
    done: bool,
}

impl<R: Read> LineReader<R> {
    pub(super) fn new(source: R) -> LineReader<R> {
        LineReader {
            source,
            buffer: vec![0; 4 * BUFFER_BYTES],
            start: 0,
            end: 0,
            searched: 0,
            line: (0, 0),
            done: false,
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
            let unread = &self.buffer[self.start + self.searched..self.end];
            if let Some(at) = memchr::memchr(b'\n', unread) {
                let end = self.start + self.searched + at;
                return self.hand_out(end, end + 1);
            }
            self.searched = self.end - self.start;
            if self.done {
                if self.start == self.end {
                    return Ok(None);
                }
                return self.hand_out(self.end, self.end);
            }
            self.fill()?;
        }
    }

    /// The last line read (without its line break).
    pub(super) fn line(&self) -> &str {
        // Checked when handed out.
        std::str::from_utf8(&self.buffer[self.line.0..self.line.1]).unwrap_or_default()
    }

    /// Hands out `start..end` as the next line, checked once; the next
    /// starts at `next`.
    fn hand_out(&mut self, end: usize, next: usize) -> std::io::Result<Option<&str>> {
        let line = self.start;
        self.line = (line, end);
        (self.start, self.searched) = (next, 0);
        std::str::from_utf8(&self.buffer[line..end])
            .map(Some)
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "stream did not contain valid UTF-8",
                )
            })
    }

    /// Reads more (at most `BUFFER_BYTES` at once, as the source caps a
    /// row by what was read since it began), first moving what is unread
    /// to the front, or growing the buffer for a line longer than it.
    fn fill(&mut self) -> std::io::Result<()> {
        if self.end + BUFFER_BYTES > self.buffer.len() {
            if self.start > 0 {
                self.buffer.copy_within(self.start..self.end, 0);
                (self.end, self.start, self.line) = (self.end - self.start, 0, (0, 0));
            }
            if self.end + BUFFER_BYTES > self.buffer.len() {
                self.buffer.resize(self.end + BUFFER_BYTES, 0);
            }
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

    #[test]
    fn text_that_is_not_utf8_is_refused_at_its_line() {
        let mut reader = LineReader::new(&b"fine\n\xff\xfe\nnever\n"[..]);
        assert_eq!(reader.advance().unwrap(), Some("fine"));
        assert_eq!(reader.line(), "fine");
        let err = reader.advance().unwrap_err();
        assert_eq!(err.to_string(), "stream did not contain valid UTF-8");
    }
}
