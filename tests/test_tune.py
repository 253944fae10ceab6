"""`dynosim tune`: the cheapest settings whose 95% intervals meet every target, the runner-up
and the fixed fleet meeting the same targets, priced by dyno-seconds (docs/tune.md)."""

import math

import pytest

from dynosim.cost import Pricing, run_cost


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
