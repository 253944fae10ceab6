"""The clients' retries on the real stack (docs/feedback.md, "On the real stack"): the load
generator retries as ``[arrivals.retry]`` says, with the simulation's own decisions (its
policy, its budget, its backoff drawn from the same stream), and the measured report counts
tries and retries as the simulation's does.

The runs are short and paired: the load generator sends replication 0's requests, each try of a
request with the request's drawn work, as the simulation's retries carry theirs.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

from conftest import run_cli
from fuzzing import toml_document
from dynosim import Scenario
from dynosim.errors import ScenarioError
from dynosim.testbed import measure
from dynosim.testbed.plan import make_plan


def scenario(**extra: object) -> Dict[str, object]:
    doc: Dict[str, object] = {
        "name": "testbed-retries",
        "arrivals": {"process": "poisson", "rate": "2/s", "timeout": "300ms",
                     "retry": {"attempts": 3, "on": ["timeout"], "base": "50ms", "jitter": "full"}},
        "service": {"distribution": "constant", "value": "600ms"},
        "fleet": {"dynos": 2},
        "app": {"processes": 4},
        "router": {"policy": "random"},
        "run": {"duration": "4s", "warmup": "0s", "replications": 4, "seed": 11},
    }
    doc.update(extra)
    return doc


def run_testbed(tmp_path: Path, name: str, doc: Dict[str, object]) -> tuple:
    """`dynosim testbed NAME.toml --json --out DIR`: the result, the measured replication, the
    simulation's paired one and the per-try rows of the CSV."""
    toml = tmp_path / f"{name}.toml"
    toml.write_text(toml_document(doc))
    out = tmp_path / f"{name}-out"
    result = run_cli("testbed", str(toml), "--json", "--out", str(out))
    assert result.returncode == 0, result.stderr
    (r,) = json.loads(result.stdout)["results"]
    with open(out / "requests-random.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return r, r["measured"]["per_replication"][0], r["simulated"]["per_replication"][0], rows


def test_tries_have_their_own_ids_and_requests_their_first_send():
    """The measured figures from per-try columns: a request's response runs from its first
    try's send, its outcome is its last try's, and every try counts in retries.*."""
    t0 = 1000.0
    load = {
        "start": t0, "index": [0, 0, 0, 1], "attempt": [1, 2, 3, 1], "kept": [None, None, "exhausted", "success"],
        "origin": [t0 + 1, t0 + 1, t0 + 1, t0 + 2], "scheduled": [t0 + 1, t0 + 1.5, t0 + 2.1, t0 + 2],
        "sent": [t0 + 1, t0 + 1.5, t0 + 2.1, t0 + 2], "done": [np.nan] * 3 + [t0 + 2.2],
        "status": [0, 0, 0, 200], "error": ["timeout"] * 3 + [None],
        "headers": {h: [None] * 4 for h in ("x-dynosim-dyno", "x-dynosim-start", "x-dynosim-end",
                                            "x-dynosim-pool-wait", "x-dynosim-pid")},
    }
    load["headers"]["x-dynosim-start"][3] = str(t0 + 2.01)
    load["headers"]["x-dynosim-end"][3] = str(t0 + 2.19)
    load["headers"]["x-dynosim-dyno"][3] = "0"
    assert measure.ids(load) == ["0", "0.2", "0.3", "1"]
    rep = measure.replication(load, {}, dynos=1, slots=1, warmup=0.0, duration=10.0, closed=None,
                              drawn_times=[1.0, 2.0], classes=["default"], class_of=[0, 0], resources=[],
                              client_timeout=0.3, retries=True)
    assert rep["requests"] == 2
    assert rep["retries"] == {"attempts": 4, "attempts_per_request": 2.0, "count": 2, "client": 2, "router": 0,
                              "app": 0, "denied": 0, "exhausted": 1}
    # Request 0 failed once (its last try's timeout), not three times.
    assert rep["error_counts"]["client_timeout"] == 1 and rep["error_counts"]["total"] == 1
    # Its response ran from its first send to its last try's timeout: 2.1 + 0.3 - 1.
    assert rep["response"]["max"] == pytest.approx(1.4)
    assert rep["response_ok"]["mean"] == pytest.approx(0.2)


@pytest.mark.needs("haproxy", "gunicorn")
def test_every_try_timing_out_is_tried_as_often_as_the_simulation_tries(tmp_path):
    """Every request takes 600 ms and its client gives up after 300 ms, three tries in all: each
    request is tried three times for real as in the simulation, each retry after its backoff
    (full jitter: uniform on [0, 50 ms × 2^(k−1)]), and every request fails, exhausted."""
    r, real, sim, rows = run_testbed(tmp_path, "timeouts", scenario())
    assert real["requests"] == sim["requests"] > 0
    n = real["requests"]
    for rep in (real, sim):
        assert rep["retries"]["attempts"] == 3 * n, rep["retries"]
        assert rep["retries"]["attempts_per_request"] == 3.0
        assert rep["retries"]["client"] == rep["retries"]["count"] == 2 * n
        assert rep["retries"]["exhausted"] == n and rep["retries"]["denied"] == 0
        assert rep["error_counts"]["client_timeout"] == n == rep["error_counts"]["total"]
    # Each try reached the router under its own id.
    assert r["testbed"]["router_log_lines"] == 3 * n
    by_request: Dict[str, list] = {}
    for row in rows:
        by_request.setdefault(row["index"], []).append(row)
    assert len(by_request) == n
    for tries in by_request.values():
        assert [int(t["attempt"]) for t in tries] == [1, 2, 3]
        for k in (1, 2):
            # Sent its backoff after the try before timed out (300 ms after its send).
            gap = float(tries[k]["sent"]) - (float(tries[k - 1]["sent"]) + 0.3)
            assert -0.002 <= gap <= 0.05 * 2 ** (k - 1) + 0.02, tries
    assert set(r["measured"]) >= set(r["simulated"]) - {"wall_seconds"}
    assert "retries" in r["measured"]["summary"]


@pytest.mark.needs("haproxy", "gunicorn")
def test_router_errors_are_retried_on_5xx(tmp_path):
    """The router answers 504 after 300 ms (H12) and the clients retry 5xx: two tries each, the
    last one's H12 the request's outcome, as in the simulation."""
    doc = scenario(arrivals={"process": "poisson", "rate": "2/s",
                             "retry": {"attempts": 2, "on": "5xx", "base": "10ms"}},
                   router={"policy": "random", "timeout": "300ms"})
    r, real, sim, rows = run_testbed(tmp_path, "h12", doc)
    n = real["requests"]
    assert n == sim["requests"] > 0
    for rep in (real, sim):
        assert rep["retries"]["attempts"] == 2 * n and rep["retries"]["exhausted"] == n, rep["retries"]
        assert rep["error_counts"]["h12"] == n == rep["error_counts"]["total"]
    assert sorted({row["attempt"] for row in rows}) == ["1", "2"]


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_slow_requests_tries_all_time_out_as_in_the_simulation(tmp_path):
    """Exponential service (mean 100 ms) behind a 200 ms client timeout, three tries on a
    timeout: a try carries its request's drawn work, so a request slower than the timeout
    times out on every try (in the simulation and for real), and the rest on none. The real run
    and the simulation's replication 0 (the same requests) retry the same requests but for
    those whose drawn time lies within the stack's own time (a few ms) of the timeout: at most
    that many requests may differ."""
    timeout = 0.2
    doc = scenario(arrivals={"process": "poisson", "rate": "4/s", "timeout": "200ms",
                             "retry": {"attempts": 3, "on": ["timeout"], "base": "20ms"}},
                   service={"distribution": "exponential", "mean": "100ms"},
                   run={"duration": "20s", "warmup": "0s", "replications": 4, "seed": 5})
    plan = make_plan(Scenario(doc))
    drawn = np.array([sum(p) for p in plan.drawn["phases"]])
    r, real, sim, rows = run_testbed(tmp_path, "exp", doc)
    assert real["requests"] == sim["requests"] == len(drawn)
    # The stack's own time on a try, at most: HAProxy, the connection and gunicorn on loopback
    # (docs/testbed.md measures about 1 ms; ten times that here).
    overhead = 0.01
    near = int(np.sum((drawn > timeout - overhead) & (drawn <= timeout)))
    slow = int(np.sum(drawn > timeout))
    assert sim["retries"]["count"] == 2 * slow  # two retries each, nothing queues long at 8 workers
    assert abs(real["retries"]["count"] - sim["retries"]["count"]) <= 2 * near, (real["retries"], near)
    assert abs(real["retries"]["exhausted"] - sim["retries"]["exhausted"]) <= near
    assert abs(real["error_counts"]["total"] - sim["error_counts"]["total"]) <= near


def test_the_autoscaled_testbed_refuses_retries_in_one_line():
    from dynosim.testbed.fleet import split

    doc = scenario(autoscale={"rule": "heroku", "min": 1, "max": 3},
                   run={"duration": "10min", "warmup": "0s", "replications": 2, "seed": 1})
    with pytest.raises(ScenarioError, match=r"arrivals\.retry"):
        split(Scenario(doc))


@pytest.mark.needs("haproxy", "gunicorn")
def test_haproxy_retries_after_a_timeout_on_another_dyno_as_the_simulations_router(tmp_path):
    """router.retry_on = ["timeout"] is HAProxy's ``retry-on response-timeout`` with ``option
    redispatch 1``: every request takes 600 ms and the router gives up on a try after 300 ms,
    two retries at most: three tries each at the router, then a 504 (H12), as simulated; each
    try leaves its dyno working (the app's work goes on)."""
    doc = scenario(arrivals={"process": "poisson", "rate": "2/s"},
                   router={"policy": "random", "timeout": "300ms", "retry_on": ["timeout"], "retries": 2})
    plan = make_plan(Scenario(doc))
    config = plan.router.config(9000, [9001, 9002])
    assert "retry-on response-timeout" in config and "retries 2" in config and "option redispatch 1" in config
    r, real, sim, rows = run_testbed(tmp_path, "router-timeout", doc)
    n = real["requests"]
    assert n == sim["requests"] > 0
    for rep in (real, sim):
        assert rep["retries"]["router"] == rep["retries"]["count"] == 2 * n, rep["retries"]
        assert rep["retries"]["attempts"] == 3 * n and rep["retries"]["client"] == 0
        assert rep["error_counts"]["h12"] == n == rep["error_counts"]["total"]
    # One line a request at the router, whose retries HAProxy counts (%rc).
    assert r["testbed"]["router_log_lines"] == len(plan.drawn["time"])


def test_router_retry_keys_the_testbed_cannot_run_are_refused_in_one_line():
    for key, value in (("router.retry_budget", {"percent": 20}),):
        bad = Scenario(scenario(router={"policy": "random", "retry_on": ["timeout"], key.split(".")[1]: value}))
        with pytest.raises(ScenarioError, match=key.replace(".", r"\.")):
            make_plan(bad)
    nginx = Scenario(scenario(router={"policy": "random", "kind": "nginx", "retry_on": ["5xx"]}))
    with pytest.raises(ScenarioError, match=r"router\.retry_on"):
        make_plan(nginx)
    # Refused connections alone are today's retries: nothing more in HAProxy's configuration.
    plain = make_plan(Scenario(scenario(router={"policy": "random", "retry_on": ["refused"]})))
    assert "retry-on" not in plain.router.config(9000, [9001])
