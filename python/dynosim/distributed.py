"""Where the runs of ``sweep``, ``capacity``, ``tune`` and ``ramp`` happen: threads of this
process (the default), or the workers of a Dask cluster (``--dask ADDRESS``, or a
``dask.distributed.Client`` in the Python API). The only module that imports Dask.

Each run of one scenario under one routing policy is a task (or, when there are fewer runs
than the cluster has threads, each block of its replications: :class:`DaskExecutor`): a pure
function of the scenario's TOML text and the bytes of the files it names (:func:`run_task`),
returning the engine's report as JSON text. The engine seeds every replication from
``run.seed`` and the replication's index, never from where or when it runs, so a task gives
the same bits on any worker, and a task run again (its worker died) gives the same bits as
the first time: a sweep through Dask equals the same sweep run here, to the last bit
(tests/test_distributed.py).

Files a scenario names (``file = ...`` in any table: empirical samples, traces) travel with
the task: the client reads each once and scatters its bytes to the cluster, and a worker
writes them into a folder of its own under the system's temporary folder before running. A
file the client cannot read, or one larger than :data:`SEND_LIMIT`, travels as its absolute
path instead, to be read on a path every worker shares; a worker that cannot read it fails
the command with one line naming the file, the key and the worker.

Ctrl-C cancels the command's tasks; a worker plugin (:func:`_stop_cancelled_runs`) stops the
runs already inside the engine on the workers, which Dask alone would let run to their end.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import socket
import tempfile
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from . import _dynosim
from .errors import DynosimError, OverloadedError, ScenarioError, UnstableError
from .scenario import Scenario
from .toml_text import toml_text

__all__ = ["Outcome", "Executor", "LocalExecutor", "DaskExecutor", "executor_for", "dask_client", "run_task",
           "INSTALL_HINT"]

#: A run's outcome: ``("ok", PolicyResult)``, ``("unstable", None)`` or ``("overloaded", None)``.
Outcome = Tuple[str, Any]

#: What ``--dask`` says when Dask is not installed.
INSTALL_HINT = 'the --dask option needs Dask: pip install "dynosim[dask]"'

#: Files up to this size travel with the tasks; larger ones are read from a shared path.
SEND_LIMIT = 256 * 1024 * 1024

#: How long ``--dask ADDRESS`` tries to reach the scheduler (seconds).
CONNECT_TIMEOUT = 10.0

#: How often a wait for runs wakes up to update the progress (seconds).
_POLL = 0.1

#: The error classes a task may report, by name (exceptions travel as text, not pickles).
_ERRORS = {cls.__name__: cls for cls in (DynosimError, ScenarioError, UnstableError, OverloadedError)}


class Executor:
    """Runs single-policy scenarios and returns their outcomes in the order given."""

    def run(self, scenarios: Sequence[Scenario], on_done: Optional[Callable[[int], None]] = None,
            strict: bool = False, stop_at_verdict: bool = False) -> List[Outcome]:
        """Every scenario's outcome, in order; `on_done(n)` is called (in this thread) as the
        number of finished runs grows. An error in any run (or Ctrl-C) stops the others and
        is raised; with `strict`, so is an unstable or overloaded run (UnstableError,
        OverloadedError), as :func:`dynosim.run` raises them. With `stop_at_verdict`, each
        replication stops once its stability verdict is settled: its ``stability.*`` figures
        are the whole run's, to the bit, and its others mean nothing (the metastability map's
        runs: :mod:`dynosim.stability`)."""
        raise NotImplementedError


def _outcome(report_json: Optional[str], status: str, scenario: Scenario) -> Outcome:
    if report_json is None:
        return status, None
    return _reported(json.loads(report_json), scenario)


def _reported(report: Dict[str, Any], scenario: Scenario) -> Outcome:
    from .api import _priced
    from .results import PolicyResult

    return "ok", PolicyResult(_priced(report, scenario))


def _run_here(scenario: Scenario, strict: bool = False, block: Optional[Tuple[int, int]] = None,
              stop_at_verdict: bool = False) -> Tuple[str, Optional[str]]:
    """A whole run's report (JSON text), or with `block` (first, count) those replications'
    (``_dynosim.run_block``'s text); `stop_at_verdict` as for :meth:`Executor.run`."""
    try:
        scenario.describe()  # validates, as api.run does, before running
        if block is not None:
            return "ok", scenario._call(_dynosim.run_block, *block, stop_at_verdict)
        return "ok", scenario._call(_dynosim.run, stop_at_verdict)
    except UnstableError:
        if strict:
            raise
        return "unstable", None
    except OverloadedError:
        if strict:
            raise
        return "overloaded", None


class LocalExecutor(Executor):
    """Threads of this process, one per core: the engine releases the GIL, and runs each
    scenario's replications on every core."""

    def run(self, scenarios: Sequence[Scenario], on_done: Optional[Callable[[int], None]] = None,
            strict: bool = False, stop_at_verdict: bool = False) -> List[Outcome]:
        if len(scenarios) == 1 and on_done is None:  # capacity's one count at a time: no pool
            status, text = _run_here(scenarios[0], strict, None, stop_at_verdict)
            return [_outcome(text, status, scenarios[0])]
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                                                     thread_name_prefix="dynosim-runs")
        # Filled one by one, so that a Ctrl-C while submitting still knows what it must stop.
        futures: Dict[concurrent.futures.Future, int] = {}
        out: List[Any] = [None] * len(scenarios)
        try:
            for i, s in enumerate(scenarios):
                futures[pool.submit(_run_here, s, strict, None, stop_at_verdict)] = i
            pending = set(futures)
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=_POLL,
                                                        return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    i = futures[future]
                    status, text = future.result()  # an error stops them all
                    out[i] = _outcome(text, status, scenarios[i])
                if done and on_done is not None:
                    on_done(len(scenarios) - len(pending))
        except BaseException:
            # Ctrl-C or an error: drop what has not started and stop the runs in the engine
            # (Ctrl-C reaches only the main thread; the workers' runs are told explicitly).
            pool.shutdown(wait=False, cancel_futures=True)
            # A run told once may have been starting just then: a run stops when interrupt()
            # is called after it began, so keep telling until every worker is idle (each run
            # stops within milliseconds; without this one ran to its end before exit).
            while not all(f.done() for f in futures):
                _dynosim.interrupt()
                concurrent.futures.wait(futures, timeout=0.05)
            raise
        pool.shutdown(wait=True)
        return out


# --- Dask --------------------------------------------------------------------------------------


def _named_files(doc: Any, path: str = "") -> Iterator[Tuple[str, Dict[str, Any]]]:
    """Every table of the document that names a file (``file = "..."``), with its key path."""
    if isinstance(doc, dict):
        if isinstance(doc.get("file"), str):
            yield (f"{path}.file" if path else "file"), doc
        for k, v in doc.items():
            yield from _named_files(v, f"{path}.{k}" if path else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _named_files(v, f"{path}[{i}]")


class _Payload:
    """A scenario as it travels: its TOML text (files renamed to what the worker writes, or
    to their absolute shared paths) and the files' contents by name."""

    def __init__(self, scenario: Scenario) -> None:
        doc = json.loads(json.dumps(scenario.doc))  # a copy, plain tables and lists
        self.files: Dict[str, bytes] = {}
        for _, table in _named_files(doc):
            path = (scenario.base_dir / table["file"]).resolve()
            data = _read_small(path)
            if data is None:
                table["file"] = str(path)  # read on the worker, from a path every worker shares
            else:
                name = f"{hashlib.sha256(data).hexdigest()[:32]}-{path.name}"
                self.files[name] = data
                table["file"] = name
        if "name" not in doc and scenario.source:
            doc["name"] = scenario.name  # as Scenario.to_json names it
        self.toml = toml_text(doc)
        self.source = scenario.source


def _read_small(path: Path) -> Optional[bytes]:
    try:
        if path.stat().st_size > SEND_LIMIT:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _files_dir(files: Dict[str, bytes]) -> Path:
    """The folder on this worker holding `files` (written once each, atomically)."""
    folder = Path(tempfile.gettempdir()) / f"dynosim-files-{os.getuid() if hasattr(os, 'getuid') else 0}"
    folder.mkdir(mode=0o700, exist_ok=True)
    for name, data in files.items():
        target = folder / name
        if not target.exists():
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".part-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
    return folder


def _token(key: Any) -> int:
    """The engine's cancel token of the task `key` (see :func:`_stop_cancelled_runs`)."""
    return int(hashlib.sha256(str(key).encode()).hexdigest()[:15], 16) + 1


def _current_key() -> Any:
    """The key of the Dask task this thread runs, or None outside a task."""
    try:
        from distributed import get_worker

        return get_worker().get_current_task()
    except (ImportError, ValueError):
        return None


#: The clients whose workers stop cancelled runs (:func:`_stop_cancelled_runs`).
_PLUGGED: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _stop_cancelled_runs(client: Any) -> None:
    """Installs on `client`'s workers a plugin that stops a run in the engine when its task
    is cancelled while running (Ctrl-C): Dask cannot stop a running task, the engine can
    (each task runs under a cancel token of its own, ``_dynosim.set_cancel_token``)."""
    if client in _PLUGGED:
        return
    from distributed.diagnostics.plugin import WorkerPlugin

    class StopCancelledRuns(WorkerPlugin):
        def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
            if start == "executing" and finish in ("cancelled", "released", "forgotten"):  # no longer wanted
                from dynosim import _dynosim as engine

                engine.cancel(_token(key))

    client.register_plugin(StopCancelledRuns(), name="dynosim-stop-cancelled-runs")
    _PLUGGED.add(client)


def run_task(toml: str, source: Optional[str], files: Dict[str, bytes], strict: bool = False,
             version: Optional[str] = None, block: Optional[Tuple[int, int]] = None,
             stop_at_verdict: bool = False) -> Tuple[str, Optional[str]]:
    """One run on a worker: ``(status, report JSON text)``, or with `block` (first, count)
    those replications of it (see :func:`_merged`); a mistake comes back as
    ``("error", [class name, message, file, key path])`` so that it reads as one line. A
    worker whose dynosim is not `version` (the client's) refuses: its figures could differ."""
    if version is not None and version != _dynosim.__version__:
        return "error", json.dumps(["DynosimError", f"the Dask worker at {socket.gethostname()} has dynosim "
                                    f"{_dynosim.__version__}, this command {version}: install the same version "
                                    "on every worker", "--dask", ""])
    key = _current_key()
    token = _token(key) if key is not None else 0
    if token:
        _dynosim.forget_token(token)  # a cancel that came after an earlier run of this task ended
        _dynosim.set_cancel_token(token)
    try:
        scenario = Scenario._from_text(toml, source or "scenario", _files_dir(files) if files else Path("."))
        scenario.source = source
        return _run_here(scenario, strict, block, stop_at_verdict)
    except KeyboardInterrupt:  # the task was cancelled (its result is dropped)
        return "cancelled", None
    except DynosimError as e:
        message = e.message
        if e.path.endswith(".file") or e.path == "file":
            message += (f" (on the Dask worker at {socket.gethostname()}: put the file on a path every worker "
                        "can read, or where this command can read it so that it travels with the task)")
        return "error", json.dumps([type(e).__name__, message, e.file, e.path])
    finally:
        if token:
            _dynosim.set_cancel_token(0)
            _dynosim.forget_token(token)


def _raise(error_json: str) -> None:
    kind, message, file, path = json.loads(error_json)
    raise _ERRORS.get(kind, DynosimError)(message, file=file, path=path)


def _merged(scenario: Scenario, parts: Sequence[Tuple[str, Optional[str]]]) -> Outcome:
    """A run from its blocks' outcomes, in replication order: the report ``_dynosim.run``
    makes, to the last bit (the blocks' JSON read by Python, which rounds exactly; the summary
    made by the engine's own code), but for ``wall_seconds``."""
    for status, _ in parts:
        if status != "ok":
            return status, None
    blocks = [json.loads(str(text)) for _, text in parts]
    results = [r for b in blocks for r in b["results"]]
    report = json.loads(scenario._call(_dynosim.assemble, results, [d for b in blocks for d in b["per_dyno"]],
                                       [e for b in blocks for e in b["engines"]]))
    report["per_replication"] = results
    return _reported(report, scenario)


class DaskExecutor(Executor):
    """A task per run on a Dask cluster, through `client`; when there are fewer runs than the
    cluster has threads (a capacity search's one count at a time), a task per block of a
    run's replications, merged here (:func:`_merged`). A worker that dies takes its tasks
    with it and the scheduler runs them again elsewhere (up to its
    ``distributed.scheduler.allowed-failures``, 3 by default): the same bits. Ctrl-C cancels
    the command's tasks on the cluster.

    `blocks`: split each run into this many blocks of replications (at most one per
    replication) instead of choosing from the cluster's threads; 1 keeps runs whole."""

    def __init__(self, client: Any, blocks: Optional[int] = None) -> None:
        self.client = client
        self.blocks = blocks

    def _blocks_of(self, scenarios: Sequence[Scenario]) -> List[List[Optional[Tuple[int, int]]]]:
        """Each run's tasks: ``[None]`` for the whole run, else (first, count) blocks."""
        per_run = self.blocks
        if per_run is None:
            threads = sum(self.client.nthreads().values()) or 1
            per_run = -(-threads // max(1, len(scenarios))) if len(scenarios) < threads else 1
        out: List[List[Optional[Tuple[int, int]]]] = []
        for s in scenarios:
            if per_run <= 1:
                out.append([None])
                continue
            replications = int(s.describe()["replications"])
            size = -(-replications // min(per_run, replications))
            blocks: List[Optional[Tuple[int, int]]] = [(first, min(size, replications - first))
                                                       for first in range(0, replications, size)]
            out.append(blocks if len(blocks) > 1 else [None])
        return out

    def run(self, scenarios: Sequence[Scenario], on_done: Optional[Callable[[int], None]] = None,
            strict: bool = False, stop_at_verdict: bool = False) -> List[Outcome]:
        client = self.client
        payloads = [_Payload(s) for s in scenarios]
        tasks = self._blocks_of(scenarios)
        # Each file goes to the cluster once, however many tasks name it.
        contents = {name: data for p in payloads for name, data in p.files.items()}
        futures: List[Any] = []
        # Each task's run and block; identical tasks (the same scenario twice) share a key.
        where: Dict[str, List[Tuple[int, int]]] = {}
        parts: List[List[Any]] = [[None] * len(blocks) for blocks in tasks]
        out: List[Any] = [None] * len(scenarios)
        try:
            _stop_cancelled_runs(client)
            scattered = client.scatter(contents, hash=True) if contents else {}
            def submit(i: int, block: Optional[Tuple[int, int]], pure: bool = True) -> Any:
                p = payloads[i]
                files = {name: scattered[name] for name in p.files}
                future = client.submit(run_task, p.toml, p.source, files, strict, _dynosim.__version__, block,
                                       stop_at_verdict, pure=pure)
                futures.append(future)
                return future

            for i, blocks in enumerate(tasks):
                for j, block in enumerate(blocks):
                    where.setdefault(submit(i, block).key, []).append((i, j))
            pending = set(futures)
            finished = 0
            while pending:
                # Polled (distributed.wait raises when a future was cancelled, which one of an
                # earlier command's may have been: see below).
                done = {f for f in pending if f.done()}
                if not done:
                    time.sleep(_POLL)
                    continue
                pending -= done
                before = finished
                for future in done:
                    if future.status == "cancelled":
                        status, text = "cancelled", None
                    else:
                        status, text = future.result()  # a task's exception (not a mistake) is raised here
                    if status == "error":
                        _raise(str(text))
                    if status == "cancelled":
                        # The same task cancelled by an earlier command (the same scenario
                        # again, just after a Ctrl-C): its key is still being let go, or the
                        # worker resumed that stopped run. Run it afresh under a key of its own.
                        for i, j in where.pop(future.key, []):
                            again = submit(i, tasks[i][j], pure=False)
                            where.setdefault(again.key, []).append((i, j))
                            pending.add(again)
                        continue
                    for i, j in where[future.key]:
                        parts[i][j] = (status, text)
                        if out[i] is None and all(part is not None for part in parts[i]):
                            out[i] = (_outcome(parts[i][0][1], parts[i][0][0], scenarios[i]) if tasks[i] == [None]
                                      else _merged(scenarios[i], parts[i]))
                            finished += 1
                if finished > before and on_done is not None:
                    on_done(finished)
        except BaseException:
            if futures:
                client.cancel(futures)
            raise
        return out


def executor_for(client: Any = None) -> Executor:
    """The executor of a ``dask.distributed.Client``, or of this process's threads for None."""
    if client is None:
        return LocalExecutor()
    return DaskExecutor(client)


@contextmanager
def dask_client(address: Optional[str]) -> Iterator[Any]:
    """``--dask``: None (no option) gives None; ``local`` starts a ``LocalCluster`` of one
    single-threaded worker process per core (each engine on one thread: no core asked for
    twice); anything else is a running scheduler's address. Closed (and the local cluster
    stopped) on the way out."""
    if address is None:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise DynosimError(INSTALL_HINT) from None
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                                   dashboard_address=None, env={"RAYON_NUM_THREADS": "1"})
            client = Client(cluster)
        else:
            try:
                client = Client(address, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError, ValueError) as e:
                raise DynosimError(f"cannot reach the Dask scheduler at {address!r}: {e}", file="--dask") from None
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def wait_for_workers(client: Any, n: int, timeout: float = 60.0) -> None:
    """Blocks until the cluster has `n` workers (tests, the benchmark)."""
    deadline = time.monotonic() + timeout
    while len(client.scheduler_info()["workers"]) < n:
        if time.monotonic() > deadline:
            raise DynosimError(f"the Dask cluster did not reach {n} workers in {timeout:g} s")
        time.sleep(0.1)
