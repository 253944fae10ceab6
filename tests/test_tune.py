"""`dynosim tune`: the cheapest settings whose 95% intervals meet every target, the runner-up
and the fixed fleet meeting the same targets, priced by dyno-seconds (docs/tune.md)."""

import json
import math
import os
import shlex
import sys

import pytest
from conftest import assert_one_line_error

from dynosim import Scenario, theory
from dynosim.capacity import parse_target
from dynosim.cost import Pricing, run_cost
from dynosim.results import Estimate, PolicyResult
from dynosim.tune import Setting, Tuning, fixed_fleet, result_cost, without_autoscale

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


# --- the price of a run, by hand ---------------------------------------------------------------


def test_a_fixed_fleet_costs_its_dynos_for_the_window():
    # Standard-1X: $25 for 730 hours, prorated to the second.
    cost = run_cost(Pricing("standard-1x", 25.0), 300.0, dynos=4)
    assert cost.dyno_seconds == 1200.0
    assert cost.dollars == pytest.approx(1200 * 25 / (730 * 3600), rel=1e-12)
    # A day of 4 dynos: 96 dyno-hours at $25/730 h.
    assert cost.dollars_per_day == pytest.approx(4 * 24 * 25 / 730, rel=1e-12)
    assert not cost.measured
    assert cost.to_dict()["from"] == "fleet.dynos * run.duration"


def test_a_fleet_that_changes_size_costs_its_dyno_seconds():
    # 900 dyno-seconds over 5 minutes: 3 dynos on average, whatever the fleet's size said.
    cost = run_cost(Pricing("standard-2x", 50.0), 300.0, dyno_seconds=900.0, dynos=10)
    assert cost.measured and cost.dyno_seconds == 900.0
    assert cost.dollars == pytest.approx(900 * 50 / (730 * 3600), rel=1e-12)
    assert cost.dollars_per_day == pytest.approx(3 * 24 * 50 / 730, rel=1e-12)
    assert cost.to_dict()["from"] == "fleet.dyno_seconds"


def test_eco_is_a_share_of_its_pool():
    # $5 buys 1000 dyno-hours: two dynos for a day use 48 of them.
    cost = run_cost(Pricing("eco", 5.0), 3600.0, dynos=2)
    assert cost.dollars_per_day == pytest.approx(48 * 5 / 1000, rel=1e-12)


def test_a_run_cost_needs_a_window_and_a_size():
    with pytest.raises(ValueError):
        run_cost(Pricing("basic", 7.0), 0.0, dynos=1)
    with pytest.raises(ValueError):
        run_cost(Pricing("basic", 7.0), 60.0)
    assert math.isclose(run_cost(Pricing("basic", 7.0), 60.0, dynos=0).dollars, 0.0)


# --- the answer, against theory ------------------------------------------------------------------
#
# Intelligent routing over dynos of `slots` slots is M/M/c with c = dynos × slots: Poisson
# arrivals at 50/s, exponential service of mean 100 ms (a = 5 erlangs), one queue at the router.
# Erlang C gives each setting's mean queue time; a setting costs its dynos, whatever its slots.

RATE, MEAN_SERVICE = 50.0, 0.1
TARGET = 0.010  # queue.mean <= 10ms
#: A setting's figure agrees with theory within K of its standard errors (10 replications:
#: Student's t with 9 degrees of freedom exceeds 4.8 with probability 10⁻³).
K = 4.8
#: Simulated requests a run may take (over its replications): a few times what one needs.
BUDGET = ["--set", "run.max_requests=400000"]

MMC = """
name = "mmc"
[arrivals]
process = "poisson"
rate = "50/s"
[service]
distribution = "exponential"
mean = "100ms"
[fleet]
dynos = 8
slots = 1
[router]
policy = "intelligent"
[run]
duration = "2min"
warmup = "10s"
replications = 10
seed = 1
"""

GRID = ["--vary", "fleet.dynos=3,4,5,6,7,8,10", "--vary", "fleet.slots=1,2"]


def write_scenario(tmp_path, text=MMC, name="mmc.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def tune_json(cli, *args, cwd=None):
    result = cli("tune", *args, *BUDGET, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout, parse_constant=_no_constant)


def _no_constant(name):
    raise AssertionError(f"JSON must be strict, got {name}")


def mmc_wait(point):
    """Erlang C's mean queue time of a point, or None where it is unstable."""
    c = point["settings"]["fleet.dynos"] * point["settings"]["fleet.slots"]
    a = RATE * MEAN_SERVICE
    return theory.mmc_mean_wait(c, a, MEAN_SERVICE) if c > a else None


@pytest.fixture(scope="module")
def mmc_tuning(tmp_path_factory):
    from conftest import run_cli

    folder = tmp_path_factory.mktemp("mmc")
    return tune_json(run_cli, write_scenario(folder), *GRID, "--target", "queue.mean <= 10ms", cwd=folder)


def test_the_best_is_the_cheapest_setting_erlang_c_says_meets_the_target(mmc_tuning):
    points = mmc_tuning["points"]
    assert len(points) == 14
    # Theory's answer: the fewest dynos whose M/M/c queue time is within the target (on a tie,
    # the shorter queue, as tune ranks), then the next.
    meeting = sorted((p for p in points if mmc_wait(p) is not None and mmc_wait(p) <= TARGET),
                     key=lambda p: (p["settings"]["fleet.dynos"], mmc_wait(p)))
    expected_best, expected_runner_up = meeting[0], meeting[1]
    assert expected_best["settings"] == {"fleet.dynos": 4, "fleet.slots": 2}  # c = 8: 5.6 ms
    assert expected_runner_up["settings"] == {"fleet.dynos": 5, "fleet.slots": 2}  # c = 10: 0.7 ms

    def tolerance(p):
        return K * p["estimates"]["queue.mean"]["std_error"]

    # The runs agree with theory where the answer is decided: at the best and at every
    # cheaper setting that ran.
    decisive = [p for p in points if p["status"] == "ok"
                and p["settings"]["fleet.dynos"] <= expected_best["settings"]["fleet.dynos"]]
    assert decisive
    for p in decisive:
        assert abs(p["estimates"]["queue.mean"]["mean"] - mmc_wait(p)) <= tolerance(p), p
    # The answer is not on a knife's edge: theory is further from the target than the
    # tolerance, on the right side, at the best and at every cheaper setting.
    assert mmc_wait(expected_best) + tolerance(expected_best) < TARGET
    for p in decisive:
        if p["settings"]["fleet.dynos"] < expected_best["settings"]["fleet.dynos"]:
            assert mmc_wait(p) - tolerance(p) > TARGET, p

    assert mmc_tuning["best"]["index"] == expected_best["index"]
    assert mmc_tuning["runner_up"]["index"] == expected_runner_up["index"]
    assert mmc_tuning["best"]["meets"] and mmc_tuning["best"]["met"] == {"queue.mean <= 10ms": True}
    # Unstable settings ran not, and meet nothing.
    unstable = [p["settings"] for p in points if p["status"] == "unstable"]
    assert unstable == [{"fleet.dynos": n, "fleet.slots": 1} for n in (3, 4, 5)]
    assert not any(p["meets"] for p in points if p["status"] != "ok")


def test_settings_are_ranked_by_dollars_per_day(mmc_tuning):
    points = mmc_tuning["points"]
    best, runner_up = mmc_tuning["best"], mmc_tuning["runner_up"]
    assert best["index"] != runner_up["index"]
    assert best["cost"]["dollars_per_day"] <= runner_up["cost"]["dollars_per_day"]
    others = [p for p in points if p["meets"] and p["index"] not in (best["index"], runner_up["index"])]
    assert others and all(p["cost"]["dollars_per_day"] >= runner_up["cost"]["dollars_per_day"] for p in others)
    # A setting's price is its size: slots are free.
    for p in points:
        dynos = p["settings"]["fleet.dynos"]
        assert p["cost"]["dyno_seconds"] == dynos * 120
        assert p["cost"]["dollars_per_day"] == pytest.approx(dynos * 24 * 25 / 730, rel=1e-12)
        assert p["cost"]["from"] == "fleet.dynos * run.duration"


def test_at_equal_cost_the_setting_with_more_room_ranks_first(mmc_tuning):
    # 8 dynos of one slot (5.6 ms) and of two (no queue) cost the same: two slots rank first.
    eight = [p for p in mmc_tuning["points"] if p["settings"]["fleet.dynos"] == 8]
    tuning = Tuning("mmc", [parse_target("queue.mean <= 10ms")], {}, [_setting(p) for p in eight], None, None)
    assert [s.values["fleet.slots"] for s in tuning.ranked] == [2, 1]


def _setting(point):
    """A Setting from a point of the JSON document."""
    setting = Setting(point["index"], point["settings"], point["policy"], point["status"], Pricing("standard-1x", 25.0),
                      run_cost(Pricing("standard-1x", 25.0), point["cost"]["window"], dynos=point["settings"]["fleet.dynos"]))
    setting.estimates = {k: Estimate(**v) for k, v in point["estimates"].items()}
    setting.met = point["met"]
    return setting


def test_the_fixed_fleet_is_capacitys_answer_on_the_scenario_as_given(mmc_tuning):
    fixed = mmc_tuning["fixed_fleet"]
    # One slot per dyno: M/M/c needs c = 8 (5.6 ms; 7 give 16.2 ms).
    assert fixed["dynos"] == 8 and fixed["policy"] == "intelligent"
    assert theory.mmc_mean_wait(8, 5.0, 0.1) < TARGET < theory.mmc_mean_wait(7, 5.0, 0.1)
    assert fixed["without_autoscale"] is False and fixed["reason"] is None
    # The same scenario and seed as the grid's point at 8 dynos of one slot: the same run.
    (same,) = [p for p in mmc_tuning["points"] if p["settings"] == {"fleet.dynos": 8, "fleet.slots": 1}]
    assert fixed["estimates"] == same["estimates"]
    assert fixed["cost"]["dollars_per_day"] == pytest.approx(same["cost"]["dollars_per_day"], rel=1e-12)
    # Half the dynos: half the bill.
    assert mmc_tuning["saving"]["fraction"] == pytest.approx(0.5, rel=1e-12)
    assert mmc_tuning["saving"]["dollars_per_day"] == pytest.approx(4 * 24 * 25 / 730, rel=1e-12)


def test_the_json_document(mmc_tuning):
    assert set(mmc_tuning) == {"scenario", "targets", "vary", "points", "best", "runner_up", "closest",
                               "fixed_fleet", "saving"}
    assert mmc_tuning["scenario"] == "mmc"
    assert mmc_tuning["targets"] == ["queue.mean <= 10ms"]
    assert mmc_tuning["vary"] == {"fleet.dynos": [3, 4, 5, 6, 7, 8, 10], "fleet.slots": [1, 2]}
    assert mmc_tuning["closest"] is None  # only when none meets the targets
    for i, p in enumerate(mmc_tuning["points"]):
        assert p["index"] == i
        assert set(p) == {"index", "settings", "policy", "status", "steady_state", "meets", "met", "estimates", "cost"}
        assert set(p["cost"]) == {"dyno_seconds", "window", "dollars", "dollars_per_day", "from", "dyno_type", "price"}
        if p["status"] == "ok":
            assert set(p["estimates"]["queue.mean"]) == {"mean", "ci_low", "ci_high", "std_error"}
        else:
            assert p["estimates"] == {} and p["met"] == {} and p["steady_state"] is None
    # best and runner_up are points of the list, whole.
    assert mmc_tuning["best"] == mmc_tuning["points"][mmc_tuning["best"]["index"]]
    assert mmc_tuning["runner_up"] == mmc_tuning["points"][mmc_tuning["runner_up"]["index"]]
    assert mmc_tuning["best"]["cost"]["dyno_type"] == "standard-1x" and mmc_tuning["best"]["cost"]["price"] == 25.0


def test_the_table(cli, tmp_path):
    result = cli("tune", write_scenario(tmp_path), "--vary", "fleet.dynos=4,5,8", "--vary", "fleet.slots=2",
                 "--target", "queue.mean <= 10ms", *BUDGET, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "3 settings against queue.mean <= 10ms" in out
    assert "Best: fleet.dynos=4, fleet.slots=2, $3.29/day" in out
    assert "Runner-up: fleet.dynos=5, fleet.slots=2, $4.11/day" in out
    assert "Against the fixed fleet: 8 dynos under intelligent, $6.58/day" in out
    assert "The best saves $3.29/day (50%) against the fixed fleet." in out
    assert os.listdir(tmp_path) == ["mmc.toml"]  # nothing written


def test_none_meeting_the_targets_is_one_line_with_the_closest(cli, tmp_path):
    args = [write_scenario(tmp_path), "--vary", "fleet.dynos=6,7", "--target", "queue.mean <= 1ms", *BUDGET]
    result = cli("tune", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr  # as capacity's 'none found'
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("No setting")]
    # 7 dynos come closest (16 ms against 59 ms at 6).
    assert line.startswith("No setting meets every target; closest: fleet.dynos=7 (queue.mean ")
    assert "against 1 ms" in line
    doc = tune_json(cli, *args, cwd=tmp_path)
    assert doc["best"] is None and doc["runner_up"] is None and doc["saving"] is None
    assert doc["closest"]["settings"] == {"fleet.dynos": 7}
    assert doc["fixed_fleet"]["dynos"] == 10  # Erlang C: 1 ms needs c = 10 (0.72 ms; 9 give 1.9 ms)
    assert theory.mmc_mean_wait(10, 5.0, 0.1) < 0.001 < theory.mmc_mean_wait(9, 5.0, 0.1)


def test_a_setting_that_costs_more_than_the_fixed_fleet_says_so(cli, tmp_path):
    result = cli("tune", write_scenario(tmp_path), "--vary", "fleet.dynos=10,12", "--target", "queue.mean <= 10ms",
                 *BUDGET, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "The best costs $1.64/day (25%) more than the fixed fleet" in result.stdout


# --- the parts that do not need a run ----------------------------------------------------------


def test_a_run_reporting_its_dyno_seconds_is_priced_by_them():
    # What issue 24's runs report for a fleet that changes size.
    estimate = {"mean": 900.0, "ci_low": 850.0, "ci_high": 950.0, "std_error": 20.0}
    report = {"duration": 300.0, "dynos": 10, "summary": {"fleet": {"dyno_seconds": estimate}}}
    cost = result_cost(Pricing("standard-1x", 25.0), PolicyResult(report))
    assert cost.measured and cost.dyno_seconds == 900.0
    assert cost.dollars_per_day == pytest.approx(3 * 24 * 25 / 730, rel=1e-12)
    # Without it: the fleet's size for the window.
    report = {"duration": 300.0, "dynos": 10, "summary": {}}
    cost = result_cost(Pricing("standard-1x", 25.0), PolicyResult(report))
    assert not cost.measured and cost.dyno_seconds == 3000.0


def test_the_fixed_fleet_leaves_the_autoscaler_out(tmp_path):
    doc = tomllib.loads(MMC)
    doc["autoscale"] = {"rule": "judoscale", "min": 2, "max": 20, "upscale_above": "100ms"}
    scenario = Scenario(doc, source="mmc.toml").with_overrides({"autoscale.downscale_delay": "5min"})
    fixed = without_autoscale(scenario)
    assert "autoscale" not in fixed.doc and fixed.doc["fleet"] == doc["fleet"]
    assert not any(k.startswith("autoscale") for k in fixed.overridden)
    assert without_autoscale(fixed) is fixed
    # The search runs on the scenario without it, today, whether or not the engine knows it.
    found = fixed_fleet(scenario.with_overrides({"run.max_requests": 400000}), "intelligent",
                        [parse_target("queue.mean <= 10ms")])
    assert found.without_autoscale and found.dynos == 8
    assert found.cost is not None and not found.cost.measured


# --- mistakes: one line, exit 2, nothing written --------------------------------------------------


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--target", "queue.mean <= 10ms"], ["the following arguments are required: --vary"]),
        (["--vary", "fleet.dynos=4,5"], ["the following arguments are required: --target"]),
        (["--vary", "fleet.dynos=4,5", "--target", "queue.mean = 10ms"], ["--target", "METRIC OP VALUE"]),
        (["--vary", "fleet.dynos=4,5", "--target", "queue.p98 <= 10ms"], ["--target", "unknown metric 'queue.p98'"]),
        (["--vary", "fleet.dynoz=4,5", "--target", "queue.mean <= 10ms"], ["--vary: fleet.dynoz: unknown field"]),
        (["--vary", "fleet.dynos", "--target", "queue.mean <= 10ms"], ["--vary", "key.path=SPEC"]),
        (["--vary", "fleet.dynos=4,0", "--target", "queue.mean <= 10ms"], ["--vary: fleet.dynos:", "whole number"]),
        (["--vary", "fleet.dynos=4,5", "--target", "response.p95 <= 100ms"],
         ["--target", "cannot be met by any number of dynos"]),
        (["--vary", "fleet.dynos=8,10", "--target", "queue.mean <= 10ms", "--target", "dyno.cpu_utilisation <= 50%"],
         ["--target", "does not report 'dyno.cpu_utilisation'"]),
        (["--vary", "fleet.dynos=4,5", "--target", "queue.mean <= 10ms", "--replications", "1"],
         ["run.replications", "at least 2 replications"]),
        (["--vary", "fleet.dynos=4,5", "--target", "queue.mean <= 10ms", "--dyno-type", "huge"],
         ["--dyno-type", "unknown dyno type 'huge'"]),
    ],
    ids=["no vary", "no target", "malformed target", "unknown metric", "unknown key", "no spec", "bad value",
         "unattainable", "unreported metric", "one replication", "unknown dyno type"],
)
def test_mistakes_give_one_line_and_write_nothing(cli, tmp_path, args, fragments):
    path = write_scenario(tmp_path)
    assert_one_line_error(cli("tune", path, *args, *BUDGET, cwd=tmp_path), *fragments)
    assert os.listdir(tmp_path) == ["mmc.toml"]


# --- issue 24's example --------------------------------------------------------------------------

AUTOSCALED = MMC.replace('rate = "50/s"', 'rate = [["0s", "20/s"], ["10min", "50/s"], ["20min", "20/s"]]').replace(
    'duration = "2min"', 'duration = "30min"').replace("replications = 10", "replications = 3") + """
[autoscale]
rule = "judoscale"
min = 2
max = 20
"""
ISSUE_EXAMPLE = ('--vary autoscale.upscale_above=50ms,100ms,200ms --vary autoscale.downscale_delay=5min,10min '
                 '--target "response.p95 <= 500ms"')


def test_the_issues_example(cli, tmp_path):
    path = write_scenario(tmp_path, AUTOSCALED, "fleet.toml")
    result = cli("tune", path, *shlex.split(ISSUE_EXAMPLE), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "settings against response.p95 <= 500ms" in result.stdout
    doc = tune_json(cli, path, *shlex.split(ISSUE_EXAMPLE), cwd=tmp_path)
    assert len(doc["points"]) == 6
    # An autoscaled run is priced by the dyno-seconds it reports.
    assert all(p["cost"]["from"] == "fleet.dyno_seconds" for p in doc["points"] if p["status"] == "ok")
    assert doc["fixed_fleet"]["without_autoscale"] is True
    if doc["best"] is not None:
        assert doc["best"]["meets"] and doc["best"]["settings"]["autoscale.upscale_above"] in ("50ms", "100ms", "200ms")

