#!/usr/bin/env python3
"""Benchmark: the dyno model's time slices (`fleet.cpu_sharing = "slices"`, the default)
against processor sharing (`"ps"`) on the two-phase scenario of bench/dyno_vs_simpy.py
(20 dynos of 2 cores, 3 processes x 5 threads under a lock, cpu + db + cpu at 4000 req/s).

Issue #25's target: the time slices take at most 1.3x the time of processor sharing. The two
runs alternate, pinned to one CPU; the figure is the median over pairs of slices' wall time
over ps's, the lowest and highest pair beside it.

    python bench/slices_vs_ps.py [--simulated-seconds S] [--repeats N] [--lock gil|gvl|none]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dyno_vs_simpy as base  # noqa: E402  (the scenario, the timing, the pinning)

TARGET_RATIO = 1.3


def main(argv=None) -> int:
    ap = base.arg_parser()
    ap.description = __doc__.split("\n\n")[0]
    ap.add_argument("--lock", choices=["gil", "gvl", "none"], default="gil",
                    help="app.lock for both runs (default gil, gunicorn's)")
    args = ap.parse_args(argv)
    pinned = base.one_cpu(args.no_pin)
    from dynosim import _dynosim

    print("pinned to CPU", pinned)
    runs = {"ps": [], "slices": []}
    for _ in range(args.repeats):
        for sharing in ("ps", "slices"):
            args.cpu_sharing = sharing
            system = base.System(args)
            system.lock = args.lock
            runs[sharing].append(base.bench_engine(_dynosim, system, args.simulated_seconds))
        print(".", end="", flush=True)
    print()
    print(f"scenario: {system.describe()}, lock {args.lock}; {args.simulated_seconds:g} simulated s")
    for sharing, rs in runs.items():
        f = rs[-1]["figures"]
        print(f"  {sharing:<7} {statistics.median(r['req_per_s'] for r in rs) / 1e6:.3f} M req/s "
              f"(median of {len(rs)}); mean response {f['response_mean'] * 1e3:.3f} ms, "
              f"CPU utilisation {f['cpu_utilisation']:.4f}")
    pairs = [s["call_seconds"] / p["call_seconds"] for p, s in zip(runs["ps"], runs["slices"])]
    ratio = statistics.median(pairs)
    print(f"slices' time over ps's: {ratio:.2f}x ({min(pairs):.2f}-{max(pairs):.2f}); "
          f"target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'}")
    print("reproduce: python " + " ".join(sys.argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
