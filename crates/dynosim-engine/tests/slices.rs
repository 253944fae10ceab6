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

/// Puma's maintainers' "App GVL & Threads" measurements (../shared/docs/SCHEDULERS.md §2.4):
/// one Puma process, 20 ms requests of which 70% or 35% is CPU under the GVL, 1 to 3
/// threads. Requests per second within 10% of theirs (the issue's bound for throughput; the
/// model leaves out Puma's own accept and parse, which their note says lowers its figures),
/// and with one thread a client each, the p50 within 15% (theirs 20.1, 28.1 ms for 70% at 1
/// and 2 threads; 20.9, 20.5 ms for 35%). Assumed: a closed loop of 10 clients with no think
/// time for the throughput (theirs saturates the process), the CPU first then the IO, 4 cores.
#[test]
fn puma_s_gvl_and_threads_table() {
    let published = [
        (0.7, [(49.0, 0.0201), (70.0, 0.0281), (70.0, f64::NAN)]),
        (0.35, [(47.0, 0.0209), (96.0, 0.0205), (135.0, f64::NAN)]),
    ];
    for (cpu_share, rows) in published {
        for (i, (rps, p50)) in rows.into_iter().enumerate() {
            let threads = i as u32 + 1;
            let run = |clients: u32| {
                let doc = json!({
                    "arrivals": {"process": "closed", "clients": clients},
                    "request": {"phases": [{"cpu": 0.020 * cpu_share},
                                           {"io": 0.020 * (1.0 - cpu_share)}]},
                    "fleet": {"dynos": 1, "cores": 4},
                    "app": {"server": "puma", "processes": 1, "threads": threads},
                    "run": {"duration": 60.0, "warmup": 5.0, "replications": 3, "seed": 25},
                })
                .to_string();
                run_ok(&build(&doc))
            };
            let report = run(10);
            let sim = Measured::over_replications(&report, |r| r.throughput).mean;
            println!("Puma {cpu_share} CPU, {threads} threads: {sim:.1} req/s against {rps}");
            assert!(
                (sim - rps).abs() <= 0.10 * rps,
                "{cpu_share} CPU, {threads} threads: {sim} req/s, published {rps}"
            );
            if p50.is_finite() {
                let report = run(threads);
                let sim = Measured::over_replications(&report, |r| r.response.p50).mean;
                println!(
                    "  p50 with {threads} clients: {:.1} ms against {:.1}",
                    sim * 1e3,
                    p50 * 1e3
                );
                assert!(
                    (sim - p50).abs() <= 0.15 * p50,
                    "{cpu_share} CPU, {threads} threads: p50 {sim}, published {p50}"
                );
            }
        }
    }
}

/// Random phases on the real stack (docs/testbed.md, "The scheduler against the real
/// stack"): 4 gunicorn sync workers on one core, exponential 10 ms of CPU then 40 ms of IO, 8
/// closed-loop clients, with the costs the calibration measured. The testbed measured 64.85,
/// 65.65 and 65.6 req/s in three calibrated runs; the simulation within 10% (the issue's
/// bound). (Constant phases are not asserted: the real workers stay largely in step, and the
/// model falls on either side of the edge between in step and drifting apart with the
/// calibration's small differences: 51.5 to 66.0 against 51.9 to 58.4 measured.)
#[test]
fn random_phases_on_sync_workers_as_the_testbed_measured_them() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 8},
        "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": "10ms"}},
                               {"io": {"distribution": "exponential", "mean": "40ms"}}]},
        "fleet": {"dynos": 1, "cores": 1, "cpu_jitter": 0.0149},
        "router": {"policy": "random", "connect": "0.618ms"},
        "app": {"server": "gunicorn", "worker_class": "sync", "processes": 4,
                "request_cpu": "0.613ms", "overhead": "0.286ms"},
        "run": {"duration": 20.0, "warmup": 5.0, "replications": 10, "seed": 25},
    })
    .to_string();
    let m = Measured::over_replications(&run_ok(&build(&doc)), |r| r.throughput);
    println!(
        "exponential: {:.1} ± {:.1} req/s against 64.85",
        m.mean, m.std_error
    );
    assert!((m.mean - 64.85).abs() <= 0.10 * 64.85, "{}", m.mean);
}

/// Issue #25's case: one dyno of 2 cores, 8 gunicorn sync processes, 50 closed-loop clients,
/// each request 10 ms of CPU then 40 ms of IO, constant. Processor sharing runs the threads in
/// lockstep (8 jobs on 2 cores at a quarter of a core each: 40 ms of CPU, then 40 ms of IO,
/// 100 req/s); with time slices and a run queue per core the workers drift apart, towards the
/// most 8 workers can do (160 req/s). (The issue measured 139.8 req/s on its testbed; this
/// 2-core machine, whose load generator and HAProxy share the dyno's 2 cores, 137.95 when
/// quiet, 156 simulated with its calibration: docs/testbed.md.)
#[test]
fn the_issue_s_case() {
    let run = |fleet: Value| {
        let mut f = json!({"dynos": 1, "cores": 2});
        f.as_object_mut()
            .unwrap()
            .extend(fleet.as_object().unwrap().clone());
        let doc = json!({
            "arrivals": {"process": "closed", "clients": 50},
            "request": {"phases": [{"cpu": "10ms"}, {"io": "40ms"}]},
            "fleet": f,
            "app": {"server": "gunicorn", "worker_class": "sync", "processes": 8},
            "run": {"duration": 60.0, "replications": 5, "seed": 1},
        })
        .to_string();
        Measured::over_replications(&run_ok(&build(&doc)), |r| r.throughput)
    };
    let lockstep = 8.0 / (8.0 * 0.010 / 2.0 + 0.040);
    let slices = run(json!({}));
    println!("slices: {:.1} ± {:.1} req/s", slices.mean, slices.std_error);
    // Up to 1% over the ceiling: requests counted at the window's edges.
    assert!(
        slices.mean > 1.05 * lockstep && slices.mean < 1.01 * 8.0 / 0.050,
        "{}",
        slices.mean
    );
    let ps = run(json!({"cpu_sharing": "ps"}));
    println!(
        "ps: {:.1} ± {:.1} req/s, lockstep {lockstep}",
        ps.mean, ps.std_error
    );
    assert!((ps.mean - lockstep).abs() <= 0.02 * lockstep, "{}", ps.mean);
}
