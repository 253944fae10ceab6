//! A run that stops at its stability verdict (`Scenario::stop_at_verdict`, what the
//! metastability map runs) reports the very verdict of the whole run: every replication's
//! `stability.*` figures equal to the bit, whether it recovered (stopped three intervals into
//! the recovery) or not (stopped at the window's close), and it does stop early.
//!
//! The model is tests/feedback.rs's: one M/M/1 dyno (μ = 1000/s) whose clients give up after
//! 50 ms and try 3 times, a slowdown by 5; at λ = 300 (3λ < μ) the fleet recovers, at λ = 350
//! (3λ > μ) it stays down, and at 335 replications go either way.

mod common;

use common::{build, run_ok};
use dynosim_engine::RunReport;
use serde_json::{json, Value};

/// The scenario at `rate`; the fault and the intervals fall off whole seconds, so that the
/// bins' edges, the intervals' and the check's are all different.
fn retrying(rate: f64, duration: f64, extra: impl FnOnce(&mut Value)) -> Value {
    let mut s = json!({
        "name": "mm1-retries",
        "arrivals": {
            "process": "poisson", "rate": rate, "timeout": 0.05,
            "retry": {"attempts": 3, "backoff": "constant", "base": 0.0, "jitter": "none"},
        },
        "service": {"distribution": "exponential", "mean": 0.001},
        "fleet": {"dynos": 1},
        "router": {"timeout": "off"},
        "faults": [{"at": 60.3, "for": 5.25, "kind": "slowdown", "factor": 5.0}],
        "run": {"duration": duration, "warmup": 10.0, "replications": 8, "seed": 5,
                "recovery_window": "4min", "recovery_interval": "7s"},
    });
    extra(&mut s);
    s
}

/// The whole run's report and the one stopped at its verdict.
fn both(s: &Value) -> (RunReport, RunReport) {
    let whole = run_ok(&build(&s.to_string()));
    let mut scenario = build(&s.to_string());
    scenario.stop_at_verdict();
    (whole, run_ok(&scenario))
}

/// Each replication's verdict as it serializes (every field, floats to the bit).
fn verdicts(report: &RunReport) -> Vec<String> {
    report
        .per_replication
        .iter()
        .map(|r| serde_json::to_string(r.stability.as_ref().expect("a verdict")).unwrap())
        .collect()
}

#[test]
fn a_run_stopped_at_its_verdict_has_the_whole_runs_verdict_to_the_bit() {
    let (mut recovered, mut down) = (0, 0);
    for rate in [300.0, 335.0, 350.0] {
        // 20 minutes: well past the window's close (65.55 s + 4 min).
        let (whole, stopped) = both(&retrying(rate, 1200.0, |_| {}));
        assert_eq!(verdicts(&whole), verdicts(&stopped), "λ = {rate}");
        for (w, s) in whole.per_replication.iter().zip(&stopped.per_replication) {
            let v = w.stability.as_ref().unwrap();
            assert!(v.baseline_goodput > 0.0);
            if v.recovered == 1.0 {
                recovered += 1;
            } else {
                down += 1;
            }
            // It stopped early: at most the window's close (305.55 s) of the 1,210 s of
            // arrivals, plus an interval's look; a recovery well before.
            let share = s.simulated_requests as f64 / w.simulated_requests as f64;
            assert!(
                share < 320.0 / 1210.0,
                "λ = {rate}: the stopped run simulated {share:.3} of the whole one's requests"
            );
        }
    }
    assert!(
        recovered > 0 && down > 0,
        "both verdicts: {recovered} recovered, {down} not"
    );
}

/// A fleet never up (λ above μ from the start: no answer in time before the fault) is settled
/// at the first fault, and stops there.
#[test]
fn a_fleet_never_up_stops_at_the_first_fault() {
    let (whole, stopped) = both(&retrying(1100.0, 1200.0, |s| {
        s["run"]["allow_overload"] = json!(true);
    }));
    assert_eq!(verdicts(&whole), verdicts(&stopped));
    for (w, s) in whole.per_replication.iter().zip(&stopped.per_replication) {
        assert_eq!(w.stability.as_ref().unwrap().baseline_goodput, 0.0);
        let share = s.simulated_requests as f64 / w.simulated_requests as f64;
        assert!(share < 62.0 / 1210.0, "{share:.3}");
    }
}

/// A run shorter than its window is judged to its end, stopped or not; so is a closed loop
/// of a set number of requests (whose end is its last answer: nothing to stop at).
#[test]
fn a_run_shorter_than_its_window_or_a_counted_closed_loop_is_judged_to_its_end() {
    let (whole, stopped) = both(&retrying(350.0, 150.0, |_| {}));
    assert_eq!(verdicts(&whole), verdicts(&stopped));
    assert!(whole.per_replication[0].stability.as_ref().unwrap().window < 240.0);
    let closed = retrying(350.0, 150.0, |s| {
        s["arrivals"] = json!({
            "process": "closed", "clients": 20, "think": {"distribution": "exponential", "mean": 0.05},
            "requests": 100000, "timeout": 0.05,
            "retry": {"attempts": 3, "backoff": "constant", "base": 0.0, "jitter": "none"},
        });
    });
    let (whole, stopped) = both(&closed);
    assert_eq!(verdicts(&whole), verdicts(&stopped));
    for (w, s) in whole.per_replication.iter().zip(&stopped.per_replication) {
        assert_eq!(w.simulated_requests, s.simulated_requests);
    }
}
