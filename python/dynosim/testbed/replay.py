"""A router log replayed against the real testbed under several app-server configurations
(``dynosim testbed replay``): the heroku-cedar14-memory-use seed's experiment on one machine.

Each configuration (its dynos, gunicorn workers, threads, worker class and environment, such
as ``MALLOC_ARENA_MAX``) gets a fresh stack: one gunicorn per dyno behind HAProxy on
loopback. Every logged request with a service time becomes one request to it, sent at its
logged arrival (the line's time less its connect and service times, as ``dynosim logs
replay`` reads it; ``window``, ``speed`` and ``limit`` keep it laptop-sized), and the app
performs the logged service time as a wait (``work="io"``) or as computation (``"cpu"``),
optionally allocating memory in the thread that serves it (``alloc``, ``keep``). Meanwhile a
thread samples the resident memory of every gunicorn process (master and workers) from
/proc. The configurations run one after another on the same requests, and each is reported
against the baseline as the seed's table is: memory ×, median response ×, p95 response ×.

The environment: a variable that any configuration sets is set as given in that one and
*unset* in every other (rather than inherited from dynosim's own environment), so that a
baseline that says nothing of ``MALLOC_ARENA_MAX`` runs glibc's default even from a shell that
exports it. The workers' actual environment is read back from /proc (``environment`` in each
result).

docs/testbed.md ("Replaying a log") says what is measured and assumed.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .. import _dynosim
from ..errors import DynosimError, LogError
from ..logs.reading import PathLike, call, log_names, parse_window
from . import measure
from .dynos import DynoPlan, Dynos
from .plan import MAX_DYNOS, MAX_PROCESSES, MAX_REQUESTS, MAX_SECONDS
from .procs import Supervisor, free_ports
from .router import SUPPORTED, Router, RouterPlan, balance, read_log
from .tools import missing
from .watchdog import group_members, processes

__all__ = ["AppConfig", "parse_config", "load_configs", "replay", "write_records", "MAX_CONFIGS"]

#: At most this many configurations in one replay (each replays the whole trace).
MAX_CONFIGS = 16
#: Each configuration runs at most this many times (``rounds``).
MAX_ROUNDS = 20
#: ``alloc``: at most this many bytes per request (the app's own bound).
MAX_ALLOC = 256 * 1024 * 1024
#: HAProxy's ``timeout server``: Heroku's router answers H12 after 30 s.
ROUTER_TIMEOUT = 30.0
#: Past the trace's last arrival and longest service, before the run is cut.
DEADLINE_MARGIN = 60.0
WORKER_CLASSES = ("sync", "gthread", "gevent")
KEYS = ("dynos", "workers", "threads", "class", "connections", "env")
WORK = ("io", "cpu")

_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,40}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Response headers the load generator keeps (see dynosim.testbed.app).
CAPTURE = ["x-dynosim-start", "x-dynosim-end", "x-dynosim-dyno", "x-dynosim-pid", "x-dynosim-rss"]


@dataclass
class AppConfig:
    """One app-server configuration: ``dynos`` gunicorn masters, each with ``workers``
    processes of ``threads`` threads (``worker_class`` "" picks gthread when threads > 1, else
    sync; gevent takes ``connections``), started with ``env`` (NAME → value)."""

    name: str
    dynos: int = 1
    workers: int = 1
    threads: int = 1
    worker_class: str = ""
    connections: int = 1000
    env: Dict[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.worker_class or ("gthread" if self.threads > 1 else "sync")

    @property
    def slots(self) -> int:
        """Requests one dyno serves at once."""
        per = self.connections if self.kind == "gevent" else self.threads
        return self.workers * per

    def describe(self) -> str:
        """``2 × gthread 5 threads, MALLOC_ARENA_MAX=2``: the configuration in one line."""
        if self.kind == "gevent":
            text = f"{self.workers} × gevent {self.connections} connections"
        elif self.kind == "gthread":
            text = f"{self.workers} × gthread {self.threads} thread{'s' if self.threads > 1 else ''}"
        else:
            text = f"{self.workers} × sync"
        if self.dynos > 1:
            text = f"{self.dynos} dynos of {text}"
        return ", ".join([text] + [f"{k}={v}" for k, v in self.env.items()])

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "dynos": self.dynos, "workers": self.workers, "threads": self.threads,
                "class": self.kind, "connections": self.connections if self.kind == "gevent" else None,
                "env": dict(self.env)}


# --- configurations ---------------------------------------------------------------------------


def _whole(value: Any, key: str, where: str, file: Optional[str], low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise DynosimError(f"expected a whole number from {low} to {high}, got {value!r}", file=file,
                           path=f"{where}{key}")
    try:
        n = int(value)
    except ValueError:
        raise DynosimError(f"expected a whole number from {low} to {high}, got {value!r}", file=file,
                           path=f"{where}{key}") from None
    if not low <= n <= high:
        raise DynosimError(f"expected a whole number from {low} to {high}, got {n}", file=file, path=f"{where}{key}")
    return n


def _build(name: str, settings: Mapping[str, Any], env: Mapping[str, Any], file: Optional[str],
           where: str) -> AppConfig:
    """A configuration from its settings, checked; errors name `file` and `where` + key."""
    if not _NAME.match(name):
        raise DynosimError(f"a configuration's name is 1 to 40 letters, digits or _.+- , got {name!r}", file=file,
                           path=where.rstrip(".") or "name")
    for key in settings:
        if key not in KEYS:
            raise DynosimError(f"unknown key; expected one of: {', '.join(KEYS)}", file=file, path=f"{where}{key}")
    config = AppConfig(name)
    config.dynos = _whole(settings.get("dynos", 1), "dynos", where, file, 1, MAX_DYNOS)
    config.workers = _whole(settings.get("workers", 1), "workers", where, file, 1, MAX_PROCESSES)
    config.threads = _whole(settings.get("threads", 1), "threads", where, file, 1, 1000)
    kind = settings.get("class", "")
    if kind not in ("",) + WORKER_CLASSES:
        raise DynosimError(f"expected one of: {', '.join(WORKER_CLASSES)}, got {kind!r}", file=file,
                           path=f"{where}class")
    config.worker_class = str(kind)
    if config.kind == "sync" and config.threads > 1:
        raise DynosimError(f"a sync worker has one thread, got threads = {config.threads} (class = \"gthread\" "
                           "for threads)", file=file, path=f"{where}class")
    if config.kind == "gevent" and config.threads > 1:
        raise DynosimError("a gevent worker has no threads: set connections", file=file, path=f"{where}threads")
    if "connections" in settings:
        if config.kind != "gevent":
            raise DynosimError("connections is for class = \"gevent\" only", file=file, path=f"{where}connections")
        config.connections = _whole(settings["connections"], "connections", where, file, 1, 100_000)
    if config.dynos * config.workers > MAX_PROCESSES:
        raise DynosimError(f"the testbed runs at most {MAX_PROCESSES} worker processes; {config.dynos} dynos x "
                           f"{config.workers} = {config.dynos * config.workers}", file=file, path=f"{where}workers")
    for var, value in env.items():
        if not _ENV_NAME.match(var):
            raise DynosimError(f"an environment variable's name is letters, digits and _, not starting with a "
                               f"digit, got {var!r}", file=file, path=f"{where}env")
        if var.startswith("DYNOSIM_"):
            raise DynosimError(f"{var} is the testbed's own", file=file, path=f"{where}env.{var}")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise DynosimError(f"expected a string, got {value!r}", file=file, path=f"{where}env.{var}")
        text = str(value)
        if "\0" in text:
            raise DynosimError("a NUL byte in the value", file=file, path=f"{where}env.{var}")
        config.env[var] = text
    return config


def parse_config(text: str) -> AppConfig:
    """One ``--config``: ``NAME: key=value ...``. Keys: ``dynos``, ``workers``, ``threads``,
    ``class`` (sync, gthread, gevent), ``connections`` (gevent) and ``env=NAME=VALUE``
    (repeatable); e.g. ``"arena2: workers=2 threads=5 env=MALLOC_ARENA_MAX=2"``. Every key may
    be left out (one dyno, one sync worker, nothing added to the environment)."""
    where_file = f"--config {text!r}"
    head, sep, body = text.partition(":")
    if not sep or "=" in head:
        raise DynosimError("expected NAME: key=value ... (keys: " + ", ".join(KEYS) + ")", file=where_file)
    name = head.strip()
    settings: Dict[str, Any] = {}
    env: Dict[str, str] = {}
    tokens = body.split()
    for token in tokens:
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise DynosimError(f"expected key=value, got {token!r}", file=where_file)
        if key == "env":
            var, eq, val = value.partition("=")
            if not eq:
                raise DynosimError(f"expected env=NAME=VALUE, got {token!r}", file=where_file)
            if var in env:
                raise DynosimError(f"env {var} given twice", file=where_file)
            env[var] = val
        elif key in settings:
            raise DynosimError(f"{key} given twice", file=where_file)
        else:
            settings[key] = value
    return _build(name, settings, env, where_file, "")


def load_configs(path: PathLike) -> Tuple[List[AppConfig], Optional[str]]:
    """The configurations of a TOML file, in its order, and its ``baseline`` (None: the
    first)::

        baseline = "default"          # optional
        [configs.default]
        workers = 2
        threads = 5
        [configs.arena1]
        workers = 2
        threads = 5
        env = { MALLOC_ARENA_MAX = "1" }
    """
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DynosimError(f"cannot read: {getattr(e, 'strerror', None) or e}", file=file) from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DynosimError(f"not valid TOML: {e}", file=file) from None
    for key in doc:
        if key not in ("baseline", "configs"):
            raise DynosimError("unknown key; expected baseline or [configs.NAME] tables", file=file, path=key)
    tables = doc.get("configs")
    if not isinstance(tables, dict) or not tables:
        raise DynosimError("no configuration: expected [configs.NAME] tables", file=file, path="configs")
    configs = []
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise DynosimError("expected a table of settings", file=file, path=f"configs.{name}")
        env = table.get("env", {})
        if not isinstance(env, dict):
            raise DynosimError("expected a table of NAME = \"value\"", file=file, path=f"configs.{name}.env")
        settings = {k: v for k, v in table.items() if k != "env"}
        configs.append(_build(name, settings, env, file, f"configs.{name}."))
    baseline = doc.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise DynosimError(f"expected a configuration's name, got {baseline!r}", file=file, path="baseline")
    return configs, baseline


def _configs(configs: Union[PathLike, Sequence[Union[str, AppConfig]]],
             baseline: Optional[str]) -> Tuple[List[AppConfig], str]:
    """The configurations, checked together, and the baseline's name."""
    file_baseline: Optional[str] = None
    if isinstance(configs, (str, Path)):
        out, file_baseline = load_configs(configs)
    else:
        out = [c if isinstance(c, AppConfig) else parse_config(str(c)) for c in configs]
    if not out:
        raise DynosimError("no configuration to run: give --config (at least one) or --configs FILE.toml")
    if len(out) > MAX_CONFIGS:
        raise DynosimError(f"at most {MAX_CONFIGS} configurations in one replay, got {len(out)}")
    names = [c.name for c in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DynosimError(f"two configurations named {twice[0]!r}: each needs a name of its own (NAME: ...)")
    base = baseline if baseline is not None else file_baseline if file_baseline is not None else names[0]
    if base not in names:
        raise DynosimError(f"--baseline: no configuration named {base!r}; they are: {', '.join(names)}")
    return out, base


def environments(configs: Sequence[AppConfig]) -> List[Dict[str, Optional[str]]]:
    """Each configuration's environment for its dynos: every variable any configuration sets,
    as this one sets it or unset (None)."""
    managed = list(dict.fromkeys(var for c in configs for var in c.env))
    return [{var: c.env.get(var) for var in managed} for c in configs]


# --- the trace --------------------------------------------------------------------------------


def read_trace(paths: Union[PathLike, Sequence[PathLike]], *, format: str, log_format: Optional[str],
               host: Optional[str], window: Optional[str], speed: float, correct_queueing: bool,
               limit: Optional[int]) -> Tuple[Dict[str, Any], List[float], List[float]]:
    """The log's requests to replay: what was read (``dynosim logs replay``'s ``log``), their
    arrival times (s from the trace's start) and their service times, the first `limit`."""
    names = log_names(paths, format)
    start, end = parse_window(window)
    if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
        raise LogError(f"--speed: must be a positive number, got {speed!r}")
    with tempfile.TemporaryDirectory(prefix="dynosim-testbed-replay-") as tmp:
        trace = Path(tmp) / "requests.csv"
        log: Dict[str, Any] = json.loads(call(_dynosim.logs_trace, names, str(trace), format, log_format, host,
                                              start, end, float(speed), correct_queueing))
        arrivals: List[float] = []
        services: List[float] = []
        # One past the testbed's bound is enough to refuse a trace too long to send.
        cap = limit if limit is not None else MAX_REQUESTS + 1
        with open(trace, newline="") as f:
            rows = csv.reader(f)
            next(rows, None)
            for row in rows:
                if len(arrivals) >= cap:
                    break
                arrivals.append(float(row[0]))
                services.append(float(row[1]))
    if not arrivals:
        raise LogError("no request of the log to replay (none with a service time in the window)")
    return log, arrivals, services


def phases(service: float, work: str, alloc: int, keep: float) -> str:
    """The ``X-Dynosim-Phases`` of one replayed request (dynosim.testbed.app)."""
    spec = f"{work}:{service:.6f}"
    if alloc:
        spec = f"mem:{alloc}," + (f"keep:{keep:g}," if keep else "") + spec
    return spec


# --- memory -----------------------------------------------------------------------------------


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _pss(pid: int) -> Optional[int]:
    """Proportional set size (bytes): shared pages divided among the processes sharing them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _environ(pid: int, names: Sequence[str]) -> Optional[Dict[str, Optional[str]]]:
    """The variables `names` in the environment process `pid` started with (None: unset)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    found: Dict[str, Optional[str]] = {name: None for name in names}
    for entry in raw.split(b"\0"):
        name, _, value = entry.decode("utf-8", "surrogateescape").partition("=")
        if name in found:
            found[name] = value
    return found


class MemorySampler:
    """Samples the resident memory of each dyno's gunicorn processes (the master and its
    process group: the workers) every `every` seconds, in a thread of its own while the load
    runs (the load generator leaves the interpreter lock free). Each sample: the time, and per
    dyno the sum of the processes' RSS and of their PSS, and how many there were. Each worker's
    environment is read once (the variables `names`)."""

    def __init__(self, masters: Sequence[int], every: float, names: Sequence[str]) -> None:
        self.masters = list(masters)
        self.every = every
        self.names = list(names)
        self.samples: List[Dict[str, Any]] = []
        self.environ: Dict[int, Dict[str, Optional[str]]] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def sample(self) -> Dict[str, Any]:
        procs = processes()
        rss, pss, count = [], [], []
        for master in self.masters:
            members = [p.pid for p in group_members(master, procs)]
            r = [x for x in (_rss(pid) for pid in members) if x is not None]
            s = [x for x in (_pss(pid) for pid in members) if x is not None]
            rss.append(sum(r))
            pss.append(sum(s) if len(s) == len(r) else None)
            count.append(len(r))
            for pid in members:
                if pid != master and pid not in self.environ:
                    seen = _environ(pid, self.names)
                    if seen is not None:
                        self.environ[pid] = seen
        return {"t": time.time(), "rss": rss, "pss": pss, "processes": count}

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.sample())
            self._stop.wait(self.every)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dynosim-memory", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def memory_summary(idle: Dict[str, Any], samples: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The dynos' memory (bytes, all dynos together): before the traffic (``idle``), and the
    mean and peak over the samples taken while it ran; PSS None where /proc did not give it."""
    def stats(key: str) -> Dict[str, Optional[float]]:
        totals = [sum(s[key]) for s in samples if all(x is not None for x in s[key])]
        before = idle[key]
        return {"idle": float(sum(before)) if all(x is not None for x in before) else None,
                "mean": float(np.mean(totals)) if totals else None,
                "peak": float(np.max(totals)) if totals else None}

    per_dyno = [float(max((s["rss"][d] for s in samples), default=0)) for d in range(len(idle["rss"]))]
    return {"rss": stats("rss"), "pss": stats("pss"), "samples": len(samples),
            "processes": max((sum(s["processes"]) for s in samples), default=sum(idle["processes"])),
            "rss_peak_per_dyno": per_dyno}


# --- running ----------------------------------------------------------------------------------


def replay(
    paths: Union[PathLike, Sequence[PathLike]],
    configs: Union[PathLike, Sequence[Union[str, AppConfig]]],
    *,
    baseline: Optional[str] = None,
    format: str = "auto",
    log_format: Optional[str] = None,
    host: Optional[str] = None,
    window: Optional[str] = None,
    speed: float = 1.0,
    limit: Optional[int] = None,
    correct_queueing: bool = False,
    work: str = "io",
    alloc: int = 0,
    keep: float = 0.0,
    policy: str = "random",
    sample_every: float = 0.25,
    rounds: int = 1,
    progress: Callable[[str], None] = lambda message: None,
) -> Dict[str, Any]:
    """Replays router logs against the real testbed under each configuration (a TOML file of
    ``[configs.NAME]`` tables, or a list of ``"NAME: workers=2 threads=5 env=K=V"`` strings or
    :class:`AppConfig`), one after another, and reports each against ``baseline`` (default:
    the file's ``baseline``, else the first).

    The log is read as :func:`dynosim.logs.replay` reads it (``format``, ``log_format``,
    ``host``, ``window``, ``speed``, ``correct_queueing``), and its first ``limit`` requests
    are sent. The app performs each logged service time as a wait (``work="io"``) or as CPU
    (``"cpu"``); with ``alloc`` (bytes) each request first allocates that much in its thread,
    holds it while it works and frees it, but for a share ``keep`` kept in its worker's cache.
    HAProxy routes by ``policy`` (for more than one dyno). Memory is sampled every
    ``sample_every`` seconds. With ``rounds`` > 1 every configuration runs that many times,
    round after round; each result then pools its rounds, and ``vs_baseline_rounds`` has each
    round's ratios to the same round's baseline.

    Returns ``{"log", "settings", "baseline", "results": [one per configuration], "warnings"}``
    (docs/testbed.md); each result has ``_records``, the per-request rows (see
    :func:`write_records`)."""
    if work not in WORK:
        raise DynosimError(f"--work: expected one of: {', '.join(WORK)}, got {work!r}")
    if isinstance(alloc, bool) or not isinstance(alloc, int) or not 0 <= alloc <= MAX_ALLOC:
        raise DynosimError(f"--alloc: expected a size from 0 to {MAX_ALLOC // 2**20} MiB, got {alloc!r}")
    if not (isinstance(keep, (int, float)) and 0 <= keep <= 1):
        raise DynosimError(f"--keep: expected a share from 0 to 1, got {keep!r}")
    if keep and not alloc:
        raise DynosimError("--keep: keeps a share of what --alloc allocates; give --alloc too")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DynosimError(f"--limit: expected a whole number >= 1, got {limit!r}")
    # A log's requests carry no key (arrivals.keys) to hash: bounded_hash is not replayed.
    replayable = tuple(p for p in SUPPORTED if p != "bounded_hash")
    if policy not in replayable:
        raise DynosimError(f"--policy: {policy!r} is not replayed on HAProxy (a log's requests carry no key to hash "
                           f"for bounded_hash); the testbed replays {', '.join(replayable)}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise DynosimError(f"--rounds: expected a whole number from 1 to {MAX_ROUNDS}, got {rounds!r}")
    if not (isinstance(sample_every, (int, float)) and 0.01 <= sample_every <= 60):
        raise DynosimError(f"--sample-every: expected from 10ms to 60s, got {sample_every!r}")
    chosen, base = _configs(configs, baseline)
    log, arrivals, services = read_trace(paths, format=format, log_format=log_format, host=host, window=window,
                                         speed=speed, correct_queueing=correct_queueing, limit=limit)
    if len(arrivals) > MAX_REQUESTS:
        raise DynosimError(f"the testbed sends at most {MAX_REQUESTS:,} requests; the trace has {len(arrivals):,} "
                           "(use --limit, --window)")
    span = arrivals[-1]
    if span > MAX_SECONDS:
        raise DynosimError(f"the testbed replays at most {MAX_SECONDS:.0f} s of traffic per configuration; the "
                           f"trace lasts {span:.0f} s (use --window, --speed or --limit)")
    needed = ["haproxy", "gunicorn"] + (["gevent"] if any(c.kind == "gevent" for c in chosen) else [])
    absent = missing(needed)
    if absent:
        raise DynosimError("the testbed needs " + ", ".join(t.name for t in absent) + " (not found); install: "
                           + "; ".join(dict.fromkeys(t.install for t in absent)) + " (or: dynosim testbed --check)")

    requests = [(at, "/replay", {"X-Dynosim-Id": str(i), "X-Dynosim-Phases": phases(s, work, alloc, keep)})
                for i, (at, s) in enumerate(zip(arrivals, services))]
    warnings: List[str] = []
    managed = environments(chosen)
    if any(var.startswith("MALLOC_") for env in managed for var in env) and not alloc:
        warnings.append("the configurations differ in glibc malloc settings, but the replayed requests allocate "
                        "nothing of their own (--alloc): only the app server's own allocations can show it")
    if work == "cpu":
        warnings.append(f"--work cpu: the dynos' work shares this machine's {len(os.sched_getaffinity(0))} cores "
                        "with HAProxy, the load generator and each other")
    settings = {"work": work, "alloc": alloc, "keep": keep, "policy": policy, "window": window, "speed": speed,
                "limit": limit, "correct_queueing": correct_queueing, "sample_every": sample_every, "rounds": rounds,
                "router_timeout": ROUTER_TIMEOUT}
    runs: List[List[Dict[str, Any]]] = [[] for _ in chosen]
    # Round after round, every configuration once: a machine that gets busier or quieter
    # shifts every configuration alike, and the paired ratios of each round show the spread.
    for r in range(rounds):
        for k, (config, env) in enumerate(zip(chosen, managed)):
            def note(message: str, k: int = k, config: AppConfig = config, r: int = r) -> None:
                step = f"{k + 1} of {len(chosen)}" + (f", round {r + 1} of {rounds}" if rounds > 1 else "")
                progress(f"{config.name} ({step}): {message}")

            runs[k].append(run_config(config, env, requests, services, policy=policy, sample_every=sample_every,
                                      progress=note))
    b = [c.name for c in chosen].index(base)
    results = [combine(rounds_of) for rounds_of in runs]
    for result, rounds_of in zip(results, runs):
        result["vs_baseline"] = multipliers(result, results[b])
        if rounds > 1:
            paired = [multipliers(one, base_one) for one, base_one in zip(rounds_of, runs[b])]
            result["vs_baseline_rounds"] = {key: [m[key] for m in paired] for key in result["vs_baseline"]}
    return {"log": log, "replayed": len(requests), "settings": settings, "baseline": base, "results": results,
            "warnings": warnings}


def run_config(config: AppConfig, env: Dict[str, Optional[str]], requests: List[tuple], services: List[float], *,
               policy: str, sample_every: float, progress: Callable[[str], None]) -> Dict[str, Any]:
    """One configuration's run: a fresh stack, the requests, the memory sampled meanwhile."""
    wall0 = time.monotonic()
    plan = DynoPlan(config.dynos, config.kind, config.workers, threads=config.threads,
                    worker_connections=config.connections, cpus=[None] * config.dynos, env=dict(env))
    span = requests[-1][0]
    deadline = span + max(services) + DEADLINE_MARGIN
    router_plan = RouterPlan(policy, {}, config.slots, timeout=deadline, server_timeout=ROUTER_TIMEOUT)
    with Supervisor() as supervisor:
        ports = free_ports(config.dynos + 1)
        progress("starting gunicorn and HAProxy")
        dynos = Dynos(supervisor, plan, ports[1:], "")
        router = Router(supervisor, router_plan, ports[0], ports[1:])
        sampler = MemorySampler([p.pid for p in dynos.processes], sample_every, list(env))
        idle = sampler.sample()
        progress(f"sending {len(requests):,} requests over {span:,.0f} s")
        sampler.start()
        try:
            load = _dynosim.send_load(f"127.0.0.1:{ports[0]}", requests, "open", 0, [], ROUTER_TIMEOUT + 30.0,
                                      deadline, CAPTURE)
        finally:
            sampler.stop()
        progress("stopping")
        router.stop()
        dynos.stop()
        router_log = read_log(router.log)
    result = summarise(config, load, router_log, services, idle, sampler)
    result["haproxy"] = balance(policy, {}) + (f", maxconn {config.slots}" if policy == "intelligent" else "")
    result["wall_seconds"] = time.monotonic() - wall0
    return result


def summarise(config: AppConfig, load: Dict[str, Any], router_log: Dict[str, Dict[str, Any]],
              services: List[float], idle: Dict[str, Any], sampler: MemorySampler) -> Dict[str, Any]:
    """One configuration's figures and per-request records from what was sent and sampled."""
    n = len(services)
    sent = np.asarray(load["sent"], dtype=float)
    done = np.asarray(load["done"], dtype=float)
    status = np.asarray(load["status"], dtype=np.int64)
    start, end, _ = measure.app_times(load)
    worker_rss = measure.floats(load["headers"]["x-dynosim-rss"])
    ok = (status == 200) & np.isfinite(done)
    kinds: Dict[str, int] = {}
    for k in np.nonzero(~ok)[0]:
        kind = str(status[k]) if status[k] > 0 else (load["error"][k] or "no answer")
        kinds[kind] = kinds.get(kind, 0) + 1
    if load["unsent"]:
        kinds["unsent"] = int(load["unsent"])
    response = done[ok] - sent[ok]
    served = np.isfinite(start) & np.isfinite(end) & ok
    # What the workers' environment held, per variable: the values seen (None: unset).
    seen: Dict[str, List[Optional[str]]] = {}
    for values in sampler.environ.values():
        for var, value in values.items():
            if value not in seen.setdefault(var, []):
                seen[var].append(value)
    warnings = []
    lateness = measure.lateness_summary(load)
    shortest = float(min(services)) if services else 0.0
    if lateness["p99"] > max(0.25 * shortest, 0.005):
        warnings.append(f"the load generator fell behind: p99 lateness {lateness['p99'] * 1e3:.1f} ms")
    errors = n - int(np.sum(ok))
    if errors:
        warnings.append(f"{errors:,} of {n:,} requests had no 200 answer: "
                        + ", ".join(f"{k} × {v:,}" for k, v in sorted(kinds.items())))
    result = {
        "config": config.name,
        "settings": config.to_dict(),
        "describe": config.describe(),
        "requests": n,
        "answered": int(np.sum(ok)),
        "errors": errors,
        "error_kinds": kinds,
        "response": measure.time_summary(response),
        "service": measure.time_summary(end[served] - start[served]),
        "memory": memory_summary(idle, sampler.samples),
        "worker_rss": {"mean": float(np.mean(worker_rss[ok & np.isfinite(worker_rss)]))
                       if np.any(ok & np.isfinite(worker_rss)) else None,
                       "max": float(np.max(worker_rss[ok & np.isfinite(worker_rss)]))
                       if np.any(ok & np.isfinite(worker_rss)) else None},
        "environment": seen,
        "lateness": lateness,
        "router_log_lines": len(router_log),
        "warnings": warnings,
        "_records": records(config, load, services),
    }
    return result


def combine(rounds: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One configuration's result from its rounds: counts summed; response and service
    percentiles over every round's requests together; memory: the rounds' mean of ``idle`` and
    ``mean``, the highest ``peak``; the worst round's lateness; ``per_round``, each round's
    main figures; the records of every round, numbered (``round``, from 1)."""
    rows = [dict(row, round=r + 1) for r, one in enumerate(rounds) for row in one["_records"]]
    if len(rounds) == 1:
        out = dict(rounds[0], _records=rows, rounds=1)
        return out
    first = rounds[0]
    kinds: Dict[str, int] = {}
    for one in rounds:
        for kind, n in one["error_kinds"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    ok = [row for row in rows if row["status"] == 200 and row["response"] != ""]
    served = [row for row in ok if row["app_start"] != "" and row["app_end"] != ""]
    seen: Dict[str, List[Optional[str]]] = {}
    for one in rounds:
        for var, values in one["environment"].items():
            seen.setdefault(var, [])
            seen[var] += [v for v in values if v not in seen[var]]

    def mean_of(values: List[Optional[float]]) -> Optional[float]:
        known = [v for v in values if v is not None]
        return float(np.mean(known)) if len(known) == len(values) and known else None

    def peak_of(values: List[Optional[float]]) -> Optional[float]:
        known = [v for v in values if v is not None]
        return float(max(known)) if known else None

    memory = {kind: {"idle": mean_of([one["memory"][kind]["idle"] for one in rounds]),
                     "mean": mean_of([one["memory"][kind]["mean"] for one in rounds]),
                     "peak": peak_of([one["memory"][kind]["peak"] for one in rounds])} for kind in ("rss", "pss")}
    per_dyno = [float(max(x)) for x in zip(*(one["memory"]["rss_peak_per_dyno"] for one in rounds))]
    return {
        "config": first["config"], "settings": first["settings"], "describe": first["describe"],
        "rounds": len(rounds),
        "requests": sum(one["requests"] for one in rounds),
        "answered": sum(one["answered"] for one in rounds),
        "errors": sum(one["errors"] for one in rounds),
        "error_kinds": kinds,
        "response": measure.time_summary(np.array([float(row["response"]) for row in ok])),
        "service": measure.time_summary(np.array([float(row["app_end"]) - float(row["app_start"])
                                                  for row in served])),
        "memory": dict(memory, samples=sum(one["memory"]["samples"] for one in rounds),
                       processes=max(one["memory"]["processes"] for one in rounds), rss_peak_per_dyno=per_dyno),
        "worker_rss": {"mean": mean_of([one["worker_rss"]["mean"] for one in rounds]),
                       "max": peak_of([one["worker_rss"]["max"] for one in rounds])},
        "environment": seen,
        "lateness": max((one["lateness"] for one in rounds), key=lambda late: late["p99"]),
        "router_log_lines": sum(one["router_log_lines"] for one in rounds),
        "warnings": list(dict.fromkeys(w for one in rounds for w in one["warnings"])),
        "haproxy": first["haproxy"],
        "wall_seconds": sum(one["wall_seconds"] for one in rounds),
        "per_round": [{"answered": one["answered"], "errors": one["errors"],
                       "response": {"p50": one["response"]["p50"], "p95": one["response"]["p95"]},
                       "memory": {"rss": {"mean": one["memory"]["rss"]["mean"], "peak": one["memory"]["rss"]["peak"]},
                                  "pss": {"mean": one["memory"]["pss"]["mean"]}}} for one in rounds],
        "_records": rows,
    }


def multipliers(result: Dict[str, Any], base: Dict[str, Any]) -> Dict[str, Optional[float]]:
    """The seed's columns: this configuration's mean and peak memory (RSS), median and p95
    response over the baseline's."""
    def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
        return None if a is None or b is None or not b > 0 else float(a) / float(b)

    m, bm = result["memory"], base["memory"]
    return {"memory": ratio(m["rss"]["mean"], bm["rss"]["mean"]),
            "memory_peak": ratio(m["rss"]["peak"], bm["rss"]["peak"]),
            "memory_pss": ratio(m["pss"]["mean"], bm["pss"]["mean"]),
            "median": ratio(result["response"]["p50"], base["response"]["p50"]) if result["answered"] else None,
            "p95": ratio(result["response"]["p95"], base["response"]["p95"]) if result["answered"] else None}


def records(config: AppConfig, load: Dict[str, Any], services: List[float]) -> List[Dict[str, Any]]:
    """One row per request sent (times in seconds from the run's start)."""
    t0 = float(load["start"])
    h = load["headers"]
    rows = []
    for k, i in enumerate(load["index"]):
        done = load["done"][k]
        rows.append({
            "config": config.name, "index": i, "logged_service": services[i],
            "scheduled": load["scheduled"][k] - t0, "sent": load["sent"][k] - t0,
            "done": done - t0 if math.isfinite(done) else "",
            "response": done - load["sent"][k] if math.isfinite(done) else "",
            "status": load["status"][k], "error": load["error"][k] or "",
            "app_start": _minus(h["x-dynosim-start"][k], t0), "app_end": _minus(h["x-dynosim-end"][k], t0),
            "dyno": h["x-dynosim-dyno"][k] or "", "pid": h["x-dynosim-pid"][k] or "",
            "worker_rss": h["x-dynosim-rss"][k] or "",
        })
    return rows


def _minus(text: Optional[str], t0: float) -> Any:
    try:
        return float(text) - t0 if text else ""
    except ValueError:
        return ""


def write_records(path: Path, rows: List[Dict[str, Any]]) -> None:
    """The per-request rows of every configuration as one CSV (a header even with none)."""
    fields = ["config", "round", "index", "logged_service", "scheduled", "sent", "done", "response", "status", "error",
              "app_start", "app_end", "dyno", "pid", "worker_rss"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
