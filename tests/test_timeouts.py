"""Timeouts, caps and errors (issue 12) from the Python API and the CLI: the error metrics,
capacity targets on errors combined with latency, the time series' errors by kind, and one
clear line for each bad value. The engine's theory checks are in
crates/dynosim-engine/tests/timeouts.rs."""

import csv
import json

import pytest

import dynosim
from dynosim import Scenario
from dynosim.capacity import min_dynos, parse_target
from dynosim.errors import ScenarioError

BASE = {
    "name": "timeouts",
    "arrivals": {"process": "poisson", "rate": "30/s"},
    "service": {"distribution": "lognormal", "median": "150ms", "sigma": 1.2},
    "fleet": {"dynos": 12},
    "router": {"timeout": "2s"},
    "run": {"duration": "2min", "warmup": "40s", "replications": 3, "seed": 5},
}


def scenario(**router) -> Scenario:
    doc = json.loads(json.dumps(BASE))
    doc["router"].update(router)
    return Scenario.load(doc)


def test_h12_errors_are_answers_and_the_client_sees_at_most_the_timeout():
    (result,) = dynosim.run(scenario(), policies=["random"])
    for rep in result.per_replication:
        assert rep["error_counts"]["h12"] > 0
        assert rep["error_counts"]["total"] == rep["error_counts"]["h12"]
        assert rep["errors"]["h12"] == pytest.approx(rep["error_counts"]["h12"] / rep["requests"])
        # The client's view stops at the deadline; the app's successes are all under it.
        assert rep["response"]["max"] <= 2.0 + 1e-6
        assert rep["response_ok"]["max"] <= 2.0 + 1e-6
        # The dyno's view is not cut: some requests waited longer than the timeout.
        assert rep["queue"]["max"] > 2.0 or rep["wasted"]["thread_seconds"] > 0
        assert rep["goodput"] < rep["throughput"]
    assert result.report["engine"] == "direct"  # random routing: worked out per request


def test_off_and_the_default():
    (off,) = dynosim.run(scenario(timeout="off"), policies=["random"])
    assert off["errors.total"] == 0
    (default,) = dynosim.run(Scenario.load({k: v for k, v in BASE.items() if k != "router"}), policies=["random"])
    # 30 s by default: nothing here takes that long.
    assert default["errors.h12"] == 0
    assert default["response.mean"] == pytest.approx(off["response.mean"])


def test_capacity_on_an_error_target_combined_with_latency():
    s = scenario(timeout="5s")
    targets = [parse_target("errors.h12 <= 0.5%"), parse_target("response.p99 <= 4s")]
    assert targets[0].value == pytest.approx(0.005)
    result = min_dynos(s, "random", targets, max_dynos=500)
    n = result.dynos
    assert n is not None
    assert result.evaluated[n] is True
    assert result.evaluated.get(n - 1) is False
    assert result.estimates["errors.h12"].ci_high <= 0.005


def test_the_cap_refuses_and_the_table_shows_errors(cli, tmp_path):
    path = tmp_path / "cap.toml"
    path.write_text(
        'name = "cap"\n[arrivals]\nprocess = "poisson"\nrate = "40/s"\n'
        '[service]\ndistribution = "exponential"\nmean = "250ms"\n[fleet]\ndynos = 3\n'
        '[router]\npolicy = "intelligent"\nmax_in_flight = "4/dyno"\n'
        '[run]\nduration = "1min"\nreplications = 2\n'
    )
    # 10 busy slots needed, 3 available: refused as unstable without the cap, run with it.
    out = cli("run", str(path), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)["results"][0]
    assert report["summary"]["errors"]["h11"]["mean"] > 0.5
    assert report["engine"] == "events"
    table = cli("run", str(path))
    assert "errors" in table.stdout


def test_the_timeseries_counts_errors_by_kind(cli, tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "burst"\n[arrivals]\nprocess = "poisson"\nrate = "5/s"\n'
        '[[arrivals.burst]]\nat = "20s"\nclients = 200\n'
        '[service]\ndistribution = "constant"\nvalue = "200ms"\n[fleet]\ndynos = 2\n'
        '[router]\ntimeout = "5s"\n[run]\nduration = "1min"\nwarmup = "0s"\nreplications = 2\n'
    )
    out = tmp_path / "series.csv"
    done = cli("run", str(path), "--timeseries", str(out), "--interval", "1s")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open()))
    h12 = [float(r["h12_per_s"]) for r in rows]
    # 200 requests at once on 2 single-thread dynos of 200 ms: 20 s of work each; those that
    # wait past 5 s time out, after the burst and not before it.
    assert sum(h12) > 100
    assert all(x == 0 for r, x in zip(rows, h12) if float(r["time"]) < 25)
    assert [float(r["errors_per_s"]) for r in rows] == h12


@pytest.mark.parametrize("key, value, expected", [
    ("router.timeout", "0s", "router.timeout"),
    ("router.timeout", "soon", "router.timeout"),
    ("router.queue_timeout", -1, "router.queue_timeout"),
    ("router.max_in_flight", 0, "router.max_in_flight"),
    ("router.max_in_flight", "200/router", "router.max_in_flight"),
    ("arrivals.timeout", {"distribution": "nope"}, "arrivals.timeout"),
])
def test_bad_values_get_one_clear_line(key, value, expected):
    with pytest.raises(ScenarioError) as e:
        scenario().with_overrides({key: value}).validate()
    text = str(e.value)
    assert expected in text and "\n" not in text


def test_the_gunicorn_cron_seed_tells_its_story():
    """lowering-h12-errors-gunicorn (docs/timeouts.md): the cron burst gives H12s with sync
    workers, fewer with threads, no fewer with gevent (the database is the limit), none with
    lighter queries; the dyno works on after each H12."""
    cases = {label: dynosim.run(case, warn=False) for label, case in Scenario.load("gunicorn-cron").cases}
    h12 = {label: results[0].estimate("errors.h12") for label, results in cases.items()}
    sync, threads = h12["sync, 3 workers"], h12["gthread, 3 workers x 3 threads"]
    gevent, lighter = h12["gevent, 3 workers"], h12["sync, lighter queries"]
    assert sync.ci_low > 0.5
    assert threads.ci_high < sync.ci_low
    assert gevent.ci_low > threads.ci_high
    assert lighter.mean == 0
    wasted = cases["sync, 3 workers"][0].estimate("wasted.thread_seconds")
    assert wasted.ci_low > 0


def test_the_hello_world_ramp_seed_has_its_shape():
    """hello-heroku-world-benchmarks (docs/timeouts.md): one dyno tops out near 2,500 req/s,
    the app near 12,000 whatever its dynos (below 1,000 a dyno at 16), latency held near the
    100 ms shedding ceiling, and errors past the ceiling."""
    from dynosim.ramp import ramp

    rows = ramp(Scenario.load("hello-world-ramp"), [2000.0, 16000.0])
    at = {(r["case"], r["offered"]): r for r in rows}
    assert all(r["status"] == "ok" for r in rows)
    # Below every ceiling but one dyno's, responses keep up.
    for case in ("2 dynos", "4 dynos", "8 dynos", "16 dynos"):
        assert at[(case, 2000.0)]["response_rate"] == pytest.approx(2000, rel=0.02)
        assert at[(case, 2000.0)]["errors"] == 0
    one, sixteen = at[("1 dyno", 16000.0)], at[("16 dynos", 16000.0)]
    assert one["response_rate"] == pytest.approx(2500, rel=0.03)
    assert sixteen["response_rate"] == pytest.approx(12000, rel=0.03)
    assert sixteen["response_rate"] / 16 < 1000
    assert at[("8 dynos", 16000.0)]["response_rate"] == pytest.approx(sixteen["response_rate"], rel=0.01)
    for r in (one, sixteen):
        assert r["errors"] > 0.2
        assert 0.05 < r["response_p99"] < 0.15


def test_the_issues_capacity_target_on_errors_runs_verbatim(cli):
    """Issue #12: `capacity --target "errors.h12 <= 0.1%"`, combined with a latency target."""
    out = cli("capacity", "rapgenius", "--set", "router.timeout=10s", "--target", "errors.h12 <= 0.1%",
              "--target", "response.p99 <= 4s", "--policy", "random,intelligent", "--json")
    assert out.returncode == 0, out.stderr
    found = {r["policy"]: r for r in json.loads(out.stdout)["results"]}
    for policy in ("random", "intelligent"):
        r = found[policy]
        assert r["dynos"] is not None
        assert r["estimates"]["errors.h12"]["ci_high"] <= 0.001
        assert r["evaluated"][str(r["dynos"])] is True
    # Random routing needs many times the dynos of intelligent routing for the same errors.
    assert found["random"]["dynos"] > 10 * found["intelligent"]["dynos"]
