"""`dynosim demo`: the seed study's table and headline, reproduced (the study is
:mod:`dynosim.demo`)."""

from __future__ import annotations

import argparse
import time
from typing import Any, Dict, List, Tuple

from .. import demo as study
from ..capacity import min_dynos, parse_target, shortfall
from ..cost import Pricing
from ..demo import ARTICLE_RANDOM_75, ARTICLE_ROWS, HEADLINE_TARGET, table
from ..display import Column, activity, duration, results_table, stdout_console
from ..output import print_json
from ..results import PolicyResult
from ..scenario import Scenario
from .common import add_scenario_arguments, add_wide_argument, scenario_from_args


def register(commands: argparse._SubParsersAction) -> None:
    help = "Reproduce the seed study: its table, then the dynos each policy needs and their cost."
    p = commands.add_parser("demo", help=help, description=study.__doc__)
    add_scenario_arguments(p)
    p.add_argument("--target", default=HEADLINE_TARGET, help=f'the headline\'s target (default "{HEADLINE_TARGET}")')
    p.add_argument("--json", action="store_true", help="print JSON")
    add_wide_argument(p)
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    scenario = scenario_from_args(args)
    target = parse_target(args.target)
    pricing = Pricing.from_scenario(scenario.doc, scenario.source)
    started = time.monotonic()
    with activity() as shown:
        task = shown.task("the article's table", note=f"0 of {len(ARTICLE_ROWS)} rows")
        rows = table(scenario, on_row=lambda n: shown.update(
            task, note=f"{n} of {len(ARTICLE_ROWS)} rows"))
        plans = {}
        for policy in ("intelligent", "random"):
            shown.update(task, description=f"dynos needed by {policy} routing", note="")
            plans[policy] = min_dynos(scenario, policy, [target], on_step=lambda n, ok: shown.update(
                task, note=f"{n:,} dynos {'meet' if ok else 'miss'} the target"))
    seconds = time.monotonic() - started
    if args.json:
        print_json({
            "scenario": scenario.name,
            "rows": [r.to_dict() for _, _, r in rows],
            "target": str(target),
            "dyno_type": pricing.dyno_type,
            "capacity": {p: dict(r.to_dict(), monthly_cost=pricing.monthly(r.dynos) if r.dynos else None)
                         for p, r in plans.items()},
        })
        return 0
    _print(scenario, rows, target, plans, pricing, seconds, wide=args.wide)
    return 0


#: The article's columns, with 95% intervals. Rows are (policy, dynos, PolicyResult).
DEMO_COLUMNS = [
    Column("routing", lambda row: row[0], kind="text"),
    Column("dynos", lambda row: f"{row[1]:,}", kind="text"),
    Column("queued", lambda row: row[2].estimate("queued_fraction"), kind="percent", ci=True),
    Column("mean queue\nof queued", lambda row: row[2].estimate("queue_of_queued.mean"), kind="time", ci=True),
    Column("median queue\nof queued", lambda row: row[2].estimate("queue_of_queued.p50"), kind="time", drop=2),
    Column("mean queue\nof all", lambda row: row[2].estimate("queue.mean"), kind="time", ci=True, drop=3),
    Column("median queue\nof all", lambda row: row[2].estimate("queue.p50"), kind="time", drop=1),
]


def _print(scenario: Scenario, rows: List[Tuple[str, int, PolicyResult]], target: Any,
           plans: Dict[str, Any], pricing: Pricing, seconds: float, *, wide: bool = False) -> None:
    console = stdout_console(wide=wide)
    head = rows[0][2].report
    console.print(
        f"[bold]The seed study, reproduced[/bold] ({scenario.name}): {head['arrival_rate'] * 60:,.0f} req/min "
        f"Poisson, mean service {duration(head['service_mean'])}, single-slot dynos; "
        f"{head['replications']} replications × {head['duration'] / 60:g} simulated min per row",
        highlight=False,
    )
    table, left_out = results_table(console, DEMO_COLUMNS, rows, wide=wide)
    console.print(table)
    hidden = f" Not shown: {', '.join(left_out)} (--wide shows them)." if left_out else ""
    console.print(f"The article, random routing at 75 dynos: {ARTICLE_RANDOM_75['queued_fraction']:.0%} queued, "
                  f"mean queue time of queued requests {ARTICLE_RANDOM_75['queue_of_queued.mean']} s. "
                  f"± is the half-width of a 95% confidence interval.{hidden}", style="dim", highlight=False)
    i, r = plans["intelligent"], plans["random"]
    if i.dynos and r.dynos:
        console.print(
            f"\n[bold]For {target}[/bold] (upper end of the 95% interval): intelligent routing needs "
            f"[bold]{i.dynos:,}[/bold] dynos (${pricing.monthly(i.dynos):,.0f}/month), random routing "
            f"[bold]{r.dynos:,}[/bold] (${pricing.monthly(r.dynos):,.0f}/month): "
            f"[bold]{r.dynos / i.dynos:.0f}×[/bold] as many, priced as {pricing.describe()}. "
            "The article: 80 vs 4,000 (50×).",
            highlight=False,
        )
    else:
        for policy, plan in plans.items():
            if plan.dynos is None:
                console.print(f"\n{policy}: {shortfall(plan, [target])}", highlight=False)
    console.print(f"({seconds:.1f} s)", style="dim")
