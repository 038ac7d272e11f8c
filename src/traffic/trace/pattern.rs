//! `path = "access.log*"`: the files a name pattern matches, oldest first as
//! logrotate names them.

use std::path::{Path, PathBuf};

/// Whether `path`'s file name holds `*` or `?`.
pub(super) fn is_pattern(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.contains(['*', '?']))
}

/// Whether `name` matches `pattern`: `*` any run of characters, `?` one.
fn matches(pattern: &[char], name: &[char]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some(('*', rest)) => (0..=name.len()).any(|skip| matches(rest, &name[skip..])),
        Some(('?', rest)) => !name.is_empty() && matches(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && matches(rest, &name[1..]),
    }
}

/// Oldest first as logrotate names its files: `access.log.3.gz`,
/// `access.log.2`, `access.log.1` (a larger number is older), then dated
/// ones (`access.log-20261127`, by date), then the live file.
fn age_order(name: &str) -> (u8, i128, String) {
    let bare = [".gz", ".zst", ".bz2", ".xz"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(name);
    if let Some((_, number)) = bare.rsplit_once('.')
        && !number.is_empty()
        && number.len() < 20
        && number.bytes().all(|b| b.is_ascii_digit())
    {
        return (0, -number.parse::<i128>().unwrap_or(0), name.to_string());
    }
    if let Some((_, date)) = bare.rsplit_once('-')
        && date.len() >= 8
        && date.bytes().all(|b| b.is_ascii_digit())
    {
        return (1, 0, date.to_string());
    }
    (2, 0, name.to_string())
}

/// The files in the pattern's folder whose names match it (dot files only
/// if the pattern starts with a dot), oldest first; an error when none does.
pub(super) fn matching(pattern: &Path) -> Result<Vec<PathBuf>, String> {
    let folder = pattern
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let wanted: Vec<char> = pattern
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default()
        .chars()
        .collect();
    let entries = std::fs::read_dir(folder)
        .map_err(|err| format!("cannot list {} for {}: {err}", folder.display(), pattern.display()))?;
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|err| format!("cannot list {}: {err}", folder.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let chars: Vec<char> = name.chars().collect();
        if (name.starts_with('.') && wanted.first() != Some(&'.')) || !matches(&wanted, &chars) {
            continue;
        }
        found.push((name, entry.path()));
    }
    if found.is_empty() {
        return Err(format!("no file matches {}", pattern.display()));
    }
    found.sort_by_cached_key(|(name, _)| age_order(name));
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_logs_come_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "access.log",
            "access.log.1",
            "access.log.2.gz",
            "access.log.10.gz",
            "error.log",
            ".access.log.swp",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let names = |pattern: &str| -> Vec<String> {
            matching(&dir.path().join(pattern))
                .unwrap()
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            names("access.log*"),
            ["access.log.10.gz", "access.log.2.gz", "access.log.1", "access.log"]
        );
        assert_eq!(names("access.log.?"), ["access.log.1"]);
        assert!(matching(&dir.path().join("nginx*.log")).unwrap_err().contains("no file matches"));
        let dated = ["access.log-20261127.gz", "access.log", "access.log-20261125.gz"];
        let mut sorted = dated.to_vec();
        sorted.sort_by_cached_key(|name| age_order(name));
        assert_eq!(sorted, ["access.log-20261125.gz", "access.log-20261127.gz", "access.log"]);
        assert!(is_pattern(Path::new("logs/access.log*")));
        assert!(!is_pattern(Path::new("logs*/access.log")));
    }
}
