//! The autoscaler in the run: it is fed the metric its rule reads, as the platform measures
//! it (a request's queue time when its app starts it, its response time when the router logs
//! the answer, the serving dynos' busy threads or cores over each report), and every
//! `autoscale.interval` it is shown the fleet and asks for a size, which the lifecycle
//! ([`super::lifecycle`], which runs the evaluation) reaches by starting and stopping dynos.
//! The rule never reads the engine's state ([`crate::autoscale`]); [`Scaling`] is the only
//! thing that tells it anything.

use crate::autoscale::{Autoscaler, Fleet, Metric};
use crate::scenario::Scenario;

/// The integral over time of a quantity that changes by steps, taken report by report.
#[derive(Debug, Clone, Copy, Default)]
struct Integral {
    value: f64,
    since: f64,
    area: f64,
}

impl Integral {
    fn set(&mut self, now: f64, value: f64) {
        self.area += self.value * (now - self.since);
        self.value = value;
        self.since = now;
    }

    /// The integral since the last take, up to `now`.
    fn take(&mut self, now: f64) -> f64 {
        self.set(now, self.value);
        std::mem::take(&mut self.area)
    }
}

/// The autoscaler of a run, and what it is fed between two evaluations.
#[derive(Debug)]
pub(super) struct Scaling {
    autoscaler: Autoscaler,
    /// The metric its rule reads (None: none, a schedule).
    metric: Option<Metric>,
    /// The last scale event: when, and whether it was up.
    last: Option<(f64, bool)>,
    /// The metric as the rule saw it at its last evaluation.
    seen: Option<f64>,
    /// For a per-dyno report: the fleet's busy threads (utilisation), or the core-seconds
    /// used since the last report (CPU).
    threads: Integral,
    cpu_area: f64,
    /// The dynos serving requests (up or stopping): those that report.
    serving: Integral,
    /// When the last report was made: the next one covers the time since.
    last_report: f64,
}

impl Scaling {
    /// The scenario's autoscaler, fed from the start (None: it has none).
    pub fn of(s: &Scenario) -> Option<Box<Scaling>> {
        let autoscaler = s.autoscale.as_ref()?;
        Some(Box::new(Scaling::new(autoscaler.clone(), s.dynos)))
    }

    fn new(autoscaler: Autoscaler, serving: u32) -> Scaling {
        Scaling {
            metric: autoscaler.reading().map(|r| r.metric),
            autoscaler,
            last: None,
            seen: None,
            threads: Integral::default(),
            cpu_area: 0.0,
            serving: Integral {
                value: f64::from(serving),
                ..Integral::default()
            },
            last_report: 0.0,
        }
    }

    pub fn interval(&self) -> f64 {
        self.autoscaler.interval()
    }

    /// The metric as the rule saw it at its last evaluation (None: never, or nothing in its
    /// window).
    pub fn last_seen(&self) -> Option<f64> {
        self.seen
    }

    /// A request's queue time (to its start on a thread), at `now`.
    #[inline]
    pub fn queue_time(&mut self, now: f64, seconds: f64) {
        if self.metric == Some(Metric::QueueTime) {
            self.autoscaler.record(now, seconds);
        }
    }

    /// A request's response time, as the router logs its answer at `now`.
    #[inline]
    pub fn response_time(&mut self, now: f64, seconds: f64) {
        if self.metric == Some(Metric::ResponseTime) {
            self.autoscaler.record(now, seconds);
        }
    }

    /// `cores` cores were busy over [from, to] on one dyno (for a CPU rule).
    #[inline]
    pub fn cpu(&mut self, from: f64, to: f64, cores: f64) {
        if self.metric == Some(Metric::Cpu) && to > from {
            self.cpu_area += cores * (to - from);
        }
    }

    /// The fleet's busy threads changed by `delta` at `now` (for a utilisation rule).
    #[inline]
    pub fn threads(&mut self, now: f64, delta: f64) {
        if self.metric == Some(Metric::Utilisation) {
            let busy = self.threads.value + delta;
            self.threads.set(now, busy);
        }
    }

    /// The dynos serving requests are `serving` from `now` on.
    pub fn serving(&mut self, now: f64, serving: u32) {
        self.serving.set(now, f64::from(serving));
    }

    /// The rule's evaluation at `now`: the serving dynos report (see [`Self::report`]: each
    /// has `cores` cores and `threads` threads), the rule is shown `fleet` and asks for a size.
    /// Returns that size when it differs from the fleet's, and whether it reverses the last
    /// scale within its cooldown.
    pub fn evaluate(
        &mut self,
        now: f64,
        cores: f64,
        threads: f64,
        fleet: Fleet,
    ) -> Option<(u32, bool)> {
        self.report(now, cores, threads);
        let evaluation = self.autoscaler.evaluate(now, fleet);
        self.seen = evaluation.observed.value;
        let desired = evaluation.decision.desired;
        if desired == fleet.size {
            return None;
        }
        let up = desired > fleet.size;
        let reversal = self.last.is_some_and(|(at, was_up)| {
            was_up != up && now - at < self.autoscaler.cooldown(was_up)
        });
        self.last = Some((now, up));
        Some((desired, reversal))
    }

    /// Every serving dyno's report at `now`, for a rule that reads CPU or utilisation: the
    /// fraction of its cores (`cores`) or threads (`threads`) busy since the last report,
    /// averaged over the serving dynos (each as busy as the fleet on average). The report is
    /// an observation of the period it covers: it is recorded at that period's start, so that
    /// a rule's window of [t - window, t) holds the reports of the periods inside it (the
    /// load of [300 s, 315 s) is in the window [300 s, 315 s), shown `delay` after 315 s).
    fn report(&mut self, now: f64, cores: f64, threads: f64) {
        let since = std::mem::replace(&mut self.last_report, now);
        let dyno_seconds = self.serving.take(now);
        let (busy, capacity) = match self.metric {
            Some(Metric::Cpu) => (std::mem::take(&mut self.cpu_area), cores),
            Some(Metric::Utilisation) => (self.threads.take(now), threads),
            _ => return,
        };
        let dynos = self.serving.value;
        if dyno_seconds > 0.0 && dynos > 0.0 {
            let fraction = busy / (capacity * dyno_seconds);
            self.autoscaler
                .record_total(since, fraction * dynos, dynos as u64);
        }
    }
}
