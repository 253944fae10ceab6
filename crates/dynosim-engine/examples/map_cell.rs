//! One cell of a metastability map, for profilers: replication N of a scenario's JSON (the
//! document `Scenario.to_json()` gives, e.g. issue 35's map's retry-storm at 1,000 req/s),
//! stopped at its stability verdict as `dynosim stability`'s table runs it, or whole:
//! `cargo run --release -p dynosim-engine --example map_cell -- cell.json [N] [whole]`.
//! Prints the requests and tries simulated, the time a try and the verdict.
use dynosim_engine::{never_interrupted, run_replication_on, Engine, Scenario};
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: map_cell SCENARIO.json [REPLICATION] [whole]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("map_cell: {path}: {e}");
        std::process::exit(2);
    });
    let rep: u64 = args.get(2).and_then(|m| m.parse().ok()).unwrap_or(0);
    let whole = args.get(3).map(String::as_str) == Some("whole");
    let mut s =
        Scenario::from_json(&text, Path::new("."), &never_interrupted).unwrap_or_else(|e| {
            eprintln!("map_cell: {path}: {e}");
            std::process::exit(2);
        });
    if !whole {
        s.stop_at_verdict();
    }
    let t = std::time::Instant::now();
    let r = run_replication_on(Engine::Events, &s, rep, &never_interrupted).unwrap_or_else(|e| {
        eprintln!("map_cell: {e}");
        std::process::exit(1);
    });
    let secs = t.elapsed().as_secs_f64();
    let tries = r
        .retries
        .as_ref()
        .map_or(r.simulated_requests, |x| x.attempts);
    println!(
        "{secs:.3} s: {} requests, {tries} tries ({:.3} us a try); {:?}",
        r.simulated_requests,
        secs / tries.max(1) as f64 * 1e6,
        r.stability
    );
}
