"""Sweeps: run a scenario over ranges and lists of keys; write CSV, JSON and a plot.

    dynosim sweep rapgenius --vary fleet.dynos=50..10000 --vary router.policy=random,intelligent

Every ``--vary KEY=SPEC`` gives a key its values; the points of the sweep are the cartesian
product of them, each applied to the scenario as an override. A point runs every routing
policy it has (``router.policy`` may be a list); the outputs have one row per point and policy.

A SPEC is a list ``a,b,c`` (each item read like a ``--set`` value: TOML, else a plain
string) or a range ``A..B[:N][:log|:lin]``: N points (default 12) from A to B, spaced
logarithmically by default when A > 0 and B/A >= 10, linearly otherwise; when A and B are
both written as whole numbers the values are rounded to whole numbers and duplicates dropped.
A and B may carry a unit the scenario's keys accept, the same kind for both: a duration
(``50ms..400ms``), a rate (``100/s..6000/min``) or a size (``256MB..1GB``). The points are
spaced, and rounded to whole numbers, in A's unit, and given in the kind's base unit (seconds,
requests per second, bytes), which every such key accepts as a bare number.

Points whose offered load is at or above capacity are not errors here: their rows have status
``unstable`` and no metrics. Points run in parallel threads (the engine releases the GIL and
runs each point's replications on every core); outputs are in point order whatever the
scheduling, and are written to temporary files renamed into place at the end, so a failure
or Ctrl-C leaves nothing half-written.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _dynosim
from .distributed import executor_for
from .errors import DynosimError, ScenarioError
from .output import Writer, finite, json_text, write_files
from .results import METRICS, is_fraction_metric, is_metric, is_time_metric, metric_names_hint
from .scenario import OVERRIDE_SOURCE, Scenario, parse_override

VARY_SOURCE = "--vary"
DEFAULT_POINTS = 12
#: Most points a sweep runs (the product of the --vary value counts), and most values one
#: range gives: every point is a full run, and each is built and validated before any runs.
MAX_POINTS = 10_000
DEFAULT_METRIC = "queue.mean"
#: The default metric for a closed loop.
CLOSED_LOOP_METRIC = "closed_loop.requests_per_s"
FORMATS = ("png", "svg")
#: Progress appears only once a sweep has run this long (seconds).
PROGRESS_AFTER = 1.0

#: Columns of PolicyResult.row() before the metrics, for rows that did not run (unstable
#: points), and where describe() has each of them.
_HEADER_FROM_DESCRIBE = {
    "scenario": "name", "policy": "policy", "dynos": "dynos", "slots": "slots",
    "routers": "routers", "arrival_rate": "arrival_rate", "offered_load": "offered_load",
    "duration": "duration", "replications": "replications", "seed": "seed",
    "service_mean_analytic": "service_mean", "relaxation_time": "relaxation_time",
}

#: Keys whose numeric values are in seconds, and the other units of keys and metrics.
_SECONDS_KEYS = {
    "service.median", "service.mean", "service.scale", "service.value", "service.round_up",
    "run.duration", "run.warmup",
}
_KEY_UNITS = {"arrivals.rate": "req/s"}
_METRIC_UNITS = {
    "throughput": "req/s", "requests": "requests", "simulated_requests": "requests",
    "max_queue_depth.dyno": "requests", "max_queue_depth.router": "requests",
}


# --- SPEC parsing ----------------------------------------------------------------------------

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_INTEGER = re.compile(r"[-+]?\d+")
_RANGE = re.compile(rf"\s*(?P<a>{_NUMBER})\s*\.\.\s*(?P<rest>.*)", re.DOTALL)
#: A bound of a range: a number, and a unit or nothing ("50ms", "6000/min", "1.5 GB", "75").
_QUANTITY = re.compile(rf"(?P<number>{_NUMBER})\s*(?P<unit>\S.*)?", re.DOTALL)


def _spec_error(key: str, message: str) -> ScenarioError:
    return ScenarioError(message, file=VARY_SOURCE, path=key)


def parse_vary(text: str) -> Tuple[str, List[Any]]:
    """``"fleet.dynos=50..10000:8"`` → ``("fleet.dynos", [50, 106, ...])``."""
    key, sep, spec = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"expected key.path=SPEC (a list a,b,c or a range A..B), got {text!r}",
                            file=VARY_SOURCE)
    if any(not part for part in key.split(".")):
        raise ScenarioError(f"invalid key path {key!r}", file=VARY_SOURCE)
    return key, parse_spec(key, spec)


def parse_spec(key: str, spec: str) -> List[Any]:
    """The values of a SPEC: a range ``A..B[:N][:log|:lin]`` or a list ``a,b,c``."""
    spec = spec.strip()
    if not spec:
        raise _spec_error(key, "no values; expected a list a,b,c or a range A..B[:N][:log|:lin]")
    if "," not in spec and ".." in spec and (spec[0] not in "\"'[./~" or _RANGE.fullmatch(spec)):
        a_text, _, rest = spec.partition("..")
        return _parse_range(key, spec, a_text.strip(), rest)
    return _parse_list(key, spec)


def _parse_range(key: str, spec: str, a_text: str, rest: str) -> List[Any]:
    b_text, *options = [part.strip() for part in rest.split(":")]
    a_quantity, b_quantity = _QUANTITY.fullmatch(a_text), _QUANTITY.fullmatch(b_text)
    if not a_quantity:
        raise _spec_error(key, f"invalid range {spec!r}: the lower bound {a_text!r} is not a number "
                               f"(with a unit or not); expected A..B[:N][:log|:lin]")
    if not b_quantity:
        raise _spec_error(key, f"invalid range {spec!r}: the upper bound {b_text!r} is not a number "
                               f"(with a unit or not); expected A..B[:N][:log|:lin]")
    a_unit, b_unit = a_quantity.group("unit") or "", b_quantity.group("unit") or ""
    a, b = float(a_quantity.group("number")), float(b_quantity.group("number"))
    # Whole numbers in A's unit give whole values; with units, the values are in A's unit
    # until the end, where they become the kind's base unit.
    whole = bool(_INTEGER.fullmatch(a_quantity.group("number")))
    scale: Optional[float] = None
    if a_unit or b_unit:
        _kind, a_scale, b_scale = _unit_kind(key, spec, a_unit, b_unit)
        scale = a_scale
        b_written = b_quantity.group("number")
        b = float(f"{b * b_scale / a_scale:.12g}")
        whole = whole and (b.is_integer() if b_unit != a_unit else bool(_INTEGER.fullmatch(b_written)))
    else:
        whole = whole and bool(_INTEGER.fullmatch(b_quantity.group("number")))
    if not (math.isfinite(a) and math.isfinite(b)) or not a < b:
        raise _spec_error(key, f"invalid range {spec!r}: expected A < B")
    count: Optional[int] = None
    spacing: Optional[str] = None
    for option in options:
        if option.lower() in ("log", "lin"):
            if spacing is not None:
                raise _spec_error(key, f"invalid range {spec!r}: spacing given twice")
            spacing = option.lower()
        elif _INTEGER.fullmatch(option):
            if count is not None:
                raise _spec_error(key, f"invalid range {spec!r}: number of points given twice")
            count = int(option)
            if count < 2:
                raise _spec_error(key, f"invalid range {spec!r}: needs at least 2 points, got {count}")
            if count > MAX_POINTS:
                raise _spec_error(key, f"invalid range {spec!r}: at most {MAX_POINTS:,} points, got {count:,}")
        else:
            raise _spec_error(key, f"invalid range {spec!r}: unknown option {option!r}; "
                                   "expected a number of points, log or lin")
    count = DEFAULT_POINTS if count is None else count
    if spacing is None:
        spacing = "log" if a > 0 and b / a >= 10 else "lin"
    if spacing == "log" and a <= 0:
        raise _spec_error(key, f"invalid range {spec!r}: log spacing needs A > 0")
    values: List[Any] = range_values(a, b, count, spacing)
    if whole:
        values = list(dict.fromkeys(int(round(v)) for v in values))
    if scale is not None:
        return [_in_base_unit(v, scale) for v in values]
    return values


#: The kinds of quantity a range may be written in, each with the function that reads one as
#: the scenario does (None when the text is not of that kind) and its base unit.
_UNIT_KINDS: Tuple[Tuple[str, str, Callable[[str], Optional[float]]], ...] = (
    ("a duration", "s", _dynosim.parse_duration),
    ("a rate", "req/s", _dynosim.parse_rate),
    ("a size", "bytes", _dynosim.parse_bytes),
)


def _unit_kind(key: str, spec: str, a_unit: str, b_unit: str) -> Tuple[str, float, float]:
    """The kind of quantity both bounds are, and the base units in one of A's and of B's
    units (a bound without a unit is in the base unit, as a bare number is in a scenario)."""
    for kind, _base, parse in _UNIT_KINDS:
        scales = [parse(f"1{unit}") if unit else 1.0 for unit in (a_unit, b_unit)]
        if all(s is not None and s > 0 for s in scales):
            return kind, float(scales[0]), float(scales[1])  # type: ignore[arg-type]
    expected = "expected durations (50ms..400ms), rates (100/s..400/s) or sizes (256MB..1GB) on both sides"
    kinds = {}
    for unit in (a_unit, b_unit):
        if unit:
            kinds[unit] = next((kind for kind, _base, parse in _UNIT_KINDS if parse(f"1{unit}") is not None), None)
            if kinds[unit] is None:
                raise _spec_error(key, f"invalid range {spec!r}: unknown unit {unit!r}; {expected}")
    raise _spec_error(key, f"invalid range {spec!r}: {a_unit!r} is the unit of {kinds[a_unit]} and {b_unit!r} "
                           f"of {kinds[b_unit]}; {expected}")


def _in_base_unit(value: float, scale: float) -> Any:
    """A value in a unit of `scale` base units, in the base unit: 0.067 s rather than
    0.067000000000000004, and a whole number of base units as an int."""
    base = float(f"{value * scale:.12g}")
    return int(base) if base.is_integer() else base


def range_values(a: float, b: float, count: int, spacing: str) -> List[float]:
    """``count`` values from ``a`` to ``b`` (both included), log or linear spacing."""
    out = []
    for i in range(count):
        t = i / (count - 1)
        v = a * (b / a) ** t if spacing == "log" else a + (b - a) * t
        out.append(float(f"{v:.12g}"))  # 0.30000000000000004 → 0.3
    out[0], out[-1] = a, b
    return out


def _parse_list(key: str, spec: str) -> List[Any]:
    items = _split_top_level(spec)
    values = []
    for item in items:
        if not item.strip():
            raise _spec_error(key, f"empty value in the list {spec!r}")
        try:
            values.append(parse_override(f"{key}={item}")[1])
        except ScenarioError as e:
            raise _spec_error(key, e.message) from None
    return values


def _split_top_level(text: str) -> List[str]:
    """Splits on commas outside brackets and quotes, so TOML lists and strings stay whole."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def parse_vary_args(texts: Sequence[str]) -> Dict[str, List[Any]]:
    """Every ``--vary``, in order; a key given twice is an error."""
    vary: Dict[str, List[Any]] = {}
    for text in texts:
        key, values = parse_vary(text)
        if key in vary:
            raise _spec_error(key, "given twice; give all its values in one --vary")
        vary[key] = values
    check_point_count(vary)
    return vary


def check_point_count(vary: Dict[str, List[Any]]) -> None:
    """Refuses a sweep of more than MAX_POINTS points before any point is built."""
    points = math.prod(len(values) for values in vary.values())
    if points > MAX_POINTS:
        counts = " × ".join(f"{len(values):,}" for values in vary.values())
        raise ScenarioError(f"{points:,} points ({counts} values); a sweep runs at most {MAX_POINTS:,}",
                            file=VARY_SOURCE)


# --- running ---------------------------------------------------------------------------------


class Point:
    """One combination of the varied values, its scenario, and what became of each of its
    policies (a status and a PolicyResult per policy)."""

    def __init__(self, index: int, values: Dict[str, Any], scenario: Scenario) -> None:
        self.index = index
        self.values = values
        self.scenario = scenario
        self.policies: List[str] = scenario.policies
        self.described: List[Dict[str, Any]] = []  # describe() of each policy's variant
        self.statuses: List[str] = ["pending"] * len(self.policies)
        self.results: List[Any] = [None] * len(self.policies)  # PolicyResult once run
        self.unsettled: List[bool] = []  # per policy: short next to its relaxation time

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={value_text(v)}" for k, v in self.values.items())


class Sweep:
    """A sweep: the base scenario, the varied keys and their values, the points and rows.

    ``prepare()`` builds and validates the points, ``run()`` runs them; then ``columns`` and
    ``rows`` (one per point and policy, in point order) hold the table that is written."""

    def __init__(self, scenario: Scenario, vary: Dict[str, List[Any]], *, metric: Optional[str] = None) -> None:
        if not vary:
            raise ScenarioError("nothing to vary; give at least one --vary KEY=SPEC", file=VARY_SOURCE)
        if metric is None:
            # A closed loop's figure of merit is the rate its clients get, as ab reports it.
            metric = CLOSED_LOOP_METRIC if scenario.describe().get("closed_loop") else DEFAULT_METRIC
        if not is_metric(metric):
            raise DynosimError(f"unknown metric {metric!r}; expected one of: {metric_names_hint()}")
        check_point_count(vary)
        self.scenario = scenario
        self.vary = vary
        self.metric = metric
        self.points: List[Point] = []
        self.columns: List[str] = []
        self.rows: List[Dict[str, Any]] = []

    @property
    def keys(self) -> List[str]:
        return list(self.vary)

    def prepare(self) -> None:
        """Builds and validates every point before any runs; marks the unstable ones."""
        self.points = []
        for i, combo in enumerate(itertools.product(*self.vary.values())):
            values = dict(zip(self.vary, combo))
            try:
                point = Point(i, values, self.scenario.with_overrides(values))
                for policy in point.policies:
                    variant = point.scenario.for_policy(policy)
                    point.described.append(variant.describe())
                    point.unsettled.append(variant.steady_state_warning(point.described[-1]) is not None)
            except ScenarioError as e:
                raise self._as_vary_error(e, values) from None
            if not point.described[0]["stable"]:  # the same for every policy (a closed loop always is)
                point.statuses = ["unstable"] * len(point.policies)
            self.points.append(point)

    def _as_vary_error(self, error: ScenarioError, values: Dict[str, Any]) -> ScenarioError:
        """An error in a key that --vary wrote names --vary (and the value), not --set."""
        path = error.path or ""
        for key in self.vary:
            in_key = path == key or path.startswith((key + ".", key + "["))
            # A table holding the key is refused whatever its value: a section the engine does
            # not know (`autoscale` for --vary autoscale.upscale_above=...).
            if in_key or (path and key.startswith(path + ".")):
                if error.file in (OVERRIDE_SOURCE, None):
                    error.file = VARY_SOURCE
                    if in_key and len(self.vary[key]) > 1 and value_text(values[key]) not in error.message:
                        error.message += f" (at {key}={value_text(values[key])})"
                break
        error.args = (str(error),)
        return error

    def run(self, progress: bool = False, client: Any = None, stop_at_verdict: bool = False) -> None:
        """Runs every stable (point, policy), in parallel threads or, given a
        ``dask.distributed.Client``, as tasks on its cluster (:mod:`dynosim.distributed`: the
        same bits either way); rows come out in point order. `stop_at_verdict`: see
        :meth:`dynosim.distributed.Executor.run` (only the ``stability.*`` metrics are then
        the whole runs').

        Each policy runs on its own (the same numbers as running them together: every policy
        sees the same arrivals and service times), which spreads the work more evenly."""
        todo = [(p, j) for p in self.points for j, status in enumerate(p.statuses) if status == "pending"]
        started = time.monotonic()
        bar: Optional[Tuple[Any, Any]] = None

        def on_done(finished: int) -> None:
            nonlocal bar
            if bar is None and progress and finished < len(todo) and time.monotonic() - started > PROGRESS_AFTER:
                bar = _progress_bar(len(todo))
            if bar is not None:
                bar[0].update(bar[1], completed=finished)

        try:
            outcomes = executor_for(client).run([p.scenario.for_policy(p.policies[j]) for p, j in todo], on_done,
                                                stop_at_verdict=stop_at_verdict)
        finally:
            if bar is not None:
                bar[0].stop()
        for (point, j), (status, result) in zip(todo, outcomes):
            point.statuses[j], point.results[j] = status, result
        self._collect_rows()

    def _collect_rows(self) -> None:
        first = next((r for p in self.points for r in p.results if r is not None), None)
        if first is not None and self.metric not in first.row():
            raise DynosimError(f"this scenario does not report {self.metric!r} (the dyno model's metrics "
                               "need [request] phases, [app] memory or a closed loop; docs/output.md)")
        self.columns = (list(self.vary) + ["status", "steady_state"]
                        + (list(first.row()) if first else _fallback_columns()))
        self.rows = []
        for point in self.points:
            for status, result, described, unsettled in zip(point.statuses, point.results, point.described,
                                                            point.unsettled):
                row: Dict[str, Any] = dict(point.values)
                row["status"] = status
                # False: the run is short next to the time its queues take to settle.
                row["steady_state"] = None if status == "unstable" else not unsettled
                if result is not None:
                    row.update(result.row())
                else:  # not run: what describe() knows, and no metrics
                    for col in self.columns[len(row):]:
                        source = _HEADER_FROM_DESCRIBE.get(col)
                        row[col] = described.get(source, math.nan) if source else math.nan
                self.rows.append(row)
        # A metric only some points report (`services.NAME.calls.cancelled` of the points that
        # set `cancel`) is a column too, after the first point's.
        known = set(self.columns)
        for row in self.rows:
            for col in row:
                if col not in known:
                    known.add(col)
                    self.columns.append(col)

    @property
    def unusable(self) -> List[Dict[str, Any]]:
        """The rows that have no metrics (unstable or overloaded)."""
        return [row for row in self.rows if row["status"] != "ok"]

    def unusable_summary(self, consequence: str = "those rows have no metrics and are not plotted") -> str:
        """One line: how many points were unstable (and runs overloaded), which, and what
        follows for the command's output (`consequence`)."""
        parts = []
        unstable = [p for p in self.points if "unstable" in p.statuses]
        if unstable:
            shown = "; ".join(p.label for p in unstable[:4]) + ("; ..." if len(unstable) > 4 else "")
            parts.append(f"{len(unstable)} of {len(self.points)} points unstable (offered load >= 1): {shown}")
        overloaded = [(p, policy) for p in self.points
                      for policy, status in zip(p.policies, p.statuses) if status == "overloaded"]
        if overloaded:
            n_runs = sum(len(p.policies) for p in self.points)
            shown = "; ".join(f"{p.label} {policy}" for p, policy in overloaded[:4])
            shown += "; ..." if len(overloaded) > 4 else ""
            parts.append(f"{len(overloaded)} of {n_runs} runs stopped as overloaded "
                         f"(queues outgrew run.max_waiting): {shown}")
        return "; ".join(parts) + f" ({consequence})"

    def unsettled_summary(self) -> Optional[str]:
        """One line on the rows whose runs are short next to their relaxation time, or None."""
        rows = [row for row in self.rows if row["steady_state"] is False]
        if not rows:
            return None
        return (f"{len(rows)} of {len(self.rows)} rows may not be steady state (the run is short next to the "
                "time the queues take to settle: offered load near 1); their steady_state column is false")

    def to_json(self) -> Dict[str, Any]:
        """The JSON output's document; missing (and non-finite) numbers are None."""
        return finite({
            "scenario": self.scenario.name,
            "vary": self.vary,
            "metric": self.metric,
            "rows": [{k: row.get(k) for k in self.columns} for row in self.rows],
        })


def _fallback_columns() -> List[str]:
    cols = list(_HEADER_FROM_DESCRIBE)
    for last in ("service_mean_analytic", "relaxation_time"):  # row()'s order
        cols.remove(last)
        cols.append(last)
    for metric in METRICS:
        cols += [metric, f"{metric}.ci_low", f"{metric}.ci_high"]
    return cols


def _progress_bar(total: int) -> Tuple[Any, Any]:
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    progress = Progress(
        TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("runs"),
        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
        console=Console(stderr=True), transient=True,
    )
    progress.start()
    return progress, progress.add_task("sweep", total=total)


# --- outputs ---------------------------------------------------------------------------------


def output_paths(prefix: str, formats: Sequence[str]) -> Dict[str, Path]:
    """PREFIX.csv, PREFIX.json and PREFIX.<format> for each plot format; checks up front that
    their folder can be written."""
    p = Path(prefix)
    if p.suffix.lower() in (".csv", ".json", ".png", ".svg"):
        p = p.with_suffix("")
    if not p.name or prefix.endswith(("/", os.sep)):
        raise ScenarioError(f"expected a file name prefix such as results/sweep, got {prefix!r}", file="--out")
    existing = p.parent.resolve()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ScenarioError(f"cannot write in {str(existing)!r}", file="--out")
    paths = {"csv": p.with_name(p.name + ".csv"), "json": p.with_name(p.name + ".json")}
    for fmt in formats:
        paths[fmt] = p.with_name(p.name + "." + fmt)
    return paths


def write_outputs(sweep: Sweep, paths: Dict[str, Path]) -> None:
    """Writes every output, all or nothing (``output.write_files``): an error, Ctrl-C or
    SIGTERM leaves no partial file, no temporary file and no folder it created."""
    def writer(kind: str) -> Writer:
        if kind == "csv":
            return lambda tmp: _write_text(tmp, csv_text(sweep))
        if kind == "json":
            return lambda tmp: _write_text(tmp, json_text(sweep.to_json()))
        return lambda tmp: plot(sweep, str(tmp), kind)

    write_files({path: writer(kind) for kind, path in paths.items()})


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def csv_text(sweep: Sweep) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(sweep.columns)
    for row in sweep.rows:
        writer.writerow([_csv_value(row.get(c)) for c in sweep.columns])
    return out.getvalue()


def _csv_value(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return v
    return json.dumps(v, default=str)


def value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    return json.dumps(v, default=str)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _axis_label(name: str, unit: Optional[str]) -> str:
    return f"{name} ({unit})" if unit else name


def metric_unit(metric: str) -> Optional[str]:
    if is_time_metric(metric):
        return "s"
    if is_fraction_metric(metric):
        return "fraction"
    return _METRIC_UNITS.get(metric)


def _key_unit(key: str, values: Sequence[Any]) -> Optional[str]:
    if not all(_is_number(v) for v in values):
        return None
    if key in _SECONDS_KEYS:
        return "s"
    return _KEY_UNITS.get(key) or _schema_units().get(key)


_SCHEMA_UNITS: Dict[str, str] = {}


def _schema_units() -> Dict[str, str]:
    """The base unit of every key the schema gives one of the range kinds' units (seconds,
    req/s, bytes), by key path: a bare number of such a key is in that unit."""
    if not _SCHEMA_UNITS:
        from .keys import reference

        bases = {base for _kind, base, _parse in _UNIT_KINDS}
        for k in reference()["keys"]:
            if k["unit"] in bases:
                _SCHEMA_UNITS.setdefault(k["path"], k["unit"])
    return _SCHEMA_UNITS


def plot_lines(sweep: Sweep) -> Tuple[str, bool, List[str], Dict[Tuple[Any, ...], Dict[str, List[float]]],
                                      Dict[Tuple[Any, ...], str]]:
    """What the plot draws: the key on x (the first numerically varied one, else the first),
    whether it is categorical (then x is the index of each of `categories`), and one line per
    combination of the other varied keys and policy (``{"x", "y", "lo", "hi"}``, unstable
    points left out) with its label."""
    metric = sweep.metric
    keys = sweep.keys
    numeric = [k for k in keys if all(_is_number(v) for v in sweep.vary[k])]
    xkey = numeric[0] if numeric else keys[0]
    categorical = not numeric
    categories = [value_text(v) for v in sweep.vary[xkey]]
    # router.policy varied (and not on x): the policy column already names the line.
    others = [k for k in keys if k != xkey and k != "router.policy"]
    policy_on_x = xkey == "router.policy"

    lines: Dict[Tuple[Any, ...], Dict[str, List[float]]] = {}
    labels: Dict[Tuple[Any, ...], str] = {}
    for row in sweep.rows:
        group = tuple(value_text(row[k]) for k in others) + (() if policy_on_x else (row["policy"],))
        if group not in lines:
            parts = ([] if policy_on_x else [str(row["policy"])]) + [f"{k}={value_text(row[k])}" for k in others]
            labels[group] = ", ".join(parts) or metric
            lines[group] = {"x": [], "y": [], "lo": [], "hi": []}
        y = row.get(metric)
        if row["status"] != "ok" or y is None or math.isnan(y):
            continue
        line = lines[group]
        line["x"].append(categories.index(value_text(row[xkey])) if categorical else row[xkey])
        line["y"].append(y)
        line["lo"].append(row.get(f"{metric}.ci_low", math.nan))
        line["hi"].append(row.get(f"{metric}.ci_high", math.nan))
    return xkey, categorical, categories, lines, labels


def plot(sweep: Sweep, path: str, fmt: str) -> None:
    """The metric against the first numerically varied key, one line per combination of the
    other varied keys and policy, with 95% confidence bands; unstable points left out."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure
    metric = sweep.metric
    xkey, categorical, categories, lines, labels = plot_lines(sweep)
    policy_on_x = xkey == "router.policy"

    xs = [x for line in lines.values() for x in line["x"]]
    ys = [y for line in lines.values() for y in line["y"]]
    positive = [y for y in ys if y > 0]
    # The axis follows the values asked for, whether or not every point was stable.
    xvalues = [] if categorical else [float(v) for v in sweep.vary[xkey]]
    log_x = bool(xvalues) and min(xvalues) > 0 and max(xvalues) / min(xvalues) >= 10
    log_y = bool(positive) and max(positive) / min(positive) >= 10
    all_zero = bool(ys) and all(y == 0 for y in ys)

    with rc_context({"svg.hashsalt": "dynosim", "font.size": 10}):
        fig = Figure(figsize=(8, 5), dpi=120, layout="constrained")
        ax = fig.add_subplot()
        colors = [f"C{i}" for i in range(10)]
        styles = ["-", "--", ":", "-."]
        zero_rows = 0
        for i, (group, line) in enumerate(lines.items()):
            order = sorted(range(len(line["x"])), key=lambda j: line["x"][j])
            x = [line["x"][j] for j in order]
            y = [line["y"][j] for j in order]
            lo = [line["lo"][j] for j in order]
            hi = [line["hi"][j] for j in order]
            label = labels[group]
            color, style = colors[i % 10], styles[(i // 10) % len(styles)]
            if log_y:
                keep = [j for j in range(len(y)) if y[j] > 0]
                zeros = [x[j] for j in range(len(y)) if y[j] <= 0]
                if y and not keep:
                    label += " (0 at every point: ▾ on the bottom edge)"
                elif zeros:
                    label += f" ({len(zeros)} zero value{'s' if len(zeros) > 1 else ''}: ▾ on the bottom edge)"
                if zeros:  # a log axis has no 0: mark them on the bottom edge, one row per line
                    ax.plot(zeros, [0.015 + 0.025 * zero_rows] * len(zeros), "v", color=color,
                            markersize=6, transform=ax.get_xaxis_transform(), clip_on=False)
                    zero_rows += 1
                x, y = [x[j] for j in keep], [y[j] for j in keep]
                lo, hi = [lo[j] for j in keep], [hi[j] for j in keep]
            elif y and all(v == 0 for v in y) and not all_zero:
                label += " (0 at every point)"
            if not line["x"]:
                label += " (no point to show)"
            if x or not log_y:
                ax.plot(x, y, style, color=color, marker="o", markersize=4, label=label)
            else:  # nothing on the axis: the legend shows the bottom-edge marker
                ax.plot([], [], "v", color=color, markersize=6, label=label)
            if any(not math.isnan(v) for v in lo):
                ax.fill_between(x, lo, hi, color=color, alpha=0.18, linewidth=0)
        if log_x:
            ax.set_xscale("log")
            _plain_log_ticks(ax.xaxis, xs, at_values=True)
        if log_y:
            ax.set_yscale("log", nonpositive="clip")
            bottom = min(positive + [v for line in lines.values() for v in line["lo"] if v > 0])
            ax.set_ylim(bottom=bottom / 1.5)
            _plain_log_ticks(ax.yaxis, positive)
        elif ys and min(ys) >= 0:  # every metric is >= 0: an interval below 0 says nothing
            top = ax.get_ylim()[1] if max(ys) > 0 else 1.0
            ax.set_ylim(-0.02 * top, top)  # a little room to show values of 0
        if categorical:
            ax.set_xticks(range(len(categories)), categories)
            ax.set_xlim(-0.5, len(categories) - 0.5)
        ax.set_xlabel(_axis_label(xkey, _key_unit(xkey, sweep.vary[xkey])))
        ax.set_ylabel(_axis_label(metric, metric_unit(metric)))
        replications = sorted({int(r["replications"]) for r in sweep.rows if r["status"] == "ok"})
        reps = "/".join(str(n) for n in replications) or "-"
        title = f"{sweep.scenario.name}: {metric} against {xkey}"
        notes = [f"mean of {reps} replications, shaded: 95% confidence interval"]
        if all_zero:
            notes.append(f"{metric} is 0 at every point")
        elif not ys:
            notes.append("no point to plot")
        for status in ("unstable", "overloaded"):
            # Unstable is a property of a point (every policy); overloaded, of one policy's run.
            left_out = list(dict.fromkeys(
                value_text(r[xkey]) + (f" ({r['policy']})" if status == "overloaded" and not policy_on_x else "")
                for r in sweep.rows if r["status"] == status))
            if left_out:
                shown = ", ".join(left_out[:6]) + (", ..." if len(left_out) > 6 else "")
                notes.append(f"{status} (not shown) at {xkey} = {shown}")
        lines_of_notes = textwrap.wrap("; ".join(notes), width=100)
        ax.set_title("\n".join([title] + lines_of_notes), fontsize=10)
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
        if lines:
            ax.legend(fontsize=8, loc="best")
        metadata = {"Date": None} if fmt == "svg" else None
        fig.savefig(path, format=fmt, metadata=metadata)


def _plain_log_ticks(axis: Any, values: Sequence[float], at_values: bool = False) -> None:
    """Log axes spanning less than 100x get plain numbers instead of 10^k: at the values
    themselves (``at_values``, when there are few) or at 1-2-5 ticks."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    if not values:
        return
    if max(values) / min(values) >= 100:
        if at_values and 1e-3 <= min(values) and max(values) <= 1e6:  # 100, 1000 rather than 10^k
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        return
    distinct = sorted(set(values))
    if at_values and len(distinct) <= 12:
        axis.set_major_locator(FixedLocator(distinct))
    else:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_minor_formatter(NullFormatter())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
