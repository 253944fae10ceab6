"""``dynosim testbed replay`` (docs/testbed.md, "Replaying a log"): configurations and their
errors, the app's memory phases, reading the trace, and one short real replay of a fixture log
under two configurations (HAProxy and gunicorn on loopback, about ten seconds).

The real run needs the components; outside CI a missing one skips it, in CI it fails (as in
tests/test_testbed.py)."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_one_line_error, run_cli, run_process
from dynosim.errors import DynosimError
from dynosim.testbed import app
from dynosim.testbed.dynos import DynoPlan
from dynosim.testbed import measure
from dynosim.testbed.replay import combine, environments, load_configs, parse_config, read_trace, replay

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
SHOP = FIXTURES / "shop.log.gz"


# --- configurations ----------------------------------------------------------------------------


def test_a_config_string_names_its_settings():
    c = parse_config("arena2: workers=2 threads=5 env=MALLOC_ARENA_MAX=2 env=RUBY_GC=1")
    assert (c.name, c.dynos, c.workers, c.threads, c.kind) == ("arena2", 1, 2, 5, "gthread")
    assert c.env == {"MALLOC_ARENA_MAX": "2", "RUBY_GC": "1"}
    assert c.slots == 10
    assert c.describe() == "2 × gthread 5 threads, MALLOC_ARENA_MAX=2, RUBY_GC=1"
    plain = parse_config("base:")
    assert (plain.workers, plain.threads, plain.kind, plain.env) == (1, 1, "sync", {})
    g = parse_config("g: class=gevent connections=50 dynos=3 workers=2")
    assert (g.kind, g.slots, g.dynos) == ("gevent", 100, 3)
    # A value may hold '=' and ':' (only the first ':' ends the name).
    assert parse_config("x: env=OPTS=a=b:c").env == {"OPTS": "a=b:c"}


def test_a_variable_one_configuration_sets_is_unset_in_the_others():
    configs = [parse_config("base: workers=2"), parse_config("a1: env=MALLOC_ARENA_MAX=1"),
               parse_config("t: env=TZ=UTC")]
    assert environments(configs) == [{"MALLOC_ARENA_MAX": None, "TZ": None}, {"MALLOC_ARENA_MAX": "1", "TZ": None},
                                     {"MALLOC_ARENA_MAX": None, "TZ": "UTC"}]


@pytest.mark.parametrize("text, fragment", [
    ("workers=2", "expected NAME: key=value"),
    ("a: workers", "expected key=value, got 'workers'"),
    ("a: workers=two", "workers: expected a whole number from 1 to 256, got 'two'"),
    ("a: workers=0", "workers: expected a whole number from 1 to 256, got 0"),
    ("a: wrokers=2", "wrokers: unknown key; expected one of: dynos, workers, threads, class, connections, env"),
    ("a: class=puma", "class: expected one of: sync, gthread, gevent, got 'puma'"),
    ("a: class=sync threads=4", "class: a sync worker has one thread"),
    ("a: connections=10", "connections: connections is for class = \"gevent\" only"),
    ("a: env=MALLOC_ARENA_MAX", "expected env=NAME=VALUE"),
    ("a: env=1X=2", "env: an environment variable's name"),
    ("a: env=DYNOSIM_TESTBED={}", "DYNOSIM_TESTBED is the testbed's own"),
    ("a: workers=1 workers=2", "workers given twice"),
    ("a b: workers=1", "a configuration's name is"),
    ("a: dynos=64 workers=8", "at most 256 worker processes"),
])
def test_a_bad_config_string_is_one_line_naming_it(text, fragment):
    with pytest.raises(DynosimError) as e:
        parse_config(text)
    message = str(e.value)
    assert fragment in message and "\n" not in message
    assert message.startswith(f"--config {text!r}")


def test_configurations_from_a_toml_file(tmp_path):
    path = tmp_path / "configs.toml"
    path.write_text('baseline = "arena1"\n[configs.default]\nworkers = 2\nthreads = 5\n'
                    '[configs.arena1]\nworkers = 2\nthreads = 5\nenv = { MALLOC_ARENA_MAX = 1 }\n')
    configs, baseline = load_configs(path)
    assert [c.name for c in configs] == ["default", "arena1"] and baseline == "arena1"
    assert configs[1].env == {"MALLOC_ARENA_MAX": "1"} and configs[0].kind == "gthread"
    for text, fragment in [
        ("[configs.a]\nworkers = 'x'\n", "configs.a.workers: expected a whole number"),
        ("[configs.a]\nthreds = 2\n", "configs.a.threds: unknown key"),
        ("[configs.a]\nenv = 3\n", "configs.a.env: expected a table"),
        ("[configs.a]\nenv = { X = [1] }\n", "configs.a.env.X: expected a string"),
        ("baseline = 1\n[configs.a]\n", "baseline: expected a configuration's name"),
        ("workers = 2\n", "workers: unknown key"),
        ("baseline = 'a'\n", "configs: no configuration"),
        ("[configs.a\n", "not valid TOML"),
    ]:
        path.write_text(text)
        with pytest.raises(DynosimError) as e:
            load_configs(path)
        assert str(e.value).startswith(f"{path}: ") and fragment in str(e.value), str(e.value)
        assert "\n" not in str(e.value)


def test_the_options_are_checked_before_anything_runs():
    hand = FIXTURES / "replay-hand.log"
    for kwargs, fragment in [
        ({"configs": ["a: workers=1", "a: workers=2"]}, "two configurations named 'a'"),
        ({"configs": ["a: workers=1"], "baseline": "b"}, "--baseline: no configuration named 'b'"),
        ({"configs": []}, "no configuration to run"),
        ({"configs": ["a:"], "work": "gpu"}, "--work: expected one of: io, cpu"),
        ({"configs": ["a:"], "keep": 0.5}, "--keep: keeps a share of what --alloc allocates"),
        ({"configs": ["a:"], "alloc": -1}, "--alloc"),
        ({"configs": ["a:"], "policy": "retry_if_busy"}, "--policy"),
        ({"configs": ["a:"], "limit": 0}, "--limit"),
        ({"configs": ["a:"], "rounds": 0}, "--rounds"),
    ]:
        configs = kwargs.pop("configs")
        with pytest.raises(DynosimError) as e:
            replay(hand, configs, **kwargs)
        assert fragment in str(e.value), str(e.value)


# --- the app's memory phases ------------------------------------------------------------------


def test_the_app_allocates_in_pieces_and_keeps_a_share():
    assert app.parse_phases("mem:262144,keep:0.02,io:0.01") == [("mem", "", 262144.0), ("keep", "", 0.02),
                                                                 ("io", "", 0.01)]
    for bad in ("mem:1.5", "mem:-1", f"mem:{app.MAX_ALLOC + 1}", "keep:1.5"):
        with pytest.raises(ValueError):
            app.parse_phases(bad)
    pieces = app.allocate(1_000_000)
    assert sum(len(p) for p in pieces) == 1_000_000
    assert all(len(p) <= app.PIECE_MAX for p in pieces) and all(len(p) >= app.PIECE_MIN for p in pieces[:-1])
    before = len(app._KEPT)
    app.perform(app.parse_phases("mem:65536,keep:1,io:0"))  # everything kept
    assert len(app._KEPT) > before
    del app._KEPT[:]


def test_a_dyno_environment_is_set_and_unset_by_env_in_front_of_gunicorn():
    plan = DynoPlan(1, "gthread", 2, threads=5, env={"MALLOC_ARENA_MAX": "2", "TZ": None})
    argv = plan.argv(8000)
    assert Path(argv[0]).name == "env"
    assert argv[1:4] == ["-u", "TZ", "MALLOC_ARENA_MAX=2"] and argv[4] == sys.executable
    assert DynoPlan(1, "sync", 1).argv(8000)[0] == sys.executable


# --- the trace ----------------------------------------------------------------------------------


def test_the_trace_is_the_logs_arrivals_and_services_up_to_the_limit():
    kwargs = dict(format="auto", log_format=None, host=None, window=None, speed=1.0, correct_queueing=False)
    log, arrivals, services = read_trace(FIXTURES / "replay-hand.log", limit=4, **kwargs)
    assert arrivals == [0, 0.25, 0.375, 0.5] and services == [1, 0.5, 0.5, 0.125]
    assert log["replayed"] == 6  # read: six with a service time, the H13 left out
    _, arrivals, _ = read_trace(FIXTURES / "replay-hand.log", limit=None, **dict(kwargs, speed=2.0))
    assert arrivals == [0, 0.125, 0.1875, 0.25, 0.3125, 1]


def shop_arrivals_in(start: float, end: float) -> int:
    """Requests of shop.log.gz arriving in [start, end) s after its first arrival, worked out
    here from the text (time less connect and service), not by the log reader."""
    arrivals = []
    with gzip.open(SHOP, "rt") as f:
        for line in f:
            stamp = datetime.fromisoformat(line.split()[0]).timestamp()
            connect = float(re.search(r" connect=(\d+)ms", line).group(1)) / 1e3
            service = float(re.search(r" service=(\d+)ms", line).group(1)) / 1e3
            arrivals.append(stamp - connect - service)
    first = min(arrivals)
    return sum(1 for a in arrivals if start <= a - first < end)


# --- bad input from the command line ---------------------------------------------------------


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    empty = tmp_path / "empty.log"
    empty.write_text("")
    no_service = tmp_path / "h13.log"
    no_service.write_text('2014-01-09T06:00:00+00:00 heroku[router]: at=error code=H13 desc="Connection closed '
                          'without response" method=GET path="/" host=a.example.com dyno=web.1 connect=1ms '
                          'status=503 bytes=0\n')
    bad_toml = tmp_path / "configs.toml"
    bad_toml.write_text("[configs.a]\nworkers = 0\n")
    ok = ["--config", "a: workers=1", "-o", str(out)]
    cases = [
        ([str(tmp_path / "missing.log")] + ok, "missing.log: cannot read"),
        ([str(empty)] + ok, "empty"),
        ([str(FIXTURES / "garbled.log")] + ok, "no request read"),
        ([str(no_service)] + ok, "nothing to replay"),
        ([str(FIXTURES / "replay-hand.log"), "--window", "1h.."] + ok, "--window: no request arrived in it"),
        ([str(FIXTURES / "replay-hand.log"), "--config", "a workers=1", "-o", str(out)], "expected NAME:"),
        ([str(FIXTURES / "replay-hand.log"), "--configs", str(bad_toml), "-o", str(out)],
         "configs.a.workers: expected a whole number from 1 to 256, got 0"),
        ([str(FIXTURES / "replay-hand.log"), "-o", str(out)], "no configuration to run"),
        ([str(FIXTURES / "replay-hand.log"), "--alloc", "lots"] + ok, "--alloc"),
    ]
    for args, fragment in cases:
        assert_one_line_error(run_cli("testbed", "replay", *args), fragment)
        assert not out.exists()


# --- a real replay ------------------------------------------------------------------------------


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_replay_sends_the_window_under_each_configuration_and_measures_memory(tmp_path):
    """shop.log.gz's requests arriving 10 to 13 s in, under one gthread worker and under three
    sync workers with MALLOC_ARENA_MAX=2, from an environment that exports MALLOC_ARENA_MAX=7:
    every request sent and answered under each, the variable reaching the workers as the
    configuration says (and unset in the one that does not set it), and three workers using
    more memory than one."""
    expected = shop_arrivals_in(10.0, 13.0)
    assert 20 < expected < 60
    out = tmp_path / "out"
    env = dict(os.environ, MALLOC_ARENA_MAX="7")
    result = run_process(
        [sys.executable, "-m", "dynosim", "testbed", "replay", str(SHOP), "--window", "10s..13s", "--alloc",
         "128KiB", "--keep", "0.05", "--config", "one: workers=1 threads=4", "--config",
         "three: workers=3 env=MALLOC_ARENA_MAX=2", "--json", "-o", str(out)],
        text=True, env=env, timeout=180)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["replayed"] == expected and doc["baseline"] == "one"
    one, three = doc["results"]
    for r in (one, three):
        assert r["requests"] == r["answered"] == expected and r["errors"] == 0
        assert r["memory"]["samples"] >= 3
    assert one["environment"] == {"MALLOC_ARENA_MAX": [None]}
    assert three["environment"] == {"MALLOC_ARENA_MAX": ["2"]}
    assert one["memory"]["processes"] == 2 and three["memory"]["processes"] == 4
    # Three worker processes hold more than one (each is a whole interpreter).
    for stat in ("idle", "mean", "peak"):
        assert three["memory"]["rss"][stat] > one["memory"]["rss"][stat]
        assert three["memory"]["pss"][stat] > one["memory"]["pss"][stat]
    assert three["vs_baseline"]["memory"] > 1 and one["vs_baseline"] == {k: 1.0 for k in one["vs_baseline"]}
    assert json.loads((out / "replay.json").read_text())["replayed"] == expected
    with open(out / "requests.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * expected
    assert {r["config"] for r in rows} == {"one", "three"}
    for r in rows:
        assert r["status"] == "200"
        # The app performed the logged service time (it sleeps at least that long).
        assert float(r["app_end"]) - float(r["app_start"]) >= float(r["logged_service"])
        assert float(r["response"]) >= float(r["logged_service"])
    # Nothing of the run is left: none of its workers runs.
    for pid in {int(r["pid"]) for r in rows}:
        assert not Path(f"/proc/{pid}").exists() or "dynosim.testbed.app" not in \
            Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")


def _round(config: str, responses, rss_mean: float, rss_peak: float, pid: int):
    """A configuration's result for one round, as run_config gives it (the parts combine reads)."""
    records = [{"config": config, "index": i, "logged_service": 0.01, "scheduled": i, "sent": i, "done": i + x,
                "response": x, "status": 200, "error": "", "app_start": i, "app_end": i + 0.01, "dyno": "0",
                "pid": str(pid), "worker_rss": "1"} for i, x in enumerate(responses)]
    return {"config": config, "settings": {}, "describe": config, "requests": len(responses),
            "answered": len(responses), "errors": 0, "error_kinds": {}, "response": measure.time_summary(
                np.array(responses)), "service": measure.time_summary(np.full(len(responses), 0.01)),
            "memory": {"rss": {"idle": 10.0, "mean": rss_mean, "peak": rss_peak},
                       "pss": {"idle": 5.0, "mean": rss_mean / 2, "peak": rss_peak / 2}, "samples": 4,
                       "processes": 2, "rss_peak_per_dyno": [rss_peak]},
            "worker_rss": {"mean": 1.0, "max": 1.0}, "environment": {"X": [None]},
            "lateness": {"p99": 0.001}, "router_log_lines": len(responses), "warnings": [], "haproxy": "h",
            "wall_seconds": 1.0, "_records": records}


def test_rounds_pool_their_requests_and_keep_each_rounds_figures():
    one = combine([_round("a", [0.1, 0.2], 100.0, 120.0, 1), _round("a", [0.3, 0.4], 140.0, 150.0, 2)])
    assert (one["rounds"], one["requests"], one["answered"]) == (2, 4, 4)
    assert one["response"]["p50"] == pytest.approx(0.25)  # over the four responses together
    assert one["memory"]["rss"] == {"idle": 10.0, "mean": 120.0, "peak": 150.0}
    assert one["memory"]["samples"] == 8
    assert [r["memory"]["rss"]["mean"] for r in one["per_round"]] == [100.0, 140.0]
    assert [row["round"] for row in one["_records"]] == [1, 1, 2, 2]
    single = combine([_round("a", [0.1], 100.0, 120.0, 1)])
    assert single["rounds"] == 1 and single["memory"]["rss"]["mean"] == 100.0
    assert [row["round"] for row in single["_records"]] == [1]
