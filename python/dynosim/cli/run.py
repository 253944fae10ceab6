"""`dynosim run`: run a scenario and print its queueing figures (a table, or JSON).

``dynosim compare`` (:mod:`dynosim.cli.compare`) is the same command with ``--policy``
required; both use :func:`scenario_command` and :func:`main` from here."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from .. import _dynosim, html_report, timeseries
from ..api import run as run_scenario
from ..errors import DynosimError
from ..display import Column, duration, number, results_table, status, stdout_console
from ..output import print_json
from ..results import PolicyResult, Results
from ..scenario import Scenario
from .common import (add_html_argument, add_scenario_arguments, add_wide_argument, command_line, policy_list,
                     policy_names, recorded_warnings, scenario_from_args, write_html)


def register(commands: argparse._SubParsersAction) -> None:
    p = scenario_command(commands, "run", "Run a scenario and print its queueing figures.")
    p.add_argument("--policy", type=policy_list, metavar="P1,P2",
                   help=f"routing policies to run side by side instead of router.policy ({', '.join(policy_names())})")


def scenario_command(commands: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
    """A command of run's kind: the scenario options, --json and --wide; handled by main."""
    p: argparse.ArgumentParser = commands.add_parser(name, help=help, description=help)
    add_scenario_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON (fields: docs/output.md)")
    p.add_argument("--timeseries", type=Path, metavar="FILE",
                   help="also write replication 0 over time: a CSV of per-interval arrivals, responses, failures, "
                        "waiting requests and busy threads, and a plot beside it (FILE.png)")
    p.add_argument("--interval", metavar="TIME", help="the time series' interval (default: the run in 200)")
    add_html_argument(p)
    add_wide_argument(p)
    p.set_defaults(handler=main)
    return p


def main(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    cases = scenario.cases or [("", scenario)]
    for _, case in cases:  # validate every case before running any
        (case.with_overrides({"router.policy": args.policy}) if args.policy else case).validate()
    if args.interval is not None and args.timeseries is None:
        raise DynosimError("--interval: give --timeseries FILE too")
    interval = timeseries.parse_interval(args.interval) if args.interval is not None else None
    if args.timeseries is not None:  # before the run, not after
        for _, case in cases:
            timeseries.intervals(case, interval)
    policies = ", ".join(args.policy or scenario.policies)
    with status(f"running {policies}" + (f", {len(cases)} cases" if scenario.cases else "")):
        results = [(label, run_scenario(case, policies=args.policy)) for label, case in cases]
    if args.json:
        doc = (results[0][1].to_dict() if not scenario.cases else
               {"cases": [dict(label=label, **r.to_dict()) for label, r in results]})
        print_json(doc)
    else:
        print_table(results, wide=args.wide)
    if args.html is not None:
        write_html(args.html, run_report(scenario, results, args))
    if args.timeseries is not None:
        with status("tracing replication 0 over time"):
            rows = [row for label, case in cases
                    for row in timeseries.series(case, args.policy or case.policies, interval, case=label)]
        written = timeseries.write(rows, args.timeseries, f"{scenario.name}: replication 0 over time")
        print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


def print_table(cases: List[Tuple[str, Results]], *, wide: bool = False) -> None:
    """One row per (case, policy); the case column only when the scenario has cases. The
    default columns fit 80 terminal columns; ``wide`` adds the rest."""
    console = stdout_console(wide=wide)
    labelled = any(label for label, _ in cases)
    head = cases[0][1][0].report
    closed = head["summary"].get("closed_loop")
    if closed:
        # A closed loop's rate is what the app sustains (the req/s column), and with
        # arrivals.requests its run lasts until they are answered, not run.duration.
        traffic, window = f"a closed loop of {closed['clients']['mean']:,.0f} clients", ""
    else:
        traffic = f"{head['arrival_rate'] * 60:,.0f} req/min"
        window = f" × {head['duration'] / 60:g} min (after {head['warmup']:g} s warm-up)"
    console.print(
        f"[bold]{head['scenario']}[/bold]: {traffic}, mean service {duration(head['service_mean'])}, "
        f"{head['replications']} replications{window}, seed {head['seed']}",
        highlight=False,
    )
    rows = [(label, r) for label, results in cases for r in results]
    if any("fleet" in r.summary for _, r in rows):
        return _print_fleet_table(console, rows, labelled, wide)
    columns = run_columns(rows, labelled)
    table, left_out = results_table(console, columns, rows, wide=wide)
    console.print(table)
    notes = ["± is the half-width of a 95% confidence interval over replications",
             "max queue: most requests waiting at once, at the router or at one dyno"]
    if not wide:
        notes.append(f"not shown: {', '.join(left_out)}; --wide shows them" if left_out else
                     "--wide shows more columns")
    console.print("; ".join(notes) + ".", style="dim", highlight=False)


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
    if labelled:
        # A case's label usually says what its policy is: the policy column gives way early.
        columns[0] = dataclasses.replace(columns[0], drop=2)
        columns.insert(0, Column("case", lambda row: row[0], kind="text", wrap=True, max_width=24))
    return columns


def _print_fleet_table(console: Any, rows: List[Tuple[str, PolicyResult]], labelled: bool, wide: bool) -> None:
    """The table of fleets that change size (an autoscaler, deploys, daily restarts): what
    the fleet cost, what its requests saw, and what its autoscaler did."""
    columns = run_columns(rows, labelled)
    table, left_out = results_table(console, columns, rows, wide=wide)
    console.print(table)
    notes = ["± is the half-width of a 95% confidence interval over replications",
             "dynos: running (billed), time-averaged; $: dyno-hours at the dyno type's price, per second",
             "actions: the autoscaler's scale events"]
    if not wide:
        notes.append(f"not shown: {', '.join(left_out)}; --wide shows them" if left_out else
                     "--wide shows errors by kind")
    console.print("; ".join(notes) + ".", style="dim", highlight=False)


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


def run_report(scenario: Scenario, cases: List[Tuple[str, Results]], args: argparse.Namespace) -> Dict[str, Any]:
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
    sections: List[Dict[str, Any]] = [html_report.scenario_section(scenario),
                                      html_report.table_section("Results", columns, rows, notes=notes),
                                      html_report.notes_section("Warnings", recorded_warnings(), warning=True)]
    named = [((f"{label}: " if label else "") + r.policy, r) for label, r in rows]
    sections.append(html_report.percentile_plot("Response time", named, "response",
                                                caption="Percentiles over the measured window, each with its 95% "
                                                        "interval over replications."))
    sections.append(html_report.percentile_plot("Time queued", named, "queue",
                                                caption="From arrival to the start of service, at the router and "
                                                        "at the dyno."))
    sections += _over_time(scenario, cases, args)
    title = f"dynosim {args.command}: {scenario.name}"
    return html_report.document(title, command_line(), sections)


def _over_time(scenario: Scenario, cases: List[Tuple[str, Results]], args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Replication 0 over time, for each case and policy (the same traffic for each)."""
    scenarios = scenario.cases or [("", scenario)]
    traces: List[Tuple[str, List[Dict[str, Any]], bool]] = []
    for label, case in scenarios:
        try:
            step, count = timeseries.intervals(case, timeseries.parse_interval(args.interval)
                                               if args.interval is not None else None)
        except DynosimError as e:  # a closed loop of a set number of requests has no set end
            return [html_report.notes_section("Over time", [f"not drawn: {e}"])]
        until = count * step * (1 + 1e-9) + step * 1e-6
        dynos = int(case.for_policy(case.policies[0]).describe()["dynos"])
        for policy in args.policy or case.policies:
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
    out.append(html_report.line_plot("Requests waiting", "time (s)", times, "waiting", waiting, y_log=False,
                                     caption="At the routers and at the dynos, at each interval's end; the "
                                             "warm-up included."))
    if any("fleet" in r.summary for _, results in cases for r in results):
        out.append(html_report.line_plot(
            "Fleet size", "time (s)", times, "dynos",
            [{"label": name, "y": [f["dynos_up"] for f in frames]} for name, frames, _ in traces], y_log=False,
            caption="Dynos up (serving) at each interval's end."))
        out.append(html_report.line_plot(
            "Response time p95", "time (s)", times, "p95 (ms)",
            [{"label": name, "y": [None if f["response_p95"] is None else f["response_p95"] * 1e3 for f in frames]}
             for name, frames, _ in traces],
            caption="Of the responses in each interval."))
    for name, frames, per_dyno in traces:
        if per_dyno:
            rows = [list(col) for col in zip(*[f["depth"] for f in frames])]
            out.append(html_report.heat_map(f"Per-dyno queues: {name}", times, rows, value_label="requests",
                                            caption="Requests at each dyno (one row each), in service and "
                                                    "waiting, at each interval's end."))
    return out
