import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "python" / "dynosim" / "scenarios"


# --- child processes -------------------------------------------------------------------------
#
# Every test that starts a process starts it with `child_process` (or `run_process`, its
# subprocess.run), which makes the test independent of how the suite itself was started:
#
# - The child starts with SIGINT and SIGTERM at their default disposition and no signal
#   blocked. A background job of a non-interactive shell (`make test &`), and some CI runners,
#   start pytest with SIGINT ignored; an ignored signal stays ignored across fork and exec,
#   and Python installs its KeyboardInterrupt handler only when SIGINT is not ignored at
#   start, so a child that inherited SIG_IGN would never see the Ctrl-C a test sends it (and
#   dynosim rightly keeps ignoring what its parent ignores). SIGHUP is left as inherited: under
#   nohup the children should survive a hang-up as the suite does; a test that sends SIGHUP
#   sets it in the child (test_testbed_procs's PARENT).
# - It has a session (and process group) of its own, and on Linux dies with the thread that
#   started it (PR_SET_PDEATHSIG), so that a killed pytest leaves nothing behind either.
# - Leaving the block, however (an assertion, a timeout, Ctrl-C), SIGKILLs its whole process
#   group (a `bash -c` command's children, a browser's helpers too) and reaps it: nothing a
#   test started keeps a core busy after the test.

_RESET_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PR_SET_PDEATHSIG = 1


def _child_setup() -> Callable[[], None]:
    """What the child runs between fork and exec; everything it calls is resolved here, in
    the parent (only the test's own thread starts children)."""
    parent = os.getpid()
    prctl: Optional[Any] = None
    if sys.platform.startswith("linux"):
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        prctl.restype = ctypes.c_int

    def setup() -> None:
        for sig in _RESET_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the line above took effect
                os.kill(os.getpid(), signal.SIGKILL)

    return setup


def end_process(proc: subprocess.Popen) -> None:
    """SIGKILLs `proc`'s process group (it leads one: `child_process`) and reaps `proc`;
    closes its pipes. Harmless when it has ended already."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is gone
        pass
    proc.kill()  # a no-op once reaped
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextlib.contextmanager
def child_process(args: Sequence[Any], **popen: Any) -> Iterator[subprocess.Popen]:
    """``subprocess.Popen(args, **popen)`` for the block (see above); stdin is /dev/null
    unless given."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.Popen(args, preexec_fn=_child_setup(), start_new_session=True, **popen)
    try:
        yield proc
    finally:
        end_process(proc)


def run_process(args: Sequence[Any], *, timeout: float, input: Any = None, **popen: Any
                ) -> subprocess.CompletedProcess:
    """``subprocess.run(args, capture_output=True, timeout=timeout, ...)`` with a child
    started by `child_process`: on the timeout its whole group is killed before
    TimeoutExpired reaches the test."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    with child_process(args, **popen) as proc:
        out, err = proc.communicate(input, timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_cli(*args: str, cwd: Optional[Path] = None, env: Optional[dict] = None, timeout: float = 300
            ) -> subprocess.CompletedProcess:
    """Runs the installed CLI as a user would, in a subprocess."""
    return run_process([sys.executable, "-m", "dynosim", *args], text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.fixture
def ctrl_c_raises():
    """For the test, SIGINT in this process raises KeyboardInterrupt, as in a foreground run:
    pytest started with SIGINT ignored (a shell's background job, some CI runners) has no
    handler, so a real SIGINT, or _thread.interrupt_main(), would do nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:  # None: not installed from Python, nothing to put back
            signal.signal(signal.SIGINT, previous)


def assert_one_line_error(result, *fragments, code=2):
    """A user mistake: one line on stderr naming what is wrong, the exit code, nothing on
    stdout, no traceback."""
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dynosim: error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def rapgenius_text() -> str:
    return (BUILTIN / "rapgenius.toml").read_text()


#: A small M/M/c scenario (intelligent routing over 8 dynos, 50 req/s of 100 ms): quick runs of
#: every command, for the reports' tests.
SMALL_MMC = """
name = "mmc"
[arrivals]
process = "poisson"
rate = "50/s"
[service]
distribution = "exponential"
mean = "100ms"
[fleet]
dynos = 8
[router]
policy = "intelligent"
[run]
duration = "1min"
warmup = "10s"
replications = 4
seed = 1
"""
