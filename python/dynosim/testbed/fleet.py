"""The testbed's autoscaled fleet (issue #24): dynos started and stopped while the run goes on,
HAProxy told through its runtime API, and the engine's own autoscale rule deciding.

- **HAProxy** is written with :attr:`FleetPlan.servers` servers up front (the rule's ``max``
  twice over: room for as many dynos draining as up), those not running ``disabled``
  (maintenance), and a runtime API socket (``stats socket ... level admin``) in the run's
  private directory (:class:`RuntimeApi`).
- **A dyno's life** (docs/AUTOSCALING.md §1.2, :class:`Dyno`): *booting* from the decision
  that starts its gunicorn; *up* once its workers have loaded the app and the scenario's boot
  time has passed since the decision (``set server dynos/dynoN state ready``): the real start
  is part of the boot, as on the platform, and is the boot when it takes longer; *draining* when the fleet shrinks:
  ``state drain`` (HAProxy sends it nothing new), SIGTERM ``fleet.stop_delay`` s later, which
  gunicorn answers by finishing its requests for at most ``--graceful-timeout`` =
  ``fleet.shutdown_grace``, SIGKILL once that grace has passed; then ``state maint``, *off*.
  A scale-up takes the lowest-numbered servers that are off; a scale-down drains the
  highest-numbered dynos booting or up (Heroku's web.N, §1.2).
- **The rule** is the engine's (``dynosim._dynosim.Autoscaler``), fed what the platform would
  measure on the real stack as the engine feeds it (:class:`Metrics`): a request's queue time
  as ``X-Request-Start`` shows it (the app's start − the router's stamp) when the app starts
  it; its response time when HAProxy logs it; at each evaluation, the serving dynos' busy
  workers (from the app's work log) or CPU (from /proc) since the last.

Every process is the run's :class:`~dynosim.testbed.procs.Supervisor`'s, so however the run
ends nothing is left running; :meth:`Fleet.tick` never blocks for a dyno's grace.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .. import _dynosim
from ..errors import DynosimError, from_engine
from ..scenario import Scenario
from .dynos import DynoPlan, spawn_dyno, write_faults
from .measure import stability_verdict, tries
from .procs import Supervisor, TestbedError, free_ports
from .router import BACKEND, parse_log_line, server_name
from .watchdog import group_members, processes

#: The controller's polling period.
TICK = 0.05
#: The metrics the real fleet measures while it runs.
MEASURED = ("queue_time", "response_time", "utilisation", "cpu")
#: The fleet's states, in the order of a dyno's life.
STATES = ("off", "booting", "up", "draining")

#: The note of the events that stop the dynos left when the run ends.
END_OF_RUN = "end of run"


def autoscaler(table: Any, section: str = "autoscale") -> _dynosim.Autoscaler:
    """The engine's autoscaler for a scenario's ``[autoscale]`` table; a bad table is a
    ScenarioError naming the key."""
    try:
        return _dynosim.Autoscaler(table, section)
    except _dynosim.EngineError as e:
        raise from_engine(e) from None


@dataclass
class FleetPlan:
    """What the real fleet does: its first size, the rule's table, and the lifecycle's times
    (seconds: ``fleet.boot_time``'s mean, ``fleet.boot_timeout``, ``fleet.stop_delay``,
    ``fleet.shutdown_grace``, as the engine resolved them)."""

    initial: int
    table: Dict[str, Any]
    bounds: Tuple[int, int]
    interval: float
    metric: Optional[str]
    boot_time: float
    boot_timeout: float
    stop_delay: float
    shutdown_grace: float
    warnings: List[str] = field(default_factory=list)

    @property
    def servers(self) -> int:
        """HAProxy servers declared: ``max`` up or booting and as many draining."""
        return 2 * self.bounds[1]


def split(scenario: Scenario) -> Tuple[Scenario, Optional[FleetPlan]]:
    """The scenario the engine simulates, and the real fleet's plan (None without
    ``[autoscale]``); the engine checks the scenario first (every key, in one line)."""
    described = scenario.describe()
    lifecycle = described["fleet"]
    table = scenario.doc.get("autoscale")
    if table is None:
        return scenario, None
    if (scenario.doc.get("router") or {}).get("kind", "haproxy") != "haproxy":
        raise scenario._error("router.kind", "the testbed's autoscaled fleet adds and drains dynos through "
                                             "HAProxy's runtime API: leave router.kind out (HAProxy)")
    rule = autoscaler(table)
    # Clients' retries, their breaker, the app's timeouts and the slowdowns and outages run as
    # on a fixed fleet (the load generator and the app do them); a lost dyno does not: the
    # autoscaled fleet's dynos come and go by its rule.
    for k, fault in enumerate(scenario.doc.get("faults") or []):
        if isinstance(fault, dict) and fault.get("kind") == "dynos_lost":
            raise scenario._error(f"faults.{k}.kind", "the testbed's autoscaled fleet starts and stops its dynos by "
                                                      "its rule: run dynos_lost on a fixed fleet (leave [autoscale] "
                                                      "out)")
    # The concurrency limits run on a fixed fleet: the autoscaled fleet's measure does not
    # count their refusals, and its dynos come and go under HAProxy's runtime API.
    for path in ("router.concurrency_limit", "app.concurrency_limit"):
        head, key = path.split(".")
        if (scenario.doc.get(head) or {}).get(key) is not None:
            raise scenario._error(path, "the testbed's autoscaled fleet does not run this yet: it runs on a fixed "
                                        "fleet (leave [autoscale] out)")
    fleet = scenario.doc.get("fleet") or {}
    for key, what in (("cycling", "restart its dynos daily"), ("deploy", "deploy")):
        if fleet.get(key) is not None:
            raise scenario._error(f"fleet.{key}", f"the testbed's autoscaled fleet does not {what} yet: leave it out "
                                                  "to run the scenario for real")
    warnings: List[str] = []
    if isinstance(fleet.get("boot_time"), dict):
        warnings.append("fleet.boot_time is a distribution: every real dyno boots in its mean, "
                        f"{lifecycle['boot_time']:g} s")
    if rule.metric is not None and rule.metric not in MEASURED:
        raise scenario._error("autoscale.rule", f"rule {rule.rule!r} reads {rule.metric.replace('_', ' ')}, which the "
                                                f"testbed's fleet does not measure yet (it measures "
                                                f"{', '.join(m.replace('_', ' ') for m in MEASURED)})")
    initial = int(described["dynos"])  # within [min, max]: the engine checked
    low, high = rule.bounds
    plan = FleetPlan(
        initial=initial, table=table, bounds=(low, high), interval=rule.interval, metric=rule.metric,
        boot_time=float(lifecycle["boot_time"]), boot_timeout=float(lifecycle["boot_timeout"]),
        stop_delay=float(lifecycle["stop_delay"]), shutdown_grace=float(lifecycle["shutdown_grace"]),
        warnings=warnings)
    return scenario, plan


# --- HAProxy's runtime API -----------------------------------------------------------------


def state_command(server: int, state: str) -> str:
    """The runtime API's command putting dyno `server`'s server in `state` (ready, drain or
    maint)."""
    if state not in ("ready", "drain", "maint"):
        raise ValueError(f"a server's state is ready, drain or maint, not {state!r}")
    return f"set server {BACKEND}/{server_name(server)} state {state}"


#: srv_admin_state's bits for maintenance (set at run time, or ``disabled`` at start) and drain.
MAINT = 0x01
DRAIN = 0x08


def parse_servers_state(text: str) -> Dict[str, Dict[str, int]]:
    """``show servers state BACKEND``'s lines by server name: {"operational": srv_op_state (0
    stopped, 2 running), "admin": srv_admin_state (bits: 0x01 maintenance set at run time, 0x04
    ``disabled`` in the configuration, which stays set, 0x08 drain set at run time; see
    :data:`MAINT` and :data:`DRAIN`), "weight": srv_uweight}. The first line is the format's version, the second its
    column names (``# be_id be_name srv_id srv_name ...``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = next((line for line in lines if line.startswith("#")), None)
    if header is None:
        raise TestbedError(f"HAProxy's servers state has no header: {text[:200]!r}")
    names = header.lstrip("#").split()
    out: Dict[str, Dict[str, int]] = {}
    for line in lines:
        if line.startswith("#") or not line[0].isdigit() or " " not in line:
            continue
        row = dict(zip(names, line.split()))
        if "srv_name" not in row:
            continue
        out[row["srv_name"]] = {"operational": int(row["srv_op_state"]), "admin": int(row["srv_admin_state"]),
                                "weight": int(row["srv_uweight"])}
    return out


class RuntimeApi:
    """HAProxy's runtime API on a Unix socket: one command per connection."""

    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        #: (time.time(), command) of every command sent.
        self.sent: List[Tuple[float, str]] = []

    def command(self, line: str) -> str:
        if "\n" in line:
            raise ValueError(f"one command per line: {line!r}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(self.timeout)
            try:
                s.connect(str(self.path))
                s.sendall((line + "\n").encode())
                self.sent.append((time.time(), line))
                chunks = []
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
            except OSError as e:
                raise TestbedError(f"HAProxy's runtime API ({self.path}) did not take {line!r}: "
                                   f"{e.strerror or e}") from None
        return b"".join(chunks).decode(errors="replace")

    def set_state(self, server: int, state: str) -> None:
        answer = self.command(state_command(server, state)).strip()
        if answer:  # HAProxy answers nothing when it took the command
            raise TestbedError(f"HAProxy refused {state_command(server, state)!r}: {answer.splitlines()[0]}")

    def servers(self) -> Dict[str, Dict[str, int]]:
        return parse_servers_state(self.command(f"show servers state {BACKEND}"))


# --- the dynos' lives ----------------------------------------------------------------------


@dataclass
class Dyno:
    """One HAProxy server and the gunicorn currently behind it (if any)."""

    index: int
    port: int
    state: str = "off"
    proc: Any = None
    ready_dir: Optional[Path] = None
    #: Seconds since the run's start: when it started, was really ready (its workers had
    #: loaded the app), went up, was marked down, got SIGTERM.
    started: float = math.nan
    ready: float = math.nan
    up_at: float = math.nan
    drained: float = math.nan
    terminated: float = math.nan
    generation: int = 0


@dataclass
class Event:
    t: float
    dyno: int
    state: str
    note: str = ""


class Fleet:
    """The real fleet's state machine: :meth:`scale_to` says the size wanted, :meth:`tick`
    moves each dyno on in its life. Neither blocks on a dyno; both are called from the main
    thread (a child's start must be, see Supervisor.spawn).

    `start` (Dyno) -> Popen and `ready_count` (Dyno) -> workers ready are how dynos start and
    how they are seen ready; :meth:`real` plugs in gunicorn and HAProxy, the tests plug in fakes."""

    def __init__(self, plan: FleetPlan, ports: List[int], *, set_state: Callable[[int, str], None],
                 start: Callable[[Dyno], Any], ready: Callable[[Dyno], bool],
                 signal_dyno: Callable[[Dyno, int], None], exited: Callable[[Dyno], bool],
                 kill: Callable[[Dyno], None]) -> None:
        if len(ports) != plan.servers:
            raise ValueError(f"{plan.servers} ports needed, got {len(ports)}")
        self.plan = plan
        self.dynos = [Dyno(i, p) for i, p in enumerate(ports)]
        self._set_state = set_state
        self._start = start
        self._ready = ready
        self._signal = signal_dyno
        self._exited = exited
        self._kill = kill
        self.events: List[Event] = []
        self.warnings: List[str] = []
        #: Dynos killed at the end of their grace (requests cut short: H13s).
        self.killed = 0

    # -- what the platform shows --

    def count(self, state: str) -> int:
        return sum(1 for d in self.dynos if d.state == state)

    @property
    def size(self) -> int:
        """Booting or up: the formation's quantity."""
        return self.count("booting") + self.count("up")

    @property
    def up(self) -> int:
        return self.count("up")

    def serving(self) -> List[Dyno]:
        """The dynos that serve requests and report: up, or draining after being up (finishing
        what they hold), as the engine's serving dynos."""
        return [d for d in self.dynos if d.state == "up" or (d.state == "draining" and not math.isnan(d.up_at))]

    def serving_seconds(self, begin: float, end: float) -> float:
        """The integral of the number of dynos serving over [begin, end], from the events."""
        serving: Dict[int, bool] = {}
        count, since, area = 0, begin, 0.0
        for e in sorted(self.events, key=lambda e: e.t):
            if e.t > end:
                break
            now_serving = e.state == "up" or (e.state == "draining" and serving.get(e.dyno, False))
            if e.t > since:
                area += count * (e.t - since)
                since = e.t
            count += int(now_serving) - int(serving.get(e.dyno, False))
            serving[e.dyno] = now_serving
        return area + count * max(0.0, end - since)

    # -- changes --

    def _enter(self, dyno: Dyno, state: str, now: float, note: str = "") -> None:
        dyno.state = state
        self.events.append(Event(now, dyno.index, state, note))

    def scale_to(self, desired: int, now: float) -> None:
        """Boots or drains dynos for the fleet to be `desired` (booting or up)."""
        desired = max(0, min(desired, self.plan.bounds[1]))
        size = self.size
        if desired > size:
            free = [d for d in self.dynos if d.state == "off"][: desired - size]
            if len(free) < desired - size:  # cannot happen: servers = 2 max
                raise TestbedError(f"no HAProxy server free for {desired - size} more dyno(s)")
            for dyno in free:
                dyno.generation += 1
                dyno.started, dyno.ready, dyno.up_at = now, math.nan, math.nan
                dyno.drained = dyno.terminated = math.nan
                dyno.proc = self._start(dyno)
                self._enter(dyno, "booting", now)
        elif desired < size:
            going = sorted((d for d in self.dynos if d.state in ("booting", "up")), key=lambda d: d.index)
            for dyno in reversed(going[desired:]):
                self.drain(dyno, now)

    def drain(self, dyno: Dyno, now: float, note: str = "") -> None:
        if dyno.state == "up":
            self._set_state(dyno.index, "drain")
        dyno.drained = now
        self._enter(dyno, "draining", now, note)

    def tick(self, now: float) -> None:
        """Moves every dyno on: booting ones up once ready and booted, draining ones to their
        SIGTERM, their end or their SIGKILL."""
        for dyno in self.dynos:
            if dyno.state == "booting":
                if self._exited(dyno):
                    self.warnings.append(f"dyno {dyno.index} ended while booting (see its log)")
                    self.drain(dyno, now, "crashed")
                    continue
                if math.isnan(dyno.ready) and self._ready(dyno):
                    dyno.ready = now
                if not math.isnan(dyno.ready) and now >= dyno.started + self.plan.boot_time:
                    self._set_state(dyno.index, "ready")
                    dyno.up_at = now
                    self._enter(dyno, "up", now)
                elif math.isnan(dyno.ready) and now - dyno.started > self.plan.boot_timeout:
                    # Heroku's R10: not listening within the boot timeout.
                    self.warnings.append(f"dyno {dyno.index} did not start within fleet.boot_timeout "
                                         f"({self.plan.boot_timeout:g} s)")
                    self.drain(dyno, now, "boot timeout")
            elif dyno.state == "draining":
                if math.isnan(dyno.terminated):
                    if now >= dyno.drained + self.plan.stop_delay:
                        self._signal(dyno, signal.SIGTERM)
                        dyno.terminated = now
                    continue
                if self._exited(dyno):
                    self._off(dyno, now, "")
                elif now >= dyno.terminated + self.plan.shutdown_grace:
                    self.killed += 1
                    self._off(dyno, now, "SIGKILL")

    def _off(self, dyno: Dyno, now: float, note: str) -> None:
        self._kill(dyno)  # reaps it; SIGKILLs what is left of it
        self._set_state(dyno.index, "maint")
        dyno.proc = None
        self._enter(dyno, "off", now, note)

    def stop_all(self, now: float) -> None:
        """The run is over: every dyno off at once (the supervisor would stop them anyway)."""
        for dyno in self.dynos:
            if dyno.state != "off":
                self._kill(dyno)
                dyno.proc = None
                self._enter(dyno, "off", now, END_OF_RUN)

    # -- what happened --

    def series(self, until: float, step: float = 1.0) -> List[Dict[str, Any]]:
        """The fleet every `step` seconds from 0 to `until`: dynos booting, up and draining at
        each time (after the events at that time)."""
        state = {d.index: "off" for d in self.dynos}
        events = sorted(self.events, key=lambda e: e.t)
        rows, k = [], 0
        for i in range(int(math.floor(until / step)) + 1):
            t = i * step
            while k < len(events) and events[k].t <= t:
                state[events[k].dyno] = events[k].state
                k += 1
            counts = {s: sum(1 for v in state.values() if v == s) for s in STATES[1:]}
            rows.append({"time": t, "dynos_booting": counts["booting"], "dynos_up": counts["up"],
                         "dynos_draining": counts["draining"]})
        return rows


def ready_workers(ready_dir: Optional[Path]) -> int:
    """Workers that have loaded the app: one file each in the dyno's ready directory."""
    if ready_dir is None:
        return 0
    try:
        return len(os.listdir(ready_dir))
    except OSError:
        return 0


def real_fleet(plan: FleetPlan, supervisor: Supervisor, dynos: DynoPlan, ports: List[int], api: RuntimeApi,
               dsn: str, work_dir: Path) -> Fleet:
    """A :class:`Fleet` of real gunicorn dynos behind HAProxy's runtime API."""
    ready_root = supervisor.workdir / "ready"
    ready_root.mkdir(exist_ok=True)

    def start(dyno: Dyno) -> Any:
        dyno.ready_dir = ready_root / f"{dyno.index}.{dyno.generation}"
        dyno.ready_dir.mkdir()
        return spawn_dyno(supervisor, dynos, dyno.index, dyno.port, dsn, dyno.ready_dir, work_dir)

    def exited(dyno: Dyno) -> bool:
        return dyno.proc is not None and supervisor.exited(dyno.proc) is not None

    def kill(dyno: Dyno) -> None:
        if dyno.proc is not None:
            supervisor.stop(dyno.proc, grace=0.0)

    return Fleet(plan, ports, set_state=api.set_state, start=start,
                 ready=lambda d: ready_workers(d.ready_dir) >= dynos.workers,
                 signal_dyno=lambda d, sig: supervisor.signal(d.proc, sig) if d.proc is not None else None,
                 exited=exited, kill=kill)


# --- dynos lost on a fixed fleet ----------------------------------------------------------


class Losses:
    """``[[faults]]`` of kind ``dynos_lost`` on the fixed fleet (``dynosim testbed`` without
    ``[autoscale]``): at each loss's ``at`` (s from the load's start) the first ``count`` dynos
    up crash, and each boots again at once and is up after ``fleet.boot_time``, as the
    engine's (``sim/lifecycle.rs``: ``fault_due``, ``crash``).

    A crash, in this order: HAProxy's runtime API puts the dyno's server in maintenance
    (``state maint``: the platform's router knows a crashed dyno at once, as the simulation's
    routers do, rather than finding it by failed connections or a health check), then the
    dyno's whole process group gets SIGKILL (the master and its workers at once, as a crashed
    container: a worker left behind would keep accepting on the dyno's socket), so that the
    requests it holds, on its workers or in its accept queue, lose their connection (HAProxy's
    502, ``errors.crashed``). Its new server process starts at once; it is up (``state
    ready``) once its workers have loaded the app and the boot time has passed since the
    crash, as :class:`Fleet`'s booting dynos: a real start longer than the boot time delays
    it, with a warning.

    `crash(d)` kills dyno d's processes, `start(d)` reaps them and starts it again (returns
    whatever `ready(d)` reads), `set_state(d, state)` is the runtime API's; all called from the
    main thread (Supervisor.spawn)."""

    def __init__(self, losses: List[Dict[str, Any]], boot_time: float, dynos: int, *,
                 set_state: Callable[[int, str], None], crash: Callable[[int], None],
                 start: Callable[[int], Any], ready: Callable[[int], bool]) -> None:
        self.due = sorted((float(x["at"]), int(x["count"])) for x in losses)
        self.boot_time = boot_time
        self.dynos = [Dyno(i, 0, state="up", up_at=0.0) for i in range(dynos)]
        self._set_state, self._crash, self._start, self._ready = set_state, crash, start, ready
        self.events: List[Event] = []
        self.warnings: List[str] = []

    def next_time(self) -> float:
        """The next time :meth:`tick` has something to do at for sure (a loss), or inf."""
        return self.due[0][0] if self.due else math.inf

    def tick(self, now: float) -> None:
        while self.due and self.due[0][0] <= now:
            at, count = self.due.pop(0)
            lost = [d for d in self.dynos if d.state == "up"][:count]
            # Every lost dyno out of HAProxy first, then all killed, then all started again:
            # none gets a request while another one is killed or started.
            for dyno in lost:
                self._set_state(dyno.index, "maint")
            for dyno in lost:
                self._crash(dyno.index)
                dyno.state, dyno.drained = "booting", now
                self.events.append(Event(now, dyno.index, "crashed", f"dynos_lost at {at:g} s"))
            for dyno in lost:
                dyno.generation += 1
                dyno.started, dyno.ready = now, math.nan
                dyno.proc = self._start(dyno.index)
        for dyno in self.dynos:
            if dyno.state != "booting":
                continue
            if math.isnan(dyno.ready) and self._ready(dyno.index):
                dyno.ready = now
                if now - dyno.started > self.boot_time:
                    self.warnings.append(f"dyno {dyno.index} took {now - dyno.started:.2f} s to start again, more "
                                         f"than fleet.boot_time ({self.boot_time:g} s): up that much later than "
                                         "simulated")
            if not math.isnan(dyno.ready) and now >= dyno.started + self.boot_time:
                self._set_state(dyno.index, "ready")
                dyno.state, dyno.up_at = "up", now
                self.events.append(Event(now, dyno.index, "up"))

    def crashes(self) -> List[Tuple[int, float]]:
        """(dyno, time) of every crash, s from the load's start."""
        return [(e.dyno, e.t) for e in self.events if e.state == "crashed"]


def real_losses(losses: List[Dict[str, Any]], boot_time: float, supervisor: Supervisor, plan: DynoPlan,
                processes: List[Any], ports: List[int], api: RuntimeApi, dsn: str, work_dir: Path) -> Losses:
    """:class:`Losses` on the fixed fleet's real dynos (`processes[d]` dyno d's server, replaced
    in place by its restart, so that whoever stops the dynos stops the new one)."""
    ready_root = supervisor.workdir / "ready-restarted"
    ready_root.mkdir(exist_ok=True)
    ready_dirs: Dict[int, Path] = {}

    def crash(d: int) -> None:
        supervisor.signal(processes[d], signal.SIGKILL)  # the whole group, at once

    def start(d: int) -> Any:
        supervisor.stop(processes[d], grace=0.0)  # reaps what was killed
        generation = sum(1 for p in ready_root.iterdir() if p.name.startswith(f"{d}.")) + 1
        ready_dirs[d] = ready_root / f"{d}.{generation}"
        ready_dirs[d].mkdir()
        processes[d] = spawn_dyno(supervisor, plan, d, ports[d], dsn, ready_dirs[d], work_dir)
        return processes[d]

    return Losses(losses, boot_time, len(processes), set_state=api.set_state, crash=crash, start=start,
                  ready=lambda d: ready_workers(ready_dirs.get(d)) >= plan.workers)


# --- what the platform measures ------------------------------------------------------------


_LINE = re.compile(rb"^([sqe]) (\S+) (\S+)$")


class Follow:
    """Follows files as they grow: :meth:`lines` returns the whole lines written to one since
    the last call (a line still being written waits for the next)."""

    def __init__(self) -> None:
        self._offsets: Dict[Path, int] = {}
        self._partial: Dict[Path, bytes] = {}

    def lines(self, path: Path) -> List[bytes]:
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return []
        self._offsets[path] = offset + len(data)
        lines = (self._partial.pop(path, b"") + data).split(b"\n")
        if lines[-1]:
            self._partial[path] = lines[-1]
        return lines[:-1]


class WorkTail:
    """Reads the app's work logs (dynosim.testbed.app), one file per worker, as they grow."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._follow = Follow()

    def read(self) -> List[Tuple[int, str, str, float]]:
        """(dyno, mark, request id, time) of the new lines, file by file."""
        out: List[Tuple[int, str, str, float]] = []
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return out
        for name in names:
            dyno_text = name.partition("-")[0]
            if not name.endswith(".log") or not dyno_text.isdigit():
                continue
            for line in self._follow.lines(self.directory / name):
                m = _LINE.match(line)
                if not m:
                    continue
                try:
                    when = float(m.group(3))
                except ValueError:
                    continue
                out.append((int(dyno_text), m.group(1).decode(), m.group(2).decode(), when))
        return out


def cpu_seconds(pgid: int) -> float:
    """CPU seconds (user and system) used so far by a dyno's process group: its live members'
    own and that of the children they reaped (a gunicorn worker replaced)."""
    total = 0
    for proc in group_members(pgid, processes()):
        try:
            with open(f"/proc/{proc.pid}/stat", "rb") as f:
                text = f.read().decode("ascii", "replace")
        except OSError:
            continue
        rest = text[text.rindex(")") + 2:].split()
        total += sum(int(x) for x in rest[11:15])  # utime, stime, cutime, cstime
    return total / _CLOCK_TICKS


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Metrics:
    """The rule's metric on the real stack, fed to the rule as the engine feeds it
    (crates/dynosim-engine/src/sim/scaling.rs), from what the platform would measure: queue
    times (start − X-Request-Start) when the app starts a request; response times (HAProxy's
    Ta) when HAProxy logs the answer; and at each evaluation, just before it, the serving
    dynos' (up or draining) report since the last one: the busy workers' seconds over `slots`
    × the serving dynos' seconds (utilisation), or the CPU seconds of their process groups
    (`cpu`: dyno → its CPU seconds so far) over `cores` × the same (cpu), recorded as that
    fraction times the dynos serving then, over that many dynos, at the start of the period
    it covers (an observation of that period, as the engine's since 1226dd0)."""

    def __init__(self, metric: Optional[str], t0: float, slots: int, cores: int = 1,
                 cpu: Optional[Callable[[int], Optional[float]]] = None) -> None:
        self.metric = metric
        self.t0 = t0
        self.slots = slots
        self.cores = cores
        self._cpu = cpu
        self._cpu_before: Dict[int, float] = {}
        self._stamped: Dict[str, float] = {}
        #: Requests in hand {id: start} (Unix s), and busy seconds of those finished since the
        #: last report (within it).
        self._open: Dict[str, float] = {}
        self._busy = 0.0
        self._last = t0
        #: Every observation: (t, value) for times; (t, fraction x dynos, dynos) for reports.
        self.queue_times: List[Tuple[float, float]] = []
        self.response_times: List[Tuple[float, float]] = []
        self.reports: List[Tuple[float, float, int]] = []

    def feed(self, lines: Iterable[Tuple[int, str, str, float]], rule: Any) -> None:
        for dyno, mark, request, when in lines:
            if mark == "q":
                self._stamped[request] = when
            elif mark == "s":
                stamped = self._stamped.pop(request, None)
                if stamped is not None:
                    t, value = when - self.t0, max(0.0, when - stamped)
                    self.queue_times.append((t, value))
                    if self.metric == "queue_time":
                        rule.record(t, value)
                self._open[request] = when
            elif mark == "e":
                start = self._open.pop(request, None)
                if start is not None:
                    self._busy += max(0.0, when - max(start, self._last))

    def report(self, now: float, serving_seconds: float, serving: List[int], rule: Any) -> None:
        """The serving dynos' report at `now` (s since the start), over the time since the
        last: `serving_seconds` the integral of the dynos serving over it, `serving` those
        serving now. Requests in hand count up to `now`."""
        end = self.t0 + now
        since = self._last - self.t0  # the period's start, where its report is recorded
        busy = self._busy + sum(max(0.0, end - max(start, self._last)) for start in self._open.values())
        self._busy, self._last = 0.0, end
        if self.metric == "cpu" and self._cpu is not None:
            used, seen = 0.0, {}
            for dyno in serving:
                cpu = self._cpu(dyno)
                if cpu is not None:
                    seen[dyno] = cpu
                    # A dyno serving since the last report counts from its first reading.
                    used += max(0.0, cpu - self._cpu_before.get(dyno, cpu))
            self._cpu_before = seen
            busy, capacity = used, float(self.cores)
        elif self.metric == "utilisation":
            capacity = float(self.slots)
        else:
            return
        if serving_seconds > 0 and serving:
            fraction = busy / (capacity * serving_seconds)
            self.reports.append((since, fraction * len(serving), len(serving)))
            rule.record_total(since, fraction * len(serving), len(serving))

    def feed_router(self, lines: Iterable[bytes], now: float, rule: Any) -> None:
        """HAProxy's new log lines, read at `now` (s since the start): each answer's response
        time as the router logs it (Ta, errors included)."""
        for line in lines:
            parsed = parse_log_line(line.decode(errors="replace"))
            if parsed is None or parsed[1]["ta"] is None:
                continue
            self.response_times.append((now, parsed[1]["ta"]))
            if self.metric == "response_time":
                rule.record(now, parsed[1]["ta"])


# --- a run -----------------------------------------------------------------------------------


def run_autoscaled(plan: Any, fleet_plan: FleetPlan, progress: Callable[[str], None] = lambda m: None
                   ) -> Dict[str, Any]:
    """One real run of an autoscaled fleet: HAProxy with every server declared, the first
    dynos up before the load starts, then the engine's rule evaluated every interval on what
    the real stack measures while the load generator sends the drawn requests (from a thread:
    every process is started from this one). Returns the fleet's events and series, the
    decisions, the metric as fed, and per-minute response times."""
    import threading

    import numpy as np

    from .database import Database
    from .router import Router, read_log

    if plan.closed:
        raise DynosimError("the autoscaled fleet runs open-loop arrivals only (arrivals.process is a closed loop)")
    rule = autoscaler(fleet_plan.table)
    requests = plan.requests()
    # gunicorn's own grace is the platform's: its workers finish their requests for at most
    # fleet.shutdown_grace after SIGTERM (whole seconds), and the fleet SIGKILLs it then.
    dyno_plan = dataclasses.replace(plan.dynos, graceful_timeout=max(1, int(math.ceil(fleet_plan.shutdown_grace))))
    slots = int(plan.described["slots"])
    with Supervisor() as supervisor:
        ports = free_ports(fleet_plan.servers + 1)
        dsn = ""
        if plan.resources:
            database = Database(supervisor, plan.max_connections * fleet_plan.servers // max(1, fleet_plan.initial),
                                cpus=plan.database_cpus)
            dsn = database.dsn
        socket_path = supervisor.workdir / "haproxy.sock"
        router_plan = dataclasses.replace(plan.router, runtime_socket=socket_path,
                                          disabled=frozenset(range(fleet_plan.initial, fleet_plan.servers)))
        work_dir = supervisor.workdir / "work"
        work_dir.mkdir(exist_ok=True)
        router = Router(supervisor, router_plan, ports[0], ports[1:])
        api = RuntimeApi(socket_path)
        clock = time.time
        fleet = real_fleet(fleet_plan, supervisor, dyno_plan, ports[1:], api, dsn, work_dir)
        progress(f"booting the first {fleet_plan.initial} dyno(s)")
        boot0 = time.monotonic()
        # The first dynos are up when the run starts (their servers are not disabled).
        fleet.scale_to(fleet_plan.initial, 0.0)
        while fleet.count("booting"):
            for dyno in fleet.dynos:
                if dyno.state == "booting" and ready_workers(dyno.ready_dir) >= dyno_plan.workers:
                    fleet._enter(dyno, "up", 0.0, "up at the start")
                    dyno.ready = dyno.up_at = 0.0
                elif dyno.state == "booting" and fleet._exited(dyno):
                    raise TestbedError(f"dyno {dyno.index} (gunicorn) ended while starting; see "
                                       f"{supervisor.workdir / f'dyno{dyno.index}.log'}")
            if time.monotonic() - boot0 > fleet_plan.boot_timeout:
                raise TestbedError(f"the first dynos did not start within {fleet_plan.boot_timeout:g} s")
            time.sleep(TICK)
        for dyno in fleet.dynos:
            dyno.started = 0.0
        tail = WorkTail(work_dir)
        tail.read()  # nothing yet but the first dynos' start
        out: Dict[str, Any] = {}

        # The clients retry as replication 0 of the simulation's do (its backoff stream), and
        # ask the engine's own breaker before each try, as on a fixed fleet.
        retry = (plan.scenario.to_json(), str(plan.scenario.base_dir), plan.replication) if plan.retries else None
        breaker = (plan.scenario.to_json(), str(plan.scenario.base_dir)) if plan.breaker else None

        def send() -> None:
            try:
                out["load"] = _dynosim.send_load(f"127.0.0.1:{ports[0]}", requests, "open", 0, [],
                                                 plan.request_timeout, plan.deadline, CAPTURE, retry=retry,
                                                 id_header="X-Dynosim-Id", breaker=breaker)
            except BaseException as e:  # raised again in the main thread
                out["error"] = e

        progress(f"sending {len(requests)} requests; {rule.rule} evaluates every {rule.interval:g} s")
        if plan.faults:
            # The slowdowns' and outages' windows from now, the load's start to a millisecond;
            # every dyno's app reads the one file, those started later too.
            write_faults(supervisor.workdir, plan.faults, time.time())
        t0 = clock()
        metrics = Metrics(fleet_plan.metric, t0, slots, cores=int(plan.described["cores"]),
                          cpu=None if fleet_plan.metric != "cpu" else
                          lambda d: None if fleet.dynos[d].proc is None else cpu_seconds(fleet.dynos[d].proc.pid))
        follow = Follow()
        decisions: List[Dict[str, Any]] = []
        next_eval = rule.interval
        sender = threading.Thread(target=send, name="dynosim-load", daemon=True)
        sender.start()
        try:
            while sender.is_alive():
                now = clock() - t0
                metrics.feed(tail.read(), rule)
                metrics.feed_router(follow.lines(router.log), now, rule)
                # Dynos whose boot ends at an evaluation are up for it, as the engine's are.
                fleet.tick(now)
                while now >= next_eval:
                    # The serving dynos report, then the rule decides (as the engine's).
                    metrics.report(next_eval, fleet.serving_seconds(next_eval - rule.interval, next_eval),
                                   [d.index for d in fleet.serving()], rule)
                    size, up = fleet.size, fleet.up
                    desired, why, seen, samples = rule.evaluate(next_eval, size, up)
                    decisions.append({"time": next_eval, "at": now, "size": size, "up": up, "desired": desired,
                                      "why": why, "observed": seen, "samples": samples})
                    if desired != size:
                        progress(f"{next_eval:7.1f} s: {size} -> {desired} dynos ({why}; "
                                 f"{'no reading' if seen is None else f'{seen:.4g}'})")
                    fleet.scale_to(desired, next_eval)  # the boot and the drain count from the decision
                    next_eval += rule.interval
                sender.join(TICK)
        finally:
            if sender.is_alive():
                _dynosim.interrupt()
                sender.join(30.0)
        end = clock() - t0
        if "error" in out:
            raise out["error"]
        load = out["load"]
        fleet.stop_all(end)
        router.stop()
        router_log = read_log(router.log)
        # What the app logged after the last look (the last requests' starts).
        metrics.feed(tail.read(), rule)
    per_minute = per_minute_responses(load, plan.length)
    status = np.asarray(load["status"])
    attempt, _origin, _scheduled, final = tries(load)
    feedback: Dict[str, Any] = {}
    if plan.retries:
        # Tries per request sent (the amplification), as the simulation's
        # retries.attempts_per_request over the whole run.
        feedback["attempts_per_request"] = float(len(attempt) / max(1, int(np.sum(attempt == 1))))
    if plan.breaker:
        feedback["breaker_openings"] = [[a - float(load["start"]), b - float(load["start"])]
                                        for a, b in load.get("breaker") or []]
    if plan.faults:
        feedback["stability"] = stability_verdict(plan.scenario, plan.described, load)
    return {
        "rule": rule.rule, "interval": rule.interval, "metric": fleet_plan.metric, "bounds": list(rule.bounds),
        "boot_time": fleet_plan.boot_time, "shutdown_grace": fleet_plan.shutdown_grace,
        # Requests (their last tries: the outcomes the clients kept), and tries sent.
        "sent": int(np.sum(attempt == 1)), "tries": len(attempt), "ok": int(np.sum(final & (status == 200))),
        "errors": int(np.sum(final & (status != 200))), "unsent": load["unsent"], **feedback,
        "lateness": load["lateness"], "load_offset": float(load["start"]) - t0,
        "events": [vars(e) for e in fleet.events], "decisions": decisions,
        "changes": decided_changes(fleet_plan.initial, decisions),
        "applied": size_changes(fleet.events),
        "series": fleet.series(min(end, plan.length)), "killed": fleet.killed,
        "real_start": real_starts(fleet.dynos, fleet.events),
        "per_minute": per_minute, "warnings": fleet_plan.warnings + fleet.warnings,
        "router_log_lines": len(router_log),
        "commands": [c for _, c in api.sent],
        "queue_times": len(metrics.queue_times), "response_times": len(metrics.response_times),
        "reports": metrics.reports,
    }


#: Response headers the load generator keeps (as the fixed fleet's run).
CAPTURE = ["x-dynosim-start", "x-dynosim-end", "x-dynosim-dyno", "x-dynosim-request-start"]


def decided_changes(initial: int, decisions: List[Dict[str, Any]]) -> List[Tuple[float, int]]:
    """(time, size) at the start and at each evaluation that changed the fleet's size (booting
    + up), at the evaluation's time: the size as the platform shows it, which changes only
    there (the real loop applies a decision within a tick of it, :data:`TICK`)."""
    out = [(0.0, initial)]
    for d in decisions:
        if d["desired"] != d["size"]:
            out.append((float(d["time"]), int(d["desired"])))
    return out


def size_changes(events: List[Event]) -> List[Tuple[float, int]]:
    """(time, size) each time the fleet's size (booting + up) changed."""
    state: Dict[int, str] = {}
    out: List[Tuple[float, int]] = []
    for e in sorted(events, key=lambda e: e.t):
        if e.note == END_OF_RUN:
            continue
        state[e.dyno] = e.state
        size = sum(1 for s in state.values() if s in ("booting", "up"))
        if out and out[-1][0] == e.t:
            out[-1] = (e.t, size)
        elif not out or out[-1][1] != size:
            out.append((e.t, size))
    return [(t, n) for k, (t, n) in enumerate(out) if k == 0 or n != out[k - 1][1]]


def real_starts(dynos: List[Dyno], events: List[Event]) -> Dict[str, Optional[float]]:
    """How long the real gunicorns took to start (their workers ready) after being asked: what
    the boot time was added to."""
    waits = [d.ready - d.started for d in dynos if not math.isnan(d.ready) and d.started > 0]
    return {"count": float(len(waits)), "mean": (sum(waits) / len(waits)) if waits else None,
            "max": max(waits) if waits else None}


def per_minute_responses(load: Dict[str, Any], length: float, width: float = 60.0) -> List[Dict[str, Any]]:
    """Per minute of arrival (a request's first send): requests, errors and the p95 of the
    response time (its last try's done − its first send, every answer, errors included, as
    ``response.*``; without retries a request's one try)."""
    import numpy as np

    t0 = float(load["start"])
    _attempt, origin, _scheduled, final = tries(load)
    sent = origin[final] - t0
    done = np.asarray(load["done"], dtype=float)[final] - t0
    status = np.asarray(load["status"])[final]
    out = []
    for m in range(int(math.ceil(length / width))):
        inside = (sent >= m * width) & (sent < (m + 1) * width) & np.isfinite(done)
        times = done[inside] - sent[inside]
        out.append({"minute": m, "requests": int(np.sum(inside)), "errors": int(np.sum(status[inside] != 200)),
                    "p95": float(np.percentile(times, 95)) if len(times) else None})
    return out


# --- measured beside simulated ---------------------------------------------------------------

#: The issue's bars: the fleet's size changes within one evaluation interval of the
#: simulation's, and p95 per minute within 25%.
P95_TOLERANCE = 0.25

def simulated_fleet(engine: Scenario, length: float, width: float = 60.0) -> Dict[str, Any]:
    """The simulation's side of the comparison, from the engine: the fleet's size every second
    of replication 0 (its trace's ``dynos_up`` + ``dynos_booting``) and, per minute, the p95
    response time over the replications of a run whose window is that minute (warm-up: the
    minutes before it; the same seed draws the same requests up to it)."""
    import json

    from ..api import run as run_scenario

    trace = json.loads(engine._call(_dynosim.trace, 1.0, length, False))
    frames = trace["frames"]
    series = [{"time": float(f["time"]), "dynos_booting": int(f.get("dynos_booting", 0)), "dynos_up": int(f["dynos_up"]),
               "dynos_draining": int(f.get("dynos_draining", 0))} for f in frames]
    out: Dict[str, Any] = {"series": series, "changes": series_changes(series)}
    arrivals = engine.doc.get("arrivals") or {}
    retry = arrivals.get("retry")
    if engine.doc.get("faults") or (isinstance(retry, dict) and retry.get("attempts", 3) != 1):
        out.update(feedback_figures(run_scenario(engine, warn=False)[0].to_dict()))
    per_minute = []
    # A window that starts after a fault would hold it in its warm-up, which the engine refuses
    # (a fault must fall inside the measured window): with faults, the p95s are not compared
    # minute by minute.
    for m in range(0 if engine.doc.get("faults") else int(math.ceil(length / width))):
        window = engine.with_overrides({"run.warmup": f"{m * width:g}s",
                                        "run.duration": f"{min(width, length - m * width):g}s"})
        report = run_scenario(window, warn=False)[0].to_dict()
        p95 = report["summary"]["response"]["p95"]
        per_minute.append({"minute": m, "p95": p95["mean"], "low": p95.get("ci_low"), "high": p95.get("ci_high"),
                           # Replication 0 drew the very requests the real run sends.
                           "paired": report["per_replication"][0]["response"]["p95"]})
    out["per_minute"] = per_minute
    return out


def feedback_figures(report: Dict[str, Any]) -> Dict[str, Any]:
    """The whole run's feedback figures, per replication (replication 0 drew the requests the
    real run sends): tries per request, and the stability verdict of a run with faults."""
    reps = report["per_replication"]
    out: Dict[str, Any] = {}
    if all("retries" in r for r in reps):
        out["attempts_per_request"] = [float(r["retries"]["attempts_per_request"]) for r in reps]
    if all("stability" in r for r in reps):
        out["recovered"] = [float(r["stability"]["recovered"]) for r in reps]
    return out


def series_changes(series: List[Dict[str, Any]]) -> List[Tuple[float, int]]:
    """(time, size) each time booting + up changed, from a per-second series."""
    out: List[Tuple[float, int]] = []
    for row in series:
        size = int(row["dynos_booting"]) + int(row["dynos_up"])
        if not out or out[-1][1] != size:
            out.append((float(row["time"]), size))
    return out


def compare(measured: Dict[str, Any], simulated: Dict[str, Any], interval: float) -> Dict[str, Any]:
    """Change by change (in order), the measured and simulated times of the fleet's size
    changes, each within one interval or not; minute by minute, the p95s and their relative
    differences to the simulation's mean over its replications and to its replication 0, which
    drew the requests sent (the same traffic: that one is held to :data:`P95_TOLERANCE`)."""
    real = [(float(t), int(n)) for t, n in measured["changes"]]
    sim = [(float(t), int(n)) for t, n in simulated["changes"]]
    changes = []
    for k in range(max(len(real), len(sim))):
        r = real[k] if k < len(real) else None
        s = sim[k] if k < len(sim) else None
        ok = r is not None and s is not None and r[1] == s[1] and abs(r[0] - s[0]) <= interval
        changes.append({"measured": r[0] if r else None, "simulated": s[0] if s else None,
                        "measured_size": r[1] if r else None, "simulated_size": s[1] if s else None,
                        "within_interval": ok})
    minutes = []
    for m, s in zip(measured["per_minute"], simulated["per_minute"]):
        def rel(sim: Optional[float]) -> Optional[float]:
            return None if m["p95"] is None or not sim else (m["p95"] - sim) / sim

        paired = rel(s["paired"])
        minutes.append({"minute": m["minute"], "measured": m["p95"], "simulated": s["p95"], "difference": rel(s["p95"]),
                        "paired": s["paired"], "paired_difference": paired,
                        "within": paired is not None and abs(paired) <= P95_TOLERANCE})
    doc: Dict[str, Any] = {"changes": changes, "per_minute": minutes,
                           "fleet_agrees": bool(changes) and all(c["within_interval"] for c in changes),
                           # None: not compared (a run with faults has no minute windows).
                           "p95_agrees": (all(m["within"] for m in minutes) if minutes else None)}
    sims = simulated.get("attempts_per_request")
    if sims and measured.get("attempts_per_request") is not None:
        doc["attempts_per_request"] = one_run_against_replications(float(measured["attempts_per_request"]), sims)
    recovered = simulated.get("recovered")
    if recovered and measured.get("stability") is not None:
        fraction = sum(recovered) / len(recovered)
        verdict = float(measured["stability"]["recovered"])
        # A verdict is held to the replications' only where theirs is clear.
        clear = fraction <= STABILITY_CLEAR or fraction >= 1 - STABILITY_CLEAR
        doc["stability"] = {"measured": verdict, "simulated": fraction, "paired": recovered[0],
                            "agrees": (verdict == float(fraction >= 0.5)) if clear else None}
    return doc


#: A stability verdict is compared with the simulation's where at most this fraction of its
#: replications went the other way.
STABILITY_CLEAR = 0.1


def one_run_against_replications(measured: float, simulated: List[float]) -> Dict[str, Any]:
    """One real run's figure against the replications' values of it (index 0 drew the real
    run's requests): their mean and standard deviation, the real run's distance from the mean
    in standard deviations (a run is one draw, so its spread is the replications' own), and
    whether it lies within three of them."""
    n = len(simulated)
    mean = sum(simulated) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in simulated) / (n - 1)) if n > 1 else 0.0
    z = (measured - mean) / sd if sd > 0 else (0.0 if measured == mean else math.inf)
    return {"measured": measured, "simulated": mean, "sd": sd, "paired": simulated[0], "z": z,
            "within": abs(z) <= 3.0}

