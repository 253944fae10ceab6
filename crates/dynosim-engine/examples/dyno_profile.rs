//! The dyno model's scenarios, for profilers and instruction counts:
//! `cargo run --release -p dynosim-engine --example dyno_profile -- SYSTEM SHARING SECONDS`.
//! SYSTEM `sparse` (issue 36's: Poisson 400/s, random routing to 50 dynos of 8 cores, 3
//! processes x 3 threads under a GIL; cpu exp 20 ms, a pooled query exp 100 ms on 60 servers
//! with 80 connections for the app, cpu exp 5 ms: few threads ever wait for a core or the
//! lock) or `two_phase` (bench/dyno_vs_simpy.py's: 4,000/s to 20 dynos of 2 cores, 3 x 5
//! threads under a GIL; cpu 4 ms, query 10 ms on 60 servers, cpu 2 ms); SHARING `slices` or
//! `ps`. Prints the requests simulated and their rate.
use dynosim_engine::{never_interrupted, run_replication_on, Engine, Scenario};
use serde_json::json;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let system = args.get(1).map(String::as_str).unwrap_or("sparse");
    let sharing = args.get(2).map(String::as_str).unwrap_or("slices");
    let seconds: f64 = args.get(3).and_then(|m| m.parse().ok()).unwrap_or(300.0);
    let exp = |mean: f64| json!({"distribution": "exponential", "mean": mean});
    let (rate, dynos, cores, threads, cpu1, db, cpu2, pool) = match system {
        "two_phase" => (4000.0, 20, 2, 5, 0.004, 0.010, 0.002, None),
        _ => (400.0, 50, 8, 3, 0.020, 0.100, 0.005, Some(80)),
    };
    let mut db_resource = json!({"servers": 60, "discipline": "fcfs"});
    if let Some(size) = pool {
        db_resource["pool"] = json!({"size": size, "per": "app"});
    }
    let doc = json!({
        "name": format!("dyno-profile-{system}"),
        "arrivals": {"process": "poisson", "rate": rate},
        "request": {"phases": [
            {"cpu": exp(cpu1)},
            {"use": "db", "time": exp(db)},
            {"cpu": exp(cpu2)},
        ]},
        "resources": {"db": db_resource},
        "fleet": {"dynos": dynos, "cores": cores, "cpu_sharing": sharing},
        "router": {"policy": "random"},
        "app": {"server": "generic", "model": "threaded", "processes": 3, "threads": threads,
                "lock": true},
        "run": {"duration": seconds, "warmup": 0, "replications": 1, "seed": 1,
                "engine": "events"},
    });
    let s = Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted).unwrap();
    let t = std::time::Instant::now();
    let r = run_replication_on(Engine::Events, &s, 0, &never_interrupted).unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{system} {sharing}: {} requests in {secs:.3} s = {:.2} M req/s",
        r.simulated_requests,
        r.simulated_requests as f64 / secs / 1e6
    );
}
