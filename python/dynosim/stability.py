"""The metastability map: a scenario with faults run over a grid of two keys (a load and a
trigger), each cell the fraction of replications that recovered and the time they took.

    dynosim stability retry-storm --vary arrivals.rate=1..2.2:7 --vary faults.0.for=30s..5min:6

A cell is a point of a :class:`~dynosim.sweep.Sweep` (so Dask, the CSV and JSON rows, the unstable
and overloaded points, and the atomic outputs are the sweep's); the map is read off its rows:
``stability.recovered`` (a fraction of the replications, with its interval) and
``stability.recovery_time`` (the mean over the replications that recovered). Each cell's run is
made long enough to see its whole recovery window (``run.recovery_window`` after the last
fault's end): ``run.duration`` is raised where it falls short, and the table says so.

A map that reports its verdicts alone (``run(verdicts_only=True)``: the terminal table, the
picture and the HTML report of ``dynosim stability``) stops each replication as soon as its
verdict is settled: once it recovered (three good intervals), or once the window has closed.
Its verdicts are the whole runs', to the bit (tests/test_stability_map.py); the other metrics
of its rows would be of shortened runs, so they are left empty. ``--json`` and ``--out``,
which give every cell's row, run the whole runs.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .errors import ScenarioError
from .output import finite
from .scenario import Scenario
from .sweep import _HEADER_FROM_DESCRIBE, VARY_SOURCE, Sweep, _key_unit, value_text

#: The map's two figures.
RECOVERED = "stability.recovered"
RECOVERY_TIME = "stability.recovery_time"
#: The columns of a row a run stopped at its verdict keeps besides the varied keys and
#: ``stability.*``: what the scenario says, not what the run measured.
_KEPT = frozenset({"status", "steady_state", *_HEADER_FROM_DESCRIBE})


def covering_duration(described: Dict[str, Any]) -> Optional[float]:
    """The ``run.duration`` that lets a run see its whole recovery window, or None when the
    scenario's own is long enough (``describe()``'s ``stability``)."""
    rule = described.get("stability")
    if not rule:
        return None
    needed = rule["last"] + rule["window"] - described["warmup"]
    return needed if needed > described["duration"] + 1e-9 else None


class StabilityMap:
    """The grid: ``prepare()`` checks the scenario and builds every cell, ``run()`` runs them;
    then ``grid()`` gives the map."""

    def __init__(self, scenario: Scenario, vary: Dict[str, List[Any]]) -> None:
        if len(vary) != 2:
            raise ScenarioError(f"a map has two axes: give two --vary (a load and a trigger), got {len(vary)}",
                                file=VARY_SOURCE)
        described = scenario.describe()
        if not described.get("stability"):
            raise ScenarioError("the scenario has no [[faults]]: a map needs a trigger to recover from",
                                file=scenario.source)
        self.scenario = scenario
        self.vary = vary
        self.sweep = Sweep(scenario, vary, metric=RECOVERED)
        #: Per cell index: the duration it was raised to, if it was.
        self.lengthened: Dict[int, float] = {}
        #: Whether the runs stopped at their verdicts (the rows then have the map's figures alone).
        self.verdicts_only = False

    @property
    def load_key(self) -> str:
        return list(self.vary)[0]

    @property
    def trigger_key(self) -> str:
        return list(self.vary)[1]

    def prepare(self) -> None:
        self.sweep.prepare()
        for point in self.sweep.points:
            needed = covering_duration(point.described[0])
            if needed is None:
                continue
            point.scenario = point.scenario.with_overrides({"run.duration": needed})
            point.described = [point.scenario.for_policy(p).describe() for p in point.policies]
            self.lengthened[point.index] = needed

    def run(self, progress: bool = False, client: Any = None, verdicts_only: bool = False) -> None:
        """Runs every cell. With `verdicts_only`, each replication stops once its verdict is
        settled (see the module's doc): the map is the same, and each row keeps its header and
        its ``stability.*`` figures only, the others left empty (None)."""
        self.verdicts_only = verdicts_only
        self.sweep.run(progress=progress, client=client, stop_at_verdict=verdicts_only)
        if verdicts_only:
            for row in self.sweep.rows:
                for col in row:
                    if col not in _KEPT and not col.startswith("stability.") and col not in self.vary:
                        row[col] = math.nan

    def grid(self) -> Dict[str, Any]:
        """Rows by the first key's values, columns by the second's; each cell its recovered
        fraction (and 95% interval), mean recovery time, and status (of its first policy)."""
        loads, triggers = self.vary[self.load_key], self.vary[self.trigger_key]
        cells: Dict[Tuple[str, str], Dict[str, Any]] = {}
        for row in self.sweep.rows:
            key = (value_text(row[self.load_key]), value_text(row[self.trigger_key]))
            cells.setdefault(key, row)

        def cell(load: Any, trigger: Any) -> Dict[str, Any]:
            row = cells.get((value_text(load), value_text(trigger)), {})
            return {"status": row.get("status"),
                    "recovered": row.get(RECOVERED),
                    "recovered_low": row.get(f"{RECOVERED}.ci_low"),
                    "recovered_high": row.get(f"{RECOVERED}.ci_high"),
                    "recovery_time": row.get(RECOVERY_TIME),
                    "offered_load": row.get("offered_load")}

        return {"load_key": self.load_key, "trigger_key": self.trigger_key,
                "loads": list(loads), "triggers": list(triggers),
                "cells": [[cell(load, trigger) for trigger in triggers] for load in loads]}

    def to_json(self) -> Dict[str, Any]:
        doc = self.sweep.to_json()
        doc["map"] = finite(self.grid())
        doc["lengthened"] = {str(i): d for i, d in sorted(self.lengthened.items())}
        return doc


def cell_text(cell: Dict[str, Any]) -> str:
    """``"80% · 2m10s"``: recovered fraction, and the mean recovery time of those that did."""
    status = cell.get("status")
    if status != "ok":
        return status or "-"
    rec = cell.get("recovered")
    if rec is None or (isinstance(rec, float) and math.isnan(rec)):
        return "-"
    text = f"{rec:.0%}"
    t = cell.get("recovery_time")
    if t is not None and not (isinstance(t, float) and math.isnan(t)):
        text += f" · {duration_text(t)}"
    return text


def duration_text(seconds: float) -> str:
    """0 → "0s", 75 → "1m15s", 3700 → "1h02m"."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def plot_map(grid: Dict[str, Any], path: str, fmt: str, title: str) -> None:
    """The map as a picture: each cell coloured by its recovered fraction (red: stays down,
    green: recovers) and labelled with it and the mean recovery time."""
    from matplotlib import rc_context
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.figure import Figure

    loads, triggers, cells = grid["loads"], grid["triggers"], grid["cells"]
    values = [[c["recovered"] if c["status"] == "ok" and c["recovered"] is not None else math.nan for c in row]
              for row in cells]
    cmap = LinearSegmentedColormap.from_list("recovery", ["#c0392b", "#f1c40f", "#27ae60"])
    cmap.set_bad("#bbbbbb")
    with rc_context({"svg.hashsalt": "dynosim", "font.size": 9}):
        fig = Figure(figsize=(max(5.0, 1.6 + 1.1 * len(triggers)), 1.4 + 0.55 * len(loads)), dpi=120,
                     layout="constrained")
        ax = fig.add_subplot()
        image = ax.imshow(values, cmap=cmap, vmin=0.0, vmax=1.0, origin="lower", aspect="auto")
        for i, row in enumerate(cells):
            for j, c in enumerate(row):
                ax.text(j, i, cell_text(c).replace(" · ", "\n"), ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(triggers)), [value_text(t) for t in triggers])
        ax.set_yticks(range(len(loads)), [value_text(v) for v in loads])
        ax.set_xlabel(_label(grid["trigger_key"], triggers))
        ax.set_ylabel(_label(grid["load_key"], loads))
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, label="fraction of replications recovered")
        metadata = {"Date": None} if fmt == "svg" else None
        fig.savefig(path, format=fmt, metadata=metadata)


def _label(key: str, values: Sequence[Any]) -> str:
    unit = _key_unit(key, values)
    return f"{key} ({unit})" if unit else key


def map_rows(grid: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The map as table rows: the load, then a cell text per trigger value."""
    rows = []
    for load, cells in zip(grid["loads"], grid["cells"]):
        row: Dict[str, Any] = {"load": value_text(load)}
        offered = next((c["offered_load"] for c in cells if c.get("offered_load") is not None), None)
        row["offered_load"] = offered
        for trigger, c in zip(grid["triggers"], cells):
            row[value_text(trigger)] = cell_text(c)
        rows.append(row)
    return rows


def trigger_columns(grid: Dict[str, Any]) -> Sequence[str]:
    return [value_text(t) for t in grid["triggers"]]
