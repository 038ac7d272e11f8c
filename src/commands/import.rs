//! `burstsim import`: print a configuration's rate limits as limiter blocks.

use std::io::Write;

use anyhow::{Result, bail};

use crate::cli::ImportArgs;
use crate::limiter::{Context, LimiterConfig};

/// `burstsim import`.
pub fn import(args: &ImportArgs) -> Result<()> {
    let (dialect, blocks) = crate::import::import(&args.file, args.format)?;
    // Every block must be one a scenario accepts: checked here, not at run time.
    for block in &blocks {
        let built = LimiterConfig::from_table(block.table())
            .and_then(|config| config.build(Context::default()).map(|_| ()));
        if let Err(err) = built {
            bail!("{}: limiter {:?}: {err}", block.heading, block.name);
        }
    }
    let text = crate::import::render(&args.file, dialect, &blocks);
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}
