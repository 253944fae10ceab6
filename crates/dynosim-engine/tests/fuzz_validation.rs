//! Scenario validation under fuzzing: property-based generators of scenario documents, mostly
//! valid, with values mutated into the extreme, the negative, the NaN-ish, the wrongly typed
//! and the deeply nested, for every distribution, policy and arrival process. For each one
//! [`Scenario::from_json`] must return (no panic, no endless loop) either a scenario or a
//! configuration/stability error, and an accepted scenario must have finite, positive
//! analytic moments and a finite offered load, relaxation time and quantiles: what `describe`
//! reports and what the stability check and the theory rely on. Nothing is run, so no case
//! allocates a fleet.
//!
//! A second property holds `[autoscale]` tables and the fleet's lifecycle keys (issue #24) on
//! a small valid scenario, so that every check of theirs is reached, and runs the accepted
//! ones that are small enough (5,000 cases by default).
//!
//! The number of cases is 100,000 by default, about 35 s in `cargo test --release` on a
//! 2-core machine; set it with `PROPTEST_CASES` (`PROPTEST_CASES=1000000 cargo test --release
//! --test fuzz_validation` for a longer hunt, a few hundred for a quick look). A failure is
//! shrunk to a small document; keep it as a named test in the regression corpus at the end of
//! this file.

use dynosim_engine::{never_interrupted, Error, Scenario};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn from_json(doc: &Value) -> Result<Scenario, Error> {
    Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted)
}

// ---------------------------------------------------------------------------------------------
// Generators.

/// A number as a scenario might hold one: ordinary, extreme, negative, zero or not finite
/// (serde_json writes NaN and infinities as null).
fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.001..100.0f64,
        1 => any::<f64>(),
        1 => prop::sample::select(vec![
            0.0, -0.0, -1.0, 1e-320, 5e-324, 1e-16, 1e-9, 1e300, f64::MAX, f64::MIN_POSITIVE,
            1e9, 1e10, f64::NAN, f64::INFINITY,
        ]),
    ]
}

fn unit() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "", "ns", "us", "ms", "s", " s", "min", "h", "d", "parsecs", "rps", "ms ", "1", "e", "/s",
    ])
}

/// A duration: a bare number, a number with a unit, or a string that only looks like one.
fn duration() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (0.001..1000.0f64, prop::sample::select(vec!["ms", "s", "min"]))
            .prop_map(|(x, u)| json!(format!("{x}{u}"))),
        2 => (number(), unit()).prop_map(|(x, u)| json!(format!("{x}{u}"))),
        1 => number().prop_map(|x| json!(x)),
        1 => "[-+]?[0-9_.]{0,6}([eE][-+]?[0-9]{0,3})? ?[a-zµ]{0,4}".prop_map(Value::String),
        1 => prop::sample::select(vec![
            json!("nan"), json!("inf"), json!("1e-320s"), json!("1e"), json!("1..2s"),
            json!(true), json!([1, "s"]), json!({"s": 1}), Value::Null, json!(-5),
        ]),
    ]
}

fn rate() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (1.0..20000.0f64, prop::sample::select(vec!["/s", "/min", " per second", " rps"]))
            .prop_map(|(x, u)| json!(format!("{x}{u}"))),
        2 => number().prop_map(|x| json!(x)),
        1 => (number(), prop::sample::select(vec!["/h", "rpsXYZ", "/", " req/s", "/fortnight"]))
            .prop_map(|(x, u)| json!(format!("{x}{u}"))),
        1 => prop::sample::select(vec![json!("fast"), json!(null), json!([150])]),
    ]
}

/// A rate schedule: mostly points from 0s with times that do not decrease, sometimes any
/// points at all (empty, unsorted, negative, wrongly shaped).
fn schedule() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop::collection::vec((0.0..600.0f64, 0.0..500.0f64), 0..6).prop_map(|mut pts| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            if let Some(first) = pts.first_mut() {
                first.0 = 0.0;
            }
            json!(pts.iter().map(|(t, r)| json!([format!("{t}s"), r])).collect::<Vec<_>>())
        }),
        2 => prop::collection::vec((duration(), rate()), 0..5)
            .prop_map(|pts| json!(pts.iter().map(|(t, r)| json!([t, r])).collect::<Vec<_>>())),
        1 => prop::sample::select(vec![
            json!([]), json!([[0]]), json!([["0s"]]), json!([[0, 1, 2]]), json!([0, 1]),
            json!([[0, 5], [10, -5]]), json!([["0s", "5/s"], ["1min", "1/s"], ["30s", "2/s"]]),
            json!([[0, 1e300], [1, 0]]),
        ]),
    ]
}

/// A daily sine as `arrivals.rate`, its keys sometimes missing or wrong.
fn sine() -> impl Strategy<Value = Value> {
    (rate(), rate(), duration(), duration(), 0usize..8).prop_map(
        |(mean, amplitude, period, peak, drop)| {
            let mut table = json!({"mean": mean, "amplitude": amplitude, "period": period,
                                   "peak": peak});
            match drop {
                0 => table["shape"] = json!("sine"),
                1..=4 => {
                    let key = ["mean", "amplitude", "period", "peak"][drop - 1];
                    table.as_object_mut().unwrap().remove(key);
                }
                _ => {}
            }
            table
        },
    )
}

/// Scheduled bursts: a few tables, each value sensible or not.
fn bursts() -> impl Strategy<Value = Value> {
    let jitter = prop_oneof![
        2 => duration(),
        1 => duration().prop_map(|m| json!({"distribution": "exponential", "mean": m})),
    ];
    let burst = (
        duration(),
        count(1..=1000),
        count(1..=3),
        jitter,
        duration(),
        0usize..6,
    )
        .prop_map(|(at, clients, requests, jitter, every, drop)| {
            let mut table = json!({"at": at, "clients": clients, "requests": requests,
                                   "jitter": jitter, "every": every});
            let keys = ["at", "clients", "requests", "jitter", "every"];
            if drop < keys.len() {
                table.as_object_mut().unwrap().remove(keys[drop]);
            }
            table
        });
    prop::collection::vec(burst, 0..3).prop_map(Value::from)
}

/// `[arrivals]`: Poisson at a constant rate, a schedule or a sine; batch; on/off; with bursts
/// on top now and then.
fn arrivals() -> impl Strategy<Value = Value> {
    let process = prop_oneof![
        8 => rate().prop_map(|rate| json!({"process": "poisson", "rate": rate})),
        2 => schedule().prop_map(|rate| json!({"process": "poisson", "rate": rate})),
        1 => sine().prop_map(|rate| json!({"process": "poisson", "rate": rate})),
        1 => (rate(), prop_oneof![
            count(1..=10),
            number().prop_map(|m| json!({"distribution": "geometric", "mean": m})),
        ])
            .prop_map(|(rate, size)| json!({"process": "batch", "rate": rate, "size": size})),
        1 => (rate(), duration(), duration())
            .prop_map(|(rate, on, off)| json!({"process": "on_off", "rate": rate, "on": on,
                                               "off": off})),
    ];
    (process, prop::option::weighted(0.15, bursts())).prop_map(|(mut process, bursts)| {
        if let Some(b) = bursts {
            process["burst"] = b;
        }
        process
    })
}

/// A whole number: small and sensible, at the edges of a range, or not whole at all.
fn count(sensible: std::ops::RangeInclusive<i64>) -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => sensible.prop_map(|n| json!(n)),
        1 => prop::sample::select(vec![
            json!(0), json!(-1), json!(10_000_000), json!(10_000_001), json!(100_000),
            json!(i64::MAX), json!(4_294_967_297_i64), json!(7.5), json!("7"), Value::Null,
        ]),
        1 => any::<i64>().prop_map(|n| json!(n)),
    ]
}

/// A percentile table: increasing mostly, sometimes not, sometimes with percents crowded
/// together or at the ends, and times across many orders of magnitude.
fn percentiles() -> impl Strategy<Value = Value> {
    let percent = prop_oneof![
        3 => 0.5..99.5f64,
        1 => prop::sample::select(vec![
            0.0, 100.0, 1e-300, 99.99999999999999, 50.0, 50.000000000001, -1.0, f64::NAN,
        ]),
    ];
    let time = prop_oneof![
        3 => (-3.0..3.0f64).prop_map(|e| json!(format!("{}s", 10f64.powf(e)))),
        1 => duration(),
        1 => (-320.0..308.0f64).prop_map(|e| json!(format!("{:e}s", 10f64.powf(e)))),
    ];
    (prop::collection::vec((percent, time), 0..10), any::<bool>()).prop_map(|(mut rows, sort)| {
        if sort {
            rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        json!(rows
            .into_iter()
            .map(|(p, t)| json!([p, t]))
            .collect::<Vec<_>>())
    })
}

/// Sample files for `empirical`, made once: ordinary, with a header, with a negative time,
/// empty; plus paths that are not files.
fn sample_files() -> &'static Vec<String> {
    static FILES: OnceLock<Vec<String>> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("dynosim-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| -> String {
            let path: PathBuf = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        };
        vec![
            write("ok.txt", "7\n46ms\n0.3\n3s\n"),
            write("header.txt", "time_ms\n7\n46\n255\n"),
            write("negative.txt", "7\n-1\n"),
            write("zeros.txt", "0\n0\n"),
            write("empty.txt", ""),
            write("huge.txt", "1e200\n1e300\n"),
            "/dev/zero".into(),
            "/dev/null".into(),
            dir.to_string_lossy().into_owned(),
            "/nonexistent/samples.txt".into(),
        ]
    })
}

fn service() -> impl Strategy<Value = Value> {
    let distribution = prop_oneof![
        duration().prop_map(|v| json!({"distribution": "constant", "value": v})),
        duration().prop_map(|m| json!({"distribution": "exponential", "mean": m})),
        (duration(), number())
            .prop_map(|(m, s)| json!({"distribution": "lognormal", "median": m, "sigma": s})),
        (number(), duration(), any::<bool>()).prop_map(|(k, v, by_scale)| {
            let key = if by_scale { "scale" } else { "median" };
            json!({"distribution": "weibull", "shape": k, key: v})
        }),
        (number(), duration(), any::<bool>()).prop_map(|(k, v, by_scale)| {
            let key = if by_scale { "scale" } else { "mean" };
            json!({"distribution": "gamma", "shape": k, key: v})
        }),
        (duration(), duration())
            .prop_map(|(lo, hi)| json!({"distribution": "uniform", "min": lo, "max": hi})),
        (
            prop::sample::select(sample_files().clone()),
            prop::option::of(prop::sample::select(vec!["ms", "s", "1", "1ms", "ns", "x"]))
        )
            .prop_map(|(file, unit)| {
                let mut d = json!({"distribution": "empirical", "file": file});
                if let Some(u) = unit {
                    d["unit"] = json!(u);
                }
                d
            }),
        percentiles().prop_map(|p| json!({"distribution": "quantiles", "percentiles": p})),
        Just(json!({"distribution": "pareto", "alpha": 1.5})),
    ];
    // Rounding and clipping, kept coarse enough that the exact moments sum over few cells
    // (a fine grid of 10⁷ cells is bounded work, but slow to repeat hundreds of times).
    let round_up = prop_oneof![
        3 => Just(None),
        2 => (0.1..100.0f64).prop_map(|ms| Some(json!(format!("{ms}ms")))),
        1 => duration().prop_map(Some),
    ];
    let clip = prop_oneof![
        3 => Just(None),
        1 => (duration(), duration()).prop_map(|(a, b)| Some(json!([a, b]))),
        1 => (0.0..0.05f64, 0.1..30.0f64)
            .prop_map(|(a, b)| Some(json!([format!("{a}s"), format!("{b}s")]))),
    ];
    (distribution, round_up, clip).prop_map(|(mut d, round_up, clip)| {
        if let Some(r) = round_up {
            d["round_up"] = r;
        }
        if let Some(c) = clip {
            d["clip"] = c;
        }
        d
    })
}

fn router() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            "random",
            "round_robin",
            "least_connections",
            "power_of_d",
            "retry_if_busy",
            "intelligent",
            "first",
            "least_request",
            "bounded_hash",
            "smart",
        ]),
        count(1..=4),
        prop::option::of(count(1..=5)),
        prop::option::of(count(1..=5)),
    )
        .prop_map(|(policy, routers, d, tries)| {
            let mut r = json!({"policy": policy, "routers": routers});
            if let Some(d) = d {
                r["d"] = d;
            }
            if let Some(t) = tries {
                r["tries"] = t;
            }
            r
        })
}

fn run_section() -> impl Strategy<Value = Value> {
    (
        duration(),
        duration(),
        count(1..=20),
        prop::option::of(count(1..=1_000_000)),
        prop::option::of(prop::sample::select(vec![
            json!("8GB"),
            json!("1MB"),
            json!("100 kB"),
            json!(1e12),
            json!("lots"),
            json!(-1),
        ])),
    )
        .prop_map(
            |(duration, warmup, replications, max_waiting, max_memory)| {
                let mut r =
                    json!({"duration": duration, "warmup": warmup, "replications": replications});
                if let Some(m) = max_waiting {
                    r["max_waiting"] = m;
                }
                if let Some(m) = max_memory {
                    r["max_memory"] = m;
                }
                r
            },
        )
}

/// A plausible duration (from `lo` to `hi` seconds, with a unit) most of the time, anything
/// [`duration`] makes otherwise, and now and then 0 or a negative.
fn some_duration(lo: f64, hi: f64) -> impl Strategy<Value = Value> {
    prop_oneof![
        14 => (lo..hi).prop_map(|s| json!(format!("{s}s"))),
        1 => duration(),
        1 => prop::sample::select(vec![json!("0s"), json!("-5s"), json!(0), json!("1e12s"),
                                       json!("1ns"), json!("25h")]),
    ]
}

/// A fraction: mostly in (0, 1], sometimes a percentage, 0, negative, huge or not a number.
fn some_fraction() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => (0.01..1.0f64).prop_map(|x| json!(x)),
        1 => number().prop_map(|x| json!(x)),
        1 => prop::sample::select(vec![json!(60), json!(0), json!(-0.5), json!(1), json!("60%"),
                                       json!("0.6"), json!(100.5), Value::Null]),
    ]
}

/// An HPA rate-limit policy list: mostly well formed, sometimes any shape.
fn hpa_policies() -> impl Strategy<Value = Value> {
    let policy = (
        prop_oneof![6 => prop::sample::select(vec!["pods", "percent"]), 1 => Just("replicas")],
        count(1..=200),
        some_duration(1.0, 1800.0),
    )
        .prop_map(|(kind, value, period)| json!({"type": kind, "value": value, "period": period}));
    prop_oneof![
        6 => prop::collection::vec(policy, 1..4).prop_map(Value::from),
        1 => prop::sample::select(vec![
            json!([]), json!({"type": "pods"}), json!([{"type": "pods", "value": 4}]),
            json!([{"type": "pods", "value": 4, "period": "15s", "extra": 1}]),
            json!([{"type": "percent", "value": 4_294_967_295_u64, "period": "15s"}]),
            json!("pods"),
        ]),
    ]
}

/// A `schedule`: mostly times of day in increasing order with sizes from 1 to 20, sometimes out
/// of order, past a day, negative sizes, or not pairs at all.
fn scale_schedule() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => prop::collection::vec((0.0..86_399.0f64, count(1..=20)), 1..5).prop_map(|mut pts| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            json!(pts.into_iter().map(|(t, n)| json!([format!("{t}s"), n])).collect::<Vec<_>>())
        }),
        2 => prop::collection::vec((some_duration(0.0, 86_400.0), count(1..=20)), 0..4)
            .prop_map(|pts| json!(pts.into_iter().map(|(t, n)| json!([t, n])).collect::<Vec<_>>())),
        1 => prop::sample::select(vec![
            json!([]), json!([["0s"]]), json!([["0s", 2, 3]]), json!([[0, 2], [0, 3]]),
            json!([["8h", 2], ["1h", 3]]), json!([["24h", 2]]), json!([["-1s", 2]]),
            json!([["0s", -2]]), json!([["0s", 2.5]]), json!([["0s", "2"]]), json!(5),
            json!({"0s": 2}),
        ]),
    ]
}

/// A value for the autoscale key `key`: what that key takes, plausible or wild, and sometimes
/// anything at all.
fn autoscale_value(key: &'static str) -> BoxedStrategy<Value> {
    let time = |lo: f64, hi: f64| some_duration(lo, hi).boxed();
    let plausible: BoxedStrategy<Value> = match key {
        "min" => prop_oneof![8 => (1i64..=5).prop_map(|n| json!(n)), 1 => count(1..=5)].boxed(),
        "max" => prop_oneof![8 => (1i64..=20).prop_map(|n| json!(n)), 1 => count(1..=20)].boxed(),
        "interval" => time(0.5, 600.0),
        "window" => time(1.0, 7200.0),
        "delay" | "cooldown" | "downscale_delay" | "upscale_timeout" | "downscale_timeout"
        | "up_stabilization" | "down_stabilization" | "scale_in_cooldown" => time(0.0, 4000.0),
        "target" => prop_oneof![1 => time(0.001, 5.0), 3 => some_fraction().boxed()].boxed(),
        "upscale_above" | "downscale_below" => time(0.001, 2.0),
        "downscale_ratio" | "tolerance" | "scale_in_ratio" => some_fraction().boxed(),
        "percentile" => prop_oneof![
            4 => (1.0..100.0f64).prop_map(|x| json!(x)),
            1 => number().prop_map(|x| json!(x)),
        ]
        .boxed(),
        "step"
        | "upscale_step"
        | "downscale_step"
        | "upscale_sensitivity"
        | "downscale_sensitivity"
        | "scale_out_datapoints"
        | "scale_in_datapoints" => count(1..=10).boxed(),
        "metric" => prop::sample::select(vec![
            json!("cpu"),
            json!("utilisation"),
            json!("queue.p95"),
            json!("queue"),
            json!("response"),
            json!("memory"),
            json!(1),
        ])
        .boxed(),
        "aggregation" => prop::sample::select(vec![
            json!("percentile"),
            json!("average"),
            json!("median"),
            json!(true),
        ])
        .boxed(),
        "up_select" | "down_select" => prop::sample::select(vec![
            json!("max"),
            json!("min"),
            json!("disabled"),
            json!("Max"),
            json!(0),
        ])
        .boxed(),
        "up_policies" | "down_policies" => hpa_policies().boxed(),
        "schedule" => scale_schedule().boxed(),
        _ => duration().boxed(),
    };
    prop_oneof![
        24 => plausible,
        1 => duration(),
        1 => number().prop_map(|x| json!(x)),
    ]
    .boxed()
}

/// Each rule and the keys it takes besides `rule`, `min`, `max` and `interval`: the engine's
/// own registry, so that a rule's new key is fuzzed as soon as it is registered.
fn rules() -> Vec<(&'static str, &'static [&'static str])> {
    dynosim_engine::autoscale::REGISTRY
        .0
        .iter()
        .map(|(name, keys, _)| (*name, *keys))
        .collect()
}

/// Every key some rule takes.
fn all_rule_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = rules()
        .iter()
        .flat_map(|(_, k)| k.iter().copied())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// An `[autoscale]` table: a rule (now and then an unknown one, or none), `min` and `max`
/// (sometimes missing or out of order), `interval`, some of the rule's own keys with plausible
/// and wild values, and now and then a key of another rule or of no rule.
fn autoscale() -> impl Strategy<Value = Value> {
    let rules = rules();
    (0..rules.len()).prop_flat_map(move |r| {
        let (rule, keys) = rules[r];
        let own =
            prop::sample::subsequence(keys.to_vec(), 0..=keys.len()).prop_flat_map(|chosen| {
                chosen
                    .into_iter()
                    .map(|k| autoscale_value(k).prop_map(move |v| (k, v)))
                    .collect::<Vec<_>>()
            });
        let name = prop_oneof![
            20 => Just(json!(rule)),
            1 => prop::sample::select(vec![json!("keda"), json!("Heroku"), json!(3),
                                           Value::Null, json!("")]),
        ];
        (
            name,
            prop::option::weighted(0.97, autoscale_value("max")),
            prop::option::weighted(0.6, autoscale_value("min")),
            prop::option::weighted(0.6, autoscale_value("interval")),
            own,
            prop::option::weighted(0.1, prop::sample::select(all_rule_keys())),
            prop::option::weighted(0.03, Just("scale_to_zero")),
            autoscale_value("target"),
        )
            .prop_map(
                move |(name, max, min, interval, own, other, unknown, stray)| {
                    let mut t = Map::new();
                    if !name.is_null() {
                        t.insert("rule".into(), name);
                    }
                    for (k, v) in [("max", max), ("min", min), ("interval", interval)] {
                        if let Some(v) = v {
                            t.insert(k.into(), v);
                        }
                    }
                    // The HPA's and target tracking's required target, most of the time.
                    if matches!(rule, "hpa" | "target_tracking")
                        && !own.iter().any(|(k, _)| *k == "target")
                    {
                        t.insert("target".into(), json!(0.6));
                    }
                    for (k, v) in own {
                        t.insert(k.into(), v);
                    }
                    if let Some(k) = other {
                        t.entry(k).or_insert(stray);
                    }
                    if let Some(k) = unknown {
                        t.insert(k.into(), json!(true));
                    }
                    Value::Object(t)
                },
            )
    })
}

/// `fleet.boot_time` (a duration or a distribution), `fleet.boot_timeout`, `fleet.stop_delay`
/// and `fleet.shutdown_grace`, each present or not, plausible or wild.
fn lifecycle() -> impl Strategy<Value = Vec<(&'static str, Value)>> {
    let boot = prop_oneof![
        4 => some_duration(0.1, 120.0),
        1 => some_duration(0.1, 60.0)
            .prop_map(|m| json!({"distribution": "exponential", "mean": m})),
        1 => (some_duration(0.1, 60.0), number())
            .prop_map(|(m, s)| json!({"distribution": "lognormal", "median": m, "sigma": s})),
        1 => (some_duration(0.0, 60.0), some_duration(0.0, 120.0))
            .prop_map(|(lo, hi)| json!({"distribution": "uniform", "min": lo, "max": hi})),
        1 => service().boxed(),
    ];
    (
        prop::option::weighted(0.5, boot),
        prop::option::weighted(0.3, some_duration(0.5, 120.0)),
        prop::option::weighted(0.3, some_duration(0.0, 5.0)),
        prop::option::weighted(0.3, some_duration(0.0, 60.0)),
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

/// A document, then one of a few structural mutations: a section dropped, an unknown key,
/// a value buried under deep nesting, a section of the wrong type.
fn document() -> impl Strategy<Value = Value> {
    let doc = (
        arrivals(),
        service(),
        count(1..=200),
        count(1..=4),
        router(),
        run_section(),
        // Boxed: their value trees inline would overflow the test thread's stack.
        prop::option::weighted(0.3, autoscale().boxed()),
        lifecycle().boxed(),
        any::<bool>(),
    )
        .prop_map(
            |(arrivals, service, dynos, slots, router, run, autoscale, lifecycle, inside)| {
                let mut doc = json!({
                    "name": "fuzz",
                    "arrivals": arrivals,
                    "service": service,
                    "fleet": {"dynos": dynos, "slots": slots},
                    "router": router,
                    "run": run,
                });
                for (key, value) in lifecycle {
                    doc["fleet"][key] = value;
                }
                if let Some(table) = autoscale {
                    // Half the time a fleet that starts inside [min, max] (when both are
                    // numbers), to get past that check to the rest.
                    let max = table.get("max").and_then(Value::as_i64);
                    let min = table.get("min").map_or(Some(1), Value::as_i64);
                    if let (true, Some(min), Some(max)) = (inside, min, max) {
                        if min <= max {
                            doc["fleet"]["dynos"] = json!(min + (max - min) / 2);
                        }
                    }
                    doc["autoscale"] = table;
                }
                doc
            },
        );
    let mutation = prop_oneof![
        6 => Just(None),
        1 => (0usize..7, 0usize..300).prop_map(Some),
    ];
    (doc, mutation).prop_map(|(mut doc, mutation)| {
        if let Some((which, depth)) = mutation {
            let sections = [
                "arrivals",
                "service",
                "fleet",
                "router",
                "run",
                "name",
                "autoscale",
            ];
            let section = sections[which];
            let map: &mut Map<String, Value> = doc.as_object_mut().unwrap();
            match depth % 4 {
                0 => {
                    map.remove(section);
                }
                1 => {
                    map.insert("unexpected".into(), json!(depth));
                }
                2 => {
                    let mut nested = json!(1);
                    for _ in 0..depth {
                        nested = json!([nested]);
                    }
                    map.insert(section.into(), nested);
                }
                _ => {
                    map.insert(section.into(), json!(depth.to_string()));
                }
            }
        }
        doc
    })
}

// ---------------------------------------------------------------------------------------------
// The property.

/// What `describe` and the stability check compute from an accepted scenario must be finite.
fn check_accepted(s: &Scenario, doc: &Value) {
    let (mean, second) = (s.service.mean(), s.service.second_moment());
    assert!(mean.is_finite() && mean > 0.0, "mean {mean}: {doc}");
    assert!(
        second.is_finite() && second > 0.0,
        "second moment {second}: {doc}"
    );
    let load = s.offered_load();
    assert!(load.is_finite() && load > 0.0, "offered load {load}: {doc}");
    assert!(s.busy_slots_needed().is_finite(), "{doc}");
    for p in [0.001, 0.5, 0.999] {
        let q = s.service.quantile(p);
        assert!(q.is_finite() && q >= 0.0, "quantile({p}) = {q}: {doc}");
    }
    match s.check_stable() {
        Ok(()) => {
            let t = s.relaxation_time();
            assert!(
                t.is_some_and(|t| t.is_finite() && t >= 0.0),
                "relaxation time {t:?}: {doc}"
            );
        }
        Err(Error::Unstable { offered_load, .. }) => assert!(offered_load >= 1.0, "{doc}"),
        Err(e) => panic!("check_stable: {e}: {doc}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(100_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn validation_accepts_or_explains_every_document(doc in document()) {
        match from_json(&doc) {
            Ok(s) => check_accepted(&s, &doc),
            Err(Error::Config { path, message }) => {
                prop_assert!(!message.is_empty());
                prop_assert!(!message.contains('\n'), "a one-line message: {message}");
                prop_assert!(!path.is_empty(), "a key path for {message:?}: {doc}");
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?} for {doc}"),
        }
    }
}

/// A small valid scenario with an `[autoscale]` table and the lifecycle keys, most of them
/// well formed: the whole document gets past the other sections' checks, so that every
/// autoscale and lifecycle check is reached.
fn autoscaled_document() -> impl Strategy<Value = Value> {
    (
        autoscale(),
        lifecycle(),
        (5.0..100.0f64, 0.005..0.1f64, 1i64..4),
        prop::option::weighted(0.8, 0usize..100),
        prop_oneof![6 => some_duration(10.0, 600.0), 1 => duration()],
        prop_oneof![4 => Just(json!("0s")), 2 => some_duration(0.0, 60.0)],
        1i64..3,
    )
        .prop_map(
            |(table, lifecycle, (rate, mean, slots), inside, run_for, warmup, replications)| {
                let max = table.get("max").and_then(Value::as_i64).unwrap_or(3);
                let min = table.get("min").map_or(Some(1), Value::as_i64).unwrap_or(1);
                let dynos = match inside {
                    Some(k) if min <= max => min + k as i64 % (max - min + 1),
                    Some(k) => 1 + k as i64 % 5,
                    None => [0, 1, 25, -3][usize::from(max % 4 == 0)],
                };
                let mut doc = json!({
                    "arrivals": {"process": "poisson", "rate": rate},
                    "service": {"distribution": "exponential", "mean": mean},
                    "fleet": {"dynos": dynos, "slots": slots},
                    "router": {"policy": "random"},
                    "autoscale": table,
                    "run": {"duration": run_for, "warmup": warmup, "replications": replications,
                            "seed": 1},
                });
                for (key, value) in lifecycle {
                    doc["fleet"][key] = value;
                }
                doc
            },
        )
}

/// Whether an accepted scenario is small enough to run here: few requests and few
/// evaluations of its autoscaler.
fn cheap_to_run(s: &Scenario) -> bool {
    let horizon = s.warmup + s.duration;
    let replications = f64::from(s.replications);
    let evaluations = s.autoscale.as_ref().map_or(0.0, |a| horizon / a.interval());
    s.arrival_rate() * horizon * replications < 20_000.0 && evaluations * replications < 5_000.0
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(5_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// `[autoscale]` and the lifecycle keys: every table is accepted or refused with one line
    /// naming a key path (under `autoscale` or `fleet`, or the run's budget); an accepted one
    /// is sane, and, when small enough, runs.
    #[test]
    fn autoscale_tables_are_accepted_or_explained_and_accepted_ones_run(doc in autoscaled_document()) {
        match from_json(&doc) {
            Ok(s) => {
                check_accepted(&s, &doc);
                let a = s.autoscale.as_ref().expect("an autoscaler");
                let b = a.bounds();
                prop_assert!(b.min >= 1 && b.min <= b.max && (b.min..=b.max).contains(&s.dynos), "{doc}");
                prop_assert!(a.interval().is_finite() && a.interval() > 0.0, "{doc}");
                if s.check_stable().is_ok() && cheap_to_run(&s) {
                    match dynosim_engine::run(&s, &never_interrupted) {
                        Ok(report) => prop_assert!(report.per_replication.iter().all(|r| r.fleet.is_some())),
                        Err(Error::Overloaded { .. }) => {}
                        Err(e) => prop_assert!(false, "accepted, then {e:?}: {doc}"),
                    }
                }
            }
            Err(Error::Config { path, message }) => {
                prop_assert!(!message.contains('\n'), "a one-line message: {message}");
                prop_assert!(!message.is_empty(), "{path}");
                let known = ["autoscale", "fleet", "run"];
                prop_assert!(
                    known.iter().any(|k| path == *k || path.starts_with(&format!("{k}.")) || path.starts_with(&format!("{k}["))),
                    "a key path under autoscale, fleet or run: {path:?}: {message}: {doc}"
                );
            }
            Err(Error::Unstable { .. }) => {}
            Err(other) => prop_assert!(false, "unexpected error {other:?} for {doc}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Regression corpus: each case issue #9 names, and each case the fuzzer found.

/// A valid scenario to edit: 150 requests/s, 75 single-slot dynos, random routing.
fn base() -> Value {
    json!({
        "arrivals": {"process": "poisson", "rate": "9000/min"},
        "service": {"distribution": "exponential", "mean": "100ms"},
        "fleet": {"dynos": 75, "slots": 1},
        "router": {"policy": "random"},
        "run": {"duration": "1min", "warmup": "0s", "replications": 2, "seed": 1},
    })
}

fn with(edits: &[(&str, Value)]) -> Value {
    let mut doc = base();
    for (path, value) in edits {
        let (section, key) = path.split_once('.').unwrap();
        doc[section][key] = value.clone();
    }
    doc
}

/// Asserts a configuration error at `path` whose message contains each fragment.
fn assert_refused(doc: &Value, path: &str, fragments: &[&str]) {
    match from_json(doc) {
        Err(Error::Config { path: got, message }) => {
            assert_eq!(got, path, "{message}");
            for f in fragments {
                assert!(message.contains(f), "{message:?} lacks {f:?}");
            }
        }
        Err(other) => panic!("expected a config error at {path}, got {other:?}"),
        Ok(_) => panic!("expected a config error at {path}, got a scenario: {doc}"),
    }
}

#[test]
fn quantile_table_whose_mean_is_nan_is_rejected() {
    // Percentiles so close that ln t climbs 700 orders of magnitude in no z at all: the closed
    // form of the mean is ∞ × 0 = NaN, and a NaN offered load passed `>= 1.0` as stable.
    let mut doc = base();
    doc["service"] = json!({"distribution": "quantiles", "percentiles": [
        [50, "1ms"], [50.000000000001, "1e300s"], [99, "2e300s"]]});
    assert_refused(&doc, "service.percentiles", &["not finite"]);
}

#[test]
fn lognormal_whose_second_moment_overflows_is_rejected() {
    let mut doc = base();
    doc["service"] = json!({"distribution": "lognormal", "median": "50ms", "sigma": 20});
    assert_refused(&doc, "service.median", &["second moment inf"]);
}

#[test]
fn a_nan_offered_load_is_not_stable() {
    #[derive(Debug)]
    struct NanMean;
    impl dynosim_engine::dist::ServiceDistribution for NanMean {
        fn sample(&self, _: &mut dynosim_engine::rng::SimRng) -> f64 {
            0.1
        }
        fn mean(&self) -> f64 {
            f64::NAN
        }
        fn second_moment(&self) -> f64 {
            f64::NAN
        }
        fn quantile(&self, _: f64) -> f64 {
            0.1
        }
        fn cdf(&self, _: f64) -> f64 {
            1.0
        }
    }
    let mut s = from_json(&base()).unwrap();
    s.service = std::sync::Arc::new(NanMean);
    assert!(matches!(s.check_stable(), Err(Error::Config { .. })));
    assert!(matches!(
        dynosim_engine::run(&s, &never_interrupted),
        Err(Error::Config { .. })
    ));
}

#[test]
fn gamma_with_underflowing_scale_is_rejected_quickly() {
    let mut doc = base();
    doc["service"] = json!({"distribution": "gamma", "shape": 0.5, "scale": "1e-320s",
                            "round_up": "1ms"});
    assert_refused(&doc, "service.scale", &["at least 1 ns"]);
    // A scale just above the floor and a shape that brings the mean under it.
    doc["service"] = json!({"distribution": "gamma", "shape": 1e-300, "scale": "1s",
                            "round_up": "1ms"});
    assert_refused(&doc, "service.shape", &["below 1 ns"]);
}

#[test]
fn gamma_with_a_huge_shape_is_rejected_not_left_computing() {
    // Found by the fuzzer: statrs's cdf never returned for shape 1e300.
    let mut doc = base();
    doc["service"] = json!({"distribution": "gamma", "shape": 1e300, "mean": "100ms"});
    assert_refused(&doc, "service.shape", &["at most 10000"]);
}

#[test]
fn gamma_with_a_tiny_shape_does_not_panic_in_its_quantile_search() {
    // Found by the fuzzer: statrs's Gamma::cdf panicked (gamma_lr unwraps XInvalid) once
    // x / scale underflowed to 0 while the search halved its bracket.
    let mut doc = base();
    doc["service"] = json!({"distribution": "gamma", "shape": 2.495792524158534e-185,
                            "mean": "0.001ms"});
    let s = from_json(&doc).unwrap();
    assert!(s.service.quantile(0.5).is_finite());
    assert!(s.service.quantile(1e-9) >= 0.0);
}

#[test]
fn durations_below_a_nanosecond_are_rejected() {
    assert_refused(
        &with(&[("run.duration", json!(1e-16))]),
        "run.duration",
        &["at least 1 ns", "1e-16"],
    );
    assert_refused(
        &with(&[("service.round_up", json!("0.1ns"))]),
        "service.round_up",
        &["at least 1 ns"],
    );
    assert_refused(
        &with(&[("service.mean", json!("1e-320s"))]),
        "service.mean",
        &["at least 1 ns"],
    );
}

#[test]
fn a_run_too_long_for_the_clock_is_rejected() {
    assert_refused(
        // Over the work budget too: raise it to reach the clock's own check.
        &with(&[
            ("run.duration", json!("1e15s")),
            ("run.max_requests", json!(1e30)),
        ]),
        "run.duration",
        &["simulated clock", "mean gap between arrivals"],
    );
}

#[test]
fn a_run_that_expects_no_arrival_is_rejected() {
    // Found by the fuzzer: at 1e-320/s the mean gap was infinite and the offered load 0.
    assert_refused(
        &with(&[("arrivals.rate", json!(1e-320))]),
        "run.duration",
        &["at least one"],
    );
    assert_refused(
        &with(&[
            ("arrivals.rate", json!("1/h")),
            ("run.duration", json!("30min")),
        ]),
        "run.duration",
        &["expects 5e-1 arrivals"],
    );
}

#[test]
fn rates_above_one_per_nanosecond_are_rejected() {
    assert_refused(
        &with(&[("arrivals.rate", json!(1e12))]),
        "arrivals.rate",
        &["at most 1e9"],
    );
}

#[test]
fn rate_with_trailing_nonsense_is_rejected() {
    assert_refused(
        &with(&[("arrivals.rate", json!("150 rpsXYZ"))]),
        "arrivals.rate",
        &["expected a rate", "150 rpsXYZ"],
    );
}

#[test]
fn router_tries_and_d_are_range_checked_not_truncated() {
    // 2^32 + 1 was truncated to 1 try.
    let mut doc = base();
    doc["router"] = json!({"policy": "retry_if_busy", "tries": 4_294_967_297_i64});
    assert_refused(&doc, "router.tries", &[">= 1 and <= 100", "4294967297"]);
    doc["router"] = json!({"policy": "power_of_d", "d": 17});
    assert_refused(&doc, "router.d", &[">= 1 and <= 16", "17"]);
    doc["router"] = json!({"policy": "power_of_d", "d": 16});
    assert!(from_json(&doc).is_ok());
    assert_refused(
        &with(&[("run.max_waiting", json!(i64::MAX))]),
        "run.max_waiting",
        &["<= 1000000000"],
    );
}

#[test]
fn a_fleet_too_large_for_memory_is_refused_before_allocating() {
    // 10⁷ dynos × 1000 slots: 80 GB of slot state on the direct engine. This aborted the
    // process (SIGABRT on a failed allocation).
    let doc = with(&[
        ("fleet.dynos", json!(10_000_000)),
        ("fleet.slots", json!(1000)),
    ]);
    assert_refused(
        &doc,
        "fleet",
        &[
            "10000000 dynos x 1000 slots needs about 8",
            "GB of engine state",
            "the limit is 8 GB (run.max_memory)",
        ],
    );
    // The same fleet is accepted with the limit raised (nothing is allocated to validate it).
    let mut raised = doc.clone();
    raised["run"]["max_memory"] = json!("200GB");
    assert!(from_json(&raised).is_ok());
}

#[test]
fn many_routers_times_many_dynos_are_refused_before_allocating() {
    // least_connections keeps, per router, a ranked index over every dyno.
    let mut doc = with(&[("fleet.dynos", json!(10_000_000))]);
    doc["router"] = json!({"policy": "least_connections", "routers": 100_000});
    assert_refused(
        &doc,
        "router.routers",
        &["100000 routers x 10000000 dynos", "the limit is 8 GB"],
    );
}

#[test]
fn a_small_memory_limit_runs_replications_one_at_a_time() {
    // Room for one replication's state but not two: the run goes ahead, one at a time.
    let mut doc = with(&[("fleet.dynos", json!(100_000))]);
    doc["run"]["replications"] = json!(4);
    let s = from_json(&doc).unwrap();
    let one = s.replication_bytes();
    doc["run"]["max_memory"] = json!(1.5 * one);
    let s = from_json(&doc).unwrap();
    assert_eq!(s.replications_at_once(), 1);
    assert_eq!(s.run_bytes(), one);
    doc["run"]["max_memory"] = json!(0.5 * one);
    assert_refused(&doc, "run.max_waiting", &["the limit is"]);
}

#[test]
fn a_runs_memory_is_its_replications_at_once_on_its_threads() {
    // What a server admitting runs counts (dynosim serve): room for three replications, on
    // two threads two at a time, on four three at a time, and never above run.max_memory.
    let mut doc = with(&[("fleet.dynos", json!(100_000))]);
    doc["run"]["replications"] = json!(4);
    let one = from_json(&doc).unwrap().replication_bytes();
    doc["run"]["max_memory"] = json!(3.5 * one);
    for (threads, at_once) in [(1, 1.0), (2, 2.0), (4, 3.0)] {
        doc["run"]["threads"] = json!(threads);
        let s = from_json(&doc).unwrap();
        assert_eq!(s.run_bytes(), at_once * one, "{threads} threads");
        assert!(s.run_bytes() <= s.max_memory);
    }
}

#[test]
fn a_traces_memory_is_the_event_driven_engines_whatever_runs_the_scenario() {
    // Random routing on single-slot dynos runs on the direct engine; its trace (a report's
    // series over time) runs on the event-driven one, whose state is larger.
    let mut doc = with(&[("fleet.dynos", json!(100_000))]);
    let auto = from_json(&doc).unwrap();
    doc["run"]["engine"] = json!("events");
    let events = from_json(&doc).unwrap();
    assert!(auto.trace_bytes() > auto.replication_bytes());
    assert_eq!(auto.trace_bytes(), events.replication_bytes());
    assert_eq!(events.trace_bytes(), events.replication_bytes());
}

#[test]
fn per_dyno_utilisation_is_kept_only_in_the_summary_of_small_fleets() {
    let run = |dynos: u32| {
        let mut doc = with(&[("fleet.dynos", json!(dynos))]);
        doc["arrivals"]["rate"] = json!(100.0);
        doc["run"]["duration"] = json!(1.0);
        dynosim_engine::run(&from_json(&doc).unwrap(), &never_interrupted).unwrap()
    };
    let small = run(100);
    let per_dyno = small.summary["utilisation"]["per_dyno"].as_array().unwrap();
    assert_eq!(per_dyno.len(), 100);
    let big = run(dynosim_engine::report::PER_DYNO_LIMIT + 1);
    assert!(big.summary["utilisation"].get("per_dyno").is_none());
    for report in [&small, &big] {
        for r in &report.per_replication {
            assert!(r.utilisation.per_dyno.is_empty());
            assert!(serde_json::to_value(r).unwrap()["utilisation"]
                .get("per_dyno")
                .is_none());
        }
    }
}

#[test]
fn empirical_sample_file_must_be_a_regular_file() {
    let mut doc = base();
    doc["service"] = json!({"distribution": "empirical", "file": "/dev/zero"});
    assert_refused(&doc, "service.file", &["/dev/zero", "not a regular file"]);
}

#[test]
fn empirical_unit_must_be_a_unit_name() {
    let path = &sample_files()[0];
    for unit in ["1", "1ms", "", "parsecs"] {
        let mut doc = base();
        doc["service"] = json!({"distribution": "empirical", "file": path, "unit": unit});
        assert_refused(&doc, "service.unit", &["expected a time unit"]);
    }
    let mut doc = base();
    doc["service"] = json!({"distribution": "empirical", "file": path, "unit": "ms"});
    assert!(from_json(&doc).is_ok());
}

#[test]
fn deeply_nested_values_are_an_error_not_a_stack_overflow() {
    let nested = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let text = base()
        .to_string()
        .replace("\"dynos\":75", &format!("\"dynos\":{nested}"));
    assert!(text.len() > 200_000);
    // serde_json's recursion limit stops the parse.
    assert!(matches!(
        Scenario::from_json(&text, Path::new("."), &never_interrupted),
        Err(Error::Config { .. })
    ));
}

#[test]
fn the_report_states_the_relaxation_time() {
    let s = from_json(&base()).unwrap();
    let report = dynosim_engine::run(&s, &never_interrupted).unwrap();
    // Random routing: M/M/1 per dyno at ρ = 150 × 0.1 / 75 = 0.2, so 4ρE[S]/(1 − ρ)².
    let expected = 4.0 * 0.2 * 0.1 / (0.8f64 * 0.8);
    let t = report.relaxation_time.unwrap();
    assert!((t - expected).abs() < 1e-12, "{t} vs {expected}");
}

// Bad traffic (issue #12): one clear line each, naming the key path and what was expected.

#[test]
fn a_schedule_whose_times_decrease_is_refused() {
    assert_refused(
        &with(&[(
            "arrivals.rate",
            json!([["0s", "50/s"], ["10min", "200/s"], ["5min", "100/s"]]),
        )]),
        "arrivals.rate[2][0]",
        &["must not decrease", "300 s comes after 600 s"],
    );
}

#[test]
fn a_schedule_with_a_negative_rate_is_refused() {
    assert_refused(
        &with(&[("arrivals.rate", json!([["0s", "50/s"], ["1min", "-5/s"]]))]),
        "arrivals.rate[1][1]",
        &["expected a rate >= 0", "-5"],
    );
}

#[test]
fn an_empty_schedule_is_refused() {
    assert_refused(
        &with(&[("arrivals.rate", json!([]))]),
        "arrivals.rate",
        &["empty schedule", "[[time, rate], ...]"],
    );
}

#[test]
fn a_schedule_must_start_at_zero_and_end_above_zero() {
    assert_refused(
        &with(&[("arrivals.rate", json!([["1min", "50/s"], ["2min", "60/s"]]))]),
        "arrivals.rate[0][0]",
        &["starts at \"0s\""],
    );
    assert_refused(
        &with(&[("arrivals.rate", json!([["0s", "50/s"], ["1min", 0]]))]),
        "arrivals.rate[1][1]",
        &["rate > 0 at the last point"],
    );
    assert_refused(
        &with(&[("arrivals.rate", json!([["0s", "50/s", "x"]]))]),
        "arrivals.rate[0]",
        &["expected a [time, rate] point", "[\"0s\",\"50/s\",\"x\"]"],
    );
}

#[test]
fn a_sine_whose_rate_would_go_negative_is_refused() {
    assert_refused(
        &with(&[(
            "arrivals.rate",
            json!({"mean": "100/s", "amplitude": "150/s", "period": "24h", "peak": "14h"}),
        )]),
        "arrivals.rate.amplitude",
        &["from 0 to the mean"],
    );
    assert_refused(
        &with(&[(
            "arrivals.rate",
            json!({"mean": "100/s", "amplitude": 5, "phase": 1}),
        )]),
        "arrivals.rate.phase",
        &["unknown field `phase`"],
    );
}

#[test]
fn a_burst_after_the_run_is_refused() {
    let mut doc = base();
    doc["arrivals"]["burst"] = json!([{"at": "30s", "clients": 10},
                                      {"at": "2h", "clients": 600}]);
    assert_refused(
        &doc,
        "arrivals.burst[1].at",
        &["7200 s", "after the run's end", "60 s"],
    );
}

#[test]
fn a_burst_of_zero_clients_is_refused() {
    let mut doc = base();
    doc["arrivals"]["burst"] = json!([{"at": "30s", "clients": 0}]);
    assert_refused(&doc, "arrivals.burst[0].clients", &[">= 1", "got 0"]);
    doc["arrivals"]["burst"] = json!([{"at": "30s"}]);
    assert_refused(&doc, "arrivals.burst[0].clients", &["missing"]);
    doc["arrivals"]["burst"] = json!([{"at": "30s", "clients": 5, "when": 1}]);
    assert_refused(&doc, "arrivals.burst[0].when", &["unknown field `when`"]);
}

#[test]
fn bursts_on_a_closed_loop_are_refused() {
    let mut doc = base();
    doc["arrivals"] = json!({"process": "closed", "clients": 4,
                             "burst": [{"at": "30s", "clients": 10}]});
    assert_refused(&doc, "arrivals.burst", &["open arrival process"]);
}

#[test]
fn batch_and_on_off_parameters_are_checked() {
    assert_refused(
        &with(&[("arrivals.process", json!("batch"))]),
        "arrivals.size",
        &["missing"],
    );
    let mut doc = base();
    doc["arrivals"] = json!({"process": "batch", "rate": "10/s", "size": 0});
    assert_refused(&doc, "arrivals.size", &[">= 1"]);
    doc["arrivals"] = json!({"process": "batch", "rate": "10/s",
                             "size": {"distribution": "geometric", "mean": 0.5}});
    assert_refused(&doc, "arrivals.size.mean", &["from 1"]);
    doc["arrivals"] = json!({"process": "on_off", "rate": "10/s", "on": "-1s", "off": "1s"});
    assert_refused(&doc, "arrivals.on", &["positive duration"]);
}

#[test]
fn a_sine_with_a_period_of_a_nanosecond_validates_quickly() {
    // The majorant's pieces are a 24th of the period: at 1 ns they would be walked by the
    // billion; one bound for all time is used instead, and the checks do not walk them.
    let doc = with(&[(
        "arrivals.rate",
        json!({"mean": "100/s", "amplitude": "50/s", "period": "1ns"}),
    )]);
    let s = from_json(&doc).unwrap();
    assert!(s.check_stable().is_ok());
}

#[test]
fn a_service_time_whose_relaxation_time_overflows_is_refused() {
    // Found by the fuzzer (1,000,000 cases): a gamma of shape 2.2e-308 has a finite second
    // moment (7.8e304 s²) but a squared coefficient of variation of 4.5e307, and the queues'
    // relaxation time overflowed: accepted, with no steady state to speak of.
    // One dyno at a load of 0.9: 2 × 0.9 × 41.6 ms × 4.5e307 / 0.1² overflows.
    let mut doc = with(&[
        ("arrivals.rate", json!("21.6/s")),
        ("fleet.dynos", json!(1)),
    ]);
    doc["service"] = json!({"distribution": "gamma", "mean": "41.6ms",
                            "shape": 2.2250738585072014e-308});
    assert_refused(&doc, "service", &["coefficient of variation", "settling"]);
    // The fuzzer's own document.
    let doc = json!({"arrivals": {"process": "poisson", "rate": "6914.509487033148 rps"},
        "fleet": {"dynos": 104, "slots": 3}, "name": "fuzz",
        "router": {"d": 5917169468377283378_u64, "policy": "retry_if_busy", "routers": 2, "tries": 2},
        "run": {"duration": "62.87782980733789ms ", "max_waiting": 589616, "replications": 2,
                "warmup": 61.84823733881897},
        "service": {"distribution": "gamma", "mean": "41.62229506120366ms", "round_up": null,
                    "shape": 2.2250738585072014e-308}});
    assert_refused(&doc, "service", &["coefficient of variation"]);
    // A variable but reasonable gamma is still accepted, with a finite relaxation time.
    let mut doc = base();
    doc["service"] = json!({"distribution": "gamma", "mean": "100ms", "shape": 0.01});
    let s = from_json(&doc).unwrap();
    assert!(s.relaxation_time().is_some_and(f64::is_finite));
}

// `[autoscale]` and the fleet's lifecycle (issue #24).

/// [`base`] with an autoscaler: a schedule from 2 to 4 dynos of 4.
fn autoscaled(edits: &[(&str, Value)]) -> Value {
    let mut doc = with(&[("fleet.dynos", json!(2))]);
    doc["autoscale"] = json!({"rule": "schedule", "max": 4,
                              "schedule": [["0s", 2], ["30s", 4]]});
    for (path, value) in edits {
        let (section, key) = path.split_once('.').unwrap();
        doc[section][key] = value.clone();
    }
    doc
}

#[test]
fn an_autoscaler_evaluated_too_often_for_the_run_is_refused() {
    // Found by the fuzzer: an interval of 1 ns was accepted, and a run of a minute was 6e10
    // evaluations: it never ended. A millisecond over a minute is 60,000, and runs.
    assert_refused(
        &autoscaled(&[("autoscale.interval", json!("1ns"))]),
        "autoscale.interval",
        &["6e10 evaluations", "at most 1e6"],
    );
    assert_refused(
        &autoscaled(&[
            ("autoscale.interval", json!("10s")),
            ("run.duration", json!("1e9s")),
            ("run.max_requests", json!(1e20)),
        ]),
        "autoscale.interval",
        &["1e8 evaluations"],
    );
    assert!(from_json(&autoscaled(&[("autoscale.interval", json!("1ms"))])).is_ok());
}

#[test]
fn a_boot_that_almost_never_ends_before_a_tiny_boot_timeout_is_refused() {
    // Found by the fuzzer: a boot of 10 s on average (exponential) against a boot timeout of
    // 10 ns ends in time once in a billion tries, and each other try crashed (R10) 10 ns
    // later: a billion events for each dyno started, a run that never ended.
    let doc = autoscaled(&[
        ("fleet.boot_timeout", json!("10ns")),
        (
            "fleet.boot_time",
            json!({"distribution": "exponential", "mean": "10s"}),
        ),
    ]);
    assert_refused(&doc, "fleet.boot_timeout", &["R10", "1e9 times"]);
    // Short boots against a tight timeout are a study of R10, and run.
    let doc = autoscaled(&[
        ("fleet.boot_timeout", json!("1s")),
        (
            "fleet.boot_time",
            json!({"distribution": "exponential", "mean": "10s"}),
        ),
    ]);
    assert!(from_json(&doc).is_ok());
    // Never in time, against a timeout short for the run (3.6e6 crashes in an hour): refused
    // too.
    let doc = autoscaled(&[
        ("run.duration", json!("1h")),
        ("fleet.boot_timeout", json!("1ms")),
        (
            "fleet.boot_time",
            json!({"distribution": "lognormal", "median": "50s",
                                   "sigma": 0.1}),
        ),
    ]);
    assert_refused(&doc, "fleet.boot_timeout", &["almost never", "4e6 times"]);
    // A boot that fails almost always against a long timeout crashes rarely: accepted.
    let doc = autoscaled(&[
        ("fleet.boot_timeout", json!("10s")),
        (
            "fleet.boot_time",
            json!({"distribution": "lognormal", "median": "50s",
                                   "sigma": 0.1}),
        ),
    ]);
    assert!(from_json(&doc).is_ok());
}
