"""Router logs replayed through another fleet (``dynosim logs replay``): a trace-driven
simulation. Each request of the log arrives when it reached the router (its line's time less
its connect and service times, sorted: a line is written when its request ends) and keeps its
logged service time; the scenario gives the fleet, the app server, the router and its policy.

The log is read by the Rust crate ``dynosim-logs`` into a trace file (``arrival,service``, in
a temporary folder), which the engine replays as ``arrivals.process = "replay"``. docs/logs.md
says what is assumed.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .. import _dynosim
from ..api import run
from ..errors import LogError
from ..results import PolicyResult, Results
from ..scenario import Scenario, ScenarioLike
from .reading import PathLike, call, log_names, parse_window

__all__ = ["replay", "ReplayResults", "REPLACED_SECTIONS"]

#: The scenario's sections a replay replaces with the log's requests: their arrivals and
#: service times (and the resources that only [request] phases use). ``arrivals.timeout``, the
#: clients' patience, is kept.
REPLACED_SECTIONS = ("arrivals", "service", "request", "resources")

#: Past the trace's last arrival, so that the window [0, duration) holds it (the logs'
#: resolution).
LAST_ARRIVAL_MARGIN = 1e-6


class ReplayResults(Results):
    """The results of a replay (a :class:`~dynosim.Results`, one per policy), with ``log``:
    what was read from the log and what it recorded for the same requests (its service-time
    percentiles, statuses, error codes)."""

    def __init__(self, results: List[PolicyResult], log: Dict[str, Any], dropped: Sequence[str]) -> None:
        super().__init__(results)
        self.log = log
        #: Sections of the scenario the replay left out ([request] phases, [resources]).
        self.dropped = list(dropped)

    def to_dict(self) -> Dict[str, Any]:
        """``dynosim run --json``'s document, with the log's figures as ``log``."""
        return {**super().to_dict(), "log": self.log}


def replay(
    paths: Union[PathLike, Sequence[PathLike]],
    scenario: ScenarioLike,
    *,
    format: str = "auto",
    log_format: Optional[str] = None,
    host: Optional[str] = None,
    window: Optional[str] = None,
    speed: float = 1.0,
    set: Union[Mapping[str, Any], Iterable[str], None] = None,
    policies: Optional[Sequence[str]] = None,
    correct_queueing: bool = False,
    replications: Optional[int] = None,
    seed: Optional[int] = None,
    warmup: Union[str, float, None] = None,
) -> ReplayResults:
    """Replays router logs (plain, gzip, or ``"-"``) through the fleet of ``scenario`` (a
    built-in name, a TOML path, a dict or a :class:`~dynosim.Scenario`).

    ``window`` (``"10min..2h"`` or ISO times) keeps the requests arriving in it; ``speed``
    divides the gaps between arrivals (2: twice the rate); ``set`` overrides scenario keys and
    ``policies`` replaces ``router.policy``, as in :func:`dynosim.run`. The run lasts the
    trace's span (its first to last arrival) with no warm-up unless ``warmup`` is given (the
    requests in it load the fleet but are not measured); one replication unless
    ``replications`` is given (they differ only in what is drawn, such as random routing).
    ``correct_queueing`` replays each request's service time less its overlap with the one
    before it on its dyno (time queued there, if each dyno serves one request at a time). A load
    above capacity is simulated, not refused: the trace ends, and its queues with it."""
    names = log_names(paths, format)
    start, end = parse_window(window)
    if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
        raise LogError(f"--speed: must be a positive number, got {speed!r}")
    base = Scenario.load(scenario).with_overrides(set)
    if policies is not None:
        base = base.with_overrides({"router.policy": list(policies)})
    with tempfile.TemporaryDirectory(prefix="dynosim-replay-") as tmp:
        trace = Path(tmp) / "requests.csv"
        log: Dict[str, Any] = json.loads(call(
            _dynosim.logs_trace, names, str(trace), format, log_format, host, start, end, float(speed),
            correct_queueing))
        doc = copy.deepcopy(base.doc)
        dropped = [f"[{name}]" for name in ("request", "resources") if name in doc]
        timeout = doc.get("arrivals", {}).get("timeout")
        for name in REPLACED_SECTIONS:
            doc.pop(name, None)
        doc["arrivals"] = {"process": "replay", "file": str(trace)}
        if timeout is not None:
            doc["arrivals"]["timeout"] = timeout
        run_section = doc.setdefault("run", {})
        warm = 0.0 if warmup is None else _seconds(warmup, "--warmup")
        # The measured window: after the warm-up, to the trace's last arrival.
        run_section["warmup"] = warm
        run_section["duration"] = max(log["trace_seconds"] - warm, 0.0) + LAST_ARRIVAL_MARGIN
        run_section["replications"] = replications if replications is not None else 1
        if seed is not None:
            run_section["seed"] = seed
        run_section.setdefault("allow_overload", True)
        if warm >= log["trace_seconds"] + LAST_ARRIVAL_MARGIN:
            raise LogError(f"--warmup: {warm:g} s is the whole trace ({log['trace_seconds']:g} s): nothing would be "
                           f"measured")
        replayed = Scenario(doc, source=base.source, base_dir=base.base_dir, overridden=base.overridden)
        results = run(replayed, warn=False)
    return ReplayResults(list(results), log, dropped)


def _seconds(value: Union[str, float], option: str) -> float:
    seconds = _dynosim.parse_duration(value) if isinstance(value, str) else float(value)
    if seconds is None or not (math.isfinite(seconds) and seconds >= 0):
        raise LogError(f"{option}: expected a duration >= 0 such as 30s, got {value!r}")
    return float(seconds)
