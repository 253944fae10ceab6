//! dynosim-engine: a discrete-event simulator of HTTP requests routed across dynos.
//!
//! A [`Scenario`] (arrivals, service times, a fleet of dynos with slots, routers with a
//! policy) is built from its JSON form with [`Scenario::from_json`] and run with [`run`], which
//! returns a [`RunReport`]. Extension points are registries of trait implementations:
//! [`dist::REGISTRY`], [`policy::REGISTRY`], [`arrivals::REGISTRY`], [`autoscale::REGISTRY`].

pub mod alloc;
pub mod app;
pub mod arrivals;
pub mod autoscale;
pub mod breaker;
pub mod calls;
pub mod description;
pub mod direct;
pub mod dist;
pub mod drawn;
pub mod engine;
pub mod error;
pub mod fault;
pub mod fifo_dynos;
pub mod in_flight;
pub mod kernel;
pub mod limit;
mod measure;
pub mod params;
pub mod policy;
pub mod registry;
pub mod report;
pub mod request;
pub mod resource_spec;
pub mod result;
pub mod retry;
pub mod rng;
pub mod scenario;
mod scenario_build;
pub mod schema;
pub mod services;
pub mod shard;
pub mod sim;
pub mod stability;
pub mod state_size;
pub mod stats;
pub mod text_file;
pub mod theory;
pub mod timeout_spec;
pub mod units;
pub mod up_set;
pub mod users;
pub mod view;
pub mod workload;

pub use engine::{run_replication, run_replication_on, Engine};
pub use error::{Error, Result};
pub use report::{assemble, run, run_block, Block, Estimate, Gathered, RunReport};
pub use result::{Frame, ReplicationResult, Trace};
pub use scenario::{Scenario, ScenarioSpec};
pub use sim::trace_replication;

/// Never interrupts; for callers with no way to be stopped.
pub fn never_interrupted() -> bool {
    false
}
