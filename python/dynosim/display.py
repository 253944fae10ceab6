"""What the commands show in a terminal: tables that fit its width, numbers in one unit per
column, and a note of what a long command is doing (on stderr).

Tables go to stdout at the terminal's width; piped, at ``$COLUMNS`` when it is set, else
:data:`PIPED_WIDTH` columns (``--wide`` tables, which show every column, at their natural
width). Progress goes to stderr, only when stderr is a terminal, and only once a command has
taken more than :data:`PROGRESS_AFTER` seconds: quick commands and logs stay clean.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

from .results import Estimate

#: Width of piped output when $COLUMNS is not set: the default tables fit 80 columns, the
#: titles and notes read better a little wider.
PIPED_WIDTH = 100
#: Progress appears only once a command has run this long (seconds).
PROGRESS_AFTER = 1.0

#: Time units of table columns, largest first: a column is in seconds when its largest value
#: is at least 10 s, else in milliseconds.
_SECONDS_FROM = 10.0


def stdout_console(*, wide: bool = False) -> Any:
    """A rich Console on stdout, as wide as the module's notes say."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()  # the terminal's width ($COLUMNS when set)
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return Console(width=int(columns))
    return Console(width=100_000 if wide else PIPED_WIDTH)


# --- numbers ---------------------------------------------------------------------------------


def duration(seconds: float) -> str:
    """A time with its own unit, for prose: ``302 ms``, ``2.71 s``, ``4 µs``, ``11.6 h``."""
    if math.isnan(seconds):
        return "-"
    if seconds == 0:
        return "0"
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(seconds) >= size:
            return f"{seconds / size:.3g} {unit}"
    if abs(seconds) < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if abs(seconds) < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def percent(fraction: float) -> str:
    """A fraction as a percentage, for prose: ``60.5%``, ``0.02%``."""
    return f"{100 * fraction:.1f}%" if abs(fraction) >= 0.01 else f"{100 * fraction:.2g}%"


def number(value: float, decimals: Optional[int] = None) -> str:
    """A number in a column whose header gives the unit: three significant digits, no
    exponent, thousands separated (``1,640``, ``60.5``, ``2.37``, ``0.002``), or with the
    given decimals (a half-width shown beside its mean)."""
    if math.isnan(value):
        return "-"
    if decimals is None:
        decimals = _decimals(value)
        if decimals is None:
            return "0" if value == 0 else ("<0.001" if value > 0 else "-<0.001")
    return f"{value:,.{decimals}f}"


def _decimals(value: float) -> Optional[int]:
    """Decimals for three significant digits, 0 to 3; None for 0 and below 0.001."""
    a = abs(value)
    if a >= 100:
        return 0
    if a >= 10:
        return 1
    if a >= 1:
        return 2
    if a >= 0.001:
        return 3
    return None


# --- tables ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column of a table of results.

    ``value`` gives a row's cell: an :class:`Estimate` (its mean, with ``±`` half-width when
    ``ci``), a number, or text. ``kind`` says how numbers are shown: ``time`` (seconds, shown
    in the column's unit, ms or s, named in the header), ``percent`` (a fraction, shown in %),
    ``number``, ``count`` (a whole number, shown whole: ``1,043``) or ``text``. ``wide`` columns are shown only with ``--wide``, ``narrow`` ones
    only without it. A table too wide for the terminal leaves out its columns with a ``drop``
    rank, lowest rank first; ``wrap`` columns wrap their text at ``max_width``."""

    header: str
    value: Callable[[Any], Any]
    kind: str = "number"
    ci: bool = False
    wide: bool = False
    narrow: bool = False
    drop: int = 0
    wrap: bool = False
    max_width: Optional[int] = None


def results_table(console: Any, columns: Sequence[Column], rows: Sequence[Any], *,
                  wide: bool = False) -> Tuple[Any, List[str]]:
    """A rich Table of `rows` that fits `console` (every column when `wide`, at its natural
    width), and the names of the columns left out to make it fit."""
    shown = [c for c in columns if not (c.narrow and wide) and not (c.wide and not wide)]
    table = _table(shown, rows)
    left_out: List[str] = []
    droppable = sorted((c for c in shown if c.drop), key=lambda c: c.drop)
    while not wide and droppable and _width(console, table) > console.width:
        gone = droppable.pop(0)
        shown.remove(gone)
        left_out.append(gone.header.replace("\n", " "))
        table = _table(shown, rows)
    return table, left_out


def _width(console: Any, table: Any) -> int:
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(width=100_000), table).maximum


def _table(columns: Sequence[Column], rows: Sequence[Any]) -> Any:
    from rich import box
    from rich.table import Table

    # No vertical rules: a table that fits 80 columns has no width to spare for them.
    table = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    cells = []
    for column in columns:
        values = [column.value(row) for row in rows]
        header, scale = _header_and_format(column, values)
        table.add_column(header, justify="left" if column.kind == "text" else "right",
                         no_wrap=not column.wrap, max_width=column.max_width)
        if column.kind == "count":
            cells.append([f"{v:,}" for v in values])
        else:
            cells.append([_cell(v, scale, column.ci) for v in values])
    for i in range(len(rows)):
        table.add_row(*(col[i] for col in cells))
    return table


def _header_and_format(column: Column, values: Sequence[Any]) -> tuple:
    """The header, with the column's unit, and the scale of its numbers."""
    if column.kind == "time":
        largest = max((_mean(v) for v in values if _is_number(v)), default=0.0)
        unit, scale = ("s", 1.0) if largest >= _SECONDS_FROM else ("ms", 1e3)
    elif column.kind == "percent":
        unit, scale = "%", 100.0
    else:
        return column.header, 1.0
    # The unit on a line of its own keeps the column as narrow as its numbers.
    return f"{column.header}\n({unit})", scale


def _cell(value: Any, scale: float, ci: bool) -> str:
    if isinstance(value, Estimate):
        mean = number(value.mean * scale)
        if not ci or math.isnan(value.half_width):
            return mean
        half = value.half_width * scale
        return f"{mean} ±{number(half, _decimals(value.mean * scale) if half else None)}"
    if _is_number(value):
        return number(float(value) * scale)
    return str(value)


def _mean(value: Any) -> float:
    x = value.mean if isinstance(value, Estimate) else float(value)
    return 0.0 if math.isnan(x) else abs(x)


def _is_number(value: Any) -> bool:
    return isinstance(value, (Estimate, int, float)) and not isinstance(value, bool)


# --- progress on stderr ----------------------------------------------------------------------


class Activity:
    """Lines on stderr saying what a long command is doing: one per task, with a spinner, a
    count and a note. Shown only when stderr is a terminal, and only after
    :data:`PROGRESS_AFTER` seconds; gone (transient) when the command is done."""

    def __init__(self, progress: Any = None) -> None:
        self._progress = progress

    def task(self, description: str, *, note: str = "") -> Any:
        if self._progress is None:
            return None
        return self._progress.add_task(description, total=None, note=note)

    def update(self, task: Any, *, advance: int = 0, note: Optional[str] = None,
               description: Optional[str] = None) -> None:
        if self._progress is None or task is None:
            return
        fields = {} if note is None else {"note": note}
        self._progress.update(task, advance=advance, description=description, **fields)


def late_progress(*, console: Any = None, get_time: Optional[Callable[[], float]] = None,
                  delay: float = PROGRESS_AFTER) -> Any:
    """A rich Progress that renders nothing until `delay` seconds after it was made."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    class LateProgress(Progress):
        shown_from: Optional[float] = None  # rich renders once while constructing

        def get_renderables(self) -> Iterable[Any]:
            if self.shown_from is None or self.get_time() < self.shown_from:
                return
            yield from super().get_renderables()

    progress = LateProgress(
        SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        console=console or Console(stderr=True), transient=True, get_time=get_time,
        # Progress lives on stderr: stdout must stay the command's output alone.
        redirect_stdout=False, redirect_stderr=False,
    )
    progress.shown_from = progress.get_time() + delay
    return progress


@contextlib.contextmanager
def activity() -> Iterator[Activity]:
    """An :class:`Activity` for the duration of the block (a silent one when stderr is not a
    terminal)."""
    if not sys.stderr.isatty():
        yield Activity()
        return
    progress = late_progress()
    with progress:
        yield Activity(progress)


@contextlib.contextmanager
def status(description: str) -> Iterator[None]:
    """A spinner with `description` while the block runs (see :func:`activity`)."""
    with activity() as a:
        a.task(description)
        yield


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")
