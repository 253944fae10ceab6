//! Which engine simulates a replication: the direct engine ([`crate::direct`]) for the
//! scenarios it expresses exactly, the event-driven one ([`crate::sim`]) for every scenario.

use crate::alloc::StateBytes;
use crate::direct;
use crate::error::Result;
use crate::measure::Measures;
use crate::result::ReplicationResult;
pub use crate::scenario::Engine;
use crate::scenario::Scenario;
use crate::sim;

impl Engine {
    /// The engine that runs the scenario: the one `run.engine` names, or for `auto` the one
    /// [`Engine::for_scenario`] picks.
    pub fn chosen(scenario: &Scenario) -> Engine {
        match scenario.engine {
            Engine::Auto => Engine::for_scenario(scenario),
            chosen => chosen,
        }
    }

    /// The engine that `Auto` picks for this scenario.
    pub fn for_scenario(scenario: &Scenario) -> Engine {
        if direct::can_run(scenario) {
            Engine::Direct
        } else {
            Engine::Events
        }
    }

    /// What a replication's state costs on the engine that `Auto` picks (see
    /// [`crate::state_size`]).
    pub fn state_bytes(self, scenario: &Scenario) -> StateBytes {
        match self {
            Engine::Direct => direct::state_bytes(scenario),
            Engine::Auto => Engine::for_scenario(scenario).state_bytes(scenario),
            Engine::Events => sim::state_bytes(scenario),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Engine::Auto => "auto",
            Engine::Events => "events",
            Engine::Direct => "direct",
        }
    }
}

/// Runs replication `replication` of the scenario. `interrupted` is polled now and then; when
/// it returns true the run stops with [`Error::Interrupted`].
pub fn run_replication(
    scenario: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<ReplicationResult> {
    run_replication_on(scenario.engine, scenario, replication, interrupted)
}

/// [`run_replication`] on a chosen engine (for the tests that compare the engines, and for
/// benchmarks).
pub fn run_replication_on(
    engine: Engine,
    scenario: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<ReplicationResult> {
    match engine {
        Engine::Direct => direct::run_replication(scenario, replication, interrupted),
        Engine::Auto if direct::can_run(scenario) => {
            // A timeout that fires under a policy that looks at the dynos is the event-driven
            // engine's to simulate (see direct::Timeouts): the same replication, run again.
            match direct::try_run_replication(scenario, replication, interrupted)? {
                Some(result) => Ok(result),
                None => sim::run_replication(scenario, replication, interrupted),
            }
        }
        Engine::Auto | Engine::Events => sim::run_replication(scenario, replication, interrupted),
    }
}

/// What a replication measured, before its figures are worked out: its measures, when its
/// window closed, and the engine that ran it. For the shards of a replication, whose measures
/// are merged before the figures (see [`crate::shard`]).
pub(crate) struct Measured {
    pub measures: Measures,
    pub end: f64,
    pub engine: &'static str,
}

/// [`run_replication_on`] up to the figures (see [`Measured`]).
pub(crate) fn measure_replication_on(
    engine: Engine,
    scenario: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Measured> {
    let events = |(measures, end)| Measured {
        measures,
        end,
        engine: Engine::Events.name(),
    };
    let direct = |(measures, end)| Measured {
        measures,
        end,
        engine: Engine::Direct.name(),
    };
    match engine {
        Engine::Direct => direct::try_measure_replication(scenario, replication, interrupted)?
            .map(direct)
            .ok_or_else(|| direct::timeout_fired(scenario, replication)),
        Engine::Auto if direct::can_run(scenario) => {
            match direct::try_measure_replication(scenario, replication, interrupted)? {
                Some(m) => Ok(direct(m)),
                None => sim::measure_replication(scenario, replication, interrupted).map(events),
            }
        }
        Engine::Auto | Engine::Events => {
            sim::measure_replication(scenario, replication, interrupted).map(events)
        }
    }
}
