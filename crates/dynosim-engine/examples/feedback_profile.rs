//! The feedback benchmark's two runs (bench/feedback.py, "retries per simulated try"), for
//! profilers: `cargo run --release -p dynosim-engine --example feedback_profile -- retries 20`
//! (or `plain`): 4 dynos of exponential 3 ms, clients giving up after 50 ms; with retries, 800
//! users a second trying 3 times each, tipped over by a slowdown at 1.5 s; plain, 2,400 a
//! second trying once. Prints the tries simulated and their rate.
use dynosim_engine::{never_interrupted, run_replication_on, Engine, Scenario};
use serde_json::json;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let retries = args.get(1).map(String::as_str) != Some("plain");
    let seconds: f64 = args.get(2).and_then(|m| m.parse().ok()).unwrap_or(20.0);
    let mut doc = json!({
        "name": "feedback-profile",
        "arrivals": {"process": "poisson", "rate": if retries { 800.0 } else { 2400.0 }, "timeout": 0.05},
        "service": {"distribution": "exponential", "mean": 0.003},
        "fleet": {"dynos": 4},
        "router": {"timeout": "off"},
        "run": {"duration": seconds, "warmup": 1.0, "replications": 1, "seed": 3,
                "allow_overload": true, "threads": 1, "engine": "events"},
    });
    if retries {
        doc["arrivals"]["retry"] =
            json!({"attempts": 3, "backoff": "constant", "base": 0, "jitter": "none"});
        doc["faults"] = json!([{"at": 1.5, "for": 1.0, "kind": "slowdown", "factor": 3}]);
    }
    let s = Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted).unwrap();
    let t = std::time::Instant::now();
    let r = run_replication_on(Engine::Events, &s, 0, &never_interrupted).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let tries = r
        .retries
        .as_ref()
        .map_or(r.simulated_requests, |x| x.attempts);
    println!(
        "{}: {tries} tries ({} requests) in {secs:.3} s = {:.2} M tries/s",
        if retries { "retries" } else { "plain" },
        r.simulated_requests,
        tries as f64 / secs / 1e6
    );
}
