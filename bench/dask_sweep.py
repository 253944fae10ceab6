#!/usr/bin/env python3
"""Benchmark: a 200-point sweep on 1, 2 and 4 Dask workers (issue #28), against the same
sweep in this process's threads (no Dask), and checked to give the same bits.

The sweep: the seed scenario (rapgenius) under random routing, fleet.dynos = 60..259 (200
points, one run each), --duration (default 6h: under half a second of engine time per point
here) and --replications (default 2). Each cluster is a ``LocalCluster`` of N worker
processes of one thread each, each engine on one thread (``RAYON_NUM_THREADS=1``): what
``--dask local`` starts, with N set. The cluster is
started (and its workers waited for) before the clock starts; the wall time is that of
``Sweep.run`` alone: sending 200 tasks, running them, and gathering the reports. Every setting
runs --rounds times (default 2), in alternating order, and the fastest counts: on a shared
machine others' work only ever slows a run down. The 1-minute load average before each run is
recorded beside it, and the CPU time (user + system) of this process and every worker over
the sweep: what the sweep costs whatever else shares the machine, where the wall time is
only what it got.

    python bench/dask_sweep.py [--workers 1,2,4] [--duration 6h] [--rounds 2] [--json out.json]

On one machine the speed-up cannot pass its core count; the figure that matters on a real
cluster is how close N workers come to N times one, which this measures up to the cores here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from machine import machine_info

REPO = Path(__file__).resolve().parent.parent
#: The sweep's points: fleet.dynos = 60, 61, ... (--points of them).
FIRST_DYNOS = 60
POINTS = list(range(FIRST_DYNOS, FIRST_DYNOS + 200))


def sweep_for(duration: str, replications: int):
    from dynosim import Scenario
    from dynosim.sweep import Sweep

    scenario = Scenario.load("rapgenius").with_overrides(
        {"router.policy": "random", "run.duration": duration, "run.replications": replications, "run.seed": 1})
    sweep = Sweep(scenario, {"fleet.dynos": POINTS})
    sweep.prepare()
    return sweep


def cpu_seconds(client=None) -> float:
    """CPU time (user + system) so far of this process, plus every worker's of `client`."""
    t = os.times()
    total = t.user + t.system
    if client is not None:
        total += sum(client.run(lambda: sum(os.times()[:2])).values())
    return total


def timed(sweep, client=None) -> tuple:
    """The sweep's wall time and the CPU time it took, this process's and the workers'."""
    cpu = cpu_seconds(client)
    started = time.perf_counter()
    sweep.run(client=client)
    wall = time.perf_counter() - started
    return wall, cpu_seconds(client) - cpu


def measure(n: int, duration: str, replications: int, reference: str) -> dict:
    """The sweep on a fresh LocalCluster of `n` single-threaded workers (0: threads, no Dask)."""
    from distributed import Client, LocalCluster

    from dynosim.distributed import wait_for_workers

    load = os.getloadavg()[0]
    sweep = sweep_for(duration, replications)
    if n == 0:
        wall, cpu = timed(sweep)
    else:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                          env={"RAYON_NUM_THREADS": "1"}) as cluster, Client(cluster) as client:
            wait_for_workers(client, n)
            wall, cpu = timed(sweep, client)
    same = reference == "" or json.dumps(sweep.to_json()) == reference
    return {"workers": n, "wall_seconds": wall, "cpu_seconds": cpu, "same_bits_as_threads": same,
            "loadavg_1min_before": load,
            "json": json.dumps(sweep.to_json())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    parser.add_argument("--duration", default="6h", help="run.duration of each point (default 6h)")
    parser.add_argument("--replications", type=int, default=2)
    parser.add_argument("--points", type=int, default=200, help="points of the sweep (default 200)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="measure every setting this many times, in alternating order (default 2); "
                             "the fastest counts (a shared machine only ever slows a run down)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    POINTS[:] = list(range(FIRST_DYNOS, FIRST_DYNOS + args.points))
    counts = [int(n) for n in args.workers.split(",")]
    settings = [0] + counts
    first = measure(0, args.duration, args.replications, "")
    reference = first.pop("json")
    runs = [first]
    print(f"threads of this process ({os.cpu_count()} cores, no Dask): {first['wall_seconds']:.2f} s, "
          f"CPU {first['cpu_seconds']:.1f} s (load {first['loadavg_1min_before']:.2f} before)", flush=True)
    for r in range(args.rounds):
        order = settings if r % 2 else list(reversed(settings))
        for n in order:
            if r == 0 and n == 0:
                continue
            m = measure(n, args.duration, args.replications, reference)
            m.pop("json")
            runs.append(m)
            what = f"{n} worker(s)" if n else "threads, no Dask"
            print(f"round {r + 1}: {what}: {m['wall_seconds']:.2f} s, CPU {m['cpu_seconds']:.1f} s "
                  f"(load {m['loadavg_1min_before']:.2f} before)"
                  f"{'' if m['same_bits_as_threads'] else '  DIFFERENT RESULTS'}", flush=True)
    best = {n: min((m for m in runs if m["workers"] == n), key=lambda m: m["wall_seconds"]) for n in settings}
    one = best[1]["wall_seconds"] if 1 in best else None
    print("| workers | wall (fastest of rounds) | speed-up over 1 worker | CPU, all processes | "
          "load before | same bits as without Dask |")
    print("|---|---|---|---|---|---|")
    for n in settings:
        b = best[n]
        same = all(m["same_bits_as_threads"] for m in runs if m["workers"] == n)
        speedup = f"{one / b['wall_seconds']:.2f}x" if one else "-"
        label = str(n) if n else "threads of one process, no Dask"
        print(f"| {label} | {b['wall_seconds']:.1f} s | {speedup} | {b['cpu_seconds']:.1f} s | "
              f"{b['loadavg_1min_before']:.2f} | {'yes' if same else 'NO'} |")
    doc = {"points": len(POINTS), "duration": args.duration, "replications": args.replications,
           "runs": runs, "fastest": {str(n): best[n]["wall_seconds"] for n in settings},
           "command": "python " + " ".join(sys.argv)}
    doc["machine"] = machine_info(None, dask=__import__("dask").__version__)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(m["same_bits_as_threads"] for m in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
