"""Issue 26's balancers from the command line: Join-Idle-Queue (`jiq`), peak-EWMA power of two
(`p2c_ewma`) and the aperture (`router.aperture`), each as a user would run it (docs/model.md)."""

import json

SHORT = ["--duration", "20s", "--replications", "2"]


def _results(result):
    assert result.returncode == 0, result.stderr
    return {r["policy"]: r for r in json.loads(result.stdout)["results"]}


def test_compare_jiq_with_random_on_several_routers(cli):
    """`dynosim compare --policy jiq,random --set router.routers=4`: the idle lists send most
    requests to idle dynos (routing.idle_hits), and fewer wait than under random routing."""
    results = _results(cli("compare", "--policy", "jiq,random", "--set", "router.routers=4",
                           "--set", 'router.jiq_report_delay="1ms"', *SHORT, "--json"))
    jiq, random = results["jiq"]["summary"], results["random"]["summary"]
    assert jiq["routing"]["idle_hits"]["mean"] > 0.5
    assert "routing" not in random
    assert jiq["queued_fraction"]["mean"] < random["queued_fraction"]["mean"]


def test_run_p2c_ewma_with_its_decay(cli):
    """`dynosim run --policy p2c_ewma --set router.decay=5s`: load-aware, so fewer requests
    wait than under random routing on the same traffic."""
    results = _results(cli("compare", "--policy", "p2c_ewma,random", "--set", 'router.decay="5s"',
                           "--set", 'router.default_rtt="100ms"', *SHORT, "--json"))
    assert results["p2c_ewma"]["summary"]["queued_fraction"]["mean"] < \
        results["random"]["summary"]["queued_fraction"]["mean"]


def test_run_with_an_aperture(cli):
    """`dynosim run --policy least_connections --set router.aperture=60`: the router sends to
    60 of the 75 dynos and never to the other 15."""
    result = cli("run", "--policy", "least_connections", "--set", "router.aperture=60",
                 "--duration", "20s", "--replications", "1", "--json")
    report = _results(result)["least_connections"]
    used = [u for u in report["summary"]["utilisation"]["per_dyno"] if u > 0]
    assert len(used) == 60
