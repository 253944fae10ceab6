//! PyO3 bindings: convert between Python and the engine's types (and the log reader's), and
//! nothing more. Scenarios cross as JSON text (the Python side reads TOML); reports and log
//! summaries come back as JSON text. Engine errors become `EngineError(kind, path,
//! message)`, which `dynosim.errors` maps once into the package's exception hierarchy.

use dynosim_engine::app::Model;
use dynosim_engine::resource::{Discipline, PoolScope};
use dynosim_engine::scenario::CpuSharing;
use dynosim_engine::workload::Workload;
use dynosim_engine::{drawn, theory, Error, Scenario};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

create_exception!(
    _dynosim,
    EngineError,
    PyException,
    "An error reported by the engine."
);

fn to_py(err: Error) -> PyErr {
    let (kind, path) = match &err {
        Error::Config { path, .. } => ("config", path.clone()),
        Error::Unstable { .. } => ("unstable", String::new()),
        Error::Overloaded { .. } => ("overloaded", String::new()),
        Error::Interrupted => ("interrupted", String::new()),
    };
    let message = match &err {
        Error::Config { message, .. } => message.clone(),
        other => other.to_string(),
    };
    EngineError::new_err((kind, path, message))
}

/// Builds the scenario and hands it to `work`, both on a worker thread with the GIL released
/// (see [`without_gil`]): validating a scenario can take seconds (a rounded distribution's
/// moments, a long sample file), and Ctrl-C must stop that too.
fn with_scenario<T: Send>(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    work: impl FnOnce(Scenario, &(dyn Fn() -> bool + Sync)) -> Result<T, Error> + Send,
) -> PyResult<T> {
    without_gil(py, |stop| {
        work(
            Scenario::from_json(scenario_json, Path::new(base_dir), stop)?,
            stop,
        )
    })?
    .map_err(to_py)
}

/// Validates a scenario and describes it without running it (JSON text).
#[pyfunction]
fn describe(py: Python<'_>, scenario_json: &str, base_dir: &str) -> PyResult<String> {
    with_scenario(py, scenario_json, base_dir, |s, _| {
        Ok(serde_json::json!({
            "name": s.name,
            "policy": s.policy_name,
            "dynos": s.dynos,
            "slots": s.slots,
            "routers": s.routers,
            "arrival_rate": s.arrival_rate(),
            "service_mean": s.service.mean(),
            "service_second_moment": s.service.second_moment(),
            "offered_load": s.offered_load(),
            // The part of the system whose load offered_load is (threads, cores...).
            "bottleneck": s.bottleneck().0,
            // Whether a run would go ahead: a closed loop always does, whatever its load.
            "stable": s.check_stable().is_ok(),
            "closed_loop": s.workload.is_closed(),
            "busy_slots_needed": s.busy_slots_needed(),
            "relaxation_time": s.relaxation_time(),
            "duration": s.duration,
            "warmup": s.warmup,
            "replications": s.replications,
            // Engine state, bytes: one replication's, a whole run's at once (replications in
            // parallel), and a trace's (one replication on the event-driven engine), all
            // worked out before anything is allocated.
            "replication_bytes": s.replication_bytes(),
            "run_bytes": s.run_bytes(),
            "trace_bytes": s.trace_bytes(),
            "seed": s.seed,
            "dyno_type": s.dyno_type.name,
            "cores": s.dyno_type.cores,
            "memory_quota": s.dyno_type.quota,
            "app": {
                "server": s.app.server,
                "model": match s.app.model {
                    Model::Sync => "sync",
                    Model::Threaded => "threaded",
                    Model::Async => "async",
                },
                "processes": s.app.processes,
                "per_process": s.app.per_process,
                "os_threads": s.app.os_threads,
                // "gil", "gvl" or "none".
                "lock": s.app.lock.name(),
                "switch_interval": s.app.switch_interval,
                "timeslice": s.app.timeslice,
                // The server's own CPU per request, mean seconds (0: not modelled).
                "request_cpu": s.request.as_ref().filter(|r| r.has_server_cpu())
                    .map_or(0.0, |r| r.classes[0].phases[0].time.mean()),
                // The fleet's mean boot time, kept here under its old name too.
                "boot_time": s.boot_time.mean(),
                // Mean seconds, 0 when not modelled.
                "overhead": s.app.overhead.as_ref().map_or(0.0, |o| o.mean()),
            },
            "connect": s.connect.as_ref().map_or(0.0, |c| c.mean()),
            // router.view: how late the loads the routers read are; `read` is false for a
            // policy that reads no load (random, round_robin), which the view leaves alone.
            "view": {
                "update": s.view.update.name(),
                "interval": s.view.interval,
                "read": s.reads_board(),
            },
            // A router on the dyno's machine: its mean CPU per request on the dyno's cores
            // (0: it runs elsewhere).
            "colocated_cpu": s.colocated_cpu.as_ref().map_or(0.0, |c| c.mean()),
            "cpu": {
                "sharing": match s.cpu.sharing { CpuSharing::Slices => "slices", CpuSharing::Ps => "ps" },
                "quantum": s.cpu.quantum,
                "jitter": s.cpu.jitter,
            },
            "resources": s.resources.iter().map(|r| serde_json::json!({
                "name": r.name,
                "servers": r.servers,
                "discipline": match r.discipline { Discipline::Fcfs => "fcfs", Discipline::Ps => "ps" },
                "pool": r.pool.map(|(size, per)| serde_json::json!({
                    "size": size,
                    "per": match per { PoolScope::Process => "process", PoolScope::Dyno => "dyno", PoolScope::App => "app" },
                })),
            })).collect::<Vec<_>>(),
            "closed_clients": match &s.workload {
                Workload::Closed(c) => Some(c.count),
                Workload::Open(_) => None,
            },
            "closed_requests": match &s.workload {
                Workload::Closed(c) => c.requests,
                Workload::Open(_) => None,
            },
        })
        .to_string())
    })
}

/// The requests replication `replication` draws up to `until` s, at most `limit` (JSON text of
/// `dynosim_engine::drawn::Drawn`): what the testbed sends.
#[pyfunction]
fn draw_requests(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    replication: u64,
    until: f64,
    limit: usize,
) -> PyResult<String> {
    let drawn = with_scenario(py, scenario_json, base_dir, |s, _| {
        Ok(drawn::draw(&s, replication, until, limit))
    })?;
    Ok(serde_json::to_string(&drawn).expect("drawn requests serialize"))
}

/// Service-time quantiles of a scenario's distribution (after rounding and clipping); each p
/// must lie strictly between 0 and 1.
#[pyfunction]
fn service_quantiles(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    ps: Vec<f64>,
) -> PyResult<Vec<f64>> {
    if let Some(p) = ps.iter().find(|&&p| !(p > 0.0 && p < 1.0)) {
        return Err(PyValueError::new_err(format!(
            "service_quantiles: p must lie strictly between 0 and 1, got {p}"
        )));
    }
    with_scenario(py, scenario_json, base_dir, |s, _| {
        Ok(ps.iter().map(|&p| s.service.quantile(p)).collect())
    })
}

/// P(S <= x) for each x of a scenario's service-time distribution (after rounding and
/// clipping): for the KS distance of a fitted scenario.
#[pyfunction]
fn service_cdf(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    xs: Vec<f64>,
) -> PyResult<Vec<f64>> {
    with_scenario(py, scenario_json, base_dir, |s, _| {
        Ok(xs.iter().map(|&x| s.service.cdf(x)).collect())
    })
}

/// Runs a scenario's replications with the GIL released; Ctrl-C stops the run.
#[pyfunction]
fn run(py: Python<'_>, scenario_json: &str, base_dir: &str) -> PyResult<String> {
    let report = with_scenario(py, scenario_json, base_dir, |scenario, stop| {
        dynosim_engine::run(&scenario, stop)
    })?;
    Ok(serde_json::to_string(&report).expect("reports serialize"))
}

/// Replications `first..first + count` of a scenario with the GIL released: a block of one
/// run split across machines (`dynosim.distributed`), JSON text `{"first", "results": [each
/// replication's figures], "per_dyno": [each one's per-dyno utilisation], "engines": [..]}`.
#[pyfunction]
fn run_block(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    first: u64,
    count: u64,
) -> PyResult<String> {
    let block = with_scenario(py, scenario_json, base_dir, |scenario, stop| {
        dynosim_engine::run_block(&scenario, first, count, stop)
    })?;
    Ok(serde_json::to_string(&block).expect("blocks serialize"))
}

/// The report of a run from all its replications, gathered from its blocks' JSON (read by
/// Python's json, which rounds exactly): `results` each replication's figures (Python objects),
/// `per_dyno` and `engines` as the blocks hold them. JSON text: `run`'s report, the same to the
/// last bit, but for `wall_seconds` (0) and `per_replication` (empty: the caller puts the
/// blocks' own `results` there).
#[pyfunction]
fn assemble(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    results: &Bound<'_, PyAny>,
    per_dyno: Vec<Vec<f64>>,
    engines: Vec<String>,
) -> PyResult<String> {
    let trees = match json_value(results)? {
        serde_json::Value::Array(trees) => trees,
        _ => {
            return Err(PyValueError::new_err(
                "results: expected a list of replications' figures",
            ))
        }
    };
    let report = with_scenario(py, scenario_json, base_dir, |scenario, _| {
        let gathered = dynosim_engine::Gathered {
            trees: &trees,
            per_dyno: &per_dyno,
            engines: &engines,
        };
        dynosim_engine::assemble(&scenario, gathered).map(|mut report| {
            report.per_replication.clear();
            report
        })
    })?;
    Ok(serde_json::to_string(&report).expect("reports serialize"))
}

/// A Python object read from JSON (dicts, lists, strings, numbers, booleans, None) as a JSON
/// value, numbers exactly as Python holds them.
fn json_value(obj: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString};
    use serde_json::Value;
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.downcast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.downcast::<PyInt>().is_ok() {
        if let Ok(n) = obj.extract::<u64>() {
            return Ok(Value::from(n));
        }
        return Ok(Value::from(obj.extract::<i64>()?));
    }
    if let Ok(x) = obj.downcast::<PyFloat>() {
        return Ok(serde_json::Number::from_f64(x.value()).map_or(Value::Null, Value::Number));
    }
    if obj.downcast::<PyString>().is_ok() {
        return Ok(Value::String(obj.extract::<String>()?));
    }
    if let Ok(list) = obj.downcast::<PyList>() {
        return list
            .iter()
            .map(|x| json_value(&x))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    if let Ok(dict) = obj.downcast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, v) in dict.iter() {
            map.insert(k.extract::<String>()?, json_value(&v)?);
        }
        return Ok(Value::Object(map));
    }
    Err(PyValueError::new_err(format!(
        "not a JSON value: {}",
        obj.get_type().name()?
    )))
}

/// One replication of a scenario, snapshotted every `interval` s up to `until` s (JSON text:
/// `{"interval": .., "frames": [{"time", "depth": [per dyno, or empty without per_dyno],
/// "router_waiting", "dyno_waiting", "busy", "arrived", "queued", "completed", "failed"}, ..]}`).
#[pyfunction]
#[pyo3(signature = (scenario_json, base_dir, interval, until, per_dyno = true))]
fn trace(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    interval: f64,
    until: f64,
    per_dyno: bool,
) -> PyResult<String> {
    let trace = with_scenario(py, scenario_json, base_dir, |scenario, stop| {
        dynosim_engine::trace_replication(&scenario, 0, interval, until, per_dyno, stop)
            .map(|(_, t)| t)
    })?;
    Ok(serde_json::to_string(&trace).expect("traces serialize"))
}

/// Counts calls to [`interrupt`]: a run stops when the count moves past the value it started
/// with, whichever thread it runs on.
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);

/// Stops every run in progress, on any thread (they raise the interrupted error). Signals
/// reach only the main thread; a caller that runs the engine on worker threads (a sweep)
/// calls this when Ctrl-C arrives.
#[pyfunction]
fn interrupt() {
    INTERRUPTS.fetch_add(1, Ordering::Relaxed);
}

/// Each cancel token's flag (see [`set_cancel_token`]): set by [`cancel`], dropped by
/// [`forget_token`].
static TOKENS: Mutex<BTreeMap<u64, Arc<AtomicBool>>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// The token of the runs this thread starts (0: none).
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

fn token_flag(token: u64) -> Arc<AtomicBool> {
    let mut tokens = TOKENS.lock().unwrap_or_else(|e| e.into_inner());
    tokens.entry(token).or_default().clone()
}

/// The engine calls this thread makes from now on (runs, traces, validations) stop when
/// [`cancel`] is called with `token`, from any thread; 0 stops none. A server runs each
/// client's work on a thread of its own with a token, so that a newer request of that client
/// stops the older one, and no other client's.
#[pyfunction]
fn set_cancel_token(token: u64) {
    TOKEN.with(|t| t.set(token));
}

/// Stops the runs of `token` in progress and those it starts later (they raise the
/// interrupted error), until [`forget_token`].
#[pyfunction]
fn cancel(token: u64) {
    token_flag(token).store(true, Ordering::Relaxed);
}

/// Drops `token`'s flag: a token done with (cancelled or not) costs nothing more.
#[pyfunction]
fn forget_token(token: u64) {
    TOKENS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&token);
}

/// Runs `work` with the GIL released, on another thread, while this one watches for Ctrl-C
/// (signals reach only the main thread); `work` polls the flag it is given. The exception a
/// signal handler raised (KeyboardInterrupt, or the CLI's own for SIGTERM) is raised as it
/// is, whether or not `work` noticed the stop in time: dropping it lost the signal when the
/// work finished first (a quick validation), and Ctrl-C went unheeded.
fn without_gil<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&(dyn Fn() -> bool + Sync)) -> T + Send,
) -> PyResult<T> {
    let stop = AtomicBool::new(false);
    let generation = INTERRUPTS.load(Ordering::Relaxed);
    let token = TOKEN.with(Cell::get);
    let cancelled = (token != 0).then(|| token_flag(token));
    let stopped = || {
        stop.load(Ordering::Relaxed)
            || INTERRUPTS.load(Ordering::Relaxed) != generation
            || cancelled
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
    };
    let (result, signalled) = py.detach(|| {
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| work(&stopped));
            let mut signalled = None;
            while !worker.is_finished() {
                std::thread::sleep(Duration::from_millis(2));
                if let Err(e) = Python::attach(|py| py.check_signals()) {
                    stop.store(true, Ordering::Relaxed);
                    signalled.get_or_insert(e);
                }
            }
            (worker.join().expect("the engine does not panic"), signalled)
        })
    });
    match signalled {
        Some(e) => Err(e),
        None => Ok(result),
    }
}

/// The registered names of each extension point.
#[pyfunction]
fn registry(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let d = pyo3::types::PyDict::new(py);
    d.set_item("policies", dynosim_engine::policy::REGISTRY.names())?;
    d.set_item("distributions", dynosim_engine::dist::REGISTRY.names())?;
    d.set_item(
        "arrival_processes",
        dynosim_engine::arrivals::REGISTRY.names(),
    )?;
    d.set_item("autoscalers", dynosim_engine::autoscale::REGISTRY.names())?;
    let types: Vec<&str> = dynosim_engine::app::DYNO_TYPES
        .iter()
        .map(|t| t.0)
        .collect();
    d.set_item("dyno_types", types)?;
    Ok(d.into_any().unbind())
}

/// The reference of every scenario key (JSON text: `formats`, `sections`, `kinds`, `keys`).
#[pyfunction]
fn keys() -> String {
    dynosim_engine::schema::to_json().to_string()
}

/// A duration in seconds from `"306ms"`, `"5min"`... (the scenario's units), or None.
#[pyfunction]
fn parse_duration(text: &str) -> Option<f64> {
    dynosim_engine::units::parse_duration(text)
}

/// A size in bytes from `"512MB"`, `"2GB"`... (the scenario's units), or None.
#[pyfunction]
fn parse_bytes(text: &str) -> Option<f64> {
    dynosim_engine::units::parse_bytes(text)
}

/// A theory helper's answer, or ValueError when its arguments are outside its domain.
fn in_domain<T>(value: Option<T>, call: impl FnOnce() -> String, needs: &str) -> PyResult<T> {
    value.ok_or_else(|| PyValueError::new_err(format!("{}: needs {needs}", call())))
}

#[pyfunction]
fn erlang_c(c: u32, a: f64) -> PyResult<f64> {
    in_domain(
        theory::erlang_c(c, a),
        || format!("erlang_c(c={c}, a={a})"),
        "0 <= a < c",
    )
}

#[pyfunction]
fn mmc_mean_wait(c: u32, a: f64, mean_service: f64) -> PyResult<f64> {
    in_domain(
        theory::mmc_mean_wait(c, a, mean_service),
        || format!("mmc_mean_wait(c={c}, a={a}, mean_service={mean_service})"),
        "0 <= a < c and mean_service > 0",
    )
}

#[pyfunction]
fn mg1_mean_wait(arrival_rate: f64, mean_service: f64, second_moment: f64) -> PyResult<f64> {
    in_domain(
        theory::mg1_mean_wait(arrival_rate, mean_service, second_moment),
        || {
            format!(
                "mg1_mean_wait(arrival_rate={arrival_rate}, mean_service={mean_service}, \
                 second_moment={second_moment})"
            )
        },
        "arrival_rate >= 0, mean_service > 0, mean_service^2 <= second_moment < inf \
         and arrival_rate * mean_service < 1",
    )
}

#[pyfunction]
fn power_of_d_mean_time(load: f64, d: u32) -> PyResult<f64> {
    in_domain(
        theory::power_of_d_mean_time(load, d),
        || format!("power_of_d_mean_time(load={load}, d={d})"),
        "0 <= load < 1 and d >= 2",
    )
}

#[pyfunction]
fn ps_mean_response(arrival_rate: f64, mean_service: f64, cores: u32) -> PyResult<f64> {
    in_domain(
        theory::ps_mean_response(arrival_rate, mean_service, cores),
        || {
            format!(
                "ps_mean_response(arrival_rate={arrival_rate}, mean_service={mean_service}, \
                 cores={cores})"
            )
        },
        "arrival_rate >= 0, mean_service > 0, cores >= 1 and arrival_rate * mean_service < cores",
    )
}

#[pyfunction]
fn mm1_late_fraction(arrival_rate: f64, service_rate: f64, deadline: f64) -> PyResult<f64> {
    in_domain(
        theory::mm1_late_fraction(arrival_rate, service_rate, deadline),
        || {
            format!(
                "mm1_late_fraction(arrival_rate={arrival_rate}, service_rate={service_rate}, \
                 deadline={deadline})"
            )
        },
        "0 <= arrival_rate < service_rate and deadline >= 0",
    )
}

/// Erlang-A as (p_wait, p_abandon, mean_wait, mean_queue).
#[pyfunction]
fn erlang_a(
    servers: u32,
    arrival_rate: f64,
    mean_service: f64,
    mean_patience: f64,
) -> PyResult<(f64, f64, f64, f64)> {
    let a = in_domain(
        theory::erlang_a(servers, arrival_rate, mean_service, mean_patience),
        || {
            format!(
                "erlang_a(servers={servers}, arrival_rate={arrival_rate}, \
                 mean_service={mean_service}, mean_patience={mean_patience})"
            )
        },
        "servers >= 1, arrival_rate > 0, mean_service > 0 and mean_patience > 0",
    )?;
    Ok((a.p_wait, a.p_abandon, a.mean_wait, a.mean_queue))
}

#[pyfunction]
fn mmck_blocking(
    servers: u32,
    capacity: u32,
    arrival_rate: f64,
    mean_service: f64,
) -> PyResult<f64> {
    in_domain(
        theory::mmck_blocking(servers, capacity, arrival_rate, mean_service),
        || {
            format!(
                "mmck_blocking(servers={servers}, capacity={capacity}, \
                 arrival_rate={arrival_rate}, mean_service={mean_service})"
            )
        },
        "servers >= 1, capacity >= servers, arrival_rate >= 0 and mean_service > 0",
    )
}

#[pyfunction]
fn pool_mean_wait(arrival_rate: f64, mean_hold: f64, connections: u32) -> PyResult<f64> {
    in_domain(
        theory::pool_mean_wait(arrival_rate, mean_hold, connections),
        || {
            format!(
                "pool_mean_wait(arrival_rate={arrival_rate}, mean_hold={mean_hold}, \
                 connections={connections})"
            )
        },
        "arrival_rate >= 0, mean_hold > 0 and arrival_rate * mean_hold < connections",
    )
}

#[pyfunction]
fn cpu_bound_throughput(
    cpu_per_request: f64,
    processes: u32,
    threads_per_process: u32,
    cores: u32,
    lock: bool,
) -> PyResult<f64> {
    in_domain(
        theory::cpu_bound_throughput(cpu_per_request, processes, threads_per_process, cores, lock),
        || {
            format!(
                "cpu_bound_throughput(cpu_per_request={cpu_per_request}, processes={processes}, \
                 threads_per_process={threads_per_process}, cores={cores}, lock={lock})"
            )
        },
        "cpu_per_request > 0 (finite) and processes, threads_per_process, cores >= 1",
    )
}

#[pyfunction]
fn littles_law_gap(mean_in_system: f64, throughput: f64, mean_response: f64) -> f64 {
    theory::littles_law_gap(mean_in_system, throughput, mean_response)
}

/// Exact MVA of a closed network; `stations` are `(demand, servers, kind)` with kind
/// "queueing" or "delay". Returns a dict of the `theory::ClosedNetwork` fields. Runs with the
/// GIL released (a large network takes seconds).
#[pyfunction]
fn mva_closed(
    py: Python<'_>,
    customers: u32,
    think_time: f64,
    stations: Vec<(f64, u32, String)>,
) -> PyResult<Py<PyAny>> {
    let stations = stations
        .into_iter()
        .map(|(demand, servers, kind)| {
            let kind = match kind.as_str() {
                "queueing" => theory::StationKind::Queueing,
                "delay" => theory::StationKind::Delay,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "mva_closed: a station's kind is \"queueing\" or \"delay\", not {other:?}"
                    )))
                }
            };
            Ok(theory::Station {
                demand,
                servers,
                kind,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let count = stations.len();
    let solved = py.detach(|| theory::mva_closed(customers, think_time, &stations));
    let net = solved.ok_or_else(|| {
        PyValueError::new_err(format!(
            "mva_closed(customers={customers}, think_time={think_time}, {count} stations): \
             needs 1 <= customers <= {}, at most {} stations, think_time and demands >= 0 \
             and finite with a positive sum, servers >= 1 at queueing stations, and at most \
             {:e} steps of work (customers x (stations + (servers + 18) x (log2 M + 1)) \
             summed over the M stations with 1 < servers < customers), with a finite \
             throughput",
            theory::MVA_MAX_CUSTOMERS,
            theory::MVA_MAX_STATIONS,
            theory::MVA_MAX_WORK,
        ))
    })?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("throughput", net.throughput)?;
    d.set_item("response_time", net.response_time)?;
    d.set_item("queue_lengths", net.queue_lengths)?;
    d.set_item("residence_times", net.residence_times)?;
    d.set_item("utilisations", net.utilisations)?;
    Ok(d.into_any().unbind())
}

/// Summarises router logs (`-` is standard input); the summary as JSON text. Errors are
/// `EngineError("log", "", message)` (one line naming the file or option), or
/// `("interrupted", ...)` on Ctrl-C.
#[pyfunction]
#[pyo3(signature = (paths, format = "auto", log_format = None, host = None, interval = None, top_routes = 20))]
fn logs_summary(
    py: Python<'_>,
    paths: Vec<String>,
    format: &str,
    log_format: Option<String>,
    host: Option<String>,
    interval: Option<f64>,
    top_routes: usize,
) -> PyResult<String> {
    let format = log_format_choice(format)?;
    let options = dynosim_logs::Options {
        format,
        log_format,
        host,
        interval,
        top_routes,
    };
    let summary = without_gil(py, |stop| dynosim_logs::summarise(&paths, options, stop))?
        .map_err(log_error)?;
    Ok(serde_json::to_string(&summary).expect("a summary serialises"))
}

fn log_error(e: dynosim_logs::LogError) -> PyErr {
    match e {
        dynosim_logs::LogError::Interrupted => {
            EngineError::new_err(("interrupted", "", e.to_string()))
        }
        other => EngineError::new_err(("log", "", other.to_string())),
    }
}

fn log_format_choice(format: &str) -> PyResult<dynosim_logs::FormatChoice> {
    format
        .parse::<dynosim_logs::FormatChoice>()
        .map_err(|m| EngineError::new_err(("log", "", format!("--format: {m}"))))
}

/// `--window`'s ends: `(relative, seconds)`, an offset from the first arrival when relative,
/// else seconds since the epoch.
fn log_window(start: Option<(bool, f64)>, end: Option<(bool, f64)>) -> dynosim_logs::Window {
    let bound = |b: Option<(bool, f64)>| {
        b.map(|(relative, t)| {
            if relative {
                dynosim_logs::Bound::After(t)
            } else {
                dynosim_logs::Bound::At(t)
            }
        })
    };
    dynosim_logs::Window {
        start: bound(start),
        end: bound(end),
    }
}

/// Reads router logs into a trace to replay, written to `out` (`arrival,service` lines, the
/// file `arrivals.process = "replay"` reads); what was read and recorded as JSON text
/// (`dynosim_logs::TraceReport`). Errors as for [`logs_summary`].
#[pyfunction]
#[pyo3(signature = (paths, out, format = "auto", log_format = None, host = None, window_start = None, window_end = None, speed = 1.0, correct_queueing = false))]
#[allow(clippy::too_many_arguments)]
fn logs_trace(
    py: Python<'_>,
    paths: Vec<String>,
    out: String,
    format: &str,
    log_format: Option<String>,
    host: Option<String>,
    window_start: Option<(bool, f64)>,
    window_end: Option<(bool, f64)>,
    speed: f64,
    correct_queueing: bool,
) -> PyResult<String> {
    let options = dynosim_logs::TraceOptions {
        format: log_format_choice(format)?,
        log_format,
        host,
        window: log_window(window_start, window_end),
        speed,
        correct_queueing,
    };
    let report = without_gil(py, |stop| {
        let file = std::fs::File::create(&out).map_err(|e| dynosim_logs::LogError::Open {
            file: out.clone(),
            message: e.to_string(),
        })?;
        let mut writer = std::io::BufWriter::new(file);
        dynosim_logs::build_trace(&paths, options, &mut writer, stop)
    })?
    .map_err(log_error)?;
    Ok(serde_json::to_string(&report).expect("a trace report serialises"))
}

/// What fitting a scenario to router logs needs (JSON text: `dynosim_logs::FitData`).
/// Errors as for [`logs_summary`].
#[pyfunction]
#[pyo3(signature = (paths, format = "auto", log_format = None, host = None, window_start = None, window_end = None, correct_queueing = false, routes = 0))]
#[allow(clippy::too_many_arguments)]
fn logs_fit(
    py: Python<'_>,
    paths: Vec<String>,
    format: &str,
    log_format: Option<String>,
    host: Option<String>,
    window_start: Option<(bool, f64)>,
    window_end: Option<(bool, f64)>,
    correct_queueing: bool,
    routes: usize,
) -> PyResult<String> {
    let options = dynosim_logs::FitOptions {
        format: log_format_choice(format)?,
        log_format,
        host,
        window: log_window(window_start, window_end),
        correct_queueing,
        routes,
    };
    let data = without_gil(py, |stop| dynosim_logs::fit_data(&paths, options, stop))?
        .map_err(log_error)?;
    Ok(serde_json::to_string(&data).expect("fit data serialises"))
}

/// A load error as `EngineError("config", path, message)` (a bad argument or target), or
/// RuntimeError when the event loop cannot start.
fn load_error(err: dynosim_load::LoadError) -> PyErr {
    match &err {
        dynosim_load::LoadError::NotLoopback(_) => {
            EngineError::new_err(("config", "target", err.to_string()))
        }
        dynosim_load::LoadError::Config(m) => EngineError::new_err(("config", "", m.clone())),
        dynosim_load::LoadError::Runtime(_) => PyRuntimeError::new_err(err.to_string()),
    }
}

fn load_config(path: &str, message: String) -> PyErr {
    EngineError::new_err(("config", path.to_string(), message))
}

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            load_config(
                name,
                format!("{name} must be a positive number of seconds, not {value}"),
            )
        })
}

/// Sends HTTP load to a loopback target (`dynosim_load::run`) with the GIL released; Ctrl-C
/// stops it. `requests` are `(at, path, headers)`; `mode` is "open" (send at `at`) or
/// "closed" (`clients` clients, `think[k]` s after the k-th response). Returns columns, one
/// entry per request sent, in request order: see `_dynosim.pyi`.
#[pyfunction]
#[pyo3(signature = (target, requests, mode = "open", clients = 1, think = Vec::new(), timeout = 30.0, deadline = 60.0, capture = Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn send_load<'py>(
    py: Python<'py>,
    target: &str,
    requests: Vec<(f64, String, Bound<'py, PyDict>)>,
    mode: &str,
    clients: usize,
    think: Vec<f64>,
    timeout: f64,
    deadline: f64,
    capture: Vec<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let target: std::net::SocketAddr = target.parse().map_err(|_| {
        load_config(
            "target",
            format!("the target {target:?} is not an address and port such as 127.0.0.1:8080"),
        )
    })?;
    let mode = match mode {
        "open" => dynosim_load::Mode::Open,
        "closed" => dynosim_load::Mode::Closed { clients, think },
        other => {
            return Err(load_config(
                "mode",
                format!("the mode is \"open\" or \"closed\", not {other:?}"),
            ))
        }
    };
    let requests = requests
        .into_iter()
        .map(|(at, path, headers)| {
            Ok(dynosim_load::Request {
                at,
                path,
                headers: headers
                    .iter()
                    .map(|(k, v)| Ok((k.extract()?, v.extract()?)))
                    .collect::<PyResult<_>>()?,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let options = dynosim_load::Options {
        timeout: seconds("timeout", timeout)?,
        deadline: seconds("deadline", deadline)?,
        capture,
        ..dynosim_load::Options::new(target)
    };
    let report = without_gil(py, |stop| {
        dynosim_load::run(&requests, &mode, &options, stop)
    })?
    .map_err(load_error)?;

    let records = &report.records;
    let column = |f: fn(&dynosim_load::Record) -> f64| records.iter().map(f).collect::<Vec<_>>();
    let d = PyDict::new(py);
    d.set_item("start", report.start)?;
    let lateness = match report.lateness {
        Some(l) => {
            let l_dict = PyDict::new(py);
            l_dict.set_item("count", l.count)?;
            l_dict.set_item("p50", l.p50)?;
            l_dict.set_item("p99", l.p99)?;
            l_dict.set_item("max", l.max)?;
            Some(l_dict)
        }
        None => None,
    };
    d.set_item("lateness", lateness)?;
    d.set_item(
        "stopped",
        report.stopped.map(|s| match s {
            dynosim_load::Stopped::Deadline => "deadline",
            dynosim_load::Stopped::Interrupted => "interrupted",
        }),
    )?;
    d.set_item("unsent", report.unsent)?;
    d.set_item("index", records.iter().map(|r| r.index).collect::<Vec<_>>())?;
    d.set_item(
        "client",
        records.iter().map(|r| r.client).collect::<Vec<_>>(),
    )?;
    d.set_item("scheduled", column(|r| r.scheduled))?;
    d.set_item("sent", column(|r| r.sent))?;
    d.set_item("connected", column(|r| r.connected))?;
    d.set_item("first_byte", column(|r| r.first_byte))?;
    d.set_item("done", column(|r| r.done))?;
    d.set_item(
        "status",
        records.iter().map(|r| r.status).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "error",
        records
            .iter()
            .map(|r| r.error.map(|e| e.name()))
            .collect::<Vec<_>>(),
    )?;
    d.set_item("bytes", records.iter().map(|r| r.bytes).collect::<Vec<_>>())?;
    let headers = PyDict::new(py);
    for (j, name) in options.capture.iter().enumerate() {
        headers.set_item(
            name,
            records
                .iter()
                .map(|r| r.headers[j].as_deref())
                .collect::<Vec<_>>(),
        )?;
    }
    d.set_item("headers", headers)?;
    Ok(d)
}

/// An autoscaler rule of the engine's registry, driven from Python: the real testbed's fleet
/// runs exactly the rule the simulation runs. Built from the `[autoscale]` table as a dict;
/// a bad table raises `EngineError("config", path, message)`.
#[pyclass(module = "dynosim._dynosim", name = "Autoscaler")]
struct PyAutoscaler {
    inner: dynosim_engine::autoscale::Autoscaler,
}

#[pymethods]
impl PyAutoscaler {
    #[new]
    #[pyo3(signature = (table, section = "autoscale"))]
    fn new(table: &Bound<'_, PyAny>, section: &str) -> PyResult<Self> {
        if !table.is_instance_of::<PyDict>() {
            return Err(to_py(Error::config(
                section,
                format!("expected a table, got {}", table.get_type().name()?),
            )));
        }
        let text: String = table
            .py()
            .import("json")?
            .call_method1("dumps", (table,))
            .map_err(|e| {
                to_py(Error::config(
                    section,
                    format!("cannot be read as a table of plain values: {e}"),
                ))
            })?
            .extract()?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            to_py(Error::config(
                section,
                format!("cannot be read as a table: {e}"),
            ))
        })?;
        let serde_json::Value::Object(map) = value else {
            return Err(to_py(Error::config(section, "expected a table")));
        };
        let inner =
            dynosim_engine::autoscale::Autoscaler::from_table(section, &map).map_err(to_py)?;
        Ok(PyAutoscaler { inner })
    }

    /// Seconds between two evaluations (the first at `interval`).
    #[getter]
    fn interval(&self) -> f64 {
        self.inner.interval()
    }

    /// The rule's name in the engine's registry.
    #[getter]
    fn rule(&self) -> &'static str {
        self.inner.rule()
    }

    /// (min, max).
    #[getter]
    fn bounds(&self) -> (u32, u32) {
        let b = self.inner.bounds();
        (b.min, b.max)
    }

    /// The metric the rule reads: "response_time", "queue_time", "cpu", "utilisation", or
    /// None for a rule that reads none.
    #[getter]
    fn metric(&self) -> Option<&'static str> {
        use dynosim_engine::autoscale::Metric;
        self.inner.reading().map(|r| match r.metric {
            Metric::ResponseTime => "response_time",
            Metric::QueueTime => "queue_time",
            Metric::Cpu => "cpu",
            Metric::Utilisation => "utilisation",
        })
    }

    fn record(&mut self, t: f64, value: f64) {
        self.inner.record(t, value);
    }

    fn record_total(&mut self, t: f64, total: f64, count: u64) {
        self.inner.record_total(t, total, count);
    }

    /// (desired size, why, the metric's value as the rule saw it or None, its samples).
    fn evaluate(&mut self, now: f64, size: u32, up: u32) -> (u32, &'static str, Option<f64>, u64) {
        let e = self
            .inner
            .evaluate(now, dynosim_engine::autoscale::Fleet { size, up });
        (
            e.decision.desired,
            e.decision.why,
            e.observed.value,
            e.observed.samples,
        )
    }
}

#[pymodule]
fn _dynosim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // How the engine was compiled: "pgo" when tools/build-pgo.sh built it with a profile.
    m.add("build", option_env!("DYNOSIM_BUILD").unwrap_or("release"))?;
    m.add_function(wrap_pyfunction!(describe, m)?)?;
    m.add_function(wrap_pyfunction!(draw_requests, m)?)?;
    m.add_function(wrap_pyfunction!(service_quantiles, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_block, m)?)?;
    m.add_function(wrap_pyfunction!(assemble, m)?)?;
    m.add_function(wrap_pyfunction!(registry, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(interrupt, m)?)?;
    m.add_function(wrap_pyfunction!(set_cancel_token, m)?)?;
    m.add_function(wrap_pyfunction!(cancel, m)?)?;
    m.add_function(wrap_pyfunction!(forget_token, m)?)?;
    m.add_function(wrap_pyfunction!(keys, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(erlang_c, m)?)?;
    m.add_function(wrap_pyfunction!(mmc_mean_wait, m)?)?;
    m.add_function(wrap_pyfunction!(mg1_mean_wait, m)?)?;
    m.add_function(wrap_pyfunction!(power_of_d_mean_time, m)?)?;
    m.add_function(wrap_pyfunction!(ps_mean_response, m)?)?;
    m.add_function(wrap_pyfunction!(pool_mean_wait, m)?)?;
    m.add_function(wrap_pyfunction!(mm1_late_fraction, m)?)?;
    m.add_function(wrap_pyfunction!(erlang_a, m)?)?;
    m.add_function(wrap_pyfunction!(mmck_blocking, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_bound_throughput, m)?)?;
    m.add_function(wrap_pyfunction!(littles_law_gap, m)?)?;
    m.add_function(wrap_pyfunction!(mva_closed, m)?)?;
    m.add_function(wrap_pyfunction!(send_load, m)?)?;
    m.add_function(wrap_pyfunction!(logs_summary, m)?)?;
    m.add_function(wrap_pyfunction!(logs_trace, m)?)?;
    m.add_function(wrap_pyfunction!(logs_fit, m)?)?;
    m.add_function(wrap_pyfunction!(service_cdf, m)?)?;
    m.add_class::<PyAutoscaler>()?;
    Ok(())
}
