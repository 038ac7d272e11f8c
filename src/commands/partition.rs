//! `burstsim partition`: a scenario's traffic split by key into parts, and
//! the part a run replays (`run --part DIR/I`).

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result, bail};

use super::warn;
use crate::cli::PartitionArgs;
use crate::limiter::RateLimiter as _;
use crate::output::Staging;
use std::collections::HashSet;

use crate::partition::{
    By, FORMAT, Identity, KeyFact, KeysWriter, LogFacts, MAX_PARTS, PartFile, PartWriter,
    Partitioning, Stream, StreamHash, keys_file, rows_file, slice_file, slice_of,
};
use crate::scenario::Scenario;

/// `burstsim partition`.
pub fn partition(args: &PartitionArgs) -> Result<()> {
    let path = &args.scenario;
    let text = crate::scenario::read(path)?;
    let mut scenario = crate::scenario::parse(&text, path)?;
    warn(&scenario.warnings);
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    let parts = args.parts;
    if !(1..=MAX_PARTS).contains(&parts) {
        bail!("--parts {parts}: expected 1 to {MAX_PARTS} parts");
    }
    if scenario.replications > 1 {
        bail!(
            "{}: replications = {}: a partitioning holds the arrivals of one replication; set replications = 1, or partition each seed with --seed",
            path.display(),
            scenario.replications
        );
    }
    let by = by(&scenario)?;
    refuse_unmergeable(&scenario)?;
    let logs: Vec<LogFacts> = scenario
        .workloads
        .iter()
        .map(|workload| log_facts(&scenario, workload))
        .collect::<Result<_>>()?;
    let cuts = crate::partition::cuts(&scenario, &logs, parts)?;
    let staging = Staging::new(&args.out)?;
    let written = |part: usize| format!("writing part {part} of {}", args.out.display());
    let mut streams = Vec::new();
    let mut files = vec![Vec::new(); parts as usize];
    let mut keys = vec![Vec::new(); parts as usize];
    let mut slices = vec![Vec::new(); parts as usize];
    for (w, workload) in scenario.workloads.iter().enumerate() {
        let writers = |file: &str| {
            (0..parts)
                .map(|i| Ok(PartWriter::new(staging.create(&format!("{i}/{file}"))?)))
                .collect::<Result<Vec<_>>>()
        };
        let mut writers_by_key = writers(&rows_file(w))?;
        // Every key's arrivals by time, when a global limiter is split so.
        let mut writers_by_time = match cuts {
            Some(_) => writers(&slice_file(w))?,
            None => Vec::new(),
        };
        let mut clients = (0..parts)
            .map(|i| {
                Ok(KeysWriter::new(
                    staging.create(&format!("{i}/{}", keys_file(w)))?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        // Each part's clients, to say once in it how the results name them.
        let mut seen: Vec<HashSet<u64, crate::random::MixState>> =
            (0..parts).map(|_| HashSet::default()).collect();
        let mut arrivals = crate::sim::arrivals(&scenario, workload, 0)?;
        let (mut hash, mut seq) = (StreamHash::default(), 0u64);
        for arrival in arrivals.by_ref() {
            hash.push(arrival);
            let part = by.part(arrival.key, parts) as usize;
            writers_by_key[part]
                .push(arrival, seq)
                .with_context(|| written(part))?;
            if let Some(cuts) = &cuts {
                let slice = slice_of(cuts, arrival.time);
                writers_by_time[slice]
                    .push(arrival, seq)
                    .with_context(|| written(slice))?;
            }
            let id = arrival.key.client;
            if seen[part].insert(id) {
                let key = crate::traffic::Key::client(id);
                let fact = KeyFact {
                    id,
                    value: workload.key_value(key),
                    name: workload.key_name(key),
                };
                clients[part].push(&fact).with_context(|| written(part))?;
            }
            seq += 1;
            if seq % (1 << 16) == 0 {
                crate::interrupt::check()?;
            }
        }
        if let Some(error) = arrivals.take_error() {
            bail!("workload {:?}: {error}", workload.name);
        }
        for (part, writer) in writers_by_key.into_iter().enumerate() {
            files[part].push(flushed(writer.finish()).with_context(|| written(part))?);
        }
        for (part, writer) in writers_by_time.into_iter().enumerate() {
            slices[part].push(flushed(writer.finish()).with_context(|| written(part))?);
        }
        for (part, writer) in clients.into_iter().enumerate() {
            keys[part].push(flushed(writer.finish()).with_context(|| written(part))?);
        }
        streams.push(Stream {
            name: workload.name.clone(),
            rows: seq,
            hash: hash.finish(),
        });
    }
    let identity = Identity {
        format: FORMAT.into(),
        scenario: scenario.name.clone(),
        scenario_hash: crate::sweep::fingerprint(text.as_bytes()),
        seed: scenario.seed,
        burstsim: env!("CARGO_PKG_VERSION").into(),
        parts,
        by,
        workloads: streams,
    };
    let whole = Partitioning {
        identity: identity.clone(),
        scenario_file: path.display().to_string(),
        text: text.clone(),
        logs,
        cuts: cuts.clone().unwrap_or_default(),
    };
    staging.write("partition.json", &(to_json(&whole)? + "\n"))?;
    let mut sizes = Vec::new();
    for (index, ((files, keys), slices)) in files.into_iter().zip(keys).zip(slices).enumerate() {
        sizes.push(files.iter().map(|f| f.rows).sum::<u64>());
        let part = PartFile {
            identity: identity.clone(),
            index: index as u64,
            files,
            keys,
            slices,
        };
        staging.write(&format!("{index}/part.json"), &(to_json(&part)? + "\n"))?;
    }
    staging.commit()?;
    if !args.quiet {
        let total: u64 = identity.workloads.iter().map(|w| w.rows).sum();
        println!(
            "{total} arrivals of {} workload(s) in {parts} part(s) by {}, {}–{} each{}, under {}",
            identity.workloads.len(),
            by.name(),
            sizes.iter().min().unwrap_or(&0),
            sizes.iter().max().unwrap_or(&0),
            if cuts.is_some() {
                ", and by time at the global windows' edges"
            } else {
                ""
            },
            args.out.display()
        );
    }
    Ok(())
}

/// What no merge could count exactly from parts: refused before any work.
fn refuse_unmergeable(scenario: &Scenario) -> Result<()> {
    for workload in &scenario.workloads {
        if workload.retry.is_some() || workload.adversary().is_some() {
            bail!(
                "{}: workload {:?}: its clients answer the limiter (retries, an adversary), so its requests depend on each limiter's decisions; a partitioning holds fixed arrivals",
                scenario.path.display(),
                workload.name
            );
        }
    }
    for named in &scenario.limiters {
        if let crate::limiter::Limiter::PerKey(per) = &named.limiter
            && per.evicts()
        {
            bail!(
                "{}: limiter {:?} forgets idle keys (evict_after): how many keys it holds at once is a sum over every part at each instant, which no part can say; partition a copy without evict_after",
                scenario.path.display(),
                named.name
            );
        }
    }
    Ok(())
}

/// What `workload`'s log says as a whole, for the merge.
fn log_facts(scenario: &Scenario, workload: &crate::scenario::Workload) -> Result<LogFacts> {
    let labelled = workload.labelled_seconds();
    let packed = labelled.is_some_and(|l| l.packed) && crate::sim::packs(scenario);
    let empty = workload.empty_keys();
    let keys = workload
        .sources()
        .iter()
        .map(|source| source.keys(scenario.duration, &scenario.base_dir))
        .sum::<Result<u64, _>>()
        .map_err(|err| anyhow::anyhow!("workload {:?}: {err}", workload.name))?;
    Ok(LogFacts {
        keys,
        turned_away: workload.turned_away_in_log(),
        labelled: labelled.map(|l| [l.busiest, l.busiest_pair]),
        packed: labelled.is_some_and(|l| l.packed),
        origin: workload.second_origin(scenario.duration).filter(|_| packed),
        absent: empty.absent.len() as u64,
        blank: empty.blank.len() as u64,
    })
}

/// What the scenario's limiters keep state by: its client unless every
/// limiter kept per key keeps it per Host; refused when both are.
fn by(scenario: &Scenario) -> Result<By> {
    let keyed = scenario.limiters.iter().filter(|l| l.limiter.keys_matter());
    let (hosts, clients): (Vec<_>, Vec<_>) = keyed.partition(|l| l.limiter.keyed_by_host());
    match (hosts.first(), clients.first()) {
        (Some(host), Some(client)) => bail!(
            "{}: limiter {:?} keeps its state per Host and {:?} per client: a split by one of them puts the other's keys in several parts; partition a scenario with one of them",
            scenario.path.display(),
            host.name,
            client.name
        ),
        (Some(_), None) => Ok(By::Host),
        (None, Some(_)) => Ok(By::Client),
        (None, None) => bail!(
            "{}: no limiter is kept per key (`per = \"key\"` or `per = \"host\"`): a global limiter decides each request from every other, so no part of a split by key would be exact for it",
            scenario.path.display()
        ),
    }
}

/// A part's file, finished and flushed: what its part.json says of it.
pub(super) fn flushed(
    finished: std::io::Result<(
        crate::partition::PartStream,
        std::io::BufWriter<std::fs::File>,
    )>,
) -> std::io::Result<crate::partition::PartStream> {
    let (stream, mut out) = finished?;
    out.flush()?;
    Ok(stream)
}

/// `value` as the partition files write it.
fn to_json(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string_pretty(value).context("writing the partition's identity")
}

/// The scenario at `path` to replay part `dir` (`DIR/I`) in place of its
/// workloads' traffic: the part's part.json checked to be of this
/// scenario's text and to name its files; its traces are not read.
pub(super) fn load_part(path: &Path, dir: &Path) -> Result<Scenario> {
    let text = crate::scenario::read(path)?;
    let file = dir.join("part.json");
    let json = crate::input::read_text(&file, 1 << 20)
        .map_err(|cause| anyhow::anyhow!("{}: {cause}", file.display()))?;
    let part: PartFile = serde_json::from_str(&json).map_err(|err| {
        anyhow::anyhow!(
            "{}:{}:{}: not a part of a partitioning: {err}",
            file.display(),
            err.line(),
            err.column()
        )
    })?;
    let identity = &part.identity;
    let refuse = |what: String| -> Result<Scenario> {
        bail!("{}: {what}; partition this scenario again", file.display())
    };
    if identity.format != FORMAT {
        return refuse(format!(
            "format {:?}, where this burstsim reads {FORMAT:?}",
            identity.format
        ));
    }
    if identity.scenario_hash != crate::sweep::fingerprint(text.as_bytes()) {
        return refuse(format!(
            "a part of scenario {:?} as it was (fingerprint {}), not of {}",
            identity.scenario,
            identity.scenario_hash,
            path.display()
        ));
    }
    if part.index >= identity.parts || part.files.len() != identity.workloads.len() {
        return refuse("its index or its files do not match its partitioning".into());
    }
    let part = crate::partition::Replayed::open(dir, part).map_err(anyhow::Error::msg)?;
    let scenario = crate::scenario::parse_part(&text, path, std::sync::Arc::new(part))?;
    warn(&scenario.warnings);
    Ok(scenario)
}
