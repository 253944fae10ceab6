"""Every rate in a run's summary is per second of the window that was measured (issue #23 §2).

For a closed loop of a set number of requests (ab -n), the window is the whole run, from the
start to the last answer: `throughput` and `goodput` are then the same figure as
`closed_loop.requests_per_s`, as ab prints it. For a timed run the window is `run.duration`
after the warm-up: `throughput` counts the answers inside it, `requests` the arrivals inside
it, and the two differ only by the requests in flight at the window's two ends.
"""

from __future__ import annotations

import json
import math

import pytest

from conftest import run_cli


def _per_replication(doc):
    (result,) = doc["results"]
    return result["per_replication"]


def test_the_issue_example_throughput_is_the_table_rate():
    # `dynosim run unicorn-2011 --set app.processes=4 --json`: the table said 1,000 req/s and
    # closed_loop.requests_per_s 1,000, while summary.throughput said 33.3 (1,000 requests over
    # a window of 30 s that the run never had: the router timeout's last deadline).
    out = run_cli("run", "unicorn-2011", "--set", "app.processes=4", "--json")
    assert out.returncode == 0, out.stderr
    (result,) = json.loads(out.stdout)["results"]
    summary = result["summary"]
    assert summary["throughput"]["mean"] == pytest.approx(
        summary["closed_loop"]["requests_per_s"]["mean"], rel=1e-12)
    # 4 workers on 4 cores at 3 ms of CPU each: about 1,000 req/s, not 33.
    assert summary["throughput"]["mean"] > 500


@pytest.mark.parametrize("overrides", [
    ["--set", "app.processes=1"],
    ["--set", "app.processes=5"],                # R14 swapping: a slow run
    ["--set", "arrivals.requests=200", "--set", "arrivals.clients=10"],
    ["--set", "router.timeout=off"],             # no deadline left after the last answer
])
def test_ab_style_rates_are_requests_per_second_of_the_run(overrides):
    out = run_cli("run", "unicorn-2011", *overrides, "--json")
    assert out.returncode == 0, out.stderr
    for rep in _per_replication(json.loads(out.stdout)):
        closed = rep["closed_loop"]
        answered = closed["completed"]
        assert rep["requests"] == answered
        # One window for every rate: answers over the run's elapsed time, as ab counts.
        assert rep["throughput"] == pytest.approx(answered / closed["elapsed"], rel=1e-12)
        assert rep["throughput"] == pytest.approx(closed["requests_per_s"], rel=1e-12)
        assert rep["goodput"] == pytest.approx((answered - closed["failed"]) / closed["elapsed"],
                                               rel=1e-12)
        # Time averages share that window: a busy worker cannot be busy more than all the time.
        assert 0 < rep["utilisation"]["mean"] <= 1 + 1e-9


def _edge_bound(rate, mean_response, duration):
    """How far answers / duration may stand from arrivals / duration: the requests in flight
    at the window's start, less those in flight at its end. Each count has mean L = rate ×
    mean response (Little) and, for these lightly loaded open runs, about Poisson spread, so
    the difference has standard deviation at most sqrt(2 L); six of them, plus one request."""
    in_flight = rate * mean_response
    return (6 * math.sqrt(2 * max(in_flight, 1.0)) + 1) / duration


@pytest.mark.parametrize("scenario, overrides", [
    ("rapgenius", ["--policy", "random", "--set", "fleet.dynos=200"]),
    ("rapgenius", ["--policy", "intelligent", "--set", "run.warmup=1min"]),
])
def test_timed_run_rates_are_per_second_of_the_duration(scenario, overrides):
    out = run_cli("run", scenario, *overrides, "--replications", "3", "--duration", "2min",
                  "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    (result,) = doc["results"]
    duration = result["duration"]
    assert duration == 120
    for rep in result["per_replication"]:
        arrived = rep["requests"] / duration
        bound = _edge_bound(arrived, rep["response"]["mean"], duration)
        assert abs(rep["throughput"] - arrived) <= bound, (rep["throughput"], arrived, bound)
        assert rep["goodput"] <= rep["throughput"] + 1e-12


CLOSED_TIMED = """
name = "timed-closed"
[arrivals]
process = "closed"
clients = 8
think = { distribution = "exponential", mean = "200ms" }
[fleet]
dynos = 2
[app]
server = "gunicorn"
worker_class = "sync"
processes = 2
[request]
phases = [ { cpu = { distribution = "exponential", mean = "20ms" } }, { io = "30ms" } ]
[run]
duration = "1min"
warmup = "10s"
replications = 3
"""


def test_timed_closed_loop_rates_are_per_second_of_the_duration(tmp_path):
    path = tmp_path / "closed.toml"
    path.write_text(CLOSED_TIMED)
    out = run_cli("run", str(path), "--json")
    assert out.returncode == 0, out.stderr
    (result,) = json.loads(out.stdout)["results"]
    duration = result["duration"]
    for rep in result["per_replication"]:
        # At most one request per client is in flight at either end of the window.
        assert abs(rep["throughput"] * duration - rep["requests"]) <= 8 + 1e-6


QUIET_END = """
name = "quiet-end"
[arrivals]
process = "poisson"
rate = "1/min"
[fleet]
dynos = 1
[app]
server = "gunicorn"
worker_class = "sync"
processes = 2
[app.memory]
dyno = "50MB"
process = "100MB"
request = "1MB"
[request]
phases = [ { cpu = "10ms" } ]
[run]
duration = "10min"
warmup = "0s"
replications = 4
"""


def test_time_averages_cover_the_whole_window_when_its_end_is_quiet(tmp_path):
    # One request a minute: the last event of a replication comes well before the window's
    # end. The dyno's memory is at least its idle memory (50 MB + 2 × 100 MB) at every
    # moment of the window, so its time average is too; closing the average at the last
    # event instead left out the quiet end (a mean below the idle memory).
    path = tmp_path / "quiet.toml"
    path.write_text(QUIET_END)
    out = run_cli("run", str(path), "--json")
    assert out.returncode == 0, out.stderr
    (result,) = json.loads(out.stdout)["results"]
    idle = 250e6
    for rep in result["per_replication"]:
        mean = rep["dyno"]["memory"]["mean"]
        # At most a request's 1 MB more, for the few 10 ms it is in flight.
        assert idle <= mean <= idle + 1e6, mean
