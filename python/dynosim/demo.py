"""`dynosim demo`: the seed study's table and headline, reproduced.

Rap Genius (2013) simulated intelligent routing at 50, 60 and 75 dynos and random routing at
75 to 10,000 dynos, 5 simulated minutes each, and concluded that "if your app needs 80 dynos
with an intelligent router, it needs 4,000 with a random router". This prints the same table
(with 95% confidence intervals over replications) and the dynos each policy needs for a mean
queue time of at most 10 ms, their ratio and their monthly cost.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Dict, List, Tuple

from .api import run as run_scenario
from .capacity import min_dynos, parse_target
from .cost import Pricing
from .results import PolicyResult
from .scenario import Scenario

#: The article's configurations.
ARTICLE_ROWS: List[Tuple[str, int]] = (
    [("intelligent", n) for n in (50, 60, 75)]
    + [("random", n) for n in (75, 100, 150, 200, 500, 1000, 5000, 10000)]
)
#: What the article published for random routing at 75 dynos.
ARTICLE_RANDOM_75 = {"queued_fraction": 0.62, "queue_of_queued.mean": 2.763}
HEADLINE_TARGET = "queue.mean <= 10ms"


def table(scenario: Scenario) -> List[Tuple[str, int, PolicyResult]]:
    """Runs the article's configurations on the scenario (same seed, same traffic)."""
    rows = []
    for policy, dynos in ARTICLE_ROWS:
        variant = scenario.with_overrides({"router.policy": policy, "fleet.dynos": dynos})
        rows.append((policy, dynos, run_scenario(variant)[0]))
    return rows


def register(commands: Any) -> None:
    from .cli import add_scenario_arguments

    help = "Reproduce the seed study: its table, then the dynos each policy needs and their cost."
    p = commands.add_parser("demo", help=help, description=__doc__)
    add_scenario_arguments(p)
    p.add_argument("--target", default=HEADLINE_TARGET, help=f'the headline\'s target (default "{HEADLINE_TARGET}")')
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    from .cli import scenario_from_args
    from .output import print_json

    scenario = scenario_from_args(args)
    target = parse_target(args.target)
    pricing = Pricing.from_scenario(scenario.doc, scenario.source)
    started = time.monotonic()
    rows = table(scenario)
    plans = {p: min_dynos(scenario, p, [target]) for p in ("intelligent", "random")}
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
    _print(scenario, rows, target, plans, pricing, seconds)
    return 0


def _print(scenario: Scenario, rows: List[Tuple[str, int, PolicyResult]], target: Any,
           plans: Dict[str, Any], pricing: Pricing, seconds: float) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table

    from .cli import _duration, _percent, _with_ci

    console = Console(width=None if sys.stdout.isatty() else 140)
    head = rows[0][2].report
    console.print(
        f"[bold]The seed study, reproduced[/bold] ({scenario.name}): {head['arrival_rate'] * 60:,.0f} req/min "
        f"Poisson, mean service {_duration(head['service_mean'])}, single-slot dynos; "
        f"{head['replications']} replications × {head['duration'] / 60:g} simulated min per row"
    )
    t = Table(header_style="bold")
    for col in ("routing", "dynos", "queued", "mean queue\n(queued)", "median queue\n(queued)",
                "mean queue\n(all)", "median queue\n(all)"):
        t.add_column(col, justify="left" if col == "routing" else "right", no_wrap=True)
    for policy, dynos, r in rows:
        t.add_row(policy, f"{dynos:,}", _with_ci(r, "queued_fraction", _percent),
                  _with_ci(r, "queue_of_queued.mean", _duration), _duration(r["queue_of_queued.p50"]),
                  _with_ci(r, "queue.mean", _duration), _duration(r["queue.p50"]))
    console.print(t)
    console.print(f"The article, random routing at 75 dynos: {ARTICLE_RANDOM_75['queued_fraction']:.0%} queued, "
                  f"mean queue time of queued requests {ARTICLE_RANDOM_75['queue_of_queued.mean']} s. "
                  "± is the half-width of a 95% confidence interval.", style="dim")
    i, r = plans["intelligent"], plans["random"]
    if i.dynos and r.dynos:
        console.print(
            f"\n[bold]For {target}[/bold] (upper end of the 95% interval): intelligent routing needs "
            f"[bold]{i.dynos:,}[/bold] dynos (${pricing.monthly(i.dynos):,.0f}/month), random routing "
            f"[bold]{r.dynos:,}[/bold] (${pricing.monthly(r.dynos):,.0f}/month): "
            f"[bold]{r.dynos / i.dynos:.0f}×[/bold] as many, priced as {pricing.describe()}. "
            "The article: 80 vs 4,000 (50×)."
        )
    console.print(f"({seconds:.1f} s)", style="dim")
