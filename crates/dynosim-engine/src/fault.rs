//! Triggers (`[[faults]]`): what knocks a fleet out of its normal state for a while, so that
//! one can see whether it comes back when the trigger is gone (see [`crate::stability`]).
//!
//! - `kind = "slowdown"`: for `for` from `at`, work that begins takes `factor` times as long:
//!   the app's (`target = "app"`, the default: its `[service]` hold, `io` and `cpu` phases)
//!   or one resource's service (`target = "NAME"` of `[resources.NAME]`).
//! - `kind = "outage"`: for `for` from `at`, the app (`target = "app"`, the default) refuses
//!   every request a thread takes, or resource `target` every use that begins
//!   (`mode = "refuse"`, the default: the app's request fails at once with an error, 500), or
//!   hangs it (`mode = "hang"`: the use waits for the outage's end, then takes its time).
//! - `kind = "dynos_lost"`: at `at`, `count` dynos crash (the requests they hold fail) and
//!   the platform boots them again, each after its `fleet.boot_time`, as Heroku restarts a
//!   crashed dyno.
//!
//! Times count from the run's start, warm-up included, as `[[arrivals.burst]]`'s do; a fault
//! must lie within the measured window, so that the run measures the fleet before it and
//! after.

use crate::error::{Error, Result};
use crate::params::Params;
use crate::registry::Registry;
use crate::units::Duration;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One `[[faults]]` table as written: when, which kind, and the kind's settings.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FaultSpec {
    /// When it starts, from the run's start (warm-up included).
    pub at: Duration,
    /// "slowdown", "outage" or "dynos_lost" ([`REGISTRY`]).
    pub kind: String,
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

/// What a fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    App,
    /// A resource, by its index in [`crate::Scenario::resources`].
    Resource(usize),
}

/// A fault, built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultKind {
    Slowdown {
        target: Target,
        factor: f64,
    },
    /// The app (its requests) or a resource (its uses) refuses, or hangs until the end.
    Outage {
        target: Target,
        hang: bool,
    },
    DynosLost {
        count: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    pub at: f64,
    /// When it ends (`at` for a `dynos_lost`, which is over at once).
    pub until: f64,
    pub kind: FaultKind,
}

/// What a kind's builder is given: its settings, when it starts, the run's end and the
/// scenario's resources by name.
pub struct Context<'a> {
    pub at: f64,
    pub end: f64,
    pub resources: &'a [&'a str],
}

/// A kind's builder: its end and what it does.
pub type Builder = fn(&Params, &Context) -> Result<(f64, FaultKind)>;

/// The kinds of fault: a new one is a builder and a line here.
pub const REGISTRY: Registry<Builder> = Registry(&[
    ("slowdown", &["for", "factor", "target"], slowdown),
    ("outage", &["for", "target", "mode"], outage),
    ("dynos_lost", &["count"], dynos_lost),
]);

/// The most a slowdown may multiply work by.
pub const MAX_FACTOR: f64 = 1e6;

/// `for`: how long the fault lasts, within the run.
fn lasts(p: &Params, c: &Context, kind: &str) -> Result<f64> {
    let d = p.get::<Duration>("for")?.ok_or_else(|| {
        p.error(
            "for",
            format!("missing; a {kind:?} fault needs how long it lasts (for = \"1min\")"),
        )
    })?;
    if !(d.0.is_finite() && d.0 > 0.0) {
        return Err(p.error("for", format!("must be a positive duration, got {} s", d.0)));
    }
    if c.at + d.0 > c.end {
        return Err(p.error(
            "for",
            format!(
                "the fault would end at {} s, after the run's end ({} s): a fault outside the run",
                c.at + d.0,
                c.end
            ),
        ));
    }
    Ok(d.0)
}

/// `target`: "app" (the default) or a resource's name.
fn target(p: &Params, c: &Context) -> Result<Target> {
    match p.get::<String>("target")?.as_deref() {
        None | Some("app") => Ok(Target::App),
        Some(name) => c
            .resources
            .iter()
            .position(|r| *r == name)
            .map(Target::Resource)
            .ok_or_else(|| {
                p.error(
                    "target",
                    if c.resources.is_empty() {
                        format!(
                            "no resource {name:?}: the scenario has no [resources]; expected \"app\""
                        )
                    } else {
                        format!(
                            "no resource {name:?}; expected \"app\" or one of: {}",
                            c.resources.join(", ")
                        )
                    },
                )
            }),
    }
}

fn slowdown(p: &Params, c: &Context) -> Result<(f64, FaultKind)> {
    let d = lasts(p, c, "slowdown")?;
    let factor = p.require::<f64>("factor", "how many times longer work takes")?;
    if !(factor.is_finite() && factor > 0.0 && factor <= MAX_FACTOR) {
        return Err(p.error(
            "factor",
            format!("must be a number above 0 and at most {MAX_FACTOR}, got {factor}"),
        ));
    }
    let target = target(p, c)?;
    Ok((c.at + d, FaultKind::Slowdown { target, factor }))
}

fn outage(p: &Params, c: &Context) -> Result<(f64, FaultKind)> {
    let d = lasts(p, c, "outage")?;
    let target = target(p, c)?;
    let hang = match p.get::<String>("mode")?.as_deref() {
        None | Some("refuse") => false,
        Some("hang") => true,
        Some(other) => {
            return Err(p.error(
                "mode",
                format!("unknown mode {other:?}; expected \"refuse\" or \"hang\""),
            ))
        }
    };
    Ok((c.at + d, FaultKind::Outage { target, hang }))
}

fn dynos_lost(p: &Params, c: &Context) -> Result<(f64, FaultKind)> {
    let count = p.whole::<u32>("count", 0, 1, 10_000_000).and_then(|n| {
        if p.has("count") {
            Ok(n)
        } else {
            Err(p.error(
                "count",
                "missing; a \"dynos_lost\" fault needs how many dynos crash",
            ))
        }
    })?;
    Ok((c.at, FaultKind::DynosLost { count }))
}

impl Fault {
    /// Builds `faults[index]`; `resources` names the scenario's resources in index order,
    /// `window` is the measured window (warm-up end, run end).
    pub fn build(
        spec: &FaultSpec,
        index: usize,
        resources: &[&str],
        window: (f64, f64),
    ) -> Result<Fault> {
        let path = format!("faults[{index}]");
        let at = spec.at.0;
        let (start, end) = window;
        if !(at.is_finite() && at > start && at < end) {
            return Err(Error::config(
                format!("{path}.at"),
                format!(
                    "a fault must start inside the measured window, after the warm-up ({start} s) \
                     and before the run's end ({end} s), so that the run sees the fleet before \
                     and after it; got {at} s"
                ),
            ));
        }
        let (keys, build) = REGISTRY.lookup(&spec.kind).ok_or_else(|| {
            Error::config(
                format!("{path}.kind"),
                format!(
                    "unknown fault kind {:?}; expected one of: {}",
                    spec.kind,
                    REGISTRY.names().join(", ")
                ),
            )
        })?;
        let p = Params::new(&path, &spec.kind, &spec.params);
        p.allow(keys)?;
        let (until, kind) = build(&p, &Context { at, end, resources })?;
        Ok(Fault { at, until, kind })
    }
}

/// The scenario's faults, in time order, and what the engine asks of them.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    pub list: Vec<Fault>,
}

impl Faults {
    /// Builds `[[faults]]`.
    pub fn build(specs: &[FaultSpec], resources: &[&str], window: (f64, f64)) -> Result<Faults> {
        let mut list = specs
            .iter()
            .enumerate()
            .map(|(i, f)| Fault::build(f, i, resources, window))
            .collect::<Result<Vec<_>>>()?;
        list.sort_by(|a, b| a.at.total_cmp(&b.at));
        Ok(Faults { list })
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// When the first fault starts and the last one ends (None without faults).
    pub fn span(&self) -> Option<(f64, f64)> {
        let first = self.list.first()?.at;
        let last = self.list.iter().map(|f| f.until).fold(first, f64::max);
        Some((first, last))
    }

    /// How many times longer work of `target` beginning at `now` takes (1 outside every
    /// slowdown; slowdowns that overlap multiply).
    #[inline]
    pub fn slowdown(&self, target: Target, now: f64) -> f64 {
        self.list
            .iter()
            .filter_map(|f| match f.kind {
                FaultKind::Slowdown { target: t, factor }
                    if t == target && now >= f.at && now < f.until =>
                {
                    Some(factor)
                }
                _ => None,
            })
            .product()
    }

    /// `target`'s outage at `now`, if one is on: Some(None) it refuses, Some(Some(end)) it
    /// hangs until `end`.
    #[inline]
    pub fn outage(&self, target: Target, now: f64) -> Option<Option<f64>> {
        self.list.iter().find_map(|f| match f.kind {
            FaultKind::Outage { target: t, hang }
                if t == target && now >= f.at && now < f.until =>
            {
                Some(hang.then_some(f.until))
            }
            _ => None,
        })
    }

    /// Whether any slowdown strikes the app, or resource work (for the engine to know what
    /// to ask).
    pub fn slows(&self, target: Target) -> bool {
        self.list
            .iter()
            .any(|f| matches!(f.kind, FaultKind::Slowdown { target: t, .. } if t == target))
    }

    pub fn has_outage(&self, target: Target) -> bool {
        self.list
            .iter()
            .any(|f| matches!(f.kind, FaultKind::Outage { target: t, .. } if t == target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(json: serde_json::Value) -> Result<Fault> {
        let spec: FaultSpec = serde_json::from_value(json).expect("a fault table");
        Fault::build(&spec, 0, &["db", "cache"], (30.0, 630.0))
    }

    fn error(json: serde_json::Value) -> String {
        build(json).expect_err("refused").to_string()
    }

    #[test]
    fn each_kind_builds() {
        let f = build(serde_json::json!({"at": 100, "for": 60, "kind": "slowdown", "factor": 3}))
            .unwrap();
        assert_eq!((f.at, f.until), (100.0, 160.0));
        assert_eq!(
            f.kind,
            FaultKind::Slowdown {
                target: Target::App,
                factor: 3.0
            }
        );
        let f = build(
            serde_json::json!({"at": 100, "for": 60, "kind": "outage", "target": "cache",
            "mode": "hang"}),
        )
        .unwrap();
        assert_eq!(
            f.kind,
            FaultKind::Outage {
                target: Target::Resource(1),
                hang: true
            }
        );
        let f = build(serde_json::json!({"at": 100, "for": 60, "kind": "outage"})).unwrap();
        assert_eq!(
            f.kind,
            FaultKind::Outage {
                target: Target::App,
                hang: false
            }
        );
        let f = build(serde_json::json!({"at": 100, "kind": "dynos_lost", "count": 2})).unwrap();
        assert_eq!(f.kind, FaultKind::DynosLost { count: 2 });
    }

    #[test]
    fn mistakes_name_their_key() {
        assert!(
            error(serde_json::json!({"at": 10, "for": 60, "kind": "slowdown", "factor": 3}))
                .starts_with("faults[0].at:")
        );
        assert!(
            error(serde_json::json!({"at": 600, "for": 60, "kind": "slowdown", "factor": 3}))
                .starts_with("faults[0].for:")
        );
        assert!(
            error(serde_json::json!({"at": 100, "for": 60, "kind": "slowdown"}))
                .starts_with("faults[0].factor:")
        );
        assert!(error(
            serde_json::json!({"at": 100, "for": 60, "kind": "outage", "target": "redis"})
        )
        .starts_with("faults[0].target:"));
        assert!(
            error(serde_json::json!({"at": 100, "kind": "outage", "target": "db"}))
                .starts_with("faults[0].for:")
        );
        assert!(error(serde_json::json!({"at": 100, "kind": "dynos_lost"}))
            .starts_with("faults[0].count:"));
        assert!(
            error(serde_json::json!({"at": 100, "for": 5, "kind": "dynos_lost", "count": 1}))
                .starts_with("faults[0].for:")
        );
        assert!(
            error(serde_json::json!({"at": 100, "kind": "dynos_lost", "count": 0}))
                .starts_with("faults[0].count:")
        );
        assert!(
            error(serde_json::json!({"at": 100, "for": 1, "kind": "meteor"}))
                .starts_with("faults[0].kind:")
        );
        assert!(
            error(serde_json::json!({"at": 100, "for": 1, "kind": "outage", "factor": 2}))
                .starts_with("faults[0].factor:")
        );
    }

    #[test]
    fn slowdowns_apply_in_their_window_and_multiply() {
        let specs: Vec<FaultSpec> = serde_json::from_value(serde_json::json!([
            {"at": 100, "for": 60, "kind": "slowdown", "factor": 3},
            {"at": 150, "for": 60, "kind": "slowdown", "factor": 2},
            {"at": 100, "for": 60, "kind": "slowdown", "factor": 5, "target": "db"},
            {"at": 300, "for": 10, "kind": "outage", "target": "db"},
        ]))
        .unwrap();
        let f = Faults::build(&specs, &["db"], (30.0, 630.0)).unwrap();
        assert_eq!(f.slowdown(Target::App, 99.9), 1.0);
        assert_eq!(f.slowdown(Target::App, 100.0), 3.0);
        assert_eq!(f.slowdown(Target::App, 155.0), 6.0);
        assert_eq!(f.slowdown(Target::App, 160.0), 2.0);
        assert_eq!(f.slowdown(Target::Resource(0), 120.0), 5.0);
        assert_eq!(f.outage(Target::Resource(0), 305.0), Some(None));
        assert_eq!(f.outage(Target::Resource(0), 310.0), None);
        assert_eq!(f.outage(Target::App, 305.0), None);
        assert_eq!(f.span(), Some((100.0, 310.0)));
    }
}
