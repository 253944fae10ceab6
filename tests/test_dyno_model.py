"""The dyno's insides from the front end (issue #10): scenarios with [app], [app.memory],
[request] phases and classes, [resources], a closed loop of clients and fleet.type, and
without [router], load, describe and run through the CLI. The issue's two examples are run
verbatim."""

import csv
import json
import math

import pytest

from conftest import assert_one_line_error, run_cli

# ab -n 1000 -c 100 against one Unicorn dyno (issue #10, first example), verbatim.
EXAMPLE_1 = '''\
[arrivals]
process = "closed"        # ab -n 1000 -c 100
clients = 100
think = "0s"
requests = 1000

[fleet]
dynos = 1
type = "standard-1x"      # cores and memory quota from the dyno table
cores = 4                 # override

[app]
server = "unicorn"        # sync processes, interpreter lock, shared backlog
processes = 4

[app.memory]
dyno = "40MB"
process = "110MB"
thread = "8MB"
request = "1MB"

[request]
phases = [ { cpu = "3ms" }, { io = "1ms" } ]
'''

# Gunicorn gthread dynos in front of a database, two request classes (second example), verbatim.
EXAMPLE_2 = '''\
[arrivals]
process = "poisson"
rate = "20/s"

[fleet]
dynos = 2
type = "standard-2x"

[app]
server = "gunicorn"
worker_class = "gthread"
processes = 3
threads = 3

[[request.class]]
name = "listing"
weight = 0.8
phases = [ { cpu = { distribution = "exponential", mean = "20ms" } },
           { use = "db", time = { distribution = "lognormal", median = "300ms", sigma = 0.9 } },
           { cpu = "5ms" } ]

[[request.class]]
name = "health"
weight = 0.2
phases = [ { cpu = "1ms" } ]

[resources.db]
servers = 2               # the database's own cores
discipline = "ps"
pool = { size = 5, per = "process" }
'''

# The second example at a rate its database can serve: 0.8 × 4/s listings use the db for a
# mean of 0.3 s × exp(0.9²/2) = 0.45 s each, 1.44 of its 2 servers (at 20/s: 7.2 of 2).
EXAMPLE_2_AT_4_PER_S = EXAMPLE_2.replace('rate = "20/s"', 'rate = "4/s"')

# The first example measured from its first request: without [run], the 30 s default warm-up
# outlasts the ~1 s the 1000 requests take (see test_example_1_requests_per_second).
EXAMPLE_1_NO_WARMUP = EXAMPLE_1 + '\n[run]\nwarmup = "0s"\n'


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def run_json(tmp_path, name, text, *args):
    path = write(tmp_path, name, text)
    result = run_cli("run", str(path), "--json", *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    (report,) = json.loads(result.stdout)["results"]
    return report


def mean(summary, path):
    node = summary
    for part in path.split("."):
        node = node[part]
    return node["mean"]


# --- the first example: a closed loop (ab) on one dyno ----------------------------------------


def test_example_1_runs_verbatim(tmp_path):
    report = run_json(tmp_path, "ab.toml", EXAMPLE_1)
    assert report["scenario"] == "ab"
    assert report["policy"] == "random"  # no [router]: the engine's default
    assert report["slots"] == 4  # 4 sync processes
    summary = report["summary"]
    assert "dyno" in summary and "closed_loop" in summary
    for rep in report["per_replication"]:
        assert rep["closed_loop"]["clients"] == 100
        # ab -n 1000: every request is answered, one way or another.
        assert rep["closed_loop"]["completed"] == 1000
        assert 0 <= rep["dyno"]["cpu_utilisation"] <= 1 + 1e-9


def test_example_1_requests_per_second(tmp_path):
    # ab -n: every request is measured and the run lasts until the last response, whatever
    # run.warmup (30 s by default) and run.duration say.
    report = run_json(tmp_path, "ab.toml", EXAMPLE_1)
    for rep in report["per_replication"]:
        assert rep["closed_loop"]["completed"] == 1000
        assert rep["requests"] == 1000
        assert rep["closed_loop"]["elapsed"] > 0
        assert rep["closed_loop"]["requests_per_s"] > 0


def test_example_1_without_warmup_sustains_a_rate(tmp_path):
    report = run_json(tmp_path, "ab.toml", EXAMPLE_1_NO_WARMUP)
    for rep in report["per_replication"]:
        loop = rep["closed_loop"]
        assert loop["completed"] == 1000 and loop["elapsed"] > 0
        assert loop["requests_per_s"] == pytest.approx(loop["completed"] / loop["elapsed"])
        # A sync process holds a request for at least its 3 ms of CPU and 1 ms of I/O: 4
        # processes answer at most 1000 a second.
        assert 0 < loop["requests_per_s"] <= 1000 * (1 + 1e-9)
        assert loop["latency"]["mean"] >= 0.004 - 1e-12


def test_example_1_table(tmp_path):
    """The table names the clients rather than an arrival rate, and shows the rate sustained."""
    result = run_cli("run", str(write(tmp_path, "ab.toml", EXAMPLE_1_NO_WARMUP)))
    assert result.returncode == 0, result.stderr
    assert "a closed loop of 100 clients" in result.stdout
    assert "req/s" in result.stdout
    assert "req/min" not in result.stdout


# --- the second example: gunicorn gthread dynos and a database --------------------------------


def test_example_2_verbatim_is_refused_naming_the_database(tmp_path):
    # As written, the example offers its database 3.6 times what it can do: 16 listings/s
    # each use it for a mean of 0.45 s (lognormal, median 300 ms, sigma 0.9), 7.2 s of work a
    # second for 2 servers. An open loop with no timeout has no steady state there, so
    # dynosim refuses it, naming the bottleneck (timeouts and H12s are issue #12).
    result = run_cli("run", str(write(tmp_path, "shop.toml", EXAMPLE_2)))
    assert_one_line_error(result, "shop.toml", "unstable", "shared resource's servers", "3.598", code=3)


def test_example_2_figures(tmp_path):
    report = run_json(tmp_path, "shop.toml", EXAMPLE_2_AT_4_PER_S)
    assert report["slots"] == 9  # 3 processes × 3 threads
    summary = report["summary"]
    assert "dyno" in summary and "closed_loop" not in summary
    assert 0 < mean(summary, "resources.db.utilisation") < 1
    assert set(summary["classes"]) == {"listing", "health"}
    for rep in report["per_replication"]:
        db = rep["resources"]["db"]
        assert 0 < db["utilisation"] < 1 and db["uses"] > 0
        counts = {name: c["requests"] for name, c in rep["classes"].items()}
        # The health check uses neither the database nor more than 1 ms of CPU.
        assert rep["classes"]["health"]["response"]["mean"] < rep["classes"]["listing"]["response"]["mean"]
        # Weights 0.8 and 0.2 over ~1200 requests: the listings' share within 5 standard errors.
        share = counts["listing"] / (counts["listing"] + counts["health"])
        assert abs(share - 0.8) < 5 * math.sqrt(0.8 * 0.2 / sum(counts.values()))


def test_example_2_table(tmp_path):
    result = run_cli("run", str(write(tmp_path, "shop.toml", EXAMPLE_2_AT_4_PER_S)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("shop: 240 req/min")


# --- describe, sweep, capacity, cost ----------------------------------------------------------


def test_describe_names_the_bottleneck(tmp_path):
    from dynosim import Scenario

    ab = Scenario.load(write(tmp_path, "ab.toml", EXAMPLE_1)).describe()
    assert ab["closed_loop"] and ab["stable"]  # a closed loop runs at any load
    shop = Scenario.load(write(tmp_path, "shop.toml", EXAMPLE_2)).describe()
    assert not shop["closed_loop"] and not shop["stable"]
    assert shop["bottleneck"] == "resource" and shop["offered_load"] == pytest.approx(3.598, abs=1e-3)
    ok = Scenario.load(write(tmp_path, "ok.toml", EXAMPLE_2_AT_4_PER_S)).describe()
    assert ok["stable"] and ok["offered_load"] < 1


def test_sweep_varies_the_app_processes_of_a_closed_loop(tmp_path):
    path = write(tmp_path, "ab.toml", EXAMPLE_1_NO_WARMUP)
    result = run_cli("sweep", str(path), "--vary", "app.processes=1..3", "--replications", "2",
                     "--out", str(tmp_path / "sw"))
    assert result.returncode == 0, result.stderr
    rows = json.loads((tmp_path / "sw.json").read_text())["rows"]
    # A closed loop is never unstable, whatever its clients could send.
    assert [(r["app.processes"], r["status"]) for r in rows] == [(1, "ok"), (2, "ok"), (3, "ok")]
    assert [r["slots"] for r in rows] == [1, 2, 3]


def test_capacity_says_when_no_fleet_relieves_the_database(tmp_path):
    result = run_cli("capacity", str(write(tmp_path, "shop.toml", EXAMPLE_2)),
                     "--target", "response.p99 <= 5s")
    assert_one_line_error(result, "unstable at any number of dynos", "shared resource's servers", code=3)


def test_capacity_slots_with_app_is_refused(tmp_path):
    result = run_cli("capacity", str(write(tmp_path, "shop.toml", EXAMPLE_2_AT_4_PER_S)),
                     "--target", "response.p99 <= 5s", "--slots", "1,2")
    assert_one_line_error(result, "--slots", "[app]")


def test_cost_prices_the_fleet_type_unless_told_otherwise():
    from dynosim.cost import Pricing

    assert Pricing.from_scenario({"fleet": {"type": "standard-2x"}}, None).dyno_type == "standard-2x"
    assert Pricing.from_scenario({"fleet": {"type": "Performance-M"}}, None).dyno_type == "performance-m"
    told = {"fleet": {"type": "standard-2x"}, "cost": {"dyno_type": "2013-1x"}}
    assert Pricing.from_scenario(told, None).dyno_type == "2013-1x"
    assert Pricing.from_scenario(told, None, "eco").dyno_type == "eco"
    assert Pricing.from_scenario({"fleet": {"dynos": 3}}, None).dyno_type == "standard-1x"


def test_default_policy_is_the_engines():
    from dynosim.keys import reference
    from dynosim.scenario import DEFAULT_POLICY

    (policy,) = [k for k in reference()["keys"] if k["path"] == "router.policy"]
    assert json.loads(policy["default"]) == DEFAULT_POLICY


def test_the_dyno_models_metrics_are_metrics_sweep_and_results_know() -> None:
    from dynosim.results import is_fraction_metric, is_metric, is_time_metric

    for name in ("dyno.cpu_utilisation", "closed_loop.requests_per_s", "failed.fraction",
                 "resources.db.pool_wait.p99", "resources.db.utilisation", "classes.listing.response.p50"):
        assert is_metric(name), name
    for name in ("dyno.nope", "resources.db", "resources.db.pool_wait.p42", "closed_loop"):
        assert not is_metric(name), name
    assert is_time_metric("resources.db.pool_wait.p99") and is_time_metric("closed_loop.latency.p50")
    assert is_fraction_metric("resources.db.utilisation") and not is_fraction_metric("closed_loop.requests_per_s")


def test_a_closed_loop_sweep_plots_requests_per_second_by_default(tmp_path) -> None:
    result = run_cli("sweep", "unicorn-2011", "--vary", "app.processes=1,2", "--out", str(tmp_path / "s"))
    assert result.returncode == 0, result.stderr
    assert "closed_loop.requests_per_s" in result.stdout
    rows = list(csv.DictReader(open(f"{tmp_path / 's'}.csv")))
    assert [round(float(r["closed_loop.requests_per_s"])) for r in rows] == [250, 500]


def test_a_metric_the_scenario_does_not_report_is_one_line(tmp_path) -> None:
    result = run_cli("sweep", "rapgenius", "--vary", "fleet.dynos=70,80", "--metric", "dyno.cpu_utilisation",
                     "--set", "run.duration=10s", "--set", "run.replications=2", "--out", str(tmp_path / "s"))
    assert result.returncode != 0
    assert "does not report 'dyno.cpu_utilisation'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# Issue 25: the scheduler's keys, refused in one line each (file, key path, what was expected).
@pytest.mark.parametrize("key,value,words", [
    ("fleet.cpu_sharing", '"rr"', ["fleet.cpu_sharing", '"slices" or "ps"']),
    ("fleet.cpu_quantum", '"0s"', ["fleet.cpu_quantum", "at least 1 µs"]),
    ("fleet.cpu_jitter", "-1", ["fleet.cpu_jitter", "from 0 to 10"]),
    ("app.lock", '"maybe"', ["app.lock", '"gil", "gvl" or "none"']),
    ("app.switch_interval", '"0s"', ["app.switch_interval", "> 0"]),
    ("app.timeslice", '"-1s"', ["app.timeslice", "> 0"]),
    ("app.request_cpu", '"abc"', ["app.request_cpu", "duration"]),
])
def test_the_scheduler_s_keys_are_checked(tmp_path, key, value, words):
    section, name = key.split(".")
    path = tmp_path / "s.toml"
    path.write_text(f"""
[arrivals]
process = "closed"
clients = 4
[request]
phases = [{{ cpu = "10ms" }}, {{ io = "40ms" }}]
[fleet]
dynos = 1
{name + " = " + value if section == "fleet" else ""}
[app]
server = "gunicorn"
{name + " = " + value if section == "app" else ""}
[run]
duration = "10s"
""")
    assert_one_line_error(run_cli("run", str(path)), str(path), *words)


def test_a_quantum_that_would_cost_too_many_events_is_refused(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("""
[arrivals]
process = "closed"
clients = 50
[request]
phases = [{ cpu = "10ms" }, { io = "40ms" }]
[fleet]
dynos = 1
cores = 2
cpu_quantum = "1us"
[app]
server = "gunicorn"
processes = 8
[run]
duration = "100000s"
""")
    assert_one_line_error(run_cli("run", str(path)), "fleet.cpu_quantum", "cpu_sharing = \"ps\"")


def test_describe_says_which_scheduler_and_lock():
    import dynosim._dynosim as _d
    doc = {"arrivals": {"process": "closed", "clients": 2}, "request": {"phases": [{"cpu": "1ms"}]},
           "fleet": {"dynos": 1}, "app": {"server": "puma", "request_cpu": "1ms"}, "run": {"duration": 10}}
    d = json.loads(_d.describe(json.dumps(doc), "."))
    assert d["app"]["lock"] == "gvl" and d["app"]["timeslice"] == 0.1
    assert abs(d["app"]["request_cpu"] - 0.001) < 1e-12
    assert d["cpu"] == {"sharing": "slices", "quantum": 0.003, "jitter": 0.05}
    doc["fleet"]["cpu_sharing"] = "ps"
    doc["app"] = {"server": "gunicorn", "lock": True}
    d = json.loads(_d.describe(json.dumps(doc), "."))
    assert d["app"]["lock"] == "gil" and d["cpu"]["jitter"] == 0.0


def test_the_server_s_cpu_needs_the_cpu_model(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("""
[arrivals]
process = "poisson"
rate = 10
[service]
distribution = "exponential"
mean = "50ms"
[fleet]
dynos = 2
[app]
server = "gunicorn"
request_cpu = "1ms"
""")
    assert_one_line_error(run_cli("run", str(path)), str(path), "app.request_cpu", "[request]")
