//! Result folders: written all at once, replacing only what burstsim provably
//! wrote, and the decision files streamed into them.

mod lock;
mod ownership;
mod staging;

pub use staging::Staging;

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::scenario::Scenario;
use crate::sim::DecisionSink;
use crate::traffic::Arrival;

/// Streams every decision to `decisions/<workload>/<limiter>.csv`: the
/// arrival's time, its client key and whether it was admitted, for clients
/// that retry which attempt of its request it was, and when the workload's
/// requests name their clients, the client as its input names it.
pub struct DecisionFiles {
    /// Per workload, per limiter: the file and its writer.
    files: Vec<Vec<(PathBuf, BufWriter<fs::File>)>>,
    /// Per workload: whether its files have the `attempt` column.
    attempts: Vec<bool>,
    /// Per workload whose requests name clients: the workload, to name them.
    clients: Vec<Option<crate::scenario::Workload>>,
    /// Per workload replaying a log that says what its own limiter did, per
    /// limiter: the log's verdicts in the order that limiter sees the
    /// requests (a second reading of the log, so memory stays flat).
    logged: Vec<Vec<Option<crate::traffic::Merge>>>,
    /// Per workload, per limiter: requests on which the model and the log disagree.
    disagreements: Vec<Vec<u64>>,
}

impl DecisionFiles {
    /// Creates one file per workload × limiter.
    pub fn create(folder: &Path, scenario: &Scenario) -> Result<DecisionFiles> {
        let mut files = Vec::new();
        let attempts: Vec<bool> = scenario
            .workloads
            .iter()
            .map(|w| w.retry.is_some())
            .collect();
        for (workload, &attempts) in scenario.workloads.iter().zip(&attempts) {
            let mut of_workload = Vec::new();
            let dir = folder.join("decisions").join(&workload.name);
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for limiter in &scenario.limiters {
                let path = dir.join(format!("{}.csv", limiter.name));
                let file = fs::File::create(&path)
                    .with_context(|| format!("creating {}", path.display()))?;
                let mut writer = BufWriter::with_capacity(1 << 16, file);
                let header = format!(
                    "time_ns,key,admitted{}{}{}\n",
                    if attempts { ",attempt" } else { "" },
                    if workload.is_keyed() { ",client" } else { "" },
                    if workload.verdicts().is_some() && scenario.part.is_none() {
                        ",log_admitted"
                    } else {
                        ""
                    }
                );
                writer
                    .write_all(header.as_bytes())
                    .with_context(|| format!("writing {}", path.display()))?;
                of_workload.push((path, writer));
            }
            files.push(of_workload);
        }
        let clients = scenario
            .workloads
            .iter()
            .map(|w| w.is_keyed().then(|| w.clone()))
            .collect();
        let mut logged = Vec::new();
        for workload in &scenario.workloads {
            let mut streams = Vec::new();
            for _ in &scenario.limiters {
                // A part holds some of the log's requests; the verdicts
                // stream is the whole log's.
                streams.push(
                    match workload.verdicts().filter(|_| scenario.part.is_none()) {
                        Some(verdicts) => Some(crate::sim::arrivals(scenario, &verdicts, 0)?),
                        None => None,
                    },
                );
            }
            logged.push(streams);
        }
        Ok(DecisionFiles {
            disagreements: files.iter().map(|w| vec![0; w.len()]).collect(),
            files,
            attempts,
            clients,
            logged,
        })
    }

    /// Per workload × limiter whose log says what its own limiter did: the
    /// requests on which the model and the log disagree.
    pub fn disagreements<'s>(&self, scenario: &'s Scenario) -> Vec<(&'s str, &'s str, u64)> {
        let mut all = Vec::new();
        for (w, workload) in scenario.workloads.iter().enumerate() {
            for (l, limiter) in scenario.limiters.iter().enumerate() {
                if self.logged[w][l].is_some() {
                    all.push((
                        workload.name.as_str(),
                        limiter.name.as_str(),
                        self.disagreements[w][l],
                    ));
                }
            }
        }
        all
    }

    /// Flushes every file.
    pub fn finish(self) -> Result<()> {
        for (path, mut writer) in self.files.into_iter().flatten() {
            writer
                .flush()
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}

impl DecisionSink for DecisionFiles {
    fn record(
        &mut self,
        workload: usize,
        limiter: usize,
        arrival: Arrival,
        attempt: u32,
        admitted: bool,
    ) -> std::io::Result<()> {
        let writer = &mut self.files[workload][limiter].1;
        let time = arrival.time.get();
        let key = match &self.clients[workload] {
            Some(clients) => clients.key_value(arrival.key),
            None => arrival.key.client,
        };
        write!(writer, "{time},{key},{admitted}")?;
        if self.attempts[workload] {
            write!(writer, ",{attempt}")?;
        }
        if let Some(clients) = &self.clients[workload] {
            let name = clients.key_name(arrival.key).unwrap_or_default();
            write!(writer, ",{}", csv_field(&name))?;
        }
        if let Some(logged) = &mut self.logged[workload][limiter] {
            // The same request in the log's own stream: the same instant.
            let verdict = match logged.next() {
                Some(same) if same.time == arrival.time => same.key.client,
                _ => 0,
            };
            let log_admitted = match verdict {
                1 => "true",
                2 => "false",
                _ => "",
            };
            if verdict != 0 && (verdict == 1) != admitted {
                self.disagreements[workload][limiter] += 1;
            }
            write!(writer, ",{log_admitted}")?;
        }
        writeln!(writer)
    }
}

/// `text` as one CSV field: quoted, its quotes doubled, when it holds a
/// comma, a quote or a line break.
fn csv_field(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\"")).into()
    } else {
        text.into()
    }
}
