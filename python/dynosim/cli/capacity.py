"""`dynosim capacity`: the fewest dynos that meet latency targets, per routing policy, and
their cost (the search is :mod:`dynosim.capacity`'s)."""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any, Callable, Dict, List, Sequence

from .. import capacity as planning
from .. import html_report
from ..capacity import CapacityResult, Target, estimate_text, plan, shortfall
from ..cost import Pricing
from ..distributed import dask_client
from ..display import Column, activity, results_table, stdout_console
from ..errors import NotSteadyWarning
from ..output import print_json
from ..results import is_fraction_metric, is_time_metric
from ..scenario import Scenario
from .common import (add_dask_argument, add_html_argument, add_scenario_arguments, add_wide_argument, command_line, policy_list,
                     positive_int, recorded_warnings, scenario_from_args, target, warning, write_html)

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
    p.add_argument("--vary", default=planning.DEFAULT_VARY, metavar="KEY",
                   help="the dyno count to size: fleet.dynos (the entry fleet's, the default) or "
                        "services.NAME.fleet.dynos (a service's, against end-to-end or service targets)")
    p.add_argument("--slots", type=_slots_list, metavar="K1,K2",
                   help="also search workers per dyno (of the varied fleet): the fewest dynos for each slots value")
    p.add_argument("--dyno-type", help="price the answer as this dyno type (default: the varied fleet's, else "
                                       "standard-1x)")
    p.add_argument("--max-dynos", type=positive_int, default=100_000, help="give up above this count (default 100000)")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_html_argument(p)
    add_wide_argument(p)
    add_dask_argument(p)
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
    service = planning.vary_service(scenario, args.vary)
    planning.check_targets(scenario, args.targets)
    # A fixed fleet is sized: [autoscale], if any, is left out (said once the search is done, so
    # that a mistake found before it is the one line on stderr).
    fixed = planning.without_tier_autoscale(scenario, service)
    autoscaled = fixed is not scenario
    scenario = fixed
    policies = args.policy or scenario.policies
    pricing = planning.tier_pricing(scenario, service, args.dyno_type)
    for policy in policies:
        scenario.for_policy(policy).describe()  # validate everything before searching
    started = time.monotonic()
    slots = args.slots or [None]
    with dask_client(args.dask) as client, activity() as shown:
        searches = {(p, k or 0): shown.task(p + (f" ×{k} slots" if k else ""), note="waiting")
                    for p in policies for k in slots}

        tried: Dict[tuple, int] = {}

        def step(policy: str, k: int, n: int, ok: bool) -> None:
            tried[(policy, k)] = tried.get((policy, k), 0) + 1
            shown.update(searches[(policy, k)], advance=1,
                         note=f"{tried[(policy, k)]} counts tried; {n:,} dynos {'meet' if ok else 'miss'} the targets")

        results = plan(scenario, policies, args.targets, slots=slots, dyno_type=args.dyno_type,
                       max_dynos=args.max_dynos, on_step=step, client=client, vary=args.vary)
    if autoscaled:
        table = "[autoscale]" if service is None else f"[services.{service}.autoscale]"
        warning(f"capacity sizes a fixed fleet: the scenario's {table} is left out (dynosim "
                "tune searches an autoscaler's settings against it)")
    for r in results:
        if r.not_steady:
            warnings.warn(f"{r.policy} at {r.dynos:,} dynos: {r.not_steady}", NotSteadyWarning)
    seconds = time.monotonic() - started
    if args.json:
        print_json({"scenario": scenario.name, "targets": [str(t) for t in args.targets],
                    "vary": args.vary, "dyno_type": pricing.dyno_type, "price": pricing.price,
                    "results": [r.to_dict() for r in results]})
    else:
        print_plan(scenario, args.targets, results, pricing, seconds, wide=args.wide, vary=args.vary)
    if args.html is not None:
        write_html(args.html, capacity_report(scenario, args.targets, results, pricing, seconds))
    return 0


def plan_columns(targets: Sequence[Target]) -> List[Column]:
    """The table's columns: the policy, its slots, the dynos found, each target's estimate."""
    def target_cell(t: Target) -> Callable[[CapacityResult], str]:
        def cell(r: CapacityResult) -> str:
            e = r.estimates.get(t.metric)
            return "-" if e is None else estimate_text(t, e)
        return cell

    return ([Column("policy", lambda r: r.policy, kind="text"),
             Column("slots", lambda r: str(r.slots), kind="text"),
             Column("dynos", lambda r: f"{r.dynos:,}" if r.dynos else "none found", kind="text")]
            + [Column(t.metric, target_cell(t), kind="text", drop=2) for t in targets]
            + [Column("$/month", lambda r: f"{r.monthly_cost:,.0f}" if r.monthly_cost is not None else "-",
                      kind="text"),
               Column("counts\ntried", lambda r: str(len(r.evaluated)), kind="text", drop=1)])


def plan_lines(targets: Sequence[Target], results: Sequence[CapacityResult]) -> List[str]:
    """What the table does not say: targets missed, and the dynos each policy needs relative to
    the best."""
    lines = []
    for r in results:
        if r.dynos is None:
            at = f" with {r.slots} slots per dyno" if len({x.slots for x in results}) > 1 else ""
            lines.append(f"{r.policy}{at}: {shortfall(r, targets)}.")
    # Ratios compare policies at the same workers per dyno.
    for slots in sorted({r.slots for r in results}):
        found = [(r, r.dynos) for r in results if r.slots == slots and r.dynos is not None]
        if len(found) < 2:
            continue
        best, fewest = min(found, key=lambda pair: pair[1])
        per = f" at {slots} slot{'s' if slots > 1 else ''} per dyno" if len({r.slots for r in results}) > 1 else ""
        ratios = ", ".join(f"{r.policy} {n / fewest:.1f}× ({n:,})" for r, n in found if r is not best)
        lines.append(f"Dynos needed relative to {best.policy} ({fewest:,}){per}: {ratios}.")
    return lines


def capacity_report(scenario: Scenario, targets: Sequence[Target], results: Sequence[CapacityResult],
                    pricing: Pricing, seconds: float) -> Dict[str, Any]:
    """The HTML report: the scenario, the table, what it does not say, and for each target its
    metric at every count tried, per policy, against the target."""
    head = (f"Fewest dynos meeting {' and '.join(map(str, targets))} (upper end of the 95% interval), priced as "
            f"{pricing.describe()}; searched in {seconds:.1f} s.")
    sections: List[Dict[str, Any]] = [
        html_report.scenario_section(scenario),
        html_report.table_section("Dynos needed", plan_columns(targets), results, notes=[head, *plan_lines(targets, results)]),
        html_report.notes_section("Warnings", recorded_warnings(), warning=True),
    ]
    multi = len({r.slots for r in results}) > 1
    for t in targets:
        counts = sorted({n for r in results for n in r.curve})
        scale, unit = ((1e3, "ms") if is_time_metric(t.metric) else (100.0, "%") if is_fraction_metric(t.metric)
                       else (1.0, ""))
        series: List[Dict[str, Any]] = []
        for r in results:
            est = [r.curve.get(n, {}).get(t.metric) for n in counts]
            series.append({"label": r.policy + (f" ×{r.slots} slots" if multi else ""),
                           "y": [None if e is None else e.mean * scale for e in est],
                           "lo": [None if e is None else e.ci_low * scale for e in est],
                           "hi": [None if e is None else e.ci_high * scale for e in est]})
        series.append({"label": f"target {t}", "y": [t.value * scale for _ in counts], "dash": True})
        sections.append(html_report.line_plot(
            t.metric, "dynos", counts, f"{t.metric}" + (f" ({unit})" if unit else ""), series, span_gaps=True,
            x_log=bool(counts) and counts[-1] >= 10 * counts[0],
            caption="The search's runs: the metric at each count tried, with its 95% interval; a count meets "
                    "the target when the interval's far end does."))
    return html_report.document(f"dynosim capacity: {scenario.name}", command_line(), sections)


def print_plan(scenario: Scenario, targets: Sequence[Target], results: Sequence[CapacityResult],
               pricing: Pricing, seconds: float, *, wide: bool = False, vary: str = planning.DEFAULT_VARY) -> None:
    console = stdout_console(wide=wide)
    whose = "" if vary == planning.DEFAULT_VARY else f" ({vary})"
    console.print(f"[bold]{scenario.name}[/bold]: fewest dynos{whose} meeting {' and '.join(map(str, targets))} "
                  f"(upper end of the 95% interval), priced as {pricing.describe()}", highlight=False)
    table, left_out = results_table(console, plan_columns(targets), results, wide=wide)
    console.print(table)
    for line in plan_lines(targets, results):
        console.print(line, highlight=False)
    hidden = f"; not shown: {', '.join(left_out)} (--wide shows them)" if left_out else ""
    console.print(f"searched in {seconds:.1f} s{hidden}", style="dim", highlight=False)
