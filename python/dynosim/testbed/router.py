"""The testbed's router: a real HAProxy in front of the dynos, with the routing policy mapped
to the nearest thing HAProxy does (docs/testbed.md says where they differ):

=====================  ===========================================================
dynosim policy         HAProxy backend
=====================  ===========================================================
``random``             ``balance random(1)``
``power_of_d`` (d)     ``balance random(d)`` (independent draws: ``distinct = false``)
``round_robin``        ``balance roundrobin``
``least_connections``  ``balance leastconn``
``intelligent``        ``balance leastconn``, ``maxconn`` = the dyno's slots on each
                       server, and the backend's queue (``timeout queue`` set)
=====================  ===========================================================

Every server has ``weight 256``: HAProxy's random draws pick a point on a consistent-hash
ring that holds each server ``weight`` times, and with the default weight of 1 the four
servers of the issue's first measurement got 28/28/25/18% of the requests instead of 25%
each; 256 points each bring the shares within a percent or so.

``router.kind = "nginx"`` runs nginx instead (:mod:`.nginx`: its policies, its worker
processes as several routers, its log); :class:`RouterPlan` and :class:`Router` serve both.

HAProxy's ``balance first`` (``first``: ``maxconn`` = the dyno's slots on each server, the
backend's queue) and consistent hashing on each request's key with bounded loads
(``bounded_hash``: ``balance hdr(X-Dynosim-Key)``, ``hash-type consistent``,
``hash-balance-factor`` = 100 × router.factor, 125 when left out as the engine's default;
none for ``"inf"``; servers of weight 1) run too. The load generator sends each request's key
(the engine's drawn ``key`` column, ``arrivals.keys``) in ``X-Dynosim-Key``. HAProxy's ring
is the engine's ``router.ring = "haproxy"`` (:mod:`.plan` warns under the engine's own ring,
whose placement of the users differs).

HAProxy logs one line per request to its standard output (a file): the request's id (the
load generator's ``X-Dynosim-Id``), then Tw (ms waiting in HAProxy's queue), Tc (ms to
connect to the dyno), Tr (ms until the dyno's response headers), Ta (ms in all), the status,
the server, the backend and server queue lengths, the termination state and the retries
(``%rc``; docs/testbed.md). It also adds
``X-Request-Start: t=<microseconds>`` to each request, as Heroku's router does, for the app to
measure request queueing the way Judoscale and New Relic do.
"""

from __future__ import annotations

import math
import resource
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from ..errors import DynosimError
from . import nginx
from .measure import log_by_id
from .procs import Supervisor, free_ports
from .tools import INSTALL_DEBIAN, haproxy
from .tools import nginx as nginx_tool

#: The backend holding the dynos, and each dyno's server (the runtime API names them).
BACKEND = "dynos"


def server_name(dyno: int) -> str:
    return f"dyno{dyno}"


SUPPORTED = ("random", "power_of_d", "round_robin", "least_connections", "intelligent", "first", "bounded_hash")
#: bounded_hash's router.factor when left out: the engine's (1.25, HAProxy's manual's low end).
DEFAULT_FACTOR = 1.25
#: The request header that carries a request's key, for ``bounded_hash``.
KEY_HEADER = "X-Dynosim-Key"
#: The response header of a request a concurrency limit refused: ``router`` or ``app``.
LIMIT_HEADER = "X-Dynosim-Limit"
#: Policies whose servers have ``maxconn`` = the dyno's slots, with the backend's queue.
HOLDING = ("intelligent", "first")
WEIGHT = 256
LOG_FIELDS = ("id", "tw", "tc", "tr", "ta", "status", "server", "backend_queue", "server_queue", "term", "retries")


#: router.retry_on's outcomes as HAProxy's ``retry-on`` keywords: its server timeout; the
#: dyno's 5xx answers and a connection it closed without one; a failed connection.
HAPROXY_RETRY_ON = {"refused": "conn-failure", "timeout": "response-timeout",
                    "5xx": "500 502 503 504 empty-response junk-response"}


def balance(policy: str, params: Dict[str, Any]) -> str:
    """The ``balance`` line for a policy; a clear error for one HAProxy cannot do."""
    if policy == "random":
        return "balance random(1)"
    if policy == "power_of_d":
        return f"balance random({int(params.get('d', 2))})"
    if policy == "round_robin":
        return "balance roundrobin"
    if policy in ("least_connections", "intelligent"):
        return "balance leastconn"
    if policy == "first":
        return "balance first"
    if policy == "bounded_hash":
        return f"balance hdr({KEY_HEADER})\n    hash-type consistent" + hash_balance_factor(params)
    raise DynosimError(f"router.policy = {policy!r} has no HAProxy equivalent; the testbed runs "
                       f"{', '.join(SUPPORTED)}")


def hash_balance_factor(params: Dict[str, Any]) -> str:
    """``hash-balance-factor`` for bounded_hash's router.factor: HAProxy takes it in percent
    (at least 100); the engine's default (1.25) for a factor left out; no line (plain
    consistent hashing) for an infinite one."""
    factor = params.get("factor", DEFAULT_FACTOR)
    if factor in ("off", "inf"):
        return ""
    if isinstance(factor, (int, float)) and not math.isfinite(factor):
        return ""
    percent = int(math.ceil(float(factor) * 100 - 1e-9))
    if percent < 100:
        raise DynosimError(f"router.factor = {factor!r}: HAProxy's hash-balance-factor is at least 100 (a factor of 1)")
    return f"\n    hash-balance-factor {percent}"


@dataclass
class RouterPlan:
    policy: str
    params: Dict[str, Any]
    slots: int
    timeout: float  # s: HAProxy's client, server and queue timeouts (the run's own bound)
    #: The scenario's router.timeout (HAProxy's ``timeout server``: H12) and
    #: router.queue_timeout (``timeout queue``), s; None: the run's bound.
    server_timeout: Optional[float] = None
    queue_timeout: Optional[float] = None
    #: HAProxy's ``option abortonclose``: a request whose client gave up (arrivals.timeout)
    #: leaves HAProxy's queue, as the simulation's router drops it.
    abort_on_close: bool = False
    #: With app.backlog: how a full backlog's refusal is found and retried. Linux drops the
    #: SYN of a connection to a full accept queue (the client would send it again a second
    #: later), so HAProxy gives up connecting after ``timeout connect`` (router.retry_delay)
    #: and tries another dyno at once (``retries``, ``option redispatch 1``): the
    #: simulation's refusal, then its retry after router.retry_delay. After the last, a 503
    #: with termination state ``sC`` (errors.h13). None: HAProxy's defaults, 5 s.
    connect_timeout: Optional[float] = None
    retries: int = 3
    #: router.retry_on beyond refused connections, its outcomes ("timeout", "5xx", "refused"):
    #: HAProxy's ``retry-on`` (:data:`HAPROXY_RETRY_ON`, with ``retries`` and ``option
    #: redispatch 1``), nginx's ``proxy_next_upstream``; empty: connection failures only.
    retry_on: List[str] = field(default_factory=list)

    #: The runtime API's socket (``stats socket ... level admin``), for a fleet changed while
    #: the run goes on (dynosim.testbed.fleet); None: none.
    runtime_socket: Optional[Path] = None
    #: Servers declared in maintenance (``disabled``): dynos not running at the start.
    disabled: FrozenSet[int] = frozenset()

    #: The real router (router.kind): "haproxy" or "nginx"; for nginx its worker processes
    #: (router.workers) and whether they share a zone (router.zone).
    kind: str = "haproxy"
    workers: int = 1
    zone: bool = False

    #: router.concurrency_limit's fixed limit: requests in flight at the router (HAProxy:
    #: held by the backend, queued or at a dyno; nginx: being processed) beyond it are answered
    #: 503 at once, marked ``X-Dynosim-Limit: router``. None: no limit.
    router_limit: Optional[int] = None
    #: app.concurrency_limit's fixed limit, per dyno: HAProxy forwards each dyno's requests
    #: through a frontend of its own in front of the dyno's app server (:func:`limiter_config`),
    #: which answers 503 (``X-Dynosim-Limit: app``) while it has this many at the app server.
    app_limit: Optional[int] = None

    def config(self, port: int, dyno_ports: List[int], limiter_ports: Optional[List[int]] = None) -> str:
        """The router's configuration. With app.concurrency_limit, `limiter_ports` are the
        dynos' limiters' (one each, in HAProxy: the backend's servers), `dyno_ports` their app
        servers'."""
        if self.kind == "nginx":
            return nginx.config(self, port, dyno_ports)
        app_ports = dyno_ports
        if self.app_limit is not None:
            if limiter_ports is None or len(limiter_ports) != len(dyno_ports):
                raise DynosimError("internal: app.concurrency_limit, but no port for each dyno's limiter")
            dyno_ports = limiter_ports
        limit = f" maxconn {self.slots}" if self.policy in HOLDING else ""
        # bounded_hash: HAProxy's default weight, 1 (16 points a server), which the engine's
        # router.ring = "haproxy" places as HAProxy does.
        weight = 1 if self.policy == "bounded_hash" else WEIGHT
        servers = "\n".join(f"    server {server_name(d)} 127.0.0.1:{p} weight {weight}{limit}"
                            + (" disabled" if d in self.disabled else "")
                            for d, p in enumerate(dyno_ports))
        stats = ""
        if self.runtime_socket is not None:
            stats = f"\n    stats socket {self.runtime_socket} mode 600 level admin"
        ms = int(self.timeout * 1000)
        server_ms = int(round(1000 * min(self.server_timeout or self.timeout, self.timeout)))
        queue_ms = int(round(1000 * min(self.queue_timeout or self.timeout, self.timeout)))
        # Two descriptors a connection (client and server side), within what the system allows.
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        maxconn = min(100_000, max(256, ((hard if hard != resource.RLIM_INFINITY else 1 << 20) - 200) // 2))
        abort = "\n    option abortonclose" if self.abort_on_close else ""
        connect, retries = "5s", ""
        if self.connect_timeout is not None:
            connect = f"{max(1, int(round(self.connect_timeout * 1000)))}ms"
        if self.connect_timeout is not None or self.retry_on:
            retries = f"\n    retries {self.retries}\n    option redispatch 1"
        if self.retry_on:
            retries += f"\n    retry-on {' '.join(HAPROXY_RETRY_ON[o] for o in self.retry_on)}"
        return f"""# Written by dynosim testbed for router.policy = {self.policy}
global
    log stdout format raw local0 info
    nbthread 1
    maxconn {maxconn}{stats}

defaults
    mode http
    log global
    option httpclose{abort}
    timeout connect {connect}{retries}
    timeout client {ms}ms
    timeout server {server_ms}ms
    timeout queue {queue_ms}ms
    log-format "%[capture.req.hdr(0)] %Tw %Tc %Tr %Ta %ST %s %bq %sq %tsc %rc"

frontend router
    bind 127.0.0.1:{port}
    http-request capture req.hdr(X-Dynosim-Id) len 20
    http-request set-header X-Request-Start t=%[date(0,us)]{self._router_limit()}
    default_backend {BACKEND}

backend {BACKEND}
    {balance(self.policy, self.params)}
{servers}
{self._limiters(app_ports, dyno_ports if self.app_limit is not None else [])}"""

    def _router_limit(self) -> str:
        """router.concurrency_limit's rule: HAProxy's ``be_conn`` counts the requests the
        backend holds (a stream counts from when it is given the backend, queued or at a dyno,
        until it ends; the one being evaluated in the frontend is not yet among them)."""
        if self.router_limit is None:
            return ""
        return (f"\n    http-request return status 503 content-type text/plain string \"concurrency limit\" "
                f"hdr {LIMIT_HEADER} router if {{ be_conn({BACKEND}) ge {self.router_limit} }}")

    def _limiters(self, app_ports: List[int], limiter_ports: List[int]) -> str:
        """app.concurrency_limit: a frontend per dyno (on its limiter's port, the backend's
        server) answering 503 while its own backend, the dyno's app server alone, holds
        `app_limit` requests; it logs nothing (the router's line is the request's), and the
        dyno's backend waits as long as the run (router.timeout is the router's, not the
        dyno's)."""
        ms = int(self.timeout * 1000)
        out = []
        for d, (app, mine) in enumerate(zip(app_ports, limiter_ports)):
            out.append(f"""
frontend limit{d}
    bind 127.0.0.1:{mine}
    http-request set-log-level silent
    http-request return status 503 content-type text/plain string "concurrency limit" hdr {LIMIT_HEADER} app if {{ be_conn(app{d}) ge {self.app_limit} }}
    default_backend app{d}

backend app{d}
    timeout server {ms}ms
    server app 127.0.0.1:{app}
""")
        return "".join(out)

    def describe(self) -> str:
        """The router as run, for the report: HAProxy's balance line, or nginx's upstream."""
        if self.kind == "nginx":
            return nginx.describe(self.policy, self.params, self.workers, self.zone) + (
                f", limit_conn {self.router_limit} ({'one for all' if self.zone else 'each worker its own'})"
                if self.router_limit is not None else "")
        return balance(self.policy, self.params).replace("\n   ", ";") + (
            f", maxconn {self.slots}" if self.policy in HOLDING else "") + (
            f", 503 beyond {self.router_limit} in the backend (be_conn)" if self.router_limit is not None else "") + (
            f", each dyno behind a frontend answering 503 beyond {self.app_limit} at its app server"
            if self.app_limit is not None else "")


class Router:
    def __init__(self, supervisor: Supervisor, plan: RouterPlan, port: int, dyno_ports: List[int],
                 cpus: Optional[List[int]] = None) -> None:
        self.kind = plan.kind
        if plan.kind == "nginx":
            found = nginx_tool()
            if found.path is None:
                raise DynosimError(f'router.kind = "nginx": nginx is not installed; install it: {found.install}')
            self.supervisor = supervisor
            self.port = port
            self.config_path = supervisor.workdir / nginx.CONFIG
            self.process, self.log = nginx.start(supervisor, plan, port, dyno_ports, found.path, cpus)
            return
        tool = haproxy()
        if tool.path is None:
            raise DynosimError(f"HAProxy is not installed; install it: {INSTALL_DEBIAN}")
        self.supervisor = supervisor
        self.port = port
        self.config_path = supervisor.workdir / "haproxy.cfg"
        # app.concurrency_limit: each dyno's limiter listens on a port of its own.
        # (The router's own port is free until HAProxy binds it: one more, and not that one.)
        self.limiter_ports = None
        if plan.app_limit is not None:
            self.limiter_ports = [p for p in free_ports(len(dyno_ports) + 1) if p != port][:len(dyno_ports)]
        self.config_path.write_text(plan.config(port, dyno_ports, self.limiter_ports))
        self.log = supervisor.workdir / "haproxy.log"
        check = [tool.path, "-c", "-q", "-f", str(self.config_path)]
        import subprocess

        checked = subprocess.run(check, capture_output=True, text=True, timeout=30)
        if checked.returncode != 0:
            raise DynosimError(f"HAProxy refused the configuration dynosim wrote ({self.config_path}): "
                               f"{(checked.stderr or checked.stdout).strip()}")
        self.process = supervisor.spawn([tool.path, "-db", "-f", str(self.config_path)], name="haproxy",
                                        log=self.log, cpus=cpus, stop_signal=signal.SIGUSR1)
        supervisor.wait_for_port(port, self.process, 10.0)

    def stop(self) -> None:
        self.supervisor.stop(self.process)

    def read_log(self) -> Dict[str, Dict[str, Any]]:
        """The router's log by request id, in HAProxy's fields (complete once it has stopped)."""
        return nginx.read_log(self.log) if self.kind == "nginx" else read_log(self.log)


def read_log(path: Path) -> Dict[str, Dict[str, Any]]:
    """HAProxy's lines by request id: {id: {"tw": s, "tc": s, "tr": s, "ta": s, "status": int,
    "server": str, "backend_queue": int, "server_queue": int, "term": str}} (``term``: HAProxy's
    termination state, ``sH`` a server timeout, ``sQ`` a queue timeout, ``SH`` a server that
    closed without answering). Times are seconds (HAProxy logs
    ms; -1 when the step did not happen: None here). Lines that are not request lines (start-up
    notices) are skipped."""
    return log_by_id(path, parse_log_line)


def parse_log_line(line: str) -> Optional[Tuple[str, Dict[str, Any]]]:
    """One line of HAProxy's log as :func:`read_log` reads it: (request id, fields), or None
    for a line that is not a request's."""
    parts = line.split()
    # Connections without a request (a readiness probe) log "-" for the id.
    if len(parts) != len(LOG_FIELDS) or parts[0] == "-":
        return None
    try:
        tw, tc, tr, ta, status = (int(x) for x in parts[1:6])
        bq, sq = int(parts[7]), int(parts[8])
        # %rc: the retries (a "+" before it: the last one redispatched).
        retries = int(parts[10].lstrip("+"))
    except ValueError:
        return None

    def seconds(ms: int) -> Optional[float]:
        return None if ms < 0 else ms / 1000.0

    return parts[0], {"tw": seconds(tw), "tc": seconds(tc), "tr": seconds(tr), "ta": seconds(ta),
                      "status": status, "server": parts[6], "backend_queue": bq, "server_queue": sq,
                      "term": parts[9], "retries": retries}
