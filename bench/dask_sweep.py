#!/usr/bin/env python3
"""Benchmark: a 200-point sweep on 1, 2 and 4 Dask workers (issue #28), against the same
sweep in this process's threads (no Dask), and checked to give the same bits.

The sweep: the seed scenario (rapgenius) under random routing, fleet.dynos = 60..259 (200
points, one run each), --duration (default 6h: under half a second of engine time per point
here) and --replications (default 2). Each cluster is a ``LocalCluster`` of N worker
processes of one thread each, each engine on one thread (``RAYON_NUM_THREADS=1``): what
``--dask local`` starts, with N set. The cluster is
started (and its workers waited for) before the clock starts; the wall time is that of
``Sweep.run`` alone: sending 200 tasks, running them, and gathering the reports.

    python bench/dask_sweep.py [--workers 1,2,4] [--duration 6h] [--json out.json]

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    parser.add_argument("--duration", default="6h", help="run.duration of each point (default 6h)")
    parser.add_argument("--replications", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    from dynosim.distributed import wait_for_workers

    counts = [int(n) for n in args.workers.split(",")]
    local = sweep_for(args.duration, args.replications)
    threads = timed(local)
    reference = json.dumps(local.to_json())
    print(f"threads of this process ({os.cpu_count()} cores, no Dask): {threads:.2f} s", flush=True)
    rows = []
    for n in counts:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                          env={"RAYON_NUM_THREADS": "1"}) as cluster, Client(cluster) as client:
            wait_for_workers(client, n)
            sweep = sweep_for(args.duration, args.replications)
            wall = timed(sweep, client)
            same = json.dumps(sweep.to_json()) == reference
        rows.append({"workers": n, "wall_seconds": wall, "same_bits_as_threads": same})
        print(f"{n} worker(s): {wall:.2f} s{'' if same else '  DIFFERENT RESULTS'}", flush=True)
    one = next((r["wall_seconds"] for r in rows if r["workers"] == 1), None)
    print("| workers | wall | speed-up over 1 worker | same bits as without Dask |")
    print("|---|---|---|---|")
    for r in rows:
        r["speedup"] = one / r["wall_seconds"] if one else None
        speedup = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        print(f"| {r['workers']} | {r['wall_seconds']:.1f} s | {speedup} | {'yes' if r['same_bits_as_threads'] else 'NO'} |")
    print(f"| threads, no Dask | {threads:.1f} s | {one / threads:.2f}x | - |" if one else "")
    doc = {"points": len(POINTS), "duration": args.duration, "replications": args.replications,
           "threads_seconds": threads, "rows": rows,
           "command": "python " + " ".join(sys.argv)}
    doc["machine"] = machine_info(None, dask=__import__("dask").__version__)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["same_bits_as_threads"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
