#!/usr/bin/env python3
"""Benchmark: the direct engine on the seed scenario against a hand-written floor, checked
against a recorded baseline (issue #23).

    python bench/seed_floor.py [--rounds N] [--minutes M] [--binary PATH] [--json out.json]
                               [--record] [--baseline bench/seed_floor_baseline.json]
                               [--engine direct|events]

It builds and runs ``crates/dynosim-engine/examples/seed_floor.rs`` (``cargo build --release``),
which runs replication 0 of the built-in ``rapgenius`` scenario (M simulated minutes) on the
engine and on a floor that makes the same draws and does only the queueing (a Lindley
recursion per dyno for random routing, Kiefer–Wolfowitz over all dynos for intelligent), the
two alternating round by round in one process. The figure is the engine's speed as a
multiple of the floor's ("× floor", the median over rounds): a machine-independent measure of
the engine's own cost per request, where req/s depends on the machine.

The baseline file records, per policy, the × floor of a commit on a named machine. This
script prints today's figure beside it and the change, and says REGRESSION (exit status 1
with ``--strict``) when the median falls more than 5% below the baseline: a slower engine is
found by ``make bench``, not by a reader. ``--record`` writes the baseline from this run
(commit, machine, figures), to be committed with the change that earned it.

``--binary`` runs an already built ``seed_floor`` (for instance one built at another commit,
to compare two commits side by side: alternate the two binaries).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import REPO, git_commit, machine_info, one_cpu  # noqa: E402

DEFAULT_BASELINE = REPO / "bench" / "seed_floor_baseline.json"
#: A median this much below the baseline's is a regression.
TOLERANCE = 0.05


def build() -> Path:
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "dynosim-engine", "--example", "seed_floor"],
                   cwd=REPO, check=True)
    return REPO / "target" / "release" / "examples" / "seed_floor"


def measure(binary: Path, rounds: int, minutes: float, policies: str, engine: str = "direct") -> list:
    command = [str(binary), "--rounds", str(rounds), "--minutes", str(minutes), "--policies", policies]
    if engine != "direct":
        # Older builds (`--binary`) know no --engine; the direct engine is their only one.
        command += ["--engine", engine]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def summarise(rows: list) -> dict:
    """Per policy: the × floor of each round, its median and quartiles, and the rates."""
    out = {}
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        ratios = sorted(r["floor_seconds"] / r["engine_seconds"] for r in mine)
        q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
        for r in mine:
            # The same system: the same requests and the same mean queue time.
            if r["requests"] != r["floor_requests"] or abs(r["engine_queue_mean"] - r["floor_queue_mean"]) > \
                    1e-9 * max(1.0, abs(r["floor_queue_mean"])):
                raise SystemExit(f"seed_floor: engine and floor disagree for {policy}: {r}")
        out[policy] = {
            "x_floor": statistics.median(ratios),
            "x_floor_quartiles": [q[0], q[2]],
            "x_floor_rounds": ratios,
            "engine_req_per_s": statistics.median(r["requests"] / r["engine_seconds"] for r in mine),
            "floor_req_per_s": statistics.median(r["requests"] / r["floor_seconds"] for r in mine),
            "requests": mine[0]["requests"],
        }
    return out


def compare(figures: dict, baseline: dict | None) -> list:
    """Lines of the table, and whether any policy regressed."""
    lines = []
    regressed = []
    head = f"{'policy':<12} {'engine':>12} {'floor':>12} {'× floor':>9} {'quartiles':>13}"
    if baseline:
        head += f" {'baseline':>9} {'change':>8}"
    lines.append(head)
    for policy, f in figures.items():
        line = (f"{policy:<12} {f['engine_req_per_s'] / 1e6:>8.2f} M/s {f['floor_req_per_s'] / 1e6:>8.2f} M/s "
                f"{f['x_floor']:>9.3f} {f['x_floor_quartiles'][0]:>6.3f}–{f['x_floor_quartiles'][1]:.3f}")
        base = (baseline or {}).get("figures", {}).get(policy)
        if base:
            change = f["x_floor"] / base["x_floor"] - 1
            line += f" {base['x_floor']:>9.3f} {change:>+8.1%}"
            if change < -TOLERANCE:
                line += "  REGRESSION"
                regressed.append(policy)
        lines.append(line)
    return lines, regressed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--minutes", type=float, default=240.0, help="simulated minutes per round")
    p.add_argument("--policies", default="random,intelligent")
    p.add_argument("--binary", type=Path, help="a seed_floor already built (default: build this tree's)")
    p.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE)
    p.add_argument("--record", action="store_true", help="write this run as the baseline")
    p.add_argument("--strict", action="store_true", help="exit 1 on a regression")
    p.add_argument("--no-pin", action="store_true", help="do not pin to one CPU")
    p.add_argument("--json", type=Path, help="also write the figures as JSON")
    p.add_argument("--engine", choices=["direct", "events"], default="direct",
                   help="the engine measured (the baseline is the direct engine's: events is not compared with it)")
    args = p.parse_args(argv)
    if args.engine != "direct" and args.record:
        p.error("--record: the baseline is the direct engine's; leave out --engine events")

    pinned = one_cpu(args.no_pin)
    binary = args.binary or build()
    rows = measure(binary, args.rounds, args.minutes, args.policies, args.engine)
    figures = summarise(rows)
    baseline = (json.loads(args.baseline.read_text())
                if args.baseline.exists() and not args.record and args.engine == "direct" else None)
    lines, regressed = compare(figures, baseline)
    machine = machine_info(pinned)
    print(f"seed scenario (rapgenius, replication 0, {args.minutes:g} simulated min, {args.rounds} rounds): "
          f"the {'direct' if args.engine == 'direct' else 'event-driven'} engine against a floor with the same draws")
    print("\n".join(lines))
    if baseline:
        print(f"baseline: commit {baseline['commit']} on {baseline['machine']['cpu']} "
              f"({baseline['machine']['os.cpu_count']} CPUs), recorded {baseline.get('recorded', '?')}")
    built = f"binary {args.binary}" if args.binary else f"commit {git_commit()}"
    print(f"this run: {built} on {machine['cpu']}, load {machine['loadavg_at_start']}")
    # The command that measures again (recording is a separate decision).
    command = "python bench/seed_floor.py " + " ".join(a for a in (argv or sys.argv[1:]) if a != "--record")
    print(f"reproduce: {command.strip()}")
    doc = {"figures": figures, "machine": machine, "commit": git_commit(),
           "binary": str(args.binary) if args.binary else None, "rounds": args.rounds,
           "minutes": args.minutes, "engine": args.engine, "command": command.strip()}
    if args.record:
        import datetime
        doc["recorded"] = datetime.date.today().isoformat()
        tmp = args.baseline.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, args.baseline)
        print(f"recorded as the baseline: {args.baseline}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    if regressed:
        print(f"REGRESSION: {', '.join(regressed)} more than {TOLERANCE:.0%} below the baseline")
        return 1 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
