#!/usr/bin/env python3
"""Benchmark: what the feedback loops cost (docs/feedback.md).

1. Retries per simulated try: a fleet of 4 dynos (exponential 3 ms) at 800 req/s whose clients
   give up after 50 ms and try 3 times, tipped over at its start so that every request makes
   its 3 tries; against the same fleet with no retries offered the same tries (2,400 req/s,
   `run.allow_overload`), both on the event-driven engine (the direct engine runs no retries:
   a scenario with them runs on the other). The figure is the wall time per try with retries over that without
   (issue 35's target: at most 1.2). The runs alternate, pinned to one CPU; the median over
   pairs is given with the lowest and highest beside it.
2. A metastability map: `dynosim stability` of retry-storm scaled to 1,000 req/s over 10 loads
   (500 to 1,500 req/s) × 10 trigger lengths (15 s to 4 min), 10 replications of 30 simulated
   minutes (issue 35's target: under 2 minutes on the project's 2-core machine), timed whole;
   its runs stop at their verdicts, as the command's table has them (`--whole`: whole runs).

    python bench/feedback.py [--only tries|map] [--repeats N] [--no-pin]
                             [--map-replications N] [--whole] [--show]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
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


#: Issue 35's map: a scenario like retry-storm scaled to 1,000 req/s (the built-in's dyno,
#: database and clients, with 125 times its users, dynos and database servers: the same
#: utilisations, the same storm), 10 loads × 10 trigger lengths, 10 replications of 30
#: simulated minutes each. The loads average 1,000 req/s: 1.8 × 10⁹ user requests in all.
MAP_OVERRIDES = {"arrivals.rate": 1000, "fleet.dynos": 1250, "resources.db.servers": 2000}
MAP_VARY = ["arrivals.rate=500..1500:10", "faults.0.for=15s..4min:10"]


def bench_map(args) -> None:
    """The map, as `dynosim stability` runs it for its table (each replication stopped once its
    verdict is settled), timed whole in a child process; with --replications N below 10, the
    same grid with N replications a cell, and the figure for 10 extrapolated (×10/N: the work
    is the replications', each cell's the same per replication)."""
    if hasattr(os, "sched_setaffinity"):  # every core again, after part 1's pinning
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    sets = [a for k, v in MAP_OVERRIDES.items() for a in ("--set", f"{k}={v}")]
    cmd = [sys.executable, "-m", "dynosim", "stability", "retry-storm", *sets,
           "--vary", MAP_VARY[0], "--vary", MAP_VARY[1], "--replications", str(args.map_replications)]
    if args.whole:
        cmd.append("--json")  # every cell's metrics: whole runs
    print("2. the map: dynosim", " ".join(cmd[3:]))
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    load_after = os.getloadavg()
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        raise SystemExit(out.returncode)
    cpu = os.times()
    cpu_s = cpu.children_user + cpu.children_system
    runs = "whole runs (--json)" if args.whole else "runs stopped at their verdicts"
    print(f"   {wall:.0f} s wall, {cpu_s:.0f} s CPU ({cpu_s / wall:.2f} cores busy) for 100 cells x "
          f"{args.map_replications} replications x 30 min, {runs}; load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)")
    scale = 10 / args.map_replications
    if scale != 1:
        print(f"   10 replications: about {wall * scale:.0f} s wall (x{scale:g}), {cpu_s * scale:.0f} s CPU")
    full = wall * scale
    print(f"   target <= {MAP_TARGET_S:.0f} s: {'met' if full <= MAP_TARGET_S else 'NOT met'}")
    if args.show:
        print(out.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["tries", "map"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--duration", type=float, default=60.0, help="simulated seconds a run of part 1")
    ap.add_argument("--no-pin", action="store_true")
    ap.add_argument("--map-replications", type=int, default=10, choices=range(1, 11), metavar="N",
                    help="replications a cell of the map (10, the issue's; fewer: extrapolated)")
    ap.add_argument("--whole", action="store_true", help="the map with whole runs (--json), for comparison")
    ap.add_argument("--show", action="store_true", help="print the map")
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
