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
