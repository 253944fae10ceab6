"""Time-varying and bursty traffic (issue 12) from the CLI and the Python API: a schedule, a
sine, batch and on/off sources and cron bursts run; a burst adds exactly its requests and
leaves the base traffic alone; `dynosim keys` documents them."""

import json

import dynosim
from dynosim import Scenario

BASE = {
    "name": "traffic",
    "arrivals": {"process": "poisson", "rate": [["0s", "20/s"], ["1min", "60/s"], ["90s", "30/s"]]},
    "service": {"distribution": "exponential", "mean": "50ms"},
    "fleet": {"dynos": 6},
    "run": {"duration": "2min", "warmup": "1s", "replications": 3, "seed": 7},
}


def with_arrivals(**arrivals) -> Scenario:
    doc = json.loads(json.dumps(BASE))
    doc["arrivals"].update(arrivals)
    return Scenario.load(doc)


def requests(scenario: Scenario, policy: str = "random") -> list:
    (result,) = dynosim.run(scenario, policies=[policy])
    return [rep["requests"] for rep in result.per_replication]


def test_a_burst_adds_exactly_its_requests_on_the_same_base_traffic():
    base = requests(with_arrivals())
    burst = requests(with_arrivals(burst=[{"at": "70s", "clients": 300, "requests": 2},
                                          {"at": "10s", "clients": 5, "every": "30s"}]))
    # 600 at 70 s; 5 at 10, 40, 70 and 100 s.
    assert [b - a for a, b in zip(base, burst)] == [620] * 3
    # Replications differ: the schedule is random, the bursts' counts are not.
    assert len(set(base)) > 1


def test_every_process_runs_on_both_engines_alike():
    for arrivals in [
        {"rate": {"mean": "40/s", "amplitude": "30/s", "period": "1min", "peak": "20s"}},
        {"process": "batch", "rate": "10/s", "size": {"distribution": "geometric", "mean": 3}},
        {"process": "on_off", "rate": "80/s", "on": "5s", "off": "10s"},
    ]:
        scenario = with_arrivals(**arrivals)
        direct = requests(scenario.with_overrides({"run.engine": "direct"}))
        events = requests(scenario.with_overrides({"run.engine": "events"}))
        assert direct == events, arrivals


def test_a_transient_peak_over_capacity_runs(cli, tmp_path):
    # 6 dynos at 50 ms serve 120/s: the peak of 400/s for 10 s is absorbed, the long-run rate
    # of 30/s is what the stability check sees.
    (tmp_path / "peak.toml").write_text(
        'name = "peak"\n'
        "[arrivals]\n"
        'process = "poisson"\n'
        'rate = [["0s", "30/s"], ["30s", "30/s"], ["30s", "400/s"], ["40s", "400/s"], ["40s", "30/s"]]\n'
        "[[arrivals.burst]]\n"
        'at = "1min"\n'
        "clients = 200\n"
        'jitter = { distribution = "exponential", mean = "2s" }\n'
        "[service]\n"
        'distribution = "exponential"\n'
        'mean = "50ms"\n'
        "[fleet]\n"
        "dynos = 6\n"
        "[run]\n"
        'duration = "2min"\n'
        'warmup = "1s"\n'
        "replications = 2\n"
    )
    result = cli("run", "peak.toml", "--policy", "random", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "1,800 req/min" in result.stdout


def test_keys_documents_the_traffic_keys(cli):
    result = cli("keys")
    assert result.returncode == 0, result.stderr
    for word in ["[[arrivals.burst]]", "jitter", "every", "batch", "on_off", "schedule", "sine"]:
        assert word in result.stdout, word


def test_changing_the_process_keeps_the_bursts():
    scenario = with_arrivals(burst=[{"at": "70s", "clients": 300}])
    changed = scenario.with_overrides(["arrivals.process=on_off", "arrivals.rate=40/s",
                                       "arrivals.on=5s", "arrivals.off=5s"])
    assert changed.doc["arrivals"] == {"process": "on_off", "rate": "40/s", "on": "5s", "off": "5s",
                                       "burst": [{"at": "70s", "clients": 300}]}
    changed.validate()


def test_the_issues_examples_run_verbatim(tmp_path):
    """Issue 12's schedule (`arrivals.rate = [["0s", "50/s"], ["10min", "200/s"], ...]`, with
    its two written points) in a TOML file, and its ramp command line."""
    from conftest import run_cli

    path = tmp_path / "schedule.toml"
    path.write_text('''
[arrivals]
process = "poisson"
rate = [["0s", "50/s"], ["10min", "200/s"]]

[service]
distribution = "exponential"
mean = "20ms"

[fleet]
dynos = 10

[run]
duration = "20min"
warmup = "0s"
replications = 2
''')
    result = run_cli("run", str(path), "--json")
    assert result.returncode == 0, result.stderr
    (report,) = json.loads(result.stdout)["results"]
    # The ramp's integral: 10 min at a mean of 125/s, then 10 min at 200/s: 195,000 expected,
    # Poisson, so within 5 standard deviations (about 2,200).
    for rep in report["per_replication"]:
        assert abs(rep["requests"] - 195_000) < 5 * 195_000 ** 0.5
    ramp = run_cli("ramp", "rapgenius", "--rates", "100..2000/100", "--duration", "10s",
                   "--replications", "2", "--policy", "random", "--json")
    assert ramp.returncode == 0, ramp.stderr
    rows = json.loads(ramp.stdout)["ramp"]
    assert [r["offered"] for r in rows] == [100.0 * k for k in range(1, 21)]
    assert all(r["status"] in ("ok", "overloaded") for r in rows)
