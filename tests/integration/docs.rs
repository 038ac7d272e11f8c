//! Every console block in README.md and docs/*.md that runs burstsim shows
//! what the binary prints: each block's command is run as written (`cargo run
//! --release --` is the binary) by bash, in a fresh folder holding a copy of
//! `scenarios/`, and its output — standard output and error together, as a
//! terminal shows them — must be the block's text. A change to a model moves
//! the documented figures with it, or this test fails.
//!
//! `BURSTSIM_BLESS=1 cargo test --test integration docs::` writes the printed output back
//! into the blocks; review the diff as a reviewer reads the docs.
//!
//! Blocks that cannot run here are listed in `SKIPPED` with the reason; any
//! other console block must run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands (by a piece of their first line) not run here, and why.
const SKIPPED: [(&str, &str); 5] = [
    (
        "burstsim run bad.toml",
        "bad.toml is the reader's own broken file; tests/integration/cli.rs checks the error's form",
    ),
    (
        "redis-server",
        "needs a Redis server and wall-clock timing; tests/integration/live_redis.rs runs the live replay",
    ),
    (
        "scripts/bench.sh",
        "timings of this machine, not figures of a model; docs/performance.md says when they were taken",
    ),
    (
        "burstsim probe",
        "needs a running gateway and wall-clock timing; tests/integration/probe_real.rs probes nginx, HAProxy and Express",
    ),
    (
        "burstsim merge parts/",
        "needs the shard folders the text describes; tests/integration/sweep.rs checks each refusal",
    ),
];

/// A console block: where it is, its command line and what it shows.
struct Block {
    file: PathBuf,
    /// The byte range of the shown output in the file.
    shown: std::ops::Range<usize>,
    command: String,
    line: usize,
}

fn documents() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir("docs")
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The console blocks of `file` whose first line is a single `$ ` command.
fn blocks(file: &Path, text: &str) -> Vec<Block> {
    const FENCE: &str = "```console\n";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(FENCE) {
        let start = from + at + FENCE.len();
        let end = start + text[start..].find("```").expect("a closing fence");
        from = end + 3;
        let body = &text[start..end];
        let Some(first) = body.lines().next() else {
            continue;
        };
        let Some(command) = first.strip_prefix("$ ") else {
            continue;
        };
        let shown_start = start + first.len() + 1;
        // A block with a second command is a transcript, not one output.
        let second = text[shown_start..end].lines().any(|l| l.starts_with("$ "));
        found.push(Block {
            file: file.to_path_buf(),
            shown: shown_start..end,
            command: if second {
                String::new()
            } else {
                command.to_string()
            },
            line: text[..start].lines().count(),
        });
    }
    found
}

/// Copies `from` into `to`, folders and files.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// What `command` prints, run in a fresh folder with a copy of `scenarios/`.
fn printed(command: &str) -> String {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_burstsim"));
    let dir = tempfile::tempdir().unwrap();
    copy_tree(Path::new("scenarios"), &dir.path().join("scenarios"));
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let command = command.replace("cargo run --release --", "burstsim");
    let output = Command::new("bash")
        .arg("-c")
        .arg(format!("{{ {command}; }} 2>&1"))
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("CI")
        .env("NO_COLOR", "1")
        .output()
        .expect("bash runs");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn every_console_block_shows_what_burstsim_prints() {
    let bless = std::env::var_os("BURSTSIM_BLESS").is_some();
    let (mut checked, mut differ) = (0, Vec::new());
    for file in documents() {
        let mut text = fs::read_to_string(&file).unwrap();
        let mut edits = Vec::new();
        for block in blocks(&file, &text) {
            if block.command.is_empty()
                || SKIPPED
                    .iter()
                    .any(|(piece, _)| block.command.contains(piece))
            {
                continue;
            }
            assert!(
                block.command.starts_with("burstsim ")
                    || block.command.starts_with("cargo run --release -- ")
                    || block.command.starts_with("cd scenarios/"),
                "{}:{}: `{}` is neither a burstsim command nor in SKIPPED",
                block.file.display(),
                block.line,
                block.command
            );
            let printed = printed(&block.command);
            checked += 1;
            if text[block.shown.clone()] != printed {
                differ.push(format!(
                    "{}:{}: `{}`\n--- shown\n{}--- printed\n{}",
                    block.file.display(),
                    block.line,
                    block.command,
                    &text[block.shown.clone()],
                    printed
                ));
                edits.push((block.shown, printed));
            }
        }
        if bless && !edits.is_empty() {
            for (range, printed) in edits.into_iter().rev() {
                text.replace_range(range, &printed);
            }
            fs::write(&file, text).unwrap();
        }
    }
    assert!(checked >= 12, "only {checked} console blocks ran");
    assert!(
        bless || differ.is_empty(),
        "{} console blocks differ from what burstsim prints (BURSTSIM_BLESS=1 rewrites them):\n{}",
        differ.len(),
        differ.join("\n")
    );
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped,
/// spaces to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The text of `file` outside its fenced blocks.
fn prose(text: &str) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out += line;
            out.push('\n');
        }
    }
    out
}

#[test]
fn every_link_between_the_documents_finds_its_file_and_heading() {
    let mut broken = Vec::new();
    for file in documents() {
        let text = prose(&fs::read_to_string(&file).unwrap());
        for (at, _) in text.match_indices("](") {
            let target = &text[at + 2..];
            let Some(end) = target.find(')') else {
                continue;
            };
            let target = &target[..end];
            if target.starts_with("http") || target.contains(' ') {
                continue;
            }
            let (path, heading) = target.split_once('#').unwrap_or((target, ""));
            let linked = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !linked.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            }
            if heading.is_empty() || linked.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let headings: Vec<String> = prose(&fs::read_to_string(&linked).unwrap())
                .lines()
                .filter(|l| l.starts_with('#'))
                .map(|l| anchor(l.trim_start_matches('#')))
                .collect();
            if !headings.iter().any(|h| h == heading) {
                broken.push(format!("{}: {target}: no such heading", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
