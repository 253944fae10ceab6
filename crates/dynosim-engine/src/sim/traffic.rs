//! The traffic: the open workload's arrival process (a closed loop's clients are
//! [`super::clients`]), and what each arriving request is drawn to be, whoever sent it: its
//! `[service]` time (or the one a replayed trace carries), or its class and its phases' times
//! (with the server's own CPU, `app.request_cpu`, and the machine's jitter, `fleet.cpu_jitter`,
//! drawn into them), and its key (`arrivals.keys`). Drawn at arrival, from streams of their
//! own, so that every policy sees the same requests.

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
    services: Box<[f64; SERVICE_BLOCK]>,
    next_service: usize,
}

/// `[service]` times drawn at once: the distribution's `sample_into` over a block, whose
/// loops the processor overlaps (the seed scenario's table draws a normal variate and an
/// `exp`), where one draw a request waits on its `exp` among the request's other work.
const SERVICE_BLOCK: usize = 256;

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
            services: Box::new([0.0; SERVICE_BLOCK]),
            next_service: SERVICE_BLOCK,
        }
    }

    /// The next `[service]` time of the stream. Drawn a block ahead: the stream serves
    /// nothing else, and `sample_into` draws what as many `sample`s would, in the same order
    /// (the direct engine draws its services so too), so every request has the time it had
    /// when each was drawn at its arrival.
    #[inline(always)]
    fn next_service(&mut self, s: &Scenario) -> f64 {
        if self.next_service == SERVICE_BLOCK {
            s.service
                .sample_into(&mut self.service_rng, &mut self.services[..]);
            self.next_service = 0;
        }
        let service = self.services[self.next_service];
        self.next_service += 1;
        service
    }

    /// The open workload's arrival after one at `now` (or its first, from 0); None: no more,
    /// or a closed loop.
    #[inline]
    pub fn next_arrival(&mut self, now: f64) -> Option<f64> {
        let process = self.process.as_mut()?;
        process.next_arrival(now, &mut self.arrivals_rng)
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
