//! The direct engine against the event-driven one: on every scenario the direct engine can
//! run, both must report the same figures from the same seed. Counts, percentiles, maxima,
//! queue depths and per-dyno utilisation must be equal exactly (each is computed from the same
//! floating-point operations on the same draws); means and other sums may differ in their last
//! bits only, as they are added in another order.
//!
//! Equality, not closeness, is what makes this a test: a wrong start time, routing decision,
//! queue count or a random draw taken out of turn changes some figure outright.

mod common;

use common::{build, scenario_json};
use dynosim_engine::direct::can_run;
use dynosim_engine::{never_interrupted, run_replication_on, Engine, Error, ReplicationResult};
use serde_json::{json, Value};

fn quantiles() -> Value {
    json!({"distribution": "quantiles", "percentiles": [
        [1, "7ms"], [5, "8ms"], [10, "13ms"], [25, "23ms"], [50, "46ms"],
        [75, "255ms"], [90, "923ms"], [99, "3144ms"], [99.9, "7962ms"]]})
}

/// Every figure of the result as (key path, value), per-dyno lists included.
fn leaves(prefix: &str, value: &Value, out: &mut Vec<(String, f64)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                leaves(&format!("{prefix}.{k}"), v, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                leaves(&format!("{prefix}[{i}]"), v, out);
            }
        }
        Value::Number(n) => out.push((prefix.to_string(), n.as_f64().unwrap())),
        _ => {}
    }
}

/// Whether a figure is a sum over many requests (a mean, the wasted work), which the engines
/// add in different orders: equal but for the last bits.
fn is_sum(key: &str) -> bool {
    key.ends_with(".mean") && !key.starts_with(".utilisation")
        || key == ".service_mean"
        || key.starts_with(".wasted.")
}

fn figures(result: &ReplicationResult) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    leaves("", &serde_json::to_value(result).unwrap(), &mut out);
    out
}

/// Runs `router` over `dynos` x `slots` on both engines for three replications and compares.
fn same_on_both_engines(label: &str, rate: f64, service: Value, fleet: (u32, u32), router: Value) {
    let (dynos, slots) = fleet;
    let json = scenario_json(rate, service, dynos, slots, router, (600.0, 60.0, 3, 99));
    same_figures(label, &json);
}

/// Runs the scenario `json` on both engines for three replications and compares.
fn same_figures(label: &str, json: &str) {
    let scenario = build(json);
    assert!(
        can_run(&scenario),
        "{label}: the direct engine should run it"
    );
    for replication in 0..3 {
        let run = |engine| {
            run_replication_on(engine, &scenario, replication, &never_interrupted)
                .unwrap_or_else(|e| panic!("{label}: {e}"))
        };
        let (direct, events) = (figures(&run(Engine::Direct)), figures(&run(Engine::Events)));
        assert_eq!(direct.len(), events.len());
        let mut waited = 0.0;
        for ((key, d), (_, e)) in direct.iter().zip(&events) {
            if is_sum(key) {
                let scale = d.abs().max(e.abs()).max(1e-300);
                assert!(
                    (d - e).abs() <= 1e-9 * scale,
                    "{label}, replication {replication}: {key} is {d} direct, {e} event-driven"
                );
            } else {
                assert_eq!(
                    d, e,
                    "{label}, replication {replication}: {key} is {d} direct, {e} event-driven"
                );
            }
            if key == ".queued_fraction" {
                waited = *d;
            }
        }
        // A run in which nobody waits would compare little.
        assert!(
            waited > 0.05,
            "{label}: only {waited} of the requests waited"
        );
    }
}

/// Every built-in scenario (python/dynosim/scenarios/) the direct engine can run, with each
/// policy its file names, gives identical figures on both engines (a shortened run: 2
/// simulated minutes, 2 replications). The others (phases, memory, closed loops) are checked
/// to be refused by the direct engine.
#[test]
fn every_eligible_builtin_scenario_is_the_same_on_both_engines() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/dynosim/scenarios"
    );
    let mut eligible = 0;
    let mut eligible_fired = 0;
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut doc: Value =
            serde_json::to_value(toml::from_str::<toml::Value>(&text).unwrap()).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let map = doc.as_object_mut().unwrap();
        map.remove("cases");
        map.remove("cost");
        // Faults lie inside the scenario's own run, not the shortened one; and no run with
        // faults is the direct engine's (tests/feedback.rs checks their refusal).
        map.remove("faults");
        let mut policies = vec![doc["router"]["policy"]
            .as_str()
            .unwrap_or("random")
            .to_string()];
        for p in ["random", "power_of_d", "intelligent", "round_robin"] {
            if !policies.iter().any(|q| q == p) {
                policies.push(p.into());
            }
        }
        for policy in policies {
            let mut doc = doc.clone();
            if doc.get("router").is_none() {
                doc["router"] = json!({});
            }
            doc["router"]["policy"] = json!(policy);
            if doc.get("run").is_none() {
                doc["run"] = json!({});
            }
            doc["run"]["duration"] = json!("2min");
            doc["run"]["warmup"] = json!("10s");
            doc["run"]["replications"] = json!(2);
            let scenario = build(&doc.to_string());
            let label = format!("{name} {policy}");
            if !can_run(&scenario) {
                assert!(
                    run_replication_on(Engine::Direct, &scenario, 0, &never_interrupted).is_err(),
                    "{label}"
                );
                continue;
            }
            eligible += 1;
            for replication in 0..2 {
                let events =
                    run_replication_on(Engine::Events, &scenario, replication, &never_interrupted)
                        .unwrap_or_else(|e| panic!("{label}: {e}"));
                let direct = dynosim_engine::direct::try_run_replication(
                    &scenario,
                    replication,
                    &never_interrupted,
                )
                .unwrap_or_else(|e| panic!("{label}: {e}"));
                let Some(direct) = direct else {
                    // A timeout fired under a policy that routes on it: only the event-driven
                    // engine runs that, and it must have seen the timeout.
                    assert!(
                        events.error_counts.h12 + events.error_counts.client_timeout > 0,
                        "{label}"
                    );
                    eligible_fired += 1;
                    continue;
                };
                let (direct, events) = (figures(&direct), figures(&events));
                assert_eq!(direct.len(), events.len(), "{label}");
                for ((key, d), (_, e)) in direct.iter().zip(&events) {
                    if is_sum(key) {
                        let scale = d.abs().max(e.abs()).max(1e-300);
                        assert!((d - e).abs() <= 1e-9 * scale, "{label}: {key} {d} vs {e}");
                    } else {
                        assert_eq!(d, e, "{label}, replication {replication}: {key}");
                    }
                }
            }
        }
    }
    assert!(
        eligible >= 6,
        "only {eligible} eligible (scenario, policy) pairs"
    );
    assert!(
        eligible_fired * 2 < eligible,
        "{eligible_fired} of {eligible} eligible pairs had a timeout fire"
    );
}

#[test]
fn random_routing_is_the_same_on_both_engines() {
    for (dynos, slots) in [(75, 1), (12, 4)] {
        same_on_both_engines(
            &format!("random {dynos}x{slots}"),
            150.0 * dynos as f64 * slots as f64 / 75.0,
            quantiles(),
            (dynos, slots),
            json!({"policy": "random"}),
        );
    }
}

/// Fleets of 4096 dynos or more run the event-driven engine's large-fleet paths: the
/// read-ahead, far events kept in buckets by time window, and (with a router timeout) the
/// deadlines' event moving in and out of them. power_of_d's routes depend on the order of
/// completions across dynos, which random routing's do not.
#[test]
fn a_large_fleet_is_the_same_on_both_engines() {
    let exp = json!({"distribution": "exponential", "mean": "100ms"});
    for (policy, timeout, load) in [
        ("power_of_d", "off", 0.9),
        ("random", "off", 0.8),
        ("random", "300ms", 0.95),
    ] {
        let json = scenario_json(
            5000.0 * load / 0.1,
            exp.clone(),
            5000,
            1,
            json!({"policy": policy, "timeout": timeout}),
            (4.0, 1.0, 2, 5),
        );
        same_figures(&format!("5000 dynos, {policy}, timeout {timeout}"), &json);
    }
}

#[test]
fn several_routers_at_random_are_the_same_on_both_engines() {
    same_on_both_engines(
        "random, 5 routers",
        20.0,
        json!({"distribution": "exponential", "mean": "400ms"}),
        (10, 1),
        json!({"policy": "random", "routers": 5}),
    );
    same_on_both_engines(
        "round_robin, 3 routers, 2 slots",
        40.0,
        json!({"distribution": "lognormal", "median": "150ms", "sigma": 1.2}),
        (10, 2),
        json!({"policy": "round_robin", "routers": 3}),
    );
}

#[test]
fn load_aware_policies_are_the_same_on_both_engines() {
    let weibull = json!({"distribution": "weibull", "shape": 0.46, "median": "50ms",
                         "round_up": "1ms", "clip": ["10ms", "30s"]});
    for (label, router) in [
        ("power_of_d d=2", json!({"policy": "power_of_d", "d": 2})),
        ("power_of_d d=3", json!({"policy": "power_of_d", "d": 3})),
        (
            "power_of_d d=2, draws that may repeat",
            json!({"policy": "power_of_d", "d": 2, "distinct": false}),
        ),
        (
            "retry_if_busy",
            json!({"policy": "retry_if_busy", "tries": 2}),
        ),
        (
            "retry_if_busy tries=4",
            json!({"policy": "retry_if_busy", "tries": 4}),
        ),
        ("least_request", json!({"policy": "least_request"})),
        (
            "least_request, EDF with bias 1",
            json!({"policy": "least_request", "active_request_bias": 1.0}),
        ),
    ] {
        same_on_both_engines(label, 140.0, quantiles(), (75, 1), router.clone());
        same_on_both_engines(
            &format!("{label}, 3 slots, Weibull"),
            190.0,
            weibull.clone(),
            (20, 3),
            router,
        );
    }
}

#[test]
fn intelligent_routing_is_the_same_on_both_engines() {
    same_on_both_engines(
        "intelligent 75x1",
        240.0,
        quantiles(),
        (75, 1),
        json!({"policy": "intelligent"}),
    );
    same_on_both_engines(
        "intelligent 8x1, constant service",
        75.0,
        json!({"distribution": "constant", "value": "100ms"}),
        (8, 1),
        json!({"policy": "intelligent"}),
    );
}

#[test]
fn the_direct_engine_refuses_what_it_cannot_run() {
    for (label, slots, router) in [
        (
            "least_connections",
            1,
            json!({"policy": "least_connections"}),
        ),
        ("intelligent, 2 slots", 2, json!({"policy": "intelligent"})),
        (
            "intelligent, 2 routers",
            1,
            json!({"policy": "intelligent", "routers": 2}),
        ),
        (
            "power_of_d, 2 routers",
            1,
            json!({"policy": "power_of_d", "routers": 2}),
        ),
        ("first", 1, json!({"policy": "first"})),
    ] {
        let json = scenario_json(5.0, quantiles(), 4, slots, router, (10.0, 0.0, 1, 1));
        let scenario = build(&json);
        assert!(!can_run(&scenario), "{label}");
        match run_replication_on(Engine::Direct, &scenario, 0, &never_interrupted) {
            Err(Error::Config { path, .. }) => assert_eq!(path, "run.engine", "{label}"),
            other => panic!("{label}: expected a refusal, got {other:?}"),
        }
        // Auto falls back to the event-driven engine.
        run_replication_on(Engine::Auto, &scenario, 0, &never_interrupted).unwrap();
    }
}

#[test]
fn the_memory_guard_stops_both_engines_at_the_same_arrival() {
    // Offered load 0.95 with a guard of 20 waiting requests: the guard trips early.
    for router in [
        json!({"policy": "random"}),
        json!({"policy": "power_of_d"}),
        json!({"policy": "intelligent"}),
    ] {
        let mut doc: Value = serde_json::from_str(&scenario_json(
            95.0,
            json!({"distribution": "exponential", "mean": "100ms"}),
            10,
            1,
            router.clone(),
            (3600.0, 0.0, 1, 5),
        ))
        .unwrap();
        doc["run"]["max_waiting"] = json!(20);
        let scenario = build(&doc.to_string());
        let stop = |engine| run_replication_on(engine, &scenario, 0, &never_interrupted);
        match (stop(Engine::Direct), stop(Engine::Events)) {
            (
                Err(Error::Overloaded {
                    queued: q1,
                    at_time: t1,
                }),
                Err(Error::Overloaded {
                    queued: q2,
                    at_time: t2,
                }),
            ) => assert_eq!((q1, t1), (q2, t2), "{router}"),
            other => panic!("{router}: expected both to stop, got {other:?}"),
        }
    }
}

/// Time-varying and bursty arrivals change nothing in how the engines place requests: a rate
/// schedule with a peak above capacity, a sine, batches, an on/off source, and bursts on top
/// give the same figures on both.
#[test]
fn varying_and_bursty_arrivals_are_the_same_on_both_engines() {
    let with = |arrivals: Value| {
        json!({
            "name": "traffic",
            "arrivals": arrivals,
            "service": {"distribution": "exponential", "mean": "100ms"},
            "fleet": {"dynos": 8, "slots": 2},
            "router": {"policy": "random"},
            "run": {"duration": 600, "warmup": 60, "replications": 3, "seed": 99},
        })
        .to_string()
    };
    same_figures(
        "schedule",
        &with(json!({"process": "poisson", "rate": [
            ["0s", "60/s"], ["2min", "120/s"], ["3min", "200/s"], ["3min", "60/s"],
            ["8min", "100/s"]],
            "burst": [{"at": "5min", "clients": 300, "requests": 2,
                       "jitter": {"distribution": "exponential", "mean": "3s"}},
                      {"at": "1min", "clients": 20, "every": "2min"}]})),
    );
    same_figures(
        "sine",
        &with(json!({"process": "poisson",
                     "rate": {"mean": "100/s", "amplitude": "60/s", "period": "5min"}})),
    );
    same_figures(
        "batch",
        &with(json!({"process": "batch", "rate": "30/s",
                     "size": {"distribution": "geometric", "mean": 3}})),
    );
    same_figures(
        "on_off",
        &with(json!({"process": "on_off", "rate": "200/s", "on": "5s", "off": "5s"})),
    );
}

/// Timeouts under policies that know nothing of the dynos are worked out per request by the
/// direct engine (the dyno works on; the router's counts are not looked at): every figure,
/// the errors and the wasted work included, as the event-driven engine finds them. Policies
/// that look at the dynos fall back to the event-driven engine when a timeout fires.
#[test]
fn timeouts_under_blind_policies_are_the_same_on_both_engines() {
    let client = json!({"distribution": "exponential", "mean": "4s"});
    for (label, router, fleet, rate) in [
        (
            "random, router timeout 2s",
            json!({"policy": "random", "timeout": "2s"}),
            (75, 1),
            140.0,
        ),
        (
            "round_robin, 3 slots, drawn router timeout",
            json!({"policy": "round_robin",
                   "timeout": {"distribution": "lognormal", "median": "1500ms", "sigma": 0.5}}),
            (12, 3),
            60.0,
        ),
    ] {
        let (dynos, slots) = fleet;
        let mut doc: Value = serde_json::from_str(&common::scenario_json(
            rate,
            quantiles(),
            dynos,
            slots,
            router,
            (600.0, 60.0, 3, 7),
        ))
        .unwrap();
        doc["arrivals"]["timeout"] = client.clone();
        let json = doc.to_string();
        same_figures(label, &json);
        let scenario = build(&json);
        let r = run_replication_on(Engine::Direct, &scenario, 0, &never_interrupted).unwrap();
        assert!(r.error_counts.h12 > 100, "{label}: {:?}", r.error_counts);
        assert!(
            r.error_counts.client_timeout > 100,
            "{label}: {:?}",
            r.error_counts
        );
        assert!(r.wasted.thread_seconds > 0.0);
    }
    // A load-aware policy: a timeout that fires sends the replication to the other engine.
    let json = common::scenario_json(
        140.0,
        quantiles(),
        75,
        1,
        json!({"policy": "power_of_d", "timeout": "2s"}),
        (600.0, 60.0, 1, 7),
    );
    let scenario = build(&json);
    assert!(
        dynosim_engine::direct::try_run_replication(&scenario, 0, &never_interrupted)
            .unwrap()
            .is_none()
    );
    assert!(run_replication_on(Engine::Direct, &scenario, 0, &never_interrupted).is_err());
    let auto = run_replication_on(Engine::Auto, &scenario, 0, &never_interrupted).unwrap();
    let events = run_replication_on(Engine::Events, &scenario, 0, &never_interrupted).unwrap();
    assert_eq!(auto.engine, "events");
    assert_eq!(figures(&auto), figures(&events));
}

/// A replayed trace (`arrivals.process = "replay"`): 20,000 requests with their own service
/// times, bursty (gaps from a two-rate mix) and heavy-tailed (a few 30 s requests, as H12s
/// log), through random, power-of-two, retry-if-busy and intelligent routing, with bursts of
/// equal arrival times. Both engines take each request's time from the trace.
#[test]
fn replayed_traces_are_the_same_on_both_engines() {
    let dir = std::env::temp_dir().join(format!("dynosim-engines-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.csv");
    // A fixed linear congruential sequence: the same trace on every run.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut uniform = || {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let mut text = String::from("arrival,service\n");
    let mut t = 0.0;
    for i in 0..20_000 {
        // Every 50th request arrives with the one before it.
        if i % 50 != 0 {
            let rate = if (t as u64 / 20) % 2 == 0 {
                40.0
            } else {
                120.0
            };
            t += -uniform().ln() / rate;
        }
        let service = if uniform() < 0.002 {
            30.0
        } else {
            (0.12 * (-uniform().ln())).max(0.001)
        };
        text += &format!("{t},{service}\n");
    }
    std::fs::write(&path, text).unwrap();
    for policy in [
        json!({"policy": "random"}),
        json!({"policy": "power_of_d", "d": 2}),
        json!({"policy": "retry_if_busy"}),
        json!({"policy": "intelligent"}),
    ] {
        let mut router = policy.clone();
        router["timeout"] = json!("off");
        let json = json!({
            "name": "replay",
            "arrivals": {"process": "replay", "file": path.to_str().unwrap()},
            "fleet": {"dynos": 12},
            "router": router,
            "run": {"duration": t + 1.0, "warmup": 0, "replications": 3, "seed": 5,
                    "allow_overload": true},
        })
        .to_string();
        same_figures(&format!("replay, {policy}"), &json);
        let r = run_replication_on(Engine::Events, &build(&json), 0, &never_interrupted).unwrap();
        assert_eq!(r.requests, 20_000, "{policy}: every request of the trace");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plain scenario (one `[service]` hold, no timeout but the router's, no option of the
/// router's or the app's on the request's path) runs on a loop that compiles out the checks
/// the general loop makes per request (`sim/features.rs`). Made to take the general loop by a
/// client timeout that never fires (its draws come from a stream of their own), it must report
/// the very same figures, every one of them equal, with the router's timeout off and with one
/// that fires (H12): a check compiled out that mattered, or a draw taken out of turn, changes
/// some figure outright.
#[test]
fn the_plain_loop_reports_what_the_general_loop_does() {
    for router_timeout in ["off", "2s"] {
        for policy in [
            json!({"policy": "random"}),
            json!({"policy": "intelligent"}),
            json!({"policy": "power_of_d", "d": 2}),
            json!({"policy": "least_connections"}),
        ] {
            let mut router = policy.clone();
            router["timeout"] = json!(router_timeout);
            let label = format!("{}, router.timeout {router_timeout}", policy["policy"]);
            let json = scenario_json(60.0, quantiles(), 12, 2, router, (300.0, 30.0, 2, 7));
            let plain = build(&json);
            let mut general: Value = serde_json::from_str(&json).unwrap();
            general["arrivals"]["timeout"] = json!("100000h");
            let general = build(&general.to_string());
            assert!(dynosim_engine::sim::plain_loop(&plain), "{label}: plain");
            assert!(
                !dynosim_engine::sim::plain_loop(&general),
                "{label}: general"
            );
            for replication in 0..2 {
                let run = |s| {
                    let r = run_replication_on(Engine::Events, s, replication, &never_interrupted);
                    figures(&r.unwrap())
                };
                let (a, b) = (run(&plain), run(&general));
                assert_eq!(a.len(), b.len(), "{label}");
                let (mut queued, mut h12) = (0.0, 0.0);
                for ((key, x), (_, y)) in a.iter().zip(&b) {
                    if !key.contains("wall") {
                        assert_eq!(x, y, "{label}, replication {replication}: {key}");
                    }
                    if key == ".queued_fraction" {
                        queued = *x;
                    }
                    if key == ".errors.h12" {
                        h12 = *x;
                    }
                }
                // The queues (the dynos' or the router's) were exercised, and the router's
                // timeout fired where it was set.
                assert!(queued > 0.05, "{label}: queued {queued}");
                assert_eq!(h12 > 0.0, router_timeout != "off", "{label}: {h12} H12s");
            }
        }
    }
}
