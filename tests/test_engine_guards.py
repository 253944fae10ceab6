"""The engine's guards on its input, as Python sees them (issue #9): theory helpers outside
their domain, a slow validation stopped by an interrupt, fleets too large for memory, per-dyno
lists kept out of reports, the relaxation time in describe()."""

import json
import threading

import pytest

from conftest import assert_one_line_error

import dynosim
from dynosim import _dynosim

BASE = {
    "arrivals": {"process": "poisson", "rate": "150/s"},
    "service": {"distribution": "exponential", "mean": "100ms"},
    "fleet": {"dynos": 75, "slots": 1},
    "router": {"policy": "random"},
    "run": {"duration": "10s", "warmup": "0s", "replications": 2, "seed": 1},
}


def engine_error(doc, fn=_dynosim.describe, *args):
    with pytest.raises(_dynosim.EngineError) as info:
        fn(json.dumps(doc), ".", *args)
    return info.value.args


@pytest.mark.parametrize(
    "call",
    [
        lambda: _dynosim.erlang_c(3, 4.0),
        lambda: _dynosim.mmc_mean_wait(3, 3.0, 1.0),
        lambda: _dynosim.mg1_mean_wait(2.0, 0.5, 1.0),
        lambda: _dynosim.power_of_d_mean_time(1.0, 2),
        lambda: _dynosim.power_of_d_mean_time(0.5, 1),
    ],
)
def test_theory_helpers_raise_value_error_outside_their_domain(call):
    # They panicked (PanicException) before.
    with pytest.raises(ValueError, match="needs"):
        call()


def test_service_quantiles_outside_zero_one_raise_value_error():
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        _dynosim.service_quantiles(json.dumps(BASE), ".", [0.5, 1.5])
    assert _dynosim.service_quantiles(json.dumps(BASE), ".", [0.5])[0] == pytest.approx(0.0693, rel=1e-3)


def test_describe_states_the_relaxation_time():
    described = json.loads(_dynosim.describe(json.dumps(BASE), "."))
    # Random routing: M/M/1 per dyno at rho = 0.2, so 4 rho E[S] / (1 - rho)^2.
    assert described["relaxation_time"] == pytest.approx(4 * 0.2 * 0.1 / 0.8**2)


def test_a_slow_validation_is_interrupted():
    # Exact moments of a gamma rounded up to 1 ns under a 10 ms clip: 10^7 cdf evaluations,
    # seconds of work. It ran holding the GIL, so no other thread could even ask it to stop.
    doc = dict(BASE, service={"distribution": "gamma", "shape": 2, "mean": "2ms",
                              "round_up": "1ns", "clip": ["0s", "10ms"]})
    timer = threading.Timer(0.3, _dynosim.interrupt)
    timer.start()
    try:
        kind, _, _ = engine_error(doc)
    finally:
        timer.cancel()
    assert kind == "interrupted"


def test_a_fleet_too_large_for_memory_is_one_line_and_exit_2(cli):
    result = cli("run", "--set", "fleet.dynos=10000000", "--set", "fleet.slots=1000",
                 "--policy", "random")
    assert_one_line_error(result, "fleet:", "10000000 dynos x 1000 slots", "run.max_memory")


@pytest.mark.parametrize(
    "edit, path, fragment",
    [
        ({"arrivals": {"process": "poisson", "rate": "150 rpsXYZ"}}, "arrivals.rate", "expected a rate"),
        ({"run": {"duration": 1e-16}}, "run.duration", "at least 1 ns"),
        ({"router": {"policy": "retry_if_busy", "tries": 2**32 + 1}}, "router.tries", "<= 100"),
        ({"service": {"distribution": "empirical", "file": "/dev/zero"}}, "service.file",
         "not a regular file"),
        ({"service": {"distribution": "lognormal", "median": "50ms", "sigma": 20}}, "service.median",
         "not finite"),
    ],
)
def test_input_the_engine_refuses(edit, path, fragment):
    kind, got_path, message = engine_error({**BASE, **edit})
    assert (kind, got_path) == ("config", path), message
    assert fragment in message


def test_per_dyno_utilisation_only_in_the_summary():
    result = dynosim.run("rapgenius", set={"run.duration": "10s", "fleet.dynos": 80},
                         policies=["random"], replications=2)[0]
    assert len(result.summary["utilisation"]["per_dyno"]) == 80
    assert all("per_dyno" not in r["utilisation"] for r in result.per_replication)
