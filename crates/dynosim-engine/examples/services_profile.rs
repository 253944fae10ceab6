//! Issue 37's three tiers (bench/services_speed.py's scenario), for profilers:
//! `cargo run --release -p dynosim-engine --example services_profile -- [plain|p95|20ms] SECONDS`.
//! web (the entry: 10,000 req/s Poisson, 100 dynos × 20 slots, cpu exp 5 ms, then a call to
//! api) → api (50 × 20, io exp 2 ms, then a fan-out of 10 to search, waiting for all) →
//! search (1,000 × 2, exponential service of 10 ms); random routing. The first argument hedges
//! the fan-out (`plain`: no hedge). Prints the requests of the three fleets and their rate.
use dynosim_engine::{never_interrupted, run_replication_on, Engine, Scenario};
use serde_json::json;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let hedge = args.get(1).map(String::as_str).unwrap_or("plain");
    let seconds: f64 = args.get(2).and_then(|m| m.parse().ok()).unwrap_or(2.0);
    let exp = |mean: f64| json!({"distribution": "exponential", "mean": mean});
    let mut fanout = json!({"fanout": "search", "count": 10, "wait": "all"});
    if hedge != "plain" {
        fanout["hedge"] = json!(hedge);
    }
    let doc = json!({
        "name": "three-tier-fanout",
        "arrivals": {"process": "poisson", "rate": 10_000.0},
        "fleet": {"dynos": 100, "slots": 20},
        "request": {"phases": [{"cpu": exp(0.005)}, {"call": "api"}]},
        "services": {
            "api": {"fleet": {"dynos": 50, "slots": 20},
                    "request": {"phases": [{"io": exp(0.002)}, fanout]}},
            "search": {"fleet": {"dynos": 1000, "slots": 2}, "service": exp(0.010)},
        },
        "run": {"duration": seconds, "warmup": 1.0, "replications": 1, "seed": 1,
                "engine": "events"},
    });
    let s = Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted).unwrap();
    let t = std::time::Instant::now();
    let r = run_replication_on(Engine::Events, &s, 0, &never_interrupted).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let services: u64 = r
        .services
        .as_ref()
        .map_or(0, |m| m.values().map(|f| f.fleet.simulated_requests).sum());
    let all = r.simulated_requests + services;
    println!(
        "{hedge}: {all} requests ({} at the entry) in {secs:.3} s = {:.2} M req/s, {:.1}x real time; web mean {:.4} s",
        r.simulated_requests,
        all as f64 / secs / 1e6,
        (seconds + 1.0) / secs,
        r.response.mean
    );
}
