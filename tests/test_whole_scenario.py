"""A scenario is valid or not whatever the verb (issue #23 §3): every section is checked on
load, including those only one verb reads (`[cost]`, read by `capacity` and `demo`, and
`[[cases]]`), as `haproxy -c` checks a whole file.

The corpus below is the fuzz corpus's `[cost]` cases; each must be refused by `run` (which
never prices anything) with the same one line that `capacity` gives.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_one_line_error, run_cli
from dynosim import ScenarioError
from dynosim.cost import Pricing
from dynosim.scenario import Scenario

BASE = """
name = "whole"
[arrivals]
process = "poisson"
rate = "50/s"
[service]
distribution = "exponential"
mean = "10ms"
[fleet]
dynos = 2
[run]
duration = "2s"
warmup = "0s"
replications = 2
"""

#: (the [cost] table as TOML lines, the key path the error names, a fragment of the message)
BAD_COST = [
    ('dyno_type = "mine"\nprices = { mine = inf }', "cost.prices.mine", "expected a finite price >= 0"),
    ('prices = { mine = nan }', "cost.prices.mine", "expected a finite price >= 0"),
    ('prices = { mine = -1 }', "cost.prices.mine", "expected a finite price >= 0"),
    ('prices = { mine = "40" }', "cost.prices.mine", "expected a finite price >= 0"),
    ('prices = { mine = true }', "cost.prices.mine", "expected a finite price >= 0"),
    ('prices = 3', "cost.prices", "expected a table"),
    ('dyno_type = "nope"', "cost.dyno_type", "unknown dyno type"),
    ('dyno_type = 7', "cost.dyno_type", "expected a dyno type name"),
    ('dyno_typo = "eco"', "cost.dyno_typo", "unknown key"),
]


def _scenario(tmp_path, cost: str) -> str:
    path = tmp_path / "s.toml"
    path.write_text(BASE + "\n[cost]\n" + cost + "\n")
    return str(path)


@pytest.mark.parametrize("cost, key, fragment", BAD_COST)
@pytest.mark.parametrize("verb", [["run"], ["run", "--json"], ["capacity", "--target", "queue.mean <= 10ms"],
                                  ["sweep", "--vary", "fleet.dynos=2,3"], ["compare", "--policy", "random,intelligent"]])
def test_every_verb_refuses_a_bad_cost_section(tmp_path, cost, key, fragment, verb):
    path = _scenario(tmp_path, cost)
    out = run_cli(verb[0], path, *verb[1:], cwd=tmp_path)
    assert_one_line_error(out, key, fragment)
    # Nothing was written by the verbs that write files.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_the_issue_example_is_refused_by_run_as_by_capacity(tmp_path):
    path = _scenario(tmp_path, 'dyno_type = "mine"\nprices = { mine = inf }')
    run = run_cli("run", path, "--json", cwd=tmp_path)
    capacity = run_cli("capacity", path, "--target", "queue.mean <= 10ms", cwd=tmp_path)
    assert_one_line_error(run, "cost.prices.mine")
    assert_one_line_error(capacity, "cost.prices.mine")
    assert run.stderr == capacity.stderr


def test_a_price_set_on_the_command_line_is_named_as_such(tmp_path):
    path = _scenario(tmp_path, 'dyno_type = "mine"\nprices = { mine = 40 }')
    out = run_cli("run", path, "--set", "cost.prices.mine=inf", cwd=tmp_path)
    assert_one_line_error(out, "--set", "cost.prices.mine")


def test_a_good_cost_section_runs_under_every_verb(tmp_path):
    path = _scenario(tmp_path, 'dyno_type = "mine"\nprices = { mine = 40 }')
    out = run_cli("run", path, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    json.loads(out.stdout)


def test_a_bad_case_is_refused_by_run_and_capacity(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(BASE + '\n[[cases]]\nlabel = "a"\nset = { "fleet.dynos" = 3 }\n'
                    '\n[[cases]]\nlabel = "b"\nset = { "cost.prices.x" = -5 }\n')
    for verb in (["run"], ["capacity", "--target", "queue.mean <= 10ms"]):
        out = run_cli(verb[0], str(path), *verb[1:], cwd=tmp_path)
        assert_one_line_error(out, "cost.prices.x")


# --- the property: `run` (through Scenario.load) accepts a [cost] table exactly when pricing
# does, for generated tables, in-process (no engine run needed to decide validity) ------------

_prices = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**6), st.booleans(),
    st.text(max_size=4), st.none(), st.lists(st.integers(), max_size=2),
)
_cost_tables = st.fixed_dictionaries(
    {},
    optional={
        "dyno_type": st.one_of(st.sampled_from(["eco", "standard-1x", "mine", "2013-1x", "NOPE"]), st.integers()),
        "prices": st.one_of(st.dictionaries(st.sampled_from(["mine", "eco", "x"]), _prices, max_size=3),
                            st.integers(), st.text(max_size=3)),
        "extra": st.integers(),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cost=_cost_tables)
def test_load_accepts_a_cost_table_exactly_when_pricing_does(cost):
    doc = {"name": "whole", "arrivals": {"process": "poisson", "rate": "50/s"},
           "service": {"distribution": "exponential", "mean": "10ms"}, "fleet": {"dynos": 2},
           "cost": cost}
    try:
        Pricing.from_scenario(doc, "s.toml")
        priced = None
    except ScenarioError as e:
        priced = e
    try:
        Scenario(doc, source="s.toml")
        loaded = None
    except ScenarioError as e:
        loaded = e
    assert (priced is None) == (loaded is None), (cost, priced, loaded)
    if priced is not None:
        assert str(priced) == str(loaded)
