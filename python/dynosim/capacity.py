"""Capacity planning: the fewest dynos that meet latency targets, per routing policy.

A target is ``METRIC OP VALUE``: ``"queue.mean <= 10ms"``, ``"response.p99 < 2s"``,
``"queued_fraction <= 5%"``. A dyno count is accepted only when the far end of each metric's
95% confidence interval meets its target (the upper end for ``<=``), so an answer is never
an artefact of a lucky seed. Counts are searched upward from the smallest stable one by
doubling, then by bisection; every count runs on the same seed (common random numbers),
which keeps the metrics monotone in the count in practice. A closed loop of clients is stable
at any count, so its search starts at one dyno.

The count varied is the entry fleet's (``fleet.dynos``), or a service's
(``services.NAME.fleet.dynos``, docs/services.md): its search starts from the fewest dynos
whose capacity exceeds the calls/s the traffic equations send it, and the targets may be the
whole request's (``response.p99``) or any service's (``services.NAME.response.p99``).
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _dynosim
from .cost import Pricing, service_pricing
from .distributed import executor_for
from .errors import DynosimError, ScenarioError, UnstableError
from .results import Estimate, PolicyResult, is_fraction_metric, is_metric, is_time_metric, metric_names_hint
from .scenario import Scenario

__all__ = ["Target", "parse_target", "target_estimate", "CapacityResult", "min_dynos", "plan", "shortfall",
           "DEFAULT_VARY", "vary_service", "check_targets"]

_OPS: Dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
}


@dataclass(frozen=True)
class Target:
    metric: str
    op: str
    value: float
    text: str

    @property
    def upper(self) -> bool:
        return self.op in ("<=", "<")

    def far_end(self, e: Estimate) -> float:
        """The end of the 95% interval the target is judged on: the upper end for <= and <,
        the lower for >= and >."""
        return e.ci_high if self.upper else e.ci_low

    def met_by(self, e: Estimate) -> bool:
        """Met with confidence: the interval's far end is on the right side of the value."""
        return bool(_OPS[self.op](self.far_end(e), self.value))

    def __str__(self) -> str:
        return self.text


def parse_target(text: str) -> Target:
    """Parses ``"queue.mean <= 10ms"``; raises :class:`ScenarioError` (file ``--target``)."""
    m = re.fullmatch(r"\s*([a-z_.0-9]+)\s*(<=|>=|<|>)\s*(.+?)\s*", text)
    if not m:
        raise ScenarioError(f"expected METRIC OP VALUE such as \"queue.mean <= 10ms\", got {text!r}",
                            file="--target")
    metric, op, raw = m.groups()
    if not is_metric(metric):
        raise ScenarioError(f"unknown metric {metric!r}; expected one of: {metric_names_hint()}",
                            file="--target")
    if is_time_metric(metric):
        value = _dynosim.parse_duration(raw)
        if value is None:
            raise ScenarioError(f"{metric} is a time: expected a duration such as 10ms, got {raw!r}",
                                file="--target")
    else:
        try:
            value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
        except ValueError:
            raise ScenarioError(f"expected a number or a percentage for {metric}, got {raw!r}",
                                file="--target") from None
    if not math.isfinite(value):
        raise ScenarioError(f"expected a finite value, got {raw!r}", file="--target")
    if value < 0:
        raise ScenarioError(f"{metric} is never negative: expected a value >= 0, got {raw!r}", file="--target")
    if is_fraction_metric(metric) and value > 1:
        raise ScenarioError(f"{metric} is a fraction: expected at most 1 (100%), got {raw!r}", file="--target")
    return Target(metric, op, value, f"{metric} {op} {raw}")


#: What capacity varies unless told: the entry fleet's dyno count.
DEFAULT_VARY = "fleet.dynos"

_SERVICE_DYNOS = re.compile(r"services\.([^.]+)\.fleet\.dynos")


def service_names(scenario: Scenario) -> List[str]:
    """The scenario's services (``[services.NAME]``), in name order."""
    services = scenario.doc.get("services")
    return sorted(services) if isinstance(services, dict) else []


def _unknown_service(name: str, scenario: Scenario) -> str:
    names = service_names(scenario)
    known = f"expected one of: {', '.join(names)}" if names else "the scenario has no [services]"
    return f"unknown service {name!r}; {known}"


def vary_service(scenario: Scenario, key: str) -> Optional[str]:
    """The service whose dyno count `key` (``--vary``) names: None for the entry fleet's
    (``fleet.dynos``), NAME for ``services.NAME.fleet.dynos``. Raises ScenarioError
    (``--vary``) for another key or a service the scenario does not have."""
    if key == DEFAULT_VARY:
        return None
    m = _SERVICE_DYNOS.fullmatch(key)
    if not m:
        raise ScenarioError(f"capacity varies a fleet's dyno count: expected fleet.dynos or "
                            f"services.NAME.fleet.dynos, got {key!r} (dynosim sweep or tune vary other keys)",
                            file="--vary")
    if m.group(1) not in service_names(scenario):
        raise ScenarioError(f"{key}: {_unknown_service(m.group(1), scenario)}", file="--vary")
    return m.group(1)


def check_targets(scenario: Scenario, targets: Sequence[Target]) -> None:
    """Refuses a target on a service the scenario does not have (``services.NAME.*``), in one
    line naming ``--target``."""
    for t in targets:
        parts = t.metric.split(".", 2)
        if parts[0] == "services" and len(parts) == 3 and parts[1] not in service_names(scenario):
            raise ScenarioError(f"{t}: {_unknown_service(parts[1], scenario)}", file="--target")


def target_estimate(result: PolicyResult, target: Target) -> Estimate:
    """A run's estimate of a target's metric; ScenarioError (``--target``) when the scenario
    does not report that metric (one of the dyno model's, of a scenario of plain slots)."""
    try:
        return result.estimate(target.metric)
    except KeyError:
        raise ScenarioError(f"this scenario does not report {target.metric!r} (the dyno model's metrics need "
                            "[request] phases, [app] memory or a closed loop; docs/output.md)",
                            file="--target") from None


@dataclass
class CapacityResult:
    policy: str
    slots: int
    dynos: Optional[int]
    """The fewest dynos meeting every target, or None when none up to the limit does."""
    estimates: Dict[str, Estimate] = field(default_factory=dict)
    """Each target metric's estimate at that count."""
    evaluated: Dict[int, bool] = field(default_factory=dict)
    """Every count tried, and whether it met the targets."""
    monthly_cost: Optional[float] = None
    closest: Dict[str, Tuple[int, Estimate]] = field(default_factory=dict)
    """When no count met the targets: each target metric's estimate at the count tried that
    came closest to its target, and that count."""
    curve: Dict[int, Dict[str, Estimate]] = field(default_factory=dict)
    """Each target metric's estimate at every count tried (the report's plot)."""
    smallest_stable: int = 0
    """The fewest dynos whose capacity exceeds the offered load: where the search starts."""
    not_steady: Optional[str] = None
    """Why the runs at the answer may not be steady state (short next to the time the queues
    take to settle), or None."""
    vary: str = DEFAULT_VARY
    """The dyno count searched: ``fleet.dynos`` or ``services.NAME.fleet.dynos``."""

    def to_dict(self) -> Dict[str, Any]:
        out = {
            "policy": self.policy, "slots": self.slots, "dynos": self.dynos,
            "monthly_cost": self.monthly_cost,
            "estimates": {k: vars(v) for k, v in self.estimates.items()},
            "evaluated": {str(k): v for k, v in sorted(self.evaluated.items())},
            "not_steady": self.not_steady,
        }
        if self.dynos is None:
            out["closest"] = {k: dict(vars(e), dynos=n) for k, (n, e) in self.closest.items()}
        return out


def min_dynos(
    scenario: Scenario,
    policy: str,
    targets: Sequence[Target],
    *,
    slots: Optional[int] = None,
    max_dynos: int = 100_000,
    on_step: Optional[Callable[[int, bool], None]] = None,
    client: Any = None,
    vary: str = DEFAULT_VARY,
) -> CapacityResult:
    """The fewest dynos for which `policy` meets every target (see the module's notes): of the
    entry fleet, or of the service `vary` names (``services.NAME.fleet.dynos``; `slots` is then
    that service's). Each count runs in this process, or as a task on the cluster of `client`
    (a ``dask.distributed.Client``; :mod:`dynosim.distributed`), with the same result."""
    if not targets:
        raise DynosimError("give at least one target")
    s = scenario.for_policy(policy)
    service = vary_service(s, vary)
    tier = "" if service is None else f"services.{service}."
    if slots is not None:
        if "app" in (s.doc if service is None else s.doc["services"][service]):
            raise ScenarioError(f"a fleet with [{tier}app] takes no {tier}fleet.slots: its processes and threads set "
                                f"the requests a dyno holds (dynosim sweep --vary {tier}app.processes=... varies them)",
                                file="--slots")
        s = s.with_overrides({f"{tier}fleet.slots": slots})
    info = s.describe()
    if info["replications"] < 2:
        raise ScenarioError("capacity needs at least 2 replications for confidence intervals",
                            file=s.source, path="run.replications")
    check_targets(s, targets)
    check_attainable(s, targets)
    result = CapacityResult(policy, int(info["slots"] if service is None else _service_info(info, service)["slots"]),
                            None, vary=vary)
    cache: Dict[int, PolicyResult] = {}
    executor = executor_for(client)

    def meets(n: int) -> bool:
        if n not in cache:
            cache[n] = executor.run([s.with_overrides({vary: n})], strict=True)[0][1]
        ok = all(t.met_by(target_estimate(cache[n], t)) for t in targets)
        result.evaluated[n] = ok
        result.curve[n] = {t.metric: target_estimate(cache[n], t) for t in targets}
        if on_step:
            on_step(n, ok)
        return ok

    if service is None:
        low = smallest_stable(s, info, max_dynos)
    else:
        low = smallest_stable_service(s, service, info, max_dynos)
    result.smallest_stable = low
    if low > max_dynos:
        return result
    if meets(low):
        best = low
    else:
        failing, probe = low, low
        while True:
            probe = min(max_dynos, max(probe + 1, probe * 2))
            if meets(probe):
                break
            if probe == max_dynos:
                result.closest = {t.metric: _closest(t, cache) for t in targets}
                return result
            failing = probe
        while probe - failing > 1:
            mid = (failing + probe) // 2
            if meets(mid):
                probe = mid
            else:
                failing = mid
        best = probe
    result.dynos = best
    result.estimates = {t.metric: target_estimate(cache[best], t) for t in targets}
    result.not_steady = s.with_overrides({vary: best}).steady_state_warning()
    return result


def _service_info(info: Dict[str, Any], service: str) -> Dict[str, Any]:
    """Service NAME's entry in a ``describe()`` (its rate, fleet and offered load)."""
    return next(x for x in info["services"] if x["name"] == service)


#: The most dynos a scenario may have (fleet.dynos).
MAX_FLEET = 10_000_000

#: The parts of a dyno or of the system that `describe()` may name as the bottleneck.
_BOTTLENECKS = {"threads": "the dynos' threads", "cores": "the dynos' cores",
                "interpreter lock": "the processes' interpreter locks",
                "resource": "a shared resource's servers", "pool": "a resource's connection pools"}


def smallest_stable(scenario: Scenario, info: Dict[str, Any], max_dynos: int) -> int:
    """The fewest dynos at which a run of `scenario` (one policy; `info` its ``describe()``)
    goes ahead: offered load strictly below capacity, or 1 for a closed loop, which is stable
    at any count. The threads' load (arrival rate × mean time a request holds its thread) gives
    the first guess; with phases the cores, an interpreter lock, a resource or its pools may be
    busier. Their loads fall as 1/dynos too, but for a resource's servers or a pool for the
    whole app, which no number of dynos relieves: then UnstableError. A count above
    `max_dynos` is returned as it is, unchecked."""
    if info["closed_loop"]:
        return 1
    low = math.floor(info["busy_slots_needed"] / info["slots"]) + 1
    while low <= max_dynos:
        at = scenario.with_overrides({"fleet.dynos": low}).describe()
        if at["stable"]:
            break
        more = min(2 * low, MAX_FLEET)
        if more == low:
            break
        if not scenario.with_overrides({"fleet.dynos": more}).describe()["offered_load"] < at["offered_load"]:
            what = _BOTTLENECKS.get(at["bottleneck"], at["bottleneck"])
            raise UnstableError(f"unstable at any number of dynos: the offered load on {what} is "
                                f"{at['offered_load']:.3f} of their capacity, and more dynos do not lower it",
                                file=scenario.source)
        low = max(low + 1, math.floor(at["offered_load"] * low) + 1)
    return low


def smallest_stable_service(scenario: Scenario, service: str, info: Dict[str, Any], max_dynos: int) -> int:
    """The fewest dynos of service `service` at which its offered load, at the calls/s the
    traffic equations send it (``describe()``'s ``services[i]``), is strictly below its
    capacity: the first guess from its load at its present count (the load falls as 1/dynos),
    checked and raised as :func:`smallest_stable` does. The entry fleet must be stable as it
    is (no count of the service's changes its load): else UnstableError."""
    if not info["closed_loop"] and not info["stable"]:
        raise UnstableError(f"the entry fleet is unstable as it is (offered load {info['offered_load']:.3f}), "
                            f"whatever services.{service}.fleet.dynos: give it more dynos first", file=scenario.source)
    key = f"services.{service}.fleet.dynos"
    at = _service_info(info, service)
    low = max(1, math.floor(at["offered_load"] * at["dynos"]) + 1)
    while low <= max_dynos:
        at = _service_info(scenario.with_overrides({key: low}).describe(), service)
        if at["offered_load"] < 1:
            break
        more = min(2 * low, MAX_FLEET)
        if more == low:
            break
        if not _service_info(scenario.with_overrides({key: more}).describe(), service)["offered_load"] < at["offered_load"]:
            what = _BOTTLENECKS.get(at["bottleneck"], at["bottleneck"])
            raise UnstableError(f"services.{service} is unstable at any number of dynos: the offered load on {what} "
                                f"is {at['offered_load']:.3f} of their capacity, and more dynos do not lower it",
                                file=scenario.source)
        low = max(low + 1, math.floor(at["offered_load"] * low) + 1)
    return low


#: Response-time percentiles, as quantiles of the service time (which no queue can shorten).
_RESPONSE_QUANTILES = {"response.p50": 0.5, "response.p90": 0.9, "response.p95": 0.95,
                       "response.p99": 0.99, "response.p999": 0.999}


def check_attainable(scenario: Scenario, targets: Sequence[Target]) -> None:
    """Refuses a target that no number of dynos can meet: a response time below what the
    service time alone takes (a request's response is its queue time plus its service time,
    so each response percentile is at least the service time's). A service's target
    (``services.NAME.response.*``) is judged on that service's own service time, the whole
    request's on the entry's own (its calls only add to it). Raises ScenarioError
    (``--target``). `scenario` has a single policy."""
    by_tier: Dict[Optional[str], List[Tuple[Target, str]]] = {}
    for t in targets:
        parts = t.metric.split(".", 2)
        service, own = (parts[1], parts[2]) if parts[0] == "services" and len(parts) == 3 else (None, t.metric)
        if t.upper and (own in _RESPONSE_QUANTILES or own == "response.mean"):
            by_tier.setdefault(service, []).append((t, own))
    for service, bounded in by_tier.items():
        ps = sorted({_RESPONSE_QUANTILES[own] for _, own in bounded if own in _RESPONSE_QUANTILES})
        if service is None:
            floor = dict(zip(ps, scenario._call(_dynosim.service_quantiles, ps)))
        else:
            floor = dict(zip(ps, scenario._call(_dynosim.service_quantiles, ps, service))) if ps else {}
        tier = "" if service is None else f"services.{service}'s "
        for t, own in bounded:
            if own == "response.mean":
                described = scenario.describe()
                service_mean = (described["service_mean"] if service is None
                                else _service_info(described, service)["service_mean"])
                value, what = service_mean, "mean"
            else:
                value, what = floor[_RESPONSE_QUANTILES[own]], own.split(".")[1]
            if not _OPS[t.op](value, t.value):
                raise ScenarioError(
                    f"{t} cannot be met by any number of dynos: {tier or 'the '}service time alone has a {what} "
                    f"of {format_value(t.metric, value)}, before any queueing", file="--target")


def _closest(target: Target, tried: Dict[int, PolicyResult]) -> Tuple[int, Estimate]:
    """The count whose confidence bound came nearest the target (the fewest dynos on a tie)."""
    def bound(n: int) -> float:
        e = tried[n].estimate(target.metric)
        return e.ci_high if target.upper else -e.ci_low

    n = min(sorted(tried), key=bound)
    return n, tried[n].estimate(target.metric)


def shortfall(result: CapacityResult, targets: Sequence[Target]) -> str:
    """Why no count was found, in one sentence: the targets never met, each with the closest
    it came and at what count."""
    if not result.evaluated:
        return (f"even the smallest stable fleet, {result.smallest_stable:,} dynos, is above the "
                "largest count allowed (--max-dynos)")
    tried = sorted(result.evaluated)
    span = f"{len(tried)} counts from {tried[0]:,} to {tried[-1]:,} dynos"
    missed = []
    for t in targets:
        n, e = result.closest[t.metric]
        if not t.met_by(e):
            side = "upper" if t.upper else "lower"
            missed.append(f"{t} (closest: {format_value(t.metric, e.mean)}, {side} end of the interval "
                          f"{format_value(t.metric, t.far_end(e))}, at {n:,} dynos)")
    if not missed:
        return f"none of {span} meets every target at once, though each is met at some count"
    return f"none of {span} meets " + "; nor ".join(missed)


def estimate_text(target: Target, e: Estimate) -> str:
    """A target metric's mean and the far end of its interval: ``5.6 ms (≤ 6.1 ms)``."""
    sign = "≤" if target.upper else "≥"
    return f"{format_value(target.metric, e.mean)} ({sign} {format_value(target.metric, target.far_end(e))})"


def format_value(metric: str, value: float) -> str:
    from .display import duration, percent

    if is_time_metric(metric):
        return duration(value)
    if is_fraction_metric(metric):
        return percent(value)
    return f"{value:.4g}"


def plan(
    scenario: Scenario,
    policies: Sequence[str],
    targets: Sequence[Target],
    *,
    slots: Sequence[Optional[int]] = (None,),
    dyno_type: Optional[str] = None,
    max_dynos: int = 100_000,
    on_step: Optional[Callable[[str, int, int, bool], None]] = None,
    client: Any = None,
    vary: str = DEFAULT_VARY,
) -> List[CapacityResult]:
    """`min_dynos` for every policy and slots value, with the monthly cost of each answer (the
    varied fleet's dynos at its dyno type's price). A fixed fleet is sized: the varied fleet's
    ``[autoscale]``, if any, is left out (``tune`` searches an autoscaler's settings). `client`:
    a ``dask.distributed.Client`` whose cluster runs the counts (see :func:`min_dynos`)."""
    service = vary_service(scenario, vary)
    scenario = without_tier_autoscale(scenario, service)
    pricing = tier_pricing(scenario, service, dyno_type)
    out = []
    for policy in policies:
        for k in slots:
            step = (lambda n, ok, p=policy, k=k: on_step(p, k or 0, n, ok)) if on_step else None
            r = min_dynos(scenario, policy, targets, slots=k, max_dynos=max_dynos, on_step=step, client=client,
                          vary=vary)
            if r.dynos is not None:
                r.monthly_cost = pricing.monthly(r.dynos)
            out.append(r)
    return out


def tier_pricing(scenario: Scenario, service: Optional[str], dyno_type: Optional[str] = None) -> Pricing:
    """The price of the entry fleet's dynos (`service` None) or of service `service`'s."""
    if service is None:
        return Pricing.from_scenario(scenario.doc, scenario.source, dyno_type)
    return service_pricing(scenario.doc, service, scenario.source, dyno_type)


def without_tier_autoscale(scenario: Scenario, service: Optional[str]) -> Scenario:
    """The scenario without the ``[autoscale]`` of the fleet capacity sizes (the entry's, or
    service `service`'s): itself when it has none."""
    if service is None:
        return scenario.without_autoscale()
    tables = scenario.doc["services"][service]
    if not isinstance(tables, dict) or "autoscale" not in tables:
        return scenario
    doc = dict(scenario.doc)
    doc["services"] = dict(doc["services"])
    doc["services"][service] = {k: v for k, v in tables.items() if k != "autoscale"}
    prefix = f"services.{service}.autoscale"
    return Scenario(doc, source=scenario.source, base_dir=scenario.base_dir,
                    overridden={k for k in scenario.overridden if not (k == prefix or k.startswith(prefix + "."))})
