//! Join-Idle-Queue's reports (`jiq`): a dyno that becomes idle (nothing at it, from any
//! router: it knows its own state) reports to one router, which lists it (the policy's I-queue,
//! [`crate::policy::IdleList`]); the router sends its next request there.
//!
//! When a dyno reports: when its last request leaves it (its thread freed with none waiting),
//! when it comes up (it boots idle), and at the start for the initial fleet, each dyno
//! reporting at t = 0 as if it had just become idle (so with a report delay, the lists are
//! empty until then and the first requests are routed at random). A dyno is on one list at
//! most: while it is listed, or its report is on its way, it sends no other, even if it is
//! idle again after a request it got at random (Lu's I-queues list each idle server once; a
//! hit can land on a dyno busy meanwhile). A dyno going down leaves its list, and a report
//! it sent before is dropped on arrival.
//!
//! To which router: `jiq_report_d` routers drawn (distinct, from the idle reports' own random
//! stream), and the one with the shortest list, ties to the earlier draw (JIQ-SQ(d); one draw
//! is JIQ-Random). The choice is made when the dyno reports, from the lists' lengths then;
//! the report reaches the router `jiq_report_delay` later. One delay for all, so the reports
//! on their way arrive in the order they were sent: one FIFO of them, and one pending event,
//! for the first.
//!
//! With `router.aperture`, a dyno reports only to the routers whose subset holds it (drawn
//! among those); a dyno in no subset reports to none. A report that arrives at a router whose
//! subset no longer holds the dyno goes on at once to another router chosen the same way, and
//! a listed dyno that leaves its router's subset leaves the list (and reports again if idle).

use super::aperture::Aperture;
use super::slab::NONE;
use crate::alloc::filled;
use crate::error::Result;
use crate::policy::{IdleReporting, RoutingPolicy};
use crate::rng::SimRng;
use rand::Rng;
use std::collections::VecDeque;

/// In `listed`: the dyno's report is on its way.
const ON_ITS_WAY: u32 = u32::MAX - 1;

pub(super) struct IdleReports {
    reporting: IdleReporting,
    /// Per dyno slot: the router whose list holds it, [`ON_ITS_WAY`], or [`NONE`].
    listed: Vec<u32>,
    /// Per dyno slot: how many times it went down; a report carries the count it was sent at.
    downs: Vec<u32>,
    /// Reports on their way, in the order they arrive.
    on_their_way: VecDeque<Report>,
    rng: SimRng,
    /// The dyno the last routing decision took from a list (for the dispatch to tell a hit).
    hit: Option<usize>,
    /// With an aperture: the routers a dyno may report to (reused).
    eligible: Vec<usize>,
}

#[derive(Debug, Clone, Copy)]
struct Report {
    at: f64,
    dyno: u32,
    router: u32,
    downs: u32,
}

impl IdleReports {
    pub fn new(reporting: IdleReporting, slots: usize, rng: SimRng) -> Result<IdleReports> {
        Ok(IdleReports {
            reporting,
            listed: filled(slots, NONE)?,
            downs: filled(slots, 0)?,
            on_their_way: VecDeque::new(),
            rng,
            hit: None,
            eligible: Vec::new(),
        })
    }

    /// `dyno` is idle and up at `now`: unless it is listed, or its report is on its way, it
    /// reports to a router, chosen now. Returns when a report event must be scheduled (the
    /// first report on its way); a report without delay is delivered at once.
    pub fn report(
        &mut self,
        dyno: usize,
        now: f64,
        policies: &mut [Box<dyn RoutingPolicy>],
        aperture: Option<&Aperture>,
    ) -> Option<f64> {
        if self.listed[dyno] != NONE {
            return None;
        }
        let router = self.choose(dyno, policies, aperture)?;
        if self.reporting.delay == 0.0 {
            self.list(dyno, router, policies);
            return None;
        }
        self.listed[dyno] = ON_ITS_WAY;
        let at = now + self.reporting.delay;
        let first = self.on_their_way.is_empty();
        self.on_their_way.push_back(Report {
            at,
            dyno: dyno as u32,
            router: router as u32,
            downs: self.downs[dyno],
        });
        first.then_some(at)
    }

    /// The router `dyno`'s report goes to: the shortest list of `d` drawn (among the routers
    /// whose subset holds it, with an aperture; None if none does).
    fn choose(
        &mut self,
        dyno: usize,
        policies: &mut [Box<dyn RoutingPolicy>],
        aperture: Option<&Aperture>,
    ) -> Option<usize> {
        let routers = match aperture {
            None => policies.len(),
            Some(aperture) => {
                self.eligible.clear();
                self.eligible
                    .extend((0..policies.len()).filter(|&r| aperture.members(r).contains(dyno)));
                self.eligible.len()
            }
        };
        let router = |i: usize| {
            if aperture.is_some() {
                self.eligible[i]
            } else {
                i
            }
        };
        let d = self.reporting.d.min(routers);
        if routers <= 1 {
            return (routers == 1).then(|| router(0));
        }
        if d == 1 {
            let i = self.rng.random_range(0..routers);
            return Some(router(i));
        }
        let mut best = (usize::MAX, 0);
        for i in rand::seq::index::sample(&mut self.rng, routers, d) {
            let len = list_of(&mut policies[router(i)]).len();
            if len < best.0 {
                best = (len, router(i));
            }
        }
        Some(best.1)
    }

    fn list(&mut self, dyno: usize, router: usize, policies: &mut [Box<dyn RoutingPolicy>]) {
        list_of(&mut policies[router]).push(dyno);
        self.listed[dyno] = router as u32;
    }

    /// Delivers the reports due by `now`; returns when the next one is due.
    pub fn deliver(
        &mut self,
        now: f64,
        policies: &mut [Box<dyn RoutingPolicy>],
        aperture: Option<&Aperture>,
    ) -> Option<f64> {
        while let Some(&r) = self.on_their_way.front() {
            if r.at > now {
                return Some(r.at);
            }
            self.on_their_way.pop_front();
            let dyno = r.dyno as usize;
            if r.downs != self.downs[dyno] {
                continue;
            }
            let mut router = Some(r.router as usize);
            if let Some(aperture) = aperture {
                if !aperture.members(r.router as usize).contains(dyno) {
                    router = self.choose(dyno, policies, Some(aperture));
                }
            }
            match router {
                Some(router) => self.list(dyno, router, policies),
                None => self.listed[dyno] = NONE,
            }
        }
        None
    }

    /// `dyno` left `router`'s subset: off its list, if that is where it is.
    pub fn unlist(&mut self, dyno: usize, router: usize, policies: &mut [Box<dyn RoutingPolicy>]) {
        if self.listed[dyno] == router as u32 {
            list_of(&mut policies[router]).remove(dyno);
            self.listed[dyno] = NONE;
        }
    }

    /// After a routing decision by `router`: the dyno it took from its list, if any, is no
    /// longer listed.
    pub fn routed(&mut self, router: &mut Box<dyn RoutingPolicy>) {
        self.hit = list_of(router).take_hit();
        if let Some(dyno) = self.hit {
            self.listed[dyno] = NONE;
        }
    }

    /// The dyno the last routing decision took from a list (once).
    pub fn take_hit(&mut self) -> Option<usize> {
        self.hit.take()
    }

    /// `dyno` is down: off its list (the policies are told apart), and its report on its way,
    /// if any, is dropped when it arrives.
    pub fn down(&mut self, dyno: usize) {
        self.listed[dyno] = NONE;
        self.downs[dyno] = self.downs[dyno].wrapping_add(1);
    }
}

fn list_of(policy: &mut Box<dyn RoutingPolicy>) -> &mut dyn crate::policy::IdleList {
    policy
        .idle_list()
        .expect("a policy of Knowledge::IdleReports keeps an idle list")
}
