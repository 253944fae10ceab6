"""From a scenario to what the testbed starts and sends, decided before anything starts: every
refusal (a policy HAProxy cannot do, a pool the testbed cannot build, more dynos or requests
than this machine can take) is one clear line here, and every way the machine falls short of
the scenario (cores) is a warning carried into the report.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import _dynosim
from ..errors import DynosimError, ScenarioError
from ..scenario import Scenario
from . import nginx
from .dynos import DynoPlan, plan_dynos
from . import services as services_
from .router import KEY_HEADER, SUPPORTED, RouterPlan, balance
from .services import CALLS_HEADER, ServicePlan, ServicesPlan

#: Bounds that keep a testbed run within what one machine can take.
MAX_DYNOS = 64
MAX_PROCESSES = 256
MAX_REQUESTS = 500_000
MAX_SECONDS = 3600.0


@dataclass
class Plan:
    scenario: Scenario
    described: Dict[str, Any]
    drawn: Dict[str, Any]
    dynos: DynoPlan
    router: RouterPlan
    #: Resource name → {"pool": size or None, "mode": "sleep" | "burn"}.
    resources: Dict[str, Dict[str, Any]]
    max_connections: int
    database_cpus: Optional[List[int]]
    #: Seconds of traffic: the open loop's last arrival bound; a closed loop's cap.
    length: float
    #: The hard stop of the whole load.
    deadline: float
    request_timeout: float
    warnings: List[str] = field(default_factory=list)
    #: The clients retry (``[arrivals.retry]``, more than one attempt): the load generator
    #: does, as replication `replication` of the simulation's clients.
    retries: bool = False
    replication: int = 0
    #: The clients share a circuit breaker (``[arrivals.breaker]``): the load generator asks
    #: the engine's own before each try (its openings in the load's ``breaker``).
    breaker: bool = False
    #: ``[[faults]]`` the testbed runs (slowdowns): {"at", "for", "factor", "target"}, seconds
    #: from the run's start; the app reads them (dynosim.testbed.app).
    faults: List[Dict[str, Any]] = field(default_factory=list)
    #: ``[[faults]]`` of kind ``dynos_lost``: {"at", "count"} (dynosim.testbed.fleet.Losses),
    #: each lost dyno up again after `boot_time` s (fleet.boot_time's mean).
    losses: List[Dict[str, Any]] = field(default_factory=list)
    boot_time: float = 0.0
    #: A scenario with ``[services]``: the services' fleets, the entry's calls and their
    #: drawn work (:mod:`.services`); None for one fleet.
    services: Optional[ServicesPlan] = None
    #: Per resource, the connections this fleet's processes may open at once.
    resource_users: Dict[str, int] = field(default_factory=dict)

    @property
    def closed(self) -> Optional[Dict[str, Any]]:
        if not self.drawn["closed"]:
            return None
        return {"clients": self.described["closed_clients"], "requests": self.described["closed_requests"]}

    def requests(self) -> List[tuple]:
        """(at, path, headers) for each drawn request, in order: what the load generator sends."""
        classes = self.drawn["classes"]
        out = []
        times = self.drawn["time"] or [0.0] * len(self.drawn["phases"])
        # Each request's key (arrivals.keys: the engine's "key" column), for a router that
        # hashes it, in its own header.
        keys = self.drawn.get("key") or []
        for i, (at, c, phases) in enumerate(zip(times, self.drawn["class"], self.drawn["phases"])):
            outline = classes[c]
            tokens = [_phase(p, x) for p, x in zip(outline["phases"], phases)]
            headers = {"X-Dynosim-Id": str(i)}
            if self.services is not None:
                # The entry's calls in their phases' places, their drawn work beside.
                widths = self.services.counts[i] if self.services.counts else {}
                for k, call in self.services.calls.items():
                    tokens[k] = call.token(widths.get(k))
                headers[CALLS_HEADER] = "|".join(self.services.work_of[i])
            headers["X-Dynosim-Phases"] = ",".join(tokens)
            if keys:
                headers[KEY_HEADER] = str(keys[i])
            out.append((at, f"/{outline['name']}", headers))
        return out


def _seconds(value: Any) -> Optional[float]:
    """A scenario's duration, a string ("300ms") or a number of seconds; None for anything
    else (a distribution's table, "off")."""
    if isinstance(value, str):
        return _dynosim.parse_duration(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _timeouts(scenario: Scenario, warnings: List[str]) -> tuple:
    """HAProxy's ``timeout server`` and ``timeout queue`` (router.timeout, 30 s when left out,
    and router.queue_timeout), gunicorn's ``--timeout`` (app.timeout, whole seconds) and the load
    generator's (arrivals.timeout): each a fixed time on the real stack, so a distribution is
    refused (but app.timeout's uniform(N s, N + 1 s), which is what ``--timeout N`` does); what
    the testbed does not run (a cap, routers with a cost) is refused in one line."""
    router = scenario.doc.get("router") or {}
    app = scenario.doc.get("app") or {}
    arrivals = scenario.doc.get("arrivals") or {}

    def fixed(value: Any, path: str, default: Optional[float]) -> Optional[float]:
        if value is None:
            return default
        if value == "off" or value is False:
            return None
        seconds = _seconds(value)
        if seconds is None:
            raise scenario._error(path, "the testbed's HAProxy and gunicorn take one fixed time: give a duration, "
                                        "not a distribution")
        return seconds

    server = fixed(router.get("timeout"), "router.timeout", 30.0)
    queue = fixed(router.get("queue_timeout"), "router.queue_timeout", None)
    whole = 0
    checked = _checked_each_second(app.get("timeout"))
    if checked is not None:
        whole = checked
    else:
        worker = fixed(app.get("timeout"), "app.timeout", None)
        if worker is not None:
            whole = max(1, int(math.ceil(worker)))
            if whole != worker:
                warnings.append(f"gunicorn's --timeout takes whole seconds: app.timeout = {worker:g} s runs as {whole} s")
            warnings.append(f"gunicorn's master checks its workers about once a second: --timeout {whole} kills a "
                            f"worker {whole} to {whole + 1} s into its request; the simulation's at {worker:g} s "
                            f'(app.timeout = {{ distribution = "uniform", min = "{whole}s", max = "{whole + 1}s" }} '
                            "models the real one)")
    client = fixed(arrivals.get("timeout"), "arrivals.timeout", None)
    for key in ("max_in_flight", "cost", "shed_latency"):
        if router.get(key) not in (None, "off"):
            raise scenario._error(f"router.{key}", "the testbed's HAProxy does not run this yet")
    # The feedback loops (docs/feedback.md) are the simulation's today: a real run without them
    # would be compared with a simulated one with them.
    if router.get("retry_budget") is not None:
        raise scenario._error("router.retry_budget", "HAProxy has no retry budget (Envoy's): the testbed does not "
                                                     "run it")
    view = router.get("view")
    if isinstance(view, dict) and view.get("update", "exact") != "exact":
        raise scenario._error("router.view", "the testbed's HAProxy reads exact loads; it does not run a late view yet")
    return server, queue, whole, client


#: The shortest ``timeout connect`` the testbed gives HAProxy to find a full backlog: a
#: connection on loopback takes well under a millisecond, but a busy machine may delay it.
MIN_CONNECT_TIMEOUT = 0.01


def _backlog(scenario: Scenario, dynos: DynoPlan, router: RouterPlan, warnings: List[str]) -> None:
    """app.backlog K: gunicorn's ``--backlog K − 1`` (Linux's accept queue holds one more than
    listen's backlog), and HAProxy finding a full one by its connect timeout
    (router.retry_delay) and retrying another dyno (router.retries): see RouterPlan."""
    app = scenario.doc.get("app") or {}
    if app.get("backlog") is None:
        return
    k = int(app["backlog"])
    dynos.backlog = k - 1
    router_doc = scenario.doc.get("router") or {}
    delay = _seconds(router_doc.get("retry_delay", 0.0)) or 0.0
    if delay < MIN_CONNECT_TIMEOUT:
        warnings.append(f"HAProxy finds a full backlog by its connect timeout: router.retry_delay = {delay:g} s runs "
                        f"as {MIN_CONNECT_TIMEOUT * 1000:.0f} ms")
        delay = MIN_CONNECT_TIMEOUT
    router.connect_timeout = delay
    router.retries = int(router_doc.get("retries", 10))
    # Puma's processes accept only while they have a free thread, as sync workers do.
    if dynos.worker_class not in ("sync", "unicorn", "puma"):
        warnings.append(f"app.backlog: {dynos.worker_class} workers accept connections as they come and queue them "
                        "inside the process, so the listen backlog rarely fills as the simulation's does")


def _retry_on(scenario: Scenario, router: RouterPlan, dynos: int, warnings: List[str]) -> None:
    """router.retry_on beyond refused connections: HAProxy's ``retry-on`` or nginx's
    ``proxy_next_upstream`` (:data:`.router.HAPROXY_RETRY_ON`, :data:`.nginx.NEXT_UPSTREAM`),
    each retry on another dyno, at most router.retries (10) of them."""
    doc = scenario.doc.get("router") or {}
    retry_on = doc.get("retry_on")
    if retry_on is None:
        return
    outcomes = [retry_on] if isinstance(retry_on, str) else list(retry_on)
    if set(outcomes) <= {"refused"}:
        return  # refused connections: as with app.backlog (_backlog), or nothing to retry
    router.retry_on = outcomes
    router.retries = int(doc.get("retries", 10))
    if router.kind == "nginx" and router.retries + 1 > dynos:
        warnings.append(f"nginx tries each dyno at most once a request: at most {dynos} tries of a request "
                        f"where the simulation's router may make {router.retries + 1} (router.retries + 1), "
                        "never the same dyno twice in a row")


def _fixed_limit(scenario: Scenario, path: str) -> Optional[int]:
    """A concurrency limit's `limit` when `path` (``router.concurrency_limit`` or
    ``app.concurrency_limit``) is a fixed one (the engine checked its keys); None when it is
    left out. An adaptive algorithm is refused in one line: HAProxy and nginx have no adaptive
    limiter (Envoy's adaptive_concurrency filter, or Netflix's library in the app, would be
    one), and the testbed runs neither."""
    head, key = path.split(".")
    table = (scenario.doc.get(head) or {}).get(key)
    if table is None:
        return None
    algorithm = table.get("algorithm") if isinstance(table, dict) else None
    if algorithm != "fixed":
        raise scenario._error(f"{path}.algorithm", f"the testbed runs a fixed limit only, not {algorithm!r}: HAProxy "
                                                   "and nginx have no adaptive limiter (Envoy's adaptive_concurrency "
                                                   "filter or Netflix's concurrency-limits in the app would be one)")
    return int(table["limit"])


def _limits(scenario: Scenario, router: RouterPlan, warnings: List[str]) -> None:
    """The fixed concurrency limits (docs/testbed.md): router.concurrency_limit as HAProxy's
    ``http-request return status 503`` while the backend holds `limit` requests (``be_conn``:
    queued or at a dyno), or nginx's ``limit_conn``; app.concurrency_limit as a limiter in
    front of each dyno's app server, a frontend of HAProxy's own per dyno answering 503 while
    it has `limit` requests at its app server (:class:`.router.RouterPlan`)."""
    router.router_limit = _fixed_limit(scenario, "router.concurrency_limit")
    router.app_limit = _fixed_limit(scenario, "app.concurrency_limit")
    if router.app_limit is None:
        return
    if router.kind == "nginx":
        raise scenario._error("app.concurrency_limit", "the testbed puts each dyno's limiter in HAProxy: run it with "
                                                       "HAProxy (leave router.kind out)")
    if (scenario.doc.get("app") or {}).get("backlog") is not None:
        raise scenario._error("app.concurrency_limit", "the testbed's dyno limiter stands in front of the app "
                                                       "server's accept queue, which app.backlog bounds: set one or "
                                                       "the other")
    if "5xx" in router.retry_on:
        warnings.append("app.concurrency_limit with router.retry_on = \"5xx\": HAProxy retries a dyno's refusal on "
                        "another dyno out of the load generator's sight, so limit.rejected counts the refusals the "
                        "clients got, not those retried (retries.router counts the retries)")
    if scenario.doc.get("router", {}).get("timeout") not in (None, "off") or \
            (scenario.doc.get("arrivals") or {}).get("timeout") is not None:
        warnings.append("app.concurrency_limit: the testbed's dyno limiter lets a request go when the router or "
                        "the client gives up on it, where the simulation's counts it until the app answers")


def _checked_each_second(value: Any) -> Optional[int]:
    """N when `value` is app.timeout = uniform(N s, N + 1 s) for a whole N >= 1: what gunicorn's
    ``--timeout N`` does, its master checking the workers about once a second (a worker whose
    request began at t is killed at the first check after t + N). None for anything else."""
    if not isinstance(value, dict) or value.get("distribution") != "uniform":
        return None
    low, high = _seconds(value.get("min")), _seconds(value.get("max"))
    if low is None or high is None:
        return None
    whole = int(round(low))
    return whole if whole >= 1 and abs(low - whole) < 1e-9 and abs(high - low - 1.0) < 1e-9 else None


def _nginx_policy(scenario: Scenario, policy: str, params: Dict[str, Any], warnings: List[str]) -> None:
    """Refuses, in one line naming the key, a policy nginx cannot run (:mod:`.nginx`), and
    warns where the simulation would not draw as nginx does."""
    if policy not in nginx.SUPPORTED:
        raise scenario._error("router.policy", f"{policy!r} has no nginx equivalent; with router.kind = \"nginx\" "
                                               f"the testbed runs {', '.join(nginx.SUPPORTED)} (d = 2)")
    if policy == "power_of_d":
        if params.get("d", 2) != 2:
            raise scenario._error("router.d", f"nginx's random two least_conn compares two dynos, not "
                                              f"{params.get('d')!r}: set router.d = 2")
        if not params.get("distinct", True):
            warnings.append("nginx's random two draws two distinct dynos; router.distinct = false simulates draws "
                            "that may repeat a dyno: leave it out (true) to simulate what nginx does")


def _phase(outline: Dict[str, Any], seconds: float) -> str:
    kind = outline["kind"]
    head = f"use={outline['resource']}" if kind == "use" else kind
    return f"{head}:{seconds:.6f}"


def make_plan(scenario: Scenario, *, replication: int = 0) -> Plan:
    """The plan for one policy's run of `scenario` (a single-policy scenario): its warm-up and
    duration of real traffic, with the requests replication `replication` draws."""
    if scenario.doc.get("services"):
        return _with_services(scenario, replication)
    described = scenario.describe()
    scenario.check_runnable(described)
    policy = described["policy"]
    router = scenario.doc.get("router") or {}
    params = {k: v for k, v in router.items() if k not in ("policy", "routers")}
    warnings: List[str] = []
    kind = router.get("kind", "haproxy")  # the engine checked it, and zone and workers
    if kind == "nginx":
        _nginx_policy(scenario, policy, params, warnings)
    else:
        if policy not in SUPPORTED:
            raise scenario._error("router.policy", f"{policy!r} has no HAProxy equivalent; the testbed runs "
                                                   f"{', '.join(SUPPORTED)}")
        if described["routers"] != 1:
            raise scenario._error("router.routers", "the testbed runs one HAProxy: set router.routers = 1 (or "
                                                    'router.kind = "nginx": one worker process per router)')
        balance(policy, params)  # refuses what HAProxy cannot do
        if policy == "bounded_hash" and params.get("ring", "dynosim") != "haproxy":
            warnings.append("HAProxy places the users on its own hash ring, not dynosim's: set router.ring = "
                            "\"haproxy\" to simulate the placement HAProxy gives them")
        if policy == "power_of_d" and params.get("distinct", True):
            warnings.append("HAProxy's random(d) makes d independent draws, which may repeat a dyno; the "
                            "simulation draws d distinct dynos: set router.distinct = false to simulate what "
                            "HAProxy does")
    warmup = float(described["warmup"])
    length = warmup + float(described["duration"])
    closed = described["closed_loop"]
    # A closed loop without a request count runs for the run's length, as the simulation does.
    timed = not closed or described["closed_requests"] is None
    if timed and length > MAX_SECONDS:
        raise scenario._error("run.duration", f"the testbed runs at most {MAX_SECONDS:.0f} s of real traffic; "
                                              f"this scenario asks {length:.0f} s (use --duration)")
    limit = MAX_REQUESTS
    if closed and timed:
        # Enough requests for every client never to run short: each takes at least the
        # request's own time (with no think time, nothing else).
        fastest = max(float(described["service_mean"]) / 4, 1e-3)
        limit = min(MAX_REQUESTS, int(described["closed_clients"] * length / fastest) + 1000)
    drawn = json.loads(scenario._call(_dynosim.draw_requests, replication, length if not closed else math.inf,
                                      limit))
    if drawn["truncated"]:
        raise DynosimError(f"the testbed sends at most {MAX_REQUESTS} requests; this scenario draws more "
                           f"(use --duration, or a lower rate)")
    if not drawn["phases"]:
        raise DynosimError("the scenario draws no request within the run; use a longer --duration")
    if policy == "bounded_hash" and len(drawn.get("key") or []) != len(drawn["phases"]):
        # The engine refuses bounded_hash without arrivals.keys: not a user's mistake.
        raise DynosimError(f"internal: bounded_hash, but the engine drew no key for each request ({KEY_HEADER})")
    server_timeout, queue_timeout, worker_timeout, client_timeout = _timeouts(scenario, warnings)
    dynos = int(described["dynos"])
    if dynos > MAX_DYNOS:
        raise scenario._error("fleet.dynos", f"the testbed runs at most {MAX_DYNOS} dynos on one machine; got {dynos}")
    has_phases = bool(scenario.doc.get("request"))
    kinds = {p["kind"] for c in drawn["classes"] for p in c["phases"]}
    machine_cpus = sorted(os.sched_getaffinity(0))
    dyno_plan = plan_dynos(described, has_phases, "cpu" in kinds, machine_cpus, warnings)
    app_doc = scenario.doc.get("app") or {}
    if app_doc.get("memory") or app_doc.get("swap_slowdown"):
        warnings.append("the testbed does not run the memory model (app.memory, the quota, swap_slowdown): "
                        "the real processes hold what they hold, and nothing swaps")
    if dyno_plan.server != "gunicorn" and worker_timeout:
        # _timeouts' warnings are gunicorn's; the Ruby servers do otherwise.
        warnings[:] = [w for w in warnings if not w.startswith("gunicorn's")]
        if dyno_plan.server == "puma":
            warnings.append("Puma has no request timeout: app.timeout is not run (Rack::Timeout would)")
            worker_timeout = 0
        else:
            if worker_timeout < 3:
                warnings.append(f"Unicorn's timeout is at least 3 s: app.timeout runs as 3 s")
            warnings.append("Unicorn's master checks its workers in whole seconds: its timeout kills a worker "
                            "up to 2 s after the simulation's")
    if dynos * dyno_plan.workers > MAX_PROCESSES:
        raise scenario._error("app.processes", f"the testbed runs at most {MAX_PROCESSES} worker processes; "
                                               f"{dynos} dynos x {dyno_plan.workers} = {dynos * dyno_plan.workers}")
    per_process = int(described["app"]["per_process"]) if has_phases else 1
    resources: Dict[str, Dict[str, Any]] = {}
    resource_users: Dict[str, int] = {}
    max_connections = 0
    database_cpus: Optional[List[int]] = None
    for r in described["resources"]:
        pool = r["pool"]
        if pool is not None and pool["per"] != "process":
            raise scenario._error(f"resources.{r['name']}.pool.per",
                                  f"the testbed builds pools per process only (a pool per {pool['per']} needs a "
                                  "connection pooler such as pgbouncer, not there yet)")
        size = pool["size"] if pool else None
        per_process_users = min(per_process, size) if size else per_process
        users = dynos * dyno_plan.workers * per_process_users
        max_connections += users
        resource_users[r["name"]] = users
        if r["servers"] >= users:
            mode = "sleep"
        else:
            mode = "burn"
            cpus = min(int(r["servers"]), len(machine_cpus))
            if r["servers"] > len(machine_cpus):
                warnings.append(f"cannot honour resources.{r['name']}.servers = {r['servers']}: the database runs on "
                                f"this machine's {len(machine_cpus)} cores")
            if r["discipline"] == "fcfs":
                warnings.append(f"resources.{r['name']} is fcfs, but a real database shares its cores among its "
                                "queries (processor sharing)")
            database_cpus = machine_cpus[-cpus:]
        resources[r["name"]] = {"pool": size, "mode": mode, **_guards(scenario, r["name"], warnings)}
    dyno_plan.resources = resources
    dyno_plan.worker_timeout = worker_timeout
    mean_response = float(described["service_mean"]) or 0.001
    if closed and not timed:
        n = len(drawn["phases"])
        clients = int(described["closed_clients"])
        # A closed loop runs until its requests are done: bounded by a generous multiple of
        # the time they would take one after another on `clients` clients.
        length = min(MAX_SECONDS, 60.0 + 10.0 * n * mean_response / max(1, clients))
    # A timed closed loop stops at its end (requests still in flight end as "deadline" and
    # are not counted, as the simulation counts only what arrived in its window).
    deadline = length if closed and timed else length + 60.0 + 10.0 * mean_response
    attempts, cap = _retries(scenario)
    if attempts > 1 and not (closed and timed):
        # A request's last retry may start this long after its first try ended.
        longest = client_timeout if client_timeout is not None else (server_timeout or 30.0)
        deadline = min(MAX_SECONDS, deadline + (attempts - 1) * (longest + cap))
    router_plan = RouterPlan(policy, params, int(described["slots"]), timeout=deadline,
                             server_timeout=server_timeout, queue_timeout=queue_timeout,
                             abort_on_close=client_timeout is not None)
    if kind == "nginx":
        router_plan.kind = "nginx"
        router_plan.zone = bool(router.get("zone", False))
        router_plan.workers = int(router.get("workers") or described["routers"])
        if (scenario.doc.get("app") or {}).get("backlog") is not None:
            raise scenario._error("app.backlog", "the testbed's nginx answers a full backlog (its connect timeout) "
                                                 "with a 504, which is H12's status: run it with HAProxy "
                                                 '(router.kind = "haproxy")')
    _backlog(scenario, dyno_plan, router_plan, warnings)
    _retry_on(scenario, router_plan, dynos, warnings)
    _limits(scenario, router_plan, warnings)
    faults, losses = _faults(scenario)
    dyno_plan.faults = bool(faults)
    boot_time = float(described["fleet"]["boot_time"])
    if losses:
        if kind != "haproxy":
            raise scenario._error("router.kind", "the testbed takes a lost dyno out of the router and back through "
                                                 "HAProxy's runtime API: run dynos_lost faults with HAProxy "
                                                 "(leave router.kind out)")
        if isinstance((scenario.doc.get("fleet") or {}).get("boot_time"), dict):
            warnings.append(f"fleet.boot_time is a distribution: every lost dyno boots again in its mean, "
                            f"{boot_time:g} s")
    wait = app_doc.get("wait_timeout")
    if wait is not None and wait != "off":
        seconds = _seconds(wait)
        if seconds is None:
            raise scenario._error("app.wait_timeout", "the testbed's app takes one fixed time: give a duration, "
                                                      "not a distribution")
        # gunicorn: the testbed's app does as Rack::Timeout; Puma and Unicorn: Rack::Timeout.
        dyno_plan.wait_timeout = seconds
    stop = app_doc.get("service_timeout")
    if stop is not None and stop != "off":
        # The engine checked it: a fixed duration above 0. Puma and Unicorn: Rack::Timeout's.
        dyno_plan.service_timeout = _seconds(stop)
        if resources and dyno_plan.server == "gunicorn":
            warnings.append("app.service_timeout: the testbed's app lets a query in flight end before it stops "
                            "the request, where the simulation frees the worker at once")
    return Plan(scenario=scenario, described=described, drawn=drawn, dynos=dyno_plan,
                router=router_plan,
                resources=resources, max_connections=max_connections + 10, database_cpus=database_cpus,
                resource_users=resource_users,
                length=length, deadline=deadline,
                request_timeout=deadline if client_timeout is None else min(deadline, client_timeout),
                warnings=warnings, retries=attempts > 1, replication=replication, faults=faults, losses=losses,
                boot_time=boot_time, breaker=(scenario.doc.get("arrivals") or {}).get("breaker") is not None)


def _with_services(scenario: Scenario, replication: int) -> Plan:
    """The plan of a scenario with ``[services]`` (:mod:`.services`): the entry's own (its calls
    waits of no time for the engine's draws), each service's as a fleet of its own at the rate
    of calls it gets, and each entry request's calls' drawn work."""
    described = scenario.describe()  # the engine's own checks of every table
    entry, calls = services_.entry_scenario(scenario)
    plan = make_plan(entry, replication=replication)
    requests = len(plan.drawn["phases"])
    seed = int(plan.described["seed"])
    widths = services_.draw_counts(calls, requests, seed, replication)
    counts = services_.needed(calls, requests, widths)
    rates = {s["name"]: float(s["rate"]) for s in described.get("services") or []}
    fleets: List[ServicePlan] = []
    work: Dict[str, List[str]] = {}
    # A service's own calls (a service that calls services): by service, its calls and each of
    # its drawn requests' widths. Callers first, so that each service's count of requests is
    # whole before it is drawn.
    tier_calls: Dict[str, Dict[int, services_.Call]] = {}
    tier_widths: Dict[str, List[Dict[int, int]]] = {}
    order = services_.call_order(scenario)
    for name in order:
        sub = services_.service_scenario(scenario, name, rates.get(name, 0.0), services_.service_seed(seed, name))
        try:
            sub_plan = make_plan(sub, replication=replication)
        except ScenarioError as e:
            raise ScenarioError(e.message, file=e.file, path=f"services.{name}.{e.path}") from None
        drawn = json.loads(sub._call(_dynosim.draw_requests, replication, math.inf, max(1, counts.get(name, 0))))
        outlines = drawn["classes"]
        tier_calls[name] = services_.calls_of(scenario, name)
        tier_widths[name] = services_.draw_counts(tier_calls[name], len(drawn["phases"]),
                                                  services_.service_seed(seed, name), replication)
        work[name] = []
        for r, (c, phases) in enumerate(zip(drawn["class"], drawn["phases"])):
            tokens = [_phase(p, x) for p, x in zip(outlines[c]["phases"], phases)]
            for k, call in tier_calls[name].items():
                tokens[k] = call.token(tier_widths[name][r].get(k))
            work[name].append(",".join(tokens))
        if len(work[name]) < counts.get(name, 0):
            raise DynosimError(f"internal: service {name} drew {len(work[name])} requests, {counts[name]} needed")
        services_.needed(tier_calls[name], counts.get(name, 0), tier_widths[name], into=counts)
        # The service's HAProxy holds a call as long as the whole run may last.
        sub_plan.router.timeout = max(sub_plan.router.timeout, plan.deadline)
        # A caller that stops waiting (its call's timeout) closes its connection: HAProxy then
        # ends the try (termination state C.), so its log tells the tries timed out.
        sub_plan.router.abort_on_close = True
        sub_plan.dynos.call_timeout = plan.request_timeout
        sub_plan.dynos.warm_pools = bool(sub_plan.resources)
        plan.warnings += [f"services.{name}: {w}" for w in sub_plan.warnings]
        fleets.append(ServicePlan(name, sub_plan, work[name]))
    # Each service's drawn requests that call in turn carry their calls' works (callees first,
    # so that theirs carry their own), each service's works dealt to its callers in turn.
    taken: Dict[str, int] = {}
    for name in reversed(order):
        if tier_calls[name]:
            n = counts.get(name, 0)
            dealt = services_.deal_work(tier_calls[name], n, work, tier_widths[name], taken)
            work[name][:n] = [services_.with_subcalls(w, d) for w, d in zip(work[name][:n], dealt)]
    # A database the fleets share (docs/services.md): one PostgreSQL, whose connections each
    # sleep their queries' time (a server per connection); the simulation's servers are shared
    # across the fleets, so the real database stands for them only where they are enough.
    servers = {r["name"]: r["servers"] for r in described.get("resources") or []}
    for name in servers:
        users = plan.resource_users.get(name, 0) + sum(f.plan.resource_users.get(name, 0) for f in fleets
                                                       if f.plan.resources)
        if any(f.plan.resources for f in fleets) and users > servers[name]:
            raise scenario._error(f"resources.{name}.servers", f"the testbed runs a database its services share "
                                                               f"with a server per connection only: the fleets open "
                                                               f"up to {users}, give servers >= {users}")
    plan.warnings.append("the services' requests are drawn by the engine from each service's tables, with a seed "
                         "of their own, and dealt to the entry's calls in order: the simulation draws its calls' "
                         "work from streams of its own, so the two sides' calls are different draws of the same "
                         "law")
    plan.services = ServicesPlan(scenario, calls, fleets, services_.deal_work(calls, requests, work, widths, taken),
                                 widths)
    plan.dynos.call_timeout = plan.request_timeout
    return plan


def _faults(scenario: Scenario) -> tuple:
    """``[[faults]]`` as the testbed runs them (the engine checked their keys and times): the
    app's (dynosim.testbed.app and app.ru), slowdowns and outages of the app's work or of a resource's
    queries, each {"at", "for", "kind": "slowdown" | "refuse" | "hang", "factor", "target"};
    and the lost dynos (dynosim.testbed.fleet.Losses), each {"at", "count"}."""
    out: List[Dict[str, Any]] = []
    losses: List[Dict[str, Any]] = []
    for k, fault in enumerate(scenario.doc.get("faults") or []):
        kind = fault.get("kind")
        if kind == "dynos_lost":
            losses.append({"at": _seconds(fault["at"]), "count": int(fault["count"])})
            continue
        if kind == "outage":
            kind = "hang" if fault.get("mode") == "hang" else "refuse"
        out.append({"at": _seconds(fault["at"]), "for": _seconds(fault["for"]), "kind": kind,
                    "factor": float(fault.get("factor", 1.0)), "target": str(fault.get("target", "app"))})
    return out, losses


def _guards(scenario: Scenario, name: str, warnings: List[str]) -> Dict[str, Any]:
    """``[resources.NAME] timeout`` and ``retries`` as the app runs them (dynosim.testbed.app):
    PostgreSQL's statement_timeout on the app's connections, s (None: off), and the app's
    retries of a cancelled or refused query. Each retry runs the request's drawn query time
    again, where the simulation draws each retry's afresh: the same for a constant time."""
    table = (scenario.doc.get("resources") or {}).get(name) or {}
    timeout = table.get("timeout", "off")
    seconds = None if timeout in ("off", None) else _seconds(timeout)
    if timeout not in ("off", None) and seconds is None:
        raise scenario._error(f"resources.{name}.timeout", "PostgreSQL's statement_timeout is one fixed time: give "
                                                           "a duration")
    retries = int(table.get("retries", 0))
    if retries:
        request = scenario.doc.get("request") or {}
        phases = list(request.get("phases") or []) + [p for c in request.get("class") or [] for p in c.get("phases") or []]
        if any(p.get("use") == name and _seconds(p.get("time")) is None for p in phases if isinstance(p, dict)):
            warnings.append(f"resources.{name}.retries: the testbed's app runs each retry of a query with the "
                            "request's drawn time; the simulation draws each retry's afresh (the same for a constant "
                            "time)")
    return {"timeout": seconds, "retries": retries}


def _retries(scenario: Scenario) -> tuple:
    """``[arrivals.retry]``'s tries in all (1: none) and its backoff's cap in seconds (the
    engine checked both; their defaults are the engine's)."""
    retry = (scenario.doc.get("arrivals") or {}).get("retry")
    if not isinstance(retry, dict):
        return 1, 0.0
    cap = _seconds(retry.get("cap", "20s"))
    return int(retry.get("attempts", 3)), (20.0 if cap is None else cap)
