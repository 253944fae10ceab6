//! The fleet's lifecycle and the autoscaler in the engine (issue #24): hand-computed cases of
//! a scale-down (what its grace loses, what races it), of a scheduled step up (when the new
//! dyno serves, what the fleet costs), and the HPA's steady state against its formula.

mod common;

use common::build;
use dynosim_engine::{never_interrupted, run_replication, ReplicationResult, Scenario};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A directory of its own for a test's files, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("dynosim-lifecycle-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn from_json(doc: &Value, dir: &std::path::Path) -> Scenario {
    Scenario::from_json(&doc.to_string(), dir, &never_interrupted)
        .unwrap_or_else(|e| panic!("{e}: {doc}"))
}

fn once(s: &Scenario, replication: u64) -> ReplicationResult {
    run_replication(s, replication, &never_interrupted).expect("runs")
}

/// Two dynos, one slot each, round robin; a schedule scales to one dyno at t = 100 s: the
/// dyno started last (slot 1) is marked down at 100, gets its SIGTERM at 101 (`stop_delay`)
/// and its SIGKILL `grace` later. The requests (arrival, service), routed by round robin
/// (from a random first dyno, then alternating, so each pair puts one request on each dyno):
/// - 90 s and 95 s, 20 s each, with a 2 s connect: each dyno is busy from 92 s until 112 s,
///   or from 97 s until 117 s;
/// - 98.4 s and 98.5 s: with a 2 s connect they reach their dynos at 100.4 and 100.5, before
///   the SIGTERM, and wait in the backlogs: the one at slot 1 is still there at 101 (its
///   thread is busy), and fails when the server closes its listener (H13);
/// - 99.4 s and 99.5 s: routed before the mark-down, they reach their dynos after the
///   SIGTERM: the one sent to slot 1 raced it (H13).
///
/// With a grace of 30 s, slot 1's long request (ending at 112 or 117) finishes; with 5 s,
/// SIGKILL comes at 106 and fails it (errors.shutdown). Whichever dyno the first request
/// went to, the counts are the same.
#[test]
fn a_scale_down_loses_exactly_what_its_grace_and_the_race_leave() {
    let dir = TempDir::new("grace");
    let trace = "90,20\n95,20\n98.4,0.5\n98.5,0.5\n99.4,0.5\n99.5,0.5\n150,0.1\n";
    std::fs::write(dir.0.join("trace.csv"), trace).unwrap();
    for (grace, shutdown, exit) in [(30.0, 0, None), (5.0, 1, Some(106.0))] {
        let doc = json!({
            "arrivals": {"process": "replay", "file": "trace.csv"},
            "fleet": {"dynos": 2, "boot_time": "10s", "shutdown_grace": grace},
            "router": {"policy": "round_robin", "connect": "2s", "timeout": "off"},
            "autoscale": {"rule": "schedule", "max": 2, "interval": "10s",
                          "schedule": [["0s", 2], ["100s", 1]]},
            "run": {"duration": "200s", "warmup": "0s", "replications": 4},
        });
        let s = from_json(&doc, &dir.0);
        for rep in 0..4 {
            let r = once(&s, rep);
            let label = format!("grace {grace} s, replication {rep}");
            assert_eq!(r.error_counts.shutdown, shutdown, "{label}: shutdown");
            assert_eq!(r.error_counts.h13, 2, "{label}: h13 (backlog + race)");
            assert_eq!(r.error_counts.total, shutdown + 2, "{label}: total");
            assert_eq!(r.requests, 7, "{label}");
            let fleet = r.fleet.as_ref().expect("fleet figures");
            // Slot 0 runs the whole 200 s; slot 1 from 0 to its exit: the SIGKILL at 106, or
            // the end of its last request (112 or 117) within the grace.
            let slot1 = fleet.dyno_seconds - 200.0;
            match exit {
                Some(t) => assert!((slot1 - t).abs() < 1e-9, "{label}: exit at {slot1}"),
                None => assert!(
                    (slot1 - 112.0).abs() < 1e-9 || (slot1 - 117.0).abs() < 1e-9,
                    "{label}: exit at {slot1}"
                ),
            }
            assert_eq!((fleet.size.min, fleet.size.max), (1.0, 2.0), "{label}");
            let a = r.autoscale.as_ref().expect("autoscale figures");
            assert_eq!((a.actions, a.reversals), (1, 0), "{label}");
        }
    }
}

/// A schedule from 2 to 5 dynos at 600 s, back to 3 at 1200 s, evaluated every 60 s, with a
/// constant 30 s boot and a light load of 10 ms requests. The new dynos serve exactly one
/// evaluation (at 600 s, when the schedule changes) plus one boot later, at 630 s; the
/// scale-down at 1200 s marks two dynos down, and they exit at their SIGTERM at 1201 s unless
/// a request is still on them (10 ms at most). So the fleet serves 2 dynos over [0, 630),
/// 5 over [630, 1200), 3 after (those stopping serve until they exit), and is billed for
/// 2 over [0, 600), 5 over [600, 1201) and 3 to 1800, give or take the 10 ms.
#[test]
fn a_scheduled_step_serves_a_boot_after_its_evaluation_and_bills_the_fleet_s_integral() {
    let doc = json!({
        "arrivals": {"process": "poisson", "rate": 2.0},
        "service": {"distribution": "constant", "value": "10ms"},
        "fleet": {"dynos": 2, "boot_time": "30s"},
        "autoscale": {"rule": "schedule", "max": 5, "interval": "60s",
                      "schedule": [["0s", 2], ["600s", 5], ["1200s", 3]]},
        "run": {"duration": "1800s", "warmup": "0s", "replications": 3},
    });
    let s = build(&doc.to_string());
    for rep in 0..3 {
        let r = once(&s, rep);
        let f = r.fleet.as_ref().expect("fleet figures");
        let billed = 2.0 * 600.0 + 5.0 * 601.0 + 3.0 * 599.0;
        let serving = 2.0 * 630.0 + 5.0 * 570.0 + 2.0 * 1.0 + 3.0 * 600.0;
        // Each of the two stopping dynos may hold one 10 ms request at its SIGTERM.
        let slack = 2.0 * 0.010;
        assert!(
            f.dyno_seconds >= billed - 1e-9 && f.dyno_seconds <= billed + slack,
            "replication {rep}: dyno_seconds {} against {billed}",
            f.dyno_seconds
        );
        let serving_seconds = f.serving_mean * 1800.0;
        assert!(
            serving_seconds >= serving - 1e-6 && serving_seconds <= serving + slack,
            "replication {rep}: serving {serving_seconds} against {serving}"
        );
        assert!((f.size.mean * 1800.0 - f.dyno_seconds).abs() < 1e-6);
        assert_eq!((f.size.min, f.size.max), (2.0, 5.0));
        assert_eq!(f.starts, 3);
        let a = r.autoscale.as_ref().expect("autoscale figures");
        assert_eq!((a.actions, a.reversals), (2, 0));
        assert_eq!(r.error_counts.total, 0, "replication {rep}");
    }
}

/// The HPA on utilisation at a constant rate settles where the ratio of the metric to its
/// target is within the tolerance: with λ·E[S] = 10 busy threads and a target of 0.5, any n
/// with |10 / (0.5 n) − 1| ≤ 0.1, i.e. 18.2 ≤ n ≤ 22.2, holds; starting from 4 dynos, it
/// climbs (by ceil(n × u / target) while the metric is above the band) and settles in
/// {19, ..., 22}. After a 30-minute warm-up, every evaluation's fleet lies in the band.
#[test]
fn an_hpa_on_utilisation_settles_in_its_tolerance_band_around_load_over_target() {
    let (rate, mean, target, tolerance): (f64, f64, f64, f64) = (100.0, 0.1, 0.5, 0.1);
    let doc = json!({
        "arrivals": {"process": "poisson", "rate": rate},
        "service": {"distribution": "exponential", "mean": mean},
        "fleet": {"dynos": 4, "boot_time": "30s"},
        "router": {"timeout": "off"},
        "autoscale": {"rule": "hpa", "metric": "utilisation", "target": target, "max": 40},
        "run": {"duration": "2h", "warmup": "30min", "replications": 4},
    });
    let s = build(&doc.to_string());
    let busy = rate * mean;
    let low = (busy / (target * (1.0 + tolerance))).ceil();
    let high = (busy / (target * (1.0 - tolerance))).floor();
    assert_eq!((low, high), (19.0, 22.0));
    let landing = (busy / target).ceil();
    for rep in 0..4 {
        let r = once(&s, rep);
        let f = r.fleet.as_ref().expect("fleet figures");
        assert!(
            f.size.min >= low && f.size.max <= high,
            "replication {rep}: fleet between {} and {} dynos, outside [{low}, {high}]",
            f.size.min,
            f.size.max
        );
        assert!(f.size.mean >= landing - 1.0 && f.size.mean <= high);
        // Settled: no scale event after the warm-up, or only within the band.
        let a = r.autoscale.as_ref().expect("autoscale figures");
        assert_eq!(a.reversals, 0, "replication {rep}");
    }
}

/// A deploy at 100 s over three dynos, boots of a constant 20 s, a request every second
/// (0.1 s each). Without preboot every dyno is marked down at 100 s and new ones boot until
/// 120 s: the 20 requests arriving in [100, 120) find no dyno up; the old dynos, idle, exit at
/// their SIGTERM (101 s): 3 x 101 + 3 x 100 dyno-seconds. With preboot the new dynos boot
/// beside the old ones, take the traffic at 120 s, and the old ones exit at 121 s: no error,
/// 3 x 121 + 3 x 100 dyno-seconds.
#[test]
fn a_deploy_without_preboot_drops_a_boot_of_traffic_and_with_it_drops_none() {
    let dir = TempDir::new("deploy");
    let trace: String = (0..200).map(|t| format!("{t},0.1\n")).collect();
    std::fs::write(dir.0.join("trace.csv"), trace).unwrap();
    for (preboot, no_dyno, billed) in [(false, 20, 603.0), (true, 0, 663.0)] {
        let doc = json!({
            "arrivals": {"process": "replay", "file": "trace.csv"},
            "fleet": {"dynos": 3, "boot_time": "20s",
                      "deploy": [{"at": "100s", "preboot": preboot}]},
            "run": {"duration": "200s", "warmup": "0s", "replications": 2},
        });
        let s = from_json(&doc, &dir.0);
        for rep in 0..2 {
            let r = once(&s, rep);
            let label = format!("preboot {preboot}, replication {rep}");
            assert_eq!(r.error_counts.no_dyno, no_dyno, "{label}");
            assert_eq!(r.error_counts.total, no_dyno, "{label}");
            let f = r.fleet.as_ref().expect("fleet figures");
            assert!(
                (f.dyno_seconds - billed).abs() < 1e-9,
                "{label}: {}",
                f.dyno_seconds
            );
            assert_eq!((f.deploys, f.starts, f.cycles), (1, 3, 0), "{label}");
            assert!(
                r.autoscale.is_none(),
                "{label}: no autoscaler, no autoscale figures"
            );
        }
    }
}

/// Daily restarts with a period of 1 h, a constant 50 s boot and Heroku's offset of up to
/// 216 min: each dyno is replaced every 50 s + 1 h + U(0, 216 min), 168.8 min on average, its
/// first restart drawn as a stationary renewal process's. Over 10 h, 8 dynos restart
/// 8 x 600 / 168.8 = 28.4 times on average, the estimate's tolerance from 20 replications.
#[test]
fn daily_restarts_come_once_a_cycle_on_average() {
    let doc = json!({
        "arrivals": {"process": "poisson", "rate": 1.0},
        "service": {"distribution": "constant", "value": "10ms"},
        "fleet": {"dynos": 8, "boot_time": "50s", "cycling": "1h"},
        "run": {"duration": "10h", "warmup": "0s", "replications": 20, "seed": 7},
    });
    let s = build(&doc.to_string());
    let report = common::run_ok(&s);
    let cycle = 50.0 + 3600.0 + 216.0 * 60.0 / 2.0;
    let expected = 8.0 * 36_000.0 / cycle;
    common::assert_matches(
        "fleet.cycles over 10 h",
        common::Measured::over_replications(&report, |r| r.fleet.as_ref().unwrap().cycles as f64),
        expected,
        0.25,
    );
    // While a dyno boots its replacement, the fleet runs one more (the old one stops
    // within its stop delay), and serves one fewer only during no boot: the new one starts
    // when the old is marked down.
    for r in &report.per_replication {
        let f = r.fleet.as_ref().unwrap();
        assert!(f.size.min >= 8.0 && f.size.max >= 9.0, "{:?}", f.size);
        assert_eq!(r.error_counts.total, 0);
    }
}

/// A metric-driven step up: the HPA on utilisation reads 15 s windows shown 15 s late, every
/// 15 s. The rate steps from 5/s to 50/s at 300 s (on an evaluation): the window [300, 315)
/// is the first to see the load, it is visible from 330 s, so the evaluation at 330 s is the
/// first to scale up (two dynos saturated: ceil(2 x 1 / 0.5) = 4), and the new dynos, booting
/// a constant 20 s, are first up at 350 s: the step plus the window, the delay and the boot.
#[test]
fn a_metric_step_is_served_a_window_a_delay_and_a_boot_later() {
    let doc = json!({
        "arrivals": {"process": "poisson",
                     "rate": [["0s", "5/s"], ["300s", "5/s"], ["300s", "50/s"], ["600s", "50/s"]]},
        "service": {"distribution": "exponential", "mean": "100ms"},
        "fleet": {"dynos": 2, "boot_time": "20s"},
        "router": {"timeout": "off"},
        "autoscale": {"rule": "hpa", "metric": "utilisation", "target": 0.5, "min": 2, "max": 20},
        "run": {"duration": "600s", "warmup": "0s", "replications": 3, "allow_overload": true},
    });
    let s = build(&doc.to_string());
    for rep in 0..3 {
        let (_, trace) =
            dynosim_engine::trace_replication(&s, rep, 0.5, 400.0, false, &never_interrupted)
                .expect("runs");
        let at = |t: f64| {
            trace
                .frames
                .iter()
                .find(|f| (f.time - t).abs() < 1e-9)
                .unwrap_or_else(|| panic!("a frame at {t}"))
        };
        for f in trace.frames.iter().filter(|f| f.time < 330.0) {
            assert_eq!(
                (f.dynos_up, f.dynos_booting),
                (2, 0),
                "replication {rep} at {}",
                f.time
            );
        }
        assert_eq!(
            (at(330.0).dynos_up, at(330.0).dynos_booting),
            (2, 2),
            "replication {rep}"
        );
        assert_eq!(at(349.5).dynos_up, 2, "replication {rep}");
        assert_eq!(at(350.0).dynos_up, 4, "replication {rep}");
    }
}
