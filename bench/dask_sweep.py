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
recorded beside it.

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
POINTS = list(range(60, 260))


def sweep_for(duration: str, replications: int):
    from dynosim import Scenario
    from dynosim.sweep import Sweep

    scenario = Scenario.load("rapgenius").with_overrides(
        {"router.policy": "random", "run.duration": duration, "run.replications": replications, "run.seed": 1})
    sweep = Sweep(scenario, {"fleet.dynos": POINTS})
    sweep.prepare()
    return sweep


def timed(sweep, client=None) -> float:
    started = time.perf_counter()
    sweep.run(client=client)
    return time.perf_counter() - started


def measure(n: int, duration: str, replications: int, reference: str) -> dict:
    """The sweep on a fresh LocalCluster of `n` single-threaded workers (0: threads, no Dask)."""
    from distributed import Client, LocalCluster

    from dynosim.distributed import wait_for_workers

    load = os.getloadavg()[0]
    sweep = sweep_for(duration, replications)
    if n == 0:
        wall = timed(sweep)
    else:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                          env={"RAYON_NUM_THREADS": "1"}) as cluster, Client(cluster) as client:
            wait_for_workers(client, n)
            wall = timed(sweep, client)
    same = reference == "" or json.dumps(sweep.to_json()) == reference
    return {"workers": n, "wall_seconds": wall, "same_bits_as_threads": same, "loadavg_1min_before": load,
            "json": json.dumps(sweep.to_json())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    parser.add_argument("--duration", default="6h", help="run.duration of each point (default 6h)")
    parser.add_argument("--replications", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2,
                        help="measure every setting this many times, in alternating order (default 2); "
                             "the fastest counts (a shared machine only ever slows a run down)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    settings = [0] + counts
    first = measure(0, args.duration, args.replications, "")
    reference = first.pop("json")
    runs = [first]
    print(f"threads of this process ({os.cpu_count()} cores, no Dask): {first['wall_seconds']:.2f} s", flush=True)
    for r in range(args.rounds):
        order = settings if r % 2 else list(reversed(settings))
        for n in order:
            if r == 0 and n == 0:
                continue
            m = measure(n, args.duration, args.replications, reference)
            m.pop("json")
            runs.append(m)
            what = f"{n} worker(s)" if n else "threads, no Dask"
            print(f"round {r + 1}: {what}: {m['wall_seconds']:.2f} s (load {m['loadavg_1min_before']:.2f} before)"
                  f"{'' if m['same_bits_as_threads'] else '  DIFFERENT RESULTS'}", flush=True)
    best = {n: min(m["wall_seconds"] for m in runs if m["workers"] == n) for n in settings}
    one = best.get(1)
    print("| workers | wall (fastest of rounds) | speed-up over 1 worker | same bits as without Dask |")
    print("|---|---|---|---|")
    for n in settings:
        same = all(m["same_bits_as_threads"] for m in runs if m["workers"] == n)
        speedup = f"{one / best[n]:.2f}x" if one else "-"
        label = str(n) if n else "threads of one process, no Dask"
        print(f"| {label} | {best[n]:.1f} s | {speedup} | {'yes' if same else 'NO'} |")
    doc = {"points": len(POINTS), "duration": args.duration, "replications": args.replications,
           "runs": runs, "fastest": {str(n): best[n] for n in settings},
           "command": "python " + " ".join(sys.argv)}
    doc["machine"] = machine_info(None, dask=__import__("dask").__version__)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(m["same_bits_as_threads"] for m in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
