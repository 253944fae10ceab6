//! A fleet sized by the time of day, read from a table: `schedule = [["0s", 2], ["8h", 10],
//! ["20h", 4]]` runs 2 dynos from midnight, 10 from 8:00 and 4 from 20:00, every day (the
//! run starts at midnight). Before the table's first time the day's last size holds, carried
//! over from the day before. Judoscale's schedules, HireFire's time ranges and AWS's scheduled
//! actions set sizes this way; it reads no metric.

use super::{AutoscaleRule, Bounds, Decision, Fleet, Observed, Reading};
use crate::error::{Error, Result};
use crate::params::{strip_serde_position, Params};
use crate::units::Duration;
use serde_json::Value;

pub const KEYS: &[&str] = &["schedule"];

const DAY: f64 = 86_400.0;

#[derive(Debug, Clone)]
pub struct Schedule {
    /// Times of day, increasing, in [0, 24 h).
    times: Vec<f64>,
    sizes: Vec<u32>,
    interval: f64,
}

pub fn build(p: &Params, bounds: Bounds) -> Result<Box<dyn AutoscaleRule>> {
    let path = p.path("schedule");
    let example = "expected [[time of day, dynos], ...] such as [[\"0s\", 2], [\"8h\", 10]]";
    let items = match p.get::<Value>("schedule")? {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => return Err(Error::config(path, format!("empty; {example}"))),
        Some(other) => return Err(Error::config(path, format!("{example}, got {other}"))),
        None => return Err(Error::config(path, format!("missing; {example}"))),
    };
    let mut times = Vec::with_capacity(items.len());
    let mut sizes = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let pair = match item {
            Value::Array(pair) if pair.len() == 2 => pair,
            other => {
                return Err(Error::config(
                    format!("{path}[{i}]"),
                    format!(
                        "expected a [time of day, dynos] pair such as [\"8h\", 10], got {other}"
                    ),
                ))
            }
        };
        let at = format!("{path}[{i}][0]");
        let time = serde_json::from_value::<Duration>(pair[0].clone())
            .map_err(|e| Error::config(&at, strip_serde_position(&e.to_string())))?
            .0;
        if !(0.0..DAY).contains(&time) {
            return Err(Error::config(
                at,
                format!("expected a time of day from \"0s\" to before \"24h\", got {time} s"),
            ));
        }
        if let Some(&before) = times.last() {
            if time <= before {
                return Err(Error::config(
                    at,
                    format!(
                        "times of day must increase: {time} s comes after {before} s (the \
                         table is in the order of the day)"
                    ),
                ));
            }
        }
        let at = format!("{path}[{i}][1]");
        let size = pair[1].as_i64().ok_or_else(|| {
            Error::config(
                &at,
                format!("expected a whole number of dynos, got {}", pair[1]),
            )
        })?;
        let size = crate::params::whole(size, &at, i64::from(bounds.min), i64::from(bounds.max))
            .map_err(|e| match e {
                Error::Config { path, message } => Error::config(
                    path,
                    format!("{message} (within the autoscaler's min and max)"),
                ),
                other => other,
            })?;
        times.push(time);
        sizes.push(size);
    }
    Ok(Box::new(Schedule {
        times,
        sizes,
        interval: super::interval(p, 60.0)?,
    }))
}

impl Schedule {
    /// The size the table gives at `now` (seconds since the run's start, at midnight).
    pub fn size_at(&self, now: f64) -> u32 {
        let time = now.rem_euclid(DAY);
        let k = self.times.partition_point(|&t| t <= time);
        let k = if k == 0 { self.sizes.len() } else { k };
        self.sizes[k - 1]
    }
}

impl AutoscaleRule for Schedule {
    fn interval(&self) -> f64 {
        self.interval
    }

    fn reading(&self) -> Option<Reading> {
        None
    }

    fn evaluate(&mut self, now: f64, _fleet: Fleet, _observed: Observed) -> Decision {
        Decision::new(self.size_at(now), "schedule")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(times: &[f64], sizes: &[u32]) -> Schedule {
        Schedule {
            times: times.to_vec(),
            sizes: sizes.to_vec(),
            interval: 60.0,
        }
    }

    #[test]
    fn the_size_in_force_at_each_time_of_day() {
        let s = table(&[0.0, 8.0 * 3600.0, 20.0 * 3600.0], &[2, 10, 4]);
        for (hour, size) in [
            (0.0, 2),
            (7.99, 2),
            (8.0, 10),
            (19.5, 10),
            (20.0, 4),
            (23.99, 4),
            (24.0, 2),
            (24.0 + 8.0, 10),
            (7.0 * 24.0 + 21.0, 4),
        ] {
            assert_eq!(s.size_at(hour * 3600.0), size, "at {hour} h");
        }
    }

    #[test]
    fn before_the_first_time_the_day_before_carries_over() {
        let s = table(&[6.0 * 3600.0, 18.0 * 3600.0], &[8, 3]);
        assert_eq!(s.size_at(0.0), 3);
        assert_eq!(s.size_at(5.9 * 3600.0), 3);
        assert_eq!(s.size_at(6.0 * 3600.0), 8);
        assert_eq!(s.size_at(18.0 * 3600.0), 3);
    }

    #[test]
    fn it_reads_no_metric_and_ignores_the_fleet() {
        let mut s = table(&[0.0], &[3]);
        assert_eq!(s.reading(), None);
        let d = s.evaluate(60.0, Fleet::steady(9), Observed::default());
        assert_eq!(d.desired, 3);
    }
}
