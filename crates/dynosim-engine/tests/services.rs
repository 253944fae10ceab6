//! Services that call services (docs/services.md, "Running calls"): a `call` phase simulated
//! as a request of the callee's fleet, checked against queueing theory with tolerances from
//! the replications' standard errors (see `common`).

mod common;

use common::{assert_matches, assert_matches_with_allowance, build, run_ok, Measured};
use dynosim_engine::{never_interrupted, run_replication, ReplicationResult, RunReport};
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

/// The entry's own work in the fan-out scenarios: a constant, so that a request's response
/// less it is its fan-out phase's time exactly (nothing queues at the entry).
const OWN: f64 = 0.001;

/// A fan-out of `call` from an entry that never queues to an api of exponential service of
/// mean `b` with threads enough that nothing queues there either (4 dynos × 1000, about 20
/// busy): each call's time is its service time, independent of the others.
fn fan(call: Value, b: f64, replications: u32, seed: u64) -> Value {
    let mut doc = chain(
        50.0,
        OWN,
        call,
        (b, 4, 1000),
        (400.0, 10.0, replications, seed),
    );
    doc["request"]["phases"][0] = json!({ "io": OWN });
    doc
}

/// ln C(n, i).
fn ln_choose(n: u32, i: u32) -> f64 {
    (1..=i)
        .map(|j| (f64::from(n - i + j) / f64::from(j)).ln())
        .sum()
}

/// P(X_(j) ≤ x) for the j-th smallest of n independent times of CDF F(x) = `f`: at least j of
/// them at most x.
fn order_cdf(f: f64, j: u32, n: u32) -> f64 {
    (j..=n)
        .map(|i| (ln_choose(n, i)).exp() * f.powi(i as i32) * (1.0 - f).powi((n - i) as i32))
        .sum()
}

/// E[X_(j)] of n exponential times of mean b: b (1/n + 1/(n − 1) + ... + 1/(n − j + 1)) (Rényi).
fn order_mean(b: f64, j: u32, n: u32) -> f64 {
    b * (0..j).map(|i| 1.0 / f64::from(n - i)).sum::<f64>()
}

/// With nothing queueing, a fan-out of n calls that waits for j answers lasts the j-th order
/// statistic of n service times: the maximum for `wait = "all"` (CDF^n, mean b·H_n), the
/// minimum for `"first"` (mean b/n), the j-th smallest for `wait = j`. Each mean is checked
/// against the replications' standard error; each quantile q̂ of the response, through the
/// exact CDF: F(q̂ − own) against its level p, the spread again from the replications.
#[test]
fn a_fanout_lasts_the_order_statistic_of_its_calls() {
    let (b, n) = (0.1, 4u32);
    for (wait, j, seed) in [
        (json!("all"), n, 21u64),
        (json!("first"), 1, 22),
        (json!(2), 2, 23),
    ] {
        let doc = fan(
            json!({"fanout": "api", "count": n, "wait": wait}),
            b,
            10,
            seed,
        );
        let s = build(&doc.to_string());
        let report = run_ok(&s);
        let phase = Measured::over_replications(&report, |r| r.response.mean - OWN);
        assert_matches(
            &format!("wait = {wait}: mean of the {j}-th of {n}"),
            phase,
            order_mean(b, j, n),
            0.03,
        );
        type Quantile = fn(&ReplicationResult) -> f64;
        let levels: [(f64, Quantile); 3] = [
            (0.5, |r| r.response.p50),
            (0.9, |r| r.response.p90),
            (0.99, |r| r.response.p99),
        ];
        for (p, quantile) in levels {
            let at: Vec<f64> = report
                .per_replication
                .iter()
                .map(|r| order_cdf(1.0 - (-(quantile(r) - OWN) / b).exp(), j, n))
                .collect();
            assert_matches(
                &format!("wait = {wait}: the CDF at the p{} response", p * 100.0),
                Measured::of(&at),
                p,
                0.05,
            );
        }
        for r in &report.per_replication {
            let calls = &api(r).calls;
            // Every call is answered, in time or (after its phase ended) for nobody.
            assert_eq!(calls.answered + calls.late, calls.sent);
            assert_eq!((calls.errors, calls.failed, calls.retried), (0, 0, 0));
            if j == n {
                assert_eq!(calls.late, 0);
            } else {
                // n − j of each fan-out's calls outlast it.
                let fans = calls.sent / u64::from(n);
                assert_eq!(calls.late, fans * u64::from(n - j));
            }
            assert_eq!(r.error_counts.call_failed, Some(0));
        }
    }
}

/// A geometric count, drawn per request: the calls per request average its mean m (the
/// spread of N is known, Var N = m² − m, so the standard error is exact), and the api's
/// calls/s are the traffic equations' λm of `Scenario.describe()` (a compound Poisson count
/// over the window, variance λ E[N²] T with E[N²] = 2m² − m).
#[test]
fn a_geometric_fanout_sends_its_mean_and_the_traffic_equations_rate() {
    let m: f64 = 3.0;
    let doc = fan(
        json!({"fanout": "api", "count": {"distribution": "geometric", "mean": m}, "wait": 2}),
        0.02,
        1,
        31,
    );
    let s = build(&doc.to_string());
    let rate = s.description()["services"][0]["rate"]
        .as_f64()
        .expect("the api's rate");
    assert!((rate - 50.0 * m).abs() < 1e-9, "described {rate}");
    let r = run_replication(&s, 0, &never_interrupted).expect("runs");
    let (calls, entry) = (api(&r).fleet.requests, r.requests);
    assert_matches(
        "calls per request",
        Measured {
            mean: calls as f64 / entry as f64,
            std_error: ((m * m - m) / entry as f64).sqrt(),
            df: f64::INFINITY,
        },
        m,
        0.03,
    );
    let window = 400.0 - 10.0;
    assert_matches(
        "the api's calls/s",
        Measured {
            mean: calls as f64 / window,
            std_error: (rate / m * (2.0 * m * m - m) * window).sqrt() / window,
            df: f64::INFINITY,
        },
        rate,
        0.05,
    );
}

/// An error answer of the callee (here its router's timeout T, answered at T to a call whose
/// service outlasts it, P(S > T) = e^(−T/b)) is a failed call: under `wait = "all"` the
/// request fails (500, `errors.call_failed`) when any of its n calls does, 1 − (1 − P)^n;
/// under `"first"` only when all do, P^n. Binomial proportions over the requests.
#[test]
fn a_fanout_fails_when_too_few_calls_can_succeed() {
    let (b, t, n) = (0.1f64, 0.15f64, 2u32);
    let p = (-t / b).exp();
    for (wait, fail, seed) in [
        ("all", 1.0 - (1.0 - p).powi(n as i32), 41u64),
        ("first", p.powi(n as i32), 42),
    ] {
        let mut doc = fan(
            json!({"fanout": "api", "count": n, "wait": wait}),
            b,
            1,
            seed,
        );
        doc["services"]["api"]["router"]["timeout"] = json!(t);
        let s = build(&doc.to_string());
        let r = run_replication(&s, 0, &never_interrupted).expect("runs");
        let failed = r.error_counts.call_failed.expect("shown");
        assert_matches(
            &format!("wait = {wait}: requests failed"),
            Measured::proportion(failed, r.requests, fail),
            fail,
            0.15,
        );
        // Each error answer in time is a call failed for good; the calls still out when
        // their phase ended are answered late, for nobody.
        let calls = &api(&r).calls;
        assert_eq!(calls.errors, calls.failed);
        assert_eq!(calls.answered + calls.late, calls.sent);
        assert!(calls.late > 0);
    }
}

/// Same scenario and seed, same JSON to the bit, with a drawn count and a k-of-n wait; another
/// seed, another.
#[test]
fn a_fanout_is_deterministic() {
    let call = json!({"fanout": "api", "count": {"distribution": "geometric", "mean": 2.5},
                      "wait": 2});
    let once = |seed| {
        let s = build(&fan(call.clone(), 0.05, 1, seed).to_string());
        serde_json::to_string(&run_replication(&s, 0, &never_interrupted).unwrap()).unwrap()
    };
    let (a, b, c) = (once(5), once(5), once(6));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// P(R ≤ x) for a hedged call's time R = min(S₁, T + S₂) (S exponential of mean b, nothing
/// queueing): P(R > x) = e^(−x/b) before the hedge, e^(−x/b)·e^(−(x−T)/b) after it.
fn hedged_cdf(x: f64, b: f64, t: f64) -> f64 {
    if x < t {
        1.0 - (-x / b).exp()
    } else {
        1.0 - (-x / b).exp() * (-(x - t) / b).exp()
    }
}

/// E[max of n hedged call times] = ∫ (1 − F(x)ⁿ) dx, F the hedged CDF above. With
/// 1 − (1 − u)ⁿ = Σₖ C(n,k)(−1)^(k+1) uᵏ: before T, u = e^(−x/b) integrates to
/// (b/k)(1 − e^(−kT/b)); after T, u = c·e^(−2(x−T)/b) with c = e^(−T/b) integrates to
/// cᵏ·b/(2k). For n = 1, b(1 − e^(−T/b)) + (b/2)e^(−T/b) = b(1 − e^(−T/b)/2).
fn hedged_max_mean(b: f64, t: f64, n: u32) -> f64 {
    let c = (-t / b).exp();
    (1..=n)
        .map(|k| {
            let sign = if k % 2 == 1 { 1.0 } else { -1.0 };
            let k_f = f64::from(k);
            sign * ln_choose(n, k).exp()
                * (b / k_f * (1.0 - c.powi(k as i32)) + c.powi(k as i32) * b / (2.0 * k_f))
        })
        .sum()
}

/// A hedge after T with nothing queueing (threads enough at the entry and at the callee),
/// exponential service b: a call still out at T, P(S > T) = e^(−T/b) of them, gets its second
/// copy (`calls.hedged`, a binomial proportion of the first calls); the call's time is
/// R = min(S₁, T + S₂), of mean b(1 − e^(−T/b)/2); a fan-out of n with `wait = "all"` lasts
/// the largest of n such times (CDF^n). The means against the closed form, within the
/// replications' standard error; the p50, p90 and p99 of the response through the exact
/// CDF, as the un-hedged fan-out's test does. Each hedged call has one loser, answered late.
#[test]
fn a_hedge_after_t_sends_p_s_over_t_copies_and_cuts_the_tail() {
    let (b, t) = (0.1f64, 0.1f64);
    let p = (-t / b).exp();
    assert!((hedged_max_mean(b, t, 1) - b * (1.0 - p / 2.0)).abs() < 1e-12);
    for (n, seed) in [(1u32, 51u64), (4, 52)] {
        let doc = fan(
            json!({"fanout": "api", "count": n, "wait": "all", "hedge": t}),
            b,
            10,
            seed,
        );
        let s = build(&doc.to_string());
        let report = run_ok(&s);
        let (mut hedged, mut first) = (0u64, 0u64);
        for r in &report.per_replication {
            let calls = &api(r).calls;
            hedged += calls.hedged;
            first += calls.sent - calls.hedged;
            assert_eq!(calls.answered + calls.late, calls.sent);
            // Both copies of a hedged call answer: one in time, the other for nobody.
            assert_eq!(calls.late, calls.hedged);
            assert_eq!((calls.errors, calls.failed, calls.retried), (0, 0, 0));
            assert_eq!(r.error_counts.call_failed, Some(0));
        }
        assert_matches(
            &format!("count = {n}: calls hedged, P(S > T)"),
            Measured::proportion(hedged, first, p),
            p,
            0.03,
        );
        let phase = Measured::over_replications(&report, |r| r.response.mean - OWN);
        assert_matches(
            &format!("count = {n}: mean of the largest of {n} hedged times"),
            phase,
            hedged_max_mean(b, t, n),
            0.03,
        );
        type Quantile = fn(&ReplicationResult) -> f64;
        let levels: [(f64, Quantile); 3] = [
            (0.5, |r| r.response.p50),
            (0.9, |r| r.response.p90),
            (0.99, |r| r.response.p99),
        ];
        for (level, quantile) in levels {
            let at: Vec<f64> = report
                .per_replication
                .iter()
                .map(|r| hedged_cdf(quantile(r) - OWN, b, t).powi(n as i32))
                .collect();
            assert_matches(
                &format!(
                    "count = {n}: the hedged CDF at the p{} response",
                    level * 100.0
                ),
                Measured::of(&at),
                level,
                0.05,
            );
        }
    }
}

/// An error answer of one copy while the other is still out does not fail the call: with the
/// callee's router timing calls out at T_r (an error answer at T_r to a copy whose service
/// outlasts it) and a hedge at T < T_r, a call fails only when both copies outlast T_r,
/// P(S > T_r)² = e^(−2T_r/b) (a binomial proportion over the calls; failing at the first
/// error would give e^(−T_r/b)).
#[test]
fn a_hedged_call_fails_when_both_copies_fail() {
    let (b, t, t_r) = (0.1f64, 0.05f64, 0.1f64);
    let fail = (-2.0 * t_r / b).exp();
    let mut doc = fan(json!({"fanout": "api", "count": 1, "hedge": t}), b, 1, 61);
    doc["services"]["api"]["router"]["timeout"] = json!(t_r);
    doc["run"]["duration"] = json!(1000.0);
    // No warm-up: the run's 500s count every call failed.
    doc["run"]["warmup"] = json!(0.0);
    let s = build(&doc.to_string());
    let r = run_replication(&s, 0, &never_interrupted).expect("runs");
    let calls = &api(&r).calls;
    let first = calls.sent - calls.hedged;
    assert_matches(
        "calls failed: both copies past the callee's timeout",
        Measured::proportion(calls.failed, first, fail),
        fail,
        0.06,
    );
    assert_eq!(calls.answered + calls.late, calls.sent);
    assert!(calls.errors > calls.failed);
    let counted = r.error_counts.call_failed.expect("shown");
    assert!(
        counted <= calls.failed && calls.failed - counted <= 5,
        "{counted} of {}",
        calls.failed
    );
}

/// `hedge = "p90"`: T is the 90th percentile of each copy's own time as the call site has seen
/// them (in time or late), which with nothing queueing is the callee's un-hedged law whatever
/// the hedges do; so, once learnt, a call is hedged with probability P(S > T̂) → 10%. The
/// replications' spread carries both the calls' draws and T̂'s wandering; the allowance adds
/// the known biases, each bounded: the calls sent before the first HEDGE_WARMUP = 100 answers
/// (100, plus those in flight then, λb = 5 on average: at most 200) are not hedged, 0.1·200/N
/// of the fraction; the histogram's value at a quantile is the top of its bucket, at most
/// 2⁻¹⁰ above the sample's (3 significant digits), which takes 0.1·ln(10)·2⁻¹⁰ off the
/// fraction; and the order statistic's own bias, of order 1/n after n answers, averages
/// at most ln(N)/N over the N calls.
#[test]
fn a_percentile_hedge_learns_the_callees_law() {
    let (b, q) = (0.1f64, 0.9f64);
    let mut doc = fan(
        json!({"fanout": "api", "count": 1, "hedge": "p90"}),
        b,
        10,
        71,
    );
    doc["run"]["duration"] = json!(1000.0);
    let s = build(&doc.to_string());
    let report = run_ok(&s);
    let fractions: Vec<f64> = report
        .per_replication
        .iter()
        .map(|r| {
            let calls = &api(r).calls;
            assert_eq!(calls.answered + calls.late, calls.sent);
            assert_eq!(calls.late, calls.hedged);
            calls.hedged as f64 / (calls.sent - calls.hedged) as f64
        })
        .collect();
    let n = (report.per_replication[0].services.as_ref().unwrap()["api"]
        .calls
        .sent
        - report.per_replication[0].services.as_ref().unwrap()["api"]
            .calls
            .hedged) as f64;
    let allowance = (1.0 - q) * 200.0 / n + (1.0 - q) * 10f64.ln() * 2f64.powi(-10) + n.ln() / n;
    assert_matches_with_allowance(
        "p90: calls hedged",
        Measured::of(&fractions),
        1.0 - q,
        allowance,
        0.06,
    );
}

/// Same scenario and seed, same JSON to the bit, with a percentile hedge, a drawn count and a
/// k-of-n wait; another seed, another.
#[test]
fn a_hedged_fanout_is_deterministic() {
    let call = json!({"fanout": "api", "count": {"distribution": "geometric", "mean": 2.5},
                      "wait": 2, "hedge": "p80"});
    let once = |seed| {
        let s = build(&fan(call.clone(), 0.05, 1, seed).to_string());
        serde_json::to_string(&run_replication(&s, 0, &never_interrupted).unwrap()).unwrap()
    };
    let (a, b, c) = (once(5), once(5), once(6));
    assert_eq!(a, b);
    assert_ne!(a, c);
    let parsed: Value = serde_json::from_str(&a).unwrap();
    assert!(
        parsed["services"]["api"]["calls"]["hedged"]
            .as_u64()
            .unwrap()
            > 100
    );
}

/// A hedge goes to another dyno than its call's first copy while one is up: a callee of one
/// thread per dyno, constant service D = 1 s and a hedge at 0.1 s, so that every call is
/// hedged while its first copy still holds its dyno. On two dynos at random, a hedge that
/// went anywhere would wait behind its first copy half the time (a quarter of the callee's
/// requests queued); avoiding it, a request queues only when another request's copies still
/// hold the dynos, P ≤ λ(D + T) = 1.1% (a binomial bound, four standard errors over). On one
/// dyno, both copies go to it: every hedge queues, half the callee's requests.
#[test]
fn a_hedge_goes_to_another_dyno_than_its_first_copy() {
    let (rate, d, t) = (0.01f64, 1.0f64, 0.1f64);
    for dynos in [2u32, 1] {
        let mut doc = chain(
            rate,
            OWN,
            json!({"fanout": "api", "count": 1, "hedge": t}),
            (d, dynos, 1),
            (200_000.0, 0.0, 1, 81),
        );
        doc["services"]["api"]["service"] = json!({"distribution": "constant", "value": d});
        let s = build(&doc.to_string());
        let r = run_replication(&s, 0, &never_interrupted).expect("runs");
        let (calls, fleet) = (&api(&r).calls, &api(&r).fleet);
        assert_eq!(calls.hedged * 2, calls.sent, "every call is hedged");
        let n = fleet.requests as f64;
        if dynos == 2 {
            let bound = rate * (d + t);
            let limit = bound + 4.0 * (bound * (1.0 - bound) / n).sqrt();
            assert!(
                fleet.queued_fraction <= limit,
                "two dynos: {} of the callee's requests queued, more than {limit}",
                fleet.queued_fraction
            );
        } else {
            assert!(
                fleet.queued_fraction >= 0.5 - 1.0 / n,
                "one dyno: {} queued, the hedges are half",
                fleet.queued_fraction
            );
        }
    }
}

/// The callee's busy time per call, from its utilisation: busy thread-seconds over the window
/// (`utilisation.mean` × its threads × the window), over the calls the entry's requests sent
/// in it (one phase each: the entry's requests answered in the window, which differ from
/// those sent in it only by the few in flight at its edges).
fn callee_busy_per_request(r: &ReplicationResult, threads: f64, window: f64) -> f64 {
    api(r).fleet.utilisation.mean * threads * window / r.requests as f64
}

/// Runs a fan-out of `call` to api (exponential calls of mean `b`, 10 replications, `seed`)
/// and holds the callee's work per user request to `theory`; the report, for more checks.
fn callee_work_matches(call: Value, b: f64, seed: u64, label: &str, theory: f64) -> RunReport {
    let threads = 4.0 * 1000.0;
    let doc = fan(call, b, 10, seed);
    let window = doc["run"]["duration"].as_f64().unwrap();
    let report = run_ok(&build(&doc.to_string()));
    let busy =
        Measured::over_replications(&report, |r| callee_busy_per_request(r, threads, window));
    assert_matches(label, busy, theory, 0.03);
    report
}

/// Every copy sent is answered in time, answered late, or cancelled (and never answers).
fn assert_every_copy_accounted(r: &ReplicationResult) -> u64 {
    let calls = &api(r).calls;
    let cancelled = calls
        .cancelled
        .expect("a call site cancels: calls.cancelled is written");
    assert_eq!(calls.answered + calls.late + cancelled, calls.sent);
    cancelled
}

/// A hedge after T with nothing queueing, exponential service b, `cancel = true`: the winner's
/// answer stops the loser at once. A call not hedged (S₁ ≤ T) works S₁; a hedged one works
/// its first copy until R = min(S₁, T + S₂) and its second from T to R: 2R − T. Given S₁ > T,
/// S₁ − T is exponential again (no memory), so R − T = min(S₁ − T, S₂) has mean b/2, and
/// E[work] = E[S; S ≤ T] + P(S > T)(T + b) = b − (T + b)e^(−T/b) + e^(−T/b)(T + b) = b: the
/// hedges cost nothing in expectation (E[R] + E[(R − T)⁺] = b(1 − p/2) + pb/2). Without
/// cancelling, each loser runs to its end: b + P(S > T)·b. `cancel = "queued"` cancels
/// nothing here (a copy is never queued) and works as `false` does.
#[test]
fn cancelling_a_hedges_loser_frees_its_work() {
    let (b, t) = (0.1f64, 0.1f64);
    let p = (-t / b).exp();
    for (cancel, seed, theory) in [
        (json!(true), 91u64, b),
        (json!(false), 92, b * (1.0 + p)),
        (json!("queued"), 93, b * (1.0 + p)),
    ] {
        let report = callee_work_matches(
            json!({"fanout": "api", "count": 1, "hedge": t, "cancel": cancel}),
            b,
            seed,
            &format!("cancel = {cancel}: callee work per call"),
            theory,
        );
        for r in &report.per_replication {
            let calls = &api(r).calls;
            if cancel == json!(false) {
                assert_eq!(calls.cancelled, None);
                assert_eq!(calls.late, calls.hedged);
                continue;
            }
            let cancelled = assert_every_copy_accounted(r);
            if cancel == json!(true) {
                // Every loser stopped: none answers late.
                assert_eq!((cancelled, calls.late), (calls.hedged, 0));
            } else {
                assert_eq!((cancelled, calls.late), (0, calls.hedged));
            }
        }
        // The response law is the hedged one whatever happens to the loser.
        let phase = Measured::over_replications(&report, |r| r.response.mean - OWN);
        assert_matches(
            &format!("cancel = {cancel}: mean hedged call time"),
            phase,
            b * (1.0 - p / 2.0),
            0.03,
        );
    }
}

/// `wait = "first"` of n exponential calls (mean b), nothing queueing, `cancel = true`: the
/// first answer, at the minimum M of n times (mean b/n), stops the n − 1 others then, so
/// the callee works n·M per fan-out, n·b/n = b in expectation, against n·b when they run on.
/// "queued" cancels nothing (every call has its thread at once).
#[test]
fn cancelling_the_calls_a_first_wait_leaves_costs_n_times_the_minimum() {
    let (b, n) = (0.1f64, 4u32);
    for (cancel, seed, theory) in [
        (json!(true), 101u64, b),
        (json!(false), 102, f64::from(n) * b),
        (json!("queued"), 103, f64::from(n) * b),
    ] {
        let report = callee_work_matches(
            json!({"fanout": "api", "count": n, "wait": "first", "cancel": cancel}),
            b,
            seed,
            &format!("cancel = {cancel}: callee work per fan-out of {n}, first"),
            theory,
        );
        let phase = Measured::over_replications(&report, |r| r.response.mean - OWN);
        assert_matches(
            &format!("cancel = {cancel}: the phase lasts the minimum"),
            phase,
            b / f64::from(n),
            0.03,
        );
        for r in &report.per_replication {
            let calls = &api(r).calls;
            if cancel == json!(false) {
                assert_eq!(calls.cancelled, None);
                continue;
            }
            let cancelled = assert_every_copy_accounted(r);
            // Each fan-out has one answer in time and n − 1 others, cancelled or late.
            let fans = calls.sent / u64::from(n);
            if cancel == json!(true) {
                assert!(calls.late <= u64::from(n), "late {}", calls.late);
                assert!(cancelled + u64::from(n) >= fans * u64::from(n - 1));
            } else {
                assert_eq!(cancelled, 0);
            }
        }
    }
}

/// `cancel = "queued"` on a saturated callee, deterministically: one client sends a request,
/// waits for its answer and thinks 3 s; its fan-out of three calls waits for the first, on a
/// callee of one dyno of one thread serving each call in D = 1 s (constant). The first call
/// takes the thread; the other two wait in the dyno's backlog. At D the first answers, and
/// the thread takes the second at once (the caller's cancel comes after the answer, as a
/// real one would): the second is on its thread and runs on (late), the third, still
/// queued, is dropped unserved. With `true`, the second is stopped too; with `false`, both
/// run. Each fan-out finds the callee idle (3 s of thinking > the 2 s it may still work).
/// The same whether the calls wait in the dyno's backlog (random routing) or in the router's
/// queue (`intelligent`: one request per dyno, the others held).
#[test]
fn a_queued_cancel_drops_the_copies_no_thread_has_taken() {
    let requests = 50u64;
    for (cancel, cancelled, late, served, policy) in [
        (json!("queued"), Some(1u64), 1u64, 1.5f64, "random"),
        (json!(true), Some(2), 0, 1.0, "random"),
        (json!(false), None, 2, 2.0, "random"),
        (json!("queued"), Some(1u64), 1u64, 1.5f64, "intelligent"),
        (json!(true), Some(2), 0, 1.0, "intelligent"),
        (json!(false), None, 2, 2.0, "intelligent"),
    ] {
        let mut doc = chain(
            1.0,
            OWN,
            json!({"fanout": "api", "count": 3, "wait": "first", "cancel": cancel}),
            (1.0, 1, 1),
            (10_000.0, 0.0, 1, 111),
        );
        doc["arrivals"] = json!({"process": "closed", "clients": 1, "think": 3.0,
                                 "requests": requests});
        doc["request"]["phases"][0] = json!({ "io": OWN });
        doc["services"]["api"]["service"] = json!({"distribution": "constant", "value": 1.0});
        doc["services"]["api"]["router"]["policy"] = json!(policy);
        let s = build(&doc.to_string());
        let r = run_replication(&s, 0, &never_interrupted).expect("runs");
        let calls = &api(&r).calls;
        assert_eq!(calls.sent, 3 * requests);
        assert_eq!(calls.answered, requests);
        assert_eq!(
            calls.cancelled,
            cancelled.map(|c| c * requests),
            "cancel = {cancel}"
        );
        assert_eq!(calls.late, late * requests, "cancel = {cancel}");
        if cancelled.is_some() {
            assert_every_copy_accounted(&r);
        }
        // Every call arrived at the callee; those served to their end answered after D
        // (the first), 2D (the second) and 3D (the third): their mean is `served` (a call
        // stopped or dropped is no response of the callee's). Every request's answer came at D.
        assert_eq!(api(&r).fleet.requests, 3 * requests);
        let mean = api(&r).fleet.response_ok.mean;
        assert!((mean - served).abs() < 1e-9, "cancel = {cancel}: {mean}");
        assert!(
            (r.response.mean - OWN - 1.0).abs() < 1e-9,
            "response {}",
            r.response.mean
        );
    }
}

/// `cancel = false` is the default: the same scenario with and without it gives the same
/// JSON to the bit (and no `calls.cancelled`).
#[test]
fn cancel_false_is_no_cancel() {
    let run = |call: Value| {
        let s = build(&fan(call, 0.05, 1, 5).to_string());
        serde_json::to_string(&run_replication(&s, 0, &never_interrupted).unwrap()).unwrap()
    };
    let without = run(json!({"fanout": "api", "count": 3, "wait": "first", "hedge": "10ms"}));
    let with = run(
        json!({"fanout": "api", "count": 3, "wait": "first", "hedge": "10ms", "cancel": false}),
    );
    assert_eq!(without, with);
    assert!(!without.contains("cancelled"));
    let cancelling =
        run(json!({"fanout": "api", "count": 3, "wait": "first", "hedge": "10ms", "cancel": true}));
    assert_ne!(without, cancelling);
    assert!(cancelling.contains("\"cancelled\""));
}

/// Cancelling where every state meets it: a busy callee (about half its threads busy with
/// the hedges, one thread a dyno, exponential service) whose calls wait at the router (`intelligent`) or in
/// a small backlog that refuses them (random routing, `app.backlog`, retried elsewhere), with
/// the callee's router timing calls out, hedges and k-of-n waits. Whatever happens, every
/// copy sent is answered, late or cancelled, and cancelling takes work off the callee.
#[test]
fn cancelling_keeps_every_copy_accounted_for_under_load() {
    for (policy, backlog) in [("intelligent", None), ("random", Some(2))] {
        let mut busy = Vec::new();
        for cancel in [json!(false), json!("queued"), json!(true)] {
            let mut doc = chain(
                10.0,
                OWN,
                json!({"fanout": "api", "count": 3, "wait": 2, "hedge": "50ms",
                       "cancel": cancel}),
                (0.05, 4, 1),
                (300.0, 10.0, 1, 121),
            );
            doc["services"]["api"]["router"] = json!({"policy": policy, "timeout": 1.0});
            if let Some(b) = backlog {
                doc["services"]["api"]["fleet"] = json!({"dynos": 4});
                doc["services"]["api"]["app"] =
                    json!({"server": "generic", "model": "sync", "processes": 1, "backlog": b});
            }
            let s = build(&doc.to_string());
            let r = run_replication(&s, 0, &never_interrupted).expect("runs");
            let calls = &api(&r).calls;
            if cancel != json!(false) {
                let cancelled = assert_every_copy_accounted(&r);
                assert!(cancelled > 0, "{policy}, cancel = {cancel}: none cancelled");
            } else {
                assert_eq!(calls.answered + calls.late, calls.sent);
            }
            eprintln!(
                "{policy}, cancel = {cancel}: {calls:?}, callee utilisation {:.4}, errors {}",
                api(&r).fleet.utilisation.mean,
                api(&r).fleet.errors.total
            );
            busy.push(api(&r).fleet.utilisation.mean);
        }
        assert!(
            busy[0] > busy[1] && busy[1] > busy[2],
            "{policy}: utilisation without, queued, running: {busy:?}"
        );
    }
}
