"""The CPU the stack's other programs take from the dynos' cores: what ``--calibrate`` sets as
``router.colocated_cpu`` (docs/testbed.md, "Calibration"; docs/dyno.md, "A router on the
dyno's machine").

On this machine HAProxy, the load generator (the Rust one, in the testbed's own process) and
PostgreSQL run beside the dynos and are not pinned: when the dynos' cores are every core they
may use (the issue's case: one dyno of both of this machine's 2 cores), all their work per
request lands on the dynos' cores; when those programs have cores the dynos do not use, the
scheduler puts most of it there. So around the load (:func:`snapshot` before and after it):

- the stack's CPU: each program's CPU clock (``clock_gettime`` on its process clock: every
  thread, to the nanosecond; PostgreSQL with its backends, and those it reaped);
- which of it ran on the dynos' cores: all of it when the cores they may use (their
  affinity) are all the dynos', none when they share none, and otherwise what the dynos'
  cores were busy with (``/proc/stat``, in ticks of 10 ms: coarse over a short run) beyond the
  dynos' own processes, over the stack's CPU (clamped to [0, 1]).

:func:`per_request` turns two snapshots into the figure.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Sequence

from .watchdog import descendants, processes

#: /proc/stat's and /proc/PID/stat's clock ticks per second.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_clock(pid: int) -> int:
    """The CPU-time clock of process `pid` (all its threads): Linux's CPUCLOCK_SCHED encoding
    of a pid, as glibc's ``clock_getcpuclockid`` makes it."""
    return ((~pid) << 3) | 2


def process_cpu(pid: int) -> Optional[float]:
    """CPU seconds process `pid` has used (None when it is gone or not visible)."""
    if pid == os.getpid():
        return time.process_time()
    try:
        return time.clock_gettime(process_clock(pid))
    except OSError:
        return None


def reaped_cpu(pid: int) -> float:
    """CPU seconds of the children process `pid` has reaped (its cutime + cstime)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # After the name: state is field 3, so cutime and cstime (16 and 17) are [13] and [14].
    return (int(fields[13]) + int(fields[14])) / CLOCK_TICKS


def tree_cpu(pid: int) -> Optional[float]:
    """CPU seconds of process `pid`, its live descendants, and the children it reaped."""
    own = process_cpu(pid)
    if own is None:
        return None
    below = descendants([pid], processes())
    return own + reaped_cpu(pid) + sum(process_cpu(p.pid) or 0.0 for p in below)


def busy_ticks() -> Dict[int, int]:
    """Each CPU's busy ticks so far (/proc/stat: user, nice, system, irq, softirq)."""
    out: Dict[int, int] = {}
    try:
        lines = open("/proc/stat").read().splitlines()
    except OSError:
        return out
    for line in lines:
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and len(values) >= 7:
            user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in values[:7])
            out[int(name[3:])] = user + nice + system + irq + softirq
    return out


def affinity(pid: int) -> Optional[List[int]]:
    try:
        return sorted(os.sched_getaffinity(pid))
    except OSError:
        return None


def snapshot(stack: Dict[str, int], dynos: Sequence[int],
             trees: Sequence[str] = ("database", "router")) -> Dict[str, Any]:
    """Now: the CPU seconds of each program of `stack` (name: its pid; for the names in
    `trees`, with its descendants: PostgreSQL's backends, nginx's workers), of the dynos' processes (the roots
    in `dynos`, with their workers), each CPU's busy ticks, and where the stack's programs may
    run. (The load generator is the testbed's own process, the parent of every other: its own
    CPU only.)"""
    return {"stack": {name: tree_cpu(pid) if name in trees else process_cpu(pid) for name, pid in stack.items()},
            "dynos": sum(tree_cpu(pid) or 0.0 for pid in dynos),
            "ticks": busy_ticks(), "time": time.monotonic(),
            "affinity": sorted({c for pid in stack.values() for c in (affinity(pid) or [])})}


def per_request(before: Dict[str, Any], after: Dict[str, Any], requests: int,
                dyno_cpus: Sequence[int]) -> Dict[str, Any]:
    """What the stack's programs spent per request on the dynos' cores between two
    :func:`snapshot`: ``{"seconds": per request on the dynos' cores (None if unknown),
    "stack": per request in all, by program, "share": the fraction on the dynos' cores, "how":
    "all" | "none" | "sampled" | None, "other_on_dyno_cores": seconds of the dynos' cores
    busy beyond the dynos and the stack, per request (something else on the machine: only
    where sampled)}``. `dyno_cpus` are the cores the dynos run on."""
    out: Dict[str, Any] = {"seconds": None, "stack": {}, "share": None, "how": None, "other_on_dyno_cores": None}
    if requests <= 0:
        return out
    spent: Dict[str, float] = {}
    for name, then in (before.get("stack") or {}).items():
        now = (after.get("stack") or {}).get(name)
        if then is not None and now is not None:
            spent[name] = max(0.0, now - then)
    out["stack"] = {name: s / requests for name, s in spent.items()}
    if not spent:
        return out
    total = sum(spent.values())
    allowed = set(after.get("affinity") or before.get("affinity") or [])
    dyno = set(dyno_cpus)
    if not allowed or allowed <= dyno:
        share, how = 1.0, "all"
    elif not allowed & dyno:
        share, how = 0.0, "none"
    else:
        t0, t1 = before.get("ticks") or {}, after.get("ticks") or {}
        busy = sum(t1.get(c, 0) - t0.get(c, 0) for c in dyno) / CLOCK_TICKS
        others = busy - max(0.0, float(after.get("dynos") or 0.0) - float(before.get("dynos") or 0.0))
        share = min(1.0, max(0.0, others / total)) if total > 0 else 0.0
        out["other_on_dyno_cores"] = max(0.0, others - total) / requests
        how = "sampled"
    out.update(seconds=total * share / requests, share=share, how=how)
    return out
