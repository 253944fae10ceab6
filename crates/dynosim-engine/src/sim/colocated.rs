//! A router on the dyno's machine (`router.colocated_cpu`): its CPU work for each request,
//! drawn when the request arrives (as its phases are: the same work under every policy), half
//! done on the dyno's cores when the router sends the request there and half when it relays
//! the response. Those cores are the dyno's CPU's ([`super::cpu`]); this keeps the draws.

use crate::rng::SimRng;
use crate::scenario::Scenario;

pub(super) struct Colocated {
    rng: SimRng,
    /// Half of each request's draw, by its slab index, for its response (the other half went
    /// with its dispatch).
    half: Vec<f64>,
}

impl Colocated {
    /// The draws of `s`'s colocated router (None: its routers run elsewhere).
    pub fn of(s: &Scenario, rng: SimRng) -> Option<Colocated> {
        s.colocated_cpu.is_some().then(|| Colocated {
            rng,
            half: Vec::new(),
        })
    }

    /// Request `req` arrives: its router's work for it is drawn.
    #[inline]
    pub fn draw(&mut self, s: &Scenario, req: u32) {
        let work = s.colocated_cpu.as_ref().expect("router.colocated_cpu");
        let half = work.sample(&mut self.rng) / 2.0;
        let i = req as usize;
        if self.half.len() <= i {
            self.half.resize(i + 1, 0.0);
        }
        self.half[i] = half;
    }

    /// Half of the router's work for request `req`: for its dispatch, or for its response.
    #[inline]
    pub fn half(&self, req: u32) -> f64 {
        self.half[req as usize]
    }

    /// Request `req` is a retry of one whose router's work was drawn already: it keeps that
    /// half (the same request, sent again).
    #[inline]
    pub fn keep(&mut self, req: u32, half: f64) {
        let i = req as usize;
        if self.half.len() <= i {
            self.half.resize(i + 1, 0.0);
        }
        self.half[i] = half;
    }
}
