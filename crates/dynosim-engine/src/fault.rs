//! Triggers (`[[faults]]`): what knocks a fleet out of its normal state for a while, so that
//! one can see whether it comes back when the trigger is gone (see [`crate::stability`]).
//!
//! - `kind = "slowdown"`: for `for` from `at`, work that begins takes `factor` times as long:
//!   the app's (`target = "app"`, the default: its `[service]` hold, `io` and `cpu` phases)
//!   or one resource's service (`target = "NAME"` of `[resources.NAME]`).
//! - `kind = "outage"`: for `for` from `at`, resource `target` refuses every use that begins
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
use crate::units::Duration;
use serde::{Deserialize, Serialize};

/// One `[[faults]]` table as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// When it starts, from the run's start (warm-up included).
    pub at: Duration,
    /// How long it lasts (`slowdown`, `outage`).
    #[serde(default, rename = "for")]
    pub lasts: Option<Duration>,
    /// "slowdown", "outage" or "dynos_lost".
    pub kind: String,
    /// `slowdown`: how many times longer work takes.
    #[serde(default)]
    pub factor: Option<f64>,
    /// What it strikes: "app" (the default for `slowdown`) or a resource's name.
    #[serde(default)]
    pub target: Option<String>,
    /// `outage`: "refuse" (the default) or "hang".
    #[serde(default)]
    pub mode: Option<String>,
    /// `dynos_lost`: how many dynos crash.
    #[serde(default)]
    pub count: Option<i64>,
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
    Slowdown { target: Target, factor: f64 },
    Outage { resource: usize, hang: bool },
    DynosLost { count: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    pub at: f64,
    /// When it ends (`at` for a `dynos_lost`, which is over at once).
    pub until: f64,
    pub kind: FaultKind,
}

/// The most a slowdown may multiply work by.
pub const MAX_FACTOR: f64 = 1e6;

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
        let key = |k: &str| format!("{path}.{k}");
        let at = spec.at.0;
        let (start, end) = window;
        if !(at.is_finite() && at > start && at < end) {
            return Err(Error::config(
                key("at"),
                format!(
                    "a fault must start inside the measured window, after the warm-up ({start} s) \
                     and before the run's end ({end} s), so that the run sees the fleet before \
                     and after it; got {at} s"
                ),
            ));
        }
        let foreign = |k: &str, given: bool, kind: &str| -> Result<()> {
            if given {
                return Err(Error::config(key(k), format!("not a setting of a {kind:?} fault")));
            }
            Ok(())
        };
        let lasts = |kind: &str| -> Result<f64> {
            let Some(Duration(d)) = spec.lasts else {
                return Err(Error::config(
                    key("for"),
                    format!("missing; a {kind:?} fault needs how long it lasts (for = \"1min\")"),
                ));
            };
            if !(d.is_finite() && d > 0.0) {
                return Err(Error::config(
                    key("for"),
                    format!("must be a positive duration, got {d} s"),
                ));
            }
            if at + d > end {
                return Err(Error::config(
                    key("for"),
                    format!(
                        "the fault would end at {} s, after the run's end ({end} s): a fault \
                         outside the run",
                        at + d
                    ),
                ));
            }
            Ok(d)
        };
        let resource = |kind: &str| -> Result<usize> {
            let Some(name) = spec.target.as_deref() else {
                return Err(Error::config(
                    key("target"),
                    format!("missing; a {kind:?} fault needs the resource it strikes"),
                ));
            };
            resources.iter().position(|r| *r == name).ok_or_else(|| {
                Error::config(
                    key("target"),
                    if resources.is_empty() {
                        format!("no resource {name:?}: the scenario has no [resources]")
                    } else {
                        format!(
                            "no resource {name:?}; expected one of: {}",
                            resources.join(", ")
                        )
                    },
                )
            })
        };
        match spec.kind.as_str() {
            "slowdown" => {
                foreign("mode", spec.mode.is_some(), "slowdown")?;
                foreign("count", spec.count.is_some(), "slowdown")?;
                let d = lasts("slowdown")?;
                let factor = spec.factor.ok_or_else(|| {
                    Error::config(
                        key("factor"),
                        "missing; a \"slowdown\" fault needs how many times longer work takes",
                    )
                })?;
                if !(factor.is_finite() && factor > 0.0 && factor <= MAX_FACTOR) {
                    return Err(Error::config(
                        key("factor"),
                        format!("must be a number above 0 and at most {MAX_FACTOR}, got {factor}"),
                    ));
                }
                let target = match spec.target.as_deref() {
                    None | Some("app") => Target::App,
                    Some(_) => Target::Resource(resource("slowdown")?),
                };
                Ok(Fault {
                    at,
                    until: at + d,
                    kind: FaultKind::Slowdown { target, factor },
                })
            }
            "outage" => {
                foreign("factor", spec.factor.is_some(), "outage")?;
                foreign("count", spec.count.is_some(), "outage")?;
                let d = lasts("outage")?;
                let r = resource("outage")?;
                let hang = match spec.mode.as_deref() {
                    None | Some("refuse") => false,
                    Some("hang") => true,
                    Some(other) => {
                        return Err(Error::config(
                            key("mode"),
                            format!("unknown mode {other:?}; expected \"refuse\" or \"hang\""),
                        ))
                    }
                };
                Ok(Fault {
                    at,
                    until: at + d,
                    kind: FaultKind::Outage { resource: r, hang },
                })
            }
            "dynos_lost" => {
                foreign("factor", spec.factor.is_some(), "dynos_lost")?;
                foreign("mode", spec.mode.is_some(), "dynos_lost")?;
                foreign("target", spec.target.is_some(), "dynos_lost")?;
                if spec.lasts.is_some() {
                    return Err(Error::config(
                        key("for"),
                        "a \"dynos_lost\" fault lasts as long as the dynos take to boot again \
                         (fleet.boot_time); it takes no duration",
                    ));
                }
                let count = match spec.count {
                    None => {
                        return Err(Error::config(
                            key("count"),
                            "missing; a \"dynos_lost\" fault needs how many dynos crash",
                        ))
                    }
                    Some(n) if (1..=i64::from(u32::MAX)).contains(&n) => n as u32,
                    Some(n) => {
                        return Err(Error::config(
                            key("count"),
                            format!("must be a whole number of dynos, at least 1; got {n}"),
                        ))
                    }
                };
                Ok(Fault {
                    at,
                    until: at,
                    kind: FaultKind::DynosLost { count },
                })
            }
            other => Err(Error::config(
                key("kind"),
                format!(
                    "unknown fault kind {other:?}; expected \"slowdown\", \"outage\" or \
                     \"dynos_lost\""
                ),
            )),
        }
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

    /// Resource `r`'s outage at `now`, if one is on: Some(None) it refuses, Some(Some(end)) it
    /// hangs a use until `end`.
    #[inline]
    pub fn outage(&self, r: usize, now: f64) -> Option<Option<f64>> {
        self.list.iter().find_map(|f| match f.kind {
            FaultKind::Outage { resource, hang } if resource == r && now >= f.at && now < f.until => {
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

    pub fn has_outage(&self, r: usize) -> bool {
        self.list
            .iter()
            .any(|f| matches!(f.kind, FaultKind::Outage { resource, .. } if resource == r))
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
        let f = build(serde_json::json!({"at": 100, "for": 60, "kind": "outage", "target": "cache",
            "mode": "hang"}))
        .unwrap();
        assert_eq!(
            f.kind,
            FaultKind::Outage {
                resource: 1,
                hang: true
            }
        );
        let f = build(serde_json::json!({"at": 100, "kind": "dynos_lost", "count": 2})).unwrap();
        assert_eq!(f.kind, FaultKind::DynosLost { count: 2 });
    }

    #[test]
    fn mistakes_name_their_key() {
        assert!(error(serde_json::json!({"at": 10, "for": 60, "kind": "slowdown", "factor": 3}))
            .starts_with("faults[0].at:"));
        assert!(error(serde_json::json!({"at": 600, "for": 60, "kind": "slowdown", "factor": 3}))
            .starts_with("faults[0].for:"));
        assert!(error(serde_json::json!({"at": 100, "for": 60, "kind": "slowdown"}))
            .starts_with("faults[0].factor:"));
        assert!(
            error(serde_json::json!({"at": 100, "for": 60, "kind": "outage", "target": "redis"}))
                .starts_with("faults[0].target:")
        );
        assert!(error(serde_json::json!({"at": 100, "kind": "outage", "target": "db"}))
            .starts_with("faults[0].for:"));
        assert!(
            error(serde_json::json!({"at": 100, "for": 5, "kind": "dynos_lost", "count": 1}))
                .starts_with("faults[0].for:")
        );
        assert!(error(serde_json::json!({"at": 100, "kind": "dynos_lost", "count": 0}))
            .starts_with("faults[0].count:"));
        assert!(error(serde_json::json!({"at": 100, "for": 1, "kind": "meteor"}))
            .starts_with("faults[0].kind:"));
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
        assert_eq!(f.outage(0, 305.0), Some(None));
        assert_eq!(f.outage(0, 310.0), None);
        assert_eq!(f.span(), Some((100.0, 310.0)));
    }
}
