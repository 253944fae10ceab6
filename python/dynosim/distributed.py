"""Where the runs of ``sweep``, ``capacity``, ``tune`` and ``ramp`` happen: threads of this
process (the default), or the workers of a Dask cluster (``--dask ADDRESS``, or a
``dask.distributed.Client`` in the Python API). The only module that imports Dask.

Each run of one scenario under one routing policy is a task: a pure function of the
scenario's TOML text and the bytes of the files it names (:func:`run_task`), returning the
engine's report as JSON text. The engine seeds every replication from ``run.seed`` and the
replication's index, never from where or when it runs, so a task gives the same bits on any
worker, and a task run again (its worker died) gives the same bits as the first time: a
sweep through Dask equals the same sweep run here, to the last bit (tests/test_distributed.py).

Files a scenario names (``file = ...`` in any table: empirical samples, traces) travel with
the task: the client reads each once and scatters its bytes to the cluster, and a worker
writes them into a folder of its own under the system's temporary folder before running. A
file the client cannot read, or one larger than :data:`SEND_LIMIT`, travels as its absolute
path instead, to be read on a path every worker shares; a worker that cannot read it fails
the command with one line naming the file, the key and the worker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import socket
import tempfile
import time
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
            strict: bool = False) -> List[Outcome]:
        """Every scenario's outcome, in order; `on_done(n)` is called (in this thread) as the
        number of finished runs grows. An error in any run (or Ctrl-C) stops the others and
        is raised; with `strict`, so is an unstable or overloaded run (UnstableError,
        OverloadedError), as :func:`dynosim.run` raises them."""
        raise NotImplementedError


def _outcome(report_json: Optional[str], status: str, scenario: Scenario) -> Outcome:
    from .api import _priced
    from .results import PolicyResult

    if report_json is None:
        return status, None
    return status, PolicyResult(_priced(json.loads(report_json), scenario))


def _run_here(scenario: Scenario, strict: bool = False) -> Tuple[str, Optional[str]]:
    try:
        scenario.describe()  # validates, as api.run does, before running
        return "ok", scenario._call(_dynosim.run)
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
            strict: bool = False) -> List[Outcome]:
        if len(scenarios) == 1 and on_done is None:  # capacity's one count at a time: no pool
            status, text = _run_here(scenarios[0], strict)
            return [_outcome(text, status, scenarios[0])]
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                                                     thread_name_prefix="dynosim-runs")
        # Filled one by one, so that a Ctrl-C while submitting still knows what it must stop.
        futures: Dict[concurrent.futures.Future, int] = {}
        out: List[Any] = [None] * len(scenarios)
        try:
            for i, s in enumerate(scenarios):
                futures[pool.submit(_run_here, s, strict)] = i
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


def run_task(toml: str, source: Optional[str], files: Dict[str, bytes],
             strict: bool = False) -> Tuple[str, Optional[str]]:
    """One run on a worker: ``(status, report JSON text)``; a mistake comes back as
    ``("error", [class name, message, file, key path])`` so that it reads as one line."""
    try:
        scenario = Scenario._from_text(toml, source or "scenario", _files_dir(files) if files else Path("."))
        scenario.source = source
        return _run_here(scenario, strict)
    except DynosimError as e:
        message = e.message
        if e.path.endswith(".file") or e.path == "file":
            message += (f" (on the Dask worker at {socket.gethostname()}: put the file on a path every worker "
                        "can read, or where this command can read it so that it travels with the task)")
        return "error", json.dumps([type(e).__name__, message, e.file, e.path])


def _raise(error_json: str) -> None:
    kind, message, file, path = json.loads(error_json)
    raise _ERRORS.get(kind, DynosimError)(message, file=file, path=path)


class DaskExecutor(Executor):
    """A task per run on a Dask cluster, through `client`. A worker that dies takes its
    tasks with it and the scheduler runs them again elsewhere (up to its
    ``distributed.scheduler.allowed-failures``, 3 by default): the same bits. Ctrl-C
    cancels the command's tasks on the cluster."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def run(self, scenarios: Sequence[Scenario], on_done: Optional[Callable[[int], None]] = None,
            strict: bool = False) -> List[Outcome]:
        from distributed import wait

        client = self.client
        payloads = [_Payload(s) for s in scenarios]
        # Each file goes to the cluster once, however many tasks name it.
        contents = {name: data for p in payloads for name, data in p.files.items()}
        futures: List[Any] = []
        out: List[Any] = [None] * len(scenarios)
        try:
            scattered = client.scatter(contents, hash=True) if contents else {}
            for p in payloads:
                files = {name: scattered[name] for name in p.files}
                futures.append(client.submit(run_task, p.toml, p.source, files, strict, pure=True))
            index = {f.key: i for i, f in enumerate(futures)}
            pending = set(futures)
            finished = 0
            while pending:
                try:
                    result = wait(pending, timeout=_POLL, return_when="FIRST_COMPLETED")
                except (TimeoutError, asyncio.TimeoutError):
                    continue
                done, pending = result.done, result.not_done
                for future in done:
                    i = index[future.key]
                    status, text = future.result()  # a task's exception (not a mistake) is raised here
                    if status == "error":
                        _raise(str(text))
                    out[i] = _outcome(text, status, scenarios[i])
                finished += len(done)
                if done and on_done is not None:
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
