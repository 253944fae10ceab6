"""Time axes that read as a clock (issue #34): an axis of elapsed seconds that spans more than
:data:`CLOCK_ABOVE` (two hours) is labelled in hours and minutes from its start, so that a
day-long run reads ``00:00, 06:00, 12:00, 18:00, 24:00`` rather than 0 to 86,400 s. Shorter
axes keep seconds.

One rule for every time axis of elapsed time: the matplotlib plots (``run --timeseries``'s
PNG, ``logs fit --plot``'s arrivals) through :func:`apply_to_matplotlib`, and the HTML report
and playground through :func:`spec` (``web/report.js`` picks its ticks by :func:`step` and
labels them as :func:`label` does, from the same steps, which the spec carries). Axes of
wall-clock time (a log's UTC timestamps) are dates already and are left alone.

Labels: ``HH:MM`` up to the end of the first day (``24:00`` is its end); later times carry the
day, ``d2 06:00`` (day 2, 06:00), with ``dN 24:00`` for the end of day N; ``:SS`` is added
when the time is not a whole minute. Time 0 is the start of the run (for the built-in
``autoscale-day``, midnight).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence

#: Axes spanning more than this (s) are labelled as a clock.
CLOCK_ABOVE = 2 * 3600.0

#: The steps (s) between a clock axis's ticks: the smallest that cuts the span into at most
#: :data:`MOST_INTERVALS`; past the last, whole multiples of it.
STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600,
         86400, 2 * 86400, 7 * 86400)

#: Intervals between ticks at most (so at most one more tick).
MOST_INTERVALS = 6

DAY = 86400.0


def is_clock(span: float) -> bool:
    """Whether an axis of this span (s) is labelled as a clock."""
    return span > CLOCK_ABOVE


def step(span: float) -> float:
    """The tick step (s) for an axis of this span."""
    for s in STEPS:
        if span <= s * MOST_INTERVALS:
            return float(s)
    last = STEPS[-1]
    return float(last * math.ceil(span / (last * MOST_INTERVALS)))


def ticks(lo: float, hi: float) -> List[float]:
    """The ticks between `lo` and `hi` (inclusive): the multiples of :func:`step`."""
    s = step(hi - lo)
    first = math.ceil(lo / s - 1e-9)
    return [k * s for k in range(first, int(math.floor(hi / s + 1e-9)) + 1)]


def label(seconds: float) -> str:
    """``HH:MM`` (``:SS`` when not a whole minute), with ``dN `` past the first day."""
    total = int(round(seconds))
    sign = "-" if total < 0 else ""
    total = abs(total)
    day, rest = divmod(total, int(DAY))
    if rest == 0 and day > 0:  # the end of a day is its 24:00, not the next day's 00:00
        day, rest = day - 1, int(DAY)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")
    return sign + (f"d{day + 1} " if day else "") + text


def axis_label(what: str, span: float) -> str:
    """`what` with the axis's unit: ``"simulated time (hh:mm)"`` or ``"simulated time (s)"``."""
    return f"{what} (hh:mm)" if is_clock(span) else f"{what} (s)"


def spec(xs: Sequence[Any]) -> Dict[str, Any] | None:
    """For the HTML report's plot spec (``x.clock``): the steps and most intervals, when the
    values span more than :data:`CLOCK_ABOVE`; else None (seconds)."""
    values = [float(x) for x in xs if x is not None]
    if not values or not is_clock(max(values) - min(values)):
        return None
    return {"steps": list(STEPS), "most": MOST_INTERVALS}


def apply_to_matplotlib(ax: Any, lo: float, hi: float) -> bool:
    """Clock ticks on `ax`'s x axis (shared axes follow) when ``hi - lo`` calls for them;
    whether it did."""
    if not is_clock(hi - lo):
        return False
    from matplotlib.ticker import FixedLocator, FuncFormatter

    ax.xaxis.set_major_locator(FixedLocator(ticks(lo, hi)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: label(v)))
    ax.set_xlim(lo, hi)
    return True
