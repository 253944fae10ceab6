#!/usr/bin/env python3
"""The workload a profile-guided build of the engine learns from (tools/build-pgo.sh), and
the check that the builds it makes compute what the plain build computed.

    python tools/pgo_train.py train RESULTS.json   # run the workload, write its results
    python tools/pgo_train.py check RESULTS.json   # run it again; exit 1 on any difference

The workload is what users run: every built-in scenario (as it is, every routing policy it
names), the seed scenario for 30 minutes under each registered policy, and the dyno models of the
speed benchmarks (bench/dyno_vs_simpy.py's two-phase dyno; bench/large_fleet.py's io-phase and
three-phase fleets, at 10,000 dynos). It takes about 20 s on the instrumented build (on one core).

Results are compared as JSON with every `wall_seconds` removed: an optimisation guided by a
profile must not change a single figure (the same floating-point operations in the same
order), so equality is exact.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from dynosim import _dynosim
from dynosim.scenario import Scenario, builtin_scenarios

REPO = Path(__file__).resolve().parent.parent
# The benchmarks' scripts, whose dyno models the workload runs.
sys.path.insert(0, str(REPO / "bench"))

# Built-in scenarios whose own run is long: shortened (simulated time) for the workload.
SHORTER = {"malloc-arenas": "5min", "gunicorn-cron": "5min"}
#: Policies that hash each request's key (they need arrivals.keys).
HASHING = {"bounded_hash"}


def bench_dynos() -> List[Tuple[str, Dict[str, Any]]]:
    """The speed benchmarks' dyno models, as bench/ writes them: the two-phase dyno for 300
    simulated s; the large fleet's models at 10,000 dynos for 1 s after 1 s of warm-up."""
    import dyno_vs_simpy
    import large_fleet

    system = dyno_vs_simpy.System(dyno_vs_simpy.arg_parser().parse_args([]))
    runs = [("two-phase", json.loads(system.engine_scenario(300.0)))]
    for name in ("io-phase", "phases"):
        doc = large_fleet.scenario(name, duration=1.0, warmup=1.0, dynos=10_000, rate=1e5)
        runs.append((f"{name} 10k", doc))
    return runs


def workload() -> List[Tuple[str, Scenario]]:
    """(label, scenario) for every run of the workload, in a fixed order."""
    runs: List[Tuple[str, Scenario]] = []
    for name in sorted(builtin_scenarios()):
        s = Scenario.load(name)
        if name in SHORTER:
            s = s.with_overrides({"run.duration": SHORTER[name]})
        runs += [(f"{name} {p}", s.for_policy(p)) for p in s.policies]
    # The seed study under every policy, longer: the direct engine's share of the profile. A
    # policy that hashes requests gets keys (5,000 Zipf users); the others run without, so that
    # those the direct engine can run still do.
    seed = Scenario.load("rapgenius").with_overrides({"run.duration": "30min"})
    keyed = seed.with_overrides({"arrivals.keys": {"users": 5000, "popularity": "zipf"}})
    runs += [(f"rapgenius 30min {p}", (keyed if p in HASHING else seed).for_policy(p))
             for p in sorted(_dynosim.registry()["policies"])]
    runs += [(label, Scenario.load(doc)) for label, doc in bench_dynos()]
    return runs


def without_wall_time(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_wall_time(v) for k, v in value.items() if k != "wall_seconds"}
    if isinstance(value, list):
        return [without_wall_time(v) for v in value]
    return value


def run_all() -> Dict[str, Any]:
    results = {}
    for label, scenario in workload():
        t0 = time.perf_counter()
        report = json.loads(scenario._call(_dynosim.run))
        print(f"  {label:<32} {time.perf_counter() - t0:6.2f} s", flush=True)
        results[label] = without_wall_time(report)
    return results


def main(argv: List[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("train", "check"):
        print("usage: pgo_train.py train|check RESULTS.json", file=sys.stderr)
        return 2
    mode, path = argv[0], Path(argv[1])
    print(f"pgo_train: {mode} ({getattr(_dynosim, 'build', '?')} build)", flush=True)
    results = run_all()
    if mode == "train":
        path.write_text(json.dumps(results, sort_keys=True))
        return 0
    expected = json.loads(path.read_text())
    differ = [label for label in expected if expected[label] != results.get(label)]
    differ += [label for label in results if label not in expected]
    if differ:
        print(f"pgo_train: this build's results differ from those in {path} (the plain "
              f"build's, tools/build-pgo.sh), in: {', '.join(differ)}", file=sys.stderr)
        return 1
    print(f"pgo_train: the same results as in {path} ({len(results)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
