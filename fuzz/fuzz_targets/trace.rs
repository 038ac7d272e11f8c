//! Fuzzes the trace reader: any file must replay or give an error naming its
//! line, never a panic; replayed arrivals come out sorted and inside the run.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use burstsim::time::Nanos;
use burstsim::traffic::{SourceConfig, stream};
use libfuzzer_sys::fuzz_target;

fn folder() -> &'static PathBuf {
    static FOLDER: OnceLock<PathBuf> = OnceLock::new();
    FOLDER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("burstsim-fuzz-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = folder();
    std::fs::write(dir.join("trace.csv"), data).expect("writing the trace");
    for options in ["", "rebase = true", "column = \"time_s\""] {
        let table: toml::Table = toml::from_str(&format!("kind = \"trace\"\npath = \"trace.csv\"\n{options}")).unwrap();
        let source = SourceConfig::from_table(table).unwrap();
        let duration = Nanos(10_000_000_000);
        if source.validate(duration, dir).is_err() {
            continue;
        }
        if let Ok(arrivals) = source.arrivals(duration, dir, stream(0, "fuzz", 0, 0)) {
            let times: Vec<Nanos> = arrivals.collect();
            assert!(times.is_sorted(), "replayed arrivals are sorted");
            assert!(times.iter().all(|t| *t < duration), "replayed arrivals lie inside the run");
        }
    }
});
