//! The dyno model under fuzzing: documents with `[app]`, `[request]` phases and classes,
//! `[resources]` with pools, closed loops and memory, mostly valid and small, sometimes with
//! values pushed to the edges. Each is validated, and each one accepted is RUN (a short run,
//! within a small work budget): the engine must end without a panic or an endless loop, and its
//! figures must be sane (finite, fractions within [0, 1], as many requests answered as can be).
//!
//! A second property does the same with an `[autoscale]` rule resizing a small fleet (at most
//! 20 dynos) over a run of 10 to 40 s, with the fleet's lifecycle keys, several routers and
//! every routing policy, and checks the fleet's books (`check_fleet`).
//!
//! `PROPTEST_CASES` sets the number of cases (2,000 by default, about 10 s; 200 of the
//! autoscaled ones by default, 15 to 30 s with debug assertions on 2 cores).

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
        prop::option::of(prop::sample::select(vec![
            json!(true),
            json!(false),
            json!("gil"),
            json!("gvl"),
            json!("none"),
        ])),
        prop::option::of(1i64..4),
        prop::option::of(0.0..200.0f64),
        prop::option::of((0u32..200, 0u32..50, 0u32..30, 0u32..400, 0u32..30)),
        prop::option::of(0.0..2.0f64),
        prop::option::of(prop::sample::select(vec!["shared", "greedy"])),
        prop::option::of(time()),
        (
            prop::option::of((time(), prop::option::of(time()))),
            prop::option::of(prop_oneof![1i64..5, Just(0i64)]),
            prop::option::of(prop_oneof![
                6 => (0.05..50.0f64).prop_map(|ms| json!(format!("{ms}ms"))),
                1 => prop::sample::select(vec![json!("0s"), json!(-1), json!("soon"), json!({"mean": "1ms"})]),
            ]),
        ),
    )
        .prop_map(|(server, class, processes, threads, lock, arena_max, swap, memory, contention, accept, overhead, (worker_timeout, backlog, service_timeout))| {
            let mut a = json!({"server": server, "processes": processes, "boot_time": "50ms"});
            if let Some(t) = service_timeout {
                a["service_timeout"] = t;
            }
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
                a["lock"] = l;
                // Short lock intervals, so that the timers fire within the runs.
                a["switch_interval"] = json!("1ms");
                a["timeslice"] = json!("20ms");
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
                // A router on the dyno's machine, its CPU on the dyno's cores.
                prop::option::of(time()),
            ),
        )
            .prop_map(|(arrivals, request, resources, app, dynos, policy, ty, cores, engine, connect, timeouts)| {
                let (router_timeout, queue_timeout, cap, client_timeout, cost, shed, colocated) = timeouts;
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
                    // Time slices (the default) of several lengths, and processor sharing.
                    fleet["cpu_quantum"] = json!(0.0005 * c as f64);
                }
                if dynos % 3 == 0 {
                    fleet["cpu_sharing"] = json!("ps");
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
                for (key, value) in [("timeout", router_timeout), ("queue_timeout", queue_timeout), ("max_in_flight", cap), ("cost", cost), ("shed_latency", shed), ("colocated_cpu", colocated)] {
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
            (
                "errors.service_timeout",
                r.errors.service_timeout.unwrap_or(0.0),
            ),
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

// ---------------------------------------------------------------------------------------------
// Autoscaled fleets (issue #24): the same dyno model, with an `[autoscale]` rule resizing a
// small fleet during a short run, and the lifecycle keys.

fn secs(lo: f64, hi: f64) -> impl Strategy<Value = Value> {
    (lo..hi).prop_map(|s| json!(format!("{s}s")))
}

/// A wait of 0 now and then, else from `lo` to `hi` seconds.
fn wait(lo: f64, hi: f64) -> impl Strategy<Value = Value> {
    prop_oneof![1 => Just(json!("0s")), 3 => secs(lo, hi)]
}

/// A rule's own keys, set to make things happen within a short run (intervals of seconds,
/// thresholds near what the dyno model's requests take), for a fleet of `min` to `max` dynos.
fn rule(min: i64, max: i64) -> impl Strategy<Value = Value> {
    let schedule =
        prop::collection::vec((1.0..60.0f64, min..=max), 0..4).prop_map(move |mut pts| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            pts.dedup_by(|a, b| a.0 == b.0);
            let mut table = vec![json!(["0s", pts.first().map_or(min, |p| p.1)])];
            table.extend(pts.into_iter().map(|(t, n)| json!([format!("{t}s"), n])));
            json!({"rule": "schedule", "schedule": table})
        });
    let heroku = (
        secs(0.005, 1.0),
        secs(2.0, 60.0),
        wait(0.0, 20.0),
        0.3..0.95f64,
        wait(0.0, 30.0),
        wait(0.0, 5.0),
    )
        .prop_map(|(target, window, cooldown, ratio, delay_down, delay)| {
            json!({"rule": "heroku", "target": target, "window": window, "cooldown": cooldown,
                   "downscale_ratio": ratio, "downscale_delay": delay_down, "delay": delay})
        });
    let judoscale = (
        0.002..0.5f64,
        0.1..0.9f64,
        1i64..4,
        wait(0.0, 30.0),
        wait(0.0, 30.0),
        secs(1.0, 20.0),
        wait(0.0, 10.0),
    )
        .prop_map(|(up, ratio, step, cooldown, delay_down, window, delay)| {
            json!({"rule": "judoscale", "upscale_above": format!("{up}s"),
                   "downscale_below": format!("{}s", up * ratio), "step": step,
                   "cooldown": cooldown, "downscale_delay": delay_down, "window": window,
                   "delay": delay})
        });
    let hirefire = (
        prop::sample::select(vec!["queue", "response"]),
        prop::sample::select(vec!["percentile", "average"]),
        50.0..99.9f64,
        (0.002..0.5f64, 0.1..0.9f64),
        (1i64..6, 1i64..4, 1i64..4, 1i64..4),
        (wait(0.0, 30.0), wait(0.0, 30.0)),
        prop::option::of((secs(1.0, 20.0), wait(0.0, 5.0))),
    )
        .prop_map(
            |(
                metric,
                aggregation,
                percentile,
                (up, ratio),
                (us, ds, usens, dsens),
                (ut, dt),
                window,
            )| {
                let mut r = json!({"rule": "hirefire", "metric": metric, "aggregation": aggregation,
                   "percentile": percentile, "upscale_above": format!("{up}s"),
                   "downscale_below": format!("{}s", up * ratio), "upscale_step": us,
                   "downscale_step": ds, "upscale_sensitivity": usens,
                   "downscale_sensitivity": dsens, "upscale_timeout": ut, "downscale_timeout": dt});
                if aggregation == "average" {
                    r.as_object_mut().unwrap().remove("percentile");
                }
                if let Some((w, d)) = window {
                    r["window"] = w;
                    r["delay"] = d;
                }
                r
            },
        );
    let policies = prop::collection::vec(
        (
            prop::sample::select(vec!["pods", "percent"]),
            1i64..200,
            secs(1.0, 60.0),
        )
            .prop_map(
                |(kind, value, period)| json!({"type": kind, "value": value, "period": period}),
            ),
        1..3,
    )
    .boxed();
    let hpa = (
        prop_oneof![
            2 => (prop::sample::select(vec!["cpu", "utilisation"]), 0.1..0.95f64).prop_map(|(m, t)| (m, json!(t))),
            1 => (0.002..0.5f64).prop_map(|t| ("queue.p95", json!(format!("{t}s")))),
        ],
        0.0..0.3f64,
        (wait(0.0, 60.0), wait(0.0, 60.0)),
        prop::option::of((policies.clone(), policies)),
        (prop::sample::select(vec!["max", "min", "disabled"]), prop::sample::select(vec!["max", "min", "disabled"])),
        (secs(1.0, 20.0), wait(0.0, 15.0)),
    )
        .prop_map(|((metric, target), tolerance, (us, ds), policies, (usel, dsel), (window, delay))| {
            let mut r = json!({"rule": "hpa", "metric": metric, "target": target,
                               "tolerance": tolerance, "up_stabilization": us,
                               "down_stabilization": ds, "up_select": usel, "down_select": dsel,
                               "window": window, "delay": delay});
            if let Some((up, down)) = policies {
                r["up_policies"] = Value::from(up);
                r["down_policies"] = Value::from(down);
            }
            r
        });
    let target_tracking = (
        prop::sample::select(vec!["cpu", "utilisation"]),
        0.1..0.95f64,
        (1i64..4, 1i64..6),
        0.3..0.99f64,
        wait(0.0, 30.0),
        (secs(1.0, 20.0), wait(0.0, 5.0)),
    )
        .prop_map(
            |(metric, target, (out, inn), ratio, cooldown, (window, delay))| {
                json!({"rule": "target_tracking", "metric": metric, "target": target,
                   "scale_out_datapoints": out, "scale_in_datapoints": inn,
                   "scale_in_ratio": ratio, "scale_in_cooldown": cooldown, "window": window,
                   "delay": delay})
            },
        );
    (
        prop_oneof![
            heroku.boxed(),
            judoscale.boxed(),
            hirefire.boxed(),
            hpa.boxed(),
            target_tracking.boxed(),
            schedule.boxed(),
        ],
        prop_oneof![3 => secs(0.5, 10.0), 1 => secs(0.05, 0.5)],
    )
        .prop_map(move |(mut r, interval)| {
            r["min"] = json!(min);
            r["max"] = json!(max);
            r["interval"] = interval;
            r
        })
}

/// `fleet.boot_time` (a duration or a distribution), and `boot_timeout`, `stop_delay` and
/// `shutdown_grace` (0 now and then), each present or not.
fn lifecycle() -> impl Strategy<Value = Vec<(&'static str, Value)>> {
    let boot = prop_oneof![
        3 => secs(0.05, 20.0),
        1 => (0.05..10.0f64).prop_map(|m| json!({"distribution": "exponential", "mean": format!("{m}s")})),
        1 => (0.0..5.0f64, 0.1..20.0f64).prop_map(|(lo, w)| json!({"distribution": "uniform", "min": format!("{lo}s"), "max": format!("{}s", lo + w)})),
        1 => (0.1..10.0f64, 0.1..1.5f64).prop_map(|(m, s)| json!({"distribution": "lognormal", "median": format!("{m}s"), "sigma": s})),
    ];
    (
        prop::option::weighted(0.8, boot),
        prop::option::weighted(0.5, secs(0.5, 30.0)),
        prop::option::weighted(0.6, wait(0.0, 3.0)),
        prop::option::weighted(0.6, wait(0.0, 10.0)),
    )
        .prop_map(|(boot, timeout, stop, grace)| {
            [
                ("boot_time", boot),
                ("boot_timeout", timeout),
                ("stop_delay", stop),
                ("shutdown_grace", grace),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
        })
}

/// A dyno-model document ([`document`]) on a fleet of at most 20 dynos that an autoscaler
/// resizes, for a run of seconds: one router or several, every routing policy.
fn autoscaled_document() -> impl Strategy<Value = Value> {
    (1i64..=20, 0i64..20, 0i64..20)
        .prop_flat_map(|(max, a, b)| {
            let min = 1 + a % max;
            let dynos = min + b % (max - min + 1);
            // Boxed: their value trees inline would overflow the test thread's stack.
            (
                document().boxed(),
                rule(min, max).boxed(),
                Just(dynos),
                lifecycle().boxed(),
                (10.0..40.0f64, prop_oneof![Just(0.0), 0.0..10.0f64]),
                1i64..4,
                prop::sample::select(vec![
                    "random",
                    "round_robin",
                    "least_connections",
                    "intelligent",
                    "power_of_d",
                    "retry_if_busy",
                ]),
                prop_oneof![3 => Just("auto"), 1 => Just("events")],
            )
        })
        .prop_map(
            |(mut doc, rule, dynos, lifecycle, (duration, warmup), routers, policy, engine)| {
                doc["autoscale"] = rule;
                doc["fleet"]["dynos"] = json!(dynos);
                if lifecycle.iter().any(|(k, _)| *k == "boot_time") {
                    doc["app"].as_object_mut().unwrap().remove("boot_time");
                }
                for (key, value) in lifecycle {
                    doc["fleet"][key] = value;
                }
                doc["router"]["policy"] = json!(policy);
                doc["router"]["routers"] = json!(routers);
                doc["run"]["duration"] = json!(duration);
                doc["run"]["warmup"] = json!(warmup);
                doc["run"]["engine"] = json!(engine);
                // Fewer requests than the fixed fleets' runs: a run here is longer.
                if let Some(rate) = doc["arrivals"]["rate"].as_f64() {
                    doc["arrivals"]["rate"] = json!(rate.min(100.0));
                }
                tame(doc)
            },
        )
}

/// The document, with each section of the dyno model that validation refuses replaced by a
/// plain valid one, so that most runs get past them to the fleet (the fixed fleets' fuzzer
/// covers those refusals); refusals of `[autoscale]` and the lifecycle keys are kept.
fn tame(mut doc: Value) -> Value {
    for _ in 0..8 {
        let path = match Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted) {
            Err(Error::Config { path, .. }) => path,
            _ => return doc,
        };
        let section = path.split(['.', '[']).next().unwrap_or_default();
        match section {
            "app" => {
                let boot = doc["app"].get("boot_time").cloned();
                doc["app"] = json!({"server": "puma", "processes": 2, "threads": 3});
                if let Some(b) = boot {
                    doc["app"]["boot_time"] = b;
                }
            }
            "request" | "resources" => {
                doc["request"] = json!({"phases": [{"cpu": "5ms"}, {"io": "20ms"}]});
                doc["resources"] = json!({});
            }
            "arrivals" => doc["arrivals"] = json!({"process": "poisson", "rate": 30}),
            "router" => {
                let keep = ["policy", "routers", "connect"];
                let keep = if path.starts_with("router.connect") {
                    &keep[..2]
                } else {
                    &keep[..]
                };
                doc["router"]
                    .as_object_mut()
                    .unwrap()
                    .retain(|k, _| keep.contains(&k.as_str()));
            }
            "fleet" if path == "fleet.type" || path == "fleet.cores" => {
                doc["fleet"].as_object_mut().unwrap().remove(&path[6..]);
            }
            _ => return doc,
        }
    }
    doc
}

/// The fleet's books, on top of [`check_report`]: what the fleet cost is its size over the
/// window, its size stays within the autoscaler's reach, and the counts add up.
fn check_fleet(report: &dynosim_engine::RunReport, s: &Scenario, doc: &Value) {
    let a = s.autoscale.as_ref().expect("an autoscaler");
    let (min, max) = (f64::from(a.bounds().min), f64::from(a.bounds().max));
    let whole_run = doc["arrivals"]["requests"].is_u64();
    // A schedule that never goes down, from a fleet no larger: no dyno ever stops.
    let rising = doc["autoscale"]["schedule"].as_array().and_then(|points| {
        let sizes: Vec<u64> = points.iter().map(|p| p[1].as_u64().unwrap()).collect();
        let rises = sizes.windows(2).all(|w| w[0] <= w[1]) && sizes[0] >= u64::from(s.dynos);
        rises.then(|| sizes.last().copied().unwrap() as f64)
    });
    let constant_boot = doc["fleet"]["boot_time"]
        .as_str()
        .map(|b| b.trim_end_matches('s').parse::<f64>().unwrap());
    for r in &report.per_replication {
        let f = r.fleet.as_ref().expect("fleet figures");
        let scaled = r.autoscale.as_ref().expect("autoscale figures");
        let size = &f.size;
        let eps = 1e-9 * (1.0 + f.dyno_seconds);
        assert!(
            size.min >= min,
            "fleet.size.min {} below autoscale.min: {doc}",
            size.min
        );
        assert!(
            size.min <= size.mean + eps && size.mean <= size.max + eps,
            "{size:?}: {doc}"
        );
        assert!(
            size.max <= 2.0 * max,
            "fleet.size.max {} above twice autoscale.max: {doc}",
            size.max
        );
        assert!(
            size.min.fract() == 0.0 && size.max.fract() == 0.0,
            "{size:?}: {doc}"
        );
        assert!(f.dyno_seconds.is_finite() && f.dyno_seconds >= 0.0, "{doc}");
        if !whole_run {
            let expected = size.mean * s.duration;
            assert!(
                (f.dyno_seconds - expected).abs() <= 1e-6 * (1.0 + expected),
                "dyno_seconds {} vs size.mean x window {expected}: {doc}",
                f.dyno_seconds
            );
        }
        assert!(
            f.serving_mean >= 0.0 && f.serving_mean <= size.mean + 1e-9 * (1.0 + size.mean),
            "serving_mean {} vs size.mean {}: {doc}",
            f.serving_mean,
            size.mean
        );
        assert!(scaled.reversals <= scaled.actions, "{scaled:?}: {doc}");
        let e = &r.error_counts;
        let sum = e.h11
            + e.h12
            + e.h13
            + e.client_timeout
            + e.queue_timeout
            + e.app_timeout
            + e.shed
            + e.r15
            + e.no_dyno
            + e.shutdown
            + e.service_timeout.unwrap_or(0);
        assert_eq!(sum, e.total, "error counts sum to the total: {e:?}: {doc}");
        if let Some(top) = rising {
            assert!(
                size.max <= top,
                "fleet.size.max {} above the schedule's {top}: {doc}",
                size.max
            );
            assert_eq!(e.shutdown, 0, "no dyno stops: {doc}");
        }
        if constant_boot.is_some_and(|b| b < s.lifecycle.boot_timeout) {
            assert_eq!(f.r10, 0, "every boot ends in time: {doc}");
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

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(200),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn autoscaled_fleets_run_and_keep_their_books(doc in autoscaled_document()) {
        match Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted) {
            Ok(s) => match run(&s, &never_interrupted) {
                Ok(report) => {
                    check_report(&report, &doc);
                    check_fleet(&report, &s, &doc);
                }
                Err(Error::Unstable { .. } | Error::Overloaded { .. }) => {}
                Err(other) => prop_assert!(false, "accepted, then {other:?} for {doc}"),
            },
            Err(Error::Config { path, message }) => {
                prop_assert!(!message.is_empty() && !path.is_empty());
                prop_assert!(!message.contains('\n'), "a one-line message: {message}");
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?} for {doc}"),
        }
    }
}
