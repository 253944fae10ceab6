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


def survival(x: float) -> float:
    """P(S > x) of one search call."""
    return 1.0 if x <= 0 else 1.0 - NormalDist().cdf(math.log(x / MEDIAN) / SIGMA)


def hedged_quantile(q: float, n: int, p: float = 0.95) -> float:
    """The q-quantile of the page's time when each call is hedged at the calls' p-quantile T:
    a call lasts R = min(S₁, T + S₂), P(R > x) = P(S > x) before T and P(S > x)·P(S > x − T)
    after it (docs/services.md, "Hedging"), and the page the largest of n such times."""
    t = MEDIAN * math.exp(SIGMA * NormalDist().inv_cdf(p))

    def cdf(x: float) -> float:
        tail = survival(x) * (survival(x - t) if x >= t else 1.0)
        return (1.0 - tail) ** n

    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < q else (lo, mid)
    return OWN + lo


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


@pytest.mark.parametrize("count", [1, 10, 100])
def test_hedging_at_the_calls_p95_gives_the_hedged_law(count):
    """With `hedge = "p95"` the call site learns T from its answers (the callee's p95, nothing
    queueing); a page's quantiles are then those of the largest of n hedged calls, and about 5%
    of the calls get a second copy (P(S > T))."""
    result = dynosim.run("fanout-search", set={"request.phases.1.count": count, "request.phases.1.hedge": "p95"},
                         replications=REPLICATIONS, duration="4min", seed=13)[0]
    for metric, q in (("response.p50", 0.50), ("response.p99", 0.99)):
        est = result.estimate(metric)
        want = hedged_quantile(q, count)
        assert abs(est.mean - want) <= 4.5 * est.std_error, (count, metric, est.mean, want, est.std_error)
    hedged = result.estimate("services.search.calls.hedged")
    sent = result.estimate("services.search.calls.sent")
    # Hedged copies over first copies: P(S > T) = 5%, from about 48,000 × n calls (10 replications
    # of 4,800 pages; the binomial's SE is under 0.1%; the learnt T's error and the first 100 answers, sent
    # unhedged, add less).
    assert abs(hedged.mean / (sent.mean - hedged.mean) - 0.05) < 0.005, (hedged.mean, sent.mean)


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
