//! Faults in fleets that call one another (docs/services.md, "Faults and the verdict"): a fault
//! in any fleet is judged at every fleet, the entry's (the whole request) and each service's,
//! over the same span of faults; a retry storm the callers' own retries keep up is judged
//! not recovered everywhere, a short slowdown recovered everywhere.

mod common;

use common::{build, run_ok};
use dynosim_engine::{never_interrupted, run_replication, ReplicationResult, Scenario};
use serde_json::{json, Value};

/// The entry (threads to spare) does 100 ms of I/O, then calls `api` (`call`); api's 10 dynos
/// of one thread serve exponential 100 ms at 70 req/s (load 0.7), their router never timing out
/// unless `api_router_timeout` is given. `api_faults` are api's, `entry_faults` the entry's.
fn chain(call: Value, api_faults: Value, entry_faults: Value, api_router_timeout: Value) -> Value {
    let mut doc = json!({
        "name": "chain-faults",
        "arrivals": {"process": "poisson", "rate": 70.0},
        "fleet": {"dynos": 1, "slots": 2000},
        "request": {"phases": [
            {"io": {"distribution": "exponential", "mean": 0.1}},
            call,
        ]},
        "router": {"policy": "random", "timeout": "off"},
        "services": {
            "api": {
                "fleet": {"dynos": 10, "slots": 1},
                "service": {"distribution": "exponential", "mean": 0.1},
                "router": {"policy": "random", "timeout": api_router_timeout},
                "faults": api_faults,
            },
        },
        "run": {"duration": 1500.0, "warmup": 60.0, "replications": 2, "seed": 5},
    });
    if !entry_faults.is_null() {
        doc["faults"] = entry_faults;
    }
    doc
}

fn slowdown(at: f64, seconds: f64, factor: f64) -> Value {
    json!([{"at": at, "for": seconds, "kind": "slowdown", "factor": factor}])
}

fn rules(s: &Scenario) -> Vec<dynosim_engine::stability::Rule> {
    std::iter::once(s)
        .chain(s.services.iter().map(|t| &t.scenario))
        .map(|t| t.stability.expect("every fleet judged"))
        .collect()
}

fn verdicts(r: &ReplicationResult) -> (f64, f64) {
    let entry = r.stability.as_ref().expect("the entry's verdict").recovered;
    let api = r.services.as_ref().unwrap()["api"]
        .fleet
        .stability
        .as_ref()
        .expect("api's verdict")
        .recovered;
    (entry, api)
}

#[test]
fn a_services_fault_is_judged_at_every_fleet_over_the_same_span() {
    let plain = json!({"call": "api"});
    // api's fault alone: the entry, which has none, is judged over api's.
    let s = build(
        &chain(
            plain.clone(),
            slowdown(600.0, 60.0, 1.5),
            Value::Null,
            json!("off"),
        )
        .to_string(),
    );
    let r = rules(&s);
    assert_eq!(r.len(), 2);
    assert!(
        r.iter().all(|x| x.first == 600.0 && x.last == 660.0),
        "{r:?}"
    );
    // Each fleet's automatic interval is sized by its own rate: the same 70/s here.
    assert_eq!(r[0].interval, r[1].interval);
    // Faults in both: both span the first's start to the last's end.
    let s = build(
        &chain(
            plain.clone(),
            slowdown(600.0, 60.0, 1.5),
            slowdown(300.0, 30.0, 2.0),
            json!("off"),
        )
        .to_string(),
    );
    assert!(rules(&s)
        .iter()
        .all(|x| x.first == 300.0 && x.last == 660.0));
    // No fault anywhere: no verdict anywhere.
    let mut doc = chain(plain, json!([]), Value::Null, json!("off"));
    doc["services"]["api"]
        .as_object_mut()
        .unwrap()
        .remove("faults");
    let s = build(&doc.to_string());
    assert!(s.stability.is_none() && s.services[0].scenario.stability.is_none());
}

#[test]
fn run_recovery_window_reaches_the_fleets_when_only_a_service_has_faults() {
    let mut doc = chain(
        json!({"call": "api"}),
        slowdown(600.0, 60.0, 1.5),
        Value::Null,
        json!("off"),
    );
    doc["run"]["recovery_window"] = json!("5min");
    doc["run"]["recovery_interval"] = json!("20s");
    let s = build(&doc.to_string());
    assert!(rules(&s)
        .iter()
        .all(|x| x.window == 300.0 && x.interval == 20.0));
    // Without faults anywhere it is still refused, at its key.
    doc["services"]["api"]
        .as_object_mut()
        .unwrap()
        .remove("faults");
    let e = Scenario::from_json(
        &doc.to_string(),
        std::path::Path::new("."),
        &never_interrupted,
    )
    .unwrap_err();
    assert!(e.to_string().contains("run.recovery_window"), "{e}");
}

/// A 1.5× slowdown for a minute at load 0.7 (1.05 while it lasts) leaves a backlog of a few
/// seconds' work, worked off soon after: every replication recovers, at the entry and at api.
#[test]
fn a_short_slowdown_of_a_service_recovers_everywhere() {
    let s = build(
        &chain(
            json!({"call": "api"}),
            slowdown(600.0, 60.0, 1.5),
            Value::Null,
            json!("off"),
        )
        .to_string(),
    );
    let report = run_ok(&s);
    for r in &report.per_replication {
        assert_eq!(verdicts(r), (1.0, 1.0));
    }
}

/// A 3× slowdown for two minutes (load 2.1) behind a 2 s call timeout tried once more: the
/// timed-out calls stay in api's queues, worked for nobody, while their retries double what
/// arrives (140/s against api's 100/s), and api's router gives up on each after 30 s (H12)
/// while its dyno still works on it. The backlog never drains: no replication recovers, at api
/// or at the entry, whose requests all fail from then on.
#[test]
fn a_retry_storm_in_a_service_stays_down_everywhere() {
    let call = json!({"call": "api", "timeout": "2s", "retries": 1});
    let s = build(&chain(call, slowdown(600.0, 120.0, 3.0), Value::Null, json!("30s")).to_string());
    for replication in 0..2 {
        let r = run_replication(&s, replication, &never_interrupted).unwrap();
        assert_eq!(verdicts(&r), (0.0, 0.0), "replication {replication}");
    }
}
