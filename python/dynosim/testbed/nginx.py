"""nginx as the testbed's router (``router.kind = "nginx"``, Debian's ``nginx`` package): the
policies nginx's open-source upstream modules have, and its worker processes as the
simulation's several routers.

=====================  ================================================================
dynosim policy         nginx ``upstream`` block
=====================  ================================================================
``round_robin``        nothing: nginx's default, smooth weighted round robin (equal weights:
                       the servers in order)
``least_connections``  ``least_conn;`` (ties: round robin among the tied servers)
``power_of_d``, d = 2  ``random two least_conn;``: two *distinct* servers drawn, the one with
                       fewer connections taken (simulate it with ``router.distinct = true``,
                       the engine's default; the testbed warns when it is false)
``random``             ``random;``
=====================  ================================================================

Every other policy is refused in one line: nginx holds no queue of its own (that is nginx
Plus's ``queue``), so ``intelligent`` has no equivalent, nor has ``retry_if_busy``.

**Routers.** ``router.routers = R`` runs ``worker_processes R``. Without a ``zone``, each
worker keeps its own copy of the upstream's counters (its connections, its place in the round
robin): R routers, each knowing only the requests it sent, which is what the simulation's
several routers are. ``router.zone = true`` puts the counters in a shared memory ``zone``:
the workers (``router.workers`` of them) then share one view, which the simulation runs as one
router (the engine asks for ``router.routers = 1`` with a zone).

**Which worker takes a connection.** The simulation's request lands on a router at random.
nginx's workers otherwise share one listening socket, and which of them accepts a connection
is the kernel's wake-up order (``accept_mutex`` is off by default since 1.11.3, and Linux's
``EPOLLEXCLUSIVE`` wakes one waiting worker, most often the same): a busy worker can take far
more than its share. The testbed listens with ``reuseport``: each worker has a socket of its
own and the kernel hashes each new connection (its source port, new for every request, since
the load generator opens a connection per request) to one of them, which is a uniform draw
per request. The access log has each request's worker (``$pid``), so a test checks the shares.

**Everything else as HAProxy is run** (:mod:`.router`): ``daemon off`` under the testbed's
supervisor, ``master_process on``, its pid file, access log and temporary directories inside
the run's directory (``-p``, so nothing touches /var and it runs unprivileged; as root its
workers stay root, as the user that started it), the error log on its standard error (the
supervisor's log of it); no keep-alive on either side (``keepalive_timeout 0`` for the
client, ``Connection: close`` to the dynos over HTTP/1.1, as HAProxy's ``option
httpclose``); ``max_fails=0`` (no dyno is ever marked down, as HAProxy runs no health
checks); no retry on another dyno (``proxy_next_upstream off``) but router.retry_on's
(``proxy_next_upstream`` with its conditions, :data:`NEXT_UPSTREAM`, and ``_tries`` =
router.retries + 1; the access log's ``$upstream_status`` lists each try); the scenario's timeouts
(router.timeout is ``proxy_read_timeout``, which for an app that writes its answer at the end
is the time to its first byte: HAProxy's ``timeout server``, answered 504); and with
arrivals.timeout nginx closes the dyno's connection when the client goes, as HAProxy's
``option abortonclose`` (``proxy_ignore_client_abort off``; on otherwise, HAProxy's
default). It stops on SIGQUIT (nginx's graceful stop, as HAProxy's SIGUSR1), SIGKILL after the
supervisor's grace.

``X-Request-Start: t=<microseconds>`` is the time nginx builds the request to the dyno
(``$msec``, milliseconds, written as microseconds: the app reads HAProxy's unit). The access
log has one line per request, tab-separated: the request's id (``X-Dynosim-Id``), the worker's
pid, ``$upstream_connect_time``, ``$upstream_header_time``, ``$request_time``, the status,
``$upstream_status`` and the dyno (:func:`read_log` turns them into HAProxy's fields; nginx
holds nothing, so its queue time Tw is 0).

Not run on nginx (refused in one line): ``app.backlog`` (nginx answers a connect timeout with a
504, which is H12's status) and the autoscaled fleet (driven by HAProxy's runtime API).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..errors import DynosimError
from .measure import log_by_id

#: The upstream's name; each dyno's server is ``127.0.0.1:PORT``.
UPSTREAM = "dynos"
#: The policies nginx runs, as the refusal names them.
SUPPORTED = ("random", "round_robin", "least_connections", "power_of_d")
#: The access log's columns, in order (tab-separated).
LOG_FIELDS = ("id", "pid", "connect", "header", "total", "status", "upstream_status", "server")
#: The shared memory zone's size: a few hundred bytes a server, so 64 servers fit many times.
ZONE_SIZE = "256k"
#: nginx's listen backlog (gunicorn's, the dynos').
BACKLOG = 2048
#: Files under the run's directory (nginx's prefix, ``-p``).
CONFIG = "nginx.conf"
ACCESS_LOG = "nginx-access.log"
PID_FILE = "nginx.pid"
TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def method(policy: str, params: Dict[str, Any]) -> str:
    """The ``upstream`` block's balancing line for a policy ("" for round robin, nginx's
    default); a clear error for one nginx cannot do."""
    if policy == "random":
        return "random;"
    if policy == "round_robin":
        return ""
    if policy == "least_connections":
        return "least_conn;"
    if policy == "power_of_d":
        d = params.get("d", 2)
        if d != 2:
            raise DynosimError(f"router.d = {d!r}: nginx's random two least_conn compares two dynos; with "
                               'router.kind = "nginx" set router.d = 2')
        return "random two least_conn;"
    raise DynosimError(f"router.policy = {policy!r} has no nginx equivalent; with router.kind = \"nginx\" the "
                       f"testbed runs {', '.join(SUPPORTED)} (d = 2)")


def describe(policy: str, params: Dict[str, Any], workers: int, zone: bool) -> str:
    """One line for the report: the balancing method, the workers and the zone."""
    line = method(policy, params) or "round robin (the default)"
    views = "one shared view (zone)" if zone else ("its own view each, no zone" if workers > 1 else "no zone")
    return f"{line} worker_processes {workers}, {views}"


def config(plan: Any, port: int, dyno_ports: List[int]) -> str:
    """nginx's configuration for a :class:`~.router.RouterPlan` of kind nginx, its paths
    relative to the run's directory (nginx's ``-p`` prefix)."""
    ms = int(plan.timeout * 1000)
    server_ms = int(round(1000 * min(plan.server_timeout or plan.timeout, plan.timeout)))
    connect = "5s" if plan.connect_timeout is None else f"{max(1, int(round(plan.connect_timeout * 1000)))}ms"
    # Each request holds two connections of its worker (the client's and the dyno's).
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    files = min(65536, max(1024, (hard if hard != resource.RLIM_INFINITY else 1 << 20) - 64))
    connections = max(512, files - 64)
    balance = method(plan.policy, plan.params)
    lines = [balance] if balance else []
    if plan.zone:
        lines.append(f"zone {UPSTREAM} {ZONE_SIZE};")
    lines += [f"server 127.0.0.1:{p} max_fails=0;" for p in dyno_ports]
    upstream = "\n".join(f"        {line}" for line in lines)
    servers = "\n".join(f"        127.0.0.1:{p} dyno{d};" for d, p in enumerate(dyno_ports))
    # As root, its workers run as root too (nginx would otherwise switch them to nobody, who
    # cannot write the run's directory); as anyone else the directive is ignored, so left out.
    user = "user root;\n" if os.geteuid() == 0 else ""
    temps = "\n".join(f"    {name}_temp_path {name}_temp;" for name in TEMP_DIRS)
    views = "share one view (zone)" if plan.zone else "keep their own counters: one router each"
    if plan.retry_on:
        conditions = " ".join(dict.fromkeys(c for o in plan.retry_on for c in NEXT_UPSTREAM[o].split()))
        # Tries in all, the first included; no time limit beyond each try's own.
        next_upstream = (f"proxy_next_upstream {conditions};\n            proxy_next_upstream_tries "
                         f"{plan.retries + 1};\n            proxy_next_upstream_timeout 0;")
    else:
        next_upstream = "proxy_next_upstream off;"
    limit_zone, limit, limited = _router_limit(plan)
    return f"""# Written by dynosim testbed for router.policy = {plan.policy}: {plan.workers} worker(s) that {views}
{user}daemon off;
master_process on;
worker_processes {plan.workers};
worker_rlimit_nofile {files};
pid {PID_FILE};
error_log stderr notice;

events {{
    worker_connections {connections};
    accept_mutex off;
}}

http {{
    map $msec $dynosim_request_start {{
        "~^(?<seconds>[0-9]+)[.](?<millis>[0-9]+)$" "t=${{seconds}}${{millis}}000";
        default "";
    }}
    map $upstream_addr $dynosim_dyno {{
{servers}
        default "-";
    }}
    log_format dynosim "$http_x_dynosim_id\\t$pid\\t$upstream_connect_time\\t$upstream_header_time\\t$request_time\\t$status\\t$upstream_status\\t$dynosim_dyno";
    access_log {ACCESS_LOG} dynosim;
{temps}
    keepalive_timeout 0;
    client_header_timeout {ms}ms;
    client_body_timeout {ms}ms;
    send_timeout {ms}ms;{limit_zone}

    upstream {UPSTREAM} {{
{upstream}
    }}

    server {{
        listen 127.0.0.1:{port} reuseport backlog={BACKLOG};
        location / {{
            proxy_pass http://{UPSTREAM};
            proxy_http_version 1.1;
            proxy_set_header Connection close;
            proxy_set_header X-Request-Start $dynosim_request_start;
            proxy_connect_timeout {connect};
            proxy_send_timeout {server_ms}ms;
            proxy_read_timeout {server_ms}ms;
            {next_upstream}
            proxy_ignore_client_abort {"off" if plan.abort_on_close else "on"};{limit}
        }}{limited}
    }}
}}
"""


#: router.concurrency_limit's ``limit_conn_zone``: the requests each key has in processing.
LIMIT_ZONE = "dynosim_limit"


def _router_limit(plan: Any) -> Tuple[str, str, str]:
    """router.concurrency_limit under nginx: ``limit_conn`` (answered 503 at once while the
    key has `limit` requests in processing, counted from the request's headers read to its
    end), the key each worker's pid without a zone (each worker a router, as the simulation's
    several routers, each with its limiter) and one for all with it (one router); its refusal
    goes to a named location that marks it ``X-Dynosim-Limit: router`` (a dyno's own 503 is
    passed through: ``proxy_intercept_errors`` is off). ("", "", "") without a limit: the
    http block's lines, the location's, the server's."""
    if plan.router_limit is None:
        return "", "", ""
    key = "$dynosim_limit_key" if plan.zone else "$pid"
    constant = (f"\n    map $pid $dynosim_limit_key {{\n        default \"all\";\n    }}" if plan.zone else "")
    zone = f"{constant}\n    limit_conn_zone {key} zone={LIMIT_ZONE}:{ZONE_SIZE};"
    location = (f"\n            limit_conn {LIMIT_ZONE} {plan.router_limit};\n            limit_conn_status 503;"
                "\n            limit_conn_log_level info;\n            error_page 503 @dynosim_limit;")
    named = ("\n        location @dynosim_limit {\n            add_header X-Dynosim-Limit router always;"
             "\n            return 503;\n        }")
    return zone, location, named


#: router.retry_on's outcomes as nginx's ``proxy_next_upstream`` conditions (``error``: a
#: failed connection, or one closed without an answer).
NEXT_UPSTREAM = {"refused": "error", "timeout": "timeout",
                 "5xx": "error http_500 http_502 http_503 http_504"}


def argv(tool: str, workdir: Path, *, test: bool = False) -> List[str]:
    """nginx's command line: the run's directory as its prefix, its error log on stderr."""
    return [tool, *(["-t", "-q"] if test else []), "-p", f"{workdir}/", "-e", "stderr", "-c",
            str(workdir / CONFIG)]


def start(supervisor: Any, plan: Any, port: int, dyno_ports: List[int], tool: str,
          cpus: Optional[List[int]] = None) -> Tuple["subprocess.Popen[bytes]", Path]:
    """Writes the configuration, has ``nginx -t`` check it, starts nginx under `supervisor`
    and waits for it to listen: (its master process, its access log)."""
    workdir = Path(supervisor.workdir)
    (workdir / CONFIG).write_text(config(plan, port, dyno_ports))
    checked = subprocess.run(argv(tool, workdir, test=True), capture_output=True, text=True, timeout=30)
    if checked.returncode != 0:
        raise DynosimError(f"nginx refused the configuration dynosim wrote ({workdir / CONFIG}): "
                           f"{(checked.stderr or checked.stdout).strip()}")
    process = supervisor.spawn(argv(tool, workdir), name="nginx", log=workdir / "nginx.log", cpus=cpus,
                               stop_signal=signal.SIGQUIT)
    supervisor.wait_for_port(port, process, 10.0)
    return process, workdir / ACCESS_LOG


def read_log(path: Path) -> Dict[str, Dict[str, Any]]:
    """nginx's access log by request id, in HAProxy's fields (:func:`.router.read_log`): Tw 0
    (nginx holds no request), Tc ``$upstream_connect_time``, Tr ``$upstream_header_time``, Ta
    ``$request_time`` (seconds; None for "-"), the status, the dyno, no queue lengths, no
    termination state; and ``router``, the pid of the worker that routed it."""
    return log_by_id(path, parse_log_line)


def parse_log_line(line: str) -> Optional[Tuple[str, Dict[str, Any]]]:
    """One line of the access log as :func:`read_log` reads it: (request id, fields), or None
    for a line without an id (a readiness probe) or not of this format."""
    parts = line.split("\t")
    if len(parts) != len(LOG_FIELDS) or parts[0] in ("", "-"):
        return None

    def seconds(text: str) -> Optional[float]:
        # Several tries are listed "a, b": the last is the dyno that answered.
        last = text.split(",")[-1].strip()
        try:
            return None if last == "-" else float(last)
        except ValueError:
            return None

    try:
        status, pid = int(parts[5]), int(parts[1])
    except ValueError:
        return None
    # One upstream status a try ("504, 504, 200"): the retries are the tries less one.
    retries = max(0, len(parts[6].split(",")) - 1)
    return parts[0], {"tw": 0.0, "tc": seconds(parts[2]), "tr": seconds(parts[3]), "ta": seconds(parts[4]),
                      "status": status, "server": parts[7], "backend_queue": 0, "server_queue": 0, "term": "",
                      "router": pid, "retries": retries}
