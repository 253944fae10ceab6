//! The dyno model under fuzzing: documents with `[app]`, `[request]` phases and classes,
//! `[resources]` with pools, closed loops and memory, mostly valid and small, sometimes with
//! values pushed to the edges. Each is validated, and each one accepted is RUN (a short run,
//! within a small work budget): the engine must end without a panic or an endless loop, and its
//! figures must be sane (finite, fractions within [0, 1], as many requests answered as can be).
//!
//! `PROPTEST_CASES` sets the number of cases (2,000 by default, about 10 s).

use dynosim_engine::{never_interrupted, run, Error, Scenario};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

fn time() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0.05..50.0f64).prop_map(|ms| json!(format!("{ms}ms"))),
        2 => (0.05..50.0f64).prop_map(|ms| json!({"distribution": "exponential", "mean": format!("{ms}ms")})),
        1 => (0.05..50.0f64, 0.1..2.0f64).prop_map(|(ms, s)| json!({"distribution": "lognormal", "median": format!("{ms}ms"), "sigma": s})),
        1 => prop::sample::select(vec![json!("0s"), json!(-1), json!("1e-12s"), json!({"distribution": "nope"}), json!(null), json!({"mean": "1ms"})]),
    ]
}

fn phase(resources: usize) -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => time().prop_map(|t| json!({"cpu": t})),
        2 => time().prop_map(|t| json!({"io": t})),
        (if resources > 0 { 3 } else { 0 }) => (0..resources.max(1), time()).prop_map(|(r, t)| json!({"use": format!("r{r}"), "time": t})),
        1 => (0..resources + 2, time()).prop_map(|(r, t)| json!({"use": format!("r{r}"), "time": t})),
        1 => prop::sample::select(vec![json!({}), json!({"cpu": "1ms", "io": "1ms"}), json!({"use": "r0"}), json!("cpu")]),
    ]
}

fn phases(resources: usize) -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => prop::collection::vec(phase(resources), 1..5),
        1 => Just(Vec::new()),
    ]
    .prop_map(Value::from)
}

fn request(resources: usize) -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => phases(resources).prop_map(|p| json!({"phases": p})),
        2 => prop::collection::vec((phases(resources), 0.0..3.0f64), 1..4).prop_map(|classes| {
            json!({"class": classes.into_iter().enumerate().map(|(i, (p, w))| json!({"name": format!("c{i}"), "weight": w, "phases": p})).collect::<Vec<_>>()})
        }),
    ]
}

fn resources(n: usize) -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (
            prop_oneof![12 => 1i64..5, 1 => -2i64..0],
            prop_oneof![6 => Just("fcfs"), 6 => Just("ps"), 1 => Just("lifo")],
            prop::option::of((
                prop_oneof![12 => 1i64..6, 1 => -1i64..1],
                prop_oneof![4 => Just("process"), 4 => Just("dyno"), 4 => Just("app"), 1 => Just("thread")],
            )),
        ),
        n..=n,
    )
    .prop_map(|rs| {
        let mut map = serde_json::Map::new();
        for (i, (servers, discipline, pool)) in rs.into_iter().enumerate() {
            let mut r = json!({"servers": servers, "discipline": discipline});
            if let Some((size, per)) = pool {
                r["pool"] = json!({"size": size, "per": per});
            }
            map.insert(format!("r{i}"), r);
        }
        Value::Object(map)
    })
}

fn app() -> impl Strategy<Value = Value> {
    (
        prop_oneof![12 => prop::sample::select(vec!["generic", "unicorn", "puma", "gunicorn", "thin"]), 1 => Just("tomcat")],
        prop::sample::select(vec![None, Some("sync"), Some("gthread"), Some("gevent")]),
        prop_oneof![4 => 1i64..5, 1 => prop::sample::select(vec![0i64, -1, 20_000])],
        prop::option::of(prop_oneof![4 => 1i64..6, 1 => prop::sample::select(vec![0i64, 1_000_000])]),
        prop::option::of(any::<bool>()),
        prop::option::of(1i64..4),
        prop::option::of(0.0..200.0f64),
        prop::option::of((0u32..200, 0u32..50, 0u32..30, 0u32..400, 0u32..30)),
        prop::option::of(0.0..2.0f64),
        prop::option::of(prop::sample::select(vec!["shared", "greedy"])),
        prop::option::of(time()),
        (prop::option::of((time(), prop::option::of(time()))), prop::option::of(prop_oneof![1i64..5, Just(0i64)])),
    )
        .prop_map(|(server, class, processes, threads, lock, arena_max, swap, memory, contention, accept, overhead, (worker_timeout, backlog))| {
            let mut a = json!({"server": server, "processes": processes, "boot_time": "50ms"});
            if let Some(o) = overhead {
                a["overhead"] = o;
            }
            if let Some(backlog) = backlog {
                a["backlog"] = json!(backlog);
            }
            if let Some((timeout, boot)) = worker_timeout {
                a["timeout"] = timeout;
                if let Some(b) = boot {
                    a["worker_boot_time"] = b;
                }
            }
            if let Some(mode) = accept {
                a["accept"] = json!(mode);
            }
            if let Some(c) = class {
                a["worker_class"] = json!(c);
            }
            if let Some(t) = threads {
                a["threads"] = json!(t);
            }
            if let Some(l) = lock {
                a["lock"] = json!(l);
            }
            if let Some(m) = arena_max {
                a["malloc_arena_max"] = json!(m);
            }
            if let Some(s) = swap {
                a["swap_slowdown"] = json!(s);
            }
            if let Some(c) = contention {
                a["arena_contention"] = json!(c);
            }
            if let Some((dyno, process, thread, request, arena)) = memory {
                a["memory"] = json!({
                    "dyno": format!("{dyno}MB"), "process": format!("{process}MB"),
                    "thread": format!("{thread}MB"), "request": format!("{request}MB"),
                    "arena": format!("{arena}MB"),
                });
            }
            a
        })
}

fn workload() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (1.0..400.0f64).prop_map(|r| json!({"process": "poisson", "rate": r})),
        4 => (1i64..30, prop::option::of(time()), prop::option::of(1i64..300))
            .prop_map(|(clients, think, requests)| {
                let mut w = json!({"process": "closed", "clients": clients});
                if let Some(t) = think {
                    w["think"] = t;
                }
                if let Some(n) = requests {
                    w["requests"] = json!(n);
                }
                w
            }),
        1 => prop::sample::select(vec![json!({"process": "closed"}), json!({"process": "closed", "clients": 0}), json!({"process": "closed", "clients": 2, "rate": 5})]),
    ]
}

fn document() -> impl Strategy<Value = Value> {
    (0usize..3).prop_flat_map(|n| {
        (
            workload(),
            request(n),
            resources(n),
            app(),
            1i64..4,
            prop::sample::select(vec!["random", "round_robin", "least_connections", "intelligent", "power_of_d"]),
            prop_oneof![6 => prop::sample::select(vec![None, Some("standard-1x"), Some("performance-l"), Some("2013-1x")]), 1 => Just(Some("xl"))],
            prop::option::of(1i64..9),
            prop::sample::select(vec!["auto", "events", "direct"]),
            prop::option::of(time()),
            (
                prop_oneof![2 => Just(None), 1 => Just(Some(json!("off"))), 2 => time().prop_map(Some)],
                prop::option::of(time()),
                prop::option::of(prop_oneof![(1i64..40).prop_map(|n| json!(n)), (1i64..5).prop_map(|n| json!(format!("{n}/dyno")))]),
                prop::option::of(time()),
                prop::option::of(time()),
                prop::option::of(prop_oneof![Just(json!("5ms")), Just(json!("100ms")), Just(json!("0s"))]),
            ),
        )
            .prop_map(|(arrivals, request, resources, app, dynos, policy, ty, cores, engine, connect, timeouts)| {
                let (router_timeout, queue_timeout, cap, client_timeout, cost, shed) = timeouts;
                let mut arrivals = arrivals;
                if let Some(t) = client_timeout {
                    arrivals["timeout"] = t;
                }
                let mut fleet = json!({"dynos": dynos});
                if let Some(t) = ty {
                    fleet["type"] = json!(t);
                }
                if let Some(c) = cores {
                    fleet["cores"] = json!(c);
                }
                let mut router = json!({"policy": policy});
                if let Some(c) = connect {
                    router["connect"] = c;
                }
                if cap.is_some() {
                    // Refusals retried on few dynos, with a delay or at once.
                    router["retries"] = json!(2);
                    router["retry_delay"] = json!(if dynos % 2 == 0 { "1ms" } else { "0s" });
                }
                for (key, value) in [("timeout", router_timeout), ("queue_timeout", queue_timeout), ("max_in_flight", cap), ("cost", cost), ("shed_latency", shed)] {
                    if let Some(v) = value {
                        router[key] = v;
                    }
                }
                json!({
                    "arrivals": arrivals,
                    "request": request,
                    "resources": resources,
                    "app": app,
                    "fleet": fleet,
                    "router": router,
                    "run": {"duration": 5.0, "warmup": 1.0, "replications": 2, "seed": 1,
                            "max_requests": 200000, "max_waiting": 20000, "engine": engine},
                })
            })
    })
}

fn check_report(report: &dynosim_engine::RunReport, doc: &Value) {
    for r in &report.per_replication {
        let fraction = |x: f64, what: &str| {
            assert!((0.0..=1.0 + 1e-9).contains(&x), "{what} = {x}: {doc}");
        };
        fraction(r.queued_fraction, "queued_fraction");
        fraction(r.utilisation.mean, "utilisation");
        assert!(
            r.response.mean.is_finite() && r.response.mean >= 0.0,
            "{doc}"
        );
        assert!(r.throughput.is_finite() && r.throughput >= 0.0, "{doc}");
        assert!(r.goodput <= r.throughput + 1e-9, "{doc}");
        for (what, x) in [
            ("errors.total", r.errors.total),
            ("errors.h11", r.errors.h11),
            ("errors.h12", r.errors.h12),
            ("errors.h13", r.errors.h13),
            ("errors.client_timeout", r.errors.client_timeout),
            ("errors.queue_timeout", r.errors.queue_timeout),
            ("errors.app_timeout", r.errors.app_timeout),
            ("errors.shed", r.errors.shed),
        ] {
            fraction(x, what);
        }
        assert!(r.error_counts.total <= r.requests, "{doc}");
        assert!(
            r.wasted.thread_seconds >= 0.0 && r.wasted.cpu_seconds >= 0.0,
            "{doc}"
        );
        if let Some(d) = &r.dyno {
            fraction(d.cpu_utilisation, "cpu_utilisation");
            fraction(d.process_occupancy, "process_occupancy");
            fraction(d.memory.over_quota, "over_quota");
            assert!(d.memory.mean.is_finite() && d.memory.mean >= 0.0, "{doc}");
        }
        if let Some(f) = &r.failed {
            fraction(f.fraction, "failed.fraction");
        }
        for res in r.resources.iter().flat_map(|m| m.values()) {
            fraction(res.utilisation, "resource utilisation");
        }
        if let Some(c) = &r.closed_loop {
            if let Some(n) = doc["arrivals"]["requests"].as_u64() {
                assert_eq!(c.completed, n, "every request answered: {doc}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_dyno_model_validates_and_runs_every_document(doc in document()) {
        match Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted) {
            Ok(s) => match run(&s, &never_interrupted) {
                Ok(report) => check_report(&report, &doc),
                Err(Error::Unstable { .. } | Error::Overloaded { .. }) => {}
                Err(Error::Config { message, .. }) => {
                    prop_assert!(!message.contains('\n'), "{message}");
                }
                Err(other) => prop_assert!(false, "unexpected {other:?} for {doc}"),
            },
            Err(Error::Config { message, .. }) => {
                prop_assert!(!message.is_empty());
                prop_assert!(!message.contains('\n'), "a one-line message: {message}");
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?} for {doc}"),
        }
    }
}
