"""`dynosim capacity`: the fewest dynos that meet latency targets, per routing policy, and
their cost (the search is :mod:`dynosim.capacity`'s)."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Callable, Dict, List, Sequence

from .. import capacity as planning
from ..capacity import CapacityResult, Target, estimate_text, plan, shortfall
from ..cost import Pricing
from ..display import Column, activity, results_table, stdout_console
from ..errors import NotSteadyWarning
from ..output import print_json
from ..scenario import Scenario
from .common import add_scenario_arguments, add_wide_argument, policy_list, positive_int, scenario_from_args, target

CAPACITY_EPILOG = (
    "A target that no number of dynos can meet (a response time below what the service time "
    "alone takes) is refused before searching, exit code 2. When no count up to --max-dynos "
    "meets the targets, the answer is 'none found' with the target missed, the closest value "
    "reached and at how many dynos, exit code 0."
)


def register(commands: argparse._SubParsersAction) -> None:
    help = "Find the fewest dynos that meet latency targets, per routing policy, and their cost."
    search = (planning.__doc__ or "").split("\n\n")[1].replace("\n", " ")  # how the search works
    p = commands.add_parser("capacity", help=help, description=help + " " + search, epilog=CAPACITY_EPILOG)
    add_scenario_arguments(p)
    p.add_argument("--target", dest="targets", action="append", required=True, type=target,
                   metavar='"METRIC OP VALUE"', help='e.g. "queue.mean <= 10ms" (repeatable; all must hold)')
    p.add_argument("--policy", type=policy_list, metavar="P1,P2",
                   help="policies to plan for (default: the scenario's router.policy)")
    p.add_argument("--slots", type=_slots_list, metavar="K1,K2",
                   help="also search workers per dyno: the fewest dynos for each slots value")
    p.add_argument("--dyno-type", help="price the answer as this dyno type (default: the scenario's, else standard-1x)")
    p.add_argument("--max-dynos", type=positive_int, default=100_000, help="give up above this count (default 100000)")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_wide_argument(p)
    p.set_defaults(handler=main)


def _slots_list(text: str) -> List[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1, got {text!r}")
    return values


def main(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    # A fixed fleet is sized: [autoscale], if any, is left out (said once the search is done, so
    # that a mistake found before it is the one line on stderr).
    autoscaled = scenario.without_autoscale() is not scenario
    scenario = scenario.without_autoscale()
    policies = args.policy or scenario.policies
    pricing = Pricing.from_scenario(scenario.doc, scenario.source, args.dyno_type)
    for policy in policies:
        scenario.for_policy(policy).describe()  # validate everything before searching
    started = time.monotonic()
    slots = args.slots or [None]
    with activity() as shown:
        searches = {(p, k or 0): shown.task(p + (f" ×{k} slots" if k else ""), note="waiting")
                    for p in policies for k in slots}

        tried: Dict[tuple, int] = {}

        def step(policy: str, k: int, n: int, ok: bool) -> None:
            tried[(policy, k)] = tried.get((policy, k), 0) + 1
            shown.update(searches[(policy, k)], advance=1,
                         note=f"{tried[(policy, k)]} counts tried; {n:,} dynos {'meet' if ok else 'miss'} the targets")

        results = plan(scenario, policies, args.targets, slots=slots, dyno_type=args.dyno_type,
                       max_dynos=args.max_dynos, on_step=step)
    if autoscaled:
        print("dynosim: warning: capacity sizes a fixed fleet: the scenario's [autoscale] is left out (dynosim "
              "tune searches an autoscaler's settings against it)", file=sys.stderr)
    for r in results:
        if r.not_steady:
            warnings.warn(f"{r.policy} at {r.dynos:,} dynos: {r.not_steady}", NotSteadyWarning)
    if args.json:
        print_json({"scenario": scenario.name, "targets": [str(t) for t in args.targets],
                    "dyno_type": pricing.dyno_type, "price": pricing.price,
                    "results": [r.to_dict() for r in results]})
        return 0
    print_plan(scenario, args.targets, results, pricing, time.monotonic() - started, wide=args.wide)
    return 0


def print_plan(scenario: Scenario, targets: Sequence[Target], results: Sequence[CapacityResult],
               pricing: Pricing, seconds: float, *, wide: bool = False) -> None:
    console = stdout_console(wide=wide)
    console.print(f"[bold]{scenario.name}[/bold]: fewest dynos meeting {' and '.join(map(str, targets))} "
                  f"(upper end of the 95% interval), priced as {pricing.describe()}", highlight=False)

    def target_cell(t: Target) -> Callable[[CapacityResult], str]:
        def cell(r: CapacityResult) -> str:
            e = r.estimates.get(t.metric)
            return "-" if e is None else estimate_text(t, e)
        return cell

    columns = ([Column("policy", lambda r: r.policy, kind="text"),
                Column("slots", lambda r: str(r.slots), kind="text"),
                Column("dynos", lambda r: f"{r.dynos:,}" if r.dynos else "none found", kind="text")]
               + [Column(t.metric, target_cell(t), kind="text", drop=2) for t in targets]
               + [Column("$/month", lambda r: f"{r.monthly_cost:,.0f}" if r.monthly_cost is not None else "-",
                         kind="text"),
                  Column("counts\ntried", lambda r: str(len(r.evaluated)), kind="text", drop=1)])
    table, left_out = results_table(console, columns, results, wide=wide)
    console.print(table)
    for r in results:
        if r.dynos is None:
            at = f" with {r.slots} slots per dyno" if len({x.slots for x in results}) > 1 else ""
            console.print(f"{r.policy}{at}: {shortfall(r, targets)}.", highlight=False)
    # Ratios compare policies at the same workers per dyno.
    for slots in sorted({r.slots for r in results}):
        found = [(r, r.dynos) for r in results if r.slots == slots and r.dynos is not None]
        if len(found) < 2:
            continue
        best, fewest = min(found, key=lambda pair: pair[1])
        per = f" at {slots} slot{'s' if slots > 1 else ''} per dyno" if len({r.slots for r in results}) > 1 else ""
        ratios = ", ".join(f"{r.policy} {n / fewest:.1f}× ({n:,})" for r, n in found if r is not best)
        console.print(f"Dynos needed relative to {best.policy} ({fewest:,}){per}: {ratios}.", highlight=False)
    hidden = f"; not shown: {', '.join(left_out)} (--wide shows them)" if left_out else ""
    console.print(f"searched in {seconds:.1f} s{hidden}", style="dim", highlight=False)
