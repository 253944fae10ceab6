//! Faults in a run (`[[faults]]`, [`crate::fault`]), and the app's own gate on a request a
//! thread takes (`app.wait_timeout`). A slowdown or an outage is a window of time that work
//! looks up when it begins (nothing happens at its edges): the app's work (a `[service]` hold,
//! an `io` or `cpu` phase) and a resource's service take `factor` times as long; during an
//! outage, a request a thread takes (or a use of a resource that begins) is refused at once
//! with an error the app answers, or hangs until the outage ends. `dynos_lost` acts at its
//! instant, through this concern's own event (its step, the crash, is `lifecycle.rs`').

use crate::fault::{FaultKind, Target};
use crate::result::ErrorKind;
use crate::scenario::Scenario;

/// What the app does with a request a thread has just taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Gate {
    /// It works on it.
    Open,
    /// It answers at once with this error, doing nothing (an outage, `app.wait_timeout`).
    Refuse(ErrorKind),
    /// It holds it until this time (an outage that hangs), then works on it.
    Hang(f64),
}

/// The faults' state in a replication: those that act at an instant, in time order, and the
/// next one due; and what the app's work asks of the others.
#[derive(Debug)]
pub(super) struct Faults {
    instants: Vec<(f64, u32)>,
    next: usize,
    /// Whether a slowdown strikes the app's work.
    slows_app: bool,
    /// Whether the app looks at each request a thread takes (an app outage,
    /// `app.wait_timeout`).
    pub gates: bool,
    /// Whether the scenario has faults at all.
    any: bool,
}

impl Faults {
    pub fn new(s: &Scenario) -> Faults {
        Faults {
            instants: s
                .faults
                .list
                .iter()
                .filter_map(|f| match f.kind {
                    FaultKind::DynosLost { count } => Some((f.at, count)),
                    _ => None,
                })
                .collect(),
            next: 0,
            slows_app: s.faults.slows(Target::App),
            gates: s.app.wait_timeout.is_some() || s.faults.has_outage(Target::App),
            any: !s.faults.is_empty(),
        }
    }

    /// Whether the scenario has faults, or the app's gate (`app.wait_timeout`).
    pub fn any(&self) -> bool {
        self.any || self.gates
    }

    /// When the first fault that acts at an instant is due.
    pub fn first(&self) -> Option<f64> {
        self.instants.first().map(|&(at, _)| at)
    }

    /// The fault due now: how many dynos it takes down, and when the next one is due.
    pub fn take_due(&mut self) -> (u32, Option<f64>) {
        let (_, count) = self.instants[self.next];
        self.next += 1;
        (count, self.instants.get(self.next).map(|&(at, _)| at))
    }

    /// How many times longer the app's work beginning at `now` takes.
    #[inline]
    pub fn app_slowdown(&self, s: &Scenario, now: f64) -> f64 {
        if self.slows_app {
            s.faults.slowdown(Target::App, now)
        } else {
            1.0
        }
    }

    /// How many times longer resource `r`'s service beginning at `now` takes.
    #[inline]
    pub fn resource_slowdown(&self, s: &Scenario, r: u32, now: f64) -> f64 {
        if self.any {
            s.faults.slowdown(Target::Resource(r as usize), now)
        } else {
            1.0
        }
    }

    /// Resource `r`'s outage at `now`, if one is on: Some(None) it refuses, Some(Some(end)) it
    /// hangs until `end`.
    #[inline]
    pub fn resource_outage(&self, s: &Scenario, r: u32, now: f64) -> Option<Option<f64>> {
        if self.any {
            s.faults.outage(Target::Resource(r as usize), now)
        } else {
            None
        }
    }

    /// What the app does with a request that reached its router at `arrival`, which a thread
    /// took at `now`: an app outage refuses or holds it; `app.wait_timeout` drops it unserved
    /// when it is older than that (its age from its router's arrival, as X-Request-Start tells
    /// Rack::Timeout).
    #[inline]
    pub fn gate(&self, s: &Scenario, arrival: f64, now: f64) -> Gate {
        if !self.gates {
            return Gate::Open;
        }
        if let Some(limit) = s.app.wait_timeout {
            if now - arrival > limit {
                return Gate::Refuse(ErrorKind::WaitTimeout);
            }
        }
        match s.faults.outage(Target::App, now) {
            None => Gate::Open,
            Some(None) => Gate::Refuse(ErrorKind::Outage),
            Some(Some(until)) => Gate::Hang(until),
        }
    }
}
