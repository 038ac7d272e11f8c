//! The files of an nginx configuration as nginx reads them: the file
//! imported, with every `include` replaced by the files it names (a glob's
//! matches in sorted order, inside the including block), or, of an
//! `nginx -T` dump, the files the dump holds. Words keep the file and line
//! they were written at, so errors and comments name the real file.

use std::path::{Path, PathBuf};

use super::super::Source;
use crate::error::ScenarioError;

/// The deepest chain of includes followed.
pub(super) const MAX_DEPTH: usize = 16;
/// The most files one import reads.
pub(super) const MAX_FILES: usize = 256;
/// The most includes one import follows (a file included in many places
/// is read once and followed at each).
pub(super) const MAX_FOLLOWED: usize = 4_096;

/// Where nginx keeps its configuration when built by the common packages:
/// an absolute include under one of these that is not on this machine is
/// read from the same place under the imported file's folder (a copy of
/// `/etc/nginx` taken elsewhere).
const CONF_PREFIXES: [&str; 4] = [
    "/etc/nginx/",
    "/usr/local/nginx/conf/",
    "/usr/local/etc/nginx/",
    "/opt/homebrew/etc/nginx/",
];

/// `# configuration file /etc/nginx/nginx.conf:` opens each file of an
/// `nginx -T` dump.
const DUMP_MARKER: &str = "# configuration file ";

/// A word of the configuration and where it starts.
#[derive(Clone, Debug)]
pub(super) struct Token {
    pub text: String,
    /// The file, numbered in [`Files`].
    pub file: usize,
    pub line: usize,
    pub column: usize,
}

/// A word or one of `;`, `{`, `}`.
#[derive(Clone, Debug)]
pub(super) enum Item {
    Word(Token),
    /// `;`, `{` or `}`, at a token's place (its text is the character).
    Mark(Token),
}

/// Every file read: its path, its text and its name in messages.
pub(super) struct Files {
    list: Vec<(PathBuf, String, String)>,
    /// A dump's files are its parts, found by the path nginx wrote.
    dump: bool,
    /// The imported file's folder: nginx's prefix for relative includes.
    prefix: PathBuf,
    /// Includes followed so far.
    followed: usize,
    pub warnings: Vec<ScenarioError>,
    /// How the files were found, said once each.
    pub notes: Vec<String>,
}

impl Files {
    /// The file numbered `file`, for errors and comments.
    pub fn source(&self, file: usize) -> Source<'_> {
        let (path, text, name) = &self.list[file];
        Source {
            path,
            text,
            name: name.clone(),
        }
    }

    /// The configuration `source` as items, its includes followed.
    pub fn read(source: &Source) -> Result<(Files, Vec<Item>), ScenarioError> {
        let prefix = source.path.parent().unwrap_or(Path::new("")).to_path_buf();
        let mut files = Files {
            list: Vec::new(),
            dump: false,
            prefix,
            followed: 0,
            warnings: Vec::new(),
            notes: Vec::new(),
        };
        match dump_parts(source.text) {
            Some(parts) => {
                files.dump = true;
                for (path, text) in parts {
                    files
                        .list
                        .push((path.clone(), text, path.display().to_string()));
                }
            }
            None => files.list.push((
                source.path.to_path_buf(),
                source.text.to_string(),
                source.name.clone(),
            )),
        }
        let mut items = Vec::new();
        files.expand(0, &mut vec![(0, 0)], &mut items)?;
        Ok((files, items))
    }

    /// Appends the items of file `file` to `out`, each `include` replaced
    /// by the files it names; `chain` is the includes that led here (file,
    /// line of the include).
    fn expand(
        &mut self,
        file: usize,
        chain: &mut Vec<(usize, usize)>,
        out: &mut Vec<Item>,
    ) -> Result<(), ScenarioError> {
        let items = lex(&self.source(file), file)?;
        let mut words: Vec<Item> = Vec::new();
        for item in items {
            match &item {
                Item::Mark(mark) if mark.text == ";" => {
                    let include =
                        matches!(words.first(), Some(Item::Word(w)) if w.text == "include");
                    if include && words.len() == 2 {
                        let (Item::Word(directive), Item::Word(pattern)) = (&words[0], &words[1])
                        else {
                            unreachable!("checked above");
                        };
                        let (directive, pattern) = (directive.clone(), pattern.clone());
                        words.clear();
                        for target in self.resolve(&directive, &pattern)? {
                            if chain.iter().any(|&(f, _)| f == target) {
                                return Err(self.cycle(chain, &directive, target));
                            }
                            self.followed += 1;
                            if chain.len() > MAX_DEPTH || self.followed > MAX_FOLLOWED {
                                return Err(self.source(file).error(
                                    directive.line,
                                    directive.column,
                                    format!("include: more than {MAX_DEPTH} includes deep or {MAX_FOLLOWED} in all; burstsim follows no more"),
                                ));
                            }
                            chain.last_mut().expect("the imported file").1 = directive.line;
                            chain.push((target, 0));
                            self.expand(target, chain, out)?;
                            chain.pop();
                        }
                        continue;
                    }
                    out.append(&mut words);
                    out.push(item);
                }
                Item::Mark(_) => {
                    out.append(&mut words);
                    out.push(item);
                }
                Item::Word(_) => words.push(item),
            }
        }
        out.append(&mut words);
        Ok(())
    }

    /// The files `include PATTERN` names, in nginx's order, each read once
    /// into the list; warnings for what cannot be followed.
    fn resolve(&mut self, directive: &Token, pattern: &Token) -> Result<Vec<usize>, ScenarioError> {
        let paths = if self.dump {
            self.in_dump(&pattern.text)
        } else {
            self.on_disk(directive, &pattern.text)
        };
        let mut found = Vec::new();
        for path in paths {
            if let Some(known) = self.list.iter().position(|(p, _, _)| *p == path) {
                found.push(known);
                continue;
            }
            if self.list.len() >= MAX_FILES {
                return Err(self.source(directive.file).error(
                    directive.line,
                    directive.column,
                    format!("include: more than {MAX_FILES} files; burstsim reads no more"),
                ));
            }
            let text =
                crate::input::read_text(&path, super::super::MAX_CONFIG_BYTES).map_err(|err| {
                    self.source(directive.file).error(
                        pattern.line,
                        pattern.column,
                        format!(
                            "include {}: cannot read {}: {err}",
                            pattern.text,
                            path.display()
                        ),
                    )
                })?;
            let text = text
                .strip_prefix('\u{feff}')
                .map(str::to_string)
                .unwrap_or(text);
            let name = path
                .strip_prefix(&self.prefix)
                .unwrap_or(&path)
                .display()
                .to_string();
            self.list.push((path, text, name));
            found.push(self.list.len() - 1);
        }
        if found.is_empty() && !has_wildcard(&pattern.text) {
            self.warnings.push(self.source(directive.file).error(
                pattern.line,
                pattern.column,
                format!(
                    "include {}: no such file here; skipped (nginx would refuse to start)",
                    pattern.text
                ),
            ));
        }
        Ok(found)
    }

    /// The dump's files that `pattern` matches, sorted.
    fn in_dump(&self, pattern: &str) -> Vec<PathBuf> {
        let full = if Path::new(pattern).is_absolute() {
            PathBuf::from(pattern)
        } else {
            // Relative to the folder of the dump's first file, nginx.conf.
            self.list[0]
                .0
                .parent()
                .unwrap_or(Path::new("/"))
                .join(pattern)
        };
        let full = full.to_string_lossy().into_owned();
        let mut paths: Vec<PathBuf> = self
            .list
            .iter()
            .map(|(p, _, _)| p.clone())
            .filter(|p| wildcard_match(&full, &p.to_string_lossy()))
            .collect();
        paths.sort();
        paths
    }

    /// The files on this machine that `pattern` matches, sorted: relative
    /// to the imported file's folder (nginx's prefix), then to the including
    /// file's. An absolute path under a common nginx prefix (`/etc/nginx/`)
    /// is read under the imported file's folder when that folder is not the
    /// prefix itself: a copy of a tree is read as that tree, never mixed
    /// with the nginx installed on this machine.
    fn on_disk(&mut self, directive: &Token, pattern: &str) -> Vec<PathBuf> {
        let including = self.list[directive.file]
            .0
            .parent()
            .unwrap_or(Path::new(""))
            .to_path_buf();
        if !Path::new(pattern).is_absolute() {
            let here = glob(&self.prefix.join(pattern));
            return if here.is_empty() {
                glob(&including.join(pattern))
            } else {
                here
            };
        }
        let rebased = CONF_PREFIXES.iter().find_map(|prefix| {
            let rest = pattern.strip_prefix(prefix)?;
            let root = Path::new(prefix.trim_end_matches('/'));
            let at_root = std::fs::canonicalize(&self.prefix).is_ok_and(|p| p == root);
            (!at_root).then(|| (prefix, self.prefix.join(rest)))
        });
        match rebased {
            Some((prefix, path)) => {
                let note = format!(
                    "includes under {prefix} are read from {} (the imported file's folder stands in for {prefix})",
                    self.prefix.display()
                );
                if !self.notes.contains(&note) {
                    self.notes.push(note);
                }
                glob(&path)
            }
            None => glob(Path::new(pattern)),
        }
    }

    /// An include that leads back to a file already being read.
    fn cycle(&self, chain: &[(usize, usize)], directive: &Token, target: usize) -> ScenarioError {
        let mut steps: Vec<String> = chain
            .iter()
            .map(|&(file, line)| format!("{}:{line}", self.list[file].2))
            .collect();
        if let Some(last) = steps.last_mut() {
            *last = format!("{}:{}", self.list[directive.file].2, directive.line);
        }
        steps.push(self.list[target].2.clone());
        self.source(directive.file).error(
            directive.line,
            directive.column,
            format!("include: a cycle of includes: {}", steps.join(" → ")),
        )
    }
}

/// The parts of an `nginx -T` dump, each a file's path and text; `None`
/// when `text` is not a dump.
fn dump_parts(text: &str) -> Option<Vec<(PathBuf, String)>> {
    let mut parts: Vec<(PathBuf, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end();
        if let Some(path) = bare
            .strip_prefix(DUMP_MARKER)
            .and_then(|p| p.strip_suffix(':'))
        {
            parts.push((PathBuf::from(path), String::new()));
        } else if let Some((_, part)) = parts.last_mut() {
            part.push_str(line);
        }
    }
    (!parts.is_empty()).then_some(parts)
}

fn has_wildcard(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// The files matching `pattern`, whose wildcards (`*`, `?`) may stand in
/// its last component only, in sorted order (as glob(3) gives them nginx).
fn glob(pattern: &Path) -> Vec<PathBuf> {
    let name = pattern
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !has_wildcard(&name) {
        return if pattern.is_file() {
            vec![pattern.to_path_buf()]
        } else {
            Vec::new()
        };
    }
    let folder = pattern.parent().unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let entry = e.file_name().to_string_lossy().into_owned();
            // glob(3) leaves out dot files unless the pattern names them.
            !entry.starts_with('.') && wildcard_match(&name, &entry)
        })
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// Whether `text` matches `pattern`, where `*` is any run of characters
/// and `?` any one character.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // The classic two-pointer match with one star to return to.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// The words and marks of one file, comments and quotes handled; braces
/// must balance within the file, as nginx requires.
fn lex(source: &Source, file: usize) -> Result<Vec<Item>, ScenarioError> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut chars = source.text.chars().peekable();
    let (mut line, mut column) = (1usize, 0usize);
    let mut word: Option<Token> = None;
    let mut quote: Option<char> = None;
    let token = |line, column| Token {
        text: String::new(),
        file,
        line,
        column,
    };
    while let Some(c) = chars.next() {
        let (at_line, at_column) = (line, column);
        if c == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        if let Some(q) = quote {
            let current = word.get_or_insert_with(|| token(at_line, at_column));
            if c == q {
                quote = None;
            } else if c == '\\' {
                if let Some(next) = chars.next() {
                    column += 1;
                    current.text.push(next);
                }
            } else {
                current.text.push(c);
            }
            continue;
        }
        match c {
            '#' => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        line += 1;
                        column = 0;
                        break;
                    }
                }
                items.extend(word.take().map(Item::Word));
            }
            '"' | '\'' => {
                word.get_or_insert_with(|| token(at_line, at_column));
                quote = Some(c);
            }
            ';' | '{' | '}' => {
                items.extend(word.take().map(Item::Word));
                if c == '{' {
                    depth += 1;
                } else if c == '}' {
                    if depth == 0 {
                        return Err(source.error(at_line, at_column, "a '}' closes no block"));
                    }
                    depth -= 1;
                }
                items.push(Item::Mark(Token {
                    text: c.to_string(),
                    ..token(at_line, at_column)
                }));
            }
            c if c.is_whitespace() => items.extend(word.take().map(Item::Word)),
            c => word
                .get_or_insert_with(|| token(at_line, at_column))
                .text
                .push(c),
        }
    }
    if quote.is_some() {
        return Err(source.error(line, column, "a quoted string is not closed"));
    }
    items.extend(word.take().map(Item::Word));
    if depth > 0 {
        return Err(source.error(line, column, "a block is not closed with '}'"));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_glob_does_in_one_component() {
        assert!(wildcard_match("*.conf", "ratelimit.conf"));
        assert!(wildcard_match("*", "shop"));
        assert!(wildcard_match("a?c", "abc"));
        assert!(!wildcard_match("*.conf", "ratelimit.conf.bak"));
        assert!(wildcard_match("*.conf*", "ratelimit.conf.bak"));
        assert!(!wildcard_match("a?c", "ac"));
        assert!(wildcard_match(
            "/etc/nginx/conf.d/*.conf",
            "/etc/nginx/conf.d/a.conf"
        ));
    }

    #[test]
    fn a_dump_is_split_at_its_markers() {
        let parts = dump_parts(
            "# configuration file /etc/nginx/nginx.conf:\nhttp {\n include conf.d/*.conf;\n}\n\n# configuration file /etc/nginx/conf.d/a.conf:\nlimit_req_zone $a zone=z:1m rate=1r/s;\n",
        )
        .unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].0, PathBuf::from("/etc/nginx/conf.d/a.conf"));
        assert_eq!(parts[1].1, "limit_req_zone $a zone=z:1m rate=1r/s;\n");
        assert!(dump_parts("http { }\n").is_none());
    }
}
