"""Capacity planning: the fewest dynos that meet latency targets, per routing policy.

A target is ``METRIC OP VALUE``: ``"queue.mean <= 10ms"``, ``"response.p99 < 2s"``,
``"queued_fraction <= 5%"``. A dyno count is accepted only when the far end of each metric's
95% confidence interval meets its target (the upper end for ``<=``), so an answer is never
an artefact of a lucky seed. Counts are searched upward from the smallest stable one by
doubling, then by bisection; every count runs on the same seed (common random numbers),
which keeps the metrics monotone in the count in practice. A closed loop of clients is stable
at any count, so its search starts at one dyno.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _dynosim
from .cost import Pricing
from .distributed import executor_for
from .errors import DynosimError, ScenarioError, UnstableError
from .results import Estimate, PolicyResult, is_fraction_metric, is_metric, is_time_metric, metric_names_hint
from .scenario import Scenario

__all__ = ["Target", "parse_target", "target_estimate", "CapacityResult", "min_dynos", "plan", "shortfall"]

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
) -> CapacityResult:
    """The fewest dynos for which `policy` meets every target (see the module's notes). Each
    count runs in this process, or as a task on the cluster of `client` (a
    ``dask.distributed.Client``; :mod:`dynosim.distributed`), with the same result."""
    if not targets:
        raise DynosimError("give at least one target")
    s = scenario.for_policy(policy)
    if slots is not None:
        if "app" in s.doc:
            raise ScenarioError("a scenario with [app] takes no fleet.slots: its processes and threads set "
                                "the requests a dyno holds (dynosim sweep --vary app.processes=... varies them)",
                                file="--slots")
        s = s.with_overrides({"fleet.slots": slots})
    info = s.describe()
    if info["replications"] < 2:
        raise ScenarioError("capacity needs at least 2 replications for confidence intervals",
                            file=s.source, path="run.replications")
    check_attainable(s, targets)
    result = CapacityResult(policy, int(info["slots"]), None)
    cache: Dict[int, PolicyResult] = {}
    executor = executor_for(client)

    def meets(n: int) -> bool:
        if n not in cache:
            cache[n] = executor.run([s.with_overrides({"fleet.dynos": n})], strict=True)[0][1]
        ok = all(t.met_by(target_estimate(cache[n], t)) for t in targets)
        result.evaluated[n] = ok
        result.curve[n] = {t.metric: target_estimate(cache[n], t) for t in targets}
        if on_step:
            on_step(n, ok)
        return ok

    low = smallest_stable(s, info, max_dynos)
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
    result.not_steady = s.with_overrides({"fleet.dynos": best}).steady_state_warning()
    return result


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


#: Response-time percentiles, as quantiles of the service time (which no queue can shorten).
_RESPONSE_QUANTILES = {"response.p50": 0.5, "response.p90": 0.9, "response.p95": 0.95,
                       "response.p99": 0.99, "response.p999": 0.999}


def check_attainable(scenario: Scenario, targets: Sequence[Target]) -> None:
    """Refuses a target that no number of dynos can meet: a response time below what the
    service time alone takes (a request's response is its queue time plus its service time,
    so each response percentile is at least the service time's). Raises ScenarioError
    (``--target``). `scenario` has a single policy."""
    bounded = [t for t in targets if t.upper and (t.metric in _RESPONSE_QUANTILES or t.metric == "response.mean")]
    if not bounded:
        return
    ps = sorted({_RESPONSE_QUANTILES[t.metric] for t in bounded if t.metric in _RESPONSE_QUANTILES})
    floor = dict(zip(ps, scenario._call(_dynosim.service_quantiles, ps)))
    for t in bounded:
        if t.metric == "response.mean":
            service, what = scenario.describe()["service_mean"], "mean"
        else:
            service, what = floor[_RESPONSE_QUANTILES[t.metric]], t.metric.split(".")[1]
        if not _OPS[t.op](service, t.value):
            raise ScenarioError(
                f"{t} cannot be met by any number of dynos: the service time alone has a {what} "
                f"of {format_value(t.metric, service)}, before any queueing", file="--target")


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
) -> List[CapacityResult]:
    """`min_dynos` for every policy and slots value, with the monthly cost of each answer. A
    fixed fleet is sized: the scenario's ``[autoscale]``, if any, is left out (``tune``
    searches an autoscaler's settings). `client`: a ``dask.distributed.Client`` whose cluster runs
    the counts (see :func:`min_dynos`)."""
    scenario = scenario.without_autoscale()
    pricing = Pricing.from_scenario(scenario.doc, scenario.source, dyno_type)
    out = []
    for policy in policies:
        for k in slots:
            step = (lambda n, ok, p=policy, k=k: on_step(p, k or 0, n, ok)) if on_step else None
            r = min_dynos(scenario, policy, targets, slots=k, max_dynos=max_dynos, on_step=step, client=client)
            if r.dynos is not None:
                r.monthly_cost = pricing.monthly(r.dynos)
            out.append(r)
    return out
