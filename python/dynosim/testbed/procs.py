"""The testbed's processes: started each in a process group of its own, and stopped with
everything they started, however the testbed ends.

    with install_signal_handlers(), Supervisor() as sup:
        port, = free_ports(1)
        app = sup.spawn(["gunicorn", "-b", f"127.0.0.1:{port}", "app:app"], name="dyno-1",
                        stop_signal=signal.SIGTERM, cpus=[1])
        sup.wait_for_port(port, app, timeout=10)
        ...

How each way of ending is covered (Linux only):

- normal exit, an exception, Ctrl-C (KeyboardInterrupt), SIGTERM or SIGHUP inside
  :func:`install_signal_handlers` (SystemExit): ``with Supervisor()`` (or the ``atexit`` hook
  when it is not used as a context manager) runs :meth:`Supervisor.close`, which stops the
  children in reverse start order (each its stop signal, then SIGKILL after a grace) and
  removes the work directory. Ctrl-C reaches only the supervising process: the children are
  sessions of their own, outside the terminal's foreground group, and are stopped in order.
- the supervising process killed outright (SIGKILL, or SIGTERM without the handlers): no
  Python code runs. Each direct child gets its stop signal from the kernel
  (``PR_SET_PDEATHSIG``), and the watchdog (:mod:`.watchdog`), which sees its pipe from the
  supervisor close, signals each registered group, SIGKILLs what is left after its grace and
  removes the work directory.

A child's own children stay in its process group (gunicorn's workers) and are signalled with
it. Processes that leave the group for sessions of their own (PostgreSQL's backends call
setsid) are found by their parentage when the child is stopped, and SIGKILLed too if they
outlive its grace.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Union

from ..errors import DynosimError
from . import watchdog
from .watchdog import Proc, descendants, group_members, processes, signal_group, signal_proc, still_alive

__all__ = ["Supervisor", "TestbedError", "free_ports", "install_signal_handlers"]

#: Polling period while waiting for a port or for processes to end.
POLL = 0.05
#: After SIGKILL, how long to wait for a process to disappear before giving up on it.
KILL_WAIT = 5.0
#: Lines of a child's log quoted in an error.
LOG_TAIL_LINES = 5

#: Signals a child gets back at their default disposition whatever the testbed's were (a
#: shell's background job ignores SIGINT and SIGQUIT, nohup SIGHUP; PostgreSQL stops on SIGINT).
_RESET_SIGNALS = tuple(getattr(signal, name) for name in (
    "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGALRM", "SIGPIPE",
    "SIGTSTP", "SIGTTIN", "SIGTTOU") if hasattr(signal, name))

_PR_SET_PDEATHSIG = 1

StrPath = Union[str, "os.PathLike[str]"]


class TestbedError(DynosimError, RuntimeError):
    """The testbed could not start or run one of its processes: one line for the user."""

    __test__ = False  # not a pytest test class, whatever its name


@dataclass
class _Child:
    proc: "subprocess.Popen[bytes]"
    name: str
    stop_signal: int
    log: Path
    stopped: bool = False


class Supervisor:
    """Starts the testbed's processes and stops them all when it closes (a context manager).

    On creation it makes a private work directory (:attr:`workdir`, removed on close) and
    starts the watchdog. Each child started by :meth:`spawn` is a session and process group of
    its own, registered with the watchdog.

    ``grace`` is the time each child has, on :meth:`close`, between its stop signal and
    SIGKILL; ``watchdog_grace`` the same for the watchdog after the supervisor's death.

    Call :meth:`spawn` from the main thread only: the kernel sends a child its parent-death
    signal when the *thread* that forked it ends, which for another thread could be long
    before this process does.
    """

    def __init__(self, prefix: str = "dynosim-testbed-", *, grace: float = 5.0, watchdog_grace: float = 3.0) -> None:
        if not sys.platform.startswith("linux"):
            raise TestbedError("the testbed runs on Linux only (it relies on /proc and prctl)")
        self.grace = grace
        self._watchdog_grace = watchdog_grace
        self._pid = os.getpid()
        self._children: List[_Child] = []
        self._closed = False
        self._pipe: Optional[int] = None
        self._watchdog = self._start_watchdog(watchdog_grace)
        try:
            self.workdir = Path(tempfile.mkdtemp(prefix=prefix))
            self._tell(f"dir {self.workdir}")
        except BaseException:
            self._closed = True
            self._release_watchdog()
            if hasattr(self, "workdir"):
                shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        atexit.register(self.close)

    def __enter__(self) -> "Supervisor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- children ----------------------------------------------------------------------------

    def spawn(self, argv: Sequence[StrPath], *, name: str, env: Optional[Mapping[str, str]] = None,
              cwd: Optional[StrPath] = None, cpus: Optional[Sequence[int]] = None, log: Optional[StrPath] = None,
              stop_signal: int = signal.SIGTERM, user: Optional[str] = None) -> "subprocess.Popen[bytes]":
        """Starts `argv` as a session and process group of its own, and returns it.

        - `name` names it in errors, and its log: stdout and stderr go to `log`, by default
          ``workdir/NAME.log`` (appended to); stdin is /dev/null.
        - `env`: variables set on top of this process's environment.
        - `cpus`: the CPU cores it (and what it starts) may run on (sched_setaffinity).
        - `stop_signal`: what :meth:`stop` sends its group first; also its parent-death signal.
        - `user`: run it as this user (root only; PostgreSQL refuses to run as root). The
          parent-death signal is set after the change of user, which would clear it.
        """
        self._check_open()
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("Supervisor.spawn must be called from the main thread "
                               "(a child's parent-death signal fires when the thread that started it ends)")
        args = [os.fspath(a) for a in argv]
        if not args:
            raise ValueError("spawn: empty command")
        cpu_set: Optional[Set[int]] = None
        if cpus is not None:
            cpu_set = set(cpus)
            allowed = os.sched_getaffinity(0)
            if not cpu_set or not cpu_set <= allowed:
                raise TestbedError(f"cannot pin {name} to CPUs {_cpu_list(cpu_set)}: "
                                   f"this machine lets the testbed use CPUs {_cpu_list(allowed)}")
        log_path = Path(log) if log is not None else self.workdir / f"{_file_name(name)}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        environ = dict(os.environ)
        environ.update(env or {})
        setup = _child_setup(os.getpid(), int(stop_signal), cpu_set)
        # Ctrl-C between the fork and the bookkeeping would leave a child close() knows nothing of.
        with _signals_held(), open(log_path, "ab") as out:
            try:
                proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        env=environ, cwd=cwd, start_new_session=True, preexec_fn=setup,
                                        close_fds=True, user=user)
            except (OSError, subprocess.SubprocessError) as e:
                raise TestbedError(f"cannot start {name} ({args[0]}): {getattr(e, 'strerror', None) or e}") from None
            self._children.append(_Child(proc, name, int(stop_signal), log_path))
            try:
                self._tell(f"group {proc.pid} {int(stop_signal)}")
            except TestbedError:
                self.stop(proc, grace=0)
                raise
        return proc

    def wait_for_port(self, port: int, proc: "subprocess.Popen[bytes]", timeout: float) -> None:
        """Returns once 127.0.0.1:`port` accepts a connection; raises TestbedError naming the
        child, its exit code and the last lines of its log if it ends first, or if `timeout`
        seconds pass. (The child stays unreaped: :meth:`stop` still owns its group.)"""
        child = self._child(proc)
        deadline = time.monotonic() + timeout
        while True:
            code = _exit_status(proc)
            if code is not None:
                raise TestbedError(f"{child.name} {_ended(code)} before listening on 127.0.0.1:{port}"
                                   f"{_log_tail(child.log)}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise TestbedError(f"{child.name} did not listen on 127.0.0.1:{port} within {timeout:g} s"
                                   f"{_log_tail(child.log)}")
            time.sleep(POLL)

    def stop(self, proc: "subprocess.Popen[bytes]", grace: Optional[float] = None) -> None:
        """Stops a child and its process group: its stop signal to the group, up to `grace`
        seconds (by default the supervisor's) for the child, its group and what it started in
        other sessions to end (those get SIGTERM if the child ends without them), then
        SIGKILL to whatever is left. Waits for the child (sets ``proc.returncode``). Does
        nothing for a child already stopped."""
        child = self._child(proc)
        if child.stopped:
            return
        if grace is None:
            grace = self.grace
        pgid = proc.pid
        # What the child started in sessions of its own, found while their parent still lives.
        others = [p for p in descendants([pgid], processes()) if p.pgrp != pgid]
        # While the child is unreaped (even ended), its pid (the group's number) cannot be
        # reused: signalling the group is safe. Once reaped, only if members are left.
        if proc.returncode is None or group_members(pgid, processes()):
            signal_group(pgid, child.stop_signal)
        deadline = time.monotonic() + grace

        def left() -> List[Proc]:
            return group_members(pgid, processes()) + [p for p in others if still_alive(p)]

        orphans_told = False
        while (_exit_status(proc) is None or left()) and time.monotonic() < deadline:
            if not orphans_told and _exit_status(proc) is not None:
                for p in others:  # the child is gone without stopping them: they are orphans now
                    signal_proc(p, signal.SIGTERM)
                orphans_told = True
            time.sleep(POLL)
        if _exit_status(proc) is None or left():
            if proc.returncode is None or group_members(pgid, processes()):
                signal_group(pgid, signal.SIGKILL)
            for p in others:
                signal_proc(p, signal.SIGKILL)
        try:
            proc.wait(timeout=KILL_WAIT)
        except subprocess.TimeoutExpired:
            raise TestbedError(f"{child.name} (pid {pgid}) did not end {KILL_WAIT:g} s after SIGKILL") from None
        deadline = time.monotonic() + KILL_WAIT
        while left() and time.monotonic() < deadline:
            time.sleep(POLL)
        child.stopped = True
        if self._pipe is not None:
            with contextlib.suppress(TestbedError):
                self._tell(f"ungroup {pgid}")

    def signal(self, proc: "subprocess.Popen[bytes]", sig: int) -> None:
        """Sends `sig` to a running child's process group, without waiting (a dyno told to
        shut down gracefully); nothing once it has been stopped."""
        child = self._child(proc)
        if not child.stopped and (proc.returncode is None or group_members(proc.pid, processes())):
            signal_group(proc.pid, sig)

    def exited(self, proc: "subprocess.Popen[bytes]") -> Optional[int]:
        """The child's exit code once it has ended (negative: the signal that killed it), None
        while it runs; it stays unreaped (:meth:`stop` reaps it)."""
        self._child(proc)
        return _exit_status(proc)

    def close(self) -> None:
        """Stops every child still running, in reverse start order, removes the work
        directory and releases the watchdog. Idempotent. SIGINT, SIGTERM and SIGHUP are held
        back meanwhile (and delivered after), so a second Ctrl-C cannot cut it short."""
        if self._closed or os.getpid() != self._pid:  # a forked copy of this process owns nothing
            return
        self._closed = True
        atexit.unregister(self.close)
        with _signals_held():
            errors: List[Exception] = []
            for child in reversed(self._children):
                try:
                    self.stop(child.proc, self.grace)
                except Exception as e:  # the others must still be stopped
                    errors.append(e)
            shutil.rmtree(self.workdir, ignore_errors=True)
            if not errors:
                with contextlib.suppress(TestbedError):
                    self._tell("done")
            # Otherwise the watchdog sees its pipe close without "done" and has its own try.
            self._release_watchdog()
        if errors:
            raise errors[0]

    # --- the watchdog ------------------------------------------------------------------------

    def _start_watchdog(self, grace: float) -> "subprocess.Popen[bytes]":
        read_end, write_end = os.pipe()  # neither is inherited by what this process starts
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", os.path.abspath(watchdog.__file__), "--grace", repr(float(grace))],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                start_new_session=True, close_fds=True)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._pipe = write_end
        return proc

    def _tell(self, line: str) -> None:
        if "\n" in line:
            raise TestbedError(f"cannot register {line!r} with the watchdog: a line break in it")
        if self._pipe is None:
            raise TestbedError("the testbed's watchdog was released")
        try:
            os.write(self._pipe, (line + "\n").encode("utf-8", "surrogateescape"))
        except OSError as e:
            raise TestbedError(f"the testbed's watchdog (pid {self._watchdog.pid}) is gone: {e}") from None

    def _release_watchdog(self) -> None:
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        try:  # quick after "done"; else it may be cleaning up
            self._watchdog.wait(timeout=self._watchdog_grace + 2 * watchdog.KILL_WAIT)
        except subprocess.TimeoutExpired:
            self._watchdog.kill()
            self._watchdog.wait()

    # --- helpers -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise TestbedError("the testbed's supervisor is closed")

    def _child(self, proc: "subprocess.Popen[bytes]") -> _Child:
        for child in self._children:
            if child.proc is proc:
                return child
        raise ValueError(f"process {proc.pid} was not started by this supervisor")


def free_ports(n: int) -> List[int]:
    """`n` distinct TCP ports free on 127.0.0.1 right now (the kernel's picks, bound together
    and released: another program could still take one before the testbed does)."""
    socks: List[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@contextlib.contextmanager
def install_signal_handlers() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise SystemExit(128 + signal) in the main
    thread, so that ``with Supervisor()`` inside it cleans up as it does for Ctrl-C. A signal
    this process ignored (nohup's SIGHUP) stays ignored; a second one while cleaning up is
    ignored. Outside the main thread it does nothing (Python allows handlers only there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGTERM, signal.SIGHUP)

    def handler(signum: int, frame: Any) -> None:
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    previous: Dict[int, Any] = {}
    for sig in signals:
        if signal.getsignal(sig) != signal.SIG_IGN:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


# --- the child's side ------------------------------------------------------------------------


def _prctl() -> Callable[..., int]:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl  # type: ignore[no-any-return]


def _child_setup(parent: int, deathsig: int, cpus: Optional[Set[int]]) -> Callable[[], None]:
    """What the child runs between fork and exec (after setsid): default signal dispositions
    and an empty signal mask, its parent-death signal, its CPUs. Everything it calls is
    resolved here, in the parent."""
    prctl = _prctl()

    def setup() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in _RESET_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        if prctl(_PR_SET_PDEATHSIG, deathsig, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the parent died before the line above took effect
            os.kill(os.getpid(), signal.SIGKILL)
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    return setup


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Blocks SIGINT, SIGTERM and SIGHUP for the block (main thread only), delivering any
    that came meanwhile after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _exit_status(proc: "subprocess.Popen[bytes]") -> Optional[int]:
    """The child's return code once it has ended (negative: the signal that killed it), None
    while it runs; without reaping it."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped behind Popen's back
        return proc.poll()
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _ended(code: int) -> str:
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def _log_tail(log: Path) -> str:
    """'; last lines of LOG: a | b | c', or that the log is empty; for a one-line error."""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return f"; no log at {log}"
    lines = [line.strip() for line in text.splitlines() if line.strip()][-LOG_TAIL_LINES:]
    if not lines:
        return f"; its log ({log}) is empty"
    return f"; last lines of {log}: " + " | ".join(line[:300] for line in lines)


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "child"


def _cpu_list(cpus: Set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus)) or "(none)"
