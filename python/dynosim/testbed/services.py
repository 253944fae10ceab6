"""Services that call services on the real stack (docs/testbed.md, "Services that call
services"): what the testbed runs of a scenario with ``[services.NAME]`` and the entry's
``call`` and ``fanout`` phases, decided before anything starts.

Each service runs as a fleet of its own: its gunicorn dynos behind its own HAProxy (a second
HAProxy process with its own configuration and log, its policy mapped as the entry's is:
:mod:`.router`). The entry's app calls it over HTTP on loopback (:mod:`.app`).

The work of the calls: the engine gives no draw of a call's work outside a simulation (its
calls draw from streams of their own as they run), so each service's requests are drawn by
the engine from the service's own tables, as a fleet of its own under Poisson
arrivals at the rate its callers send it (``Scenario.describe()``'s ``services[i].rate``),
with a seed of its own (:func:`service_seed`), and handed out in order: the entry's k-th call
to a service, over the whole run, does that service's k-th drawn request. The load generator
sends each entry request's calls' work in ``X-Dynosim-Calls`` (:data:`CALLS_HEADER`). The
simulated side's calls are thus other draws of the same law: a comparison treats them as
independent.

This module reads scenarios only: it imports nothing of the testbed's plan (no import cycle).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..scenario import Scenario
from . import measure

#: The request header carrying an entry request's calls' drawn work, each call's phases
#: (``X-Dynosim-Phases``' form) separated by ``|``, in the order the app makes the calls.
CALLS_HEADER = "X-Dynosim-Calls"
#: The placeholder the entry's scenario holds for a call phase (a positive time, as the engine
#: asks; the app never waits it: the call replaces it), so that the engine draws the
#: entry's own phases (and the arrivals) as it would.
PLACEHOLDER = {"io": "1us"}


@dataclass
class Call:
    """One call phase of the entry's request: ``call`` (one call) or ``fanout`` (`count` at once,
    the phase ending when `wait` of them have answered: "all", "first" or a number)."""

    kind: str
    service: str
    count: int = 1
    wait: Any = "all"
    #: The caller's socket timeout per try, s; None: the run's bound.
    timeout: Optional[float] = None
    retries: int = 0

    def token(self) -> str:
        """The phase as the app reads it in ``X-Dynosim-Phases`` (:func:`.app.parse_phases`)."""
        parts = [f"{self.kind}={self.service}"]
        if self.kind == "fanout":
            parts += [f"count={self.count}", f"wait={self.wait}"]
        if self.timeout is not None:
            parts.append(f"timeout={self.timeout:.6f}")
        if self.retries:
            parts.append(f"retries={self.retries}")
        return ";".join(parts) + ":0"

    @property
    def needed(self) -> int:
        """How many of the service's requests the phase sends (its retries resend the same)."""
        return self.count


@dataclass
class ServicePlan:
    """One service's fleet as the testbed runs it: its own plan (:class:`.plan.Plan`, made from
    :func:`service_scenario`), and its drawn requests' work in order."""

    name: str
    plan: Any
    work: List[str] = field(default_factory=list)


@dataclass
class ServicesPlan:
    """What a scenario with services adds to the entry's plan."""

    #: The whole scenario, as written (the entry's plan holds the entry alone).
    scenario: Scenario
    #: The entry's phase index → its call.
    calls: Dict[int, Call]
    services: List[ServicePlan]
    #: Per drawn entry request, the work of each request its calls send, in order.
    work_of: List[List[str]] = field(default_factory=list)


def _seconds(value: Any) -> Optional[float]:
    from .. import _dynosim

    if isinstance(value, str):
        return _dynosim.parse_duration(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def calls_of(scenario: Scenario) -> Dict[int, Call]:
    """The entry's call phases by index, each refused in one line where the testbed cannot run
    it (a drawn count, hedging, cancelling)."""
    phases = (scenario.doc.get("request") or {}).get("phases") or []
    out: Dict[int, Call] = {}
    for i, phase in enumerate(phases):
        if not isinstance(phase, dict):
            continue
        path = f"request.phases[{i}]"
        if "call" in phase:
            timeout = phase.get("timeout")
            out[i] = Call("call", str(phase["call"]), timeout=None if timeout is None else _seconds(timeout),
                          retries=int(phase.get("retries", 0)))
        elif "fanout" in phase:
            if phase.get("hedge") is not None:
                raise scenario._error(f"{path}.hedge", "the testbed does not run hedged calls yet: leave hedge out")
            if phase.get("cancel", False) is not False:
                raise scenario._error(f"{path}.cancel", "the testbed does not cancel calls yet: leave cancel out "
                                                        "(or false)")
            count = phase.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool):
                raise scenario._error(f"{path}.count", "the testbed runs a fixed fan-out: give a whole number, not "
                                                       "a distribution")
            wait = phase.get("wait", "all")
            out[i] = Call("fanout", str(phase["fanout"]), count=count, wait=wait)
    return out


def entry_scenario(scenario: Scenario) -> Tuple[Scenario, Dict[int, Call]]:
    """The entry's fleet alone (``[services]`` left out, each call phase a placeholder,
    :data:`PLACEHOLDER`), which the engine draws and simulates as today, and the entry's calls.
    What the testbed does not run is refused in one line naming the key path."""
    request = scenario.doc.get("request") or {}
    if not request.get("phases"):
        raise scenario._error("request", "the testbed runs the entry's calls from [request] phases: give the "
                                         "entry's request as phases = [...]")
    if request.get("class"):
        raise scenario._error("request.class", "the testbed runs calls from one [request] of phases, not classes, "
                                               "yet")
    for name, service in (scenario.doc.get("services") or {}).items():
        app = service.get("app") or {}
        if app.get("server", "gunicorn") != "gunicorn":
            raise scenario._error(f"services.{name}.app.server", "the testbed runs a service's dynos with gunicorn "
                                                                 "only: leave app.server out")
        for key in ("autoscale", "faults"):
            if service.get(key):
                raise scenario._error(f"services.{name}.{key}", "the testbed does not run this for a service yet")
        for j, phase in enumerate((service.get("request") or {}).get("phases") or []):
            if isinstance(phase, dict) and ("call" in phase or "fanout" in phase):
                raise scenario._error(f"services.{name}.request.phases[{j}]",
                                      "the testbed runs one level of calls (the entry's) yet: a service that calls "
                                      "another is not run")
            if isinstance(phase, dict) and "use" in phase:
                raise scenario._error(f"services.{name}.request.phases[{j}].use",
                                      "the testbed's services have no database yet")
    calls = calls_of(scenario)
    doc = {k: v for k, v in scenario.doc.items() if k != "services"}
    phases = list(request["phases"])
    for i in calls:
        phases[i] = dict(PLACEHOLDER)
    doc["request"] = dict(request, phases=phases)
    return Scenario(doc, source=scenario.source, base_dir=scenario.base_dir), calls


def service_seed(seed: int, name: str) -> int:
    """A service's draws' seed: the scenario's, mixed with the service's name, so that the
    service's stream is not the entry's (the same seed would draw the same numbers)."""
    return (int(seed) * 1_000_003 + zlib.crc32(name.encode())) % (1 << 63)


def service_scenario(scenario: Scenario, name: str, rate: float, seed: int) -> Scenario:
    """Service `name` as a fleet of its own: its tables at the top level, Poisson arrivals at
    `rate` calls/s (its callers' rate), the scenario's run and resources, `seed`."""
    service = (scenario.doc.get("services") or {})[name]
    doc: Dict[str, Any] = {k: v for k, v in service.items()}
    doc["name"] = f"{scenario.name}-{name}"
    doc["arrivals"] = {"process": "poisson", "rate": f"{max(rate, 1e-6):.9g}/s"}
    run = dict(scenario.doc.get("run") or {})
    run.update({"seed": seed, "replications": 1})
    run.pop("shards", None)
    doc["run"] = run
    return Scenario(doc, source=scenario.source, base_dir=scenario.base_dir)


def deal_work(calls: Dict[int, Call], requests: int, work: Dict[str, List[str]]) -> List[List[str]]:
    """Per entry request (`requests` of them), the work of each request its calls send, in the
    order of its phases: the k-th call to a service over the run takes that service's k-th
    drawn request's work (`work`: per service, in order)."""
    taken = {name: 0 for name in work}
    out: List[List[str]] = []
    for _ in range(requests):
        mine: List[str] = []
        for i in sorted(calls):
            call = calls[i]
            k = taken[call.service]
            mine += work[call.service][k:k + call.needed]
            taken[call.service] = k + call.needed
        out.append(mine)
    return out


def needed(calls: Dict[int, Call], requests: int) -> Dict[str, int]:
    """Each service's requests the entry's `requests` send (not counting retries)."""
    out: Dict[str, int] = {}
    for call in calls.values():
        out[call.service] = out.get(call.service, 0) + call.needed * requests
    return out


def figures(router_log: Dict[str, Dict[str, Any]], work: Dict[str, Dict[str, Any]], *, dynos: int, slots: int,
            span: float, failed: int = 0, window: Optional[Any] = None) -> Dict[str, Any]:
    """A service's measured figures, from its HAProxy's log (by request id: every try its
    callers sent) and its app's work log, in the shape of the simulation's ``services.NAME.*``
    (docs/output.md): ``requests``, ``response`` (HAProxy's Ta: the try as the service answered
    it), ``queue`` (the part of it not in the app's work: HAProxy's queue, the connect and the
    wait in the dyno's accept queue), ``service_mean`` (the app's work), ``errors.total`` (the
    share of tries answered 5xx or not at all), ``utilisation.mean`` (the app's work over dynos ×
    slots × `span`, the seconds the load lasted), and ``calls``: ``sent`` (tries), ``answered``
    (answered before the caller gave up), ``errors`` (of those, 5xx), ``timed_out`` (the caller
    closed first: HAProxy's termination state ``C..``), ``timed_out_fraction``, ``retried``
    (tries after the first: ids ending ``.rN``), ``failed`` (calls failed on their last try:
    `failed`, from the callers' answers) and ``late`` (tries timed out whose work the service
    still finished: done for nobody). As the simulation's, ``calls.*`` count the whole run, the
    rest the tries of the entry's requests in the measured window: `window(entry index)`, all
    when None (a try's id begins with its entry request's index)."""
    def counted(rid: str) -> bool:
        if window is None:
            return True
        head = rid.partition("-")[0].partition(".")[0]
        return head.isdigit() and bool(window(int(head)))

    ta, queue = [], []
    requests = 0
    errors = timed_out = late = answered = answered_errors = retried = 0
    for rid, line in router_log.items():
        status = line.get("status")
        w = work.get(rid) or {}
        gone = str(line.get("term") or "").startswith("C")
        if ".r" in rid.rpartition("-")[2]:
            retried += 1
        if gone:
            timed_out += 1
            late += int(w.get("end") is not None)
        else:
            answered += 1
            answered_errors += int(status is None or status >= 500)
        if not counted(rid):
            continue
        requests += 1
        if status is None or status >= 500 or line.get("ta") is None or gone:
            errors += 1
        else:
            ta.append(line["ta"])
            if w.get("start") is not None and w.get("end") is not None:
                queue.append(max(0.0, line["ta"] - (w["end"] - w["start"])))
    served = [w["end"] - w["start"] for rid, w in work.items() if w.get("end") is not None and counted(rid)]
    # The utilisation over the whole load: every try's work, over the span.
    busy = float(np.sum([w["end"] - w["start"] for w in work.values() if w.get("end") is not None]))
    n = len(router_log)
    return {"requests": requests,
            "response": measure.time_summary(np.asarray(ta, dtype=float)),
            "queue": measure.time_summary(np.asarray(queue, dtype=float)),
            "service_mean": float(np.mean(served)) if served else 0.0,
            "errors": {"total": errors / requests if requests else 0.0},
            "utilisation": {"mean": busy / (dynos * slots * span) if span > 0 else 0.0},
            "calls": {"sent": n, "answered": answered, "errors": answered_errors, "timed_out": timed_out,
                      "timed_out_fraction": timed_out / n if n else 0.0, "retried": retried, "failed": failed,
                      "late": late}}
