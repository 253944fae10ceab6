"""Running scenarios from Python."""

from __future__ import annotations

import json
import warnings
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Union

from . import _dynosim
from .cost import Pricing, price_report, service_pricing
from .errors import NotSteadyWarning, ScenarioError
from .results import PolicyResult, Results
from .scenario import Scenario, ScenarioLike

__all__ = ["run"]


def run(
    scenario: ScenarioLike = "rapgenius",
    *,
    set: Union[Mapping[str, Any], Iterable[str], None] = None,
    policies: Optional[Sequence[str]] = None,
    seed: Optional[int] = None,
    replications: Optional[int] = None,
    duration: Union[str, float, None] = None,
    warn: bool = True,
) -> Results:
    """Runs a scenario (a built-in name, a TOML path, a dict or a :class:`Scenario`).

    ``set`` overrides keys (``{"fleet.dynos": 100}``); ``policies`` replaces ``router.policy``.
    Every policy runs on the same arrivals and service times (same seed, separate streams).
    Raises :class:`~dynosim.errors.ScenarioError` for an invalid scenario and
    :class:`~dynosim.errors.UnstableError` when offered load is at or above capacity, and
    warns (:class:`~dynosim.errors.NotSteadyWarning`, unless ``warn`` is false) when the run is
    short next to the time its queues take to settle.
    """
    s = Scenario.load(scenario).with_overrides(set)
    shorthand: Dict[str, Any] = {}
    if seed is not None:
        shorthand["run.seed"] = seed
    if replications is not None:
        shorthand["run.replications"] = replications
    if duration is not None:
        shorthand["run.duration"] = duration
    if policies is not None:
        shorthand["router.policy"] = list(policies)
    s = s.with_overrides(shorthand)
    variants = [s.for_policy(p) for p in s.policies]
    described = [v.describe() for v in variants]  # validate all before running any
    for v, d in zip(variants, described):
        v.check_runnable(d, simulated=True)
    if warn:
        for v, d in zip(variants, described):
            message = v.steady_state_warning(d)
            if message:
                named = f"{d['policy']}: {message}" if len(variants) > 1 else message
                warnings.warn(named, NotSteadyWarning, stacklevel=2)
    return Results([PolicyResult(_priced(json.loads(v._call(_dynosim.run)), v)) for v in variants])


def _priced(report: Dict[str, Any], scenario: Scenario) -> Dict[str, Any]:
    """The report with its bill (``cost.*``, :func:`~dynosim.cost.price_report`), at the price of
    the scenario's dyno type, and with services each service's at its own (``services.NAME.cost.*``,
    the whole app's at the top); as it is when a type has no price (a type of the engine's that
    ``[cost]`` does not list)."""
    try:
        pricing = Pricing.from_scenario(scenario.doc, scenario.source)
        services = None
        if report.get("summary", {}).get("services"):
            services = {s["name"]: (service_pricing(scenario.doc, s["name"], scenario.source), int(s["dynos"]))
                        for s in scenario.describe()["services"]}
    except ScenarioError:
        return report
    return price_report(report, pricing, services)
