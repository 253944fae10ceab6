//! Services that call services (docs/services.md, "Running calls"): a `call` phase simulated
//! as a request of the callee's fleet, checked against queueing theory with tolerances from
//! the replications' standard errors (see `common`).

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::{never_interrupted, run_replication, ReplicationResult};
use serde_json::{json, Value};

/// An entry fleet whose requests do their own `io` (exponential, mean `own`), then call
/// `api`; `api` serves each call for an exponential time of mean `api_mean` on `api_dynos`
/// dynos of `api_slots` threads each, routed at random. Routers never time out (theory's
/// queues are patient).
fn chain(
    rate: f64,
    own: f64,
    call: Value,
    (api_mean, api_dynos, api_slots): (f64, u32, u32),
    (duration, warmup, replications, seed): (f64, f64, u32, u64),
) -> Value {
    json!({
        "name": "chain",
        "arrivals": {"process": "poisson", "rate": rate},
        // Enough threads that the entry never queues: its requests' time is their own work
        // plus the call's.
        "fleet": {"dynos": 1, "slots": 2000},
        "request": {"phases": [
            {"io": {"distribution": "exponential", "mean": own}},
            call,
        ]},
        "router": {"policy": "random", "timeout": "off"},
        "services": {
            "api": {
                "fleet": {"dynos": api_dynos, "slots": api_slots},
                "service": {"distribution": "exponential", "mean": api_mean},
                "router": {"policy": "random", "timeout": "off"},
            },
        },
        "run": {"duration": duration, "warmup": warmup, "replications": replications,
                "seed": seed},
    })
}

fn api(r: &ReplicationResult) -> &dynosim_engine::result::ServiceFigures {
    &r.services.as_ref().expect("services' figures")["api"]
}

/// A chain of two services with Poisson arrivals, exponential service and random routing is a
/// Jackson network. The entry never queues (2000 threads for about 30 busy): its requests'
/// sojourn is their own work plus the call's response, whatever the holding of the thread
/// does to nobody. The calls leave the entry's `io` phase, an M/M/∞ station, as a Poisson
/// stream (Burke; for M/G/∞ the output is Poisson too), split at random over the api's
/// dynos: each dyno is M/M/1 at ρ = λb/N. Its mean response is b/(1 − ρ), its mean wait
/// ρb/(1 − ρ), and the end-to-end mean a + b/(1 − ρ).
#[test]
fn a_chain_of_two_services_is_a_jackson_network() {
    let (rate, own, b, dynos) = (70.0, 0.1, 0.1, 10);
    let rho = rate * b / f64::from(dynos);
    let doc = chain(
        rate,
        own,
        json!({"call": "api"}),
        (b, dynos, 1),
        (2000.0, 200.0, 20, 7),
    );
    let s = build(&doc.to_string());
    let report = run_ok(&s);
    let callee_response = Measured::over_replications(&report, |r| api(r).fleet.response.mean);
    assert_matches(
        "api: M/M/1 response",
        callee_response,
        b / (1.0 - rho),
        0.05,
    );
    let callee_wait = Measured::over_replications(&report, |r| api(r).fleet.queue.mean);
    assert_matches("api: M/M/1 wait", callee_wait, rho * b / (1.0 - rho), 0.08);
    let whole = Measured::over_replications(&report, |r| r.response.mean);
    assert_matches(
        "end to end: own work + the callee's response",
        whole,
        own + b / (1.0 - rho),
        0.05,
    );
    // Every call was answered, none failed; the api took as many requests as the entry.
    for r in &report.per_replication {
        let calls = &api(r).calls;
        assert_eq!(calls.sent, calls.answered);
        assert_eq!((calls.failed, calls.timed_out, calls.late), (0, 0, 0));
        assert_eq!(r.errors.call_failed, Some(0.0));
        let ratio = api(r).fleet.requests as f64 / r.requests as f64;
        assert!(
            (ratio - 1.0).abs() < 0.01,
            "api requests / entry requests {ratio}"
        );
    }
    // The api's utilisation is ρ; the entry's threads are held through their calls.
    let busy = Measured::over_replications(&report, |r| api(r).fleet.utilisation.mean);
    assert_matches("api: utilisation", busy, rho, 0.03);
}

/// With nothing queueing at the callee (many threads), a call's response is its service time,
/// exponential of mean b: the fraction of calls that outlast the call's timeout T is
/// P(S > T) = exp(−T/b), a binomial proportion over the calls. Without retries each of them
/// fails its request (500, `errors.call_failed`) and is answered late, for nobody; with one
/// retry, a request fails when both tries time out, P(S > T)².
#[test]
fn a_call_timeout_cuts_the_calls_that_outlast_it() {
    let (rate, b, t): (f64, f64, f64) = (50.0, 0.1, 0.15);
    let p = (-t / b).exp();
    for retries in [0u32, 1] {
        let doc = chain(
            rate,
            0.01,
            json!({"call": "api", "timeout": t, "retries": retries}),
            (b, 4, 1000),
            (2000.0, 0.0, 1, 11 + u64::from(retries)),
        );
        let s = build(&doc.to_string());
        let r = run_replication(&s, 0, &never_interrupted).expect("runs");
        let calls = &api(&r).calls;
        assert_matches(
            &format!("retries = {retries}: calls timed out, P(S > T)"),
            Measured::proportion(calls.timed_out, calls.sent, p),
            p,
            0.05,
        );
        // Every try is answered: in time, or late for nobody.
        assert_eq!(calls.answered + calls.late, calls.sent);
        assert_eq!(calls.late, calls.timed_out);
        assert_eq!(
            calls.retried,
            if retries == 0 {
                0
            } else {
                calls.timed_out - calls.failed
            }
        );
        let first_tries = calls.sent - calls.retried;
        let fail = p.powi(retries as i32 + 1);
        assert_matches(
            &format!(
                "retries = {retries}: requests failed, P(S > T)^{}",
                retries + 1
            ),
            Measured::proportion(calls.failed, first_tries, fail),
            fail,
            if retries == 0 { 0.05 } else { 0.12 },
        );
        // Each failed call is its request's 500.
        let counted = r.error_counts.call_failed.expect("shown");
        assert!(
            counted <= calls.failed && calls.failed - counted <= 5,
            "{counted} of {}",
            calls.failed
        );
    }
}

/// Same scenario and seed, same figures to the bit; another seed, others. The entry's
/// streams are the run's own: the services' are derived apart from them.
#[test]
fn a_run_with_services_is_deterministic() {
    let doc = chain(
        40.0,
        0.05,
        json!({"call": "api", "timeout": 0.3, "retries": 1}),
        (0.05, 3, 1),
        (300.0, 30.0, 1, 5),
    );
    let s = build(&doc.to_string());
    let once = |s| serde_json::to_string(&run_replication(s, 0, &never_interrupted).unwrap());
    let (a, b) = (once(&s).unwrap(), once(&s).unwrap());
    assert_eq!(a, b);
    let mut other = doc.clone();
    other["run"]["seed"] = json!(6);
    let c = once(&build(&other.to_string())).unwrap();
    assert_ne!(a, c);
    let parsed: Value = serde_json::from_str(&a).unwrap();
    assert!(
        parsed["services"]["api"]["response"]["mean"]
            .as_f64()
            .unwrap()
            > 0.05
    );
    assert!(parsed["services"]["api"]["calls"]["sent"].as_u64().unwrap() > 10_000);
}

/// A fan-out is not simulated yet: refused in one line at its key path.
#[test]
fn a_fanout_is_refused_until_simulated() {
    let mut doc = chain(
        40.0,
        0.05,
        json!({"fanout": "api", "count": 4}),
        (0.05, 3, 1),
        (300.0, 30.0, 1, 5),
    );
    let s = build(&doc.to_string());
    let e = run_replication(&s, 0, &never_interrupted)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("request.phases[1]: fan-out calls between services are not simulated yet"),
        "{e}"
    );
    doc["request"]["phases"][1] = json!({"call": "api"});
    build(&doc.to_string());
}
