"""The tables and the report of a run (``dynosim run``, ``compare``, and the playground):
what each column shows of a result, and the HTML report's sections (:mod:`dynosim.html_report`):
the scenario, the table, the percentiles, replication 0 over time."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _dynosim, html_report, timeseries
from .display import Column, number
from .errors import DynosimError
from .results import PolicyResult, Results
from .scenario import Scenario


def run_columns(rows: List[Tuple[str, PolicyResult]], labelled: bool) -> List[Column]:
    """The columns of run's table for these (case, result) rows: those of a fleet that changes
    size, or those of a fixed fleet with the ones only some scenarios have."""
    if any("fleet" in r.summary for _, r in rows):
        columns = list(FLEET_COLUMNS)
    else:
        columns = list(RUN_COLUMNS)
        if any("closed_loop" in r.summary for _, r in rows):
            columns.insert(2, Column("req/s", _metric_or_nan("closed_loop.requests_per_s"), ci=True))
        if any(r["errors.total"] > 0 for _, r in rows):
            columns.insert(-3, Column("errors", _metric("errors.total"), kind="percent", ci=True))
        if any("dyno" in r.summary for _, r in rows):
            columns.insert(-3, Column("cpu", _metric_or_nan("dyno.cpu_utilisation"), kind="percent", wide=True))
        if any(r.report["routers"] > 1 for _, r in rows):
            columns.insert(2, Column("routers", lambda row: row[1].report["routers"], drop=2))
    if any("retries" in r.summary for _, r in rows):
        columns.insert(-3, Column("tries per\nrequest", _metric_or_nan("retries.attempts_per_request"), ci=True))
    if any("stability" in r.summary for _, r in rows):
        columns.insert(-3, Column("recovered", _metric_or_nan("stability.recovered"), kind="percent", ci=True))
        columns.insert(-3, Column("recovery\ntime", _metric_or_nan("stability.recovery_time"), kind="time",
                                  ci=True))
    # Each service the requests call (`[services.NAME]`, docs/services.md): its response, its
    # utilisation and its calls timed out.
    services = sorted({name for _, r in rows for name in (r.summary.get("services") or {})})
    for name in services:
        columns += [
            Column(f"{name}\nresponse p99", _metric_or_nan(f"services.{name}.response.p99"), kind="time", ci=True),
            Column(f"{name}\nutilisation", _metric_or_nan(f"services.{name}.utilisation.mean"), kind="percent",
                   drop=2),
            Column(f"{name} calls\ntimed out", _metric_or_nan(f"services.{name}.calls.timed_out_fraction"),
                   kind="percent", wide=True),
        ]
        if any(_called(r, name, "hedged") for _, r in rows):
            # Its hedged fan-outs' second copies, per replication.
            columns.append(Column(f"{name} calls\nhedged", _metric_or_nan(f"services.{name}.calls.hedged"),
                                  wide=True))
        if any(_called(r, name, "cancelled") for _, r in rows):
            # The copies its fan-outs cancelled (`cancel`), per replication.
            columns.append(Column(f"{name} calls\ncancelled", _metric_or_nan(f"services.{name}.calls.cancelled"),
                                  wide=True))
    if labelled:
        # A case's label usually says what its policy is: the policy column gives way early.
        columns[0] = dataclasses.replace(columns[0], drop=2)
        columns.insert(0, Column("case", lambda row: row[0], kind="text", wrap=True, max_width=24))
    return columns


def _called(r: PolicyResult, name: str, figure: str) -> bool:
    """Whether a figure of the calls to service `name` is not zero (``hedged``: a hedged
    fan-out's copies; ``cancelled``: copies a fan-out cancelled)."""
    calls = ((r.summary.get("services") or {}).get(name) or {}).get("calls") or {}
    return bool((calls.get(figure) or {}).get("mean"))


def _fleet_dynos(row: Tuple[str, PolicyResult]) -> Any:
    """The fleet's mean size: measured for a fleet that changes size, else its dynos."""
    r = row[1]
    return r.estimate("fleet.size.mean") if "fleet" in r.summary else float(r.report["dynos"])


def _dynos_cell(row: Tuple[str, PolicyResult]) -> str:
    """``75``, or ``25×2`` for 25 dynos of 2 slots."""
    rep = row[1].report
    return f"{rep['dynos']:,}" + (f"×{rep['slots']}" if rep["slots"] > 1 else "")


def _max_queue_cell(row: Tuple[str, PolicyResult]) -> str:
    """Where requests queue: intelligent routing queues at the router, the others at dynos."""
    r = row[1]
    dyno, router = r["max_queue_depth.dyno"], r["max_queue_depth.router"]
    if dyno == router == 0:
        return "0"
    return f"{number(router)} router" if router > dyno else f"{number(dyno)} dyno"


def _metric(metric: str) -> Callable[[Tuple[str, PolicyResult]], Any]:
    return lambda row: row[1].estimate(metric)


def _report(key: str) -> Callable[[Tuple[str, PolicyResult]], Any]:
    return lambda row: row[1].report[key]


def _metric_or_nan(metric: str) -> Callable[[Tuple[str, PolicyResult]], Any]:
    """A metric that only some scenarios report (a closed loop's, a dyno's insides)."""
    def value(row: Tuple[str, PolicyResult]) -> Any:
        try:
            return row[1].estimate(metric)
        except KeyError:
            return math.nan
    return value


def _load_cell(row: Tuple[str, PolicyResult]) -> float:
    """The offered load; none for a closed loop, whose clients wait for their responses (its
    arrival rate is only the most they could send)."""
    rep = row[1].report
    return math.nan if "closed_loop" in rep["summary"] else float(rep["offered_load"])


#: The table of fleets that change size.
FLEET_COLUMNS = [
    Column("policy", lambda row: row[1].policy, kind="text"),
    Column("dynos", _fleet_dynos, ci=True),
    Column("dyno-\nhours", _metric_or_nan("cost.dyno_hours"), ci=True, drop=3),
    Column("$", _metric_or_nan("cost.dollars"), ci=True),
    Column("response\np50", _metric("response.p50"), kind="time", drop=4),
    Column("response\np95", _metric("response.p95"), kind="time", ci=True),
    Column("response\np99", _metric("response.p99"), kind="time", drop=2),
    Column("errors", _metric("errors.total"), kind="percent", ci=True),
    Column("h12", _metric("errors.h12"), kind="percent", wide=True),
    Column("h13", _metric("errors.h13"), kind="percent", wide=True),
    Column("shutdown", _metric("errors.shutdown"), kind="percent", wide=True),
    Column("no dyno", _metric("errors.no_dyno"), kind="percent", wide=True),
    Column("actions", _metric_or_nan("autoscale.actions"), ci=True, drop=1),
    Column("reversals", _metric_or_nan("autoscale.reversals"), wide=True),
]

#: The run and compare table: what to show of each result, narrow (the default) or wide.
RUN_COLUMNS = [
    Column("policy", lambda row: row[1].policy, kind="text"),
    Column("dynos", _dynos_cell, kind="text", drop=4),
    Column("load", _load_cell, kind="percent", drop=1),
    Column("queued", _metric("queued_fraction"), kind="percent", ci=True),
    Column("queue\nmean", _metric("queue.mean"), kind="time", ci=True),
    Column("queue mean\nof queued", _metric("queue_of_queued.mean"), kind="time", ci=True, wide=True),
    Column("queue median\nof queued", _metric("queue_of_queued.p50"), kind="time", wide=True),
    Column("queue\np99", _metric("queue.p99"), kind="time", drop=5),
    Column("response\nmean", _metric("response.mean"), kind="time", wide=True),
    Column("response\np99", _metric("response.p99"), kind="time", drop=3),
    Column("utilisation", _metric("utilisation.mean"), kind="percent", wide=True),
    Column("max\nqueue", _max_queue_cell, kind="text", narrow=True, drop=6),
    Column("max dyno\nqueue", _metric("max_queue_depth.dyno"), wide=True),
    Column("max router\nqueue", _metric("max_queue_depth.router"), wide=True),
]


#: The heat map of per-dyno queues is drawn for fleets of at most this many dynos.
HEAT_MAP_DYNOS = 5000

#: Heat maps (one per case and policy) in one report at most.
HEAT_MAPS = 6


def run_report(scenario: Scenario, cases: List[Tuple[str, Results]], *, command: str, title: str,
               policies: Optional[Sequence[str]] = None, interval: Optional[float] = None,
               warnings: Sequence[str] = ()) -> Dict[str, Any]:
    """The HTML report of `dynosim run` / `compare` (:mod:`dynosim.html_report`): the scenario,
    the table with every column, the notes and warnings, the percentiles of each result, and
    replication 0 over time: the requests waiting, per-dyno queues, and for a fleet that
    changes size its dynos and p95."""
    rows = [(label, r) for label, results in cases for r in results]
    labelled = any(label for label, _ in cases)
    columns = run_columns(rows, labelled)
    fleet = any("fleet" in r.summary for _, r in rows)
    notes = ["± is the half-width of a 95% confidence interval over replications; point at a cell for its interval"]
    if fleet:
        notes += ["dynos: running (billed), time-averaged; $: dyno-hours at the dyno type's price, per second",
                  "actions: the autoscaler's scale events"]
    else:
        notes.append("max queue: most requests waiting at once, at the router or at one dyno")
    sections: List[Dict[str, Any]] = [html_report.scenario_section(scenario, policies=policies),
                                      html_report.table_section("Results", columns, rows, notes=notes),
                                      html_report.notes_section("Warnings", list(warnings), warning=True)]
    named = [((f"{label}: " if label else "") + r.policy, r) for label, r in rows]
    sections.append(html_report.percentile_plot("Response time", named, "response",
                                                caption="Percentiles over the measured window, each with its 95% "
                                                        "interval over replications."))
    sections.append(html_report.percentile_plot("Time queued", named, "queue",
                                                caption="From arrival to the start of service, at the router and "
                                                        "at the dyno."))
    sections += over_time(scenario, cases, policies, interval)
    return html_report.document(title, command, sections)


def over_time(scenario: Scenario, cases: List[Tuple[str, Results]], policies: Optional[Sequence[str]] = None,
              interval: Optional[float] = None) -> List[Dict[str, Any]]:
    """Replication 0 over time, for each case and policy (the same traffic for each): the
    requests waiting, for a fleet that changes size its dynos and p95, when requests were retried the
    offered load against the goodput, per-dyno heat maps.
    `policies` replaces each case's router.policy; `interval` (s) defaults to the run in 200."""
    scenarios = scenario.cases or [("", scenario)]
    traces: List[Tuple[str, List[Dict[str, Any]], bool]] = []
    for label, case in scenarios:
        try:
            step, count = timeseries.intervals(case, interval)
        except DynosimError as e:  # a closed loop of a set number of requests has no set end
            return [html_report.notes_section("Over time", [f"not drawn: {e}"])]
        until = count * step * (1 + 1e-9) + step * 1e-6
        dynos = int(case.for_policy(case.policies[0]).describe()["dynos"])
        for policy in policies or case.policies:
            per_dyno = dynos <= HEAT_MAP_DYNOS and len(traces) < HEAT_MAPS
            variant = case.for_policy(policy)
            frames = json.loads(variant._call(_dynosim.trace, step, until, per_dyno))["frames"][: count + 1]
            traces.append(((f"{label}: " if label else "") + policy, frames, per_dyno))
    if not traces:
        return []
    times = [float(f["time"]) for f in traces[0][1]]
    out: List[Dict[str, Any]] = [{"kind": "heading", "title": "Replication 0 over time"}]
    waiting = [{"label": name, "y": [f["router_waiting"] + f["dyno_waiting"] for f in frames]}
               for name, frames, _ in traces]
    out.append(html_report.line_plot("Requests waiting", "time", times, "waiting", waiting, y_log=False,
                                     x_elapsed=True, caption="At the routers and at the dynos, at each interval's end; the "
                                             "warm-up included."))
    if any("fleet" in r.summary for _, results in cases for r in results):
        out.append(html_report.line_plot(
            "Fleet size", "time", times, "dynos",
            [{"label": name, "y": [f["dynos_up"] for f in frames]} for name, frames, _ in traces], y_log=False,
            x_elapsed=True, caption="Dynos up (serving) at each interval's end."))
        out.append(html_report.line_plot(
            "Response time p95", "time", times, "p95 (ms)",
            [{"label": name, "y": [None if f["response_p95"] is None else f["response_p95"] * 1e3 for f in frames]}
             for name, frames, _ in traces],
            x_elapsed=True, caption="Of the responses in each interval."))
    if any(f["tries"] != f["arrived"] for _, frames, _ in traces for f in frames):
        # Requests were retried: the load offered (tries sent) against the goodput, per interval.
        per_s: List[Dict[str, Any]] = []
        for name, frames, _ in traces:
            step = (frames[-1]["time"] - frames[0]["time"]) / max(len(frames) - 1, 1)
            for key, what, dash in (("tries", "offered", False), ("completed", "goodput", True)):
                per_s.append({"label": f"{name}: {what}", "dash": dash,
                              "y": [(b[key] - a[key]) / step for a, b in zip(frames, frames[1:])]})
        out.append(html_report.line_plot(
            "Offered load and goodput", "time", times[1:], "per second", per_s, y_log=False, x_elapsed=True,
            caption="Per interval: tries sent (first tries and retries) and successful answers "
                    "(dashed), per second."))
    for name, frames, per_dyno in traces:
        if per_dyno:
            rows = [list(col) for col in zip(*[f["depth"] for f in frames])]
            out.append(html_report.heat_map(f"Per-dyno queues: {name}", times, rows, value_label="requests",
                                            caption="Requests at each dyno (one row each), in service and "
                                                    "waiting, at each interval's end."))
    return out
