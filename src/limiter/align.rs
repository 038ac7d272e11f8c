//! Where a window limiter's windows start: on the epoch grid, at a first
//! request, or at a given anchor.

use serde::Deserialize;

use crate::time::Nanos;

/// Where a window limiter's windows start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Align {
    /// Windows `[k·W, (k+1)·W)` from the scenario's start: `align = "epoch"`.
    #[default]
    Epoch,
    /// A window starts at the first arrival after the previous one ended:
    /// `align = "first-request"`.
    FirstRequest,
    /// Windows `[a + k·W, a + (k+1)·W)` for an anchor a (Bucket4j's aligned
    /// refill, Resilience4j's cycles from process start):
    /// `align = { anchor = "250ms" }`.
    Anchor(Nanos),
}

impl Align {
    /// How the alignment is written in scenario files.
    pub fn name(self) -> String {
        match self {
            Align::Epoch => "epoch".into(),
            Align::FirstRequest => "first-request".into(),
            Align::Anchor(anchor) => format!("anchored at {anchor}"),
        }
    }

    /// The fixed phase of the windows' edges, or `None` when they depend on traffic.
    pub fn phase(self, window: u64) -> Option<u64> {
        match self {
            Align::Epoch => Some(0),
            Align::FirstRequest => None,
            Align::Anchor(anchor) => Some(anchor.get() % window),
        }
    }
}

impl<'de> Deserialize<'de> for Align {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(
            untagged,
            expecting = "\"epoch\", \"first-request\" or { anchor = \"250ms\" }"
        )]
        enum Raw {
            Name(String),
            Anchor { anchor: Nanos },
        }
        match Raw::deserialize(deserializer)? {
            Raw::Name(name) if name == "epoch" => Ok(Align::Epoch),
            Raw::Name(name) if name == "first-request" => Ok(Align::FirstRequest),
            Raw::Name(name) => Err(serde::de::Error::custom(format!(
                "unknown alignment {name:?}; expected \"epoch\", \"first-request\" or {{ anchor = \"250ms\" }}"
            ))),
            Raw::Anchor { anchor } => Ok(Align::Anchor(anchor)),
        }
    }
}
