"""Feedback loops from the command line (issue 35): the clients' retries, faults, the stability
verdict and `dynosim stability`'s map, the built-in `retry-storm`, and the mistakes one can make
with them. The theory checks are the engine's (crates/dynosim-engine/tests/feedback.rs); here,
the interface: the keys, the metrics' names, the commands and their outputs."""

import json
import math

import pytest

from conftest import assert_one_line_error

import dynosim

#: A small bistable system (docs/feedback.md, "The simplest model"): one M/M/1 server of
#: μ = 1000/s, clients with a 50 ms timeout and 3 tries, a 5 s slowdown by 5 at 2 min.
MM1 = """
name = "mm1-retries"
[arrivals]
process = "poisson"
rate = 350
timeout = "50ms"
[arrivals.retry]
attempts = 3
backoff = "constant"
base = 0
jitter = "none"
[service]
distribution = "exponential"
mean = "1ms"
[fleet]
dynos = 1
[router]
timeout = "off"
[[faults]]
at = "2min"
for = "5s"
kind = "slowdown"
factor = 5
[run]
warmup = "10s"
duration = "12min"
replications = 3
"""


@pytest.fixture
def mm1(tmp_path):
    path = tmp_path / "mm1.toml"
    path.write_text(MM1)
    return path


def test_retries_and_the_verdict_are_in_the_json(cli, mm1):
    result = cli("run", str(mm1), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["results"][0]["summary"]
    # nλ = 1050 > μ: it stays down, every request making its 3 tries near the end.
    assert summary["stability"]["recovered"]["mean"] == 0.0
    assert summary["stability"]["recovery_time"] is None
    assert summary["stability"]["recovered_runs"]["mean"] == 0
    assert 2.5 < summary["retries"]["attempts_per_request"]["mean"] <= 3.0
    retries = summary["retries"]
    assert retries["count"]["mean"] == retries["client"]["mean"] > 0
    assert retries["router"]["mean"] == retries["app"]["mean"] == 0
    assert retries["attempts"]["mean"] == pytest.approx(
        summary["requests"]["mean"] + retries["count"]["mean"])


def test_a_budget_or_fewer_users_recover(cli, mm1):
    for override in ['arrivals.retry.budget={kind="grpc",token_ratio=0.1}', "arrivals.rate=300"]:
        result = cli("run", str(mm1), "--json", "--set", override)
        assert result.returncode == 0, result.stderr
        stability = json.loads(result.stdout)["results"][0]["summary"]["stability"]
        assert stability["recovered"]["mean"] == 1.0, override
        assert stability["recovered_runs"]["mean"] == 3
        assert stability["recovery_time"]["mean"] >= 0


def test_run_shows_tries_and_recovery(cli, mm1):
    result = cli("run", str(mm1))
    assert result.returncode == 0, result.stderr
    for column in ("tries per", "recovered", "recovery"):
        assert column in result.stdout


def test_the_api_reads_the_new_metrics(mm1):
    r = dynosim.run(str(mm1), replications=2)[0]
    assert r["stability.recovered"] == 0.0
    assert math.isnan(r["stability.recovery_time"])
    assert r["retries.attempts_per_request"] > 2.5
    row = r.row()
    assert "retries.denied" in row and "stability.recovered" in row


def test_stability_map_of_the_issue(cli, mm1, tmp_path):
    """`dynosim stability SCENARIO --vary arrivals.rate=... --vary faults.0.for=...`: the map
    in the terminal, --json, --plot, --out and --html."""
    out = tmp_path / "map"
    result = cli("stability", str(mm1), "--vary", "arrivals.rate=300,350", "--vary", "faults.0.for=1,5",
                 "--replications", "2", "--json", "--out", str(out), "--plot", str(tmp_path / "map.svg"),
                 "--html", str(tmp_path / "map.html"))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    grid = doc["map"]
    assert grid["load_key"] == "arrivals.rate" and grid["trigger_key"] == "faults.0.for"
    assert grid["loads"] == [300, 350] and grid["triggers"] == [1, 5]
    recovered = [[c["recovered"] for c in row] for row in grid["cells"]]
    # Below nλ = μ every cell recovers; above, a trigger of 5 s leaves it down.
    assert recovered[0] == [1.0, 1.0]
    assert recovered[1][1] == 0.0
    assert grid["cells"][1][1]["recovery_time"] is None
    for path in (tmp_path / "map.csv", tmp_path / "map.json", tmp_path / "map.png", tmp_path / "map.svg",
                 tmp_path / "map.html"):
        assert path.exists() and path.stat().st_size > 0, path
    assert json.loads((tmp_path / "map.json").read_text())["map"] == grid
    table = cli("stability", str(mm1), "--vary", "arrivals.rate=300,350", "--vary", "faults.0.for=1,5",
                "--replications", "2")
    assert table.returncode == 0, table.stderr
    assert "faults.0.for" in table.stdout and "100%" in table.stdout and "0%" in table.stdout


def test_stability_lengthens_runs_to_see_the_recovery_window(cli, mm1):
    # 12 min after a 10 s warm-up: a fault ending at 2min5s + 10 min of window needs 12.1 min.
    result = cli("stability", str(mm1), "--vary", "arrivals.rate=300", "--vary", "faults.0.for=5,30",
                 "--replications", "2", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["lengthened"]  # the 30 s trigger needs 12min25s of measured time
    assert all(c["status"] == "ok" for row in doc["map"]["cells"] for c in row)


def test_retry_storm_builtin_stays_down_and_its_defences_work(cli):
    base = ["--replications", "2"]
    down = cli("run", "retry-storm", "--json", *base)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["results"][0]["summary"]["stability"]["recovered"]["mean"] == 0.0
    for defence in ["arrivals.retry.attempts=1", 'arrivals.retry.budget={kind="grpc",token_ratio=0.1}',
                    "app.wait_timeout=25s", "arrivals.breaker={}",
                    'router.concurrency_limit={algorithm="gradient2"}']:
        up = cli("run", "retry-storm", "--json", "--set", defence, *base)
        assert up.returncode == 0, up.stderr
        summary = json.loads(up.stdout)["results"][0]["summary"]
        assert summary["stability"]["recovered"]["mean"] == 1.0, defence
        if defence == "arrivals.breaker={}":
            # Opened once for its 60 s (of 30 minutes), failing those tries at once.
            assert summary["breaker"]["opened"]["mean"] == 1.0
            assert summary["breaker"]["open_fraction"]["mean"] == pytest.approx(60 / 1800)
            assert summary["breaker"]["rejected"]["mean"] > 0
            assert summary["error_counts"]["breaker_open"]["mean"] > 0
        if defence.startswith("router.concurrency_limit"):
            # The slowdown's excess rejected at once: no try waits out its client, none is wasted.
            assert summary["limit"]["rejected"]["mean"] > 0
            assert summary["error_counts"]["limit_rejected"]["mean"] == summary["error_counts"]["total"]["mean"]
            assert summary["wasted"]["thread_seconds"]["mean"] == 0
            assert 20 <= summary["limit"]["router_mean"]["mean"] <= 200


def test_retry_storm_with_the_databases_timeout_as_docs_feedback_md_measures_it(cli):
    """The database's statement_timeout with the app's retries leaves retry-storm down (the app retries every
    stopped query, so none fails, and the storm goes on); with app.wait_timeout beside it, it recovers."""
    base = ["--replications", "2", "--set", "resources.db.timeout=3s"]
    down = cli("run", "retry-storm", "--json", *base, "--set", "resources.db.retries=2")
    assert down.returncode == 0, down.stderr
    summary = json.loads(down.stdout)["results"][0]["summary"]
    assert summary["stability"]["recovered"]["mean"] == 0.0
    assert summary["retries"]["app"]["mean"] > 0
    assert summary["retries"]["count"]["mean"] > summary["retries"]["client"]["mean"]
    assert summary["error_counts"]["resource_timeout"]["mean"] == 0
    up = cli("run", "retry-storm", "--json", *base, "--set", "app.wait_timeout=25s")
    assert up.returncode == 0, up.stderr
    summary = json.loads(up.stdout)["results"][0]["summary"]
    assert summary["stability"]["recovered"]["mean"] == 1.0
    assert summary["error_counts"]["resource_timeout"]["mean"] > 0


@pytest.mark.parametrize(
    "override, fragments",
    [
        ("resources.db.timeout=-2", ["resources.db.timeout:", "positive duration"]),
        ('resources.db.timeout="soon"', ["resources.db.timeout:", "expected a duration", "soon"]),
        ("resources.db.retries=-1", ["resources.db.retries:", "whole number", "-1"]),
        ("resources.db.retries=1.5", ["resources.db.retries"]),
    ],
)
def test_a_resources_timeout_and_retries_mistakes_are_one_line(cli, override, fragments):
    result = cli("run", "retry-storm", "--set", override, "--replications", "2")
    assert_one_line_error(result, *fragments)


@pytest.mark.parametrize(
    "override, fragments",
    [
        # The issue's four: attempts = 0, a jitter name unknown, a fault outside the run, a
        # budget ratio above 1.
        ("arrivals.retry.attempts=0", ["arrivals.retry.attempts:", "from 1", "got 0"]),
        ('arrivals.retry.jitter="fuzzy"', ["arrivals.retry.jitter:", 'unknown jitter "fuzzy"', "decorrelated"]),
        ('faults.0.at="2h"', ["faults[0].at:", "inside the measured window", "7200 s"]),
        ('faults.0.for="2h"', ["faults[0].for:", "after the run's end", "a fault outside the run"]),
        ('arrivals.retry.budget={kind="grpc",token_ratio=1.5}',
         ["arrivals.retry.budget.token_ratio:", "at most 1", "1.5"]),
        ('arrivals.retry.budget={kind="finagle",percent=120}', ["arrivals.retry.budget.percent:", "0 to 100"]),
        ('arrivals.retry.budget={kind="envoy"}', ["arrivals.retry.budget.kind:", 'unknown budget kind "envoy"']),
        ('arrivals.retry.on=["timeout","4xx"]', ["arrivals.retry.on[1]:", "unknown outcome", '"4xx"']),
        ('faults.0.kind="meteor"', ["faults[0].kind:", 'unknown fault kind "meteor"', "dynos_lost"]),
        ('faults.0.target="redis"', ["faults[0].target:", 'no resource "redis"']),
        ("faults.0.factor=0", ["faults[0].factor:", "above 0"]),
        ("faults.1.for=5", ["--set: faults.1.for:", "1 table(s)", "no table 1"]),
        ('app.wait_timeout="0s"', ["app.wait_timeout:"]),
        ('app.service_timeout="0s"', ["app.service_timeout:", "positive duration"]),
        ("app.service_timeout=-1", ["app.service_timeout:", "positive duration"]),
        ('app.service_timeout="soon"', ["app.service_timeout:", "expected a duration", "soon"]),
        ('run.recovery_interval="2.5s"', ["run.recovery_interval:", "whole number of seconds"]),
        ('router.retry_on=["refused","502"]', ["router.retry_on[1]:", "unknown outcome", '"502"']),
        ("router.retry_budget={percent=150}", ["router.retry_budget.percent:", "0 to 100"]),
        ("router.retry_budget={min_concurrency=3}", ["router.retry_budget:", "router.retry_on"]),
        ("router.retry_budget={ratio=0.2}", ["router.retry_budget", "ratio"]),
        ("arrivals.breaker={failure_rate=150}", ["arrivals.breaker.failure_rate:",
                                                 "expected a percentage from 0 to 100", "150"]),
        ('arrivals.breaker={window_type="sliding"}', ["arrivals.breaker.window_type:", 'unknown window type "sliding"',
                                                      "time_based"]),
        ("arrivals.breaker={half_open_calls=0}", ["arrivals.breaker.half_open_calls:", "from 1", "got 0"]),
        ('arrivals.breaker={open_for="0s"}', ["arrivals.breaker.open_for:", "above 0"]),
        ("arrivals.breaker={slots=3}", ["arrivals.breaker", "slots"]),
        ('router.concurrency_limit={algorithm="bbr"}', ["router.concurrency_limit.algorithm:",
                                                        'unknown algorithm "bbr"', "gradient2"]),
        ('app.concurrency_limit={algorithm="fixed"}', ["app.concurrency_limit.limit:", "missing"]),
        ('app.concurrency_limit={algorithm="fixed",limit=0}', ["app.concurrency_limit.limit:", ">= 1", "got 0"]),
        ('router.concurrency_limit={algorithm="aimd",min_limit=0}', ["router.concurrency_limit.min_limit:",
                                                                     ">= 1"]),
        ('router.concurrency_limit={algorithm="aimd",backoff_ratio=1.2}',
         ["router.concurrency_limit.backoff_ratio:", "0.5", "1.2"]),
        ('app.concurrency_limit={algorithm="gradient2",smoothing=0}', ["app.concurrency_limit.smoothing:",
                                                                        "above 0"]),
        ('app.concurrency_limit={algorithm="gradient2",rtt_tolerance=0.5}',
         ["app.concurrency_limit.rtt_tolerance:", "at least 1"]),
        ('app.concurrency_limit={algorithm="vegas",min_limit=5}', ["app.concurrency_limit.min_limit:",
                                                                    "unknown key"]),
    ],
)
def test_mistakes_are_one_line(cli, mm1, override, fragments):
    result = cli("run", str(mm1), "--set", override, "--replications", "2")
    assert_one_line_error(result, *fragments)


def test_service_timeout_is_reported_and_refused_by_the_direct_engine(cli):
    """`app.service_timeout` adds `errors.service_timeout` to the JSON; the direct engine says
    it cannot run it, in one line."""
    result = cli("run", "rapgenius", "--json", "--duration", "10s", "--replications", "2",
                 "--set", "app.service_timeout=200ms")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["results"][0]["summary"]
    assert 0 < summary["errors"]["service_timeout"]["mean"] < 1
    plain = cli("run", "rapgenius", "--json", "--duration", "10s", "--replications", "2")
    assert "service_timeout" not in plain.stdout
    refused = cli("run", "rapgenius", "--duration", "10s", "--set", "app.service_timeout=1s",
                  "--set", "run.engine=direct")
    assert_one_line_error(refused, "run.engine:", "app.service_timeout")


def test_recovery_keys_need_faults(cli):
    result = cli("run", "rapgenius", "--set", "run.recovery_window=5min", "--duration", "10s")
    assert_one_line_error(result, "run.recovery_window:", "[[faults]]", "has none")


def test_stability_needs_faults_and_two_axes(cli, mm1):
    result = cli("stability", "rapgenius", "--vary", "arrivals.rate=100,120", "--vary", "fleet.dynos=75,80")
    assert_one_line_error(result, "no [[faults]]")
    result = cli("stability", str(mm1), "--vary", "arrivals.rate=300,350")
    assert_one_line_error(result, "two axes")


def test_a_closed_loop_retries_too(cli, tmp_path):
    """ab -n 2000 -c 20 against a dyno whose app is out for 5 s: clients retry (refused tries
    come back after their backoff), the run ends when every request is answered, and every
    request counts once."""
    path = tmp_path / "ab.toml"
    path.write_text("""
name = "ab-retries"
[arrivals]
process = "closed"
clients = 20
requests = 2000
[arrivals.retry]
attempts = 4
on = ["5xx"]
base = "1s"
jitter = "none"
[service]
distribution = "exponential"
mean = "20ms"
[fleet]
dynos = 1
slots = 4
[[faults]]
at = "1s"
for = "5s"
kind = "outage"
[run]
replications = 2
""")
    result = cli("run", str(path), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["results"][0]["summary"]
    assert summary["requests"]["mean"] == 2000
    assert summary["closed_loop"]["completed"]["mean"] == 2000
    assert summary["retries"]["attempts"]["mean"] > 2000
    assert summary["retries"]["count"]["mean"] == summary["retries"]["attempts"]["mean"] - 2000


#: The issue's router keys as written: a fleet whose dynos crash in the window, routers that
#: retry elsewhere on a refusal, an H12 or a dyno's error, under Envoy's budget.
ROUTER_RETRIES = """
name = "router-retries"
[arrivals]
process = "poisson"
rate = 40
[service]
distribution = "exponential"
mean = "200ms"
[fleet]
dynos = 10
slots = 2
[router]
timeout = "2s"
retry_on = ["refused", "timeout", "5xx"]
retry_budget = { percent = 20, min_concurrency = 3 }
[[faults]]
at = "100s"
kind = "dynos_lost"
count = 3
[run]
warmup = "10s"
duration = "5min"
replications = 2
recovery_window = "1min"
"""


def test_the_router_retries_elsewhere_as_the_issue_writes_it(cli, tmp_path):
    path = tmp_path / "router-retries.toml"
    path.write_text(ROUTER_RETRIES)
    result = cli("run", str(path), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["results"][0]["summary"]
    # The crash's requests went to other dynos: retried by the router, none failed as crashed.
    assert summary["retries"]["router"]["mean"] > 0
    assert summary["retries"]["client"]["mean"] == 0
    assert summary["errors"]["crashed"]["mean"] == 0
    # Without "5xx" they fail.
    result = cli("run", str(path), "--json", "--set", 'router.retry_on=["refused","timeout"]')
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["results"][0]["summary"]["errors"]["crashed"]["mean"] > 0


def test_the_router_retries_refuse_the_direct_engine(cli, tmp_path):
    result = cli("run", "rapgenius", "--duration", "10s", "--set", 'router.retry_on=["timeout"]',
                 "--set", "run.engine=direct")
    assert_one_line_error(result, "router.retry_on")
