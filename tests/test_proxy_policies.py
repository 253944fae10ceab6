"""The policies of production proxies from the command line (issue 26): HAProxy's `first`,
Envoy's `least_request`, and `bounded_hash` (HAProxy's hash-balance-factor) over the keys of
`[arrivals.keys]`. Each example runs, and every mistake in their keys is one line on stderr
naming the key path and what was expected."""

import pytest

from conftest import assert_one_line_error

import dynosim

SHORT = ["--duration", "10s", "--replications", "2"]


@pytest.mark.parametrize(
    "args",
    [
        ["--policy", "first"],
        ["--policy", "least_request"],
        ["--policy", "least_request", "--set", "router.choice_count=3"],
        ["--policy", "least_request", "--set", "router.active_request_bias=1"],
        ["--policy", "bounded_hash", "--set", "arrivals.keys.users=1000"],
        ["--policy", "bounded_hash", "--set", "arrivals.keys.users=1000", "--set", "router.factor=2"],
        ["--policy", "bounded_hash", "--set", "arrivals.keys.users=50", "--set", 'router.factor="inf"'],
        ["--policy", "bounded_hash", "--set", 'arrivals.keys={users=500,popularity="uniform"}'],
        ["--policy", "bounded_hash", "--set", "arrivals.keys={users=500,exponent=1.2}"],
    ],
)
def test_each_policy_runs_from_the_command_line(cli, args):
    result = cli("run", *args, *SHORT)
    assert result.returncode == 0, result.stderr
    assert "response" in result.stdout


def test_compare_runs_the_new_policies_side_by_side(cli):
    result = cli("compare", "--policy", "random,first,least_request,bounded_hash",
                 "--set", "arrivals.keys.users=1000", *SHORT)
    assert result.returncode == 0, result.stderr
    for name in ["random", "first", "least_request", "bounded_hash"]:
        assert name in result.stdout


def test_keys_change_nothing_for_a_policy_that_does_not_read_them():
    """The keys have a random stream of their own: the same figures with or without them."""
    events = {"run.engine": "events"}  # a scenario with keys runs on the event-driven engine
    plain = dynosim.run("rapgenius", policies=["least_request"], duration="20s", replications=2, set=events)
    keyed = dynosim.run("rapgenius", policies=["least_request"], duration="20s", replications=2,
                        set={**events, "arrivals.keys.users": 100})
    for metric in ["response.mean", "queue.mean", "queued_fraction", "utilisation.mean"]:
        assert plain[0][metric] == keyed[0][metric], metric


@pytest.mark.parametrize(
    "overrides, fragments",
    [
        (["arrivals.keys.users=0"], ["arrivals.keys.users:", ">= 1", "got 0"]),
        (["arrivals.keys.users=2.5"], ["arrivals.keys.users:", "whole number"]),
        (["arrivals.keys.users=2000000000"], ["arrivals.keys.users:", "<= 1000000000"]),
        (['arrivals.keys={users=10,popularity="pareto"}'],
         ["arrivals.keys.popularity:", 'unknown popularity "pareto"', '"zipf" or "uniform"']),
        (["arrivals.keys={users=10,exponent=0}"], ["arrivals.keys.exponent:", "> 0"]),
        (['arrivals.keys={users=10,popularity="uniform",exponent=1}'],
         ["arrivals.keys.exponent:", "uniform"]),
        (["arrivals.keys={users=10,colour=1}"], ["arrivals.keys.colour:", "unknown field"]),
        (["arrivals.keys={popularity=\"zipf\"}"], ["arrivals.keys.users: missing"]),
        (["router.policy=bounded_hash"], ["arrivals.keys: missing", "bounded_hash", "users"]),
        (["router.policy=bounded_hash", "arrivals.keys.users=10", "router.factor=0.9"],
         ["router.factor:", "number >= 1", "0.9"]),
        (["router.policy=bounded_hash", "arrivals.keys.users=10", "router.factor=1.255"],
         ["router.factor:", "two decimals", "1.255"]),
        (["router.policy=bounded_hash", "arrivals.keys.users=10", 'router.factor="big"'],
         ["router.factor:", '"inf"']),
        (["router.policy=least_request", "router.choice_count=0"], ["router.choice_count:", ">= 1"]),
        (["router.policy=least_request", "router.active_request_bias=-1"],
         ["router.active_request_bias:", "from 0 to 10", "-1"]),
    ],
)
def test_bad_keys_are_one_line_naming_the_key(cli, overrides, fragments):
    args = [arg for o in overrides for arg in ("--set", o)]
    assert_one_line_error(cli("run", *args, *SHORT), *fragments)
