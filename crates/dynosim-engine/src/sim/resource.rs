//! A shared resource's state: its pools of connections and its servers (first come, first
//! served, or processor sharing through [`Sharing`]).

use super::sharing::{Sharing, SharingStore};
use crate::resource_spec::{Discipline, PoolScope, Resource};
use crate::scenario::Scenario;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub(super) struct Pool {
    pub free: u32,
    /// Requests waiting for a connection, with when they began to wait.
    pub waiting: VecDeque<u32>,
}

#[derive(Debug)]
pub(super) struct ResourceState {
    pub servers: u32,
    pub discipline: Discipline,
    pub scope: Option<PoolScope>,
    pub pools: Vec<Pool>,
    /// FCFS: servers at work and the requests waiting for one.
    pub busy: u32,
    pub queue: VecDeque<u32>,
    /// PS: the jobs sharing the servers.
    pub sharing: Sharing,
    pub store: SharingStore,
    /// `timeout` (statement_timeout), and the app's `retries` of a failed query.
    pub timeout: Option<f64>,
    pub retries: u32,
}

impl ResourceState {
    /// The state of each of `s`'s resources, for `dynos` dyno slots.
    pub fn all(s: &Scenario, dynos: u32) -> Vec<ResourceState> {
        s.resources
            .iter()
            .map(|r| ResourceState::new(r, dynos, s.app.processes))
            .collect()
    }

    pub fn new(r: &Resource, dynos: u32, processes: u32) -> ResourceState {
        let store = SharingStore::new(1, 1, None, r.servers, false).expect("one group of no jobs");
        let (pools, scope) = match r.pool {
            None => (Vec::new(), None),
            Some((size, scope)) => {
                let n = match scope {
                    PoolScope::App => 1,
                    PoolScope::Dyno => dynos as usize,
                    PoolScope::Process => dynos as usize * processes as usize,
                };
                (
                    vec![
                        Pool {
                            free: size,
                            waiting: VecDeque::new(),
                        };
                        n
                    ],
                    Some(scope),
                )
            }
        };
        ResourceState {
            servers: r.servers,
            discipline: r.discipline,
            scope,
            pools,
            busy: 0,
            queue: VecDeque::new(),
            sharing: store.sharing(0),
            store,
            timeout: r.timeout,
            retries: r.retries,
        }
    }

    /// The pool a request on `dyno`'s process `process` takes connections from.
    #[inline]
    pub fn pool_of(&self, dyno: u32, process: u32, processes: u32) -> Option<usize> {
        self.scope.map(|scope| match scope {
            PoolScope::App => 0,
            PoolScope::Dyno => dyno as usize,
            PoolScope::Process => dyno as usize * processes as usize + process as usize,
        })
    }

    /// Servers at work now.
    pub fn busy_servers(&self) -> f64 {
        match self.discipline {
            Discipline::Fcfs => f64::from(self.busy),
            Discipline::Ps => self.sharing.busy_servers(&self.store),
        }
    }
}
