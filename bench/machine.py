"""What every benchmark script records beside its figures: the machine, the commit, and
timing and rate formatting shared by the scripts in bench/."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    """The short commit, marked when the engine's sources (crates/) differ from it."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "crates"],
                               capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            return out.stdout.strip() + ("+dirty-crates" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def timed(fn):
    """fn()'s result, its wall time and its process CPU time."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    t1, cpu1 = time.perf_counter(), time.process_time()
    return out, t1 - t0, cpu1 - cpu0


def one_cpu(no_pin: bool, apply: bool = True) -> int | None:
    """The lowest CPU this process may use, or None with `no_pin` (or where pinning is not
    available); with `apply`, the process is pinned to it. Pin before the engine starts its
    threads, so that it sees one CPU too."""
    if no_pin or not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    if apply:
        os.sched_setaffinity(0, {cpu})
    return cpu


def dynosim_build() -> str | None:
    """How the installed engine was compiled: "release", or "pgo" (tools/build-pgo.sh)."""
    try:
        from dynosim import _dynosim
    except ImportError:
        return None
    return getattr(_dynosim, "build", None)


def machine_info(pinned: int | None, **versions) -> dict:
    """The machine, the interpreter, the commit and the load, beside `versions` (e.g.
    simpy=..., dynosim_engine=...): what each script's JSON records."""
    return {
        "cpu": cpu_model(),
        "platform.processor": platform.processor(),
        "os.cpu_count": os.cpu_count(),
        "pinned_to_cpu": pinned,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        **versions,
        "dynosim_build": dynosim_build(),
        "git": git_commit(),
        "loadavg_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


#: What :func:`run_scenario`'s child process runs: the scenario as JSON on stdin (none: a
#: baseline), the CPU to pin to (or "-") as its argument; one JSON line out.
SCENARIO_CHILD = r"""
import json, resource, sys, time
pin = sys.argv[1]
if pin != "-":
    import os
    os.sched_setaffinity(0, {int(pin)})
from dynosim import _dynosim
text = sys.stdin.read()
out = {}
if text:
    c0, t0 = time.process_time(), time.perf_counter()
    report = json.loads(_dynosim.run(text, "."))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"report": report, "call_seconds": wall, "cpu_seconds": cpu}
out["ru_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(out))
"""


def run_scenario(doc: dict | None, pin: int | None, keep=None) -> dict:
    """Runs scenario `doc` (a dict) once in a fresh Python subprocess, pinned to CPU `pin`
    unless None: ``keep(report, its first replication's figures)`` (a dict of what the
    benchmark keeps of them) with ``call_seconds`` (the wall time of _dynosim.run),
    ``cpu_seconds`` (its process CPU time) and ``ru_maxrss_kib`` (the child's peak RSS after
    the run). With None nothing runs (a baseline: Python with dynosim imported), and there is
    only ``ru_maxrss_kib``."""
    import json
    import subprocess

    proc = subprocess.run([sys.executable, "-c", SCENARIO_CHILD, "-" if pin is None else str(pin)],
                          input="" if doc is None else json.dumps(doc),
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    report = out.pop("report", None)
    if report is None or keep is None:
        return out
    return {**keep(report, report["per_replication"][0]), **out}
