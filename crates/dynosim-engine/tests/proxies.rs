//! The policies of production proxies against their theory: HAProxy's `first` against Erlang's
//! loss formula, Envoy's `least_request` against the policies it reduces to, and consistent
//! hashing with bounded loads (HAProxy's `hash-balance-factor`) against plain consistent
//! hashing. The rules, sources and theory are in docs/model.md ("Policies of production
//! proxies").
//!
//! Every tolerance is k standard errors of the estimate over replications (see
//! `common/mod.rs`); a comparison of two policies asks their difference to exceed k standard
//! errors of the difference. Run with `--nocapture` to see each estimate beside its theory.

mod common;

use common::{assert_matches, build, k_for, run_ok, scenario_json, Measured};
use dynosim_engine::{never_interrupted, run_replication, ReplicationResult, Scenario};
use rayon::prelude::*;
use serde_json::{json, Value};

/// Runs every replication of the scenario and keeps each one's figures whole (the report keeps
/// the per-dyno utilisations only as their mean).
fn replications(s: &Scenario) -> Vec<ReplicationResult> {
    (0..u64::from(s.replications))
        .into_par_iter()
        .map(|r| run_replication(s, r, &never_interrupted).expect("runs"))
        .collect()
}

/// The scenario's text with changes made to it.
fn with(json: String, change: impl FnOnce(&mut Value)) -> String {
    let mut doc: Value = serde_json::from_str(&json).expect("JSON");
    change(&mut doc);
    doc.to_string()
}

// ---------------------------------------------------------------------------------------------
// HAProxy's `first`: Erlang's loss formula, dyno by dyno.

/// Erlang's loss formula B(servers, a), by the stable recursion B(k) = aB(k−1)/(k + aB(k−1)).
fn erlang_b(servers: u32, a: f64) -> f64 {
    (1..=servers).fold(1.0, |b, k| a * b / (f64::from(k) + a * b))
}

/// Erlangs dyno k (from 1) carries under `first`: the first k dynos are a loss system of kc
/// servers whose overflow goes on to the next dyno, so dyno k carries what k − 1 dynos lose
/// and k do not: a·[B((k−1)c, a) − B(kc, a)].
fn carried(k: u32, slots: u32, a: f64) -> f64 {
    a * (erlang_b((k - 1) * slots, a) - erlang_b(k * slots, a))
}

/// The formula as written in ../shared/docs/BALANCERS.md §A.4.5 for c = 1, a = 8: a check of
/// the test's own theory.
#[test]
fn erlang_b_reproduces_the_published_overflow_table() {
    let published = [
        0.889, 0.867, 0.840, 0.807, 0.765, 0.714, 0.653, 0.581, 0.499, 0.412, 0.323, 0.239, 0.166,
        0.108, 0.065, 0.037,
    ];
    for (k, &p) in (1..).zip(&published) {
        let c = carried(k, 1, 8.0);
        assert!((c - p).abs() < 5e-4, "dyno {k}: {c:.4} against {p}");
    }
    // And Erlang B itself at a textbook value: B(10, 5) = 0.01838.
    assert!((erlang_b(10, 5.0) - 0.018_38).abs() < 1e-5);
}

/// `first` with one router and Poisson arrivals at a = λE[S] Erlangs: each of the first
/// `checked` dynos is busy a fraction carried(k)/c of the time, whatever the service
/// distribution (Erlang B is insensitive to it). Enough dynos that the router's queue stays
/// empty (B(n·c, a) below 10⁻⁶), so the loss system is exact. 20 replications of 3000 E[S].
fn first_fills_dynos_as_erlang_loss_overflow(label: &str, service: Value, slots: u32, seed: u64) {
    let (a, dynos, checked) = (8.0, 32 / slots, 12 / slots);
    let probe = build(&scenario_json(
        1.0,
        service.clone(),
        1,
        1,
        json!({"policy": "random"}),
        (1.0, 0.0, 1, 1),
    ));
    let es = probe.service.mean();
    let s = build(&scenario_json(
        a / es,
        service,
        dynos,
        slots,
        json!({"policy": "first"}),
        (3000.0 * es, 100.0 * es, 20, seed),
    ));
    assert!(erlang_b(dynos * slots, a) < 1e-6, "the router would queue");
    let results = replications(&s);
    for k in 1..=checked {
        let busy: Vec<f64> = results
            .iter()
            .map(|r| r.utilisation.per_dyno[k as usize - 1])
            .collect();
        assert_matches(
            &format!("first, {label}, {slots} slots, a = {a}: dyno {k} busy"),
            Measured::of(&busy),
            carried(k, slots, a) / f64::from(slots),
            0.05,
        );
    }
    // The dynos past the loss system's reach are (nearly) idle: the work is packed.
    let last: f64 = results
        .iter()
        .map(|r| r.utilisation.per_dyno[dynos as usize - 1])
        .sum::<f64>()
        / results.len() as f64;
    assert!(last < 1e-3, "dyno {dynos} busy {last}");
}

#[test]
fn first_with_exponential_service_carries_erlang_overflow() {
    first_fills_dynos_as_erlang_loss_overflow(
        "exponential",
        json!({"distribution": "exponential", "mean": 1.0}),
        1,
        601,
    );
}

#[test]
fn first_with_lognormal_service_carries_the_same_erlang_overflow() {
    // E[S²]/E[S]² = e^(σ²) = 2.7: far from exponential, the same carried loads.
    first_fills_dynos_as_erlang_loss_overflow(
        "lognormal(sigma 1)",
        json!({"distribution": "lognormal", "median": "50ms", "sigma": 1.0}),
        1,
        602,
    );
}

#[test]
fn first_with_constant_service_and_two_slots_carries_erlang_overflow() {
    first_fills_dynos_as_erlang_loss_overflow(
        "constant",
        json!({"distribution": "constant", "value": "100ms"}),
        2,
        603,
    );
}

// ---------------------------------------------------------------------------------------------
// Envoy's least request.

/// One router (or three), 10 single-slot dynos at load 0.8, exponential service, on the
/// event-driven engine (so that two policies that make the same draws give the same figures to
/// the last bit); 20 replications of 300 s.
fn ten_dynos(router: Value, routers: u32, seed: u64) -> String {
    ten_dynos_for(router, routers, seed, 300.0)
}

/// [`ten_dynos`] over replications of `duration` seconds.
fn ten_dynos_for(router: Value, routers: u32, seed: u64, duration: f64) -> String {
    let mut router = router;
    router["routers"] = json!(routers);
    with(
        scenario_json(
            80.0,
            json!({"distribution": "exponential", "mean": "100ms"}),
            10,
            1,
            router,
            (duration, 20.0, 20, seed),
        ),
        |doc| doc["run"]["engine"] = json!("events"),
    )
}

/// The figures two runs must share exactly.
fn same_figures(a: &ReplicationResult, b: &ReplicationResult) -> bool {
    a.requests == b.requests
        && a.response.mean == b.response.mean
        && a.queued_fraction == b.queued_fraction
        && a.utilisation.per_dyno == b.utilisation.per_dyno
}

/// `choice_count = 1` is one random draw: `random` itself, draw for draw.
#[test]
fn least_request_with_one_choice_is_random_routing() {
    for routers in [1, 3] {
        let one = build(&ten_dynos(
            json!({"policy": "least_request", "choice_count": 1}),
            routers,
            611,
        ));
        let random = build(&ten_dynos(json!({"policy": "random"}), routers, 611));
        let (a, b) = (replications(&one), replications(&random));
        assert!(a.iter().zip(&b).all(|(x, y)| same_figures(x, y)));
        assert!(
            a[0].queued_fraction > 0.5,
            "a load under which policies differ"
        );
    }
}

/// The default, two draws with replacement and a tie to the earlier, is HAProxy's
/// `random(2)`: `power_of_d` with `distinct = false`, draw for draw.
#[test]
fn least_request_by_default_is_two_choices_with_replacement() {
    for routers in [1, 3] {
        let lr = build(&ten_dynos(json!({"policy": "least_request"}), routers, 612));
        let p2 = build(&ten_dynos(
            json!({"policy": "power_of_d", "d": 2, "distinct": false}),
            routers,
            612,
        ));
        let (a, b) = (replications(&lr), replications(&p2));
        assert!(a.iter().zip(&b).all(|(x, y)| same_figures(x, y)));
        // And not the distinct pair, which is better at n = 10 (over longer runs).
        let mean = |router: Value| {
            let s = build(&ten_dynos_for(router, routers, 613, 1500.0));
            Measured::over_replications(&run_ok(&s), |r| r.response.mean)
        };
        assert_below(
            &mean(json!({"policy": "power_of_d", "d": 2})),
            &mean(json!({"policy": "least_request"})),
            "distinct pair",
            "least_request",
        );
    }
}

/// `x` lies below `y` by more than k standard errors of their difference.
fn assert_below(x: &Measured, y: &Measured, x_name: &str, y_name: &str) {
    let k = k_for(x.df.min(y.df));
    let margin = k * (x.std_error.powi(2) + y.std_error.powi(2)).sqrt();
    println!(
        "{x_name} {:.5} ± {:.5} below {y_name} {:.5} ± {:.5}: difference {:.5}, margin {margin:.5}",
        x.mean,
        x.std_error,
        y.mean,
        y.std_error,
        y.mean - x.mean
    );
    assert!(
        y.mean - x.mean > margin,
        "{x_name} ({:.5}) is not below {y_name} ({:.5}) by more than {margin:.5}",
        x.mean,
        y.mean
    );
}

/// `active_request_bias = 0` is a plain round robin (Envoy's EDF with equal weights): the same
/// mean response as `round_robin` within k standard errors of the difference, which is sharp
/// enough to tell round robin from random routing.
#[test]
fn least_request_with_bias_zero_is_round_robin() {
    let mean = |router: Value, seed: u64| {
        let s = build(&ten_dynos_for(router, 1, seed, 1500.0));
        Measured::over_replications(&run_ok(&s), |r| r.response.mean)
    };
    let edf = mean(
        json!({"policy": "least_request", "active_request_bias": 0.0}),
        621,
    );
    let rr = mean(json!({"policy": "round_robin"}), 622);
    let random = mean(json!({"policy": "random"}), 623);
    let k = k_for(19.0);
    let margin = k * (edf.std_error.powi(2) + rr.std_error.powi(2)).sqrt();
    println!(
        "bias 0: {:.5} ± {:.5}, round robin {:.5} ± {:.5}, margin {margin:.5}",
        edf.mean, edf.std_error, rr.mean, rr.std_error
    );
    assert!((edf.mean - rr.mean).abs() <= margin);
    assert!(margin < 0.05 * rr.mean, "too coarse to tell policies apart");
    assert_below(&edf, &random, "bias 0", "random");
}

/// `active_request_bias = 1` weighs each dyno by 1/(active + 1) as of its last pick: better
/// than a round robin, which reads nothing, and worse than least connections, which reads every
/// dyno's load now.
#[test]
fn least_request_with_bias_one_lies_between_round_robin_and_least_connections() {
    let mean = |router: Value, seed: u64| {
        Measured::over_replications(&run_ok(&build(&ten_dynos(router, 1, seed))), |r| {
            r.response.mean
        })
    };
    let edf = mean(
        json!({"policy": "least_request", "active_request_bias": 1.0}),
        631,
    );
    let rr = mean(json!({"policy": "round_robin"}), 632);
    let jsq = mean(json!({"policy": "least_connections"}), 633);
    assert_below(&edf, &rr, "bias 1", "round robin");
    assert_below(&jsq, &edf, "least connections", "bias 1");
}

// ---------------------------------------------------------------------------------------------
// Consistent hashing with bounded loads.

/// 10 single-slot dynos at load `rho`; requests from `users` users by Zipf's law.
fn hashed(policy: Value, users: u32, rho: f64, seed: u64) -> String {
    with(
        scenario_json(
            rho * 10.0 / 0.1,
            json!({"distribution": "exponential", "mean": "100ms"}),
            10,
            1,
            policy,
            (600.0, 60.0, 20, seed),
        ),
        |doc| doc["arrivals"]["keys"] = json!({"users": users, "popularity": "zipf"}),
    )
}

/// With few users by Zipf's law, plain consistent hashing piles the popular users' requests
/// on their dynos (the most popular of 100 sends a fifth of them); bounding the load spreads
/// them and cuts the mean response, the more so the tighter the bound (1.25 against 2).
#[test]
fn bounded_loads_beat_plain_consistent_hashing_with_few_popular_users() {
    let mean = |factor: Value, seed: u64| {
        let s = build(&hashed(
            json!({"policy": "bounded_hash", "factor": factor}),
            100,
            0.25,
            seed,
        ));
        Measured::over_replications(&run_ok(&s), |r| r.response.mean)
    };
    let tight = mean(json!(1.25), 641);
    let loose = mean(json!(2.0), 642);
    let plain = mean(json!("inf"), 643);
    assert_below(&tight, &loose, "factor 1.25", "factor 2");
    assert_below(&loose, &plain, "factor 2", "plain consistent hashing");
}

/// Keys change nothing for a policy that does not read them: their draws are a stream of
/// their own, so the traffic and every other draw are the same.
#[test]
fn keys_leave_other_policies_results_alone() {
    for policy in ["random", "least_connections", "first"] {
        let plain = ten_dynos(json!({"policy": policy}), 2, 651);
        let keyed = with(plain.clone(), |doc| {
            doc["arrivals"]["keys"] = json!({"users": 50})
        });
        let (a, b) = (replications(&build(&plain)), replications(&build(&keyed)));
        assert!(
            a.iter().zip(&b).all(|(x, y)| same_figures(x, y)),
            "{policy}"
        );
    }
}

/// Every policy here works with a fleet that changes: two dynos, five from 600 s, three from
/// 1200 s (dynos booting, coming up and going down under load): no request is lost (requests
/// reach their dynos at once, so none races a dyno's SIGTERM) and none goes to a dyno down
/// (which debug builds assert at every routing).
#[test]
fn the_policies_follow_a_changing_fleet() {
    for router in [
        json!({"policy": "first"}),
        json!({"policy": "least_request"}),
        json!({"policy": "least_request", "active_request_bias": 1.0}),
        json!({"policy": "bounded_hash"}),
        json!({"policy": "bounded_hash", "factor": "inf", "routers": 3}),
    ] {
        let doc = json!({
            "arrivals": {"process": "poisson", "rate": 30.0, "keys": {"users": 200}},
            "service": {"distribution": "exponential", "mean": "50ms"},
            "fleet": {"dynos": 2, "slots": 2, "boot_time": "30s"},
            "router": router,
            "autoscale": {"rule": "schedule", "max": 5, "interval": "60s",
                          "schedule": [["0s", 2], ["600s", 5], ["1200s", 3]]},
            "run": {"duration": "1800s", "warmup": "0s", "replications": 3},
        });
        let s = build(&doc.to_string());
        for r in replications(&s) {
            assert!(r.requests > 40_000, "{router}: {} requests", r.requests);
            assert_eq!(r.error_counts.total, 0, "{router}: {:?}", r.error_counts);
            let f = r.fleet.as_ref().expect("fleet figures");
            assert_eq!((f.size.min, f.size.max), (2.0, 5.0), "{router}");
        }
    }
}

/// Keys are drawn by the event-driven engine alone: a scenario with them is not the direct
/// engine's (asked for by name, it says so; `auto` picks the other).
#[test]
fn a_scenario_with_keys_runs_on_the_event_driven_engine() {
    use dynosim_engine::{run_replication_on, Engine, Error};
    let json = with(
        scenario_json(
            5.0,
            json!({"distribution": "exponential", "mean": "100ms"}),
            4,
            1,
            json!({"policy": "random"}),
            (10.0, 0.0, 1, 1),
        ),
        |doc| doc["arrivals"]["keys"] = json!({"users": 10}),
    );
    let s = build(&json);
    assert_eq!(Engine::for_scenario(&s), Engine::Events);
    match run_replication_on(Engine::Direct, &s, 0, &never_interrupted) {
        Err(Error::Config { path, message }) => {
            assert_eq!(path, "run.engine");
            assert!(message.contains("arrivals.keys"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
