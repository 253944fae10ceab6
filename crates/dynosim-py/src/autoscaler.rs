//! An autoscaler rule of the engine's registry as a Python class, for the testbed's real fleet.

use crate::to_py;
use dynosim_engine::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;

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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAutoscaler>()?;
    Ok(())
}
