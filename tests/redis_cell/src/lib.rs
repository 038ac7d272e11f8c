//! Empty: the package only pins redis-cell (see Cargo.toml).
