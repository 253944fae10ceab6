//! One long replication of the seed-study scenario, for profilers:
//! `cargo run --release -p dynosim-engine --example profile -- random 60 [auto|events]
//! [ROUTER_TIMEOUT]`: the scenario's `router.timeout` is off unless given (Heroku's default
//! is "30s").
use dynosim_engine::{never_interrupted, run_replication_on, Engine, Scenario};
use std::path::Path;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let policy = args.get(1).map(String::as_str).unwrap_or("random");
    let minutes: f64 = args.get(2).and_then(|m| m.parse().ok()).unwrap_or(60.0);
    let engine = match args.get(3).map(String::as_str) {
        Some("events") => Engine::Events,
        _ => Engine::Auto,
    };
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/dynosim/scenarios/rapgenius.toml"
    );
    let mut doc: serde_json::Value =
        toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["router"]["policy"] = policy.into();
    doc["run"]["duration"] = (minutes * 60.0).into();
    doc["run"]["warmup"] = 0.into();
    if let Some(timeout) = args.get(4) {
        doc["router"]["timeout"] = timeout.as_str().into();
    }
    let s = Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted).unwrap();
    let t = std::time::Instant::now();
    let r = run_replication_on(engine, &s, 0, &never_interrupted).unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{policy}: {} requests in {secs:.3} s = {:.2} M req/s",
        r.simulated_requests,
        r.simulated_requests as f64 / secs / 1e6
    );
}
