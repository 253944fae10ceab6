#!/usr/bin/env python3
"""Benchmark: `dynosim logs summary` on a large synthetic Heroku router log, beside
`grep -c service=` over the same file as the floor (reading the bytes and finding lines,
nothing parsed).

    python bench/logs_summary.py [--size-gb 1.0] [--repeat 3] [--gzip] [--json out.json]

The log (in a temporary folder, deleted afterwards) is `heroku logs` lines of today's
shape (request ids, `protocol=https`), in time order but for one line in 50 moved back a few
seconds (drains interleave), with 40 dynos, 60 routes of numeric and UUID ids, lognormal
service times, 1% H12 (`service=30000ms`) and 0.5% H13 (no `service`), and one line in 1000
repeated (a duplicate). Its lines are only router lines, the most work per byte.

Each command runs `--repeat` times, alternating, after one untimed run of each that puts the
file in the page cache; the figure is the median wall time (the CLI's start-up and JSON output
included, as a user waits for them). `--gzip` also times the summary of the gzipped file
(`gzip -1`), where decompression is on the same core as parsing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine_info

REPO = Path(__file__).resolve().parent.parent
DYNOSIM = Path(sys.executable).parent / "dynosim"

ROUTES = (
    [("GET", f"/api/v1/users/{{id}}/{leaf}") for leaf in ("posts", "friends", "messages", "settings")]
    + [("GET", f"/posts/{{id}}/{leaf}") for leaf in ("comments", "likes", "edit")]
    + [("GET", f"/{name}") for name in ("", "about", "search", "feed", "login", "signup", "pricing")]
    + [("POST", f"/api/v1/{name}") for name in ("events", "sessions", "uploads", "orders", "payments")]
    + [("GET", f"/assets/{name}.css") for name in ("app", "print", "admin")]
    + [("GET", f"/orders/{{uuid}}") for _ in range(1)]
    + [("GET", f"/section{k}/page") for k in range(37)]
)


def write_log(path: Path, target_bytes: int, seed: int = 1) -> int:
    """Writes the synthetic log; returns its line count."""
    rng = random.Random(seed)
    t = 1_389_248_213.0  # 2014-01-09T06:16:53Z
    lines = 0
    written = 0
    with open(path, "w", encoding="ascii", newline="\n") as f:
        while written < target_bytes:
            chunk = []
            for _ in range(20_000):
                t += rng.expovariate(200.0)
                stamp = t - rng.uniform(0, 5) if rng.random() < 0.02 else t
                secs = int(stamp)
                micros = int((stamp - secs) * 1e6)
                tm = time.gmtime(secs)
                method, template = ROUTES[int(rng.paretovariate(1.2)) % len(ROUTES)]
                path_ = template.replace("{id}", str(rng.randrange(1, 10**7))).replace(
                    "{uuid}", f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-"
                              f"a{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}")
                request_id = f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-" \
                             f"b{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
                head = (f"{tm.tm_year:04d}-{tm.tm_mon:02d}-{tm.tm_mday:02d}T{tm.tm_hour:02d}:{tm.tm_min:02d}:"
                        f"{tm.tm_sec:02d}.{micros:06d}+00:00 heroku[router]: ")
                dyno = f"web.{rng.randrange(1, 41)}"
                fwd = f'fwd="{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}"'
                u = rng.random()
                if u < 0.01:
                    body = (f'at=error code=H12 desc="Request timeout" method={method} path="{path_}" '
                            f"host=myapp.herokuapp.com request_id={request_id} {fwd} dyno={dyno} connect=1ms "
                            f"service=30000ms status=503 bytes=0 protocol=https")
                elif u < 0.015:
                    body = (f'at=error code=H13 desc="Connection closed without response" method={method} '
                            f'path="{path_}" host=myapp.herokuapp.com request_id={request_id} {fwd} dyno={dyno} '
                            f"connect=1ms status=503 bytes=0 protocol=https")
                else:
                    service = max(1, int(math.exp(rng.gauss(3.8, 1.0))))
                    body = (f'at=info method={method} path="{path_}" host=myapp.herokuapp.com '
                            f"request_id={request_id} {fwd} dyno={dyno} connect={rng.randrange(0, 4)}ms "
                            f"service={service}ms status={200 if rng.random() < 0.97 else 404} "
                            f"bytes={rng.randrange(100, 60_000)} protocol=https")
                line = head + body + "\n"
                chunk.append(line)
                if rng.random() < 0.001:
                    chunk.append(line)
            text = "".join(chunk)
            f.write(text)
            written += len(text)
            lines += text.count("\n")
    return lines


def run(command: list[str]) -> float:
    t0 = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    if result.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed ({result.returncode}): {result.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.0, help="size of the log (default 1.0 GB, 10^9 bytes)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each command (default 3)")
    parser.add_argument("--gzip", action="store_true", help="also time the summary of the log gzipped")
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="dynosim-logs-bench-", dir="/tmp") as tmp:
        log = Path(tmp) / "router.log"
        t0 = time.perf_counter()
        lines = write_log(log, int(args.size_gb * 1e9))
        size = log.stat().st_size
        print(f"wrote {size / 1e9:.2f} GB, {lines:,} lines in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        commands = {
            "grep -c service=": ["grep", "-c", "service=", str(log)],
            "dynosim logs summary --json": [str(DYNOSIM), "logs", "summary", str(log), "--json"],
        }
        if args.gzip:
            subprocess.run(["gzip", "-1", "-k", str(log)], check=True)
            commands["dynosim logs summary --json (gzip -1)"] = [str(DYNOSIM), "logs", "summary", f"{log}.gz", "--json"]
        summary = json.loads(subprocess.run(commands["dynosim logs summary --json"], capture_output=True,
                                            check=True).stdout)
        for command in commands.values():  # warm the page cache
            run(command)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():
                times[name].append(run(command))

    print(f"\n{size / 1e9:.2f} GB, {lines:,} lines; summary: {summary['requests']:,} requests, "
          f"{summary['duplicates']:,} duplicates, {summary['malformed']} malformed\n")
    print(f"{'command':<42} {'median s':>9} {'min s':>7} {'MB/s':>7} {'lines/s':>10}")
    figures = {}
    for name, ts in times.items():
        median = statistics.median(ts)
        figures[name] = {"runs": ts, "median": median, "min": min(ts)}
        print(f"{name:<42} {median:>9.2f} {min(ts):>7.2f} {size / 1e6 / median:>7.0f} {lines / median / 1e6:>9.2f}M")
    floor = statistics.median(times["grep -c service="])
    print(f"\nsummary / grep: {statistics.median(times['dynosim logs summary --json']) / floor:.1f}x")
    print(f"\nreproduce: python bench/logs_summary.py --size-gb {args.size_gb:g} --repeat {args.repeat}"
          + (" --gzip" if args.gzip else ""))
    if args.json:
        args.json.write_text(json.dumps({"bytes": size, "lines": lines, "figures": figures,
                                         "machine": machine_info(None)}, indent=2) + "\n")


if __name__ == "__main__":
    main()
