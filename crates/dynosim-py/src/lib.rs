//! PyO3 bindings: convert between Python and the Rust crates' types, and nothing more: one
//! module per crate or part bound ([`engine`], [`theory`], [`logs`], [`load`], [`autoscaler`]),
//! and [`stop`] for how a call stops. Scenarios cross as JSON text (the Python side reads
//! TOML); reports and log summaries come back as JSON text. Errors become `EngineError(kind,
//! path, message)`, which `dynosim.errors` maps once into the package's exception hierarchy.

mod autoscaler;
mod engine;
mod load;
mod logs;
mod stop;
mod theory;

use dynosim_engine::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

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

#[pymodule]
fn _dynosim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // How the engine was compiled: "pgo" when tools/build-pgo.sh built it with a profile.
    m.add("build", option_env!("DYNOSIM_BUILD").unwrap_or("release"))?;
    engine::register(m)?;
    stop::register(m)?;
    theory::register(m)?;
    logs::register(m)?;
    load::register(m)?;
    autoscaler::register(m)?;
    Ok(())
}
