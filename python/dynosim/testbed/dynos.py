"""The testbed's dynos: one real app server per simulated dyno, on its own loopback port,
with the scenario's workers, threads and worker class, optionally pinned to CPU cores.

``app.server = "puma"`` and ``"unicorn"`` run the real Ruby server with the Rack app
``app.ru`` (app.py's protocol), from a config file written for each dyno:

- Puma (threaded or sync model): ``workers P`` (``workers 0``, single mode, for one process,
  as Puma itself advises), ``threads T, T``, bound to 127.0.0.1 with the backlog;
- Unicorn (sync model): ``worker_processes P``, ``listen`` with the backlog, ``timeout`` from
  app.timeout (Unicorn's floor is 3 s), TERM made graceful (the usual recipe on Heroku).

Both start from ``ruby``'s own executable scripts, load the app after forking, and stop on
SIGTERM finishing their requests. A Ruby server that is not installed is refused in one line
before anything starts (``run.check_tools``); a model the Ruby server has not (Puma async, Unicorn threaded) runs
as gunicorn, with a warning. Every other server runs as gunicorn:

- ``sync`` model (Unicorn, gunicorn sync, thin): ``--worker-class sync --workers P``;
- ``threaded`` (gthread, Puma): ``--worker-class gthread --workers P --threads T``;
- ``async`` (gevent): ``--worker-class gevent --workers P --worker-connections C``;
- a ``[service]`` scenario's dyno with S slots: S sync workers (the seed study's Unicorn
  workers), each request holding its worker for the drawn time.

A gunicorn dyno runs CPython, a Ruby one CRuby: both have an interpreter lock, so a scenario
without one (``app.lock = false``) and CPU work on more than one thread per process is run
anyway, with a warning that the machine cannot honour it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from .procs import Supervisor, TestbedError

#: The Rack app the Ruby servers run (shipped beside this module).
RACK_APP = Path(__file__).with_name("app.ru")
#: The Ruby servers the testbed runs for real, and the models each has.
RUBY_SERVERS = {"puma": ("threaded", "sync"), "unicorn": ("sync",)}


@dataclass
class DynoPlan:
    """How to start each dyno."""

    dynos: int
    worker_class: str
    workers: int
    threads: int = 1
    worker_connections: int = 1000
    cpus: List[Optional[List[int]]] = field(default_factory=list)
    resources: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    #: gunicorn's --timeout (app.timeout, whole seconds); 0: none.
    worker_timeout: int = 0
    #: app.wait_timeout, s (Rack::Timeout's, in the testbed's own app): a request older than
    #: this by its X-Request-Start when a worker takes it is answered 503 unserved; None: off.
    wait_timeout: Optional[float] = None
    #: app.service_timeout, s (Rack::Timeout's, in the testbed's own app): a request's work
    #: stops this long after its worker took it, answered 500; None: off.
    service_timeout: Optional[float] = None
    #: gunicorn's --backlog (app.backlog; gunicorn's default otherwise).
    backlog: int = 2048
    #: Whether the run has faults ([[faults]]) for the app to read: without, the app is not
    #: given the faults file and looks for no windows.
    faults: bool = False
    #: The dynos' environment beyond the testbed's own: NAME → value, or None to unset NAME
    #: (``dynosim testbed replay``'s configurations, e.g. MALLOC_ARENA_MAX). Applied by env(1)
    #: in front of gunicorn, which execs it: the master (and the workers it forks) start with
    #: it, before glibc's malloc reads its settings.
    env: Dict[str, Optional[str]] = field(default_factory=dict)
    #: gunicorn's --graceful-timeout, whole seconds: how long its workers have to finish their
    #: requests after SIGTERM before the master kills them (fleet.shutdown_grace for an
    #: autoscaled fleet; 1 s, a quick stop, otherwise).
    graceful_timeout: int = 1
    #: The real server: "gunicorn", or a Ruby server ("puma", "unicorn") running app.ru.
    server: str = "gunicorn"
    #: The services the app calls (docs/testbed.md, "Services that call services"): name →
    #: its HAProxy's port on loopback, set when they have started; and a call's socket
    #: timeout when its phase gives none, s (the run's bound).
    services: Dict[str, int] = field(default_factory=dict)
    call_timeout: Optional[float] = None
    #: Each worker opens one connection of each resource's pool before it says it is ready
    #: (a service's dynos: PostgreSQL's backend start, a few hundred ms on a busy machine,
    #: would otherwise land on the first call each worker serves, a cost the simulation has
    #: not; a fleet of its own keeps today's pools, opened on demand).
    warm_pools: bool = False

    def argv(self, port: int, config: Optional[Path] = None) -> List[str]:
        """The command line for a dyno on `port`; a Ruby server's reads `config`
        (:meth:`ruby_config`, written by :func:`spawn_dyno`)."""
        if self.server in RUBY_SERVERS:
            exe = shutil.which(self.server) or self.server
            if self.server == "puma":
                return self.env_prefix() + [exe, "--config", str(config), str(RACK_APP)]
            return self.env_prefix() + [exe, "--config-file", str(config), "--env", "production", str(RACK_APP)]
        argv = self.env_prefix() + [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
                "--worker-class", self.worker_class, "--workers", str(self.workers),
                # The scenario's app.timeout (0: none); a quick stop.
                "--timeout", str(self.worker_timeout), "--graceful-timeout", str(self.graceful_timeout),
                "--log-level", "warning",
                "--backlog", str(self.backlog)]
        if self.worker_class == "gthread":
            argv += ["--threads", str(self.threads)]
        if self.worker_class == "gevent":
            argv += ["--worker-connections", str(self.worker_connections)]
        return argv + ["dynosim.testbed.app:app"]

    def ruby_config(self, port: int) -> str:
        """The Ruby server's config file for a dyno on `port`."""
        if self.server == "puma":
            # One process: single mode (a cluster of one worker is a master more, which Puma
            # warns is "often a misconfiguration"). No preloading: each worker loads the app
            # itself, after forking, and writes its own ready file and work log.
            lines = [f"workers {self.workers if self.workers > 1 else 0}",
                     f"threads {self.threads}, {self.threads}",
                     f'bind "tcp://127.0.0.1:{port}?backlog={self.backlog}"',
                     'environment "production"',
                     "preload_app! false",
                     "quiet",
                     # Puma retitles its processes with the tag: say whose they are.
                     'tag "dynosim-testbed"',
                     # A quick stop (or fleet.shutdown_grace), as gunicorn's --graceful-timeout.
                     f"force_shutdown_after {self.graceful_timeout}",
                     f"worker_shutdown_timeout {self.graceful_timeout}"]
            return "\n".join(lines) + "\n"
        # Unicorn's timeout is at least 3 s, at most 30 days (none: the most it takes).
        timeout = max(3, self.worker_timeout) if self.worker_timeout else 30 * 24 * 3600
        return "\n".join([
            f"worker_processes {self.workers}",
            f'listen "127.0.0.1:{port}", backlog: {self.backlog}',
            f"timeout {timeout}",
            "preload_app false",
            # TERM (a dyno's stop on Heroku, the testbed's stop) as QUIT, a graceful stop, in
            # the master (Unicorn's own TERM kills the workers at once); the workers wait for
            # the master's QUIT. The usual recipe for Unicorn on Heroku.
            "before_fork { |server, worker| Signal.trap('TERM') { Process.kill('QUIT', Process.pid) } }",
            "after_fork { |server, worker| Signal.trap('TERM') {} }",
        ]) + "\n"

    def env_prefix(self) -> List[str]:
        """``env -u NAME ... NAME=VALUE ...`` for :attr:`env`; nothing when it is empty."""
        if not self.env:
            return []
        prefix = [shutil.which("env") or "/usr/bin/env"]
        for name, value in self.env.items():
            if value is None:
                prefix += ["-u", name]
        return prefix + [f"{name}={value}" for name, value in self.env.items() if value is not None]


def plan_dynos(described: Dict[str, Any], has_phases: bool, cpu_work: bool, machine_cpus: List[int],
               warnings: List[str]) -> DynoPlan:
    """The gunicorn settings for a scenario as the engine described it (Scenario.describe)."""
    app = described["app"]
    dynos = int(described["dynos"])
    if not has_phases:
        plan = DynoPlan(dynos, "sync", int(described["slots"]))
    elif app["model"] == "sync":
        plan = DynoPlan(dynos, "sync", int(app["processes"]))
    elif app["model"] == "threaded":
        plan = DynoPlan(dynos, "gthread", int(app["processes"]), threads=int(app["per_process"]))
    else:
        plan = DynoPlan(dynos, "gevent", int(app["processes"]), worker_connections=int(app["per_process"]))
    server = app["server"]
    if has_phases and app["model"] in RUBY_SERVERS.get(server, ()):
        plan.server = server
        plan.worker_class = server
    elif server in RUBY_SERVERS and has_phases:
        warnings.append(f"app.server = {server} has no {app['model']} model; it runs as gunicorn "
                        f"{plan.worker_class} workers")
    elif server not in ("gunicorn", "generic"):
        warnings.append(f"app.server = {server} runs as gunicorn {plan.worker_class} workers "
                        f"(the same {'sync' if not has_phases else app['model']} model)")
    interpreter = "CRuby, whose threads share the GVL" if plan.server in RUBY_SERVERS else \
        "CPython, whose threads share an interpreter lock"
    if cpu_work and app["lock"] in (False, "none") and plan.worker_class not in ("sync", "unicorn") \
            and plan.threads * plan.worker_connections > 1:
        warnings.append(f"cannot honour app.lock = false: the testbed's workers are {interpreter}")
    cores = int(described["cores"])
    if cpu_work:
        # Pin each dyno to its own cores while the machine has them, then round again.
        wanted = cores * dynos
        if wanted > len(machine_cpus):
            warnings.append(f"cannot honour the dynos' cores: {dynos} dyno(s) x {cores} core(s) = {wanted}, "
                            f"this machine has {len(machine_cpus)}; dynos share cores")
        plan.cpus = [[machine_cpus[(d * cores + c) % len(machine_cpus)] for c in range(cores)]
                     for d in range(dynos)]
        warnings.append("the load generator, HAProxy and PostgreSQL share the dynos' cores")
    else:
        plan.cpus = [None] * dynos
    return plan


#: The slowdowns' windows, in the supervisor's directory (see dynosim.testbed.app).
FAULTS_FILE = "faults.json"


def write_faults(directory: Path, faults: List[Dict[str, Any]], start: float) -> None:
    """The plan's faults (`faults`: {"at", "for", "kind", "factor", "target"}, seconds from the run's
    start) as wall-clock windows for a run starting at `start` (Unix seconds), written
    atomically for the app to read."""
    windows = [{"from": start + f["at"], "until": start + f["at"] + f["for"], "kind": f["kind"],
                "factor": f["factor"], "target": f["target"]} for f in faults]
    path = Path(directory) / FAULTS_FILE
    part = path.with_suffix(".part")
    part.write_text(json.dumps(windows))
    os.replace(part, path)


def spawn_dyno(supervisor: Supervisor, plan: DynoPlan, d: int, port: int, dsn: str, ready_dir: Path,
               work_dir: Path) -> "subprocess.Popen[bytes]":
    """Starts dyno `d`'s gunicorn on `port` (without waiting for it): its workers write a file
    each in `ready_dir` once they have loaded the app, and their work logs in `work_dir`."""
    config = {"dyno": d, "dsn": dsn, "resources": plan.resources, "ready_dir": str(ready_dir),
              "work_dir": str(work_dir),
              "faults_file": str(supervisor.workdir / FAULTS_FILE) if plan.faults else None,
              "wait_timeout": plan.wait_timeout, "service_timeout": plan.service_timeout,
              **({"services": plan.services, "call_timeout": plan.call_timeout} if plan.services else {}),
              **({"warm_pools": True} if plan.warm_pools else {})}
    env = dict(os.environ, DYNOSIM_TESTBED=json.dumps(config), PYTHONUNBUFFERED="1")
    config_file = None
    if plan.server in RUBY_SERVERS:
        config_file = supervisor.workdir / f"dyno{d}-{plan.server}.rb"
        config_file.write_text(plan.ruby_config(port))
        env["RACK_ENV"] = "production"
    cpus = plan.cpus[d % len(plan.cpus)] if plan.cpus else None
    return supervisor.spawn(plan.argv(port, config_file), name=f"dyno {d} ({plan.server})", env=env, cpus=cpus,
                            log=supervisor.workdir / f"dyno{d}.log", stop_signal=signal.SIGTERM)


class Dynos:
    """The running dynos: ``ports[i]`` is dyno i's."""

    def __init__(self, supervisor: Supervisor, plan: DynoPlan, ports: List[int], dsn: str,
                 timeout: float = 60.0) -> None:
        self.supervisor = supervisor
        self.ports = ports
        # Its own ready directory: another set of dynos under the same supervisor (numbered from
        # 0 too) must not count as these being ready.
        ready_dir = Path(tempfile.mkdtemp(prefix="ready-", dir=supervisor.workdir))
        #: Where each worker writes its file (dyno-pid) once it has loaded the app.
        self.ready_dir = ready_dir
        #: The app's work logs (dynosim.testbed.app), one file per worker: read_work(work_dir).
        self.work_dir = supervisor.workdir / "work"
        self.work_dir.mkdir(exist_ok=True)
        self.processes = [spawn_dyno(supervisor, plan, d, port, dsn, ready_dir, self.work_dir)
                          for d, port in enumerate(ports)]
        deadline = time.monotonic() + timeout
        for proc, port in zip(self.processes, ports):
            supervisor.wait_for_port(port, proc, max(1.0, deadline - time.monotonic()))
        # Every worker has loaded the app once it has written its ready file.
        while True:
            ready = [len(list(ready_dir.glob(f"{d}-*"))) for d in range(len(ports))]
            if all(n >= plan.workers for n in ready):
                break
            for d, proc in enumerate(self.processes):
                if proc.poll() is not None:
                    raise TestbedError(f"dyno {d} ({plan.server}) exited with status {proc.returncode} while starting; "
                                       f"see {supervisor.workdir / f'dyno{d}.log'}")
            if time.monotonic() > deadline:
                raise TestbedError(f"the dynos' workers did not all start within {timeout:.0f} s "
                                   f"(ready per dyno: {ready}, want {plan.workers})")
            time.sleep(0.05)

    def finish_work(self, ids: List[str], limit: float) -> None:
        """Waits (at most `limit` s) until the app has ended every request of `ids`: requests
        the router or the client gave up on, which the dynos work on after the load generator
        is done; stopping the dynos earlier would cut that work short."""
        deadline = time.monotonic() + max(0.0, limit)
        while ids and time.monotonic() < deadline:
            work = read_work(self.work_dir)
            if all((work.get(i) or {}).get("end") is not None for i in ids):
                return
            if any(proc.poll() is not None for proc in self.processes):
                return
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in reversed(self.processes):
            self.supervisor.stop(proc)


def read_work(directory: Path) -> Dict[str, Dict[str, Any]]:
    """The app's work logs (see dynosim.testbed.app) by request id: {id: {"dyno": int, "pid":
    int, "start": s, "end": s or None}} in Unix seconds; ``end`` is None when the worker never
    finished the request (gunicorn killed it). A request begun twice (it cannot be, as the
    router never resends) keeps its first start. Lines cut short are skipped."""
    out: Dict[str, Dict[str, Any]] = {}
    for path in sorted(Path(directory).glob("*-*.log")):
        dyno, _, pid = path.stem.partition("-")
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) != 3 or parts[0] not in ("s", "e"):
                continue
            try:
                when = float(parts[2])
            except ValueError:
                continue
            entry = out.setdefault(parts[1], {"dyno": int(dyno), "pid": int(pid), "start": None, "end": None})
            if parts[0] == "s" and entry["start"] is None:
                entry["start"] = when
            elif parts[0] == "e" and entry["end"] is None:
                entry["end"] = when
    return {k: v for k, v in out.items() if v["start"] is not None}
