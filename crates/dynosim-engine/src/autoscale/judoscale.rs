//! Judoscale (formerly Rails Autoscale): the p95 of request queue times, aggregated every
//! 10 s, kept within a range.
//!
//! Published (judoscale.com/docs/tuning-your-application, /guides/autoscaling-behavior,
//! /docs/autoscaling-responsiveness; railsautoscale.com/docs/basic-settings): the adapters
//! report every 10 s and the algorithm runs every 10 s; queue times are p95s; above the range
//! the app is upscaled at once, by "upscale jumps" dynos (1 by default), and not again within
//! the upscale frequency (formerly a fixed "not scaled up in the last three minutes"), which
//! does not hold back the first upscale; below the range, a downscale comes only after all
//! recent metrics have stayed below for the downscale delay (10 minutes by default), then one
//! dyno each delay while they stay below; nothing happens at the edge of the dyno range.
//!
//! Not published: the default thresholds (dynosim takes Dynoscale's published 100 ms and
//! 50 ms), the upscale frequency's current default (3 minutes, the older fixed rule), and
//! whether a metric inside the range restarts the downscale delay (it does here).

use super::pacing::{Direction, Pacing, Step, Streak, Waits, Why};
use super::{wait, window_and_delay, AutoscaleRule, Bounds, Decision, Fleet, Metric, Observed};
use super::{Reading, Statistic};
use crate::error::Result;
use crate::params::Params;

pub const KEYS: &[&str] = &[
    "upscale_above",
    "downscale_below",
    "window",
    "delay",
    "step",
    "cooldown",
    "downscale_delay",
];

#[derive(Debug, Clone)]
pub struct Judoscale {
    upscale_above: f64,
    downscale_below: f64,
    interval: f64,
    window: f64,
    delay: f64,
    /// Dynos added per upscale.
    step: u32,
    /// Time below the range before the first downscale, and between two.
    downscale_delay: f64,
    bounds: Bounds,
    /// Upscales at least the cooldown (the upscale frequency) apart, downscales
    /// `downscale_delay` apart.
    pacing: Pacing,
    /// The p95 below the range.
    below: Streak,
}

const UP: Why = Why {
    taken: "above the range",
    at_bound: "above the range, at max",
    waiting: "above the range, upscale cooldown",
};

const DOWN: Why = Why {
    taken: "below the range for the downscale delay",
    at_bound: "below the range, at min",
    waiting: "below the range, downscale delay",
};

fn pacing(cooldown: f64, downscale_delay: f64) -> Pacing {
    Pacing::new(Waits {
        up: cooldown,
        down: downscale_delay,
        across: 0.0,
    })
}

pub fn build(p: &Params, bounds: Bounds) -> Result<Box<dyn AutoscaleRule>> {
    // Dynoscale's 100 ms and 50 ms (Judoscale publishes no default), or one given and the
    // other at that ratio.
    let (upscale_above, downscale_below) = super::threshold_range(p, (0.1, 0.05))?;
    let (window, delay) = window_and_delay(p, 10.0, 10.0)?;
    let downscale_delay = wait(p, "downscale_delay", 600.0)?;
    Ok(Box::new(Judoscale {
        upscale_above,
        downscale_below,
        interval: super::interval(p, 10.0)?,
        window,
        delay,
        step: p.whole("step", 1, 1, i64::from(super::MAX_DYNOS))?,
        downscale_delay,
        bounds,
        pacing: pacing(wait(p, "cooldown", 180.0)?, downscale_delay),
        below: Streak::default(),
    }))
}

impl AutoscaleRule for Judoscale {
    fn interval(&self) -> f64 {
        self.interval
    }
    /// The upscale frequency after an upscale; the downscale delay after a downscale.
    fn cooldown(&self, up: bool) -> f64 {
        if up {
            self.pacing.waits().up
        } else {
            self.downscale_delay
        }
    }

    fn reading(&self) -> Option<Reading> {
        Some(Reading {
            metric: Metric::QueueTime,
            statistic: Statistic::Quantile(0.95),
            window: self.window,
            delay: self.delay,
        })
    }

    fn evaluate(&mut self, now: f64, fleet: Fleet, observed: Observed) -> Decision {
        // No request started in the window: none queued.
        let p95 = observed.value.unwrap_or(0.0);
        if p95 > self.upscale_above {
            self.below.end();
            let step = Step {
                direction: Direction::Up,
                dynos: self.step,
                ready: true,
                why: UP,
            };
            return self.pacing.take(now, fleet, self.bounds, step);
        }
        if p95 >= self.downscale_below {
            self.below.end();
            return Decision::hold(fleet, "within the range");
        }
        let below_for = self.below.extend(now);
        let step = Step {
            direction: Direction::Down,
            dynos: 1,
            ready: below_for >= self.downscale_delay,
            why: DOWN,
        };
        self.pacing.take(now, fleet, self.bounds, step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(min: u32, max: u32) -> Judoscale {
        Judoscale {
            upscale_above: 0.1,
            downscale_below: 0.05,
            interval: 10.0,
            window: 10.0,
            delay: 10.0,
            step: 1,
            downscale_delay: 600.0,
            bounds: Bounds { min, max },
            pacing: pacing(180.0, 600.0),
            below: Streak::default(),
        }
    }

    /// The sizes after each evaluation (every 10 s from 10 s), each answer applied.
    fn run(rule: &mut Judoscale, start: u32, p95s: &[f64]) -> Vec<u32> {
        let mut size = start;
        p95s.iter()
            .enumerate()
            .map(|(k, &p)| {
                let now = (k as f64 + 1.0) * rule.interval;
                let seen = Observed {
                    value: Some(p),
                    samples: 100,
                };
                size = rule.evaluate(now, Fleet::steady(size), seen).desired;
                size
            })
            .collect()
    }

    #[test]
    fn upscales_at_once_then_waits_the_cooldown() {
        let mut r = rule(1, 10);
        // Above the range from the first aggregate: up at 10 s (the first upscale is not held
        // back), then not before 190 s.
        let sizes = run(&mut r, 2, &[0.3; 20]);
        assert_eq!(sizes[0], 3);
        assert!(sizes[1..18].iter().all(|&s| s == 3), "{sizes:?}");
        assert_eq!(sizes[18], 4, "at 190 s");
        assert_eq!(sizes[19], 4);
    }

    #[test]
    fn upscale_jumps_are_clamped_to_the_range() {
        // The docs' example: range 2-10, jumps of 2, at 7 dynos: 9, then 10.
        let mut r = rule(2, 10);
        r.step = 2;
        r.pacing = pacing(0.0, 600.0);
        assert_eq!(run(&mut r, 7, &[0.2, 0.2, 0.2]), [9, 10, 10]);
    }

    #[test]
    fn downscales_after_the_delay_below_then_each_delay() {
        let mut r = rule(1, 10);
        // Below from 10 s: down at 610 s (index 60), then at 1210 s (index 120).
        let sizes = run(&mut r, 5, &[0.01; 121]);
        assert_eq!(sizes[59], 5);
        assert_eq!(sizes[60], 4);
        assert_eq!(sizes[119], 4);
        assert_eq!(sizes[120], 3);
    }

    #[test]
    fn a_metric_in_the_range_or_above_restarts_the_downscale_delay() {
        let mut r = rule(1, 10);
        let mut p = vec![0.01; 50];
        p.push(0.07); // within the range at 510 s
        p.extend(vec![0.01; 61]); // below again from 520 s: down at 1120 s (index 111)
        let sizes = run(&mut r, 5, &p);
        assert_eq!(sizes[110], 5);
        assert_eq!(sizes[111], 4);
        let mut r = rule(1, 10);
        let mut p = vec![0.01; 50];
        p.push(0.5); // above at 510 s: up, and the delay starts again
        p.extend(vec![0.01; 61]);
        let sizes = run(&mut r, 5, &p);
        assert_eq!(sizes[50], 6);
        assert_eq!(sizes[110], 6);
        assert_eq!(sizes[111], 5);
    }

    #[test]
    fn nothing_at_the_edges_of_the_range() {
        let mut r = rule(2, 4);
        assert_eq!(run(&mut r, 4, &[0.5; 3]), [4, 4, 4]);
        // At max the cooldown did not start: the first upscale after coming down is at once.
        assert_eq!(r.pacing.last(Direction::Up), None);
        let mut r = rule(2, 4);
        assert_eq!(run(&mut r, 2, &[0.0; 100]), [2; 100]);
    }

    #[test]
    fn an_upscale_during_the_downscale_wait_is_not_delayed() {
        let mut r = rule(1, 10);
        let mut p = vec![0.01; 30];
        p.push(0.2);
        let sizes = run(&mut r, 3, &p);
        assert_eq!(sizes[30], 4);
    }
}
