"""`fleet.boot_time`: one key for how long a dyno takes to boot, a duration or a distribution;
`app.boot_time`, the R15 reboot's old key, kept as its alias (issue #24, "The dyno's
lifecycle": today a dyno boots after an R15 restart; the lifecycle's starts, deploys and daily
restarts will boot through the same key)."""

from __future__ import annotations

import copy
import json

import pytest

import dynosim
from conftest import assert_one_line_error, run_cli
from dynosim import ScenarioError
from dynosim.scenario import Scenario

#: Two requests at once take a dyno past twice its 512 MB quota: R15, and a reboot.
RESTARTS = {
    "name": "restarts",
    "arrivals": {"process": "poisson", "rate": "8/s"},
    "fleet": {"dynos": 2, "type": "standard-1x"},
    "app": {"server": "unicorn", "processes": 2,
            "memory": {"dyno": "40MB", "process": "100MB", "request": "500MB"}},
    "request": {"phases": [{"cpu": {"distribution": "exponential", "mean": "100ms"}}]},
    "run": {"duration": "2min", "warmup": "10s", "replications": 3, "seed": 5},
}


def _with(**boot) -> dict:
    doc = copy.deepcopy(RESTARTS)
    for where, value in boot.items():
        doc[where.split("_", 1)[0]]["boot_time"] = value
    return doc


def _figures(doc):
    (result,) = dynosim.run(doc, warn=False)
    return result


def _reps(result):
    return json.dumps(result.to_dict()["per_replication"], sort_keys=True)


def test_the_old_name_is_the_same_key():
    old = _figures(_with(app_boot="3s"))
    new = _figures(_with(fleet_boot="3s"))
    assert old.to_dict()["summary"]["dyno"]["memory"]["r15_restarts"]["mean"] > 0
    assert _reps(old) == _reps(new)


def test_the_default_is_ten_seconds():
    assert _reps(_figures(_with())) == _reps(_figures(_with(fleet_boot="10s")))
    assert Scenario(RESTARTS).describe()["fleet"]["boot_time"] == 10


def test_a_longer_boot_keeps_dynos_down_longer():
    # Requests that find no dyno up fail (failed.no_dyno): more of them the longer a
    # restarted dyno is down.
    short = _figures(_with(fleet_boot="1s")).to_dict()["summary"]["failed"]["no_dyno"]["mean"]
    long = _figures(_with(fleet_boot="30s")).to_dict()["summary"]["failed"]["no_dyno"]["mean"]
    assert long > short


def test_a_distribution_draws_each_boot():
    doc = _with(fleet_boot={"distribution": "uniform", "min": "20s", "max": "60s"})
    assert Scenario(doc).describe()["fleet"]["boot_time"] == pytest.approx(40)
    drawn = _figures(doc)
    constant = _figures(_with(fleet_boot="40s"))
    assert drawn.to_dict()["summary"]["dyno"]["memory"]["r15_restarts"]["mean"] > 0
    assert _reps(drawn) != _reps(constant)


def test_both_names_at_once_is_one_clear_line(tmp_path):
    path = tmp_path / "both.toml"
    path.write_text('[arrivals]\nprocess = "poisson"\nrate = "5/s"\n[fleet]\ndynos = 1\nboot_time = "5s"\n'
                    '[app]\nserver = "unicorn"\nboot_time = "5s"\n[request]\nphases = [ { cpu = "10ms" } ]\n')
    assert_one_line_error(run_cli("run", str(path)), "app.boot_time", "fleet.boot_time")


@pytest.mark.parametrize("value, fragment", [
    ("0s", "fleet.boot_time"),
    ("-5s", "fleet.boot_time"),
    ({"distribution": "uniform", "min": "60s", "max": "20s"}, "fleet.boot_time"),
    ("soon", "fleet.boot_time"),
])
def test_a_bad_boot_time_names_the_key(value, fragment):
    with pytest.raises(ScenarioError) as e:
        Scenario(_with(fleet_boot=value)).describe()
    assert fragment in str(e.value)
