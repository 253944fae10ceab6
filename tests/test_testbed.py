"""The real testbed (docs/testbed.md): its parts on their own, then short real runs of HAProxy,
gunicorn and PostgreSQL on loopback, then that nothing outlives a run however it stops.

The real runs name the components they use (``@pytest.mark.needs``, tests/conftest.py);
``make testbed-deps`` installs them and CI runs it first. Outside CI a missing component skips
those tests; in CI (``CI`` set) it fails them, so the
suite cannot pass there without having run them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Set

import numpy as np
import pytest

from conftest import assert_one_line_error, child_process, run_cli, run_process
from fuzzing import toml_document
from dynosim import Scenario
from dynosim.errors import DynosimError, ScenarioError
from dynosim.testbed import app, measure
from dynosim.testbed.dynos import read_work
from dynosim.testbed.plan import make_plan
from dynosim.testbed.router import RouterPlan, read_log
from dynosim.testbed.tools import RUBY_TOOLS, tools

#: Every component missing (``--check``).
MISSING_ALL = [t.name for t in tools() if not t.present]


def io_scenario(**extra: object) -> Dict[str, object]:
    doc: Dict[str, object] = {
        "name": "testbed-io",
        "arrivals": {"process": "poisson", "rate": "20/s"},
        "service": {"distribution": "lognormal", "median": "20ms", "sigma": 0.5},
        "fleet": {"dynos": 2},
        "router": {"policy": "random"},
        "run": {"duration": "6s", "warmup": "1s", "replications": 4, "seed": 7},
    }
    doc.update(extra)
    if "request" in extra:
        del doc["service"]  # a scenario has [service] or [request]
    return doc


# --- the parts ---------------------------------------------------------------------------------


def test_phases_header_round_trips_through_the_app_parser():
    s = Scenario(io_scenario(request={"phases": [
        {"cpu": {"distribution": "exponential", "mean": "2ms"}},
        {"use": "db", "time": "5ms"}, {"io": {"distribution": "exponential", "mean": "3ms"}}]},
        resources={"db": {"servers": 100, "pool": {"size": 1}}}))
    plan = make_plan(s)
    requests = plan.requests()
    assert len(requests) == len(plan.drawn["phases"]) > 50
    for i, (at, path, headers) in enumerate(requests):
        assert headers["X-Dynosim-Id"] == str(i)
        parsed = app.parse_phases(headers["X-Dynosim-Phases"])
        assert [(k, r) for k, r, _ in parsed] == [("cpu", ""), ("use", "db"), ("io", "")]
        assert np.allclose([x for _, _, x in parsed], plan.drawn["phases"][i], atol=1e-6)
    assert [r[0] for r in requests] == plan.drawn["time"]
    assert plan.resources == {"db": {"pool": 1, "mode": "sleep", "timeout": None, "retries": 0}}


def test_app_parser_refuses_garbage():
    for bad in ("cpu", "cpu:x", "sleep:1", "use=:1", "io:-1", "io:nan"):
        with pytest.raises(ValueError):
            app.parse_phases(bad)


def test_app_performs_cpu_and_io_phases():
    seen = {}

    def start_response(status, headers):
        seen["status"] = status
        seen.update(headers)

    environ = {"HTTP_X_DYNOSIM_PHASES": "cpu:0.02,io:0.03", "HTTP_X_REQUEST_START": "t=1"}
    body = app.app(environ, start_response)
    assert seen["status"] == "200 OK" and body == [b"ok\n"]
    start, end = float(seen["X-Dynosim-Start"]), float(seen["X-Dynosim-End"])
    # The CPU phase used at least its 20 ms of CPU; with the sleep, at least 50 ms passed.
    assert float(seen["X-Dynosim-Cpu"]) >= 0.02
    assert end - start >= 0.05
    assert seen["X-Dynosim-Request-Start"] == "t=1"
    assert int(seen["X-Dynosim-Rss"]) > 1_000_000
    # Each phase's wall time, in order: the CPU phase at least its CPU, the sleep at least 30 ms;
    # the process's CPU time at the end covers the thread's.
    walls = [float(w) for w in seen["X-Dynosim-Phase-Wall"].split(",")]
    assert len(walls) == 2 and walls[0] >= 0.02 and walls[1] >= 0.03 and sum(walls) <= end - start
    assert float(seen["X-Dynosim-Proc-Cpu"]) >= float(seen["X-Dynosim-Cpu"])


def test_queued_means_finding_every_worker_of_its_dyno_taken():
    # Dyno 0 (1 slot): a works 0-1; b arriving at 0.5 finds a in hand and waits until 1; c
    # arriving at 2 finds the dyno idle. (tests/test_testbed_measure.py: whole runs.)
    dyno = np.array([0, 0, 0, 1])
    arrive = np.array([0.0, 0.5, 2.0, 0.5])
    end = np.array([1.0, 1.5, 2.5, 0.7])
    assert measure.in_hand(dyno, arrive, end).tolist() == [0, 1, 0, 0]
    assert measure.max_depth(np.array([0.0, 0.1, 0.2, 1.0]), np.array([0.5, 0.3, 0.25, 2.0])) == 3
    assert measure.max_depth(np.array([0.0, 1.0]), np.array([1.0, 2.0])) == 1  # leaving first


def test_the_stack_costs_come_from_idle_sends_and_gaps_at_the_dyno():
    # Dyno 0: a (sent 0, app 0.001-0.101); b sent 0.05 waits at the dyno, starts 0.102: a gap of
    # 1 ms; c sent 0.06 is held by the router (Tw 40 ms) and starts 0.2: not the worker's gap.
    # Each app runs its drawn time plus 0.1 ms; the client has it 0.5 ms after the app.
    sent = [0.0, 0.05, 0.06]
    start = [0.001, 0.102, 0.2]
    end = [0.1011, 0.1521, 0.2501]
    load = {"sent": sent, "done": [e + 0.0005 for e in end],
            "headers": {"x-dynosim-start": [str(t) for t in start], "x-dynosim-end": [str(t) for t in end],
                        "x-dynosim-dyno": ["0", "0", "0"]}}
    drawn = [0.1, 0.05, 0.05]
    over = measure.overheads(load, 1, drawn, router_wait=[0.0, 0.0, 0.04])
    assert np.isclose(over["to_app_when_idle"], 0.001)
    assert np.isclose(over["in_app"], 0.0001) and np.isclose(over["after_app"], 0.0005)
    assert np.isclose(over["between_requests"], 0.0009)
    # Without the router's times, c's 48 ms wait for the router counts as a worker's gap.
    assert measure.overheads(load, 1, drawn)["between_requests"] > 0.02
    # Without the app's process CPU, the server's CPU is unknown and the overhead is the gap.
    assert over["server_cpu"] is None
    assert measure.stack_costs(over) == {"router.connect": over["to_app_when_idle"], "app.request_cpu": None,
                                         "app.overhead": over["between_requests"]}


def test_a_send_in_the_workers_gap_with_others_waiting_is_not_idle():
    # One worker: a runs 0-1; b (sent 0.5) waits; a gap 1.0-1.001; c is sent at 1.0005, in the
    # gap, while b still waits: nothing runs, but the dyno has b in hand.
    dyno = np.array([0, 0, 0])
    sent = np.array([0.0, 0.5, 1.0005])
    start = np.array([0.0, 1.001, 2.0])
    end = np.array([1.0, 2.0, 2.5])
    assert measure.in_hand_at_send(dyno, sent, end, 1).tolist() == [0, 1, 1]


def test_several_runs_summarise_like_the_simulation():
    # Three runs: the mean with Student's t interval (2 degrees of freedom: t = 4.303).
    got = measure.estimate([1.0, 2.0, 3.0])
    se = 1.0 / np.sqrt(3)
    assert got["mean"] == 2.0 and np.isclose(got["std_error"], se)
    assert np.isclose(got["ci_low"], 2.0 - 4.303 * se) and np.isclose(got["ci_high"], 2.0 + 4.303 * se)
    assert measure.estimate([5.0]) == {"mean": 5.0, "ci_low": None, "ci_high": None, "std_error": None}
    reps = [{"requests": 10, "queue": {"mean": 0.1}, "note": "x"}, {"requests": 12, "queue": {"mean": 0.3}}]
    summary = measure.summary_of(reps)
    assert summary["requests"]["mean"] == 11.0 and np.isclose(summary["queue"]["mean"]["mean"], 0.2)
    assert "note" not in summary


def test_router_log_lines_are_read_by_request_id(tmp_path):
    log = tmp_path / "haproxy.log"
    log.write_text("[NOTICE] starting\n7 0 1 20 21 200 dyno1 0 0 ---- 0\n8 12 -1 -1 13 503 <NOSRV> 3 0 sQ-- 0\n"
                   "9 0 0 300 901 504 dyno0 0 0 sH-- +2\nbroken line\n")
    got = read_log(log)
    assert got["7"] == {"tw": 0.0, "tc": 0.001, "tr": 0.02, "ta": 0.021, "status": 200, "server": "dyno1",
                        "backend_queue": 0, "server_queue": 0, "term": "----", "retries": 0}
    assert got["8"]["tc"] is None and got["8"]["tw"] == 0.012 and got["8"]["term"] == "sQ--"
    # %rc: the retries, "+" when the last one was redispatched.
    assert got["9"]["retries"] == 2
    assert set(got) == {"7", "8", "9"}


def test_the_apps_work_log_is_read_by_request_id(tmp_path):
    # Two workers of dyno 1; request 5 begun and never finished (its worker killed), a line
    # cut short by the kill, a stray line, and request 9 finished.
    (tmp_path / "1-300.log").write_text("s 5 100.5\ns 9 99.0\n")
    (tmp_path / "1-301.log").write_text("e 9 101.25\ngarbage\ns 7 10")
    (tmp_path / "0-400.log").write_text("s 7 10.5\ne 7 11.5\ne 8 12.0\n")
    got = read_work(tmp_path)
    assert got["5"] == {"dyno": 1, "pid": 300, "start": 100.5, "end": None}
    assert got["9"]["start"] == 99.0 and got["9"]["end"] == 101.25 and got["9"]["dyno"] == 1
    assert got["7"]["start"] == 10.5 and got["7"]["dyno"] == 0 or got["7"]["start"] == 10.0
    assert "8" not in got  # an end without a start is not a request the app began


def test_work_the_router_gave_up_on_counts_as_the_dynos(tmp_path):
    """A request answered 504 at 1 s whose app worked 0–3 s: busy, queue-free, wasted 2 s;
    with only its headers (none came back) the dyno would look idle."""
    t0 = 1000.0
    load = {"start": t0, "index": [0, 1], "scheduled": [t0, t0 + 4], "sent": [t0, t0 + 4],
            "done": [t0 + 1, t0 + 4.5], "status": [504, 200], "error": [None, None],
            "headers": {"x-dynosim-start": [None, str(t0 + 4)], "x-dynosim-end": [None, str(t0 + 4.5)],
                        "x-dynosim-dyno": [None, "0"], "x-dynosim-pool-wait": [None, None]}}
    work = {"0": {"dyno": 0, "pid": 1, "start": t0, "end": t0 + 3}, "1": {"dyno": 0, "pid": 1, "start": t0 + 4,
                                                                        "end": t0 + 4.5}}
    kw = dict(dynos=1, slots=1, warmup=0.0, duration=10.0, closed=None, drawn_times=[0.0, 4.0], classes=["a"],
              class_of=[0, 0], resources=[])
    rep = measure.replication(load, {}, work=work, **kw)
    assert rep["error_counts"]["h12"] == 1 and rep["failed"]["total"] == 1
    assert rep["wasted"]["thread_seconds"] == pytest.approx(2.0)
    assert rep["utilisation"]["mean"] == pytest.approx(0.35)
    assert rep["queue"]["mean"] == pytest.approx(0.0)
    assert measure.errored_work(load, work) == {"errors": 1, "finished": 1, "killed": 0, "never_begun": 0}
    blind = measure.replication(load, {}, **kw)
    assert blind["utilisation"]["mean"] == pytest.approx(0.05)
    # Killed: begun, never ended, answered 500 by gunicorn: an app_timeout.
    load["status"][0] = 500
    work["0"]["end"] = None
    killed = measure.replication(load, {}, work=work, **kw)
    assert killed["error_counts"]["app_timeout"] == 1
    assert measure.errored_work(load, work)["killed"] == 1


@pytest.mark.parametrize("policy,line", [("random", "balance random(1)"), ("power_of_d", "balance random(2)"),
                                         ("round_robin", "balance roundrobin"),
                                         ("least_connections", "balance leastconn"),
                                         ("intelligent", "balance leastconn")])
def test_policies_map_to_haproxy(policy, line, tmp_path):
    config = RouterPlan(policy, {}, 2, 60.0).config(18000, [18001, 18002])
    assert line in config
    assert ("maxconn 2" in config) == (policy == "intelligent")
    haproxy = next(t for t in tools() if t.name == "haproxy")
    if haproxy.present:
        path = tmp_path / "haproxy.cfg"
        path.write_text(config)
        checked = run_process([haproxy.path, "-c", "-q", "-f", str(path)], text=True, timeout=60)
        assert checked.returncode == 0, checked.stderr


def test_refusals_come_before_anything_starts():
    with pytest.raises(ScenarioError, match="router.policy.*retry_if_busy.*no HAProxy equivalent"):
        make_plan(Scenario(io_scenario(router={"policy": "retry_if_busy"})))
    with pytest.raises(ScenarioError, match="fleet.dynos"):
        make_plan(Scenario(io_scenario(fleet={"dynos": 500})))
    pooled = io_scenario(request={"phases": [{"use": "db", "time": "5ms"}]},
                         resources={"db": {"servers": 10, "pool": {"size": 2, "per": "dyno"}}})
    with pytest.raises(ScenarioError, match=r"resources\.db\.pool\.per"):
        make_plan(Scenario(pooled))
    with pytest.raises(DynosimError, match="at most"):
        make_plan(Scenario(io_scenario(arrivals={"process": "poisson", "rate": "2000/s"},
                                       run={"duration": "10min", "seed": 1})))


def test_cli_refuses_an_unmappable_policy_in_one_line():
    result = run_cli("testbed", "rapgenius", "--policy", "retry_if_busy", "--duration", "5s")
    assert_one_line_error(result, "router.policy", "retry_if_busy")
    assert_one_line_error(run_cli("testbed", "rapgenius", "--runs", "0"), "--runs")


def test_check_lists_every_component():
    result = run_cli("testbed", "--check")
    for name in ("haproxy", "nginx", "postgres", "gunicorn", "gevent", "psycopg") + RUBY_TOOLS:
        assert name in result.stdout
    assert result.returncode == (1 if MISSING_ALL else 0), result.stdout + result.stderr


# --- real runs ---------------------------------------------------------------------------------


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_short_real_run_sends_the_drawn_requests_and_reports_like_run(tmp_path):
    plan = make_plan(Scenario(io_scenario()))
    out = tmp_path / "out"
    toml = tmp_path / "io.toml"
    toml.write_text(toml_document(io_scenario()))
    result = run_cli("testbed", str(toml), "--policy", "random,intelligent", "--json", "--out", str(out))
    assert result.returncode == 0, result.stderr
    # A normal exit leaves nothing of the testbed running.
    assert not _testbed_processes(), _testbed_processes()
    doc = json.loads(result.stdout)
    assert [r["policy"] for r in doc["results"]] == ["random", "intelligent"]
    in_window = [i for i, t in enumerate(plan.drawn["time"]) if t >= 1.0]
    drawn_service = np.array([sum(plan.drawn["phases"][i]) for i in in_window])
    for r in doc["results"]:
        sim, real = r["simulated"], r["measured"]
        assert real["engine"] == "testbed" and sim["engine"] in ("direct", "events")
        rep = real["per_replication"][0]
        # Every request the simulation's replication 0 saw was sent, and each was served.
        assert rep["requests"] == sim["per_replication"][0]["requests"] == len(in_window)
        assert rep["failed"]["total"] == 0
        assert sorted(metric for metric in r["difference"]) == sorted(set(r["difference"]))
        # The app sleeps at least the drawn time: its mean service time cannot be shorter.
        assert rep["service_mean"] >= drawn_service.mean() - 1e-6
        assert 0 <= rep["queued_fraction"] <= 1 and rep["queue"]["p50"] <= rep["queue"]["p99"]
        assert rep["response"]["mean"] >= rep["queue"]["mean"] + drawn_service.mean() - 1e-6
        assert r["testbed"]["router_log_lines"] == len(plan.drawn["time"])
        assert set(real) >= set(sim) - {"wall_seconds"}
        # What modelling the stack's costs would set: the measured costs, positive, and what the
        # simulation had (none here).
        costs = r["testbed"]["stack_costs"]
        assert costs["router.connect"] == r["testbed"]["overhead"]["to_app_when_idle"] > 0
        assert r["testbed"]["modelled_costs"] == {"router.connect": 0.0, "app.request_cpu": 0.0, "app.overhead": 0.0}
        # The server's CPU per request, from the process CPU each answer reports; not a cost to
        # set for a scenario of [service], whose simulation cannot run it.
        assert 0 < r["testbed"]["overhead"]["server_cpu"] < 0.05 and costs["app.request_cpu"] is None
        assert costs["app.overhead"] == r["testbed"]["overhead"]["between_requests"]
    rows = (out / "requests-random.csv").read_text().splitlines()
    assert len(rows) == 1 + len(plan.drawn["time"])
    assert (out / "cdf.png").stat().st_size > 10_000
    assert json.loads((out / "testbed.json").read_text())["results"][0]["policy"] == "random"


@pytest.mark.needs("haproxy", "gunicorn", "postgres", "psycopg")
def test_a_real_run_with_a_database_pool_and_threads():
    doc = {
        "name": "testbed-db",
        "arrivals": {"process": "poisson", "rate": "15/s"},
        "fleet": {"dynos": 1},
        "app": {"server": "gunicorn", "worker_class": "gthread", "processes": 2, "threads": 3},
        "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": "2ms"}},
                               {"use": "db", "time": {"distribution": "exponential", "mean": "30ms"}}]},
        "resources": {"db": {"servers": 100, "pool": {"size": 1}}},
        "run": {"duration": "5s", "warmup": "0s", "replications": 3, "seed": 3},
    }
    from dynosim.testbed.run import testbed

    result = testbed(Scenario(doc), runs=2)["results"][0]
    assert result["measured"]["replications"] == 2 and len(result["measured"]["per_replication"]) == 2
    assert result["testbed"]["runs"] == 2
    # Run k sent the requests of the simulation's replication k.
    assert [r["requests"] for r in result["measured"]["per_replication"]] == \
        [r["requests"] for r in result["simulated"]["per_replication"][:2]]
    rep = result["measured"]["per_replication"][0]
    assert rep["failed"]["total"] == 0 and rep["requests"] > 30
    # One connection per process and three threads each: requests wait for the pool, and
    # the app measures that wait.
    assert rep["resources"]["db"]["pool_wait"]["max"] > 0
    assert result["testbed"]["resources"]["db"]["mode"] == "sleep"


@pytest.mark.needs("haproxy", "gunicorn")
def test_calibrate_measures_the_stacks_costs_and_simulates_with_them(tmp_path):
    doc = io_scenario(app={"server": "gunicorn", "worker_class": "sync", "processes": 2},
                      request={"phases": [{"cpu": "3ms"}, {"io": "10ms"}]},
                      fleet={"dynos": 1}, run={"duration": "3s", "warmup": "0s", "replications": 2, "seed": 5})
    toml = tmp_path / "calibrate.toml"
    toml.write_text(toml_document(doc))
    result = run_cli("testbed", str(toml), "--calibrate", "--json")
    assert result.returncode == 0, result.stderr
    assert not _testbed_processes(), _testbed_processes()
    out = json.loads(result.stdout)
    calibration = out["calibration"]
    measured = calibration["measured"]
    # Each cost measured, and of a sane size for HAProxy and gunicorn on loopback.
    assert 0 < measured["router.connect"] < 0.05
    assert 0 < measured["app.request_cpu"] < 0.05
    assert measured["app.overhead"] is not None and 0 <= measured["app.overhead"] < 0.05
    assert measured["fleet.cpu_jitter"] > 0
    runs = calibration["runs"]
    assert runs["idle"]["clients"] == 1 and runs["busy"]["clients"] == 4
    assert runs["idle"]["failed"] == runs["busy"]["failed"] == 0
    assert runs["idle"]["server_cpu"]["requests"] >= 250 and runs["idle"]["phases"]["cpu"]["phases"] >= 250
    assert calibration["set_lines"] == [f"--set {k}={v}" for k, v in calibration["set"].items()]
    assert set(calibration["set"]) == set(measured)
    # The simulation had them; the real side ran as it was (its own costs measured again).
    result0 = out["results"][0]
    modelled = result0["testbed"]["modelled_costs"]
    for key in ("router.connect", "app.request_cpu", "app.overhead"):
        assert modelled[key] == pytest.approx(measured[key])
    assert result0["testbed"]["overhead"]["server_cpu"] > 0
    text = run_cli("testbed", "--calibrate", "--check")  # --check alone still only lists
    assert "haproxy" in text.stdout


# --- nothing outlives a run --------------------------------------------------------------------


def _descendants(pid: int) -> Set[int]:
    children: Dict[int, List[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out: Set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _testbed_processes() -> Dict[int, str]:
    """Processes still running that the testbed starts: its app's workers, its HAProxy and
    PostgreSQL (found by their command lines, which name the testbed's app or directory)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _alive(int(entry.name)):
            line = _cmdline(int(entry.name))
            if "dynosim.testbed.app" in line or "dynosim-testbed-" in line:
                out[int(entry.name)] = line
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.needs("haproxy", "gunicorn", "postgres", "psycopg")
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_nothing_outlives_a_stopped_run(tmp_path, how):
    doc = io_scenario(run={"duration": "60s", "warmup": "0s", "replications": 1, "seed": 1},
                      request={"phases": [{"use": "db", "time": "10ms"}]},
                      resources={"db": {"servers": 100, "pool": {"size": 1}}})
    toml = tmp_path / "long.toml"
    toml.write_text(toml_document(doc))
    # Once the HAProxy that routes runs (`haproxy -db -f ...`, not the version or configuration
    # checks before it), PostgreSQL and the dynos are up and the load is on.
    stop_and_look(str(toml), how, lambda seen: any("haproxy -db" in line for line in seen.values()),
                  expect=("gunicorn", "postgres"))


def stop_and_look(scenario: str, how: str, started, expect=("gunicorn",), settle: float = 0.5) -> None:
    """Runs ``dynosim testbed SCENARIO``, stops it with signal `how` once `started(seen)` holds
    for the descendants seen so far (pid -> command line) and `settle` s more have passed,
    then checks that every descendant it ever had is gone, and the exit code."""
    seen: Dict[int, str] = {}  # every descendant seen, with its command line

    def look() -> None:
        # Each living descendant's command line as it is now: a process seen while it execs
        # has none yet, and nginx's workers take their title ("nginx: worker process") only
        # after they fork from the master, whose line they show until then.
        for p in _descendants(proc.pid):
            line = _cmdline(p)
            if line.strip() or p not in seen:
                seen[p] = line

    with child_process([sys.executable, "-m", "dynosim", "testbed", scenario], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE) as proc:
        try:
            deadline = time.monotonic() + 60 + settle
            while time.monotonic() < deadline:
                look()
                if started(seen):
                    break
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.1)
            else:
                pytest.fail("the testbed did not reach the point to stop it within 60 s")
            settled = time.monotonic() + settle
            while time.monotonic() < settled:
                look()
                time.sleep(0.1)
            names = " ".join(seen.values())
            assert all(name in names for name in expect), names
            proc.send_signal(getattr(signal, how))  # SIGINT at its default in the child: child_process
            proc.wait(timeout=60)
            # Read before the block ends: child_process closes the pipes then.
            err = proc.stderr.read().decode() if proc.stderr else ""
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and any(_alive(p) for p in seen):
                time.sleep(0.1)
            left = {p: _cmdline(p) for p in seen if _alive(p)}
            assert not left, f"left running after {how}: {left}"
        finally:  # whatever failed, nothing the test started keeps running (the same processes only)
            groups = set()
            for p, line in seen.items():
                if _alive(p) and _cmdline(p) == line:
                    with contextlib.suppress(OSError):
                        groups.add(os.getpgid(p))
                        os.kill(p, signal.SIGKILL)
            # And their groups: what they forked after the last look (nginx's workers, forked by
            # a master killed here, would outlive it), never this process's own group.
            for group in groups - {os.getpgrp()}:
                with contextlib.suppress(OSError):
                    os.killpg(group, signal.SIGKILL)
    if how != "SIGKILL":
        assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[how]
        assert "Traceback" not in err


def test_the_scenarios_timeouts_become_haproxys_and_gunicorns():
    doc = io_scenario()
    doc["router"] = {"policy": "intelligent", "timeout": "300ms", "queue_timeout": "2s"}
    doc["app"] = {"server": "gunicorn", "processes": 2, "timeout": "1.5s"}
    plan = make_plan(Scenario(doc))
    config = plan.router.config(9000, [9001])
    assert "timeout server 300ms" in config and "timeout queue 2000ms" in config
    # Whole seconds for gunicorn, and a warning that says so.
    argv = plan.dynos.argv(9001)
    assert argv[argv.index("--timeout") + 1] == "2"
    assert any("whole seconds" in w for w in plan.warnings)
    # Left out, the router's timeout is Heroku's 30 s, as in the simulation.
    plain = make_plan(Scenario(io_scenario()))
    assert "timeout server 30000ms" in plain.router.config(9000, [9001])
    assert RouterPlan("random", {}, 1, timeout=10.0).config(9000, [9001]).count("timeout server 10000ms") == 1
    # gunicorn's --timeout N kills N to N + 1 s into a request: uniform(N, N + 1) is that.
    doc["app"]["timeout"] = {"distribution": "uniform", "min": "1s", "max": "2s"}
    checked = make_plan(Scenario(doc))
    argv = checked.dynos.argv(9001)
    assert argv[argv.index("--timeout") + 1] == "1"
    assert not any("gunicorn" in w and "timeout" in w for w in checked.warnings)
    # The client's timeout: the load generator's, and HAProxy drops what it holds for a client
    # that has gone.
    client = make_plan(Scenario(io_scenario(arrivals={"process": "poisson", "rate": "20/s", "timeout": "5s"})))
    assert client.request_timeout == 5.0
    assert "option abortonclose" in client.router.config(9000, [9001])
    assert "abortonclose" not in plain.router.config(9000, [9001])
    # A backlog of K: Linux's accept queue holds one more than listen's backlog, so K - 1;
    # HAProxy finds a full one by its connect timeout (router.retry_delay) and redispatches.
    backlogged = make_plan(Scenario(io_scenario(app={"backlog": 3},
                                                router={"policy": "random", "retries": 4, "retry_delay": "50ms"})))
    argv = backlogged.dynos.argv(9001)
    assert argv[argv.index("--backlog") + 1] == "2"
    config = backlogged.router.config(9000, [9001])
    assert "timeout connect 50ms" in config and "retries 4" in config and "option redispatch 1" in config
    assert "timeout connect 5s" in plain.router.config(9000, [9001])
    instant = make_plan(Scenario(io_scenario(app={"backlog": 3})))
    assert "timeout connect 10ms" in instant.router.config(9000, [9001])
    assert any("retry_delay" in w for w in instant.warnings)
    for key, value in (("router.timeout", {"distribution": "exponential", "mean": "1s"}),
                       ("arrivals.timeout", {"distribution": "exponential", "mean": "1s"}),
                       ("app.timeout", {"distribution": "uniform", "min": "1.5s", "max": "2.5s"}),
                       ("router.max_in_flight", 10),
                       ("router.view", {"update": "periodic", "interval": "1s"}),
                       # The feedback loops, the simulation's only for now (docs/feedback.md); a
                       # fixed limit runs (tests/test_testbed_limits.py), an adaptive one not.
                       ("router.retry_budget", {"percent": 20}),
                       ("router.concurrency_limit", {"algorithm": "aimd"}),
                       ("app.concurrency_limit", {"algorithm": "gradient2"})):
        bad = Scenario(io_scenario()).with_overrides({key: value})
        with pytest.raises(DynosimError, match=key.replace(".", r"\.")):
            make_plan(bad)
    # The clients' breaker and the app's service_timeout run (tests/test_testbed_defences.py).
    ran = make_plan(Scenario(io_scenario()).with_overrides({"arrivals.breaker": {"failure_rate": 25},
                                                            "app.service_timeout": "5s"}))
    assert ran.breaker and ran.dynos.service_timeout == 5.0
    assert not make_plan(Scenario(io_scenario())).breaker
    # Under Puma and Unicorn the service timeout is Rack::Timeout's, a dependency's timeout
    # and the app's retries of its query app.ru's (tests/test_testbed_defences.py,
    # tests/test_testbed_retries.py): planned as under gunicorn, Rack::Timeout needed.
    from dynosim.testbed.tools import needed_tools

    phases = {"phases": [{"use": "db", "time": "5ms"}]}
    for server in ("puma", "unicorn"):
        ruby = make_plan(Scenario(io_scenario(app={"server": server}, request={"phases": [{"io": "10ms"}]}))
                         .with_overrides({"app.service_timeout": "5s"}))
        assert ruby.dynos.service_timeout == 5.0 and "ruby-rack-timeout" in needed_tools([ruby])
        assert not any("service_timeout" in w for w in ruby.warnings)
        ran = make_plan(Scenario(io_scenario(app={"server": server}, request=phases,
                                             resources={"db": {"servers": 100, "timeout": "2s", "retries": 2}})))
        assert ran.resources["db"]["timeout"] == 2.0 and ran.resources["db"]["retries"] == 2
        assert "ruby-rack-timeout" not in needed_tools([ran]) and "ruby-pg" in needed_tools([ran])
    ran = make_plan(Scenario(io_scenario(request=phases, resources={"db": {"servers": 100, "timeout": "2s",
                                                                           "retries": 2}})))
    assert ran.resources["db"]["timeout"] == 2.0 and ran.resources["db"]["retries"] == 2


def run_one_policy(tmp_path: Path, name: str, doc: Dict[str, object]) -> tuple:
    """`dynosim testbed NAME.toml --json` for a scenario of one policy: its result, the measured
    replication and the simulation's paired one."""
    toml = tmp_path / f"{name}.toml"
    toml.write_text(toml_document(doc))
    result = run_cli("testbed", str(toml), "--json")
    assert result.returncode == 0, result.stderr
    (r,) = json.loads(result.stdout)["results"]
    return r, r["measured"]["per_replication"][0], r["simulated"]["per_replication"][0]


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_real_router_timeout_answers_504s_counted_as_h12(tmp_path):
    """Every request takes 600 ms at a dyno whose router gives up after 300 ms: every one is an
    H12 in the simulation and a 504 from the real HAProxy."""
    doc = io_scenario()
    doc["service"] = {"distribution": "constant", "value": "600ms"}
    doc["arrivals"] = {"process": "poisson", "rate": "2/s"}
    doc["fleet"] = {"dynos": 2}
    doc["router"] = {"policy": "random", "timeout": "300ms"}
    r, real, sim = run_one_policy(tmp_path, "h12", doc)
    assert real["requests"] > 0
    assert sim["errors"]["h12"] == 1.0
    assert real["error_counts"]["h12"] == real["requests"] == real["error_counts"]["total"]
    assert real["response"]["max"] < 0.6
    # The app's work log shows the dynos worked on: every 504'd request ran to its end, each
    # wasting from the 504 (or its start, if it waited longer at its dyno) to its end: at least
    # the 300 ms after the 504 (less the stack's few ms), at most its whole 600 ms.
    assert r["testbed"]["errored_work"]["finished"] == r["testbed"]["errored_work"]["errors"] >= real["requests"]
    per_request = real["wasted"]["thread_seconds"] / real["requests"]
    assert 0.25 < per_request <= 0.6, per_request
    assert real["utilisation"]["mean"] > 0


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_real_full_backlog_is_retried_then_answered_h13(tmp_path):
    """One single-worker dyno with a backlog of 1, 1 s requests at 4/s, no retries: HAProxy
    finds the backlog full by its 20 ms connect timeout and answers 503 sC, an H13, as the
    simulation's dyno refuses; the refused requests never reach the app."""
    doc = io_scenario(arrivals={"process": "poisson", "rate": "4/s"}, fleet={"dynos": 1},
                      service={"distribution": "constant", "value": "1s"}, app={"backlog": 1},
                      router={"policy": "random", "retries": 0, "retry_delay": "20ms"},
                      run={"duration": "3s", "warmup": "0s", "replications": 2, "seed": 3})
    r, real, sim = run_one_policy(tmp_path, "backlog", doc)
    assert sim["error_counts"]["h13"] > 0 and real["error_counts"]["h13"] > 0, (sim["error_counts"], real)
    assert real["error_counts"]["total"] == real["error_counts"]["h13"]
    assert r["testbed"]["errored_work"]["never_begun"] == real["error_counts"]["h13"]
    # At most one in service and one waiting: the rest refused.
    assert real["requests"] - real["error_counts"]["h13"] <= sim["requests"] - sim["error_counts"]["h13"] + 1


@pytest.mark.needs("haproxy", "gunicorn")
def test_real_worker_and_client_timeouts_are_counted(tmp_path):
    """gunicorn's --timeout kills a worker on a 2.5 s request (a 500 or 502, app_timeout: the
    app began it and never finished); the load generator's own timeout gives up on a 600 ms
    request at 300 ms (client_timeout) while the app works on to its end."""
    killed = io_scenario(arrivals={"process": "poisson", "rate": "1/s"}, fleet={"dynos": 1},
                         request={"phases": [{"io": "2500ms"}]},
                         app={"server": "gunicorn", "processes": 3,
                              "timeout": {"distribution": "uniform", "min": "1s", "max": "2s"}},
                         run={"duration": "3s", "warmup": "0s", "replications": 2, "seed": 3})
    gone = io_scenario(arrivals={"process": "poisson", "rate": "2/s", "timeout": "300ms"},
                       service={"distribution": "constant", "value": "600ms"},
                       run={"duration": "3s", "warmup": "0s", "replications": 2, "seed": 4})
    for name, doc, kind, fate in (("killed", killed, "app_timeout", "killed"),
                                  ("gone", gone, "client_timeout", "finished")):
        r, real, sim = run_one_policy(tmp_path, name, doc)
        assert real["requests"] > 0, name
        assert sim["errors"][kind] == 1.0, name
        assert real["error_counts"][kind] == real["requests"] == real["error_counts"]["total"], (name, real)
        assert r["testbed"]["errored_work"][fate] == real["requests"], (name, r["testbed"]["errored_work"])
