#!/usr/bin/env python3
"""Benchmark: `dynosim serve` under a flood of heavy runs, its peak memory (issue 34).

The issue's flood: twelve concurrent ``POST /api/run``, each with its own ``X-Dynosim-Client``
and each inside the per-run caps (3,000,000 dynos, 2,000,000 req/s, 12 s, no warm-up, two
replications). Before the server had limits as a whole they all ran at once and its resident
memory reached 20.1 GB of the machine's 24 GB.

The script starts ``dynosim serve`` (its limits are the defaults unless given after ``--``),
sends the flood at once, and samples every 0.2 s, until every request has its answer, the
server's resident memory (``VmRSS`` of /proc) and what it accounts for (``GET /api/status``:
the engine state of its runs, each estimated before it starts). It records the answers by
status, the peak resident memory (``VmHWM``: the kernel's own peak, not a sample), the peak of
the accounted memory, the server's limits, the server's resident memory once started (before
the flood), the wall time, and the machine.

    python bench/serve_flood.py [--requests 12] [--json out.json] [-- --max-runs 2 --max-memory 4GB]

The answers are 200 (ran), 503 (refused at once: the queue was full) and never anything else;
the script fails if one is. A request without its answer after ``--timeout`` seconds (a busy
machine) gives up, as a page would, and is counted as "no answer".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from machine import machine_info

REPO = Path(__file__).resolve().parent.parent
TOML = (REPO / "python" / "dynosim" / "scenarios" / "rapgenius.toml").read_text(encoding="utf-8")


def proc_status(pid: int) -> dict:
    """The process's VmRSS and VmHWM (its peak), bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12, help="concurrent requests (default 12)")
    parser.add_argument("--dynos", type=int, default=3_000_000)
    parser.add_argument("--rate", default="2000000/s")
    parser.add_argument("--duration", default="12s")
    parser.add_argument("--replications", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=7200.0,
                        help="seconds a request waits for its answer before it gives up (default 7200)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("serve_args", nargs="*", help="after --: dynosim serve's options (its limits)")
    args = parser.parse_args()

    machine = machine_info(None, memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    command = [sys.executable, "-m", "dynosim", "serve", "--port", "0", *args.serve_args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        line = proc.stdout.readline()
        if "http://" not in line:
            raise SystemExit(f"serve did not start: {proc.stderr.read()}")
        where = line.split("http://", 1)[1].split("/", 1)[0]

        def status() -> dict:
            with urllib.request.urlopen(f"http://{where}/api/status", timeout=30) as r:
                return json.loads(r.read())

        settings = {"fleet.dynos": args.dynos, "arrivals.rate": args.rate, "run.duration": args.duration,
                    "run.warmup": "0s", "run.replications": args.replications}
        body = json.dumps({"toml": TOML, "set": settings}).encode()
        started_rss = proc_status(proc.pid)["VmRSS"]
        limits = status()
        answers: dict = {}

        def post(i: int) -> None:
            request = urllib.request.Request(f"http://{where}/api/run", data=body, method="POST",
                                             headers={"Content-Type": "application/json",
                                                      "X-Dynosim-Client": f"flood-{i}"})
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=args.timeout) as r:
                    r.read()
                    answers[i] = (r.status, time.monotonic() - t0, None)
            except urllib.error.HTTPError as e:
                answers[i] = (e.code, time.monotonic() - t0, json.loads(e.read()).get("error"))
            except (TimeoutError, urllib.error.URLError) as e:
                # No answer in time: the client gives up and closes (the server then cancels
                # its run or gives up its place).
                answers[i] = ("no answer", time.monotonic() - t0, f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=post, args=(i,)) for i in range(args.requests)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        peak_sampled_rss = peak_accounted = 0.0
        peak_runs = peak_queued = 0
        while any(t.is_alive() for t in threads):
            s = status()
            peak_sampled_rss = max(peak_sampled_rss, proc_status(proc.pid)["VmRSS"])
            peak_accounted = max(peak_accounted, s["memory"])
            peak_runs, peak_queued = max(peak_runs, s["runs"]), max(peak_queued, s["queued"])
            time.sleep(0.2)
        wall = time.monotonic() - t0
        final = status()
        peak_rss = proc_status(proc.pid)["VmHWM"]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    codes = Counter(code for code, _, _ in answers.values())
    doc = {
        "command": "python bench/serve_flood.py " + shlex.join(sys.argv[1:]),
        "serve": shlex.join(["dynosim", *command[3:]]),
        "flood": {"requests": args.requests, **settings},
        "limits": {k: limits[k] for k in ("max_runs", "max_memory", "max_queue")},
        "answers": {str(k): v for k, v in sorted(codes.items(), key=str)},
        "refusals": sorted({e for _, _, e in answers.values() if e}),
        "seconds_to_answer": sorted(round(s, 1) for _, s, _ in answers.values()),
        "wall_seconds": wall,
        "rss_started": started_rss,
        "peak_rss": peak_rss,
        "peak_rss_sampled": peak_sampled_rss,
        "peak_accounted": max(peak_accounted, final["peak_memory"]),
        "peak_runs": max(peak_runs, final["peak_runs"]),
        "peak_queued": max(peak_queued, final["peak_queued"]),
        "machine": machine,
    }
    gb = 1e9
    print(f"{args.requests} requests of {args.dynos:,} dynos at {args.rate} for {args.duration}, "
          f"{args.replications} replications; limits: {limits['max_runs']} runs, "
          f"{limits['max_memory'] / gb:.2f} GB, queue {limits['max_queue']}")
    print(f"answers {dict(codes)}; wall {wall:.0f} s; runs at once at most {doc['peak_runs']}, "
          f"queued at most {doc['peak_queued']}")
    print(f"server RSS: {started_rss / gb:.2f} GB started, peak {peak_rss / gb:.2f} GB; "
          f"accounted engine state at most {doc['peak_accounted'] / gb:.2f} GB")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    unexpected = set(codes) - {200, 409, 503, "no answer"}
    if unexpected:
        print(f"unexpected answers: {sorted(unexpected)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
