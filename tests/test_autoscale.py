"""A fleet that changes size (issue #24): `[autoscale]` in a scenario, the figures a run
reports (fleet.*, autoscale.*, errors.shutdown), what a user's mistake gets, and the
bill of a run (cost.dollars from fleet.dyno_seconds)."""

from __future__ import annotations

import json
import os

import pytest

from conftest import assert_one_line_error
from dynosim.results import ERROR_KINDS, is_metric

#: A light M/M/c-like app whose fleet an HPA on utilisation sizes: 10 busy threads on
#: average, a target of 0.5, so about 20 dynos.
HPA = """
name = "hpa"
[arrivals]
process = "poisson"
rate = "100/s"
[service]
distribution = "exponential"
mean = "100ms"
[fleet]
dynos = 4
boot_time = "30s"
[router]
timeout = "off"
[autoscale]
rule = "hpa"
metric = "utilisation"
target = 0.5
max = 40
[run]
duration = "30min"
warmup = "30min"
replications = 3
"""


def write(tmp_path, text, name="fleet.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def run_json(cli, path, *args, cwd=None):
    result = cli("run", path, "--json", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_an_autoscaled_run_reports_its_fleet_and_its_actions(cli, tmp_path):
    doc = run_json(cli, write(tmp_path, HPA), cwd=tmp_path)
    (result,) = doc["results"] if "results" in doc else [doc]
    summary = result["summary"]
    for metric in ("fleet.size.mean", "fleet.size.min", "fleet.size.max", "fleet.dyno_seconds",
                   "fleet.serving_mean", "fleet.starts", "fleet.r10", "autoscale.actions",
                   "autoscale.reversals", "errors.shutdown", "error_counts.shutdown"):
        assert is_metric(metric), metric
        node = summary
        for part in metric.split("."):
            node = node[part]
        assert "mean" in node, metric
    fleet = summary["fleet"]
    # The bill is the integral of the fleet's size: its mean times the window (30 min).
    assert fleet["dyno_seconds"]["mean"] == pytest.approx(fleet["size"]["mean"]["mean"] * 1800, rel=1e-9)
    # After the warm-up the HPA holds the fleet in its band around 10 / 0.5 = 20 dynos.
    assert 19 <= fleet["size"]["min"]["mean"] <= fleet["size"]["max"]["mean"] <= 22
    assert "per_dyno" not in summary["utilisation"] or summary["utilisation"]["per_dyno"] == []
    assert "shutdown" in ERROR_KINDS


BAD = [
    ("min above max", {"min": 5, "max": 3}, ["autoscale.min", "must be at most max (3)"]),
    ("fleet outside the range", {"min": 6, "max": 10}, ["fleet.dynos", "outside", "[6, 10]"]),
    ("zero interval", {"interval": "0s"}, ["autoscale.interval"]),
    ("unknown rule", {"rule": "magic"}, ["autoscale.rule", "unknown autoscale rule \"magic\""]),
    ("a key of another rule", {"upscale_above": "100ms"},
     ["autoscale.upscale_above", "a key of rule", "not of rule \"hpa\""]),
    ("a schedule out of order", {"rule": "schedule", "schedule": [["8h", 10], ["2h", 4]], "metric": None,
                                 "target": None}, ["autoscale.schedule"]),
    ("a boot longer than the run", {"boot": "2h", "boot_timeout": "3h"}, ["fleet.boot_time", "longer than the run"]),
    ("a boot always past the boot timeout", {"boot": "90s"}, ["fleet.boot_time", "fleet.boot_timeout"]),
]


def _variant(changes):
    table = {"rule": "hpa", "metric": "utilisation", "target": 0.5, "max": 40}
    boot = changes.pop("boot", "30s")
    timeout = changes.pop("boot_timeout", "60s")
    for key, value in changes.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    lines = []
    for key, value in table.items():
        lines.append(f"{key} = {json.dumps(value)}")
    text = HPA.split("[autoscale]")[0].replace('boot_time = "30s"',
                                                f'boot_time = "{boot}"\nboot_timeout = "{timeout}"')
    return text + "[autoscale]\n" + "\n".join(lines) + "\n[run]\nduration = \"30min\"\n"


@pytest.mark.parametrize("changes,fragments", [(dict(c), f) for _, c, f in BAD], ids=[b[0] for b in BAD])
def test_mistakes_in_autoscale_give_one_line_and_write_nothing(cli, tmp_path, changes, fragments):
    path = write(tmp_path, _variant(changes))
    result = cli("run", path, "--timeseries", str(tmp_path / "series.csv"), cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert sorted(os.listdir(tmp_path)) == ["fleet.toml"]


#: A schedule from 2 to 5 dynos at 10 min and back to 3 at 20 min, with a constant 30 s boot:
#: the new dynos are up 30 s after the evaluation at 10 min.
SCHEDULED = """
name = "scheduled"
[arrivals]
process = "poisson"
rate = "20/s"
[service]
distribution = "exponential"
mean = "50ms"
[fleet]
dynos = 2
boot_time = "30s"
[autoscale]
rule = "schedule"
max = 5
interval = "1min"
schedule = [["0s", 2], ["10min", 5], ["20min", 3]]
[run]
duration = "30min"
warmup = "0s"
replications = 2
"""


def test_the_time_series_shows_the_fleet_and_the_p95(cli, tmp_path):
    import csv

    path = write(tmp_path, SCHEDULED)
    out = tmp_path / "series.csv"
    result = cli("run", path, "--timeseries", str(out), "--interval", "10s", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(out.open()))
    assert (tmp_path / "series.png").stat().st_size > 0
    at = {round(float(r["time"])): r for r in rows}
    fleet = {t: (int(r["dynos_up"]), int(r["dynos_booting"]), int(r["dynos_draining"])) for t, r in at.items()}
    assert fleet[590] == (2, 0, 0)
    assert fleet[610] == (2, 3, 0) and fleet[620] == (2, 3, 0)   # booting from 600 s
    assert fleet[630] == (5, 0, 0)                                # up at 600 + 30 s
    assert fleet[1200] == (3, 0, 2)                               # marked down at 1200 s
    assert fleet[1210] == (3, 0, 0)                               # gone by their SIGTERM at 1201 s
    # A schedule reads no metric; the p95 is of the interval's answers.
    assert all(r["autoscale_metric"] == "" for r in rows)
    assert all(r["response_p95"] != "" and float(r["response_p95"]) > 0 for r in rows)


def test_the_time_series_shows_the_metric_the_rule_saw(cli, tmp_path):
    import csv

    path = write(tmp_path, HPA)
    out = tmp_path / "series.csv"
    result = cli("run", path, "--timeseries", str(out), "--interval", "15s", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(out.open()))
    seen = [float(r["autoscale_metric"]) for r in rows if r["autoscale_metric"] != ""]
    # The HPA's default reading is 15 s of reports shown 15 s late: nothing before 30 s.
    assert rows[0]["autoscale_metric"] == ""
    assert len(seen) >= len(rows) - 2
    assert all(0 <= u <= 1 for u in seen)
    # Settled (after the first 30 minutes), the busy fraction it sees is near the target.
    late = [float(r["autoscale_metric"]) for r in rows if float(r["time"]) > 1800]
    assert 0.4 < sum(late) / len(late) < 0.6


def test_autoscale_day_runs_its_cases_on_the_same_traffic(cli):
    """`dynosim run autoscale-day` (the issue's command): five ways of sizing a fleet over a
    day. What must hold whatever the draws: the fixed fleet's bill is 5 dynos x 24 h at
    Standard-2X's $50 a month prorated per second; the HPA on CPU never scales up, because the
    app's CPU can never reach its target (4 workers x 30 ms of CPU in 200 ms over 2 cores is
    at most 30% of a dyno, under 60% x (1 - 0.1)), so it sits at its minimum and its requests
    queue; every case runs the same requests."""
    result = cli("run", "autoscale-day", "--json")
    assert result.returncode == 0, result.stderr
    cases = {c["label"]: c["results"][0] for c in json.loads(result.stdout)["cases"]}
    assert list(cases) == ["fixed, 5 dynos", "heroku p95 800ms", "judoscale 50-100ms", "hpa cpu 60%", "schedule"]
    fixed = cases["fixed, 5 dynos"]["summary"]
    assert fixed["cost"]["dollars"]["mean"] == pytest.approx(5 * 86400 * 50 / (730 * 3600), rel=1e-12)
    assert "fleet" not in fixed and "autoscale" not in fixed
    hpa = cases["hpa cpu 60%"]["summary"]
    assert hpa["fleet"]["size"]["max"]["mean"] == 2 and hpa["autoscale"]["actions"]["mean"] == 0
    assert hpa["dyno"]["cpu_utilisation"]["mean"] < 0.6 * 0.9
    for label, r in cases.items():
        if label != "hpa cpu 60%":
            assert r["summary"]["response"]["p95"]["mean"] < hpa["response"]["p95"]["mean"], label
        # The same traffic: the requests of replication k are the same in every case.
        assert [p["requests"] for p in r["per_replication"]] == [
            p["requests"] for p in cases["fixed, 5 dynos"]["per_replication"]], label
    for label in ("heroku p95 800ms", "judoscale 50-100ms", "schedule"):
        s = cases[label]["summary"]
        assert 2 <= s["fleet"]["size"]["min"]["mean"] <= s["fleet"]["size"]["max"]["mean"] <= 10, label
        assert s["autoscale"]["actions"]["mean"] > 0, label


def test_router_logs_replay_through_an_autoscaled_fleet(cli, tmp_path):
    """`dynosim logs replay LOG --scenario fleet.toml` with `[autoscale]` (the issue's
    command), on replay-hand.log: six requests arriving at 0, 0.25, 0.375, 0.5, 0.625 and 2 s
    for 1, 0.5, 0.5, 0.125, 0.25 and 0.125 s. One single-slot dyno behind an intelligent router;
    a schedule asks for a second dyno at its evaluation at 0.5 s, which boots for 0.25 s. By
    hand: the first request holds the first dyno until 1 s; the next four wait at the router;
    at 0.75 s the new dyno takes the 0.25 s request (waited 0.5), at 1 s the first dyno the
    0.375 s one (0.625), at 1.25 s the new dyno the 0.5 s one (0.75), at 1.375 s the 0.625 s one
    (0.75); the last finds a dyno free. So 4 of 6 wait, 2.625 s in all, 4 at once at most, and
    the fleet runs one dyno over the whole trace (2 s) and one from 0.5 s."""
    from conftest import ROOT

    fleet = tmp_path / "fleet.toml"
    fleet.write_text('name = "autoscaled"\n[arrivals]\nprocess = "poisson"\nrate = "1/s"\n[service]\n'
                     'distribution = "constant"\nvalue = "100ms"\n[fleet]\ndynos = 1\nboot_time = "250ms"\n'
                     '[router]\npolicy = "intelligent"\ntimeout = "off"\n'
                     '[autoscale]\nrule = "schedule"\nmin = 1\nmax = 2\ninterval = "500ms"\n'
                     'schedule = [["0s", 1], ["500ms", 2]]\n')
    log = ROOT / "tests" / "fixtures" / "logs" / "replay-hand.log"
    result = cli("logs", "replay", str(log), "--scenario", str(fleet), "--json")
    assert result.returncode == 0, result.stderr
    [report] = json.loads(result.stdout)["results"]
    rep = report["per_replication"][0]
    assert rep["requests"] == 6
    assert rep["queued_fraction"] == 4 / 6
    assert rep["queue"]["mean"] == pytest.approx(2.625 / 6, abs=1e-9)
    assert rep["max_queue_depth"]["router"] == 4
    assert rep["fleet"]["dyno_seconds"] == pytest.approx(2.0 + 1.5, abs=1e-5)
    assert rep["fleet"]["starts"] == 1 and rep["autoscale"]["actions"] == 1


def test_capacity_sizes_the_fixed_fleet_of_an_autoscaled_scenario(cli, tmp_path):
    """capacity varies fleet.dynos: with [autoscale] that is only the initial fleet, so it
    leaves the autoscaler out, says so, and answers as for the scenario without it."""
    with_it = write(tmp_path, HPA)
    without = write(tmp_path, HPA.split("[autoscale]")[0] + "[run]\nduration = \"30min\"\nwarmup = \"30min\"\n"
                    "replications = 3\n", "fixed.toml")
    args = ["--target", "response.p95 <= 1s", "--json"]
    a, b = cli("capacity", with_it, *args), cli("capacity", without, *args)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert "[autoscale] is left out" in a.stderr and "[autoscale]" not in b.stderr
    dynos = [r["dynos"] for r in json.loads(a.stdout)["results"]]
    # Stable needs more dynos than the 10 busy threads (100/s x 100 ms).
    assert dynos == [r["dynos"] for r in json.loads(b.stdout)["results"]] and dynos[0] >= 11
