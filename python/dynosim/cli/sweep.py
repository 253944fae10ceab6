"""`dynosim sweep`: run a scenario over ranges and lists of keys; write CSV, JSON and a plot,
and print a summary table (or, with ``--json``, the JSON document, writing files only if
``--out`` is given). SPECs, running and the outputs are :mod:`dynosim.sweep`'s."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Dict, List

from .. import html_report
from ..distributed import dask_client
from ..display import Column, results_table, stdout_console
from ..errors import DynosimError
from ..output import print_json
from ..results import Estimate, is_metric, metric_names_hint
from ..sweep import (CLOSED_LOOP_METRIC, DEFAULT_METRIC, DEFAULT_POINTS, FORMATS, Sweep, metric_unit, output_paths,
                     parse_vary_args, plot_lines, value_text, write_outputs)
from .common import (add_dask_argument, add_html_argument, add_scenario_arguments, command_line, recorded_warnings, scenario_from_args,
                     warning, write_html)

#: ``--out``'s default when ``--json`` is not given.
DEFAULT_PREFIX = "sweep"


def register(commands: argparse._SubParsersAction) -> None:
    help = "Run a scenario over ranges of keys; write CSV, JSON and a plot."
    p = commands.add_parser(
        "sweep", help=help, description=help,
        epilog=("SPEC is a list a,b,c (each read like a --set value) or a range "
                f"A..B[:N][:log|:lin] (N points, default {DEFAULT_POINTS}; log spacing when "
                "A > 0 and B/A >= 10, else linear; whole-number bounds give whole numbers; "
                "A and B may be durations, rates or sizes, 50ms..400ms, given in seconds, req/s or bytes). "
                "Example: dynosim sweep --vary fleet.dynos=50..10000 "
                "--vary router.policy=random,intelligent"),
    )
    add_scenario_arguments(p)
    p.add_argument("--vary", action="append", required=True, metavar="KEY.PATH=SPEC",
                   help="a key and its values: a list a,b,c or a range A..B[:N][:log|:lin] "
                        "(repeatable: the sweep runs every combination)")
    p.add_argument("--json", action="store_true",
                   help="print PREFIX.json's document instead of the table; files are written only with --out")
    p.add_argument("--out", metavar="PREFIX",
                   help=f"write PREFIX.csv, PREFIX.json and PREFIX.png (default: {DEFAULT_PREFIX}; "
                        "none with --json)")
    p.add_argument("--metric", type=_metric, default=None,
                   help=f"the metric to plot and summarise (default: {DEFAULT_METRIC}, or "
                        f"{CLOSED_LOOP_METRIC} for a closed loop; names: docs/output.md)")
    p.add_argument("--format", type=_formats, metavar="png,svg",
                   help="plot format(s), comma-separated (default: png)")
    add_html_argument(p)
    add_dask_argument(p)
    p.set_defaults(handler=main)


def _load_cell(row: Dict[str, Any]) -> float:
    """The offered load; none for a closed loop, whose clients wait for their responses."""
    if "closed_loop.requests_per_s" in row:
        return math.nan
    return float(row.get("offered_load", math.nan))


def _metric(text: str) -> str:
    if not is_metric(text):
        raise argparse.ArgumentTypeError(f"unknown metric {text!r}; expected one of: {metric_names_hint()}")
    return text


def _formats(text: str) -> List[str]:
    names = [f.strip().lower().lstrip(".") for f in text.split(",") if f.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected png, svg or png,svg")
    for name in names:
        if name not in FORMATS:
            raise argparse.ArgumentTypeError(f"unknown plot format {name!r}; expected png, svg or both")
    return list(dict.fromkeys(names))


def main(args: argparse.Namespace) -> int:
    vary = parse_vary_args(args.vary)
    # Like the other verbs, --json is the document on stdout and nothing else: files only if asked.
    prefix = args.out if args.out is not None or args.json else DEFAULT_PREFIX
    if prefix is None and args.format is not None:
        raise DynosimError("--format: give --out PREFIX too (with --json a sweep writes no files unless asked)")
    outputs = output_paths(prefix, args.format or ["png"]) if prefix is not None else {}
    scenario = scenario_from_args(args)
    sweep = Sweep(scenario, vary, metric=args.metric)
    sweep.prepare()  # validates every point: nothing runs and nothing is written on error
    with dask_client(args.dask) as client:
        sweep.run(progress=sys.stderr.isatty(), client=client)
    if outputs:
        write_outputs(sweep, outputs)
    if sweep.unusable:
        warning(sweep.unusable_summary())
    if sweep.unsettled_summary():
        warning(str(sweep.unsettled_summary()))
    if args.json:
        print_json(sweep.to_json())  # the very text written to PREFIX.json
        if outputs:
            print("wrote " + ", ".join(str(p) for p in outputs.values()), file=sys.stderr)
    else:
        print_summary(sweep, outputs)
    if args.html is not None:
        write_html(args.html, sweep_report(sweep))
    return 0


# --- the summary on stdout -------------------------------------------------------------------


def summary_columns(sweep: Sweep) -> List[Column]:
    """The table's columns: each varied key, the policy, the load, the metric."""
    metric = sweep.metric

    def key_cell(key: str) -> Any:
        return lambda row: value_text(row[key])

    def metric_cell(row: Dict[str, Any]) -> Any:
        if row["status"] != "ok":
            return row["status"]
        return Estimate(row[metric], row.get(f"{metric}.ci_low", math.nan),
                        row.get(f"{metric}.ci_high", math.nan), math.nan)

    unit = metric_unit(metric)
    kind = "time" if unit == "s" else "percent" if unit == "fraction" else "number"
    return ([Column(k, key_cell(k), kind="text") for k in sweep.keys if k != "router.policy"]
            + [Column("policy", lambda row: str(row["policy"]), kind="text"),
               Column("load", _load_cell, kind="percent"),
               Column(metric if kind != "number" or not unit else f"{metric} ({unit})", metric_cell,
                      kind=kind, ci=True)])


def sweep_report(sweep: Sweep) -> Dict[str, Any]:
    """The HTML report: the scenario, every point's row, and the plot (the metric against the
    first numeric key, a line per combination of the others and policy, 95% bands)."""
    metric = sweep.metric
    xkey, categorical, categories, lines, labels = plot_lines(sweep)
    unit = metric_unit(metric)
    scale, shown = (1e3, f"{metric} (ms)") if unit == "s" else (100.0, f"{metric} (%)") if unit == "fraction" \
        else (1.0, f"{metric} ({unit})" if unit else metric)
    xs = list(range(len(categories))) if categorical else sorted({float(v) for v in sweep.vary[xkey]})
    series = []
    for group, line in lines.items():
        at = {float(x): k for k, x in enumerate(line["x"])}
        pick = [at.get(float(x)) for x in xs]
        series.append({"label": labels[group],
                       **{k: [None if j is None else line[k][j] * scale for j in pick] for k in ("y", "lo", "hi")}})
    n_ok = sum(1 for row in sweep.rows if row["status"] == "ok")
    sections: List[Dict[str, Any]] = [
        html_report.scenario_section(sweep.scenario),
        html_report.table_section(f"{len(sweep.points)} points, {len(sweep.rows)} rows ({n_ok} ok)",
                                  summary_columns(sweep), sweep.rows,
                                  notes=["± is the half-width of a 95% confidence interval over replications"]),
        html_report.notes_section("Warnings", recorded_warnings(), warning=True),
        html_report.line_plot(f"{metric} against {xkey}", xkey, xs, shown, series, span_gaps=True,
                              x_ticks=categories if categorical else None,
                              x_log=not categorical and bool(xs) and xs[0] > 0 and xs[-1] >= 10 * xs[0],
                              caption="Each point with its 95% interval over replications; points that were "
                                      "unstable or overloaded are left out."),
    ]
    return html_report.document(f"dynosim sweep: {sweep.scenario.name}", command_line(), sections)


def print_summary(sweep: Sweep, paths: Dict[str, Path]) -> None:
    console = stdout_console()
    n_ok = sum(1 for row in sweep.rows if row["status"] == "ok")
    console.print(f"[bold]{sweep.scenario.name}[/bold]: {len(sweep.points)} points, "
                  f"{len(sweep.rows)} rows ({n_ok} ok)", highlight=False)
    table, _ = results_table(console, summary_columns(sweep), sweep.rows)
    console.print(table)
    console.print("± is the half-width of a 95% confidence interval over replications.", style="dim")
    console.print("wrote " + ", ".join(str(p) for p in paths.values()), highlight=False)
