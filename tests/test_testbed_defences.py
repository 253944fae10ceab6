"""The clients' circuit breaker and the app's service_timeout on the real stack
(docs/feedback.md, "On the real stack"): the load generator asks the engine's own breaker
before each try, and the testbed's app stops a request's work at app.service_timeout and
answers 500, its worker free; the measured report has the simulation's metric names.

The runs are short and paired: the load generator sends replication 0's requests.
"""

from __future__ import annotations

import math

import pytest

from dynosim import Scenario
from dynosim.testbed.plan import make_plan
from test_testbed_retries import run_testbed

#: The breaker's case: Poisson arrivals at λ on two fast dynos; a count window of 10 calls
#: judged at 50%, open for 3 s, 3 probes when half-open; the app refuses every request for
#: 8 s from t = 5 s.
LAMBDA, OPEN_FOR, OUTAGE_AT, OUTAGE_FOR = 20.0, 3.0, 5.0, 8.0


@pytest.mark.needs("haproxy", "gunicorn")
def test_an_outage_opens_the_breaker_for_whole_waits_as_in_the_simulation(tmp_path):
    """The breaker's arithmetic (as crates/dynosim-engine/tests/breaker.rs's): after 10
    successes, the outage's first 5 refusals turn the window (50%) within a fraction of a
    second of 5 s, and it opens for 3 s; half-open at about 8 s and 11 s, still inside the
    outage, its 3 probes are refused at once and it opens again; half-open at about 14 s, after
    the outage's end (13 s), its probes succeed and it closes for good. So it opens exactly 3
    times, for 9 s in all, whatever the draws, in the simulation and for real; the requests it
    fails at once are those arriving while it is open: Poisson of mean λ × 9 s (the few turned
    away while the probes are out, a few milliseconds each time, are nothing beside them)."""
    doc = {
        "name": "testbed-breaker",
        "arrivals": {"process": "poisson", "rate": f"{LAMBDA:g}/s",
                     "breaker": {"window": 10, "min_calls": 10, "failure_rate": 50, "open_for": f"{OPEN_FOR:g}s",
                                 "half_open_calls": 3}},
        "service": {"distribution": "constant", "value": "10ms"},
        "fleet": {"dynos": 2},
        "app": {"server": "gunicorn", "worker_class": "sync", "processes": 2},
        "router": {"policy": "random"},
        "faults": [{"at": f"{OUTAGE_AT:g}s", "for": f"{OUTAGE_FOR:g}s", "kind": "outage", "mode": "refuse"}],
        "run": {"duration": "20s", "warmup": "0s", "replications": 4, "seed": 35},
    }
    r, real, sim, rows = run_testbed(tmp_path, "breaker", doc)
    open_total = 3 * OPEN_FOR
    mean, sd = LAMBDA * open_total, math.sqrt(LAMBDA * open_total)
    for rep in (real, sim):
        b = rep["breaker"]
        assert b["opened"] == 3, b
        assert b["open_fraction"] == pytest.approx(open_total / 20.0), b
        assert abs(b["rejected"] - mean) <= 3 * sd, b
        assert rep["error_counts"]["breaker_open"] == b["rejected"], rep["error_counts"]
        # The app refused only the calls that turned the window and the probes (and a try or
        # two in flight when it opened).
        assert 5 + 3 + 3 <= rep["error_counts"]["outage"] <= 5 + 3 + 3 + 3, rep["error_counts"]
    assert sim["breaker"]["opened"] == r["simulated"]["summary"]["breaker"]["opened"]["mean"] == 3
    # The real breaker's openings (seconds from the load's start): the first within a second
    # of the outage's start, each next one a wait (and its probes) after the one before, the
    # last still inside the outage, and it stays closed after it; each refused try was sent
    # while it was open.
    openings = r["testbed"]["breaker_openings"]
    assert len(openings) == 3, openings
    assert all(b - a == pytest.approx(OPEN_FOR) for a, b in openings), openings
    assert OUTAGE_AT <= openings[0][0] <= OUTAGE_AT + 1.0, openings
    for (_, until), (a, _) in zip(openings, openings[1:]):
        assert until <= a <= until + 1.0, openings
    assert openings[-1][0] < OUTAGE_AT + OUTAGE_FOR < openings[-1][1]
    refused = [float(row["sent"]) for row in rows if row["error"] == "breaker_open"]
    assert len(refused) == real["breaker"]["rejected"]
    # Refused while open, or while the probes were out (within a second after a wait).
    assert all(any(a <= t <= b + 1.0 for a, b in openings) for t in refused), refused
    # After its last wait every request reached the app, and succeeded.
    late = [row for row in rows if float(row["sent"]) > openings[-1][1] + 1.0]
    assert late and all(row["status"] == "200" for row in late)


@pytest.mark.parametrize("server", [
    pytest.param("gunicorn", marks=pytest.mark.needs("haproxy", "gunicorn")),
    pytest.param("puma", marks=pytest.mark.needs("haproxy", "ruby", "puma", "ruby-rack", "ruby-rack-timeout"))])
def test_the_app_stops_requests_at_their_service_timeout_as_the_simulation_does(tmp_path, server):
    """Exponential waits of mean 100 ms stopped at 200 ms (Rack::Timeout's service_timeout):
    a request whose drawn work is longer is answered 500 (errors.service_timeout) when its
    worker has had it 200 ms, its worker free then; P(S > 200 ms) = e^-2. The fraction stopped
    for real is the simulation's within three standard errors (the real run's binomial one
    and the simulation's over its replications), and request by request the stopped ones are
    those whose drawn work passes the timeout (but for those within 20 ms of it). Under
    gunicorn (the testbed's app.py stops the work at its deadline) and Puma (Rack::Timeout's
    own service_timeout, raised in the request's thread: 4 threads a dyno for 4 processes)."""
    timeout = 0.2
    doc = {
        "name": "testbed-service-timeout",
        "arrivals": {"process": "poisson", "rate": "10/s"},
        "request": {"phases": [{"io": {"distribution": "exponential", "mean": "100ms"}}]},
        "fleet": {"dynos": 2},
        "app": ({"server": "gunicorn", "worker_class": "sync", "processes": 4} if server == "gunicorn"
                else {"server": "puma", "processes": 1, "threads": 4}) | {"service_timeout": "200ms"},
        "router": {"policy": "random"},
        "run": {"duration": "12s", "warmup": "0s", "replications": 10, "seed": 7},
    }
    plan = make_plan(Scenario(doc))
    assert plan.dynos.service_timeout == timeout
    r, real, sim, rows = run_testbed(tmp_path, "service-timeout", doc)
    n = real["requests"]
    assert n == sim["requests"] > 50
    p_real = real["errors"]["service_timeout"]
    p_sim = r["simulated"]["summary"]["errors"]["service_timeout"]
    se_real = math.sqrt(max(p_real * (1 - p_real), 1.0 / n) / n)
    assert abs(p_real - p_sim["mean"]) <= 3 * math.hypot(se_real, p_sim["std_error"]), (p_real, p_sim)
    assert abs(p_sim["mean"] - math.exp(-timeout / 0.1)) <= 3 * p_sim["std_error"], p_sim
    assert real["error_counts"]["service_timeout"] == real["error_counts"]["total"] > 0
    for row in rows:
        drawn = float(row["drawn_service"])
        if drawn >= timeout + 0.02:
            assert row["status"] == "500", row
            # Stopped when its worker had had it for the timeout.
            assert timeout - 0.002 <= float(row["app_end"]) - float(row["app_start"]) <= timeout + 0.05, row
        elif drawn <= timeout - 0.02:
            assert row["status"] == "200", row
