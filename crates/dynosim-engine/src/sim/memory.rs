//! A dyno's memory: each request a process holds, and each malloc arena it makes, adds to it.
//! Over the dyno's quota (R14) its CPU work slows down (`app.swap_slowdown`); at
//! `app.restart_at` times the quota (R15) the dyno restarts ([`super::lifecycle`]); threads
//! sharing too few arenas slow a process's CPU work too (`app.arena_contention`): what a
//! change does is [`super::threads`]'. This keeps the bytes: each dyno's, the fleet's, and how
//! many dynos are over their quota (with the busy processes, the fleet's levels the observer
//! is told of). (What a run's state costs the machine that simulates it is
//! [`crate::state_size`], not this.)

use crate::alloc::filled;
use crate::app::AppServer;
use crate::error::Result;
use crate::scenario::Scenario;

pub(super) struct Memory {
    /// Whether dynos keep memory and may restart (`[app.memory]`).
    pub modelled: bool,
    /// Bytes each dyno slot holds now (none while it holds no dyno).
    bytes: Vec<f64>,
    /// The fleet's bytes, and its dynos over their quota.
    pub fleet: f64,
    pub over_quota: u32,
    quota: f64,
}

impl Memory {
    /// `slots` dyno slots, the first `s.dynos` of them holding an idle dyno.
    pub fn new(s: &Scenario, slots: u32) -> Result<Memory> {
        let idle = idle(&s.app);
        let mut bytes = filled(slots as usize, idle)?;
        for b in bytes.iter_mut().skip(s.dynos as usize) {
            *b = 0.0;
        }
        Ok(Memory {
            modelled: s.app.memory.is_modelled(),
            bytes,
            fleet: f64::from(s.dynos) * idle,
            over_quota: if idle > s.app.memory.quota {
                s.dynos
            } else {
                0
            },
            quota: s.app.memory.quota,
        })
    }

    /// `dyno`'s memory changes by `delta` bytes; returns what it holds now.
    #[inline]
    pub fn change(&mut self, dyno: usize, delta: f64) -> f64 {
        let memory = &mut self.bytes[dyno];
        let was_over = *memory > self.quota;
        *memory += delta;
        let bytes = *memory;
        self.fleet += delta;
        let over = bytes > self.quota;
        if over != was_over {
            if over {
                self.over_quota += 1;
            } else {
                self.over_quota -= 1;
            }
        }
        bytes
    }

    /// `dyno` holds `bytes` from now on.
    pub fn set(&mut self, dyno: usize, bytes: f64) {
        let before = self.bytes[dyno];
        self.bytes[dyno] = bytes;
        self.fleet += bytes - before;
        match (before > self.quota, bytes > self.quota) {
            (true, false) => self.over_quota -= 1,
            (false, true) => self.over_quota += 1,
            _ => {}
        }
    }
}

/// A dyno's memory with no request: the dyno's base, each process and each of its threads.
pub(super) fn idle(app: &AppServer) -> f64 {
    let m = &app.memory;
    let processes = f64::from(app.processes);
    m.dyno + processes * (m.process + f64::from(app.os_threads) * m.thread)
}
