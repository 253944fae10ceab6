"""Issue #25 on the real stack, the CI-sized part of the scheduler's validation table
(bench/testbed_validation.py --only scheduler has the whole; docs/testbed.md, "The scheduler
against the real stack"): each case is calibrated first (`dynosim testbed --calibrate`: the
stack's connect, server CPU per request, worker overhead and CPU jitter), then run for real
and simulated on the same requests. The issue's bounds: throughput within 10%, p50 and p95
response within 15% of the simulation's mean.

The cases are the ones this 2-core machine runs honestly, with random phases: the dyno pinned to one core, the
load generator, HAProxy and PostgreSQL on the other. Constant phases are left out of CI: the
issue's own case (8 sync workers on 2 cores, constant phases) is within the bounds on a quiet
machine with the stack's CPU on the dyno's cores calibrated (`router.colocated_cpu`; the
bench's grid, 33 of 33), but its throughput sits 3–9% under the simulation, too near the 10%
bound for a machine that may be busy; and Puma's own hand-over between requests widens a
constant request's p95 (docs/testbed.md says by how much). Without the components it names
(``@pytest.mark.needs``) a test is skipped; in CI (``CI`` set) it fails.
"""

from __future__ import annotations

from typing import Any, Dict

import pytest

from dynosim import Scenario
from dynosim.testbed import run as testbed_run




def closed(app: Dict[str, Any], clients: int, cpu: Any, io: Any) -> Dict[str, Any]:
    return {
        "name": "validation-scheduler",
        "arrivals": {"process": "closed", "clients": clients},
        "fleet": {"dynos": 1, "cores": 1},
        "app": app,
        "request": {"phases": [{"cpu": cpu}, {"io": io}]},
        "router": {"policy": "random"},
        "run": {"duration": "20s", "warmup": "5s", "replications": 10, "seed": 25},
    }


def within(result: Dict[str, Any], metric: str, bound: float) -> None:
    sim = result["simulated"]["summary"]
    real = result["measured"]["summary"]
    for key in metric.split("."):
        sim, real = sim[key], real[key]
    diff = (real["mean"] - sim["mean"]) / sim["mean"]
    print(f"{metric}: measured {real['mean']:.4f}, simulated {sim['mean']:.4f} ({diff * 100:+.1f}%)")
    assert abs(diff) <= bound, f"{metric}: measured {real['mean']}, simulated {sim['mean']} ({diff:+.1%})"


def check(doc: Dict[str, Any]) -> None:
    out = testbed_run.testbed(Scenario(doc), calibrate=True)
    print(" ".join(out["calibration"]["set_lines"]))
    # HAProxy and the load generator worked for every request (their CPU clocks read), and
    # what of it ran on the dyno's core is a part of it (router.colocated_cpu).
    shared = out["calibration"]["runs"]["busy"]["colocated"]
    print(f"router.colocated_cpu: {shared}")
    assert all(0 < s < 0.005 for s in shared["stack"].values()) and set(shared["stack"]) >= {"router",
                                                                                              "load_generator"}
    assert 0 <= shared["seconds"] <= sum(shared["stack"].values()) and 0 <= shared["share"] <= 1
    result = out["results"][0]
    within(result, "throughput", 0.10)
    within(result, "response.p50", 0.15)
    within(result, "response.p95", 0.15)


def exp(mean: str) -> Dict[str, str]:
    return {"distribution": "exponential", "mean": mean}


@pytest.mark.needs("haproxy", "gunicorn")
def test_four_sync_workers_on_one_core():
    check(closed({"server": "gunicorn", "worker_class": "sync", "processes": 4}, 8, exp("10ms"), exp("40ms")))


@pytest.mark.needs("haproxy", "ruby", "puma", "ruby-rack")
def test_puma_threads_under_the_gvl_on_one_core():
    check(closed({"server": "puma", "processes": 1, "threads": 3}, 6, exp("10ms"), exp("10ms")))
