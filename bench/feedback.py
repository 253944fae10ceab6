#!/usr/bin/env python3
"""Benchmark: what the feedback loops cost (docs/feedback.md).

1. Retries per simulated try: a fleet of 4 dynos (exponential 3 ms) at 800 req/s whose clients
   give up after 50 ms and try 3 times, tipped over at its start so that every request makes
   its 3 tries; against the same fleet with no retries offered the same tries (2,400 req/s,
   `run.allow_overload`), both on the event-driven engine (the direct engine runs no retries:
   a scenario with them runs on the other). The figure is the wall time per try with retries over that without
   (issue 35's target: at most 1.2). The runs alternate, pinned to one CPU; the median over
   pairs is given with the lowest and highest beside it.
2. A metastability map: `dynosim stability` over 10 loads × 10 trigger lengths, 10 replications
   of 30 simulated minutes at up to 1,000 req/s (issue 35's target: under 2 minutes on the
   project's 2-core machine), timed whole.

    python bench/feedback.py [--only tries|map] [--repeats N] [--no-pin]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import cpu_model, git_commit, one_cpu  # noqa: E402

TRIES_TARGET = 1.2
MAP_TARGET_S = 120.0


def fleet(rate: float, retries: bool, duration: float) -> dict:
    doc = {
        "name": "feedback-bench",
        "arrivals": {"process": "poisson", "rate": rate, "timeout": 0.05},
        "service": {"distribution": "exponential", "mean": 0.003},
        "fleet": {"dynos": 4},
        "router": {"timeout": "off"},
        # The event-driven engine for both: the direct one runs no retries.
        "run": {"duration": duration, "warmup": 1.0, "replications": 1, "seed": 3, "allow_overload": True,
                "threads": 1, "engine": "events"},
    }
    if retries:
        doc["arrivals"]["retry"] = {"attempts": 3, "backoff": "constant", "base": 0, "jitter": "none"}
        doc["faults"] = [{"at": 1.5, "for": 1.0, "kind": "slowdown", "factor": 3}]
    return doc


def run_once(doc: dict) -> tuple:
    """Wall seconds and tries simulated of one run."""
    from dynosim import _dynosim
    text = json.dumps(doc)
    t0 = time.perf_counter()
    report = json.loads(_dynosim.run(text, "."))
    wall = time.perf_counter() - t0
    r = report["per_replication"][0]
    tries = r["retries"]["attempts"] if "retries" in r else r["simulated_requests"]
    return wall, tries


def bench_tries(args) -> None:
    pinned = one_cpu(args.no_pin)
    print(f"1. retries per try (pinned to CPU {pinned}), {args.duration:g} simulated s a run")
    ratios, per_try = [], {True: [], False: []}
    for _ in range(args.repeats):
        with_r = run_once(fleet(800.0, True, args.duration))
        without = run_once(fleet(2400.0, False, args.duration))
        a, b = with_r[0] / with_r[1], without[0] / without[1]
        per_try[True].append(with_r[1] / with_r[0])
        per_try[False].append(without[1] / without[0])
        ratios.append(a / b)
        print(".", end="", flush=True)
    print()
    med = statistics.median(ratios)
    print(f"   with retries {statistics.median(per_try[True]) / 1e6:.2f} M tries/s, without "
          f"{statistics.median(per_try[False]) / 1e6:.2f} M requests/s")
    print(f"   time per try, retries over none: {med:.3f} (lowest {min(ratios):.3f}, highest {max(ratios):.3f}; "
          f"target <= {TRIES_TARGET}) {'met' if med <= TRIES_TARGET else 'NOT met'}")


MAP_SCENARIO = """
name = "map-bench"
[arrivals]
process = "poisson"
rate = 1000
timeout = "50ms"
[arrivals.retry]
attempts = 3
backoff = "constant"
base = 0
jitter = "none"
[service]
distribution = "exponential"
mean = "3ms"
[fleet]
dynos = 4
[router]
timeout = "off"
[[faults]]
at = "2min"
for = "5s"
kind = "slowdown"
factor = 3
[run]
duration = "30min"
warmup = "10s"
replications = 10
"""


def bench_map(args) -> None:
    if hasattr(os, "sched_setaffinity"):  # every core again, after part 1's pinning
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "map-bench.toml"
        path.write_text(MAP_SCENARIO)
        cmd = [sys.executable, "-m", "dynosim", "stability", str(path),
               "--vary", "arrivals.rate=550..1000:10", "--vary", "faults.0.for=1..30:10", "--json"]
        print("2. the map: dynosim", " ".join(cmd[3:]))
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            raise SystemExit(out.returncode)
    cpu = os.times()
    print(f"   {wall:.0f} s wall for 100 cells x 10 replications x 30 min (target <= {MAP_TARGET_S:.0f} s) "
          f"{'met' if wall <= MAP_TARGET_S else 'NOT met'}; its CPU {cpu.children_user + cpu.children_system:.0f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["tries", "map"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--duration", type=float, default=60.0, help="simulated seconds a run of part 1")
    ap.add_argument("--no-pin", action="store_true")
    args = ap.parse_args(argv)
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; commit {git_commit()}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if args.only in (None, "tries"):
        bench_tries(args)
    if args.only in (None, "map"):
        bench_map(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
