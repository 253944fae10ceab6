//! A router on the dyno's machine (`router.colocated_cpu`, sim/slices.rs and sim/cpu.rs): its
//! CPU per request runs on the dyno's cores beside the app's threads, half when it sends the
//! request there and half when the response leaves, under no lock and as no request's phase.
//! Checked against what work conservation makes exact, and against bounds where the exact
//! answer has no closed form. Tolerances are k standard errors over replications
//! (`common/mod.rs`).

mod common;

use common::{assert_matches, build, k_for, run_ok, Measured};
use serde_json::{json, Value};

/// The app's CPU per request (exponential) and the router's (constant), seconds.
const M: f64 = 0.010;
const C: f64 = 0.003;

/// One dyno of one core and one gunicorn sync worker (a GIL, which the router's thread does
/// not take), each request one exponential CPU phase of mean `M`; `arrivals` and `router`
/// as given; `sharing` "slices" or "ps".
fn one_worker(arrivals: Value, router: Value, sharing: &str, seed: u64) -> String {
    json!({
        "arrivals": arrivals,
        "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": M}}]},
        "fleet": {"dynos": 1, "cores": 1, "cpu_sharing": sharing, "cpu_jitter": 0},
        "app": {"server": "gunicorn", "worker_class": "sync", "processes": 1},
        "router": router,
        "run": {"duration": 400.0, "warmup": 20.0, "replications": 10, "seed": seed},
    })
    .to_string()
}

/// A closed loop of N clients without think time on one worker keeps the core busy at every
/// instant (a request is always in its CPU phase), so the core does a request's app work and
/// the router's, M + C, per response whatever the order it does them in: throughput
/// 1/(M + C), and by Little's law a mean response of N (M + C). Without the router on the
/// machine it would be 1/M: the test tells them apart by 23%.
#[test]
fn a_busy_core_answers_one_request_per_app_and_router_work() {
    const { assert!((1.0 / M - 1.0 / (M + C)) * (M + C) > 0.2) };
    for sharing in ["slices", "ps"] {
        for clients in [1u32, 4] {
            let doc = one_worker(
                json!({"process": "closed", "clients": clients, "think": 0}),
                json!({"policy": "random", "colocated_cpu": C}),
                sharing,
                11 + u64::from(clients),
            );
            let report = run_ok(&build(&doc));
            let what = format!("{sharing}, {clients} client(s)");
            assert_matches(
                &format!("{what}: throughput 1/(M + C)"),
                Measured::over_replications(&report, |r| r.throughput),
                1.0 / (M + C),
                0.05,
            );
            assert_matches(
                &format!("{what}: mean response N (M + C)"),
                Measured::over_replications(&report, |r| r.response.mean),
                f64::from(clients) * (M + C),
                0.05,
            );
            for r in &report.per_replication {
                let busy = r.dyno.as_ref().expect("the dyno model").cpu_utilisation;
                assert!(busy > 1.0 - 1e-9, "{what}: the core idled: {busy}");
            }
        }
    }
}

/// Open Poisson arrivals at λ on the same worker. The core is busy λ (M + C) of the time (all
/// the work offered, done), the throughput is λ, and the mean response lies between two
/// bounds that hold request by request:
/// - below, M/M/1 of the app's work alone, M/(1 − λM): the router's work can only delay a
///   request's CPU phase, never shorten it;
/// - above, the rest of the core's busy period an arrival finds. Every request that arrives in
///   a busy period brings all of its work, Y = S + C, within it (its CPU phase starts when the
///   worker frees, the response's half when it ends: both while the core is busy), so the busy
///   periods are an M/G/1's of service Y, and a request is answered by the end of its own. An
///   arrival finds work V (Pollaczek–Khinchine: E[V] = λE[Y²]/(2(1 − ρ)), ρ = λE[Y]) and
///   brings Y, which with what arrives meanwhile takes (E[V] + E[Y])/(1 − ρ).
#[test]
fn open_arrivals_keep_their_throughput_and_load_the_core_with_the_router_s_work() {
    let rate = 40.0;
    let rho = rate * (M + C);
    let second = 2.0 * M * M + 2.0 * C * M + C * C;
    let lower = M / (1.0 - rate * M);
    let upper = ((M + C) + rate * second / (2.0 * (1.0 - rho))) / (1.0 - rho);
    for sharing in ["slices", "ps"] {
        let doc = one_worker(
            json!({"process": "poisson", "rate": rate}),
            json!({"policy": "random", "colocated_cpu": C}),
            sharing,
            21,
        );
        let report = run_ok(&build(&doc));
        assert_matches(
            &format!("{sharing}: CPU utilisation λ (M + C)"),
            Measured::over_replications(&report, |r| {
                r.dyno.as_ref().expect("the dyno model").cpu_utilisation
            }),
            rho,
            0.05,
        );
        assert_matches(
            &format!("{sharing}: throughput λ"),
            Measured::over_replications(&report, |r| r.throughput),
            rate,
            0.05,
        );
        let response = Measured::over_replications(&report, |r| r.response.mean);
        let slack = k_for(response.df) * response.std_error;
        println!(
            "{sharing}: mean response {:.6} ± {:.6} between {lower:.6} and {upper:.6}",
            response.mean, response.std_error
        );
        assert!(
            response.mean + slack >= lower && response.mean - slack <= upper,
            "{sharing}: mean response {} ± {slack} outside [{lower}, {upper}]",
            response.mean
        );
        // The bounds are apart by more than the estimate's spread: each could fail.
        assert!(slack < 0.1 * (upper - lower));
    }
}

/// Two dynos of Puma (2 × 3 threads, the GVL), random routing, jitter, the given phases and
/// server CPU (`app.request_cpu`): the same scenario with and without the router on the
/// machine.
fn two_dynos(phases: Value, request_cpu: &str, colocated: Option<Value>, sharing: &str) -> String {
    let mut router = json!({"policy": "random"});
    if let Some(c) = colocated {
        router["colocated_cpu"] = c;
    }
    json!({
        "arrivals": {"process": "poisson", "rate": 60.0},
        "request": {"phases": phases},
        "fleet": {"dynos": 2, "cores": 2, "cpu_sharing": sharing, "cpu_jitter": 0.1},
        "app": {"server": "puma", "processes": 2, "threads": 3, "request_cpu": request_cpu},
        "router": router,
        "run": {"duration": 200.0, "warmup": 10.0, "replications": 12, "seed": 31},
    })
    .to_string()
}

/// The router's work is drawn from a stream of its own and is no request's phase: with an
/// open workload the same requests arrive with the same phases (bit for bit) with or without
/// it, and it is not counted in their service time.
#[test]
fn the_router_s_work_leaves_the_requests_and_their_draws_alone() {
    let phases = json!([
        {"cpu": {"distribution": "exponential", "mean": "8ms"}},
        {"io": {"distribution": "exponential", "mean": "20ms"}},
    ]);
    let colocated = json!({"distribution": "exponential", "mean": "1ms"});
    for sharing in ["slices", "ps"] {
        let without = run_ok(&build(&two_dynos(phases.clone(), "0.5ms", None, sharing)));
        let with = run_ok(&build(&two_dynos(
            phases.clone(),
            "0.5ms",
            Some(colocated.clone()),
            sharing,
        )));
        for (a, b) in without.per_replication.iter().zip(&with.per_replication) {
            assert_eq!(a.requests, b.requests, "{sharing}: the same arrivals");
            assert_eq!(
                a.service_mean.to_bits(),
                b.service_mean.to_bits(),
                "{sharing}: the same drawn phases"
            );
            assert!(
                b.response.mean > a.response.mean,
                "{sharing}: it takes cores"
            );
        }
    }
}

/// Requests that never compute are never delayed by it (it takes only cores), and the cores
/// are busy exactly with its work: λ E[colocated] / (dynos × cores).
#[test]
fn requests_without_cpu_are_not_delayed_and_the_cores_do_its_work() {
    let phases = json!([{"io": {"distribution": "exponential", "mean": "20ms"}}]);
    let mean = 0.004;
    let colocated = json!({"distribution": "exponential", "mean": mean});
    for sharing in ["slices", "ps"] {
        let without = run_ok(&build(&two_dynos(phases.clone(), "0s", None, sharing)));
        let with = run_ok(&build(&two_dynos(
            phases.clone(),
            "0s",
            Some(colocated.clone()),
            sharing,
        )));
        for (a, b) in without.per_replication.iter().zip(&with.per_replication) {
            assert_eq!(a.response.mean.to_bits(), b.response.mean.to_bits());
            assert_eq!(a.response.p99.to_bits(), b.response.p99.to_bits());
            assert_eq!(a.queue.mean.to_bits(), b.queue.mean.to_bits());
        }
        assert_matches(
            &format!("{sharing}: CPU utilisation of the router alone"),
            Measured::over_replications(&with, |r| {
                r.dyno.as_ref().expect("the dyno model").cpu_utilisation
            }),
            60.0 * mean / (2.0 * 2.0),
            0.05,
        );
    }
}
