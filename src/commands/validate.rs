//! `burstsim validate`: read and check a scenario, run nothing.

use std::io::Write;

use anyhow::{Result, bail};

use super::load;
/// `burstsim validate`.
pub fn validate(path: &std::path::Path) -> Result<()> {
    let scenario = load(path)?;
    // A sweep written in the file: every point must be a valid scenario too.
    let text = crate::scenario::read(path)?;
    let sweep = match crate::sweep::Grid::from_scenario(&text, path)? {
        Some(grid) => {
            let base = crate::sweep::Base::new(text, path)?;
            // One per core; the first invalid point in grid order is reported.
            use rayon::prelude::*;
            let invalid = (0..grid.points())
                .into_par_iter()
                .map(|point| base.at(&grid, point).err())
                .find_first(Option::is_some)
                .flatten();
            if let Some(err) = invalid {
                bail!(err);
            }
            let sizes: Vec<String> = grid
                .groups
                .iter()
                .map(|g| g[0].values.len().to_string())
                .collect();
            Some(format!(
                "  sweep: {} points ({}), every one valid",
                grid.points(),
                sizes.join(" × ")
            ))
        }
        None => None,
    };
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
    if let Some(sweep) = sweep {
        writeln!(out, "{sweep}")?;
    }
    Ok(())
}
