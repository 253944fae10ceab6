"""`dynosim stability`: the metastability map of a scenario with faults: a grid of two keys (a
load and a trigger), each cell the fraction of replications that recovered and how long they
took; in the terminal, as JSON, CSV, a picture and an HTML report, on this machine or a Dask
cluster. The grid is :mod:`dynosim.stability`'s."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List

from .. import html_report
from ..display import Column, results_table, stdout_console
from ..distributed import dask_client
from ..errors import DynosimError
from ..output import json_text, print_json, write_files
from ..stability import (RECOVERED, StabilityMap, duration_text, map_rows, plot_map, trigger_columns)
from ..sweep import csv_text, output_paths, parse_vary_args
from .common import (add_dask_argument, add_html_argument, add_scenario_arguments, command_line, recorded_warnings,
                     scenario_from_args, warning, write_html)


def register(commands: argparse._SubParsersAction) -> None:
    help = "The metastability map: a scenario with faults over a load and a trigger."
    p = commands.add_parser(
        "stability", help=help, description=help,
        epilog=("The first --vary is the map's rows (a load), the second its columns (a trigger). SPEC as in "
                "sweep: a list a,b,c or a range A..B[:N][:log|:lin]. Each cell: the fraction of replications "
                "whose goodput came back (stability.recovered) and their mean recovery time. Example: "
                "dynosim stability retry-storm --vary arrivals.rate=1..2:5 --vary faults.0.for=30,60,120,240"),
    )
    add_scenario_arguments(p)
    p.add_argument("--vary", action="append", required=True, metavar="KEY.PATH=SPEC",
                   help="a key and its values, twice: the load (rows), then the trigger (columns)")
    p.add_argument("--json", action="store_true", help="print the map's JSON document instead of the table")
    p.add_argument("--out", metavar="PREFIX", help="write PREFIX.csv (every cell's row), PREFIX.json and PREFIX.png")
    p.add_argument("--plot", type=Path, metavar="FILE", help="write the map as a picture (.png or .svg)")
    add_html_argument(p)
    add_dask_argument(p)
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    vary = parse_vary_args(args.vary)
    plot_path = args.plot
    if plot_path is not None and plot_path.suffix.lower() not in (".png", ".svg"):
        raise DynosimError(f"--plot: the picture is a .png or an .svg, got {plot_path}")
    outputs = output_paths(args.out, ["png"]) if args.out is not None else {}
    scenario = scenario_from_args(args)
    grid_map = StabilityMap(scenario, vary)
    grid_map.prepare()  # validates every cell: nothing runs and nothing is written on error
    with dask_client(args.dask) as client:
        # The table, the picture and the HTML report show the verdicts alone: each run stops
        # once its verdict is settled. --json and --out give every cell's metrics: whole runs.
        grid_map.run(progress=sys.stderr.isatty(), client=client,
                     verdicts_only=not (args.json or outputs))
    grid = grid_map.grid()
    title = f"{scenario.name}: fraction recovered · mean recovery time"
    writers: Dict[Path, Any] = {}
    for kind, path in outputs.items():
        if kind == "csv":
            writers[path] = lambda tmp: tmp.write_text(csv_text(grid_map.sweep), encoding="utf-8")
        elif kind == "json":
            writers[path] = lambda tmp: tmp.write_text(json_text(grid_map.to_json()), encoding="utf-8")
        else:
            writers[path] = lambda tmp, fmt=kind: plot_map(grid, str(tmp), fmt, title)
    if plot_path is not None:
        fmt = plot_path.suffix.lower().lstrip(".")
        writers[plot_path] = lambda tmp: plot_map(grid, str(tmp), fmt, title)
    if writers:
        write_files(writers, option="--out" if outputs else "--plot")
    if grid_map.sweep.unusable:
        warning(grid_map.sweep.unusable_summary("those cells have no verdict"))
    if args.json:
        print_json(grid_map.to_json())
    else:
        print_map(grid_map, grid)
    if writers:
        print("wrote " + ", ".join(str(p) for p in writers), file=sys.stderr)
    if args.html is not None:
        write_html(args.html, map_report(grid_map, grid))
    return 0


def map_columns(grid: Dict[str, Any]) -> List[Column]:
    cols = [Column(grid["load_key"], lambda row: row["load"], kind="text"),
            Column("load", lambda row: row["offered_load"], kind="percent")]
    for name in trigger_columns(grid):
        cols.append(Column(name, _cell(name), kind="text"))
    return cols


def _cell(name: str) -> Callable[[Dict[str, Any]], Any]:
    """A column's reader of the row's value under `name`."""
    return lambda row: row[name]


def _notes(grid_map: StabilityMap) -> List[str]:
    notes = ["each cell: the fraction of replications that recovered (goodput back to 95% of its level before "
             "the first fault, three intervals in a row, within run.recovery_window) · their mean recovery time"]
    if grid_map.lengthened:
        longest = max(grid_map.lengthened.values())
        notes.append(f"{len(grid_map.lengthened)} of {len(grid_map.sweep.points)} cells ran longer than "
                     f"run.duration, to see the whole recovery window (up to {duration_text(longest)})")
    return notes


def print_map(grid_map: StabilityMap, grid: Dict[str, Any]) -> None:
    console = stdout_console()
    console.print(f"[bold]{grid_map.scenario.name}[/bold]: {RECOVERED} by {grid['load_key']} (rows) and "
                  f"{grid['trigger_key']} (columns, its values)", highlight=False)
    table, _ = results_table(console, map_columns(grid), map_rows(grid))
    console.print(table)
    for note in _notes(grid_map):
        console.print(note, style="dim", highlight=False)


def map_report(grid_map: StabilityMap, grid: Dict[str, Any]) -> Dict[str, Any]:
    """The HTML report: the scenario, the map as a table, and the recovered fraction against
    the load, a line per trigger value."""
    loads = [float(v) for v in grid["loads"]] if all(isinstance(v, (int, float)) for v in grid["loads"]) else None
    series = []
    for j, trigger in enumerate(trigger_columns(grid)):
        ys = [row[j]["recovered"] * 100 if row[j]["status"] == "ok" and row[j]["recovered"] is not None else None
              for row in grid["cells"]]
        lo = [row[j]["recovered_low"] * 100 if row[j].get("recovered_low") is not None else None for row in grid["cells"]]
        hi = [row[j]["recovered_high"] * 100 if row[j].get("recovered_high") is not None else None
              for row in grid["cells"]]
        series.append({"label": f"{grid['trigger_key']}={trigger}", "y": ys, "lo": lo, "hi": hi})
    xs = loads if loads is not None else list(range(len(grid["loads"])))
    sections = [
        html_report.scenario_section(grid_map.scenario),
        html_report.table_section("The metastability map", map_columns(grid), map_rows(grid),
                                  notes=_notes(grid_map)),
        html_report.notes_section("Warnings", recorded_warnings(), warning=True),
        html_report.line_plot(f"{RECOVERED} against {grid['load_key']}", grid["load_key"], xs,
                              "replications recovered (%)", series, span_gaps=True,
                              x_ticks=None if loads is not None else [str(v) for v in grid["loads"]],
                              caption="Each point with its 95% interval over replications."),
    ]
    return html_report.document(f"dynosim stability: {grid_map.scenario.name}", command_line(), sections)
