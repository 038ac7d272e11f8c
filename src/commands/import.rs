//! `burstsim import`: print a configuration's rate limits as limiter blocks.

use std::io::Write;

use anyhow::{Result, bail};

use crate::cli::ImportArgs;
use crate::limiter::{Context, LimiterConfig};

/// The most limits `import --chain` prints, over every place.
const MAX_CHAIN_LAYERS: usize = 10 * crate::import::MAX_BLOCKS;

/// `burstsim import`.
pub fn import(args: &ImportArgs) -> Result<()> {
    let crate::import::Imported {
        dialect,
        blocks,
        places,
        mut warnings,
        notes,
    } = crate::import::import(&args.file, args.format)?;
    for note in &notes {
        eprintln!("note: {}", crate::input::escape_controls(note));
    }
    if args.strict && !warnings.is_empty() {
        let first = warnings.remove(0);
        return Err(anyhow::Error::new(first).context(format!(
            "--strict: {} would be skipped (the first is below)",
            match warnings.len() {
                0 => "one construct".to_string(),
                n => format!("{} constructs", n + 1),
            }
        )));
    }
    super::warn(
        &warnings
            .iter()
            .map(crate::import::one_line)
            .collect::<Vec<_>>(),
    );
    // Every block must be one a scenario accepts: checked here, not at run time.
    for block in &blocks {
        let built = LimiterConfig::from_table(block.table())
            .and_then(|config| config.build(Context::default()).map(|_| ()));
        if let Err(err) = built {
            bail!("{}: limiter {:?}: {err}", block.heading, block.name);
        }
    }
    let text = if args.chain {
        use crate::import::Dialect;
        if ![Dialect::Nginx, Dialect::Traefik, Dialect::Kong].contains(&dialect) {
            bail!(
                "--chain: --chain reads nginx locations, Traefik routers and Kong routes and services; a {} configuration has none",
                dialect.name()
            );
        }
        if !places.iter().any(|p| !p.dry_run && !p.layers.is_empty()) {
            bail!(
                "{}: --chain: no {} applies a limit; import without --chain",
                args.file.display(),
                if dialect == Dialect::Nginx {
                    "location"
                } else {
                    "router"
                }
            );
        }
        // Locations may share a level's limits: what is printed is bounded
        // by the layers printed, not by the limits in the file.
        let layers: usize = places
            .iter()
            .filter(|p| !p.dry_run)
            .map(|p| p.layers.len())
            .sum();
        if layers > MAX_CHAIN_LAYERS {
            bail!(
                "{}: --chain: {layers} limits over all the places that apply them, more than the {MAX_CHAIN_LAYERS} one import prints; import without --chain, or take one place with from = {{ file, location }}",
                args.file.display()
            );
        }
        for place in places.iter().filter(|p| !p.dry_run && !p.layers.is_empty()) {
            let built = LimiterConfig::from_table(place.table())
                .and_then(|config| config.build(Context::default()).map(|_| ()));
            if let Err(err) = built {
                bail!("{}: {err}", place.at);
            }
        }
        crate::import::render_places(&args.file, dialect, &places)
    } else {
        crate::import::render(&args.file, dialect, &blocks)
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}
