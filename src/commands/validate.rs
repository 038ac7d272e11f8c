//! `burstsim validate`: read and check a scenario, run nothing.

use std::io::Write;

use anyhow::Result;

use super::load;
/// `burstsim validate`.
pub fn validate(path: &std::path::Path) -> Result<()> {
    let scenario = load(path)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: scenario {:?} is valid: {} workloads × {} limiters over {}",
        path.display(),
        scenario.name,
        scenario.workloads.len(),
        scenario.limiters.len(),
        scenario.duration
    )?;
    for limiter in &scenario.limiters {
        writeln!(
            out,
            "  {:<20} {:<16} {}",
            limiter.name,
            limiter.config.kind(),
            limiter.description
        )?;
    }
    Ok(())
}
