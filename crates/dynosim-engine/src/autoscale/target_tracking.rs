//! AWS target tracking (EC2 Auto Scaling; Application Auto Scaling for ECS): keeps a
//! per-dyno average (CPU, or busy threads) at `target`, out fast and in slowly.
//!
//! Published (the EC2 and Application Auto Scaling user guides): it "scales out
//! proportionally to the metric as fast as it can, but scales in more gradually", only once
//! the metric is "far enough below the target value (usually more than 10% lower)"; it rounds
//! conservatively (adding 1.5 instances adds 2, removing 1.5 removes 1); instances warming up
//! count neither in the metric nor, while scaling out, in the current capacity; a scale-in
//! cannot start while a scale-out is in progress; after a scale-in, further scale-ins wait for
//! the scale-in cooldown (300 s for ECS services) but a scale-out does not; no scale-in on
//! insufficient data.
//!
//! Not published: the alarms' datapoints. Users report 3 of 3 one-minute datapoints above the
//! target to scale out and 15 of 15 below to scale in (aws/containers-roadmap#1208), taken as
//! the defaults. The scale-out cooldown is left out: with warming dynos outside the current
//! capacity, the metric of the dynos in service asks for no more than it did until they are in
//! service, so every scale-out it lets through is "a larger scale-out", which AWS lets through
//! a cooldown anyway.

use super::{choice, fraction, wait, window_and_delay, AutoscaleRule, Bounds, Decision, Fleet};
use super::{Metric, Observed, Reading, Statistic};
use crate::error::Result;
use crate::params::Params;

pub const KEYS: &[&str] = &[
    "metric",
    "target",
    "window",
    "delay",
    "scale_out_datapoints",
    "scale_in_datapoints",
    "scale_in_ratio",
    "scale_in_cooldown",
];

#[derive(Debug, Clone)]
pub struct TargetTracking {
    metric: Metric,
    target: f64,
    interval: f64,
    window: f64,
    delay: f64,
    out_datapoints: u32,
    in_datapoints: u32,
    /// Scale in below this fraction of the target.
    in_ratio: f64,
    in_cooldown: f64,
    bounds: Bounds,
    /// Consecutive datapoints above the target, and below `in_ratio` × target.
    high: u32,
    low: u32,
    last_in: Option<f64>,
}

pub fn build(p: &Params, bounds: Bounds) -> Result<Box<dyn AutoscaleRule>> {
    let metric = match choice(p, "metric", &["cpu", "utilisation"], "cpu")? {
        "utilisation" => Metric::Utilisation,
        _ => Metric::Cpu,
    };
    let target = fraction(p, "target")?;
    let target = p.required("target", "a utilisation such as 0.6 (target)", target)?;
    let (window, delay) = window_and_delay(p, 60.0, 0.0)?;
    Ok(Box::new(TargetTracking {
        metric,
        target,
        interval: super::interval(p, 60.0)?,
        window,
        delay,
        out_datapoints: p.whole("scale_out_datapoints", 3, 1, 1440)?,
        in_datapoints: p.whole("scale_in_datapoints", 15, 1, 1440)?,
        in_ratio: fraction(p, "scale_in_ratio")?.unwrap_or(0.9),
        in_cooldown: wait(p, "scale_in_cooldown", 300.0)?,
        bounds,
        high: 0,
        low: 0,
        last_in: None,
    }))
}

impl AutoscaleRule for TargetTracking {
    fn interval(&self) -> f64 {
        self.interval
    }
    /// The scale-in cooldown after a scale-in; after a scale-out, the scale-in alarm's
    /// datapoints (it cannot scale in sooner).
    fn cooldown(&self, up: bool) -> f64 {
        if up {
            f64::from(self.in_datapoints) * self.interval
        } else {
            self.in_cooldown
        }
    }

    fn reading(&self) -> Option<Reading> {
        Some(Reading {
            metric: self.metric,
            statistic: Statistic::Mean,
            window: self.window,
            delay: self.delay,
        })
    }

    fn evaluate(&mut self, now: f64, fleet: Fleet, observed: Observed) -> Decision {
        let Some(m) = observed.value.filter(|_| fleet.up > 0) else {
            self.high = 0;
            self.low = 0;
            return Decision::hold(fleet, "insufficient data");
        };
        self.high = if m > self.target { self.high + 1 } else { 0 };
        self.low = if m < self.in_ratio * self.target {
            self.low + 1
        } else {
            0
        };
        if self.high >= self.out_datapoints {
            // The capacity in service, warming dynos left out; rounded up.
            let want = (f64::from(fleet.up) * m / self.target).ceil();
            let want = want.min(f64::from(self.bounds.max)) as u32;
            if want > fleet.size {
                return Decision::new(want, "above target: scale out");
            }
            return Decision::hold(fleet, "above target, capacity on its way");
        }
        if self.low < self.in_datapoints {
            return Decision::hold(fleet, "within target");
        }
        if fleet.booting() > 0 {
            return Decision::hold(fleet, "below target, a scale-out in progress");
        }
        if self.last_in.is_some_and(|t| now - t < self.in_cooldown) {
            return Decision::hold(fleet, "below target, scale-in cooldown");
        }
        // Remove conservatively: 1.5 dynos too many removes 1.
        let size = f64::from(fleet.size);
        let remove = (size - size * m / self.target).floor() as u32;
        let desired = fleet.size.saturating_sub(remove).max(self.bounds.min);
        if desired == fleet.size {
            return Decision::hold(fleet, "below target, nothing to remove");
        }
        self.last_in = Some(now);
        Decision::new(desired, "below target: scale in")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> TargetTracking {
        TargetTracking {
            metric: Metric::Cpu,
            target: 0.6,
            interval: 60.0,
            window: 60.0,
            delay: 0.0,
            out_datapoints: 3,
            in_datapoints: 15,
            in_ratio: 0.9,
            in_cooldown: 300.0,
            bounds: Bounds { min: 1, max: 50 },
            high: 0,
            low: 0,
            last_in: None,
        }
    }

    fn seen(m: f64) -> Observed {
        Observed {
            value: Some(m),
            samples: 10,
        }
    }

    #[test]
    fn scales_out_in_proportion_after_three_datapoints_above() {
        let mut r = rule();
        let f = Fleet::steady(4);
        assert_eq!(r.evaluate(60.0, f, seen(0.9)).desired, 4);
        assert_eq!(r.evaluate(120.0, f, seen(0.9)).desired, 4);
        // 4 × 0.9 / 0.6 = 6.
        assert_eq!(r.evaluate(180.0, f, seen(0.9)).desired, 6);
        // While the 2 boot the 4 in service still read 0.9: no more.
        let booting = Fleet { size: 6, up: 4 };
        assert_eq!(r.evaluate(240.0, booting, seen(0.9)).desired, 6);
        // Rounded up: 4 × 0.75 / 0.6 = 5.
        let mut r = rule();
        r.out_datapoints = 1;
        assert_eq!(r.evaluate(60.0, f, seen(0.75)).desired, 5);
    }

    #[test]
    fn a_datapoint_at_or_below_target_breaks_the_streak() {
        let mut r = rule();
        let f = Fleet::steady(4);
        let sizes: Vec<u32> = [0.9, 0.9, 0.6, 0.9, 0.9, 0.9]
            .iter()
            .enumerate()
            .map(|(k, &m)| r.evaluate(60.0 * (k as f64 + 1.0), f, seen(m)).desired)
            .collect();
        assert_eq!(sizes, [4, 4, 4, 4, 4, 6]);
    }

    #[test]
    fn scales_in_after_fifteen_datapoints_more_than_ten_percent_below() {
        let mut r = rule();
        let f = Fleet::steady(10);
        for k in 1..15 {
            assert_eq!(r.evaluate(60.0 * f64::from(k), f, seen(0.3)).desired, 10);
        }
        // 10 × 0.3 / 0.6 = 5.
        assert_eq!(r.evaluate(900.0, f, seen(0.3)).desired, 5);
        // 0.55 is within 10% of 0.6: never.
        let mut r = rule();
        for k in 1..40 {
            assert_eq!(r.evaluate(60.0 * f64::from(k), f, seen(0.55)).desired, 10);
        }
    }

    #[test]
    fn removing_one_and_a_half_removes_one() {
        let mut r = rule();
        r.in_datapoints = 1;
        // 3 dynos at 0.3 against 0.6: 1.5 would do, 1.5 too many: 1 removed.
        assert_eq!(r.evaluate(60.0, Fleet::steady(3), seen(0.3)).desired, 2);
    }

    #[test]
    fn the_scale_in_cooldown_holds_scale_ins_but_not_scale_outs() {
        let mut r = rule();
        r.in_datapoints = 1;
        r.out_datapoints = 1;
        assert_eq!(r.evaluate(60.0, Fleet::steady(10), seen(0.3)).desired, 5);
        assert_eq!(r.evaluate(120.0, Fleet::steady(5), seen(0.2)).desired, 5);
        assert_eq!(r.evaluate(180.0, Fleet::steady(5), seen(1.2)).desired, 10);
        assert_eq!(r.evaluate(360.0, Fleet::steady(10), seen(0.3)).desired, 5);
    }

    #[test]
    fn no_scale_in_while_a_scale_out_boots_nor_without_data() {
        let mut r = rule();
        r.in_datapoints = 1;
        let booting = Fleet { size: 10, up: 8 };
        assert_eq!(r.evaluate(60.0, booting, seen(0.1)).desired, 10);
        assert_eq!(
            r.evaluate(120.0, Fleet::steady(10), Observed::default())
                .desired,
            10
        );
        assert_eq!(r.low, 0, "insufficient data ends a streak");
    }
}
