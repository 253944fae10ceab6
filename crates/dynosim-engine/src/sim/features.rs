//! Which features a run's hot path carries, chosen once per run.
//!
//! The feedback features (the clients' retries and circuit breaker, the routers' retries
//! after a timeout or an error, the concurrency limits, the faults, `app.wait_timeout`,
//! `app.service_timeout`, a dependency's timeout and retries, the stability verdict's goodput)
//! each look at every request: at its
//! send, when a thread takes it, at its answer. A scenario that uses none of them should pay
//! nothing for them (issue #36), so `Simulation` is generic over `FEEDBACK`, a constant, and
//! the run is built as `Simulation::<true, _, false>` only when [`feedback`] says the scenario uses one
//! of them: in `Simulation::<false, _, _>` each step's `if FEEDBACK { .. }` is compiled out, and the
//! loop is the one the engine had before they came.
//!
//! The second family, `EXTRAS` ([`extras`]): the lifecycle (an autoscaler fed by every
//! request, dynos that close their listener or go down, and so no dyno up to route to), the
//! requests' keys (`arrivals.keys`), the late board the routers read under `router.view`. A
//! fixed fleet of exact counts whose requests carry no key runs `Simulation::<_, false, _>`, where
//! their checks on the hot path (`Self::LIFECYCLE`, `Self::KEYS`, `Self::VIEWS`, and the routers'
//! and traffic's `EXTRAS`) are compiled out. Four loops for these two families.
//!
//! The third, `PLAIN` ([`plain`]): a run of neither family whose requests are each one
//! `[service]` hold on a thread, in an open workload, and that sets none of the per-request
//! options of the router and the app but the router's timeout (no timeout of the queue's, the
//! client's or the app's, no `router.connect`, `router.cost`, `router.colocated_cpu`,
//! `router.max_in_flight`, `app.overhead`, greedy accept, a memory model). Its loop,
//! `Simulation::<false, false, true>`, compiles out the checks of phases, those deadlines,
//! overhead, memory and the dyno model's levels on the request's path: the seed scenario's,
//! with Heroku's 30 s router timeout or without (docs/benchmarks.md). Five loops in all, one
//! chosen per run.
//!
//! A feature added to the per-request path joins a family (its state is then built only where
//! the family's constant holds: `Simulation::build` checks it) and guards its calls on the hot
//! path with that constant.
//!
//! What each costs a run that does not use it is measured against builds with that feature's
//! code compiled out: the engine crate's features `bench-no-lifecycle`, `bench-no-keys`,
//! `bench-no-views`, for instruction counts only (docs/benchmarks.md).

use crate::app::Accept;
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

/// Whether the run is a plain one (see the module's comment): every check that
/// `Simulation::<false, false, true>` compiles out would find nothing to do.
pub(super) fn plain(s: &Scenario) -> bool {
    !feedback(s)
        && !extras(s)
        && !s.has_calls()
        && s.request.is_none()
        && !s.workload.is_closed()
        && matches!(s.app.accept, Accept::Shared)
        && s.app.overhead.is_none()
        && s.app.timeout.is_none()
        && !s.app.memory.is_modelled()
        && !s.app.memory.counts_arenas()
        && s.queue_timeout.is_none()
        && s.client_timeout.is_none()
        && s.connect.is_none()
        && s.router_cost.is_none()
        && s.colocated_cpu.is_none()
        && s.max_in_flight.is_none()
}

/// Whether the scenario uses the lifecycle, keys or a late view (see the module's comment).
pub(super) fn extras(s: &Scenario) -> bool {
    lifecycle(s) || keys(s) || views(s)
}

/// Whether the scenario's fleet changes as it runs (or starts with no dyno): an autoscaler,
/// deploys, daily restarts, memory that may restart a dyno (R15), faults that may take dynos
/// down. Without any of them every dyno is up from the start to the end, and none closes its
/// listener.
pub(super) fn lifecycle(s: &Scenario) -> bool {
    s.autoscale.is_some()
        || !s.lifecycle.deploys.is_empty()
        || s.lifecycle.cycling.is_some()
        || s.app.memory.is_modelled()
        || !s.faults.is_empty()
        || s.dynos == 0
}

/// Whether requests carry keys (`arrivals.keys`).
pub(super) fn keys(s: &Scenario) -> bool {
    s.keys.is_some()
}

/// Whether the routers read a late board (`router.view`) rather than their own counts.
pub(super) fn views(s: &Scenario) -> bool {
    s.reads_board()
}

/// Measurement builds (docs/benchmarks.md): `--features bench-no-lifecycle`, `bench-no-keys`,
/// `bench-no-views` compile that feature's per-request code out of the event engine, to count
/// what it costs a scenario without it. True in every other build.
pub(super) const LIFECYCLE_CODE: bool = !cfg!(feature = "bench-no-lifecycle");
pub(super) const KEYS_CODE: bool = !cfg!(feature = "bench-no-keys");
pub(super) const VIEWS_CODE: bool = !cfg!(feature = "bench-no-views");

/// A measurement build refuses a scenario that uses the feature it compiled out.
pub(super) fn check_measurement_build(s: &Scenario) -> crate::error::Result<()> {
    let refused = [
        (!LIFECYCLE_CODE && lifecycle(s), "bench-no-lifecycle"),
        (!KEYS_CODE && keys(s), "bench-no-keys"),
        (!VIEWS_CODE && views(s), "bench-no-views"),
    ];
    match refused.iter().find(|(refuse, _)| *refuse) {
        Some((_, feature)) => Err(crate::error::Error::config(
            "",
            format!(
                "this engine was built with `{feature}`, for measurements: it cannot run a \
                 scenario that uses that feature"
            ),
        )),
        None => Ok(()),
    }
}
