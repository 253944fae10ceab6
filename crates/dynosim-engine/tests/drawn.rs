//! `drawn::draw` hands out the very requests a replication simulates: the same count and the
//! same service times in the same order, on either engine, open loop or closed. The testbed
//! relies on it to pair what it measures with what the simulation of the same seed computes.
//! The check is exact: the report's `service_mean` is the sum, in arrival order, of the drawn
//! times of the requests in the window, divided by their count, so one draw taken out of turn
//! changes it.

use dynosim_engine::drawn::draw;
use dynosim_engine::{never_interrupted, run_replication_on, Engine, Scenario};
use serde_json::{json, Value};
use std::path::Path;

fn build(doc: Value) -> Scenario {
    Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted).unwrap()
}

fn check(doc: Value, engines: &[Engine]) {
    let s = build(doc);
    let until = s.warmup + s.duration;
    let drawn = draw(&s, 1, until, usize::MAX);
    assert!(!drawn.truncated);
    let in_window: Vec<f64> = (0..drawn.phases.len())
        .filter(|&i| drawn.closed || drawn.time[i] >= s.warmup)
        .map(|i| drawn.phases[i].iter().sum())
        .collect();
    let sum: f64 = in_window.iter().sum();
    for &engine in engines {
        let r = run_replication_on(engine, &s, 1, &never_interrupted).unwrap();
        assert_eq!(r.requests, in_window.len() as u64, "{engine:?}");
        assert_eq!(
            r.simulated_requests,
            drawn.phases.len() as u64,
            "{engine:?}"
        );
        assert_eq!(
            r.service_mean.to_bits(),
            (sum / in_window.len() as f64).to_bits(),
            "{engine:?}: {} vs {}",
            r.service_mean,
            sum / in_window.len() as f64
        );
    }
}

#[test]
fn open_service_scenario_on_both_engines() {
    check(
        json!({"arrivals": {"process": "poisson", "rate": 40},
               "service": {"distribution": "lognormal", "median": "40ms", "sigma": 0.8},
               "fleet": {"dynos": 4}, "router": {"policy": "random"},
               "run": {"duration": 60, "warmup": 5, "seed": 11}}),
        &[Engine::Direct, Engine::Events],
    );
}

#[test]
fn open_scenario_with_classes_and_phases() {
    check(
        json!({"arrivals": {"process": "poisson", "rate": 30},
               "fleet": {"dynos": 2},
               "app": {"server": "gunicorn", "worker_class": "gthread", "processes": 2, "threads": 2},
               "request": {"class": [
                   {"name": "page", "weight": 3, "phases": [
                       {"cpu": {"distribution": "exponential", "mean": "5ms"}},
                       {"use": "db", "time": {"distribution": "exponential", "mean": "20ms"}},
                       {"io": "10ms"}]},
                   {"name": "api", "phases": [{"io": {"distribution": "exponential", "mean": "30ms"}}]}]},
               "resources": {"db": {"servers": 4, "pool": {"size": 2}}},
               "run": {"duration": 60, "warmup": 5, "seed": 5}}),
        &[Engine::Events],
    );
}

#[test]
fn closed_loop_sends_the_drawn_requests_in_order() {
    let doc = json!({"arrivals": {"process": "closed", "clients": 3, "requests": 500,
                                  "think": {"distribution": "exponential", "mean": "10ms"}},
                     "fleet": {"dynos": 1},
                     "app": {"server": "gunicorn", "processes": 2},
                     "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": "4ms"}}]},
                     "run": {"seed": 9}});
    check(doc.clone(), &[Engine::Events]);
    let d = draw(&build(doc), 1, f64::INFINITY, 100);
    assert!(d.truncated && d.closed);
    assert_eq!((d.phases.len(), d.think.len()), (100, 100));
    assert!(d.time.is_empty());
}

#[test]
fn scheduled_and_bursty_arrivals_pair_bit_exactly() {
    check(
        json!({"arrivals": {"process": "poisson",
                            "rate": [["0s", "20/s"], ["30s", "80/s"], ["50s", "30/s"]],
                            "burst": [{"at": "20s", "clients": 50,
                                       "jitter": {"distribution": "exponential", "mean": "1s"}},
                                      {"at": "5s", "clients": 3, "requests": 2, "every": "15s"}]},
               "service": {"distribution": "lognormal", "median": "40ms", "sigma": 0.8},
               "fleet": {"dynos": 4}, "router": {"policy": "random"},
               "run": {"duration": 60, "warmup": 5, "seed": 11}}),
        &[Engine::Direct, Engine::Events],
    );
    check(
        json!({"arrivals": {"process": "on_off", "rate": "60/s", "on": "4s", "off": "4s"},
               "service": {"distribution": "exponential", "mean": "30ms"},
               "fleet": {"dynos": 3}, "router": {"policy": "random"},
               "run": {"duration": 60, "warmup": 5, "seed": 4}}),
        &[Engine::Direct, Engine::Events],
    );
}

/// The drawn keys are the simulation's, request by request: under plain consistent hashing
/// every request of a user goes to that user's dyno, so with a constant service each dyno's
/// busy time is its users' request count times the service. A closed loop of a set number of
/// requests is measured whole, so each dyno's utilisation over the total gives its share of
/// the requests exactly; that share must be a sum of whole users' drawn counts. One key drawn
/// out of turn moves a request to another user and breaks the match (some assignment of the
/// 3 users to the 4 dynos must reproduce every dyno's count).
#[test]
fn drawn_keys_are_the_ones_the_simulation_hashes() {
    let requests = 600u64;
    let doc = json!({"arrivals": {"process": "closed", "clients": 2, "requests": requests,
                                  "keys": {"users": 3, "popularity": "zipf", "exponent": 0.5}},
                     "service": {"distribution": "constant", "value": "10ms"},
                     "fleet": {"dynos": 4}, "router": {"policy": "bounded_hash", "factor": "inf"},
                     "run": {"seed": 21}});
    let s = build(doc);
    for replication in 0..3 {
        let d = draw(&s, replication, f64::INFINITY, usize::MAX);
        assert_eq!(d.key.len() as u64, requests);
        let by_user = |keys: &[u32]| {
            let mut n = [0u64; 3];
            for &k in keys {
                n[k as usize] += 1;
            }
            n
        };
        let users = by_user(&d.key);
        assert!(users.iter().all(|&n| n > 0), "{users:?}");
        let r = run_replication_on(Engine::Events, &s, replication, &never_interrupted).unwrap();
        let u = &r.utilisation.per_dyno;
        assert_eq!(u.len(), 4);
        let total: f64 = u.iter().sum();
        let counts: Vec<u64> = u
            .iter()
            .map(|x| (x / total * requests as f64).round() as u64)
            .collect();
        let fits = |users: [u64; 3]| {
            (0..4u32.pow(3)).any(|a| {
                let mut per_dyno = [0u64; 4];
                for (user, n) in users.iter().enumerate() {
                    per_dyno[(a / 4u32.pow(user as u32) % 4) as usize] += n;
                }
                per_dyno[..] == counts[..]
            })
        };
        assert!(
            fits(users),
            "replication {replication}: dynos {counts:?}, users {users:?}"
        );
        // Another replication's keys do not fit: the check can fail.
        let other = draw(&s, replication + 10, f64::INFINITY, usize::MAX);
        assert!(
            !fits(by_user(&other.key)),
            "replication {replication}: {counts:?}"
        );
    }
}
