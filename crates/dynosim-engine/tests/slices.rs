//! Time slices (`fleet.cpu_sharing = "slices"`, sim/slices.rs) against queueing theory: round
//! robin tends to processor sharing as the quantum goes to 0 and to FCFS once it exceeds the
//! longest phase; with exponential work every quantum gives the M/M/1 (M/M/c) mean; a process
//! whose threads share a lock is one server, whatever the lock. Tolerances are k standard
//! errors over replications, with the resolution each comparison must have (`common/mod.rs`).

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::theory::mmc_mean_wait;
use serde_json::{json, Value};

/// One dyno of `cores` cores, one process of unbounded threads (each request its own thread),
/// Poisson arrivals at `rate`, one CPU phase `cpu`; `extra` goes into `[fleet]` and `[app]`.
fn one_dyno(rate: f64, cpu: Value, cores: u32, fleet: Value, app: Value, seed: u64) -> String {
    let mut fleet_t = json!({"dynos": 1, "cores": cores, "cpu_jitter": 0});
    fleet_t
        .as_object_mut()
        .unwrap()
        .extend(fleet.as_object().unwrap().clone());
    let mut app_t = json!({"server": "generic", "processes": 1, "threads": 100000, "lock": "none"});
    app_t
        .as_object_mut()
        .unwrap()
        .extend(app.as_object().unwrap().clone());
    json!({
        "arrivals": {"process": "poisson", "rate": rate},
        "request": {"phases": [{"cpu": cpu}]},
        "fleet": fleet_t,
        "app": app_t,
        "run": {"duration": 1000.0, "warmup": 50.0, "replications": 12, "seed": seed},
    })
    .to_string()
}

fn mean_response(doc: &str) -> Measured {
    let report = run_ok(&build(doc));
    Measured::over_replications(&report, |r| r.response.mean)
}

const S: f64 = 0.010;
const RATE: f64 = 70.0;
const RHO: f64 = RATE * S;

/// M/D/1 under processor sharing: D/(1 − ρ).
fn md1_ps() -> f64 {
    S / (1.0 - RHO)
}

/// M/D/1 first come first served (Pollaczek–Khinchine): S + λS²/(2(1 − ρ)).
fn md1_fcfs() -> f64 {
    S + RATE * S * S / (2.0 * (1.0 - RHO))
}

#[test]
fn a_tiny_quantum_is_processor_sharing() {
    // q = S/200: round robin's mean differs from PS's by O(q) (a job's last slice), well
    // inside the resolution; P-K's FCFS mean is 35% lower, so the test tells them apart.
    let q = S / 200.0;
    let doc = one_dyno(RATE, json!(S), 1, json!({"cpu_quantum": q}), json!({}), 3);
    let m = mean_response(&doc);
    assert_matches("M/D/1 RR, q -> 0: PS mean", m, md1_ps(), 0.05);
    assert!((md1_ps() - md1_fcfs()) / md1_ps() > 0.3);
}

#[test]
fn a_quantum_longer_than_every_phase_is_fcfs() {
    let doc = one_dyno(
        RATE,
        json!(S),
        1,
        json!({"cpu_quantum": "1s"}),
        json!({}),
        4,
    );
    assert_matches(
        "M/D/1 RR, q > S: Pollaczek-Khinchine",
        mean_response(&doc),
        md1_fcfs(),
        0.05,
    );
}

#[test]
fn with_exponential_work_every_quantum_gives_the_mm1_mean() {
    let theory = S / (1.0 - RHO);
    for q in ["0.5ms", "3ms", "30ms"] {
        let cpu = json!({"distribution": "exponential", "mean": S});
        let doc = one_dyno(RATE, cpu, 1, json!({"cpu_quantum": q}), json!({}), 5);
        assert_matches(
            &format!("M/M/1 RR q = {q}: 1/(mu - lambda)"),
            mean_response(&doc),
            theory,
            0.05,
        );
    }
}

#[test]
fn with_exponential_work_two_cores_give_the_mm2_mean() {
    let rate = 2.0 * RATE;
    let theory = S + mmc_mean_wait(2, rate * S, S).expect("stable");
    let cpu = json!({"distribution": "exponential", "mean": S});
    let doc = one_dyno(rate, cpu, 2, json!({}), json!({}), 6);
    assert_matches("M/M/2 RR q = 3 ms", mean_response(&doc), theory, 0.05);
}

/// Deterministic work with a quantum just short of it: every job needs a sliver of a second
/// slice and waits a whole round for it, so round robin is worse than processor sharing,
/// far from the FCFS it becomes with a quantum just longer (round robin is not monotone in
/// q: ../shared/docs/SCHEDULERS.md §4.2, the check on the requeue order).
#[test]
fn a_quantum_just_short_of_the_work_is_worse_than_processor_sharing() {
    let doc = one_dyno(
        RATE,
        json!(S),
        1,
        json!({"cpu_quantum": 0.99 * S}),
        json!({}),
        7,
    );
    let short = mean_response(&doc);
    let doc = one_dyno(
        RATE,
        json!(S),
        1,
        json!({"cpu_quantum": 1.01 * S}),
        json!({}),
        7,
    );
    assert_matches(
        "M/D/1 RR q = 1.01 S: P-K",
        mean_response(&doc),
        md1_fcfs(),
        0.05,
    );
    let k = 4.0;
    println!(
        "M/D/1 RR q = 0.99 S: {:.6} ± {:.6} vs PS {:.6}, FCFS {:.6}",
        short.mean,
        short.std_error,
        md1_ps(),
        md1_fcfs()
    );
    assert!(
        short.mean - md1_ps() > k * short.std_error,
        "RR with q = 0.99 S should be worse than PS: {} vs {}",
        short.mean,
        md1_ps()
    );
}

/// A process whose threads share a lock is one server for its CPU work, however the lock is
/// handed over (GIL, GVL, an async worker's one thread): with exponential work and two cores,
/// the M/M/1 mean, not M/M/2's.
#[test]
fn a_locked_process_is_one_server_whatever_the_lock() {
    let theory = S / (1.0 - RHO);
    let cpu = json!({"distribution": "exponential", "mean": S});
    for (label, app) in [
        ("gil", json!({"lock": "gil"})),
        ("gvl", json!({"lock": "gvl"})),
        ("gvl 10ms", json!({"lock": "gvl", "timeslice": "10ms"})),
        (
            "async",
            json!({"model": "async", "worker_connections": 100000, "threads": 1}),
        ),
    ] {
        let doc = one_dyno(RATE, cpu.clone(), 2, json!({}), app, 8);
        assert_matches(
            &format!("M/M/1 through one process's {label} lock"),
            mean_response(&doc),
            theory,
            0.05,
        );
    }
    // Without a lock the same process uses both cores.
    let doc = one_dyno(RATE, cpu, 2, json!({}), json!({}), 8);
    let mm2 = S + mmc_mean_wait(2, RATE * S, S).expect("stable");
    assert_matches("M/M/2 without a lock", mean_response(&doc), mm2, 0.05);
}
