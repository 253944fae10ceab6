"""The Python API and the CLI's normal output."""

import json
import math

import pytest

import dynosim
from dynosim import Scenario

from conftest import child_process

SHORT = {"run.duration": "2min", "run.replications": 4}


def test_policies_see_the_same_traffic():
    results = dynosim.run("rapgenius", set=SHORT, policies=["random", "round_robin", "intelligent"])
    assert [r.policy for r in results] == ["random", "round_robin", "intelligent"]
    for rep in range(4):
        requests = {r.policy: r.per_replication[rep]["requests"] for r in results}
        service = {r.policy: r.per_replication[rep]["service_mean"] for r in results}
        assert len(set(requests.values())) == 1, requests
        assert len(set(service.values())) == 1, service
    # ... and replications differ from each other.
    assert len({rep["requests"] for rep in results[0].per_replication}) > 1


def test_the_report_names_the_engine_that_ran():
    results = dynosim.run("rapgenius", set=SHORT,
                          policies=["random", "intelligent", "least_connections"])
    engines = {r.policy: r.to_dict()["engine"] for r in results}
    # The direct engine runs what it can; least_connections needs events in time order.
    assert engines == {"random": "direct", "intelligent": "direct", "least_connections": "events"}
    two_slots = dynosim.run("rapgenius", set={**SHORT, "fleet.slots": 2}, policies=["intelligent"])
    assert two_slots[0].to_dict()["engine"] == "events"


def test_same_seed_same_results_different_seed_different_results():
    a = dynosim.run("rapgenius", set=SHORT, policies=["random"], seed=5)
    b = dynosim.run("rapgenius", set=SHORT, policies=["random"], seed=5)
    c = dynosim.run("rapgenius", set=SHORT, policies=["random"], seed=6)
    assert a[0].per_replication == b[0].per_replication
    assert a[0].per_replication != c[0].per_replication


def test_intelligent_routing_queues_far_less_than_random():
    results = dynosim.run("rapgenius", set=SHORT)
    random, intelligent = results["random"], results["intelligent"]
    # Intelligent routing is work-conserving: it queues only when all 75 dynos are busy.
    assert intelligent.estimate("queued_fraction").ci_high < random.estimate("queued_fraction").ci_low
    assert intelligent["queue.mean"] < random["queue.mean"] / 100
    # Both serve the same load: utilisation equals the offered load within the interval.
    for r in results:
        u = r.estimate("utilisation.mean")
        assert abs(u.mean - r.report["offered_load"]) < 4 * u.std_error + 0.01 * r.report["offered_load"]


def test_estimates_have_confidence_intervals():
    r = dynosim.run("rapgenius", set=SHORT, policies=["random"])[0]
    e = r.estimate("queue.mean")
    assert e.ci_low < e.mean < e.ci_high
    assert math.isclose(e.half_width, (e.ci_high - e.ci_low) / 2)
    one = dynosim.run("rapgenius", set={"run.duration": "1min"}, policies=["random"], replications=1)[0]
    assert math.isnan(one.estimate("queue.mean").ci_low)


def test_dataframes():
    pd = pytest.importorskip("pandas")
    results = dynosim.run("rapgenius", set=SHORT)
    df = results.to_dataframe()
    assert list(df["policy"]) == ["random", "intelligent"]
    for column in ("queued_fraction", "queue.mean", "queue.mean.ci_low", "response.p99", "offered_load"):
        assert column in df.columns
    reps = results.replications_dataframe()
    assert len(reps) == 8 and set(reps["policy"]) == {"random", "intelligent"}
    assert isinstance(df, pd.DataFrame)


def test_scenario_overrides_do_not_change_the_original():
    base = Scenario.load("rapgenius")
    changed = base.with_overrides(["fleet.dynos=100", "router.policy=intelligent"])
    assert base.doc["fleet"]["dynos"] == 75
    assert changed.doc["fleet"]["dynos"] == 100
    assert changed.policies == ["intelligent"]
    info = changed.describe()
    assert info["dynos"] == 100 and info["offered_load"] == pytest.approx(150 * info["service_mean"] / 100)


def test_changing_the_distribution_drops_the_old_parameters():
    s = Scenario.load("rapgenius").with_overrides(
        {"service.distribution": "exponential", "service.mean": "306ms"})
    assert s.doc["service"] == {"distribution": "exponential", "mean": "306ms"}
    assert s.describe()["service_mean"] == pytest.approx(0.306)


def test_run_json_output_is_documented(cli):
    result = cli("run", "--json", "--duration", "1min", "--replications", "3")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    first = doc["results"][0]
    for key in ("scenario", "policy", "dynos", "slots", "routers", "arrival_rate", "service_mean",
                "offered_load", "duration", "warmup", "replications", "seed", "summary",
                "per_replication", "wall_seconds"):
        assert key in first
    for metric in dynosim.METRICS:
        node = first["summary"]
        for part in metric.split("."):
            node = node[part]
        assert set(node) == {"mean", "ci_low", "ci_high", "std_error"}
    from pathlib import Path
    doc_text = (Path(__file__).resolve().parents[1] / "docs" / "output.md").read_text()
    for metric in dynosim.METRICS:
        assert f"`{metric}`" in doc_text, f"{metric} is not documented in docs/output.md"


def test_run_table_prints_both_policies(cli):
    result = cli("run", "--duration", "1min", "--replications", "3")
    assert result.returncode == 0, result.stderr
    assert "random" in result.stdout and "intelligent" in result.stdout
    assert "queued" in result.stdout


def test_compare_runs_the_listed_policies(cli):
    result = cli("compare", "rapgenius", "--policy", "random,power_of_d,intelligent",
                 "--duration", "1min", "--replications", "2", "--json")
    assert result.returncode == 0, result.stderr
    assert [r["policy"] for r in json.loads(result.stdout)["results"]] == ["random", "power_of_d", "intelligent"]


def test_scenarios_lists_builtins(cli):
    result = cli("scenarios")
    assert result.returncode == 0
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert {"rapgenius", "unicorn-2011", "gunicorn-db", "malloc-arenas"} <= set(names)


def test_interrupt_stops_a_long_run():
    """Ctrl-C stops a run inside the engine. The child gets SIGINT at its default disposition
    whatever the suite's (child_process), and is killed should the test fail: a run of 100,000
    hours would otherwise keep a core busy long after."""
    import signal
    import subprocess
    import sys
    import time

    with child_process([sys.executable, "-m", "dynosim", "run", "--duration", "100000h", "--replications", "2",
                        "--set", "run.max_requests=1e12"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        time.sleep(3)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
