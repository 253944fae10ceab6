//! The Kubernetes Horizontal Pod Autoscaler (autoscaling/v2, with `behavior`), as its
//! controller computes it (kubernetes/kubernetes, pkg/controller/podautoscaler/
//! replica_calculator.go and horizontal.go; the documentation's "Algorithm details" and
//! "Configurable scaling behavior").
//!
//! Every `interval` (the controller's sync period, 15 s):
//! 1. a recommendation from the metric: ratio = metric / target; from 1 − `down_tolerance`
//!    to 1 + `up_tolerance`, both ends included, the current size, else ⌈ratio × ready
//!    dynos⌉. For `cpu` and `utilisation` (a mean per dyno, as a resource's
//!    `averageUtilization`) the controller works in whole percent: the utilisation is
//!    truncated to one, and the target is one. Booting dynos are set aside as unready pods
//!    are, and when the ratio is above 1 the recommendation is worked out again with them
//!    counted at 0 (the utilisation truncated again), which damps a scale-up while dynos
//!    boot; a direction reversed by that, or a ratio then within tolerance, holds.
//!    `queue.p95` is one value for the whole fleet (an object metric with a `Value` target).
//! 2. stabilization: the recommendation is kept between the lowest of those made over the
//!    last `up_stabilization` and the highest over the last `down_stabilization` (the first
//!    evaluation records the fleet's size as a recommendation, as the controller does).
//! 3. rate limits: the policies (`pods` or `percent` per `period`) bound the change against
//!    the fleet's size at the start of each period, worked out from the scale events of the
//!    period; `select` takes the policy allowing the most change (`max`), the least (`min`),
//!    or none (`disabled`); then `[min, max]`.
//!
//! A fleet outside `[min, max]` is brought to the nearest bound at once, as the controller
//! does. With no dyno up, or no metric reported, the HPA holds (the controller reports an
//! error and does not scale).
//!
//! Step 1 follows replica_calculator.go as it reads since the per-direction tolerances
//! (KEP-4951, alpha in Kubernetes 1.33 behind `HPAConfigurableTolerance`): the version with
//! `type Tolerances struct { scaleDown, scaleUp float64 }` and `isWithin`, whose `groupPods`
//! returns ready, unready, missing and ignored pods and whose missing pods count at
//! `max(100, targetUtilization)` percent on a scale-down; and metrics/utilization.go's
//! `GetResourceUtilizationRatio` (`int32((metricsTotal * 100) / requestsTotal)`). Its boundary
//! cases are the table of tests below, each a situation and Kubernetes' answer, as
//! replica_calculator_test.go's are.

use super::{choice, fraction, wait, window_and_delay, AutoscaleRule, Bounds, Decision, Fleet};
use super::{Metric, Observed, Reading, Statistic};
use crate::error::{Error, Result};
use crate::params::Params;
use crate::units::Duration;
use serde::Deserialize;
use std::collections::VecDeque;

pub const KEYS: &[&str] = &[
    "metric",
    "target",
    "tolerance",
    "up_tolerance",
    "down_tolerance",
    "window",
    "delay",
    "up_stabilization",
    "down_stabilization",
    "up_policies",
    "down_policies",
    "up_select",
    "down_select",
];

/// The longest stabilization window the API takes (`stabilizationWindowSeconds` <= 3600).
const MAX_STABILIZATION: f64 = 3600.0;
/// The longest policy period the API takes (`periodSeconds` <= 1800).
const MAX_PERIOD: f64 = 1800.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HpaMetric {
    Cpu,
    Utilisation,
    QueueP95,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    Pods,
    Percent,
}

/// At most `value` dynos, or `value` percent of the fleet, of change per `period` seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    pub kind: PolicyKind,
    pub value: u32,
    pub period: f64,
}

/// Which policy applies (`selectPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// The one allowing the most change (the default).
    Max,
    /// The one allowing the least.
    Min,
    /// No scaling in that direction.
    Disabled,
}

/// One direction's `behavior`: a stabilization window and rate limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub stabilization: f64,
    pub policies: Vec<Policy>,
    pub select: Select,
}

impl Rules {
    fn longest_period(&self) -> f64 {
        self.policies.iter().map(|p| p.period).fold(0.0, f64::max)
    }
}

/// The documentation's default behavior: scale up at once by 4 dynos or 100% per 15 s,
/// whichever is more; scale down to the highest recommendation of the last 5 minutes, by up
/// to 100% per 15 s.
pub fn default_rules() -> (Rules, Rules) {
    let policy = |kind, value| Policy {
        kind,
        value,
        period: 15.0,
    };
    (
        Rules {
            stabilization: 0.0,
            policies: vec![
                policy(PolicyKind::Percent, 100),
                policy(PolicyKind::Pods, 4),
            ],
            select: Select::Max,
        },
        Rules {
            stabilization: 300.0,
            policies: vec![policy(PolicyKind::Percent, 100)],
            select: Select::Max,
        },
    )
}

/// How far from 1 the ratio of metric to target may be, each way, before the HPA acts
/// (`behavior.scaleUp.tolerance`, `behavior.scaleDown.tolerance`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    pub up: f64,
    pub down: f64,
}

impl Tolerances {
    /// The controller's `isWithin`: both ends count as within (a ratio of exactly 1.1
    /// against a tolerance of 0.1 holds), in the controller's own floating-point operations.
    fn within(&self, ratio: f64) -> bool {
        (1.0 - self.down) <= ratio && ratio <= (1.0 + self.up)
    }
}

/// A utilisation (a fraction) in whole percent, truncated, as `GetResourceUtilizationRatio`
/// computes it from whole milli-units. The 1e-9 keeps a fraction written in decimal, whose
/// binary value falls just short (0.29 × 100 = 28.999999999999996), at its percent.
fn whole_percent(fraction: f64) -> f64 {
    (fraction * 100.0 + 1e-9).floor()
}

#[derive(Debug, Clone)]
pub struct Hpa {
    metric: HpaMetric,
    /// A fraction for cpu and utilisation (a whole percent of one), seconds for queue.p95.
    target: f64,
    tolerances: Tolerances,
    interval: f64,
    window: f64,
    delay: f64,
    up: Rules,
    down: Rules,
    bounds: Bounds,
    started: bool,
    /// Recommendations before stabilization, (time, dynos), as long as a window needs them.
    recommendations: VecDeque<(f64, u32)>,
    /// Scale events, (time, dynos added or removed), as long as a policy's period needs them.
    ups: VecDeque<(f64, u32)>,
    downs: VecDeque<(f64, u32)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicySpec {
    #[serde(rename = "type")]
    kind: String,
    value: i64,
    period: Duration,
}

fn policies(p: &Params, key: &str, default: Vec<Policy>) -> Result<Vec<Policy>> {
    let Some(specs) = p.get::<Vec<PolicySpec>>(key)? else {
        return Ok(default);
    };
    if specs.is_empty() {
        return Err(p.error(
            key,
            "expected at least one policy, such as [{ type = \"pods\", value = 4, period = \
             \"15s\" }] (to stop scaling in a direction, set its select to \"disabled\")",
        ));
    }
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let at = |field: &str| format!("{}[{i}].{field}", p.path(key));
            let kind = match s.kind.as_str() {
                "pods" => PolicyKind::Pods,
                "percent" => PolicyKind::Percent,
                other => {
                    return Err(Error::config(
                        at("type"),
                        format!("unknown policy type {other:?}; expected pods or percent"),
                    ))
                }
            };
            let value = crate::params::whole(s.value, &at("value"), 1, i64::from(u32::MAX))?;
            let period = s.period.0;
            if !(period > 0.0 && period <= MAX_PERIOD) {
                return Err(Error::config(
                    at("period"),
                    format!("must be a duration above 0 s and at most 30 min, got {period} s"),
                ));
            }
            Ok(Policy {
                kind,
                value,
                period,
            })
        })
        .collect()
}

fn select(p: &Params, key: &str) -> Result<Select> {
    Ok(match choice(p, key, &["max", "min", "disabled"], "max")? {
        "min" => Select::Min,
        "disabled" => Select::Disabled,
        _ => Select::Max,
    })
}

/// `tolerance` sets both directions (0.1 unless given, the controller's default); `up_tolerance`
/// and `down_tolerance` set one each, over it.
fn tolerances(p: &Params) -> Result<Tolerances> {
    let tolerance = |key: &str, default: f64, below_one: bool| -> Result<f64> {
        let value = p.get::<f64>(key)?.unwrap_or(default);
        if below_one && !(0.0..1.0).contains(&value) {
            return Err(p.error(key, format!("must be at least 0 and below 1, got {value}")));
        }
        if !(value.is_finite() && value >= 0.0) {
            return Err(p.error(key, format!("must be a number >= 0, got {value}")));
        }
        Ok(value)
    };
    let both = tolerance("tolerance", 0.1, true)?;
    Ok(Tolerances {
        up: tolerance("up_tolerance", both, false)?,
        down: tolerance("down_tolerance", both, true)?,
    })
}

fn stabilization(p: &Params, key: &str, default: f64) -> Result<f64> {
    let window = wait(p, key, default)?;
    if window > MAX_STABILIZATION {
        return Err(p.error(key, format!("must be at most 1 hour, got {window} s")));
    }
    Ok(window)
}

pub fn build(p: &Params, bounds: Bounds) -> Result<Box<dyn AutoscaleRule>> {
    let metric = match choice(p, "metric", &["cpu", "utilisation", "queue.p95"], "cpu")? {
        "utilisation" => HpaMetric::Utilisation,
        "queue.p95" => HpaMetric::QueueP95,
        _ => HpaMetric::Cpu,
    };
    let target = match metric {
        HpaMetric::QueueP95 => {
            let target = p.positive_duration("target")?;
            p.required("target", "a queue time such as \"100ms\" (target)", target)?
        }
        _ => {
            let target = fraction(p, "target")?;
            p.required("target", "a utilisation such as 0.6 (target)", target)?
        }
    };
    if metric != HpaMetric::QueueP95 {
        let percent = target * 100.0;
        if (percent - percent.round()).abs() > 1e-9 {
            return Err(p.error(
                "target",
                format!(
                    "must be a whole percent ({percent}% is not: the HPA's averageUtilization \
                     is a whole number), such as {}",
                    percent.round().max(1.0) / 100.0
                ),
            ));
        }
    }
    let tolerances = tolerances(p)?;
    let (up, down) = default_rules();
    let (window, delay) = window_and_delay(p, 15.0, 15.0)?;
    Ok(Box::new(Hpa::new(
        metric,
        target,
        tolerances,
        super::interval(p, 15.0)?,
        (window, delay),
        Rules {
            stabilization: stabilization(p, "up_stabilization", up.stabilization)?,
            policies: policies(p, "up_policies", up.policies)?,
            select: select(p, "up_select")?,
        },
        Rules {
            stabilization: stabilization(p, "down_stabilization", down.stabilization)?,
            policies: policies(p, "down_policies", down.policies)?,
            select: select(p, "down_select")?,
        },
        bounds,
    )))
}

impl Hpa {
    #[allow(clippy::too_many_arguments)]
    fn new(
        metric: HpaMetric,
        target: f64,
        tolerances: Tolerances,
        interval: f64,
        (window, delay): (f64, f64),
        up: Rules,
        down: Rules,
        bounds: Bounds,
    ) -> Hpa {
        Hpa {
            metric,
            target,
            tolerances,
            interval,
            window,
            delay,
            up,
            down,
            bounds,
            started: false,
            recommendations: VecDeque::new(),
            ups: VecDeque::new(),
            downs: VecDeque::new(),
        }
    }

    /// The recommendation from the metric alone (replica_calculator.go); None when there is
    /// nothing to compute it from.
    fn recommend(&self, fleet: Fleet, value: Option<f64>) -> Option<u32> {
        let value = value?;
        let ready = fleet.up.min(fleet.size);
        if ready == 0 {
            return None;
        }
        if self.metric == HpaMetric::QueueP95 {
            // GetObjectMetricReplicas: the ratio, and the ready pods.
            let ratio = value / self.target;
            if self.tolerances.within(ratio) {
                return Some(fleet.size);
            }
            return Some(ceil(ratio * f64::from(ready)));
        }
        // GetResourceReplicas, every dyno requesting the same: whole percents.
        let target = (self.target * 100.0).round();
        let ratio = whole_percent(value) / target;
        let unready = fleet.size - ready;
        if unready == 0 || ratio <= 1.0 {
            if self.tolerances.within(ratio) {
                return Some(fleet.size);
            }
            return Some(ceil(ratio * f64::from(ready)));
        }
        // Scaling up with dynos booting: they count as using nothing of their request.
        let considered = f64::from(fleet.size);
        let ratio2 = whole_percent(value * f64::from(ready) / considered) / target;
        if self.tolerances.within(ratio2) || ratio2 < 1.0 {
            return Some(fleet.size);
        }
        Some(ceil(ratio2 * considered).max(fleet.size))
    }

    /// The recommendation kept within the stabilization windows' lowest and highest, and
    /// recorded.
    fn stabilize(&mut self, now: f64, current: u32, recommendation: u32) -> u32 {
        let up_cutoff = now - self.up.stabilization;
        let down_cutoff = now - self.down.stabilization;
        let mut up = recommendation;
        let mut down = recommendation;
        for &(t, r) in &self.recommendations {
            if t > up_cutoff {
                up = up.min(r);
            }
            if t > down_cutoff {
                down = down.max(r);
            }
        }
        let stabilized = current.max(up).min(down);
        let cutoff = up_cutoff.min(down_cutoff);
        while self
            .recommendations
            .front()
            .is_some_and(|&(t, _)| t <= cutoff)
        {
            self.recommendations.pop_front();
        }
        self.recommendations.push_back((now, recommendation));
        stabilized
    }

    /// Dynos added and removed in the `period` seconds up to `now`.
    fn changes(&self, now: f64, period: f64) -> (i64, i64) {
        let sum = |events: &VecDeque<(f64, u32)>| {
            events
                .iter()
                .filter(|&&(t, _)| t > now - period)
                .map(|&(_, n)| i64::from(n))
                .sum::<i64>()
        };
        (sum(&self.ups), sum(&self.downs))
    }

    /// The most dynos the scale-up policies allow now.
    fn up_limit(&self, now: f64, current: u32) -> i64 {
        let current = i64::from(current);
        let limits = self.up.policies.iter().map(|policy| {
            let (added, removed) = self.changes(now, policy.period);
            let start = current - added + removed;
            match policy.kind {
                PolicyKind::Pods => start + i64::from(policy.value),
                PolicyKind::Percent => {
                    (start as f64 * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i64
                }
            }
        });
        match self.up.select {
            Select::Disabled => current,
            Select::Max => limits.max().unwrap_or(current),
            Select::Min => limits.min().unwrap_or(current),
        }
    }

    /// The fewest dynos the scale-down policies allow now.
    fn down_limit(&self, now: f64, current: u32) -> i64 {
        let current = i64::from(current);
        let limits = self.down.policies.iter().map(|policy| {
            let (added, removed) = self.changes(now, policy.period);
            let start = current - added + removed;
            match policy.kind {
                PolicyKind::Pods => start - i64::from(policy.value),
                // Truncated, as the controller's int32 conversion does.
                PolicyKind::Percent => {
                    (start as f64 * (1.0 - f64::from(policy.value) / 100.0)) as i64
                }
            }
        });
        match self.down.select {
            Select::Disabled => current,
            // The most change is the lowest limit.
            Select::Max => limits.min().unwrap_or(current),
            Select::Min => limits.max().unwrap_or(current),
        }
    }

    /// The stabilized recommendation within the policies' limits and `[min, max]`.
    fn limit(&self, now: f64, current: u32, stabilized: u32) -> (u32, &'static str) {
        if stabilized > current {
            let limit = self.up_limit(now, current).max(i64::from(current));
            let allowed = limit.min(i64::from(self.bounds.max));
            if i64::from(stabilized) > allowed {
                return (allowed as u32, "scale-up limited");
            }
        } else if stabilized < current {
            let limit = self.down_limit(now, current).min(i64::from(current));
            let allowed = limit.max(i64::from(self.bounds.min));
            if i64::from(stabilized) < allowed {
                return (allowed as u32, "scale-down limited");
            }
        }
        (stabilized, "recommended")
    }

    fn store_event(&mut self, now: f64, current: u32, desired: u32) {
        let (events, longest) = if desired > current {
            (&mut self.ups, self.up.longest_period())
        } else {
            (&mut self.downs, self.down.longest_period())
        };
        while events.front().is_some_and(|&(t, _)| t <= now - longest) {
            events.pop_front();
        }
        events.push_back((now, desired.abs_diff(current)));
    }
}

fn ceil(x: f64) -> u32 {
    x.ceil().clamp(0.0, f64::from(u32::MAX)) as u32
}

impl AutoscaleRule for Hpa {
    fn interval(&self) -> f64 {
        self.interval
    }
    /// The scale-down stabilization window after a scale-up (what keeps the HPA from
    /// taking it back at once); the scale-up one (0 s by default) after a scale-down, or an
    /// interval if longer.
    fn cooldown(&self, up: bool) -> f64 {
        if up {
            self.down.stabilization.max(self.interval)
        } else {
            self.up.stabilization.max(self.interval)
        }
    }

    fn reading(&self) -> Option<Reading> {
        let (metric, statistic) = match self.metric {
            HpaMetric::Cpu => (Metric::Cpu, Statistic::Mean),
            HpaMetric::Utilisation => (Metric::Utilisation, Statistic::Mean),
            HpaMetric::QueueP95 => (Metric::QueueTime, Statistic::Quantile(0.95)),
        };
        Some(Reading {
            metric,
            statistic,
            window: self.window,
            delay: self.delay,
        })
    }

    fn evaluate(&mut self, now: f64, fleet: Fleet, observed: Observed) -> Decision {
        let current = fleet.size;
        if !self.started {
            self.started = true;
            self.recommendations.push_back((now, current));
        }
        let (desired, why) = if current > self.bounds.max {
            (self.bounds.max, "above max")
        } else if current < self.bounds.min {
            (self.bounds.min, "below min")
        } else {
            let Some(recommendation) = self.recommend(fleet, observed.value) else {
                return Decision::hold(fleet, "no metric from a ready dyno");
            };
            let stabilized = self.stabilize(now, current, recommendation);
            let (desired, why) = self.limit(now, current, stabilized);
            let why = if desired == stabilized && stabilized != recommendation {
                "stabilized"
            } else {
                why
            };
            (desired, why)
        };
        if desired != current {
            self.store_event(now, current, desired);
        }
        Decision::new(desired, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A policy list as a scenario gives it.
    fn policies_from(value: Value) -> Vec<Policy> {
        let table = json!({ "down_policies": value });
        let map = table.as_object().unwrap();
        policies(
            &Params::new("autoscale", "hpa", map),
            "down_policies",
            vec![],
        )
        .unwrap()
    }

    const BIG: Bounds = Bounds { min: 1, max: 1000 };

    fn hpa(metric: HpaMetric, target: f64) -> Hpa {
        let (up, down) = default_rules();
        let tolerances = Tolerances { up: 0.1, down: 0.1 };
        Hpa::new(
            metric,
            target,
            tolerances,
            15.0,
            (15.0, 15.0),
            up,
            down,
            BIG,
        )
    }

    fn seen(value: f64) -> Observed {
        Observed {
            value: Some(value),
            samples: 10,
        }
    }

    // The documentation's "Algorithm details": desiredReplicas = ceil[currentReplicas ×
    // (currentMetricValue / desiredMetricValue)].

    #[test]
    fn a_metric_twice_the_target_doubles_the_fleet() {
        // "if the current metric value is 200m, and the desired value is 100m, the number of
        // replicas will be doubled, since 200.0 / 100.0 == 2.0"
        let h = hpa(HpaMetric::Utilisation, 0.1);
        assert_eq!(h.recommend(Fleet::steady(3), Some(0.2)), Some(6));
        let h = hpa(HpaMetric::QueueP95, 0.1);
        assert_eq!(h.recommend(Fleet::steady(3), Some(0.2)), Some(6));
    }

    #[test]
    fn a_metric_half_the_target_halves_the_fleet() {
        // "If the current value is instead 50m, you'll halve the number of replicas"
        let h = hpa(HpaMetric::Utilisation, 0.1);
        assert_eq!(h.recommend(Fleet::steady(8), Some(0.05)), Some(4));
    }

    #[test]
    fn a_ratio_within_the_tolerance_holds() {
        // "The control plane skips any scaling action if the ratio is sufficiently close to
        // 1.0 (within a globally-configurable tolerance, 0.1 by default)."
        let h = hpa(HpaMetric::Cpu, 0.5);
        for (value, expected) in [
            (0.54, 10), // ratio 1.08: within
            (0.46, 10), // 0.92: within
            (0.56, 12), // 1.12: ceil(11.2)
            (0.44, 9),  // 0.88: ceil(8.8)
            (0.5, 10),
        ] {
            assert_eq!(
                h.recommend(Fleet::steady(10), Some(value)),
                Some(expected),
                "{value}"
            );
        }
    }

    /// One situation of the controller's recommendation and what Kubernetes answers
    /// (replica_calculator.go's `GetResourceReplicas` with the per-direction tolerances).
    struct Case {
        situation: &'static str,
        target: f64,
        /// (up, down)
        tolerances: (f64, f64),
        /// (dynos, of which up)
        fleet: (u32, u32),
        /// The mean utilisation of the dynos up, a fraction.
        value: f64,
        kubernetes: u32,
    }

    #[test]
    fn the_boundary_cases_as_kubernetes_computes_them() {
        let cases = [
            Case {
                situation: "33% against 30%: a ratio of exactly 1 + tolerance is within",
                target: 0.3,
                tolerances: (0.1, 0.1),
                fleet: (10, 10),
                value: 0.33,
                kubernetes: 10,
            },
            Case {
                situation: "27% against 30%: exactly 1 - tolerance is within",
                target: 0.3,
                tolerances: (0.1, 0.1),
                fleet: (10, 10),
                value: 0.27,
                kubernetes: 10,
            },
            Case {
                situation: "34% against 30%: just past it, ceil(11.33)",
                target: 0.3,
                tolerances: (0.1, 0.1),
                fleet: (10, 10),
                value: 0.34,
                kubernetes: 12,
            },
            Case {
                situation: "26% against 30%: just below it, ceil(8.67)",
                target: 0.3,
                tolerances: (0.1, 0.1),
                fleet: (10, 10),
                value: 0.26,
                kubernetes: 9,
            },
            Case {
                situation: "60.99% against 30% on 3: 60% truncated, ratio 2, not ceil(6.1)",
                target: 0.3,
                tolerances: (0.1, 0.1),
                fleet: (3, 3),
                value: 0.6099,
                kubernetes: 6,
            },
            Case {
                situation: "33.9% against 30%: 33% truncated, within",
                target: 0.3,
                tolerances: (0.1, 0.1),
                fleet: (10, 10),
                value: 0.339,
                kubernetes: 10,
            },
            Case {
                situation: "up tolerance 0.2: 36% against 30% is exactly 1.2, within",
                target: 0.3,
                tolerances: (0.2, 0.1),
                fleet: (10, 10),
                value: 0.36,
                kubernetes: 10,
            },
            Case {
                situation: "up tolerance 0.5: 40% against 30% (1.33) is within",
                target: 0.3,
                tolerances: (0.5, 0.0),
                fleet: (10, 10),
                value: 0.4,
                kubernetes: 10,
            },
            Case {
                situation: "down tolerance 0: 27% against 30% on 20 scales down to 18",
                target: 0.3,
                tolerances: (0.5, 0.0),
                fleet: (20, 20),
                value: 0.27,
                kubernetes: 18,
            },
            Case {
                situation: "down tolerance 0.3: 21% against 30% (0.7) is within",
                target: 0.3,
                tolerances: (0.1, 0.3),
                fleet: (10, 10),
                value: 0.21,
                kubernetes: 10,
            },
            Case {
                situation: "2 of 4 up at 90% against 50%: 45% with the booting at 0, reversed",
                target: 0.5,
                tolerances: (0.1, 0.1),
                fleet: (4, 2),
                value: 0.9,
                kubernetes: 4,
            },
            Case {
                situation: "2 of 3 up at 50.9% against 30%: 33.93% truncated to 33, within",
                target: 0.3,
                tolerances: (0.1, 0.1),
                fleet: (3, 2),
                value: 0.509,
                kubernetes: 3,
            },
            Case {
                situation: "4 of 5 up at 75.5% against 50%: 60.4% truncated to 60, ceil(6)",
                target: 0.5,
                tolerances: (0.1, 0.1),
                fleet: (5, 4),
                value: 0.755,
                kubernetes: 6,
            },
            Case {
                situation: "4 of 5 up at 30% against 50%: scaling down leaves the booting out",
                target: 0.5,
                tolerances: (0.1, 0.1),
                fleet: (5, 4),
                value: 0.3,
                kubernetes: 3,
            },
        ];
        for case in cases {
            let mut h = hpa(HpaMetric::Cpu, case.target);
            h.tolerances = Tolerances {
                up: case.tolerances.0,
                down: case.tolerances.1,
            };
            let (size, up) = case.fleet;
            for metric in [HpaMetric::Cpu, HpaMetric::Utilisation] {
                h.metric = metric;
                assert_eq!(
                    h.recommend(Fleet { size, up }, Some(case.value)),
                    Some(case.kubernetes),
                    "{}",
                    case.situation
                );
            }
        }
    }

    #[test]
    fn tolerance_sets_both_directions_and_each_direction_its_own() {
        let read = |table: Value| {
            tolerances(&Params::new("autoscale", "hpa", table.as_object().unwrap())).unwrap()
        };
        let t = |up, down| Tolerances { up, down };
        assert_eq!(read(json!({})), t(0.1, 0.1), "Kubernetes' default");
        assert_eq!(read(json!({ "tolerance": 0.05 })), t(0.05, 0.05));
        assert_eq!(read(json!({ "up_tolerance": 0.5 })), t(0.5, 0.1));
        assert_eq!(
            read(json!({ "tolerance": 0.2, "down_tolerance": 0.0 })),
            t(0.2, 0.0)
        );
    }

    #[test]
    fn a_queue_time_is_compared_with_the_per_direction_tolerances() {
        let mut h = hpa(HpaMetric::QueueP95, 0.1);
        h.tolerances = Tolerances { up: 0.5, down: 0.0 };
        assert_eq!(h.recommend(Fleet::steady(10), Some(0.14)), Some(10));
        assert_eq!(h.recommend(Fleet::steady(10), Some(0.16)), Some(16));
        assert_eq!(h.recommend(Fleet::steady(10), Some(0.09)), Some(9));
    }

    #[test]
    fn booting_dynos_count_as_idle_when_scaling_up() {
        // 4 dynos, 2 of them booting, the 2 up at 90% against 50%: ratio 1.8, but counting
        // the booting ones at 0 it is 0.9 < 1, a reversal: hold.
        let h = hpa(HpaMetric::Cpu, 0.5);
        let fleet = Fleet { size: 4, up: 2 };
        assert_eq!(h.recommend(fleet, Some(0.9)), Some(4));
        // At 150%: 3.0 for the ready ones, 1.5 overall: ceil(1.5 × 4) = 6.
        assert_eq!(h.recommend(fleet, Some(1.5)), Some(6));
        // Scaling down, booting dynos are simply left out: 2 ready at 20% → ceil(0.4 × 2).
        assert_eq!(h.recommend(fleet, Some(0.2)), Some(1));
        // No dyno up: nothing to go by.
        assert_eq!(h.recommend(Fleet { size: 4, up: 0 }, Some(0.9)), None);
        assert_eq!(h.recommend(Fleet::steady(4), None), None);
    }

    /// Runs the HPA every 15 s from 15 s on a metric per evaluation, applying each answer.
    fn run(h: &mut Hpa, start: u32, values: &[f64]) -> Vec<u32> {
        let mut size = start;
        values
            .iter()
            .enumerate()
            .map(|(k, &v)| {
                let now = 15.0 * (k as f64 + 1.0);
                size = h.evaluate(now, Fleet::steady(size), seen(v)).desired;
                size
            })
            .collect()
    }

    #[test]
    fn the_downscale_stabilization_window_keeps_the_highest_recommendation() {
        // "When the metrics indicate that the target should be scaled down the algorithm looks
        // into previously computed desired states, and uses the highest value from the
        // specified interval ... all desired states from the past 5 minutes".
        let mut h = hpa(HpaMetric::Utilisation, 0.5);
        // 10 dynos at 100% (recommend 20) at 15 s, then at 10% (recommend 2 of 10, 4 of 20).
        let mut values = vec![1.0];
        values.extend(vec![0.1; 25]);
        let sizes = run(&mut h, 10, &values);
        assert_eq!(sizes[0], 20);
        // The 20 recommended at 15 s stands until 315 s, when it leaves the window.
        assert!(sizes[1..20].iter().all(|&s| s == 20), "{sizes:?}");
        assert_eq!(sizes[20], 4, "at 315 s");
    }

    #[test]
    fn the_first_evaluation_records_the_fleet_as_a_recommendation() {
        // recordInitialRecommendation: no scale-down in the first 5 minutes of an HPA.
        let mut h = hpa(HpaMetric::Utilisation, 0.5);
        let sizes = run(&mut h, 10, &[0.1; 21]);
        assert!(sizes[..19].iter().all(|&s| s == 10), "{sizes:?}");
        assert_eq!(sizes[19], 10, "at 300 s the first record is 285 s old");
        assert_eq!(sizes[20], 2, "at 315 s it has left the window");
    }

    #[test]
    fn an_upscale_stabilization_window_keeps_the_lowest_recommendation() {
        let mut h = hpa(HpaMetric::Utilisation, 0.5);
        h.up.stabilization = 30.0;
        h.down.stabilization = 0.0;
        // A spike for one evaluation is not followed; a rise recommended at 60 s and again at
        // 75 s is, at 75 s: the window (45 s, 75 s] then holds no lower recommendation.
        let sizes = run(&mut h, 4, &[0.5, 1.0, 0.5, 1.0, 1.0, 1.0]);
        assert_eq!(sizes, [4, 4, 4, 4, 8, 8]);
    }

    #[test]
    fn the_default_scale_up_adds_four_dynos_or_doubles_per_15_seconds() {
        // "4 pods or a 100% of the currently running replicas will be added every 15 seconds
        // till the HPA reaches its steady state."
        let mut h = hpa(HpaMetric::Utilisation, 0.01);
        h.bounds = Bounds { min: 1, max: 100 };
        let sizes = run(&mut h, 1, &[1.0; 7]);
        assert_eq!(sizes, [5, 10, 20, 40, 80, 100, 100]);
    }

    #[test]
    fn the_docs_scale_down_policies_remove_8_then_8_then_4_below_40() {
        // "if there are 80 replicas and the target has to be scaled down to 10 replicas then
        // during the first step 8 replicas will be reduced. In the next iteration when the
        // number of replicas is 72, 10% of the pods is 7.2 but the number is rounded up to 8.
        // ... When the number of replicas falls below 40 the first policy (Pods) is applied
        // and 4 replicas will be reduced at a time."
        let mut h = hpa(HpaMetric::Utilisation, 0.5);
        h.down = Rules {
            stabilization: 0.0,
            policies: policies_from(json!([
                { "type": "pods", "value": 4, "period": "60s" },
                { "type": "percent", "value": 10, "period": "60s" },
            ])),
            select: Select::Max,
        };
        // 80 dynos whose load 10 carry: each recommendation is ⌈9.5⌉ = 10.
        let mut size = 80;
        let mut steps = vec![];
        for k in 1..=60 {
            let now = 15.0 * f64::from(k);
            let want = 9.5 / f64::from(size) * 0.5;
            let next = h.evaluate(now, Fleet::steady(size), seen(want)).desired;
            if next != size {
                steps.push((now, size - next));
            }
            size = next;
        }
        let removed: Vec<u32> = steps.iter().map(|s| s.1).collect();
        assert_eq!(removed[..2], [8, 8]);
        // 80 72 64 57 51 45 40, then 4 at a time: 36 32 28 24 20 16 12, and 2 to reach 10.
        assert_eq!(removed, [8, 8, 7, 6, 6, 5, 4, 4, 4, 4, 4, 4, 4, 2]);
        // One step per 60 s period.
        assert!(
            steps.windows(2).all(|w| w[1].0 - w[0].0 == 60.0),
            "{steps:?}"
        );
        assert_eq!(size, 10);
    }

    #[test]
    fn select_min_takes_the_policy_allowing_the_least_change() {
        // "no more than 5 Pods are removed per minute ... selectPolicy to Min".
        let mut h = hpa(HpaMetric::Utilisation, 0.5);
        h.down = Rules {
            stabilization: 0.0,
            policies: policies_from(json!([
                { "type": "percent", "value": 10, "period": "60s" },
                { "type": "pods", "value": 5, "period": "60s" },
            ])),
            select: Select::Min,
        };
        let d = h.evaluate(15.0, Fleet::steady(80), seen(0.01));
        assert_eq!(d.desired, 75, "5 pods rather than 8");
        let mut h2 = h.clone();
        h2.downs.clear();
        let d = h2.evaluate(90.0, Fleet::steady(30), seen(0.01));
        assert_eq!(d.desired, 27, "10% (3) rather than 5 pods");
    }

    #[test]
    fn a_disabled_direction_never_scales() {
        // "The selectPolicy value of Disabled turns off scaling the given direction."
        let mut h = hpa(HpaMetric::Utilisation, 0.5);
        h.down.select = Select::Disabled;
        h.down.stabilization = 0.0;
        let mut up = h.clone();
        assert_eq!(run(&mut h, 10, &[0.05; 5]), [10; 5]);
        assert_eq!(run(&mut up, 10, &[1.0]), [20], "scaling up still works");
    }

    #[test]
    fn changes_within_a_period_count_against_its_start() {
        // Pods 4 per 60 s, evaluated every 15 s: 4 dynos per minute however high the metric.
        let mut h = hpa(HpaMetric::Utilisation, 0.1);
        h.up.policies = vec![Policy {
            kind: PolicyKind::Pods,
            value: 4,
            period: 60.0,
        }];
        let sizes = run(&mut h, 2, &[1.0; 9]);
        assert_eq!(sizes, [6, 6, 6, 6, 10, 10, 10, 10, 14]);
    }

    #[test]
    fn a_fleet_outside_the_bounds_goes_to_the_nearest_bound_at_once() {
        let mut h = hpa(HpaMetric::Utilisation, 0.5);
        h.bounds = Bounds { min: 3, max: 6 };
        let d = h.evaluate(15.0, Fleet::steady(10), Observed::default());
        assert_eq!((d.desired, d.why), (6, "above max"));
        let d = h.evaluate(30.0, Fleet::steady(1), Observed::default());
        assert_eq!((d.desired, d.why), (3, "below min"));
        // Within the bounds with no metric: hold.
        let d = h.evaluate(45.0, Fleet::steady(4), Observed::default());
        assert_eq!(d.desired, 4);
    }

    #[test]
    fn the_default_scale_down_may_drop_to_min_at_once_after_the_window() {
        // "allows a 100% of the currently running replicas to be removed which means the
        // scaling target can be scaled down to the minimum allowed replicas".
        let mut h = hpa(HpaMetric::Utilisation, 0.5);
        h.bounds = Bounds { min: 2, max: 100 };
        let sizes = run(&mut h, 50, &[0.0001; 21]);
        assert_eq!(sizes[20], 2);
    }
}
