"""Services that call services on the real testbed (docs/testbed.md, "Services that call
services"): the plan (each service's fleet behind its own HAProxy, the calls' drawn work), the
app's call and fan-out phases, the refusals, then two short real runs on loopback: a chain
(entry → api) and a fan-out of 4 with wait = "all", each checked against the theory of the
case without queueing (standard errors from the drawn law) and the stack's measured overhead.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

from conftest import assert_one_line_error, run_cli
from fuzzing import toml_document

from dynosim import Scenario
from dynosim.errors import DynosimError, ScenarioError
from dynosim.testbed import app, services
from dynosim.testbed.plan import make_plan

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "testbed"


def chain(**extra: Any) -> Dict[str, Any]:
    """entry (20 ms exponential wait) → api (30 ms exponential wait), nothing queueing: 20/s on
    4 gunicorn sync workers each side (the api busy 0.6 of 4 workers: P(wait) < 1% in M/M/4; the
    entry's workers, held through their calls, 1.1 of 4)."""
    doc: Dict[str, Any] = {
        "name": "chain",
        "arrivals": {"process": "poisson", "rate": "20/s"},
        "fleet": {"dynos": 1},
        "app": {"server": "gunicorn", "processes": 4},
        "request": {"phases": [{"io": {"distribution": "exponential", "mean": "20ms"}},
                               {"call": "api", "timeout": "2s", "retries": 1}]},
        "services": {"api": {"fleet": {"dynos": 1}, "app": {"server": "gunicorn", "processes": 4},
                             "router": {"policy": "least_connections"},
                             "request": {"phases": [{"io": {"distribution": "exponential", "mean": "30ms"}}]}}},
        "run": {"duration": "6s", "warmup": "0s", "seed": 7},
    }
    doc.update(extra)
    return doc


def fanout(wait: Any = "all", **extra: Any) -> Dict[str, Any]:
    """entry (1 ms) → a fan-out of 4 to search (20 ms exponential), 10/s: 40 calls/s on 16
    threads (0.8 busy): no call waits for a thread."""
    doc: Dict[str, Any] = {
        "name": "fanout",
        "arrivals": {"process": "poisson", "rate": "10/s"},
        "fleet": {"dynos": 1},
        "app": {"server": "gunicorn", "processes": 2},
        "request": {"phases": [{"io": "1ms"}, {"fanout": "search", "count": 4, "wait": wait}]},
        "services": {"search": {"fleet": {"dynos": 2}, "app": {"model": "threaded", "processes": 1, "threads": 8},
                                "request": {"phases": [{"io": {"distribution": "exponential", "mean": "20ms"}}]}}},
        "run": {"duration": "6s", "warmup": "0s", "seed": 11},
    }
    doc.update(extra)
    return doc


def three_tiers(**extra: Any) -> Dict[str, Any]:
    """entry (20 ms exponential) → api (10 ms, then a call to search) → search (30 ms
    exponential), 10/s, nothing queueing: the entry's 4 workers held 0.06 s a request (0.6 of
    4), the api's 4 and search's 4 likewise less."""
    doc = chain(**extra)
    doc["arrivals"] = {"process": "poisson", "rate": "10/s"}
    doc["services"]["api"]["request"] = {"phases": [{"io": "10ms"}, {"call": "search"}]}
    doc["services"]["search"] = {"fleet": {"dynos": 1}, "app": {"server": "gunicorn", "processes": 4},
                                 "request": {"phases": [{"io": {"distribution": "exponential", "mean": "30ms"}}]}}
    return doc


def chain_with_a_database(**extra: Any) -> Dict[str, Any]:
    """chain() whose api's 30 ms is a query of the scenario's database (servers enough: a
    connection each of the fleets' 8 processes)."""
    doc = chain(**extra)
    doc["services"]["api"]["request"] = {"phases": [
        {"use": "db", "time": {"distribution": "exponential", "mean": "30ms"}}]}
    doc["resources"] = {"db": {"servers": 20}}
    return doc


# --- the parts ---------------------------------------------------------------------------------


def test_call_phases_round_trip_through_the_app_parser():
    call = services.Call("call", "api", timeout=2.0, retries=1)
    fan = services.Call("fanout", "search", count=4, wait="first")
    phases = app.parse_phases(f"io:0.010000,{call.token()},{fan.token()}")
    assert [p[0] for p in phases] == ["io", "call", "fanout"]
    one = app.parse_call("call", phases[1][1])
    assert (one["service"], one["count"], one["need"], one["timeout"], one["retries"]) == ("api", 1, 1, 2.0, 1)
    many = app.parse_call("fanout", phases[2][1])
    assert (many["service"], many["count"], many["need"], many["timeout"]) == ("search", 4, 1, None)
    assert app.parse_call("fanout", "s;count=4;wait=3")["need"] == 3
    assert app.parse_call("fanout", "s;count=2;wait=5")["need"] == 2  # k above the count: all of them
    for bad in ("", "s;count=0", "s;retries=-1", "s;timeout=0", "s;colour=red"):
        with pytest.raises(ValueError):
            app.parse_call("call", bad)


def test_a_chains_plan_runs_the_service_behind_its_own_haproxy_with_its_drawn_work():
    plan = make_plan(Scenario(chain()))
    assert plan.services is not None
    (api,) = plan.services.services
    assert api.name == "api" and api.plan.router.policy == "least_connections"
    assert "balance leastconn" in api.plan.router.config(1000, [1001])
    assert (api.plan.dynos.server, api.plan.dynos.worker_class, api.plan.dynos.workers) == ("gunicorn", "sync", 4)
    # The entry's plan is the entry alone; its call phase a placeholder the app gets as a call.
    assert "services" not in plan.scenario.doc
    requests = plan.requests()
    assert len(requests) == len(plan.drawn["phases"]) > 50
    works = []
    for _, _, headers in requests:
        tokens = headers["X-Dynosim-Phases"].split(",")
        assert tokens[0].startswith("io:") and tokens[1] == "call=api;timeout=2.000000;retries=1:0"
        calls = headers[services.CALLS_HEADER].split("|")
        assert len(calls) == 1 and calls[0].startswith("io:")
        works.append(float(calls[0].partition(":")[2]))
    # Each call its own draw of the api's law (exponential, 30 ms), not the entry's numbers.
    entry = [p[0] for p in plan.drawn["phases"]]
    assert [f"io:{w:.6f}" for w in works] == api.work[:len(works)]
    assert works != [round(x, 6) for x in entry[:len(works)]]
    se = 0.030 / math.sqrt(len(works))
    assert abs(np.mean(works) - 0.030) < 4 * se
    # The same scenario and seed: the same plan.
    assert make_plan(Scenario(chain())).requests() == requests


def test_a_fanouts_calls_each_take_a_draw_of_their_own():
    plan = make_plan(Scenario(fanout()))
    headers = plan.requests()[0][2]
    assert headers["X-Dynosim-Phases"].split(",")[1] == "fanout=search;count=4;wait=all:0"
    each = [h[services.CALLS_HEADER].split("|") for _, _, h in plan.requests()]
    assert all(len(w) == 4 for w in each)
    flat = [w for ws in each for w in ws]
    assert flat == plan.services.services[0].work


def test_a_service_that_calls_a_service_carries_its_calls_works_in_its_own():
    from urllib.parse import unquote

    plan = make_plan(Scenario(three_tiers(run={"duration": "4s", "warmup": "0s", "seed": 3})))
    assert [t.name for t in plan.services.services] == ["api", "search"]  # callers first
    api, search = plan.services.services
    n = len(plan.drawn["phases"])
    for i, (_, _, headers) in enumerate(plan.requests()):
        (work,) = headers[services.CALLS_HEADER].split("|")
        own, _, sub = work.partition(services.SUBCALLS)
        # The api's request: its 10 ms, its call to search; search's work after it, its own draw.
        assert own == api.work[i].partition(services.SUBCALLS)[0] == "io:0.010000,call=search:0"
        assert unquote(sub) == search.work[i] and search.work[i].startswith("io:")
    assert len({w for w in search.work[:n]}) == n  # each call its own draw
    # A cycle is refused in one line.
    doc = three_tiers()
    doc["services"]["search"]["request"]["phases"].append({"call": "api"})
    with pytest.raises(DynosimError) as e:
        make_plan(Scenario(doc))
    assert "\n" not in str(e.value)


def test_a_service_uses_the_scenarios_database_shared_with_the_entry():
    plan = make_plan(Scenario(chain_with_a_database()))
    (api,) = plan.services.services
    assert api.plan.resources["db"]["mode"] == "sleep" and api.plan.resource_users == {"db": 4}
    assert api.work[0].startswith("use=db:")
    # Fewer servers than the fleets' connections: the real database would not stand for them.
    doc = chain_with_a_database()
    doc["resources"]["db"]["servers"] = 6
    with pytest.raises(DynosimError) as e:
        make_plan(Scenario(doc))
    assert str(e.value).count("resources.db.servers: the testbed runs a database its services share") == 1
    assert "give servers >= 8" in str(e.value) and "\n" not in str(e.value)


def test_work_is_dealt_to_the_calls_in_order():
    calls = {1: services.Call("call", "a"), 3: services.Call("fanout", "b", count=2)}
    dealt = services.deal_work(calls, 2, {"a": ["a0", "a1"], "b": ["b0", "b1", "b2", "b3"]})
    assert dealt == [["a0", "b0", "b1"], ["a1", "b2", "b3"]]
    assert services.needed(calls, 2) == {"a": 2, "b": 4}
    assert services.service_seed(7, "a") != services.service_seed(7, "b")


def test_a_services_figures_come_from_its_haproxy_and_work_logs():
    router_log = {"1-api0": {"ta": 0.05, "tw": 0.0, "status": 200},
                  "2-api0": {"ta": 0.03, "tw": 0.0, "status": 200},
                  "3-api0": {"ta": 2.0, "tw": 0.0, "status": 504}}
    work = {"1-api0": {"start": 10.0, "end": 10.04}, "2-api0": {"start": 11.0, "end": 11.03},
            "3-api0": {"start": 12.0, "end": 14.5}}
    router_log["2-api0.r1"] = {"ta": 0.05, "tw": 0.0, "status": 200, "term": "CD"}  # its caller gave up
    work["2-api0.r1"] = {"start": 11.5, "end": 11.6}
    f = services.figures(router_log, work, dynos=1, slots=2, span=10.0, failed=1)
    assert f["requests"] == 4 and f["errors"] == {"total": pytest.approx(2 / 4)}
    assert f["response"]["mean"] == pytest.approx(0.04)
    assert f["queue"]["mean"] == pytest.approx(0.005)
    assert f["utilisation"] == {"mean": pytest.approx((0.04 + 0.03 + 2.5 + 0.1) / 20)}
    assert f["calls"] == {"sent": 4, "answered": 3, "errors": 1, "timed_out": 1, "timed_out_fraction": 0.25,
                          "retried": 1, "hedged": 0, "failed": 1, "late": 1}
    # The fleet's figures count the window's entry requests' tries (request 1 in the warm-up);
    # calls.*, as the simulation's, the whole run.
    w = services.figures(router_log, work, dynos=1, slots=2, span=10.0, failed=1, window=lambda i: i != 1)
    assert w["requests"] == 3 and w["errors"] == {"total": pytest.approx(2 / 3)}
    assert w["service_mean"] == pytest.approx((0.03 + 2.5 + 0.1) / 3) and w["calls"] == f["calls"]


def test_a_hedged_fanout_carries_a_second_draw_per_call_for_its_copies():
    doc = fanout(run={"duration": "3s", "warmup": "0s", "seed": 2})
    doc["request"]["phases"][1]["hedge"] = "15ms"
    plan = make_plan(Scenario(doc))
    (call,) = plan.services.calls.values()
    assert (call.hedge, call.needed) == (0.015, 8)
    token = plan.requests()[0][2]["X-Dynosim-Phases"].split(",")[1]
    assert token == "fanout=search;count=4;wait=all;hedge=0.015000:0"
    spec = app.parse_call("fanout", app.parse_phases(token)[0][1])
    assert (spec["hedge"], spec["draws"], spec["need"]) == (0.015, 8, 4)
    each = [h[services.CALLS_HEADER].split("|") for _, _, h in plan.requests()]
    assert all(len(w) == 8 for w in each)  # the 4 calls' works, then their copies'
    assert [w for ws in each for w in ws] == plan.services.services[0].work[:8 * len(each)]
    # hedge = false is no hedge, as leaving it out (a sweep's hedge=false,10ms).
    doc["request"]["phases"][1]["hedge"] = False
    assert make_plan(Scenario(doc)).services.calls[1].hedge is None
    for bad in ("s;count=2;hedge=0", "s;count=2;hedge=-1"):
        with pytest.raises(ValueError):
            app.parse_call("fanout", bad)
    with pytest.raises(ValueError):
        app.parse_call("call", "s;hedge=0.01")  # a call has no hedge: a fan-out's


def test_the_loser_of_a_hedged_call_is_counted_late_and_its_copy_hedged():
    ok = {"ta": 0.05, "tw": 0.0, "status": 200}
    router_log = {"1-s0.0": ok, "1-s0.0.h": ok, "1-s0.1": ok, "2-s0.0": ok, "2-s0.0.h": ok}
    work = {"1-s0.0": {"start": 1.0, "end": 1.20}, "1-s0.0.h": {"start": 1.05, "end": 1.08},
            "1-s0.1": {"start": 1.0, "end": 1.01},
            "2-s0.0": {"start": 2.0, "end": 2.06}, "2-s0.0.h": {"start": 2.05, "end": 2.30}}
    # The first copy of call 1-s0.0 lost (it ended later), the copy of 2-s0.0 did.
    assert services.hedge_losers(router_log, work) == {"1-s0.0", "2-s0.0.h"}
    f = services.figures(router_log, work, dynos=2, slots=8, span=10.0)
    assert f["calls"]["sent"] == 5 and f["calls"]["hedged"] == 2
    assert (f["calls"]["answered"], f["calls"]["late"], f["calls"]["timed_out"]) == (3, 2, 0)
    # A copy answered with an error is no winner: both counted as answered (one an error).
    router_log["2-s0.0.h"] = {"ta": 0.01, "tw": 0.0, "status": 503}
    assert services.hedge_losers(router_log, work) == {"1-s0.0"}


@pytest.mark.parametrize("change, path", [
    ({"request": {"phases": [{"io": "1ms"}, {"fanout": "search", "count": 4, "hedge": "p95"}]}},
     "request.phases[1].hedge"),
    ({"request": {"phases": [{"io": "1ms"}, {"fanout": "search", "count": 4, "wait": "first", "cancel": "queued"}]}},
     "request.phases[1].cancel"),
    ({"request": {"phases": [{"io": "1ms"}, {"fanout": "search", "count": 4, "wait": "first", "cancel": True}]}},
     "request.phases[1].cancel"),
    ({"services": {"search": {"fleet": {"dynos": 1}, "app": {"server": "puma"},
                              "service": {"distribution": "exponential", "mean": "10ms"}}}},
     "services.search.app.server"),
    ({"services": {"search": {"fleet": {"dynos": 1}, "router": {"policy": "shortest_expected_delay"},
                              "service": {"distribution": "exponential", "mean": "10ms"}}}},
     "services.search.router.policy"),
])
def test_what_the_testbed_does_not_run_of_services_is_refused_in_one_line(change, path):
    doc = fanout()
    doc.update(change)
    with pytest.raises(DynosimError) as e:
        make_plan(Scenario(doc))
    assert path in str(e.value) and "\n" not in str(e.value)


def test_an_autoscaled_entry_with_services_is_refused_in_one_line(tmp_path):
    doc = chain(autoscale={"policy": "hpa", "min": 1, "max": 2, "target": 0.5})
    toml = tmp_path / "autoscaled.toml"
    toml.write_text(toml_document(doc))
    result = run_cli("testbed", str(toml))
    assert_one_line_error(result, code=2)
    assert "autoscale: the testbed runs services beside a fixed entry fleet" in result.stderr


def test_the_cli_refuses_a_hedge_at_a_percentile_before_anything_starts(tmp_path):
    doc = fanout()
    doc["request"]["phases"][1]["hedge"] = "p95"
    toml = tmp_path / "hedged.toml"
    toml.write_text(toml_document(doc))
    result = run_cli("testbed", str(toml))
    assert_one_line_error(result, code=2)
    assert "request.phases[1].hedge: the testbed runs a hedge after a fixed time only" in result.stderr


# --- real runs ---------------------------------------------------------------------------------


def _run(doc: Dict[str, Any]):
    from dynosim.testbed.run import _run_stack, report_of

    plan = make_plan(Scenario(doc))
    load, router_log, work, wall, _cpu = _run_stack(plan)
    report, _records = report_of(plan, load, router_log, work, wall)
    return plan, load, report


def _walls(load: Dict[str, Any], phase: int) -> np.ndarray:
    return np.array([float(w.split(",")[phase]) for w in load["headers"]["x-dynosim-phase-wall"]])


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_chain_answers_in_the_entrys_work_plus_the_calls_response():
    plan, load, report = _run(chain())
    n = len(plan.drawn["phases"])
    assert list(load["status"]) == [200] * n
    rep = report["per_replication"][0]
    api = rep["services"]["api"]
    # Every entry request called the api once; the api's log and work log hold each call.
    assert api["requests"] == api["calls"]["sent"] == api["calls"]["answered"] == n
    assert api["errors"]["total"] == 0 and api["calls"]["timed_out"] == api["calls"]["failed"] == 0
    calls, api_work = load["services"]["api"]
    index = list(load["index"])
    response = np.asarray(load["done"], dtype=float) - np.asarray(load["sent"], dtype=float)
    drawn_entry = np.array([plan.drawn["phases"][i][0] for i in index])
    drawn_api = np.array([float(plan.services.work_of[i][0].partition(":")[2]) for i in index])
    ids = [f"{i}-api0" for i in index]
    api_wall = np.array([api_work[c]["end"] - api_work[c]["start"] for c in ids])
    ta = np.array([calls[c]["ta"] for c in ids])
    # The call waits for the api's answer: each request's call phase lasts at least the api's
    # drawn work, and the whole request at least both works.
    call_wall = _walls(load, 1)
    assert np.all(call_wall >= drawn_api - 1e-3)
    assert np.all(response >= drawn_entry + drawn_api - 1e-3)
    # The stack's overhead per request (two hops: the load generator to the entry, the entry to
    # the api), measured from the apps' own walls; the rest is the works, whose mean is the
    # theory's sum of means (no queueing), within 4 standard errors of the drawn law.
    overhead = response - _walls(load, 0) - api_wall
    assert np.all(overhead > 0)
    sd = math.hypot(0.020, 0.030)
    assert abs(np.mean(response - overhead) - 0.050) < 4 * sd / math.sqrt(n)
    # The call's own overhead: the entry's wall for it less the api's HAProxy time, and that
    # less the api's work: both positive (the figures docs/testbed.md gives).
    assert np.all(call_wall - ta > -1e-3) and np.all(ta - api_wall > -1e-3)
    # Reported as a fleet's: the end-to-end at the top, the api under services.api.
    assert rep["response"]["mean"] == pytest.approx(np.mean(response), rel=0.05)
    assert api["response"]["mean"] == pytest.approx(np.mean(ta), abs=1e-3)
    assert "services" in report["summary"] and "response" in report["summary"]["services"]["api"]


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_fanout_of_four_waits_for_the_slowest_of_its_calls():
    plan, load, report = _run(fanout())
    n = len(plan.drawn["phases"])
    assert list(load["status"]) == [200] * n
    calls, work = load["services"]["search"]
    index = list(load["index"])
    assert report["per_replication"][0]["services"]["search"]["requests"] == 4 * n
    drawn = np.array([[float(w.partition(":")[2]) for w in plan.services.work_of[i]] for i in index])
    walls = np.array([[work[f"{i}-search0.{j}"]["end"] - work[f"{i}-search0.{j}"]["start"] for j in range(4)]
                      for i in index])
    phase = _walls(load, 1)
    # wait = "all": the phase lasts at least its slowest call's drawn work, every request.
    assert np.all(phase >= drawn.max(axis=1) - 1e-3)
    # Less the stack's overhead (the phase beyond its slowest call's work), the law of the
    # maximum of 4 exponentials: mean × (1 + 1/2 + 1/3 + 1/4), sd mean × sqrt(Σ 1/k²).
    overhead = phase - walls.max(axis=1)
    assert np.all(overhead > 0)
    mean, sd = 0.020 * (1 + 1 / 2 + 1 / 3 + 1 / 4), 0.020 * math.sqrt(1 + 1 / 4 + 1 / 9 + 1 / 16)
    assert abs(np.mean(phase - overhead) - mean) < 4 * sd / math.sqrt(n)


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_fanout_waiting_for_the_first_answer_takes_the_fastest_call():
    plan, load, _ = _run(fanout(wait="first", run={"duration": "4s", "warmup": "0s", "seed": 3}))
    n = len(plan.drawn["phases"])
    assert list(load["status"]) == [200] * n
    index = list(load["index"])
    drawn = np.array([[float(w.partition(":")[2]) for w in plan.services.work_of[i]] for i in index])
    phase = _walls(load, 1)
    # wait = "first": at least the fastest call's work, and well short of the slowest's on the
    # whole (the minimum of 4 exponentials has mean 5 ms, the maximum 41.7 ms).
    assert np.all(phase >= drawn.min(axis=1) - 1e-3)
    assert np.mean(phase) < np.mean(drawn.max(axis=1))


HEDGE_REPLICATIONS = 40


def hedged_fanout(**extra: Any) -> Dict[str, Any]:
    """tests/fixtures/testbed/services-hedge.toml, short: a fan-out of 4 to search (50 ms
    exponential) hedged at 50 ms, 10/s for 5 s, nothing queueing."""
    doc = Scenario.load(FIXTURES / "services-hedge.toml").with_overrides(
        {"run.duration": "5s", "run.replications": HEDGE_REPLICATIONS}).doc
    doc.update(extra)
    return doc


def hedge_measures(plan, load) -> Dict[str, Any]:
    """A real hedged fan-out's calls from the service's logs: per request (in the load's order),
    its first copies' work walls and which calls were hedged; the stack's hops: the entry's
    (the response less the entry app's phases) and the call's (the phase less its slowest
    call's work, over the requests that sent no copy: what a call's answer costs beyond its
    work, as the caller sees it)."""
    index = list(load["index"])
    log, work = load["services"]["search"]
    count = plan.services.calls[1].count
    first = np.array([[work[f"{i}-search0.{j}"]["end"] - work[f"{i}-search0.{j}"]["start"] for j in range(count)]
                      for i in index])
    hedged = np.array([[f"{i}-search0.{j}{services.HEDGE_SUFFIX}" in log for j in range(count)] for i in index])
    response = np.asarray(load["done"], dtype=float) - np.asarray(load["sent"], dtype=float)
    phase = _walls(load, 1)
    plain = ~hedged.any(axis=1)
    return {"first": first, "hedged": hedged, "phase": phase, "response": response,
            "entry_hop": float(np.mean(response - _walls(load, 0) - phase)),
            "call_hop": float(np.mean(phase[plain] - first[plain].max(axis=1)))}


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_hedged_fanout_sends_copies_after_its_timer_and_matches_its_paired_simulation():
    """hedge = 50 ms on a fan-out of 4 (docs/testbed.md, "Services that call services"): every
    call whose first copy's work outlasted the timer got a copy, the copies counted alike by the
    entry's answers, the service's log and services.search.calls.hedged, each loser's work done
    to its end (not cancelled) and counted late; then the hedged fraction and the response's
    p50 and p99 within 3 standard deviations of the paired simulation's replications
    (fleet.one_run_against_replications), the simulation given the stack's hops measured in
    the run as constant waits (services.with_hops): the hedge fires T after the calls left, as
    the caller sees them, the stack's hop included."""
    from dynosim.api import run as run_scenario
    from dynosim.testbed.fleet import one_run_against_replications

    scenario = Scenario(hedged_fanout())
    plan, load, report = _run(scenario.doc)
    n = len(plan.drawn["phases"])
    assert list(load["status"]) == [200] * n
    m = hedge_measures(plan, load)
    log, work = load["services"]["search"]
    # The timer: a call whose first copy worked longer than 50 ms was still unanswered then.
    assert np.all(m["hedged"][m["first"] > 0.050 + 1e-3])
    copies = int(m["hedged"].sum())
    assert 0 < copies < m["hedged"].size
    assert sum(int(h) for h in load["headers"]["x-dynosim-hedged"]) == copies
    calls = report["per_replication"][0]["services"]["search"]["calls"]
    assert calls["hedged"] == copies and calls["sent"] == 4 * n + copies
    # The loser is not cancelled: both copies of every hedged call did their work to the end,
    # and one of the two answered for nobody.
    pairs = [rid for rid in log if rid.endswith(services.HEDGE_SUFFIX)]
    assert all(work[r].get("end") is not None and work[r[:-2]].get("end") is not None for r in pairs)
    assert calls["late"] == copies and calls["answered"] == 4 * n
    # The first answer wins: each phase at least its slowest call's quicker copy's work.
    copy_work = np.array([[work[f"{i}-search0.{j}.h"]["end"] - work[f"{i}-search0.{j}.h"]["start"]
                           if h else math.inf for j, h in enumerate(row)] for i, row in zip(load["index"], m["hedged"])])
    assert np.all(m["phase"] >= np.minimum(m["first"], 0.050 + copy_work).max(axis=1) - 1e-3)
    # Against the paired simulation, the stack's hops as constant waits.
    assert m["call_hop"] > 0 and m["entry_hop"] > 0
    sim = run_scenario(services.with_hops(scenario, m["entry_hop"], m["call_hop"]), warn=False)[0].to_dict()
    reps = sim["per_replication"]
    assert len(reps) == HEDGE_REPLICATIONS and reps[0]["requests"] == n

    def fraction(calls: Dict[str, Any]) -> float:
        return calls["hedged"] / (calls["sent"] - calls["hedged"])

    rep = report["per_replication"][0]
    checks = {"hedged": one_run_against_replications(copies / m["hedged"].size,
                                                     [fraction(r["services"]["search"]["calls"]) for r in reps]),
              "p50": one_run_against_replications(rep["response"]["p50"], [r["response"]["p50"] for r in reps]),
              "p99": one_run_against_replications(rep["response"]["p99"], [r["response"]["p99"] for r in reps])}
    assert all(c["within"] for c in checks.values()), checks


def geometric_fanout() -> Dict[str, Any]:
    """fanout() with a drawn width, { distribution = "geometric", mean = 3 }, for 5 s."""
    doc = fanout(run={"duration": "5s", "warmup": "0s", "seed": 17, "replications": HEDGE_REPLICATIONS})
    doc["request"]["phases"][1]["count"] = {"distribution": "geometric", "mean": 3}
    return doc


def test_a_drawn_width_is_drawn_per_request_with_its_mean():
    plan = make_plan(Scenario(geometric_fanout()))
    widths = np.array([c[1] for c in plan.services.counts])
    assert len(widths) == len(plan.drawn["phases"]) and widths.min() >= 1
    # Geometric, mean 3: sd sqrt(1 - p) / p = 2.45.
    assert abs(widths.mean() - 3) < 4 * math.sqrt(1 - 1 / 3) * 3 / math.sqrt(len(widths))
    for (_, _, headers), w in zip(plan.requests(), widths):
        assert headers["X-Dynosim-Phases"].split(",")[1] == f"fanout=search;count={w};wait=all:0"
        assert len(headers[services.CALLS_HEADER].split("|")) == w
    assert make_plan(Scenario(geometric_fanout())).requests() == plan.requests()
    # Another replication, other widths.
    assert make_plan(Scenario(geometric_fanout()), replication=1).services.counts != plan.services.counts


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_fanout_of_a_drawn_width_sends_each_request_its_calls_and_matches_its_paired_simulation():
    """count = { distribution = "geometric", mean = 3 }: each request sends its drawn width's
    calls and waits for them all; the phase less its hop has the law of the maximum of K
    exponentials, K geometric (mean and variance summed over K, within 4 standard errors); and
    the response's mean and p50 within 3 sd of the paired simulation's replications, given the
    run's hops (services.with_hops), as the hedged fan-out's."""
    from collections import Counter

    from dynosim.api import run as run_scenario
    from dynosim.testbed.fleet import one_run_against_replications

    scenario = Scenario(geometric_fanout())
    plan, load, report = _run(scenario.doc)
    n = len(plan.drawn["phases"])
    assert list(load["status"]) == [200] * n
    index = list(load["index"])
    widths = [plan.services.counts[i][1] for i in index]
    log, work = load["services"]["search"]
    sent = Counter(rid.partition("-")[0] for rid in log)
    assert [sent[str(i)] for i in index] == widths
    rep = report["per_replication"][0]
    assert rep["services"]["search"]["calls"]["sent"] == sum(widths)
    slowest = np.array([max(work[f"{i}-search0.{j}"]["end"] - work[f"{i}-search0.{j}"]["start"] for j in range(w))
                        for i, w in zip(index, widths)])
    drawn = np.array([max(float(x.partition(":")[2]) for x in plan.services.work_of[i]) for i in index])
    phase = _walls(load, 1)
    assert np.all(phase >= drawn - 1e-3)
    # The maximum of K exponentials of mean b, K geometric (p = 1/3): E[M | K] = b H_K,
    # Var[M | K] = b² Σ 1/i², summed over K's law (its tail past 200 is below 1e-35).
    b, p = 0.020, 1 / 3
    ks = np.arange(1, 200)
    pk = (1 - p) ** (ks - 1) * p
    h1 = np.cumsum(1 / ks)
    h2 = np.cumsum(1 / ks ** 2)
    mean = float(np.sum(pk * b * h1))
    sd = math.sqrt(float(np.sum(pk * (b ** 2 * h2 + (b * h1) ** 2))) - mean ** 2)
    hop = phase - slowest
    assert np.all(hop > 0)
    assert abs(np.mean(phase - hop) - mean) < 4 * sd / math.sqrt(n)
    entry_hop = float(np.mean(np.asarray(load["done"], dtype=float) - np.asarray(load["sent"], dtype=float)
                              - _walls(load, 0) - phase))
    sim = run_scenario(services.with_hops(scenario, entry_hop, float(np.mean(hop))), warn=False)[0].to_dict()
    reps = sim["per_replication"]
    checks = {q: one_run_against_replications(rep["response"][q], [r["response"][q] for r in reps])
              for q in ("mean", "p50")}
    assert all(c["within"] for c in checks.values()), checks


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_service_that_calls_a_service_answers_after_both_and_matches_its_paired_simulation():
    """entry → api → search (three_tiers): each entry request's api call calls search in turn
    (its id the api call's, then search's place); each request lasts at least the three drawn
    works; the works less the stack's hops have the theory's mean, 20 + 10 + 30 ms, within 4
    standard errors; and the response's mean and p50 within 3 sd of the paired simulation's
    replications, given the run's hops (services.with_hops: the entry's, and each call's)."""
    from dynosim.api import run as run_scenario
    from dynosim.testbed.fleet import one_run_against_replications

    scenario = Scenario(three_tiers(run={"duration": "5s", "warmup": "0s", "seed": 23,
                                         "replications": HEDGE_REPLICATIONS}))
    plan, load, report = _run(scenario.doc)
    n = len(plan.drawn["phases"])
    assert list(load["status"]) == [200] * n
    index = list(load["index"])
    api_log, api_work = load["services"]["api"]
    search_log, search_work = load["services"]["search"]
    assert sorted(api_log) == sorted(f"{i}-api0" for i in index)
    assert sorted(search_log) == sorted(f"{i}-api0-search0" for i in index)
    rep = report["per_replication"][0]
    assert rep["services"]["search"]["calls"]["sent"] == rep["services"]["search"]["requests"] == n

    def wall(work: Dict[str, Any], rid: str) -> float:
        return work[rid]["end"] - work[rid]["start"]

    response = np.asarray(load["done"], dtype=float) - np.asarray(load["sent"], dtype=float)
    entry_own = np.array([plan.drawn["phases"][i][0] for i in index])
    search_drawn = np.array([float(plan.services.services[1].work[i].partition(":")[2]) for i in index])
    assert np.all(response >= entry_own + 0.010 + search_drawn - 1e-3)
    api_wall = np.array([wall(api_work, f"{i}-api0") for i in index])
    search_wall = np.array([wall(search_work, f"{i}-api0-search0") for i in index])
    # The api's work holds its call to search: the api's own 10 ms, the call's hop, search's work.
    assert np.all(api_wall >= 0.010 + search_wall - 1e-3)
    hops = {"entry": response - _walls(load, 0) - _walls(load, 1), "api": _walls(load, 1) - api_wall,
            "search": api_wall - 0.010 - search_wall}
    assert all(np.all(h > -1e-3) for h in hops.values())
    works = response - sum(hops.values())
    sd = math.hypot(0.020, 0.030)
    assert abs(np.mean(works) - 0.060) < 4 * sd / math.sqrt(n)
    sim = run_scenario(services.with_hops(scenario, float(np.mean(hops["entry"])),
                                          {k: float(np.mean(hops[k])) for k in ("api", "search")}),
                       warn=False)[0].to_dict()
    reps = sim["per_replication"]
    checks = {q: one_run_against_replications(rep["response"][q], [r["response"][q] for r in reps])
              for q in ("mean", "p50")}
    assert all(c["within"] for c in checks.values()), checks


@pytest.mark.needs("haproxy", "gunicorn", "postgres", "psycopg")
def test_a_service_with_a_database_answers_after_its_query_and_matches_its_paired_simulation():
    """chain_with_a_database: the api's work is a query of PostgreSQL (pg_sleep), the database
    the testbed starts once for the entry and its services; each call lasts at least its drawn
    query, the works less the hops at the theory's 50 ms within 4 standard errors, and the
    response's mean and p50 within 3 sd of the paired simulation's replications given the
    run's hops."""
    from dynosim.api import run as run_scenario
    from dynosim.testbed.fleet import one_run_against_replications

    scenario = Scenario(chain_with_a_database(run={"duration": "5s", "warmup": "0s", "seed": 29,
                                                   "replications": HEDGE_REPLICATIONS}))
    plan, load, report = _run(scenario.doc)
    n = len(plan.drawn["phases"])
    assert list(load["status"]) == [200] * n
    index = list(load["index"])
    _log, api_work = load["services"]["api"]
    api_wall = np.array([api_work[f"{i}-api0"]["end"] - api_work[f"{i}-api0"]["start"] for i in index])
    drawn = np.array([float(plan.services.services[0].work[i].partition(":")[2]) for i in index])
    assert np.all(api_wall >= drawn - 1e-3)
    response = np.asarray(load["done"], dtype=float) - np.asarray(load["sent"], dtype=float)
    entry_hop = response - _walls(load, 0) - _walls(load, 1)
    call_hop = _walls(load, 1) - api_wall
    assert np.all(entry_hop > 0) and np.all(call_hop > 0)
    works = response - entry_hop - call_hop
    # The query's own cost (a connection's round trip to PostgreSQL) is in the api's work, so
    # it is measured apart: the api's work less its drawn time, whose mean joins the hop.
    query_cost = api_wall - drawn
    sd = math.hypot(0.020, 0.030)
    assert abs(np.mean(works - query_cost) - 0.050) < 4 * sd / math.sqrt(n)
    sim = run_scenario(services.with_hops(scenario, float(np.mean(entry_hop)),
                                          float(np.mean(call_hop + query_cost))), warn=False)[0].to_dict()
    reps = sim["per_replication"]
    rep = report["per_replication"][0]
    checks = {q: one_run_against_replications(rep["response"][q], [r["response"][q] for r in reps])
              for q in ("mean", "p50")}
    assert all(c["within"] for c in checks.values()), checks


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_call_that_times_out_on_every_try_fails_the_request():
    doc = chain(run={"duration": "2s", "warmup": "0s", "seed": 5})
    doc["request"]["phases"][1] = {"call": "api", "timeout": "50ms", "retries": 1}
    doc["services"]["api"]["request"] = {"phases": [{"io": "200ms"}]}
    plan, load, report = _run(doc)
    n = len(plan.drawn["phases"])
    # The caller gives up after 50 ms, tries once more, then answers 500: every request.
    assert list(load["status"]) == [500] * n
    calls, _work = load["services"]["api"]
    assert sorted(calls) == sorted([f"{i}-api0" for i in load["index"]] + [f"{i}-api0.r1" for i in load["index"]])
    rep = report["per_replication"][0]
    assert rep["failed"]["total"] == rep["error_counts"]["call_failed"] == n
    assert rep["error_counts"]["app_timeout"] == 0
    # As the simulation's services.api.calls: 2n tries, each timed out, n retried, n failed.
    api = rep["services"]["api"]["calls"]
    assert (api["sent"], api["timed_out"], api["retried"], api["failed"], api["answered"]) == (2 * n, 2 * n, n, n, 0)


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_chain_measured_against_its_paired_simulation():
    """Once the engine simulates calls (docs/services.md): the chain's replication 0 (which drew
    the entry's requests sent) against the real run, within 4 standard errors plus the stack's
    overhead measured per request. The api's work is drawn apart on each side (the engine's
    calls' draws and the testbed's own, :mod:`dynosim.testbed.services`), and the engine may
    draw the entry's phases of a scenario with calls from streams of its own: the two sides
    are taken as independent, the bound 4 × √2 × the sd of a request's work over √n.
    The overhead measured holds the real queue waits too, which the simulated mean has: at
    this load (1.1 of the entry's 4 workers, Erlang C) they average under 1 ms, well inside
    the bound (19 ms at 120 requests)."""
    scenario = Scenario(chain())
    if scenario.describe().get("refused"):
        pytest.skip("the engine does not simulate calls yet: " + scenario.describe()["refused"]["message"])
    from dynosim.api import run as run_scenario

    sim = run_scenario(scenario, warn=False)[0].to_dict()["per_replication"][0]
    plan, load, report = _run(chain())
    n = len(plan.drawn["phases"])
    assert sim["requests"] == n and list(load["status"]) == [200] * n
    calls, api_work = load["services"]["api"]
    index = list(load["index"])
    response = np.asarray(load["done"], dtype=float) - np.asarray(load["sent"], dtype=float)
    api_wall = np.array([api_work[f"{i}-api0"]["end"] - api_work[f"{i}-api0"]["start"] for i in index])
    overhead = float(np.mean(response - _walls(load, 0) - api_wall))
    bound = 4 * math.sqrt(2) * math.hypot(0.020, 0.030) / math.sqrt(n)
    assert abs(np.mean(response) - overhead - sim["response"]["mean"]) < bound
    if "services" in sim:
        ta = np.array([calls[f"{i}-api0"]["ta"] for i in index])
        api_over = float(np.mean(ta - api_wall))
        assert abs(np.mean(ta) - api_over - sim["services"]["api"]["response"]["mean"]) \
            < 4 * math.sqrt(2) * 0.030 / math.sqrt(n)


@pytest.mark.needs("haproxy", "gunicorn")
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_nothing_of_a_services_run_outlives_it_stopped(tmp_path, how):
    from test_testbed import stop_and_look

    toml = tmp_path / "long-chain.toml"
    toml.write_text(toml_document(chain(run={"duration": "60s", "warmup": "0s", "seed": 1})))
    # Both HAProxy processes up (the api's, then the entry's): every dyno runs, the load is on.
    stop_and_look(str(toml), how, lambda seen: sum("haproxy -db" in line for line in seen.values()) >= 2)
