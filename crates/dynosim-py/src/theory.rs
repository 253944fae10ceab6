//! The queueing formulas of `dynosim_engine::theory`: each returns its answer, or raises
//! ValueError naming the call when its arguments are outside the formula's domain.

use dynosim_engine::theory;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
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
    Ok(())
}
