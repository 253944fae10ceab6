"""A router on the dyno's machine (`router.colocated_cpu`): in a scenario file and describe(),
its bad values in one line, and the testbed's accounting of the stack's CPU on the dynos'
cores (dynosim.testbed.colocated) without a real stack. Its theory checks are in
crates/dynosim-engine/tests/colocated.rs; the calibration on the real stack in
tests/test_testbed_scheduler.py."""

import os
import subprocess
import sys
import time

import pytest

from conftest import assert_one_line_error, run_cli

SCENARIO = '''\
[arrivals]
process = "poisson"
rate = "40/s"

[request]
phases = [{ cpu = "10ms" }, { io = "20ms" }]

[fleet]
dynos = 1
cores = 1

[app]
server = "gunicorn"
worker_class = "sync"
processes = 4

[router]
policy = "random"
colocated_cpu = "2ms"

[run]
duration = "30s"
warmup = "2s"
replications = 3
'''


def write(tmp_path, text):
    path = tmp_path / "colocated.toml"
    path.write_text(text)
    return path


def test_describe_reports_it_and_the_cores_carry_it(tmp_path):
    from dynosim import Scenario

    d = Scenario.load(write(tmp_path, SCENARIO)).describe()
    plain = Scenario.load(write(tmp_path, SCENARIO.replace('colocated_cpu = "2ms"', ""))).describe()
    assert d["colocated_cpu"] == pytest.approx(0.002) and plain["colocated_cpu"] == 0.0
    # The cores' load is λ (E[cpu] + E[colocated]) / cores; the requests' service is theirs alone.
    assert d["bottleneck"] == plain["bottleneck"] == "cores"
    assert d["offered_load"] == pytest.approx(40 * (0.010 + 0.002)) and plain["offered_load"] == pytest.approx(0.4)
    assert d["service_mean"] == plain["service_mean"] == pytest.approx(0.030)


def test_it_runs_and_takes_the_cores(tmp_path):
    import json

    def run(*extra):
        result = run_cli("run", str(write(tmp_path, SCENARIO)), "--json", *extra)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["results"][0]["summary"]

    with_it, without = run(), run("--set", "router.colocated_cpu=0s")
    # The same requests (a stream of its own), slower for sharing their core.
    assert with_it["service_mean"]["mean"] == without["service_mean"]["mean"]
    assert with_it["response"]["mean"]["mean"] > without["response"]["mean"]["mean"]
    busy = with_it["dyno"]["cpu_utilisation"]["mean"] - without["dyno"]["cpu_utilisation"]["mean"]
    assert busy == pytest.approx(40 * 0.002, rel=0.15)


@pytest.mark.parametrize("old, new, fragments", [
    ('colocated_cpu = "2ms"', 'colocated_cpu = "-1ms"', ["router.colocated_cpu"]),
    ('colocated_cpu = "2ms"', 'colocated_cpu = { distribution = "nope" }', ["router.colocated_cpu.distribution"]),
    ('colocated_cpu = "2ms"', 'colocated_cpu = "quick"', ["router.colocated_cpu", "quick"]),
    # Cores are for [request] phases: a [service] scenario has none.
    ('[request]\nphases = [{ cpu = "10ms" }, { io = "20ms" }]', '[service]\ndistribution = "exponential"\nmean = "30ms"',
     ["router.colocated_cpu", "[request] phases"]),
])
def test_bad_values_are_one_line(tmp_path, old, new, fragments):
    result = run_cli("run", str(write(tmp_path, SCENARIO.replace(old, new))))
    assert_one_line_error(result, *fragments)


# --- the testbed's accounting ------------------------------------------------------------------


def snap(stack, dynos, ticks, affinity):
    return {"stack": stack, "dynos": dynos, "ticks": ticks, "time": 0.0, "affinity": affinity}


def test_all_of_the_stacks_cpu_counts_when_the_dynos_have_every_core_it_may_use():
    from dynosim.testbed.colocated import per_request

    before = snap({"router": 1.0, "load_generator": 2.0}, 10.0, {0: 100, 1: 100}, [0, 1])
    after = snap({"router": 1.03, "load_generator": 2.05}, 12.0, {0: 300, 1: 300}, [0, 1])
    got = per_request(before, after, 200, [0, 1])
    assert got["how"] == "all" and got["share"] == 1.0
    assert got["stack"] == pytest.approx({"router": 0.03 / 200, "load_generator": 0.05 / 200})
    assert got["seconds"] == pytest.approx(0.08 / 200)
    # On cores of their own, none of it.
    got = per_request(before, dict(after, affinity=[1]), 200, [0])
    assert got["how"] == "none" and got["seconds"] == 0.0


def test_where_the_stack_may_run_elsewhere_the_dynos_cores_say_how_much_ran_there():
    from dynosim.testbed.colocated import CLOCK_TICKS, per_request

    # Core 0 is the dyno's: busy 2.04 s, of which the dyno's processes 2.0 s: 0.04 s of the
    # stack's 0.08 s ran there.
    before = snap({"router": 0.0, "load_generator": 0.0}, 0.0, {0: 0, 1: 0}, [0, 1])
    after = snap({"router": 0.03, "load_generator": 0.05}, 2.0, {0: round(2.04 * CLOCK_TICKS), 1: 50}, [0, 1])
    got = per_request(before, after, 100, [0])
    assert got["how"] == "sampled" and got["share"] == pytest.approx(0.5)
    assert got["seconds"] == pytest.approx(0.04 / 100)
    # More busy time than the stack had: something else on the machine; the share stops at 1.
    after["ticks"][0] = round(2.5 * CLOCK_TICKS)
    got = per_request(before, after, 100, [0])
    assert got["share"] == 1.0 and got["other_on_dyno_cores"] == pytest.approx(0.42 / 100)
    # Less than the dyno's own (ticks are coarse): none.
    after["ticks"][0] = round(1.9 * CLOCK_TICKS)
    assert per_request(before, after, 100, [0])["seconds"] == 0.0


def test_nothing_measured_is_none():
    from dynosim.testbed.colocated import per_request

    empty = snap({"router": None}, 0.0, {}, [])
    assert per_request(empty, empty, 100, [0])["seconds"] is None
    assert per_request(empty, empty, 0, [0])["seconds"] is None


def test_another_process_s_cpu_clock_reads_what_it_burnt():
    from dynosim.testbed.colocated import process_cpu, snapshot

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass\ntime.sleep(5)"
    child = subprocess.Popen([sys.executable, "-c", burn])
    try:
        deadline = time.monotonic() + 5
        while (process_cpu(child.pid) or 0.0) < 0.2 and time.monotonic() < deadline:
            time.sleep(0.02)
        used = process_cpu(child.pid)
        # Its 0.2 s of burning, and the interpreter's start-up (well under a second).
        assert used is not None and 0.2 <= used < 1.5
        s = snapshot({"router": child.pid, "load_generator": os.getpid()}, [child.pid])
        assert s["stack"]["router"] >= 0.2 and s["dynos"] >= 0.2 and s["ticks"]
        assert set(s["affinity"]) == set(os.sched_getaffinity(child.pid))
    finally:
        child.kill()
        child.wait()
    assert process_cpu(child.pid) is None


def test_the_calibration_sets_the_busy_runs_figure():
    from dynosim.testbed.run import calibration_result

    idle = {"overhead": {"to_app_when_idle": 0.0008}, "server_cpu": {"mean": 0.0004, "cv": 0.2, "requests": 299},
            "phases": {"cpu": {"phases": 300, "ratio_mean": 1.01, "cv": 0.03, "ratio_p99": 1.1}},
            "colocated": {"seconds": 0.0001, "stack": {}, "share": 1.0, "how": "all"}}
    busy = {"overhead": {"between_requests": 0.0012, "server_cpu": 0.0005},
            "server_cpu": {"mean": 0.0005, "cv": None, "requests": 199},
            "colocated": {"seconds": 0.00025, "stack": {"router": 0.0001, "load_generator": 0.00015},
                          "share": 1.0, "how": "all"}}
    got = calibration_result({"idle": idle, "busy": busy})
    assert got["measured"]["router.colocated_cpu"] == 0.00025
    assert "--set router.colocated_cpu=0.250ms" in got["set_lines"]
    from dynosim.cli.testbed import calibration_lines

    assert any("router.colocated_cpu 0.250 ms" in line and "load_generator 0.150 ms" in line
               for line in calibration_lines(got))
    # A [service] scenario cannot run it: measured, not set, and said.
    got = calibration_result({"idle": idle, "busy": busy}, request_cpu=False)
    assert "router.colocated_cpu" not in got["set"] and any("colocated_cpu" in w for w in got["warnings"])
    # Sampled: set, with a warning saying how coarse.
    busy["colocated"].update(how="sampled", share=0.3)
    got = calibration_result({"idle": idle, "busy": busy})
    assert "router.colocated_cpu" in got["set"] and any("30%" in w for w in got["warnings"])
