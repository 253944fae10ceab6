"""The testbed's dynos: one real gunicorn master per simulated dyno, on its own loopback port,
with the scenario's workers, threads and worker class, optionally pinned to CPU cores.

How a scenario's app server becomes gunicorn (docs/testbed.md):

- ``sync`` model (Unicorn, gunicorn sync, thin): ``--worker-class sync --workers P``;
- ``threaded`` (gthread, Puma): ``--worker-class gthread --workers P --threads T``;
- ``async`` (gevent): ``--worker-class gevent --workers P --worker-connections C``;
- a ``[service]`` scenario's dyno with S slots: S sync workers (the seed study's Unicorn
  workers), each request holding its worker for the drawn time.

Every dyno runs CPython, which has an interpreter lock; a scenario without one
(``app.lock = false``) and CPU work on more than one thread per process is run anyway, with a
warning that the machine cannot honour it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from .procs import Supervisor, TestbedError


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
    #: gunicorn's --backlog (app.backlog; gunicorn's default otherwise).
    backlog: int = 2048
    #: The dynos' environment beyond the testbed's own: NAME → value, or None to unset NAME
    #: (``dynosim testbed replay``'s configurations, e.g. MALLOC_ARENA_MAX). Applied by env(1)
    #: in front of gunicorn, which execs it: the master (and the workers it forks) start with
    #: it, before glibc's malloc reads its settings.
    env: Dict[str, Optional[str]] = field(default_factory=dict)
    #: gunicorn's --graceful-timeout, whole seconds: how long its workers have to finish their
    #: requests after SIGTERM before the master kills them (fleet.shutdown_grace for an
    #: autoscaled fleet; 1 s, a quick stop, otherwise).
    graceful_timeout: int = 1

    def argv(self, port: int) -> List[str]:
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
    if app["server"] not in ("gunicorn", "generic"):
        warnings.append(f"app.server = {app['server']} runs as gunicorn {plan.worker_class} workers "
                        f"(the same {app['model']} model)")
    if cpu_work and app["lock"] == "none" and plan.worker_class != "sync" and plan.threads * plan.worker_connections > 1:
        warnings.append("cannot honour app.lock = false: the testbed's workers are CPython, whose threads "
                        "share an interpreter lock")
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


def spawn_dyno(supervisor: Supervisor, plan: DynoPlan, d: int, port: int, dsn: str, ready_dir: Path,
               work_dir: Path) -> "subprocess.Popen[bytes]":
    """Starts dyno `d`'s gunicorn on `port` (without waiting for it): its workers write a file
    each in `ready_dir` once they have loaded the app, and their work logs in `work_dir`."""
    config = {"dyno": d, "dsn": dsn, "resources": plan.resources, "ready_dir": str(ready_dir),
              "work_dir": str(work_dir)}
    env = dict(os.environ, DYNOSIM_TESTBED=json.dumps(config), PYTHONUNBUFFERED="1")
    cpus = plan.cpus[d % len(plan.cpus)] if plan.cpus else None
    return supervisor.spawn(plan.argv(port), name=f"dyno {d} (gunicorn)", env=env, cpus=cpus,
                            log=supervisor.workdir / f"dyno{d}.log", stop_signal=signal.SIGTERM)


class Dynos:
    """The running dynos: ``ports[i]`` is dyno i's."""

    def __init__(self, supervisor: Supervisor, plan: DynoPlan, ports: List[int], dsn: str,
                 timeout: float = 60.0) -> None:
        self.supervisor = supervisor
        self.ports = ports
        ready_dir = supervisor.workdir / "ready"
        ready_dir.mkdir(exist_ok=True)
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
                    raise TestbedError(f"dyno {d} (gunicorn) exited with status {proc.returncode} while starting; "
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
