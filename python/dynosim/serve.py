"""The playground (issue #27): ``dynosim serve``, a local web app over the Python API.

A page (``web/playground.html`` and ``.js``, with the report's uPlot, styles and plots) edits a
scenario, by controls for its main keys or as TOML, and shows its results as the HTML report
does, policies side by side on the same traffic; this module only answers the page's
requests, with what :func:`dynosim.run` and :mod:`dynosim.run_report` give:

- ``GET /``: the page; ``GET /static/NAME``: its scripts and styles (nothing else is served);
- ``GET /api/scenarios``: the built-in scenarios (name, description, TOML), the policies, the
  dyno types and the controls;
- ``POST /api/run``: ``{"toml": text, "set": {key: value}, "policies": [names]}`` runs it and
  answers ``{"toml": the scenario with the controls applied, "words", "html": the table,
  notes and warnings, "plots": [...], "seconds"}``; a mistake is a 400 ``{"error", "line",
  "key"}`` with the CLI's message (and the TOML line it is on, when it is on one);
- ``POST /api/report``: the same body; answers the ``--html`` report as a download;
- ``GET /api/status``: the server's load (runs, queued requests, the engine memory it
  accounts for, its limits) and, for the client its ``X-Dynosim-Client`` header names, the
  place of its request in the queue (the page shows it while it waits).

Safety: it listens on 127.0.0.1 unless told otherwise (then the CLI warns); a scenario from
the page cannot read files (every key of the schema's ``path`` kind, and so
``arrivals.process = "replay"``, is refused unless it names a file under ``--data DIR``); a
body is at most :data:`MAX_BODY` bytes; every run is held to the scenario's work and memory
budgets, capped at :data:`MAX_REQUESTS` and :data:`MAX_MEMORY`; each client (the page's own
id) has at most one run at a time, a newer one cancelling the older (the engine's cancel
tokens); a malformed request is a 4xx with a message, never a traceback.

And the server as a whole is bounded (:class:`Runs`), whatever client ids are sent: at most
``max_runs`` engine runs at once, and at most ``max_memory`` bytes of engine state among them,
each run's worked out by the engine before it starts (``describe()["run_bytes"]``: one
replication's state times the replications run at once, which the per-run memory cap, lowered
to ``max_memory``, bounds). Beyond them a request waits in a queue of at most ``max_queue``
(first come, first served) or is answered 503 with ``Retry-After``; a run that alone needs
more than ``max_memory`` is refused at once (400, naming the keys that make it large).
Stopping the server (Ctrl-C, SIGTERM) cancels its runs and its queued requests.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import math
import os
import secrets
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from . import _dynosim, html_report
from .errors import DynosimError, ScenarioError
from .output import finite
from .run_report import run_report
from .scenario import Scenario, builtin_scenarios, parse_override
from .toml_text import toml_text

#: The largest request body accepted (a scenario's TOML and the controls).
MAX_BODY = 256 * 1024
#: A run from the page simulates at most this many requests (run.max_requests is lowered to it).
MAX_REQUESTS = 50_000_000
#: And one replication's engine state takes at most this much memory (run.max_memory), bytes.
MAX_MEMORY = 2e9
#: The page's files that are served, and their types.
STATIC = {"playground.js": "text/javascript", "playground.css": "text/css", "report.js": "text/javascript",
          "report.css": "text/css", "uPlot.iife.min.js": "text/javascript", "uPlot.min.css": "text/css"}

#: The controls the page shows: (key, label, kind, choices).
CONTROLS: List[Dict[str, Any]] = [
    {"key": "fleet.dynos", "label": "dynos", "kind": "number", "min": 1},
    {"key": "router.policy", "label": "policies", "kind": "policies"},
    {"key": "arrivals.rate", "label": "rate", "kind": "text", "hint": "e.g. 150/s or 9000/min"},
    {"key": "app.processes", "label": "processes", "kind": "number", "min": 1},
    {"key": "app.threads", "label": "threads", "kind": "number", "min": 1},
    {"key": "fleet.type", "label": "dyno type", "kind": "choice"},
    {"key": "router.timeout", "label": "router timeout", "kind": "text", "hint": "e.g. 30s, or off"},
    {"key": "autoscale.rule", "label": "autoscaler", "kind": "choice"},
    {"key": "autoscale.min", "label": "autoscale min", "kind": "number", "min": 1},
    {"key": "autoscale.max", "label": "autoscale max", "kind": "number", "min": 1},
    {"key": "run.replications", "label": "replications", "kind": "number", "min": 2},
]


class Refused(Exception):
    """A request the server answers with a 4xx (or a 503): ``status``, the message, and where;
    ``retry_after`` (seconds) for a 503."""

    def __init__(self, status: int, message: str, *, line: Optional[int] = None, key: Optional[str] = None,
                 retry_after: Optional[int] = None):
        super().__init__(message)
        self.status, self.line, self.key, self.retry_after = status, line, key, retry_after

    def body(self) -> Dict[str, Any]:
        return {"error": str(self), "line": self.line, "key": self.key}

    def headers(self) -> Dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}


# --- the scenario from the page --------------------------------------------------------------


def path_keys() -> List[str]:
    """The names of the schema's keys that name a file (kind ``path``)."""
    doc = json.loads(_dynosim.keys())
    names = set()
    for section in doc.get("sections", []):
        for key in section.get("keys", []):
            if "path" in str(key.get("kind", "")).lower() or str(key.get("type", "")).startswith("path"):
                names.add(key["name"])
    return sorted(names or {"file"})


def _files(doc: Any, names: Sequence[str], prefix: str = "") -> List[Tuple[str, Any]]:
    """Every (key path, value) of `doc` whose key is one of `names`."""
    out: List[Tuple[str, Any]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if k in names and isinstance(v, str):
                out.append((path, v))
            else:
                out += _files(v, names, path)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _files(v, names, f"{prefix}[{i}]")
    return out


def scenario_from_page(body: Any, data: Optional[Path], names: Sequence[str],
                       max_memory: float = MAX_MEMORY) -> Tuple[Scenario, List[str]]:
    """The scenario a request asks for, its controls applied and held to the server's budgets
    (`max_memory`: the server's whole memory limit, when below :data:`MAX_MEMORY`), and its
    policies; Refused (400) for anything wrong with it, with the CLI's message and the TOML
    line where there is one."""
    if not isinstance(body, dict):
        raise Refused(400, "expected a JSON object with \"toml\"")
    text = body.get("toml")
    if not isinstance(text, str) or not text.strip():
        raise Refused(400, "\"toml\": expected the scenario's TOML text")
    overrides = body.get("set") or {}
    if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
        raise Refused(400, "\"set\": expected an object of key paths and values")
    policies = body.get("policies") or None
    if policies is not None and (not isinstance(policies, list) or not all(isinstance(p, str) for p in policies)
                                 or len(policies) > 12):
        raise Refused(400, "\"policies\": expected a list of at most 12 policy names")
    base = data if data is not None else Path.cwd()
    try:
        scenario = Scenario._from_text(text, "scenario.toml", base)
        items = {}
        for key, value in overrides.items():
            if value is None or value == "":
                continue
            items[key] = parse_override(f"{key}={value}")[1] if isinstance(value, str) else value
        scenario = scenario.with_overrides(items)
    except DynosimError as e:
        raise Refused(400, str(e), line=_line_of(e, text), key=getattr(e, "path", None)) from None
    try:
        cases = [case for _, case in scenario.cases]
    except DynosimError as e:
        raise Refused(400, str(e), line=_line_of(e, text), key=getattr(e, "path", None)) from None
    for doc in [scenario.doc] + [case.doc for case in cases]:
        for path, value in _files(doc, names):
            if data is None:
                raise Refused(400, f"{path}: the playground reads no file (start it with --data DIR to allow files "
                                   "under DIR)", line=_key_line(text, path.rsplit(".", 1)[-1]), key=path)
            target = (data / value).resolve()
            if not target.is_relative_to(data.resolve()):
                raise Refused(400, f"{path}: {value!r} is not under the --data folder", key=path,
                              line=_key_line(text, path.rsplit(".", 1)[-1]))
    # The page's runs are held to the server's budgets, whatever the scenario asks.
    scenario = held(scenario, max_memory)
    try:
        for policy in policies or scenario.policies:
            scenario.for_policy(policy).describe()
    except DynosimError as e:
        raise Refused(400, _server_limit(str(e), scenario, max_memory), line=_line_of(e, text),
                      key=getattr(e, "path", None)) from None
    return scenario, list(policies) if policies else []


def held(scenario: Scenario, max_memory: float = MAX_MEMORY) -> Scenario:
    """The scenario held to the server's budgets: `run.max_requests` at most
    :data:`MAX_REQUESTS`, `run.max_memory` at most :data:`MAX_MEMORY` and `max_memory` (so
    that a run's replications at once fit in the server's whole limit), `run.threads` at most
    the machine's cores."""
    run = scenario.doc.get("run") or {}
    cap = min(MAX_MEMORY, max_memory)
    budget: Dict[str, Any] = {}
    if _amount(run.get("max_requests"), float) > MAX_REQUESTS:
        budget["run.max_requests"] = MAX_REQUESTS
    if _amount(run.get("max_memory"), _dynosim.parse_bytes) > cap:
        budget["run.max_memory"] = cap
    threads = run.get("threads")
    if isinstance(threads, int) and not isinstance(threads, bool) and threads > (os.cpu_count() or 1):
        budget["run.threads"] = "auto"  # one per core: the machine's, not the page's choice
    return scenario.with_overrides(budget) if budget else scenario


def _server_limit(message: str, scenario: Scenario, max_memory: float) -> str:
    """The engine's message, saying that the memory limit it names is the server's when the
    server's cap is the one in force (rather than a lower ``run.max_memory`` of the scenario)."""
    own = _amount((scenario.doc.get("run") or {}).get("max_memory"), _dynosim.parse_bytes)
    if own >= min(MAX_MEMORY, max_memory) and "(run.max_memory)" in message:
        return message.replace("(run.max_memory)", "(the playground's limit on a run's engine state: the smaller "
                                                   f"of dynosim serve --max-memory and {MAX_MEMORY / 1e9:g} GB)")
    return message


def each_run(scenario: Scenario, max_memory: float = MAX_MEMORY) -> List[Tuple[str, Scenario]]:
    """The runs a request makes, one after another: its cases (each held to the budgets too: a
    case's ``set`` may name them), or the scenario itself."""
    return [(label, held(case, max_memory)) for label, case in scenario.cases] or [("", scenario)]


def run_memory(scenario: Scenario, policies: Sequence[str], max_memory: float = MAX_MEMORY) -> float:
    """The engine state a request's run may hold at once, bytes, worked out before it starts
    as the engine computes it: for each case and policy (each runs after the one before), its
    replications at once (``run_bytes``), then the trace of its series over time
    (``trace_bytes``: one replication of the whole fleet on the event-driven engine); the
    largest of them. Refused (400) for a case the engine refuses."""
    need = 0.0
    try:
        for _, case in each_run(scenario, max_memory):
            for policy in policies or case.policies:
                described = case.for_policy(policy).describe()
                need = max(need, float(described["run_bytes"]), float(described["trace_bytes"]))
    except DynosimError as e:
        raise Refused(400, _server_limit(str(e), scenario, max_memory), key=getattr(e, "path", None)) from None
    return need


def _amount(value: Any, parse: Any) -> float:
    """A budget's value as a number (infinite when absent: the engine's default is above the
    server's cap); a value the engine will refuse is left to it (0 here)."""
    if value is None:
        return math.inf
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        parsed = parse(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    return 0.0 if parsed is None else float(parsed)


def _line_of(error: Exception, text: str) -> Optional[int]:
    """The TOML line an error is on: the line TOML's parser names, else the line of the key
    the message names (its last part, under its table)."""
    message = str(error)
    for marker in ("line ", "at line "):
        i = message.find(marker)
        if i >= 0:
            digits = "".join(itertools.takewhile(str.isdigit, message[i + len(marker):]))
            if digits:
                return int(digits)
    path = getattr(error, "path", None)
    if not path:
        head = message.split(":", 1)[0].strip()
        path = head if "." in head and " " not in head else None
    if path:
        return _key_line(text, path)
    return None


def _key_line(text: str, path: str) -> Optional[int]:
    """The 1-based line of `path` (``fleet.dynos``) in the TOML text: its key under its table."""
    parts = path.split(".")
    table, key = parts[:-1], parts[-1]
    current: List[str] = []
    fallback = None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip().split(".")
            continue
        name = stripped.split("=", 1)[0].strip().strip('"') if "=" in stripped else None
        if name == key:
            if current == table or not table:
                return n
            fallback = fallback or n
    return fallback


# --- the runs --------------------------------------------------------------------------------


class Ended(Exception):
    """A request's run ended before its answer: ``why`` is "newer" (a newer request of the same
    client took its place), "stopping" (the server is stopping) or "gone" (its client left)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why

    def refused(self) -> Refused:
        if self.why == "stopping":
            return Refused(503, "cancelled: the server is stopping", retry_after=30)
        if self.why == "gone":
            return Refused(409, "cancelled: the page that asked for it closed its request")
        return Refused(409, "cancelled: a newer run from this page took its place")


class Runs:
    """The server's runs, bounded as a whole whatever client ids are sent, and each client's
    run (at most one: a newer request of a client ends its older one, running or queued).

    A request is admitted to run when fewer than `max_runs` run and the engine memory they are
    accounted for (each run's estimate, :func:`run_memory`) leaves room for its own under
    `max_memory`; otherwise it waits in a queue of at most `max_queue`, first come first served,
    or is refused with 503 and ``Retry-After``. A request that replaces its client's older one
    keeps that one's place, even in a full queue: the queue holds at most `max_queue` +
    `max_runs` (a running request's replacement waits for its memory to be released). At most
    :attr:`max_preparing` more requests may be read and checked at once (:meth:`preparing`).
    A run's memory is released when its engine call has returned, however it ends (done,
    error, cancelled, its client gone).

    Every method but :meth:`cancel_all` runs on the event loop's thread (a signal handler asks
    for :meth:`stop` through ``loop.call_soon_threadsafe``).
    """

    def __init__(self, max_runs: int = 1, max_memory: float = MAX_MEMORY, max_queue: int = 4,
                 cancel: Any = None) -> None:
        self.max_runs, self.max_memory, self.max_queue = max_runs, float(max_memory), max_queue
        self._cancel = cancel or _dynosim.cancel
        self._tokens = itertools.count(secrets.randbelow(1 << 40) + 1)
        self._order = itertools.count()
        self._by_client: Dict[str, int] = {}
        self._place: Dict[int, int] = {}  # token -> its place in line (smaller first)
        self._heirs: set = set()  # tokens that replace a client's older request, running or queued
        self._running: Dict[int, float] = {}  # token -> its memory
        self._waiting: Dict[int, Tuple[float, "asyncio.Future[None]"]] = {}
        self._ended: Dict[int, str] = {}
        self._seconds: Deque[float] = collections.deque(maxlen=20)
        self._preparing = 0
        #: Requests read and checked at once (a few milliseconds each, a body of at most
        #: MAX_BODY): generous, so that a burst is not refused before the queue is asked.
        self.max_preparing = max(32, 2 * (max_runs + max_queue))
        self.memory = 0.0
        self.peak_memory = 0.0
        self.peak_runs = 0
        self.peak_queued = 0
        self.busy = 0  # requests answered 503 for want of room
        self.stopping = False
        self.loop: Optional[asyncio.AbstractEventLoop] = None

    # --- a client's request ---

    def start(self, client: str) -> int:
        """A new request of `client`: its token (the engine's cancel token); the client's older
        request, if any, is ended (its place in line goes to this one)."""
        token = next(self._tokens)
        old = self._by_client.get(client)
        self._by_client[client] = token
        if old is not None and (old in self._running or old in self._waiting):
            self._place[token] = self._place[old]
            self._heirs.add(token)
            self.end(old, "newer")
        else:
            if old is not None:
                self.end(old, "newer")
            self._place[token] = next(self._order)
        return token

    def end(self, token: int, why: str) -> None:
        """Ends a request: a queued one leaves the queue, a running one's engine run is
        cancelled (its memory is released when the engine has stopped, in :meth:`done`)."""
        if token in self._ended:
            return
        self._ended[token] = why
        if token in self._waiting:
            _, waiter = self._waiting.pop(token)
            if not waiter.done():
                waiter.set_result(None)
            self._pump()
        elif token in self._running:
            self._cancel(token)

    def why(self, token: int) -> str:
        """Why a request's run was cancelled (see :class:`Ended`)."""
        return self._ended.get(token, "stopping" if self.stopping else "newer")

    def check(self, need: float) -> None:
        """Refuses (400) a run whose `need` alone is over the limit: it would never run."""
        if need > self.max_memory:  # a run's replications fit its run.max_memory, capped: its trace may not
            raise Refused(400, f"this run needs about {need / 1e6:,.0f} MB of engine state, more than the "
                               f"{self.max_memory / 1e6:,.0f} MB this server runs at once (dynosim serve "
                               "--max-memory): fewer dynos or a smaller run.max_waiting", key="fleet.dynos")

    async def admit(self, token: int, need: float) -> None:
        """Returns when the request may run, its `need` (bytes) accounted for; raises Refused
        (503) when the queue is full or the server stops, Ended when it was ended meanwhile."""
        if token in self._ended:
            raise Ended(self._ended[token])
        if self.stopping:
            raise Ended("stopping")
        self.check(need)
        self._waiting[token] = (need, asyncio.get_running_loop().create_future())
        self._pump()
        if token in self._running:
            return
        if len(self._waiting) > self.max_queue and token not in self._heirs:
            del self._waiting[token]
            self.busy += 1
            wait = self.retry_after()
            raise Refused(503, f"the playground is busy: {len(self._running)} running and {len(self._waiting)} "
                               f"waiting, as many as its limits allow (--max-runs {self.max_runs}, --max-memory "
                               f"{self.max_memory / 1e6:,.0f}MB, --max-queue {self.max_queue}); try again in "
                               f"{wait} s", retry_after=wait)
        self.peak_queued = max(self.peak_queued, len(self._waiting))
        waiter = self._waiting[token][1]
        try:
            await waiter
        finally:
            if token in self._waiting and self._waiting[token][1] is waiter:  # its task was cancelled
                del self._waiting[token]
                self._pump()
        if token in self._ended:
            raise Ended(self._ended[token])

    def done(self, client: str, token: int, seconds: Optional[float] = None) -> None:
        """The request has its answer (or its client is gone): its memory is released, its
        place given up, and the queue moves on."""
        if token in self._running:
            self.memory -= self._running.pop(token)
            if not self._running:
                self.memory = 0.0  # no rounding drift when idle
        if token in self._waiting:
            _, waiter = self._waiting.pop(token)
            waiter.cancel()
        if self._by_client.get(client) == token:
            del self._by_client[client]
        if seconds is not None:
            self._seconds.append(seconds)
        self._place.pop(token, None)
        self._heirs.discard(token)
        self._ended.pop(token, None)
        _dynosim.forget_token(token)
        self._pump()

    def _pump(self) -> None:
        """Admits the queue's first requests while they fit (first come, first served: a large
        request at the head is not overtaken, so it is not starved by small ones)."""
        if self.stopping:
            return
        for token in sorted(self._waiting, key=self._place.__getitem__):
            need, waiter = self._waiting[token]
            if len(self._running) >= self.max_runs or self.memory + need > self.max_memory:
                break
            del self._waiting[token]
            self._running[token] = need
            self.memory += need
            self.peak_memory = max(self.peak_memory, self.memory)
            self.peak_runs = max(self.peak_runs, len(self._running))
            if not waiter.done():
                waiter.set_result(None)

    # --- the server ---

    def preparing(self) -> "Preparing":
        """A request being read and checked before it asks for its place (at most
        :attr:`max_preparing` at once; 503 beyond)."""
        return Preparing(self)

    def retry_after(self) -> int:
        """Seconds a refused request had better wait: the queue's runs at the recent pace."""
        if not self._seconds:
            return 5
        mean = sum(self._seconds) / len(self._seconds)
        return int(min(120, max(1, math.ceil(mean * (len(self._waiting) + 1) / self.max_runs))))

    def position(self, client: str) -> Optional[int]:
        """The place (1 for the next to run) of the client's queued request, or None."""
        token = self._by_client.get(client)
        if token is None or token not in self._waiting:
            return None
        mine = self._place[token]
        return 1 + sum(1 for t in self._waiting if self._place[t] < mine)

    def status(self, client: Optional[str] = None) -> Dict[str, Any]:
        """What ``GET /api/status`` answers: the load, the limits, the peaks since the start,
        the requests refused for want of room, and the client's place in the queue."""
        out: Dict[str, Any] = {"runs": len(self._running), "queued": len(self._waiting), "memory": self.memory,
               "max_runs": self.max_runs, "max_memory": self.max_memory, "max_queue": self.max_queue,
               "peak_memory": self.peak_memory, "peak_runs": self.peak_runs, "peak_queued": self.peak_queued,
               "busy": self.busy, "stopping": self.stopping}
        if client is not None:
            out["position"] = self.position(client)
        return out

    def stop(self) -> None:
        """The server is stopping: every queued request is refused, every run cancelled, and
        new ones refused."""
        self.stopping = True
        for token in list(self._waiting) + list(self._running):
            self.end(token, "stopping")

    def cancel_all(self) -> None:
        """Cancels every engine run (from any thread: the flags are the engine's, and the copy
        of the keys is taken at once)."""
        for t in list(self._running):
            self._cancel(t)


class Preparing:
    """``with runs.preparing():`` around reading and checking a request (see
    :meth:`Runs.preparing`)."""

    def __init__(self, runs: Runs):
        self.runs = runs

    def __enter__(self) -> None:
        runs = self.runs
        if runs.stopping:
            raise Ended("stopping")
        if runs._preparing >= runs.max_preparing:
            runs.busy += 1
            raise Refused(503, "the playground is busy reading other requests; try again shortly",
                          retry_after=runs.retry_after())
        runs._preparing += 1

    def __exit__(self, *exc: Any) -> None:
        self.runs._preparing -= 1


def run_for_page(scenario: Scenario, policies: Sequence[str], token: int,
                 max_memory: float = MAX_MEMORY) -> Dict[str, Any]:
    """Runs the scenario on this thread (cancellable with `token`), and what the page shows."""
    from .api import run as run_scenario

    _dynosim.set_cancel_token(token)
    try:
        started = time.monotonic()
        cases = each_run(scenario, max_memory)
        results = [(label, run_scenario(case, policies=list(policies) or None, warn=False)) for label, case in cases]
        warnings = []
        for label, case in cases:
            for policy in policies or case.policies:
                w = case.for_policy(policy).steady_state_warning()
                if w:
                    warnings.append((f"{label}: " if label else "") + f"{policy}: {w}")
        doc = run_report(scenario, results, command="dynosim serve", title=scenario.name, policies=policies or None,
                         warnings=warnings)
        seconds = time.monotonic() - started
    finally:
        _dynosim.set_cancel_token(0)
    body, plots = html_report.sections_html(doc["sections"][1:])
    values = {c["key"]: _lookup(scenario.doc, c["key"]) for c in CONTROLS}
    values["router.policy"] = ",".join(policies or scenario.policies)
    return {"toml": toml_text(scenario.doc), "words": html_report.scenario_words(scenario, policies or None), "html": body,
            "plots": plots, "seconds": seconds, "values": values, "document": doc}


def _lookup(doc: Dict[str, Any], key: str) -> Any:
    """The value at a key path, or None (a table or list is shown as nothing)."""
    node: Any = doc
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, (str, int, float, bool)) else None


# --- the app ---------------------------------------------------------------------------------


def default_max_runs() -> int:
    """``--max-runs`` by default: the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_max_memory() -> float:
    """``--max-memory`` by default: half the machine's memory (2 GB where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2
    except (AttributeError, ValueError, OSError):
        return 2e9


def make_app(data: Optional[Path] = None, initial: Optional[str] = None, *, max_runs: Optional[int] = None,
             max_memory: Optional[float] = None, max_queue: Optional[int] = None) -> Any:
    """The Starlette app (tested with its TestClient); the page opens on `initial`: a built-in
    scenario's name or a scenario file (its TOML is sent to the page), else rapgenius. The
    server's limits as a whole (:class:`Runs`): `max_runs` engine runs at once (default: the
    cores), `max_memory` bytes of their engine state (default: half the machine's memory),
    `max_queue` requests waiting (default: 4 × `max_runs`)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route
    from starlette.concurrency import run_in_threadpool

    web = html_report.WEB
    runs_at_once = max_runs if max_runs is not None else default_max_runs()
    runs = Runs(runs_at_once, max_memory if max_memory is not None else default_max_memory(),
                max_queue if max_queue is not None else 4 * runs_at_once)
    names = path_keys()
    start: Dict[str, Any] = {"name": initial or "rapgenius", "toml": None}
    if initial is not None and initial not in builtin_scenarios():
        path = Path(initial)
        try:
            start = {"name": "", "toml": path.read_text(encoding="utf-8")}
        except (OSError, UnicodeDecodeError) as e:
            raise ScenarioError(f"cannot read the scenario: {e}", file=str(path)) from None
        Scenario.load(str(path)).validate()  # its mistakes are the CLI's one line, before serving

    async def page(request: Request) -> Response:
        return HTMLResponse((web / "playground.html").read_text(encoding="utf-8"), headers=_headers())

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return JSONResponse({"error": f"no such file: {name}"}, status_code=404)
        return Response((web / name).read_bytes(), media_type=STATIC[name], headers=_headers())

    async def scenarios(request: Request) -> Response:
        folder = resources.files("dynosim").joinpath("scenarios")
        builtins = [{"name": name, "description": description,
                     "toml": folder.joinpath(f"{name}.toml").read_text(encoding="utf-8")}
                    for name, description in sorted(builtin_scenarios().items())]
        registry = _dynosim.registry()
        return JSONResponse({"scenarios": builtins, "policies": registry["policies"],
                             "dyno_types": registry["dyno_types"], "autoscalers": registry["autoscalers"],
                             "controls": CONTROLS, "initial": start,
                             "max_body": MAX_BODY}, headers=_headers())

    async def body_of(request: Request) -> Any:
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > MAX_BODY):
            raise Refused(413, f"the request is larger than {MAX_BODY // 1024} KiB")
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                raise Refused(413, f"the request is larger than {MAX_BODY // 1024} KiB")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise Refused(400, f"expected a JSON body: {e}") from None

    def client_of(request: Request) -> str:
        """The client's label (the page's id; else its address): which older run a request
        replaces, never a budget of its own."""
        return (request.headers.get("x-dynosim-client") or (request.client.host if request.client else "?"))[:64]

    async def run_request(request: Request) -> Dict[str, Any]:
        with runs.preparing():
            body = await body_of(request)
            scenario, policies = await run_in_threadpool(scenario_from_page, body, data, names, runs.max_memory)
            need = await run_in_threadpool(run_memory, scenario, policies, runs.max_memory)
            runs.check(need)  # before it replaces the client's older run
        client = client_of(request)
        token = runs.start(client)
        seconds = None
        work = asyncio.ensure_future(admitted_run(token, need, scenario, policies))
        gone = asyncio.ensure_future(disconnected(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():  # its client left: the run is cancelled, or its place given up
                runs.end(token, "gone")
            out = await work
            seconds = out["seconds"]
            return out
        except asyncio.CancelledError:  # this request's task itself (the server going down)
            runs.end(token, "stopping")
            raise
        finally:
            gone.cancel()
            runs.done(client, token, seconds)

    async def admitted_run(token: int, need: float, scenario: Scenario, policies: List[str]) -> Dict[str, Any]:
        try:
            await runs.admit(token, need)
            return await run_in_threadpool(run_for_page, scenario, policies, token, runs.max_memory)
        except KeyboardInterrupt:  # the engine's "interrupted": its token was cancelled
            raise Ended(runs.why(token)).refused() from None
        except Ended as e:
            raise e.refused() from None
        except DynosimError as e:  # found only when running (an overload, say)
            raise Refused(400, str(e), key=getattr(e, "path", None)) from None

    async def disconnected(request: Request) -> None:
        """Returns when the client has closed its connection (its body has been read)."""
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return
            await asyncio.sleep(0.05)  # not a message for this request: do not spin

    async def answer(request: Request) -> Any:
        try:
            return await run_request(request)
        except Ended as e:
            return e.refused()
        except Refused as e:
            return e

    async def api_run(request: Request) -> Response:
        out = await answer(request)
        if isinstance(out, Refused):
            return JSONResponse(out.body(), status_code=out.status, headers={**_headers(), **out.headers()})
        out.pop("document")
        return JSONResponse(finite(out), headers=_headers())

    async def api_report(request: Request) -> Response:
        out = await answer(request)
        if isinstance(out, Refused):
            return JSONResponse(out.body(), status_code=out.status, headers={**_headers(), **out.headers()})
        text = html_report.render(out["document"])
        return HTMLResponse(text, headers={**_headers(), "Content-Disposition": 'attachment; filename="report.html"'})

    async def api_status(request: Request) -> Response:
        client = request.headers.get("x-dynosim-client")
        return JSONResponse(runs.status(client[:64] if client else None), headers=_headers())

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"{request.method} is not allowed here"}, status_code=405)

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": "not found"}, status_code=404)

    app = Starlette(routes=[
        Route("/", page, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route("/api/scenarios", scenarios, methods=["GET"]),
        Route("/api/run", api_run, methods=["POST"]),
        Route("/api/report", api_report, methods=["POST"]),
        Route("/api/status", api_status, methods=["GET"]),
    ], exception_handlers={405: not_allowed, 404: not_found})
    app.state.runs = runs
    return app


def _headers() -> Dict[str, str]:
    """Every answer: the page may load only from this server, and nothing is cached."""
    return {"Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'",
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def serve(host: str, port: int, data: Optional[Path], *, initial: Optional[str] = None, on_ready: Any = None,
          max_runs: Optional[int] = None, max_memory: Optional[float] = None,
          max_queue: Optional[int] = None) -> None:
    """Runs the server until Ctrl-C (or SIGTERM); as it stops, its queued requests are refused
    and its runs cancelled (each answered 503), rather than waited for."""
    import uvicorn

    app = make_app(data, initial, max_runs=max_runs, max_memory=max_memory, max_queue=max_queue)
    runs: Runs = app.state.runs
    # Connections at once, a bound for what the limits on runs do not see (the page's files,
    # /api/status); uvicorn answers 503 beyond it.
    connections = max(100, 4 * (runs.max_runs + runs.max_queue))
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off",
                            limit_concurrency=connections)
    server = uvicorn.Server(config)
    original_startup, original_exit = server.startup, server.handle_exit

    async def startup(sockets: Any = None) -> None:
        runs.loop = asyncio.get_running_loop()
        await original_startup(sockets)
        if on_ready is not None:
            on_ready(server)

    def handle_exit(sig: int, frame: Any) -> None:
        # The signal handler runs between two steps of the loop: it only asks the loop to stop
        # the runs (uvicorn waits for the requests in progress, which then answer at once).
        original_exit(sig, frame)
        if runs.loop is not None and not runs.loop.is_closed():
            runs.loop.call_soon_threadsafe(runs.stop)

    server.startup = startup  # type: ignore[method-assign]
    server.handle_exit = handle_exit  # type: ignore[method-assign]
    try:
        asyncio.run(server.serve())
    finally:
        runs.cancel_all()
