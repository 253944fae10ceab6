//! Replications and their summary: every numeric result becomes an estimate with a 95%
//! confidence interval from the spread between independent replications (Student's t).

use crate::engine::{run_replication_on, Engine, Measured};
use crate::error::{Error, Result};
use crate::result::ReplicationResult;
use crate::scenario::Scenario;
use crate::shard;
use rayon::prelude::*;
use serde::Serialize;
use serde_json::{json, Map, Value};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The result of running a scenario: a header describing what ran, the summary over
/// replications, and each replication's own figures.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport<R = ReplicationResult> {
    pub scenario: String,
    pub policy: String,
    /// The engine that ran it: "direct", "events" (the same figures either way), or
    /// "direct+events" (see [`engine_name`]).
    pub engine: &'static str,
    pub dynos: u32,
    pub slots: u32,
    pub routers: u32,
    pub arrival_rate: f64,
    pub service_mean: f64,
    pub offered_load: f64,
    /// How long the queues take to settle, s (see [`Scenario::relaxation_time`]).
    pub relaxation_time: Option<f64>,
    pub duration: f64,
    pub warmup: f64,
    pub replications: u32,
    pub seed: u64,
    /// Shards the fleet ran in (1: whole; see [`crate::shard`]).
    pub shards: u32,
    /// The same tree as one replication's figures, each number replaced by an [`Estimate`]
    /// (per-dyno lists by their element-wise mean).
    pub summary: Value,
    pub per_replication: Vec<R>,
    pub wall_seconds: f64,
}

/// A mean over replications with its 95% confidence interval (null with one replication).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Estimate {
    pub mean: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub std_error: f64,
}

impl Estimate {
    pub fn from_samples(xs: &[f64]) -> Estimate {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        if xs.len() < 2 {
            return Estimate {
                mean,
                ci_low: f64::NAN,
                ci_high: f64::NAN,
                std_error: f64::NAN,
            };
        }
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let se = (var / n).sqrt();
        let t = StudentsT::new(0.0, 1.0, n - 1.0)
            .expect("df >= 1")
            .inverse_cdf(0.975);
        Estimate {
            mean,
            ci_low: mean - t * se,
            ci_high: mean + t * se,
            std_error: se,
        }
    }
}

/// Fleets up to this many dynos get `utilisation.per_dyno` in the report's summary (the mean
/// over replications); larger ones do not, so that a report stays small whatever the fleet.
/// Each replication's own list is never kept: the report's memory does not grow with dynos ×
/// replications.
pub const PER_DYNO_LIMIT: u32 = 10_000;

/// Runs every replication of the scenario, in parallel over the machine's cores (as many at
/// once as `run.max_memory` has room for); results are in replication order and do not depend
/// on the number of threads.
pub fn run(scenario: &Scenario, interrupted: &(dyn Fn() -> bool + Sync)) -> Result<RunReport> {
    scenario.check_stable()?;
    let started = std::time::Instant::now();
    let mut per_dyno_sum = PerDynoSum::new(scenario);
    let mut per_replication = Vec::with_capacity(scenario.replications as usize);
    replications(
        scenario,
        0,
        u64::from(scenario.replications),
        interrupted,
        |mut result| {
            per_dyno_sum.add(&std::mem::take(&mut result.utilisation.per_dyno));
            per_replication.push(result);
        },
    )?;
    let trees: Vec<Value> = per_replication
        .iter()
        .map(|r| serde_json::to_value(r).expect("results serialize"))
        .collect();
    let summary = summary_of(&trees, per_dyno_sum.sums());
    let mut report = header(scenario, summary, per_replication);
    report.engine = engine_name(scenario, report.per_replication.iter().map(|r| r.engine));
    report.wall_seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Each dyno's utilisation summed over replications, when the report lists them (see
/// [`keeps_per_dyno`]).
struct PerDynoSum(Option<Vec<f64>>);

impl PerDynoSum {
    fn new(scenario: &Scenario) -> PerDynoSum {
        PerDynoSum(keeps_per_dyno(scenario).then(|| vec![0.0; scenario.dynos as usize]))
    }

    /// Adds a replication's list: called in replication order, as the mean of the whole list
    /// would sum them.
    fn add(&mut self, per_dyno: &[f64]) {
        if let Some(sums) = &mut self.0 {
            for (sum, u) in sums.iter_mut().zip(per_dyno) {
                *sum += u;
            }
        }
    }

    fn sums(&self) -> Option<&[f64]> {
        self.0.as_deref()
    }
}

/// Whether a report lists `utilisation.per_dyno` (see [`PER_DYNO_LIMIT`]).
fn keeps_per_dyno(scenario: &Scenario) -> bool {
    // A fleet that changes size has no fixed list of dynos: its figures are per dyno inside
    // the replication (see `crate::measure`), and none is listed.
    scenario.dynos <= PER_DYNO_LIMIT && !scenario.has_lifecycle()
}

/// Runs replications `first..end`, as many at once as `run.max_memory` has room for, on
/// `run.threads` threads (a fleet in shards: its shards too, see [`replications_in_shards`]),
/// and hands each result to `each` in replication order.
fn replications(
    scenario: &Scenario,
    first: u64,
    end: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
    mut each: impl FnMut(ReplicationResult) + Send,
) -> Result<()> {
    on_threads(scenario, || {
        let at_once = scenario.replications_at_once() as u64;
        for start in (first..end).step_by(at_once as usize) {
            let last = end.min(start + at_once);
            let batch: Vec<ReplicationResult> = if scenario.shards.is_empty() {
                (start..last)
                    .into_par_iter()
                    .map(|r| run_replication_on(scenario.engine, scenario, r, interrupted))
                    .collect::<Result<_>>()?
            } else {
                replications_in_shards(scenario, start..last, interrupted)?
            };
            batch.into_iter().for_each(&mut each);
        }
        Ok(())
    })
}

/// Runs `work` on `run.threads` threads: a pool of its own, or the global one (a thread per
/// core) by default.
fn on_threads<T: Send>(scenario: &Scenario, work: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    match scenario.threads {
        None => work(),
        Some(threads) => rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| {
                Error::config(
                    "run.threads",
                    format!("could not start {threads} threads: {e}"),
                )
            })?
            .install(work),
    }
}

/// Replications `replications` of a scenario split into shards: every (replication, shard)
/// pair is a task, run a few per thread at a time and merged in order into its replication
/// as it comes, so that the shards' measures waiting to be merged (each with histograms of
/// its own, some 200 kB) stay few whatever the shards and replications.
fn replications_in_shards(
    scenario: &Scenario,
    replications: std::ops::Range<u64>,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Vec<ReplicationResult>> {
    let shards = scenario.shards.len() as u64;
    let tasks: Vec<u64> = (replications.start * shards..replications.end * shards).collect();
    let at_a_time = 4 * rayon::current_num_threads();
    let mut results = Vec::with_capacity((replications.end - replications.start) as usize);
    let mut merging: Option<shard::Merging> = None;
    for chunk in tasks.chunks(at_a_time) {
        let parts: Vec<Measured> = chunk
            .par_iter()
            .map(|&task| {
                let part = &scenario.shards[(task % shards) as usize];
                shard::measure(part, task / shards, interrupted)
            })
            .collect::<Result<_>>()?;
        for (part, &task) in parts.into_iter().zip(chunk) {
            let m = match merging.take() {
                None => shard::Merging::new(scenario, part)?,
                Some(mut m) => {
                    m.add(part);
                    m
                }
            };
            if task % shards == shards - 1 {
                results.push(m.finish(scenario));
            } else {
                merging = Some(m);
            }
        }
    }
    Ok(results)
}

/// The summary of a run from its replications' trees (in replication order; per-dyno lists
/// emptied) and, when the report lists them, the per-dyno utilisations summed in that order.
fn summary_of(trees: &[Value], per_dyno_sum: Option<&[f64]>) -> Value {
    let mut summary = summarize(trees);
    if let Some(sums) = per_dyno_sum {
        let n = trees.len() as f64;
        summary["utilisation"]["per_dyno"] = sums.iter().map(|s| s / n).collect();
    }
    if summary.get("stability").is_some() {
        stability_summary(trees, &mut summary);
    }
    summary
}

/// The stability verdict over replications: `recovered` is the fraction that recovered (the
/// mean of their 1s and 0s, with its interval), `recovery_time` the mean over those that did
/// (null when none did), and `recovered_runs` their count.
fn stability_summary(trees: &[Value], summary: &mut Value) {
    let times: Vec<f64> = trees
        .iter()
        .filter_map(|t| t["stability"]["recovery_time"].as_f64())
        .collect();
    let s = &mut summary["stability"];
    s["recovery_time"] = if times.is_empty() {
        Value::Null
    } else {
        serde_json::to_value(Estimate::from_samples(&times)).expect("estimate serializes")
    };
    s["recovered_runs"] = serde_json::to_value(Estimate::from_samples(&[times.len() as f64]))
        .expect("estimate serializes");
}

/// The report's header (what ran), with `summary` and the replications' results.
fn header<R>(scenario: &Scenario, summary: Value, per_replication: Vec<R>) -> RunReport<R> {
    RunReport {
        scenario: scenario.name.clone(),
        policy: scenario.policy_name.clone(),
        engine: Engine::chosen(scenario).name(),
        dynos: scenario.dynos,
        slots: scenario.slots,
        routers: scenario.routers,
        arrival_rate: scenario.arrival_rate(),
        service_mean: scenario.service.mean(),
        offered_load: scenario.app_offered_load(),
        relaxation_time: scenario.relaxation_time(),
        duration: scenario.duration,
        warmup: scenario.warmup,
        replications: scenario.replications,
        seed: scenario.seed,
        shards: scenario.shards.len().max(1) as u32,
        summary,
        per_replication,
        wall_seconds: 0.0,
    }
}

/// A block of a run's replications, `first..first + results.len()`: a part of one run done
/// elsewhere (a Dask task; see `dynosim.distributed`), merged with the others by
/// [`assemble`] into the report [`run`] makes, to the last bit.
#[derive(Debug, Clone, Serialize)]
pub struct Block {
    pub first: u64,
    /// Each replication's figures, its per-dyno utilisation taken out (in `per_dyno`).
    pub results: Vec<ReplicationResult>,
    /// Each replication's per-dyno utilisation (empty lists when the report lists none).
    pub per_dyno: Vec<Vec<f64>>,
    /// The engine that ran each replication ("direct" or "events").
    pub engines: Vec<&'static str>,
}

/// Runs replications `first..first + count` of the scenario (see [`Block`]).
pub fn run_block(
    scenario: &Scenario,
    first: u64,
    count: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Block> {
    scenario.check_stable()?;
    let end = (first + count).min(u64::from(scenario.replications));
    let keep_per_dyno = keeps_per_dyno(scenario);
    let mut block = Block {
        first,
        results: Vec::new(),
        per_dyno: Vec::new(),
        engines: Vec::new(),
    };
    replications(scenario, first, end, interrupted, |mut result| {
        let per_dyno = std::mem::take(&mut result.utilisation.per_dyno);
        block
            .per_dyno
            .push(if keep_per_dyno { per_dyno } else { Vec::new() });
        block.engines.push(result.engine);
        block.results.push(result);
    })?;
    Ok(block)
}

/// What [`assemble`] needs of every replication of a run, in replication order: its figures
/// as a tree (a [`ReplicationResult`] as JSON, per-dyno list emptied), its per-dyno
/// utilisation, and the engine that ran it; gathered from [`Block`]s however they travelled
/// (their numbers must come back exactly: JSON read with correct rounding).
pub struct Gathered<'a> {
    pub trees: &'a [Value],
    pub per_dyno: &'a [Vec<f64>],
    pub engines: &'a [String],
}

/// The report of a run from all its replications (see [`Gathered`]), the same as [`run`]'s
/// but for `wall_seconds` (0) and `per_replication` (the trees given, which the caller may
/// replace with the blocks' own text).
pub fn assemble(scenario: &Scenario, gathered: Gathered<'_>) -> Result<RunReport<Value>> {
    let n = gathered.trees.len();
    if n != scenario.replications as usize
        || gathered.per_dyno.len() != n
        || gathered.engines.len() != n
    {
        return Err(crate::error::Error::config(
            "run.replications",
            format!(
                "the blocks hold {n} replications; the run has {}",
                scenario.replications
            ),
        ));
    }
    let mut per_dyno_sum = PerDynoSum::new(scenario);
    for per_dyno in gathered.per_dyno {
        per_dyno_sum.add(per_dyno);
    }
    let summary = summary_of(gathered.trees, per_dyno_sum.sums());
    let mut report = header(scenario, summary, gathered.trees.to_vec());
    let named = |e: &String| match e.as_str() {
        "direct" => "direct",
        _ => "events",
    };
    report.engine = engine_name(scenario, gathered.engines.iter().map(named));
    Ok(report)
}

/// The engine that ran the replications: the one chosen, or "direct+events" when `auto` chose
/// the direct engine and some replications were run again on the event-driven one (a timeout
/// fired under a policy that routes on what it changes: see `direct::Timeouts`).
fn engine_name(
    scenario: &Scenario,
    mut engines: impl Iterator<Item = &'static str>,
) -> &'static str {
    let chosen = Engine::chosen(scenario).name();
    let first = engines.next().unwrap_or(chosen);
    if engines.all(|e| e == first) {
        first
    } else {
        "direct+events"
    }
}

/// Merges same-shaped trees: numbers into estimates, lists element-wise into means.
fn summarize(trees: &[Value]) -> Value {
    match &trees[0] {
        Value::Object(first) => {
            let mut out = Map::new();
            for key in first.keys() {
                let children: Vec<Value> = trees.iter().map(|t| t[key].clone()).collect();
                out.insert(key.clone(), summarize(&children));
            }
            Value::Object(out)
        }
        Value::Array(first) => Value::Array(
            (0..first.len())
                .map(|i| {
                    let xs: Vec<f64> = trees
                        .iter()
                        .map(|t| t[i].as_f64().unwrap_or(f64::NAN))
                        .collect();
                    json!(xs.iter().sum::<f64>() / xs.len() as f64)
                })
                .collect(),
        ),
        Value::Number(_) => {
            let xs: Vec<f64> = trees
                .iter()
                .map(|t| t.as_f64().unwrap_or(f64::NAN))
                .collect();
            serde_json::to_value(Estimate::from_samples(&xs)).expect("estimate serializes")
        }
        other => other.clone(),
    }
}
