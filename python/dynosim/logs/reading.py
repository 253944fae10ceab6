"""What reading router logs takes, for the summary, fitting and replay alike: the log names
and their checks, the formats, and ``--window START..END``."""

from __future__ import annotations

import math
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple, Union

from .. import _dynosim
from ..errors import LogError, from_engine

#: The formats ``format`` may name; "auto" reads each line in whichever one fits.
FORMATS = ("auto", "heroku", "haproxy", "nginx")

PathLike = Union[str, Path]

#: One end of a window, as the compiled module takes it: (relative, seconds), an offset from
#: the log's first arrival when relative, else seconds since the epoch.
Bound = Optional[Tuple[bool, float]]


def log_names(paths: Union[PathLike, Sequence[PathLike]], format: str) -> List[str]:
    """The logs as names for the reader, checked: at least one, a known format, and standard
    input only when something is piped into it."""
    names: List[str] = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    if not names:
        raise LogError("no log given")
    if format not in FORMATS:
        raise LogError(f"--format: unknown log format {format!r}; expected one of: {', '.join(FORMATS)}")
    if "-" in names and sys.stdin is not None and sys.stdin.isatty():
        # Reading a terminal would wait for a log that is not coming, past Ctrl-C.
        raise LogError("-: standard input is a terminal: pipe a log into it, or name a file")
    return names


def parse_window(text: Optional[str]) -> Tuple[Bound, Bound]:
    """``--window START..END``: each end a time (ISO 8601, ``2014-01-09T06:00``, UTC unless it
    has an offset) or a duration from the log's first arrival (``10min``); either may be left
    out (``10min..``, ``..2h``). Requests arriving in [START, END) are kept."""
    if text is None:
        return None, None
    start, sep, end = text.partition("..")
    if not sep:
        raise LogError(f"--window: expected START..END (a time or a duration from the log's start, either "
                       f"may be left out), got {text!r}")
    bounds = (_bound(start.strip(), text), _bound(end.strip(), text))
    if bounds[0] is not None and bounds[1] is not None and bounds[0][0] == bounds[1][0] \
            and bounds[1][1] <= bounds[0][1]:
        raise LogError(f"--window: its end must come after its start, got {text!r}")
    return bounds


def _bound(text: str, whole: str) -> Bound:
    if not text:
        return None
    seconds = _dynosim.parse_duration(text)
    if seconds is not None:
        if not (math.isfinite(seconds) and seconds >= 0):
            raise LogError(f"--window: an offset must be a duration >= 0, got {text!r}")
        return True, float(seconds)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise LogError(f"--window: {text!r} is neither a time (2014-01-09T06:00:00) nor a duration from the "
                       f"log's start (10min), in {whole!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return False, moment.timestamp()


def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A call into the log reader, its errors as the package's."""
    try:
        return fn(*args, **kwargs)
    except _dynosim.EngineError as e:
        raise from_engine(e) from None
