#!/usr/bin/env python3
"""The testbed's table of services that call services (issue #37, docs/testbed.md "Services
that call services"): tests/fixtures/testbed/services-chain.toml (entry → api, one call) and
services-fanout.toml (entry → a fan-out of 4 to search, wait = "all") and services-hedge.toml
(the same hedged at 50 ms, its calls 50 ms exponential), each run once for real
(two HAProxy processes, the entry's and the service's gunicorn dynos, on loopback), against
the theory of the case without queueing, and against the paired simulation (replication 0,
which drew the requests sent) where the engine simulates the scenario's calls.

Per case: the end-to-end response (the load generator's), each service's response (its
HAProxy's Ta) and the stack's overhead, split into the entry's hop (the response less the
entry app's time) and the call's (the call phase's wall less the service's work: HTTP from
the app, the service's HAProxy and gunicorn). The theory: the chain's mean response is the
entry's mean work plus the api's (20 + 30 ms); the fan-out's phase the maximum of 4
exponentials, mean 20 ms × (1 + 1/2 + 1/3 + 1/4) = 41.67 ms; "theory + overhead" adds the
measured mean overhead, and "within" says whether the measured mean is inside 4 standard
errors (from the drawn law) of it.

The hedged fan-out is held to the replications of its paired simulation given the stack's
hops measured in the run (:func:`hedge_case`).

    .venv/bin/python bench/testbed_services.py [--duration 30] [--cases chain,fanout,hedge] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from dynosim import Scenario  # noqa: E402
from dynosim.api import run as run_scenario  # noqa: E402
from dynosim.results import lookup  # noqa: E402
from dynosim.testbed.plan import make_plan  # noqa: E402
from dynosim.testbed.run import _run_stack, report_of  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "testbed"


def walls(load: Dict[str, Any], phase: int) -> np.ndarray:
    return np.array([float(w.split(",")[phase]) for w in load["headers"]["x-dynosim-phase-wall"]])


def simulated(scenario: Scenario) -> Any:
    """The paired simulation's replication 0, or None where the engine refuses the calls."""
    if scenario.describe().get("refused"):
        return None
    return run_scenario(scenario, warn=False)[0].to_dict()["per_replication"][0]


def case(name: str, duration: float) -> Dict[str, Any]:
    scenario = Scenario.load(FIXTURES / f"services-{name}.toml").with_overrides({"run.duration": f"{duration}s"})
    plan = make_plan(scenario)
    load, router_log, work, wall, _cpu = _run_stack(plan)
    report, _ = report_of(plan, load, router_log, work, wall)
    rep = report["per_replication"][0]
    index = list(load["index"])
    ok = np.asarray(load["status"]) == 200
    response = np.asarray(load["done"], dtype=float) - np.asarray(load["sent"], dtype=float)
    (tier,) = plan.services.services
    calls, tier_work = load["services"][tier.name]
    count = len(plan.services.work_of[0])
    ids = [[f"{i}-{tier.name}0" + (f".{j}" if count > 1 else "") for j in range(count)] for i in index]
    work_wall = np.array([[tier_work[c]["end"] - tier_work[c]["start"] for c in row] for row in ids])
    ta = np.array([[calls[c]["ta"] for c in row] for row in ids])
    entry_wall = walls(load, 0) + walls(load, 1)
    phase = walls(load, 1)
    slowest = work_wall.max(axis=1)
    if name == "chain":
        theory, sd = 0.020 + 0.030, math.hypot(0.020, 0.030)
    else:
        theory = 0.001 + 0.020 * sum(1 / k for k in range(1, 5))
        sd = 0.020 * math.sqrt(sum(1 / k ** 2 for k in range(1, 5)))
    entry_hop = response - entry_wall
    call_hop = phase - slowest
    overhead = float(np.mean(entry_hop + call_hop))
    n = int(ok.sum())
    mean = float(np.mean(response))
    sim = simulated(scenario)
    out = {
        "case": name, "requests": len(index), "failed": int((~ok).sum()), "calls": int(ta.size),
        "response_mean": mean, "response_p50": float(np.percentile(response, 50)),
        "response_p99": float(np.percentile(response, 99)),
        "service_response_mean": float(np.mean(ta)), "service_response_p99": float(np.percentile(ta, 99)),
        "service_utilisation": rep["services"][tier.name]["utilisation"]["mean"],
        "entry_hop_ms": float(np.mean(entry_hop)) * 1e3, "call_hop_ms": float(np.mean(call_hop)) * 1e3,
        "call_http_ms": float(np.mean(phase - ta.max(axis=1))) * 1e3,
        "haproxy_gunicorn_ms": float(np.mean(ta - work_wall)) * 1e3,
        "theory": theory, "theory_plus_overhead": theory + overhead,
        "bound": 4 * sd / math.sqrt(n), "within": abs(mean - theory - overhead) < 4 * sd / math.sqrt(n),
        "simulated_rep0": None if sim is None else {
            "response_mean": sim["response"]["mean"], "response_p99": sim["response"]["p99"],
            "service_response_mean": lookup(sim, f"services.{tier.name}.response.mean")
            if "services" in sim else None,
            # The measured mean less the overhead against replication 0's, the two sides' draws
            # taken as independent (the calls' are: docs/testbed.md).
            "bound": 4 * math.sqrt(2) * sd / math.sqrt(n),
            "within": abs(mean - overhead - sim["response"]["mean"]) < 4 * math.sqrt(2) * sd / math.sqrt(n)},
    }
    return out


def hedge_case(duration: float, replications: int) -> Dict[str, Any]:
    """services-hedge.toml (a fan-out of 4 to search, 50 ms exponential, hedge = "50ms") run
    for real, against `replications` of its paired simulation given the stack's hops measured
    in the run as constant waits (services.with_hops: the hedge fires T after the calls left as
    the caller sees them): the hedged fraction of the calls and the response's p50 and p99,
    each as fleet.one_run_against_replications puts it (within 3 sd of the replications)."""
    from dynosim.testbed import services
    from dynosim.testbed.fleet import one_run_against_replications

    scenario = Scenario.load(FIXTURES / "services-hedge.toml").with_overrides(
        {"run.duration": f"{duration}s", "run.replications": replications})
    plan = make_plan(scenario)
    load, router_log, work, wall, _cpu = _run_stack(plan)
    report, _ = report_of(plan, load, router_log, work, wall)
    rep = report["per_replication"][0]
    index = list(load["index"])
    log, tier_work = load["services"]["search"]
    count = plan.services.calls[1].count
    first = np.array([[tier_work[f"{i}-search0.{j}"]["end"] - tier_work[f"{i}-search0.{j}"]["start"]
                       for j in range(count)] for i in index])
    hedged = np.array([[f"{i}-search0.{j}{services.HEDGE_SUFFIX}" in log for j in range(count)] for i in index])
    response = np.asarray(load["done"], dtype=float) - np.asarray(load["sent"], dtype=float)
    phase = walls(load, 1)
    plain = ~hedged.any(axis=1)
    entry_hop = float(np.mean(response - walls(load, 0) - phase))
    call_hop = float(np.mean(phase[plain] - first[plain].max(axis=1)))
    sim = run_scenario(services.with_hops(scenario, entry_hop, call_hop), warn=False)[0].to_dict()["per_replication"]
    copies = [r for r in log if r.endswith(services.HEDGE_SUFFIX)]

    def fraction(calls: Dict[str, Any]) -> float:
        return calls["hedged"] / (calls["sent"] - calls["hedged"])

    return {"case": "hedge", "requests": len(index), "failed": int(np.sum(np.asarray(load["status"]) != 200)),
            "calls": int(hedged.size), "copies": len(copies),
            "same_dyno": sum(log[r]["server"] == log[r[:-len(services.HEDGE_SUFFIX)]]["server"] for r in copies),
            "entry_hop_ms": entry_hop * 1e3, "call_hop_ms": call_hop * 1e3,
            "hedged": one_run_against_replications(len(copies) / hedged.size,
                                                   [fraction(r["services"]["search"]["calls"]) for r in sim]),
            "p50": one_run_against_replications(rep["response"]["p50"], [r["response"]["p50"] for r in sim]),
            "p99": one_run_against_replications(rep["response"]["p99"], [r["response"]["p99"] for r in sim]),
            "search_utilisation": rep["services"]["search"]["utilisation"]["mean"],
            "late": rep["services"]["search"]["calls"]["late"]}


def print_hedge(r: Dict[str, Any]) -> None:
    print("| case | requests (calls) | hedged: measured / simulated ± sd | p50: measured / simulated ± sd | "
          "p99: measured / simulated ± sd | hops (entry + call) | within 3 sd |")
    print("|---|---|---|---|---|---|---|")
    h, p50, p99 = r["hedged"], r["p50"], r["p99"]
    print(f"| hedge 50 ms | {r['requests']} ({r['calls']} + {r['copies']} copies) | {h['measured']:.3f} / "
          f"{h['simulated']:.3f} ± {h['sd']:.3f} | {p50['measured'] * 1e3:.1f} / {p50['simulated'] * 1e3:.1f} ± "
          f"{p50['sd'] * 1e3:.1f} ms | {p99['measured'] * 1e3:.1f} / {p99['simulated'] * 1e3:.1f} ± "
          f"{p99['sd'] * 1e3:.1f} ms | {r['entry_hop_ms']:.1f} + {r['call_hop_ms']:.1f} ms | "
          f"{'yes' if h['within'] and p50['within'] and p99['within'] else 'no'} (z {h['z']:+.2f}, {p50['z']:+.2f}, "
          f"{p99['z']:+.2f}) |")
    print(f"hedge: copies on their first copy's dyno {r['same_dyno']} of {r['copies']}; late {r['late']}; failed "
          f"{r['failed']}; search utilisation {r['search_utilisation']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of traffic per case")
    parser.add_argument("--cases", default="chain,fanout,hedge", help="which cases, comma-separated")
    parser.add_argument("--replications", type=int, default=40, help="the hedge case's simulated replications")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = [c for c in args.cases.split(",") if c]
    rows: List[Dict[str, Any]] = [case(name, args.duration) for name in ("chain", "fanout") if name in names]
    hedge = hedge_case(args.duration, args.replications) if "hedge" in names else None
    if args.json:
        print(json.dumps(rows + ([hedge] if hedge else []), indent=2, default=float))
        return 0
    if hedge is not None:
        print_hedge(hedge)
    if not rows:
        return 0
    print("| case | requests (calls) | response mean / p50 / p99 | service response mean / p99 | theory | "
          "+ overhead (entry hop + call hop) | within 4 SE | paired sim. mean / p99 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        sim = r["simulated_rep0"]
        print(f"| {r['case']} | {r['requests']} ({r['calls']}) | {r['response_mean'] * 1e3:.1f} / "
              f"{r['response_p50'] * 1e3:.1f} / {r['response_p99'] * 1e3:.1f} ms | "
              f"{r['service_response_mean'] * 1e3:.1f} / {r['service_response_p99'] * 1e3:.1f} ms | "
              f"{r['theory'] * 1e3:.1f} ms | {r['theory_plus_overhead'] * 1e3:.1f} ms ({r['entry_hop_ms']:.1f} + "
              f"{r['call_hop_ms']:.1f}; ±{r['bound'] * 1e3:.1f}) | {'yes' if r['within'] else 'no'} | "
              + ("not simulated" if sim is None else
                 f"{sim['response_mean'] * 1e3:.1f} / {sim['response_p99'] * 1e3:.1f} ms; measured − overhead "
                 f"{(r['response_mean'] * 1e3 - r['entry_hop_ms'] - r['call_hop_ms']):.1f} ms, within ±"
                 f"{sim['bound'] * 1e3:.1f}: {'yes' if sim['within'] else 'no'}") + " |")
    for r in rows:
        print(f"{r['case']}: call hop {r['call_hop_ms']:.2f} ms = the app's HTTP call beyond the service's HAProxy "
              f"{r['call_http_ms']:.2f} ms + HAProxy and gunicorn beyond the work {r['haproxy_gunicorn_ms']:.2f} ms "
              f"(mean; for the fan-out, of the slowest call); failed {r['failed']}; service utilisation "
              f"{r['service_utilisation']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
