#!/usr/bin/env python3
"""Benchmark: a large fleet (100,000 dynos at 1,000,000 req/s) simulated against real time,
and the engine's memory against run length (issue #10 §9).

Three scenarios, Poisson arrivals at 1,000,000 req/s routed at random to 100,000 dynos
(10 req/s each):

- ``service``: one `[service]` hold per request (exponential, mean 60 ms) on a single-slot
  dyno, load 0.6. ``run.engine = "auto"`` takes the direct engine.
- ``io-phase``: the same system written with the dyno model, one `io` phase (exponential,
  mean 60 ms) on a generic app of 1 process x 1 thread: the same figures, on the
  event-driven engine (a scenario with `[request]` phases runs only there).
- ``phases``: a request of three phases on standard-1x-like dynos (1 core) running 2 processes
  x 5 threads under an interpreter lock: cpu (exponential, 40 ms), a query on the app's
  database (exponential, 10 ms; 15,000 servers FCFS), cpu (exponential, 20 ms); load 0.6 of
  the cores and 0.667 of the database. Event-driven engine. The cores are shared by
  processor sharing (``fleet.cpu_sharing = "ps"``, as bench/dyno_vs_simpy.py's model), the
  model this figure has always measured; ``--cpu-sharing slices`` measures the default time
  slices instead (a 3 ms quantum: many more events a request).

(`run.engine = "events"` in the scenario is parsed but not honoured by ``_dynosim.run`` at
the commit this was written at: ``report::run`` calls ``run_replication``, which is always
``Engine::Auto``. So the one-phase system is put on the event-driven engine by writing it as a
phase, ``io-phase`` above; its figures equal ``service``'s, which the script checks.)

For each scenario and each duration d x {1, 4, 16} the scenario runs once, after a warm-up of
1.5 simulated seconds, in a fresh Python subprocess (pinned to one CPU unless --no-pin; one
replication) that reports the
wall time of ``_dynosim.run``, the simulated requests, the mean response time, and its peak
resident set size (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) after the run. A subprocess
that only imports the module gives the baseline. The script prints simulated seconds per wall
second, warm-up included (over 1: faster than real time; the longest run is the headline)
and the RSS by duration (flat if the engine's state is per dyno and per request in flight and
its statistics fixed-size).

    python bench/large_fleet.py [--scenarios service,io-phase,phases] [--json out.json]

Shards (issue #28): ``service`` and ``io-phase`` split into shards (`run.shards`, "auto" by
default: shards of 10,000 dynos for fleets of 100,000 or more), ``phases`` does not (its
database is shared). ``--shards 1`` runs the fleets whole, as before; ``--threads 2 --no-pin``
runs the shards on two cores. The issue's fleet, one million dynos at ten million req/s:

    python bench/large_fleet.py --scenarios service --dynos 1000000 --rate 1e7 --shards 1
    python bench/large_fleet.py --scenarios service --dynos 1000000 --rate 1e7 --no-pin
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from machine import machine_info, one_cpu, run_scenario

REPO = Path(__file__).resolve().parent.parent
DYNOS = 100_000
RATE = 1_000_000.0

# Base durations (simulated seconds): each scenario runs 1x, 4x and 16x this, after the same
# warm-up, so that every run has reached the steady state (the queues' relaxation time is about
# 1.2 s at this load: M/M/1 at rho = 0.6 and 60 ms) before its measured window begins.
BASE = {"service": 1.0, "io-phase": 0.25, "phases": 0.25}
WARMUP = 1.5
SCENARIOS = tuple(BASE)


def exp(mean: float) -> dict:
    return {"distribution": "exponential", "mean": mean}


def scenario(name: str, duration: float, warmup: float, dynos: int, rate: float,
             shards: str | None = None, threads: str | None = None, cpu_sharing: str = "ps") -> dict:
    run = {"duration": duration, "warmup": warmup, "replications": 1, "seed": 1}
    for key, value in (("shards", shards), ("threads", threads)):
        if value is not None:
            run[key] = value if value == "auto" else int(value)
    arrivals = {"process": "poisson", "rate": rate}
    router = {"policy": "random"}
    if name == "service":
        return {"arrivals": arrivals, "service": exp(0.06), "fleet": {"dynos": dynos, "slots": 1},
                "router": router, "run": run}
    if name == "io-phase":
        return {"arrivals": arrivals, "request": {"phases": [{"io": exp(0.06)}]},
                "fleet": {"dynos": dynos, "cores": 1}, "router": router,
                "app": {"server": "generic", "model": "threaded", "processes": 1,
                        "threads": 1, "lock": False},
                "run": dict(run, engine="events")}
    if name == "phases":
        # Database servers for a load of 2/3 at this rate.
        servers = max(1, round(rate * 0.010 * 1.5))
        return {"arrivals": arrivals,
                "request": {"phases": [{"cpu": exp(0.040)},
                                       {"use": "db", "time": exp(0.010)},
                                       {"cpu": exp(0.020)}]},
                "resources": {"db": {"servers": servers, "discipline": "fcfs"}},
                "fleet": {"dynos": dynos, "cores": 1, "cpu_sharing": cpu_sharing}, "router": router,
                "app": {"server": "generic", "model": "threaded", "processes": 2,
                        "threads": 5, "lock": True},
                "run": dict(run, engine="events")}
    raise ValueError(name)


def figures(report: dict, rep: dict) -> dict:
    """What this benchmark keeps of a run's report and of its replication's figures."""
    return {"engine": report["engine"], "offered_load": report["offered_load"],
            "engine_wall_seconds": report["wall_seconds"], "shards": report.get("shards", 1),
            "simulated_requests": rep["simulated_requests"],
            "response_mean": rep["response"]["mean"], "queue_mean": rep["queue"]["mean"]}


def child(doc: dict | None, pin) -> dict:
    return run_scenario(doc, pin, figures)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="comma-separated subset of " + ",".join(SCENARIOS))
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every base duration (default 1: " + ", ".join(
                        f"{k} {v:g} s" for k, v in BASE.items()) + ")")
    ap.add_argument("--warmup", type=float, default=WARMUP,
                    help=f"simulated warm-up of every run, seconds (default {WARMUP:g})")
    ap.add_argument("--multiples", default="1,4,16",
                    help="durations as multiples of the base (default 1,4,16)")
    ap.add_argument("--dynos", type=int, default=DYNOS)
    ap.add_argument("--rate", type=float, default=RATE)
    ap.add_argument("--shards", help="run.shards of every run: \"auto\" or a number (default: "
                    "the scenario's default, \"auto\"; 1: the fleet whole, as before issue #28)")
    ap.add_argument("--threads", help="run.threads of every run: \"auto\" (one per core) or a "
                    "number (default \"auto\"); more than 1 needs --no-pin to use them")
    ap.add_argument("--cpu-sharing", choices=["ps", "slices"], default="ps",
                    help="fleet.cpu_sharing of `phases` (default ps, processor sharing; slices: "
                         "the engine's default, time slices)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the runs to one CPU")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    args = ap.parse_args(argv)

    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for n in names:
        if n not in SCENARIOS:
            ap.error(f"unknown scenario {n!r}; expected some of {', '.join(SCENARIOS)}")
    multiples = [float(m) for m in args.multiples.split(",")]
    pin = one_cpu(args.no_pin, apply=False)  # each run pins its own child process

    import simpy  # noqa: F401  (only to fail early if the venv is not the project's)
    from dynosim import _dynosim

    command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    machine = machine_info(pin, dynosim_engine=getattr(_dynosim, "__version__", None))
    print(f"machine: {machine['cpu']}, os.cpu_count={machine['os.cpu_count']}, "
          + (f"runs pinned to CPU {pin}" if pin is not None else "not pinned")
          + f"; {machine['platform']}")
    print(f"python {machine['python']}, dynosim {machine['dynosim_engine']} "
          f"({machine['dynosim_build']} build), "
          f"git {machine['git']}; load average at start "
          + (" ".join(f"{x:.2f}" for x in machine["loadavg_at_start"])
             if machine["loadavg_at_start"] else "n/a"))
    print(f"fleet: {args.dynos:,} dynos at {args.rate:,.0f} req/s, random routing; one "
          f"replication per run, warm-up {args.warmup:g} s, each run in a fresh subprocess; "
          f"run.shards = {args.shards or 'auto (default)'}, "
          f"run.threads = {args.threads or 'auto (default)'}; phases' fleet.cpu_sharing = {args.cpu_sharing}")
    print()

    baseline = child(None, pin)
    base_mib = baseline["ru_maxrss_kib"] / 1024
    print(f"baseline (python + import dynosim, no run): peak RSS {base_mib:.1f} MiB")
    print()
    hdr = (f"{'scenario':<10} {'engine':<7} {'shards':>6} {'measured':>10} {'requests':>12} {'wall':>8} "
           f"{'sim s / wall s':>14} {'(/ CPU s)':>9} {'req/s (wall)':>13} {'mean resp':>10} "
           f"{'peak RSS':>10} "
           f"{'- baseline':>11}")
    print(hdr)
    print("-" * len(hdr))
    results = {}
    for name in names:
        rows = []
        for m in multiples:
            duration = BASE[name] * args.scale * m
            doc = scenario(name, duration, args.warmup, args.dynos, args.rate,
                           args.shards, args.threads, args.cpu_sharing)
            out = child(doc, pin)
            wall = max(out["call_seconds"], out["engine_wall_seconds"])
            simulated = args.warmup + duration
            row = dict(out, multiple=m, simulated_seconds=duration, warmup=args.warmup,
                       wall_seconds=wall, realtime_ratio=simulated / wall,
                       realtime_ratio_cpu=simulated / out["cpu_seconds"],
                       req_per_s=out["simulated_requests"] / wall,
                       rss_mib=out["ru_maxrss_kib"] / 1024,
                       rss_over_baseline_mib=out["ru_maxrss_kib"] / 1024 - base_mib)
            rows.append(row)
            print(f"{name:<10} {row['engine']:<7} {row['shards']:>6} {duration:>9g}s {row['simulated_requests']:>12,} "
                  f"{wall:>7.2f}s {row['realtime_ratio']:>14.2f} {row['realtime_ratio_cpu']:>9.2f} "
                  f"{row['req_per_s'] / 1e6:>11.2f} M {row['response_mean'] * 1e3:>7.1f} ms "
                  f"{row['rss_mib']:>6.1f} MiB {row['rss_over_baseline_mib']:>7.1f} MiB",
                  flush=True)
        growth = rows[-1]["rss_mib"] / rows[0]["rss_mib"]
        results[name] = {"runs": rows, "offered_load": rows[0]["offered_load"],
                         "realtime_ratio_longest": rows[-1]["realtime_ratio"],
                         "rss_growth_longest_over_shortest": growth}
    print()
    print("sim s / wall s: (warm-up + measured) simulated seconds per second of wall time, over "
          "1 faster than real time (/ CPU s: per second of the process's CPU time, what a "
          "busy machine does not inflate); requests: all simulated, warm-up included.")
    for name, r in results.items():
        rows = r["runs"]
        print(f"  {name}: {r['realtime_ratio_longest']:.2f}x real time over "
              f"{rows[-1]['warmup'] + rows[-1]['simulated_seconds']:g} simulated s "
              f"({'faster' if r['realtime_ratio_longest'] >= 1 else 'SLOWER'} than real time); "
              f"peak RSS {' / '.join(format(x['rss_mib'], '.0f') for x in rows)} MiB at "
              f"{' / '.join(format(x['multiple'], 'g') + 'x' for x in rows)} the duration "
              f"(x{r['rss_growth_longest_over_shortest']:.2f})")
    if "service" in results and "io-phase" in results:
        # The same system on both engines: compare the runs of equal duration.
        for a in results["service"]["runs"]:
            b = next((x for x in results["io-phase"]["runs"]
                      if abs(x["simulated_seconds"] - a["simulated_seconds"]) < 1e-9), None)
            if b is None:
                continue
            same = (a["simulated_requests"] == b["simulated_requests"]
                    and abs(a["response_mean"] - b["response_mean"]) < 1e-9)
            print(f"  service (direct) and io-phase (events) over {a['simulated_seconds']:g} s: "
                  + ("the same requests and mean response" if same else
                     f"mean response {a['response_mean'] * 1e3:.3f} against "
                     f"{b['response_mean'] * 1e3:.3f} ms"))
    if hasattr(os, "getloadavg"):
        machine["loadavg_at_end"] = os.getloadavg()
        print("load average at end: " + " ".join(f"{x:.2f}" for x in machine["loadavg_at_end"]))
    print(f"reproduce (from {REPO}): {command}")
    if args.json:
        out = {"command": command, "machine": machine, "dynos": args.dynos, "rate": args.rate,
               "cpu_sharing": args.cpu_sharing, "shards": args.shards, "threads": args.threads,
               "base_durations": {k: v * args.scale for k, v in BASE.items()},
               "warmup": args.warmup,
               "baseline_rss_mib": base_mib, "results": results}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
