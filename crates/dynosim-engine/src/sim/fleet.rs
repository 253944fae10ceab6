//! The fleet's lifecycle state: which dyno slot holds a dyno and where that dyno is in its
//! life (booting, up, draining, terminating), the formation (the dynos asked for, in the order
//! they were started), the counts an autoscaler is shown, and the draws of boot times and
//! daily restarts. The transitions themselves are
//! in [`super::lifecycle`]; the routers learn of them through [`super::router::Routers`].
//!
//! A slot is a place in the engine's per-dyno arrays; a dyno is one life in a slot, from its
//! start to its exit. A dyno removed and a dyno added later in the same slot are different
//! dynos (the per-dyno figures follow dynos, not slots: see `crate::measure`).

use crate::alloc::filled;
use crate::error::Result;
use crate::rng::SimRng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Life {
    /// No dyno in the slot.
    Stopped,
    /// Started: up at its boot's end, unless the boot outlasts `fleet.boot_timeout` (an R10
    /// crash at the timeout, and a new boot). A dyno restarted for memory (R15) boots again.
    Booting,
    /// Routed to (or, for a preboot deploy's new dyno, booted and waiting for the others).
    Up,
    /// Marked down: no router sends it anything more; it works on what it holds until its
    /// SIGTERM.
    Draining,
    /// SIGTERM: its server stops accepting (its backlog and later arrivals fail, H13) and
    /// finishes the requests its processes hold within `fleet.shutdown_grace`; SIGKILL fails
    /// the rest (`errors.shutdown`). It exits as soon as it holds none.
    Terminating,
}

#[derive(Debug)]
pub(super) struct Fleet {
    pub life: Vec<Life>,
    /// For a booting slot: whether its pending event is its boot's end (false: the boot
    /// outlasts the timeout, and the event is its R10 crash).
    pub boots_in_time: Vec<bool>,
    /// The dynos asked for (booting or up), in the order they were started: Heroku's web.1,
    /// web.2... A scale-down stops the last.
    pub formation: Vec<u32>,
    /// Slots with no dyno, the lowest first.
    free: BinaryHeap<Reverse<u32>>,
    /// Dynos asked for while every slot was taken: each starts when a slot frees.
    pub waiting_for_slot: u32,
    /// A preboot deploy's new dynos (booting or booted, not routed to yet, not in the
    /// formation), and how many of them are up.
    pub incoming: Vec<u32>,
    pub incoming_up: u32,
    /// The next deploy (an index into the scenario's).
    pub next_deploy: usize,
    pub booting: u32,
    pub up: u32,
    /// Draining or terminating.
    pub stopping: u32,
    /// Boot times' draws (`fleet.boot_time`).
    pub boot_rng: SimRng,
    /// When each dyno's daily restart comes (`fleet.cycling`).
    pub cycling_rng: SimRng,
}

impl Fleet {
    /// `slots` slots, the first `dynos` of them up (the run's initial fleet), drawing boot
    /// times and daily restarts from the streams given.
    pub fn new(slots: u32, dynos: u32, boot_rng: SimRng, cycling_rng: SimRng) -> Result<Fleet> {
        let mut life = filled(slots as usize, Life::Stopped)?;
        for l in life.iter_mut().take(dynos as usize) {
            *l = Life::Up;
        }
        Ok(Fleet {
            life,
            boots_in_time: filled(slots as usize, true)?,
            formation: (0..dynos).collect(),
            free: (dynos..slots).map(Reverse).collect(),
            waiting_for_slot: 0,
            incoming: Vec::new(),
            incoming_up: 0,
            next_deploy: 0,
            booting: 0,
            up: dynos,
            stopping: 0,
            boot_rng,
            cycling_rng,
        })
    }

    /// The dynos asked for: booting, up, or waiting for a slot (Heroku's formation quantity,
    /// a Kubernetes scale's replicas). Dynos stopping are not counted.
    pub fn size(&self) -> u32 {
        self.formation.len() as u32 + self.waiting_for_slot
    }

    /// The dynos that exist, and are billed: booting, up or stopping.
    pub fn running(&self) -> u32 {
        self.booting + self.up + self.stopping
    }

    /// The dynos whose processes run requests: up or stopping.
    pub fn serving(&self) -> u32 {
        self.up + self.stopping
    }

    /// A free slot for a new dyno, the lowest; None when every slot is taken.
    pub fn take_slot(&mut self) -> Option<u32> {
        self.free.pop().map(|Reverse(slot)| slot)
    }

    pub fn free_slot(&mut self, slot: u32) {
        self.free.push(Reverse(slot));
    }

    /// Moves `dyno` from the stage it is in to `to`, keeping the counts.
    pub fn set(&mut self, dyno: usize, to: Life) {
        let from = std::mem::replace(&mut self.life[dyno], to);
        for (stage, delta) in [(from, -1i64), (to, 1)] {
            let count = match stage {
                Life::Booting => &mut self.booting,
                Life::Up => &mut self.up,
                Life::Draining | Life::Terminating => &mut self.stopping,
                Life::Stopped => continue,
            };
            *count = (i64::from(*count) + delta) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_stages_and_slots_are_reused_lowest_first() {
        let rng = || crate::rng::stream(1, 0, crate::rng::Stream::Boot);
        let mut f = Fleet::new(6, 3, rng(), rng()).unwrap();
        assert_eq!((f.size(), f.running(), f.serving()), (3, 3, 3));
        let a = f.take_slot().unwrap();
        let b = f.take_slot().unwrap();
        assert_eq!((a, b), (3, 4));
        f.set(a as usize, Life::Booting);
        f.formation.push(a);
        f.set(2, Life::Draining);
        f.formation.retain(|&d| d != 2);
        assert_eq!((f.booting, f.up, f.stopping), (1, 2, 1));
        assert_eq!((f.size(), f.running(), f.serving()), (3, 4, 3));
        f.set(2, Life::Stopped);
        f.free_slot(2);
        f.free_slot(b);
        assert_eq!(f.take_slot(), Some(2));
        assert_eq!((f.size(), f.running()), (3, 3));
    }
}
