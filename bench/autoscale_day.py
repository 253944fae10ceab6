#!/usr/bin/env python3
"""Benchmark: a day of traffic through an autoscaled fleet on the event engine, against the
clock and against its memory (issue #24: "a day (86,400 s) at 1,000 req/s on average (86
million requests) with an autoscaler, on the event engine, in under a minute on one core,
memory flat in the run's length").

The scenario: Poisson arrivals on a daily sine, 1,000 req/s on average (1,600 at 15:00, 400 at
03:00); a lognormal service time (median 150 ms, sigma 0.5) on dynos of 4 slots that boot in
20 to 60 s, 40 of them at midnight; Judoscale's rule on the p95 queue time (its defaults: 50 to
100 ms, every 10 s)
between 10 and 200 dynos; random routing. An autoscaled scenario runs on the event engine
only (the direct engine refuses it). One replication per run, in a fresh Python subprocess
pinned to one CPU (unless --no-pin), for 6 h, 12 h and 24 h of the day from midnight: the
24 h run is the headline; the peak RSS by length shows whether memory grows with the run (it
should not: the engine keeps streaming statistics, HDR histograms, and per-request state only
for the requests in flight).

    python bench/autoscale_day.py [--hours 6,12,24] [--no-pin] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from machine import machine_info, one_cpu, run_scenario

HOURS = (6.0, 12.0, 24.0)


def scenario(hours: float) -> dict:
    return {
        "name": "autoscale-day-1000",
        "arrivals": {"process": "poisson",
                     "rate": {"mean": "1000/s", "amplitude": "600/s", "period": "24h", "peak": "15h"}},
        "service": {"distribution": "lognormal", "median": "150ms", "sigma": 0.5},
        "fleet": {"dynos": 40, "slots": 4,
                  "boot_time": {"distribution": "uniform", "min": "20s", "max": "60s"}},
        "autoscale": {"rule": "judoscale", "min": 10, "max": 200},
        "run": {"duration": hours * 3600.0, "warmup": 0, "replications": 1, "seed": 1},
    }


def figures(report: dict, rep: dict) -> dict:
    """What this benchmark keeps of a run's report and of its replication's figures."""
    return {"engine": report["engine"], "simulated_requests": rep["simulated_requests"],
            "response_p95": rep["response"]["p95"], "errors": rep["errors"]["total"],
            "fleet_mean": rep["fleet"]["size"]["mean"], "fleet_max": rep["fleet"]["size"]["max"],
            "dyno_seconds": rep["fleet"]["dyno_seconds"], "actions": rep["autoscale"]["actions"]}


def child(doc: dict | None, pin) -> dict:
    return run_scenario(doc, pin, figures)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", default=",".join(f"{h:g}" for h in HOURS),
                    help="run lengths in simulated hours from midnight (default 6,12,24)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the runs to one CPU")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    args = ap.parse_args(argv)
    hours = [float(h) for h in args.hours.split(",") if h.strip()]
    pin = one_cpu(args.no_pin, apply=False)  # each run pins its own child process

    from dynosim import _dynosim

    machine = machine_info(pin, dynosim_engine=getattr(_dynosim, "__version__", None))
    print(f"machine: {machine['cpu']}, os.cpu_count={machine['os.cpu_count']}, "
          + (f"runs pinned to CPU {pin}" if pin is not None else "not pinned")
          + f"; {machine['platform']}")
    print(f"dynosim {machine['dynosim_engine']} ({machine['dynosim_build']} build), git {machine['git']}; "
          "load average at start " + (" ".join(f"{x:.2f}" for x in machine["loadavg_at_start"])
                                      if machine["loadavg_at_start"] else "n/a"))
    baseline = child(None, pin)
    base_mib = baseline["ru_maxrss_kib"] / 1024
    print(f"baseline (python + import dynosim, no run): peak RSS {base_mib:.1f} MiB\n")
    hdr = (f"{'hours':>5} {'engine':<7} {'requests':>12} {'wall':>8} {'req/s':>10} {'fleet mean/max':>15} "
           f"{'actions':>7} {'p95':>8} {'peak RSS':>9} {'- baseline':>10}")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for h in hours:
        out = child(scenario(h), pin)
        row = dict(out, hours=h, req_per_s=out["simulated_requests"] / out["call_seconds"],
                   rss_mib=out["ru_maxrss_kib"] / 1024,
                   rss_over_baseline_mib=out["ru_maxrss_kib"] / 1024 - base_mib)
        rows.append(row)
        print(f"{h:>5g} {row['engine']:<7} {row['simulated_requests']:>12,} {row['call_seconds']:>7.1f}s "
              f"{row['req_per_s'] / 1e6:>8.2f} M {row['fleet_mean']:>7.1f} / {row['fleet_max']:<5g} "
              f"{row['actions']:>7g} {row['response_p95'] * 1e3:>5.0f} ms {row['rss_mib']:>5.1f} MiB "
              f"{row['rss_over_baseline_mib']:>6.1f} MiB", flush=True)
    if args.json:
        command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
        args.json.write_text(json.dumps({"command": command, "machine": machine,
                                         "baseline_rss_mib": base_mib, "runs": rows}, indent=2))
    day = [r for r in rows if r["hours"] == 24.0]
    if day:
        verdict = "under" if day[0]["call_seconds"] < 60 else "OVER"
        print(f"\na day at 1,000 req/s on average: {day[0]['simulated_requests']:,} requests in "
              f"{day[0]['call_seconds']:.1f} s, {verdict} the issue's minute on one core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
