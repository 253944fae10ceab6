//! Replayed traces (`arrivals.process = "replay"`): each request keeps its own arrival and
//! service time, on both engines, with figures worked out by hand.

use dynosim_engine::{never_interrupted, run_replication_on, Engine, Scenario};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A directory of its own per test, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("dynosim-replay-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scenario(dir: &Path, trace: &str, extra: Value) -> Result<Scenario, String> {
    std::fs::write(dir.join("trace.csv"), trace).expect("trace file");
    let mut doc = json!({
        "name": "replay",
        "arrivals": {"process": "replay", "file": "trace.csv"},
        "fleet": {"dynos": 2},
        "router": {"policy": "intelligent", "timeout": "off"},
        "run": {"duration": 4, "warmup": 0, "replications": 1},
    });
    merge(&mut doc, extra);
    Scenario::from_json(&doc.to_string(), dir, &never_interrupted).map_err(|e| e.to_string())
}

fn merge(doc: &mut Value, extra: Value) {
    if let (Value::Object(d), Value::Object(e)) = (doc, extra) {
        for (k, v) in e {
            match (d.get_mut(&k), v) {
                (Some(inner @ Value::Object(_)), v @ Value::Object(_)) => merge(inner, v),
                (_, v) => {
                    d.insert(k, v);
                }
            }
        }
    }
}

/// Six requests on two single-slot dynos behind the intelligent router (one FIFO queue), in
/// seconds that are exact binary fractions, so that every figure is exact:
///
/// | request | arrives | service | dyno | starts | waits | responds after |
/// |---|---|---|---|---|---|---|
/// | 1 | 0     | 1     | 0 | 0     | 0     | 1     |
/// | 2 | 0.25  | 0.5   | 1 | 0.25  | 0     | 0.5   |
/// | 3 | 0.375 | 0.5   | 1 | 0.75  | 0.375 | 0.875 |
/// | 4 | 0.5   | 0.125 | 0 | 1     | 0.5   | 0.625 |
/// | 5 | 0.625 | 0.25  | 0 | 1.125 | 0.5   | 0.75  |
/// | 6 | 2     | 0.125 | 1 | 2     | 0     | 0.125 |
///
/// Request 3 takes dyno 1, free first (0.75); 4 and 5 take dyno 0 as it frees (1, then
/// 1.125, before dyno 1 at 1.25); 6 finds both idle and takes dyno 1, idle since 1.25, longer
/// than dyno 0 (since 1.375). The router holds 3 requests at 0.625 (3, 4 and 5). Dyno 0 is
/// busy 1 + 0.125 + 0.25 = 1.375 s of the 4 s window, dyno 1 0.5 + 0.5 + 0.125 = 1.125 s.
const HAND_WORKED: &str =
    "arrival,service\n0,1\n0.25,0.5\n0.5,0.125\n0.375,0.5\n0.625,0.25\n2,0.125\n";

#[test]
fn a_replay_through_the_intelligent_router_is_the_hand_worked_case_on_both_engines() {
    let dir = TempDir::new("hand");
    let s = scenario(&dir.0, HAND_WORKED, json!({})).unwrap();
    assert!(dynosim_engine::direct::can_run(&s));
    for engine in [Engine::Direct, Engine::Events] {
        let r = run_replication_on(engine, &s, 0, &never_interrupted).unwrap();
        let what = engine.name();
        assert_eq!(r.requests, 6, "{what}");
        assert_eq!(r.queued_fraction, 0.5, "{what}");
        assert_eq!(r.queue.mean, 1.375 / 6.0, "{what}");
        assert_eq!(r.queue.max, 0.5, "{what}");
        assert_eq!(r.queue_of_queued.mean, 1.375 / 3.0, "{what}");
        assert_eq!(r.queue_of_queued.max, 0.5, "{what}");
        assert_eq!(r.response.mean, 3.875 / 6.0, "{what}");
        assert_eq!(r.response.max, 1.0, "{what}");
        assert_eq!(r.service_mean, 2.5 / 6.0, "{what}");
        assert_eq!(r.max_queue_depth.router, 3, "{what}");
        assert_eq!(r.max_queue_depth.dyno, 0, "{what}");
        assert_eq!(
            r.utilisation.per_dyno,
            vec![1.375 / 4.0, 1.125 / 4.0],
            "{what}"
        );
        assert_eq!(r.simulated_requests, 6, "{what}");
    }
}

/// The same trace at random: every replication replays the same requests, and only the
/// routing stream differs; each request's service time is its own whatever the dyno.
#[test]
fn replications_of_a_replay_differ_only_in_their_routing() {
    let dir = TempDir::new("random");
    let s = scenario(
        &dir.0,
        HAND_WORKED,
        json!({"router": {"policy": "random"}, "run": {"replications": 2}}),
    )
    .unwrap();
    let mut splits = Vec::new();
    for replication in 0..4 {
        let r = run_replication_on(Engine::Events, &s, replication, &never_interrupted).unwrap();
        splits.push(r.utilisation.per_dyno.clone());
        assert_eq!(r.requests, 6);
        assert_eq!(r.service_mean, 2.5 / 6.0);
        // Busy time is the trace's whatever the routing: 2.5 s of the two dynos' 8 s.
        let busy: f64 = r.utilisation.per_dyno.iter().sum::<f64>() * 4.0;
        assert_eq!(busy, 2.5, "replication {replication}");
    }
    splits.dedup();
    assert!(
        splits.len() > 1,
        "the routing differs between replications: {splits:?}"
    );
}

#[test]
fn the_offered_load_and_the_window_come_from_the_trace() {
    let dir = TempDir::new("load");
    let s = scenario(&dir.0, HAND_WORKED, json!({})).unwrap();
    // Six requests over the 2 s from 0 to the last arrival, 2.5 s of work: 3 req/s x 5/12 s / 2.
    assert_eq!(s.arrival_rate(), 3.0);
    assert!((s.service.mean() - 2.5 / 6.0).abs() < 1e-15);
    assert!((s.offered_load() - 0.625).abs() < 1e-15);
    // A window that ends before the last arrival leaves it out.
    let short = scenario(&dir.0, HAND_WORKED, json!({"run": {"duration": 1}})).unwrap();
    let r = run_replication_on(Engine::Direct, &short, 0, &never_interrupted).unwrap();
    assert_eq!(r.requests, 5);
}

#[test]
fn a_trace_with_service_times_refuses_a_service_section_and_bursts() {
    let dir = TempDir::new("refused");
    let with_service = scenario(
        &dir.0,
        HAND_WORKED,
        json!({"service": {"distribution": "constant", "value": "1ms"}}),
    )
    .unwrap_err();
    assert!(with_service.contains("service:"), "{with_service}");
    let bursts = scenario(
        &dir.0,
        HAND_WORKED,
        json!({"arrivals": {"burst": [{"at": "1s", "clients": 2}]}}),
    )
    .unwrap_err();
    assert!(bursts.contains("arrivals.burst"), "{bursts}");
    let bad = scenario(&dir.0, "0,1\n1,x\n", json!({})).unwrap_err();
    assert!(bad.contains("trace.csv:2:"), "{bad}");
    // Arrival times alone: [service] draws each request's time.
    let drawn = scenario(
        &dir.0,
        "0\n0.5\n1\n",
        json!({"service": {"distribution": "constant", "value": "125ms"}}),
    )
    .unwrap();
    let r = run_replication_on(Engine::Direct, &drawn, 0, &never_interrupted).unwrap();
    assert_eq!((r.requests, r.service_mean), (3, 0.125));
    let missing = scenario(&dir.0, "0\n0.5\n1\n", json!({})).unwrap_err();
    assert!(missing.contains("service"), "{missing}");
}
