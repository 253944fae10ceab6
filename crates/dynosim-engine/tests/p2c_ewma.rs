//! `p2c_ewma` (Finagle's and Linkerd's power of two choices by peak-EWMA latency, issue #26):
//! no closed form (BALANCERS.md §A.4.3); its cost is checked against tower's unit tests in
//! `src/policy/p2c_ewma.rs`. Here the system, on equal dynos, where the latencies say nothing
//! about a dyno that its in-flight count does not: the longer the decay, the smoother the
//! estimates, the closer the cost's ranking to the in-flight counts', and the shorter the mean
//! response, towards power of two choices by in-flight count; and with Linkerd's defaults the
//! policy is far better than random routing. (It is not as good as power of two by in-flight
//! count there: the estimates' noise costs about 4% of the mean response at Linkerd's 10 s,
//! which the test prints.)
//!
//! The policies run on the same seed, so on the same arrivals and service times (each has its
//! own random stream): each replication's difference is a paired sample, its standard error
//! over replications the margin (k of them, `common/mod.rs`).

mod common;

use common::{build, k_for, run_ok, scenario_json, Measured};
use dynosim_engine::RunReport;
use serde_json::{json, Value};

/// 20 single-slot dynos, exponential service of mean 100 ms (about Linkerd's 30 ms default
/// estimate's order), ρ = 0.8, one router.
fn equal_dynos(router: Value) -> RunReport {
    let (dynos, mean, rho) = (20, 0.1, 0.8);
    run_ok(&build(&scenario_json(
        rho * f64::from(dynos) / mean,
        json!({"distribution": "exponential", "mean": mean}),
        dynos,
        1,
        router,
        (2000.0, 100.0, 20, 17),
    )))
}

/// The paired differences a − b of each replication's mean response time.
fn paired(a: &RunReport, b: &RunReport) -> Measured {
    let diffs: Vec<f64> = a
        .per_replication
        .iter()
        .zip(&b.per_replication)
        .map(|(x, y)| x.response.mean - y.response.mean)
        .collect();
    Measured::of(&diffs)
}

fn mean_response(r: &RunReport) -> f64 {
    Measured::over_replications(r, |x| x.response.mean).mean
}

#[test]
fn a_longer_decay_routes_closer_to_power_of_two_and_the_default_beats_random() {
    let p2c = equal_dynos(json!({"policy": "power_of_d", "d": 2}));
    let random = equal_dynos(json!({"policy": "random"}));
    println!(
        "mean response: power_of_d {:.5} s, random {:.5} s",
        mean_response(&p2c),
        mean_response(&random)
    );
    let runs: Vec<(&str, RunReport)> = ["1s", "10s", "100s"]
        .into_iter()
        .map(|decay| {
            let r = equal_dynos(json!({"policy": "p2c_ewma", "decay": decay}));
            let gap = paired(&r, &p2c);
            println!(
                "p2c_ewma, decay {decay}: {:.5} s; − power_of_d: {:+.5} ± {:.5} s",
                mean_response(&r),
                gap.mean,
                gap.std_error
            );
            (decay, r)
        })
        .collect();
    for pair in runs.windows(2) {
        let ((short, a), (long, b)) = (&pair[0], &pair[1]);
        let d = paired(a, b);
        let margin = k_for(d.df) * d.std_error;
        assert!(
            d.mean > margin,
            "decay {long} is not better than {short}: {:+.5} ± {:.5} s (margin {margin:.5})",
            d.mean,
            d.std_error
        );
    }
    let linkerd = &runs[1].1;
    let better = paired(&random, linkerd);
    let margin = k_for(better.df) * better.std_error;
    assert!(
        better.mean > margin && better.mean > 0.25 * mean_response(&random),
        "p2c_ewma is not clearly better than random routing: {:.5} ± {:.5}",
        better.mean,
        better.std_error
    );
}
