//! Which features a run's hot path carries, chosen once per run.
//!
//! The feedback features (the clients' retries and circuit breaker, the routers' retries
//! after a timeout or an error, the concurrency limits, the faults, `app.wait_timeout`,
//! `app.service_timeout`, a dependency's timeout and retries, the stability verdict's goodput)
//! each look at every request: at its
//! send, when a thread takes it, at its answer. A scenario that uses none of them should pay
//! nothing for them (issue #36), so `Simulation` is generic over `FEEDBACK`, a constant, and
//! the run is built as `Simulation::<true>` only when [`feedback`] says the scenario uses one
//! of them: in `Simulation::<false>` each step's `if FEEDBACK { .. }` is compiled out, and the
//! loop is the one the engine had before they came.
//!
//! A feature added to the per-request path joins [`feedback`] (its state is then built only
//! where `FEEDBACK` holds: `Simulation::build` checks it) and guards its calls on the hot path
//! with `FEEDBACK`.

use crate::scenario::Scenario;

/// Whether the scenario uses any of the feedback features (see the module's comment).
pub(super) fn feedback(s: &Scenario) -> bool {
    s.client_retry.is_some()
        || s.client_breaker.is_some()
        || s.router_retry.beyond_refused()
        || s.router_limit.is_some()
        || s.app_limit.is_some()
        || !s.faults.is_empty()
        || s.app.wait_timeout.is_some()
        || s.app.service_timeout.is_some()
        || s.stability.is_some()
        || s.resources
            .iter()
            .any(|r| r.timeout.is_some() || r.retries > 0)
}
