//! The crate's one test binary: its unit tests (the crate's own source,
//! built here under cfg(test)) and its integration tests
//! (`tests/integration/`, which use the crate through its public API, as
//! `burstsim::`, and run the program). Touching a source file rebuilds this
//! one test binary; the library and the program are built for it as usual.

#[path = "../src/lib.rs"]
pub mod crate_under_test;

// The crate's modules name each other from its root (`crate::time`): here.
#[allow(unused_imports)]
use crate_under_test::*;

#[path = "integration/main.rs"]
mod integration;
