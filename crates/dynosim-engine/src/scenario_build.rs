//! Loading a scenario: parse it, validate it ([`crate::scenario`]) and its services
//! ([`crate::services`]), and check that one replication's engine state fits `run.max_memory`
//! ([`crate::state_size`]). The memory check needs to know which engine will run the scenario,
//! and the services are scenarios themselves, both above the scenario in the crate's layers;
//! so the entry points live here, above them.

use crate::direct::Eligible;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::scenario::{Scenario, ScenarioSpec};
use std::path::Path;

impl Scenario {
    /// Parses and validates a scenario given as JSON; relative file paths in it (an empirical
    /// sample file) are taken from `base_dir`. Validation can take a while (the moments of a
    /// rounded distribution are summed over up to 10⁷ cells); `interrupted` is polled meanwhile,
    /// and when it returns true validation stops with [`crate::Error::Interrupted`].
    pub fn from_json(
        text: &str,
        base_dir: &Path,
        interrupted: &(dyn Fn() -> bool + Sync),
    ) -> Result<Scenario> {
        Scenario::build(&ScenarioSpec::parse(text)?, base_dir, interrupted)
    }

    /// Validates a parsed scenario and builds its shards; see [`Scenario::from_json`].
    pub fn build(
        spec: &ScenarioSpec,
        base_dir: &Path,
        interrupted: &(dyn Fn() -> bool + Sync),
    ) -> Result<Scenario> {
        let mut scenario = Scenario::validate(spec, base_dir, interrupted)?;
        if spec.services.is_some() || !scenario.calls.is_empty() {
            scenario.services = crate::services::build(spec, &scenario, base_dir, interrupted)?;
            crate::services::set_call_holds(&mut scenario);
            crate::services::judge_faults_together(&mut scenario, spec);
        }
        scenario.check_engine()?;
        scenario.check_memory()?;
        scenario.shards = crate::shard::build(&scenario, spec, base_dir, interrupted)?;
        Ok(scenario)
    }

    /// Refuses `run.engine = "direct"` for a scenario the direct engine cannot run, saying why.
    fn check_engine(&self) -> Result<()> {
        if self.engine == Engine::Direct {
            if let Err(why) = Eligible::of(self) {
                return Err(Error::config(
                    "run.engine",
                    format!(
                        "the direct engine cannot run this scenario ({why}); use \"events\" \
                         or \"auto\""
                    ),
                ));
            }
        }
        Ok(())
    }
}
