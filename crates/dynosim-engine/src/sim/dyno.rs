//! A dyno's state: its accept queue (the listen backlog its processes share) and whether it
//! is up ([`Dyno`]), and its app server's processes: their busy threads, arenas and, with
//! greedy accept, queues ([`Processes`], for every dyno in one array). Its CPU is
//! [`super::cpu`]'s, its memory [`super::memory`]'s.

use super::slab::Fifo;
use crate::app::{Accept, AppServer};
use crate::rng::SimRng;
use rand::Rng;
use std::collections::VecDeque;

/// What most events read of a dyno, in half a cache line (aligned so as not to straddle
/// two): with 100,000 dynos every request's dyno is a cache miss, so its hot state is packed
/// apart from the rest (its processes, [`Processes`], its CPU and its memory are in arrays of
/// their own).
#[derive(Debug, Clone, Copy)]
#[repr(align(32))]
pub(super) struct Dyno {
    /// Requests holding a thread.
    pub busy: u32,
    /// Requests waiting for a thread in all: the accept queue and the processes' queues.
    pub waiting: u32,
    /// Processes holding at least one request.
    pub busy_processes: u32,
    /// Requests waiting for a thread, in order: the accept queue all processes share, or with
    /// greedy accept the backlog of those no process had room for. Linked through the
    /// requests' slab entries (see `super::slab::Slab::push_back`).
    pub accept: Fifo,
    /// Its processes run (not booting, restarting or stopped).
    pub up: bool,
    /// SIGTERM: its server no longer accepts connections; it exits once it holds nothing.
    pub closed: bool,
}

impl Dyno {
    pub const IDLE: Dyno = Dyno {
        busy: 0,
        waiting: 0,
        busy_processes: 0,
        accept: Fifo::EMPTY,
        up: true,
        closed: false,
    };
    /// `slots` dyno slots, the first `up` of them holding an idle dyno, the others none.
    pub fn slots(slots: u32, up: u32) -> crate::error::Result<Vec<Dyno>> {
        let mut dynos = crate::alloc::filled(slots as usize, Dyno::IDLE)?;
        for d in dynos.iter_mut().skip(up as usize) {
            d.up = false;
        }
        Ok(dynos)
    }
}

/// One process of a dyno.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Process {
    /// Requests it holds.
    pub busy: u32,
    /// malloc arenas it has made beyond its main one (counted when the app's memory
    /// counts arenas; 0 otherwise).
    pub arenas: u32,
    /// Greedy accept: the connections it holds, on its threads and in its queue.
    pub held: u32,
    /// Killed by the worker timeout and not yet replaced (its `busy` stays full meanwhile, so
    /// that no request is given to it).
    pub down: bool,
    /// Times it was killed (kept across its dyno's restarts): tells a replacement's boot
    /// from a stale one.
    pub kills: u32,
}

/// Every dyno's app server processes, dyno d's at `d * processes ..`: where the index says,
/// rather than behind a pointer of the dyno's (with 100,000 dynos, a cache miss more for each
/// request started or finished). With greedy accept, each process's own queue and the draw of
/// the process that wins a connection; the workers' overhead after each response
/// (`app.overhead`); and how many processes of the fleet hold a request.
#[derive(Debug)]
pub(super) struct Processes {
    all: Vec<Process>,
    per_dyno: usize,
    /// Whether arenas are counted.
    pub arenas: bool,
    /// Processes holding at least one request, fleet-wide.
    pub busy: u32,
    /// Greedy accept: each process's own queue of accepted requests waiting for its threads,
    /// in the order of `all` (empty for shared accept).
    queues: Vec<VecDeque<u32>>,
    /// Greedy accept: which process wins a connection; and the candidates, reused.
    accept_rng: SimRng,
    open: Vec<u32>,
    /// `app.overhead`'s draws.
    pub overhead_rng: SimRng,
}

impl Processes {
    pub fn new(
        app: &AppServer,
        dynos: u32,
        accept_rng: SimRng,
        overhead_rng: SimRng,
    ) -> crate::error::Result<Processes> {
        let per_dyno = app.processes as usize;
        let n = dynos as usize * per_dyno;
        Ok(Processes {
            all: crate::alloc::filled(n, Process::default())?,
            per_dyno,
            arenas: app.memory.counts_arenas(),
            busy: 0,
            queues: match app.accept {
                Accept::Shared => Vec::new(),
                Accept::Greedy { .. } => crate::alloc::filled(n, VecDeque::new())?,
            },
            accept_rng,
            open: Vec::new(),
            overhead_rng,
        })
    }

    #[inline]
    pub fn of(&self, dyno: usize, process: u32) -> &Process {
        &self.all[dyno * self.per_dyno + process as usize]
    }

    #[inline]
    pub fn of_mut(&mut self, dyno: usize, process: u32) -> &mut Process {
        &mut self.all[dyno * self.per_dyno + process as usize]
    }

    /// The process of `dyno` that takes the next request: the one holding the fewest (the
    /// lowest numbered among equals), if it has a thread free.
    #[inline]
    pub fn free(&self, dyno: usize, per_process: u32) -> Option<u32> {
        let base = dyno * self.per_dyno;
        let procs = &self.all[base..base + self.per_dyno];
        let (mut p, mut busy) = (0, procs[0].busy);
        for (i, proc) in procs.iter().enumerate().skip(1) {
            // Strictly fewer: the lowest numbered among equals.
            if proc.busy < busy {
                (p, busy) = (i, proc.busy);
            }
        }
        (busy < per_process).then_some(p as u32)
    }

    /// Greedy accept: the process of `dyno` that wins a connection, drawn among those with
    /// room for another (fewer than `limit` held); None when none has room.
    #[inline]
    pub fn accepting(&mut self, dyno: usize, limit: u32) -> Option<u32> {
        self.open.clear();
        let base = dyno * self.per_dyno;
        let all = &self.all;
        self.open
            .extend((0..self.per_dyno as u32).filter(|&p| all[base + p as usize].held < limit));
        match self.open.len() {
            0 => None,
            1 => Some(self.open[0]),
            n => Some(self.open[self.accept_rng.random_range(0..n)]),
        }
    }

    /// Whether processes have queues of their own (greedy accept).
    #[inline]
    pub fn greedy(&self) -> bool {
        !self.queues.is_empty()
    }

    /// Process `process` of `dyno`'s own queue (greedy accept).
    #[inline]
    pub fn queue(&mut self, dyno: usize, process: u32) -> &mut VecDeque<u32> {
        &mut self.queues[dyno * self.per_dyno + process as usize]
    }

    /// `dyno`'s processes' queues (greedy accept; none otherwise).
    pub fn queues_of(&mut self, dyno: usize) -> &mut [VecDeque<u32>] {
        if self.queues.is_empty() {
            return &mut [];
        }
        &mut self.queues[dyno * self.per_dyno..][..self.per_dyno]
    }

    /// `dyno`'s processes back to a fresh boot.
    pub fn reset(&mut self, dyno: usize) {
        for p in &mut self.all[dyno * self.per_dyno..][..self.per_dyno] {
            *p = Process {
                kills: p.kills,
                ..Process::default()
            };
        }
    }
}
