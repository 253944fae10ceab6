//! Timeouts and caps against queueing theory and against cases worked out by hand: the
//! router's timeout with work that continues (H12, M/M/1's late fraction), a router queue whose
//! requests give up (M/M/c+M, Erlang-A), a cap on the requests in flight (M/M/c/K loss),
//! Little's law with losses, and the client's timeout in a closed loop. Tolerances are k
//! standard errors over replications, each with the resolution it must have (see
//! `common/mod.rs`). Times are in units of the mean service time (1 s).

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::theory::{erlang_a, mm1_late_fraction, mmck_blocking};
use dynosim_engine::{never_interrupted, run_replication, ReplicationResult, RunReport};
use serde_json::{json, Value};

fn measure(report: &RunReport, f: impl Fn(&ReplicationResult) -> f64) -> Measured {
    Measured::over_replications(report, f)
}

/// Poisson arrivals at `rate` on `dynos` single-thread dynos, exponential service of mean 1 s,
/// the router as given.
fn scenario(rate: f64, dynos: u32, router: Value, seed: u64) -> String {
    json!({
        "name": "timeouts",
        "arrivals": {"process": "poisson", "rate": rate},
        "service": {"distribution": "exponential", "mean": 1.0},
        "fleet": {"dynos": dynos},
        "router": router,
        "run": {"duration": 20_000.0, "warmup": 200.0, "replications": 20, "seed": seed},
    })
    .to_string()
}

/// M/M/1 whose router answers at T while the dyno works on (H12): the dyno's queue is M/M/1's
/// whatever the timeout, so the fraction answered late is P(sojourn > T) = e^{−(μ−λ)T}; the
/// queue time is M/M/1's; the client's response is min(sojourn, T); and a late request wastes
/// its thread from T (or its start, if later) to its end: per request
/// E[min(S, (W_q + S − T)⁺)] = P(W_q ≥ T)/μ + E[e^{−μ(T − W_q)}; W_q < T]/μ, which with W_q's
/// atom 1 − ρ at 0 and Exp(μ − λ) otherwise sums to e^{−(μ−λ)T} / μ.
#[test]
fn the_router_timeout_answers_mm1_late_requests_and_the_dyno_works_on() {
    let (lambda, mu) = (0.7, 1.0);
    for (deadline, seed) in [(3.0, 1), (7.0, 2)] {
        let s = build(&scenario(
            lambda,
            1,
            json!({"policy": "random", "timeout": deadline}),
            seed,
        ));
        let report = run_ok(&s);
        let label = format!("M/M/1, router.timeout {deadline}");
        let late = mm1_late_fraction(lambda, mu, deadline).unwrap();
        assert_matches(
            &format!("{label}: errors.h12"),
            measure(&report, |r| r.errors.h12),
            late,
            0.15,
        );
        assert_matches(
            &format!("{label}: queue.mean (the dyno's, unchanged)"),
            measure(&report, |r| r.queue.mean),
            lambda / (mu * (mu - lambda)),
            0.06,
        );
        // E[min(W, T)] = (1 − e^{−(μ−λ)T}) / (μ − λ) for W ~ Exp(μ − λ).
        assert_matches(
            &format!("{label}: response.mean (the client's)"),
            measure(&report, |r| r.response.mean),
            (1.0 - late) / (mu - lambda),
            0.05,
        );
        assert_matches(
            &format!("{label}: wasted thread-seconds per request"),
            measure(&report, |r| r.wasted.thread_seconds / r.requests as f64),
            late / mu,
            0.2,
        );
        for r in &report.per_replication {
            assert_eq!(r.error_counts.total, r.error_counts.h12);
            assert!(
                r.response.max <= deadline + 1e-6,
                "{label}: {}",
                r.response.max
            );
            assert!(r.response_ok.max <= deadline + 1e-6);
            // The late requests are answered (errors count as answers), the dyno does all.
            let answered = r.throughput * 20_000.0;
            assert!((answered - r.requests as f64).abs() < 50.0, "{label}");
            assert!(r.goodput < r.throughput);
        }
    }
}

/// One `intelligent` router holding requests for c single-thread dynos, whose held requests
/// give up after an exponential patience (`router.queue_timeout`): M/M/c+M, Erlang-A. Stable
/// above capacity too (ρ = 1.1 here), which the run must not refuse.
#[test]
fn the_router_queue_timeout_is_erlang_a() {
    let (c, mean_patience) = (4u32, 2.0);
    for (lambda, seed) in [(3.0, 11), (4.4, 12)] {
        let router = json!({"policy": "intelligent", "timeout": "off",
                            "queue_timeout": {"distribution": "exponential", "mean": mean_patience}});
        let s = build(&scenario(lambda, c, router, seed));
        let report = run_ok(&s);
        let theory = erlang_a(c, lambda, 1.0, mean_patience).unwrap();
        let label = format!("M/M/{c}+M, lambda {lambda}");
        assert_matches(
            &format!("{label}: errors.queue_timeout = P(abandon)"),
            measure(&report, |r| r.errors.queue_timeout),
            theory.p_abandon,
            0.05,
        );
        // Waited: those served after a wait, and every one that gave up.
        assert_matches(
            &format!("{label}: P(wait)"),
            measure(&report, |r| {
                let gave_up = r.error_counts.queue_timeout as f64;
                let served = r.requests as f64 - gave_up;
                (r.queued_fraction * served + gave_up) / r.requests as f64
            }),
            theory.p_wait,
            0.03,
        );
        for r in &report.per_replication {
            assert_eq!(r.error_counts.total, r.error_counts.queue_timeout);
        }
    }
}

/// A cap of K requests in flight on one router: with `intelligent` over c single-thread dynos
/// the router's requests are the system's, so arrivals beyond K are lost as in M/M/c/K
/// (PASTA: the blocking probability); with `random` on one dyno, M/M/1/K. Little's law with
/// losses: busy threads = accepted rate × E[S], and the throughput is the accepted rate plus
/// the refusals (answered at once).
#[test]
fn the_in_flight_cap_is_mmck_loss() {
    for (policy, c, k, lambda, seed) in [
        ("intelligent", 3u32, 5u32, 3.3, 21),
        ("random", 1, 3, 0.9, 22),
    ] {
        let router = json!({"policy": policy, "timeout": "off", "max_in_flight": k});
        let s = build(&scenario(lambda, c, router, seed));
        let report = run_ok(&s);
        let blocking = mmck_blocking(c, k, lambda, 1.0).unwrap();
        let label = format!("M/M/{c}/{k} ({policy}), lambda {lambda}");
        assert_matches(
            &format!("{label}: errors.h11 = blocking"),
            measure(&report, |r| r.errors.h11),
            blocking,
            0.06,
        );
        let accepted = lambda * (1.0 - blocking);
        assert_matches(
            &format!("{label}: goodput = lambda (1 - blocking)"),
            measure(&report, |r| r.goodput),
            accepted,
            0.02,
        );
        assert_matches(
            &format!("{label}: busy threads = accepted x E[S] (Little)"),
            measure(&report, |r| r.utilisation.mean * f64::from(c)),
            accepted,
            0.02,
        );
        assert_matches(
            &format!("{label}: throughput = lambda (refusals are answers)"),
            measure(&report, |r| r.throughput),
            lambda,
            0.02,
        );
        for r in &report.per_replication {
            assert_eq!(r.error_counts.total, r.error_counts.h11);
            assert!(r.max_queue_depth.router + r.max_queue_depth.dyno <= u64::from(k - 1));
        }
    }
}

/// A closed loop of one client, no think time, `requests = 3`, on one single-thread dyno
/// behind `intelligent`, constant 10 s service, a 4 s router timeout: worked out by hand.
/// Request 1 is sent at 0 and starts at once; the router answers H12 at 4 and no longer counts
/// it, so the client's request 2 (sent at 4) goes to the same dyno, still busy until 10, and
/// waits; it starts at 10 and is answered H12 at 8; request 3 is sent at 8, starts at 20, is
/// answered at 12. Queue times 0, 6, 12; every response 4 s; the dyno works until 30.
/// Thread-seconds wasted: 10 − 4, 20 − 10, 30 − 20.
#[test]
fn an_h12_frees_the_router_but_not_the_dyno() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 1, "requests": 3},
        "service": {"distribution": "constant", "value": "10s"},
        "fleet": {"dynos": 1},
        "router": {"policy": "intelligent", "timeout": "4s"},
        "run": {"replications": 2},
    });
    let s = build(&doc.to_string());
    let r = run_replication(&s, 0, &never_interrupted).unwrap();
    assert_eq!(r.requests, 3);
    assert_eq!(r.error_counts.h12, 3);
    assert_eq!(r.error_counts.total, 3);
    assert_eq!(r.errors.h12, 1.0);
    assert!((r.queue.mean - 6.0).abs() < 1e-9, "{}", r.queue.mean);
    assert!((r.queue.max - 12.0).abs() < 1e-9);
    assert!((r.response.mean - 4.0).abs() < 1e-9);
    assert_eq!(r.response_ok.mean, 0.0);
    assert!(
        (r.wasted.thread_seconds - 26.0).abs() < 1e-9,
        "{}",
        r.wasted.thread_seconds
    );
    let closed = r.closed_loop.as_ref().unwrap();
    assert_eq!((closed.completed, closed.failed), (3, 3));
    // The last answer to the client comes at 12 s.
    assert!((closed.elapsed - 12.0).abs() < 1e-9, "{}", closed.elapsed);
}

/// The client's own timeout: it gives up and sends its next request; the router counts the
/// request until the dyno answers it. One client, constant 3 s service, a 1 s client timeout,
/// `requests = 3`, random routing to one dyno: sent at 0, 1, 2 (each answered with its error a
/// second later); started at 0, 3, 6; ended at 3, 6, 9. Queue times 0, 2, 4. Wasted: 3 − 1,
/// then (start later than the error) 3 and 3.
#[test]
fn a_client_timeout_moves_the_client_on() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 1, "requests": 3, "timeout": "1s"},
        "service": {"distribution": "constant", "value": "3s"},
        "fleet": {"dynos": 1},
        "router": {"policy": "random"},
        "run": {"replications": 2},
    });
    let s = build(&doc.to_string());
    let r = run_replication(&s, 0, &never_interrupted).unwrap();
    assert_eq!(r.error_counts.client_timeout, 3);
    assert_eq!(r.error_counts.h12, 0);
    assert!((r.queue.mean - 2.0).abs() < 1e-9, "{}", r.queue.mean);
    assert!((r.response.mean - 1.0).abs() < 1e-9);
    assert!(
        (r.wasted.thread_seconds - 8.0).abs() < 1e-9,
        "{}",
        r.wasted.thread_seconds
    );
}

/// The client's timeout with the work going on: random routing to c dynos makes each an M/M/1
/// queue of rate λ/c, and since a request whose client has gone is still served, each stays
/// one. Its FCFS response time is Exp(μ − λ/c); against an independent Exp(θ) patience, the
/// client gives up first with probability θ / (θ + μ − λ/c).
#[test]
fn a_client_timeout_races_the_mm1_response_time() {
    let (c, lambda, mean_patience) = (4u32, 3.0, 1.5);
    let doc = json!({
        "name": "client patience",
        "arrivals": {"process": "poisson", "rate": lambda,
                     "timeout": {"distribution": "exponential", "mean": mean_patience}},
        "service": {"distribution": "exponential", "mean": 1.0},
        "fleet": {"dynos": c},
        "router": {"policy": "random", "timeout": "off"},
        "run": {"duration": 20_000.0, "warmup": 200.0, "replications": 20, "seed": 31},
    });
    let report = run_ok(&build(&doc.to_string()));
    let (theta, mu, per_dyno) = (1.0 / mean_patience, 1.0, lambda / f64::from(c));
    assert_matches(
        "M/M/1 per dyno against Exp patience: errors.client_timeout = θ / (θ + μ − λ/c)",
        measure(&report, |r| r.errors.client_timeout),
        theta / (theta + mu - per_dyno),
        0.02,
    );
    // Every request is served, answered or not.
    assert_matches(
        "M/M/1 per dyno against Exp patience: utilisation = λ/(c μ)",
        measure(&report, |r| r.utilisation.mean),
        per_dyno / mu,
        0.02,
    );
}

/// A client's timeout lets the router go, as a proxy closes its connection when its client
/// has: HAProxy with `option abortonclose` frees the server's slot (measured by `dynosim
/// testbed`). One client, two requests of 10 s, a 4 s client timeout, `intelligent` routing
/// to one single-slot dyno: request 1 is sent at 0 and given up at 4; the router no longer
/// counts it, so request 2, sent at 4, goes to the dyno at once, still busy until 10, and
/// waits there (a router still counting request 1 would hold it, and the client's timeout at
/// 8 would drop it from the router's queue, never reaching the dyno). Request 2 is given up at
/// 8, starts at 10 and ends at 20. Queue times 0 and 6; wasted 10 − 4 and 20 − 10.
#[test]
fn a_client_timeout_frees_the_router_but_not_the_dyno() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 1, "requests": 2, "timeout": "4s"},
        "service": {"distribution": "constant", "value": "10s"},
        "fleet": {"dynos": 1},
        "router": {"policy": "intelligent", "timeout": "off"},
        "run": {"replications": 2},
    });
    let s = build(&doc.to_string());
    let r = run_replication(&s, 0, &never_interrupted).unwrap();
    assert_eq!(r.error_counts.client_timeout, 2);
    assert_eq!(r.error_counts.total, 2);
    assert!((r.queue.mean - 3.0).abs() < 1e-9, "{}", r.queue.mean);
    assert!((r.queue.max - 6.0).abs() < 1e-9, "{}", r.queue.max);
    assert!(
        (r.wasted.thread_seconds - 16.0).abs() < 1e-9,
        "{}",
        r.wasted.thread_seconds
    );
    let closed = r.closed_loop.as_ref().unwrap();
    assert!((closed.elapsed - 8.0).abs() < 1e-9, "{}", closed.elapsed);
}

/// A sync worker killed at its timeout T and replaced after B: one worker is M/G/1 with the
/// worker's occupation S' = S if S ≤ T, else T + B. For S ~ Exp(1), with a = e^{−T}:
/// E[S'] = 1 − a + B·a and E[S'²] = 2 − a(T² + 2T + 2) + (T + B)²·a; the requests killed are
/// P(S > T) = a; the wait in the accept queue is Pollaczek–Khinchine's λE[S'²]/(2(1 − λE[S'])).
#[test]
fn a_worker_timeout_kills_and_restarts_as_mg1_predicts() {
    let (lambda, t, b): (f64, f64, f64) = (0.6, 2.0, 0.5);
    let doc = json!({
        "name": "worker timeout",
        "arrivals": {"process": "poisson", "rate": lambda},
        "service": {"distribution": "exponential", "mean": 1.0},
        "fleet": {"dynos": 1},
        "app": {"server": "generic", "model": "sync", "processes": 1, "timeout": t,
                "worker_boot_time": b},
        "router": {"policy": "random", "timeout": "off"},
        "run": {"duration": 20_000.0, "warmup": 200.0, "replications": 20, "seed": 41},
    });
    let report = run_ok(&build(&doc.to_string()));
    let a = (-t).exp();
    let es = 1.0 - a + b * a;
    let es2 = 2.0 - a * (t * t + 2.0 * t + 2.0) + (t + b).powi(2) * a;
    assert_matches(
        "sync worker, app.timeout 2, boot 0.5: errors.app_timeout = P(S > T)",
        measure(&report, |r| r.errors.app_timeout),
        a,
        0.05,
    );
    assert_matches(
        "sync worker, app.timeout 2, boot 0.5: queue.mean (P-K with S')",
        measure(&report, |r| r.queue.mean),
        lambda * es2 / (2.0 * (1.0 - lambda * es)),
        0.06,
    );
    // The worker is busy (not booting) min(S, T) of each request.
    assert_matches(
        "sync worker, app.timeout 2, boot 0.5: utilisation = lambda E[min(S, T)]",
        measure(&report, |r| r.utilisation.mean),
        lambda * (1.0 - a),
        0.02,
    );
    for r in &report.per_replication {
        assert_eq!(r.error_counts.total, r.error_counts.app_timeout);
        assert!(r.response_ok.max <= t + 1e-9 + r.queue.max);
    }
}

/// A router with a cost: a FIFO server in front of the dynos. With dynos that never make a
/// request wait (a thousand of them, 1 µs of service), the queue time is the router's M/M/1
/// sojourn, 1/(μ − λ).
#[test]
fn a_router_with_a_cost_is_an_mm1_queue() {
    let (lambda, mu) = (0.7, 1.0);
    let doc = json!({
        "name": "router cost",
        "arrivals": {"process": "poisson", "rate": lambda},
        "service": {"distribution": "constant", "value": "1us"},
        "fleet": {"dynos": 1000},
        "router": {"policy": "random", "timeout": "off",
                   "cost": {"distribution": "exponential", "mean": 1.0 / mu}},
        "run": {"duration": 20_000.0, "warmup": 200.0, "replications": 20, "seed": 51},
    });
    let report = run_ok(&build(&doc.to_string()));
    assert_matches(
        "M/M/1 router: queue.mean = 1/(mu - lambda)",
        measure(&report, |r| r.queue.mean),
        1.0 / (mu - lambda),
        0.06,
    );
    // PASTA: an arrival finds the router busy with probability ρ.
    assert_matches(
        "M/M/1 router: queued_fraction = rho",
        measure(&report, |r| r.queued_fraction),
        lambda / mu,
        0.02,
    );
}

/// Load shedding: a request that would wait more than L for its router (a FIFO server whose
/// workload V it sees) is answered at once. For M/M/1 the workload's density is λP₀e^{−(μ−λ)v}
/// up to L and f(L)e^{−μ(v−L)} beyond (level crossing), so P(shed) = P(V > L) =
/// (λ/μ)P₀e^{−(μ−λ)L} with P₀ = 1 / (1 + λ(1 − e^{−(μ−λ)L})/(μ − λ) + (λ/μ)e^{−(μ−λ)L}).
/// Stable at any load: here λ = 1.3μ, which the run must not refuse.
#[test]
fn router_load_shedding_bounds_the_routers_workload() {
    let (lambda, mu, ceiling): (f64, f64, f64) = (1.3, 1.0, 2.0);
    let doc = json!({
        "name": "shedding",
        "arrivals": {"process": "poisson", "rate": lambda},
        "service": {"distribution": "constant", "value": "1us"},
        "fleet": {"dynos": 1000},
        "router": {"policy": "random", "timeout": "off", "shed_latency": ceiling,
                   "cost": {"distribution": "exponential", "mean": 1.0 / mu}},
        "run": {"duration": 20_000.0, "warmup": 200.0, "replications": 20, "seed": 52},
    });
    let report = run_ok(&build(&doc.to_string()));
    let decay = (-(mu - lambda) * ceiling).exp();
    let p0 = 1.0 / (1.0 + lambda * (1.0 - decay) / (mu - lambda) + lambda / mu * decay);
    let shed = lambda / mu * p0 * decay;
    assert_matches(
        "M/M/1 router shedding past L = 2, lambda = 1.3 mu: errors.shed = P(V > L)",
        measure(&report, |r| r.errors.shed),
        shed,
        0.03,
    );
    // What is not shed goes through: goodput = λ(1 − P(shed)), below the router's μ.
    assert_matches(
        "M/M/1 router shedding: goodput = lambda (1 - P(shed))",
        measure(&report, |r| r.goodput),
        lambda * (1.0 - shed),
        0.02,
    );
    for r in &report.per_replication {
        assert!(r.queue.max <= ceiling + 50.0, "{}", r.queue.max);
        assert_eq!(r.error_counts.total, r.error_counts.shed);
    }
}

/// A listen backlog of K − 1 on one single-thread dyno, no retries: a request finding K in
/// the system (one in service, K − 1 waiting) is refused, as in M/M/1/K, which is stable at
/// every load: so is the scenario, at 0.9 and at 1.5 of its capacity.
#[test]
fn a_full_backlog_refuses_as_mm1k() {
    a_full_backlog_refuses_as_mm1k_at(0.9);
    a_full_backlog_refuses_as_mm1k_at(1.5);
}

fn a_full_backlog_refuses_as_mm1k_at(lambda: f64) {
    let k = 4u32;
    let doc = json!({
        "name": "backlog",
        "arrivals": {"process": "poisson", "rate": lambda},
        "service": {"distribution": "exponential", "mean": 1.0},
        "fleet": {"dynos": 1},
        "app": {"server": "generic", "model": "sync", "processes": 1, "backlog": k - 1},
        "router": {"policy": "random", "timeout": "off", "retries": 0},
        "run": {"duration": 20_000.0, "warmup": 200.0, "replications": 20, "seed": 61},
    });
    let report = run_ok(&build(&doc.to_string()));
    let blocking = mmck_blocking(1, k, lambda, 1.0).unwrap();
    assert_matches(
        &format!("M/M/1/4 by the backlog at load {lambda}: errors.h13 = blocking"),
        measure(&report, |r| r.errors.h13),
        blocking,
        0.06,
    );
    for r in &report.per_replication {
        assert!(r.max_queue_depth.dyno <= u64::from(k - 1));
        assert_eq!(r.error_counts.total, r.error_counts.h13);
    }
}

/// A retry goes to another dyno than the one that refused, as Heroku's router and HAProxy's
/// redispatch do. Five clients send one request each at 0, at random, to two single-thread
/// dynos with a backlog of 1 (room for 4 in all), one retry: the first four always find room
/// (one refused by a full dyno is retried on the other, which has room), the fifth is refused
/// twice: exactly one H13 whatever the draws. A retry drawn at random could find the same
/// full dyno again, and a second H13, in about half the replications.
#[test]
fn a_retry_avoids_the_dyno_that_refused() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 5, "requests": 5},
        "service": {"distribution": "constant", "value": "10s"},
        "fleet": {"dynos": 2},
        "app": {"server": "generic", "model": "sync", "processes": 1, "backlog": 1},
        "router": {"policy": "random", "timeout": "off", "retries": 1},
        "run": {"replications": 30, "seed": 71},
    });
    let report = run_ok(&build(&doc.to_string()));
    for r in &report.per_replication {
        assert_eq!(r.error_counts.h13, 1, "{:?}", r.error_counts);
        assert_eq!(r.error_counts.total, 1);
    }
}

/// The router's retries, by hand: one single-thread dyno with a backlog of 1, constant 1 s
/// service, three clients sending at 0 (`requests = 3`: one each), 2 retries 100 ms apart.
/// The first starts, the second waits in the backlog, the third is refused at 0, 0.1 and
/// 0.2 s: H13 at 0.2 s. Responses 1 s and 2 s; the error's 0.2 s.
#[test]
fn refused_requests_are_retried_then_answered_with_an_error() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 3, "requests": 3},
        "service": {"distribution": "constant", "value": "1s"},
        "fleet": {"dynos": 1},
        "app": {"server": "generic", "model": "sync", "processes": 1, "backlog": 1},
        "router": {"policy": "random", "retries": 2, "retry_delay": "100ms"},
        "run": {"replications": 2},
    });
    let r = run_replication(&build(&doc.to_string()), 0, &never_interrupted).unwrap();
    // Three requests in all: two served (queue 0 and 1 s), one refused three times.
    assert_eq!(r.requests, 3);
    assert_eq!(r.error_counts.h13, 1);
    assert_eq!(r.error_counts.total, 1);
    assert!((r.response.max - 2.0).abs() < 1e-9, "{}", r.response.max);
    // The refused request's client got its error after the two retries' delays.
    let error_time = r.response.mean * 3.0 - (1.0 + 2.0);
    assert!((error_time - 0.2).abs() < 1e-6, "{error_time}");
}

/// A worker killed by its timeout frees the router's count at its dyno: an `intelligent`
/// router holding requests sends the next one there (where it waits for the replacement). A
/// closed loop of more clients than workers, every request longer than the timeout: every
/// request is answered (killed), none is left held at the router. (Found by the fuzz target:
/// the router was not told, and the run ended with requests held.)
#[test]
fn a_killed_worker_lets_an_intelligent_router_send_what_it_holds() {
    let doc = json!({
        "arrivals": {"process": "closed", "clients": 5, "requests": 40},
        "service": {"distribution": "constant", "value": "100ms"},
        "fleet": {"dynos": 1},
        "app": {"server": "generic", "model": "sync", "processes": 2, "timeout": "30ms",
                "worker_boot_time": "20ms"},
        "router": {"policy": "intelligent"},
        "run": {"replications": 2},
    });
    let r = run_replication(&build(&doc.to_string()), 0, &never_interrupted).unwrap();
    assert_eq!(r.requests, 40);
    assert_eq!(r.error_counts.app_timeout, 40);
    assert_eq!(r.closed_loop.as_ref().unwrap().completed, 40);
}
