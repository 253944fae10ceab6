"""`dynosim ramp`: the scenario at each offered rate in turn, autobench style; prints offered
against response rate, errors and latency, and writes CSV, JSON and a plot. The ramp itself is
:mod:`dynosim.ramp`."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

from .. import ramp as ramps
from ..display import Column, activity, results_table, stdout_console
from ..output import print_json
from .common import add_scenario_arguments, policy_list, policy_names, scenario_from_args


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

        def progress(what: str, rate: float) -> None:
            a.update(task, note=f"{what} at {rate:g} req/s")

        rows = ramps.ramp(scenario, args.rates, args.policy, progress=progress)
    if args.json:
        print_json({"ramp": rows})
    else:
        print_table(scenario.name, rows)
    if args.out:
        written = ramps.write(rows, args.out, f"{scenario.name}: offered against response rate")
        print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


def print_table(name: str, rows: List[Dict[str, Any]]) -> None:
    console = stdout_console()
    console.print(f"[bold]{name}[/]: a ramp of {len({r['offered'] for r in rows})} offered rates", highlight=False)

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
    table, _ = results_table(console, columns, rows)
    console.print(table)
