//! HireFire's web dyno managers on queue time or response time (`Web::Logplex::QueueTime`,
//! `Web::Logplex::ResponseTime`): at each checkup, the average or a percentile of the times
//! since the last one, against a maximum (scale up) and a minimum (scale down).
//!
//! Published (help.hirefire.io, articles 7 and 13; terraform-provider-hirefire's manager.md):
//! a checkup every 60 s by default; metrics "accurate to the second" at the checkup; the
//! parameters: aggregation (average or percentile), the thresholds, the dynos per upscale and
//! per downscale (quantity), the threshold breaches to wait before scaling (sensitivity), and
//! the minutes to wait between scalings of one direction (timeout; 0 turns it off: "won't
//! scale up more than once every 2 minutes" for 2).
//!
//! Not published: the defaults of quantity, sensitivity and timeout, and how breaches are
//! counted. dynosim takes its defaults from the example configuration in the Terraform
//! provider's docs (percentile 99, 100 ms and 250 ms, upscale by 5 and downscale by 1, 1
//! breach up and 2 down, timeouts of 1 minute), and counts consecutive breaches: a checkup
//! that breaches the other way or neither resets the count.

use super::pacing::{Direction, Pacing, Step, Streak, Waits, Why};
use super::Statistic;
use super::{choice, wait, AutoscaleRule, Bounds, Decision, Fleet, Metric, Observed, Reading};
use crate::error::Result;
use crate::params::Params;

pub const KEYS: &[&str] = &[
    "metric",
    "aggregation",
    "percentile",
    "upscale_above",
    "downscale_below",
    "upscale_step",
    "downscale_step",
    "upscale_sensitivity",
    "downscale_sensitivity",
    "upscale_timeout",
    "downscale_timeout",
    "window",
    "delay",
];

#[derive(Debug, Clone)]
pub struct HireFire {
    metric: Metric,
    statistic: Statistic,
    upscale_above: f64,
    downscale_below: f64,
    up_step: u32,
    down_step: u32,
    up_sensitivity: u32,
    down_sensitivity: u32,
    interval: f64,
    window: f64,
    delay: f64,
    bounds: Bounds,
    /// Scalings of one direction at least its timeout apart.
    pacing: Pacing,
    /// Consecutive checkups above the maximum, and below the minimum (used up by a scaling).
    above: Streak,
    below: Streak,
}

const UP: Why = Why {
    taken: "above the maximum",
    at_bound: "above the maximum, at max",
    waiting: "above the maximum, upscale timeout",
};

const DOWN: Why = Why {
    taken: "below the minimum",
    at_bound: "below the minimum, at min",
    waiting: "below the minimum, downscale timeout",
};

fn pacing(up_timeout: f64, down_timeout: f64) -> Pacing {
    Pacing::new(Waits {
        up: up_timeout,
        down: down_timeout,
        across: 0.0,
    })
}

pub fn build(p: &Params, bounds: Bounds) -> Result<Box<dyn AutoscaleRule>> {
    let metric = match choice(p, "metric", &["queue", "response"], "queue")? {
        "queue" => Metric::QueueTime,
        _ => Metric::ResponseTime,
    };
    let statistic = match choice(p, "aggregation", &["percentile", "average"], "percentile")? {
        "average" => {
            if p.has("percentile") {
                return Err(p.error(
                    "percentile",
                    "only with aggregation = \"percentile\"; the aggregation is \"average\"",
                ));
            }
            Statistic::Mean
        }
        _ => {
            let percentile = p.get::<f64>("percentile")?.unwrap_or(99.0);
            if !(percentile > 0.0 && percentile < 100.0) {
                return Err(p.error(
                    "percentile",
                    format!("must be above 0 and below 100 (99 for a p99), got {percentile}"),
                ));
            }
            Statistic::Quantile(percentile / 100.0)
        }
    };
    // The example's 250 ms and 100 ms (HireFire publishes no default), or one given and the
    // other at that ratio.
    let (upscale_above, downscale_below) = super::threshold_range(p, (0.25, 0.1))?;
    let max_dynos = i64::from(super::MAX_DYNOS);
    let interval = super::interval(p, 60.0)?;
    Ok(Box::new(HireFire {
        metric,
        statistic,
        upscale_above,
        downscale_below,
        up_step: p.whole("upscale_step", 5, 1, max_dynos)?,
        down_step: p.whole("downscale_step", 1, 1, max_dynos)?,
        up_sensitivity: p.whole("upscale_sensitivity", 1, 1, 1000)?,
        down_sensitivity: p.whole("downscale_sensitivity", 2, 1, 1000)?,
        interval,
        // The times since the last checkup.
        window: p.positive_duration("window")?.unwrap_or(interval),
        delay: wait(p, "delay", 0.0)?,
        bounds,
        pacing: pacing(
            wait(p, "upscale_timeout", 60.0)?,
            wait(p, "downscale_timeout", 60.0)?,
        ),
        above: Streak::default(),
        below: Streak::default(),
    }))
}

impl AutoscaleRule for HireFire {
    fn interval(&self) -> f64 {
        self.interval
    }
    /// The upscale timeout after an upscale; the downscale timeout after a downscale.
    fn cooldown(&self, up: bool) -> f64 {
        let waits = self.pacing.waits();
        if up {
            waits.up
        } else {
            waits.down
        }
    }

    fn reading(&self) -> Option<Reading> {
        Some(Reading {
            metric: self.metric,
            statistic: self.statistic,
            window: self.window,
            delay: self.delay,
        })
    }

    fn evaluate(&mut self, now: f64, fleet: Fleet, observed: Observed) -> Decision {
        // No request since the last checkup: none waited or was slow.
        let value = observed.value.unwrap_or(0.0);
        let step = |direction, dynos, why| Step {
            direction,
            dynos,
            ready: true,
            why,
        };
        let (streak, sensitivity, step) = if value > self.upscale_above {
            self.below.end();
            let up = step(Direction::Up, self.up_step, UP);
            (&mut self.above, self.up_sensitivity, up)
        } else if value < self.downscale_below {
            self.above.end();
            let down = step(Direction::Down, self.down_step, DOWN);
            (&mut self.below, self.down_sensitivity, down)
        } else {
            self.above.end();
            self.below.end();
            return Decision::hold(fleet, "within the thresholds");
        };
        streak.extend(now);
        if streak.count() < sensitivity {
            let why = match step.direction {
                Direction::Up => "above the maximum, sensitivity",
                Direction::Down => "below the minimum, sensitivity",
            };
            return Decision::hold(fleet, why);
        }
        let decision = self.pacing.take(now, fleet, self.bounds, step);
        if decision.desired != fleet.size {
            streak.end();
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> HireFire {
        HireFire {
            metric: Metric::QueueTime,
            statistic: Statistic::Quantile(0.99),
            upscale_above: 0.25,
            downscale_below: 0.1,
            up_step: 5,
            down_step: 1,
            up_sensitivity: 1,
            down_sensitivity: 2,
            interval: 60.0,
            window: 60.0,
            delay: 0.0,
            bounds: Bounds { min: 1, max: 20 },
            pacing: pacing(60.0, 60.0),
            above: Streak::default(),
            below: Streak::default(),
        }
    }

    fn run(rule: &mut HireFire, start: u32, values: &[f64]) -> Vec<u32> {
        let mut size = start;
        values
            .iter()
            .enumerate()
            .map(|(k, &v)| {
                let now = (k as f64 + 1.0) * rule.interval;
                let seen = Observed {
                    value: Some(v),
                    samples: 100,
                };
                size = rule.evaluate(now, Fleet::steady(size), seen).desired;
                size
            })
            .collect()
    }

    #[test]
    fn the_example_configuration() {
        // One breach up is enough, by 5 dynos; two down in a row, by 1.
        assert_eq!(
            run(&mut rule(), 2, &[0.3, 0.2, 0.05, 0.05, 0.05, 0.05]),
            [7, 7, 7, 6, 6, 5]
        );
    }

    #[test]
    fn breaches_must_be_consecutive() {
        let mut r = rule();
        // Down, in range, down, up: never two down in a row.
        assert_eq!(
            run(&mut r, 5, &[0.05, 0.2, 0.05, 0.3, 0.05]),
            [5, 5, 5, 10, 10]
        );
    }

    #[test]
    fn a_timeout_spaces_scalings_of_one_direction() {
        let mut r = rule();
        r.interval = 15.0;
        // Checkups every 15 s: up at 15 s, then not before 75 s.
        assert_eq!(run(&mut r, 1, &[0.5; 6]), [6, 6, 6, 6, 11, 11]);
        let mut r = rule();
        r.pacing = pacing(0.0, 60.0);
        r.interval = 15.0;
        assert_eq!(
            run(&mut r, 1, &[0.5; 4]),
            [6, 11, 16, 20],
            "a timeout of 0 is off"
        );
    }

    #[test]
    fn steps_stop_at_the_bounds() {
        let mut r = rule();
        r.down_step = 3;
        r.down_sensitivity = 1;
        r.pacing = pacing(60.0, 0.0);
        assert_eq!(run(&mut r, 5, &[0.0; 3]), [2, 1, 1]);
    }
}
