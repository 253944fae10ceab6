"""The testbed's process supervision (dynosim.testbed.procs): nothing it started is left
running, no temporary directory and no port is left taken, however the testbed ends.

A parent program (PARENT below, run as a subprocess as `dynosim testbed` would be) starts
with a Supervisor: a shell that forks two sleeps into its own group, a server listening on a
port, and a program that starts a sleep in a session of its own (as PostgreSQL's backends
are). It prints every pid (with its start time, so that a reused pid is not mistaken for
it), the port and the work directory, then ends one of six ways. Each test then waits (up
to a bound, polling) until every one of those processes is gone, the directory removed and
the port free. Only standard tools: sh, sleep, python.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from conftest import child_process
from dynosim.testbed.procs import Supervisor, TestbedError, free_ports
from dynosim.testbed.watchdog import read_proc

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the testbed runs on Linux only")

#: How long a test waits for everything to be gone (they take well under a second, or the
#: grace of 1 s plus a little after SIGKILL of the parent).
BOUND = 10.0

PARENT = r'''
import json, os, signal, sys, time
from dynosim.testbed.procs import Supervisor, free_ports, install_signal_handlers
from dynosim.testbed.watchdog import descendants, processes, read_proc

SERVER = """
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
time.sleep(1000)
"""
ESCAPER = """
import subprocess, time
subprocess.Popen(["sleep", "1000"], start_new_session=True)
time.sleep(1000)
"""

mode = sys.argv[1]
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
signal.signal(signal.SIGHUP, signal.SIG_DFL)  # even if started under nohup, which ignores it
with install_signal_handlers(), Supervisor(grace=1.0, watchdog_grace=1.0) as sup:
    group = sup.spawn(["sh", "-c", "sleep 1000 & sleep 1000 & wait"], name="group")
    port, = free_ports(1)
    server = sup.spawn([sys.executable, "-c", SERVER, str(port)], name="server", stop_signal=signal.SIGINT)
    escaper = sup.spawn([sys.executable, "-c", ESCAPER], name="escaper")
    sup.wait_for_port(port, server, timeout=10)
    deadline = time.monotonic() + 10
    while True:
        procs = processes()
        kids = {p: descendants([p], procs) for p in (group.pid, escaper.pid)}
        if len(kids[group.pid]) == 2 and len(kids[escaper.pid]) == 1:
            break
        assert time.monotonic() < deadline, kids
        time.sleep(0.02)
    if mode == "sigkill":
        time.sleep(1.2)  # the watchdog notes escaped processes once a second
    pids = [os.getpid(), sup._watchdog.pid, group.pid, server.pid, escaper.pid]
    pids += [p.pid for ps in kids.values() for p in ps]
    print(json.dumps({
        "procs": [[pid, read_proc(pid).starttime] for pid in pids],
        "port": port,
        "workdir": str(sup.workdir),
    }), flush=True)
    if mode == "exception":
        raise RuntimeError("boom")
    if mode != "normal":
        time.sleep(1000)
'''


def running(pid: int, starttime: int) -> bool:
    """The process is still there: neither gone, nor a zombie, nor its pid reused."""
    now = read_proc(pid)
    return now is not None and now.starttime == starttime and now.alive


def port_free(port: int) -> bool:
    """A server could listen on 127.0.0.1:port (with SO_REUSEADDR, as servers bind)."""
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_until(condition, bound: float = BOUND) -> bool:
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def started_parent(tmp_path: Path, mode: str) -> Iterator[Tuple[subprocess.Popen, dict]]:
    """PARENT running in `mode`, and what it printed; on leaving the block, whatever happened,
    the parent's group and every process it printed are killed (those still running only)."""
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    # A session of its own (child_process): signals to its group are what a terminal sends its
    # foreground job.
    with child_process([sys.executable, str(script), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, cwd=tmp_path) as parent:
        ready, _, _ = select.select([parent.stdout], [], [], 30)
        line = parent.stdout.readline() if ready else ""
        if not line:
            parent.kill()
            _, err = parent.communicate()
            pytest.fail(f"the parent did not start its children:\n{err}")
        info = json.loads(line)
        try:
            yield parent, info
        finally:
            for pid, start in info["procs"]:
                if running(pid, start):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("mode, action, code", [
    ("normal", None, 0),
    ("exception", None, 1),
    ("wait", lambda p: os.killpg(p.pid, signal.SIGINT), -signal.SIGINT),  # Ctrl-C: SIGINT to the foreground group
    ("wait", lambda p: os.kill(p.pid, signal.SIGTERM), 128 + signal.SIGTERM),
    ("wait", lambda p: os.kill(p.pid, signal.SIGHUP), 128 + signal.SIGHUP),  # the terminal closed
    ("sigkill", lambda p: os.kill(p.pid, signal.SIGKILL), -signal.SIGKILL),
], ids=["normal-exit", "exception", "ctrl-c", "sigterm", "sighup", "sigkill"])
def test_nothing_is_left_however_the_testbed_ends(tmp_path, mode, action, code):
    with started_parent(tmp_path, mode) as (parent, info):
        procs = info["procs"]
        if action is not None:
            action(parent)
        _, err = parent.communicate(timeout=BOUND)
        assert parent.returncode == code, err
        if mode == "exception":
            assert "RuntimeError: boom" in err
        assert wait_until(lambda: not any(running(pid, start) for pid, start in procs)), \
            [pid for pid, start in procs if running(pid, start)]
        assert wait_until(lambda: not Path(info["workdir"]).exists()), info["workdir"]
        assert wait_until(lambda: port_free(info["port"])), info["port"]


# --- one supervisor in this process ----------------------------------------------------------


@pytest.fixture
def sup():
    with Supervisor(grace=1.0) as s:
        yield s
    assert not s.workdir.exists()


def test_a_child_ignoring_its_stop_signal_is_killed_after_the_grace(sup):
    child = sup.spawn(["sh", "-c", "trap '' TERM; sleep 1000 & wait; wait"], name="stubborn")
    # sh has set up its trap once it has forked the sleep.
    assert wait_until(lambda: any(read_proc(p) and read_proc(p).ppid == child.pid for p in _pids()), 5)
    sleep = next(p for p in _pids() if read_proc(p) and read_proc(p).ppid == child.pid)
    sleep_start = read_proc(sleep).starttime
    began = time.monotonic()
    sup.stop(child, grace=0.5)
    took = time.monotonic() - began
    assert child.returncode == -signal.SIGKILL
    assert 0.5 <= took < 3, took
    assert wait_until(lambda: not running(sleep, sleep_start), 5)


def test_a_child_gets_its_own_stop_signal(sup):
    # SIGINT ends the foreground sleep and sh runs its trap; SIGTERM would end it with 143.
    child = sup.spawn(["sh", "-c", "trap 'exit 7' INT; while :; do sleep 0.05; done"], name="db",
                      stop_signal=signal.SIGINT)
    assert wait_until(lambda: any(read_proc(p) and read_proc(p).ppid == child.pid for p in _pids()), 5)
    began = time.monotonic()
    sup.stop(child, grace=5)
    assert child.returncode == 7
    assert time.monotonic() - began < 2


def test_wait_for_port_names_a_child_that_ended_and_quotes_its_log(sup):
    port, = free_ports(1)
    child = sup.spawn(["sh", "-c", "echo starting; echo 'fatal: no such config' >&2; exit 3"], name="haproxy")
    with pytest.raises(TestbedError) as e:
        sup.wait_for_port(port, child, timeout=10)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"haproxy exited with code 3 before listening on 127.0.0.1:{port}")
    assert "starting | fatal: no such config" in message


def test_wait_for_port_gives_up_after_its_timeout(sup):
    port, = free_ports(1)
    child = sup.spawn(["sleep", "1000"], name="slow")
    began = time.monotonic()
    with pytest.raises(TestbedError, match=f"slow did not listen on 127.0.0.1:{port} within 0.3 s"):
        sup.wait_for_port(port, child, timeout=0.3)
    assert time.monotonic() - began < 2


def test_spawn_pins_to_the_cpus_asked(sup):
    cpu = max(os.sched_getaffinity(0))
    child = sup.spawn(["sleep", "1000"], name="pinned", cpus=[cpu])
    assert wait_until(lambda: "sleep" in Path(f"/proc/{child.pid}/cmdline").read_text(), 5)  # exec'd
    assert os.sched_getaffinity(child.pid) == {cpu}
    status = Path(f"/proc/{child.pid}/status").read_text()
    assert f"Cpus_allowed_list:\t{cpu}\n" in status


def test_spawn_refuses_cpus_the_machine_does_not_give(sup):
    with pytest.raises(TestbedError, match="cannot pin dyno to CPUs 4096"):
        sup.spawn(["sleep", "1000"], name="dyno", cpus=[4096])


def test_spawn_reports_a_missing_program_in_one_line(sup):
    with pytest.raises(TestbedError, match=r"cannot start gunicorn \(/nonexistent/gunicorn\): No such file"):
        sup.spawn(["/nonexistent/gunicorn"], name="gunicorn")


def test_spawn_only_from_the_main_thread(sup):
    errors = []

    def other() -> None:
        try:
            sup.spawn(["sleep", "1000"], name="threaded")
        except RuntimeError as e:
            errors.append(e)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert errors and "main thread" in str(errors[0])


def test_close_is_idempotent_and_the_watchdog_leaves_quietly():
    sup = Supervisor()
    child = sup.spawn(["sleep", "1000"], name="sleeper")
    watchdog = sup._watchdog
    sup.close()
    sup.close()
    assert child.returncode == -signal.SIGTERM
    assert watchdog.returncode == 0
    assert not sup.workdir.exists()
    with pytest.raises(TestbedError, match="closed"):
        sup.spawn(["sleep", "1"], name="late")


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(5)
    assert len(set(ports)) == 5
    assert all(port_free(p) for p in ports)


def _pids():
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]
