"""The testbed's app: a WSGI app that performs each request's phases for real.

gunicorn loads it (``dynosim.testbed.app:app``) in every worker of every dyno. The load
generator passes the times the simulator drew for the request in ``X-Dynosim-Phases``::

    X-Dynosim-Phases: cpu:0.012,use=db:0.030,io:0.005

and the app does each in turn:

- ``cpu:T`` computes in the interpreter until its thread has used T seconds of CPU
  (``time.thread_time``), so the interpreter lock, the other threads and processes of the dyno
  and the cores it is pinned to stretch it as they would stretch real work;
- ``io:T`` and ``hold:T`` sleep T seconds (gevent's sleep under gevent workers): a wait that
  uses no CPU;
- ``use=R:T`` takes a connection to PostgreSQL from resource R's pool for this process, and
  runs ``SELECT pg_sleep(T)`` on it (or, in ``burn`` mode, a query that keeps one of the
  database's cores busy for T seconds), then gives the connection back;
- ``mem:B`` allocates B bytes, in pieces of 1 to 32 KiB (random sizes, every byte written so
  that it is resident), and holds them until the request's last phase is done; ``keep:F``
  keeps a share F of the pieces this request allocated past its end, in a cache of the
  worker process that holds at most 1024 pieces (a random one is dropped to make room). The
  pieces are Python ``bytearray`` objects: above CPython's small-object limit (512 bytes),
  so they come from glibc's malloc, in the arena of the thread serving the request, as the
  strings and arrays of a Ruby or Python app do (``dynosim testbed replay --alloc``;
  docs/testbed.md says what is assumed).

It answers 200 with headers saying what happened: ``X-Dynosim-Start`` and ``X-Dynosim-End``
(wall clock, Unix seconds: when the app began and finished the request's work),
``X-Dynosim-Dyno``, ``X-Dynosim-Pid``, ``X-Dynosim-Rss`` (the process's resident memory,
bytes), ``X-Dynosim-Cpu`` (CPU seconds the thread used in the phases), ``X-Dynosim-Pool-Wait``
(seconds spent waiting for pool connections), ``X-Dynosim-Request-Start`` (the router's
``X-Request-Start``, echoed), ``X-Dynosim-Phase-Wall`` (the wall time of each phase, seconds,
comma-separated in the phases' order) and ``X-Dynosim-Proc-Cpu`` (the worker process's CPU
time, user + system, all its threads, read last thing before answering: between two of a
process's requests it grows by the requests' own CPU and the app server's, which is how the
testbed measures the server's CPU per request, :func:`dynosim.testbed.measure.server_cpu`).

The headers reach the client only when the request is answered by the app. A request the
router has already answered with an error (a 504 at ``timeout server``), or whose worker was
killed, brings nothing back, yet the dyno may still have worked on it. So the app also writes
its own log, one file per worker process in ``work_dir``: ``s ID T`` when it begins a
request's work and ``e ID T`` when it ends it (``ID`` the load generator's ``X-Dynosim-Id``,
``T`` wall-clock Unix seconds; just before ``s``, ``q ID T`` with T the request's
``X-Request-Start`` when the router stamped one: the autoscaled fleet reads queue times from
it while the run goes on), each line one unbuffered ``write`` to a file opened for
appending, so that a line is whole even if the worker is killed right after.

**Faults** (``[[faults]]``): the testbed writes, just before the load starts, the faults'
windows in wall-clock time to ``faults_file`` (JSON: ``[{"from": T, "until": T, "kind":
"slowdown" | "refuse" | "hang", "factor": F, "target": "app" or a resource}]``), and the app
reads the file again whenever it changes. As the simulation's work that begins in a window:
a slowdown stretches a phase that begins inside it ``factor`` times (the app's own phases,
``cpu``, ``io``, ``hold``, for ``"app"``; a resource's queries, ``use``, for its name); an
outage that refuses answers a request taken inside it (``"app"``), or one whose query begins
inside it (a resource), ``500`` with ``X-Dynosim-Outage: 1``, and one that hangs holds the
request (or the query, below) until the window's end, then does its work.

**A resource's timeout and retries** (``timeout``, seconds, and ``retries`` in a resource's
configuration): ``SET statement_timeout`` on each of its connections, so that PostgreSQL
cancels a query running longer; the app tries a cancelled or refused query again at once on
the same connection, up to ``retries`` times, and then answers ``500`` with
``X-Dynosim-Resource-Timeout: 1`` (or ``X-Dynosim-Outage: 1``). Every answer says how many
retries its queries took in ``X-Dynosim-App-Retries``. An outage of a resource that hangs is
held by the database: the statement sleeps the rest of the window before its work, inside
its timeout.

**app.wait_timeout** (``wait_timeout`` in the configuration, seconds), as Rack::Timeout's:
a request older than it by its ``X-Request-Start`` when a worker takes it is answered ``503``
at once with ``X-Dynosim-Expired: 1``, unserved (nothing in the work log).

**app.service_timeout** (``service_timeout`` in the configuration, seconds), as
Rack::Timeout's: a request's work stops once the worker has had it this long (a ``cpu``
phase stops computing, an ``io`` or ``hold`` phase stops sleeping, a query in flight runs to
its end first), and the app answers ``500`` with ``X-Dynosim-Service-Timeout: 1``, the worker
free for the next request (its work log ends the request then).

**Calls to other services** (docs/testbed.md, "Services that call services"): a phase
``call=NAME;timeout=T;retries=K:0`` is an HTTP GET to service NAME's HAProxy on loopback (its
port in the configuration's ``services``), a fresh connection per try with T as its socket
timeout, tried again at once after a 5xx, no answer or the timeout, up to K more times; a
phase ``fanout=NAME;count=N;wait=W:0`` sends N such calls at once from the worker's thread
pool and ends when W of them (``all``, ``first`` or a number) have answered. Each call's drawn
work comes in ``X-Dynosim-Calls`` (each call's phases, ``|`` between calls, in order), its id
at the service the request's, then the service and the call's place (``12-api0``, a retry
``12-api0.r1``, a fan-out's ``12-search0.3``). A call that fails its last try (or a fan-out
that can no longer get W answers) fails the request: ``500`` with ``X-Dynosim-Call-Failed``
(the simulation's ``errors.call_failed``). With ``;hedge=T`` (a fan-out's ``hedge = T``), T
seconds after the calls were sent each one still unanswered gets a second copy through the
service's HAProxy (id ``12-search0.3.h``, its own drawn work: the request carries two per call),
the first answer of the two wins and the other runs on for nobody (:func:`run_hedged`); the
answer says how many copies the request sent in ``X-Dynosim-Hedged``.

Its configuration comes in the environment, as JSON in ``DYNOSIM_TESTBED`` (written by
:mod:`dynosim.testbed.dynos`): ``{"dyno": 0, "dsn": "...", "resources": {"db": {"pool": 3,
"mode": "sleep", "burn_rate": 0}}, "ready_dir": "...", "work_dir": "...", "faults_file":
"..."}``. This module
imports nothing of dynosim's own, so a worker stays small and boots fast.
"""

from __future__ import annotations

import json
import math
import os
import queue
import random
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

Phase = Tuple[str, str, float]  # (kind, resource or "", seconds)

_CONFIG: Dict[str, Any] = json.loads(os.environ.get("DYNOSIM_TESTBED", "{}"))
_DYNO = str(_CONFIG.get("dyno", 0))
_PAGE = os.sysconf("SC_PAGE_SIZE")

#: ``mem:B``: the most one request may allocate, and the sizes of its pieces (all below
#: glibc's 128 KiB mmap threshold, so that they come from the thread's arena).
MAX_ALLOC = 256 * 1024 * 1024
PIECE_MIN, PIECE_MAX = 1024, 32 * 1024
#: ``keep:F``: the pieces a worker process keeps past their requests, at most.
KEPT_MAX = 1024


def parse_phases(text: str) -> List[Phase]:
    """``cpu:0.01,use=db:0.02`` → [("cpu", "", 0.01), ("use", "db", 0.02)]."""
    phases: List[Phase] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, _, seconds = item.rpartition(":")
        resource = ""
        if kind.startswith("use="):
            kind, resource = "use", kind[4:]
        elif kind.startswith(("call=", "fanout=")):
            # A call to another service: its name and settings (parse_call), no time of its own.
            kind, _, resource = kind.partition("=")
            parse_call(kind, resource)
            phases.append((kind, resource, 0.0))
            continue
        if kind not in ("cpu", "io", "hold", "use", "mem", "keep") or (kind == "use" and not resource):
            raise ValueError(f"unknown phase {item!r}")
        value = float(seconds)
        if not value >= 0:
            raise ValueError(f"phase {item!r}: the time must be a number >= 0")
        if kind == "mem" and not (value.is_integer() and value <= MAX_ALLOC):
            raise ValueError(f"phase {item!r}: the size must be whole bytes, at most {MAX_ALLOC}")
        if kind == "keep" and value > 1:
            raise ValueError(f"phase {item!r}: the share kept must be between 0 and 1")
        phases.append((kind, resource, value))
    return phases


def parse_call(kind: str, text: str) -> Dict[str, Any]:
    """A call phase's settings, ``api;timeout=2;retries=1`` or ``search;count=4;wait=all``:
    {"service", "count", "need" (the answers the phase waits for), "timeout" (s or None),
    "retries"}; ValueError for anything else."""
    name, *items = text.split(";")
    out: Dict[str, Any] = {"kind": kind, "service": name, "count": 1, "wait": "all", "timeout": None, "retries": 0,
                           "hedge": None}
    if not name:
        raise ValueError(f"{kind} phase without a service")
    for item in items:
        key, _, value = item.partition("=")
        if key == "count":
            out["count"] = int(value)
        elif key == "wait":
            out["wait"] = value
        elif key == "timeout":
            out["timeout"] = float(value)
        elif key == "retries":
            out["retries"] = int(value)
        elif key == "hedge" and kind == "fanout":
            out["hedge"] = float(value)
        else:
            raise ValueError(f"{kind} phase: unknown setting {item!r}")
    if out["count"] < 1 or out["retries"] < 0 or (out["timeout"] is not None and not out["timeout"] > 0) \
            or (out["hedge"] is not None and not out["hedge"] > 0):
        raise ValueError(f"{kind} phase {text!r}: count >= 1, retries >= 0, a timeout > 0 and a hedge > 0 expected")
    wait = out["wait"]
    out["need"] = out["count"] if wait == "all" else 1 if wait == "first" else min(int(wait), out["count"])
    # The drawn works the phase carries: a hedged fan-out's calls each one more, for its copy.
    out["draws"] = out["count"] * (2 if out["hedge"] is not None else 1)
    return out


class CallFailed(Exception):
    """A call's last try failed (an error status, no answer, its timeout), or a fan-out can no
    longer get the answers it waits for: the app answers 500 (errors.call_failed)."""


#: Between a call's phases and its own calls' works, percent-encoded (services.SUBCALLS).
SUBCALLS = "~"
#: The services this app calls: name → its HAProxy's port on loopback.
_SERVICES: Dict[str, int] = {k: int(v) for k, v in (_CONFIG.get("services") or {}).items()}
#: A call's socket timeout when its phase gives none, s.
_CALL_TIMEOUT: Optional[float] = _CONFIG.get("call_timeout")
_POOL: Any = None
_POOL_LOCK = threading.Lock()


def call_once(service: str, work: str, call_id: str, timeout: Optional[float], retries: int) -> bool:
    """One call: an HTTP GET to the service's HAProxy on loopback, a fresh connection per try,
    its socket timeout `timeout`; tried again at once after an error status (5xx), a failed
    connection or the timeout, up to `retries` more times, each try sending the same drawn
    work. Whether it was answered."""
    import http.client

    from urllib.parse import unquote

    port = _SERVICES.get(service)
    if port is None:
        raise ValueError(f"no service {service!r} in this testbed")
    # A service that calls services: its request's own calls' works after SUBCALLS.
    phases, _, subcalls = work.partition(SUBCALLS)
    headers = {"X-Dynosim-Phases": phases}
    if subcalls:
        headers["X-Dynosim-Calls"] = unquote(subcalls)
    for attempt in range(retries + 1):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout or _CALL_TIMEOUT)
        try:
            conn.request("GET", f"/{service}", headers=dict(
                headers, **{"X-Dynosim-Id": call_id if not attempt else f"{call_id}.r{attempt}"}))
            response = conn.getresponse()
            response.read()
            if response.status < 500:
                return True
        except (OSError, http.client.HTTPException):
            pass  # refused, reset or timed out: the next try
        finally:
            conn.close()
    return False


def run_call(spec: Dict[str, Any], works: List[str], call_id: str) -> int:
    """A ``call`` or ``fanout`` phase: `works` the drawn work of each of its calls (a hedged
    fan-out's: then each copy's). A fan-out sends them at once from the worker's thread pool
    (ids ending ``.j``, a fan-out of one call too: its width may be drawn) and ends when
    ``need`` have answered (the others run on, for nobody); raises CallFailed
    when that can no longer happen. Returns the hedged copies sent (:func:`run_hedged`)."""
    if len(works) != spec["draws"]:
        raise ValueError(f"{spec['service']}: {spec['draws']} drawn work(s) expected, {len(works)} in the request")
    if spec["hedge"] is not None:
        return run_hedged(spec, works, call_id)
    if spec.get("kind") == "call":
        if not call_once(spec["service"], works[0], call_id, spec["timeout"], spec["retries"]):
            raise CallFailed(spec["service"])
        return 0
    import concurrent.futures as cf

    futures = [_pool().submit(call_once, spec["service"], work, f"{call_id}.{j}", spec["timeout"], spec["retries"])
               for j, work in enumerate(works)]
    answered = failed = 0
    for future in cf.as_completed(futures):
        if future.result():
            answered += 1
            if answered >= spec["need"]:
                return 0
        else:
            failed += 1
            if failed > spec["count"] - spec["need"]:
                raise CallFailed(spec["service"])
    return 0


def _pool() -> Any:
    """The worker process's thread pool for fan-outs' calls (made on first use)."""
    global _POOL
    import concurrent.futures as cf

    with _POOL_LOCK:
        if _POOL is None:
            _POOL = cf.ThreadPoolExecutor(max_workers=64, thread_name_prefix="dynosim-call")
    return _POOL


#: The id suffix of a hedged call's second copy (services.HEDGE_SUFFIX, which the testbed's
#: figures read: this module imports nothing of dynosim's).
HEDGE_SUFFIX = ".h"


def run_hedged(spec: Dict[str, Any], works: List[str], call_id: str) -> int:
    """A hedged fan-out (docs/services.md, "Hedging", as simulated): its ``count`` calls at
    once (works[:count]); one timer for the fan-out: ``hedge`` seconds after they were sent,
    each call still without its answer gets a second copy (works[count + j], id ``....j.h``),
    sent to the service's HAProxy as the first was (its policy picks the dyno); the first
    answer of a call's two copies is its answer, the other runs on, not cancelled (its thread
    reads the answer, for nobody). An error answer of one copy while the other is out does
    not fail the call; it fails when both have failed, or when its only copy fails before the
    timer. No copies once the phase is over. Returns the copies sent."""
    import concurrent.futures as cf

    count, need, service = spec["count"], spec["need"], spec["service"]
    pool = _pool()

    def timed(work: str, call: str) -> Tuple[bool, float]:
        # When the answer came: a call answered after the timer was unanswered at it, however
        # late this thread wakes to see either.
        return call_once(service, work, call, None, 0), time.monotonic()

    sent = time.monotonic()
    out: Dict[Any, int] = {}  # future -> its call
    for j in range(count):
        out[pool.submit(timed, works[j], f"{call_id}.{j}")] = j
    copies = [1] * count  # copies of each call sent
    lost = [0] * count  # copies of each call failed
    done = [False] * count
    answered = failed = hedged = 0
    timer: Optional[float] = sent + spec["hedge"]
    pending = set(out)

    def hedge() -> None:
        nonlocal hedged
        for j in range(count):
            if not done[j]:
                copies[j] = 2
                hedged += 1
                future = pool.submit(timed, works[count + j], f"{call_id}.{j}{HEDGE_SUFFIX}")
                out[future] = j
                pending.add(future)

    while True:
        if not pending and timer is None:
            raise CallFailed(service)  # not reached: every call answers or fails
        wait_for = None if timer is None else max(0.0, timer - time.monotonic())
        finished, pending = cf.wait(pending, timeout=wait_for, return_when=cf.FIRST_COMPLETED)
        for future in sorted(finished, key=lambda f: f.result()[1]):
            ok, when = future.result()
            if timer is not None and when >= timer:
                timer = None
                hedge()
            j = out[future]
            if done[j]:
                continue  # the call's other copy answered first, or it has failed
            if ok:
                done[j] = True
                answered += 1
                if answered >= need:
                    return hedged
            else:
                lost[j] += 1
                # Failed: both copies, or its only one before the timer (a hedge is no retry).
                if lost[j] == copies[j]:
                    done[j] = True
                    failed += 1
                    if failed > count - need:
                        raise CallFailed(service)
        if timer is not None and time.monotonic() >= timer:
            timer = None
            hedge()


def burn_cpu(seconds: float, deadline: float = math.inf) -> None:
    """Computes until this thread has used `seconds` of CPU time, or until the wall clock
    reaches `deadline` (the request's service_timeout), whichever comes first."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end and time.time() < deadline:
        for i in range(256):
            x ^= i


class Pool:
    """A resource's connections in this process: at most `size` open at once (None: as many as
    requests need), handed out first come, first served, kept open between requests."""

    def __init__(self, dsn: str, size: Optional[int], statement_timeout: Optional[float] = None) -> None:
        self.dsn = dsn
        self.size = size
        self.statement_timeout = statement_timeout
        self.idle: "queue.Queue[Any]" = queue.Queue()
        self.opened = 0
        self.lock = threading.Lock()

    def _connect(self) -> Any:
        import psycopg  # imported here: only apps with a resource need it

        conn = psycopg.connect(self.dsn, autocommit=True)
        if self.statement_timeout is not None:
            # [resources.NAME] timeout: PostgreSQL stops a statement on this connection after it.
            conn.execute(f"SET statement_timeout = {max(1, round(self.statement_timeout * 1000))}")
        return conn

    def take(self) -> Any:
        try:
            return self.idle.get_nowait()
        except queue.Empty:
            pass
        with self.lock:
            grow = self.size is None or self.opened < self.size
            if grow:
                self.opened += 1
        if grow:
            try:
                return self._connect()
            except BaseException:
                with self.lock:
                    self.opened -= 1
                raise
        return self.idle.get()

    def give(self, conn: Any) -> None:
        self.idle.put(conn)


class ResourceTimeout(Exception):
    """The last try of a query ran into its resource's statement_timeout: the app answers 500."""


class Resource:
    def __init__(self, name: str, dsn: str, spec: Dict[str, Any]) -> None:
        self.name = name
        self.pool = Pool(dsn, spec.get("pool"), spec.get("timeout"))
        self.mode = spec.get("mode", "sleep")
        self.burn_rate = float(spec.get("burn_rate", 0.0))
        #: [resources.NAME] retries: the app tries a failed query again at once, this often.
        self.retries = int(spec.get("retries", 0))

    def _query(self, conn: Any, seconds: float, held: float) -> None:
        """One statement: `held` seconds of an outage that hangs (the database holding the
        query, in its statement_timeout's clock), then the query's own work."""
        if self.mode == "burn":
            units = max(1, round(seconds * self.burn_rate))
            if held > 0:
                conn.execute("SELECT pg_sleep(%s), dynosim_burn(%s)", (held, units))
            else:
                conn.execute("SELECT dynosim_burn(%s)", (units,))
        else:
            conn.execute("SELECT pg_sleep(%s)", (held + seconds,))

    def use(self, seconds: float, tried: Optional[List[int]] = None) -> float:
        """Runs one query holding a connection, trying it again at once after a refusal or its
        statement_timeout, up to `retries` times (each retry appended to `tried`); returns the
        time spent waiting for the connection. Raises Outage or ResourceTimeout when the last
        try fails. Each try's drawn time is the request's (the simulation draws each retry's
        afresh), stretched by a slowdown its try begins in."""
        asked = time.time()
        conn = self.pool.take()
        waited = time.time() - asked
        try:
            for attempt in range(self.retries + 1):
                if attempt:
                    if tried is not None:
                        tried.append(1)
                try:
                    held = gate(self.name, hold=True) if _FAULTS_FILE else 0.0
                    self._query(conn, seconds * (factor(self.name, time.time()) if _FAULTS_FILE else 1.0), held)
                    break
                except Outage:
                    if attempt == self.retries:
                        raise
                except Exception as e:
                    if type(e).__name__ != "QueryCanceled":  # psycopg.errors.QueryCanceled: the timeout
                        raise
                    if attempt == self.retries:
                        raise ResourceTimeout(self.name) from None
        except (Outage, ResourceTimeout):
            self.pool.give(conn)  # the session goes on after a refusal or a cancelled statement
            raise
        except BaseException:
            conn.close()  # a broken connection is not given back
            with self.pool.lock:
                self.pool.opened -= 1
            raise
        self.pool.give(conn)
        return waited


_RESOURCES = {name: Resource(name, _CONFIG.get("dsn", ""), spec)
              for name, spec in (_CONFIG.get("resources") or {}).items()}


# gunicorn imports the app in each worker after forking it, so this is the worker's own file.
_WORK_LOG: Optional[int] = (os.open(os.path.join(_CONFIG["work_dir"], f"{_DYNO}-{os.getpid()}.log"),
                                    os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                            if _CONFIG.get("work_dir") else None)


def _request_start(text: str) -> Optional[float]:
    """X-Request-Start as the router stamps it, ``t=<microseconds since the epoch>``, in
    seconds; None when absent or not that."""
    if not text.startswith("t="):
        return None
    try:
        return int(text[2:]) / 1e6
    except ValueError:
        return None


def _note(mark: str, request: str, when: float) -> None:
    """One line of this worker's work log (see the module's doc); nothing without one or an id."""
    if _WORK_LOG is not None and request:
        os.write(_WORK_LOG, f"{mark} {request} {when:.6f}\n".encode())


_KEPT: List[bytearray] = []
_KEPT_LOCK = threading.Lock()


def allocate(size: int) -> List[bytearray]:
    """`size` bytes in pieces of PIECE_MIN to PIECE_MAX bytes, each written (bytearray fills
    itself with zeros), so that every page is resident."""
    pieces = []
    left = size
    while left > 0:
        piece = min(left, random.randint(PIECE_MIN, PIECE_MAX))
        pieces.append(bytearray(piece))
        left -= piece
    return pieces


def keep(pieces: List[bytearray], share: float) -> None:
    """Keeps each piece with probability `share` in the worker's cache (at most KEPT_MAX
    pieces: a random one is dropped, and freed, to make room)."""
    for piece in pieces:
        if random.random() < share:
            with _KEPT_LOCK:
                if len(_KEPT) >= KEPT_MAX:
                    _KEPT[random.randrange(len(_KEPT))] = piece
                else:
                    _KEPT.append(piece)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


_FAULTS_FILE: Optional[str] = _CONFIG.get("faults_file")
_WAIT_TIMEOUT: Optional[float] = _CONFIG.get("wait_timeout")
#: app.service_timeout, seconds (infinite: none).
_SERVICE_TIMEOUT: float = float(_CONFIG.get("service_timeout") or math.inf)
#: The slowdowns' windows as last read, and the file's modification time then.
_FAULTS: List[Dict[str, Any]] = []
_FAULTS_READ: Optional[int] = None


def slowdowns() -> List[Dict[str, Any]]:
    """The slowdowns' windows (see the module's doc), read again when the file changed."""
    global _FAULTS, _FAULTS_READ
    if not _FAULTS_FILE:
        return _FAULTS
    try:
        stamp = os.stat(_FAULTS_FILE).st_mtime_ns
    except OSError:
        return _FAULTS
    if stamp != _FAULTS_READ:
        try:
            with open(_FAULTS_FILE) as f:
                _FAULTS = list(json.load(f))
            _FAULTS_READ = stamp
        except (OSError, ValueError):
            pass  # being written: the next phase reads it
    return _FAULTS


def factor(target: str, now: float) -> float:
    """What a phase of `target` ("app" or a resource) beginning at `now` (wall clock) takes
    its drawn time times."""
    out = 1.0
    for fault in slowdowns():
        if fault.get("kind", "slowdown") == "slowdown" and fault["target"] == target \
                and fault["from"] <= now < fault["until"]:
            out *= float(fault["factor"])
    return out


class Outage(Exception):
    """An outage refused the request (or its query): the app answers 500."""


def gate(target: str, hold: bool = False) -> float:
    """What an outage of `target` does to work that begins now: raises Outage (it refuses), or
    waits until its end (it hangs), as often as outages follow one another. `hold`: a
    resource's query, which the database holds instead (in its statement's time, so that its
    statement_timeout counts it, as the simulation's): returns how long, without waiting."""
    held = 0.0
    while True:
        now = time.time() + held
        hit = next((f for f in slowdowns() if f.get("kind") in ("refuse", "hang") and f["target"] == target
                    and f["from"] <= now < f["until"]), None)
        if hit is None:
            return held
        if hit["kind"] == "refuse":
            raise Outage(target)
        if hold:
            held += max(0.0, float(hit["until"]) - now)
        else:
            time.sleep(max(0.0, float(hit["until"]) - now))


class ServiceTimeout(Exception):
    """The request ran to its service_timeout: the app stops its work and answers 500."""


def perform(phases: List[Phase], walls: Optional[List[float]] = None,
            tried: Optional[List[int]] = None, deadline: float = math.inf, calls: Optional[List[str]] = None,
            request: str = "", hedges: Optional[List[int]] = None) -> Tuple[float, float]:
    """Does the phases; returns (CPU seconds this thread used, seconds waited for pools).
    `walls`, when given, gets each phase's wall time appended, in order; `tried` one item per
    retry of a query (Resource.use). At `deadline` (wall clock: app.service_timeout after the
    worker took the request) the work stops and ServiceTimeout is raised: a ``cpu`` phase
    stops computing, an ``io`` or ``hold`` phase stops sleeping, and no phase begins after it;
    a query in flight (``use``) runs to its end first (the simulation frees the thread at once
    and lets the query run on). `calls`: the drawn work of each call the ``call`` and
    ``fanout`` phases send, in order (run_call), `request` the request's id, which its calls'
    ids begin with; `hedges` gets the hedged copies each call phase sent appended."""
    cpu0 = time.thread_time()
    works = list(calls or [])
    sent = 0
    pool_wait = 0.0
    held: List[bytearray] = []
    share = 0.0
    for kind, resource, seconds in phases:
        if time.time() >= deadline:
            raise ServiceTimeout()
        began = time.perf_counter()
        if _FAULTS_FILE and kind in ("cpu", "io", "hold"):
            seconds *= factor("app", time.time())
        if kind == "cpu":
            burn_cpu(seconds, deadline)
        elif kind in ("call", "fanout"):
            spec = parse_call(kind, resource)
            copies = run_call(spec, works[sent:sent + spec["draws"]], f"{request}-{spec['service']}{sent}")
            if hedges is not None:
                hedges.append(copies)
            sent += spec["draws"]
        elif kind == "use":
            if resource not in _RESOURCES:
                raise ValueError(f"no resource {resource!r} in this testbed")
            # Its outages and slowdowns, each try's (Resource.use).
            pool_wait += _RESOURCES[resource].use(seconds, tried)
        elif kind == "mem":
            held += allocate(int(seconds))
        elif kind == "keep":
            share = seconds
        elif seconds > deadline - time.time():
            time.sleep(max(0.0, deadline - time.time()))
            raise ServiceTimeout()
        else:
            time.sleep(seconds)
        if walls is not None:
            walls.append(time.perf_counter() - began)
        if kind == "cpu" and time.time() >= deadline:
            raise ServiceTimeout()
    if share > 0:
        keep(held, share)
    del held  # the rest is freed here, by the thread that allocated it
    return time.thread_time() - cpu0, pool_wait


def app(environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start = time.time()
    try:
        phases = parse_phases(environ.get("HTTP_X_DYNOSIM_PHASES", ""))
    except ValueError as e:
        start_response("400 Bad Request", [("Content-Type", "text/plain")])
        return [f"{e}\n".encode()]
    request = environ.get("HTTP_X_DYNOSIM_ID", "")
    stamped = _request_start(environ.get("HTTP_X_REQUEST_START", ""))
    if _WAIT_TIMEOUT is not None and stamped is not None and start - stamped > _WAIT_TIMEOUT:
        start_response("503 Service Unavailable", [("Content-Type", "text/plain"), ("X-Dynosim-Expired", "1"),
                                                   ("X-Dynosim-Dyno", _DYNO)])
        return [b"expired\n"]
    if stamped is not None:
        _note("q", request, stamped)
    _note("s", request, start)
    walls: List[float] = []
    tried: List[int] = []
    hedges: List[int] = []
    try:
        if _FAULTS_FILE:
            gate("app")
        calls = environ.get("HTTP_X_DYNOSIM_CALLS")
        cpu, pool_wait = perform(phases, walls, tried, start + _SERVICE_TIMEOUT,
                                 calls=calls.split("|") if calls else None, request=request, hedges=hedges)
    except CallFailed as e:
        _note("e", request, time.time())
        start_response("500 Internal Server Error", [("Content-Type", "text/plain"), ("X-Dynosim-Call-Failed", str(e)),
                                           ("X-Dynosim-Dyno", _DYNO)])
        return [b"call failed\n"]
    except (Outage, ResourceTimeout) as e:
        _note("e", request, time.time())
        mark = "X-Dynosim-Outage" if isinstance(e, Outage) else "X-Dynosim-Resource-Timeout"
        start_response("500 Internal Server Error", [("Content-Type", "text/plain"), (mark, "1"),
                                                     ("X-Dynosim-App-Retries", str(len(tried))),
                                                     ("X-Dynosim-Dyno", _DYNO)])
        return [b"outage\n" if isinstance(e, Outage) else b"resource timeout\n"]
    except ServiceTimeout:
        _note("e", request, time.time())
        start_response("500 Internal Server Error", [("Content-Type", "text/plain"),
                                                     ("X-Dynosim-Service-Timeout", "1"), ("X-Dynosim-Dyno", _DYNO)])
        return [b"service timeout\n"]
    end = time.time()
    _note("e", request, end)
    headers = [
        ("Content-Type", "text/plain"),
        ("X-Dynosim-Start", f"{start:.6f}"),
        ("X-Dynosim-End", f"{end:.6f}"),
        ("X-Dynosim-Dyno", _DYNO),
        ("X-Dynosim-Pid", str(os.getpid())),
        ("X-Dynosim-Rss", str(rss())),
        ("X-Dynosim-Cpu", f"{cpu:.6f}"),
        ("X-Dynosim-Pool-Wait", f"{pool_wait:.6f}"),
        ("X-Dynosim-Request-Start", environ.get("HTTP_X_REQUEST_START", "")),
        ("X-Dynosim-Phase-Wall", ",".join(f"{w:.6f}" for w in walls)),
        ("X-Dynosim-App-Retries", str(len(tried))),
        ("X-Dynosim-Hedged", str(sum(hedges))),
    ]
    # Last, so that everything this process did for the request up to here is in it.
    headers.append(("X-Dynosim-Proc-Cpu", f"{time.process_time():.6f}"))
    start_response("200 OK", headers)
    return [b"ok\n"]


def _warm() -> None:
    """``warm_pools`` in the configuration (a service's dynos): one connection of each
    resource's pool opened now, before the worker says it is ready, so that no call pays
    PostgreSQL's connection start."""
    if not _CONFIG.get("warm_pools"):
        return
    for resource in _RESOURCES.values():
        pool = resource.pool
        with pool.lock:
            pool.opened += 1
        pool.give(pool._connect())


def _ready() -> None:
    """Tells the testbed this worker has loaded the app: a file named dyno-pid in ready_dir."""
    ready_dir = _CONFIG.get("ready_dir")
    if ready_dir:
        with open(os.path.join(ready_dir, f"{_DYNO}-{os.getpid()}"), "w"):
            pass


_warm()
_ready()
