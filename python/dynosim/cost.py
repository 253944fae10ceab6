"""Dyno prices (docs/model.md, "Capacity planning") and monthly cost.

The type priced is ``--dyno-type``, else ``cost.dyno_type``, else the fleet's own type
(``fleet.type``), else today's Standard-1X; ``2013-1x`` is the $36 dyno of the seed study. A
scenario can choose a type and add or override prices:

    [cost]
    dyno_type = "2013-1x"
    prices = { "my-dyno" = 40 }     # $/month per dyno

Each service a request calls (``[services.NAME]``, docs/services.md) is priced as its own
fleet: its ``[services.NAME.cost]``, else its own ``fleet.type``, else standard-1x, with the
scenario's ``[cost] prices`` as its price list under its own (:func:`service_pricing`).

A run is priced by its dyno-seconds (:func:`run_cost`): Heroku bills dynos "prorated to the
second", so a dyno-second costs the monthly price over the 730 hours of a month.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from .errors import ScenarioError

__all__ = ["PRICES", "DEFAULT_DYNO_TYPE", "Pricing", "RunCost", "run_cost", "service_pricing", "price_report"]

#: $/month for one dyno running all month (Eco: a pool, see below).
PRICES: Dict[str, float] = {
    "eco": 5.0,
    "basic": 7.0,
    "standard-1x": 25.0,
    "standard-2x": 50.0,
    "performance-m": 250.0,
    "performance-l": 500.0,
    "2013-1x": 36.0,
}
DEFAULT_DYNO_TYPE = "standard-1x"
HOURS_PER_MONTH = 730.0
#: Eco dynos share a pool: $5 buys 1000 dyno-hours a month.
ECO_POOL_HOURS = 1000.0
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class Pricing:
    dyno_type: str
    price: float

    @classmethod
    def from_scenario(cls, doc: Mapping[str, Any], source: Optional[str], dyno_type: Optional[str] = None,
                      base_prices: Optional[Mapping[str, float]] = None) -> "Pricing":
        """The price of the fleet `doc` describes (a scenario, or a service's tables); a
        service's own prices go on top of `base_prices` (the scenario's price list)."""
        section = doc.get("cost", {})
        if not isinstance(section, dict):
            raise ScenarioError("expected a table", file=source, path="cost")
        unknown = set(section) - {"dyno_type", "prices"}
        if unknown:
            raise ScenarioError(f"unknown key; expected dyno_type or prices", file=source,
                                path=f"cost.{sorted(unknown)[0]}")
        prices = dict(PRICES if base_prices is None else base_prices)
        extra = section.get("prices", {})
        if not isinstance(extra, dict):
            raise ScenarioError("expected a table of dyno type = $/month", file=source, path="cost.prices")
        for name, value in extra.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ScenarioError(f"expected a finite price >= 0 in $/month, got {value!r}", file=source,
                                    path=f"cost.prices.{name}")
            prices[name] = float(value)
        fleet = doc.get("fleet")
        fleet_type = fleet.get("type") if isinstance(fleet, Mapping) else None
        chosen: Any
        where: Optional[str]
        if dyno_type:
            chosen, where, path = dyno_type, "--dyno-type", ""
        elif "dyno_type" in section:
            chosen, where, path = section["dyno_type"], source, "cost.dyno_type"
        elif isinstance(fleet_type, str):
            # The engine reads dyno type names in any case; the table's names are lower case.
            chosen, where, path = fleet_type.lower(), source, "fleet.type"
        else:
            chosen, where, path = DEFAULT_DYNO_TYPE, source, "cost.dyno_type"
        if not isinstance(chosen, str):
            raise ScenarioError(f"expected a dyno type name, got {chosen!r}", file=source, path=path)
        if chosen not in prices:
            raise ScenarioError(f"unknown dyno type {chosen!r}; expected one of: {', '.join(prices)}",
                                file=where, path=path)
        return cls(chosen, prices[chosen])

    def monthly(self, dynos: int) -> float:
        """Cost of running `dynos` dynos all month."""
        if self.dyno_type == "eco":
            return self.price * math.ceil(dynos * HOURS_PER_MONTH / ECO_POOL_HOURS)
        return self.price * dynos

    def per_second(self) -> float:
        """$ per dyno-second: the monthly price prorated to the second over a month of 730 h.
        Eco's $5 buys a pool of 1000 dyno-hours, so its dyno-second is a share of the pool: an
        approximation that leaves out the pool's whole $5 steps (``monthly`` keeps them)."""
        hours = ECO_POOL_HOURS if self.dyno_type == "eco" else HOURS_PER_MONTH
        return self.price / (hours * SECONDS_PER_HOUR)

    def describe(self) -> str:
        return f"{self.dyno_type} at ${self.price:g}/month"


def price_list(doc: Mapping[str, Any]) -> Dict[str, float]:
    """The scenario's price list: the built-in one with ``[cost] prices`` on top (assumed
    checked: :meth:`Pricing.from_scenario` on the scenario refuses a bad one)."""
    section = doc.get("cost", {})
    extra = section.get("prices", {}) if isinstance(section, Mapping) else {}
    prices = dict(PRICES)
    if isinstance(extra, Mapping):
        prices.update({k: float(v) for k, v in extra.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return prices


def service_pricing(doc: Mapping[str, Any], name: str, source: Optional[str],
                    dyno_type: Optional[str] = None) -> Pricing:
    """The price of service NAME's dynos (``[services.NAME]`` of the scenario `doc`): its
    ``[services.NAME.cost]`` (``dyno_type``, ``prices``), else its ``fleet.type``, else
    standard-1x, from the scenario's price list with the service's own prices on top;
    `dyno_type` (``--dyno-type``) overrides the type. ScenarioError at the service's key path."""
    service = (doc.get("services") or {}).get(name)
    if not isinstance(service, Mapping):
        raise ScenarioError(f"no service named {name!r}", file=source, path=f"services.{name}")
    try:
        return Pricing.from_scenario(service, source, dyno_type, base_prices=price_list(doc))
    except ScenarioError as e:
        path = e.path if e.file != source or not e.path else f"services.{name}.{e.path}"
        raise ScenarioError(e.message, file=e.file, path=path) from None


@dataclass(frozen=True)
class RunCost:
    """What a run's fleet costs: over the run's measured window, and scaled to a day."""

    dyno_seconds: float
    """Dyno-seconds billed over the window (per replication)."""
    window: float
    """The measured window, s (``run.duration``)."""
    dollars: float
    """$ for the window."""
    dollars_per_day: float
    """$ for 24 h at the window's rate."""
    measured: bool
    """True when the run reported its dyno-seconds (``fleet.dyno_seconds``: a fleet that
    changes size), False when they are the fleet's size times the window (a fixed fleet)."""
    with_services: bool = False
    """True when the figures are the whole app's: the entry fleet's and its services' (each at
    its own price, docs/services.md)."""

    def to_dict(self) -> Dict[str, Any]:
        return {"dyno_seconds": self.dyno_seconds, "window": self.window, "dollars": self.dollars,
                "dollars_per_day": self.dollars_per_day,
                "from": "fleet.dyno_seconds" if self.measured else "fleet.dynos * run.duration",
                **({"with_services": True} if self.with_services else {})}


def run_cost(pricing: Pricing, window: float, *, dyno_seconds: Optional[float] = None,
             dynos: Optional[int] = None) -> RunCost:
    """The cost of a run whose measured window is `window` seconds: its `dyno_seconds` when
    the run reports them (an autoscaled fleet), else `dynos` dynos for the whole window, at
    `pricing`'s price per second."""
    if not window > 0:
        raise ValueError(f"a run's window must be positive, got {window!r}")
    measured = dyno_seconds is not None
    if dyno_seconds is None:
        if dynos is None:
            raise ValueError("give the run's dyno_seconds or its dynos")
        dyno_seconds = dynos * window
    dollars = dyno_seconds * pricing.per_second()
    return RunCost(dyno_seconds, window, dollars, dollars * SECONDS_PER_DAY / window, measured)


def price_report(report: Dict[str, Any], pricing: Pricing,
                 services: Optional[Mapping[str, Tuple[Pricing, int]]] = None) -> Dict[str, Any]:
    """Adds ``cost`` to a run's report, in its summary and each replication:
    ``cost.dyno_hours`` (the fleet's dyno-seconds, ``fleet.dyno_seconds`` when the fleet
    changes size, else dynos × the window, in hours) and ``cost.dollars`` (those at the dyno
    type's price, prorated per second over a 730-hour month, as Heroku bills). The summary's
    estimates are the dyno-seconds' scaled (a price is a constant).

    With `services` (each service's pricing and ``fleet.dynos``, for a report with
    ``services``): each service's bill as ``services.NAME.cost.*``, priced the same way, and
    the whole app's at the top: ``cost.*`` is then the entry fleet's and every service's
    together, ``cost.entry.*`` the entry fleet's alone (docs/services.md)."""
    per_second = pricing.per_second()
    fixed = float(report["dynos"]) * float(report["duration"])
    summary = report["summary"]
    _price_tier(summary, report.get("per_replication", []), lambda rep: rep, fixed, per_second)
    report["pricing"] = {"dyno_type": pricing.dyno_type, "price_per_month": pricing.price}
    if not services or not summary.get("services"):
        return report
    tiers = [_entry_tier]
    for name, (tier_pricing, dynos) in services.items():
        if name not in summary["services"]:
            continue
        pick = (lambda tree, name=name: tree["services"][name])
        _price_tier(summary["services"][name], report.get("per_replication", []), pick,
                    float(dynos) * float(report["duration"]), tier_pricing.per_second())
        tiers.append(pick)
        report["pricing"].setdefault("services", {})[name] = {"dyno_type": tier_pricing.dyno_type,
                                                               "price_per_month": tier_pricing.price}
    # The whole app's bill: per replication the sum of its tiers', and its estimate from those
    # sums (the tiers' bills are correlated within a replication: their intervals do not add).
    reps = report.get("per_replication", [])
    for rep in reps:
        entry = dict(rep["cost"])
        rep["cost"] = {k: sum(pick(rep)["cost"][k] if pick is not _entry_tier else entry[k] for pick in tiers)
                       for k in ("dyno_hours", "dollars")}
        rep["cost"]["entry"] = entry
    entry = dict(summary["cost"])
    summary["cost"] = {k: _sum_estimate([pick(summary)["cost"][k] if pick is not _entry_tier else entry[k]
                                         for pick in tiers], [r["cost"][k] for r in reps]) for k in entry}
    summary["cost"]["entry"] = entry
    return report


def _entry_tier(tree: Dict[str, Any]) -> Dict[str, Any]:
    return tree


def _price_tier(summary: Dict[str, Any], reps: Any, pick: Any, fixed: float, per_second: float) -> None:
    """``cost`` of one fleet (the entry, or a service picked out of each tree by `pick`), in
    the summary and each replication."""
    for rep in reps:
        tier = pick(rep)
        seconds = float(tier["fleet"]["dyno_seconds"]) if "fleet" in tier else fixed
        tier["cost"] = {"dyno_hours": seconds / SECONDS_PER_HOUR, "dollars": seconds * per_second}
    measured = summary.get("fleet", {}).get("dyno_seconds")
    estimate = (dict(measured) if isinstance(measured, dict) else
                {"mean": fixed, "std_error": 0.0, "ci_low": fixed, "ci_high": fixed})

    def scaled(factor: float) -> Dict[str, Any]:
        return {k: (v * factor if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                for k, v in estimate.items()}

    summary["cost"] = {"dyno_hours": scaled(1 / SECONDS_PER_HOUR), "dollars": scaled(per_second)}


def _sum_estimate(parts: Sequence[Mapping[str, Any]], values: Sequence[float]) -> Dict[str, Any]:
    """The estimate of a sum of the tiers' figures: the sum of their means, and when any
    varies, an interval from the replications' sums (as every estimate: the mean ± t × its
    standard error); with none varying, the sum itself throughout."""
    mean = float(sum(float(p["mean"]) for p in parts))
    if all(float(p.get("std_error") or 0.0) == 0.0 for p in parts) or len(values) < 2:
        return {"mean": mean, "std_error": 0.0, "ci_low": mean, "ci_high": mean}
    n = len(values)
    sd = statistics.stdev(values)
    std_error = sd / math.sqrt(n)
    # The interval's half-width as the parts' own: their t quantile, read off one that varies.
    varying = next(p for p in parts if float(p.get("std_error") or 0.0) > 0.0)
    t = (float(varying["ci_high"]) - float(varying["mean"])) / float(varying["std_error"])
    return {"mean": mean, "std_error": std_error, "ci_low": mean - t * std_error, "ci_high": mean + t * std_error}
