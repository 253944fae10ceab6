//! A dyno's state: its accept queue (the listen backlog its processes share), its processes'
//! busy threads, its CPU ([`Sharing`] of its cores), its memory and whether it is up.

use super::sharing::{Sharing, SharingStore};
use crate::app::{AppServer, Memory};
use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub(super) struct Dyno {
    /// Requests holding a thread.
    pub busy: u32,
    /// Requests waiting for a thread, in order (slab indexes).
    pub accept: VecDeque<u32>,
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
    /// A dyno whose CPU is sharing 0 of `store` (see [`Sharing::placed`]).
    pub fn new(app: &AppServer, cores: u32, cpu: bool, store: &SharingStore) -> Dyno {
        let processes = app.processes as usize;
        let mut cpu = store.sharing(0, cores, cpu && app.lock);
        cpu.set_slowdown(app.memory.slowdown(idle_memory(app)));
        Dyno {
            busy: 0,
            accept: VecDeque::new(),
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

    /// Back to a fresh boot: no requests, idle memory.
    pub fn reset(&mut self, app: &AppServer) {
        self.busy = 0;
        self.accept.clear();
        self.process_busy.iter_mut().for_each(|b| *b = 0);
        self.busy_processes = 0;
        self.arenas.iter_mut().for_each(|a| *a = 0);
        self.memory = idle_memory(app);
    }
}

/// The store of every dyno's CPU jobs: a group per process (with `cpu`), each holding at most
/// the process's requests.
pub(super) fn cpu_store(
    app: &AppServer,
    dynos: u32,
    cpu: bool,
) -> crate::error::Result<SharingStore> {
    if cpu {
        SharingStore::new(dynos, app.processes, Some(app.per_process))
    } else {
        SharingStore::new(dynos, 1, Some(0))
    }
}

/// A dyno's memory with no request: the dyno's base, each process and each of its threads.
pub(super) fn idle_memory(app: &AppServer) -> f64 {
    let m: &Memory = &app.memory;
    let processes = f64::from(app.processes);
    m.dyno + processes * (m.process + f64::from(app.os_threads) * m.thread)
}
