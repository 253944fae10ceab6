"""`dynosim ramp` (issue #12): a scenario at a ramp of offered rates, autobench style."""

import json

import pytest

from conftest import assert_one_line_error, run_cli
from dynosim.errors import DynosimError
from dynosim.ramp import parse_rates

# rapgenius: 75 single-slot dynos; its capacity is 75 / E[S] requests per second.
ARGS = ("rapgenius", "--duration", "60s", "--replications", "4")


def capacity() -> float:
    from dynosim import Scenario

    d = Scenario.load("rapgenius").describe()
    return d["dynos"] * d["slots"] / d["service_mean"]


def test_rate_specs():
    # The form: autobench's low, high and step.
    assert parse_rates("100..2000/100") == [100.0 * k for k in range(1, 21)]
    assert parse_rates("10..25/10") == [10.0, 20.0]
    assert parse_rates("5, 50,500") == [5.0, 50.0, 500.0]
    for bad in ["", "100..50/10", "0..10/1", "10..20/0", "1..100000/0.01", "fast", "10,-5"]:
        with pytest.raises(DynosimError, match="--rates"):
            parse_rates(bad)


def test_the_response_rate_follows_the_offered_rate_up_to_capacity(tmp_path):
    cap = capacity()
    rates = [round(0.4 * cap), round(1.5 * cap), round(2 * cap)]
    result = run_cli("ramp", *ARGS, "--rates", ",".join(map(str, rates)), "--policy", "random,intelligent",
                     "--json", "--out", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["ramp"]
    assert [(r["policy"], r["offered"]) for r in rows] == [(p, float(x)) for p in ("random", "intelligent") for x in rates]
    for r in rows:
        assert r["status"] == "ok" and r["errors"] == 0
        half_width = (r["response_rate_ci_high"] - r["response_rate_ci_low"]) / 2
        # Below capacity everything offered comes back; above, the fleet answers at its capacity
        # (every slot busy once the backlog forms), whatever is offered.
        expected = r["offered"] if r["offered"] < cap else cap
        assert abs(r["response_rate"] - expected) <= 4 * half_width + 1e-9, (r, expected)
    # Queues grow with the excess: latency rises along the ramp.
    for policy in ("random", "intelligent"):
        p50 = [r["response_p50"] for r in rows if r["policy"] == policy]
        assert p50 == sorted(p50)
    for suffix in ("csv", "json", "png"):
        assert (tmp_path / f"r.{suffix}").stat().st_size > 100
    assert json.loads((tmp_path / "r.json").read_text())["ramp"] == rows


def test_a_step_past_max_waiting_is_overloaded_not_an_error(tmp_path):
    cap = capacity()
    result = run_cli("ramp", *ARGS, "--rates", f"{round(0.5 * cap)},{round(3 * cap)}", "--policy", "random",
                     "--set", "run.max_waiting=2000", "--json")
    assert result.returncode == 0, result.stderr
    low, high = json.loads(result.stdout)["ramp"]
    assert low["status"] == "ok"
    assert high["status"] == "overloaded" and high["response_rate"] is None


def test_the_table(tmp_path):
    result = run_cli("ramp", *ARGS, "--rates", "100,200")
    assert result.returncode == 0, result.stderr
    assert "offered" in result.stdout and "response" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.strip().endswith(" ok")]
    assert [(r[0], r[1]) for r in rows] == [(p, x) for p in ("random", "intelligent") for x in ("100", "200")]


@pytest.mark.parametrize("args, fragment", [
    (("--rates", "300..100/10"), "--rates"),
    (("--rates", "100", "--set", "arrivals.process=\"closed\"", "--set", "arrivals.clients=3"), "closed loop"),
    (("--rates", "100", "--policy", "nope"), "--policy"),
])
def test_bad_input_is_one_line(args, fragment):
    assert_one_line_error(run_cli("ramp", "rapgenius", *args), fragment)
