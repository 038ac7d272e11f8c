//! Errors a user can cause with a scenario file, each naming where it is.

use std::path::PathBuf;

/// Why a scenario could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario {}: {cause}", path.display())]
    Read {
        /// The scenario file.
        path: PathBuf,
        /// What the file system said (in the message, not the error chain,
        /// so it is printed once).
        cause: std::io::Error,
    },
    /// TOML syntax or a field of the wrong type; the message carries line and column.
    #[error("{}: {message}", path.display())]
    Syntax {
        /// The scenario file.
        path: PathBuf,
        /// The TOML parser's message, with the offending line.
        message: String,
    },
    /// A value that is well-formed but not usable.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The scenario file.
        path: PathBuf,
        /// 1-based line of the table or value at fault.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The field path, what is wrong and how to fix it.
        message: String,
    },
}
