"""Runs a scenario for real and simulated, side by side.

For each policy: the plan (:mod:`dynosim.testbed.plan`) is made for every policy before
anything starts; then PostgreSQL (when the scenario has resources), one gunicorn per dyno and
HAProxy start under a :class:`~dynosim.testbed.procs.Supervisor`, the load generator sends the
requests replication 0 of the simulation draws (same arrival times, same phase times), every
component stops, and the records become a report of ``dynosim run``'s shape. The simulation
runs the same scenario with the same seed; its replication 0 saw exactly the requests that
were sent, its other replications give the spread.

The result, per policy: ``{"policy", "simulated": <run report>, "measured": <report of the same
shape, engine "testbed", one replication>, "difference": {metric: (measured − simulated) /
simulated}, "testbed": {...}}`` (docs/testbed.md).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from .. import _dynosim
from ..api import run as run_scenario
from ..errors import DynosimError
from ..results import lookup, metrics_of
from ..scenario import Scenario
from . import colocated, measure
from . import services as services_
from .database import Database
from .dynos import Dynos, read_work, write_faults
from .fleet import Losses, RuntimeApi, compare, real_losses, run_autoscaled, simulated_fleet, split
from .plan import Plan, make_plan
from .procs import Supervisor, free_ports
from .router import Router
from .tools import check_tools, needed_tools  # noqa: F401 (here since the testbed began)

#: Response headers every answer of the app's work carries (see dynosim.testbed.app).
ANSWER_HEADERS = ["x-dynosim-start", "x-dynosim-end", "x-dynosim-dyno", "x-dynosim-pid", "x-dynosim-rss",
                  "x-dynosim-cpu", "x-dynosim-pool-wait", "x-dynosim-request-start", "x-dynosim-phase-wall",
                  "x-dynosim-proc-cpu"]
#: Response headers the load generator keeps: those, and the marks of a request the app
#: refused or stopped (app.wait_timeout's 503, an outage's 500, app.service_timeout's 500, a
#: query's statement_timeout's 500, a concurrency limit's 503) and the app's retries of its queries.
CAPTURE = ANSWER_HEADERS + ["x-dynosim-expired", "x-dynosim-outage", "x-dynosim-service-timeout",
                             "x-dynosim-resource-timeout", "x-dynosim-app-retries", "x-dynosim-limit",
                             "x-dynosim-call-failed", "x-dynosim-hedged"]


#: The load generator is behind when its p99 lateness passes this share of the shortest
#: drawn service time (the issue: "well under the smallest service time").
LATENESS_SHARE = 0.25


def testbed(scenario: Scenario, *, policies: Optional[List[str]] = None, runs: int = 1, calibrate: bool = False,
            progress: Callable[[str], None] = lambda message: None) -> Dict[str, Any]:
    """Runs every policy of `scenario` (or `policies`) for real `runs` times and simulated:
    ``{"results": [...]}`` as ``dynosim testbed --json`` prints it. Real run k sends the
    requests of the simulation's replication k (the simulation runs at least `runs`
    replications), so each real run has a simulated twin, and several runs give the measured
    side a spread of its own.

    `calibrate`: first measure the stack's own costs (:func:`calibrate`) and simulate with
    them (the simulated side only: the real one has its own); the result then has
    ``"calibration"``."""
    if runs < 1:
        raise DynosimError(f"--runs must be at least 1, got {runs}")
    if policies:
        scenario = scenario.with_overrides({"router.policy": list(policies)})
    replications = int(scenario.describe()["replications"])
    if replications < runs:
        scenario = scenario.with_overrides({"run.replications": runs})
    cases = [scenario.for_policy(p) for p in scenario.policies]
    plans = [make_plan(case) for case in cases]  # every refusal before anything starts
    calibration_plans = calibration_runs(scenario) if calibrate else []
    check_tools(plans + [plan for _, plan in calibration_plans])
    calibration: Optional[Dict[str, Any]] = None
    if calibrate:
        calibration = run_calibration(calibration_plans, request_cpu=has_phases(scenario), progress=progress)
    sets: Dict[str, Any] = calibration["set"] if calibration else {}
    results = []
    for case, first in zip(cases, plans):
        policy = first.described["policy"]
        progress(f"{policy}: simulating")
        simulated = simulate(case.with_overrides(sets))
        reports, rows = [], []
        for k in range(runs):
            plan = first if k == 0 else make_plan(case, replication=k)
            progress(f"{policy}: run {k + 1} of {runs}: starting the testbed")
            report, records = run_plan(plan, progress=lambda m: progress(f"{policy}: run {k + 1}: {m}"))
            reports.append(report)
            rows += [dict(r, run=k) for r in records]
        measured = combine(reports, request_cpu=has_phases(case))
        if simulated is None:
            # Services whose calls the engine does not simulate yet: the real run alone.
            results.append({"policy": policy, "simulated": None, "measured": measured, "difference": {},
                            "paired_difference": {}, "testbed": measured.pop("testbed"), "_records": rows})
            results[-1]["testbed"]["warnings"].append(NOT_SIMULATED)
            continue
        if "pricing" in simulated:  # the scenario's prices, the same for both sides
            measured["pricing"] = simulated["pricing"]
        twins = {"summary": measure.summary_of(simulated["per_replication"][:runs])}
        results.append({"policy": policy, "simulated": simulated, "measured": measured,
                        "difference": difference(simulated["summary"], measured["summary"]),
                        "paired_difference": difference(twins["summary"], measured["summary"]),
                        "testbed": measured.pop("testbed"), "_records": rows})
        if calibration:
            results[-1]["testbed"]["modelled_costs"].update(calibration["modelled"])
    doc: Dict[str, Any] = {"results": results}
    if calibration:
        doc["calibration"] = calibration
    return doc


#: The warning of a real run of services the engine does not simulate yet.
NOT_SIMULATED = ("the engine does not simulate this scenario's calls yet (docs/services.md): the real run is "
                 "measured alone, with no simulated side to compare")


def simulate(case: Scenario) -> Optional[Dict[str, Any]]:
    """The simulated side of a real run: the engine's report of `case`; None for a scenario
    with services whose calls the engine refuses (``describe()["refused"]``), which the testbed
    then runs for real alone (docs/testbed.md, "Services that call services")."""
    if case.doc.get("services") and case.describe().get("refused"):
        return None
    return run_scenario(case, warn=False)[0].to_dict()


#: The calibration's requests: constant phases, so that what varies is the stack's. 2 ms of
#: CPU is long beside the clock's and the burn loop's granularity (microseconds) and short
#: beside a time slice; the sleep lets one process's CPU phases not follow each other back to
#: back, as a real request's would not.
CALIBRATION_PHASES = [{"cpu": "2ms"}, {"io": "8ms"}]


def busy_phases(scenario: Scenario) -> List[Dict[str, Any]]:
    """The busy run's phases: the scenario's own ``cpu`` and ``io`` phases (``[request]``, each
    with its distribution; a ``use`` of a resource waits as an ``io`` of its time, the
    calibration having no database; other phases are left out), so that the server's CPU per
    request and the worker's gap are measured under the CPU the scenario's requests put on the
    dyno's cores: a worker preempted in long CPU phases spends more of its own CPU per request
    than one running short ones (docs/testbed.md, "Calibration", has the figures).
    :data:`CALIBRATION_PHASES` when the scenario has no ``[request]`` phases with a ``cpu``
    phase ([service], or classes)."""
    phases = ((scenario.doc.get("request") or {}).get("phases")) or []
    out: List[Dict[str, Any]] = []
    for phase in phases:
        if not isinstance(phase, dict):
            continue
        if "cpu" in phase:
            out.append({"cpu": phase["cpu"]})
        elif "io" in phase:
            out.append({"io": phase["io"]})
        elif "use" in phase and "time" in phase:
            out.append({"io": phase["time"]})
    return out if any("cpu" in p for p in out) else CALIBRATION_PHASES
#: Requests in the idle run (one client per dyno) and the busy one (two per worker slot).
CALIBRATION_REQUESTS = (300, 200)
#: The most either calibration run may last, seconds.
CALIBRATION_SECONDS = 30.0


def calibration_scenario(scenario: Scenario, *, clients: int, requests: int,
                         phases: Optional[List[Dict[str, Any]]] = None) -> Scenario:
    """`scenario`'s fleet and app server (its dynos, cores, gunicorn's worker class,
    processes, threads and timeouts), under a closed loop of `clients` sending `requests`
    requests of `phases` (default :data:`CALIBRATION_PHASES`), routed by least connections (HAProxy's leastconn:
    spreads the clients evenly and holds nothing in its own queue, unlike intelligent's
    maxconn), one replication, on the scenario's real router (router.kind; nginx with one
    worker). Its resources, classes and autoscaling are left out: the calibration measures the
    router and the app server, not the app."""
    keep = ("name", "description", "fleet", "app")
    doc: Dict[str, Any] = {k: v for k, v in scenario.doc.items() if k in keep}
    doc["name"] = f"{scenario.name}-calibration"
    doc["arrivals"] = {"process": "closed", "clients": clients, "requests": requests, "think": "0s"}
    doc["request"] = {"phases": phases or CALIBRATION_PHASES}
    router = scenario.doc.get("router") or {}
    doc["router"] = {"policy": "least_connections", **{k: router[k] for k in ("timeout", "kind") if k in router}}
    seed = (scenario.doc.get("run") or {}).get("seed")
    doc["run"] = {"replications": 1, "warmup": "0s", **({"seed": seed} if seed is not None else {})}
    return Scenario(doc, source=scenario.source, base_dir=scenario.base_dir)


def calibration_runs(scenario: Scenario) -> List[tuple]:
    """The calibration's two real runs, planned (every refusal before anything starts):
    ``("idle", plan)``, one client per dyno, so that each request finds its dyno idle (the
    time to reach the app, the server's CPU per request, the CPU phases' jitter: no other
    request of the dyno on its cores); ``("busy", plan)``, two clients per worker slot, so
    that requests wait at the dyno for a worker and the worker's time between two requests
    shows (one client per worker would leave every worker idle when its next request comes).
    """
    single = scenario.without_autoscale().for_policy(scenario.policies[0])
    dynos = int(single.describe()["dynos"])
    out: List[tuple] = []
    for name in ("idle", "busy"):
        if name == "idle":
            clients, requests = dynos, CALIBRATION_REQUESTS[0]
        else:
            # Two per thread (gthread, Puma); a gevent worker takes every connection at once, so
            # two per process (its greenlets never wait for a worker: nothing of the gap shows).
            d = out[0][1].dynos
            threaded = d.worker_class in ("gthread", "puma")
            clients, requests = 2 * dynos * d.workers * (d.threads if threaded else 1), \
                CALIBRATION_REQUESTS[1]
        plan = make_plan(calibration_scenario(single, clients=clients, requests=max(requests, 2 * clients),
                                              phases=busy_phases(single) if name == "busy" else None))
        plan.deadline = min(plan.deadline, CALIBRATION_SECONDS)
        plan.request_timeout = min(plan.request_timeout, CALIBRATION_SECONDS)
        plan.router.timeout = min(plan.router.timeout, CALIBRATION_SECONDS)
        out.append((name, plan))
    return out


def run_calibration(runs: List[tuple], request_cpu: bool = True,
                    progress: Callable[[str], None] = lambda message: None) -> Dict[str, Any]:
    """Runs the calibration's plans (:func:`calibration_runs`) on the real stack and says what
    they measured: ``{"measured": {key: seconds or the jitter}, "set": {key: value as --set
    takes it}, "set_lines": ["--set key=value", ...], "modelled": {key: seconds}, "runs":
    {name: the details}}`` (docs/testbed.md, "Calibration"). A figure the runs could not
    measure is None and is not set."""
    details: Dict[str, Any] = {}
    for name, plan in runs:
        progress(f"calibration: {name} run: {len(plan.drawn['phases'])} requests, "
                 f"{plan.closed['clients'] if plan.closed else 0} clients")
        load, router_log, _work, wall, cpu = _run_stack(plan, progress=lambda m: progress(f"calibration: {m}"))
        tw = np.array([(router_log.get(i) or {}).get("tw") for i in measure.ids(load)], dtype=float)
        served = [sum(plan.drawn["phases"][i]) for i in load["index"]]
        kinds = [[p["kind"] for p in plan.drawn["classes"][plan.drawn["class"][i]]["phases"]] for i in load["index"]]
        drawn = [plan.drawn["phases"][i] for i in load["index"]]
        status = np.asarray(load["status"])
        details[name] = {
            "clients": plan.closed["clients"] if plan.closed else 0, "requests": len(load["index"]),
            "failed": int(np.sum(status != 200)), "wall_seconds": wall,
            "overhead": measure.overheads(load, int(plan.described["dynos"]), served, router_wait=tw),
            "server_cpu": measure.server_cpu(load),
            "phases": measure.phase_spread(load, kinds, drawn),
            "colocated": colocated.per_request(cpu["before"], cpu["after"], len(load["index"]), cpu["dyno_cpus"]),
            "gunicorn": {"server": plan.dynos.server, "worker_class": plan.dynos.worker_class,
                         "workers": plan.dynos.workers, "threads": plan.dynos.threads, "cpus": plan.dynos.cpus},
            "router": plan.router.kind,
        }
    return calibration_result(details, request_cpu)


def calibration_result(details: Dict[str, Any], request_cpu: bool = True) -> Dict[str, Any]:
    """What the calibration's runs (`details`, as :func:`run_calibration` gathers them) give
    for the simulation: ``router.connect`` the idle run's time to the app for a request finding
    its dyno idle; ``app.request_cpu`` the busy run's server CPU per request (the idle run's
    where the busy one has none): a worker going from one request to the next, as it does
    whenever requests queue, where the costs matter (a worker waking for each request, the
    idle run, spends more: docs/testbed.md, "Calibration"); ``app.overhead`` the busy run's
    worker's time between two requests less that server CPU (which the simulation then runs
    as app.request_cpu; :func:`measure.stack_costs`); ``fleet.cpu_jitter``
    the coefficient of variation of the idle run's CPU phases' wall time over their drawn
    time; ``router.colocated_cpu`` (only when the runs measured it) the busy run's CPU of
    HAProxy, the load generator and PostgreSQL per request on the dynos' cores
    (:func:`colocated.per_request`). `request_cpu` False (a scenario with [service]: the
    simulation cannot run it): app.request_cpu and router.colocated_cpu are measured but not
    set, and app.overhead is the worker's whole gap."""
    idle, busy = details.get("idle") or {}, details.get("busy") or {}
    idle_over = idle.get("overhead") or {}
    gevent = (idle.get("gunicorn") or {}).get("worker_class") == "gevent"
    if gevent:
        # One OS thread runs every greenlet: a request's thread CPU holds the others' CPU done
        # while it slept, so the busy run's server CPU is wrong, and no request ever waits for
        # a worker, so there is no gap to measure.
        busy = {k: v for k, v in busy.items() if k not in ("server_cpu", "overhead")}
    busy_cpu = (busy.get("server_cpu") or {}).get("mean")
    busy_over = dict(busy.get("overhead") or {})
    if busy_cpu is None:
        busy_over["server_cpu"] = (idle.get("server_cpu") or {}).get("mean")
    busy_costs = measure.stack_costs(busy_over, request_cpu)
    measured: Dict[str, Optional[float]] = {
        "router.connect": idle_over.get("to_app_when_idle"),
        "app.request_cpu": busy_cpu if busy_cpu is not None else (idle.get("server_cpu") or {}).get("mean"),
        "app.overhead": busy_costs.get("app.overhead"),
        "fleet.cpu_jitter": ((idle.get("phases") or {}).get("cpu") or {}).get("cv"),
    }
    # The stack's own programs on the dynos' cores, per request, in the busy run (under load,
    # where the scheduler's placement is the real run's): only when the runs measured it.
    if "colocated" in busy or "colocated" in idle:
        measured["router.colocated_cpu"] = (busy.get("colocated") or idle.get("colocated") or {}).get("seconds")
    sets: Dict[str, Any] = {}
    for key, value in measured.items():
        if key in ("app.request_cpu", "router.colocated_cpu") and not request_cpu:
            continue
        if value is None or not math.isfinite(value) or value < 0:
            continue
        # As --set would give them: a number for the jitter, a duration for the others.
        sets[key] = round(value, 4) if key == "fleet.cpu_jitter" else f"{value * 1e3:.3f}ms"
    modelled = {k: v for k, v in measured.items() if k in sets}
    warnings = []
    if gevent:
        warnings.append("gevent: app.request_cpu is the idle run's (one greenlet at a time), and app.overhead is not "
                        "measured (a gevent worker takes every connection at once: no request waits for a worker)")
    if not request_cpu:
        warnings.append("the scenario has [service], not [request] phases: the simulation runs app.request_cpu only "
                        "before phases, so it is not set, and app.overhead is the worker's whole gap")
        if measured.get("router.colocated_cpu"):
            warnings.append("router.colocated_cpu is not set either: it runs on the dynos' cores, which a [service] "
                            "scenario has not")
    shared = busy.get("colocated") or {}
    if shared.get("how") == "sampled":
        warnings.append(f"router.colocated_cpu: HAProxy and the load generator may run on cores the dynos do not use; "
                        f"{(shared.get('share') or 0) * 100:.0f}% of their CPU ran on the dynos' cores, by /proc/stat's "
                        "10 ms ticks over a short run (coarse)")
    cpu = (idle.get("phases") or {}).get("cpu") or {}
    if (cpu.get("ratio_mean") or 1.0) > STRETCHED:
        warnings.append(f"the calibration's CPU phases took {cpu['ratio_mean']:.2f}x their CPU time in wall time: "
                        "something else was running on the dyno's cores (this machine's other load), so "
                        "fleet.cpu_jitter measures mostly that, and the real run's CPU phases are stretched too")
    failed = sum(int((details.get(name) or {}).get("failed") or 0) for name in ("idle", "busy"))
    if failed:
        warnings.append(f"{failed} calibration request(s) failed")
    return {"measured": measured, "set": sets, "set_lines": [f"--set {k}={v}" for k, v in sets.items()],
            "modelled": modelled, "warnings": warnings, "runs": details}


#: A calibration whose CPU phases took more than this many times their CPU in wall time ran on
#: cores that something else used: it warns.
STRETCHED = 1.1


def has_phases(scenario: Scenario) -> bool:
    """Whether the simulation can run app.request_cpu: the engine puts it before a request's
    phases, so only a scenario with [request] has it (with [service] it is ignored)."""
    return bool(scenario.doc.get("request"))


def combine(reports: List[Dict[str, Any]], request_cpu: bool = True) -> Dict[str, Any]:
    """One measured report from several real runs: their replications side by side, the
    summary their means with 95% intervals (as the simulation's), the testbed's extras of the
    run whose generator was latest, with every run's warnings."""
    out = dict(reports[0])
    out["replications"] = len(reports)
    out["per_replication"] = [r["per_replication"][0] for r in reports]
    out["summary"] = measure.summary_of(out["per_replication"])
    out["wall_seconds"] = sum(r["wall_seconds"] for r in reports)
    latest = max(reports, key=lambda r: r["testbed"]["lateness"]["p99"])
    extras = dict(latest["testbed"])
    extras["warnings"] = list(dict.fromkeys(w for r in reports for w in r["testbed"]["warnings"]))
    extras["runs"] = len(reports)
    # The stack's costs: the mean over the runs that measured each.
    over: Dict[str, Optional[float]] = {}
    for key in extras["overhead"]:
        values = [r["testbed"]["overhead"][key] for r in reports if r["testbed"]["overhead"].get(key) is not None]
        over[key] = float(np.mean(values)) if values else None
    extras["overhead"] = over
    extras["stack_costs"] = measure.stack_costs(over, request_cpu)
    out["testbed"] = extras
    for r in reports:
        r.pop("testbed", None)
    return out


def _run_stack(plan: Plan, progress: Callable[[str], None] = lambda message: None) -> tuple:
    """Starts the components, sends the load, stops everything: (the load generator's records,
    HAProxy's log by request id, the app's work log, the wall seconds it took, the CPU of the
    stack's programs and of the dynos around the load: :mod:`.colocated`'s snapshots)."""
    wall0 = time.monotonic()
    requests = plan.requests()
    tiers = plan.services.services if plan.services is not None else []
    with contextlib.ExitStack() as stack_of, Supervisor() as supervisor:
        # Every port at once: the entry's router and dynos, then each service's.
        every = free_ports(plan.described["dynos"] + 1 + sum(int(t.plan.described["dynos"]) + 1 for t in tiers))
        ports, rest = every[:plan.described["dynos"] + 1], every[plan.described["dynos"] + 1:]
        # Each service first (its own supervisor, work directory and HAProxy: services.py), so
        # that the entry's app finds it up.
        database = None
        dsn = ""
        if plan.resources or any(t.plan.resources for t in tiers):
            # One database for the entry and its services (docs/services.md): theirs is shared.
            connections = plan.max_connections + sum(t.plan.max_connections for t in tiers if t.plan.resources)
            database = Database(supervisor, connections, cpus=plan.database_cpus)
            dsn = database.dsn
            if any(r["mode"] == "burn" for r in plan.resources.values()):
                rate = database.calibrate_burn()
                for r in plan.resources.values():
                    r["burn_rate"] = rate
        started = []
        tier_ports = {}
        for tier in tiers:
            n = int(tier.plan.described["dynos"])
            tier_ports[tier.name], rest = rest[:n + 1], rest[n + 1:]
            plan.dynos.services[tier.name] = tier_ports[tier.name][0]
        for tier in tiers:
            mine = tier_ports[tier.name]
            # A service that calls services: its app gets their HAProxy ports, as the entry's.
            tier.plan.dynos.services.update(plan.dynos.services)
            tier_supervisor = stack_of.enter_context(Supervisor())
            tier_dynos = Dynos(tier_supervisor, tier.plan.dynos, mine[1:], dsn if tier.plan.resources else "")
            tier_router = Router(tier_supervisor, tier.plan.router, mine[0], mine[1:])
            started.append((tier, tier_dynos, tier_router))
        dynos = Dynos(supervisor, plan.dynos, ports[1:], dsn)
        router_plan = plan.router
        if plan.losses:
            # Lost dynos leave HAProxy and come back through its runtime API.
            router_plan = dataclasses.replace(router_plan, runtime_socket=supervisor.workdir / "haproxy.sock")
        router = Router(supervisor, router_plan, ports[0], ports[1:])
        closed = plan.closed
        progress(f"sending {len(requests)} requests")
        # The stack's own programs' CPU over the load, and the dynos' (router.colocated_cpu).
        stack = {"router": router.process.pid, "load_generator": os.getpid()}
        if database is not None:
            stack["database"] = database.process.pid
        roots = [p.pid for p in dynos.processes]
        cpu_before = colocated.snapshot(stack, roots)
        # The clients retry as replication 0 of the simulation's do (its backoff stream).
        retry = (plan.scenario.to_json(), str(plan.scenario.base_dir), plan.replication) if plan.retries else None
        # The clients' breaker: the engine's own, asked before each try.
        breaker = (plan.scenario.to_json(), str(plan.scenario.base_dir)) if plan.breaker else None
        if plan.faults:
            # The slowdowns' windows from now, which is the load's start to a millisecond.
            write_faults(supervisor.workdir, plan.faults, time.time())

        def send() -> Dict[str, Any]:
            return _dynosim.send_load(
                f"127.0.0.1:{ports[0]}", requests, "closed" if closed else "open",
                int(closed["clients"]) if closed else 0, list(plan.drawn["think"]), plan.request_timeout,
                plan.deadline, CAPTURE, retry=retry, id_header="X-Dynosim-Id", breaker=breaker)

        if plan.losses:
            losses = real_losses(plan.losses, plan.boot_time, supervisor, plan.dynos, dynos.processes, ports[1:],
                                 RuntimeApi(supervisor.workdir / "haproxy.sock"), dsn, dynos.work_dir)
            load, losses_t0 = _load_with_losses(send, losses)
        else:
            load = send()
        cpu = {"before": cpu_before, "after": colocated.snapshot(stack, roots), "dyno_cpus": dyno_cpus(plan)}
        # The dynos work on what the router (504) or the client (its timeout) gave up on.
        given_up = [i for i, status, error in zip(measure.ids(load), load["status"], load["error"])
                    if status == 504 or error == "timeout"]
        if given_up:
            progress(f"waiting for the dynos to finish {len(given_up)} request(s) given up on")
            dynos.finish_work(given_up, limit=min(plan.deadline, 60.0 + sum(
                sum(plan.drawn["phases"][int(i.partition(".")[0])]) for i in given_up)))
        progress("stopping")
        router.stop()  # HAProxy's log is complete once it has stopped
        dynos.stop()
        router_log = router.read_log()
        work = read_work(dynos.work_dir)
        # The services' logs, once the entry's dynos (their callers) have stopped.
        for tier, tier_dynos, tier_router in started:
            tier_router.stop()
            tier_dynos.stop()
            load.setdefault("services", {})[tier.name] = (tier_router.read_log(), read_work(tier_dynos.work_dir))
        if database is not None:
            database.stop()  # last: the services' dynos may use it to the end
    if plan.losses:
        # Each lost dyno's crash and its return, s from the load's start.
        offset = losses_t0 - float(load["start"])
        load["losses"] = {"events": [dict(vars(e), t=e.t + offset) for e in losses.events],
                          "warnings": losses.warnings,
                          # Unix seconds, as the load's own times.
                          "crashes": [(d, losses_t0 + t) for d, t in losses.crashes()]}
    return load, router_log, work, time.monotonic() - wall0, cpu


#: How often the main thread looks at the lost dynos while the load goes on, s.
LOSS_TICK = 0.02


def _load_with_losses(send: Callable[[], Dict[str, Any]], losses: Losses) -> tuple:
    """The load sent from a thread while this one (which starts every process: Supervisor.spawn)
    crashes the lost dynos on time and brings them back: (the load, the Unix time the losses'
    times count from, taken just before the load starts)."""
    import threading

    out: Dict[str, Any] = {}

    def run() -> None:
        try:
            out["load"] = send()
        except BaseException as e:  # raised again in this thread
            out["error"] = e

    sender = threading.Thread(target=run, name="dynosim-load", daemon=True)
    t0 = time.time()
    sender.start()
    try:
        while sender.is_alive():
            losses.tick(time.time() - t0)
            sender.join(min(LOSS_TICK, max(0.0, losses.next_time() - (time.time() - t0))))
    finally:
        if sender.is_alive():
            _dynosim.interrupt()
            sender.join(30.0)
    if "error" in out:
        raise out["error"]
    return out["load"], t0


def dyno_cpus(plan: Plan) -> List[int]:
    """The cores the plan's dynos run on (every core the testbed may use, for dynos not
    pinned)."""
    pinned = plan.dynos.cpus or [None]
    if any(c is None for c in pinned):
        return sorted(os.sched_getaffinity(0))
    return sorted({c for cpus in pinned if cpus is not None for c in cpus})


def run_plan(plan: Plan, progress: Callable[[str], None] = lambda message: None) -> tuple:
    """Starts the components, sends the load, stops everything; the measured report and the
    per-request records."""
    load, router_log, work, wall, _cpu = _run_stack(plan, progress)
    return report_of(plan, load, router_log, work, wall)


def report_of(plan: Plan, load: Dict[str, Any], router_log: Dict[str, Dict[str, Any]],
              work: Dict[str, Dict[str, Any]], wall: float) -> tuple:
    """The measured report and the per-request records of a run of `plan` (:func:`_run_stack`'s
    records)."""
    d = plan.described
    classes = [c["name"] for c in plan.drawn["classes"]]
    rep = measure.replication(load, router_log, dynos=int(d["dynos"]), slots=int(d["slots"]),
                              warmup=float(d["warmup"]), duration=float(d["duration"]), closed=plan.closed,
                              drawn_times=plan.drawn["time"],
                              classes=classes, class_of=plan.drawn["class"], resources=list(plan.resources),
                              work=work, per_process=per_process(plan), client_timeout=plan.request_timeout,
                              retries=plan.retries, router_retries=bool(plan.router.retry_on),
                              wait_timeout=plan.dynos.wait_timeout is not None,
                              outage=any(f["kind"] != "slowdown" for f in plan.faults),
                              service_timeout=plan.dynos.service_timeout is not None,
                              breaker=load.get("breaker") if plan.breaker else None,
                              crashes=(load.get("losses") or {}).get("crashes") if plan.losses else None,
                              resource_timeout=any(r.get("timeout") is not None for r in plan.resources.values()),
                              app_retries=any(r.get("retries") for r in plan.resources.values()),
                              limits=limits_of(plan), call_failed=plan.services is not None)
    if plan.faults or plan.losses:
        rep["stability"] = stability(plan, load)
    if plan.services is not None:
        rep["services"] = services_figures(plan, load)
    report = {
        "scenario": d["name"], "policy": d["policy"], "engine": "testbed", "dynos": d["dynos"], "slots": d["slots"],
        "routers": d["routers"], "arrival_rate": d["arrival_rate"], "service_mean": d["service_mean"],
        "offered_load": d["offered_load"], "relaxation_time": d["relaxation_time"], "duration": d["duration"],
        "warmup": d["warmup"], "replications": 1, "seed": d["seed"],
        "shards": 1,  # one real fleet
        "summary": measure.summary_of([rep]), "per_replication": [rep],
        "wall_seconds": wall,
        "testbed": extras(plan, load, router_log, work),
    }
    return report, records(plan, load, router_log, work)


def services_figures(plan: Plan, load: Dict[str, Any]) -> Dict[str, Any]:
    """Each service's measured figures (``services.NAME.*``, :func:`.services.figures`) over
    the load's span, from its HAProxy's log and its app's work log."""
    done = np.asarray(load["done"], dtype=float)
    done = done[np.isfinite(done)]
    span = (float(done.max()) if len(done) else float(load["start"])) - float(load["start"])
    out: Dict[str, Any] = {}
    # The entry's requests in the measured window (arrivals from the warm-up's end), as the
    # simulation's services.NAME figures count its calls' requests.
    times = plan.drawn["time"] or []
    warmup, end = float(plan.described["warmup"]), float(plan.described["warmup"]) + float(plan.described["duration"])

    def window(i: int) -> bool:
        return not times or (i < len(times) and warmup <= times[i] < end)

    for tier in plan.services.services if plan.services is not None else []:
        router_log, work = (load.get("services") or {}).get(tier.name, ({}, {}))
        d = tier.plan.described
        failed = sum(1 for v in load["headers"].get("x-dynosim-call-failed") or [] if v == tier.name)
        out[tier.name] = services_.figures(router_log, work, dynos=int(d["dynos"]), slots=int(d["slots"]), span=span,
                                           failed=failed, window=window)
    return out


def limits_of(plan: Plan) -> Optional[Dict[str, int]]:
    """The fixed concurrency limits the real stack ran ({"router": N, "app": N}, those set),
    None without one."""
    limits = {k: v for k, v in (("router", plan.router.router_limit), ("app", plan.router.app_limit))
              if v is not None}
    return limits or None


def stability(plan: Plan, load: Dict[str, Any]) -> Dict[str, Any]:
    """The stability verdict of a real run with faults (``stability.*``): see
    :func:`measure.stability_verdict`."""
    return measure.stability_verdict(plan.scenario, plan.described, load)


def per_process(plan: Plan) -> Optional[int]:
    """The requests one worker process runs at once when gunicorn's workers accept greedily
    (gthread: its threads; gevent: its worker connections), each queueing for its own; None
    for sync workers, which share the dyno's accept queue."""
    if plan.dynos.worker_class == "gthread":
        return plan.dynos.threads
    if plan.dynos.worker_class == "gevent":
        return plan.dynos.worker_connections
    return None


def extras(plan: Plan, load: Dict[str, Any], router_log: Dict[str, Dict[str, Any]],
           work: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """What only the testbed knows: the generator's lateness, HAProxy's own queue time, the
    queueing the app sees from X-Request-Start, what the app did with the requests answered
    with an error, and the warnings."""
    start, _, _ = measure.app_times(load)
    stamped = np.array([_request_start(v) for v in load["headers"]["x-dynosim-request-start"]])
    tw = np.array([(router_log.get(i) or {}).get("tw") for i in measure.ids(load)], dtype=float)
    ok = np.isfinite(start) & np.isfinite(stamped)
    lateness = measure.lateness_summary(load)
    served = [sum(plan.drawn["phases"][i]) for i in load["index"]]
    shortest = min(served) if served else 0.0
    over = measure.overheads(load, int(plan.described["dynos"]), served, router_wait=tw)
    if plan.dynos.worker_class == "gevent":
        # One OS thread runs every greenlet: a request's thread CPU holds the others' CPU done
        # while it slept, so the process's CPU less it is not the server's.
        over["server_cpu"] = None
    warnings = list(plan.warnings) + list((load.get("losses") or {}).get("warnings") or [])
    if not plan.closed and lateness["p99"] > LATENESS_SHARE * shortest:
        warnings.append(f"the load generator fell behind: p99 lateness {lateness['p99'] * 1e3:.3f} ms, more than "
                        f"{LATENESS_SHARE:.0%} of the shortest drawn service time ({shortest * 1e3:.3f} ms); "
                        "the measured queue times include that lateness")
    return {
        "lateness": lateness,
        "router_queue": measure.time_summary(tw[np.isfinite(tw)]),
        "request_queueing": measure.time_summary(start[ok] - stamped[ok]),
        "router_log_lines": len(router_log),
        "errored_work": measure.errored_work(load, work),
        "overhead": over,
        # What to set to model those costs, and what the simulation modelled.
        "stack_costs": measure.stack_costs(over, has_phases(plan.scenario)),
        "modelled_costs": {"router.connect": plan.described.get("connect", 0.0),
                           "app.request_cpu": plan.described["app"].get("request_cpu", 0.0),
                           "app.overhead": plan.described["app"].get("overhead", 0.0),
                           **({"router.colocated_cpu": plan.described["colocated_cpu"]}
                              if plan.described.get("colocated_cpu") else {})},
        "warnings": warnings,
        # The real router as run: {"kind", "config"}; "haproxy" kept for HAProxy's readers.
        "router": {"kind": plan.router.kind, "config": plan.router.describe()},
        **({"haproxy": plan.router.describe()} if plan.router.kind == "haproxy" else {}),
        # The app server as run (its name kept from when it was always gunicorn).
        "gunicorn": {"server": plan.dynos.server, "worker_class": plan.dynos.worker_class,
                     "workers": plan.dynos.workers, "threads": plan.dynos.threads, "cpus": plan.dynos.cpus},
        "resources": plan.resources,
        # The clients' breaker: when it opened and until when, seconds from the load's start.
        **({"breaker_openings": [[a - float(load["start"]), b - float(load["start"])]
                                 for a, b in load.get("breaker") or []]} if plan.breaker else {}),
        # The lost dynos' crashes and returns (s from the load's start): [[faults]] dynos_lost.
        **({"losses": load["losses"]["events"]} if load.get("losses") else {}),
    }


def _request_start(text: Optional[str]) -> float:
    """X-Request-Start as HAProxy wrote it, ``t=<microseconds since the epoch>``, in seconds."""
    if not text or not text.startswith("t="):
        return float("nan")
    try:
        return int(text[2:]) / 1e6
    except ValueError:
        return float("nan")


def records(plan: Plan, load: Dict[str, Any], router_log: Dict[str, Dict[str, Any]],
            work: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per request: what was drawn, sent and measured (the CSV of ``--out``); the app's
    start and end from its work log, so also for requests answered with an error."""
    rows = []
    t0 = float(load["start"])
    h = load["headers"]
    start, end, dyno = measure.app_times(load, work)
    attempts = load.get("attempt") or [1] * len(load["index"])
    for k, (i, tid) in enumerate(zip(load["index"], measure.ids(load))):
        log = router_log.get(tid) or {}
        rows.append({
            "index": i, "attempt": attempts[k], "class": plan.drawn["classes"][plan.drawn["class"][i]]["name"],
            "drawn_service": sum(plan.drawn["phases"][i]),
            "scheduled": load["scheduled"][k] - t0, "sent": load["sent"][k] - t0, "done": load["done"][k] - t0,
            "status": load["status"][k], "error": load["error"][k] or "",
            "router_status": log.get("status", ""), "server": log.get("server", ""),
            # nginx's worker (its pid) that routed it: which of the routers.
            "router": log.get("router", ""),
            "app_start": float(start[k]) - t0 if np.isfinite(start[k]) else "",
            "app_end": float(end[k]) - t0 if np.isfinite(end[k]) else "",
            "dyno": int(dyno[k]) if dyno[k] >= 0 else "",
            "pid": h["x-dynosim-pid"][k] or str((work.get(tid) or {}).get("pid", "")),
            "rss": h["x-dynosim-rss"][k] or "", "cpu": h["x-dynosim-cpu"][k] or "",
            "process_cpu": h["x-dynosim-proc-cpu"][k] or "",
            "pool_wait": h["x-dynosim-pool-wait"][k] or "",
            "router_queue": "" if log.get("tw") is None else log["tw"],
            "router_connect": "" if log.get("tc") is None else log["tc"],
        })
    return rows


def difference(simulated: Dict[str, Any], measured: Dict[str, Any]) -> Dict[str, Optional[float]]:
    """(measured − simulated) / simulated for every metric both have (None where the simulated
    figure is 0). `simulated` is a summary (estimates) or one replication (plain figures)."""
    out: Dict[str, Optional[float]] = {}
    for metric in metrics_of(measured):
        try:
            node = lookup(simulated, metric)
            sim = float(node["mean"] if isinstance(node, dict) else node)
            real = float(lookup(measured, metric)["mean"])
        except (KeyError, TypeError):
            continue
        if metric in ("simulated_requests", "events"):
            continue
        out[metric] = None if sim == 0 else (real - sim) / abs(sim)
    return out


def write_records(path: Path, rows: List[Dict[str, Any]]) -> None:
    with open(path, "w", newline="") as f:
        if not rows:
            return
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_json(path: Path, doc: Any) -> None:
    from ..output import json_text

    Path(path).write_text(json_text(doc) + "\n")


def fleet_testbed(scenario: Scenario, *, policies: Optional[List[str]] = None, calibrate: bool = False,
                  progress: Callable[[str], None] = lambda m: None) -> Dict[str, Any]:
    """``dynosim testbed`` for a scenario with ``[autoscale]``: per policy, the real autoscaled
    fleet, the simulation's (when the engine simulates it) and the comparison. `calibrate`:
    first measure the stack's own costs on the fleet's initial dynos without the autoscaler
    (:func:`run.calibration_runs`, as for a fixed fleet) and simulate with them; the result
    then has ``"calibration"``."""
    from .plan import MAX_PROCESSES

    if scenario.doc.get("services"):
        raise scenario._error("autoscale", "the testbed runs services beside a fixed entry fleet: leave [autoscale] "
                                           "out (docs/testbed.md, \"Services that call services\")")
    if policies:
        scenario = scenario.with_overrides({"router.policy": list(policies)})
    engine, fleet_plan = split(scenario)
    if fleet_plan is None:
        raise DynosimError("the scenario has no [autoscale] table")
    cases = [engine.for_policy(p) for p in engine.policies]
    plans = [make_plan(case) for case in cases]  # every refusal before anything starts
    for p in plans:
        if p.closed:
            raise scenario._error("arrivals.process", "the autoscaled fleet runs open-loop arrivals only")
        if fleet_plan.servers * p.dynos.workers > MAX_PROCESSES:
            raise scenario._error("autoscale.max", f"the testbed runs at most {MAX_PROCESSES} worker processes: "
                                                   f"2 x max = {fleet_plan.servers} dynos (up and draining) x "
                                                   f"{p.dynos.workers} workers")
    calibration_plans = calibration_runs(scenario) if calibrate else []
    check_tools(plans + [plan for _, plan in calibration_plans])
    calibration: Optional[Dict[str, Any]] = None
    if calibrate:
        calibration = run_calibration(calibration_plans, request_cpu=has_phases(scenario), progress=progress)
    results = []
    for case, plan in zip(cases, plans):
        policy = plan.described["policy"]
        progress(f"{policy}: the real autoscaled fleet")
        measured = run_autoscaled(plan, fleet_plan, progress=lambda m: progress(f"{policy}: {m}"))
        progress(f"{policy}: simulating")
        simulated = simulated_fleet(case.with_overrides(calibration["set"]) if calibration else case, plan.length)
        results.append({"policy": policy, "measured": measured, "simulated": simulated,
                        "comparison": compare(measured, simulated, fleet_plan.interval)})
    doc: Dict[str, Any] = {"results": results}
    if calibration:
        doc["calibration"] = calibration
    return doc
