"""`dynosim logs fit` and `dynosim logs replay` on a large synthetic Heroku router log: the
wall time of each whole command (start-up, reading, fitting or simulating, JSON output).

    python bench/logs_replay.py --size-gb 1 --repeat 3 --json out.json

The log is bench/logs_summary.py's (today's `heroku logs` lines, 200 requests/s over 40 dynos,
lognormal service times with 1% H12 at 30 s and 0.5% H13 without a service time), written
into a temporary folder under /tmp and deleted afterwards. The replay goes through 150 dynos
at random (an offered load of about one half; the log's own 40 would be overloaded by its
H12s) and through the intelligent router, side by side. Each command runs once untimed (the
file then sits in the page cache), then `--repeat` times; the figure is the median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logs_summary import DYNOSIM, run, write_log  # noqa: E402
from machine import machine_info  # noqa: E402

FLEET = """name = "bench-fleet"
[arrivals]
process = "poisson"
rate = "200/s"
[service]
distribution = "constant"
value = "50ms"
[fleet]
dynos = 150
[router]
policy = "random"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.0, help="size of the log (default 1.0 GB, 10^9 bytes)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each command (default 3)")
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="dynosim-replay-bench-", dir="/tmp") as tmp:
        log = Path(tmp) / "router.log"
        lines = write_log(log, int(args.size_gb * 1e9))
        size = log.stat().st_size
        fleet = Path(tmp) / "fleet.toml"
        fleet.write_text(FLEET)
        commands = {
            "dynosim logs summary --json": [str(DYNOSIM), "logs", "summary", str(log), "--json"],
            "dynosim logs fit": [str(DYNOSIM), "logs", "fit", str(log), "-o", str(Path(tmp) / "fit.toml"), "--json"],
            "dynosim logs replay (random, intelligent)": [
                str(DYNOSIM), "logs", "replay", str(log), "--scenario", str(fleet), "--policy", "random,intelligent",
                "--json"],
        }
        import subprocess

        replayed = json.loads(subprocess.run(commands["dynosim logs replay (random, intelligent)"],
                                             capture_output=True, check=True).stdout)
        for command in commands.values():  # warm the page cache
            run(command)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():
                times[name].append(run(command))

    requests = replayed["log"]["replayed"]
    print(f"\n{size / 1e9:.2f} GB, {lines:,} lines; replayed {requests:,} requests over "
          f"{replayed['log']['span_seconds'] / 3600:.1f} h of log\n")
    print(f"{'command':<44} {'median s':>9} {'min s':>7} {'MB/s':>7} {'requests/s':>11}")
    figures = {}
    for name, ts in times.items():
        median = statistics.median(ts)
        figures[name] = {"runs": ts, "median": median, "min": min(ts)}
        print(f"{name:<44} {median:>9.2f} {min(ts):>7.2f} {size / 1e6 / median:>7.0f} {requests / median / 1e6:>10.2f}M")
    print(f"\nreproduce: python bench/logs_replay.py --size-gb {args.size_gb:g} --repeat {args.repeat}")
    if args.json:
        args.json.write_text(json.dumps({"bytes": size, "lines": lines, "requests": requests, "figures": figures,
                                         "machine": machine_info(None)}, indent=2) + "\n")


if __name__ == "__main__":
    main()
