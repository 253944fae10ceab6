//! Simulated requests per second on the seed-study scenario (the built-in `rapgenius`, read
//! from the Python package's scenario file), one replication on one core, per policy.
//!
//! `cargo bench -p dynosim-engine --bench engine`; criterion reports "thrpt" in
//! elements (simulated requests) per second. `rapgenius/<policy>` is what a run uses (the
//! direct engine for all three); `events/<policy>` is the event-driven engine on the same
//! scenario, for comparison. `service/quantiles` times the seed's service-time sampler
//! alone, in the engine's blocks of 256. `bench/engine_vs_simpy.py` gives the same figure
//! through the Python package beside a SimPy model of the same system.
//!
//! `events_h12/<policy>_<timeout>` is the event-driven engine on the same scenario with a
//! router timeout (H12): Heroku's 30 s, and 2 s, under which many requests time out.
//!
//! `dyno/two_phase` is issue #10 §9's scenario with the dyno model (the one
//! `bench/dyno_vs_simpy.py` runs beside SimPy): 4000 req/s at random to 20 dynos of 2 cores,
//! 3 processes x 5 threads under a lock; cpu 4 ms, a 10 ms query on 60 FCFS servers, cpu
//! 2 ms (all exponential); 100 simulated seconds, on the event-driven engine.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dynosim_engine::rng::SimRng;
use dynosim_engine::{never_interrupted, run_replication, run_replication_on, Engine, Scenario};
use rand::SeedableRng;
use std::path::Path;

fn scenario_json(policy: &str) -> String {
    scenario_json_with(policy, "off")
}

/// The seed scenario with `router.timeout` set (the built-in file has it off, as the study).
fn scenario_json_with(policy: &str, timeout: &str) -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/dynosim/scenarios/rapgenius.toml"
    );
    let text = std::fs::read_to_string(path).expect("the built-in scenario file");
    let mut doc: serde_json::Value = toml::from_str(&text).expect("valid TOML");
    doc["router"]["policy"] = policy.into();
    doc["router"]["timeout"] = timeout.into();
    doc["run"]["duration"] = "10min".into();
    doc["run"]["warmup"] = 0.into();
    doc.to_string()
}

fn routing_policies(c: &mut Criterion) {
    let mut group = c.benchmark_group("rapgenius");
    group.sample_size(20);
    for policy in ["random", "intelligent", "power_of_d"] {
        let scenario =
            Scenario::from_json(&scenario_json(policy), Path::new("."), &never_interrupted)
                .unwrap();
        let requests = run_replication(&scenario, 0, &never_interrupted)
            .unwrap()
            .simulated_requests;
        group.throughput(Throughput::Elements(requests));
        group.bench_function(policy, |b| {
            b.iter(|| run_replication(&scenario, 0, &never_interrupted).unwrap())
        });
    }
    group.finish();
    let mut group = c.benchmark_group("events");
    group.sample_size(10);
    for policy in ["random", "intelligent", "power_of_d"] {
        let scenario =
            Scenario::from_json(&scenario_json(policy), Path::new("."), &never_interrupted)
                .unwrap();
        let run = || run_replication_on(Engine::Events, &scenario, 0, &never_interrupted);
        group.throughput(Throughput::Elements(run().unwrap().simulated_requests));
        group.bench_function(policy, |b| b.iter(|| run().unwrap()));
    }
    group.finish();
    // Issue #12's speed target: Heroku's 30 s router timeout (H12) on the event-driven
    // engine, and a 2 s one under which many fire.
    let mut group = c.benchmark_group("events_h12");
    group.sample_size(10);
    for (timeout, policy) in [("30s", "random"), ("30s", "intelligent"), ("2s", "random")] {
        let json = scenario_json_with(policy, timeout);
        let scenario = Scenario::from_json(&json, Path::new("."), &never_interrupted).unwrap();
        let run = || run_replication_on(Engine::Events, &scenario, 0, &never_interrupted);
        group.throughput(Throughput::Elements(run().unwrap().simulated_requests));
        group.bench_function(format!("{policy}_{timeout}"), |b| b.iter(|| run().unwrap()));
    }
    group.finish();
}

fn service_sampling(c: &mut Criterion) {
    let scenario =
        Scenario::from_json(&scenario_json("random"), Path::new("."), &never_interrupted).unwrap();
    let mut group = c.benchmark_group("service");
    let mut rng = SimRng::seed_from_u64(1);
    let mut block = [0.0; 256];
    group.throughput(Throughput::Elements(block.len() as u64));
    group.bench_function("quantiles", |b| {
        b.iter(|| {
            scenario.service.sample_into(&mut rng, &mut block);
            block[0]
        })
    });
    group.finish();
}

/// The two-phase cpu + db scenario of `bench/dyno_vs_simpy.py` (keep the two in step).
fn dyno_scenario_json() -> String {
    let exp = |mean: f64| serde_json::json!({"distribution": "exponential", "mean": mean});
    serde_json::json!({
        "arrivals": {"process": "poisson", "rate": 4000.0},
        "request": {"phases": [
            {"cpu": exp(0.004)},
            {"use": "db", "time": exp(0.010)},
            {"cpu": exp(0.002)},
        ]},
        "resources": {"db": {"servers": 60, "discipline": "fcfs"}},
        "fleet": {"dynos": 20, "cores": 2},
        "router": {"policy": "random"},
        "app": {"server": "generic", "model": "threaded", "processes": 3, "threads": 5, "lock": true},
        "run": {"duration": 100.0, "warmup": 0, "replications": 1, "seed": 1},
    })
    .to_string()
}

fn dyno_model(c: &mut Criterion) {
    let scenario =
        Scenario::from_json(&dyno_scenario_json(), Path::new("."), &never_interrupted).unwrap();
    let mut group = c.benchmark_group("dyno");
    group.sample_size(10);
    let requests = run_replication(&scenario, 0, &never_interrupted)
        .unwrap()
        .simulated_requests;
    group.throughput(Throughput::Elements(requests));
    group.bench_function("two_phase", |b| {
        b.iter(|| run_replication(&scenario, 0, &never_interrupted).unwrap())
    });
    group.finish();
}

criterion_group!(benches, routing_policies, service_sampling, dyno_model);
criterion_main!(benches);
