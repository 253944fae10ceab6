"""`dynosim tune`: the cheapest settings of a grid that meet every target with confidence, the
runner-up, and the fixed fleet meeting the same targets, priced (:mod:`dynosim.tune`)."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from typing import Any, Callable, Dict, List, Sequence

from .. import html_report
from ..capacity import Target, estimate_text, format_value
from ..distributed import dask_client
from ..display import Column, activity, duration, results_table, stdout_console
from ..errors import NotSteadyWarning
from ..output import print_json
from ..results import is_fraction_metric, is_time_metric
from ..scenario import Scenario
from ..sweep import parse_vary_args, value_text
from ..tune import Setting, Tuning, tune
from .common import (add_dask_argument, add_html_argument, add_scenario_arguments, add_wide_argument, command_line, positive_int,
                     recorded_warnings, scenario_from_args, target, warning, write_html)

TUNE_EPILOG = (
    "Example: dynosim tune fleet.toml --vary autoscale.upscale_above=50ms,100ms,200ms "
    "--vary autoscale.downscale_delay=5min,10min --target \"response.p95 <= 500ms\". "
    "SPEC is the sweep's (a list a,b,c or a range A..B[:N][:log|:lin]); a target is capacity's. "
    "When no setting meets every target, one line says so and shows the closest, exit code 0 "
    "(as capacity's 'none found'). Details: docs/tune.md."
)


def register(commands: argparse._SubParsersAction) -> None:
    help = "Find the cheapest settings that meet latency targets, against a fixed fleet."
    description = (help + " Every combination of the --vary values runs with its replications; a setting "
                   "meets a target when the far end of the metric's 95% interval does. Settings are "
                   "priced by dyno-seconds (prorated to the second) and ranked by dollars per day; the "
                   "fixed fleet is the scenario without [autoscale] and the fewest dynos meeting the "
                   "same targets.")
    p = commands.add_parser("tune", help=help, description=description, epilog=TUNE_EPILOG)
    add_scenario_arguments(p)
    p.add_argument("--vary", action="append", required=True, metavar="KEY.PATH=SPEC",
                   help="a key and its values: a list a,b,c or a range A..B[:N][:log|:lin] "
                        "(repeatable: every combination is a setting)")
    p.add_argument("--target", dest="targets", action="append", required=True, type=target,
                   metavar='"METRIC OP VALUE"', help='e.g. "response.p95 <= 500ms" (repeatable; all must hold)')
    p.add_argument("--dyno-type", help="price every setting as this dyno type (default: each setting's "
                                       "scenario's, else standard-1x)")
    p.add_argument("--max-dynos", type=positive_int, default=100_000,
                   help="the fixed fleet's search gives up above this count (default 100000)")
    p.add_argument("--json", action="store_true", help="print the JSON document instead of the table")
    add_html_argument(p)
    add_wide_argument(p)
    add_dask_argument(p)
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    vary = parse_vary_args(args.vary)
    scenario = scenario_from_args(args)
    with dask_client(args.dask) as client:
        # The settings' progress bar, then the search's line: one live display at a time.
        tuning = tune(scenario, vary, args.targets, dyno_type=args.dyno_type, progress=sys.stderr.isatty(),
                      fixed=False, client=client)
        with activity() as shown:
            task = shown.task("fixed fleet", note="")
            tried = [0]

            def step(n: int, ok: bool) -> None:
                tried[0] += 1
                shown.update(task, advance=1,
                             note=f"{tried[0]} counts tried; {n:,} dynos {'meet' if ok else 'miss'} the targets")

            tuning.find_fixed_fleet(scenario, dyno_type=args.dyno_type, max_dynos=args.max_dynos, on_step=step,
                                    client=client)
    sweep = tuning.sweep
    for line in (sweep.unusable and sweep.unusable_summary("they have no figures and meet no target"),
                 sweep.unsettled_summary()):
        if line:
            warning(line)
    fixed = tuning.fixed
    if fixed is not None and fixed.not_steady:
        warnings.warn(f"the fixed fleet of {fixed.dynos:,} dynos: {fixed.not_steady}", NotSteadyWarning)
    if args.json:
        print_json(tuning.to_json())
    else:
        print_tuning(tuning, wide=args.wide)
    if args.html is not None:
        write_html(args.html, tuning_report(scenario, tuning))
    return 0


# --- the table on stdout ---------------------------------------------------------------------


def tuning_columns(tuning: Tuning) -> List[Column]:
    """The table's columns: each varied key, the policy, each target, the fleet, the cost."""
    targets = tuning.targets
    best, runner_up = tuning.best, tuning.runner_up
    several_policies = len({s.policy for s in tuning.settings}) > 1

    def answer(s: Setting) -> str:
        return "best" if s is best else "runner-up" if s is runner_up else ""

    def key_cell(key: str) -> Callable[[Setting], str]:
        return lambda s: value_text(s.values[key])

    columns = ([Column(k, key_cell(k), kind="text") for k in tuning.vary if k != "router.policy" or not several_policies]
               + ([Column("policy", lambda s: s.policy, kind="text")] if several_policies else [])
               + [Column(t.metric, _target_cell(t), kind="text", drop=2) for t in targets]
               + [Column("dynos\n(mean)", lambda s: _fleet_size(s), kind="text", drop=1),
                  Column("$/day", lambda s: f"{s.cost.dollars_per_day:,.2f}", kind="text"),
                  Column("meets", lambda s: "yes" if s.meets else "no" if s.status == "ok" else s.status,
                         kind="text"),
                  Column("", answer, kind="text")])
    return columns


def tuning_report(scenario: Scenario, tuning: Tuning) -> Dict[str, Any]:
    """The HTML report: the scenario, every setting ranked by cost, the answer in words, and
    for each target each setting's metric (the far end of its interval) against its $/day."""
    settings = [s for s in tuning.settings if s.status == "ok"]
    order = sorted(settings, key=lambda s: s.cost.dollars_per_day)
    xs = [s.cost.dollars_per_day for s in order]
    head = (f"{len(tuning.settings)} settings against {' and '.join(map(str, tuning.targets))} (far end of the 95% "
            "interval), ranked by $/day; $/day: the run's window scaled to 24 h.")
    sections: List[Dict[str, Any]] = [
        html_report.scenario_section(scenario),
        html_report.table_section("Settings", tuning_columns(tuning), tuning.settings,
                                  notes=[head, *summary_lines(tuning)]),
        html_report.notes_section("Warnings", recorded_warnings(), warning=True),
    ]
    for t in tuning.targets:
        scale, unit = ((1e3, " (ms)") if is_time_metric(t.metric) else (100.0, " (%)") if is_fraction_metric(t.metric)
                       else (1.0, ""))
        far = [t.far_end(s.estimates[t.metric]) * scale for s in order]
        sections.append(html_report.line_plot(
            f"{t.metric} against cost", "$/day", xs, t.metric + unit,
            [{"label": "meets every target", "y": [v if s.meets else None for v, s in zip(far, order)], "points": True},
             {"label": "misses a target", "y": [None if s.meets else v for v, s in zip(far, order)], "points": True},
             {"label": f"target {t}", "y": [t.value * scale for _ in order], "dash": True}],
            caption="Each setting that ran: the far end of its 95% interval against what it costs a day; the "
                    "cheapest point among those meeting every target is the best."))
    return html_report.document(f"dynosim tune: {scenario.name}", command_line(), sections)


def print_tuning(tuning: Tuning, *, wide: bool = False) -> None:
    from rich.markup import escape

    console = stdout_console(wide=wide)
    console.print(f"[bold]{escape(tuning.scenario)}[/bold]: {len(tuning.settings)} settings against "
                  f"{' and '.join(map(str, tuning.targets))} (far end of the 95% interval), ranked by $/day",
                  highlight=False)
    table, left_out = results_table(console, tuning_columns(tuning), tuning.settings, wide=wide)
    console.print(table)
    for line in summary_lines(tuning):
        # One line each, however long (the terminal wraps it); "[autoscale]" is text, not markup.
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    hidden = f"; not shown: {', '.join(left_out)} (--wide shows them)" if left_out else ""
    console.print(f"(≤ x), (≥ x): the far end of the 95% interval; $/day: the run's window scaled to 24 h{hidden}",
                  style="dim", highlight=False)


def _target_cell(t: Target) -> Callable[[Setting], str]:
    def cell(s: Setting) -> str:
        e = s.estimates.get(t.metric)
        return "-" if e is None else estimate_text(t, e)
    return cell


def _fleet_size(s: Setting) -> str:
    return f"{s.cost.dyno_seconds / s.cost.window:,.3g}"


def summary_lines(tuning: Tuning) -> Sequence[str]:
    """The answer in words: best, runner-up, fixed fleet and the saving; or the one line that
    says no setting meets every target, with the closest."""
    lines = []
    best, runner_up, fixed = tuning.best, tuning.runner_up, tuning.fixed
    if best is None:
        closest = tuning.closest
        near = (f"; closest: {_label(closest, tuning)} ({_misses(closest, tuning.targets)}, "
                f"${closest.cost.dollars_per_day:,.2f}/day)" if closest else "; no setting ran (all unstable)")
        lines.append(f"No setting meets every target{near}.")
    else:
        lines.append(f"Best: {_label(best, tuning)}, {_price(best)}.")
        lines.append(f"Runner-up: {_label(runner_up, tuning)}, {_price(runner_up)}." if runner_up
                     else "Runner-up: none (one setting meets every target).")
    if fixed is not None:
        what = "the fixed fleet (without [autoscale])" if fixed.without_autoscale else "the fixed fleet"
        if fixed.dynos is None or fixed.cost is None:
            lines.append(f"Against {what}: none found under {fixed.policy}: {fixed.reason}.")
        else:
            priced = (fixed.pricing.describe() if fixed.pricing else '') + (_SERVICES if fixed.cost.with_services else '')
            lines.append(f"Against {what}: {fixed.dynos:,} dynos under {fixed.policy}, "
                         f"${fixed.cost.dollars_per_day:,.2f}/day ({priced}).")
    saving = tuning.saving
    if saving is not None:
        dollars, fraction = saving["dollars_per_day"], saving["fraction"]
        share = f" ({abs(fraction):.0%})" if not math.isnan(fraction) else ""
        if dollars >= 0:
            lines.append(f"The best saves ${dollars:,.2f}/day{share} against the fixed fleet.")
        else:
            lines.append(f"The best costs ${-dollars:,.2f}/day{share} more than the fixed fleet: "
                         "no setting of this grid is cheaper.")
    return lines


def _label(s: Setting, tuning: Tuning) -> str:
    parts = [f"{k}={value_text(v)}" for k, v in s.values.items()]
    if len({x.policy for x in tuning.settings}) > 1 and "router.policy" not in s.values:
        parts.append(f"policy {s.policy}")
    return ", ".join(parts)


def _price(s: Setting) -> str:
    return (f"${s.cost.dollars_per_day:,.2f}/day (${s.cost.dollars:,.4g} per {duration(s.cost.window)} "
            f"run, {s.pricing.describe()}{_SERVICES if s.cost.with_services else ''})")


#: How a whole app's price reads (docs/services.md).
_SERVICES = "; each service at its own"


def _misses(s: Setting, targets: Sequence[Target]) -> str:
    missed = []
    for t in targets:
        e = s.estimates[t.metric]
        if not t.met_by(e):
            side = "upper" if t.upper else "lower"
            missed.append(f"{t.metric} {format_value(t.metric, e.mean)}, {side} end "
                          f"{format_value(t.metric, t.far_end(e))}, against {format_value(t.metric, t.value)}")
    return "; ".join(missed)
