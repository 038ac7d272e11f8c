//! `run --shard I/N --partition DIR`: one shard of a partitioning decided;
//! `merge --partition DIR SHARD…`: the shards counted together into the
//! whole run's results, byte for byte.

use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::partition::flushed;
use super::{print_results, results_folder, warn};
use crate::cli::{MergeArgs, RunArgs};
use crate::limiter::RateLimiter as _;
use crate::metrics::per_key::KeyTallies;
use crate::output::Staging;
use crate::partition::shard::{
    Over, SHARD_FILE, SHARD_FORMAT, ShardFile, ShardLimiter, codes_file,
};
use crate::partition::{
    CodesReader, CodesWriter, PartFile, PartReader, PartStream, Partitioning, Replayed, slice_of,
};
use crate::sim::{Decide, Recount, parts::Merged};

/// The most bytes of a `partition.json` or `shard.json` read.
const MAX_JSON_BYTES: u64 = 256 << 20;

/// `value` read from the json file `file`, an error naming its line and column.
fn read_json<T: serde::de::DeserializeOwned>(file: &Path, what: &str) -> Result<T> {
    let json = crate::input::read_text(file, MAX_JSON_BYTES)
        .map_err(|cause| anyhow::anyhow!("{}: {cause}", file.display()))?;
    serde_json::from_str(&json).map_err(|err| {
        anyhow::anyhow!(
            "{}:{}:{}: not {what}: {err}",
            file.display(),
            err.line(),
            err.column()
        )
    })
}

/// `DIR/partition.json`, of this burstsim's format.
fn partitioning(dir: &Path) -> Result<Partitioning> {
    let file = dir.join("partition.json");
    let whole: Partitioning = read_json(&file, "a partitioning's partition.json")?;
    if whole.identity.format != crate::partition::FORMAT {
        bail!(
            "{}: format {:?}, where this burstsim reads {:?}; partition the scenario again",
            file.display(),
            whole.identity.format,
            crate::partition::FORMAT
        );
    }
    Ok(whole)
}

/// `burstsim run --shard I/N --partition DIR`.
pub fn shard(args: &RunArgs) -> Result<()> {
    let (Some(arg), Some(dir)) = (args.shard, &args.partition) else {
        bail!("--shard needs --partition DIR");
    };
    let whole = partitioning(dir)?;
    let identity = &whole.identity;
    let shard = arg
        .resolve(|name| std::env::var(name).ok())
        .map_err(anyhow::Error::msg)?;
    if shard.count != identity.parts {
        bail!(
            "--shard {shard}: {} has {} parts, a shard for each: --shard I/{}",
            dir.display(),
            identity.parts,
            identity.parts
        );
    }
    let part_dir = dir.join(shard.index.to_string());
    let mut scenario = super::partition::load_part(&args.scenario, &part_dir)?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if scenario.seed != identity.seed {
        bail!(
            "{}: split with seed {}, and this run's is {}; partition this scenario again",
            dir.join("partition.json").display(),
            identity.seed,
            scenario.seed
        );
    }
    let part = scenario.part.clone().context("a part was loaded")?;
    let name = format!("{}-shard-{}-of-{}", scenario.name, shard.index, shard.count);
    let target = results_folder(args.out.as_deref(), &name);
    // Run again after a failure elsewhere: a shard already decided is kept.
    if let Ok(done) = read_json::<ShardFile>(&target.join(SHARD_FILE), "")
        && done.format == SHARD_FORMAT
        && done.identity == *identity
        && done.index == shard.index
    {
        return super::print(
            args.quiet,
            &format!(
                "shard {shard} of this partitioning is already complete in {}; skipped\n",
                target.display()
            ),
        );
    }
    let staging = Staging::new(&target)?;
    warn(staging.notes());
    let count = scenario.limiters.len();
    let (per_key, global): (Vec<usize>, Vec<usize>) =
        (0..count).partition(|&l| scenario.limiters[l].limiter.keys_matter());
    let mut workloads = Vec::new();
    let mut decided = 0u64;
    for (w, workload) in scenario.workloads.iter().enumerate() {
        let origin = whole.logs.get(w).and_then(|log| log.origin);
        let mut limiters: Vec<Option<ShardLimiter>> = vec![None; count];
        for (over, chosen) in [(Over::Key, &per_key), (Over::Time, &global)] {
            if chosen.is_empty() {
                continue;
            }
            let mut decide = Decide::new(&scenario, w, chosen, origin);
            let mut writers = chosen
                .iter()
                .map(|&l| {
                    (0..decide.placements())
                        .map(|p| Ok(CodesWriter::new(staging.create(&codes_file(w, l, p))?)))
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<Vec<_>>>()?;
            let mut reader = match over {
                Over::Key => part.arrivals(w, [workload.is_keyed(), workload.names_hosts()]),
                Over::Time => part.slice(w),
            }
            .map_err(anyhow::Error::msg)?;
            for arrival in reader.by_ref() {
                decide
                    .decide(arrival, &mut |slot, p, code| writers[slot][p].push(code))
                    .context("writing the shard's decisions")?;
                decided += 1;
                if decided.is_multiple_of(1 << 16) {
                    crate::interrupt::check()?;
                }
            }
            if let Some(error) = reader.take_error() {
                bail!("workload {:?}: {error}", workload.name);
            }
            for ((files, &l), (tallies, state)) in
                writers.into_iter().zip(chosen).zip(decide.finish())
            {
                let decisions = files
                    .into_iter()
                    .map(|writer| flushed(writer.finish()))
                    .collect::<std::io::Result<Vec<_>>>()
                    .context("writing the shard's decisions")?;
                limiters[l] = Some(ShardLimiter {
                    name: scenario.limiters[l].name.clone(),
                    over,
                    decisions,
                    tallies: tallies.filter(|_| over == Over::Key),
                    state,
                });
            }
        }
        workloads.push(limiters.into_iter().flatten().collect());
    }
    let file = ShardFile {
        format: SHARD_FORMAT.into(),
        identity: identity.clone(),
        index: shard.index,
        workloads,
    };
    let json = serde_json::to_string_pretty(&file).context("writing shard.json")?;
    staging.write(SHARD_FILE, &(json + "\n"))?;
    staging.commit()?;
    if !args.quiet {
        println!(
            "shard {shard}: {decided} decisions of {} limiter(s) ({} per key on part {}, {} global on its slice of time) under {}",
            count,
            per_key.len(),
            shard.index,
            global.len(),
            target.display()
        );
    }
    Ok(())
}

/// `burstsim merge --partition DIR SHARD…`.
pub fn merge(args: &MergeArgs, dir: &Path) -> Result<()> {
    let whole = partitioning(dir)?;
    let identity = &whole.identity;
    let parts = usize::try_from(identity.parts).context("parts")?;
    let mut shards: Vec<Option<(PathBuf, ShardFile)>> = vec![None; parts];
    for given in &args.parts {
        let folder = if given.is_dir() {
            given.clone()
        } else {
            given.parent().map(Path::to_owned).unwrap_or_default()
        };
        let file = folder.join(SHARD_FILE);
        let shard: ShardFile = read_json(&file, "a shard's shard.json")?;
        if shard.format != SHARD_FORMAT {
            bail!(
                "{}: format {:?}, where this burstsim reads {SHARD_FORMAT:?}",
                file.display(),
                shard.format
            );
        }
        if shard.identity != *identity {
            bail!(
                "{}: a shard of another partitioning than {} (scenario {:?}, fingerprint {}, seed {}, {} parts); decide it again from this one",
                file.display(),
                dir.display(),
                shard.identity.scenario,
                shard.identity.scenario_hash,
                shard.identity.seed,
                shard.identity.parts
            );
        }
        let index = usize::try_from(shard.index)
            .ok()
            .filter(|&i| i < parts)
            .with_context(|| {
                format!(
                    "{}: shard {} of a partitioning of {parts} parts",
                    file.display(),
                    shard.index
                )
            })?;
        if let Some((other, _)) = &shards[index] {
            bail!(
                "{} and {} are both shard {index} of {parts}: give each once",
                other.display(),
                folder.display()
            );
        }
        shards[index] = Some((folder, shard));
    }
    let shards: Vec<(PathBuf, ShardFile)> = shards
        .into_iter()
        .enumerate()
        .map(|(i, shard)| {
            shard.with_context(|| {
                format!(
                    "missing shard {i} of {parts}: decide it (burstsim run {} --partition {} --shard {i}/{parts}), then merge again",
                    whole.scenario_file,
                    dir.display()
                )
            })
        })
        .collect::<Result<_>>()?;
    // The scenario as partitioned, its logs' whole figures preset: no trace is read.
    let path = PathBuf::from(&whole.scenario_file);
    let preset = Replayed {
        dir: dir.to_owned(),
        file: PartFile {
            identity: identity.clone(),
            index: 0,
            files: identity
                .workloads
                .iter()
                .map(|w| PartStream {
                    rows: w.rows,
                    hash: w.hash.clone(),
                })
                .collect(),
            keys: Vec::new(),
            slices: Vec::new(),
        },
        clients: vec![Vec::new(); identity.workloads.len()],
        logs: whole.logs.clone(),
    };
    let mut scenario =
        crate::scenario::parse_part(&whole.text, &path, std::sync::Arc::new(preset))?;
    scenario.part = None;
    scenario.seed = identity.seed;
    for (folder, shard) in &shards {
        let names: Vec<&str> = scenario.limiters.iter().map(|l| l.name.as_str()).collect();
        let matches = shard.workloads.len() == scenario.workloads.len()
            && shard.workloads.iter().all(|limiters| {
                limiters
                    .iter()
                    .map(|l| l.name.as_str())
                    .eq(names.iter().copied())
            });
        if !matches {
            bail!(
                "{}: its workloads or limiters are not the scenario's",
                folder.join(SHARD_FILE).display()
            );
        }
    }
    // Each part's part.json, read once: of this partitioning, in its place.
    let part_files = (0..parts)
        .map(|i| {
            let file = dir.join(i.to_string()).join("part.json");
            let part: PartFile = read_json(&file, "a part's part.json")?;
            if part.identity != *identity || part.index != i as u64 {
                bail!("{}: not part {i} of this partitioning", file.display());
            }
            Ok(part)
        })
        .collect::<Result<Vec<_>>>()?;
    let charts = !args.output.no_charts;
    let options = crate::sim::Options {
        packed: true,
        ..if charts {
            crate::sim::for_charts(&scenario)
        } else {
            crate::sim::Options::default()
        }
    };
    let mut workloads = Vec::new();
    for w in 0..scenario.workloads.len() {
        workloads.push(merge_workload(
            &scenario,
            &options,
            &whole,
            dir,
            &shards,
            &part_files,
            w,
        )?);
    }
    let results = crate::results::Results::new(&scenario, options.curve.clone(), workloads);
    let target = results_folder(args.output.out.as_deref(), &scenario.name);
    let staging = Staging::new(&target)?;
    warn(staging.notes());
    let (summary, json, csv) = crate::job::write(&results, charts, &staging)?;
    staging.commit()?;
    let runs = &summary.runs;
    let mut tables = crate::report::table::render_table(runs) + "\n";
    for line in crate::report::log_comparison(runs) {
        tables += &format!("{line}\n");
    }
    if let Some(verdict) = crate::check::Verdict::of(runs) {
        tables += &super::run::verdict_lines(&verdict);
    }
    print_results(
        args.output.quiet,
        args.output.format,
        &target,
        tables,
        &json,
        &csv,
    )
}

/// Workload `w`'s results, from every shard's decisions in the whole
/// workload's order: the parts' arrivals merged by their place in it.
fn merge_workload(
    scenario: &crate::scenario::Scenario,
    options: &crate::sim::Options,
    whole: &Partitioning,
    dir: &Path,
    shards: &[(PathBuf, ShardFile)],
    part_files: &[PartFile],
    w: usize,
) -> Result<crate::results::WorkloadResults> {
    let workload = &scenario.workloads[w];
    let count = scenario.limiters.len();
    let limiter = |shard: &ShardFile, l: usize| shard.workloads[w][l].clone();
    let merged: Vec<Option<Merged>> = (0..count)
        .map(|l| {
            let tallies: Vec<(KeyTallies, Option<(u64, u64)>)> = shards
                .iter()
                .filter_map(|(_, s)| Some((limiter(s, l).tallies?, limiter(s, l).state)))
                .collect();
            let list: Vec<KeyTallies> = tallies.iter().map(|t| t.0.clone()).collect();
            let added = KeyTallies::add(&list)?;
            let state = tallies
                .iter()
                .filter_map(|t| t.1)
                .fold((0, 0), |(a, r), (x, y)| (a + x, r + y));
            let candidates = list
                .iter()
                .filter(|t| t.busiest.0 == added.busiest.0)
                .map(|t| t.busiest.1)
                .collect();
            Some(Merged {
                tallies: added,
                state,
                candidates,
                empty: whole
                    .logs
                    .get(w)
                    .map_or([0, 0], |log| [log.absent, log.blank]),
            })
        })
        .collect();
    let origin = whole.logs.get(w).and_then(|log| log.origin);
    let mut recount = Recount::new(scenario, options, w, origin, merged);
    let placements = recount.placements();
    // codes[shard][limiter][placement]
    let mut codes = Vec::with_capacity(shards.len());
    for (folder, shard) in shards {
        let mut of_shard = Vec::with_capacity(count);
        for l in 0..count {
            let decided = limiter(shard, l);
            if decided.decisions.len() != placements {
                bail!(
                    "{}: limiter {:?} has {} placements of decisions, where the merge counts {placements}",
                    folder.join(SHARD_FILE).display(),
                    decided.name,
                    decided.decisions.len()
                );
            }
            let readers = decided
                .decisions
                .iter()
                .enumerate()
                .map(|(p, expected)| {
                    CodesReader::open(&folder.join(codes_file(w, l, p)), expected.clone())
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(anyhow::Error::msg)?;
            of_shard.push((decided.over, readers));
        }
        codes.push(of_shard);
    }
    let keys = [workload.is_keyed(), workload.names_hosts()];
    let mut readers: Vec<PartReader> = Vec::with_capacity(shards.len());
    for (i, file) in part_files.iter().enumerate() {
        let expected = file
            .files
            .get(w)
            .cloned()
            .context("a part without the workload")?;
        let rows = dir.join(i.to_string()).join(crate::partition::rows_file(w));
        let mut reader = PartReader::open(&rows, expected).map_err(anyhow::Error::msg)?;
        reader.set_keys(keys);
        readers.push(reader);
    }
    // The next arrival of each part, by its place in the whole workload.
    let mut heap = BinaryHeap::new();
    for (i, reader) in readers.iter_mut().enumerate() {
        if let Some((arrival, place)) = reader.next_with_place() {
            heap.push(std::cmp::Reverse((
                place,
                i,
                arrival.time.get(),
                arrival.key.client,
                arrival.key.host,
            )));
        }
    }
    let overs: Vec<Over> = codes[0].iter().map(|(over, _)| *over).collect();
    let mut counted = 0u64;
    while let Some(std::cmp::Reverse((_, part, time, client, host))) = heap.pop() {
        let arrival = crate::traffic::Arrival {
            time: crate::time::Nanos(time),
            key: crate::traffic::Key { client, host },
        };
        let slice = slice_of(&whole.cuts, arrival.time).min(shards.len() - 1);
        for (l, over) in overs.iter().enumerate() {
            let from = match over {
                Over::Key => part,
                Over::Time => slice,
            };
            for p in 0..placements {
                let code = codes[from][l].1[p]
                    .next_code()
                    .map_err(anyhow::Error::msg)?;
                recount.record(l, p, arrival, code);
            }
        }
        if let Some((arrival, place)) = readers[part].next_with_place() {
            heap.push(std::cmp::Reverse((
                place,
                part,
                arrival.time.get(),
                arrival.key.client,
                arrival.key.host,
            )));
        }
        counted += 1;
        if counted.is_multiple_of(1 << 16) {
            crate::interrupt::check()?;
        }
    }
    for reader in &mut readers {
        if let Some(error) = reader.take_error() {
            bail!("workload {:?}: {error}", workload.name);
        }
    }
    for reader in codes.iter_mut().flatten().flat_map(|(_, r)| r.iter_mut()) {
        reader.finish().map_err(anyhow::Error::msg)?;
    }
    let recounted = recount.finish(scenario);
    // The busiest clients' values and names, from the parts' clients.
    let mut wanted: HashMap<u64, (u64, Option<String>)> = HashMap::new();
    let busiest = recounted.busiest();
    for (i, file) in part_files.iter().enumerate() {
        if busiest.iter().all(|id| wanted.contains_key(id)) {
            break;
        }
        let expected = file
            .keys
            .get(w)
            .context("a part without the workload's clients")?;
        let clients = dir.join(i.to_string()).join(crate::partition::keys_file(w));
        let facts = crate::partition::read_keys(&clients, expected).map_err(anyhow::Error::msg)?;
        for fact in facts {
            if busiest.contains(&fact.id) {
                wanted.entry(fact.id).or_insert((fact.value, fact.name));
            }
        }
    }
    let name = |key: crate::traffic::Key| {
        wanted
            .get(&key.client)
            .cloned()
            .unwrap_or((key.client, None))
    };
    Ok(recounted.results(scenario, &name))
}
