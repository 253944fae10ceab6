"""`dynosim run`: run a scenario and print its queueing figures (a table, or JSON).

``dynosim compare`` (:mod:`dynosim.cli.compare`) is the same command with ``--policy``
required; both use :func:`scenario_command` and :func:`main` from here."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, List, Tuple

from .. import timeseries
from ..api import run as run_scenario
from ..errors import DynosimError
from ..display import duration, results_table, status, stdout_console
from ..output import print_json
from ..results import PolicyResult, Results
from ..run_report import run_columns, run_report
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
        write_html(args.html, run_report(scenario, results, command=command_line(), policies=args.policy,
                                         title=f"dynosim {args.command}: {scenario.name}", interval=interval,
                                         warnings=recorded_warnings()))
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
