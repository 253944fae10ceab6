"""Queueing formulas to call yourself: the results dynosim is checked against, and a few more.

Every function is exact (or, for ``power_of_d_mean_response``, an exact limit) under the
assumptions it states, and computed by the engine. Outside its domain (an unstable load, a
negative count, a zero service time) it raises ``ValueError`` naming what it needs. Times are
in seconds and rates per second, but any consistent unit works. docs/model.md, section 8,
lists the formulas and their references.

>>> from dynosim import theory
>>> round(theory.mmc_wait_probability(servers=4, offered_load=3.0), 4)   # Erlang C
0.5094
>>> round(theory.ps_mean_response(arrival_rate=3.0, mean_service=1.0, cores=4), 4)
1.5094
>>> net = theory.mva(20, [theory.Station(0.2, servers=4), theory.Station(0.05)], think_time=1.0)
>>> round(net.throughput, 2)
14.42
"""

import operator
from dataclasses import dataclass
from typing import List, NamedTuple, Sequence, Tuple, Union

from . import _dynosim

__all__ = [
    "mmc_wait_probability",
    "erlang_c",
    "mmc_mean_wait",
    "mg1_mean_wait",
    "power_of_d_mean_response",
    "ps_mean_response",
    "pool_mean_wait",
    "mm1_late_fraction",
    "ErlangA",
    "erlang_a",
    "mmck_blocking",
    "cpu_bound_throughput",
    "littles_law_gap",
    "Station",
    "ClosedNetwork",
    "mva",
]

_U32_MAX = 2**32 - 1


def _count(name: str, value: int) -> int:
    """A whole number for the engine's unsigned 32-bit parameters, or ValueError."""
    number = operator.index(value)
    if not 0 <= number <= _U32_MAX:
        raise ValueError(f"{name} needs a whole number from 0 to {_U32_MAX}, got {number}")
    return number


def mmc_wait_probability(servers: int, offered_load: float) -> float:
    """Erlang C: the probability that an arrival waits in an M/M/c queue.

    ``offered_load`` is a = λ·E[S] in erlangs, ``servers`` is c. Needs 0 <= a < c. Computed
    from the Erlang B recursion B_j = a·B_{j−1}/(j + a·B_{j−1}), C = B_c/(1 − (a/c)(1 − B_c)),
    which stays stable for thousands of servers (Kleinrock 1975).
    """
    return _dynosim.erlang_c(_count("servers", servers), offered_load)


erlang_c = mmc_wait_probability


def mmc_mean_wait(servers: int, offered_load: float, mean_service: float) -> float:
    """Mean wait in queue of M/M/c: W = C(c, a)·E[S]/(c − a) (Erlang C; Kleinrock 1975).

    Needs 0 <= a < c and E[S] > 0. The mean response time is W + E[S].
    """
    return _dynosim.mmc_mean_wait(_count("servers", servers), offered_load, mean_service)


def mg1_mean_wait(arrival_rate: float, mean_service: float, second_moment: float) -> float:
    """Mean wait in queue of M/G/1 (Pollaczek–Khinchine): W = λ·E[S²]/(2(1 − ρ)), ρ = λE[S].

    Needs λ >= 0, E[S] > 0, E[S²] finite and > 0, and ρ < 1. With random routing over n
    single-slot dynos each dyno is M/G/1 at rate λ/n.
    """
    return _dynosim.mg1_mean_wait(arrival_rate, mean_service, second_moment)


def power_of_d_mean_response(load: float, d: int) -> float:
    """Mean response time, in units of E[S], of power-of-d routing as the fleet grows.

    Each request joins the shortest of d dynos drawn at random; service is exponential and
    ``load`` = λ per dyno·E[S] < 1. In the mean-field limit (Mitzenmacher 1996; Vvedenskaya,
    Dobrushin and Karpelevich 1996) T = Σ_{i≥1} load^((dⁱ − d)/(d − 1)). Needs d >= 2. A
    fleet of n dynos does worse by a term of order 1/n.
    """
    return _dynosim.power_of_d_mean_time(load, _count("d", d))


def ps_mean_response(arrival_rate: float, mean_service: float, cores: int = 1) -> float:
    """Mean response time of M/G/k processor sharing: ``cores`` = k shared by all jobs present.

    Each of n jobs is served at rate min(1, k/n), whatever the service distribution (only its
    mean E[S] matters: the number in system is insensitive, and equals M/M/k's). For one core
    E[T] = E[S]/(1 − ρ) (Kleinrock 1976); for k cores E[T] = E[S] + C(k, a)·E[S]/(k − a), with
    a = λE[S] and C Erlang C (Cohen 1979; Kelly 1979). Needs λ >= 0, E[S] > 0 and a < k.
    """
    return _dynosim.ps_mean_response(arrival_rate, mean_service, _count("cores", cores))


def pool_mean_wait(arrival_rate: float, mean_hold: float, connections: int) -> float:
    """Mean wait for a connection from a pool of ``connections`` (M/M/c, Erlang C).

    Requests for a connection arrive at ``arrival_rate`` (Poisson) and hold one for an
    exponential time of mean ``mean_hold``; waiters are served in order. W = C(c, a)·E[H]/(c − a)
    with a = λ·E[H]. Needs λ >= 0, E[H] > 0 and a < c.
    """
    return _dynosim.pool_mean_wait(arrival_rate, mean_hold, _count("connections", connections))


def mm1_late_fraction(arrival_rate: float, service_rate: float, deadline: float) -> float:
    """The fraction of M/M/1 responses later than ``deadline``: e^{−(μ − λ)T}.

    The response time of M/M/1 (FCFS) is exponential with rate μ − λ. With a router timeout
    whose work goes on (Heroku's H12: the dyno is not told), the queue is what it would be
    without the timeout, so this is also the fraction of requests that get the timeout's
    error. Needs 0 <= λ < μ and T >= 0.

    >>> round(mm1_late_fraction(arrival_rate=0.5, service_rate=1.0, deadline=2.0), 4)
    0.3679
    """
    return _dynosim.mm1_late_fraction(arrival_rate, service_rate, deadline)


class ErlangA(NamedTuple):
    """Erlang-A's answers (see :func:`erlang_a`)."""

    p_wait: float
    """P(an arrival waits): every server busy."""
    p_abandon: float
    """P(an arrival abandons before service) = θ·E[queue]/λ."""
    mean_wait: float
    """Mean time in queue over all arrivals, served or abandoning."""
    mean_queue: float
    """Mean number waiting."""


def erlang_a(servers: int, arrival_rate: float, mean_service: float, mean_patience: float) -> ErlangA:
    """Erlang-A (M/M/c+M): c exponential servers and a queue whose customers abandon after an
    exponential patience: a router's queue timeout (HAProxy's ``timeout queue``) with impatient
    clients.

    The birth–death chain on the number in system, born at λ and dying at
    min(n, c)·μ + max(n − c, 0)·θ (Palm 1943; Garnett, Mandelbaum & Reiman 2002). Stable at any
    load. Needs c >= 1, λ > 0, E[S] > 0 and a mean patience > 0.

    >>> round(erlang_a(servers=2, arrival_rate=10.0, mean_service=1.0, mean_patience=0.5).p_abandon, 3)
    0.801
    """
    return ErlangA(*_dynosim.erlang_a(_count("servers", servers), arrival_rate, mean_service, mean_patience))


def mmck_blocking(servers: int, capacity: int, arrival_rate: float, mean_service: float) -> float:
    """The fraction of arrivals turned away by M/M/c/K: c servers and room for K requests in
    all (a backlog cap: Heroku's H11, a full listen backlog). K = c is Erlang B. Any load.
    Needs c >= 1, K >= c, λ >= 0 and E[S] > 0.

    >>> round(mmck_blocking(servers=1, capacity=10, arrival_rate=0.8, mean_service=1.0), 4)
    0.0235
    """
    return _dynosim.mmck_blocking(_count("servers", servers), _count("capacity", capacity), arrival_rate,
                                  mean_service)


def cpu_bound_throughput(
    cpu_per_request: float, processes: int, threads_per_process: int, cores: int, lock: bool
) -> float:
    """The most requests per second CPU-bound work can complete.

    Each request needs ``cpu_per_request`` seconds of CPU. A thread computes on at most one
    core at a time; with an interpreter ``lock`` (CPython's GIL, Ruby's GVL) so does a whole
    process, however many threads it has:

        with a lock:    X <= min(processes, cores) / cpu_per_request
        without one:    X <= min(processes × threads_per_process, cores) / cpu_per_request

    (the utilisation law, Denning and Buzen 1978). Needs cpu_per_request > 0 and every count
    >= 1.
    """
    return _dynosim.cpu_bound_throughput(
        cpu_per_request,
        _count("processes", processes),
        _count("threads_per_process", threads_per_process),
        _count("cores", cores),
        bool(lock),
    )


def littles_law_gap(mean_in_system: float, throughput: float, mean_response: float) -> float:
    """How far figures are from Little's law L = X·R (Little 1961), relatively.

    Returns |L − X·R| / max(|L|, |X·R|): 0 when they agree (or are both 0), NaN when an input
    is NaN or infinite. Figures measured over a finite window agree within their sampling
    error, not exactly.
    """
    return _dynosim.littles_law_gap(mean_in_system, throughput, mean_response)


class Station(NamedTuple):
    """A station of a closed network, for :func:`mva`.

    ``demand`` is D = visits per cycle × mean service time per visit (s). ``kind`` is
    ``"queueing"`` (``servers`` servers: first come first served with exponential service, or
    processor sharing with any service distribution) or ``"delay"`` (no queue: each customer
    just spends its time there, like a network hop; ``servers`` is ignored).
    """

    demand: float
    servers: int = 1
    kind: str = "queueing"

    @classmethod
    def delay(cls, demand: float) -> "Station":
        """A delay station (infinite servers) of demand D."""
        return cls(demand, 1, "delay")


@dataclass(frozen=True)
class ClosedNetwork:
    """Exact means of a closed network, from :func:`mva`."""

    #: X(N): cycles (requests) completed per second.
    throughput: float
    #: R(N) = N/X − Z: mean time of one pass through the stations, think time excluded.
    response_time: float
    #: Mean customers at each station, waiting or in service.
    queue_lengths: List[float]
    #: Mean time per cycle at each station (queue length / throughput).
    residence_times: List[float]
    #: Fraction of time each server of a queueing station is busy, X·D/m; 0 for a delay.
    utilisations: List[float]


StationLike = Union[Station, Tuple[float, int], Tuple[float, int, str]]


def mva(customers: int, stations: Sequence[StationLike], think_time: float = 0.0) -> ClosedNetwork:
    """Exact mean-value analysis of a closed network with one class of customers.

    ``customers`` = N customers each think for ``think_time`` = Z on average, then pass once
    through the ``stations`` (each a :class:`Station`, or a tuple ``(demand, servers)`` or
    ``(demand, servers, kind)``), and start again. The network is of product form, so the
    means are exact. With one server per station the recursion over n = 1..N is
    (Reiser and Lavenberg 1980)

        R_i(n) = D_i·(1 + Q_i(n − 1)),  X(n) = n / (Z + Σ R_i(n)),  Q_i(n) = X(n)·R_i(n).

    Stations with several servers are load dependent and handled exactly through their
    marginal probabilities (see docs/model.md). X(N) never exceeds min(N/(Z + Σ D_i),
    min m_i/D_i) and approaches the second bound, the bottleneck, as N grows.

    Needs 1 <= N <= 100,000, at most 1,000 stations, demands and Z >= 0 with a positive sum,
    at least one server at each queueing station, and a network small enough to solve in a
    few seconds.
    """
    rows = []
    for station in stations:
        demand, servers, kind = Station(*station)
        rows.append((float(demand), _count("servers", servers), str(kind)))
    result = _dynosim.mva_closed(_count("customers", customers), think_time, rows)
    return ClosedNetwork(**result)
