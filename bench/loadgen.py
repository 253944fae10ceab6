#!/usr/bin/env python3
"""Benchmark: can the testbed's load generator (crates/dynosim-load, via
``dynosim._dynosim.send_load``) follow an open-loop schedule from one core?

Issue #11's bar: at least 2,000 req/s open loop from one core, with p99 send lateness well
under the smallest service time (under 1 ms).

For each rate (default 2,000 and 5,000 req/s) and server delay (default 0 and 50 ms, the
latter so that hundreds of requests are in flight at once, as behind a real app), the script

1. starts the crate's example server (``bench_server``: reads a request, waits the delay,
   answers 200 with a 2-byte body, closes) on 127.0.0.1, pinned to the last core;
2. draws a Poisson schedule (exponential gaps, fixed seed) for ``--seconds`` seconds and
   runs the generator in a child process pinned to core 0 (``taskset -c 0``): the event loop,
   its dispatcher thread and Python's signal watcher all share that one core;
3. prints, per run: requests sent, the achieved send rate, answers OK and errors, send
   lateness (sent − scheduled) p50/p99/max, the share of sends more than 1 ms late, and the
   generator's CPU time (user + system, all its threads, during the run) as a share of one
   core; then the machine and the command.

    python bench/loadgen.py [--rates 2000,5000] [--delays-ms 0,50] [--seconds 10]
                            [--seed 1] [--nice N] [--json out.json]

The machine is shared: the last column is how busy core 0 was with other work during the
run (its busy time from /proc/stat less the generator's CPU time), which is what moves the
tail of the lateness. ``--nice -10`` (root) runs the generator at a higher priority, as a
testbed on a busy machine would.

Needs ``make build-dev`` (the package) and builds the example server with cargo.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import REPO, cpu_model, git_commit  # noqa: E402


def worker(args: argparse.Namespace) -> None:
    """The generator's side (run pinned to one core): one open-loop run, a JSON line out."""
    from dynosim import _dynosim

    rng = random.Random(args.seed)
    requests: list[tuple[float, str, dict[str, str]]] = []
    t = 0.0
    while True:
        t += rng.expovariate(args.rate)
        if t >= args.seconds:
            break
        requests.append((t, f"/r{len(requests)}", {}))
    before = resource.getrusage(resource.RUSAGE_SELF)
    wall0 = time.perf_counter()
    out = _dynosim.send_load(args.target, requests, "open", timeout=10.0,
                             deadline=args.seconds + 20.0)
    wall = time.perf_counter() - wall0
    after = resource.getrusage(resource.RUSAGE_SELF)
    sent = out["sent"]
    late = sorted(s - c for s, c in zip(sent, out["scheduled"]))
    errors: dict[str, int] = {}
    for e in out["error"]:
        if e is not None:
            errors[e] = errors.get(e, 0) + 1
    span = max(sent) - min(sent) if len(sent) > 1 else float("nan")
    print(json.dumps({
        "rate": args.rate,
        "requests": len(requests),
        "sent": len(sent),
        "achieved_rate": (len(sent) - 1) / span,
        "ok": sum(1 for s, e in zip(out["status"], out["error"]) if e is None and s == 200),
        "errors": errors,
        "lateness": out["lateness"],
        "late_over_1ms": sum(1 for x in late if x > 1e-3) / len(late),
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "wall": wall,
    }))


def build_server() -> Path:
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "dynosim-load", "--example",
                    "bench_server"], cwd=REPO, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "examples" / "bench_server"


def core_times(core: int) -> tuple[float, float]:
    """Core `core`'s (busy, total) time in seconds so far, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith(f"cpu{core} "):
                    ticks = [int(x) for x in line.split()[1:]]
                    hz = os.sysconf("SC_CLK_TCK")
                    idle = ticks[3] + ticks[4]
                    return (sum(ticks) - idle) / hz, sum(ticks) / hz
    except (OSError, ValueError):
        pass
    return float("nan"), float("nan")


def pin(core: int) -> list[str]:
    return ["taskset", "-c", str(core)] if shutil.which("taskset") else []


def one(server_bin: Path, rate: float, delay_ms: int, args: argparse.Namespace) -> dict:
    cores = os.cpu_count() or 1
    server = subprocess.Popen(pin(cores - 1) + [str(server_bin), "--delay-ms", str(delay_ms)],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        if not line.startswith("listening on "):
            raise SystemExit(f"the bench server did not start: {line!r}")
        target = line.split()[-1]
        nice = ["nice", "-n", str(args.nice)] if args.nice else []
        cmd = nice + pin(0) + [sys.executable, __file__, "--worker", "--target", target,
                        "--rate", str(rate), "--seconds", str(args.seconds),
                        "--seed", str(args.seed)]
        busy0, total0 = core_times(0)
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        busy1, total1 = core_times(0)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["delay_ms"] = delay_ms
        # Core 0's busy share over the run, less the generator's own (its CPU time is
        # measured over the load only, so this slightly overstates the others).
        result["core0_others"] = max(0.0, (busy1 - busy0) - result["cpu"]) / (total1 - total0)
        return result
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", default="2000,5000")
    p.add_argument("--delays-ms", default="0,50")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nice", type=int, default=0,
                   help="run the generator with this niceness (negative: higher priority)")
    p.add_argument("--json")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--target", help=argparse.SUPPRESS)
    p.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return

    server_bin = build_server()
    rows = []
    for delay_ms in [int(d) for d in args.delays_ms.split(",")]:
        for rate in [float(r) for r in args.rates.split(",")]:
            rows.append(one(server_bin, rate, delay_ms, args))

    us = 1e6
    print(f"{'rate':>6} {'delay':>6} {'sent':>7} {'achieved':>9} {'ok':>7} {'errors':>8} "
          f"{'late p50':>9} {'p99':>8} {'max':>8} {'>1ms':>6} {'CPU s':>6} {'core':>5} {'others':>6}")
    for r in rows:
        late = r["lateness"] or {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
        print(f"{r['rate']:>6.0f} {r['delay_ms']:>4}ms {r['sent']:>7} {r['achieved_rate']:>9.0f} "
              f"{r['ok']:>7} {sum(r['errors'].values()):>8} {late['p50'] * us:>7.0f}µs "
              f"{late['p99'] * us:>6.0f}µs {late['max'] * us:>6.0f}µs "
              f"{r['late_over_1ms'] * 100:>5.2f}% {r['cpu']:>6.2f} {r['cpu'] / r['wall'] * 100:>4.0f}% "
              f"{r['core0_others'] * 100:>5.0f}%")
        if r["errors"]:
            print(f"       errors: {r['errors']}")
    print(f"\nmachine: {cpu_model()}, {os.cpu_count()} cores; commit {git_commit()}")
    print("generator pinned to core 0 (taskset)"
          + (f" at niceness {args.nice}" if args.nice else "")
          + f", server to the last core; Poisson arrivals, seed {args.seed}, "
          f"{args.seconds:g} s per run; core: the generator's CPU time over the run's wall "
          "time; others: core 0's busy share from other processes")
    print("command: python bench/loadgen.py " + " ".join(sys.argv[1:]))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "machine": cpu_model(),
                                               "commit": git_commit()}, indent=2))


if __name__ == "__main__":
    main()
