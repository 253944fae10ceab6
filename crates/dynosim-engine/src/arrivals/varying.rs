//! Poisson arrivals at a rate that varies in time: a piecewise-linear schedule or a daily sine.
//! A non-homogeneous Poisson process, drawn by thinning (Lewis and Shedler, 1979): candidates
//! come at a constant majorant rate M, each kept with probability rate(t) / M. The majorant
//! is piecewise constant (the highest rate of each piece of the schedule, of each 24th of the
//! sine's period), so a schedule with a short peak wastes no draws on its quiet stretches; a
//! candidate past its piece's end is dropped and drawing starts again at the end, which the
//! exponential's lack of memory makes exact.

use super::ArrivalProcess;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::rng::SimRng;
use crate::units::{Duration, Rate, MAX_RATE, MIN_DURATION};
use rand::Rng;
use rand_distr::{Distribution, Exp1};
use serde::Deserialize;
use serde_json::Value;

/// A rate that varies in time, with a piecewise-constant bound above it.
pub trait Shape: Send + Sync + std::fmt::Debug + Clone + 'static {
    /// The rate at `t` (per second, >= 0).
    fn rate(&self, t: f64) -> f64;
    /// The end (> t, possibly infinite) of the piece holding `t`, and a bound on the rate
    /// over the whole piece.
    fn piece(&self, t: f64) -> (f64, f64);
    /// ∫ rate over [from, to].
    fn integral(&self, from: f64, to: f64) -> f64;
    /// What the rate averages over a long run.
    fn long_run(&self) -> f64;
    /// The highest rate in [0, to).
    fn highest(&self, to: f64) -> f64;
}

/// Piecewise linear through `(time, rate)` points, the first at 0 s, constant after the last.
/// Times may repeat (a step from one rate to another).
#[derive(Debug, Clone)]
pub struct Schedule {
    times: Vec<f64>,
    rates: Vec<f64>,
}

impl Schedule {
    /// The points, checked: one clear error for each mistake, naming the point.
    pub fn new(points: &[(f64, f64)], path: &str) -> Result<Schedule> {
        if points.is_empty() {
            return Err(Error::config(
                path,
                "an empty schedule; expected [[time, rate], ...] points, the first at \"0s\"",
            ));
        }
        for (i, &(t, r)) in points.iter().enumerate() {
            if i == 0 && t != 0.0 {
                return Err(Error::config(
                    format!("{path}[0][0]"),
                    format!("a schedule starts at \"0s\" (the run's start), got {t} s"),
                ));
            }
            if !t.is_finite() {
                return Err(Error::config(
                    format!("{path}[{i}][0]"),
                    format!("expected a finite time, got {t} s"),
                ));
            }
            if i > 0 && t < points[i - 1].0 {
                return Err(Error::config(
                    format!("{path}[{i}][0]"),
                    format!(
                        "schedule times must not decrease: {t} s comes after {} s",
                        points[i - 1].0
                    ),
                ));
            }
            if !(r.is_finite() && r >= 0.0) {
                return Err(Error::config(
                    format!("{path}[{i}][1]"),
                    format!("expected a rate >= 0, got {r}"),
                ));
            }
            if r > MAX_RATE {
                return Err(Error::config(
                    format!("{path}[{i}][1]"),
                    format!("must be at most 1e9 per second (1 ns between events), got {r}"),
                ));
            }
        }
        let last = points.len() - 1;
        if points[last].1 == 0.0 {
            return Err(Error::config(
                format!("{path}[{last}][1]"),
                "expected a rate > 0 at the last point: it holds for the rest of the run and is \
                 the long-run rate the stability check uses (end on a small rate rather than 0)",
            ));
        }
        Ok(Schedule {
            times: points.iter().map(|p| p.0).collect(),
            rates: points.iter().map(|p| p.1).collect(),
        })
    }

    /// The index of the last point at or before `t` (0 before the first).
    fn segment(&self, t: f64) -> usize {
        self.times.partition_point(|&x| x <= t).saturating_sub(1)
    }

    /// The rate at `t` on segment `k` (its line, `t` clamped to the segment).
    fn rate_in(&self, k: usize, t: f64) -> f64 {
        if k + 1 == self.times.len() {
            return self.rates[k];
        }
        let (t0, t1) = (self.times[k], self.times[k + 1]);
        let (r0, r1) = (self.rates[k], self.rates[k + 1]);
        r0 + (r1 - r0) * ((t - t0) / (t1 - t0)).clamp(0.0, 1.0)
    }

    fn last_rate(&self) -> f64 {
        *self.rates.last().expect("a point")
    }
}

impl Shape for Schedule {
    fn rate(&self, t: f64) -> f64 {
        self.rate_in(self.segment(t), t)
    }

    fn piece(&self, t: f64) -> (f64, f64) {
        let k = self.segment(t);
        if k + 1 == self.times.len() {
            (f64::INFINITY, self.rates[k])
        } else {
            (self.times[k + 1], self.rates[k].max(self.rates[k + 1]))
        }
    }

    fn integral(&self, from: f64, to: f64) -> f64 {
        if to <= from {
            return 0.0;
        }
        let mut total = 0.0;
        let mut t = from;
        while t < to {
            let k = self.segment(t);
            let (end, _) = self.piece(t);
            let e = end.min(to);
            total += 0.5 * (self.rate_in(k, t) + self.rate_in(k, e)) * (e - t);
            t = e;
        }
        total
    }

    fn long_run(&self) -> f64 {
        self.last_rate()
    }

    fn highest(&self, to: f64) -> f64 {
        let k = self.segment(to);
        self.rates[..=k]
            .iter()
            .copied()
            .fold(self.rate_in(k, to), f64::max)
    }
}

/// Pieces of the majorant in one period of a sine.
const SINE_PIECES: u32 = 24;

/// `mean + amplitude × cos(2π (t − peak) / period)`: highest at `peak` (and every period after).
#[derive(Debug, Clone)]
pub struct Sine {
    mean: f64,
    amplitude: f64,
    period: f64,
    peak: f64,
    /// Whether the majorant follows the sine piece by piece: only when a piece expects a few
    /// candidates (with a period of a few mean gaps, one bound for all time is cheaper).
    pieces: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SineSpec {
    mean: Rate,
    amplitude: Rate,
    #[serde(default)]
    period: Option<Duration>,
    #[serde(default)]
    peak: Option<Duration>,
}

impl Sine {
    fn phase(&self, t: f64) -> f64 {
        std::f64::consts::TAU * (t - self.peak) / self.period
    }
}

impl Shape for Sine {
    fn rate(&self, t: f64) -> f64 {
        (self.mean + self.amplitude * self.phase(t).cos()).max(0.0)
    }

    fn piece(&self, t: f64) -> (f64, f64) {
        if !self.pieces {
            return (f64::INFINITY, self.mean + self.amplitude);
        }
        let n = f64::from(SINE_PIECES);
        let x = (t - self.peak) / self.period;
        let cycle = x.floor();
        let mut j = ((x - cycle) * n).floor().min(n - 1.0);
        let end = loop {
            let end = self.peak + (cycle + (j + 1.0) / n) * self.period;
            if end > t {
                break end;
            }
            j += 1.0;
        };
        let start = end - self.period / n;
        // cos is highest at a piece's ends, or at the peak when the piece starts at it.
        let top = if j == 0.0 {
            self.mean + self.amplitude
        } else {
            self.rate(start).max(self.rate(end))
        };
        // A hair above, so that rounding in rate() never puts it over the bound.
        (end, top * (1.0 + 1e-12))
    }

    fn integral(&self, from: f64, to: f64) -> f64 {
        if to <= from {
            return 0.0;
        }
        let k = self.period / std::f64::consts::TAU;
        self.mean * (to - from)
            + self.amplitude * k * (self.phase(to).sin() - self.phase(from).sin())
    }

    fn long_run(&self) -> f64 {
        self.mean
    }

    fn highest(&self, _to: f64) -> f64 {
        self.mean + self.amplitude
    }
}

/// Poisson arrivals at a rate given by `shape`, drawn by thinning.
#[derive(Debug, Clone)]
pub struct Varying<S: Shape> {
    shape: S,
}

impl<S: Shape> Varying<S> {
    pub fn new(shape: S) -> Self {
        Varying { shape }
    }
}

impl<S: Shape> Varying<S> {
    /// The next arrival after `now`, counting the candidates drawn in `candidates`.
    #[inline]
    fn next_counted(&self, now: f64, rng: &mut SimRng, candidates: &mut u64) -> Option<f64> {
        let mut t = now;
        loop {
            let (end, top) = self.shape.piece(t);
            if top <= 0.0 {
                if end.is_infinite() {
                    return None;
                }
                t = end;
                continue;
            }
            let gap: f64 = Exp1.sample(rng);
            let candidate = t + gap / top;
            if candidate >= end {
                t = end;
                continue;
            }
            *candidates += 1;
            let u: f64 = rng.random();
            if u * top < self.shape.rate(candidate) {
                return Some(candidate);
            }
            t = candidate;
        }
    }
}

impl<S: Shape> ArrivalProcess for Varying<S> {
    fn next_arrival(&mut self, now: f64, rng: &mut SimRng) -> Option<f64> {
        self.next_counted(now, rng, &mut 0)
    }
    fn mean_rate(&self) -> f64 {
        self.shape.long_run()
    }
    fn expected(&self, from: f64, to: f64) -> f64 {
        self.shape.integral(from, to)
    }
    fn peak_rate(&self, to: f64) -> f64 {
        self.shape.highest(to)
    }
    fn fresh(&self, _seed: u64, _replication: u64) -> Box<dyn ArrivalProcess> {
        Box::new(self.clone())
    }
}

/// `arrivals.rate` as a schedule (an array of points) or a sine (a table); None when it is a
/// plain rate.
pub fn build(p: &Params, key: &str) -> Result<Option<Box<dyn ArrivalProcess>>> {
    let path = p.path(key);
    match p.get::<Value>(key)? {
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if !matches!(item, Value::Array(pair) if pair.len() == 2) {
                    return Err(Error::config(
                        format!("{path}[{i}]"),
                        format!(
                            "expected a [time, rate] point such as [\"10min\", \"200/s\"], \
                             got {item}"
                        ),
                    ));
                }
            }
            let points: Vec<(Duration, Rate)> = p.require(key, "a schedule")?;
            let points: Vec<(f64, f64)> = points.iter().map(|(t, r)| (t.0, r.0)).collect();
            Ok(Some(Box::new(Varying::new(Schedule::new(&points, &path)?))))
        }
        Some(Value::Object(_)) => {
            let spec: SineSpec = p.require(key, "a sine")?;
            let (mean, amplitude) = (spec.mean.0, spec.amplitude.0);
            if !(mean.is_finite() && mean > 0.0 && mean <= MAX_RATE) {
                return Err(Error::config(
                    format!("{path}.mean"),
                    format!("expected a rate > 0 and at most 1e9 per second, got {mean}"),
                ));
            }
            if !(amplitude.is_finite() && (0.0..=mean).contains(&amplitude)) {
                return Err(Error::config(
                    format!("{path}.amplitude"),
                    format!(
                        "expected a rate from 0 to the mean ({mean}), so that the rate stays \
                         >= 0, got {amplitude}"
                    ),
                ));
            }
            let period = spec.period.map_or(86400.0, |d| d.0);
            if !(period.is_finite() && period >= MIN_DURATION) {
                return Err(Error::config(
                    format!("{path}.period"),
                    format!("expected a positive duration, got {period} s"),
                ));
            }
            let peak = spec.peak.map_or(0.0, |d| d.0);
            if !(peak.is_finite() && peak >= 0.0) {
                return Err(Error::config(
                    format!("{path}.peak"),
                    format!("expected a time >= 0, got {peak} s"),
                ));
            }
            Ok(Some(Box::new(Varying::new(Sine {
                mean,
                amplitude,
                period,
                peak,
                pieces: period * (mean + amplitude) >= 4.0 * f64::from(SINE_PIECES),
            }))))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Stream};

    /// Arrivals and candidates before `until`.
    fn count<S: Shape>(v: &Varying<S>, until: f64, replication: u64) -> (u64, u64) {
        let mut rng = stream(7, replication, Stream::Arrivals);
        let (mut arrivals, mut candidates, mut t) = (0, 0, 0.0);
        while let Some(next) = v.next_counted(t, &mut rng, &mut candidates) {
            if next >= until {
                break;
            }
            arrivals += 1;
            t = next;
        }
        (arrivals, candidates)
    }

    /// On a ramp from 0 to r over [0, T] the majorant is r, so candidates come at rate r and
    /// each is kept with probability t/T: half of them, binomially.
    #[test]
    fn thinning_keeps_half_the_candidates_on_a_ramp() {
        let v = Varying::new(Schedule::new(&[(0.0, 0.0), (100.0, 1000.0)], "r").unwrap());
        let (mut kept, mut drawn) = (0, 0);
        for r in 0..4 {
            let (a, c) = count(&v, 100.0, r);
            kept += a;
            drawn += c;
        }
        // The last candidate of each replication may fall past T: at most 4 extra.
        let p = kept as f64 / drawn as f64;
        let se = (0.25 / drawn as f64).sqrt();
        assert!(
            (p - 0.5).abs() < 3.89 * se + 4.0 / drawn as f64,
            "{p} of {drawn}"
        );
        // Candidates are Poisson at the majorant: 1000 × 100 per replication.
        let se = (4.0e5f64).sqrt();
        assert!((drawn as f64 - 4.0e5).abs() < 3.89 * se + 4.0, "{drawn}");
    }

    /// A short peak costs its own candidates only: on constant pieces every candidate is kept,
    /// however high the peak elsewhere.
    #[test]
    fn a_short_peak_costs_no_candidates_elsewhere() {
        let v = Varying::new(
            Schedule::new(
                &[
                    (0.0, 10.0),
                    (100.0, 10.0),
                    (100.0, 1e4),
                    (101.0, 1e4),
                    (101.0, 10.0),
                ],
                "r",
            )
            .unwrap(),
        );
        let (kept, drawn) = count(&v, 200.0, 0);
        // The one candidate past the end is kept too, but not counted as an arrival.
        assert_eq!(kept + 1, drawn);
        assert!(kept > 5000, "{kept}");
    }

    #[test]
    fn sine_pieces_bound_the_rate_and_tile_time() {
        let s = Sine {
            mean: 100.0,
            amplitude: 60.0,
            period: 3600.0,
            peak: 1000.0,
            pieces: true,
        };
        let mut t = 0.0;
        while t < 3.0 * 3600.0 {
            let (end, top) = s.piece(t);
            assert!(end > t);
            for i in 0..=20 {
                let x = t + (end - t) * f64::from(i) / 20.0;
                assert!(s.rate(x) <= top, "{x}");
            }
            t = end;
        }
        let one = s.integral(0.0, 3600.0);
        assert!((one - 100.0 * 3600.0).abs() < 1e-6, "{one}");
    }

    #[test]
    fn schedule_integral_is_the_trapezoids() {
        let s = Schedule::new(&[(0.0, 0.0), (10.0, 100.0), (10.0, 50.0)], "r").unwrap();
        assert_eq!(s.highest(5.0), 50.0);
        assert_eq!(s.highest(30.0), 100.0);
        assert_eq!(s.integral(0.0, 10.0), 500.0);
        assert_eq!(s.integral(0.0, 20.0), 1000.0);
        assert_eq!(s.rate(5.0), 50.0);
        assert_eq!(s.rate(10.0), 50.0);
        assert_eq!(s.piece(3.0), (10.0, 100.0));
        assert_eq!(s.piece(10.0), (f64::INFINITY, 50.0));
    }
}
