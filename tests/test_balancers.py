"""The built-in scenario `balancers` (issue #26): it runs every policy of the issue on one
fleet behind several routers reading 2-second-old loads, and shows what docs/model.md says it
shows: the herd effect, and that the same policies do well on fresh loads."""

import dynosim

QUICK = {"run.replications": 4, "run.duration": "60s", "run.warmup": "10s"}
#: Two figures differ when their 95% intervals do not overlap.


def queue(results, policy):
    return results[policy].estimate("queue.mean")


def test_balancers_runs_every_policy_of_the_issue():
    names = set(dynosim.Scenario.load("balancers").policies)
    assert {"random", "round_robin", "least_connections", "power_of_d", "least_request", "p2c_ewma", "jiq",
            "first", "bounded_hash"} <= names
    d = dynosim.Scenario.load("balancers").describe()
    assert d["routers"] == 4 and d["view"]["update"] == "periodic" and d["view"]["interval"] == 2.0


def test_the_herd_effect_and_fresh_loads():
    late = dynosim.run("balancers", set=QUICK, warn=False)
    fresh = dynosim.run("balancers", set={**QUICK, "router.view": {"update": "exact"}}, warn=False)
    random = queue(late, "random")
    # On the 2-second-old board, least connections and first are far worse than random...
    for policy in ("least_connections", "first"):
        assert queue(late, policy).ci_low > random.ci_high, policy
    # ... and with each router's own exact counts least connections is far better.
    assert queue(fresh, "least_connections").ci_high < queue(fresh, "random").ci_low
    # jiq reads no load: the board changes nothing for it (the same draws).
    assert queue(late, "jiq").mean == queue(fresh, "jiq").mean
    assert queue(late, "jiq").ci_high < random.ci_low
