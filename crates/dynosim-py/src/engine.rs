//! The engine's functions: describe, run and trace a scenario (it crosses as JSON text, and
//! its answers come back as JSON text), draw its requests, read its service distribution, and
//! the registries, the keys' reference and the units.

use crate::stop::without_gil;
use crate::to_py;
use dynosim_engine::{drawn, Error, Scenario};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;

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

/// Validates a scenario and describes it without running it (JSON text: see
/// `dynosim_engine::description`).
#[pyfunction]
fn describe(py: Python<'_>, scenario_json: &str, base_dir: &str) -> PyResult<String> {
    with_scenario(py, scenario_json, base_dir, |s, _| {
        Ok(s.description().to_string())
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

/// The stability verdict of a run measured elsewhere (the testbed's): its successful answers'
/// times, seconds from the run's start, judged by the scenario's rule for a run that ended at
/// `end` (JSON text of `dynosim_engine::result::StabilityFigures`; `null` for a scenario
/// without faults).
#[pyfunction]
fn judge_stability(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    answers: Vec<f64>,
    end: f64,
) -> PyResult<String> {
    let figures = with_scenario(py, scenario_json, base_dir, |s, _| {
        Ok(s.stability
            .as_ref()
            .map(|rule| dynosim_engine::stability::judge(rule, answers, end)))
    })?;
    Ok(serde_json::to_string(&figures).expect("stability figures serialize"))
}

/// Service-time quantiles of a scenario's distribution (after rounding and clipping), or of
/// its service `service`'s (`[services.NAME]`; its own phases, without its calls); each p
/// must lie strictly between 0 and 1.
#[pyfunction]
#[pyo3(signature = (scenario_json, base_dir, ps, service = None))]
fn service_quantiles(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    ps: Vec<f64>,
    service: Option<String>,
) -> PyResult<Vec<f64>> {
    if let Some(p) = ps.iter().find(|&&p| !(p > 0.0 && p < 1.0)) {
        return Err(PyValueError::new_err(format!(
            "service_quantiles: p must lie strictly between 0 and 1, got {p}"
        )));
    }
    let found = with_scenario(py, scenario_json, base_dir, |s, _| {
        let tier = match &service {
            None => Some(&s),
            Some(name) => s
                .services
                .iter()
                .find(|t| &t.name == name)
                .map(|t| &t.scenario),
        };
        Ok(tier.map(|t| {
            ps.iter()
                .map(|&p| t.service.quantile(p))
                .collect::<Vec<f64>>()
        }))
    })?;
    found.ok_or_else(|| {
        PyValueError::new_err(format!(
            "service_quantiles: no service named {:?}",
            service.unwrap_or_default()
        ))
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

/// Runs a scenario's replications with the GIL released; Ctrl-C stops the run. With
/// `stop_at_verdict`, each replication stops once its stability verdict is settled (see
/// `Scenario::stop_at_verdict`: only `stability.*` is the whole run's).
#[pyfunction]
#[pyo3(signature = (scenario_json, base_dir, stop_at_verdict = false))]
fn run(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    stop_at_verdict: bool,
) -> PyResult<String> {
    let report = with_scenario(py, scenario_json, base_dir, |mut scenario, stop| {
        if stop_at_verdict {
            scenario.stop_at_verdict();
        }
        dynosim_engine::run(&scenario, stop)
    })?;
    Ok(serde_json::to_string(&report).expect("reports serialize"))
}

/// Replications `first..first + count` of a scenario with the GIL released: a block of one
/// run split across machines (`dynosim.distributed`), JSON text `{"first", "results": [each
/// replication's figures], "per_dyno": [each one's per-dyno utilisation], "engines": [..]}`.
/// `stop_at_verdict` as for `run`.
#[pyfunction]
#[pyo3(signature = (scenario_json, base_dir, first, count, stop_at_verdict = false))]
fn run_block(
    py: Python<'_>,
    scenario_json: &str,
    base_dir: &str,
    first: u64,
    count: u64,
    stop_at_verdict: bool,
) -> PyResult<String> {
    let block = with_scenario(py, scenario_json, base_dir, |mut scenario, stop| {
        if stop_at_verdict {
            scenario.stop_at_verdict();
        }
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
/// "router_waiting", "dyno_waiting", "busy", "arrived", "queued", "completed", "failed"}, ..]}`;
/// with services, `"services": {NAME: {"interval", "frames"}}` too, each service's frames at
/// the same times).
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

/// A rate in requests per second from `"9000/min"`, `"150/s"`... (the scenario's units), or None.
#[pyfunction]
fn parse_rate(text: &str) -> Option<f64> {
    dynosim_engine::units::parse_rate(text)
}

/// A size in bytes from `"512MB"`, `"2GB"`... (the scenario's units), or None.
#[pyfunction]
fn parse_bytes(text: &str) -> Option<f64> {
    dynosim_engine::units::parse_bytes(text)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(describe, m)?)?;
    m.add_function(wrap_pyfunction!(draw_requests, m)?)?;
    m.add_function(wrap_pyfunction!(judge_stability, m)?)?;
    m.add_function(wrap_pyfunction!(service_quantiles, m)?)?;
    m.add_function(wrap_pyfunction!(service_cdf, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_block, m)?)?;
    m.add_function(wrap_pyfunction!(assemble, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(registry, m)?)?;
    m.add_function(wrap_pyfunction!(keys, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(parse_rate, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    Ok(())
}
