//! The reference of every scenario key: its type, unit, default and meaning. `dynosim keys`
//! prints it and docs/scenario.md is generated from it.
//!
//! It is kept true by the tests below: the keys of each section here are the fields of that
//! section's serde struct in [`crate::scenario`], the kinds of each extension point are its
//! registry's names, and the keys of each kind are the ones its registry entry takes. A key
//! added to a struct or a registry without a line here fails `cargo test`.

use serde_json::{json, Value};

/// Where a section's keys are read and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    Engine,
    /// The Python front end: prices and labelled variants, never seen by the engine.
    FrontEnd,
}

/// A section of the scenario file (`[service]`), or the top level (`name` "").
#[derive(Debug)]
pub struct Section {
    pub name: &'static str,
    pub meaning: &'static str,
    /// The key naming the section's kind (`distribution`), whose values are the [`Kind`]s.
    pub kind_key: Option<&'static str>,
    pub reader: Reader,
    /// An array of tables (`[[cases]]`) rather than a table.
    pub array: bool,
}

/// One registered kind of an extension point: a distribution, a policy, an arrival process.
#[derive(Debug)]
pub struct Kind {
    pub section: &'static str,
    pub name: &'static str,
    pub meaning: &'static str,
}

/// What a key is when the scenario leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    Required,
    /// Left out, the feature it sets is off (no rounding, no clipping...).
    Off,
    /// This value (JSON text, as it would be written in a scenario).
    Value(&'static str),
    /// Required unless the other key of the pair is given (Weibull's `scale` or `median`).
    EitherThisOr(&'static str),
    /// A value the front end works out, described in words.
    Described(&'static str),
}

/// A key: `section.name`, taken by every kind of the section (`kind` None) or by one kind.
#[derive(Debug)]
pub struct Key {
    pub section: &'static str,
    pub kind: Option<&'static str>,
    pub name: &'static str,
    /// The type as a user writes it: "duration", "whole number", "[duration, duration]"...
    pub value: &'static str,
    pub unit: &'static str,
    pub default: Default,
    /// A valid value (JSON text); the tests build scenarios from them.
    pub example: &'static str,
    pub meaning: &'static str,
}

impl Key {
    /// `service.shape`; a top-level key is its name alone.
    pub fn path(&self) -> String {
        if self.section.is_empty() {
            self.name.to_string()
        } else {
            format!("{}.{}", self.section, self.name)
        }
    }
}

/// How durations and rates are written, wherever a key takes one.
pub const FORMATS: &[(&str, &str)] = &[
    (
        "duration",
        "a number of seconds, or a string with a unit: \"306ms\", \"1.5s\", \"5min\", \"1h\" \
         (units: ns, us or µs, ms, s, min, h, d)",
    ),
    (
        "rate",
        "a number of requests per second, or a string: \"9000/min\", \"150/s\", \"150 per second\"",
    ),
];

pub const SECTIONS: &[Section] = &[
    Section {
        name: "",
        meaning: "The top level of the file: what the scenario is called.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "arrivals",
        meaning: "How requests arrive.",
        kind_key: Some("process"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "service",
        meaning: "How long the app works on a request (its service time), once a slot takes it.",
        kind_key: Some("distribution"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "fleet",
        meaning: "The dynos.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "router",
        meaning: "How requests are routed to dynos.",
        kind_key: Some("policy"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "run",
        meaning: "How long to simulate, how many times, from which seed.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "cost",
        meaning:
            "Dyno prices, for the monthly cost of a fleet (`dynosim capacity`, `dynosim demo`).",
        kind_key: None,
        reader: Reader::FrontEnd,
        array: false,
    },
    Section {
        name: "cases",
        meaning: "Labelled variants of the scenario, run side by side by `dynosim run` \
                  (other commands use the scenario without them).",
        kind_key: None,
        reader: Reader::FrontEnd,
        array: true,
    },
];

pub const KINDS: &[Kind] = &[
    Kind {
        section: "arrivals",
        name: "poisson",
        meaning: "independent arrivals at a constant mean rate (exponential gaps)",
    },
    Kind {
        section: "service",
        name: "constant",
        meaning: "every request takes the same time",
    },
    Kind {
        section: "service",
        name: "exponential",
        meaning: "exponential service times (M/M/c in queueing theory)",
    },
    Kind {
        section: "service",
        name: "lognormal",
        meaning: "the logarithm of the service time is normal",
    },
    Kind {
        section: "service",
        name: "weibull",
        meaning: "P(S > t) = exp(-(t/λ)^k); a shape k below 1 gives a heavy tail",
    },
    Kind {
        section: "service",
        name: "gamma",
        meaning: "the gamma distribution: with a whole shape k, the sum of k exponential stages",
    },
    Kind {
        section: "service",
        name: "empirical",
        meaning: "service times read from a file, resampled with replacement",
    },
    Kind {
        section: "service",
        name: "quantiles",
        meaning: "a table of percentiles, such as a monitoring tool reports: ln(time) is \
                  interpolated linearly in the normal quantile of the percentile, so each piece \
                  is a lognormal and the tails extend the end pieces",
    },
    Kind {
        section: "router",
        name: "random",
        meaning: "a uniformly random dyno (Heroku since 2010; the seed study's \"naive\")",
    },
    Kind {
        section: "router",
        name: "round_robin",
        meaning: "each router cycles through the dynos from a random start",
    },
    Kind {
        section: "router",
        name: "least_connections",
        meaning: "the dyno with the fewest in-flight requests from this router, random tie-break",
    },
    Kind {
        section: "router",
        name: "power_of_d",
        meaning: "`d` distinct random dynos, the least loaded wins",
    },
    Kind {
        section: "router",
        name: "retry_if_busy",
        meaning: "a random dyno; if it is busy, another random draw (the seed study's \
                  \"choice of two\")",
    },
    Kind {
        section: "router",
        name: "intelligent",
        meaning: "only to a dyno with a free slot, else wait in the router's FIFO queue \
                  (M/G/c; HAProxy maxconn with a queue)",
    },
];

pub const KEYS: &[Key] = &[
    // --- the top level
    Key {
        section: "",
        kind: None,
        name: "name",
        value: "string",
        unit: "",
        default: Default::Described("the file's name"),
        example: r#""my-app""#,
        meaning: "the scenario's name, shown in tables and outputs",
    },
    Key {
        section: "",
        kind: None,
        name: "description",
        value: "string",
        unit: "",
        default: Default::Off,
        example: r#""our app at peak""#,
        meaning: "one line, shown by `dynosim scenarios`",
    },
    // --- [arrivals]
    Key {
        section: "arrivals",
        kind: None,
        name: "process",
        value: "name",
        unit: "",
        default: Default::Required,
        example: r#""poisson""#,
        meaning: "the arrival process",
    },
    Key {
        section: "arrivals",
        kind: Some("poisson"),
        name: "rate",
        value: "rate",
        unit: "req/s",
        default: Default::Required,
        example: r#""9000/min""#,
        meaning: "mean arrival rate",
    },
    // --- [service]
    Key {
        section: "service",
        kind: None,
        name: "distribution",
        value: "name",
        unit: "",
        default: Default::Required,
        example: r#""weibull""#,
        meaning: "the service-time distribution",
    },
    Key {
        section: "service",
        kind: None,
        name: "round_up",
        value: "duration",
        unit: "s",
        default: Default::Off,
        example: r#""1ms""#,
        meaning: "round every sample up to a multiple of this",
    },
    Key {
        section: "service",
        kind: None,
        name: "clip",
        value: "[duration, duration]",
        unit: "s",
        default: Default::Off,
        example: r#"["10ms", "30s"]"#,
        meaning: "then clip every sample to [min, max]",
    },
    Key {
        section: "service",
        kind: Some("constant"),
        name: "value",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""50ms""#,
        meaning: "the time every request takes",
    },
    Key {
        section: "service",
        kind: Some("exponential"),
        name: "mean",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""100ms""#,
        meaning: "mean service time",
    },
    Key {
        section: "service",
        kind: Some("lognormal"),
        name: "median",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""50ms""#,
        meaning: "median service time",
    },
    Key {
        section: "service",
        kind: Some("lognormal"),
        name: "sigma",
        value: "number > 0",
        unit: "",
        default: Default::Required,
        example: "1.0",
        meaning: "standard deviation of ln S",
    },
    Key {
        section: "service",
        kind: Some("weibull"),
        name: "shape",
        value: "number > 0",
        unit: "",
        default: Default::Required,
        example: "0.8",
        meaning: "shape k",
    },
    Key {
        section: "service",
        kind: Some("weibull"),
        name: "scale",
        value: "duration",
        unit: "s",
        default: Default::EitherThisOr("median"),
        example: r#""79ms""#,
        meaning: "scale λ",
    },
    Key {
        section: "service",
        kind: Some("weibull"),
        name: "median",
        value: "duration",
        unit: "s",
        default: Default::EitherThisOr("scale"),
        example: r#""50ms""#,
        meaning: "median service time, instead of the scale",
    },
    Key {
        section: "service",
        kind: Some("gamma"),
        name: "shape",
        value: "number > 0",
        unit: "",
        default: Default::Required,
        example: "2.0",
        meaning: "shape k; 1 is exponential",
    },
    Key {
        section: "service",
        kind: Some("gamma"),
        name: "scale",
        value: "duration",
        unit: "s",
        default: Default::EitherThisOr("mean"),
        example: r#""50ms""#,
        meaning: "scale θ (mean = k θ)",
    },
    Key {
        section: "service",
        kind: Some("gamma"),
        name: "mean",
        value: "duration",
        unit: "s",
        default: Default::EitherThisOr("scale"),
        example: r#""100ms""#,
        meaning: "mean service time, instead of the scale",
    },
    Key {
        section: "service",
        kind: Some("empirical"),
        name: "file",
        value: "path",
        unit: "",
        default: Default::Required,
        example: r#""service-times.txt""#,
        meaning: "a text file of service times, one a line (`46ms`, or a bare number in `unit`); \
                  relative to the scenario file",
    },
    Key {
        section: "service",
        kind: Some("empirical"),
        name: "unit",
        value: "time unit",
        unit: "",
        default: Default::Value(r#""s""#),
        example: r#""ms""#,
        meaning: "the unit of bare numbers in the file",
    },
    Key {
        section: "service",
        kind: Some("quantiles"),
        name: "percentiles",
        value: "[[percent, duration], ...]",
        unit: "%, s",
        default: Default::Required,
        example: r#"[[50, "46ms"], [90, "923ms"], [99, "3144ms"]]"#,
        meaning: "at least two pairs, percentiles strictly between 0 and 100 and increasing, \
                  times not decreasing",
    },
    // --- [fleet]
    Key {
        section: "fleet",
        kind: None,
        name: "dynos",
        value: "whole number, 1 to 10,000,000",
        unit: "dynos",
        default: Default::Required,
        example: "10",
        meaning: "how many dynos",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "slots",
        value: "whole number, 1 to 100,000",
        unit: "requests",
        default: Default::Value("1"),
        example: "2",
        meaning: "concurrent requests per dyno (Unicorn, Puma or Gunicorn workers sharing its \
                  accept queue)",
    },
    // --- [router]
    Key {
        section: "router",
        kind: None,
        name: "policy",
        value: "name, or a list of names",
        unit: "",
        default: Default::Required,
        example: r#""random""#,
        meaning: "the routing policy; a list runs each on the same traffic, side by side",
    },
    Key {
        section: "router",
        kind: None,
        name: "routers",
        value: "whole number, 1 to 100,000",
        unit: "routers",
        default: Default::Value("1"),
        example: "2",
        meaning: "independent routers; each request lands on one at random, and each knows \
                  only the requests it sent (Heroku's Bamboo routers)",
    },
    Key {
        section: "router",
        kind: Some("power_of_d"),
        name: "d",
        value: "whole number >= 1",
        unit: "dynos",
        default: Default::Value("2"),
        example: "3",
        meaning: "how many distinct dynos to compare",
    },
    Key {
        section: "router",
        kind: Some("retry_if_busy"),
        name: "tries",
        value: "whole number >= 1",
        unit: "draws",
        default: Default::Value("2"),
        example: "3",
        meaning: "random draws before taking a busy dyno anyway",
    },
    // --- [run]
    Key {
        section: "run",
        kind: None,
        name: "duration",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""5min""#),
        example: r#""1min""#,
        meaning: "measured simulated time per replication, after the warm-up",
    },
    Key {
        section: "run",
        kind: None,
        name: "warmup",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""30s""#),
        example: r#""10s""#,
        meaning: "simulated first and not measured, so that queues reach their usual state",
    },
    Key {
        section: "run",
        kind: None,
        name: "replications",
        value: "whole number, 1 to 100,000",
        unit: "",
        default: Default::Value("5"),
        example: "3",
        meaning:
            "independent replications, for 95% confidence intervals (capacity needs 2 or more)",
    },
    Key {
        section: "run",
        kind: None,
        name: "seed",
        value: "whole number, 0 to 2^64-1",
        unit: "",
        default: Default::Value("1"),
        example: "7",
        meaning: "the seed every random stream derives from: same scenario and seed, same numbers",
    },
    Key {
        section: "run",
        kind: None,
        name: "max_waiting",
        value: "whole number >= 1",
        unit: "requests",
        default: Default::Value("5000000"),
        example: "100000",
        meaning: "requests waiting at once (router and dyno queues together) beyond which a run \
                  is stopped as overloaded",
    },
    Key {
        section: "run",
        kind: None,
        name: "max_requests",
        value: "number >= 1",
        unit: "requests",
        default: Default::Value("1e10"),
        example: "1e11",
        meaning:
            "the work budget: a run expected to simulate more requests than this (arrival rate \
                  × (warm-up + duration) × replications) is refused before it starts",
    },
    Key {
        section: "run",
        kind: None,
        name: "max_memory",
        value: "size such as \"8GB\" or \"512MiB\", or a number of bytes; at least 1 MB",
        unit: "bytes",
        default: Default::Value("8e9"),
        example: "\"16GB\"",
        meaning:
            "memory one replication's engine state may take; a fleet that needs more (dynos × \
                  slots, routers × dynos for load-aware routers) is refused before anything is \
                  allocated, and replications run side by side only as far as it allows",
    },
    // --- [cost]
    Key {
        section: "cost",
        kind: None,
        name: "dyno_type",
        value: "name",
        unit: "",
        default: Default::Value(r#""standard-1x""#),
        example: r#""standard-2x""#,
        meaning: "price the fleet as this dyno type: eco, basic, standard-1x, standard-2x, \
                  performance-m, performance-l, 2013-1x, or one from `prices`",
    },
    Key {
        section: "cost",
        kind: None,
        name: "prices",
        value: "table of name = number",
        unit: "$/month",
        default: Default::Off,
        example: r#"{"my-dyno": 40}"#,
        meaning: "add dyno types or change their prices",
    },
    // --- [[cases]]
    Key {
        section: "cases",
        kind: None,
        name: "label",
        value: "string",
        unit: "",
        default: Default::Required,
        example: r#""intelligent, 20 dynos""#,
        meaning: "the case's name in tables and outputs",
    },
    Key {
        section: "cases",
        kind: None,
        name: "set",
        value: "table of key.path = value",
        unit: "",
        default: Default::Described("no change"),
        example: r#"{"router.policy": "intelligent", "fleet.dynos": 20}"#,
        meaning: "the keys this case changes, as with `--set`",
    },
];

/// The whole reference as JSON: `formats`, `sections`, `kinds` and `keys`, in order.
pub fn to_json() -> Value {
    let default = |d: Default| match d {
        Default::Required => Value::Null,
        Default::Off => Value::Null,
        Default::Value(v) => Value::String(v.to_string()),
        Default::EitherThisOr(other) => Value::String(format!("required unless {other} is given")),
        Default::Described(text) => Value::String(text.to_string()),
    };
    json!({
        "formats": FORMATS.iter().map(|(name, text)| json!({"name": name, "meaning": text})).collect::<Vec<_>>(),
        "sections": SECTIONS.iter().map(|s| json!({
            "name": s.name,
            "meaning": s.meaning,
            "kind_key": s.kind_key,
            "read_by": match s.reader { Reader::Engine => "engine", Reader::FrontEnd => "front end" },
            "array": s.array,
        })).collect::<Vec<_>>(),
        "kinds": KINDS.iter().map(|k| json!({
            "section": k.section, "name": k.name, "meaning": k.meaning,
        })).collect::<Vec<_>>(),
        "keys": KEYS.iter().map(|k| json!({
            "path": k.path(),
            "section": k.section,
            "kind": k.kind,
            "name": k.name,
            "type": k.value,
            "unit": k.unit,
            "required": k.default == Default::Required,
            "default": default(k.default),
            "example": k.example,
            "meaning": k.meaning,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use crate::scenario::{Scenario, ScenarioSpec};
    use serde_json::Map;
    use std::collections::BTreeSet;
    use std::path::Path;

    fn engine_sections() -> impl Iterator<Item = &'static Section> {
        SECTIONS
            .iter()
            .filter(|s| s.reader == Reader::Engine && !s.name.is_empty())
    }

    fn example(key: &Key) -> Value {
        serde_json::from_str(key.example)
            .unwrap_or_else(|e| panic!("{}: example is not JSON: {e}", key.path()))
    }

    /// The smallest valid document: the required keys of the engine's sections, with the first
    /// kind of each extension point.
    fn minimal() -> Map<String, Value> {
        let mut doc = Map::new();
        for section in engine_sections() {
            let mut table = Map::new();
            for key in KEYS.iter().filter(|k| {
                k.section == section.name && k.kind.is_none() && k.default == Default::Required
            }) {
                table.insert(key.name.into(), example(key));
            }
            doc.insert(section.name.into(), Value::Object(table));
        }
        doc
    }

    fn spec_json(doc: &Map<String, Value>) -> Map<String, Value> {
        let spec: ScenarioSpec = serde_json::from_value(Value::Object(doc.clone()))
            .unwrap_or_else(|e| panic!("{e}: {doc:?}"));
        match serde_json::to_value(&spec).expect("serializes") {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn keys_of(value: &Value) -> BTreeSet<String> {
        value
            .as_object()
            .expect("a table")
            .keys()
            .cloned()
            .collect()
    }

    fn documented(section: &str, kind: Option<&str>) -> BTreeSet<String> {
        KEYS.iter()
            .filter(|k| k.section == section && k.kind == kind)
            .map(|k| k.name.to_string())
            .collect()
    }

    /// Every field of the scenario's structs has a line here, and every line is a field: the
    /// structs serialize every field they have (flattened kind parameters aside).
    #[test]
    fn section_keys_are_the_fields_of_the_scenario_structs() {
        let spec = spec_json(&minimal());
        let top: BTreeSet<String> = keys_of(&Value::Object(spec.clone()));
        let mut expected = documented("", None);
        expected.extend(engine_sections().map(|s| s.name.to_string()));
        assert_eq!(top, expected, "top-level keys and sections");
        for section in engine_sections() {
            let fields = keys_of(&spec[section.name]);
            // A flattened kind key is a field too; the kind's parameters are checked below.
            if let Some(kind_key) = section.kind_key {
                assert!(fields.contains(kind_key), "{}.{kind_key}", section.name);
            }
            assert_eq!(
                fields,
                documented(section.name, None),
                "[{}]: fields of its struct against the schema",
                section.name
            );
        }
    }

    /// The front end's sections are accepted (and ignored) by the engine's schema.
    #[test]
    fn front_end_sections_pass_through_the_engine() {
        for section in SECTIONS.iter().filter(|s| s.reader == Reader::FrontEnd) {
            let mut doc = minimal();
            let mut table = Map::new();
            for key in KEYS.iter().filter(|k| k.section == section.name) {
                table.insert(key.name.into(), example(key));
            }
            let value = if section.array {
                Value::Array(vec![Value::Object(table)])
            } else {
                Value::Object(table)
            };
            doc.insert(section.name.into(), value);
            spec_json(&doc);
        }
    }

    fn check_registry<B: Copy>(section: &str, registry: &Registry<B>) {
        let names: BTreeSet<&str> = registry.names().into_iter().collect();
        let kinds: BTreeSet<&str> = KINDS
            .iter()
            .filter(|k| k.section == section)
            .map(|k| k.name)
            .collect();
        assert_eq!(kinds, names, "[{section}]: kinds against the registry");
        for (name, keys, _) in registry.0 {
            let taken: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
            assert_eq!(
                documented(section, Some(name)),
                taken,
                "{section} {name:?}: keys against the registry"
            );
        }
    }

    #[test]
    fn kinds_and_their_keys_are_the_registries() {
        check_registry("arrivals", &crate::arrivals::REGISTRY);
        check_registry("service", &crate::dist::REGISTRY);
        check_registry("router", &crate::policy::REGISTRY);
        assert!(KEYS.iter().all(|k| k.kind.is_none()
            || KINDS
                .iter()
                .any(|kind| Some(kind.name) == k.kind && kind.section == k.section)));
    }

    /// A default written here is what the engine takes when the key is left out.
    #[test]
    fn defaults_are_the_engines() {
        let base = spec_json(&minimal());
        for key in KEYS.iter().filter(|k| k.kind.is_none()) {
            let section = SECTIONS
                .iter()
                .find(|s| s.name == key.section)
                .expect("section");
            if section.reader != Reader::Engine || section.name.is_empty() {
                continue;
            }
            let mut doc = minimal();
            let table = doc[key.section].as_object_mut().expect("a table");
            match key.default {
                Default::Value(v) => {
                    table.insert(key.name.into(), serde_json::from_str(v).expect("JSON"));
                    assert_eq!(spec_json(&doc), base, "{}: default {v}", key.path());
                }
                Default::Off => {
                    assert_eq!(base[key.section][key.name], Value::Null, "{}", key.path());
                }
                Default::Required => {
                    table.remove(key.name);
                    assert!(
                        serde_json::from_value::<ScenarioSpec>(Value::Object(doc)).is_err(),
                        "{} is documented as required",
                        key.path()
                    );
                }
                Default::EitherThisOr(_) | Default::Described(_) => {}
            }
        }
    }

    /// Sets a section's kind and that kind's parameters (from their examples), dropping the
    /// parameters of the kind it had.
    fn set_kind(doc: &mut Map<String, Value>, section: &Section, kind: &str) {
        let kind_key = section.kind_key.expect("a section with kinds");
        let table = doc[section.name].as_object_mut().expect("a table");
        table.retain(|name, _| {
            KEYS.iter()
                .any(|k| k.section == section.name && k.kind.is_none() && k.name == name)
        });
        table.insert(kind_key.into(), json!(kind));
        for key in KEYS
            .iter()
            .filter(|k| k.section == section.name && k.kind == Some(kind))
        {
            if let Default::EitherThisOr(other) = key.default {
                if table.contains_key(other) {
                    continue;
                }
            }
            table.insert(key.name.into(), example(key));
        }
    }

    /// Every example is a valid value: a scenario of each kind with its keys' examples builds.
    #[test]
    fn examples_build_a_scenario_of_every_kind() {
        let dir = std::env::temp_dir().join(format!("dynosim-schema-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("service-times.txt"), "46\n120\n7\n").expect("sample file");
        let mut full = minimal();
        for key in KEYS.iter().filter(|k| k.kind.is_none()) {
            if let Some(table) = full.get_mut(key.section).and_then(Value::as_object_mut) {
                table.insert(key.name.into(), example(key));
            }
        }
        for section in engine_sections().filter(|s| s.kind_key.is_some()) {
            let kind = full[section.name][section.kind_key.unwrap()]
                .as_str()
                .expect("a name")
                .to_string();
            set_kind(&mut full, section, &kind);
        }
        for kind in KINDS {
            let section = SECTIONS
                .iter()
                .find(|s| s.name == kind.section)
                .expect("section");
            let mut doc = full.clone();
            set_kind(&mut doc, section, kind.name);
            let text = Value::Object(doc).to_string();
            if let Err(e) = Scenario::from_json(&text, Path::new(&dir), &crate::never_interrupted) {
                panic!("{} {:?} from the examples: {e}", kind.section, kind.name);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
