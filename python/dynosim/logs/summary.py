"""The summary of router logs (``dynosim logs summary``): requests, rate, service-time
percentiles overall and per route, statuses, error codes, dynos, and the series over time,
as the dict ``dynosim logs summary --json`` prints (its fields: docs/logs.md); and its plot.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from .. import _dynosim
from ..errors import LogError
from ..output import write_files
from .reading import PathLike, call, log_names

__all__ = ["summary", "plot", "write_plot"]


def summary(
    paths: Union[PathLike, Sequence[PathLike]],
    *,
    format: str = "auto",
    log_format: Optional[str] = None,
    host: Optional[str] = None,
    interval: Optional[float] = None,
    top_routes: int = 20,
) -> Dict[str, Any]:
    """The summary of one log or several (plain, gzip, or ``"-"`` for standard input).

    ``format`` forces one format ("heroku", "haproxy", "nginx"; default "auto", line by line);
    ``log_format`` is nginx's ``log_format`` (the string, or the directive); ``host`` keeps
    only requests to that Host; ``interval`` (seconds) is the series' interval, by default
    chosen from the span; ``top_routes`` routes are reported one by one, the rest as
    ``(other)``. Raises :class:`~dynosim.errors.LogError` for a log that cannot be read (a
    truncated gzip: its name and the lines read) or that holds no request (with the first
    malformed lines' numbers and reasons).
    """
    names = log_names(paths, format)
    if top_routes < 1:
        raise LogError(f"--routes: must be at least 1, got {top_routes}")
    doc: Dict[str, Any] = json.loads(call(_dynosim.logs_summary, names, format, log_format, host, interval,
                                          top_routes))
    return doc


def _times(doc: Dict[str, Any]) -> List[datetime]:
    return [datetime.fromisoformat(p["start"]) for p in doc["series"]]


def plot(doc: Dict[str, Any], path: Path, title: str) -> None:
    """Two panels over the log's time (UTC): requests per second, and requests in service
    (the mean number being served during each interval, from each line's time less its
    service time)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    width = float(doc["interval_seconds"])
    # Each value holds from its interval's start to the next's; the last one to its end.
    t = _times(doc)
    t.append(t[-1] + timedelta(seconds=width))
    rates = [p["rate_per_s"] for p in doc["series"]]
    in_service = [p["in_service"] for p in doc["series"]]
    fig, (rate, busy) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    rate.step(t, rates + rates[-1:], where="post")
    busy.step(t, in_service + in_service[-1:], where="post", color="tab:orange")
    rate.set_ylabel("requests per second")
    busy.set_ylabel("requests in service\n(mean over the interval)")
    busy.set_xlabel(f"time (UTC), {_interval_text(width)} intervals")
    busy.xaxis.set_major_formatter(mdates.ConciseDateFormatter(busy.xaxis.get_major_locator()))
    rate.set_ylim(bottom=0)
    busy.set_ylim(bottom=0)
    rate.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def write_plot(doc: Dict[str, Any], path: PathLike, title: str = "") -> Path:
    """Writes :func:`plot` to ``path``, whole or not at all (``output.write_files``)."""
    target = Path(path)
    write_files({target: lambda tmp: plot(doc, tmp, title or ", ".join(f["name"] for f in doc["files"]))},
                option="--plot")
    return target


def _interval_text(seconds: float) -> str:
    for unit, size in (("day", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size and seconds % size == 0:
            n = seconds / size
            return f"{n:g} {unit}" + ("s" if unit == "day" and n != 1 else "")
    return f"{seconds:g} s"
