"""The testbed's measured figures mean what the simulated ones mean (docs/output.md, issue 23
item 8): checked on schedules whose answers are worked out by hand, against the engine on the
same system, and on a recorded real run of ``dynosim testbed gunicorn-db``.

No component is needed: these tests give :func:`dynosim.testbed.measure.replication` the
records a real run would give it.
"""

from __future__ import annotations

import csv
import heapq
import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

import dynosim
from dynosim import Scenario
from dynosim.testbed import measure

FIXTURES = Path(__file__).parent / "fixtures" / "testbed"
T0 = 1000.0  # the run's start, as the load generator's wall clock would give it


def closed_loop(clients: int, workers: int, service: float, n: int, *, gap: float = 0.0, after: float = 0.0,
                spread: float = 0.0) -> List[Dict[str, float]]:
    """A closed loop of `clients` (ab's -c, no think time) sending `n` requests to one dyno of
    `workers` sync workers sharing its accept queue (FCFS), every request `service` long: the
    records the testbed would have, relative to the start. Client k sends its first request at
    k × `spread`; a worker takes its next request `gap` after its previous one ended in the app
    (the stack's time between two requests: app.overhead); the client has the response `after`
    after the app's end and sends its next request at once."""
    sends = [(k * spread, k) for k in range(min(clients, n))]
    heapq.heapify(sends)
    free = [0.0] * workers
    rows = []
    following = len(sends)
    while sends:
        sent, i = heapq.heappop(sends)  # in order of arrival: FCFS
        w = min(range(workers), key=lambda k: (free[k], k))
        start = max(sent, free[w])
        end = start + service
        free[w] = end + gap
        rows.append({"index": i, "sent": sent, "start": start, "end": end, "done": end + after, "worker": w})
        if following < n:
            heapq.heappush(sends, (end + after, following))
            following += 1
    return sorted(rows, key=lambda r: r["index"])


def pid(row: Dict[str, Any]) -> int:
    """The worker process that had the request: its recorded pid, or one per worker index."""
    return int(row["pid"]) if "pid" in row else 100 + int(row["worker"])


def as_records(rows: List[Dict[str, Any]]) -> tuple:
    """The load generator's records, HAProxy's log and the app's work log for `rows` (times
    relative to the start; ``tw``/``tc`` HAProxy's queue and connect times, 0 when absent)."""
    n = len(rows)

    def stamp(key: str) -> List[float]:
        return [T0 + r[key] if r.get(key) is not None else math.nan for r in rows]

    load = {"start": T0, "index": [r["index"] for r in rows], "scheduled": stamp("sent"), "sent": stamp("sent"),
            "done": stamp("done"), "status": [r.get("status", 200) for r in rows],
            "error": [r.get("error") for r in rows],
            "headers": {"x-dynosim-start": [None] * n, "x-dynosim-end": [None] * n, "x-dynosim-dyno": [None] * n,
                        "x-dynosim-pid": [None] * n, "x-dynosim-pool-wait": [None] * n}}
    for k, r in enumerate(rows):
        if r.get("status", 200) == 200:
            load["headers"]["x-dynosim-start"][k] = repr(T0 + r["start"])
            load["headers"]["x-dynosim-end"][k] = repr(T0 + r["end"])
            load["headers"]["x-dynosim-dyno"][k] = str(r.get("dyno", 0))
            load["headers"]["x-dynosim-pid"][k] = str(pid(r))
    router_log = {str(r["index"]): {"tw": r.get("tw", 0.0), "tc": r.get("tc", 0.0), "term": r.get("term", "----")}
                  for r in rows}
    work = {str(r["index"]): {"dyno": r.get("dyno", 0), "pid": pid(r), "start": T0 + r["start"],
                              "end": None if r.get("end") is None else T0 + r["end"]}
            for r in rows if r.get("start") is not None}
    return load, router_log, work


def measured(rows: List[Dict[str, Any]], *, slots: int, dynos: int = 1, closed: Optional[Dict[str, Any]] = None,
             warmup: float = 0.0, duration: float = 60.0, **extra: Any) -> Dict[str, Any]:
    load, router_log, work = as_records(rows)
    n = len(rows)
    drawn_times = [] if closed else sorted(r["sent"] for r in rows)
    return measure.replication(load, router_log, dynos=dynos, slots=slots, warmup=warmup, duration=duration,
                               closed=closed, drawn_times=drawn_times, classes=["default"], class_of=[0] * n,
                               resources=[], work=work, **extra)


def simulated(clients: int, workers: int, service: str, n: int, overhead: str) -> Dict[str, Any]:
    """The engine's replication of the same closed loop (constant service, no think time)."""
    doc = {"name": "closed-loop", "arrivals": {"process": "closed", "clients": clients, "think": "0s", "requests": n},
           "fleet": {"dynos": 1, "slots": workers}, "service": {"distribution": "constant", "value": service},
           "app": {"overhead": overhead}, "run": {"replications": 1}}
    return dynosim.run(Scenario(doc), warn=False)[0].to_dict()["per_replication"][0]


# --- closed loops worked out by hand -----------------------------------------------------------


def test_nine_clients_on_three_workers_keep_six_waiting():
    """The model's own schedule (no stack costs): 9 clients send at 0; 3 start, 6 wait. From
    then on, each second three requests end, the three waiting longest start and their clients'
    next three requests join the queue at that instant: every request but the first three
    waits, and six wait at once. The busy count at the send saw 0 (the three starting and the
    three ending at that very instant are neither) and called none of them queued."""
    rows = closed_loop(9, 3, 1.0, 30)
    rep = measured(rows, slots=3, closed={"clients": 9, "requests": 30})
    assert rep["queued_fraction"] == pytest.approx(27 / 30)
    assert rep["max_queue_depth"]["dyno"] == 6
    # Queue times: 0 for the first three, 1 s for the next three, 2 s for every other.
    assert rep["queue"]["mean"] == pytest.approx((3 * 1.0 + 24 * 2.0) / 30)
    assert rep["queue_of_queued"]["mean"] == pytest.approx((3 * 1.0 + 24 * 2.0) / 27)
    sim = simulated(9, 3, "1s", 30, "0s")
    assert rep["queued_fraction"] == pytest.approx(sim["queued_fraction"])
    assert rep["max_queue_depth"]["dyno"] == sim["max_queue_depth"]["dyno"]
    assert rep["queue"]["mean"] == pytest.approx(sim["queue"]["mean"])


def test_the_workers_time_between_requests_does_not_hide_the_queue():
    """As on the real stack: the client has its response 0.6 ms after the app's end and sends
    again at once, while the worker spends 1 ms before it starts the next waiting request
    (HAProxy's Tc is 0 ms on loopback). Every send then falls in its worker's gap, where the
    old rule counted two busy workers of three and called the request not queued; yet six
    requests wait, and every request but the first three waits. The three workers run in step,
    so at each hand-over the three next requests join before the three waiting start: 9 wait
    for 0.4 ms, which the engine gives too when the worker's time is modelled (app.overhead)."""
    rows = closed_loop(9, 3, 1.0, 30, gap=0.001, after=0.0006, spread=1e-5)
    rep = measured(rows, slots=3, closed={"clients": 9, "requests": 30})
    assert rep["queued_fraction"] == pytest.approx(27 / 30)
    assert rep["max_queue_depth"]["dyno"] == 9
    sim = simulated(9, 3, "1s", 30, "1ms")
    assert rep["queued_fraction"] == pytest.approx(sim["queued_fraction"])
    assert rep["max_queue_depth"]["dyno"] == sim["max_queue_depth"]["dyno"]


def test_a_worker_that_accepts_greedily_queues_for_its_own_threads():
    """gthread and gevent workers accept while they hold fewer than worker_connections and
    queue the requests for their own threads (the model's app.accept = "greedy"): a request
    waits at its process while another process has a thread free. Two processes of one thread:
    a runs 0-1 s on process 0; b arrives at 0.5 s, is taken by process 0 and waits for it
    until 1 s; c arrives at 0.6 s and runs at once on process 1."""
    rows = [{"index": 0, "sent": 0.0, "start": 0.0, "end": 1.0, "done": 1.0, "worker": 0},
            {"index": 1, "sent": 0.5, "start": 1.0, "end": 2.0, "done": 2.0, "worker": 0},
            {"index": 2, "sent": 0.6, "start": 0.6, "end": 0.9, "done": 0.9, "worker": 1}]
    greedy = measured(rows, slots=2, per_process=1)
    assert greedy["queued_fraction"] == pytest.approx(1 / 3)
    assert greedy["max_queue_depth"]["dyno"] == 1
    assert greedy["queue_of_queued"]["mean"] == pytest.approx(0.5)
    # Read as sync workers sharing the dyno's accept queue, b would have found process 1 free
    # and c waited behind it (such workers could not have given these records): the queued
    # request is then c, whose queue time is 0.
    shared = measured(rows, slots=2)
    assert shared["queued_fraction"] == pytest.approx(1 / 3) and shared["queue_of_queued"]["mean"] == 0.0


def test_in_hand_counts_earlier_arrivals_not_yet_gone():
    # One dyno: a 0-1; b arrives 0.5 (a in hand); c arrives at 1.0, as a leaves (gone); d
    # arrives at 1.0 too, after c (sent later): c in hand. Dyno 1's e is alone; f has no dyno.
    group = np.array([0, 0, 0, 0, 1, -1])
    arrive = np.array([0.0, 0.5, 1.0, 1.0, 0.5, 0.2])
    leave = np.array([1.0, 2.0, 1.5, 3.0, 0.7, 0.3])
    assert measure.in_hand(group, arrive, leave).tolist() == [0, 1, 1, 2, 0, -1]


def test_queue_depth_is_seen_when_a_request_joins_inside_the_window():
    # Two wait 0-1 and 0.5-2 (two at once at 0.5); from 1.2 on, one: seen from the window's
    # start at 1 s, the two of the warm-up still count when a third joins at 1.2.
    arrive, leave = np.array([0.0, 0.5, 1.2]), np.array([1.0, 2.0, 1.5])
    assert measure.max_depth(arrive, leave) == 2
    assert measure.max_depth(arrive, leave, since=1.0) == 2
    assert measure.max_depth(arrive, leave, since=1.3) == 0
    assert measure.max_depth(np.array([0.0, 1.0]), np.array([1.0, 2.0])) == 1  # leaving first


# --- the router's queue, the window, the errors ------------------------------------------------


def test_requests_that_left_haproxys_queue_with_a_503_waited_there():
    """intelligent on one single-worker dyno: a runs 0-2 s; b (sent 0.1 s) and c (0.2 s) wait
    in HAProxy's queue and leave it after its 300 ms timeout queue with a 503 sQ: two waited at
    once at the router, though neither reached a worker."""
    rows = [{"index": 0, "sent": 0.0, "start": 0.0, "end": 2.0, "done": 2.0, "worker": 0},
            {"index": 1, "sent": 0.1, "done": 0.4, "status": 503, "tw": 0.3, "tc": None, "term": "sQ--",
             "worker": 0},
            {"index": 2, "sent": 0.2, "done": 0.5, "status": 503, "tw": 0.3, "tc": None, "term": "sQ--",
             "worker": 0}]
    rep = measured(rows, slots=1)
    assert rep["max_queue_depth"]["router"] == 2
    assert rep["error_counts"]["queue_timeout"] == 2
    assert rep["queued_fraction"] == 0.0  # of the requests that reached a worker


def test_throughput_counts_every_answer_inside_the_window():
    """As the simulation counts it (docs/model.md: completions inside the window, whichever
    request they belong to): a request of the warm-up answered inside the window counts."""
    rows = [{"index": 0, "sent": 0.5, "start": 0.5, "end": 1.5, "done": 1.5, "worker": 0},
            {"index": 1, "sent": 2.0, "start": 2.0, "end": 2.5, "done": 2.5, "worker": 0}]
    rep = measured(rows, slots=1, warmup=1.0, duration=4.0)
    assert rep["throughput"] == pytest.approx(2 / 4.0)
    assert rep["goodput"] == pytest.approx(2 / 4.0)
    assert rep["requests"] == 1


def test_a_client_that_gave_up_was_answered_when_it_did():
    """The load generator gives up at its timeout (1 s) on a request the app works on for 3 s:
    as in the simulation (client_timeout), the client's answer came at 1 s: in response.*, in
    throughput, in the closed loop's answered requests, and the work after it is wasted."""
    rows = [{"index": 0, "sent": 0.0, "start": 0.0, "end": 3.0, "done": None, "status": 0, "error": "timeout",
             "worker": 0},
            {"index": 1, "sent": 1.0, "start": 3.0, "end": 3.5, "done": 3.5, "worker": 0}]
    rep = measured(rows, slots=1, closed={"clients": 1, "requests": 2}, client_timeout=1.0)
    assert rep["error_counts"]["client_timeout"] == 1 and rep["failed"]["total"] == 1
    assert rep["response"]["max"] == pytest.approx(2.5) and rep["response"]["mean"] == pytest.approx(1.75)
    assert rep["response_ok"]["mean"] == pytest.approx(2.5)
    assert rep["wasted"]["thread_seconds"] == pytest.approx(2.0)
    loop = rep["closed_loop"]
    assert loop["completed"] == 2 and loop["failed"] == 1
    assert loop["latency"]["mean"] == pytest.approx(2.5)  # ab's percentiles: the answered requests
    assert loop["requests_per_s"] == pytest.approx(2 / 3.5)
    assert rep["throughput"] == pytest.approx(loop["requests_per_s"])


# --- a recorded real run -----------------------------------------------------------------------


def recorded(path: Path) -> tuple:
    """A real run's per-request CSV (``dynosim testbed --out``) as the records it came from."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            def num(key: str) -> Optional[float]:
                return float(r[key]) if r[key] != "" else None

            rows.append({"index": int(r["index"]), "sent": num("sent"), "done": num("done"),
                         "start": num("app_start"), "end": num("app_end"), "status": int(r["status"]),
                         "error": r["error"] or None, "tw": num("router_queue"), "tc": num("router_connect"),
                         "dyno": int(r["dyno"]), "pid": int(r["pid"])})
    return rows


def test_a_recorded_real_run_of_gunicorn_db():
    """``dynosim testbed gunicorn-db`` (3 sync workers, 9 ab-style clients, 300 requests, real
    PostgreSQL), recorded by its --out (commit bf006f8, a busy machine). The answers are known
    whatever the machine: 9 clients sent at once, 3 found a worker free and every other request
    waited for one, so 297 of the 300 were queued (the busy count at the send had 26); six wait
    at once nearly all the run, and seven for a moment at most hand-overs, when a worker spends
    its 1-2 ms between requests while the client it answered has already sent again (the old
    rule saw at most 3)."""
    rows = recorded(FIXTURES / "gunicorn-db-random.csv")
    rep = measured(rows, slots=3, closed={"clients": 9, "requests": 300})
    assert rep["requests"] == 300 and rep["failed"]["total"] == 0
    assert rep["queued_fraction"] == pytest.approx(297 / 300)
    assert rep["max_queue_depth"]["dyno"] == 7
    # The requests waiting at the dyno over the run, from the waiting ones' [arrival, start):
    # six for more than 95% of it, never more than seven.
    arrive = np.array([r["sent"] + (r["tw"] or 0) + (r["tc"] or 0) for r in rows])
    start = np.array([r["start"] for r in rows])
    waiting = start - arrive > 0.1  # the first three waited a few ms for a worker to wake
    times = np.concatenate([arrive[waiting], start[waiting]])
    steps = np.concatenate([np.ones(waiting.sum()), -np.ones(waiting.sum())])
    order = np.lexsort((steps, times))
    level, spans = np.cumsum(steps[order])[:-1], np.diff(times[order])
    assert spans[level == 6].sum() > 0.95 * spans.sum() and level.max() == 7
    # Ab's rate and the throughput are the same figure for a run of a set number of requests
    # (the whole run is the window), as in the simulation.
    assert rep["throughput"] == pytest.approx(rep["closed_loop"]["requests_per_s"])
    assert rep["closed_loop"]["completed"] == 300


def test_the_workers_gap_is_measured_per_worker():
    """On a dyno of three sync workers, the request after another by start time is mostly on
    another worker: the gap between them was −1.3 s in the recorded run. Per worker it is the
    worker's own time between two requests, a millisecond or two."""
    rows = recorded(FIXTURES / "gunicorn-db-random.csv")
    load, router_log, _ = as_records(rows)
    tw = [router_log[str(r["index"])]["tw"] for r in rows]
    over = measure.overheads(load, 1, [0.0] * len(rows), router_wait=tw)
    assert 0.0005 < over["between_requests"] < 0.005, over
    # By hand: each worker's requests in order, the next one waiting when the previous ended.
    gaps = []
    for worker in {r["pid"] for r in rows}:
        mine = sorted((r for r in rows if r["pid"] == worker), key=lambda r: r["start"])
        gaps += [b["start"] - a["end"] for a, b in zip(mine, mine[1:]) if b["sent"] < a["end"]]
    assert over["between_requests"] == pytest.approx(np.mean(gaps))


# --- the calibration (dynosim testbed --calibrate) ---------------------------------------------


def cpu_records(pids: List[int], phase_cpu: List[float], server: List[float],
                status: Optional[List[int]] = None) -> Dict[str, Any]:
    """The answers' headers of requests served one at a time per process, in the order given:
    each process's CPU time (X-Dynosim-Proc-Cpu) grows by the request's phase CPU
    (X-Dynosim-Cpu) and the server's own CPU for it."""
    clock: Dict[int, float] = {}
    proc = []
    for p, c, s in zip(pids, phase_cpu, server):
        clock[p] = clock.get(p, 0.05) + c + s  # 50 ms at boot, before the first request
        proc.append(f"{clock[p]:.9f}")
    return {"status": status or [200] * len(pids),
            "headers": {"x-dynosim-pid": [str(p) for p in pids], "x-dynosim-cpu": [f"{c:.9f}" for c in phase_cpu],
                        "x-dynosim-proc-cpu": proc}}


def test_the_servers_cpu_per_request_is_the_process_cpu_beyond_the_phases():
    # Two sync workers, interleaved; the server spends 0.3 or 0.5 ms per request beyond phases
    # of 2 to 7 ms. Each process's first answer only sets its clock: 4 + 3 requests count.
    pids = [11, 12, 11, 11, 12, 11, 12, 12, 11]
    phase_cpu = [0.002, 0.003, 0.004, 0.002, 0.007, 0.005, 0.002, 0.003, 0.002]
    server = [0.9, 0.9, 0.0003, 0.0005, 0.0003, 0.0005, 0.0003, 0.0005, 0.0003]
    got = measure.server_cpu(cpu_records(pids, phase_cpu, server))
    counted = [0.0003, 0.0005, 0.0005, 0.0003, 0.0003, 0.0003, 0.0005]
    assert got["requests"] == 7
    assert got["mean"] == pytest.approx(np.mean(counted), abs=1e-9)
    assert got["cv"] == pytest.approx(np.std(counted, ddof=1) / np.mean(counted), rel=1e-6)
    # The order of the rows does not matter: each process's answers go by its CPU time.
    shuffled = cpu_records(pids, phase_cpu, server)
    order = [8, 3, 0, 5, 1, 7, 2, 6, 4]
    shuffled["headers"] = {k: [v[i] for i in order] for k, v in shuffled["headers"].items()}
    assert measure.server_cpu(shuffled)["mean"] == pytest.approx(got["mean"], abs=1e-9)


def test_the_servers_cpu_leaves_out_failures_and_needs_the_header():
    pids, phase_cpu, server = [5, 5, 5, 5], [0.001] * 4, [0.0, 0.0004, 0.0004, 0.0004]
    records = cpu_records(pids, phase_cpu, server, status=[200, 200, 504, 200])
    records["headers"]["x-dynosim-proc-cpu"][2] = None  # a 504 brings no headers back
    got = measure.server_cpu(records)
    # Across the lost answer, the step from the 2nd to the 4th holds the 3rd's phases and
    # server CPU too: one step of 2 requests' server CPU + the 3rd's phases.
    assert got["requests"] == 2
    assert got["mean"] == pytest.approx((0.0004 + (0.0004 + 0.001 + 0.0004)) / 2, abs=1e-9)
    assert measure.server_cpu({"status": [200], "headers": {"x-dynosim-pid": ["1"]}})["mean"] is None
    assert measure.server_cpu(cpu_records([1, 2], [0.001, 0.001], [0.0, 0.0]))["mean"] is None  # one answer each


def test_a_process_running_requests_at_once_still_gives_the_mean():
    # One gthread process, two threads: a (phases 10 ms of CPU) and b (4 ms) overlap; the
    # process's clock, read when each ends, includes the other's CPU so far. Server: 0.5 ms a
    # request. The steps telescope: (clock at the last − at the first − phases after it) / count.
    server, a, b, c = 0.0005, 0.010, 0.004, 0.006
    clock0 = 0.1
    # b ends first (its 4 ms and 2 ms of a's done so far), then a, then c alone.
    at_b = clock0 + b + 0.002 + server
    at_a = at_b + (a - 0.002) + server
    at_c = at_a + c + server
    load = {"status": [200] * 4, "headers": {
        "x-dynosim-pid": ["7"] * 4, "x-dynosim-cpu": ["0.003", str(b), str(a), str(c)],
        "x-dynosim-proc-cpu": [str(clock0), str(at_b), str(at_a), str(at_c)]}}
    got = measure.server_cpu(load)
    # b's step counts a's 2 ms it did not own, a's step misses them: the mean is exact.
    assert got["requests"] == 3 and got["mean"] == pytest.approx(server, abs=1e-9)


def test_phase_spread_gives_the_cpu_phases_jitter_and_the_sleeps_overshoot():
    kinds = [["cpu", "io"]] * 4 + [["cpu", "use", "hold"]]
    drawn = [[0.002, 0.008]] * 4 + [[0.0001, 0.01, 0.005]]
    walls = ["0.00200,0.00810", "0.00220,0.00805", "0.00180,0.00815", "0.00240,0.00810",
             "0.00500,0.01100,0.00520"]
    load = {"status": [200, 200, 200, 200, 200], "headers": {"x-dynosim-phase-wall": walls}}
    got = measure.phase_spread(load, kinds, drawn)
    ratios = np.array([1.0, 1.1, 0.9, 1.2])  # the 0.1 ms CPU phase is too short to count
    assert got["cpu"]["phases"] == 4
    assert got["cpu"]["ratio_mean"] == pytest.approx(ratios.mean())
    assert got["cpu"]["cv"] == pytest.approx(np.std(ratios, ddof=1) / ratios.mean())
    q1, q2, q3 = np.percentile(ratios, [25, 50, 75])
    assert got["cpu"]["cv_iqr"] == pytest.approx((q3 - q1) / 1.349 / q2)
    over = np.array([0.0001, 0.00005, 0.00015, 0.0001, 0.0002])  # hold counts as a sleep
    assert got["io"]["phases"] == 5 and got["io"]["overshoot_mean"] == pytest.approx(over.mean())
    assert got["io"]["overshoot_sd"] == pytest.approx(np.std(over, ddof=1))
    assert got["use"]["phases"] == 1 and got["use"]["overshoot_mean"] == pytest.approx(0.001)
    # A failed request, or walls not matching the phases, are left out.
    load["status"][3] = 504
    walls[0] = "0.002"
    got = measure.phase_spread(load, kinds, drawn)
    assert got["cpu"]["phases"] == 2 and got["cpu"]["ratio_mean"] == pytest.approx(1.0)
    assert measure.phase_spread({"status": [], "headers": {}}, [], [])["cpu"] == \
        {"phases": 0, "ratio_mean": None, "cv": None, "cv_iqr": None, "ratio_p99": None}


def test_the_workers_overhead_is_its_gap_less_the_servers_cpu():
    costs = measure.stack_costs({"to_app_when_idle": 0.0008, "between_requests": 0.0011, "server_cpu": 0.0004})
    assert costs == pytest.approx({"router.connect": 0.0008, "app.request_cpu": 0.0004, "app.overhead": 0.0007})
    # A gap shorter than the CPU (measured apart, noisy) is no overhead; unknown CPU: the gap.
    assert measure.stack_costs({"between_requests": 0.0003, "server_cpu": 0.0004})["app.overhead"] == 0.0
    assert measure.stack_costs({"between_requests": 0.0011})["app.overhead"] == 0.0011
    # A simulation that cannot run app.request_cpu ([service]) gets the whole gap.
    assert measure.stack_costs({"between_requests": 0.0011, "server_cpu": 0.0004}, request_cpu=False) == \
        {"router.connect": None, "app.request_cpu": None, "app.overhead": 0.0011}


def test_the_calibration_sets_what_it_measured_and_only_that():
    from dynosim.testbed.run import calibration_result

    idle = {"overhead": {"to_app_when_idle": 0.00081234, "between_requests": None, "server_cpu": 0.0004},
            "server_cpu": {"mean": 0.00042, "cv": 0.2, "requests": 299},
            "phases": {"cpu": {"phases": 300, "ratio_mean": 1.01, "cv": 0.0312, "ratio_p99": 1.1}}}
    busy = {"overhead": {"to_app_when_idle": None, "between_requests": 0.0012, "server_cpu": 0.0005},
            "server_cpu": {"mean": 0.0005, "cv": None, "requests": 199}}
    got = calibration_result({"idle": idle, "busy": busy})
    # The server's CPU of a worker going from request to request (the busy run), the same the
    # overhead is the gap less of.
    assert got["measured"] == pytest.approx({"router.connect": 0.00081234, "app.request_cpu": 0.0005,
                                             "app.overhead": 0.0007, "fleet.cpu_jitter": 0.0312})
    assert got["set_lines"] == ["--set router.connect=0.812ms", "--set app.request_cpu=0.500ms",
                                "--set app.overhead=0.700ms", "--set fleet.cpu_jitter=0.0312"]
    # What it prints: every figure, the --set line last.
    from dynosim.cli.testbed import calibration_lines

    lines = calibration_lines(got)
    assert lines[-1] == "simulated with: " + " ".join(got["set_lines"])
    assert any("0.812 ms" in line for line in lines) and any("0.0312" in line for line in lines)
    # Without a busy figure, the idle run's.
    del busy["server_cpu"]
    # What was not measured is not set; the values parse as the scenario's keys.
    busy["overhead"]["between_requests"] = None
    got = calibration_result({"idle": idle, "busy": busy})
    assert got["measured"]["app.overhead"] is None and "app.overhead" not in got["set"]
    scenario = Scenario({"arrivals": {"process": "poisson", "rate": "10/s"}, "fleet": {"dynos": 1},
                         "app": {"server": "gunicorn", "processes": 2},
                         "request": {"phases": [{"cpu": "5ms"}, {"io": "5ms"}]},
                         "run": {"duration": "10s"}}).with_overrides(got["set"])
    described = scenario.describe()
    assert described["connect"] == pytest.approx(0.000812) and described["cpu"]["jitter"] == pytest.approx(0.0312)
    assert described["app"]["request_cpu"] == pytest.approx(0.00042) == got["measured"]["app.request_cpu"]
    # With [service], app.request_cpu is measured but not set, and the overhead is the whole gap.
    busy["overhead"]["between_requests"] = 0.0012
    got = calibration_result({"idle": idle, "busy": busy}, request_cpu=False)
    assert "app.request_cpu" not in got["set"] and got["set"]["app.overhead"] == "1.200ms"
    assert got["measured"]["app.request_cpu"] == pytest.approx(0.00042) and got["warnings"]


def test_a_gevent_calibration_takes_the_idle_runs_cpu_and_no_overhead():
    from dynosim.testbed.run import calibration_result

    idle = {"overhead": {"to_app_when_idle": 0.0007}, "server_cpu": {"mean": 0.0011, "cv": 0.2, "requests": 299},
            "phases": {"cpu": {"phases": 300, "ratio_mean": 1.02, "cv": 0.05, "ratio_p99": 1.1}},
            "gunicorn": {"worker_class": "gevent"}}
    # Greenlets' thread CPU includes each other's: the busy run's figures are nonsense.
    busy = {"overhead": {"between_requests": 0.0033, "server_cpu": -0.002},
            "server_cpu": {"mean": -0.002, "cv": None, "requests": 199}}
    got = calibration_result({"idle": idle, "busy": busy})
    assert got["measured"]["app.request_cpu"] == 0.0011 and got["measured"]["app.overhead"] is None
    assert "app.overhead" not in got["set"] and any("gevent" in w for w in got["warnings"])


def test_the_busy_calibration_runs_the_scenarios_own_cpu_phases():
    from dynosim.testbed.plan import make_plan
    from dynosim.testbed.run import CALIBRATION_PHASES, busy_phases, calibration_runs

    exp = {"distribution": "exponential", "mean": "10ms"}
    doc = {"arrivals": {"process": "closed", "clients": 8}, "fleet": {"dynos": 1, "cores": 1},
           "app": {"server": "gunicorn", "worker_class": "sync", "processes": 4},
           "resources": {"db": {"servers": 2, "pool": {"size": 4}}},
           "request": {"phases": [{"cpu": exp}, {"use": "db", "time": "20ms"}, {"io": "40ms"}, {"cpu": "1ms"}]},
           "run": {"duration": "20s"}}
    # The CPU the requests put on the dyno's cores, as drawn; a query waits as an io of its time
    # (the calibration has no database).
    assert busy_phases(Scenario(doc)) == [{"cpu": exp}, {"io": "20ms"}, {"io": "40ms"}, {"cpu": "1ms"}]
    (idle_name, idle), (busy_name, busy) = calibration_runs(Scenario(doc))
    assert (idle_name, busy_name) == ("idle", "busy")
    kinds = lambda plan: [p["kind"] for p in plan.drawn["classes"][0]["phases"]]  # noqa: E731
    assert kinds(busy) == ["cpu", "io", "io", "cpu"] and kinds(idle) == ["cpu", "io"]
    drawn_cpu = [phases[0] for phases in busy.drawn["phases"]]
    assert len(set(drawn_cpu)) > 1  # drawn, not the idle run's constant 2 ms
    # Without a CPU phase of its own ([service], or io only), the constant phases.
    service = {**{k: v for k, v in doc.items() if k not in ("request", "resources")},
               "service": {"distribution": "exponential", "mean": "100ms"}}
    assert busy_phases(Scenario(service)) == CALIBRATION_PHASES
    assert busy_phases(Scenario({**doc, "request": {"phases": [{"io": "5ms"}]}})) == CALIBRATION_PHASES
