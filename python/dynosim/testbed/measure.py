"""What the testbed measured, as a report of the same shape and metric names as ``dynosim run``
(docs/output.md), computed from the per-request records.

A request's times, all wall-clock seconds on this machine's one clock:

- ``sent``: the load generator began to connect (the simulated request's arrival);
- ``start`` and ``end``: the app began and finished the request's work (its headers);
- ``done``: the generator had the whole response.

``queue`` is start − sent: the time in HAProxy's queue, connecting, in the dyno's accept queue
and in gunicorn until the app runs; ``response`` is done − sent; ``service_mean`` the mean of
end − start (the app's own time, which the simulation draws).

A request is ``queued`` when it waited at all on its way to a worker, as in the simulation
(queue time > 0): HAProxy held it in its queue (Tw > 0), or it reached its dyno (sent + Tw +
Tc) with every worker taken: as many requests in hand there as the dyno has workers, each
arrived before it and not yet done in the app, waiting or being worked on
(:func:`in_hand`). With gunicorn's gthread and gevent workers, which accept greedily and
queue requests for their own threads, the count is of the process that took the request
against its threads. In a queue served in order of arrival this is exactly "waited at all",
and it needs only the order of the stamps, not a threshold on the queue time, which could
not tell a wait from the millisecond or two every real request spends connecting and being
parsed. What the stamps cannot resolve is not counted: HAProxy logs Tw and Tc in whole
milliseconds, so a hold of less than 1 ms at HAProxy is none, and a request that waited only
for a worker finishing its previous request's own work (writing, closing, accepting the next:
app.overhead, 1-2 ms) while no other request was waiting counts as not queued.
``max_queue_depth.dyno`` sweeps the queued requests' [arrival at the dyno, start) per dyno,
looking whenever one joins inside the window, as the simulation looks; ``.router`` sweeps
HAProxy's holds [sent, sent + Tw).

The app's own work log (``work``: :func:`dynosim.testbed.dynos.read_work`) gives ``start`` and
``end`` for every request the app began, answered or not, so that the work a dyno did on a
request the router had already answered with an error (a 504) counts, as in the simulation:
in the dynos' busy time, in who was busy when a request was sent, and in
``wasted.thread_seconds`` (from the error, or the request's start if later, to its end). A
request whose worker was killed ends, for this count, when its client got the error.

Requests count from their scheduled time: those scheduled from the warm-up on are measured
(a closed loop with a request count: all of them). Requests that failed (no response, a status
other than 200) count in ``failed`` and are left out of ``service_mean`` and ``response_ok``;
``response`` has every answer, as the client saw it, and ``queue`` and ``queued_fraction``
every request that reached a worker, answered by the app or not (the dyno's view, as the
simulation's). Errors by kind, from
HAProxy's status and termination state: ``h12`` a 504 (``timeout server``, router.timeout),
``queue_timeout`` a 503 after ``timeout queue`` (``sQ``), ``app_timeout`` a request whose
worker gunicorn's ``--timeout`` killed: the app began it and never finished it (its work log),
answered 500 (gunicorn 21 and later: the abort raises inside the request, which the worker
answers) or 502 (the connection closed unanswered); ``client_timeout`` a request the load
generator gave up on at arrivals.timeout (its error ``timeout``); ``h13`` a 503 with
termination state ``sC``: HAProxy found every dyno it tried with a full backlog (app.backlog),
each by its connect timeout; ``limit_rejected`` a 503 marked ``X-Dynosim-Limit`` (a fixed
router.concurrency_limit or app.concurrency_limit refused it: :mod:`.router`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

STATS = ("mean", "p50", "p90", "p95", "p99", "p999", "max")
_PERCENTILES = {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}


def time_summary(values: "np.ndarray") -> Dict[str, float]:
    if len(values) == 0:
        return {s: 0.0 for s in STATS}
    out = {"mean": float(np.mean(values))}
    for name, p in _PERCENTILES.items():
        out[name] = float(np.percentile(values, p))
    out["max"] = float(np.max(values))
    return out


def floats(column: Sequence[Optional[str]]) -> "np.ndarray":
    """A column of header values as numbers (NaN where absent or not a number)."""
    out = np.full(len(column), np.nan)
    for i, text in enumerate(column):
        if text:
            try:
                out[i] = float(text)
            except ValueError:
                pass
    return out


def ids(load: Dict[str, Any]) -> List[str]:
    """Per try sent: its id in the router's and the app's logs, the load generator's
    ``X-Dynosim-Id`` (``17`` for request 17's first try, ``17.2`` for its second)."""
    attempts = load.get("attempt") or [1] * len(load["index"])
    return [str(i) if a == 1 else f"{i}.{a}" for i, a in zip(load["index"], attempts)]


def tries(load: Dict[str, Any]) -> tuple:
    """Per try sent, as numpy columns: its number (1 for the first), its request's first send
    (Unix epoch s), its request's first try's scheduled time (Unix epoch s), and whether it is
    its request's last try (whose outcome its client kept). Without retries every try is a
    request's only one."""
    n = len(load["index"])
    attempt = np.asarray(load.get("attempt") or [1] * n, dtype=np.int64)
    origin = np.asarray(load.get("origin") or load["sent"], dtype=float)
    scheduled = np.asarray(load["scheduled"], dtype=float)
    first = attempt == 1
    request = np.cumsum(first) - 1  # the tries of one request follow its first
    firsts = np.flatnonzero(first)
    first_scheduled = scheduled[firsts][request] if n else scheduled
    index = np.asarray(load["index"], dtype=np.int64)
    last = np.ones(n, dtype=bool)
    last[:-1] = index[:-1] != index[1:]
    return attempt, origin, first_scheduled, last


def stability_verdict(scenario: Any, described: Dict[str, Any], load: Dict[str, Any]) -> Dict[str, Any]:
    """The stability verdict of a real run with faults (``stability.*``), by the simulation's
    own rule (the engine's ``judge_stability``): its successful answers (each request's last
    try), seconds from the load's start, judged to the measured window's end."""
    import json

    from .. import _dynosim

    _attempt, _origin, _scheduled, final = tries(load)
    status = np.asarray(load["status"], dtype=np.int64)
    done = np.asarray(load["done"], dtype=float) - float(load["start"])
    answers = [float(t) for t in done[final & (status == 200) & np.isfinite(done)]]
    end = float(described["warmup"]) + float(described["duration"])
    return json.loads(scenario._call(_dynosim.judge_stability, answers, end))


def app_times(load: Dict[str, Any], work: Optional[Dict[str, Dict[str, Any]]] = None) -> tuple:
    """Per request sent: when the app started and ended its work (NaN where it did not) and the
    dyno that had it (-1 where none), from the app's work log where it has the request, else
    from the app's response headers."""
    headers = load["headers"]
    dyno = np.nan_to_num(floats(headers["x-dynosim-dyno"]), nan=-1).astype(np.int64)
    start, end = floats(headers["x-dynosim-start"]), floats(headers["x-dynosim-end"])
    for k, i in enumerate(ids(load) if work else ()):
        entry = work.get(i) if work else None
        if entry is not None:
            start[k] = entry["start"]
            end[k] = np.nan if entry["end"] is None else entry["end"]
            dyno[k] = entry["dyno"]
    return start, end, dyno


def app_pids(load: Dict[str, Any], work: Optional[Dict[str, Dict[str, Any]]] = None) -> "np.ndarray":
    """Per request sent: the worker process that had it (its pid; -1 where none), from the
    app's work log where it has the request, else from the app's response headers."""
    column = load["headers"].get("x-dynosim-pid") or [None] * len(load["sent"])
    pid = np.nan_to_num(floats(column), nan=-1).astype(np.int64)
    for k, i in enumerate(ids(load) if work else ()):
        entry = work.get(i) if work else None
        if entry is not None:
            pid[k] = entry["pid"]
    return pid


def in_hand(group: "np.ndarray", arrive: "np.ndarray", leave: "np.ndarray") -> "np.ndarray":
    """For each request, how many other requests of its group (a dyno, or one worker process)
    it found in hand when it arrived: arrived before it (at an equal time, those listed before
    it) and not yet gone (waiting for a worker or being worked on; one leaving at that very
    instant is gone); -1 for a request outside every group (``group < 0``). A request that
    left as it arrived held nothing.

    In a queue that serves in order of arrival with `c` workers, a request waits exactly when
    it finds `c` or more in hand, whatever the timing of the workers' hand-overs: unlike a count
    of requests being worked on, which a send falling in a worker's gap between two requests
    (with others still waiting) reads as a free worker."""
    out = np.full(len(arrive), -1, dtype=np.int64)
    for g in np.unique(group[group >= 0]):
        idx = np.nonzero(group == g)[0]
        a, gone_at = arrive[idx], leave[idx]
        holds = gone_at > a
        order = np.lexsort((np.arange(len(idx)), a))
        before = np.empty(len(idx), dtype=np.int64)
        before[order] = np.cumsum(holds[order]) - holds[order]
        # Every request gone by a's arrival came before it (it arrived before it left).
        out[idx] = before - np.searchsorted(np.sort(gone_at[holds]), a, side="right")
    return out


def in_hand_at_send(dyno: "np.ndarray", sent: "np.ndarray", end: "np.ndarray", dynos: int) -> "np.ndarray":
    """For each request, how many other requests its dyno had in hand when it was sent: sent
    before it and not yet done in the app (waiting for a worker or being worked on); -1 for a
    request without a dyno (or without finite times). A request sent while the worker is
    between two requests, with others still waiting, is not idle (:func:`in_hand`)."""
    known = (dyno >= 0) & (dyno < dynos) & np.isfinite(sent) & np.isfinite(end)
    return in_hand(np.where(known, dyno, -1), np.where(known, sent, 0.0), np.where(known, end, 0.0))


def max_depth(arrive: "np.ndarray", leave: "np.ndarray", since: float = -math.inf) -> int:
    """The most intervals [arrive, leave) open at once, seen when one opens at or after
    `since` (the simulation's max_queue_depth: looked at whenever a request joins a queue
    inside the window, counting those that joined before it)."""
    if len(arrive) == 0:
        return 0
    times = np.concatenate([arrive, leave])
    steps = np.concatenate([np.ones(len(arrive), dtype=np.int64), -np.ones(len(leave), dtype=np.int64)])
    order = np.lexsort((steps, times))  # at equal times, leaving first
    level = np.cumsum(steps[order])
    seen = (steps[order] > 0) & (times[order] >= since)
    return int(max(0, np.max(level[seen], initial=0)))


def replication(load: Dict[str, Any], router_log: Dict[str, Dict[str, Any]], *, dynos: int, slots: int,
                warmup: float, duration: float, closed: Optional[Dict[str, Any]], drawn_times: Sequence[float],
                classes: Sequence[str], class_of: Sequence[int], resources: Sequence[str],
                work: Optional[Dict[str, Dict[str, Any]]] = None, per_process: Optional[int] = None,
                client_timeout: Optional[float] = None, retries: bool = False,
                router_retries: bool = False, wait_timeout: bool = False,
                outage: bool = False, service_timeout: bool = False,
                breaker: Optional[Sequence[Sequence[float]]] = None,
                crashes: Optional[Sequence[Tuple[int, float]]] = None, resource_timeout: bool = False,
                app_retries: bool = False, limits: Optional[Dict[str, int]] = None,
                call_failed: bool = False) -> Dict[str, Any]:
    """One replication's figures (the keys of ``per_replication[i]`` in ``dynosim run --json``).

    `load` holds the requests that were sent; `drawn_times` the arrival times of every drawn
    request (empty for a closed loop), so that one never sent (the run stopped) counts as a
    request that failed. `per_process`: the requests one worker process runs at once when its
    workers accept greedily and queue for their own threads (gunicorn's gthread: its threads;
    gevent: its worker connections); None when the dyno's `slots` share its accept queue (sync
    workers). `client_timeout`: the load generator's timeout per request (arrivals.timeout),
    when its client got the error of a request it gave up on. `retries`: the clients retried
    (``[arrivals.retry]``): each row of `load` is a try, and the figures of the dynos and the
    router (queue, utilisation) count every try, those of the clients (response, errors,
    goodput) each request's last try from its first send, as the simulation's do; the report
    then has ``retries.*``. `router_retries`: the router retried after a timeout or an error
    (``router.retry_on``), as its log's retry count (HAProxy's ``%rc``) says: each such retry
    is a try too (``retries.router``); the app's work for the tries before it is not told
    apart from the last's (they carry the same id). `wait_timeout`: the app drops requests
    older than app.wait_timeout (a 503 with ``X-Dynosim-Expired``): ``errors.wait_timeout``.
    `outage`: the run has outages, whose refusals the app answers 500 with
    ``X-Dynosim-Outage``: ``errors.outage``. `service_timeout`: the app stops requests at
    app.service_timeout (a 500 with ``X-Dynosim-Service-Timeout``): ``errors.service_timeout``.
    `breaker`: the clients' circuit breaker ran (``[arrivals.breaker]``), open over these
    (from, until) spans (Unix epoch s): a try it failed at once (the load generator's error
    ``breaker_open``, never sent) is answered when it was due, ``errors.breaker_open``, and
    the report has ``breaker.*`` as the simulation's. `crashes`: the run lost dynos
    (``dynos_lost``), (dyno, Unix time) of each crash: a try HAProxy had sent to a dyno that crashed while it
    was in flight (sent before, done after) and answered 502 or 503 is ``errors.crashed``
    (its connection lost with the dyno), and a 503 HAProxy answered with no server
    (``<NOSRV>``: every dyno down) ``errors.no_dyno``. `resource_timeout`: a resource has a
    timeout (statement_timeout): a 500 with ``X-Dynosim-Resource-Timeout`` is
    ``errors.resource_timeout``. `app_retries`: the app retries its queries; each try's
    ``X-Dynosim-App-Retries`` adds to ``retries.app``. `limits`: the fixed concurrency limits
    run ({"router": N, "app": N}, those set): a 503 marked ``X-Dynosim-Limit`` (the router's or
    a dyno's limiter refused it) is ``errors.limit_rejected``, and every such try of the
    window's requests counts in ``limit.rejected``, as the simulation's. `call_failed`: the
    app calls other services, and answers 500 marked ``X-Dynosim-Call-Failed`` for a call that
    failed its last try: ``errors.call_failed``."""
    t0 = float(load["start"])
    n = len(load["index"])
    drawn = len(class_of)
    attempt, origin, first_scheduled, final = tries(load)
    # Each try's request's scheduled time: a request, and all its tries, count in the window
    # its first try was due in.
    scheduled = first_scheduled - t0
    counted = closed is not None and bool(closed.get("requests"))
    if not closed:
        in_window = int(np.sum(np.asarray(drawn_times, dtype=float) >= warmup))
    elif counted:
        in_window = drawn
    else:  # a timed closed loop: what was sent inside its window
        in_window = int(np.sum((scheduled >= warmup) & (scheduled < warmup + duration)))
    sent = np.asarray(load["sent"], dtype=float)
    done = np.asarray(load["done"], dtype=float)
    status = np.asarray(load["status"], dtype=np.int64)
    # A client that gave up (client_timeout) was answered, with that error, at its timeout:
    # in response.*, throughput and the closed loop's count, as in the simulation.
    gave_up = np.array([e == "timeout" for e in load["error"]], dtype=bool)
    if client_timeout is not None:
        done = np.where(gave_up & ~np.isfinite(done), sent + client_timeout, done)
    # A try the clients' breaker failed was never sent: its client had the error at once.
    rejected = np.array([e == "breaker_open" for e in load["error"]], dtype=bool)
    done = np.where(rejected & ~np.isfinite(done), sent, done)
    answers = np.isfinite(done) & ((status > 0) | gave_up | rejected)
    start, end, dyno = app_times(load, work)
    pool_wait = floats(load["headers"]["x-dynosim-pool-wait"])
    ok = (status == 200) & np.isfinite(start) & np.isfinite(end)
    # Every request the app began, answered or not; one never finished (its worker killed)
    # ends when its client got the error, or at the end of the run.
    worked = np.isfinite(start)
    last = max(float(np.max(done, initial=t0, where=np.isfinite(done))),
               float(np.max(end, initial=t0, where=np.isfinite(end))))
    cut_at = np.where(np.isfinite(done), np.maximum(done, start), last)
    stop = np.where(np.isfinite(end), end, cut_at)
    window_end = math.inf if counted else warmup + duration
    measured = np.ones(n, dtype=bool) if counted else (scheduled >= warmup) & (scheduled < window_end)
    good = measured & ok & final
    response = done[good] - origin[good]
    answered_any = measured & answers & final
    try_ids = ids(load)
    terms = [str((router_log.get(i) or {}).get("term") or "") for i in try_ids]
    queue_term = np.array([t.startswith("sQ") for t in terms], dtype=bool)
    kept = measured & final  # the outcomes the clients had
    kinds = {"h12": kept & (status == 504), "queue_timeout": kept & (status == 503) & queue_term,
             "app_timeout": kept & ((status == 502) | (status == 500) & worked & ~np.isfinite(end)),
             "client_timeout": kept & gave_up,
             "h13": kept & (status == 503) & np.array([t.startswith("sC") for t in terms], dtype=bool)}
    expired = np.array([v == "1" for v in (load["headers"].get("x-dynosim-expired") or [None] * n)], dtype=bool)
    kinds["wait_timeout"] = kept & (status == 503) & expired
    refused = np.array([v == "1" for v in (load["headers"].get("x-dynosim-outage") or [None] * n)], dtype=bool)
    kinds["outage"] = kept & (status == 500) & refused
    stopped = np.array([v == "1" for v in (load["headers"].get("x-dynosim-service-timeout") or [None] * n)],
                       dtype=bool)
    kinds["service_timeout"] = kept & (status == 500) & stopped
    kinds["breaker_open"] = kept & rejected
    cancelled = np.array([v == "1" for v in (load["headers"].get("x-dynosim-resource-timeout") or [None] * n)],
                         dtype=bool)
    kinds["resource_timeout"] = kept & (status == 500) & cancelled
    limited = (status == 503) & np.array([bool(v) for v in (load["headers"].get("x-dynosim-limit") or [None] * n)],
                                         dtype=bool)
    kinds["limit_rejected"] = kept & limited
    # A call to another service failed on its last try: the app's 500 with X-Dynosim-Call-Failed.
    calling = np.array([bool(v) for v in (load["headers"].get("x-dynosim-call-failed") or [None] * n)], dtype=bool)
    kinds["call_failed"] = kept & (status == 500) & calling
    # The app's 500 for an outage, its service_timeout or a query's timeout is not its worker
    # timeout's.
    kinds["app_timeout"] &= ~refused & ~stopped & ~cancelled & ~calling
    if crashes is not None:
        servers = [str((router_log.get(i) or {}).get("server") or "") for i in try_ids]
        lost = np.zeros(n, dtype=bool)
        for d, when in crashes:
            on = np.array([s == f"dyno{d}" for s in servers], dtype=bool)  # router.server_name(d)
            lost |= on & (sent <= when) & ~(done < when)
        kinds["crashed"] = kept & ((status == 502) | (status == 503)) & lost & ~limited
        kinds["no_dyno"] = kept & (status == 503) & np.array([s == "<NOSRV>" for s in servers], dtype=bool) \
            & ~queue_term & ~limited
        kinds["app_timeout"] &= ~kinds["crashed"]
        kinds["h13"] &= ~kinds["crashed"]
    # A request reaches its dyno when HAProxy has it connected there: sent + Tw + Tc (HAProxy's
    # whole ms), and never after the app began it.
    logged = [router_log.get(i) or {} for i in try_ids]
    tw = np.array([entry.get("tw") or 0.0 for entry in logged])
    tc = np.array([entry.get("tc") or 0.0 for entry in logged])
    at_dyno = np.where(worked, np.minimum(sent + tw + tc, start), 0.0)
    # Queued, as the simulation's "waited at all": held in HAProxy's queue (Tw > 0), or found
    # every worker of its dyno taken when it got there (with greedy workers, every thread of
    # the process that took it): as many requests in hand there, arrived before it and not
    # yet done in the app, as workers (in_hand). Every request that reached a worker counts,
    # the warm-up's too, as they hold workers and queue places.
    pid = app_pids(load, work)
    group, capacity = (pid, per_process) if per_process else (dyno, slots)
    hand = in_hand(np.where(worked & (group >= 0), group, -1), at_dyno, np.where(worked, stop, 0.0))
    waited_at_dyno = worked & (hand >= capacity)
    # The dyno's view, as the simulation's queue.*: every request that reached a worker,
    # answered by the app or not.
    reached = measured & worked
    queue = start[reached] - sent[reached]
    queued = reached & (waited_at_dyno | (tw > 0))
    queue_of_queued = start[queued] - sent[queued]

    # Busy time per dyno inside the window [warmup, window_end] (relative to the start); with
    # a set number of requests the window is the whole run, to its last event (the last
    # answer, or the app's last end), as the simulation's.
    lo, hi = t0 + warmup, (t0 + window_end if math.isfinite(window_end) else last)
    span = max(hi - lo, 1e-9)
    busy_time = np.zeros(dynos)
    for d in range(dynos):
        sel = worked & (dyno == d)
        busy_time[d] = float(np.sum(np.clip(np.minimum(stop[sel], hi) - np.maximum(start[sel], lo), 0, None)))
    utilisation = busy_time / (slots * span)
    completions = int(np.sum(ok & final & (done >= lo) & (done <= hi)))

    # Most requests waiting at one dyno, seen when one joins inside the window: those that
    # found every worker taken, from their arrival there to their start.
    depth_dyno = 0
    for d in range(dynos):
        sel = waited_at_dyno & (dyno == d)
        depth_dyno = max(depth_dyno, max_depth(at_dyno[sel], start[sel], since=lo))
    # Every request HAProxy held, whether it then reached a worker or left the queue with a
    # 503 (timeout queue).
    held = tw > 0
    depth_router = max_depth(sent[held], sent[held] + tw[held], since=lo)

    rep: Dict[str, Any] = {
        "requests": in_window,
        "queued_fraction": float(np.sum(queued) / max(1, np.sum(reached))),
        "queue": time_summary(queue),
        "queue_of_queued": time_summary(queue_of_queued),
        "response": time_summary(done[answered_any] - origin[answered_any]),
        "response_ok": time_summary(response),
        "service_mean": float(np.mean(end[good] - start[good])) if np.any(good) else 0.0,
        # Every answer inside the window, whichever request it belongs to (one of the warm-up
        # too), as the simulation counts.
        "throughput": int(np.sum(answers & final & (done >= lo) & (done <= hi))) / span,
        "goodput": completions / span,
        "utilisation": {"mean": float(np.mean(utilisation)), "min": float(np.min(utilisation)),
                        "max": float(np.max(utilisation))},
        "max_queue_depth": {"dyno": int(depth_dyno), "router": int(depth_router)},
        "simulated_requests": drawn,
        "events": 0,
    }
    # A timed closed loop ends at its deadline: the requests then in flight were cut, not failed
    # (the simulation, too, leaves them unfinished).
    cut = 0 if (counted or not closed) else int(np.sum(kept & np.array([e == "deadline" for e in load["error"]],
                                                                        dtype=bool)))
    failed = in_window - int(np.sum(good)) - cut
    rep["failed"] = {"fraction": failed / max(1, in_window), "total": failed}
    counts = {k: int(np.sum(v)) for k, v in kinds.items()}
    table = {"total": failed, "h11": 0, "h12": counts["h12"], "h13": counts["h13"],
             "client_timeout": counts["client_timeout"],
             "queue_timeout": counts["queue_timeout"], "app_timeout": counts["app_timeout"], "shed": 0, "r15": 0,
             "no_dyno": counts.get("no_dyno", 0), "shutdown": 0}
    if crashes is not None:
        table["crashed"] = counts["crashed"]
    if resource_timeout:
        table["resource_timeout"] = counts["resource_timeout"]
    if wait_timeout:
        table["wait_timeout"] = counts["wait_timeout"]
    if outage:
        table["outage"] = counts["outage"]
    if service_timeout:
        table["service_timeout"] = counts["service_timeout"]
    if breaker is not None:
        table["breaker_open"] = counts["breaker_open"]
    if limits is not None:
        table["limit_rejected"] = counts["limit_rejected"]
    if call_failed:
        table["call_failed"] = counts["call_failed"]
    rep["error_counts"] = table
    rep["errors"] = {k: v / max(1, in_window) for k, v in table.items()}
    # Work done for clients already answered with an error (the simulation's wasted.*; the
    # CPU's share is not measured per request).
    late = measured & worked & ~ok & np.isfinite(done)
    rep["wasted"] = {"thread_seconds": float(np.sum(np.clip(stop[late] - np.maximum(done[late], start[late]), 0, None)))}
    if retries or router_retries or app_retries:
        # As the simulation counts: every try of the requests first sent inside the window.
        kept_why = np.array([k or "" for k in (load.get("kept") or [None] * n)], dtype=object)
        routed = np.array([int(entry.get("retries") or 0) for entry in logged], dtype=np.int64)
        by_router = int(np.sum(routed[measured])) if router_retries else 0
        attempts = int(np.sum(measured)) + by_router
        again = int(np.sum(measured & (attempt > 1)))
        by_app = 0
        if app_retries:
            told = [int(v) if v and v.isdigit() else 0 for v in (load["headers"].get("x-dynosim-app-retries")
                                                                  or [None] * n)]
            by_app = int(np.sum(np.asarray(told, dtype=np.int64)[measured]))
        rep["retries"] = {"attempts": attempts, "attempts_per_request": attempts / max(1, in_window),
                          "count": again + by_router + by_app, "client": again, "router": by_router, "app": by_app,
                          "denied": int(np.sum(measured & (kept_why == "denied"))),
                          "exhausted": int(np.sum(measured & (kept_why == "exhausted")))}
    if breaker is not None:
        # As the simulation's: each opening's span clipped to the window over the window, the
        # openings that began in it, and the tries failed at once of its requests.
        spans = [(float(a), float(b)) for a, b in breaker]
        rep["breaker"] = {
            "open_fraction": sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans) / span,
            "opened": sum(1 for a, _ in spans if lo <= a <= hi),
            "rejected": int(np.sum(measured & rejected)),
        }
    if limits is not None:
        # Every try of the window's requests a limiter refused (with retries, a request may
        # have several); a fixed limit's mean is the limit.
        refusals = int(np.sum(measured & limited))
        rep["limit"] = {"rejected": refusals, "rejected_per_s": refusals / span}
        if limits.get("router") is not None:
            rep["limit"]["router_mean"] = float(limits["router"])
        if limits.get("app") is not None:
            rep["limit"]["app_mean"] = float(limits["app"])
    if resources:
        rep["resources"] = {name: {"pool_wait": time_summary(pool_wait[good & np.isfinite(pool_wait)])}
                            for name in resources}
    if len(classes) > 1:
        cls = np.asarray(class_of, dtype=np.int64)[np.asarray(load["index"], dtype=np.int64)]
        rep["classes"] = {name: {"requests": int(np.sum(kept & (cls == c))),
                                 "response": time_summary(done[good & (cls == c)] - origin[good & (cls == c)])}
                          for c, name in enumerate(classes)}
    if closed:
        # As ab and the simulation count: the requests sent inside the window, over the time
        # from the window's start (the first send, without a warm-up) to the last response.
        answered = measured & answers & final
        first = t0 + warmup
        last = float(np.max(done[answered])) if np.any(answered) else first
        elapsed = max(last - first, 1e-9)
        completed = int(np.sum(answered))
        rep["closed_loop"] = {"clients": closed["clients"], "completed": completed,
                              "failed": int(np.sum(answered & ~ok)) + (drawn - n if counted else 0),
                              "elapsed": elapsed, "requests_per_s": completed / elapsed,
                              "latency": time_summary(response)}  # the app's answers, as the simulation's
    return rep


#: Student's t, 97.5% quantile, for 1..30 degrees of freedom (a 95% two-sided interval).
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042]


def estimate(values: Sequence[float]) -> Dict[str, Optional[float]]:
    """The mean of independent runs' figures with its standard error and 95% interval
    (Student's t; none with one run), the shape of the simulation's summary."""
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return {"mean": mean, "ci_low": None, "ci_high": None, "std_error": None}
    se = float(np.std(values, ddof=1) / math.sqrt(n))
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return {"mean": mean, "ci_low": mean - t * se, "ci_high": mean + t * se, "std_error": se}


def summary_of(reps: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """A summary over replications (each a report's ``per_replication`` entry): every figure
    they all have as an :func:`estimate`."""
    out: Dict[str, Any] = {}
    for key, value in reps[0].items():
        if key == "stability" and isinstance(value, dict):
            out[key] = stability_summary([r[key] for r in reps])
        elif isinstance(value, dict):
            out[key] = summary_of([r[key] for r in reps if isinstance(r.get(key), dict)])
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            values = [r[key] for r in reps if isinstance(r.get(key), (int, float))]
            if len(values) == len(reps):
                out[key] = estimate([float(v) for v in values])
    return out


def stability_summary(verdicts: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The stability verdicts of several runs summarised as the simulation's are: each figure
    an estimate, ``recovered`` the fraction that recovered, ``recovery_time`` the mean over
    those that did (None when none did), ``recovered_runs`` their count."""
    out = summary_of([{k: v for k, v in verdict.items() if k != "recovery_time"} for verdict in verdicts])
    times = [float(v["recovery_time"]) for v in verdicts if v.get("recovery_time") is not None]
    out["recovery_time"] = estimate(times) if times else None
    out["recovered_runs"] = estimate([float(len(times))])
    return out


def errored_work(load: Dict[str, Any], work: Dict[str, Dict[str, Any]]) -> Dict[str, int]:
    """What the dynos did with the requests answered with an error (any status but 200, or
    none), from the app's work log: finished, begun but not finished (the worker killed), or
    never begun (the connection dropped before a worker read it)."""
    status = np.asarray(load["status"], dtype=np.int64)
    out = {"errors": 0, "finished": 0, "killed": 0, "never_begun": 0}
    for k, i in enumerate(ids(load)):
        if status[k] == 200:
            continue
        out["errors"] += 1
        entry = work.get(i)
        key = "never_begun" if entry is None else "killed" if entry["end"] is None else "finished"
        out[key] += 1
    return out


def lateness_summary(load: Dict[str, Any]) -> Dict[str, float]:
    late = np.asarray(load["sent"], dtype=float) - np.asarray(load["scheduled"], dtype=float)
    return time_summary(late)


def overheads(load: Dict[str, Any], dynos: int, drawn_service: Sequence[float],
              router_wait: Optional[Union[Sequence[float], "np.ndarray"]] = None) -> Dict[str, Optional[float]]:
    """What the real stack adds to each request beyond the drawn times, in seconds (means), the
    evidence for modelling it:

    - ``to_app_when_idle``: sent → the app starts, for requests whose dyno had nothing in hand
      when they were sent (:func:`in_hand_at_send`: none waiting, none being worked on):
      connecting, HAProxy, gunicorn's accept and parse;
    - ``in_app``: the app's own time beyond the drawn phase times;
    - ``after_app``: the app is done → the client has the whole response;
    - ``between_requests``: a worker's request ends in the app → the next one it takes,
      already waiting, starts (the worker's time between two requests). Per worker process
      (its pid, from the response headers; the dyno where none is given): on a dyno of several
      workers the next request to start is mostly another worker's. For a process of several
      threads, the request's own thread is taken to be the one whose request ended last before
      it started. ``router_wait`` (HAProxy's Tw per request, NaN where unknown) leaves out
      requests the router held: their gap is the router's forwarding and connecting, not the
      worker's.

    - ``server_cpu``: the app server's own CPU per request (:func:`server_cpu`; None without
      the app's X-Dynosim-Proc-Cpu).

    ``to_app_when_idle`` is what ``router.connect`` models, ``server_cpu`` what
    ``app.request_cpu`` models and ``between_requests`` (less the server's CPU) what
    ``app.overhead`` models (see :func:`stack_costs`).
    """
    sent = np.asarray(load["sent"], dtype=float)
    done = np.asarray(load["done"], dtype=float)
    start, end, dyno = app_times(load)
    drawn = np.asarray(drawn_service, dtype=float)
    ok = np.isfinite(start) & np.isfinite(end) & np.isfinite(done)
    in_hand = in_hand_at_send(dyno, np.where(ok, sent, np.inf), np.where(ok, end, -np.inf), dynos)
    idle = ok & (in_hand == 0)
    held = (np.zeros(len(sent), dtype=bool) if router_wait is None
            else np.nan_to_num(np.asarray(router_wait, dtype=float), nan=0.0) > 0)
    pid = app_pids(load)
    worker = np.where(pid >= 0, pid, -1 - dyno)  # a dyno without pids: one worker (-1 - d)
    gaps: List[float] = []
    for w in np.unique(worker[ok & ((pid >= 0) | (dyno >= 0))]):
        idx = np.nonzero(ok & (worker == w))[0]
        ends = np.sort(end[idx])
        # The end that freed the request's thread: the process's last before it started.
        k = np.searchsorted(ends, start[idx], side="right") - 1
        freed = ends[np.maximum(k, 0)]
        waiting = (k >= 0) & (sent[idx] < freed) & ~held[idx]  # there when the worker got free
        gaps += (start[idx] - freed)[waiting].tolist()

    def mean(values: "np.ndarray") -> Optional[float]:
        return float(np.mean(values)) if len(values) else None

    return {"to_app_when_idle": mean((start - sent)[idle]), "in_app": mean((end - start - drawn)[ok]),
            "after_app": mean((done - end)[ok]), "between_requests": mean(np.array(gaps)),
            "server_cpu": server_cpu(load)["mean"]}


def stack_costs(over: Dict[str, Optional[float]], request_cpu: bool = True) -> Dict[str, Optional[float]]:
    """The scenario keys that model what :func:`overheads` measured, in seconds (None where
    the run could not tell): ``router.connect`` is the time to the app for a request finding
    its dyno idle; ``app.request_cpu`` the server's own CPU per request; ``app.overhead`` the
    worker's time between two requests less that CPU, which the simulation then runs as
    ``app.request_cpu`` (on a core, under the lock): the worker's gap is mostly the server
    writing, closing, accepting and parsing, so setting both to what was measured would
    count that CPU twice (clamped at 0; the whole gap when the server's CPU is unknown).

    `request_cpu` False: the simulation cannot run ``app.request_cpu`` (a scenario with
    ``[service]``, not ``[request]`` phases: the engine runs it only before phases), so it is
    None and ``app.overhead`` is the whole gap."""
    gap, cpu = over.get("between_requests"), over.get("server_cpu") if request_cpu else None
    overhead = gap if gap is None or cpu is None else max(0.0, gap - cpu)
    return {"router.connect": over.get("to_app_when_idle"), "app.request_cpu": cpu, "app.overhead": overhead}


def server_cpu(load: Dict[str, Any]) -> Dict[str, Optional[float]]:
    """The app server's own CPU per request (accept, parse, write, log: what the worker process
    did beyond the app's phases), from the process's CPU time each answer reports
    (``x-dynosim-proc-cpu``, user + system, read last thing before answering) and the thread
    CPU of the request's phases (``x-dynosim-cpu``). Per worker process (its pid), the answers
    in the order of that CPU time: (its CPU at the last − at the first) − the phases' CPU of
    the requests after the first, over their count. ``mean`` pools every process (the sum of
    those differences over the sum of the counts; None with no process answering twice);
    ``cv`` is the coefficient of variation of the per-request figure (the growth between two
    consecutive answers less the later one's phases), which means something only where a
    process runs one request at a time (a sync worker, or one client per process);
    ``requests`` how many requests the mean is over.

    A process running requests at once (gthread, gevent) still gives the right mean: the
    differences telescope, and the requests in flight at the first and last answer are off
    by at most their CPU, over the count."""
    headers = load["headers"]
    column = headers.get("x-dynosim-proc-cpu")
    none: Dict[str, Optional[float]] = {"mean": None, "cv": None, "requests": 0}
    if not column:
        return none
    proc = floats(column)
    phases = floats(headers.get("x-dynosim-cpu") or [None] * len(proc))
    pid = app_pids(load)
    status = np.asarray(load.get("status", [200] * len(proc)), dtype=np.int64)
    ok = (status == 200) & (pid >= 0) & np.isfinite(proc) & np.isfinite(phases)
    total, count = 0.0, 0
    each: List[float] = []
    for p in np.unique(pid[ok]):
        idx = np.nonzero(ok & (pid == p))[0]
        if len(idx) < 2:
            continue
        order = idx[np.argsort(proc[idx], kind="stable")]
        steps = np.diff(proc[order]) - phases[order][1:]
        total += float(np.sum(steps))
        count += len(steps)
        each += steps.tolist()
    if count == 0:
        return none
    mean = total / count
    values = np.array(each)
    cv = float(np.std(values, ddof=1) / mean) if len(values) > 1 and mean > 0 else None
    return {"mean": mean, "cv": cv, "requests": count}


def phase_spread(load: Dict[str, Any], kinds: Sequence[Sequence[str]], drawn: Sequence[Sequence[float]],
                 *, shortest: float = 0.0005) -> Dict[str, Dict[str, Optional[float]]]:
    """How the phases' wall times (``x-dynosim-phase-wall``) differ from what was drawn, per
    kind, over the answered requests (`kinds` and `drawn`: per request sent, its phases' kinds
    and drawn times, in order; phases shorter than `shortest` are left out, the clock's and the
    loop's granularity dominating them):

    - ``cpu``: ``ratio_mean`` and ``cv``, the mean and the coefficient of variation of wall
      time over drawn time for each CPU phase; ``ratio_p99``. At low load, with nothing else
      of the dyno on its cores, ``cv`` is the candidate ``fleet.cpu_jitter``: the factor the
      simulation draws for each CPU phase (the app burns the drawn thread CPU exactly, so what
      varies is how much wall time the machine takes to give it); ``cv_iqr``, the same from
      the interquartile range (IQR / 1.349 over the median, as for a normal), which a few
      phases stretched by preemption (another process on the core) barely move: ``cv`` far
      above it says the spread is those few, not every phase;
    - ``io`` (sleeps, ``io`` and ``hold``) and ``use`` (a query): ``overshoot_mean`` and
      ``overshoot_sd``, wall − drawn, and ``cv``, the coefficient of variation of wall over
      drawn time, for comparison;

    each with ``phases``, how many were counted (0 and None figures when there were none)."""
    column = load["headers"].get("x-dynosim-phase-wall") or [None] * len(kinds)
    status = np.asarray(load.get("status", [200] * len(kinds)), dtype=np.int64)
    ratio: Dict[str, List[float]] = {"cpu": [], "io": [], "use": []}
    over: Dict[str, List[float]] = {"cpu": [], "io": [], "use": []}
    for k, text in enumerate(column):
        if not text or status[k] != 200:
            continue
        try:
            walls = [float(w) for w in text.split(",")]
        except ValueError:
            continue
        if len(walls) != len(kinds[k]):
            continue
        for kind, want, wall in zip(kinds[k], drawn[k], walls):
            kind = "io" if kind == "hold" else kind
            if kind in ratio and want >= shortest:
                ratio[kind].append(wall / want)
                over[kind].append(wall - want)
    out: Dict[str, Dict[str, Optional[float]]] = {}
    for kind in ratio:
        r, o = np.array(ratio[kind]), np.array(over[kind])
        n = len(r)
        cv = float(np.std(r, ddof=1) / np.mean(r)) if n > 1 else None
        if kind == "cpu":
            q1, q2, q3 = np.percentile(r, [25, 50, 75]) if n else (np.nan, np.nan, np.nan)
            out[kind] = {"phases": n, "ratio_mean": float(np.mean(r)) if n else None, "cv": cv,
                         "cv_iqr": float((q3 - q1) / 1.349 / q2) if n > 1 else None,
                         "ratio_p99": float(np.percentile(r, 99)) if n else None}
        else:
            out[kind] = {"phases": n, "overshoot_mean": float(np.mean(o)) if n else None,
                         "overshoot_sd": float(np.std(o, ddof=1)) if n > 1 else None, "cv": cv}
    return out


def log_by_id(path: Path, parse: Callable[[str], Optional[Tuple[str, Dict[str, Any]]]]
              ) -> Dict[str, Dict[str, Any]]:
    """A router's log file (HAProxy's or nginx's) by request id, each line read by `parse` (a line it gives None
    for is skipped); empty when the file cannot be read."""
    out: Dict[str, Dict[str, Any]] = {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        parsed = parse(line)
        if parsed is not None:
            out[parsed[0]] = parsed[1]
    return out

