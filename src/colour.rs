//! Colour on a terminal: verdicts in red or green, `error:` and `warning:`
//! prefixes. `--color auto|always|never`; in auto, only on a terminal and
//! only while `NO_COLOR` is unset or empty (no-color.org).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};

/// When to colour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum When {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always, even into a pipe or a file.
    Always,
    /// Never.
    Never,
}

/// The choice for this process, set once by `main`: 0 auto, 1 always, 2 never.
static CHOICE: AtomicU8 = AtomicU8::new(0);

/// Sets the choice for this process.
pub fn set(when: When) {
    CHOICE.store(when as u8, Ordering::Relaxed);
}

fn enabled(is_terminal: bool) -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    }
}

/// Whether what goes to standard output is coloured.
pub fn stdout() -> bool {
    enabled(std::io::stdout().is_terminal())
}

/// Whether what goes to standard error is coloured.
pub fn stderr() -> bool {
    enabled(std::io::stderr().is_terminal())
}

const RED: &str = "1;31";
const GREEN: &str = "32";
const YELLOW: &str = "1;33";

fn paint(text: &str, code: &str) -> String {
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// `error: ` in bold red when standard error is coloured.
pub fn error_prefix() -> String {
    if stderr() {
        paint("error:", RED) + " "
    } else {
        "error: ".into()
    }
}

/// `warning: ` in bold yellow when standard error is coloured.
pub fn warning_prefix() -> String {
    if stderr() {
        paint("warning:", YELLOW) + " "
    } else {
        "warning: ".into()
    }
}

/// A rendered table or `check` report with its verdicts coloured: OVER,
/// DROPS and ✗ red; ok and ✓ green. Names never hold spaces, so the
/// space-delimited words are verdicts; the table's layout is already done,
/// and escape codes take no width on a terminal.
pub fn verdicts(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut line = format!(" {line} ");
        for (word, code) in [
            ("OVER", RED),
            ("DROPS", RED),
            ("✗", RED),
            ("ok", GREEN),
            ("ok:", GREEN),
            ("✓", GREEN),
        ] {
            line = line.replace(&format!(" {word} "), &format!(" {} ", paint(word, code)));
        }
        out.push_str(&line[1..line.len() - 1]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_verdict_words_only() {
        let text = "steady  fixed-1s  ok 108/s\nedge    fixed-1s  OVER 200/s";
        let coloured = verdicts(text);
        assert_eq!(
            coloured,
            "steady  fixed-1s  \x1b[32mok\x1b[0m 108/s\nedge    fixed-1s  \x1b[1;31mOVER\x1b[0m 200/s"
        );
        assert_eq!(verdicts("broken-window ok-ish"), "broken-window ok-ish");
    }
}
