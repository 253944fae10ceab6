//! A dyno's state: its accept queue (the listen backlog its processes share), its processes'
//! busy threads, its CPU ([`Sharing`] of its cores), its memory and whether it is up.

use super::sharing::Sharing;
use crate::app::{Accept, AppServer, Memory};
use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub(super) struct Dyno {
    /// Requests holding a thread.
    pub busy: u32,
    /// Requests waiting for a thread, in order (slab indexes): the accept queue all processes
    /// share, or with greedy accept the backlog of those no process had room for.
    pub accept: VecDeque<u32>,
    /// Greedy accept: each process's own queue of accepted requests waiting for its threads,
    /// and the connections each holds (on threads and queued). Empty for shared accept.
    pub queues: Vec<VecDeque<u32>>,
    pub held: Vec<u32>,
    /// Requests waiting for a thread in all: the accept queue and the processes' queues.
    pub waiting: u32,
    /// Requests held by each process (one process for a dyno of plain slots).
    pub process_busy: Vec<u32>,
    /// Processes holding at least one request.
    pub busy_processes: u32,
    /// malloc arenas each process has made beyond its main one.
    pub arenas: Vec<u32>,
    pub cpu: Sharing,
    pub up: bool,
    /// Bytes held now.
    pub memory: f64,
}

impl Dyno {
    pub fn new(app: &AppServer, cores: u32, cpu: bool) -> Dyno {
        let processes = app.processes as usize;
        let mut cpu = Sharing::new(cores, if cpu { app.processes } else { 0 }, cpu && app.lock);
        cpu.set_slowdown(app.memory.slowdown(idle_memory(app)));
        Dyno {
            busy: 0,
            accept: VecDeque::new(),
            queues: match app.accept {
                Accept::Shared => Vec::new(),
                Accept::Greedy { .. } => vec![VecDeque::new(); processes],
            },
            held: match app.accept {
                Accept::Shared => Vec::new(),
                Accept::Greedy { .. } => vec![0; processes],
            },
            waiting: 0,
            process_busy: vec![0; processes],
            busy_processes: 0,
            arenas: if app.memory.counts_arenas() {
                vec![0; processes]
            } else {
                Vec::new()
            },
            cpu,
            up: true,
            memory: idle_memory(app),
        }
    }

    /// The process that takes the next request: the one holding the fewest (the lowest
    /// numbered among equals), if it has a thread free.
    #[inline]
    pub fn free_process(&self, per_process: u32) -> Option<u32> {
        if self.process_busy.len() == 1 {
            return (self.process_busy[0] < per_process).then_some(0);
        }
        let (p, &busy) = self
            .process_busy
            .iter()
            .enumerate()
            .min_by_key(|&(i, &b)| (b, i))
            .expect("a dyno has a process");
        (busy < per_process).then_some(p as u32)
    }

    /// Greedy accept: the processes with room for another connection (fewer than `limit`
    /// held), into `out`.
    #[inline]
    pub fn open_processes(&self, limit: u32, out: &mut Vec<u32>) {
        out.clear();
        out.extend((0..self.held.len() as u32).filter(|&p| self.held[p as usize] < limit));
    }

    /// Back to a fresh boot: no requests, idle memory.
    pub fn reset(&mut self, app: &AppServer) {
        self.busy = 0;
        self.accept.clear();
        self.queues.iter_mut().for_each(VecDeque::clear);
        self.held.iter_mut().for_each(|h| *h = 0);
        self.waiting = 0;
        self.process_busy.iter_mut().for_each(|b| *b = 0);
        self.busy_processes = 0;
        self.arenas.iter_mut().for_each(|a| *a = 0);
        self.memory = idle_memory(app);
    }
}

/// A dyno's memory with no request: the dyno's base, each process and each of its threads.
pub(super) fn idle_memory(app: &AppServer) -> f64 {
    let m: &Memory = &app.memory;
    let processes = f64::from(app.processes);
    m.dyno + processes * (m.process + f64::from(app.os_threads) * m.thread)
}
