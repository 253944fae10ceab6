//! The stability verdict of a run with faults: did the fleet come back after the trigger?
//!
//! A replication *recovered* when its goodput (successful answers per second, counted when
//! they are given) is back within 5% of its level before the first fault (over the measured
//! time before it) for three intervals in a row, within `run.recovery_window` after the last
//! fault ends (or before the run ends, if that is sooner). Its *recovery time* is from the last
//! fault's end to the start of the first of those three intervals (0: it never left). Only a
//! fall counts: a fleet working off a backlog may answer faster than before, and that is
//! recovery, not a failure.
//!
//! "Within 5%" allows for chance: an interval is back when its count of answers is at least
//! 95% of what the level before would give it, less two standard errors of that count (a
//! Poisson count's, its square root), so that a healthy interval falls short about once in 40
//! however few answers it holds. With 1,600 answers an interval the allowance is 5% more; with
//! 10,000, 2%.
//!
//! The intervals (`run.recovery_interval`) start at the last fault's end. By default each is
//! long enough to hold about 1,600 answers at the scenario's arrival rate, at least 10 s and
//! at most a tenth of the window (three of them must fit in it, with room to spare); it is a
//! whole number of seconds.

use crate::result::StabilityFigures;
use serde::Serialize;

/// Goodput may fall this far below its level before the faults and count as back (besides
/// chance: [`SIGMAS`]).
pub const TOLERANCE: f64 = 0.05;
/// Standard errors of an interval's count allowed for chance.
pub const SIGMAS: f64 = 2.0;
/// Intervals in a row at that level that make a recovery.
pub const RUN_OF: usize = 3;
/// `run.recovery_window` by default: 10 minutes.
pub const DEFAULT_WINDOW: f64 = 600.0;
/// The shortest automatic interval, s.
pub const MIN_AUTO_INTERVAL: f64 = 10.0;
/// Answers an automatic interval should hold at the scenario's rate.
pub const AUTO_ANSWERS: f64 = 1600.0;

/// The rule, for one scenario.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rule {
    /// The first fault's start and the last one's end.
    pub first: f64,
    pub last: f64,
    /// The measured window's start (the warm-up's end) and the run's end (infinite for a
    /// closed loop of a set number of requests, which ends with its last answer).
    pub window_start: f64,
    pub run_end: f64,
    /// Interval length, s (a whole number of seconds).
    pub interval: f64,
    /// How long after the last fault a recovery may come (`run.recovery_window`).
    pub window: f64,
    /// Whether a run stops as soon as its verdict is settled ([`Goodput::pending`]), for a
    /// caller that reads nothing but the verdict (the metastability map): set by
    /// `Scenario::stop_at_verdict`; no scenario key sets it, and no description shows it.
    #[serde(skip)]
    pub stop_at_verdict: bool,
}

impl Rule {
    /// The part of the window a run that ended at `end` covers: a run that ends sooner is
    /// judged on what it has (a recovery after its end is not seen).
    pub fn judged_window(&self, end: f64) -> f64 {
        self.window.min(end - self.last).max(0.0)
    }

    /// When a run that stops at its verdict first looks at it (infinite: it never stops
    /// early): at the first fault, when the level before is known (a fleet that was never up
    /// is settled then). Only a timed run stops early: a closed loop of a set number of
    /// requests is judged to its end.
    pub fn first_check(&self) -> f64 {
        if self.stop_at_verdict && self.run_end.is_finite() {
            self.first
        } else {
            f64::INFINITY
        }
    }
}

/// The automatic interval at an arrival rate of `rate` per second, for a recovery window of
/// `window` seconds.
pub fn auto_interval(rate: f64, window: f64) -> f64 {
    let wanted = if rate > 0.0 && rate.is_finite() {
        AUTO_ANSWERS / rate
    } else {
        MIN_AUTO_INTERVAL
    };
    wanted
        .min(window / 10.0)
        .max(MIN_AUTO_INTERVAL)
        .ceil()
        .max(1.0)
}

/// Successful answers counted in one-second bins whose edges fall on the last fault's end,
/// from the run's start to its end: the stuff of a verdict. A few bytes a second of
/// simulated time; nothing per request.
#[derive(Debug, Clone)]
pub struct Goodput {
    /// Where bin 0 starts (at or before 0).
    start: f64,
    counts: Vec<u32>,
}

/// The bins' width, s.
pub const BIN: f64 = 1.0;

impl Goodput {
    pub fn new(rule: &Rule) -> Goodput {
        let start = rule.last - (rule.last / BIN).ceil() * BIN;
        // Up to the window's close at most: answers after it are judged by nothing.
        let until = (rule.last + rule.window).min(rule.run_end);
        let bins = ((until - start) / BIN).ceil() as usize + 1;
        Goodput {
            start,
            counts: vec![0; bins],
        }
    }

    /// A successful answer at `t`.
    #[inline]
    pub fn answered(&mut self, t: f64) {
        let i = ((t - self.start) / BIN) as usize;
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
    }

    /// Adds the counts of another replication's part (a shard's: never, today; kept for
    /// merging measures alike).
    pub fn add(&mut self, other: &Goodput) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// Answers in [from, to), both on bin edges.
    fn sum(&self, from: f64, to: f64) -> u64 {
        let a = ((from - self.start) / BIN).round().max(0.0) as usize;
        let b = (((to - self.start) / BIN).round().max(0.0) as usize).min(self.counts.len());
        self.counts
            .get(a..b)
            .map_or(0, |c| c.iter().map(|&x| u64::from(x)).sum())
    }

    /// Whether the verdict is still open when the run's next event is at `t`: None once it is
    /// settled, the same as the whole run's (the run may stop); otherwise when to look again,
    /// an interval later. Called once an interval of simulated time, not per answer.
    ///
    /// Every answer before `t` has been counted (events come in time order), so every bin
    /// before `t`'s is final (from the first fault on, those of the level before). The verdict
    /// read off those bins alone, as if the run ended at the first of them not final, is
    /// settled when the fleet was never up (no answer before the first fault: not recovered,
    /// whatever follows), when it found the recovery (the whole run's verdict finds the same:
    /// it reads the same intervals in the same order and stops at the same one), or when the
    /// intervals it has not read cannot make a recovery: fewer of them are left in the whole
    /// run's judged window (the last fault's end to the window's close, or the run's end if
    /// sooner) than the good ones in a row it still needs, after the run of good intervals it
    /// read last. The whole run's verdict reads the same intervals first and finds no three in
    /// a row among them; any three it could find later would take in at most that last run:
    /// not recovered, as the whole run says. (Once the bins cover the whole judged window, no
    /// interval is left: the same rule.)
    pub fn pending(&self, rule: &Rule, t: f64) -> Option<f64> {
        let cut = self.start + ((t - self.start) / BIN).floor() * BIN;
        let end = cut.min(rule.run_end);
        let close = (rule.last + rule.window).min(rule.run_end);
        let (so_far, read, last_run) = self.scan(rule, end);
        let never_up = so_far.baseline.is_nan() || so_far.baseline <= 0.0;
        // The whole run's verdict reads the intervals of its judged window, to the run's end.
        let left = Self::intervals(rule, rule.run_end).saturating_sub(read);
        if end >= close || so_far.recovered || never_up || last_run + left < RUN_OF {
            None
        } else {
            Some(t + rule.interval)
        }
    }

    /// A replication's figures for the report, for a run that ended at `end`: a timed run is
    /// judged to its window's close (answers after it, the queues draining, are no part of
    /// it); a closed loop of a set number, to its end.
    pub fn figures(&self, rule: &Rule, end: f64) -> StabilityFigures {
        let end = end.min(rule.run_end);
        let v = self.verdict(rule, end);
        StabilityFigures {
            recovered: if v.recovered { 1.0 } else { 0.0 },
            recovery_time: v.recovery_time,
            baseline_goodput: v.baseline,
            window: rule.judged_window(end),
            interval: rule.interval,
        }
    }

    /// The verdict of `rule` on these answers, for a run that ended at `end`.
    pub fn verdict(&self, rule: &Rule, end: f64) -> Verdict {
        self.scan(rule, end).0
    }

    /// The whole intervals of the judged window of a run that ended at `end`.
    fn intervals(rule: &Rule, end: f64) -> usize {
        let end = rule.last + rule.judged_window(end);
        ((end - rule.last) / rule.interval + 1e-9).floor().max(0.0) as usize
    }

    /// [`Self::verdict`], with the intervals it read and the good ones in a row it read last.
    fn scan(&self, rule: &Rule, end: f64) -> (Verdict, usize, usize) {
        // The level before: every whole second between the warm-up's end and the first fault.
        let i = rule.interval;
        let before_start = self.start + ((rule.window_start - self.start) / BIN).ceil() * BIN;
        let before_end = self.start + ((rule.first - self.start) / BIN).floor() * BIN;
        let baseline = if before_end > before_start {
            self.sum(before_start, before_end) as f64 / (before_end - before_start)
        } else {
            f64::NAN
        };
        // An interval's count is back when it is within 5% of what the level before gives
        // it, less chance's two standard errors.
        let expected = baseline * i;
        let floor = expected * (1.0 - TOLERANCE) - SIGMAS * expected.sqrt();
        let good = |k: usize| {
            let from = rule.last + k as f64 * i;
            self.sum(from, from + i) as f64 >= floor
        };
        let intervals = Self::intervals(rule, end);
        let mut run = 0;
        let mut recovery = None;
        // A fleet that answered nothing before the fault was never up: nothing to come back to
        // (every interval would be "within 5% of 0").
        let intervals = if baseline > 0.0 { intervals } else { 0 };
        let mut read = 0;
        for k in 0..intervals {
            read = k + 1;
            if good(k) {
                run += 1;
                if run == RUN_OF {
                    recovery = Some((k + 1 - RUN_OF) as f64 * i);
                    break;
                }
            } else {
                run = 0;
            }
        }
        let verdict = Verdict {
            recovered: recovery.is_some(),
            recovery_time: recovery,
            baseline,
        };
        (verdict, read, run)
    }
}

/// The figures of a replication measured elsewhere (the testbed's real run): its successful
/// answers' times, seconds from the run's start, judged by `rule` as a simulated
/// replication's are, for a run that ended at `end`.
pub fn judge(rule: &Rule, answers: impl IntoIterator<Item = f64>, end: f64) -> StabilityFigures {
    let mut goodput = Goodput::new(rule);
    for t in answers {
        goodput.answered(t);
    }
    goodput.figures(rule, end)
}

/// One replication's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Verdict {
    pub recovered: bool,
    /// From the last fault's end to the first of the good intervals; None: not recovered.
    pub recovery_time: Option<f64>,
    /// Goodput before the first fault, per second.
    pub baseline: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> Rule {
        Rule {
            first: 300.0,
            last: 360.0,
            window_start: 30.0,
            run_end: 1200.0,
            interval: 10.0,
            window: 600.0,
            stop_at_verdict: false,
        }
    }

    /// `rate(t)` answers a second, spread evenly.
    fn series(rule: &Rule, rate: impl Fn(f64) -> f64) -> Goodput {
        let mut g = Goodput::new(rule);
        let mut t = 0.0;
        let dt = 0.01;
        let mut owed = 0.0;
        while t < rule.run_end {
            owed += rate(t) * dt;
            while owed >= 1.0 {
                g.answered(t);
                owed -= 1.0;
            }
            t += dt;
        }
        g
    }

    #[test]
    fn never_up_never_recovers() {
        let r = rule();
        let v = series(&r, |_| 0.0).verdict(&r, r.run_end);
        assert_eq!(v.baseline, 0.0);
        assert!(!v.recovered);
        assert_eq!(v.recovery_time, None);
    }

    #[test]
    fn never_down_recovers_at_once() {
        let r = rule();
        let v = series(&r, |_| 100.0).verdict(&r, r.run_end);
        assert!(v.recovered);
        assert_eq!(v.recovery_time, Some(0.0));
        assert!((v.baseline - 100.0).abs() < 0.5, "{}", v.baseline);
    }

    #[test]
    fn down_until_a_time_recovers_then() {
        let r = rule();
        // Down from the fault until 125 s after its end; back at 96%: within 5%.
        let v = series(&r, |t| {
            if (300.0..485.0).contains(&t) {
                0.0
            } else if t >= 485.0 {
                96.0
            } else {
                100.0
            }
        })
        .verdict(&r, r.run_end);
        assert!(v.recovered);
        // The interval [480, 490) is half down; [490, 500) is the first good one.
        assert_eq!(v.recovery_time, Some(130.0));
    }

    #[test]
    fn a_level_below_the_band_is_not_back() {
        // 1,000 answers an interval: the band is 5% and two standard errors (6.3%) below.
        let r = rule();
        let below = |t: f64| if t >= 300.0 { 88.0 } else { 100.0 };
        let v = series(&r, below).verdict(&r, r.run_end);
        assert!(!v.recovered);
        assert_eq!(v.recovery_time, None);
        let within = |t: f64| if t >= 300.0 { 90.0 } else { 100.0 };
        assert!(series(&r, within).verdict(&r, r.run_end).recovered);
    }

    #[test]
    fn a_recovery_after_the_window_does_not_count() {
        let r = rule();
        let v = series(&r, |t| {
            if (300.0..961.0).contains(&t) {
                0.0
            } else {
                100.0
            }
        })
        .verdict(&r, r.run_end);
        assert!(!v.recovered);
        let longer = Rule { window: 800.0, ..r };
        assert!(
            series(&longer, |t| if (300.0..961.0).contains(&t) {
                0.0
            } else {
                100.0
            })
            .verdict(&longer, longer.run_end)
            .recovered
        );
    }

    #[test]
    fn two_good_intervals_are_not_three() {
        let r = rule();
        // Good in [360, 380), down again in [380, 390), then good for good at 400.
        let v = series(&r, |t| {
            if (300.0..360.0).contains(&t) || (380.0..400.0).contains(&t) {
                0.0
            } else {
                100.0
            }
        })
        .verdict(&r, r.run_end);
        assert_eq!(v.recovery_time, Some(40.0));
    }

    /// A run stopped at its verdict stops once the intervals left cannot hold three good ones
    /// after the good run it read last, with the whole run's verdict; not before.
    #[test]
    fn a_verdict_is_settled_once_too_few_intervals_are_left() {
        let r = rule();
        // 60 intervals of 10 s from 360 s; the window closes at 960 s.
        let whole = |g: &Goodput| g.verdict(&r, r.run_end);
        // Down for good: 3 intervals left at 930 s, 2 at 940 s.
        let down = series(&r, |t| if t >= 300.0 { 0.0 } else { 100.0 });
        assert_eq!(down.pending(&r, 930.5), Some(940.5));
        assert_eq!(down.pending(&r, 940.5), None);
        assert!(!whole(&down).recovered);
        // Back at 940 s: two good intervals before the close, not three (settled at 940 s).
        let late = series(&r, |t| {
            if (300.0..940.0).contains(&t) {
                0.0
            } else {
                100.0
            }
        });
        assert_eq!(late.pending(&r, 940.5), None);
        assert!(!whole(&late).recovered);
        // Back at 930 s: at 940 s one good interval read and two left: still open, and the
        // whole run recovers at the window's last three intervals.
        let just = series(&r, |t| {
            if (300.0..930.0).contains(&t) {
                0.0
            } else {
                100.0
            }
        });
        assert_eq!(just.pending(&r, 940.5), Some(950.5));
        assert_eq!(just.pending(&r, 950.5), Some(960.5));
        assert_eq!(just.pending(&r, 960.5), None);
        assert_eq!(whole(&just).recovery_time, Some(570.0));
        // A run stopped at 940.5 s has none of the answers after it, and the whole run's
        // figures (a stopped run is judged to its end, as the whole run is).
        let rates: [&dyn Fn(f64) -> f64; 2] = [&|t| if t >= 300.0 { 0.0 } else { 100.0 }, &|t| {
            if (300.0..940.0).contains(&t) {
                0.0
            } else {
                100.0
            }
        }];
        for rate in rates {
            let stopped = series(&r, |t| if t < 940.5 { rate(t) } else { 0.0 });
            let full = series(&r, rate);
            let (a, b) = (stopped.figures(&r, r.run_end), full.figures(&r, r.run_end));
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
        }
    }

    #[test]
    fn auto_intervals_hold_enough_answers_and_fit_the_window() {
        assert_eq!(auto_interval(1000.0, 600.0), 10.0);
        assert_eq!(auto_interval(10.0, 6000.0), 160.0);
        assert_eq!(auto_interval(7.0, 6000.0), 229.0);
        assert_eq!(auto_interval(3.0, 600.0), 60.0);
        assert_eq!(auto_interval(3.0, 50.0), 10.0);
    }
}
