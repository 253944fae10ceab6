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
sys.path.insert(0, str(REPO / "bench"))

# Built-in scenarios whose own run is long: shortened (simulated time) for the workload.
SHORTER = {"malloc-arenas": "5min", "gunicorn-cron": "5min"}


def exp(mean: float) -> Dict[str, Any]:
    return {"distribution": "exponential", "mean": mean}


def bench_dynos() -> List[Tuple[str, Dict[str, Any]]]:
    """The speed benchmarks' dyno models (the same documents as bench/, smaller)."""
    run = {"replications": 1, "seed": 1, "engine": "events"}
    two_phase = {
        "arrivals": {"process": "poisson", "rate": 4000.0},
        "request": {"phases": [{"cpu": exp(0.004)}, {"use": "db", "time": exp(0.010)},
                               {"cpu": exp(0.002)}]},
        "resources": {"db": {"servers": 60, "discipline": "fcfs"}},
        "fleet": {"dynos": 20, "cores": 2}, "router": {"policy": "random"},
        "app": {"server": "generic", "model": "threaded", "processes": 3, "threads": 5,
                "lock": True},
        "run": dict(run, duration=300.0, warmup=0.0),
    }
    dynos, rate = 10_000, 100_000.0
    fleet_run = dict(run, duration=1.0, warmup=1.0)
    io_phase = {
        "arrivals": {"process": "poisson", "rate": rate},
        "request": {"phases": [{"io": exp(0.06)}]},
        "fleet": {"dynos": dynos, "cores": 1}, "router": {"policy": "random"},
        "app": {"server": "generic", "model": "threaded", "processes": 1, "threads": 1,
                "lock": False},
        "run": fleet_run,
    }
    phases = {
        "arrivals": {"process": "poisson", "rate": rate},
        "request": {"phases": [{"cpu": exp(0.040)}, {"use": "db", "time": exp(0.010)},
                               {"cpu": exp(0.020)}]},
        "resources": {"db": {"servers": round(rate * 0.010 * 1.5), "discipline": "fcfs"}},
        "fleet": {"dynos": dynos, "cores": 1}, "router": {"policy": "random"},
        "app": {"server": "generic", "model": "threaded", "processes": 2, "threads": 5,
                "lock": True},
        "run": fleet_run,
    }
    return [("two-phase", two_phase), ("io-phase 10k", io_phase), ("phases 10k", phases)]


def workload() -> List[Tuple[str, Scenario]]:
    """(label, scenario) for every run of the workload, in a fixed order."""
    runs: List[Tuple[str, Scenario]] = []
    for name in sorted(builtin_scenarios()):
        s = Scenario.load(name)
        if name in SHORTER:
            s = s.with_overrides({"run.duration": SHORTER[name]})
        runs += [(f"{name} {p}", s.for_policy(p)) for p in s.policies]
    # The seed study under every policy, longer: the direct engine's share of the profile.
    seed = Scenario.load("rapgenius").with_overrides({"run.duration": "30min"})
    runs += [(f"rapgenius 30min {p}", seed.for_policy(p))
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
