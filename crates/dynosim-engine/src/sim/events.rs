//! The engine's events and their ids in the kernel's queue ([`crate::kernel`]): every
//! component that waits for a time has one id, and so at most one pending event.
//!
//! Ids, in ranges: the dynos' CPUs, then the processor-sharing resources, then the requests'
//! deadlines (one id for all: see `super::deadlines`), the clients' retries (one id for all: see
//! `super::retries`), then each dyno slot's lifecycle (its boot, SIGTERM or SIGKILL) (these
//! five may move or cancel their pending event: ids below [`EventIds::movable`]), then the
//! autoscaler's evaluations, the deploys, the late-load board's refresh or changes
//! (`router.view`), the idle dynos' reports (`jiq`: one id for all, see `super::idle`), the
//! faults that act at an instant, the open workload's arrival, the closed-loop clients'
//! sends, and the requests' timed phases (a request has at most one timed phase at a time; by
//! slab index, the last range, open-ended).

use crate::kernel::EventQueue;
use crate::scenario::{Scenario, Workload};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    /// The open workload's next arrival.
    Arrival,
    /// A closed-loop client sends its next request.
    Send { client: u32 },
    /// A timed phase ends: a `[service]` hold, an `io` wait, or an FCFS resource's service.
    Done { req: u32 },
    /// A dyno's CPU finishes a job.
    Cpu { dyno: u32 },
    /// A processor-sharing resource finishes a job.
    Shared { resource: u32 },
    /// The next step of a dyno slot's lifecycle: its boot ends (up, or an R10 crash), its
    /// SIGTERM, or its SIGKILL (see `super::lifecycle`).
    Life { dyno: u32 },
    /// The autoscaler evaluates its rule.
    Autoscale,
    /// The next deploy (`[[fleet.deploy]]`) replaces the dynos.
    Deploy,
    /// The late-load board (`router.view`) is refreshed, or shows the changes now old enough
    /// (see `super::knowledge`).
    View,
    /// The earliest of the requests' deadlines (timeouts) is due.
    Timers,
    /// The first of the idle dynos' reports on their way reaches its router (`jiq`).
    Report,
    /// The first of the clients' retries waiting for their backoff is due (see
    /// `super::retries`).
    Retries,
    /// The next fault that acts at an instant (`dynos_lost`, see `super::faults`).
    Fault,
}

/// Event priorities (lower first at equal times).
pub(super) const COMPLETION: u8 = 0;
/// A deadline: after the completions (a response at the deadline is in time), before
/// everything else.
pub(super) const TIMEOUT: u8 = 1;
/// A dyno slot's lifecycle (a boot's end or R10, a SIGTERM, a SIGKILL, a daily restart):
/// after the completions and deadlines of the same moment (a request answered at a SIGKILL is
/// in time), before requests reach dynos.
pub(super) const LIFE: u8 = 2;
/// The autoscaler's evaluation: with the lifecycle, after the completions and deadlines of the
/// moment (it sees the requests answered then), before requests reach dynos.
pub(super) const AUTOSCALE: u8 = 2;
/// A deploy (`[[fleet.deploy]]`): with the lifecycle, whose steps it starts.
pub(super) const DEPLOY: u8 = 2;
/// The late-load board's refresh: with the lifecycle, after the completions of the moment (a
/// refresh at t shows the requests answered at t), before requests reach dynos and arrive.
pub(super) const VIEW: u8 = 2;
/// A fault that acts at an instant (`dynos_lost`): with the lifecycle, whose steps it starts.
pub(super) const FAULT: u8 = 2;
/// A routed request reaching its dyno after `router.connect`: after the completions (a thread
/// freed at t is free for it) and before the arrivals of t (it was routed before them).
pub(super) const CONNECTED: u8 = 3;
/// A client's retry: with the routed requests, before the arrivals of the moment (an open
/// workload's arrival must be the only event of [`ARRIVAL`]).
pub(super) const RETRY: u8 = 3;
pub(super) const ARRIVAL: u8 = 4;

/// Where each kind of event's ids begin.
#[derive(Debug, Clone, Copy)]
pub(super) struct EventIds {
    shared: u32,
    timers: u32,
    retries: u32,
    life: u32,
    autoscale: u32,
    deploy: u32,
    view: u32,
    report: u32,
    fault: u32,
    arrival: u32,
    send: u32,
    done: u32,
}

impl EventIds {
    pub fn new(dynos: u32, resources: u32, clients: u32) -> EventIds {
        let shared = dynos;
        let timers = shared + resources;
        let retries = timers + 1;
        let life = retries + 1;
        let autoscale = life + dynos;
        let deploy = autoscale + 1;
        let view = deploy + 1;
        let report = view + 1;
        let fault = report + 1;
        let arrival = fault + 1;
        let send = arrival + 1;
        let done = send + clients;
        EventIds {
            shared,
            timers,
            retries,
            life,
            autoscale,
            deploy,
            view,
            report,
            fault,
            arrival,
            send,
            done,
        }
    }

    /// Ids below this may move or be cancelled: the CPUs', the shared resources', the
    /// deadlines', the retries' and the dynos' lifecycles'.
    pub fn movable(&self) -> u32 {
        self.autoscale
    }

    #[inline]
    pub fn id(&self, event: Event) -> u32 {
        match event {
            Event::Cpu { dyno } => dyno,
            Event::Shared { resource } => self.shared + resource,
            Event::Timers => self.timers,
            Event::Life { dyno } => self.life + dyno,
            Event::Autoscale => self.autoscale,
            Event::Deploy => self.deploy,
            Event::View => self.view,
            Event::Report => self.report,
            Event::Retries => self.retries,
            Event::Fault => self.fault,
            Event::Arrival => self.arrival,
            Event::Send { client } => self.send + client,
            Event::Done { req } => self
                .done
                .checked_add(req)
                .expect("fewer requests in flight than event ids"),
        }
    }

    #[inline]
    pub fn event(&self, id: u32) -> Event {
        if id >= self.done {
            Event::Done {
                req: id - self.done,
            }
        } else if id < self.shared {
            Event::Cpu { dyno: id }
        } else if id < self.timers {
            Event::Shared {
                resource: id - self.shared,
            }
        } else if id == self.timers {
            Event::Timers
        } else if id == self.retries {
            Event::Retries
        } else if id < self.autoscale {
            Event::Life {
                dyno: id - self.life,
            }
        } else if id == self.autoscale {
            Event::Autoscale
        } else if id == self.deploy {
            Event::Deploy
        } else if id == self.view {
            Event::View
        } else if id == self.report {
            Event::Report
        } else if id == self.fault {
            Event::Fault
        } else if id == self.arrival {
            Event::Arrival
        } else {
            Event::Send {
                client: id - self.send,
            }
        }
    }
}

/// The queue with the engine's events: [`EventQueue`] of ids, translated; and the open
/// workload's next arrival, kept beside the queue rather than in it.
///
/// An open workload has one arrival pending at every moment, and each arrival schedules the
/// next: through the heap that was a push and a pop per request. Beside it, the arrival is
/// compared with the heap's first event instead. The order is the same: the arrival is the
/// only event of priority [`ARRIVAL`] in an open workload (clients' sends are the closed
/// loop's), so at equal times the heap's event, a completion or a boot, goes first; and
/// sequence numbers only order events of equal time and priority.
#[derive(Debug)]
pub(super) struct Events {
    queue: EventQueue,
    ids: EventIds,
    /// When the open workload's next arrival is due, if one is pending.
    arrival: Option<f64>,
    /// Whether a CPU's or a PS resource's completion stays at the heap's root when it comes
    /// ([`EventQueue::pop_in_place`]): its handler always moves or cancels it (see
    /// `schedule_next`). Not when the engine reads ahead: [`Self::peek`] must then name the
    /// event after it.
    in_place: bool,
}

/// Buckets of far events ([`EventQueue::with_buckets`]) for large fleets: this many, each a
/// time window in which about [`EVENTS_PER_WINDOW`] events are expected. The heap then holds
/// a few thousand events (a few windows' worth) rather than every pending one; the ring spans
/// about half a million events' worth of time (at 1 M requests/s of three phases, 0.13 s):
/// an event further ahead waits in its bucket for another turn.
const BUCKETS: usize = 256;
const EVENTS_PER_WINDOW: f64 = 2048.0;

impl Events {
    /// `events_per_second`: about how many events the run will have a second, for a queue
    /// that keeps far events in buckets (None: the heap alone).
    pub fn new(
        capacity: usize,
        ids: EventIds,
        in_place: bool,
        events_per_second: Option<f64>,
    ) -> Events {
        let queue = match events_per_second {
            Some(rate) if rate > 0.0 && rate.is_finite() && !in_place => {
                let width = EVENTS_PER_WINDOW / rate;
                EventQueue::with_buckets(capacity, ids.movable(), width, BUCKETS)
            }
            _ => EventQueue::new(capacity, ids.movable()),
        };
        Events {
            queue,
            ids,
            arrival: None,
            in_place,
        }
    }

    /// The queue for a run of `s` on `slots` dyno slots; `look_ahead`: whether the run reads
    /// ahead for the next event (large fleets), which then keeps far events in buckets.
    pub fn for_run(s: &Scenario, slots: u32, look_ahead: bool) -> Events {
        let clients = match &s.workload {
            Workload::Open(_) => 0,
            Workload::Closed(clients) => clients.count,
        };
        Events::new(
            s.total_slots().min(1 << 20) as usize + 2,
            EventIds::new(slots, s.resources.len() as u32, clients),
            !look_ahead,
            // Large fleets: an event for each phase's end and the arrival, about.
            look_ahead.then(|| {
                let phases = s.request.as_ref().map_or(1, |r| {
                    r.classes.iter().map(|c| c.phases.len()).max().unwrap_or(1)
                });
                s.arrival_rate() * (1 + phases) as f64
            }),
        )
    }

    #[inline]
    pub fn schedule(&mut self, time: f64, priority: u8, event: Event) {
        if event == Event::Arrival {
            debug_assert!(self.arrival.is_none() && priority == ARRIVAL);
            self.arrival = Some(time);
            return;
        }
        debug_assert!(
            self.arrival.is_none() || priority < ARRIVAL,
            "an open workload's arrival must be the only event of its priority"
        );
        self.queue.schedule(time, priority, self.ids.id(event));
    }

    /// Schedules request `req`'s timed phase to end at `time`; `dyno`: its dyno, for
    /// [`Self::peek`].
    #[inline]
    pub fn schedule_done(&mut self, time: f64, req: u32, dyno: u32) {
        let id = self.ids.id(Event::Done { req });
        self.queue.schedule_with(time, COMPLETION, id, dyno);
    }

    /// Schedules a CPU's or a shared resource's completion, moving the pending one; `req`:
    /// the request expected to finish first (for [`Self::peek`]).
    #[inline]
    pub fn reschedule(&mut self, time: f64, event: Event, req: u32) {
        self.queue
            .reschedule(time, COMPLETION, self.ids.id(event), req);
    }

    /// Schedules the deadlines' event at `time`, moving the pending one.
    #[inline]
    pub fn reschedule_timers(&mut self, time: f64) {
        self.queue
            .reschedule(time, TIMEOUT, self.ids.id(Event::Timers), 0);
    }

    /// Schedules the retries' event at `time`, moving the pending one.
    #[inline]
    pub fn reschedule_retries(&mut self, time: f64) {
        self.queue
            .reschedule(time, RETRY, self.ids.id(Event::Retries), 0);
    }

    /// Schedules dyno slot `dyno`'s next lifecycle step at `time`, moving a pending one.
    #[inline]
    pub fn reschedule_life(&mut self, time: f64, dyno: u32) {
        self.queue
            .reschedule(time, LIFE, self.ids.id(Event::Life { dyno }), 0);
    }

    /// Whether nothing is pending: no event in the queue and no arrival beside it (the run is
    /// over unless the current event schedules more).
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.arrival.is_none() && self.queue.is_empty()
    }

    /// Takes back a CPU's, a shared resource's, the deadlines' or a lifecycle's pending event.
    #[inline]
    pub fn cancel(&mut self, event: Event) {
        self.queue.cancel(self.ids.id(event));
    }

    /// The heap's next event (the arrival beside it may come first), with the request a
    /// completion expects to finish first (meaningful for CPU and shared completions), or a
    /// timed phase's dyno (see [`Self::schedule_done`]; meaningful when the request has one).
    #[inline]
    pub fn peek(&self) -> Option<(Event, u32)> {
        self.queue.peek().map(|(id, req)| (self.ids.event(id), req))
    }

    /// Takes back the open workload's pending arrival: a service of the federation of fleets
    /// takes its callers' calls, not arrivals of its own.
    pub fn no_arrivals(&mut self) {
        self.arrival = None;
    }

    /// When the next event comes ([`Self::pop`]'s time), if any: for the federation of
    /// fleets, which steps the fleet whose next event is the earliest.
    pub fn next_time(&self) -> Option<f64> {
        match (self.arrival, self.queue.next_time()) {
            (Some(a), Some(t)) => Some(a.min(t)),
            (a, t) => a.or(t),
        }
    }

    /// The next event: the run's loop (and the federation's) has it inline.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(f64, Event)> {
        if let Some(a) = self.arrival {
            // Strictly before: at equal times the heap's event has the lower priority.
            if self.queue.comes_first(a) {
                self.arrival = None;
                return Some((a, Event::Arrival));
            }
        }
        let next = if self.in_place {
            self.queue.pop_in_place()
        } else {
            self.queue.pop()
        };
        next.map(|(t, id)| (t, self.ids.event(id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_events_back() {
        let ids = EventIds::new(3, 2, 4);
        let events = [
            Event::Cpu { dyno: 0 },
            Event::Cpu { dyno: 2 },
            Event::Shared { resource: 0 },
            Event::Shared { resource: 1 },
            Event::Timers,
            Event::Life { dyno: 0 },
            Event::Life { dyno: 2 },
            Event::Autoscale,
            Event::Deploy,
            Event::View,
            Event::Report,
            Event::Retries,
            Event::Fault,
            Event::Arrival,
            Event::Send { client: 0 },
            Event::Send { client: 3 },
            Event::Done { req: 0 },
            Event::Done { req: 1000 },
        ];
        let mut seen = Vec::new();
        for e in events {
            let id = ids.id(e);
            assert_eq!(ids.event(id), e);
            assert!(!seen.contains(&id));
            seen.push(id);
            let movable = matches!(
                e,
                Event::Cpu { .. }
                    | Event::Shared { .. }
                    | Event::Timers
                    | Event::Retries
                    | Event::Life { .. }
            );
            assert_eq!(id < ids.movable(), movable);
        }
    }
}
