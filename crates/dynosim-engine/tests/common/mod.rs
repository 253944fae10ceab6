//! Helpers shared by the statistical tests: building and running scenarios, and comparing an
//! estimate with a theoretical value at a tolerance derived from the estimate's standard error.
//!
//! The tolerance rule. Every comparison is `|estimate − theory| ≤ k·SE`, where SE is the
//! standard error of the estimate (from the spread of independent replications, or of i.i.d.
//! samples) and k is chosen so that a correct simulator fails a single comparison with
//! probability [`FALSE_ALARM`]: k is the (1 − FALSE_ALARM/2) quantile of Student's t with the
//! estimate's degrees of freedom (R − 1 for R replications; the normal quantile, 3.89, for
//! large samples). With 20 replications k = 4.90. `tests/theory.rs` makes about 180 such
//! comparisons, so the chance that a correct engine fails one of them on a given set of seeds
//! is below 2%; the seeds are fixed, so a given build passes or fails deterministically, and a
//! failure is worth reading before any reseeding.
//!
//! A loose tolerance would make every comparison pass, so each comparison also asserts its
//! resolution: k·SE must be below a stated fraction of the theoretical value, i.e. the test
//! would catch a model that is wrong by that much.

#![allow(dead_code)] // each test binary uses its own subset

use dynosim_engine::{never_interrupted, run, Estimate, ReplicationResult, RunReport, Scenario};
use serde_json::{json, Value};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};
use std::path::Path;

/// Probability that one comparison fails although the engine is right.
pub const FALSE_ALARM: f64 = 1e-4;

/// The half-width multiplier for an estimate with `df` degrees of freedom (normal if infinite).
pub fn k_for(df: f64) -> f64 {
    let q = 1.0 - FALSE_ALARM / 2.0;
    if df.is_finite() && df < 1e4 {
        StudentsT::new(0.0, 1.0, df).unwrap().inverse_cdf(q)
    } else {
        Normal::new(0.0, 1.0).unwrap().inverse_cdf(q)
    }
}

/// A mean with its standard error and degrees of freedom.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub mean: f64,
    pub std_error: f64,
    pub df: f64,
}

impl Measured {
    /// From independent, identically distributed values (replications or samples).
    pub fn of(xs: &[f64]) -> Measured {
        assert!(xs.len() >= 2, "a standard error needs at least two values");
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        Measured {
            mean,
            std_error: (var / n).sqrt(),
            df: n - 1.0,
        }
    }

    /// The engine's own summary of a replication figure, cross-checked against [`Measured::of`].
    pub fn over_replications(
        report: &RunReport,
        figure: impl Fn(&ReplicationResult) -> f64,
    ) -> Measured {
        let xs: Vec<f64> = report.per_replication.iter().map(figure).collect();
        let ours = Measured::of(&xs);
        let engine = Estimate::from_samples(&xs);
        assert!((engine.mean - ours.mean).abs() <= 1e-12 * ours.mean.abs().max(1e-300));
        assert!((engine.std_error - ours.std_error).abs() <= 1e-9 * ours.std_error.max(1e-300));
        ours
    }

    /// A binomial proportion of `n` independent draws whose true value would be `p`: the
    /// standard error is known exactly, so the normal quantile applies.
    pub fn proportion(hits: u64, n: u64, p: f64) -> Measured {
        Measured {
            mean: hits as f64 / n as f64,
            std_error: (p * (1.0 - p) / n as f64).sqrt(),
            df: f64::INFINITY,
        }
    }
}

/// Asserts `|m − theory| ≤ k·SE` and that k·SE ≤ `resolution`·|theory| (the comparison is
/// sharp enough to catch a model wrong by that fraction). Prints the comparison, so that
/// `cargo test -- --nocapture` lists every estimate beside its theory.
pub fn assert_matches(what: &str, m: Measured, theory: f64, resolution: f64) {
    assert_matches_with_allowance(what, m, theory, 0.0, resolution);
}

/// As [`assert_matches`], with a documented deterministic `allowance` added to the tolerance
/// for a known bias of the estimate (e.g. finite n against an n → ∞ limit).
pub fn assert_matches_with_allowance(
    what: &str,
    m: Measured,
    theory: f64,
    allowance: f64,
    resolution: f64,
) {
    let k = k_for(m.df);
    let tolerance = k * m.std_error + allowance;
    let z = (m.mean - theory) / m.std_error;
    println!(
        "{what}: {:.6} ± {:.6} (SE {:.3}%) vs theory {:.6}; diff {:+.3}%, z = {:+.2}, tolerance {:.6} (k = {k:.2}{})",
        m.mean,
        m.std_error,
        100.0 * m.std_error / theory.abs(),
        theory,
        100.0 * (m.mean - theory) / theory.abs(),
        z,
        tolerance,
        if allowance > 0.0 {
            format!(", allowance {allowance:.6}")
        } else {
            String::new()
        }
    );
    assert!(
        m.std_error.is_finite() && m.std_error > 0.0 || m.mean == theory,
        "{what}: degenerate standard error {}",
        m.std_error
    );
    assert!(
        tolerance <= resolution * theory.abs(),
        "{what}: tolerance {tolerance:.6} is wider than {}% of the theoretical {theory:.6}; \
         the comparison could not catch a wrong model (SE {:.6})",
        100.0 * resolution,
        m.std_error
    );
    assert!(
        (m.mean - theory).abs() <= tolerance,
        "{what}: estimate {:.6} ± {:.6} differs from theory {theory:.6} by {:.6} (z = {z:.2}), \
         more than the tolerance {tolerance:.6}",
        m.mean,
        m.std_error,
        m.mean - theory
    );
}

/// The JSON text of a scenario with Poisson arrivals.
pub fn scenario_json(
    arrival_rate: f64,
    service: Value,
    dynos: u32,
    slots: u32,
    router: Value,
    (duration, warmup, replications, seed): (f64, f64, u32, u64),
) -> String {
    // Queueing theory's queues are patient: no router timeout unless the test sets one.
    let mut router = router;
    if let Some(r) = router.as_object_mut() {
        r.entry("timeout").or_insert(json!("off"));
    }
    json!({
        "name": "theory",
        "arrivals": {"process": "poisson", "rate": arrival_rate},
        "service": service,
        "fleet": {"dynos": dynos, "slots": slots},
        "router": router,
        "run": {"duration": duration, "warmup": warmup, "replications": replications, "seed": seed},
    })
    .to_string()
}

pub fn build(json: &str) -> Scenario {
    Scenario::from_json(json, Path::new("."), &never_interrupted)
        .unwrap_or_else(|e| panic!("{e}\n{json}"))
}

pub fn run_ok(scenario: &Scenario) -> RunReport {
    run(scenario, &never_interrupted).unwrap_or_else(|e| panic!("{}: {e}", scenario.name))
}

/// Whether replication 0 of a scenario whose fleet changes size had more dynos up at some
/// point than at its start, and fewer again at its end than at its largest (from a trace of
/// the dynos up every `interval` seconds): an autoscaler that scaled up, then down.
pub fn grew_then_shrank(scenario: &Scenario, interval: f64) -> bool {
    let until = scenario.warmup + scenario.duration;
    let (_, trace) =
        dynosim_engine::trace_replication(scenario, 0, interval, until, false, &never_interrupted)
            .expect("a trace");
    let up: Vec<u32> = trace.frames.iter().map(|f| f.dynos_up).collect();
    let most = up.iter().copied().max().unwrap_or(0);
    let (first, last) = (up[0], *up.last().expect("frames"));
    most > first && last < most
}
