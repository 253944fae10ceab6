//! The seeds' figures reproduced by the built-in scenarios (python/dynosim/scenarios/), each
//! within the stated margin of the seed's published figure; the scenario files say which
//! parameters come from the seed and which are assumed.

mod common;

use common::{build, run_ok};
use serde_json::Value;

fn builtin(name: &str) -> Value {
    let path = format!(
        "{}/../../python/dynosim/scenarios/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::to_value(doc).expect("TOML is JSON")
}

/// cedar-unicorn-concurrency: throughput of 1..5 Unicorn workers under ab -n 1000 -c 100
/// (requests per second over the whole run, as ab reports it). Each of the first four within
/// 20% of the seed's (a closed loop of 1000 requests: ab's own run-to-run spread), and five
/// workers below a quarter of four's: the collapse.
#[test]
fn unicorn_2011_rises_then_collapses_when_memory_runs_out() {
    let seed = [261.0, 592.0, 834.0, 919.0, 83.0];
    let mut measured = Vec::new();
    for (i, &expected) in seed.iter().enumerate() {
        let mut doc = builtin("unicorn-2011");
        doc["app"]["processes"] = Value::from(i as i64 + 1);
        let report = run_ok(&build(&doc.to_string()));
        let rps: f64 = report
            .per_replication
            .iter()
            .map(|r| r.closed_loop.as_ref().unwrap().requests_per_s)
            .sum::<f64>()
            / report.per_replication.len() as f64;
        println!("{} workers: {rps:.0} req/s (seed {expected})", i + 1);
        measured.push(rps);
        if i < 4 {
            assert!(
                (rps - expected).abs() <= 0.2 * expected,
                "{} workers: {rps:.0} req/s, seed {expected}",
                i + 1
            );
        }
    }
    assert!(
        measured.windows(2).take(3).all(|w| w[1] > w[0]),
        "{measured:?}"
    );
    assert!(measured[4] < 0.25 * measured[3], "{measured:?}");
}
