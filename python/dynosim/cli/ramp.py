"""`dynosim ramp`: the scenario at each offered rate in turn, autobench style; prints offered
against response rate, errors and latency, and writes CSV, JSON and a plot. The ramp itself is
:mod:`dynosim.ramp`."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

from .. import html_report
from .. import ramp as ramps
from ..distributed import dask_client
from ..display import Column, activity, results_table, stdout_console
from ..output import print_json
from ..scenario import Scenario
from .common import (add_dask_argument, add_html_argument, add_scenario_arguments, command_line, policy_list, policy_names,
                     recorded_warnings, scenario_from_args, write_html)


def register(commands: argparse._SubParsersAction) -> None:
    help = "Run a scenario at a ramp of offered rates: response rate, errors and latency against the offered rate."
    p = commands.add_parser(
        "ramp", help=help, description=help,
        epilog=("Each rate runs for run.duration (--duration) after run.warmup, with run.allow_overload, so a "
                "rate above capacity is simulated (its queues grow) rather than refused. "
                "Example: dynosim ramp rapgenius --rates 100..400/25 --duration 1min"),
    )
    add_scenario_arguments(p)
    p.add_argument("--rates", type=_rates, required=True, metavar="A..B/STEP",
                   help="offered rates in req/s: A..B/STEP (autobench's low, high and step) or a list a,b,c")
    p.add_argument("--policy", type=policy_list, metavar="P1,P2",
                   help=f"routing policies instead of router.policy ({', '.join(policy_names())})")
    p.add_argument("--json", action="store_true", help='print {"ramp": [rows]} instead of the table')
    p.add_argument("--out", metavar="PREFIX", help="also write PREFIX.csv, PREFIX.json and PREFIX.png")
    add_html_argument(p)
    add_dask_argument(p)
    p.set_defaults(handler=main)


def _rates(text: str) -> List[float]:
    try:
        return ramps.parse_rates(text)
    except Exception as e:  # argparse turns this into one usage line
        raise argparse.ArgumentTypeError(str(e).removeprefix("--rates: ")) from None


def main(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    with activity() as a:
        task = a.task("ramping")

        def progress(finished: int, steps: int) -> None:
            a.update(task, note=f"{finished} of {steps} steps done")

        with dask_client(args.dask) as client:
            rows = ramps.ramp(scenario, args.rates, args.policy, progress=progress, client=client)
    if args.json:
        print_json({"ramp": rows})
    else:
        print_table(scenario.name, rows)
    if args.out:
        written = ramps.write(rows, args.out, f"{scenario.name}: offered against response rate")
        print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    if args.html is not None:
        write_html(args.html, ramp_report(scenario, rows))
    return 0


def ramp_columns(rows: List[Dict[str, Any]]) -> List[Column]:
    """The table's columns: per case and policy, at each offered rate."""
    def value(key: str) -> Any:
        return lambda r: float("nan") if r[key] is None else r[key]

    columns = [
        Column("policy", lambda r: r["policy"], kind="text"),
        Column("offered req/s", lambda r: r["offered"]),
        Column("response req/s", value("response_rate")),
        Column("errors", value("errors"), kind="percent"),
        Column("response p50", value("response_p50"), kind="time", drop=1),
        Column("response p99", value("response_p99"), kind="time"),
        Column("status", lambda r: r["status"], kind="text"),
    ]
    if any(r["case"] for r in rows):
        columns.insert(0, Column("case", lambda r: r["case"], kind="text", wrap=True, max_width=24))
    return columns


def ramp_report(scenario: Scenario, rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The HTML report: the scenario, the table, and against the offered rate the response
    rate (with the offered rate itself, dashed), the errors and the p50 and p99 response."""
    offered = sorted({float(r["offered"]) for r in rows})
    groups: Dict[str, Dict[float, Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((f"{r['case']}: " if r["case"] else "") + r["policy"], {})[float(r["offered"])] = r

    def lines(key: str, scale: float = 1.0) -> List[Dict[str, Any]]:
        return [{"label": name, "y": [None if (x := at.get(o)) is None or x[key] is None else x[key] * scale
                                      for o in offered]} for name, at in groups.items()]

    plots = [
        html_report.line_plot("Response rate", "offered (req/s)", offered, "responses (req/s)",
                              lines("response_rate") + [{"label": "offered", "y": offered, "dash": True}],
                              span_gaps=True, y_log=False,
                              caption="Answered requests per second at each offered rate; above capacity the "
                                      "line leaves the dashed diagonal."),
        html_report.line_plot("Errors", "offered (req/s)", offered, "errors (%)", lines("errors", 100.0),
                              span_gaps=True, y_log=False),
        html_report.line_plot("Response time p50", "offered (req/s)", offered, "p50 (ms)",
                              lines("response_p50", 1e3), span_gaps=True),
        html_report.line_plot("Response time p99", "offered (req/s)", offered, "p99 (ms)",
                              lines("response_p99", 1e3), span_gaps=True),
    ]
    sections = [html_report.scenario_section(scenario),
                html_report.table_section(f"A ramp of {len(offered)} offered rates", ramp_columns(rows), rows),
                html_report.notes_section("Warnings", recorded_warnings(), warning=True), *plots]
    return html_report.document(f"dynosim ramp: {scenario.name}", command_line(), sections)


def print_table(name: str, rows: List[Dict[str, Any]]) -> None:
    console = stdout_console()
    console.print(f"[bold]{name}[/]: a ramp of {len({r['offered'] for r in rows})} offered rates", highlight=False)
    table, _ = results_table(console, ramp_columns(rows), rows)
    console.print(table)
