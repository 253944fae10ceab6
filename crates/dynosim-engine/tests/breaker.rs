//! The clients' circuit breaker (`[arrivals.breaker]`, docs/feedback.md) against what its
//! rules make of an outage of known length.
//!
//! The set-up: Poisson users at λ = 100/s on 2 dynos of fast service (10 ms, utilisation
//! 0.5), a breaker of a 20-call window judged when full at 50%, open for 10 s, 5 probes when
//! half-open; the app refuses every request for 25 s from t = 100 s (`outage`, `mode =
//! "refuse"`: answered at once). Its arithmetic: the window fills with failures within a
//! fraction of a second and the breaker opens (1); 10 s later it is half-open, still inside
//! the outage: its 5 probes are refused at once and it opens again (2); 10 s later again (3);
//! the next time it half-opens (about 130 s) the outage is over, its probes succeed, and it
//! closes for good. So it opens exactly 3 times, for exactly 30 s, whatever the draws, and it
//! fails at once the requests of those 30 s: the arrivals of an interval of fixed length from
//! a stopping time, Poisson of mean λ × 30 s (beside which the few turned away while the
//! probes are out, a few milliseconds each time, are nothing).

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::RunReport;
use serde_json::{json, Value};
use std::ops::RangeInclusive;

const LAMBDA: f64 = 100.0;
const OPEN_FOR: f64 = 10.0;
const WARMUP: f64 = 10.0;
const DURATION: f64 = 760.0;

fn scenario(faults: bool, extra: impl FnOnce(&mut Value)) -> Value {
    let mut s = json!({
        "name": "breaker",
        "arrivals": {
            "process": "poisson", "rate": LAMBDA,
            "breaker": {"window": 20, "min_calls": 20, "failure_rate": 50,
                        "open_for": OPEN_FOR, "half_open_calls": 5},
        },
        "service": {"distribution": "exponential", "mean": 0.01},
        "fleet": {"dynos": 2},
        "run": {"duration": DURATION, "warmup": WARMUP, "replications": 10, "seed": 35},
    });
    if faults {
        s["faults"] = json!([{"at": 100.0, "for": 25.0, "kind": "outage", "mode": "refuse"}]);
    }
    extra(&mut s);
    s
}

fn run(s: &Value) -> RunReport {
    run_ok(&build(&s.to_string()))
}

/// An outage of 25 s opens the breaker 3 times for exactly 30 s in all: open_fraction is
/// 30 s over the window, the requests failed at once are λ × 30 s, the app refuses only the
/// calls that filled the window and the probes, and once the outage is over it closes for
/// good (goodput recovers).
#[test]
fn an_outage_opens_it_for_whole_waits_until_the_probes_succeed() {
    // The window's 20 calls turned by at least 10 failures (a few more when calls in flight
    // at 100 s succeed among them), then twice 5 probes.
    outage_opens_it_for_whole_waits(&run(&scenario(true, |_| {})), 20..=26);
}

/// The same with a time-based window of 1 s: resilience4j's buckets are whole seconds, and a
/// window of one is the second under way, which the outage begins (at 100 s) empty: the
/// breaker opens on its 20th call (min_calls), all failures but the few calls in flight at
/// 100 s that succeed among them, and as before 3 times for 30 s.
#[test]
fn a_time_based_window_opens_it_the_same() {
    let report = run(&scenario(true, |s| {
        s["arrivals"]["breaker"]["window_type"] = json!("time_based");
        s["arrivals"]["breaker"]["window"] = json!(1);
    }));
    outage_opens_it_for_whole_waits(&report, 25..=30);
}

/// Checks what an outage of 25 s does (see the module's comment); the app refuses `refused`
/// calls: those that open the breaker, then twice 5 probes.
fn outage_opens_it_for_whole_waits(report: &RunReport, refused: RangeInclusive<u64>) {
    // The window: `run.duration` after the warm-up.
    let window = DURATION;
    for r in &report.per_replication {
        let b = r.breaker.as_ref().expect("breaker figures");
        assert_eq!(b.opened, 3, "openings");
        let expected = 3.0 * OPEN_FOR / window;
        assert!(
            (b.open_fraction - expected).abs() < 1e-12,
            "open_fraction {} against {expected}",
            b.open_fraction
        );
        // No retries: each request failed at once is one error breaker_open.
        assert_eq!(r.error_counts.breaker_open, Some(b.rejected));
        let by_app = r.error_counts.outage.unwrap();
        assert!(refused.contains(&by_app), "refused by the app: {by_app}");
        assert_eq!(r.error_counts.total, by_app + b.rejected);
        assert_eq!(r.stability.as_ref().unwrap().recovered, 1.0);
    }
    let rejected =
        Measured::over_replications(report, |r| r.breaker.as_ref().unwrap().rejected as f64);
    assert_matches(
        "requests failed at once",
        rejected,
        LAMBDA * 3.0 * OPEN_FOR,
        0.05,
    );
}

/// Without faults nothing fails: the breaker never opens, and fails nothing.
#[test]
fn without_faults_it_never_opens() {
    let report = run(&scenario(false, |_| {}));
    for r in &report.per_replication {
        let b = r.breaker.as_ref().unwrap();
        assert_eq!((b.opened, b.rejected, b.open_fraction), (0, 0, 0.0));
        assert_eq!(r.error_counts.breaker_open, Some(0));
        assert_eq!(r.error_counts.total, 0);
    }
}

/// With retries, a retry of a try the breaker failed meets the breaker again: opened for
/// good (open_for beyond the run), every try after it opened is failed at once, so each
/// request that arrives after it opened fails with breaker_open after its 3 tries. Every
/// request failed so had 3 tries failed at once, except those that arrived in the 2 s of
/// backoff before it opened (1 or 2 of their tries were sent before): rejected is 3 × the
/// requests failed with breaker_open, less at most 2 × those few (Poisson of mean 2λ = 200;
/// 400 of them would be 14 standard deviations out).
#[test]
fn a_retry_of_a_rejected_try_is_rejected_too() {
    let report = run(&scenario(true, |s| {
        s["arrivals"]["breaker"]["open_for"] = json!(10_000.0);
        s["arrivals"]["retry"] =
            json!({"attempts": 3, "backoff": "constant", "base": 1.0, "jitter": "none"});
    }));
    for r in &report.per_replication {
        let b = r.breaker.as_ref().unwrap();
        assert_eq!(b.opened, 1);
        let failed = r.error_counts.breaker_open.unwrap();
        // Open from about 100 s to the window's end.
        let open = b.open_fraction * DURATION;
        let end = WARMUP + DURATION;
        assert!(open > end - 101.0 && open < end - 100.0, "open {open} s");
        assert!(
            3 * failed >= b.rejected,
            "{failed} failed, {} rejected",
            b.rejected
        );
        let short = 3 * failed - b.rejected;
        assert!(short <= 2 * 400, "{failed} failed, {} rejected", b.rejected);
        let retries = r.retries.as_ref().unwrap();
        assert!(
            retries.attempts_per_request > 2.5,
            "{}",
            retries.attempts_per_request
        );
    }
}

/// A scenario without the section has neither the figures nor the error kind.
#[test]
fn figures_appear_only_with_a_breaker() {
    let report = run(&scenario(false, |s| {
        s["arrivals"].as_object_mut().unwrap().remove("breaker");
        s["run"]["replications"] = json!(2);
    }));
    let text = serde_json::to_string(&report.per_replication[0]).unwrap();
    assert!(!text.contains("breaker"), "{text}");
}

/// The direct engine and the shards refuse a breaker, saying why: it sees every client's
/// tries at once, and fails some at once.
#[test]
fn the_shortcuts_refuse_it() {
    for (key, value) in [("engine", json!("direct")), ("shards", json!(2))] {
        let mut s = scenario(false, |_| {});
        s["run"][key] = value;
        let error = dynosim_engine::Scenario::from_json(
            &s.to_string(),
            std::path::Path::new("."),
            &dynosim_engine::never_interrupted,
        )
        .and_then(|scenario| {
            dynosim_engine::run(&scenario, &dynosim_engine::never_interrupted).map(|_| ())
        })
        .expect_err(key)
        .to_string();
        assert!(error.contains("arrivals.breaker"), "{key}: {error}");
    }
}
