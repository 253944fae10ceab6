"""The real stack's per-request costs from the front end (issue #11): `router.connect` and
`app.overhead` in a scenario file, with --set, in describe(), and their bad values. Their
theory checks are in crates/dynosim-engine/tests/overhead.rs."""

import json

import pytest

from conftest import assert_one_line_error, run_cli

SCENARIO = '''\
[arrivals]
process = "poisson"
rate = "50/s"

[service]
distribution = "lognormal"
median = "40ms"
sigma = 0.8

[fleet]
dynos = 4
slots = 1

[app]
overhead = "1ms"

[router]
policy = "intelligent"
connect = "0.8ms"

[run]
duration = "60s"
warmup = "5s"
replications = 4
'''


def write(tmp_path, text):
    path = tmp_path / "costs.toml"
    path.write_text(text)
    return path


def summary(result):
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["results"][0]


def test_costs_with_plain_slots_run_on_the_event_engine_and_lengthen_the_queue(tmp_path):
    path = write(tmp_path, SCENARIO)
    costly = summary(run_cli("run", str(path), "--json"))
    free = summary(run_cli("run", str(path), "--json", "--set", "router.connect=0s", "--set", "app.overhead=0s"))
    assert costly["engine"] == "events" and free["engine"] == "direct"
    # The same traffic (streams of their own), so every request waits at least its connect time.
    assert costly["summary"]["queue"]["mean"]["mean"] > free["summary"]["queue"]["mean"]["mean"] + 0.0008
    # The overhead counts in the offered load (it holds the thread).
    assert costly["offered_load"] == pytest.approx(free["offered_load"] * (1 + 0.001 / free["service_mean"]))


def test_describe_reports_the_costs(tmp_path):
    from dynosim import Scenario

    d = Scenario.load(write(tmp_path, SCENARIO)).describe()
    assert d["connect"] == pytest.approx(0.0008)
    assert d["app"]["overhead"] == pytest.approx(0.001)
    plain = Scenario.load(write(tmp_path, SCENARIO.replace('overhead = "1ms"', 'overhead = 0'))).describe()
    assert plain["app"]["overhead"] == 0.0


def test_distributions_are_accepted(tmp_path):
    text = SCENARIO.replace('connect = "0.8ms"', 'connect = { distribution = "exponential", mean = "0.8ms" }')
    assert summary(run_cli("run", str(write(tmp_path, text)), "--json"))["engine"] == "events"


@pytest.mark.parametrize("old, new, key", [
    ('connect = "0.8ms"', 'connect = "-1ms"', "router.connect"),
    ('connect = "0.8ms"', 'connect = { distribution = "nope" }', "router.connect.distribution"),
    ('overhead = "1ms"', 'overhead = "fast"', "app.overhead"),
    # With fleet.slots, [app] may set the overhead and nothing else.
    ('overhead = "1ms"', 'overhead = "1ms"\nprocesses = 2', "fleet.slots"),
])
def test_bad_costs_are_one_line(tmp_path, old, new, key):
    result = run_cli("run", str(write(tmp_path, SCENARIO.replace(old, new))))
    assert_one_line_error(result, key)


def test_the_direct_engine_refuses_them_by_name(tmp_path):
    result = run_cli("run", str(write(tmp_path, SCENARIO)), "--set", "run.engine=direct")
    assert_one_line_error(result, "run.engine", "connect time")
