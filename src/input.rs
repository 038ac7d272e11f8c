//! Files a user names, opened once and safely: without blocking (a FIFO in
//! place of a file would otherwise hang), refused unless the opened handle is
//! a regular file, and read no further than a stated limit.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::Path;

/// The largest scenario file read (16 MiB).
pub const MAX_SCENARIO_BYTES: u64 = 16 << 20;

/// Opens `path` for reading if, once open, it is a regular file.
pub fn open_regular(path: &Path) -> io::Result<(File, Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO for reading waits for a writer; this does not.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    // Checked on the handle, not the path, so nothing can be swapped in between.
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(io::Error::other("it is a folder, not a file"));
    }
    if !meta.is_file() {
        return Err(io::Error::other(
            "it is not a regular file (a device, a pipe or a socket could be read forever)",
        ));
    }
    Ok((file, meta))
}

/// Reads the regular file at `path` as UTF-8, refusing one over `max_bytes`.
pub fn read_text(path: &Path, max_bytes: u64) -> io::Result<String> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > max_bytes {
        return Err(too_large(meta.len(), max_bytes));
    }
    let mut text = String::new();
    // The file may grow after the check: read one byte past the limit to see.
    file.take(max_bytes + 1).read_to_string(&mut text)?;
    if text.len() as u64 > max_bytes {
        return Err(too_large(text.len() as u64, max_bytes));
    }
    Ok(text)
}

fn too_large(len: u64, max: u64) -> io::Error {
    io::Error::other(format!(
        "it holds {len} bytes or more, over the limit of {max} bytes for this kind of file"
    ))
}

/// Shortens a user's value for an error message: at most `max` characters,
/// the cut marked with how much was left out.
pub fn quote_at_most(value: &str, max: usize) -> String {
    match value.char_indices().nth(max) {
        None => value.to_string(),
        Some((cut, _)) => format!("{}… ({} more bytes)", &value[..cut], value.len() - cut),
    }
}

/// An error message with every line cut to a few hundred characters and its
/// control characters escaped: the last guard against a hostile value quoted
/// whole (a 100 MB name) or an escape sequence reaching the terminal.
pub fn shorten_message(message: &str) -> String {
    const LONGEST_LINE: usize = 400;
    let lines: Vec<String> = message
        .lines()
        .map(|line| escape_controls(&quote_at_most(line, LONGEST_LINE)))
        .collect();
    lines.join("\n")
}

/// `text` with every control character but tab and line feed shown as
/// `\u{1b}`: text from a user's file (a scenario comment, an nginx.conf, a log
/// line) never moves the cursor, retitles the window, clears the screen or
/// writes the clipboard (OSC 52) of whoever reads the message.
pub fn escape_controls(text: &str) -> String {
    if !text.chars().any(is_escaped) {
        return text.to_string();
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_escaped(c) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    shown
}

fn is_escaped(c: char) -> bool {
    c.is_control() && c != '\t' && c != '\n'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_fifo_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = open_regular(&fifo).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn refuses_devices_folders_and_files_over_the_limit() {
        for (path, expected) in [("/dev/zero", "not a regular file"), ("/tmp", "folder")] {
            let err = read_text(Path::new(path), 10).unwrap_err().to_string();
            assert!(err.contains(expected), "{path}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big");
        std::fs::write(&file, "x".repeat(11)).unwrap();
        assert!(
            read_text(&file, 10)
                .unwrap_err()
                .to_string()
                .contains("limit of 10 bytes")
        );
        assert_eq!(read_text(&file, 11).unwrap().len(), 11);
    }

    #[test]
    fn escapes_terminal_control_sequences_and_keeps_tabs_and_lines() {
        let hostile = "a\u{1b}]52;c;aGk=\u{7}b\u{1b}[2J\r\u{9b}c\td\ne";
        assert_eq!(
            escape_controls(hostile),
            "a\\u{1b}]52;c;aGk=\\u{7}b\\u{1b}[2J\\u{d}\\u{9b}c\td\ne"
        );
        assert_eq!(
            shorten_message("line 1: \u{1b}[31mred\nline 2"),
            "line 1: \\u{1b}[31mred\nline 2"
        );
        assert_eq!(escape_controls("plain é ✓"), "plain é ✓");
    }

    #[test]
    fn quotes_at_most_the_given_number_of_characters() {
        assert_eq!(quote_at_most("short", 10), "short");
        assert_eq!(quote_at_most(&"é".repeat(300), 2), "éé… (596 more bytes)");
    }
}
