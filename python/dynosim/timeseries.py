"""What happens over time in one replication (issue #12's `--timeseries`): per interval, the
arrivals, responses and failures, and at each interval's end the requests waiting at the
routers and at the dynos and the threads busy, so that a burst or a ramp can be seen; and
(issue #35) the load offered (tries sent: first tries and retries) against the
goodput (successful answers), so that a retry storm can be seen.

Replication 0 of each policy (the same traffic for every policy), from time 0 (warm-up
included) to the end of the measured window; the engine's trace gives cumulative counts and
levels at every multiple of the interval (`_dynosim.trace` without per-dyno depths).

A scenario with services (`[services.NAME]`) has a series per fleet: a `service` column after
`policy`, "entry" for the top-level fleet's rows (its `response_p95` the whole request's) and
NAME for each service's (its arrivals are the calls it took, hedges included). Without
services the columns are as they were."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from . import _dynosim, time_axis
from .errors import DynosimError
from .output import csv_text, write_files
from .results import ERROR_KINDS
from .scenario import Scenario

#: The columns of a row, in the CSV's order.
COLUMNS = ["case", "policy", "time", "arrivals_per_s", "responses_per_s", "errors_per_s",
           *[f"{kind}_per_s" for kind in ERROR_KINDS[1:]],
           "router_waiting", "dyno_waiting", "busy_threads",
           "response_p95", "dynos_up", "dynos_booting", "dynos_draining", "autoscale_metric",
           "offered", "goodput"]

#: The column a scenario with services adds after ``policy``: which fleet a row is of.
SERVICE_COLUMN = "service"

#: What the top-level fleet is called in that column (as in ``cost.entry.*``).
ENTRY = "entry"


def columns(rows: Sequence[Dict[str, Any]]) -> List[str]:
    """The CSV's columns for ``rows``: :data:`COLUMNS`, with :data:`SERVICE_COLUMN` after
    ``policy`` when the rows are of a scenario with services."""
    if not any(SERVICE_COLUMN in r for r in rows):
        return list(COLUMNS)
    i = COLUMNS.index("policy") + 1
    return [*COLUMNS[:i], SERVICE_COLUMN, *COLUMNS[i:]]


#: Most intervals a series may have (each is a row per policy).
MAX_INTERVALS = 1_000_000

#: Intervals a run is cut into when no interval is given.
DEFAULT_INTERVALS = 200


def parse_interval(text: str) -> float:
    """``--interval``: a duration such as ``"10s"`` or ``"500ms"``."""
    value = _dynosim.parse_duration(text)
    if value is None or not (value > 0 and math.isfinite(value)):
        raise DynosimError(f"--interval: expected a positive duration such as 10s, got {text!r}")
    return float(value)


def intervals(scenario: Scenario, interval: float | None) -> Tuple[float, int]:
    """The interval and how many of them the run has; an error for a series that cannot be."""
    head = json.loads(scenario.for_policy(scenario.policies[0])._call(_dynosim.describe))
    span = float(head["warmup"]) + float(head["duration"])
    if head.get("closed_requests"):
        raise DynosimError("--timeseries: a closed loop of a set number of requests (arrivals.requests) has no "
                           "set end; give run.duration instead of arrivals.requests")
    step = interval if interval is not None else span / DEFAULT_INTERVALS
    count = int(math.floor(span / step + 1e-9))
    if count < 1:
        raise DynosimError(f"--interval: {step:g} s is longer than the run ({span:g} s)")
    if count > MAX_INTERVALS:
        raise DynosimError(f"--interval: {count:,} intervals of {step:g} s is too many (at most {MAX_INTERVALS:,}); "
                           "use a longer interval")
    return step, count


def series(scenario: Scenario, policies: Sequence[str], interval: float | None = None,
           case: str = "") -> List[Dict[str, Any]]:
    """The rows for each policy in turn (see the module's docstring); ``interval`` in seconds,
    by default the run cut into :data:`DEFAULT_INTERVALS`."""
    variants = [scenario.for_policy(p) for p in policies]
    for v in variants:  # validate all first
        v.validate()
    step, count = intervals(scenario, interval)
    # A hair past the last frame, so that accumulated frame times do not drop it.
    until = count * step * (1 + 1e-9) + step * 1e-6
    rows: List[Dict[str, Any]] = []
    for policy, variant in zip(policies, variants):
        trace = json.loads(variant._call(_dynosim.trace, step, until, False))
        services = trace.get("services")
        fleets = [(None, trace)] if services is None else [(ENTRY, trace), *sorted(services.items())]
        for service, fleet in fleets:
            rows.extend(_rows(fleet["frames"][: count + 1], step, case, policy, service))
    return rows


def _rows(frames: Sequence[Dict[str, Any]], step: float, case: str, policy: str,
          service: str | None) -> List[Dict[str, Any]]:
    """One fleet's rows from its frames (with ``service`` named when not None)."""
    rows: List[Dict[str, Any]] = []
    named = {} if service is None else {SERVICE_COLUMN: service}
    for before, now in zip(frames, frames[1:]):
        rows.append({
            "case": case, "policy": policy, **named, "time": round(float(now["time"]), 9),
            "arrivals_per_s": (now["arrived"] - before["arrived"]) / step,
            "responses_per_s": (now["completed"] - before["completed"]) / step,
            "errors_per_s": (now["failed"] - before["failed"]) / step,
            **{f"{kind}_per_s": (now["errors"][kind] - before["errors"][kind]) / step for kind in ERROR_KINDS[1:]},
            "router_waiting": int(now["router_waiting"]), "dyno_waiting": int(now["dyno_waiting"]),
            "busy_threads": int(now["busy"]),
            # Of the answers in the interval (empty when none); the fleet at its end; the
            # autoscaler's metric as its rule last saw it (empty without one).
            "response_p95": _or_empty(now["response_p95"]),
            "dynos_up": int(now["dynos_up"]), "dynos_booting": int(now["dynos_booting"]),
            "dynos_draining": int(now["dynos_draining"]),
            "autoscale_metric": _or_empty(now["autoscale_metric"]),
            # Tries sent per second, first tries and the clients' and routers' retries (the
            # arrivals without them); successful answers per second (`responses_per_s`, under
            # the name the stability verdict judges).
            "offered": (now["tries"] - before["tries"]) / step,
            "goodput": (now["completed"] - before["completed"]) / step,
        })
    return rows


def _or_empty(value: Any) -> Any:
    """A figure, or "" (an empty CSV cell) when there is none."""
    return "" if value is None else float(value)


def plot(rows: Sequence[Dict[str, Any]], path: Path, title: str) -> None:
    """:func:`figure`, written to `path` as a PNG."""
    fig = figure(rows, title)  # first: it chooses matplotlib's backend
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def figure(rows: Sequence[Dict[str, Any]], title: str) -> Any:
    """Panels sharing the time axis: rates, waiting requests, busy threads; when requests
    were retried, also the load offered (tries sent) against the goodput; when the fleet changes
    size, also the dynos up (booting dotted) and the response p95 per interval; a line per
    (case, policy), and per fleet with services. The time axis is in seconds, or hours and minutes for a run longer than
    two hours (:mod:`dynosim.time_axis`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["case"], r["policy"], r.get(SERVICE_COLUMN, "")), []).append(r)
    changing = any(r["dynos_booting"] or r["dynos_draining"] for r in rows) or len(
        {r["dynos_up"] for r in rows}) > 1
    # Tries beyond the first: the offered load parts from the arrivals.
    retried = any(r["offered"] != r["arrivals_per_s"] for r in rows)
    names = ["rates", *(["load"] if retried else []), *(["fleet", "p95"] if changing else []), "waiting", "busy"]
    fig, axes = plt.subplots(len(names), 1, sharex=True, figsize=(9, 2 + 2 * len(names)), squeeze=False)
    panel = dict(zip(names, axes[:, 0]))
    rates, waiting, busy = panel["rates"], panel["waiting"], panel["busy"]
    for (case, policy, service), rs in groups.items():
        label = f"{case}: {policy}" if case else policy
        if service:
            label = f"{label}: {service}"
        t = [r["time"] for r in rs]
        line, = rates.plot(t, [r["responses_per_s"] for r in rs], label=f"{label}: responses")
        if groups and (case, policy, service) == next(iter(groups)):
            rates.plot(t, [r["arrivals_per_s"] for r in rs], color="grey", linestyle=":", label="arrivals")
        if any(r["errors_per_s"] for r in rs):
            rates.plot(t, [r["errors_per_s"] for r in rs], color=line.get_color(), linestyle="--",
                       label=f"{label}: errors")
        if retried:
            offered, = panel["load"].plot(t, [r["offered"] for r in rs], label=f"{label}: offered (tries)")
            panel["load"].plot(t, [r["goodput"] for r in rs], color=offered.get_color(), linestyle="--",
                               label=f"{label}: goodput")
        waiting.plot(t, [r["router_waiting"] + r["dyno_waiting"] for r in rs], label=label)
        busy.plot(t, [r["busy_threads"] for r in rs], label=label)
        if changing:
            fleet, p95 = panel["fleet"], panel["p95"]
            up, = fleet.plot(t, [r["dynos_up"] for r in rs], label=label)
            if any(r["dynos_booting"] for r in rs):
                fleet.plot(t, [r["dynos_up"] + r["dynos_booting"] for r in rs], color=up.get_color(),
                           linestyle=":", label=f"{label}: with booting")
            p95.plot(t, [r["response_p95"] if r["response_p95"] != "" else math.nan for r in rs], label=label)
    if retried:
        panel["load"].set_ylabel("per second")
        panel["load"].legend(fontsize="small")
    if changing:
        panel["fleet"].set_ylabel("dynos up")
        panel["fleet"].legend(fontsize="small")
        panel["p95"].set_ylabel("response p95 (s)\nper interval")
    rates.set_ylabel("per second")
    waiting.set_ylabel("requests waiting\n(routers + dynos)")
    busy.set_ylabel("threads busy")
    # From the run's start (the warm-up's) to its last interval's end.
    end = max((float(r["time"]) for r in rows), default=0.0)
    time_axis.apply_to_matplotlib(busy, 0.0, end)
    busy.set_xlabel(time_axis.axis_label("simulated time", end) + ", warm-up included")
    rates.legend(fontsize="small")
    waiting.legend(fontsize="small")
    rates.set_title(title)
    fig.tight_layout()
    return fig


def plot_path(path: Path) -> Path:
    """The plot written beside the CSV: ``FILE.png`` (``series.csv`` → ``series.png``)."""
    return path.with_suffix(".png") if path.suffix.lower() == ".csv" else path.with_name(path.name + ".png")


def write(rows: Sequence[Dict[str, Any]], path: Path, title: str) -> List[Path]:
    """The CSV at ``path`` and its plot beside it (:func:`plot_path`), both or neither."""
    picture = plot_path(path)
    write_files({path: lambda tmp: tmp.write_text(csv_text(columns(rows), rows), encoding="utf-8"),
                 picture: lambda tmp: plot(rows, tmp, title)}, option="--timeseries")
    return [path, picture]
