//! Arrival processes against their theory: counts in the intervals of a rate schedule and of a
//! sine against the integral of the rate (Poisson: the variance is the mean), the shape of the
//! arrivals on a linear ramp (what thinning's acceptance must give), the on/off source's
//! long-run rate and index of dispersion, batch arrivals' rate and variance, and bursts'
//! counts, exactly. Tolerances follow the rule of `common` (k standard errors at a false-alarm
//! rate of 1e-4 per comparison), never tuned to a seed.

mod common;

use common::{assert_matches, Measured};
use dynosim_engine::arrivals::ArrivalProcess;
use dynosim_engine::rng::{stream, Stream};
use dynosim_engine::{never_interrupted, Scenario};
use serde_json::{json, Value};
use std::f64::consts::TAU;
use std::path::Path;

const SEED: u64 = 2026;

fn scenario(arrivals: Value) -> Scenario {
    let doc = json!({
        "arrivals": arrivals,
        "service": {"distribution": "exponential", "mean": "1ms"},
        "fleet": {"dynos": 10},
        "run": {"duration": "2h", "warmup": "0s", "seed": SEED},
    });
    Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted)
        .unwrap_or_else(|e| panic!("{e}: {doc}"))
}

fn process(arrivals: Value) -> Box<dyn ArrivalProcess> {
    match scenario(arrivals).workload {
        dynosim_engine::scenario::Workload::Open(p) => p.fresh(0, 0),
        _ => panic!("an open process"),
    }
}

/// The arrivals of replication `replication` before `until`, as the engines draw them.
fn times(p: &dyn ArrivalProcess, replication: u64, until: f64) -> Vec<f64> {
    let mut p = p.fresh(SEED, replication);
    let mut rng = stream(SEED, replication, Stream::Arrivals);
    let mut out = Vec::new();
    let mut now = 0.0;
    while let Some(t) = p.next_arrival(now, &mut rng) {
        assert!(t >= now, "arrivals go forward: {t} after {now}");
        if t >= until {
            break;
        }
        out.push(t);
        now = t;
    }
    out
}

/// Counts in the bins of `edges` over `replications` replications, each against `expected`
/// (the integral of the rate over the bin): Poisson, so the pooled count has variance equal
/// to its mean, and the counts of one bin across replications vary as much as they average.
fn check_bins(
    label: &str,
    p: &dyn ArrivalProcess,
    edges: &[f64],
    replications: u64,
    expected: impl Fn(f64, f64) -> f64,
) {
    let bins = edges.len() - 1;
    let mut counts = vec![vec![0.0; replications as usize]; bins];
    for r in 0..replications {
        for t in times(p, r, edges[bins]) {
            let b = edges.partition_point(|&e| e <= t) - 1;
            counts[b][r as usize] += 1.0;
        }
    }
    let n = replications as f64;
    let mut dispersion = Vec::new();
    for b in 0..bins {
        let (lo, hi) = (edges[b], edges[b + 1]);
        let lambda = expected(lo, hi);
        assert!(
            (p.expected(lo, hi) - lambda).abs() <= 1e-9 * lambda.max(1.0),
            "{label}: the process's own integral over [{lo}, {hi})"
        );
        if lambda == 0.0 {
            assert!(
                counts[b].iter().all(|&c| c == 0.0),
                "{label}: [{lo}, {hi}) is off"
            );
            continue;
        }
        let total: f64 = counts[b].iter().sum();
        assert_matches(
            &format!("{label}: mean count in [{lo}, {hi})"),
            Measured {
                mean: total / n,
                std_error: (lambda / n).sqrt(),
                df: f64::INFINITY,
            },
            lambda,
            0.05,
        );
        // Var N = E N: (N − Λ)²/Λ averages 1, in every bin of every replication (the bins of
        // a Poisson process are independent), so they are pooled.
        dispersion.extend(counts[b].iter().map(|c| (c - lambda).powi(2) / lambda));
    }
    assert_matches(
        &format!("{label}: index of dispersion of the counts"),
        Measured::of(&dispersion),
        1.0,
        0.3,
    );
}

#[test]
fn schedule_counts_match_the_integral_of_the_rate() {
    // A ramp up, a plateau, a ramp down to nothing, a silent stretch, a step up, and the
    // constant rate after the last point.
    let p = process(json!({"process": "poisson", "rate": [
        ["0s", "20/s"], ["60s", "200/s"], ["90s", "200/s"], ["100s", 0],
        ["150s", 0], ["150s", "50/s"]]}));
    let points = [
        (0.0, 20.0),
        (60.0, 200.0),
        (90.0, 200.0),
        (100.0, 0.0),
        (150.0, 0.0),
        (150.0, 50.0),
    ];
    let rate = |t: f64| {
        let k = points.iter().rposition(|&(x, _)| x <= t).unwrap();
        match points.get(k + 1) {
            None => points[k].1,
            Some(&(t1, r1)) => {
                let (t0, r0) = points[k];
                r0 + (r1 - r0) * (t - t0) / (t1 - t0)
            }
        }
    };
    // Integral by Simpson's rule on pieces that never straddle a point (exact for lines).
    let integral = |a: f64, b: f64| {
        let mut cuts = vec![a];
        cuts.extend(points.iter().map(|p| p.0).filter(|&x| x > a && x < b));
        cuts.push(b);
        cuts.windows(2)
            .map(|w| {
                let (x, y) = (w[0], w[1]);
                let eps = 1e-9 * (y - x);
                (y - x) / 6.0 * (rate(x + eps) + 4.0 * rate(0.5 * (x + y)) + rate(y - eps))
            })
            .sum::<f64>()
    };
    let edges: Vec<f64> = (0..=12).map(|i| 20.0 * f64::from(i)).collect();
    check_bins("schedule", p.as_ref(), &edges, 200, integral);
    assert_eq!(p.mean_rate(), 50.0, "the long-run rate is the last point's");
}

#[test]
fn sine_counts_match_the_integral_of_the_rate() {
    let (mean, amplitude, period, peak) = (100.0, 80.0, 200.0, 50.0);
    let p = process(json!({"process": "poisson", "rate":
        {"mean": "100/s", "amplitude": "80/s", "period": "200s", "peak": "50s"}}));
    let integral = |a: f64, b: f64| {
        let phase = |t: f64| TAU * (t - peak) / period;
        mean * (b - a) + amplitude * period / TAU * (phase(b).sin() - phase(a).sin())
    };
    let edges: Vec<f64> = (0..=16).map(|i| 25.0 * f64::from(i)).collect();
    check_bins("sine", p.as_ref(), &edges, 150, integral);
    assert_eq!(p.mean_rate(), 100.0);
}

/// On a ramp from 0 the rate is proportional to t, so given their number the arrivals in
/// [0, T] are independent with density 2t/T²: t/T has mean 2/3 and variance 1/18. Thinning
/// keeps a candidate at t with probability rate(t)/M; a wrong acceptance bends this shape.
#[test]
fn thinning_on_a_linear_ramp_gives_its_triangular_density() {
    let p = process(json!({"process": "poisson", "rate": [["0s", 0], ["100s", "1000/s"]]}));
    let mut xs = Vec::new();
    let mut counts = Vec::new();
    for r in 0..4 {
        let t = times(p.as_ref(), r, 100.0);
        counts.push(t.len() as f64);
        xs.extend(t.iter().map(|t| t / 100.0));
    }
    assert_matches("ramp: mean of t/T", Measured::of(&xs), 2.0 / 3.0, 0.01);
    let squares: Vec<f64> = xs.iter().map(|x| x * x).collect();
    assert_matches("ramp: mean of (t/T)²", Measured::of(&squares), 0.5, 0.01);
    // The first tenth of the ramp holds 1% of its arrivals.
    let early = xs.iter().filter(|&&x| x < 0.1).count() as u64;
    assert_matches(
        "ramp: share of arrivals before T/10",
        Measured::proportion(early, xs.len() as u64, 0.01),
        0.01,
        0.1,
    );
    let total: f64 = counts.iter().sum();
    assert_matches(
        "ramp: arrivals",
        Measured {
            mean: total / 4.0,
            std_error: (50_000.0f64 / 4.0).sqrt(),
            df: f64::INFINITY,
        },
        50_000.0,
        0.01,
    );
}

/// The interrupted Poisson process: rate λ while on, on and off exponential with rates α and
/// β, started in its stationary state. With p = β/(α+β) the share of time on and κ = α+β,
/// E N(T) = λpT and Var N(T) = λpT + 2λ²p(1−p)(T/κ − (1 − e^(−κT))/κ²).
#[test]
fn on_off_rate_and_index_of_dispersion() {
    let (lambda, on, off, t): (f64, f64, f64, f64) = (100.0, 1.0, 3.0, 50.0);
    let p = process(json!({"process": "on_off", "rate": "100/s", "on": "1s", "off": "3s"}));
    let (alpha, beta) = (1.0 / on, 1.0 / off);
    let share = beta / (alpha + beta);
    let kappa = alpha + beta;
    let mean = lambda * share * t;
    let var = mean
        + 2.0
            * lambda
            * lambda
            * share
            * (1.0 - share)
            * (t / kappa - (1.0 - (-kappa * t).exp()) / (kappa * kappa));
    assert_eq!(p.mean_rate(), lambda * share);
    let counts: Vec<f64> = (0..1000)
        .map(|r| times(p.as_ref(), r, t).len() as f64)
        .collect();
    assert_matches("on/off: mean count", Measured::of(&counts), mean, 0.05);
    let squares: Vec<f64> = counts.iter().map(|c| (c - mean).powi(2)).collect();
    let m = Measured::of(&squares);
    assert_matches("on/off: variance of the count", m, var, 0.3);
    // The index of dispersion var/mean: about 75 here, 1 for Poisson.
    println!(
        "on/off: index of dispersion {:.1} (theory {:.1})",
        m.mean / mean,
        var / mean
    );
}

/// Batches at Poisson epochs of rate r, sizes S: N(T) is compound Poisson, mean rT E S and
/// variance rT E S².
#[test]
fn batch_rate_and_variance() {
    let (rate, t) = (50.0, 20.0);
    // Fixed size: every batch of 3 at one instant.
    let p = process(json!({"process": "batch", "rate": "50/s", "size": 3}));
    let arrivals = times(p.as_ref(), 0, t);
    assert_eq!(arrivals.len() % 3, 0);
    for batch in arrivals.chunks(3) {
        assert!(batch[0] == batch[1] && batch[1] == batch[2], "{batch:?}");
    }
    assert_eq!(p.mean_rate(), 150.0);
    // Geometric sizes of mean 4: P(n) = (1-q)^(n-1) q, q = 1/4; E S² = (2 − q)/q².
    let q = 0.25;
    let p = process(json!({"process": "batch", "rate": "50/s",
                           "size": {"distribution": "geometric", "mean": 4}}));
    assert_eq!(p.mean_rate(), 200.0);
    let mean = rate * t * 4.0;
    let var = rate * t * (2.0 - q) / (q * q);
    let counts: Vec<f64> = (0..300)
        .map(|r| times(p.as_ref(), r, t).len() as f64)
        .collect();
    assert_matches("batch: mean count", Measured::of(&counts), mean, 0.05);
    let squares: Vec<f64> = counts.iter().map(|c| (c - mean).powi(2)).collect();
    assert_matches(
        "batch: variance of the count",
        Measured::of(&squares),
        var,
        0.4,
    );
}

/// Bursts add exactly clients × requests per firing, leave the base arrivals as they were
/// (their own streams), and a second burst table leaves the first one's draws alone.
#[test]
fn bursts_add_exact_counts_and_leave_the_base_alone() {
    let until = 200.0;
    let base = json!({"process": "poisson", "rate": [["0s", "10/s"], ["100s", "40/s"]]});
    let cron = json!({"at": "30s", "clients": 50, "requests": 2,
                      "jitter": {"distribution": "exponential", "mean": "2s"}});
    let every = json!({"at": "10s", "clients": 7, "every": "40s"});
    let mut with_bursts = base.clone();
    with_bursts["burst"] = json!([cron.clone(), every]);
    let mut with_cron = base.clone();
    with_cron["burst"] = json!([cron]);

    let alone = times(process(base).as_ref(), 3, until);
    let both = times(process(with_bursts).as_ref(), 3, until);
    let cron_only = times(process(with_cron).as_ref(), 3, until);
    // 50 clients x 2 requests once, and 7 clients at 10, 50, 90, 130 and 170 s.
    assert_eq!(both.len(), alone.len() + 100 + 35);
    assert_eq!(cron_only.len(), alone.len() + 100);
    // The base arrivals, in order, are among the others: none moved.
    let extra = |all: &[f64]| {
        let mut rest = Vec::new();
        let mut i = 0;
        for &t in all {
            if i < alone.len() && t == alone[i] {
                i += 1;
            } else {
                rest.push(t);
            }
        }
        assert_eq!(i, alone.len(), "every base arrival is there");
        rest
    };
    let cron_times = extra(&cron_only);
    assert!(cron_times.iter().all(|&t| t >= 30.0));
    let both_extra = extra(&both);
    let fixed: Vec<f64> = both_extra
        .iter()
        .copied()
        .filter(|t| [10.0, 50.0, 90.0, 130.0, 170.0].contains(t))
        .collect();
    assert_eq!(fixed.len(), 35);
    // The cron table's jittered times are the same with the second table added.
    let mut jittered: Vec<f64> = both_extra
        .iter()
        .copied()
        .filter(|t| ![10.0, 50.0, 90.0, 130.0, 170.0].contains(t))
        .collect();
    jittered.sort_by(f64::total_cmp);
    let mut alone_cron = cron_times.clone();
    alone_cron.sort_by(f64::total_cmp);
    assert_eq!(jittered, alone_cron);
}

/// A burst's jitter is drawn from its distribution, once per client.
#[test]
fn burst_jitter_follows_its_distribution() {
    let p = process(json!({"process": "poisson", "rate": "1/s", "burst": [
        {"at": "60s", "clients": 20000, "jitter": {"distribution": "exponential", "mean": "2s"}}]}));
    let base = times(
        process(json!({"process": "poisson", "rate": "1/s"})).as_ref(),
        1,
        600.0,
    );
    let all = times(p.as_ref(), 1, 600.0);
    assert_eq!(all.len(), base.len() + 20000);
    let delays: Vec<f64> = all
        .iter()
        .filter(|t| !base.contains(t))
        .map(|t| t - 60.0)
        .collect();
    assert_eq!(delays.len(), 20000);
    assert!(delays.iter().all(|&d| d >= 0.0));
    assert_matches("burst: mean jitter", Measured::of(&delays), 2.0, 0.05);
}

/// The stability check looks at the long-run rate: a short peak far above capacity passes, a
/// schedule that stays above it is refused.
#[test]
fn stability_uses_the_long_run_rate() {
    let peak = scenario(json!({"process": "poisson", "rate": [
        ["0s", "100/s"], ["10s", "50000/s"], ["20s", "100/s"]]}));
    // 10 dynos of one slot at 1 ms: capacity 10,000/s.
    peak.check_stable()
        .expect("a transient peak is not refused");
    let sustained = scenario(json!({"process": "poisson", "rate": [
        ["0s", "100/s"], ["10s", "50000/s"]]}));
    assert!(sustained.check_stable().is_err());
    let burst = scenario(json!({"process": "poisson", "rate": "100/s",
                                "burst": [{"at": "1min", "clients": 1000000}]}));
    burst
        .check_stable()
        .expect("a one-off burst is not refused");
}
