"""The testbed's autoscaled fleet (issue #24, docs/testbed.md "An autoscaled fleet"): the
dynos' state machine with fakes, HAProxy's runtime API (its commands, and a real HAProxy
taking them), the metrics the rule is fed, a scenario's refusals, and one short real run of
an autoscaled fleet.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from conftest import assert_one_line_error, child_process, run_cli
from fuzzing import toml_document
from test_testbed import _descendants, stop_and_look
from dynosim import Scenario
from dynosim.errors import ScenarioError
from dynosim.testbed import fleet as fl
from dynosim.testbed.plan import make_plan
from dynosim.testbed.procs import Supervisor, free_ports
from dynosim.testbed.router import Router, RouterPlan


def plan(initial: int = 1, high: int = 3, boot: float = 5.0, grace: float = 10.0) -> fl.FleetPlan:
    return fl.FleetPlan(initial=initial, table={}, bounds=(1, high), interval=10.0, metric=None,
                        boot_time=boot, boot_timeout=60.0, stop_delay=1.0, shutdown_grace=grace)


class Fakes:
    """Processes and HAProxy as the fleet sees them: which are ready, which have ended, and
    every command and signal."""

    def __init__(self) -> None:
        self.commands: List[Tuple[int, str]] = []
        self.signals: List[Tuple[int, int]] = []
        self.started: List[int] = []
        self.killed: List[int] = []
        self.ready: set = set()
        self.ended: set = set()

    def fleet(self, p: fl.FleetPlan) -> fl.Fleet:
        return fl.Fleet(p, list(range(9000, 9000 + p.servers)),
                        set_state=lambda i, s: self.commands.append((i, s)),
                        start=lambda d: self.started.append(d.index) or f"proc{d.index}",
                        ready=lambda d: d.index in self.ready, signal_dyno=lambda d, s: self.signals.append((d.index, s)),
                        exited=lambda d: d.index in self.ended, kill=lambda d: self.killed.append(d.index))


def three_up(fakes: Fakes, p: fl.FleetPlan) -> fl.Fleet:
    """A fleet of three dynos up (ready at 0 s, booted by 5 s)."""
    f = fakes.fleet(p)
    f.scale_to(3, 0.0)
    fakes.ready |= {0, 1, 2}
    f.tick(0.0)
    f.tick(5.0)
    assert f.up == 3
    return f


def states(f: fl.Fleet) -> List[str]:
    return [d.state for d in f.dynos]


# --- the state machine -------------------------------------------------------------------------


def test_a_dyno_is_up_once_ready_and_booted_and_not_before():
    fakes = Fakes()
    f = fakes.fleet(plan(boot=5.0))
    assert len(f.dynos) == 6  # max twice over: as many draining as up
    f.scale_to(3, 10.0)  # booted at 15 s, if the real start is done by then
    assert fakes.started == [0, 1, 2] and states(f)[:3] == ["booting"] * 3
    assert (f.size, f.up) == (3, 0)
    f.tick(11.0)  # not ready: still booting, whatever the time
    fakes.ready |= {0, 1}
    f.tick(12.0)  # ready at 12 s: up at 15 s, the boot time counting from the decision
    f.tick(14.9)
    assert f.up == 0 and fakes.commands == []
    f.tick(15.0)
    assert states(f)[:3] == ["up", "up", "booting"]
    assert fakes.commands == [(0, "ready"), (1, "ready")]
    assert [(d.ready, d.up_at) for d in f.dynos[:2]] == [(12.0, 15.0)] * 2
    assert (f.size, f.up) == (3, 2)
    # A real start longer than the boot time is the boot: up once ready.
    f.tick(16.0)
    fakes.ready.add(2)
    f.tick(16.5)
    assert f.dynos[2].state == "up" and f.dynos[2].up_at == 16.5


def test_a_scale_down_drains_the_highest_numbered_then_sigterm_then_maint():
    fakes = Fakes()
    f = three_up(fakes, plan(grace=10.0))
    fakes.commands.clear()
    f.scale_to(1, 20.0)
    assert states(f)[:3] == ["up", "draining", "draining"]
    assert fakes.commands == [(2, "drain"), (1, "drain")]
    assert (f.size, f.up) == (1, 1)
    f.tick(20.9)
    assert fakes.signals == []  # marked down; SIGTERM a second later
    f.tick(21.0)
    assert sorted(fakes.signals) == [(1, signal.SIGTERM), (2, signal.SIGTERM)]
    fakes.ended.add(1)  # dyno 1 finished its requests; dyno 2 does not
    f.tick(25.0)
    assert states(f)[:3] == ["up", "off", "draining"] and fakes.killed == [1]
    f.tick(30.9)
    assert f.dynos[2].state == "draining"
    f.tick(31.0)  # the grace is over: SIGKILL
    assert states(f)[:3] == ["up", "off", "off"] and fakes.killed == [1, 2] and f.killed == 1
    assert fakes.commands[-2:] == [(1, "maint"), (2, "maint")]
    assert [e.note for e in f.events if e.state == "off"] == ["", "SIGKILL"]


def test_a_scale_up_while_dynos_drain_takes_other_servers():
    fakes = Fakes()
    f = three_up(fakes, plan(high=3))
    f.scale_to(1, 10.0)
    f.scale_to(3, 10.5)  # dynos 1 and 2 still draining
    assert fakes.started == [0, 1, 2, 3, 4]
    assert states(f) == ["up", "draining", "draining", "booting", "booting", "off"]
    assert (f.size, f.up) == (3, 1)
    # Above max is clamped: nothing more starts.
    f.scale_to(5, 11.0)
    assert fakes.started == [0, 1, 2, 3, 4]


def test_a_booting_dyno_can_be_drained_and_one_that_never_starts_times_out():
    fakes = Fakes()
    f = fakes.fleet(plan())
    f.scale_to(2, 0.0)
    f.scale_to(1, 1.0)  # dyno 1 never served: no drain command to HAProxy
    assert states(f)[:2] == ["booting", "draining"] and fakes.commands == []
    f.tick(61.0)  # dyno 0 never got ready within fleet.boot_timeout
    assert f.dynos[0].state == "draining" and "did not start within fleet.boot_timeout" in f.warnings[0]
    fakes.ended.add(1)
    f.tick(61.1)
    assert f.dynos[1].state == "off"


def test_the_series_counts_each_state_every_second_and_the_changes_skip_the_end():
    fakes = Fakes()
    f = fakes.fleet(plan(boot=2.0))
    f.scale_to(1, 0.0)
    fakes.ready.add(0)
    f.tick(0.0)
    f.tick(2.0)
    f.scale_to(2, 3.0)
    fakes.ready.add(1)
    f.tick(3.5)
    f.tick(5.5)
    f.scale_to(1, 7.0)
    f.stop_all(9.0)
    rows = f.series(8.0)
    assert [(r["dynos_booting"], r["dynos_up"], r["dynos_draining"]) for r in rows] == [
        (1, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (1, 1, 0), (1, 1, 0), (0, 2, 0), (0, 1, 1), (0, 1, 1)]
    assert fl.size_changes(f.events) == [(0.0, 1), (3.0, 2), (7.0, 1)]


# --- HAProxy's runtime API ---------------------------------------------------------------------


def test_runtime_api_commands():
    assert fl.state_command(3, "ready") == "set server dynos/dyno3 state ready"
    assert fl.state_command(0, "drain") == "set server dynos/dyno0 state drain"
    assert fl.state_command(12, "maint") == "set server dynos/dyno12 state maint"
    with pytest.raises(ValueError):
        fl.state_command(1, "up")


SHOW = ("1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight "
        "srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state "
        "srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl "
        "srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n"
        "3 dynos 1 dyno0 127.0.0.1 2 8 256 256 0 1 0 2 0 0 0 0 - 43999 - 0 0 - - 0\n"
        "3 dynos 2 dyno1 127.0.0.1 2 4 256 256 0 1 0 0 8 0 0 0 - 37697 - 0 0 - - 0\n"
        "3 dynos 3 dyno2 127.0.0.1 0 5 256 256 0 1 0 0 8 0 0 0 - 42207 - 0 0 - - 0\n\n")


def test_servers_state_is_read_by_column_name():
    # HAProxy 2.x's answer after `ready` on dyno1 (disabled at start) and `drain` on dyno0.
    got = fl.parse_servers_state(SHOW)
    assert got == {"dyno0": {"operational": 2, "admin": 8, "weight": 256},
                   "dyno1": {"operational": 2, "admin": 4, "weight": 256},
                   "dyno2": {"operational": 0, "admin": 5, "weight": 256}}


def serve_unix(path: Path, answers: Dict[str, str], seen: List[str]) -> socket.socket:
    """A one-command-per-connection server on a Unix socket, as HAProxy's runtime API."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                line = conn.makefile("r").readline().rstrip("\n")
                seen.append(line)
                conn.sendall(answers.get(line, "").encode())

    threading.Thread(target=loop, daemon=True).start()
    return server


def test_runtime_api_sends_one_command_and_reports_a_refusal(tmp_path):
    seen: List[str] = []
    server = serve_unix(tmp_path / "api.sock", {"set server dynos/dyno9 state ready": "No such server.\n\n"}, seen)
    try:
        api = fl.RuntimeApi(tmp_path / "api.sock")
        api.set_state(1, "drain")
        with pytest.raises(fl.TestbedError, match="HAProxy refused 'set server dynos/dyno9 state ready': "
                                                  "No such server."):
            api.set_state(9, "ready")
        assert seen == ["set server dynos/dyno1 state drain", "set server dynos/dyno9 state ready"]
        assert [c for _, c in api.sent] == seen
    finally:
        server.close()
    with pytest.raises(fl.TestbedError, match="runtime API"):
        fl.RuntimeApi(tmp_path / "absent.sock").command("show info")


@pytest.mark.needs("haproxy")
def test_a_real_haproxy_takes_the_fleets_commands():
    with Supervisor() as sup:
        ports = free_ports(5)
        sock = sup.workdir / "haproxy.sock"
        router_plan = RouterPlan("random", {}, 1, 30.0, runtime_socket=sock, disabled=frozenset({1, 2, 3}))
        Router(sup, router_plan, ports[0], ports[1:])  # its configuration passes `haproxy -c` first
        api = fl.RuntimeApi(sock)
        before = api.servers()
        assert [before[f"dyno{i}"]["operational"] for i in range(4)] == [2, 0, 0, 0]
        assert [bool(before[f"dyno{i}"]["admin"] & fl.MAINT) for i in range(4)] == [False, True, True, True]
        api.set_state(1, "ready")
        api.set_state(0, "drain")
        api.set_state(2, "ready")
        api.set_state(2, "maint")
        after = api.servers()
        assert after["dyno0"]["admin"] & fl.DRAIN and after["dyno0"]["operational"] == 2
        assert not after["dyno1"]["admin"] & (fl.MAINT | fl.DRAIN) and after["dyno1"]["operational"] == 2
        assert after["dyno2"]["admin"] & fl.MAINT and after["dyno2"]["operational"] == 0
        with pytest.raises(fl.TestbedError, match="No such server"):
            api.set_state(7, "ready")


# --- what the rule is fed ------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.values: List[Tuple[float, float]] = []
        self.totals: List[Tuple[float, float, int]] = []

    def record(self, t: float, value: float) -> None:
        self.values.append((t, value))

    def record_total(self, t: float, total: float, count: int) -> None:
        self.totals.append((t, total, count))


def test_queue_times_are_the_apps_start_less_the_routers_stamp():
    rule = Recorder()
    m = fl.Metrics("queue_time", t0=100.0, slots=2)
    m.feed([(0, "q", "1", 100.5), (0, "s", "1", 100.75), (1, "q", "2", 101.0), (1, "s", "2", 101.0),
            (0, "s", "3", 102.0)], rule)  # request 3 carried no stamp: not a queue time
    assert rule.values == [(0.75, 0.25), (1.0, 0.0)]
    m.report(5.0, 10.0, [0, 1], rule)
    assert rule.totals == []  # a queue-time rule is not fed reports


def test_utilisation_is_the_serving_dynos_busy_workers_since_the_last_report():
    rule = Recorder()
    m = fl.Metrics("utilisation", t0=0.0, slots=2)
    # Dyno 0: one request 1-3 s, one 4-7 s (in hand at the report at 5 s). Dyno 1: 0-5 s and
    # 2-5 s on its two workers. As the engine: busy worker-seconds over slots x serving
    # dyno-seconds (2 dynos for 5 s), recorded as that fraction x the 2 dynos serving.
    m.feed([(0, "s", "a", 1.0), (0, "e", "a", 3.0), (0, "s", "b", 4.0), (1, "s", "c", 0.0), (1, "s", "d", 2.0),
            (1, "e", "d", 4.999)], rule)
    m.report(5.0, 10.0, [0, 1], rule)
    busy = 2.0 + 1.0 + 5.0 + 2.999
    # Recorded at the start of the period it covers, 0 s.
    assert rule.totals == [(0.0, pytest.approx(busy / (2 * 10.0) * 2), 2)]
    # Next report, at 15 s: b ends at 7 (2 s in it), c is still in hand all 10 s; a third dyno
    # served for the last 5 s: 25 dyno-seconds, 3 dynos.
    m.feed([(0, "e", "b", 7.0)], rule)
    m.report(15.0, 25.0, [0, 1, 2], rule)
    assert rule.totals[1] == (5.0, pytest.approx((2.0 + 10.0) / (2 * 25.0) * 3), 3)


def test_serving_seconds_integrate_the_up_and_draining_dynos():
    fakes = Fakes()
    f = fakes.fleet(plan(boot=2.0))
    f.scale_to(1, 0.0)
    fakes.ready.add(0)
    f.tick(0.0)
    f.tick(2.0)  # dyno 0 serves from 2 s
    f.scale_to(3, 4.0)  # 1 and 2 boot: not serving
    f.scale_to(2, 5.0)  # 2 drains before it was ever up: not serving
    fakes.ready.add(1)
    f.tick(5.0)
    f.tick(7.0)  # dyno 1 serves from 7 s
    f.scale_to(1, 9.0)  # dyno 1 drains: still serving until off
    fakes.ended.add(1)
    f.tick(10.0)  # SIGTERM
    f.tick(11.0)  # off
    assert [d.index for d in f.serving()] == [0]
    assert f.serving_seconds(0.0, 12.0) == pytest.approx(10.0 + 4.0)
    assert f.serving_seconds(6.0, 8.0) == pytest.approx(2.0 + 1.0)


def test_response_times_are_haproxys_ta_when_it_logs_the_answer():
    rule = Recorder()
    m = fl.Metrics("response_time", t0=0.0, slots=2)
    m.feed_router([b"12 0 0 250 251 200 dyno1 0 0 -- 0", b"- 0 0 -1 3 400 <NOSRV> 0 0 CR-- 0",
                   b"13 0 0 -1 30000 504 dyno0 0 0 sH-- 0", b"not a request line"], 7.5, rule)
    assert rule.values == [(7.5, 0.251), (7.5, 30.0)]  # a 504 counts as the router logs it


def test_cpu_is_the_serving_dynos_cpu_seconds_over_cores_since_the_last_report():
    rule = Recorder()
    used = {0: 1.0, 1: 4.0}
    m = fl.Metrics("cpu", t0=0.0, slots=2, cores=2, cpu=lambda d: used.get(d))
    m.report(5.0, 10.0, [0, 1], rule)  # first readings: nothing used since them
    assert rule.totals == [(0.0, 0.0, 2)]
    used.update({0: 3.5, 1: 9.0})
    m.report(10.0, 10.0, [0, 1], rule)
    assert rule.totals[1] == (5.0, pytest.approx((2.5 + 5.0) / (2 * 10.0) * 2), 2)


def test_a_dynos_cpu_seconds_are_its_groups():
    # A session of its own (as every dyno is) that has burnt at least 0.3 s of CPU, then waits.
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\nprint('x', flush=True)\n" \
           "time.sleep(30)"
    with child_process([sys.executable, "-c", burn], stdout=subprocess.PIPE) as proc:
        assert proc.stdout.readline() == b"x\n"
        assert fl.cpu_seconds(proc.pid) >= 0.3
    assert fl.cpu_seconds(proc.pid) == 0.0  # gone: nothing left to count


def test_the_work_log_is_read_as_it_grows_whole_lines_only(tmp_path):
    tail = fl.WorkTail(tmp_path)
    log = tmp_path / "3-1234.log"
    log.write_text("q 7 1.5\ns 7 2.0\ne 7")
    assert tail.read() == [(3, "q", "7", 1.5), (3, "s", "7", 2.0)]
    with open(log, "a") as f:
        f.write(" 2.5\ngarbage\n")
    (tmp_path / "ready").mkdir()
    assert tail.read() == [(3, "e", "7", 2.5)]
    assert tail.read() == []


# --- scenarios -------------------------------------------------------------------------------------


def fleet_scenario(**autoscale: Any) -> Dict[str, Any]:
    table = {"rule": "schedule", "min": 1, "max": 3, "interval": "5s",
             "schedule": [["0s", 1], ["10s", 3], ["25s", 1]]}
    table.update(autoscale)
    return {
        "name": "testbed-fleet",
        "arrivals": {"process": "poisson", "rate": "20/s"},
        "service": {"distribution": "exponential", "mean": "50ms"},
        "fleet": {"dynos": 1, "slots": 2, "boot_time": "3s", "shutdown_grace": "5s"},
        "router": {"policy": "random"},
        "run": {"duration": "40s", "warmup": "0s", "replications": 2, "seed": 3},
        "autoscale": table,
    }


def test_a_scenario_with_autoscale_becomes_a_fleet_plan():
    engine, p = fl.split(Scenario(fleet_scenario()))
    assert p is not None
    assert (p.initial, p.bounds, p.interval, p.metric) == (1, (1, 3), 5.0, None)
    # The lifecycle as the engine resolved it: the keys given, and the engine's defaults.
    assert (p.boot_time, p.shutdown_grace, p.boot_timeout, p.stop_delay) == (3.0, 5.0, 60.0, 1.0)
    assert p.servers == 6
    doc = fleet_scenario()
    doc["fleet"] = dict(doc["fleet"], boot_time={"distribution": "uniform", "min": "2s", "max": "4s"},
                        boot_timeout="1.5min", stop_delay="2500ms")
    _, resolved = fl.split(Scenario(doc))
    assert resolved is not None
    assert (resolved.boot_time, resolved.boot_timeout, resolved.stop_delay) == (3.0, 90.0, 2.5)
    assert resolved.warnings == ["fleet.boot_time is a distribution: every real dyno boots in its mean, 3 s"]
    assert engine.describe()["dynos"] == 1
    plain, none = fl.split(Scenario({k: v for k, v in fleet_scenario().items() if k != "autoscale"}))
    assert none is None


@pytest.mark.parametrize("change, expected", [
    ({"autoscale": {"rule": "judoscale", "max": 3, "cooldown": "-1s"}}, "autoscale.cooldown: must be a duration >= 0"),
    ({"autoscale": {"rule": "judoscale", "min": 2, "max": 3}}, "fleet.dynos: "),
    ({"fleet": {"dynos": 1, "slots": 2, "cycling": "24h"}},
     "fleet.cycling: the testbed's autoscaled fleet does not restart its dynos daily yet"),
    ({"fleet": {"dynos": 1, "slots": 2, "shutdown_grace": "soon"}}, "fleet.shutdown_grace: expected a duration"),
    ({"faults": [{"at": "1s", "for": "1s", "kind": "slowdown", "factor": 2},
                 {"at": "1s", "kind": "dynos_lost", "count": 1}]},
     "faults.1.kind: the testbed's autoscaled fleet starts and stops its dynos by its rule"),
])
def test_a_bad_fleet_is_one_line_naming_the_key(change, expected):
    doc = fleet_scenario()
    doc.update(change)
    with pytest.raises(ScenarioError) as caught:
        fl.split(Scenario(doc))
    assert str(caught.value).startswith(expected), str(caught.value)
    assert "\n" not in str(caught.value)


def test_retries_a_breaker_the_apps_timeouts_and_slowdowns_run_on_an_autoscaled_fleet():
    """The load generator retries and asks its breaker, and the app slows and times out, as on a
    fixed fleet: the autoscaled fleet's plan takes them (a lost dyno it refuses, above)."""
    doc = fleet_scenario()
    doc["arrivals"].update({"timeout": "1s", "retry": {"attempts": 3, "on": ["timeout"]}, "breaker": {}})
    doc["app"] = {"service_timeout": "2s"}
    doc["faults"] = [{"at": "5s", "for": "5s", "kind": "slowdown", "target": "app", "factor": 3}]
    engine, p = fl.split(Scenario(doc))
    assert p is not None and engine.doc["faults"] == doc["faults"]
    plan = make_plan(engine.for_policy(engine.policies[0]))
    assert plan.retries and plan.breaker and plan.faults and plan.dynos.faults
    assert plan.dynos.service_timeout == 2.0


def test_one_real_run_is_held_to_the_replications_spread_and_a_clear_verdict():
    """A real run is one draw: its tries per request lie within three of the replications'
    standard deviations of their mean; a verdict is compared where nine in ten agree."""
    sims = [1.40, 1.45, 1.50, 1.42, 1.48]
    near = fl.compare({"changes": [], "per_minute": [], "attempts_per_request": 1.47,
                       "stability": {"recovered": 1.0}},
                      {"changes": [], "per_minute": [], "attempts_per_request": sims,
                       "recovered": [1.0] * 9 + [0.0]}, interval=5.0)
    assert near["attempts_per_request"]["within"] and near["attempts_per_request"]["paired"] == 1.40
    assert near["stability"] == {"measured": 1.0, "simulated": 0.9, "paired": 1.0, "agrees": True}
    assert near["p95_agrees"] is None  # no minutes compared
    far = fl.compare({"changes": [], "per_minute": [], "attempts_per_request": 1.70,
                      "stability": {"recovered": 0.0}},
                     {"changes": [], "per_minute": [], "attempts_per_request": sims,
                      "recovered": [1.0] * 8 + [0.0] * 2}, interval=5.0)
    assert not far["attempts_per_request"]["within"] and far["attempts_per_request"]["z"] > 3
    assert far["stability"]["agrees"] is None  # 8 in 10: not clear enough to hold a run to
    down = fl.compare({"changes": [], "per_minute": [], "stability": {"recovered": 1.0}},
                      {"changes": [], "per_minute": [], "recovered": [0.0] * 10}, interval=5.0)
    assert down["stability"]["agrees"] is False


def test_the_cli_refuses_a_bad_fleet_in_one_line(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text('[arrivals]\nprocess = "poisson"\nrate = "5/s"\n[service]\ndistribution = "exponential"\n'
                    'mean = "50ms"\n[fleet]\ndynos = 1\nshutdown_grace = "soon"\n[autoscale]\nrule = "heroku"\n'
                    'max = 2\n')
    result = run_cli("testbed", str(path), "--duration", "5s")
    assert_one_line_error(result, "fleet.shutdown_grace")
    result = run_cli("testbed", str(path), "--duration", "5s", "--set", 'fleet.shutdown_grace="5s"',
                     "--set", "autoscale.max=0")
    assert_one_line_error(result, "autoscale.max")


# --- a real autoscaled fleet -------------------------------------------------------------------------


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_real_fleet_follows_its_schedule_and_loses_no_request_when_it_shrinks():
    """About 45 s: 1 dyno, 3 from 10 s, 1 from 25 s (schedule, evaluated every 5 s), 20
    requests/s on two sync workers a dyno, 3 s of boot on top of gunicorn's own start and a
    5 s grace. HAProxy stops sending to a drained dyno before its SIGTERM, and gunicorn
    finishes what it has: every request is answered 200."""
    from dynosim.testbed.plan import make_plan

    before = _descendants(os.getpid())
    engine, p = fl.split(Scenario(fleet_scenario()))
    assert p is not None
    out = fl.run_autoscaled(make_plan(engine), p)
    assert out["unsent"] == 0 and out["sent"] == len(make_plan(engine).requests()) > 600
    assert out["errors"] == 0 and out["ok"] == out["sent"]
    # The sizes asked for, in order, each reached within one evaluation interval of the time
    # the schedule names (the rule evaluates every 5 s).
    assert out["changes"] == [(0.0, 1), (10.0, 3), (25.0, 1)]  # as decided
    assert [n for _, n in out["applied"]] == [1, 3, 1]  # as the dynos' events show it
    for (t, _), due in zip(out["applied"][1:], (10.0, 25.0)):
        assert due <= t < due + out["interval"], out["applied"]
    # Up only once ready and booted: 3 s on top of the real start.
    ups = [e for e in out["events"] if e["state"] == "up" and e["t"] > 0]
    assert len(ups) == 2
    assert [c.split()[-1] for c in out["commands"]] == ["ready", "ready", "drain", "drain", "maint", "maint"]
    # Each request's queue time came to the platform's metric: every one was stamped.
    assert out["queue_times"] == out["sent"]
    assert out["killed"] == 0
    assert sum(m["requests"] for m in out["per_minute"]) == out["sent"]
    assert not _descendants(os.getpid()) - before


# --- measured beside simulated ---------------------------------------------------------------------


def test_the_comparison_pairs_changes_in_order_and_minutes_by_number():
    measured = {"changes": [(0.0, 2), (212.0, 4), (511.0, 2)],
                "per_minute": [{"minute": 0, "p95": 0.30}, {"minute": 1, "p95": 0.50}, {"minute": 2, "p95": None}]}
    simulated = {"changes": fl.series_changes([
        {"time": float(t), "dynos_booting": b, "dynos_up": u} for t, b, u in
        [(0, 0, 2), (1, 0, 2), (210, 2, 2), (230, 0, 4), (495, 0, 2), (496, 0, 2)]]),
        "per_minute": [{"minute": 0, "p95": 0.30, "paired": 0.25}, {"minute": 1, "p95": 0.40, "paired": 0.50},
                       {"minute": 2, "p95": 0.4, "paired": 0.4}]}
    assert simulated["changes"] == [(0.0, 2), (210.0, 4), (495.0, 2)]
    got = fl.compare(measured, simulated, interval=15.0)
    assert [c["within_interval"] for c in got["changes"]] == [True, True, False]  # 16 s apart > 15 s
    assert not got["fleet_agrees"]
    # Held to replication 0, which drew the requests sent; the mean's difference is reported.
    assert [m["paired_difference"] for m in got["per_minute"]] == [pytest.approx(0.2), 0.0, None]
    assert [m["difference"] for m in got["per_minute"]] == [0.0, pytest.approx(0.25), None]
    assert [m["within"] for m in got["per_minute"]] == [True, True, False]
    assert not got["p95_agrees"]
    # A change one side made and the other did not is a disagreement, not a pair.
    got = fl.compare({**measured, "changes": measured["changes"][:2]}, simulated, interval=30.0)
    assert [c["within_interval"] for c in got["changes"]] == [True, True, False]
    assert got["changes"][2]["measured"] is None


FLEET_STEP = Path(__file__).parent / "fixtures" / "testbed" / "fleet-step.toml"


def short_step() -> Scenario:
    """fleet-step.toml in 100 s: the step up at 30 s, down at 65 s, the HPA every 5 s (5 s
    window and delay), 5 s of boot and 20 s of down-stabilization."""
    return Scenario.load(FLEET_STEP).with_overrides({
        "arrivals.rate": [["0s", "12/s"], ["30s", "12/s"], ["30s", "36/s"], ["65s", "36/s"], ["65s", "12/s"]],
        "fleet.boot_time": "5s", "fleet.shutdown_grace": "10s", "autoscale.interval": "5s",
        "autoscale.window": "5s", "autoscale.delay": "5s", "autoscale.down_stabilization": "20s",
        "run.duration": "100s", "run.replications": 10})


@pytest.fixture(scope="module")
def step_comparison() -> Dict[str, Any]:
    """The issue's comparison in 100 s for CI (docs/testbed.md has the 10-minute table): one
    real run of `short_step`, compared with the engine's (replication 0 drew its requests),
    calibrated as `dynosim testbed --calibrate` does: the step up's minute runs its dynos near
    saturation, where the stack's own milliseconds per request (connecting, the server's CPU,
    the worker's gap) move the p95 by more than the bound."""
    from dynosim.testbed.run import fleet_testbed

    doc = fleet_testbed(short_step(), calibrate=True)
    assert set(doc["calibration"]["set"]) >= {"router.connect", "app.overhead"}
    assert "app.request_cpu" not in doc["calibration"]["set"]  # [service]: the engine cannot run it
    result = doc["results"][0]
    return {"measured": result["measured"], "comparison": result["comparison"]}


@pytest.mark.needs("haproxy", "gunicorn")
def test_the_real_fleet_scales_up_with_the_simulated_one_and_p95s_agree(step_comparison):
    """The step up's size changes (to the largest fleet) within one evaluation interval of the
    simulation's, and each minute's p95 within 25% of replication 0's."""
    got = step_comparison["comparison"]
    assert step_comparison["measured"]["errors"] == 0
    changes = got["changes"]
    peak = max(c["simulated_size"] or 0 for c in changes)
    up = changes[: 1 + next(k for k, c in enumerate(changes) if c["simulated_size"] == peak)]
    assert len(up) >= 3 and all(c["within_interval"] for c in up), changes
    assert got["p95_agrees"], got["per_minute"]


FLEET_STORM = Path(__file__).parent / "fixtures" / "testbed" / "fleet-storm.toml"


@pytest.mark.needs("haproxy", "gunicorn")
def test_clients_retrying_under_a_real_autoscaler_as_simulated():
    """fleet-storm.toml for real (90 s): the app 4x slower for 20 s, clients retrying on a 1 s
    timeout, the HPA growing the fleet. The tries per request (the amplification the autoscaler
    reads) within three standard deviations of the replications'; the step up's size changes
    within one evaluation interval of the simulation's, up to its largest fleet; the stability
    verdict the simulation's, where its replications agree. The scale-down is not held change
    by change, as for the step above (a reading near a rounding boundary)."""
    from dynosim.testbed.run import fleet_testbed

    result = fleet_testbed(Scenario.load(FLEET_STORM))["results"][0]
    measured, got = result["measured"], result["comparison"]
    assert measured["tries"] > measured["sent"] and measured["attempts_per_request"] > 1.1  # it did retry
    tries = got["attempts_per_request"]
    assert tries["within"], tries
    changes = got["changes"]
    peak = max(c["simulated_size"] or 0 for c in changes)
    up = changes[: 1 + next(k for k, c in enumerate(changes) if c["simulated_size"] == peak)]
    assert peak > 2 and all(c["within_interval"] for c in up), changes
    assert got["stability"]["agrees"] is not False, got["stability"]


# The scale-down of this 100 s version is not held to the simulation's change by change: it
# turns on one HPA reading near a rounding boundary (at 55 s the real fleet read 0.4146, the
# simulated 0.4232, and ceil(reading / 0.5 x 6) is 5 for one and 6 for the other), chance on
# either side. The 10-minute run in docs/testbed.md agrees on every change; a test that could
# not fail (an xfail) is no check, so there is none here.


@pytest.mark.needs("haproxy", "gunicorn")
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_nothing_outlives_a_fleet_stopped_while_dynos_boot(tmp_path, how):
    """Stopped 1 s after the schedule asked for 3 dynos, with 30 s of boot: two gunicorns
    booting, not yet in HAProxy, besides the first."""
    doc = fleet_scenario(schedule=[["0s", 1], ["2s", 3]], interval="2s")
    doc["fleet"] = {"dynos": 1, "slots": 2, "boot_time": "30s"}
    toml = tmp_path / "fleet.toml"
    toml.write_text(toml_document(doc))

    def dynos(seen: Dict[int, str]) -> int:
        return len({line.split("--bind ")[1].split()[0] for line in seen.values() if "--bind 127.0.0.1:" in line})

    stop_and_look(str(toml), how, lambda seen: dynos(seen) >= 3, expect=("gunicorn", "haproxy"), settle=1.0)
