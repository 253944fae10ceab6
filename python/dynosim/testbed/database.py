"""The testbed's database: a real PostgreSQL, started for one run in a temporary data directory,
reachable only through a Unix socket in that directory, and torn down after.

A scenario's resource becomes queries on it (see :mod:`dynosim.testbed.app`): ``pg_sleep`` for
a resource whose servers outnumber the requests that can use it at once (it never queues, so
only its pools matter), or, in ``burn`` mode, a query that keeps a database core busy for the
drawn time, so that the database's own cores are what the requests share.

PostgreSQL refuses to run as root; as root, the testbed runs it as the ``postgres`` user that
Debian's package creates.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

from .procs import Supervisor, TestbedError
from .tools import INSTALL_DEBIAN, postgres_bindir

USER = "dynosim"
# SQL: a query that computes for a number of steps, the unit of a burn-mode resource's work.
# A loop, not generate_series: that materialises its rows and would spill to disk.
BURN_FUNCTION = ("CREATE FUNCTION dynosim_burn(n bigint) RETURNS bigint LANGUAGE plpgsql AS $$ "
                 "DECLARE i bigint := 0; BEGIN WHILE i < n LOOP i := i + 1; END LOOP; RETURN i; END $$")


class Database:
    """A running PostgreSQL: ``dsn`` connects to it."""

    def __init__(self, supervisor: Supervisor, max_connections: int, cpus: Optional[list] = None) -> None:
        bindir = postgres_bindir()
        if bindir is None:
            raise TestbedError(f"PostgreSQL is not installed (postgres and initdb not found); install it: {INSTALL_DEBIAN}")
        self.supervisor = supervisor
        self.dir = supervisor.workdir / "postgres"
        self.data = self.dir / "data"
        self.dir.mkdir()
        user = _unprivileged_user()
        if user is not None:
            # The data directory must be the server's own; the workdir above it only traversable.
            os.chmod(supervisor.workdir, 0o711)
            entry = pwd.getpwnam(user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self.max_connections = max_connections
        initdb = subprocess.run(
            [os.path.join(bindir, "initdb"), "-D", str(self.data), "-U", USER, "--auth=trust", "--no-sync",
             "-E", "UTF8", "--no-instructions"],
            capture_output=True, text=True, timeout=120, user=user, cwd=self.dir)
        if initdb.returncode != 0:
            raise TestbedError(f"initdb failed: {(initdb.stderr or initdb.stdout).strip().splitlines()[-1:]}")
        self.port = 5432  # only names the socket file: the server listens on no TCP address
        self.process = supervisor.spawn(
            [os.path.join(bindir, "postgres"), "-D", str(self.data), "-k", str(self.dir), "-p", str(self.port),
             "-c", "listen_addresses=", "-c", f"max_connections={max_connections}",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "shared_buffers=32MB", "-c", "log_min_messages=warning"],
            name="postgres", log=supervisor.workdir / "postgres.log", cpus=cpus, user=user, cwd=self.dir,
            stop_signal=signal.SIGINT)  # a fast shutdown: no waiting for clients to leave
        self.dsn = f"host={self.dir} port={self.port} user={USER} dbname=postgres"
        self._wait_ready()
        with self.connect() as conn:
            conn.execute(BURN_FUNCTION)
        self.burn_rate = 0.0

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True)

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise TestbedError(f"PostgreSQL exited with status {self.process.returncode} while starting: "
                                   f"{_tail(self.supervisor.workdir / 'postgres.log')}")
            try:
                psycopg.connect(self.dsn, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise TestbedError(f"PostgreSQL did not accept connections within {timeout:.0f} s: "
                                       f"{_tail(self.supervisor.workdir / 'postgres.log')}") from None
                time.sleep(0.05)

    def calibrate_burn(self, target: float = 0.2) -> float:
        """Steps of ``dynosim_burn`` per second of one core, the best of a few timed queries
        (the fastest run is the one least disturbed)."""
        best = 0.0
        with self.connect() as conn:
            steps = 100_000
            for _ in range(8):
                t0 = time.perf_counter()
                conn.execute("SELECT dynosim_burn(%s)", (steps,))
                elapsed = time.perf_counter() - t0
                best = max(best, steps / elapsed)
                if elapsed < target / 2:
                    steps = int(steps * min(10.0, target / max(elapsed, 1e-6)))
        self.burn_rate = best
        return best

    def stop(self) -> None:
        self.supervisor.stop(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)


def _unprivileged_user() -> Optional[str]:
    """None when not root; as root, the user to run PostgreSQL as."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise TestbedError("PostgreSQL does not run as root and there is no 'postgres' user; "
                           f"install Debian's package ({INSTALL_DEBIAN}) or run as another user") from None
    return "postgres"


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
