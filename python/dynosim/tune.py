"""Tuning: the cheapest settings whose confidence intervals meet every target, the runner-up,
and the fixed fleet that meets the same targets, each priced.

    dynosim tune fleet.toml --vary autoscale.upscale_above=50ms,100ms,200ms \\
        --vary autoscale.downscale_delay=5min,10min --target "response.p95 <= 500ms"

Every point of the grid of ``--vary`` values runs as a sweep's point does (:mod:`dynosim.sweep`:
all its replications, points in parallel on every core), once per routing policy the scenario
has. A point meets a target when the far end of the metric's 95% interval does, as in
:mod:`dynosim.capacity` (the upper end for ``<=``, the lower for ``>=``). Each point is priced
by its dyno-seconds over the run's window (``fleet.dyno_seconds`` when the run reports it, a
fleet that changes size; else its dynos times the window), at its dyno type's price prorated
to the second (:func:`dynosim.cost.run_cost`), and ranked by dollars per day. A scenario with
services (docs/services.md) is priced as a whole app: each service's dyno-seconds at its own
dyno type's price on top of the entry fleet's. Targets may be any service's metrics
(``services.NAME.response.p99``), the service checked to exist before anything runs.

The fixed fleet is the scenario as given (``--set`` applied, ``--vary`` not), without its
``[autoscale]`` section if it has one, with the fewest dynos meeting the same targets
(:func:`dynosim.capacity.min_dynos`), priced the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from .capacity import Target, check_attainable, check_targets, min_dynos, shortfall, target_estimate
from .cost import SECONDS_PER_DAY, SECONDS_PER_HOUR, Pricing, RunCost, run_cost, service_pricing
from .errors import ScenarioError, UnstableError
from .output import finite
from .results import Estimate, PolicyResult, lookup
from .scenario import Scenario
from .sweep import Sweep

__all__ = ["AUTOSCALE", "DYNO_SECONDS", "Setting", "FixedFleet", "Tuning", "tune", "fixed_fleet", "result_cost",
           "without_autoscale"]

#: The scenario's autoscaler (issue 24): the fixed fleet is the scenario without it.
AUTOSCALE = "autoscale"
#: The dyno-seconds a run reports when its fleet changes size (issue 24).
DYNO_SECONDS = "fleet.dyno_seconds"


@dataclass
class Setting:
    """One point of the grid under one routing policy: its values, what its run gave for each
    target metric, whether it met them, and its cost."""

    index: int
    values: Dict[str, Any]
    policy: str
    status: str
    """``ok``, or ``unstable`` (not run: offered load >= 1) or ``overloaded`` (stopped)."""
    pricing: Pricing
    cost: RunCost
    estimates: Dict[str, Estimate] = field(default_factory=dict)
    met: Dict[str, bool] = field(default_factory=dict)
    """Each target's text, and whether the far end of its interval meets it."""
    steady_state: Optional[bool] = None

    @property
    def meets(self) -> bool:
        return self.status == "ok" and bool(self.met) and all(self.met.values())

    def miss(self, targets: Sequence[Target]) -> float:
        """How far the worst target's interval end is past its value, relative to the value
        (0 or below when every target is met); infinite without figures."""
        if self.status != "ok":
            return math.inf
        return max(_miss(t, self.estimates[t.metric]) for t in targets)

    def to_dict(self) -> Dict[str, Any]:
        return {"index": self.index, "settings": self.values, "policy": self.policy, "status": self.status,
                "steady_state": self.steady_state, "meets": self.meets, "met": self.met,
                "estimates": {k: vars(e) for k, e in self.estimates.items()},
                "cost": dict(self.cost.to_dict(), dyno_type=self.pricing.dyno_type, price=self.pricing.price)}


def _miss(target: Target, e: Estimate) -> float:
    gap = target.far_end(e) - target.value if target.upper else target.value - target.far_end(e)
    if math.isnan(gap):
        return math.inf
    return gap / target.value if target.value > 0 else gap


@dataclass
class FixedFleet:
    """The scenario without an autoscaler, with the fewest dynos meeting the targets."""

    policy: str
    without_autoscale: bool
    """True when the scenario had an ``[autoscale]`` section, which this fleet leaves out."""
    dynos: Optional[int] = None
    estimates: Dict[str, Estimate] = field(default_factory=dict)
    cost: Optional[RunCost] = None
    pricing: Optional[Pricing] = None
    reason: Optional[str] = None
    """Why there is none, when ``dynos`` is None."""
    counts_tried: int = 0
    not_steady: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        cost = None
        if self.cost is not None and self.pricing is not None:
            cost = dict(self.cost.to_dict(), dyno_type=self.pricing.dyno_type, price=self.pricing.price)
        return {"policy": self.policy, "without_autoscale": self.without_autoscale, "dynos": self.dynos,
                "estimates": {k: vars(e) for k, e in self.estimates.items()}, "cost": cost,
                "reason": self.reason, "counts_tried": self.counts_tried, "not_steady": self.not_steady}


@dataclass
class Tuning:
    """What ``tune`` found: every setting, in grid order, and the answer."""

    scenario: str
    targets: List[Target]
    vary: Dict[str, List[Any]]
    settings: List[Setting]
    fixed: Optional[FixedFleet]
    sweep: Sweep

    @property
    def ranked(self) -> List[Setting]:
        """The settings meeting every target, cheapest per day first; at equal cost the one
        with the most room under its tightest target first, then grid order."""
        return sorted((s for s in self.settings if s.meets),
                      key=lambda s: (s.cost.dollars_per_day, s.miss(self.targets), s.index))

    @property
    def best(self) -> Optional[Setting]:
        ranked = self.ranked
        return ranked[0] if ranked else None

    @property
    def runner_up(self) -> Optional[Setting]:
        ranked = self.ranked
        return ranked[1] if len(ranked) > 1 else None

    @property
    def closest(self) -> Optional[Setting]:
        """When none meets every target: the one whose worst target is missed by least
        (relative to the target; the cheaper on a tie), None if none ran."""
        ran = [s for s in self.settings if s.status == "ok"]
        if not ran:
            return None
        return min(ran, key=lambda s: (s.miss(self.targets), s.cost.dollars_per_day, s.index))

    @property
    def saving(self) -> Optional[Dict[str, float]]:
        """The best against the fixed fleet, $/day and as a fraction of the fixed fleet's cost
        (negative when the best costs more), or None without both."""
        best = self.best
        if best is None or self.fixed is None or self.fixed.cost is None:
            return None
        fixed = self.fixed.cost.dollars_per_day
        saved = fixed - best.cost.dollars_per_day
        return {"dollars_per_day": saved, "fraction": saved / fixed if fixed > 0 else math.nan}

    def find_fixed_fleet(self, scenario: Scenario, *, dyno_type: Optional[str] = None, max_dynos: int = 100_000,
                         on_step: Optional[Callable[[int, bool], None]] = None, client: Any = None) -> FixedFleet:
        """Searches the fixed fleet of `scenario` (the one tuned) meeting the same targets,
        under the best's policy (or the closest's) when the scenario has it, else its first."""
        chosen = self.best or self.closest
        policy = chosen.policy if chosen and chosen.policy in scenario.policies else scenario.policies[0]
        self.fixed = fixed_fleet(scenario, policy, self.targets, dyno_type=dyno_type, max_dynos=max_dynos,
                                 on_step=on_step, client=client)
        return self.fixed

    def to_json(self) -> Dict[str, Any]:
        """The ``--json`` document; missing (and non-finite) numbers are None."""
        best, runner_up = self.best, self.runner_up
        closest = self.closest if best is None else None
        return finite({
            "scenario": self.scenario,
            "targets": [str(t) for t in self.targets],
            "vary": self.vary,
            "points": [s.to_dict() for s in self.settings],
            "best": best.to_dict() if best else None,
            "runner_up": runner_up.to_dict() if runner_up else None,
            "closest": closest.to_dict() if closest else None,
            "fixed_fleet": self.fixed.to_dict() if self.fixed else None,
            "saving": self.saving,
        })


def tune(
    scenario: Scenario,
    vary: Dict[str, List[Any]],
    targets: Sequence[Target],
    *,
    dyno_type: Optional[str] = None,
    max_dynos: int = 100_000,
    progress: bool = False,
    fixed: bool = True,
    client: Any = None,
) -> Tuning:
    """Runs every point of `vary` on `scenario`, checks and prices each, and (unless not
    `fixed`: then :meth:`Tuning.find_fixed_fleet`) searches the fixed fleet; see the module's
    notes. `progress` shows the points' progress bar. `client`: a ``dask.distributed.Client``
    whose cluster runs the points and the search (:mod:`dynosim.distributed`; the same result).
    Raises :class:`ScenarioError` for bad input before anything runs."""
    if not targets:
        raise ScenarioError("nothing to meet; give at least one --target \"METRIC OP VALUE\"", file="--target")
    Pricing.from_scenario(scenario.doc, scenario.source, dyno_type)  # a bad --dyno-type, before anything runs
    check_targets(scenario, targets)  # a target on a service the scenario does not have
    # The sweep's own metric is only its plot's: one every run reports. A target's metric that
    # the scenario does not report is refused naming --target (target_estimate).
    sweep = Sweep(scenario, vary, metric="requests")
    sweep.prepare()  # validates every point: nothing runs on a bad --vary
    _check_points(sweep, targets)
    sweep.run(progress=progress, client=client)
    settings = _settings(sweep, targets, dyno_type)
    tuning = Tuning(scenario.name, list(targets), vary, settings, None, sweep)
    if fixed:
        tuning.find_fixed_fleet(scenario, dyno_type=dyno_type, max_dynos=max_dynos, client=client)
    return tuning


def _check_points(sweep: Sweep, targets: Sequence[Target]) -> None:
    """Refuses what no point can answer: fewer than 2 replications (no interval), or a target
    that the service time alone breaks at every point."""
    refusals: List[ScenarioError] = []
    for point in sweep.points:
        for policy, described in zip(point.policies, point.described):
            if described["replications"] < 2:
                raise ScenarioError("tune needs at least 2 replications for confidence intervals",
                                    file=point.scenario.source, path="run.replications")
            try:
                check_attainable(point.scenario.for_policy(policy), targets)
            except ScenarioError as e:
                refusals.append(e)
    if refusals and len(refusals) == sum(len(p.policies) for p in sweep.points):
        raise refusals[0]


def _settings(sweep: Sweep, targets: Sequence[Target], dyno_type: Optional[str]) -> List[Setting]:
    out: List[Setting] = []
    for point in sweep.points:
        pricing = Pricing.from_scenario(point.scenario.doc, point.scenario.source, dyno_type)
        for j, policy in enumerate(point.policies):
            result: Optional[PolicyResult] = point.results[j]
            described = point.described[j]
            # A point that did not run (unstable) is priced at its size.
            cost = (result_cost(pricing, result) if result is not None
                    else with_services(run_cost(pricing, float(described["duration"]), dynos=int(described["dynos"])),
                                       point.scenario, described))
            setting = Setting(len(out), dict(point.values), policy, point.statuses[j], pricing, cost)
            if result is not None:
                setting.steady_state = not point.unsettled[j]
                for t in targets:
                    e = setting.estimates[t.metric] = target_estimate(result, t)
                    setting.met[str(t)] = t.met_by(e)
            out.append(setting)
    return out


def result_cost(pricing: Pricing, result: PolicyResult) -> RunCost:
    """A run's cost: its reported dyno-seconds (``fleet.dyno_seconds``, a mean over
    replications), else its size for its window (``duration``); with services, each
    service's bill (``services.NAME.cost.*``, priced at its own dyno type) on top: the whole
    app's."""
    window = float(result.report["duration"])
    try:
        node = lookup(result.summary, DYNO_SECONDS)
    except KeyError:
        entry = run_cost(pricing, window, dynos=int(result.report["dynos"]))
    else:
        dyno_seconds = float(node["mean"] if isinstance(node, dict) else node)
        entry = run_cost(pricing, window, dyno_seconds=dyno_seconds)
    services = result.summary.get("services") or {}
    billed = [tier["cost"] for tier in services.values() if isinstance(tier, dict) and "cost" in tier]
    if not billed:
        return entry
    return _plus(entry, sum(float(c["dyno_hours"]["mean"]) for c in billed) * SECONDS_PER_HOUR,
                 sum(float(c["dollars"]["mean"]) for c in billed))


def with_services(cost: RunCost, scenario: Scenario, described: Dict[str, Any]) -> RunCost:
    """`cost` (the entry fleet's) with the services' at their sizes for the same window, each at
    its own dyno type's price (:func:`dynosim.cost.service_pricing`)."""
    services = described.get("services") or []
    if not services:
        return cost
    seconds = dollars = 0.0
    for s in services:
        tier = s["dynos"] * cost.window
        seconds += tier
        dollars += tier * service_pricing(scenario.doc, s["name"], scenario.source).per_second()
    return _plus(cost, seconds, dollars)


def _plus(cost: RunCost, dyno_seconds: float, dollars: float) -> RunCost:
    total = cost.dollars + dollars
    return RunCost(cost.dyno_seconds + dyno_seconds, cost.window, total, total * SECONDS_PER_DAY / cost.window,
                   cost.measured, with_services=True)


def without_autoscale(scenario: Scenario) -> Scenario:
    """The scenario without its ``[autoscale]`` section (itself when it has none)."""
    return scenario.without_autoscale()


def fixed_fleet(
    scenario: Scenario,
    policy: str,
    targets: Sequence[Target],
    *,
    dyno_type: Optional[str] = None,
    max_dynos: int = 100_000,
    on_step: Optional[Callable[[int, bool], None]] = None,
    client: Any = None,
) -> FixedFleet:
    """The fewest fixed dynos of `scenario` (without ``[autoscale]``) meeting every target
    under `policy`, priced as a run of that many dynos; ``reason`` says why there is none."""
    fixed = without_autoscale(scenario)
    out = FixedFleet(policy, fixed is not scenario)
    # No fixed fleet, rather than an error, where the settings could answer and it cannot: a
    # target its service time alone breaks, or a bottleneck no number of dynos relieves.
    try:
        check_attainable(fixed.for_policy(policy), targets)
    except ScenarioError as e:
        out.reason = e.message
        return out
    try:
        found = min_dynos(fixed, policy, targets, max_dynos=max_dynos, on_step=on_step, client=client)
    except UnstableError as e:
        out.reason = e.message
        return out
    out.counts_tried = len(found.evaluated)
    if found.dynos is None:
        out.reason = shortfall(found, targets)
        return out
    out.dynos, out.estimates, out.not_steady = found.dynos, found.estimates, found.not_steady
    out.pricing = Pricing.from_scenario(fixed.doc, fixed.source, dyno_type)
    at = fixed.with_overrides({"fleet.dynos": found.dynos}).describe()
    out.cost = with_services(run_cost(out.pricing, float(at["duration"]), dynos=found.dynos), fixed, at)
    return out
