#!/usr/bin/env python3
"""Benchmark: services that call services against real time (issue #37's speed target).

The issue's scenario: three tiers, a fan-out of 10, 10,000 entry requests a second, on one core,
faster than 50 times real time. Here (every figure the scenario's own; nothing from a seed):

- ``web`` (the entry): Poisson arrivals at RATE, 100 dynos × 20 slots, a request of 5 ms of CPU
  (exponential) then one ``call`` to ``api``;
- ``api``: 50 dynos × 20 slots, 2 ms of I/O (exponential), then a ``fanout`` of 10 calls to
  ``search``, waiting for all;
- ``search``: 1,000 dynos × 2 slots, exponential service of mean 10 ms (load 0.5 at 100,000
  calls a second), random routing everywhere.

So every simulated second holds RATE × 12 requests (RATE at web and at api, 10 × RATE at
search). ``--hedge T`` adds ``hedge = T`` to the fan-out (a duration such as 20ms, or "p95").

Each run is one replication, after a 1-second warm-up, in a fresh Python subprocess pinned to
one CPU (bench/machine.py), at durations base × {1, 4} simulated seconds. The script prints the
simulated seconds per wall second and per CPU second of the run (the headline is the longest
run's; the CPU figure is the one to read on a shared machine), the requests of all three fleets
simulated a CPU second, and the mean response at each tier (a check that the runs are the same
system: web's mean is about 5 ms + api's, api's about 2 ms + 10 ms × H₁₀ = 31 ms at light
load).

    python bench/services_speed.py [--rate 10000] [--duration 5] [--hedge 20ms] [--json out.json]

The big-fleet tricks do not apply: shards (docs/engines.md) need a fleet whose dynos are
independent under random routing with Poisson arrivals of a constant rate, and a callee's
arrivals are its callers' calls, which come from the callers' own queues (not Poisson once a
caller queues, and one stream for the whole tier); replications run in parallel on several
cores (run.threads) or a Dask cluster as for any scenario.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from machine import machine_info, one_cpu, run_scenario

WARMUP = 1.0


def exp(mean: float) -> dict:
    return {"distribution": "exponential", "mean": mean}


def scenario(rate: float, duration: float, hedge: str | None) -> dict:
    fanout = {"fanout": "search", "count": 10, "wait": "all"}
    if hedge:
        fanout["hedge"] = hedge
    return {
        "name": "three-tier-fanout",
        "arrivals": {"process": "poisson", "rate": rate},
        "fleet": {"dynos": 100, "slots": 20},
        "request": {"phases": [{"cpu": exp(0.005)}, {"call": "api"}]},
        "services": {
            "api": {"fleet": {"dynos": 50, "slots": 20},
                    "request": {"phases": [{"io": exp(0.002)}, fanout]}},
            "search": {"fleet": {"dynos": 1000, "slots": 2}, "service": exp(0.010)},
        },
        "run": {"duration": duration, "warmup": WARMUP, "replications": 1, "seed": 1,
                "engine": "events"},
    }


def figures(report: dict, rep: dict) -> dict:
    services = rep.get("services", {})
    requests = rep["simulated_requests"] + sum(s.get("simulated_requests", s.get("requests", 0))
                                               for s in services.values())
    return {"engine": report["engine"], "engine_wall_seconds": report["wall_seconds"],
            "entry_requests": rep["simulated_requests"], "all_requests": requests,
            "web_response_mean": rep["response"]["mean"],
            "api_response_mean": services.get("api", {}).get("response", {}).get("mean"),
            "search_response_mean": services.get("search", {}).get("response", {}).get("mean"),
            "search_hedged": services.get("search", {}).get("calls", {}).get("hedged")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=10_000.0, help="entry requests a second (default 10,000)")
    ap.add_argument("--duration", type=float, default=5.0,
                    help="base measured simulated seconds; runs at 1× and 4× it (default 5)")
    ap.add_argument("--multiples", default="1,4")
    ap.add_argument("--hedge", help="hedge the fan-out: a duration (20ms) or a percentile (p95)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the runs to one CPU")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    args = ap.parse_args(argv)

    pin = one_cpu(args.no_pin, apply=False)
    from dynosim import _dynosim

    command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    machine = machine_info(pin, dynosim_engine=getattr(_dynosim, "__version__", None))
    print(f"machine: {machine['cpu']}, os.cpu_count={machine['os.cpu_count']}, "
          + (f"runs pinned to CPU {pin}" if pin is not None else "not pinned")
          + f"; git {machine['git']}; load average at start "
          + (" ".join(f"{x:.2f}" for x in machine["loadavg_at_start"])
             if machine["loadavg_at_start"] else "n/a"))
    print(f"three tiers (web → api → fan-out of 10 → search) at {args.rate:,.0f} entry req/s"
          + (f", hedge {args.hedge}" if args.hedge else "") + f"; warm-up {WARMUP:g} s")
    hdr = (f"{'measured':>9} {'requests':>12} {'wall':>8} {'CPU':>8} {'sim s/wall s':>12} "
           f"{'sim s/CPU s':>11} {'req/CPU s':>11} {'web':>8} {'api':>8} {'search':>8}")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for m in (float(x) for x in args.multiples.split(",")):
        duration = args.duration * m
        out = run_scenario(scenario(args.rate, duration, args.hedge), pin, figures)
        wall = max(out["call_seconds"], out["engine_wall_seconds"])
        simulated = WARMUP + duration
        row = dict(out, simulated_seconds=duration, warmup=WARMUP, wall_seconds=wall,
                   realtime_ratio=simulated / wall, realtime_ratio_cpu=simulated / out["cpu_seconds"],
                   requests_per_cpu_second=out["all_requests"] / out["cpu_seconds"])
        rows.append(row)

        def ms(x):
            return f"{x * 1e3:6.1f}ms" if x is not None else "     n/a"
        print(f"{duration:>8g}s {row['all_requests']:>12,} {wall:>7.2f}s {out['cpu_seconds']:>7.2f}s "
              f"{row['realtime_ratio']:>12.1f} {row['realtime_ratio_cpu']:>11.1f} "
              f"{row['requests_per_cpu_second'] / 1e6:>9.2f} M {ms(row['web_response_mean'])} "
              f"{ms(row['api_response_mean'])} {ms(row['search_response_mean'])}", flush=True)
    last = rows[-1]
    print()
    print(f"headline: {last['realtime_ratio_cpu']:.1f}× real time per CPU second "
          f"({last['realtime_ratio']:.1f}× by the wall clock); the target is 50×")
    print(f"reproduce: {command}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "command": command, "rate": args.rate,
                                         "hedge": args.hedge, "runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
