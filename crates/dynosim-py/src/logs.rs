//! The log reader's functions (`dynosim_logs`): the summary, a fit's data and a trace to
//! replay, each read with the GIL released and returned as JSON text.

use crate::stop::without_gil;
use crate::EngineError;
use pyo3::prelude::*;

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
        read: dynosim_logs::ReadOptions {
            format,
            log_format,
            host,
        },
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
        read: dynosim_logs::ReadOptions {
            format: log_format_choice(format)?,
            log_format,
            host,
        },
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
        read: dynosim_logs::ReadOptions {
            format: log_format_choice(format)?,
            log_format,
            host,
        },
        window: log_window(window_start, window_end),
        correct_queueing,
        routes,
    };
    let data = without_gil(py, |stop| dynosim_logs::fit_data(&paths, options, stop))?
        .map_err(log_error)?;
    Ok(serde_json::to_string(&data).expect("fit data serialises"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(logs_summary, m)?)?;
    m.add_function(wrap_pyfunction!(logs_trace, m)?)?;
    m.add_function(wrap_pyfunction!(logs_fit, m)?)?;
    Ok(())
}
