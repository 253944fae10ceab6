//! Heroku's own autoscaling (Performance, Private and Shield dynos): the p95 of the response
//! times the router logged over the past hour, against the app's `target`.
//!
//! Published (devcenter.heroku.com/articles/autoscaling; the CLI's `ps:autoscale:enable`):
//! the metric is the p95 response time over the past hour; a single dyno is added or removed
//! per event; events are at least one minute apart; the monitor fires on p95 >= target
//! (`op: 'GREATER_OR_EQUAL'`), evaluated each minute (`period: 1`); the CLI's target is
//! 1000 ms unless given; "the algorithm scales down less aggressively than it scales up".
//!
//! Not published: how much less aggressively. dynosim's stand-in: a step down only once the
//! p95 has stayed below `downscale_ratio` × target for `downscale_delay`, and again each
//! `downscale_delay` while it stays there. Nor is the model by which Heroku turns the hour's
//! data into "the minimum number of web dynos required": this rule compares the hour's p95
//! with the target instead.

use super::pacing::{Direction, Pacing, Step, Streak, Waits, Why};
use super::{wait, window_and_delay, AutoscaleRule, Bounds, Decision, Fleet, Metric, Observed};
use super::{Reading, Statistic};
use crate::error::Result;
use crate::params::Params;

pub const KEYS: &[&str] = &[
    "target",
    "window",
    "delay",
    "cooldown",
    "downscale_ratio",
    "downscale_delay",
];

#[derive(Debug, Clone)]
pub struct Heroku {
    target: f64,
    interval: f64,
    window: f64,
    delay: f64,
    downscale_ratio: f64,
    downscale_delay: f64,
    bounds: Bounds,
    /// Events at least the cooldown apart, whichever their directions.
    pacing: Pacing,
    /// The p95 below `downscale_ratio` × target (restarted by each step down).
    below: Streak,
}

const UP: Why = Why {
    taken: "p95 at or above target",
    at_bound: "p95 at or above target, at max",
    waiting: "events at least a cooldown apart",
};

const DOWN: Why = Why {
    taken: "p95 below the downscale ratio for the delay",
    at_bound: "p95 below the downscale ratio, at min",
    waiting: "p95 below the downscale ratio, waiting",
};

fn pacing(cooldown: f64) -> Pacing {
    Pacing::new(Waits {
        up: cooldown,
        down: cooldown,
        across: cooldown,
    })
}

pub fn build(p: &Params, bounds: Bounds) -> Result<Box<dyn AutoscaleRule>> {
    let (window, delay) = window_and_delay(p, 3600.0, 0.0)?;
    Ok(Box::new(Heroku {
        target: p.positive_duration("target")?.unwrap_or(1.0),
        interval: super::interval(p, 60.0)?,
        window,
        delay,
        downscale_ratio: super::fraction(p, "downscale_ratio")?.unwrap_or(0.9),
        downscale_delay: wait(p, "downscale_delay", 300.0)?,
        bounds,
        pacing: pacing(wait(p, "cooldown", 60.0)?),
        below: Streak::default(),
    }))
}

impl AutoscaleRule for Heroku {
    fn interval(&self) -> f64 {
        self.interval
    }
    /// Events at least `cooldown` apart; a scale-down waits `downscale_delay` below.
    fn cooldown(&self, up: bool) -> f64 {
        let cooldown = self.pacing.waits().across;
        if up {
            cooldown
        } else {
            cooldown.max(self.downscale_delay)
        }
    }

    fn reading(&self) -> Option<Reading> {
        Some(Reading {
            metric: Metric::ResponseTime,
            statistic: Statistic::Quantile(0.95),
            window: self.window,
            delay: self.delay,
        })
    }

    fn evaluate(&mut self, now: f64, fleet: Fleet, observed: Observed) -> Decision {
        // No request in the past hour: none was slow.
        let p95 = observed.value.unwrap_or(0.0);
        if p95 >= self.target {
            self.below.end();
            let step = Step {
                direction: Direction::Up,
                dynos: 1,
                ready: true,
                why: UP,
            };
            return self.pacing.take(now, fleet, self.bounds, step);
        }
        if p95 >= self.downscale_ratio * self.target {
            self.below.end();
            return Decision::hold(fleet, "p95 within the band");
        }
        let below_for = self.below.extend(now);
        let step = Step {
            direction: Direction::Down,
            dynos: 1,
            ready: below_for >= self.downscale_delay,
            why: DOWN,
        };
        let decision = self.pacing.take(now, fleet, self.bounds, step);
        if decision.desired != fleet.size {
            self.below.restart(now);
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(interval: f64) -> Heroku {
        Heroku {
            target: 0.5,
            interval,
            window: 3600.0,
            delay: 0.0,
            downscale_ratio: 0.9,
            downscale_delay: 300.0,
            bounds: Bounds { min: 1, max: 10 },
            pacing: pacing(60.0),
            below: Streak::default(),
        }
    }

    fn seen(p95: f64) -> Observed {
        Observed {
            value: Some(p95),
            samples: 1000,
        }
    }

    /// Runs the rule on a p95 per evaluation, applying each answer; the sizes after each.
    fn run(rule: &mut Heroku, start: u32, p95s: &[f64]) -> Vec<u32> {
        let mut size = start;
        p95s.iter()
            .enumerate()
            .map(|(k, &p)| {
                let now = (k as f64 + 1.0) * rule.interval;
                size = rule.evaluate(now, Fleet::steady(size), seen(p)).desired;
                size
            })
            .collect()
    }

    #[test]
    fn one_dyno_per_minute_while_the_p95_is_at_or_above_target() {
        let mut r = rule(60.0);
        assert_eq!(run(&mut r, 2, &[0.5, 0.8, 2.0, 0.7]), [3, 4, 5, 6]);
    }

    #[test]
    fn events_at_least_a_minute_apart_when_evaluated_more_often() {
        let mut r = rule(15.0);
        // Evaluated every 15 s at 15, 30, 45...: up at 15 s, then 75 s, then 135 s.
        let sizes = run(&mut r, 2, &[0.6; 10]);
        assert_eq!(sizes, [3, 3, 3, 3, 4, 4, 4, 4, 5, 5]);
    }

    #[test]
    fn no_step_past_max() {
        let mut r = rule(60.0);
        assert_eq!(run(&mut r, 9, &[0.9, 0.9, 0.9]), [10, 10, 10]);
    }

    #[test]
    fn down_only_after_the_delay_below_the_ratio_then_each_delay() {
        let mut r = rule(60.0);
        // 0.44 s < 0.9 × 0.5 s from the first minute (60 s): down at 360 s, 660 s.
        let sizes = run(&mut r, 5, &[0.44; 11]);
        assert_eq!(sizes, [5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 3]);
        assert_eq!(run(&mut rule(60.0), 1, &[0.1; 10]), [1; 10], "at min");
    }

    #[test]
    fn the_band_between_ratio_and_target_holds_and_restarts_the_delay() {
        let mut r = rule(60.0);
        let mut p = vec![0.3; 4];
        p.push(0.47); // in the band: the downscale delay starts again
        p.extend([0.3; 6]);
        let sizes = run(&mut r, 5, &p);
        assert_eq!(sizes, [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4]);
    }

    #[test]
    fn an_hour_without_requests_reads_as_nothing_slow() {
        let mut r = rule(60.0);
        let mut size = 3;
        for k in 1..=6 {
            size = r
                .evaluate(
                    60.0 * f64::from(k),
                    Fleet::steady(size),
                    Observed::default(),
                )
                .desired;
        }
        assert_eq!(size, 2);
    }

    #[test]
    fn reads_the_hour_p95_of_response_times() {
        let reading = rule(60.0).reading().unwrap();
        assert_eq!(reading.metric, Metric::ResponseTime);
        assert_eq!(reading.statistic, Statistic::Quantile(0.95));
        assert_eq!(reading.window, 3600.0);
    }
}
