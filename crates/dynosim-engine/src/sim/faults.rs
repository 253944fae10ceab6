//! Faults in a run (`[[faults]]`, [`crate::fault`]), and the app's own gate on a request a
//! thread takes (`app.wait_timeout`). A slowdown or an outage is a window of time that work
//! looks up when it begins (nothing happens at its edges): the app's work (a `[service]` hold,
//! an `io` or `cpu` phase) and a resource's service take `factor` times as long; during an
//! outage, a request a thread takes (or a use of a resource that begins) is refused at once
//! with an error the app answers, or hangs until the outage ends. `dynos_lost` acts at its
//! instant, through this concern's own event: the dynos crash as an R15 restarts them.

use super::events::{Event, BOOT};
use super::fleet::Life;
use super::{Simulation, NONE};
use crate::fault::{FaultKind, Target};
use crate::result::ErrorKind;

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

/// The faults that act at an instant, in time order, and the next one due.
#[derive(Debug)]
pub(super) struct Instants {
    due: Vec<(f64, u32)>,
    next: usize,
}

impl Instants {
    pub fn new(s: &crate::Scenario) -> Option<Instants> {
        let due: Vec<(f64, u32)> = s
            .faults
            .list
            .iter()
            .filter_map(|f| match f.kind {
                FaultKind::DynosLost { count } => Some((f.at, count)),
                _ => None,
            })
            .collect();
        (!due.is_empty()).then_some(Instants { due, next: 0 })
    }
}

impl Simulation<'_> {
    /// Schedules the first fault that acts at an instant.
    pub(super) fn schedule_first_fault(&mut self) {
        if let Some(&(at, _)) = self.instants.as_ref().and_then(|i| i.due.first()) {
            self.events.schedule(at, BOOT, Event::Fault);
        }
    }

    /// The fault due now: `count` dynos up crash, and boot again.
    pub(super) fn fault_due(&mut self) {
        let Some(instants) = self.instants.as_mut() else {
            return;
        };
        let (_, count) = instants.due[instants.next];
        instants.next += 1;
        if let Some(&(at, _)) = instants.due.get(instants.next) {
            self.events.schedule(at, BOOT, Event::Fault);
        }
        let up: Vec<usize> = (0..self.fleet.life.len())
            .filter(|&d| self.fleet.life[d] == Life::Up)
            .take(count as usize)
            .collect();
        for dyno in up {
            self.crash(dyno, ErrorKind::Crashed);
        }
    }

    /// How many times longer the app's work beginning now takes.
    #[inline]
    pub(super) fn app_slowdown(&self) -> f64 {
        if self.slows_app {
            self.s.faults.slowdown(Target::App, self.now)
        } else {
            1.0
        }
    }

    /// How many times longer resource `r`'s service beginning now takes.
    #[inline]
    pub(super) fn resource_slowdown(&self, r: u32) -> f64 {
        if self.s.faults.is_empty() {
            1.0
        } else {
            self.s
                .faults
                .slowdown(Target::Resource(r as usize), self.now)
        }
    }

    /// Resource `r`'s outage now, if one is on: Some(None) it refuses, Some(Some(end)) it
    /// hangs until `end`.
    #[inline]
    pub(super) fn resource_outage(&self, r: u32) -> Option<Option<f64>> {
        if self.s.faults.is_empty() {
            None
        } else {
            self.s.faults.outage(Target::Resource(r as usize), self.now)
        }
    }

    /// What the app does with request `req`, which a thread took now: an app outage refuses
    /// or holds it; `app.wait_timeout` drops it unserved when it is older than that (its age
    /// from its router's arrival, as X-Request-Start tells Rack::Timeout).
    #[inline]
    pub(super) fn gate(&self, req: u32) -> Gate {
        if let Some(limit) = self.s.app.wait_timeout {
            if self.now - self.slab.entries[req as usize].arrival > limit {
                return Gate::Refuse(ErrorKind::WaitTimeout);
            }
        }
        match self.s.faults.outage(Target::App, self.now) {
            None => Gate::Open,
            Some(None) => Gate::Refuse(ErrorKind::Outage),
            Some(Some(until)) => Gate::Hang(until),
        }
    }

    /// A request held by an outage that has ended goes on: its first phase, or (held by a
    /// resource's outage) its use of the resource.
    pub(super) fn unhang(&mut self, req: u32, resource: u32) {
        if resource == NONE {
            self.begin_phase(req);
        } else {
            self.serve_after_hang(resource, req);
        }
    }
}
