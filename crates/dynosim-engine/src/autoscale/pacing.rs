//! The one place where a stepping rule's wish becomes a decision: the rule says which way its
//! reading calls for a step, by how many dynos and why ([`Step`]); [`Pacing`] refuses it at
//! the bound it would cross or while a wait after an earlier event runs, and otherwise takes
//! it within `[min, max]` and remembers when. Heroku's, Judoscale's and HireFire's rules keep
//! their reading and their streaks ([`Streak`]); the waits between events are all here.

use super::{Bounds, Decision, Fleet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
}

/// What a decision on a step says: the step taken, refused at `max` (or `min`), or held back
/// by a wait (a cooldown, a delay, a timeout, or the rule's own condition not met yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Why {
    pub taken: &'static str,
    pub at_bound: &'static str,
    pub waiting: &'static str,
}

/// A step a rule's reading calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub direction: Direction,
    pub dynos: u32,
    /// False while the rule's own condition for it (a streak's length) is not met: held with
    /// `why.waiting`, as by a wait.
    pub ready: bool,
    pub why: Why,
}

/// Least seconds from a scale event to the next: in the same direction (`up`, `down`), and
/// the other way (`across`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waits {
    pub up: f64,
    pub down: f64,
    pub across: f64,
}

/// The waits between scale events, and when the last of each direction happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Pacing {
    waits: Waits,
    last_up: Option<f64>,
    last_down: Option<f64>,
}

impl Pacing {
    pub fn new(waits: Waits) -> Pacing {
        Pacing {
            waits,
            last_up: None,
            last_down: None,
        }
    }

    pub fn waits(&self) -> Waits {
        self.waits
    }

    /// When the last event in `direction` happened.
    #[cfg(test)]
    pub fn last(&self, direction: Direction) -> Option<f64> {
        match direction {
            Direction::Up => self.last_up,
            Direction::Down => self.last_down,
        }
    }

    /// True while a wait after an earlier event holds back an event in `direction` at `now`.
    pub fn waiting(&self, now: f64, direction: Direction) -> bool {
        let within = |last: Option<f64>, wait: f64| last.is_some_and(|t| now - t < wait);
        let (same, wait, other) = match direction {
            Direction::Up => (self.last_up, self.waits.up, self.last_down),
            Direction::Down => (self.last_down, self.waits.down, self.last_up),
        };
        within(same, wait) || within(other, self.waits.across)
    }

    /// The decision on `step` at `now`: held at the bound it would cross, held while it is
    /// not ready or a wait runs, else taken (the fleet's size moved by `step.dynos`, within
    /// `bounds`) and remembered.
    pub fn take(&mut self, now: f64, fleet: Fleet, bounds: Bounds, step: Step) -> Decision {
        let at_bound = match step.direction {
            Direction::Up => fleet.size >= bounds.max,
            Direction::Down => fleet.size <= bounds.min,
        };
        if at_bound {
            return Decision::hold(fleet, step.why.at_bound);
        }
        if !step.ready || self.waiting(now, step.direction) {
            return Decision::hold(fleet, step.why.waiting);
        }
        let desired = match step.direction {
            Direction::Up => {
                self.last_up = Some(now);
                fleet.size.saturating_add(step.dynos).min(bounds.max)
            }
            Direction::Down => {
                self.last_down = Some(now);
                fleet.size.saturating_sub(step.dynos).max(bounds.min)
            }
        };
        Decision::new(desired, step.why.taken)
    }
}

/// A condition that has held at consecutive evaluations: since when, and at how many.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Streak {
    since: Option<f64>,
    count: u32,
}

impl Streak {
    /// The condition holds at `now`; the seconds it has held for.
    pub fn extend(&mut self, now: f64) -> f64 {
        self.count += 1;
        now - *self.since.get_or_insert(now)
    }

    /// The condition does not hold (or its streak is used up).
    pub fn end(&mut self) {
        *self = Streak::default();
    }

    /// The streak counts from `now` again (for a rule that steps once per streak's length).
    pub fn restart(&mut self, now: f64) {
        self.since = Some(now);
        self.count = 1;
    }

    /// Evaluations at which the condition held in a row.
    pub fn count(&self) -> u32 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHY: Why = Why {
        taken: "taken",
        at_bound: "at bound",
        waiting: "waiting",
    };

    fn step(direction: Direction, dynos: u32) -> Step {
        Step {
            direction,
            dynos,
            ready: true,
            why: WHY,
        }
    }

    const BOUNDS: Bounds = Bounds { min: 2, max: 10 };

    #[test]
    fn a_step_is_taken_within_the_bounds_and_refused_at_them() {
        let mut p = Pacing::new(Waits {
            up: 0.0,
            down: 0.0,
            across: 0.0,
        });
        for (size, direction, dynos, want) in [
            (4, Direction::Up, 3, (7, "taken")),
            (8, Direction::Up, 5, (10, "taken")),
            (10, Direction::Up, 1, (10, "at bound")),
            (5, Direction::Down, 2, (3, "taken")),
            (3, Direction::Down, 4, (2, "taken")),
            (2, Direction::Down, 1, (2, "at bound")),
        ] {
            let d = p.take(60.0, Fleet::steady(size), BOUNDS, step(direction, dynos));
            assert_eq!((d.desired, d.why), want, "{size} {direction:?} {dynos}");
        }
    }

    #[test]
    fn each_wait_holds_its_direction_for_its_length() {
        // Ups 60 s apart, downs 300 s apart, 30 s between an event and one the other way.
        let waits = Waits {
            up: 60.0,
            down: 300.0,
            across: 30.0,
        };
        let mut p = Pacing::new(waits);
        let fleet = Fleet::steady(5);
        let up = step(Direction::Up, 1);
        let down = step(Direction::Down, 1);
        assert_eq!(
            p.take(0.0, fleet, BOUNDS, up).why,
            "taken",
            "the first waits not"
        );
        for (now, s, want) in [
            (29.0, down, "waiting"),
            (30.0, down, "taken"),
            (59.0, up, "waiting"), // 59 s after the up, 29 s after the down
            (60.0, up, "taken"),
            (329.0, down, "waiting"),
            (330.0, down, "taken"),
        ] {
            assert_eq!(p.take(now, fleet, BOUNDS, s).why, want, "{now} {s:?}");
        }
        assert_eq!(p.last(Direction::Up), Some(60.0));
        assert_eq!(p.last(Direction::Down), Some(330.0));
    }

    #[test]
    fn an_unready_step_or_one_at_the_bound_starts_no_wait() {
        let mut p = Pacing::new(Waits {
            up: 60.0,
            down: 60.0,
            across: 60.0,
        });
        let mut s = step(Direction::Up, 1);
        s.ready = false;
        assert_eq!(p.take(0.0, Fleet::steady(5), BOUNDS, s).why, "waiting");
        assert_eq!(
            p.take(0.0, Fleet::steady(10), BOUNDS, step(Direction::Up, 1))
                .why,
            "at bound"
        );
        assert_eq!(p.last(Direction::Up), None);
        assert_eq!(
            p.take(1.0, Fleet::steady(5), BOUNDS, step(Direction::Up, 1))
                .why,
            "taken"
        );
    }

    #[test]
    fn a_streak_counts_evaluations_and_seconds_until_it_ends() {
        let mut s = Streak::default();
        assert_eq!(s.extend(10.0), 0.0);
        assert_eq!(s.extend(20.0), 10.0);
        assert_eq!(s.count(), 2);
        s.restart(30.0);
        assert_eq!((s.extend(40.0), s.count()), (10.0, 2));
        s.end();
        assert_eq!((s.count(), s.extend(50.0)), (0, 0.0));
    }
}
