//! The load generator's function (`dynosim_load`): HTTP requests sent to a loopback target,
//! and what each got, as columns.

use crate::stop::without_gil;
use crate::EngineError;
use dynosim_engine::breaker::{Breaker, Moved};
use dynosim_engine::retry::clients::{Decider, Verdict};
use dynosim_engine::retry::Failure;
use dynosim_engine::Scenario;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The engine's retry decisions ([`Decider`]) as the load generator asks for them: its
/// outcomes converted to the engine's failures, its verdicts to the generator's next step.
struct Clients(Mutex<Decider>);

impl dynosim_load::Retry for Clients {
    fn first(&self, now: f64) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).first(now);
    }

    fn after(
        &self,
        attempt: u32,
        last_delay: f64,
        outcome: dynosim_load::Outcome,
        now: f64,
    ) -> dynosim_load::Next {
        use dynosim_load::{ErrorKind as E, Next, Outcome};
        let mut decider = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let failure = match outcome {
            Outcome::Answered(status) => Failure::of_status(status),
            Outcome::Failed(E::Timeout) => Some(Failure::Timeout),
            // The breaker's refusal, as the simulation's (`breaker_open`): a refusal.
            Outcome::Failed(E::Refused | E::Connect | E::BreakerOpen) => Some(Failure::Refused),
            Outcome::Failed(_) => Some(Failure::Error),
        };
        let Some(failure) = failure else {
            decider.succeeded();
            return Next::Keep("success");
        };
        match decider.decide(attempt, last_delay, failure, now) {
            Verdict::Retry(delay) => Next::Retry(delay),
            Verdict::Failed => Next::Keep("failed"),
            Verdict::Denied => Next::Keep("denied"),
            Verdict::Exhausted => Next::Keep("exhausted"),
        }
    }
}

/// The engine's circuit breaker ([`Breaker`]) as the load generator asks it, and its openings
/// (from, until: seconds since the run's start) as they happen.
struct ClientsBreaker(Mutex<(Breaker, Vec<(f64, f64)>)>);

impl dynosim_load::Breaker for ClientsBreaker {
    fn allows(&self, now: f64) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .allows(now)
    }

    fn record(&self, sent: f64, now: f64, failed: bool) {
        let mut b = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Moved::Opened(until) = b.0.record(now, now - sent, failed) {
            b.1.push((now, until));
        }
    }
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
#[pyo3(signature = (target, requests, mode = "open", clients = 1, think = Vec::new(), timeout = 30.0, deadline = 60.0, capture = Vec::new(), retry = None, id_header = None, breaker = None))]
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
    retry: Option<(String, String, u64)>,
    id_header: Option<String>,
    breaker: Option<(String, String)>,
) -> PyResult<Bound<'py, PyDict>> {
    // The clients retry as replication `replication` of the scenario's do (None: they never do).
    let retry = match retry {
        None => None,
        Some((scenario_json, base_dir, replication)) => without_gil(py, |stop| {
            Scenario::from_json(&scenario_json, Path::new(&base_dir), stop)
                .map(|s| s.retry_decider(replication))
        })?
        .map_err(crate::to_py)?
        .map(|d| dynosim_load::RetryHook(Arc::new(Clients(Mutex::new(d))))),
    };
    // The clients' breaker is the scenario's `[arrivals.breaker]` (None: it has none).
    let breaker = match breaker {
        None => None,
        Some((scenario_json, base_dir)) => without_gil(py, |stop| {
            Scenario::from_json(&scenario_json, Path::new(&base_dir), stop)
                .map(|s| s.client_breaker.clone())
        })?
        .map_err(crate::to_py)?
        .map(|c| Arc::new(ClientsBreaker(Mutex::new((Breaker::new(c), Vec::new()))))),
    };
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
        retry,
        breaker: breaker
            .clone()
            .map(|b| dynosim_load::BreakerHook(b as Arc<dyn dynosim_load::Breaker>)),
        id_header,
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
        "attempt",
        records.iter().map(|r| r.attempt).collect::<Vec<_>>(),
    )?;
    d.set_item("origin", column(|r| r.origin))?;
    d.set_item("kept", records.iter().map(|r| r.kept).collect::<Vec<_>>())?;
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
    let openings = breaker.map(|b| {
        let b = b.0.lock().unwrap_or_else(|e| e.into_inner());
        b.1.iter()
            .map(|&(from, until)| (from + report.start, until + report.start))
            .collect::<Vec<_>>()
    });
    d.set_item("breaker", openings)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(send_load, m)?)?;
    Ok(())
}
