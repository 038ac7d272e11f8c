//! Fuzzes the scenario parser and validator: any bytes must give a scenario
//! or an error, never a panic.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(scenario) = burstsim::scenario::parse(text, Path::new("/nonexistent/fuzz.toml")) {
            // Every limiter that validated must build and describe itself.
            for limiter in &scenario.limiters {
                let _ = limiter.config.build(burstsim::limiter::Context { backend_capacity_per_sec: Some(150) });
            }
        }
    }
});
