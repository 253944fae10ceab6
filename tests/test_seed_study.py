"""The seed study reproduced (issue: demo, capacity, built-in scenarios, costs)."""

import json
import math

import pytest

import dynosim
from dynosim import Scenario, _dynosim
from dynosim.capacity import min_dynos, parse_target, plan
from dynosim.cost import Pricing
from dynosim.demo import ARTICLE_RANDOM_75, table
from dynosim.errors import ScenarioError


def test_random_routing_at_75_dynos_reproduces_the_article():
    # The demo's own configuration: the built-in scenario as shipped (10 replications × 5 min).
    rows = {(p, n): r for p, n, r in table(Scenario.load("rapgenius"))}
    r = rows[("random", 75)]
    assert abs(r["queued_fraction"] - ARTICLE_RANDOM_75["queued_fraction"]) <= 0.02
    published = ARTICLE_RANDOM_75["queue_of_queued.mean"]
    assert abs(r["queue_of_queued.mean"] - published) <= 0.15 * published
    # Theory for the same model (M/G/1 per dyno): P(wait) = ρ, inside the 95% interval's
    # neighbourhood (4 standard errors: a false alarm once in ~16,000 seeds).
    e = r.estimate("queued_fraction")
    assert abs(e.mean - r.report["offered_load"]) <= 4 * e.std_error
    # Intelligent routing at the same size queues almost nothing, as published.
    assert rows[("intelligent", 75)]["queued_fraction"] < 0.005
    # More dynos, less queueing, for random routing (each step beyond its intervals).
    fractions = [rows[("random", n)].estimate("queued_fraction") for n in (75, 100, 150, 200, 500, 1000)]
    assert all(a.ci_low > b.ci_high for a, b in zip(fractions, fractions[1:]))


def test_capacity_search_matches_erlang_c():
    # M/M/c: λ = 4/s, E[S] = 1 s (a = 4 Erlangs). Target mean wait <= 80 ms. Exact minimum:
    # c = 7 (W = 43 ms); c = 6 gives W = 142 ms. Both lie far from the target compared with
    # the estimate's standard error (asserted below), so the search must land on exactly 7.
    a, target = 4.0, 0.080
    exact = next(c for c in range(5, 50) if _dynosim.mmc_mean_wait(c, a, 1.0) <= target)
    assert exact == 7
    scenario = Scenario({
        "name": "mmc",
        "arrivals": {"process": "poisson", "rate": a},
        "service": {"distribution": "exponential", "mean": 1.0},
        "fleet": {"dynos": 1},
        "router": {"policy": "intelligent"},
        "run": {"duration": "1h", "warmup": "5min", "replications": 12, "seed": 11},
    })
    result = min_dynos(scenario, "intelligent", [parse_target("queue.mean <= 80ms")])
    assert result.dynos == exact
    e = result.estimates["queue.mean"]
    w = _dynosim.mmc_mean_wait(exact, a, 1.0)
    assert abs(e.mean - w) <= 4 * e.std_error          # the estimate agrees with theory
    assert target - w > 6 * e.std_error                # ... and the margin was resolvable
    assert result.evaluated[exact - 1] is False


def test_capacity_with_slots_and_costs():
    scenario = Scenario.load("rapgenius").with_overrides({"run.duration": "2min", "run.replications": 4})
    results = plan(scenario, ["intelligent"], [parse_target("queue.p99 <= 1s")], slots=[1, 2])
    by_slots = {r.slots: r for r in results}
    assert by_slots[2].dynos < by_slots[1].dynos          # two workers per dyno: fewer dynos
    assert by_slots[1].monthly_cost == 36 * by_slots[1].dynos  # rapgenius prices the 2013 dyno


def test_unstable_counts_are_never_accepted():
    scenario = Scenario.load("rapgenius").with_overrides({"run.duration": "1min", "run.replications": 3})
    # A target every run meets: the answer is the smallest stable count, and nothing below it
    # is ever simulated (it would be refused as unstable).
    r = min_dynos(scenario, "intelligent", [parse_target("requests >= 1")])
    info = scenario.describe()
    assert r.dynos == math.floor(info["busy_slots_needed"]) + 1
    assert min(r.evaluated) == r.dynos


@pytest.mark.parametrize("text, metric, op, value", [
    ("queue.mean <= 10ms", "queue.mean", "<=", 0.010),
    ("response.p99<2s", "response.p99", "<", 2.0),
    ("queued_fraction <= 5%", "queued_fraction", "<=", 0.05),
    ("utilisation.mean >= 0.5", "utilisation.mean", ">=", 0.5),
])
def test_targets_parse(text, metric, op, value):
    t = parse_target(text)
    assert (t.metric, t.op) == (metric, op) and t.value == pytest.approx(value)


@pytest.mark.parametrize("text", ["queue.mean = 10ms", "queue.avg <= 10ms", "queue.mean <= 10 parsecs",
                                  "queued_fraction <= lots", ""])
def test_bad_targets(text):
    with pytest.raises(ScenarioError):
        parse_target(text)


def test_prices():
    assert Pricing.from_scenario({}, None).monthly(10) == 250          # Standard-1X by default
    assert Pricing.from_scenario({"cost": {"dyno_type": "2013-1x"}}, None).monthly(80) == 2880
    custom = Pricing.from_scenario({"cost": {"dyno_type": "mine", "prices": {"mine": 40}}}, None)
    assert custom.monthly(3) == 120
    assert Pricing.from_scenario({}, None, "eco").monthly(2) == 10     # 1460 h from 1000 h pools
    with pytest.raises(ScenarioError, match="cost.dyno_type"):
        Pricing.from_scenario({"cost": {"dyno_type": "huge"}}, "x.toml")


def test_builtin_scenarios_are_listed_and_valid():
    names = dynosim.builtin_scenarios()
    assert {"rapgenius", "rapgenius-weibull", "rapgenius-variants"} <= set(names)
    for name in names:
        s = Scenario.load(name)
        s.validate()
        for _, case in s.cases:
            case.validate()
    # The Weibull recipe's analytic mean: scale = median / ln2^(1/k), mean = scale·Γ(1 + 1/k),
    # shifted by clipping at 10 ms and rounding up (less than 1 ms), below the 30 s clip.
    k, median = 0.46, 0.050
    mean = median / math.log(2) ** (1 / k) * math.gamma(1 + 1 / k)
    got = Scenario.load("rapgenius-weibull").describe()["service_mean"]
    assert mean < got < mean + 0.005


def test_variants_order_the_policies_as_the_follow_up_study(cli):
    result = cli("run", "rapgenius-variants", "--json", "--duration", "2min", "--replications", "4")
    assert result.returncode == 0, result.stderr
    cases = {c["label"]: c["results"][0] for c in json.loads(result.stdout)["cases"]}
    assert len(cases) == 18

    def q(label):
        s = cases[label]["summary"]["queue"]["mean"]
        return s["ci_low"], s["ci_high"]

    # Each pair: the first queues strictly more (intervals apart).
    for worse, better in [
        ("random, 25 dynos", "choice of two, 25 dynos"),
        ("random, 25 dynos", "random, 2 workers, 25 dynos"),
        ("random, 50 dynos", "power of two, 50 dynos"),
        ("intelligent, 10 routers, 20 dynos", "intelligent, 2 routers, 20 dynos"),
        ("intelligent, 2 routers, 20 dynos", "intelligent, 20 dynos"),
    ]:
        assert q(worse)[0] > q(better)[1], (worse, better)


def test_demo_prints_the_table_and_the_headline(cli):
    result = cli("demo", "--duration", "1min", "--replications", "3")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())  # the text wraps at the output's width
    assert "10,000" in out and "intelligent" in out and "random" in out
    assert "as many" in out and "$" in out


def test_capacity_command(cli):
    result = cli("capacity", "rapgenius", "--target", "queue.mean <= 50ms", "--policy", "random,intelligent",
                 "--duration", "1min", "--replications", "3", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    dynos = {r["policy"]: r["dynos"] for r in doc["results"]}
    assert dynos["intelligent"] < dynos["random"]
    bad = cli("capacity", "rapgenius", "--target", "queue.mean <= soon")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--target" in bad.stderr
