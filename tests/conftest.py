import contextlib
import ctypes
import ctypes.util
import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "python" / "dynosim" / "scenarios"


# --- real-stack components -------------------------------------------------------------------
#
# A test that runs something real beyond dynosim and its Python dependencies (the testbed's
# HAProxy, nginx, PostgreSQL, gunicorn or Ruby servers, a Dask cluster, a browser) names what
# it uses, once: ``@pytest.mark.needs("haproxy", "gunicorn")`` on the test (or in a module's
# ``pytestmark``), or ``require(...)`` at the top of a module that cannot even be imported
# without it. When one is missing the test is skipped with one line naming it and
# ``make testbed-deps`` (which installs every one); under CI (``CI`` set, and not to 0 or
# false) it fails instead, since CI installs everything and must run every such test.

#: The testbed's components, as ``dynosim testbed --check`` finds them
#: (dynosim.testbed.tools).
TESTBED_COMPONENTS = ("haproxy", "nginx", "postgres", "gunicorn", "gevent", "psycopg", "ruby", "puma",
                      "unicorn", "ruby-pg", "ruby-rack", "ruby-rack-timeout")


def _module(name: str) -> Optional[str]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return (spec.origin or name) if spec is not None else None


@functools.lru_cache(maxsize=None)
def _testbed_tools() -> Dict[str, Optional[str]]:
    from dynosim.testbed.tools import tools

    return {t.name: t.path for t in tools()}


#: Every component a test may name, and how to find it: its path, or None when missing.
COMPONENTS: Dict[str, Callable[[], Optional[str]]] = {
    **{name: functools.partial(lambda n: _testbed_tools()[n], name) for name in TESTBED_COMPONENTS},
    "chromium": lambda: shutil.which("chromium") or shutil.which("chromium-browser"),
    "playwright": lambda: _module("playwright"),
    "distributed": lambda: _module("distributed"),
    "starlette": lambda: _module("starlette"),
    "uvicorn": lambda: _module("uvicorn"),
}


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def missing_components(names: Sequence[str]) -> List[str]:
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown:
        raise ValueError(f"unknown real-stack components {unknown}; known: {', '.join(COMPONENTS)}")
    return [n for n in dict.fromkeys(names) if COMPONENTS[n]() is None]


def require(*names: str) -> None:
    """Skips the test (or, at a module's top, the module) unless every component in `names`
    is installed; under CI fails instead."""
    absent = missing_components(names)
    if not absent:
        return
    what, it = ", ".join(absent), "them" if len(absent) > 1 else "it"
    if under_ci():
        pytest.fail(f"CI runs every real-stack test, but {what} {'are' if len(absent) > 1 else 'is'} not "
                    f"installed (make testbed-deps installs {it})", pytrace=False)
    pytest.skip(f"needs {what}, not installed: make testbed-deps installs {it}", allow_module_level=True)


def component(name: str) -> str:
    """The path of an installed component (after `require`)."""
    require(name)
    path = COMPONENTS[name]()
    assert path is not None
    return path


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs(*components): a real-stack test's components (conftest.COMPONENTS): skipped "
        "unless all are installed, failed under CI")
    config.addinivalue_line(
        "markers", "serial: runs alone (`make test` runs these after the others, one at a time): a test of "
        "the real stack, whose timings the machine's other load would move; set from `needs` and from the "
        "documented commands that start the testbed")


#: The documented commands that start the real stack (tests/test_docs.py runs them).
SERIAL_COMMANDS = ("dynosim testbed",)


def is_serial(item) -> bool:
    """Whether a test must run alone: it needs a real component (`needs`), or runs a documented
    command that starts the testbed."""
    if any(True for _ in item.iter_markers("needs")):
        return True
    command = getattr(getattr(item, "callspec", None), "params", {}).get("command")
    return isinstance(command, str) and command.startswith(SERIAL_COMMANDS) and "--check" not in command


def pytest_collection_modifyitems(config, items):
    for item in items:
        for mark in item.iter_markers("needs"):
            unknown = [n for n in mark.args if n not in COMPONENTS]
            if unknown or not mark.args:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.needs{mark.args}: expected components "
                                        f"among {', '.join(COMPONENTS)}")
        if is_serial(item):
            item.add_marker(pytest.mark.serial)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before any fixture of the test runs (a fixture may start the real stack)."""
    names = [n for mark in item.iter_markers("needs") for n in mark.args]
    if names:
        require(*names)


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
