use dynosim_engine::{never_interrupted, run, Scenario};
use std::path::Path;
fn main() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/dynosim/scenarios/rapgenius.toml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut doc: serde_json::Value = toml::from_str(&text).unwrap();
    for policy in [
        "random",
        "intelligent",
        "power_of_d",
        "least_connections",
        "round_robin",
        "retry_if_busy",
    ] {
        doc["router"]["policy"] = policy.into();
        let s = Scenario::from_json(&doc.to_string(), Path::new(".")).unwrap();
        let r = run(&s, &never_interrupted).unwrap();
        let q = &r.summary;
        println!("{policy:18} rho={:.3} Smean={:.4} queued={:.4}±{:.4} mean={:.4} meanq={:.4} medq={:.4} util={:.3} wall={:.2}s reqs={}",
          r.offered_load, r.service_mean, q["queued_fraction"]["mean"], q["queued_fraction"]["std_error"],
          q["queue"]["mean"]["mean"], q["queue_of_queued"]["mean"]["mean"], q["queue_of_queued"]["p50"]["mean"],
          q["utilisation"]["mean"]["mean"], r.wall_seconds, r.per_replication.iter().map(|x| x.simulated_requests).sum::<u64>());
    }
}
