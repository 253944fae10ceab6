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

import json
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
    #: A fan-out's ``hedge = T``: s after the calls were sent, a second copy of each call still
    #: unanswered; None: no hedging.
    hedge: Optional[float] = None
    #: A drawn fan-out width, ``{ distribution = "geometric", mean = m }``: m (each request's
    #: count drawn by :func:`draw_counts`); None: every request ``count`` calls.
    count_mean: Optional[float] = None

    def token(self, count: Optional[int] = None) -> str:
        """The phase as the app reads it in ``X-Dynosim-Phases`` (:func:`.app.parse_phases`),
        with `count` calls (a drawn width's, for one request; the fixed ``count`` when None)."""
        parts = [f"{self.kind}={self.service}"]
        if self.kind == "fanout":
            parts += [f"count={self.count if count is None else count}", f"wait={self.wait}"]
        if self.hedge is not None:
            parts.append(f"hedge={self.hedge:.6f}")
        if self.timeout is not None:
            parts.append(f"timeout={self.timeout:.6f}")
        if self.retries:
            parts.append(f"retries={self.retries}")
        return ";".join(parts) + ":0"

    @property
    def needed(self) -> int:
        """How many of the service's drawn requests the phase may send (its retries resend the
        same): a hedged fan-out's calls each a second, for its copy (the simulation's copy is
        a request of the callee's, with a service time of its own), used only if hedged."""
        return self.draws(self.count)

    def draws(self, count: int) -> int:
        """:attr:`needed` for a request that sends `count` calls."""
        return count * (2 if self.hedge is not None else 1)


#: The most calls a drawn fan-out width sends, as the engine's (docs/services.md).
MAX_COUNT = 10_000


def draw_counts(calls: Dict[int, "Call"], requests: int, seed: int, replication: int = 0) -> List[Dict[int, int]]:
    """Per entry request, the width of each fan-out with a drawn count (phase index → calls):
    geometric, 1, 2, 3... with P(n) = (1 − p)^(n−1) p, p = 1/mean (numpy's geometric law), at
    most :data:`MAX_COUNT`, from a stream of the testbed's own (`seed` mixed with the phase's
    index and the `replication`): the engine draws its widths from a stream of the calling fleet's that no draw
    outside a simulation reaches, so the two sides' widths are other draws of the same law, as
    the calls' work is."""
    out: List[Dict[int, int]] = [{} for _ in range(requests)]
    for i, call in sorted(calls.items()):
        if call.count_mean is None:
            continue
        rng = np.random.default_rng(service_seed(seed, f"count:{i}:{replication}"))
        widths = np.minimum(rng.geometric(1.0 / call.count_mean, size=requests), MAX_COUNT)
        for r, w in enumerate(widths):
            out[r][i] = int(w)
    return out


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
    #: Per drawn entry request, its drawn fan-outs' widths (phase index → calls).
    counts: List[Dict[int, int]] = field(default_factory=list)


def _seconds(value: Any) -> Optional[float]:
    from .. import _dynosim

    if isinstance(value, str):
        return _dynosim.parse_duration(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def calls_of(scenario: Scenario, service: Optional[str] = None) -> Dict[int, Call]:
    """The call phases by index of the entry's request (or of service `service`'s), each
    refused in one line where the testbed cannot run it (a hedge at a percentile)."""
    table = scenario.doc if service is None else (scenario.doc.get("services") or {})[service]
    prefix = "" if service is None else f"services.{service}."
    phases = (table.get("request") or {}).get("phases") or []
    out: Dict[int, Call] = {}
    for i, phase in enumerate(phases):
        if not isinstance(phase, dict):
            continue
        path = f"{prefix}request.phases[{i}]"
        if "call" in phase:
            timeout = phase.get("timeout")
            out[i] = Call("call", str(phase["call"]), timeout=None if timeout is None else _seconds(timeout),
                          retries=int(phase.get("retries", 0)))
        elif "fanout" in phase:
            hedge = phase.get("hedge")
            if hedge is False:
                hedge = None  # no hedging, as leaving it out
            if isinstance(hedge, str) and hedge.startswith("p"):
                raise scenario._error(f"{path}.hedge", "the testbed runs a hedge after a fixed time only (hedge = "
                                                       "\"20ms\"), not at a percentile of the answers")
            if phase.get("cancel", False) is not False:
                raise scenario._error(f"{path}.cancel", "the testbed does not cancel calls yet: leave cancel out "
                                                        "(or false)")
            count = phase.get("count", 1)
            mean = None
            if isinstance(count, dict):  # the engine has checked it: { distribution = "geometric", mean = m }
                mean, count = float(count["mean"]), 1
            wait = phase.get("wait", "all")
            out[i] = Call("fanout", str(phase["fanout"]), count=int(count), wait=wait,
                          hedge=None if hedge is None else _seconds(hedge), count_mean=mean)
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
        classes = (service.get("request") or {}).get("class") or []
        if any(isinstance(p, dict) and ("call" in p or "fanout" in p)
               for c in (classes if isinstance(classes, list) else []) for p in (c.get("phases") or [])):
            raise scenario._error(f"services.{name}.request.class", "the testbed runs a service's calls from one "
                                                                   "[request] of phases, not classes, yet")
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


def uses_resources(table: Dict[str, Any]) -> bool:
    """Whether a fleet's table (a service's) has a ``use`` phase in its request."""
    request = table.get("request") or {}
    classes = request.get("class")
    phases = list(request.get("phases") or []) + [p for c in (classes if isinstance(classes, list) else [])
                                                    for p in (c.get("phases") or [])]
    return any(isinstance(p, dict) and "use" in p for p in phases)


def service_scenario(scenario: Scenario, name: str, rate: float, seed: int) -> Scenario:
    """Service `name` as a fleet of its own: its tables at the top level (its own calls'
    phases placeholders, :data:`PLACEHOLDER`, as the entry's), Poisson arrivals at `rate`
    calls/s (its callers' rate), the scenario's run and resources, `seed`."""
    service = (scenario.doc.get("services") or {})[name]
    doc: Dict[str, Any] = {k: v for k, v in service.items()}
    calls = calls_of(scenario, name)
    if calls:
        phases = list(doc["request"]["phases"])
        for i in calls:
            phases[i] = dict(PLACEHOLDER)
        doc["request"] = dict(doc["request"], phases=phases)
    if uses_resources(service) and scenario.doc.get("resources"):
        # The scenario's database, which its fleets share (docs/services.md).
        doc["resources"] = scenario.doc["resources"]
    doc["name"] = f"{scenario.name}-{name}"
    doc["arrivals"] = {"process": "poisson", "rate": f"{max(rate, 1e-6):.9g}/s"}
    run = dict(scenario.doc.get("run") or {})
    run.update({"seed": seed, "replications": 1})
    run.pop("shards", None)
    doc["run"] = run
    return Scenario(doc, source=scenario.source, base_dir=scenario.base_dir)


def deal_work(calls: Dict[int, Call], requests: int, work: Dict[str, List[str]],
              counts: Optional[List[Dict[int, int]]] = None, taken: Optional[Dict[str, int]] = None) -> List[List[str]]:
    """Per entry request (`requests` of them), the work of each request its calls send, in the
    order of its phases: the k-th call to a service over the run takes that service's k-th
    drawn request's work (`work`: per service, in order). `counts`: per request, the drawn
    fan-outs' widths (:func:`draw_counts`); `taken`: per service, the works already dealt to
    other callers (updated: a service two fleets call deals each its own)."""
    taken = {name: 0 for name in work} if taken is None else taken
    for name in work:
        taken.setdefault(name, 0)
    out: List[List[str]] = []
    for r in range(requests):
        mine: List[str] = []
        for i in sorted(calls):
            call = calls[i]
            k = taken[call.service]
            n = call.draws(counts[r][i]) if counts and i in counts[r] else call.needed
            mine += work[call.service][k:k + n]
            taken[call.service] = k + n
        out.append(mine)
    return out


def needed(calls: Dict[int, Call], requests: int, counts: Optional[List[Dict[int, int]]] = None,
           into: Optional[Dict[str, int]] = None) -> Dict[str, int]:
    """Each service's requests the entry's `requests` send (not counting retries); `counts`:
    per request, the drawn fan-outs' widths; `into`: added to these counts (returned)."""
    out: Dict[str, int] = {} if into is None else into
    for i, call in calls.items():
        n = (sum(call.draws(c[i]) for c in counts[:requests]) if counts and call.count_mean is not None
             else call.needed * requests)
        out[call.service] = out.get(call.service, 0) + n
    return out


#: Between a call's own phases and its own calls' works in ``X-Dynosim-Calls`` (a service
#: that calls services: ``io:0.004,call=search:0~<its calls' works, percent-encoded>``), so
#: that each level's ``|`` and ``~`` stay its own however deep the calls go.
SUBCALLS = "~"


def with_subcalls(work: str, subcalls: List[str]) -> str:
    """A call's work carrying the works of the calls its request sends in turn."""
    from urllib.parse import quote

    return work + SUBCALLS + quote("|".join(subcalls), safe="") if subcalls else work


def call_order(scenario: Scenario) -> List[str]:
    """The services, each after every service that calls it (the entry's calls first): the
    order in which the calls each receives are known. A cycle is refused in one line."""
    services = scenario.doc.get("services") or {}
    callees = {name: [c.service for c in calls_of(scenario, name).values()] for name in services}
    order: List[str] = []
    state: Dict[str, int] = {}

    def visit(name: str) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise scenario._error(f"services.{name}", "the services call one another in a cycle: the testbed runs "
                                                      "calls that end")
        state[name] = 1
        for callee in callees.get(name, []):
            if callee in services:
                visit(callee)
        state[name] = 2
        order.append(name)

    for name in services:
        visit(name)
    return order[::-1]


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
    (tries after the first: ids ending ``.rN``), ``hedged`` (second copies of a hedged
    fan-out's calls: ids ending ``.h``), ``failed`` (calls failed on their last try: `failed`,
    from the callers' answers) and ``late`` (tries timed out whose work the service still
    finished, and the losers of hedged calls, :func:`hedge_losers`: done for nobody). As the simulation's, ``calls.*`` count the whole run, the
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
    losers = hedge_losers(router_log, work)
    hedged = sum(1 for rid in router_log if rid.endswith(HEDGE_SUFFIX))
    for rid, line in router_log.items():
        status = line.get("status")
        w = work.get(rid) or {}
        gone = str(line.get("term") or "").startswith("C")
        if ".r" in rid.rpartition("-")[2]:
            retried += 1
        if rid in losers:
            late += 1  # answered after its twin: done for nobody
        elif gone:
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
                      "timed_out_fraction": timed_out / n if n else 0.0, "retried": retried, "hedged": hedged,
                      "failed": failed, "late": late}}


#: The id suffix of a hedged call's second copy at the service (``12-search0.3.h``).
HEDGE_SUFFIX = ".h"


def hedge_losers(router_log: Dict[str, Dict[str, Any]], work: Dict[str, Dict[str, Any]]) -> set:
    """The copies of hedged calls that lost: of a call's two copies both answered 2xx–4xx
    (``12-search0.3`` and ``12-search0.3.h``), the one whose work ended later (the app's work
    log, wall clock: the answers leave the service right after), as the simulation counts the
    loser's answer ``late``."""
    out = set()
    for rid in router_log:
        if not rid.endswith(HEDGE_SUFFIX):
            continue
        first = rid[:-len(HEDGE_SUFFIX)]
        pair = [first, rid]
        if not all(k in router_log and (router_log[k].get("status") or 500) < 500
                   and not str(router_log[k].get("term") or "").startswith("C")
                   and (work.get(k) or {}).get("end") is not None for k in pair):
            continue
        out.add(max(pair, key=lambda k: work[k]["end"]))
    return out


def with_hops(scenario: Scenario, entry_hop: float, call_hop: Any) -> Scenario:
    """`scenario` with the real stack's measured costs as constant waits, for the simulation a
    real run of it is held to where a call's timing matters (a hedge fires T after the calls
    left, as the caller sees them: the stack's hop included): the entry's request gets an
    ``io`` phase of `entry_hop` s at its end (the load generator to the entry app and back),
    and each service's request one of `call_hop` s first (the caller's HTTP call, the service's
    HAProxy and gunicorn; a dict: per service), so that the simulated caller sees each answer
    the hop later, as the real one does. Both sides' services must be ``[request]`` phases."""
    doc = json.loads(json.dumps(scenario.doc))
    request = doc.get("request") or {}
    request["phases"] = list(request.get("phases") or []) + [{"io": f"{max(entry_hop, 1e-6) * 1e6:.0f}us"}]
    for name, service in (doc.get("services") or {}).items():
        phases = (service.get("request") or {}).get("phases")
        if not phases:
            raise scenario._error(f"services.{name}.request.phases", "the stack's hops are added to [request] phases")
        hop = float(call_hop[name] if isinstance(call_hop, dict) else call_hop)
        service["request"]["phases"] = [{"io": f"{max(hop, 1e-6) * 1e6:.0f}us"}] + list(phases)
    return Scenario(doc, source=scenario.source, base_dir=scenario.base_dir)
