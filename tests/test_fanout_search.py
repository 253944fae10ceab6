"""The built-in `fanout-search` (docs/services.md, "The tail against the fan-out width"): a page
that fans out to n search calls and waits for all of them.

Its search tier is so lightly loaded (under 1% busy at its default width) that nothing queues
to speak of, so a page's time is its own 2 ms of CPU plus the maximum of n independent
lognormal call times (median m = 5 ms, σ = 1): P(R ≤ 2 ms + x) = Φ(ln(x/m)/σ)^n, whose
q-quantile is 2 ms + m·exp(σ·Φ⁻¹(q^(1/n))). Each check holds the mean over replications of the
simulated quantile to that within 4.5 standard errors of the replications (Student's t at
0.999 two-sided for 9 degrees of freedom is 4.78); the small queueing left (the entry's CPU
shared by its requests, the search dynos' 4 slots) moves the quantiles by well under one.
"""

import json
import math
from statistics import NormalDist

import pytest

import dynosim
from dynosim import Scenario

MEDIAN, SIGMA, OWN = 0.005, 1.0, 0.002
REPLICATIONS = 10


def theory_quantile(q: float, n: int) -> float:
    return OWN + MEDIAN * math.exp(SIGMA * NormalDist().inv_cdf(q ** (1.0 / n)))


def test_the_builtin_states_what_the_test_assumes():
    doc = json.loads(Scenario.load("fanout-search").to_json())
    search = doc["services"]["search"]["service"]
    assert search["distribution"] == "lognormal" and search["sigma"] == SIGMA
    assert doc["request"]["phases"][0] == {"cpu": "2ms"}
    fanout = doc["request"]["phases"][1]
    assert fanout["fanout"] == "search" and fanout["count"] == 10 and fanout.get("wait", "all") == "all"
    assert "hedge" not in fanout or fanout["hedge"] is False
    # Light enough that its tail is the calls' own: under 1% of the search tier's slots busy.
    described = Scenario.load("fanout-search").describe()
    (svc,) = [s for s in described["services"] if s["name"] == "search"]
    assert svc["rate"] == pytest.approx(200.0)


@pytest.mark.parametrize("count", [1, 10, 100])
def test_the_page_s_tail_is_the_slowest_call_s(count):
    result = dynosim.run("fanout-search", set={"request.phases.1.count": count},
                         replications=REPLICATIONS, duration="4min", seed=11)[0]
    for metric, q in (("response.p50", 0.50), ("response.p99", 0.99)):
        est = result.estimate(metric)
        want = theory_quantile(q, count)
        assert abs(est.mean - want) <= 4.5 * est.std_error, (count, metric, est.mean, want, est.std_error)
    # Every request sent its n calls (the whole run's calls against the measured requests: the
    # warm-up's minute and the requests still out at the end make up the difference).
    sent = result["services.search.calls.sent"]
    requests = result["requests"]
    assert count * requests <= sent <= count * requests * 1.5


def test_a_wider_fan_out_has_a_longer_tail():
    """The picture's claim, at the CI's resolution: each width's p99 above the narrower one's,
    their intervals apart."""
    p99 = []
    for count in (1, 5, 25):
        result = dynosim.run("fanout-search", set={"request.phases.1.count": count},
                             replications=5, duration="3min", seed=5)[0]
        p99.append(result.estimate("response.p99"))
    for narrow, wide in zip(p99, p99[1:]):
        assert narrow.ci_high < wide.ci_low, (narrow, wide)
