//! The traffic: the open workload's arrival process (a closed loop's clients are
//! [`super::clients`]), and what each arriving request is drawn to be, whoever sent it: its
//! `[service]` time (or the one a replayed trace carries), or its class and its phases' times
//! (with the server's own CPU, `app.request_cpu`, and the machine's jitter, `fleet.cpu_jitter`,
//! drawn into them), and its key (`arrivals.keys`). Drawn in the order of arrival, from streams
//! of their own, so that every policy sees the same requests (`[service]` times, and a
//! Poisson process's arrivals, a block ahead: the same draws in the same order).

use super::features::KEYS_CODE;
use super::slab::Slab;
use crate::arrivals::ArrivalProcess;
use crate::request::PhaseKind;
use crate::rng::SimRng;
use crate::scenario::{Scenario, Workload};
use rand_distr::Distribution;

/// The streams the traffic draws from (see [`super::streams`]).
pub(super) struct TrafficStreams {
    /// The open workload's arrival times.
    pub arrivals: SimRng,
    /// `[service]` times, or the classes and phase times of `[request]`.
    pub service: SimRng,
    /// `app.request_cpu`.
    pub request_cpu: SimRng,
    /// `fleet.cpu_jitter`.
    pub jitter: SimRng,
    /// `arrivals.keys`.
    pub keys: SimRng,
}

pub(super) struct Traffic {
    /// The open workload's arrival process (None: a closed loop).
    process: Option<Box<dyn ArrivalProcess>>,
    arrivals_rng: SimRng,
    service_rng: SimRng,
    request_cpu_rng: SimRng,
    /// `fleet.cpu_jitter`: each CPU phase's factor (None: none), and its draws.
    jitter: Option<rand_distr::LogNormal<f64>>,
    jitter_rng: SimRng,
    keys_rng: SimRng,
    /// The arriving request's service time when the workload carries it (a replayed trace).
    carried: Option<f64>,
    /// `[service]` times drawn ahead, a block at a time, and the next of them to take (see
    /// [`Self::next_service`]).
    services: Box<[f64; BLOCK]>,
    next_service: usize,
    /// A Poisson process of constant rate's arrivals drawn ahead, a block at a time, how many
    /// the block holds, and the next to take (see [`Self::next_arrival`]); None for every
    /// other process.
    arrivals: Option<Box<[f64; BLOCK]>>,
    arrivals_drawn: usize,
    next_arrival: usize,
}

/// `[service]` times, and a Poisson process's arrivals, drawn at once: the distribution's
/// `sample_into` over a block, whose loops the processor overlaps (the seed scenario's table
/// draws a normal variate and an `exp`), where one draw a request waits on its `exp` among the
/// request's other work; and the arrivals' gaps in one loop, not a call through the process
/// for each.
const BLOCK: usize = 256;

impl Traffic {
    pub fn new(s: &Scenario, replication: u64, streams: TrafficStreams) -> Traffic {
        Traffic {
            process: match &s.workload {
                Workload::Open(process) => Some(process.fresh(s.seed, replication)),
                Workload::Closed(_) => None,
            },
            arrivals_rng: streams.arrivals,
            service_rng: streams.service,
            request_cpu_rng: streams.request_cpu,
            jitter: (s.request.is_some() && s.cpu.jitter > 0.0).then(|| {
                // A mean-1 lognormal of coefficient of variation c: sigma² = ln(1 + c²).
                let var = (1.0 + s.cpu.jitter * s.cpu.jitter).ln();
                rand_distr::LogNormal::new(-var / 2.0, var.sqrt()).expect("a finite sigma")
            }),
            jitter_rng: streams.jitter,
            keys_rng: streams.keys,
            carried: None,
            services: Box::new([0.0; BLOCK]),
            next_service: BLOCK,
            arrivals: match &s.workload {
                Workload::Open(process) if process.is_homogeneous_poisson() => {
                    Some(Box::new([0.0; BLOCK]))
                }
                _ => None,
            },
            arrivals_drawn: 0,
            next_arrival: 0,
        }
    }

    /// The next `[service]` time of the stream. Drawn a block ahead: the stream serves
    /// nothing else, and `sample_into` draws what as many `sample`s would, in the same order
    /// (the direct engine draws its services so too), so every request has the time it had
    /// when each was drawn at its arrival.
    #[inline(always)]
    fn next_service(&mut self, s: &Scenario) -> f64 {
        if self.next_service == BLOCK {
            s.service
                .sample_into(&mut self.service_rng, &mut self.services[..]);
            self.next_service = 0;
        }
        let service = self.services[self.next_service];
        self.next_service += 1;
        service
    }

    /// The open workload's arrival after one at `now` (or its first, from 0); None: no more,
    /// or a closed loop. `now` is the arrival this returned last (the engine asks for the next
    /// as each arrives): so a Poisson process of constant rate draws its arrivals a block
    /// ahead (`next_arrivals` gives what as many `next_arrival`s from each last arrival would,
    /// and the stream serves nothing else). Not the others: a replayed trace hands the
    /// service of its last arrival drawn to the request arriving (`carry`).
    #[inline]
    pub fn next_arrival(&mut self, now: f64) -> Option<f64> {
        let process = self.process.as_mut()?;
        let Some(ahead) = self.arrivals.as_deref_mut() else {
            return process.next_arrival(now, &mut self.arrivals_rng);
        };
        if self.next_arrival == self.arrivals_drawn {
            debug_assert!(
                self.arrivals_drawn == 0 || ahead[self.arrivals_drawn - 1] == now,
                "the next arrival is asked for after the last one"
            );
            self.arrivals_drawn = process.next_arrivals(now, &mut self.arrivals_rng, ahead);
            self.next_arrival = 0;
            if self.arrivals_drawn == 0 {
                return None;
            }
        }
        let t = ahead[self.next_arrival];
        self.next_arrival += 1;
        Some(t)
    }

    /// An open workload's request arrives: the service time it carries, if any, is its own.
    #[inline]
    pub fn carry(&mut self) {
        if let Some(process) = &self.process {
            let mut carried = [0.0];
            self.carried = process.carried_services(&mut carried).then_some(carried[0]);
        }
    }

    /// Draws what request `req` is (in its slab entry: its class, its phases' times, its key);
    /// returns its service: its `[service]` time, or the sum of its phases' as the app asked
    /// for them.
    #[inline(always)]
    pub fn draw<const EXTRAS: bool>(&mut self, s: &Scenario, slab: &mut Slab, req: u32) -> f64 {
        let service = match &s.request {
            // A replayed trace's own time, or one drawn.
            None => match self.carried.take() {
                Some(service) => service,
                None => self.next_service(s),
            },
            Some(model) => {
                let at = req as usize * slab.stride;
                let times = &mut slab.times[at..];
                // The service is what the app's phases asked for, as drawn (and as the
                // testbed sends them, `crate::drawn`): not the server's own CPU, nor the
                // machine's jitter.
                let (class, sum) = model.draw(&mut self.service_rng, times);
                slab.entries[req as usize].class = class as u32;
                let phases = &model.classes[class].phases;
                if phases[0].server {
                    let x = phases[0].time.sample(&mut self.request_cpu_rng);
                    // The server's CPU and the app's first CPU phase are one stretch of
                    // work on the thread, not two turns for the cores.
                    if phases.get(1).is_some_and(|p| p.kind == PhaseKind::Cpu) {
                        times[1] += x;
                    } else {
                        times[0] = x;
                    }
                }
                if let Some(jitter) = &self.jitter {
                    for (k, phase) in phases.iter().enumerate() {
                        if phase.kind == PhaseKind::Cpu {
                            times[k] *= jitter.sample(&mut self.jitter_rng);
                        }
                    }
                }
                sum
            }
        };
        if let Some(keys) = s.keys.as_ref().filter(|_| EXTRAS && KEYS_CODE) {
            slab.keys[req as usize] = keys.draw(&mut self.keys_rng);
        }
        service
    }
}
