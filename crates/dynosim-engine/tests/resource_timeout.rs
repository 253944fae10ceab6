//! A dependency's timeout and retries (`[resources.NAME] timeout`, PostgreSQL's
//! statement_timeout, and `retries`, the app trying a failed query again) against theory and
//! cases worked out by hand. Tolerances are k standard errors over replications (see
//! `common/mod.rs`).
//!
//! Nothing queues (servers, threads and connections to spare): each try of a query holds a
//! server for min(S, T), S exponential of rate μ, and a try fails when S > T, with
//! probability p = e^{−μT}, each try's time drawn afresh. So:
//! - the fraction of tries stopped is p;
//! - a try holds its server (1 − p)/μ on average (E[min(S, T)]), which the resource's
//!   utilisation shows: λ × tries per request × (1 − p)/μ / servers;
//! - with k retries a request fails when all its k + 1 tries do: p^{k+1} = e^{−μT(k+1)};
//! - it makes retry i when its first i tries failed: retries per request Σ_{i=1..k} p^i.

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::{never_interrupted, ReplicationResult, RunReport, Scenario};
use serde_json::{json, Value};
use std::path::Path;

fn measure(report: &RunReport, f: impl Fn(&ReplicationResult) -> f64) -> Measured {
    Measured::over_replications(report, f)
}

fn run(s: &Value) -> RunReport {
    run_ok(&build(&s.to_string()))
}

const SERVERS: u32 = 60;

/// Poisson requests at `rate`, one query each on `db` (`discipline`, `SERVERS` servers, no
/// pool), exponential of mean `1/mu`; threads to spare; no router timeout.
fn one_query(rate: f64, mu: f64, db: Value, (duration, reps, seed): (f64, u32, u64)) -> Value {
    json!({
        "name": "resource-timeout",
        "arrivals": {"process": "poisson", "rate": rate},
        "request": {"phases": [{"use": "db",
                                "time": {"distribution": "exponential", "mean": 1.0 / mu}}]},
        "resources": {"db": db},
        "app": {"processes": 1, "threads": 200},
        "fleet": {"dynos": 1},
        "router": {"timeout": "off"},
        "run": {"duration": duration, "warmup": 50.0, "replications": reps, "seed": seed},
    })
}

#[test]
fn tries_are_cut_at_the_timeout_and_retried_as_independent_draws() {
    let (lambda, mu, t) = (4.0f64, 1.0f64, 0.8f64);
    let p = (-mu * t).exp();
    for discipline in ["fcfs", "ps"] {
        for k in [0u32, 2] {
            let db = json!({"servers": SERVERS, "discipline": discipline,
                            "timeout": format!("{t}s"), "retries": k});
            let report = run(&one_query(lambda, mu, db, (4_000.0, 12, 31 + u64::from(k))));
            let label = format!("{discipline}, {k} retries");
            let fail = p.powi(k as i32 + 1);
            let retries: f64 = (1..=k).map(|i| p.powi(i as i32)).sum();
            let tries = 1.0 + retries;
            assert_matches(
                &format!("{label}: errors.resource_timeout = e^(−μT(k+1))"),
                measure(&report, |r| r.errors.resource_timeout.unwrap()),
                fail,
                0.06,
            );
            // The tries stopped (the retries, and the requests' last tries that failed) over
            // all tries (the uses of the resource).
            assert_matches(
                &format!("{label}: fraction of tries stopped = e^(−μT)"),
                measure(&report, |r| {
                    let stopped = r.retries.as_ref().map_or(0, |x| x.app)
                        + r.error_counts.resource_timeout.unwrap();
                    stopped as f64 / r.resources.as_ref().unwrap()["db"].uses as f64
                }),
                p,
                0.03,
            );
            assert_matches(
                &format!("{label}: utilisation = λ × tries × (1 − e^(−μT))/μ / servers"),
                measure(&report, |r| r.resources.as_ref().unwrap()["db"].utilisation),
                lambda * tries * (1.0 - p) / mu / f64::from(SERVERS),
                0.03,
            );
            if k == 0 {
                // No retries: nothing reports them.
                assert!(report.per_replication.iter().all(|r| r.retries.is_none()));
                continue;
            }
            assert_matches(
                &format!("{label}: app retries per request = Σ e^(−μTi)"),
                measure(&report, |r| {
                    r.retries.as_ref().unwrap().app as f64 / r.requests as f64
                }),
                retries,
                0.03,
            );
            for r in &report.per_replication {
                let x = r.retries.as_ref().unwrap();
                // Only the app retries; the requests' tries are the clients' (none here).
                assert_eq!(x.count, x.app, "{label}");
                assert_eq!((x.client, x.router), (0, 0), "{label}");
                assert_eq!(x.attempts, r.requests, "{label}");
            }
        }
    }
}

/// A query that would take 2 s of a 1 s timeout is stopped at 1 s exactly (its server free at
/// once), and its retries too: every request fails after (k + 1) × 1 s, the database's
/// servers each busy 1 s a try.
#[test]
fn a_constant_query_over_the_timeout_fails_every_try() {
    for discipline in ["fcfs", "ps"] {
        let s = json!({
            "name": "resource-timeout-constant",
            "arrivals": {"process": "poisson", "rate": 0.5},
            "request": {"phases": [{"use": "db", "time": 2.0}]},
            "resources": {"db": {"servers": 40, "discipline": discipline, "timeout": "1s",
                                 "retries": 2, "pool": {"size": 1, "per": "process"}}},
            "app": {"processes": 20, "threads": 1},
            "fleet": {"dynos": 1},
            "router": {"timeout": "off"},
            "run": {"duration": 2_000.0, "warmup": 20.0, "replications": 4, "seed": 5},
        });
        let report = run(&s);
        for r in &report.per_replication {
            assert_eq!(r.error_counts.resource_timeout, Some(r.requests));
            assert_eq!(r.retries.as_ref().unwrap().app, 2 * r.requests);
            assert_eq!(r.resources.as_ref().unwrap()["db"].uses, 3 * r.requests);
            assert!(
                (r.response.max - 3.0).abs() < 1e-9,
                "{discipline}: {}",
                r.response.max
            );
        }
    }
}

/// A hang outage of the database (`[[faults]]` `mode = "hang"`) with a timeout T and k
/// retries: a request whose query begins in the outage fails after (k + 1)T, not at the
/// outage's end. A query beginning at u (queries take 0.1 s, nothing queues) makes tries at
/// u, u + T, ...; try i fails when u + (i + 1)T < the outage's end e (else it waits for the
/// end, then is served). So a request fails when u < e − (k + 1)T (all of its requests over
/// [at, e − (k+1)T): λ(L − (k + 1)T) of them), and makes min(k, #failed tries) retries:
/// λ(k(L − kT) + Σ_{j=1..k−1} jT) in all, i.e. for k = 2, λ(2(L − 2T) + T).
#[test]
fn a_hang_with_a_timeout_fails_after_k_plus_1_timeouts() {
    let (lambda, t, k, at, length) = (5.0, 2.0, 2u32, 100.0, 400.0);
    let s = json!({
        "name": "resource-timeout-hang",
        "arrivals": {"process": "poisson", "rate": lambda},
        "request": {"phases": [{"use": "db", "time": 0.1}]},
        "resources": {"db": {"servers": 100, "timeout": t, "retries": k}},
        "app": {"processes": 1, "threads": 1000},
        "fleet": {"dynos": 1},
        "router": {"timeout": "off"},
        "faults": [{"at": at, "for": length, "kind": "outage", "target": "db", "mode": "hang"}],
        "run": {"duration": 600.0, "warmup": 10.0, "replications": 20, "seed": 8},
    });
    let report = run(&s);
    let tries = f64::from(k + 1);
    assert_matches(
        "requests failed by the timeout = λ(L − (k+1)T)",
        measure(&report, |r| r.error_counts.resource_timeout.unwrap() as f64),
        lambda * (length - tries * t),
        0.05,
    );
    assert_matches(
        "app retries = λ(2(L − 2T) + T)",
        measure(&report, |r| r.retries.as_ref().unwrap().app as f64),
        lambda * (2.0 * (length - 2.0 * t) + t),
        0.05,
    );
    for r in &report.per_replication {
        // The longest any request waited: a failed one's (k + 1)T, or one whose last try
        // waited out the outage's end, below (k + 1)T, then 0.1 s.
        assert!(r.response.max >= tries * t - 1e-9, "{}", r.response.max);
        assert!(
            r.response.max <= tries * t + 0.1 + 1e-9,
            "{}",
            r.response.max
        );
    }
    // Without the timeout the outage holds each query to its end: the first ones for L.
    let mut without = s.clone();
    without["resources"]["db"] = json!({"servers": 100});
    for r in &run(&without).per_replication {
        assert!(r.response.max > length - 1.0, "{}", r.response.max);
        assert!(r.errors.resource_timeout.is_none());
    }
}

/// A refusing outage: each retry is refused at once too (the app does not wait), counted, and
/// the request fails with the outage's error.
#[test]
fn retries_of_a_refused_query_are_refused_at_once() {
    let s = json!({
        "name": "resource-retries-refused",
        "arrivals": {"process": "poisson", "rate": 1.0},
        "request": {"phases": [{"use": "db", "time": 0.1}]},
        "resources": {"db": {"servers": 10, "retries": 3}},
        "app": {"processes": 1, "threads": 100},
        "fleet": {"dynos": 1},
        "router": {"timeout": "off"},
        "faults": [{"at": 100.0, "for": 100.0, "kind": "outage", "target": "db"}],
        "run": {"duration": 400.0, "warmup": 10.0, "replications": 3, "seed": 9},
    });
    for r in &run(&s).per_replication {
        let outage = r.error_counts.outage.unwrap();
        assert!(outage > 50, "{outage}");
        assert_eq!(r.retries.as_ref().unwrap().app, 3 * outage);
        // No timeout: no such error kind reported.
        assert!(r.error_counts.resource_timeout.is_none());
    }
}

/// The clients retry a request the app failed this way as a 5xx: a query always over the
/// timeout fails every try of every request.
#[test]
fn clients_retry_a_resource_timeout_as_a_5xx() {
    for (on, attempts) in [("5xx", 3.0), ("timeout", 1.0)] {
        let s = json!({
            "name": "resource-timeout-5xx",
            "arrivals": {"process": "poisson", "rate": 0.2, "timeout": 30.0,
                         "retry": {"attempts": 3, "on": [on], "backoff": "constant",
                                   "base": 0.1, "jitter": "none"}},
            "request": {"phases": [{"use": "db", "time": 1.0}]},
            "resources": {"db": {"servers": 10, "timeout": "500ms", "retries": 1}},
            "app": {"processes": 1, "threads": 20},
            "fleet": {"dynos": 1},
            "router": {"timeout": "off"},
            "run": {"duration": 1_000.0, "warmup": 10.0, "replications": 2, "seed": 10},
        });
        for r in &run(&s).per_replication {
            let x = r.retries.as_ref().unwrap();
            assert_eq!(x.attempts_per_request, attempts, "on {on}");
            assert_eq!(r.errors.resource_timeout, Some(1.0), "on {on}");
            // Each try's query is tried twice by the app.
            assert_eq!(x.app, x.attempts, "on {on}");
            assert_eq!(x.count, x.client + x.app, "on {on}");
        }
    }
}

/// A query stopped by the app (`app.service_timeout`) while the database works on it is an
/// orphan: the database's own timeout still stops it (its server is free at T, not at the
/// query's end), and nobody retries it.
#[test]
fn the_database_stops_an_orphaned_query_at_its_timeout() {
    let lambda = 0.2f64;
    for discipline in ["fcfs", "ps"] {
        let s = json!({
            "name": "resource-timeout-orphan",
            "arrivals": {"process": "poisson", "rate": lambda},
            "request": {"phases": [{"use": "db", "time": 4.0}]},
            "resources": {"db": {"servers": 1, "discipline": discipline, "timeout": "2s",
                                 "retries": 3}},
            "app": {"processes": 1, "threads": 10, "service_timeout": 1.0},
            "fleet": {"dynos": 1},
            "router": {"timeout": "off"},
            "run": {"duration": 20_000.0, "warmup": 100.0, "replications": 20, "seed": 11},
        });
        let report = run(&s);
        for r in &report.per_replication {
            assert_eq!(r.error_counts.service_timeout, Some(r.requests));
            assert_eq!(r.error_counts.resource_timeout, Some(0));
            assert_eq!(r.retries.as_ref().unwrap().app, 0);
        }
        let utilisation = measure(&report, |r| r.resources.as_ref().unwrap()["db"].utilisation);
        if discipline == "ps" {
            // Shared, no query of 4 s ends within 2 s: each stays exactly 2 s, and the server
            // is busy while any is in: M/D/∞'s P(N > 0) = 1 − e^(−2λ).
            assert_matches(
                "ps: utilisation = 1 − e^(−2λ)",
                utilisation,
                1.0 - (-2.0 * lambda).exp(),
                0.03,
            );
        } else {
            // First come, first served: each holds the server at most 2 s from when the
            // database took it (its queue time counts): busy at most λ × 2 s.
            assert!(
                utilisation.mean <= lambda * 2.0 + 4.0 * utilisation.std_error,
                "{discipline}: {utilisation:?}"
            );
            assert!(utilisation.mean > 0.25, "{discipline}: {utilisation:?}");
        }
    }
}

/// Bad values are refused in one line naming the key; a scenario without the keys is run as
/// before (no error kind, no retries reported).
#[test]
fn bad_values_name_the_key() {
    let mut s = one_query(1.0, 1.0, json!({"servers": 4}), (100.0, 2, 1));
    let plain = run(&s);
    for r in &plain.per_replication {
        assert!(r.errors.resource_timeout.is_none() && r.retries.is_none());
    }
    for (key, bad) in [
        ("timeout", json!(-1.0)),
        ("timeout", json!("-2s")),
        ("timeout", json!("0s")),
        ("timeout", json!("soon")),
        ("timeout", json!(true)),
        ("retries", json!(-1)),
        ("retries", json!(1.5)),
        ("retries", json!("two")),
    ] {
        s["resources"]["db"] = json!({"servers": 4});
        s["resources"]["db"][key] = bad.clone();
        let e = Scenario::from_json(&s.to_string(), Path::new("."), &never_interrupted)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("resources.db.{key}")), "{bad}: {e}");
        assert_eq!(e.lines().count(), 1, "{bad}: {e}");
    }
    s["resources"]["db"] = json!({"servers": 4, "timeout": "off", "retries": 0});
    for r in &run(&s).per_replication {
        assert!(r.errors.resource_timeout.is_none() && r.retries.is_none());
    }
}
