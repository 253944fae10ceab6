"""The testbed's watchdog: cleans up after a testbed process that died without cleaning up
(SIGKILL, the out-of-memory killer), where no Python code of its own can run.

    python -I .../dynosim/testbed/watchdog.py [--grace S] [--period S]    (or python -m dynosim.testbed.watchdog)

:class:`dynosim.testbed.procs.Supervisor` starts it in a session of its own (so a terminal's
Ctrl-C does not reach it) with its standard input the read end of a pipe whose write end only
the supervisor holds, and tells it, one line at a time:

``group PGID SIGNUM``
    a process group it started (its leader is also its session leader: PGID is the session id
    too), and the signal that stops it;
``ungroup PGID``
    that group was stopped: forget it (its number may be reused by someone else's process);
``dir PATH`` / ``undir PATH``
    a directory to remove, or no longer to remove;
``done``
    the supervisor closed normally: exit without touching anything.

While registered groups live, every ``--period`` seconds (1 by default; a /proc scan of a
millisecond or two) it notes the processes they started in sessions of their own, such as
PostgreSQL's backends: once their parent is dead nothing else links them to the testbed.

End of input without ``done`` means the supervisor is gone (the kernel closed its end of the
pipe). Then the watchdog sends each registered group its stop signal (and SIGTERM to the
escaped processes it noted), waits up to ``--grace`` seconds for them to end, SIGKILLs whatever is left, removes the
directories and exits. It never signals a group it was not told about, nor one whose
members are no longer in the session it was registered with; and it ends within about
``grace`` + 3 seconds of the supervisor's death.

Standard library only, and nothing of the dynosim package: it is run by file path with
``python -I`` so that starting it does not import the engine, and
:mod:`dynosim.testbed.procs` imports its /proc helpers from here.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import sys
import time
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

#: Polling period while waiting for processes to end.
POLL = 0.05
#: How long to wait for SIGKILLed processes to disappear before removing the directories.
KILL_WAIT = 2.0


class Proc(NamedTuple):
    """A process as /proc/PID/stat shows it."""

    pid: int
    ppid: int
    pgrp: int
    session: int
    state: str
    starttime: int  # clock ticks after boot: with pid, identifies a process across pid reuse

    @property
    def alive(self) -> bool:
        """Running or stopped; a zombie (ended, not yet reaped) is not alive."""
        return self.state not in ("Z", "X", "x")


def read_proc(pid: int) -> Optional[Proc]:
    """The process `pid`, or None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # "pid (comm) state ppid pgrp session ... starttime ...": comm may hold spaces and ")".
    rest = text[text.rindex(")") + 2:].split()
    return Proc(pid, int(rest[1]), int(rest[2]), int(rest[3]), rest[0], int(rest[19]))


def processes() -> Dict[int, Proc]:
    """Every process of the machine (that this process may see), by pid."""
    found: Dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            proc = read_proc(int(entry))
            if proc is not None:
                found[proc.pid] = proc
    return found


def group_members(pgid: int, procs: Dict[int, Proc]) -> List[Proc]:
    """The live processes of group `pgid` in session `pgid` (the groups of the testbed are
    sessions of their own, so a group number reused elsewhere does not match)."""
    return [p for p in procs.values() if p.pgrp == pgid and p.session == pgid and p.alive]


def descendants(roots: Iterable[int], procs: Dict[int, Proc]) -> List[Proc]:
    """The live descendants of the processes `roots` (not the roots themselves), whatever
    their group or session."""
    children: Dict[int, List[Proc]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p)
    found: List[Proc] = []
    seen: Set[int] = set(roots)
    todo = list(seen)
    while todo:
        for child in children.get(todo.pop(), []):
            if child.pid not in seen:
                seen.add(child.pid)
                todo.append(child.pid)
                if child.alive:
                    found.append(child)
    return found


def still_alive(proc: Proc) -> bool:
    """`proc` (the same process: same start time) is still running."""
    now = read_proc(proc.pid)
    return now is not None and now.starttime == proc.starttime and now.alive


def signal_proc(proc: Proc, sig: int) -> None:
    """Sends `sig` to `proc` if it is still that process."""
    if still_alive(proc):
        try:
            os.kill(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# --- the watchdog ----------------------------------------------------------------------------


class Registry:
    """What the supervisor registered: groups (-> stop signal, in registration order) and
    directories; and the processes the groups started in sessions of their own, as last seen
    (they must be found while their parents live: once orphaned, nothing links them to the
    testbed)."""

    def __init__(self) -> None:
        self.groups: Dict[int, int] = {}
        self.dirs: List[str] = []
        self.escaped: Dict[Tuple[int, int], Proc] = {}

    def apply(self, raw: bytes) -> bool:
        """Applies one line; True for ``done``. Malformed lines (a supervisor killed halfway
        through a write) are skipped."""
        line = raw.decode("utf-8", "surrogateescape")
        verb, _, arg = line.partition(" ")
        try:
            if verb == "done":
                return True
            elif verb == "group":
                pgid, signum = (int(x) for x in arg.split())
                if pgid > 1 and 0 < signum < signal.NSIG:
                    self.groups[pgid] = signum
            elif verb == "ungroup":
                self.groups.pop(int(arg), None)
            elif verb == "dir" and os.path.isabs(arg):
                self.dirs.append(arg)
            elif verb == "undir" and arg in self.dirs:
                self.dirs.remove(arg)
        except ValueError:
            pass
        return False

    def look(self) -> Dict[int, Proc]:
        """Records the groups' escaped descendants now alive; returns the processes seen."""
        procs = processes()
        self.escaped = {key: p for key, p in self.escaped.items() if still_alive(p)}
        for pgid in self.groups:
            members = group_members(pgid, procs)
            for p in descendants([m.pid for m in members], procs):
                if p.pgrp != pgid:
                    self.escaped[(p.pid, p.starttime)] = p
        return procs


def watch(fd: int, registry: Registry, period: float) -> bool:
    """Reads the supervisor's lines from `fd` until ``done`` (True) or end of input (False),
    looking at the registered groups' descendants every `period` seconds meanwhile."""
    pending = b""
    last_look = time.monotonic()
    while True:
        wait = max(0.0, last_look + period - time.monotonic()) if registry.groups else None
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            data = os.read(fd, 65536)
            if not data:
                return False
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                if registry.apply(line):
                    return True
        if registry.groups and time.monotonic() >= last_look + period:
            registry.look()
            last_look = time.monotonic()


def clean_up(registry: Registry, grace: float) -> None:
    """Stops the registered groups (their stop signal, then SIGKILL after `grace`), and the
    processes they started in other sessions (SIGTERM, then SIGKILL), then removes the
    registered directories."""
    procs = registry.look()
    targets: List[Proc] = list(registry.escaped.values())
    for pgid, signum in registry.groups.items():
        members = group_members(pgid, procs)
        if members:
            targets += members
            signal_group(pgid, signum)
    for p in registry.escaped.values():
        signal_proc(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(still_alive(p) for p in targets) and time.monotonic() < deadline:
        time.sleep(POLL)
    left = [p for p in targets if still_alive(p)]
    for p in left:
        signal_proc(p, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT
    while any(still_alive(p) for p in left) and time.monotonic() < deadline:
        time.sleep(POLL)
    for path in registry.dirs:
        shutil.rmtree(path, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Cleans up after a testbed killed outright (see the module's notes).")
    parser.add_argument("--grace", type=float, default=3.0,
                        help="seconds between the stop signals and SIGKILL (default 3)")
    parser.add_argument("--period", type=float, default=1.0,
                        help="seconds between looks for what the groups started in other sessions (default 1)")
    args = parser.parse_args(argv)
    # A terminal's hang-up or Ctrl-C is for the testbed, which tells the watchdog what to do.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    registry = Registry()
    if not watch(sys.stdin.fileno(), registry, args.period):
        clean_up(registry, args.grace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
