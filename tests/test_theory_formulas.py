"""dynosim.theory (issue #10, section 8): each formula against a value computed here
independently, by a closed form, a birth-death chain solved with numpy, or the product form
of a closed network enumerated state by state."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynosim import theory
from dynosim.theory import Station


def erlang_c_by_the_sum(c, a):
    """The textbook Erlang C: [a^c/c!·1/(1 − ρ)] / [Σ_{j<c} a^j/j! + a^c/c!·1/(1 − ρ)]."""
    tail = a**c / math.factorial(c) / (1 - a / c)
    return tail / (sum(a**j / math.factorial(j) for j in range(c)) + tail)


def birth_death(up, down, states):
    """Stationary distribution of a birth-death chain on 0..states-1 (rates as functions)."""
    log_w = np.zeros(states)
    for j in range(1, states):
        log_w[j] = log_w[j - 1] + math.log(up(j - 1)) - math.log(down(j))
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


def product_form(customers, think_time, stations):
    """X(N) and the mean number at each station, from G(N) = Σ over placements of N customers
    of Π_i f_i(n_i), with f(k) = D^k/Π_{j≤k} min(j, m) (m = ∞ for a delay and the think time)."""

    def f(demand, servers, k):
        return math.prod(demand / (j if servers is None else min(j, servers)) for j in range(1, k + 1))

    places = [(think_time, None)] + [
        (s.demand, None if s.kind == "delay" else s.servers) for s in stations
    ]

    def solve(n):
        g, q = 0.0, np.zeros(len(places))
        for split in itertools.product(range(n + 1), repeat=len(places) - 1):
            if sum(split) > n:
                continue
            counts = (n - sum(split),) + split
            w = math.prod(f(d, m, k) for (d, m), k in zip(places, counts))
            g += w
            q += w * np.array(counts)
        return g, q / g

    g_n, q = solve(customers)
    g_prev, _ = solve(customers - 1)
    return g_prev / g_n, q[1:]


# --- the helpers that were there before, under their readable names ---------------------


def test_wait_probability_is_erlang_c():
    for c, a in [(1, 0.7), (5, 3.5), (20, 16.0)]:
        assert theory.mmc_wait_probability(c, a) == pytest.approx(erlang_c_by_the_sum(c, a), rel=1e-12)
    assert theory.erlang_c is theory.mmc_wait_probability


def test_mmc_and_mg1_waits_have_their_closed_forms():
    # M/M/1: ρE[S]/(1 − ρ); M/M/2: ρ²E[S]/(1 − ρ²).
    assert theory.mmc_mean_wait(1, 0.8, 0.1) == pytest.approx(0.8 * 0.1 / 0.2, rel=1e-12)
    assert theory.mmc_mean_wait(2, 1.5, 2.0) == pytest.approx(0.75**2 * 2 / (1 - 0.75**2), rel=1e-12)
    # Pollaczek–Khinchine with exponential service is M/M/1; constant service halves the wait.
    assert theory.mg1_mean_wait(8.0, 0.1, 2 * 0.1**2) == pytest.approx(0.4, rel=1e-12)
    assert theory.mg1_mean_wait(8.0, 0.1, 0.1**2) == pytest.approx(0.2, rel=1e-12)


def test_power_of_d_is_the_mean_field_sum():
    # Little's law on the fixed point s_i = λ^((dⁱ − 1)/(d − 1)): T = Σ s_i / λ.
    for load, d in [(0.5, 2), (0.9, 2), (0.95, 3)]:
        jobs = sum(load ** ((d**i - 1) / (d - 1)) for i in range(1, 40))
        assert theory.power_of_d_mean_response(load, d) == pytest.approx(jobs / load, rel=1e-10)
    assert theory.power_of_d_mean_response(0.9, 2) == pytest.approx(2.6141, abs=1e-4)


# --- processor sharing, pools, CPU, Little -----------------------------------------------


@pytest.mark.parametrize("lam, mean, cores", [(0.5, 1.0, 1), (3.0, 1.0, 4), (1.9, 1.0, 2), (70.0, 1.0, 80), (40.0, 0.02, 1)])
def test_processor_sharing_has_mmk_numbers_in_system(lam, mean, cores):
    # The number in system is insensitive and M/M/k's: solve that chain, then Little's law.
    states = 5000
    p = birth_death(lambda j: lam, lambda j: min(j, cores) / mean, states)
    expected = float(np.dot(np.arange(states), p)) / lam
    assert theory.ps_mean_response(lam, mean, cores) == pytest.approx(expected, rel=1e-9)
    if cores == 1:
        assert theory.ps_mean_response(lam, mean) == pytest.approx(mean / (1 - lam * mean), rel=1e-12)


def test_pool_wait_is_the_mmc_wait_of_its_connections():
    lam, hold, c = 425.0, 0.02, 10  # a = 8.5 erlangs
    a = lam * hold
    expected = erlang_c_by_the_sum(c, a) * hold / (c - a)
    assert theory.pool_mean_wait(lam, hold, c) == pytest.approx(expected, rel=1e-12)
    assert theory.pool_mean_wait(0.0, hold, c) == 0.0
    # More connections, less waiting.
    assert theory.pool_mean_wait(lam, hold, 12) < theory.pool_mean_wait(lam, hold, 10)


def test_cpu_bound_throughput_counts_what_runs_at_once():
    # Gunicorn-like: 4 processes × 8 threads on 16 cores, 50 ms of CPU per request.
    assert theory.cpu_bound_throughput(0.05, 4, 8, 16, lock=True) == pytest.approx(80.0)
    assert theory.cpu_bound_throughput(0.05, 4, 8, 16, lock=False) == pytest.approx(320.0)
    assert theory.cpu_bound_throughput(0.1, 32, 1, 8, lock=True) == pytest.approx(80.0)
    assert theory.cpu_bound_throughput(0.5, 1, 16, 8, lock=True) == pytest.approx(2.0)
    assert theory.cpu_bound_throughput(0.5, 1, 16, 8, lock=False) == pytest.approx(16.0)


def test_littles_law_gap():
    assert theory.littles_law_gap(10.0, 5.0, 2.0) == 0.0
    assert theory.littles_law_gap(10.0, 5.0, 2.2) == pytest.approx(1 / 11)
    assert theory.littles_law_gap(11.0, 5.0, 2.0) == pytest.approx(1 / 11)
    assert theory.littles_law_gap(0.0, 0.0, 0.0) == 0.0
    assert math.isnan(theory.littles_law_gap(float("nan"), 1.0, 1.0))


# --- mean-value analysis -----------------------------------------------------------------


def test_mva_two_stations_by_hand():
    # Z = 1, D = (1, 2), one server each; the recursion in exact fractions.
    q, z, demands = [Fraction(0)] * 2, Fraction(1), [Fraction(1), Fraction(2)]
    for n in (1, 2, 3):
        r = [d * (1 + qi) for d, qi in zip(demands, q)]
        x = n / (z + sum(r))
        q = [x * ri for ri in r]
        net = theory.mva(n, [(1.0, 1), (2.0, 1)], think_time=1.0)
        assert net.throughput == pytest.approx(float(x), rel=1e-14)
        assert net.response_time == pytest.approx(float(sum(r)), rel=1e-14)
        assert net.queue_lengths == pytest.approx([float(v) for v in q], rel=1e-14)
        assert net.residence_times == pytest.approx([float(v) for v in r], rel=1e-14)
        assert net.utilisations == pytest.approx([float(x * d) for d in demands], rel=1e-14)
    assert (float(x), float(q[0])) == pytest.approx((63 / 142, 93 / 142))


@pytest.mark.parametrize(
    "n, z, d, m",
    [(3, 1.0, 1.0, 2), (10, 1.0, 0.5, 3), (1000, 1.0, 0.5, 3), (200, 1.0, 0.3, 8), (2000, 5.0, 0.3, 8), (40, 30.0, 1.0, 4)],
)
def test_mva_one_multi_server_station_is_the_machine_repairman_queue(n, z, d, m):
    # Finite source M/M/m//N: j at the servers, up at (N − j)/Z, down at min(j, m)/D.
    p = birth_death(lambda j: (n - j) / z, lambda j: min(j, m) / d, n + 1)
    j = np.arange(n + 1)
    x = float(np.dot(np.minimum(j, m), p)) / d
    net = theory.mva(n, [Station(d, m)], think_time=z)
    assert net.throughput == pytest.approx(x, rel=1e-9)
    assert net.queue_lengths[0] == pytest.approx(float(np.dot(j, p)), rel=1e-9)
    assert net.utilisations[0] == pytest.approx(x * d / m, rel=1e-9)
    assert theory.littles_law_gap(n - x * z, net.throughput, net.response_time) < 1e-12


def test_mva_mixed_network_against_the_product_form():
    stations = [Station(0.4, 2), Station(0.3), Station.delay(0.5), Station(0.9, 3), Station(0.2, 5)]
    for n, z in [(1, 1.0), (3, 0.0), (6, 0.5)]:
        net = theory.mva(n, stations, think_time=z)
        x, q = product_form(n, z, stations)
        assert net.throughput == pytest.approx(x, rel=1e-11)
        assert net.queue_lengths == pytest.approx(list(q), rel=1e-10, abs=1e-12)
        assert sum(net.queue_lengths) + net.throughput * z == pytest.approx(n, rel=1e-12)


# Zero or at least 10⁻³: the enumeration above underflows on demands near 10⁻³⁰⁰.
demand_strategy = st.one_of(st.just(0.0), st.floats(1e-3, 2.0))
station_strategy = st.builds(
    Station,
    demand=demand_strategy,
    servers=st.integers(1, 4),
    kind=st.sampled_from(["queueing", "queueing", "delay"]),
)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 6),
    z=demand_strategy,
    stations=st.lists(station_strategy, min_size=1, max_size=3),
)
def test_mva_agrees_with_the_product_form_on_random_networks(n, z, stations):
    if z + sum(s.demand for s in stations) == 0:
        with pytest.raises(ValueError, match="needs"):
            theory.mva(n, stations, think_time=z)
        return
    net = theory.mva(n, stations, think_time=z)
    x, q = product_form(n, z, stations)
    assert net.throughput == pytest.approx(x, rel=1e-9)
    assert net.queue_lengths == pytest.approx(list(q), rel=1e-9, abs=1e-9 * n)


def test_mva_bounds_and_bottleneck():
    stations = [Station(0.2, 4), Station(0.04), Station.delay(0.1)]
    z, total = 1.0, 0.34
    previous = 0.0
    for n in [1, 2, 5, 10, 20, 50, 200, 5000]:
        x = theory.mva(n, stations, think_time=z).throughput
        assert x <= min(n / (total + z), 20.0) * (1 + 1e-12)
        assert x >= previous
        previous = x
    assert theory.mva(1, stations, think_time=z).throughput == pytest.approx(1 / (total + z), rel=1e-14)
    assert theory.mva(5000, stations, think_time=z).throughput == pytest.approx(20.0, rel=1e-9)


def test_mva_takes_stations_as_tuples():
    a = theory.mva(5, [(0.3, 2), (0.1, 1, "queueing"), (0.5, 1, "delay")], think_time=1.0)
    b = theory.mva(5, [Station(0.3, 2), Station(0.1), Station.delay(0.5)], think_time=1.0)
    assert a == b
    assert isinstance(a, theory.ClosedNetwork)


# --- the domain --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.mmc_wait_probability(3, 3.0),
        lambda: theory.mmc_mean_wait(3, 1.0, 0.0),
        lambda: theory.mg1_mean_wait(2.0, 0.5, 1.0),
        lambda: theory.power_of_d_mean_response(0.5, 1),
        lambda: theory.ps_mean_response(1.0, 1.0, 1),
        lambda: theory.ps_mean_response(-1.0, 1.0, 2),
        lambda: theory.ps_mean_response(1.0, 1.0, 0),
        lambda: theory.pool_mean_wait(30.0, 0.1, 3),
        lambda: theory.pool_mean_wait(1.0, float("nan"), 3),
        lambda: theory.cpu_bound_throughput(0.0, 1, 1, 1, True),
        lambda: theory.cpu_bound_throughput(0.1, 0, 1, 1, True),
        lambda: theory.cpu_bound_throughput(0.1, -2, 1, 1, True),
        lambda: theory.mmc_wait_probability(-1, 0.5),
        lambda: theory.pool_mean_wait(1.0, 0.1, 2**32),
        lambda: theory.mva(0, [Station(1.0)]),
        lambda: theory.mva(100_001, [Station(1.0)]),
        lambda: theory.mva(3, [Station(-1.0)]),
        lambda: theory.mva(3, [Station(1.0, 0)]),
        lambda: theory.mva(3, [Station(1.0, 1, "fcfs")]),
        lambda: theory.mva(3, [Station(0.0)], think_time=0.0),
        lambda: theory.mva(3, [Station(1.0)], think_time=-1.0),
        lambda: theory.mva(3, [Station(1.0)] * 1001),
        lambda: theory.mva(100_000, [Station(1.0, 50_000)] * 20),
    ],
)
def test_outside_the_domain_is_a_value_error(call):
    with pytest.raises(ValueError, match="needs|kind"):
        call()


def test_the_docstring_examples_hold():
    import doctest

    result = doctest.testmod(theory)
    assert result.attempted >= 8 and result.failed == 0


def test_mmck_blocking_against_the_birth_death_chain_in_exact_fractions():
    # π_n ∝ a^n/n! up to c, then π_c (a/c)^(n−c): rational for rational a.
    c, k, a = 3, 7, Fraction(5, 2)
    weights = []
    for n in range(k + 1):
        w = a ** n / math.factorial(min(n, c)) / Fraction(c) ** max(n - c, 0)
        weights.append(w)
    exact = weights[-1] / sum(weights)
    assert theory.mmck_blocking(c, k, float(a), 1.0) == pytest.approx(float(exact), rel=1e-12)


def test_erlang_a_conserves_arrivals_and_tends_to_erlang_c():
    # Patient customers: Erlang C. Impatient ones: abandonment is θ·E[queue]/λ, and they wait less.
    got = theory.erlang_a(servers=3, arrival_rate=2.5, mean_service=1.0, mean_patience=1e9)
    assert got.p_wait == pytest.approx(theory.mmc_wait_probability(3, 2.5), rel=1e-6)
    assert got.p_abandon < 1e-8
    impatient = theory.erlang_a(servers=3, arrival_rate=2.5, mean_service=1.0, mean_patience=0.2)
    assert impatient.p_abandon == pytest.approx(5.0 * impatient.mean_queue / 2.5)
    assert impatient.mean_wait < got.mean_wait


def test_new_formulas_refuse_their_outside():
    with pytest.raises(ValueError, match="mm1_late_fraction"):
        theory.mm1_late_fraction(1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="erlang_a"):
        theory.erlang_a(0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="capacity >= servers"):
        theory.mmck_blocking(3, 2, 1.0, 1.0)
