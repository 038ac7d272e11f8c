//! The limits each `location` applies, as nginx merges them: a location
//! uses the `limit_req`s written in it; one with none inherits those of
//! the nearest block around it that has some (all of that block's, none
//! from further out), and nginx checks them in the order written.

use std::collections::HashMap;
use std::sync::Arc;

use super::files::Files;
use super::{Directive, Parsed, here};
use crate::import::{Block, Place};

/// Every `location` block with the limits nginx applies in it. `limits`
/// are the configuration's `limit_req`s and `built` their blocks, in
/// order; `in_dry_run` tells whether `limit_req_dry_run on` holds in a
/// block.
pub(super) fn places(
    files: &Files,
    parsed: &Parsed,
    limits: &[&Directive],
    built: &[Block],
    in_dry_run: &dyn Fn(usize) -> bool,
) -> Vec<Place> {
    // Each block's own limits, shared by every location that inherits them.
    let mut levels: HashMap<usize, Vec<Block>> = HashMap::new();
    for (directive, block) in limits.iter().zip(built) {
        levels
            .entry(directive.block)
            .or_default()
            .push(block.clone());
    }
    let levels: HashMap<usize, Arc<[Block]>> = levels
        .into_iter()
        .map(|(level, blocks)| (level, blocks.into()))
        .collect();
    let servers = server_names(parsed);
    let mut places = Vec::new();
    for (id, head) in parsed.blocks.iter().enumerate() {
        let (Some(at), Some(name)) = (&head.at, head.name.strip_prefix("location ")) else {
            continue;
        };
        if at.text != "location" {
            continue;
        }
        let mut level = id;
        let layers = loop {
            if let Some(layers) = levels.get(&level) {
                break Some((level, layers.clone()));
            }
            if level == 0 {
                break None;
            }
            level = parsed.blocks[level].parent;
        };
        let mut server = id;
        while server != 0 && parsed.blocks[server].name != "server" {
            server = parsed.blocks[server].parent;
        }
        let (inherited, layers) = match layers {
            Some((level, layers)) if level != id => (Some(parsed.context(level)), layers),
            Some((_, layers)) => (None, layers),
            None => (None, Arc::from(Vec::new())),
        };
        places.push(Place {
            kind: "location",
            name: name.to_string(),
            servers: servers.get(&server).cloned().unwrap_or_default(),
            at: here(files, at, parsed.context(id)),
            inherited,
            layers,
            // nginx checks every zone before it counts the request in any
            // (ngx_http_limit_req_handler: a zone that rejects unlocks the
            // ones before it untouched).
            count_rejected: false,
            delays_add_up: false,
            dry_run: in_dry_run(id),
            notes: Vec::new(),
        });
    }
    places
}

/// Each `server` block's `server_name`s.
fn server_names(parsed: &Parsed) -> HashMap<usize, Vec<String>> {
    let mut names: HashMap<usize, Vec<String>> = HashMap::new();
    for directive in &parsed.directives {
        if directive.words[0].text == "server_name"
            && parsed.blocks[directive.block].name == "server"
        {
            names
                .entry(directive.block)
                .or_default()
                .extend(directive.words[1..].iter().map(|w| w.text.clone()));
        }
    }
    names
}
