//! Autoscalers: the rules by which a platform resizes a fleet, one file per rule and a
//! registry mapping a scenario's `autoscale.rule` to a builder, as routing policies are.
//! Adding a rule is a new file and one line in [`REGISTRY`].
//!
//! A rule is an observer. It never reads the engine's state: it is told the fleet's size as
//! the platform shows it ([`Fleet`]) and one figure of one metric ([`Observed`]), aggregated
//! over its own window and shown after the platform's reporting delay ([`Reading`]); it
//! answers with the size it asks for ([`Decision`]). [`Autoscaler`] holds a rule with the
//! settings every rule takes (`min`, `max`, `interval`), keeps the rule's metric window
//! ([`MetricWindow`], memory bounded whatever the number of requests) and clamps every answer
//! to `[min, max]`.
//!
//! A scenario's `[autoscale]` builds one ([`crate::scenario`]); in a run the event engine
//! (`sim/scaling.rs`) feeds its window (queue times when a request starts, response times
//! when the router logs its answer, the serving dynos' CPU and busy threads as they report
//! them), calls [`Autoscaler::evaluate`] every `interval`, and the fleet's lifecycle
//! (`sim/lifecycle.rs`) boots or drains dynos to reach the size asked for.
//!
//! The rules, their parameters, and which defaults come from the vendors' documentation and
//! which dynosim assumes: docs/autoscaling.md.

use crate::error::{Error, Result};
use crate::params::{self, Params};
use crate::registry::Registry;
use crate::units::Duration;
use serde_json::{Map, Value};
use std::fmt::Debug;

mod heroku;
mod hirefire;
mod hpa;
mod judoscale;
mod pacing;
mod schedule;
mod target_tracking;
mod window;

pub use window::MetricWindow;

/// The most dynos a bound may name: the limit of `fleet.dynos`.
pub const MAX_DYNOS: u32 = 10_000_000;

/// Keys every rule takes, besides its own.
pub const COMMON_KEYS: &[&str] = &["rule", "min", "max", "interval"];

/// What the platform shows a rule of the fleet it scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fleet {
    /// The size the fleet was last set to: its dynos booting or up (Heroku's formation
    /// quantity, a Kubernetes scale's `spec.replicas`). Dynos draining are no longer counted.
    pub size: u32,
    /// Of those, the dynos up: serving requests and reporting metrics (Kubernetes' ready pods,
    /// AWS's in-service instances). The others are booting.
    pub up: u32,
}

impl Fleet {
    /// A fleet whose dynos are all up.
    pub fn steady(size: u32) -> Fleet {
        Fleet { size, up: size }
    }

    /// Dynos asked for and not up yet.
    pub fn booting(&self) -> u32 {
        self.size.saturating_sub(self.up)
    }
}

/// The one figure of its metric that a rule is shown at an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Observed {
    /// The statistic over the window (seconds for times, a fraction for CPU and utilisation);
    /// None when nothing was observed in it (no request, no report, or not reported yet).
    pub value: Option<f64>,
    /// Observations in the window: requests, or dyno reports.
    pub samples: u64,
}

/// What a rule answers: the size it asks for (the fleet's size when it holds), and why, for
/// the logs and the time series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub desired: u32,
    pub why: &'static str,
}

impl Decision {
    pub fn new(desired: u32, why: &'static str) -> Decision {
        Decision { desired, why }
    }

    /// No change.
    pub fn hold(fleet: Fleet, why: &'static str) -> Decision {
        Decision::new(fleet.size, why)
    }
}

/// An evaluation by an [`Autoscaler`]: the rule's decision, clamped to `[min, max]`, and the
/// metric as the rule saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    pub decision: Decision,
    pub observed: Observed,
}

/// A metric a platform shows its autoscaler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// A request's response time as the router logs it (Heroku's `service=`), every answer
    /// it logs, recorded when the router logs it.
    ResponseTime,
    /// A request's queue time as `X-Request-Start` measures it: from the router receiving
    /// the request to the app starting it, recorded when the app starts it.
    QueueTime,
    /// A dyno's CPU use as a fraction of its cores over a report, one observation per up dyno
    /// and report.
    Cpu,
    /// A dyno's busy threads as a fraction of its threads over a report (Judoscale's
    /// utilisation, dynosim's `utilisation`), one observation per up dyno and report.
    Utilisation,
}

impl Metric {
    /// True for a time (seconds), false for a fraction.
    pub fn is_time(self) -> bool {
        matches!(self, Metric::ResponseTime | Metric::QueueTime)
    }
}

/// How a window's observations become the one figure a rule sees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    /// The value at this quantile (0.95 for a p95): the smallest observation with at least
    /// this fraction of them at or below it, to 3 significant digits.
    Quantile(f64),
    /// The mean of the observations.
    Mean,
}

/// What a rule reads, and when the platform shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub metric: Metric,
    pub statistic: Statistic,
    /// Seconds of observations aggregated (Heroku's past hour, Judoscale's 10 s).
    pub window: f64,
    /// Seconds from the end of the window to the moment the rule can see it: the platform's
    /// reporting delay.
    pub delay: f64,
}

/// The smallest and largest fleet a rule may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub min: u32,
    pub max: u32,
}

impl Bounds {
    pub fn clamp(&self, size: u32) -> u32 {
        size.clamp(self.min, self.max)
    }
}

/// A rule: when it runs, what it reads, and what it decides. State (cooldowns, streaks,
/// past recommendations) lives in the rule; a fresh copy (see [`RuleClone`]) starts a run.
pub trait AutoscaleRule: Send + Sync + Debug + RuleClone {
    /// Seconds between two evaluations.
    fn interval(&self) -> f64;
    /// The metric it reads and how; None for a rule that reads none (`schedule`).
    fn reading(&self) -> Option<Reading>;
    /// The size the fleet should have, decided at `now` (seconds since the run's start, a
    /// multiple of [`Self::interval`]) from the fleet and the metric as the platform shows
    /// them. Called at increasing times; the answer is taken as applied, and the next call
    /// shows the fleet as it then is.
    fn evaluate(&mut self, now: f64, fleet: Fleet, observed: Observed) -> Decision;
    /// Seconds after a scale event in direction `up` (true: a scale-up) within which a scale
    /// event the other way counts as a reversal (`autoscale.reversals`): the rule's own
    /// cooldown or delay that follows such an event. The default: one interval.
    fn cooldown(&self, up: bool) -> f64 {
        let _ = up;
        self.interval()
    }
}

/// Lets a configured rule be copied for each replication.
pub trait RuleClone {
    fn box_clone(&self) -> Box<dyn AutoscaleRule>;
}

impl<T: AutoscaleRule + Clone + 'static> RuleClone for T {
    fn box_clone(&self) -> Box<dyn AutoscaleRule> {
        Box::new(self.clone())
    }
}

/// Builds a rule from its parameters; `bounds` are the table's `min` and `max`, checked.
pub type Builder = fn(&Params, Bounds) -> Result<Box<dyn AutoscaleRule>>;

/// Every rule, by the name a scenario uses, with the parameter keys it takes besides
/// [`COMMON_KEYS`].
pub const REGISTRY: Registry<Builder> = Registry(&[
    ("heroku", heroku::KEYS, heroku::build),
    ("judoscale", judoscale::KEYS, judoscale::build),
    ("hirefire", hirefire::KEYS, hirefire::build),
    ("hpa", hpa::KEYS, hpa::build),
    (
        "target_tracking",
        target_tracking::KEYS,
        target_tracking::build,
    ),
    ("schedule", schedule::KEYS, schedule::build),
]);

/// A rule with the settings every rule takes, and the window of the metric it reads.
#[derive(Debug)]
pub struct Autoscaler {
    rule_name: &'static str,
    bounds: Bounds,
    rule: Box<dyn AutoscaleRule>,
    window: Option<MetricWindow>,
}

impl Clone for Autoscaler {
    fn clone(&self) -> Self {
        Autoscaler {
            rule_name: self.rule_name,
            bounds: self.bounds,
            rule: self.rule.box_clone(),
            window: self.window.clone(),
        }
    }
}

impl Autoscaler {
    /// The autoscaler a scenario's table describes; `section` is the table's key path
    /// (`autoscale`), which every error names with the key it is about.
    pub fn from_table(section: &str, table: &Map<String, Value>) -> Result<Autoscaler> {
        let names = REGISTRY.names();
        let rule_name = match table.get("rule") {
            Some(Value::String(name)) => name.as_str(),
            Some(other) => {
                return Err(Error::config(
                    format!("{section}.rule"),
                    format!(
                        "expected the name of a rule, got {other}; one of: {}",
                        names.join(", ")
                    ),
                ))
            }
            None => {
                return Err(Error::config(
                    format!("{section}.rule"),
                    format!("missing; expected one of: {}", names.join(", ")),
                ))
            }
        };
        let (keys, build) = REGISTRY.lookup(rule_name).ok_or_else(|| {
            Error::config(
                format!("{section}.rule"),
                format!(
                    "unknown autoscale rule {rule_name:?}; expected one of: {}",
                    names.join(", ")
                ),
            )
        })?;
        let rule_name = names
            .into_iter()
            .find(|n| *n == rule_name)
            .expect("looked up");
        let p = Params::new(section, rule_name, table);
        let taken: Vec<&str> = COMMON_KEYS.iter().chain(keys).copied().collect();
        for key in table.keys() {
            if taken.contains(&key.as_str()) {
                continue;
            }
            let owners: Vec<String> = REGISTRY
                .0
                .iter()
                .filter(|(_, keys, _)| keys.contains(&key.as_str()))
                .map(|(name, _, _)| format!("{name:?}"))
                .collect();
            if !owners.is_empty() {
                return Err(p.error(
                    key,
                    format!(
                        "a key of rule {}, not of rule {rule_name:?}, which takes: {}",
                        owners.join(", "),
                        taken.join(", ")
                    ),
                ));
            }
        }
        p.allow(&taken)?;
        let bounds = bounds(&p)?;
        let rule = build(&p, bounds)?;
        let window = match rule.reading() {
            None => None,
            Some(reading) => {
                if MetricWindow::slots(&reading, rule.interval()) > window::MAX_SLOTS {
                    return Err(p.error(
                        "delay",
                        format!(
                            "a delay of {} s is too long for a window of {} s: a window keeps \
                             at most {} buckets for the two; shorten the delay or lengthen the \
                             window",
                            reading.delay,
                            reading.window,
                            window::MAX_SLOTS
                        ),
                    ));
                }
                Some(MetricWindow::new(&reading, rule.interval()))
            }
        };
        Ok(Autoscaler {
            rule_name,
            bounds,
            rule,
            window,
        })
    }

    /// The rule's name in the registry.
    pub fn rule(&self) -> &'static str {
        self.rule_name
    }

    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    /// Seconds between two evaluations: the first at `interval`, then every `interval`.
    pub fn interval(&self) -> f64 {
        self.rule.interval()
    }

    /// What the rule reads; None when it reads nothing, and then nothing need be recorded.
    pub fn reading(&self) -> Option<Reading> {
        self.rule.reading()
    }

    /// One observation of the rule's metric at time `t` (a request's time in seconds, a
    /// dyno's report as a fraction); ignored when the rule reads no metric.
    #[inline]
    pub fn record(&mut self, t: f64, value: f64) {
        if let Some(window) = &mut self.window {
            window.record(t, value);
        }
    }

    /// `count` observations at time `t` adding up to `total` (every up dyno's report of one
    /// tick at once), for a rule that reads a mean.
    pub fn record_total(&mut self, t: f64, total: f64, count: u64) {
        if let Some(window) = &mut self.window {
            window.record_total(t, total, count);
        }
    }

    /// See [`AutoscaleRule::cooldown`].
    pub fn cooldown(&self, up: bool) -> f64 {
        self.rule.cooldown(up)
    }

    /// The rule's decision at `now`, clamped to `[min, max]`, with the metric as it saw it.
    pub fn evaluate(&mut self, now: f64, fleet: Fleet) -> Evaluation {
        let observed = match &mut self.window {
            Some(window) => window.read(now),
            None => Observed::default(),
        };
        let mut decision = self.rule.evaluate(now, fleet, observed);
        let clamped = self.bounds.clamp(decision.desired);
        if clamped != decision.desired {
            decision = Decision::new(clamped, "clamped to [min, max]");
        }
        Evaluation { decision, observed }
    }
}

/// `min` (default 1) and `max` (required), checked against each other.
fn bounds(p: &Params) -> Result<Bounds> {
    let max_dynos = i64::from(MAX_DYNOS);
    let min: u32 = p.whole("min", 1, 1, max_dynos)?;
    let max = p.get::<i64>("max")?;
    let max = p.required("max", "the most dynos it may run (max)", max)?;
    let max: u32 = params::whole(max, &p.path("max"), 1, max_dynos)?;
    if min > max {
        return Err(p.error("min", format!("must be at most max ({max}), got {min}")));
    }
    Ok(Bounds { min, max })
}

/// The evaluation interval: a positive duration, `default` seconds when absent.
fn interval(p: &Params, default: f64) -> Result<f64> {
    Ok(p.positive_duration("interval")?.unwrap_or(default))
}

/// A duration of at least 0 (a wait of 0 is none), `default` seconds when absent.
fn wait(p: &Params, key: &str, default: f64) -> Result<f64> {
    match p.get::<Duration>(key)? {
        None => Ok(default),
        Some(Duration(s)) if s.is_finite() && s >= 0.0 => Ok(s + 0.0),
        Some(Duration(s)) => Err(p.error(key, format!("must be a duration >= 0, got {s} s"))),
    }
}

/// A fraction in (0, 1] (a utilisation target: 0.6 for 60%).
fn fraction(p: &Params, key: &str) -> Result<Option<f64>> {
    let Some(value) = p.get::<f64>(key)? else {
        return Ok(None);
    };
    if value.is_finite() && value > 0.0 && value <= 1.0 {
        Ok(Some(value))
    } else if value > 1.0 && value <= 100.0 {
        Err(p.error(
            key,
            format!(
                "must be a fraction from 0 to 1, got {value} (for {value}% write {})",
                value / 100.0
            ),
        ))
    } else {
        Err(p.error(
            key,
            format!("must be a fraction above 0 and at most 1, got {value}"),
        ))
    }
}

/// The name of a choice among `options`, `default` when absent.
fn choice(
    p: &Params,
    key: &str,
    options: &[&'static str],
    default: &'static str,
) -> Result<&'static str> {
    match p.get::<String>(key)? {
        None => Ok(default),
        Some(given) => options
            .iter()
            .find(|o| **o == given)
            .copied()
            .ok_or_else(|| {
                p.error(
                    key,
                    format!(
                        "unknown value {given:?}; expected one of: {}",
                        options.join(", ")
                    ),
                )
            }),
    }
}

/// A range of two time thresholds, `downscale_below` < `upscale_above`: both given, or one
/// given and the other in the defaults' ratio to it (a range of 50 ms to 100 ms by default,
/// `upscale_above = "50ms"` alone gives 25 ms to 50 ms), or both defaults.
fn threshold_range(p: &Params, defaults: (f64, f64)) -> Result<(f64, f64)> {
    let (up_default, down_default) = defaults;
    let ratio = up_default / down_default;
    let (up, down) = match (
        p.positive_duration("upscale_above")?,
        p.positive_duration("downscale_below")?,
    ) {
        (Some(up), Some(down)) => (up, down),
        (Some(up), None) => (up, up / ratio),
        (None, Some(down)) => (down * ratio, down),
        (None, None) => (up_default, down_default),
    };
    if down >= up {
        return Err(p.error(
            "downscale_below",
            format!(
                "must be below upscale_above ({up} s), got {down} s: the two bound the range \
                 to keep"
            ),
        ));
    }
    Ok((up, down))
}

/// The window and delay of a rule's reading, with the rule's defaults.
fn window_and_delay(p: &Params, window: f64, delay: f64) -> Result<(f64, f64)> {
    Ok((
        p.positive_duration("window")?.unwrap_or(window),
        wait(p, "delay", delay)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn build(table: Value) -> Result<Autoscaler> {
        Autoscaler::from_table("autoscale", table.as_object().expect("a table"))
    }

    /// The error a table gives, as `path: message`.
    fn error(table: Value) -> String {
        match build(table) {
            Ok(a) => panic!("a bad table built a {} autoscaler", a.rule()),
            Err(e) => e.to_string(),
        }
    }

    /// One bound of a queue-time range given alone brings the other at the defaults' ratio
    /// (the issue's `--vary autoscale.upscale_above=50ms` is below judoscale's default lower
    /// bound); both given are taken as they are, and must be in order.
    #[test]
    fn a_range_given_by_one_bound_takes_the_other_at_the_defaults_ratio() {
        for (table, up, down) in [
            (
                json!({"rule": "judoscale", "max": 9, "upscale_above": "50ms"}),
                0.05,
                0.025,
            ),
            (
                json!({"rule": "judoscale", "max": 9, "downscale_below": "80ms"}),
                0.16,
                0.08,
            ),
            (json!({"rule": "judoscale", "max": 9}), 0.1, 0.05),
            (
                json!({"rule": "hirefire", "max": 9, "upscale_above": "50ms"}),
                0.05,
                0.02,
            ),
            (
                json!({"rule": "hirefire", "max": 9, "downscale_below": "1s"}),
                2.5,
                1.0,
            ),
        ] {
            let text = format!("{:?}", build(table.clone()).unwrap());
            for (key, value) in [("upscale_above", up), ("downscale_below", down)] {
                assert!(
                    text.contains(&format!("{key}: {value:?},")),
                    "{table}: {text}"
                );
            }
        }
        let e = error(json!({"rule": "judoscale", "max": 9,
                             "upscale_above": "50ms", "downscale_below": "50ms"}));
        assert!(
            e.starts_with("autoscale.downscale_below: must be below upscale_above"),
            "{e}"
        );
    }

    #[test]
    fn each_rule_builds_with_its_defaults() {
        for (table, interval, reading) in [
            (
                json!({ "rule": "heroku", "max": 10 }),
                60.0,
                Some((Metric::ResponseTime, Statistic::Quantile(0.95), 3600.0, 0.0)),
            ),
            (
                json!({ "rule": "judoscale", "max": 10 }),
                10.0,
                Some((Metric::QueueTime, Statistic::Quantile(0.95), 10.0, 10.0)),
            ),
            (
                json!({ "rule": "hirefire", "max": 10 }),
                60.0,
                Some((Metric::QueueTime, Statistic::Quantile(0.99), 60.0, 0.0)),
            ),
            (
                json!({ "rule": "hpa", "max": 10, "target": 0.6 }),
                15.0,
                Some((Metric::Cpu, Statistic::Mean, 15.0, 15.0)),
            ),
            (
                json!({ "rule": "hpa", "max": 10, "metric": "queue.p95", "target": "100ms" }),
                15.0,
                Some((Metric::QueueTime, Statistic::Quantile(0.95), 15.0, 15.0)),
            ),
            (
                json!({ "rule": "target_tracking", "max": 10, "target": 0.5 }),
                60.0,
                Some((Metric::Cpu, Statistic::Mean, 60.0, 0.0)),
            ),
            (
                json!({ "rule": "schedule", "max": 10, "schedule": [["0s", 2], ["8h", 10]] }),
                60.0,
                None,
            ),
            (
                json!({ "rule": "schedule", "max": 10, "interval": "5min",
                        "schedule": [["0s", 2]] }),
                300.0,
                None,
            ),
        ] {
            let a = build(table.clone()).unwrap_or_else(|e| panic!("{table}: {e}"));
            assert_eq!(a.bounds(), Bounds { min: 1, max: 10 });
            assert_eq!(a.interval(), interval, "{table}");
            let got = a
                .reading()
                .map(|r| (r.metric, r.statistic, r.window, r.delay));
            assert_eq!(got, reading, "{table}");
        }
    }

    /// What a rule needs besides `rule` and `max`.
    fn minimal(rule: &str) -> Value {
        let mut table = json!({ "rule": rule, "max": 10 });
        match rule {
            "hpa" | "target_tracking" => table["target"] = json!(0.5),
            "schedule" => table["schedule"] = json!([["0s", 2]]),
            _ => {}
        }
        table
    }

    #[test]
    fn every_registered_key_is_read_by_its_rule() {
        // A value no key takes: the error names the key, so its builder reads it (a key in
        // the registry that the builder forgot, or reads under another name, would build).
        for (rule, keys, _) in REGISTRY.0 {
            for key in COMMON_KEYS.iter().chain(*keys).filter(|k| **k != "rule") {
                let mut table = minimal(rule);
                table[*key] = json!(true);
                let got = error(table);
                assert!(
                    got.starts_with(&format!("autoscale.{key}: ")),
                    "{rule}: {got}"
                );
            }
        }
    }

    #[test]
    fn all_the_keys_of_a_rule_together() {
        let valid = |key: &str| match key {
            "target" | "upscale_above" => json!("200ms"),
            "downscale_below" => json!("20ms"),
            "window" | "delay" | "cooldown" | "downscale_delay" | "upscale_timeout"
            | "downscale_timeout" | "scale_in_cooldown" | "up_stabilization"
            | "down_stabilization" => json!("30s"),
            "downscale_ratio" | "scale_in_ratio" | "tolerance" | "up_tolerance"
            | "down_tolerance" => json!(0.2),
            "metric" => json!("queue.p95"),
            "aggregation" => json!("percentile"),
            "percentile" => json!(95),
            "up_policies" | "down_policies" => {
                json!([{ "type": "pods", "value": 2, "period": "30s" }])
            }
            "up_select" | "down_select" => json!("min"),
            "schedule" => json!([["0s", 2]]),
            _ => json!(2),
        };
        for (rule, keys, _) in REGISTRY.0 {
            let mut table = json!({ "rule": rule, "max": 10, "interval": "30s" });
            for key in *keys {
                table[*key] = valid(key);
            }
            if *rule == "hirefire" {
                table["metric"] = json!("response");
            }
            if *rule == "target_tracking" {
                table["metric"] = json!("utilisation");
                table["target"] = json!(0.5);
            }
            let a = build(table.clone()).unwrap_or_else(|e| panic!("{table}: {e}"));
            assert_eq!(a.interval(), 30.0, "{rule}");
        }
    }

    #[test]
    fn bad_tables_are_one_line_naming_the_key() {
        for (table, expected) in [
            (
                json!({ "max": 3 }),
                "autoscale.rule: missing; expected one of: ",
            ),
            (
                json!({ "rule": "keda", "max": 3 }),
                "autoscale.rule: unknown autoscale rule \"keda\"; expected one of: ",
            ),
            (
                json!({ "rule": 7, "max": 3 }),
                "autoscale.rule: expected the name of a rule, got 7; one of: ",
            ),
            (
                json!({ "rule": "schedule", "min": 5, "max": 3, "schedule": [["0s", 4]] }),
                "autoscale.min: must be at most max (3), got 5",
            ),
            (
                json!({ "rule": "schedule", "schedule": [["0s", 4]] }),
                "autoscale.max: missing; autoscale \"schedule\" needs the most dynos it may run",
            ),
            (
                json!({ "rule": "schedule", "min": 0, "max": 3, "schedule": [["0s", 1]] }),
                "autoscale.min: must be a whole number >= 1",
            ),
            (
                json!({ "rule": "schedule", "max": 3, "interval": "0s", "schedule": [["0s", 1]] }),
                "autoscale.interval: must be a positive duration, got 0 s",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.5, "upscale_above": "100ms" }),
                "autoscale.upscale_above: a key of rule \"judoscale\", \"hirefire\", not of rule \
                 \"hpa\", which takes: rule, min, max, interval, metric, target",
            ),
            (
                json!({ "rule": "heroku", "max": 3, "p95": "1s" }),
                "autoscale.p95: unknown key for autoscale \"heroku\"; expected one of: rule, \
                 min, max, interval, target",
            ),
            (
                json!({ "rule": "schedule", "max": 3, "schedule": [["0s", 1]],
                        "downscale_delay": "5min" }),
                "autoscale.downscale_delay: a key of rule \"heroku\"",
            ),
            (
                json!({ "rule": "schedule", "max": 3, "schedule": [["0s", 1]], "dynos": 2 }),
                "autoscale.dynos: unknown key for autoscale \"schedule\"; expected one of: \
                 rule, min, max, interval, schedule",
            ),
            (
                json!({ "rule": "heroku", "max": 3, "target": "-1s" }),
                "autoscale.target: must be a positive duration, got -1 s",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": -0.5 }),
                "autoscale.target: must be a fraction above 0 and at most 1, got -0.5",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 60 }),
                "autoscale.target: must be a fraction from 0 to 1, got 60 (for 60% write 0.6)",
            ),
            (
                json!({ "rule": "hpa", "max": 3 }),
                "autoscale.target: missing; autoscale \"hpa\" needs a utilisation such as 0.6",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "metric": "queue.p95", "target": "-100ms" }),
                "autoscale.target: must be a positive duration, got -0.1 s",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "metric": "queue.p95" }),
                "autoscale.target: missing; autoscale \"hpa\" needs a queue time such as",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "metric": "memory", "target": 0.5 }),
                "autoscale.metric: unknown value \"memory\"; expected one of: cpu, utilisation, \
                 queue.p95",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.5, "tolerance": 1.5 }),
                "autoscale.tolerance: must be at least 0 and below 1, got 1.5",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.5, "up_tolerance": -0.1 }),
                "autoscale.up_tolerance: must be a number >= 0, got -0.1",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.5, "down_tolerance": 1.0 }),
                "autoscale.down_tolerance: must be at least 0 and below 1, got 1",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.605 }),
                "autoscale.target: must be a whole percent (60.5% is not: the HPA's \
                 averageUtilization is a whole number), such as 0.61",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.5,
                        "up_policies": [{ "type": "replicas", "value": 4, "period": "15s" }] }),
                "autoscale.up_policies[0].type: unknown policy type \"replicas\"",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.5,
                        "down_policies": [{ "type": "pods", "value": 0, "period": "15s" }] }),
                "autoscale.down_policies[0].value: must be a whole number >= 1",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.5, "down_policies": [] }),
                "autoscale.down_policies: expected at least one policy",
            ),
            (
                json!({ "rule": "hpa", "max": 3, "target": 0.5, "down_stabilization": "2h" }),
                "autoscale.down_stabilization: must be at most 1 hour, got 7200 s",
            ),
            (
                json!({ "rule": "judoscale", "max": 3, "upscale_above": "50ms",
                        "downscale_below": "80ms" }),
                "autoscale.downscale_below: must be below upscale_above (0.05 s), got 0.08 s",
            ),
            (
                json!({ "rule": "judoscale", "max": 3, "cooldown": "-3min" }),
                "autoscale.cooldown: must be a duration >= 0, got -180 s",
            ),
            (
                json!({ "rule": "judoscale", "max": 3, "delay": "1000d" }),
                "autoscale.delay: a delay of 86400000 s is too long for a window of 10 s",
            ),
            (
                json!({ "rule": "hirefire", "max": 3, "aggregation": "average",
                        "percentile": 95 }),
                "autoscale.percentile: only with aggregation = \"percentile\"",
            ),
            (
                json!({ "rule": "hirefire", "max": 3, "percentile": 100 }),
                "autoscale.percentile: must be above 0 and below 100",
            ),
            (
                json!({ "rule": "schedule", "max": 10,
                        "schedule": [["0s", 2], ["20h", 4], ["8h", 10]] }),
                "autoscale.schedule[2][0]: times of day must increase: 28800 s comes after \
                 72000 s",
            ),
            (
                json!({ "rule": "schedule", "max": 10, "schedule": [["0s", 2], ["25h", 4]] }),
                "autoscale.schedule[1][0]: expected a time of day from \"0s\" to before \"24h\"",
            ),
            (
                json!({ "rule": "schedule", "min": 2, "max": 10, "schedule": [["0s", 12]] }),
                "autoscale.schedule[0][1]: must be a whole number >= 2 and <= 10, got 12 \
                 (within the autoscaler's min and max)",
            ),
            (
                json!({ "rule": "schedule", "max": 10, "schedule": [["0s", 2.5]] }),
                "autoscale.schedule[0][1]: expected a whole number of dynos, got 2.5",
            ),
            (
                json!({ "rule": "schedule", "max": 10, "schedule": [["noon", 2]] }),
                "autoscale.schedule[0][0]: expected a duration such as",
            ),
            (
                json!({ "rule": "schedule", "max": 10, "schedule": [] }),
                "autoscale.schedule: empty; expected [[time of day, dynos], ...]",
            ),
            (
                json!({ "rule": "schedule", "max": 10, "schedule": ["8h", 4] }),
                "autoscale.schedule[0]: expected a [time of day, dynos] pair",
            ),
            (
                json!({ "rule": "schedule", "max": 10 }),
                "autoscale.schedule: missing",
            ),
        ] {
            let got = error(table.clone());
            assert!(
                got.starts_with(expected),
                "{table}\n got: {got}\nwant: {expected}"
            );
            assert!(!got.contains('\n'), "one line: {got}");
        }
    }

    #[test]
    fn a_missing_or_unknown_rule_is_told_every_rule() {
        let every = REGISTRY.names().join(", ");
        assert_eq!(
            error(json!({ "max": 3 })),
            format!("autoscale.rule: missing; expected one of: {every}")
        );
        assert_eq!(
            error(json!({ "rule": "keda", "max": 3 })),
            format!("autoscale.rule: unknown autoscale rule \"keda\"; expected one of: {every}")
        );
    }

    #[test]
    fn answers_are_clamped_to_min_and_max() {
        let mut a = build(json!({ "rule": "heroku", "min": 2, "max": 10 })).unwrap();
        // A fleet already over max, with nothing to read: the rule holds, the clamp brings it
        // to max.
        let e = a.evaluate(60.0, Fleet::steady(20));
        assert_eq!(e.decision, Decision::new(10, "clamped to [min, max]"));
        let e = a.evaluate(120.0, Fleet::steady(1));
        assert_eq!(e.decision.desired, 2);
    }

    #[test]
    fn judoscale_sees_a_breach_one_report_later_and_upscales_at_once() {
        // Queue times of 300 ms in [0, 10 s): not shown at 10 s (the adapters report every
        // 10 s), shown at 20 s: the upscale request goes out 10 to 20 s after the breach.
        let mut a = build(json!({ "rule": "judoscale", "max": 10 })).unwrap();
        for i in 0..100 {
            a.record(f64::from(i) * 0.1, 0.3);
        }
        let e = a.evaluate(10.0, Fleet::steady(2));
        assert_eq!((e.decision.desired, e.observed.value), (2, None));
        let e = a.evaluate(20.0, Fleet::steady(2));
        assert_eq!(e.decision.desired, 3);
        assert_eq!(e.observed.samples, 100);
        assert!((e.observed.value.unwrap() - 0.3).abs() < 1e-3);
    }

    #[test]
    fn an_hpa_on_cpu_reads_the_mean_of_the_dynos_reports() {
        let mut a = build(json!({ "rule": "hpa", "max": 20, "target": 0.5,
                                   "delay": "0s" }))
        .unwrap();
        // Four dynos report every 5 s: 0.9, 0.9, 1.0 and 1.2 (a mean of 1.0, twice the target).
        for tick in 0..3 {
            a.record_total(f64::from(tick) * 5.0, 4.0, 4);
        }
        let e = a.evaluate(15.0, Fleet::steady(4));
        assert_eq!(e.observed.samples, 12);
        assert_eq!(e.observed.value, Some(1.0));
        assert_eq!(e.decision.desired, 8);
    }

    #[test]
    fn a_copy_keeps_its_own_state() {
        let a = build(json!({ "rule": "heroku", "max": 10 })).unwrap();
        let mut b = a.clone();
        b.record(1.0, 5.0);
        assert_eq!(b.evaluate(60.0, Fleet::steady(2)).decision.desired, 3);
        let mut c = a.clone();
        assert_eq!(c.evaluate(60.0, Fleet::steady(2)).decision.desired, 2);
        assert_eq!(a.rule(), "heroku");
    }
}
