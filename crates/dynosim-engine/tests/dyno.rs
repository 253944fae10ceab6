//! The dyno model (processor-shared cores (`fleet.cpu_sharing = "ps"`; time slices are checked
//! in `slices.rs`), an interpreter lock, pools in front of a resource,
//! closed-loop clients) against queueing theory. Tolerances are k standard errors over
//! replications, with the resolution each comparison must have; see `common/mod.rs`.

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::theory::{erlang_c, mmc_mean_wait};
use dynosim_engine::ReplicationResult;
use serde_json::{json, Value};

fn scenario(doc: Value) -> String {
    doc.to_string()
}

fn measure(report: &dynosim_engine::RunReport, f: fn(&ReplicationResult) -> f64) -> Measured {
    Measured::over_replications(report, f)
}

/// M/G/1-PS: one core shared by every request (threads without limit, no lock). The mean
/// response time is E[S]/(1 − ρ) whatever the distribution of S (insensitivity), so a
/// lognormal with σ = 1 must give the same mean as an exponential.
#[test]
fn one_core_shared_is_mg1_ps_and_insensitive() {
    for (label, cpu) in [
        (
            "exponential",
            json!({"distribution": "exponential", "mean": "10ms"}),
        ),
        (
            "lognormal",
            json!({"distribution": "lognormal", "median": "6.065ms", "sigma": 1.0}),
        ),
    ] {
        let rho: f64 = 0.7;
        let doc = json!({
            "arrivals": {"process": "poisson", "rate": 70.0},
            "request": {"phases": [{"cpu": cpu}]},
            "fleet": {"dynos": 1, "cores": 1, "cpu_sharing": "ps"},
            "app": {"server": "generic", "processes": 1, "threads": 10000, "lock": false},
            "run": {"duration": 4000.0, "warmup": 100.0, "replications": 20, "seed": 7},
        });
        let s = build(&scenario(doc));
        let es = s.service.mean();
        assert!((es - 0.010).abs() < 1e-6, "{label}: E[S] = {es}");
        assert!((s.offered_load() - rho).abs() < 1e-3, "{label}: load");
        let report = run_ok(&s);
        let theory = es / (1.0 - rho);
        assert_matches(
            &format!("M/G/1-PS {label}: mean response"),
            measure(&report, |r| r.response.mean),
            theory,
            0.05,
        );
        assert_matches(
            &format!("M/G/1-PS {label}: CPU utilisation = rho"),
            measure(&report, |r| r.dyno.as_ref().unwrap().cpu_utilisation),
            rho,
            0.02,
        );
    }
}

/// Several cores shared: M/M/k-PS has the number in system of M/M/k, so the mean response
/// is E[S] + C(k, a)·E[S]/(k − a).
#[test]
fn k_cores_shared_match_mmk() {
    let (k, a) = (4u32, 3.0);
    let es = 0.02;
    let doc = json!({
        "arrivals": {"process": "poisson", "rate": a / es},
        "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": es}}]},
        "fleet": {"dynos": 1, "cores": k, "cpu_sharing": "ps"},
        "app": {"server": "generic", "processes": 1, "threads": 10000, "lock": false},
        "run": {"duration": 3000.0, "warmup": 100.0, "replications": 20, "seed": 11},
    });
    let report = run_ok(&build(&scenario(doc)));
    let theory = es + mmc_mean_wait(k, a, es).unwrap();
    assert_matches(
        "M/M/4-PS: mean response",
        measure(&report, |r| r.response.mean),
        theory,
        0.04,
    );
}

/// A pool of c connections (per app) in front of a resource with a server for each: the wait
/// for a connection is M/M/c's, Erlang C: P(wait) = C(c, a), mean wait C(c,a)·E[H]/(c − a).
#[test]
fn a_pool_in_front_of_a_resource_is_mmc() {
    let (c, a, hold) = (5u32, 3.5, 0.05);
    let doc = json!({
        "arrivals": {"process": "poisson", "rate": a / hold},
        "request": {"phases": [{"use": "db", "time": {"distribution": "exponential", "mean": hold}}]},
        "resources": {"db": {"servers": 100, "discipline": "fcfs", "pool": {"size": c, "per": "app"}}},
        "fleet": {"dynos": 2, "cores": 1},
        "app": {"server": "generic", "processes": 1, "threads": 10000, "lock": false},
        "run": {"duration": 3000.0, "warmup": 100.0, "replications": 20, "seed": 5},
    });
    let report = run_ok(&build(&scenario(doc)));
    let pool = |r: &ReplicationResult| r.resources.as_ref().unwrap()["db"].pool_wait.mean;
    assert_matches(
        "pool of 5 as M/M/5: mean wait for a connection",
        measure(&report, pool),
        mmc_mean_wait(c, a, hold).unwrap(),
        0.08,
    );
    assert!(
        erlang_c(c, a).unwrap() > 0.3,
        "the pool must queue for the test to mean much"
    );
}

/// With an interpreter lock a process computes on one core at a time: P processes of many
/// threads, kept saturated by a closed loop, complete min(P, cores)/E[cpu] requests a
/// second; without the lock, cores/E[cpu].
#[test]
fn the_interpreter_lock_bounds_throughput() {
    let cpu = 0.01;
    for (lock, expected) in [(true, 2.0 / cpu), (false, 4.0 / cpu)] {
        let doc = json!({
            "arrivals": {"process": "closed", "clients": 64, "think": 0.0},
            "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": cpu}}]},
            "fleet": {"dynos": 1, "cores": 4},
            "app": {"server": "generic", "model": "threaded", "processes": 2, "threads": 32, "lock": lock},
            "run": {"duration": 200.0, "warmup": 10.0, "replications": 10, "seed": 3},
        });
        let report = run_ok(&build(&scenario(doc)));
        assert_matches(
            &format!("throughput with lock = {lock}"),
            measure(&report, |r| r.throughput),
            expected,
            0.02,
        );
    }
}

/// Exact mean-value analysis of a closed network: N clients thinking Z (exponential), one
/// dyno whose single core serves exponential CPU work (PS: same means as FCFS). MVA:
/// R(n) = D(1 + Q(n−1)), X(n) = n/(Z + R(n)), Q(n) = X(n)R(n).
#[test]
fn a_closed_loop_matches_mean_value_analysis() {
    let (n, z, d) = (10u32, 0.1, 0.012);
    let mut q = 0.0;
    let (mut x, mut r) = (0.0, 0.0);
    for k in 1..=n {
        r = d * (1.0 + q);
        x = f64::from(k) / (z + r);
        q = x * r;
    }
    // Exponential work: processor sharing and round robin in time slices give the same
    // means (the number in system is the same chain for any size-blind work-conserving order).
    for sharing in ["ps", "slices"] {
        let doc = json!({
            "arrivals": {"process": "closed", "clients": n, "think": {"distribution": "exponential", "mean": z}},
            "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": d}}]},
            "fleet": {"dynos": 1, "cores": 1, "cpu_sharing": sharing, "cpu_jitter": 0},
            "app": {"server": "generic", "processes": 1, "threads": 1000, "lock": false},
            "run": {"duration": 2000.0, "warmup": 50.0, "replications": 20, "seed": 9},
        });
        let report = run_ok(&build(&scenario(doc)));
        assert_matches(
            &format!("MVA throughput ({sharing})"),
            measure(&report, |r| r.throughput),
            x,
            0.02,
        );
        assert_matches(
            &format!("MVA response time ({sharing})"),
            measure(&report, |r| r.response.mean),
            r,
            0.04,
        );
    }
}

/// A sync server: one request per process; with one process it is M/M/1 behind the accept
/// queue, whatever the cores.
#[test]
fn one_sync_process_is_mm1() {
    let (rho, es) = (0.6, 0.01);
    let doc = json!({
        "arrivals": {"process": "poisson", "rate": rho / es},
        "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": es}}]},
        "fleet": {"dynos": 1, "cores": 4},
        "app": {"server": "unicorn", "processes": 1},
        "run": {"duration": 3000.0, "warmup": 100.0, "replications": 20, "seed": 13},
    });
    let report = run_ok(&build(&scenario(doc)));
    assert_matches(
        "sync M/M/1: mean queue time",
        measure(&report, |r| r.queue.mean),
        rho * es / (1.0 - rho),
        0.06,
    );
}

/// Little's law on a run with phases: busy threads (thread occupancy × threads) equal
/// throughput × mean time on a thread (response − queue).
#[test]
fn littles_law_holds_for_threads() {
    let doc = json!({
        "arrivals": {"process": "poisson", "rate": 40.0},
        "request": {"phases": [{"cpu": "5ms"}, {"io": {"distribution": "exponential", "mean": "20ms"}}, {"cpu": "2ms"}]},
        "fleet": {"dynos": 1, "cores": 1},
        "app": {"server": "puma", "processes": 2, "threads": 3},
        "run": {"duration": 2000.0, "warmup": 50.0, "replications": 20, "seed": 17},
    });
    let report = run_ok(&build(&scenario(doc)));
    let l = measure(&report, |r| r.dyno.as_ref().unwrap().thread_occupancy * 6.0);
    let xr: Vec<f64> = report
        .per_replication
        .iter()
        .map(|r| r.throughput * (r.response.mean - r.queue.mean))
        .collect();
    let xr = Measured::of(&xr);
    assert_matches(
        "Little: busy threads = X x time on thread",
        l,
        xr.mean,
        0.03,
    );
}

/// Memory: a dyno over its restart threshold is restarted (R15) and its requests fail; one
/// under the quota never is.
#[test]
fn memory_over_the_restart_threshold_restarts_the_dyno() {
    let doc = |process: &str, request: &str| {
        json!({
            "arrivals": {"process": "poisson", "rate": 50.0},
            "request": {"phases": [{"cpu": "5ms"}]},
            "fleet": {"dynos": 2, "type": "standard-1x"},
            "app": {"server": "unicorn", "processes": 4, "boot_time": "5s",
                    "memory": {"dyno": "40MB", "process": process, "request": request}},
            "run": {"duration": 200.0, "warmup": 10.0, "replications": 4, "seed": 2},
        })
    };
    let calm = run_ok(&build(&scenario(doc("100MB", "10MB"))));
    for r in &calm.per_replication {
        let dyno = r.dyno.as_ref().unwrap();
        assert_eq!(dyno.memory.r15_restarts, 0);
        assert_eq!(r.failed.as_ref().unwrap().total, 0);
        assert!(dyno.memory.peak <= 512e6 * 2.0);
    }
    // 40 + 4 x 100 + 4 x 10 = 480 MB at most above: never over the quota. Below, 40 + 4 x 200
    // = 840 MB idle, over the 512 MB quota (R14); two requests in flight (100 MB each) pass
    // 2 x 512 MB: R15.
    let swapping = run_ok(&build(&scenario(doc("200MB", "100MB"))));
    for r in &swapping.per_replication {
        let dyno = r.dyno.as_ref().unwrap();
        assert!(dyno.memory.r15_restarts > 0, "{:?}", dyno.memory);
        assert!(dyno.memory.over_quota > 0.5, "{:?}", dyno.memory);
        let failed = r.failed.as_ref().unwrap();
        assert!(failed.r15 > 0 && failed.r15 <= r.simulated_requests);
    }
}

/// A closed loop whose only dyno restarts keeps going: its clients' requests fail while the
/// dyno boots (they back off rather than spin at one instant), and the run ends.
#[test]
fn a_closed_loop_survives_its_only_dyno_restarting() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 20},
        "request": {"phases": [{"cpu": "5ms"}]},
        "fleet": {"dynos": 1, "type": "standard-1x"},
        "app": {"server": "generic", "processes": 1, "threads": 20, "boot_time": "2s",
                "memory": {"process": "300MB", "request": "40MB"}},
        "run": {"duration": 30.0, "warmup": 0.0, "replications": 2, "seed": 4},
    });
    let report = run_ok(&build(&scenario(doc)));
    for r in &report.per_replication {
        let failed = r.failed.as_ref().unwrap();
        assert!(r.dyno.as_ref().unwrap().memory.r15_restarts > 0);
        assert!(failed.no_dyno > 0 && failed.r15 > 0, "{failed:?}");
        // No more than one failed attempt per client per back-off while the dyno is down.
        assert!(failed.no_dyno as f64 <= 20.0 * 30.0 / 1e-3, "{failed:?}");
    }
}

/// Found by the fuzz target: a dyno restarted while the database served one of its requests
/// (FCFS) left that server busy for ever, so every later request queued behind it and a closed
/// loop never got all its answers. The database now finishes the orphaned work and frees the
/// server.
#[test]
fn a_restart_during_a_query_frees_the_database_server_when_the_query_ends() {
    let doc = json!({
        "app": {"boot_time": "50ms", "server": "gunicorn", "worker_class": "gevent", "processes": 4,
                "memory": {"dyno": "130MB", "process": "12MB", "request": "68MB", "thread": "26MB"}},
        "arrivals": {"process": "closed", "clients": 14, "requests": 118, "think": "29ms"},
        "fleet": {"dynos": 1, "type": "standard-1x"},
        "request": {"phases": [{"use": "db", "time": "20ms"}]},
        "resources": {"db": {"servers": 1, "discipline": "fcfs"}},
        "run": {"replications": 2, "seed": 1},
    });
    let report = run_ok(&build(&scenario(doc)));
    for r in &report.per_replication {
        let closed = r.closed_loop.as_ref().unwrap();
        assert_eq!(closed.completed, 118, "{closed:?}");
        assert!(r.dyno.as_ref().unwrap().memory.r15_restarts > 0);
    }
}

/// Greedy accept (gunicorn's gthread and gevent workers): each connection goes at once to a
/// process drawn at random and waits for that process's threads. With P single-thread
/// processes that is Poisson splitting into P independent M/M/1 queues: the mean wait is
/// ρ·E[S]/(1 − ρ) at per-process load ρ. The same dyno with a shared accept queue is one
/// M/M/P queue (Erlang C), which waits far less: the test tells the two apart.
#[test]
fn greedy_accept_splits_a_dyno_into_independent_queues() {
    let (processes, rho, es) = (3u32, 0.6, 0.05);
    let doc = |accept: &str, seed: u64| {
        json!({
            "arrivals": {"process": "poisson", "rate": rho * f64::from(processes) / es},
            "request": {"phases": [{"io": {"distribution": "exponential", "mean": es}}]},
            "fleet": {"dynos": 1},
            "app": {"server": "gunicorn", "worker_class": "gthread", "processes": processes,
                    "threads": 1, "accept": accept},
            "run": {"duration": 20000.0 * es, "warmup": 200.0 * es, "replications": 20, "seed": seed},
        })
    };
    let greedy = run_ok(&build(&scenario(doc("greedy", 41))));
    let mm1 = rho * es / (1.0 - rho);
    assert_matches(
        "greedy accept, 3 single-thread processes: mean queue = M/M/1's",
        measure(&greedy, |r| r.queue.mean),
        mm1,
        0.05,
    );
    assert_matches(
        "greedy accept: P(wait) = rho",
        measure(&greedy, |r| r.queued_fraction),
        rho,
        0.02,
    );
    let shared = run_ok(&build(&scenario(doc("shared", 42))));
    let mmc = mmc_mean_wait(processes, rho * f64::from(processes), es).unwrap();
    assert_matches(
        "shared accept, 3 single-thread processes: mean queue = M/M/3's",
        measure(&shared, |r| r.queue.mean),
        mmc,
        0.1,
    );
    assert!(mm1 > 2.0 * mmc, "{mm1} vs {mmc}");
}

/// A closed loop that runs for a time (no request count) with a warm-up: ab's requests/s
/// counts the requests sent inside the window over the time from the window's start to the
/// last response, so it must agree with the window's throughput up to the requests in flight
/// at its two edges (at most `clients` each). Counting the warm-up's completions too once
/// overstated it by (warm-up + duration) / duration.
#[test]
fn a_timed_closed_loop_counts_its_window_only() {
    let clients = 4u32;
    let doc = json!({
        "arrivals": {"process": "closed", "clients": clients, "think": "20ms"},
        "request": {"phases": [{"io": {"distribution": "exponential", "mean": "30ms"}}]},
        "fleet": {"dynos": 2},
        "app": {"server": "gunicorn", "worker_class": "sync", "processes": 1},
        "run": {"duration": 100.0, "warmup": 50.0, "replications": 3, "seed": 5},
    });
    let report = run_ok(&build(&scenario(doc)));
    for r in &report.per_replication {
        let closed = r.closed_loop.as_ref().unwrap();
        let in_window = r.throughput * 100.0;
        let counted = closed.requests_per_s * closed.elapsed;
        assert!(
            (counted - in_window).abs() <= 2.0 * f64::from(clients) + 1e-9,
            "closed loop counted {counted} requests, the window completed {in_window}"
        );
        assert!(
            (closed.elapsed - 100.0).abs() < 1.0,
            "elapsed {}",
            closed.elapsed
        );
    }
}

/// Found by the fuzz target: a closed loop of a set number of requests that all fail at the
/// instant they are sent (random routing piles them on few dynos, whose memory they exceed
/// at once: R15) spans no time from its start to its last answer. Its rates were answers /
/// f64::MIN_POSITIVE, infinite, and JSON wrote null; they are now 0, as
/// closed_loop.requests_per_s has always been.
#[test]
fn a_closed_loop_failing_at_once_has_finite_rates() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 26, "requests": 29},
        "request": {"phases": [{"cpu": "0.05ms"}]},
        "fleet": {"dynos": 4, "type": "standard-1x"},
        "app": {"server": "gunicorn", "worker_class": "gthread", "processes": 3, "threads": 2,
                "memory": {"arena": "14MB", "request": "192MB", "thread": "6MB"}},
        "run": {"replications": 4, "seed": 1},
    });
    let report = run_ok(&build(&scenario(doc)));
    let mut at_once = 0;
    for r in &report.per_replication {
        let closed = r.closed_loop.as_ref().unwrap();
        assert!(r.throughput.is_finite() && r.goodput.is_finite(), "{r:?}");
        if closed.elapsed == 0.0 {
            at_once += 1;
            assert_eq!(closed.failed, 29, "{closed:?}");
            assert_eq!((r.throughput, r.goodput), (0.0, 0.0));
        }
    }
    // The case itself: with these seeds, at least one replication fails whole at once.
    assert!(
        at_once > 0,
        "no replication failed at once: the test no longer covers its case"
    );
}

/// Found by the fuzz target: under processor sharing the router's one colocated job, done but
/// its event not yet run, was not taken out when new work came at that instant (its
/// remaining time read 0), so a second job joined its group and overflowed it (an index out
/// of bounds). Here the app's 5 ms timeout kills the worker of most requests and the router
/// relays its 21 ms of CPU per request on the dyno's cores, with no CPU phase of the app's.
#[test]
fn colocated_work_arriving_as_the_last_ends_stays_one_job() {
    let doc = json!({
        "app": {"boot_time": "50ms", "processes": 1, "server": "gunicorn", "timeout": "5.286231737167008ms"},
        "arrivals": {"process": "poisson", "rate": 82.12825914515224,
                     "timeout": {"distribution": "exponential", "mean": "22.698920071033378ms"}},
        "fleet": {"cpu_sharing": "ps", "dynos": 2},
        "request": {"phases": [{"io": "10.62044985735909ms"}]},
        "router": {"colocated_cpu": "21.034467136325546ms", "max_in_flight": "3/dyno", "policy": "random",
                   "retries": 2, "retry_delay": "0s"},
        "run": {"duration": 10.0, "warmup": 0.0, "replications": 2, "seed": 1},
    });
    let report = run_ok(&build(&scenario(doc)));
    for r in &report.per_replication {
        let cpu = r.dyno.as_ref().unwrap().cpu_utilisation;
        assert!(cpu > 0.0 && cpu <= 1.0 + 1e-9, "{cpu}");
    }
}

/// Found by the fuzz target: a closed loop whose requests all failed before its only dyno
/// finished booting had no dyno-time serving, and the dyno figures were 0/0 (NaN); they are 0.
#[test]
fn dyno_figures_without_a_dyno_serving_are_zero() {
    let doc = json!({
        "app": {"memory": {"arena": "0MB", "dyno": "48MB", "process": "19MB", "request": "224MB",
                           "thread": "1MB"}, "processes": 4, "server": "generic"},
        "arrivals": {"clients": 4, "process": "closed", "requests": 4},
        "autoscale": {"cooldown": "0s", "delay": "0s", "downscale_delay": "0s", "downscale_ratio": 0.3,
                      "interval": "0.5s", "max": 1, "min": 1, "rule": "heroku", "target": "0.005s",
                      "window": "2s"},
        "fleet": {"boot_time": "5.4370660239428945s", "dynos": 1},
        "request": {"phases": [{"cpu": "0.05ms"}]},
        "run": {"duration": 10.0, "warmup": 0.0, "replications": 2, "seed": 1},
    });
    let report = run_ok(&build(&scenario(doc)));
    for r in &report.per_replication {
        let d = r.dyno.as_ref().unwrap();
        for x in [
            d.cpu_utilisation,
            d.process_occupancy,
            d.memory.mean,
            d.memory.over_quota,
        ] {
            assert!(x.is_finite() && x >= 0.0, "{d:?}");
        }
    }
}
