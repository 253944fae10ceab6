"""nginx as the testbed's router (``router.kind = "nginx"``, docs/testbed.md "nginx"): how a
scenario maps to nginx's configuration and what is refused, without nginx; then short real
runs through a real nginx on loopback (each policy, its workers with and without a shared
zone), and that nothing outlives a run however it stops. HAProxy's ``first`` and
``bounded_hash`` (its configuration, the keys sent, a real run of each) are checked here too.

The real runs need nginx (``make testbed-deps``); outside CI they are skipped without it, in
CI (``CI`` set) they fail, as the other testbed tests do.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import assert_one_line_error, run_cli, run_process
from fuzzing import toml_document
from test_testbed import _testbed_processes, stop_and_look
from dynosim import Scenario
from dynosim.errors import DynosimError, ScenarioError
from dynosim.testbed import nginx
from dynosim.testbed.plan import make_plan
from dynosim.testbed.router import RouterPlan
from dynosim.testbed.tools import haproxy, nginx as nginx_tool

NGINX = nginx_tool()


def scenario(router: Dict[str, object], **extra: object) -> Dict[str, object]:
    """Sleeping requests on 2 dynos, light enough that requests seldom overlap: the order of
    the requests' ids is the order nginx routed them."""
    doc: Dict[str, object] = {
        "name": "testbed-nginx",
        "arrivals": {"process": "poisson", "rate": "20/s"},
        "service": {"distribution": "lognormal", "median": "10ms", "sigma": 0.5},
        "fleet": {"dynos": 2},
        "router": {"kind": "nginx", **router},
        "run": {"duration": "4s", "warmup": "0s", "replications": 2, "seed": 11},
    }
    doc.update(extra)
    return doc


def nginx_check(config: str, tmp_path: Path) -> None:
    """``nginx -t`` accepts the configuration, run as the testbed runs it (its prefix a
    private directory)."""
    if not NGINX.present:
        return
    workdir = tmp_path / "nginx-check"
    workdir.mkdir()
    (workdir / nginx.CONFIG).write_text(config)
    checked = run_process(nginx.argv(NGINX.path, workdir, test=True), text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr


# --- the configuration, without nginx -----------------------------------------------------------


@pytest.mark.parametrize("policy,params,line", [
    ("random", {}, "random;"),
    ("round_robin", {}, None),
    ("least_connections", {}, "least_conn;"),
    ("power_of_d", {"d": 2}, "random two least_conn;"),
])
def test_policies_map_to_nginx(policy, params, line, tmp_path):
    plan = RouterPlan(policy, params, 1, 60.0, server_timeout=1.5, kind="nginx", workers=3)
    config = plan.config(18000, [18001, 18002])
    upstream = [x.strip() for x in re.search(r"upstream dynos \{(.*?)\}", config, re.S).group(1).splitlines()]
    assert [x for x in upstream if x and not x.startswith("server ")] == ([line] if line else [])
    assert sum(x.endswith("max_fails=0;") for x in upstream) == 2
    assert "worker_processes 3;" in config and "daemon off;" in config and "master_process on;" in config
    # One socket per worker, so that the kernel spreads connections over them.
    assert "listen 127.0.0.1:18000 reuseport" in config
    # The scenario's timeout is nginx's wait for the dyno's answer; no retry on another dyno.
    assert "proxy_read_timeout 1500ms;" in config and "proxy_next_upstream off;" in config
    # Nothing outside the run's directory: relative paths under nginx's prefix.
    for directive in ("pid", "access_log", "client_body_temp_path", "proxy_temp_path"):
        path = re.search(rf"^\s*{directive} (\S+)", config, re.M).group(1)
        assert not path.startswith("/"), (directive, path)
    assert plan.describe().startswith(line or "round robin")
    nginx_check(config, tmp_path)


def test_routers_are_workers_and_a_zone_shares_their_view(tmp_path):
    private = make_plan(Scenario(scenario({"policy": "least_connections", "routers": 2})))
    assert (private.router.kind, private.router.workers, private.router.zone) == ("nginx", 2, False)
    assert private.described["routers"] == 2
    config = private.router.config(9000, [9001, 9002])
    assert "worker_processes 2;" in config and "zone" not in re.search(r"upstream dynos \{.*?\}", config, re.S).group(0)
    shared = make_plan(Scenario(scenario({"policy": "least_connections", "zone": True, "workers": 2})))
    assert (shared.router.workers, shared.router.zone) == (2, True)
    assert shared.described["routers"] == 1  # simulated as one router
    config = shared.router.config(9000, [9001, 9002])
    assert "worker_processes 2;" in config and f"zone dynos {nginx.ZONE_SIZE};" in config
    assert "one shared view" in shared.router.describe()
    nginx_check(config, tmp_path)


@pytest.mark.parametrize("router,key,fragment", [
    ({"kind": "ngnix"}, "router.kind", 'unknown router "ngnix"'),
    ({"kind": "nginx", "zone": True, "routers": 2}, "router.zone", "router.routers = 1"),
    ({"kind": "nginx", "workers": 3, "routers": 2}, "router.workers", "own view"),
    ({"kind": "nginx", "workers": 0}, "router.workers", "whole number"),
    ({"zone": True}, "router.zone", "only nginx"),
    ({"workers": 2}, "router.workers", "only nginx"),
])
def test_the_engine_refuses_what_nginx_workers_cannot_mean(router, key, fragment):
    with pytest.raises(ScenarioError, match=re.escape(key) + ".*" + re.escape(fragment)):
        doc = scenario({})
        doc["router"] = {"policy": "random", **router}
        Scenario(doc).validate()


@pytest.mark.parametrize("router,key,fragment", [
    ({"policy": "intelligent"}, "router.policy", "no nginx equivalent"),
    ({"policy": "retry_if_busy"}, "router.policy", "least_connections, power_of_d"),
    ({"policy": "power_of_d", "d": 3}, "router.d", "set router.d = 2"),
])
def test_what_nginx_cannot_do_is_refused_before_anything_starts(router, key, fragment):
    with pytest.raises(ScenarioError, match=re.escape(key) + ".*" + re.escape(fragment)):
        make_plan(Scenario(scenario(router)))


def test_a_backlog_and_an_autoscaled_fleet_are_haproxys():
    with pytest.raises(ScenarioError, match=r"app\.backlog.*504"):
        make_plan(Scenario(scenario({"policy": "random"}, app={"backlog": 2})))
    from dynosim.testbed.fleet import split

    autoscaled = scenario({"policy": "random"}, fleet={"dynos": 1, "boot_time": "1s"},
                          autoscale={"rule": "schedule", "min": 1, "max": 3, "interval": "5s",
                                     "schedule": [["0s", 1], ["2s", 3]]})
    with pytest.raises(ScenarioError, match=r"router\.kind.*runtime API"):
        split(Scenario(autoscaled))


def test_cli_refuses_an_unmappable_policy_in_one_line(tmp_path):
    toml = tmp_path / "nginx.toml"
    toml.write_text(toml_document(scenario({"policy": "intelligent"})))
    assert_one_line_error(run_cli("testbed", str(toml)), "router.policy", "intelligent", "nginx")
    assert_one_line_error(run_cli("run", str(toml), "--set", "router.kind=apache"), "router.kind", "apache")


def test_distinct_draws_are_what_nginx_does():
    """nginx's random two draws two distinct dynos: the engine's default; false warns."""
    assert not [w for w in make_plan(Scenario(scenario({"policy": "power_of_d"}))).warnings if "distinct" in w]
    warned = make_plan(Scenario(scenario({"policy": "power_of_d", "distinct": False}))).warnings
    assert any("distinct" in w and "nginx" in w for w in warned), warned


def test_the_access_log_reads_as_haproxys_fields(tmp_path):
    log = tmp_path / nginx.ACCESS_LOG
    log.write_text("7\t4242\t0.001\t0.021\t0.022\t200\t200\tdyno1\n"
                   "-\t4242\t0.000\t0.001\t0.001\t200\t200\tdyno0\n"  # a probe: no id
                   "8\t4243\t-\t-\t1.001\t504\t504\tdyno0\n"
                   "9\t4243\t0.001, 0.002\t-, 0.030\t0.040\t200\t502, 200\tdyno1\n"
                   "garbage\n")
    got = nginx.read_log(log)
    assert set(got) == {"7", "8", "9"}
    assert got["7"] == {"tw": 0.0, "tc": 0.001, "tr": 0.021, "ta": 0.022, "status": 200, "server": "dyno1",
                        "backend_queue": 0, "server_queue": 0, "term": "", "router": 4242, "retries": 0}
    assert got["8"]["tc"] is None and got["8"]["status"] == 504 and got["8"]["router"] == 4243
    assert got["9"]["tc"] == 0.002 and got["9"]["tr"] == 0.030  # the dyno that answered
    assert got["9"]["retries"] == 1  # two upstream statuses: two tries


# --- HAProxy's first and bounded-load hashing --------------------------------------------------


def test_haproxy_first_and_bounded_hash_configs(tmp_path):
    first = RouterPlan("first", {}, 3, 60.0).config(18000, [18001, 18002])
    assert "balance first" in first and first.count("maxconn 3") == 2 and "timeout queue" in first
    hashed = RouterPlan("bounded_hash", {"factor": 1.25}, 1, 60.0).config(18000, [18001, 18002])
    assert "balance hdr(X-Dynosim-Key)" in hashed and "hash-type consistent" in hashed
    assert "hash-balance-factor 125" in hashed and " maxconn" not in hashed.split("backend")[1]
    default = RouterPlan("bounded_hash", {}, 1, 60.0).config(18000, [18001])
    assert "hash-balance-factor 125" in default  # the engine's default factor, 1.25
    plain = RouterPlan("bounded_hash", {"factor": "inf"}, 1, 60.0).config(18000, [18001])
    assert "hash-type consistent" in plain and "hash-balance-factor" not in plain
    with pytest.raises(DynosimError, match="router.factor"):
        RouterPlan("bounded_hash", {"factor": 0.5}, 1, 60.0).config(18000, [18001])
    tool = haproxy()
    if tool.present:
        for name, text in (("first", first), ("hashed", hashed)):
            path = tmp_path / f"{name}.cfg"
            path.write_text(text)
            checked = run_process([tool.path, "-c", "-q", "-f", str(path)], text=True, timeout=60)
            assert checked.returncode == 0, checked.stderr


def test_requests_carry_the_keys_the_engine_draws():
    plan = make_plan(Scenario(scenario({"policy": "random"})))
    assert "key" not in plan.drawn
    assert all("X-Dynosim-Key" not in headers for _, _, headers in plan.requests())
    doc = scenario({"kind": "haproxy", "policy": "bounded_hash", "factor": 1.5})
    doc["arrivals"]["keys"] = {"users": 7, "popularity": "uniform"}
    plan = make_plan(Scenario(doc))
    keys = plan.drawn["key"]
    assert len(keys) == len(plan.drawn["phases"]) and set(keys) == set(range(7))
    assert [headers["X-Dynosim-Key"] for _, _, headers in plan.requests()] == [str(k) for k in keys]
    config = plan.router.config(18000, [18001, 18002])
    assert "hash-balance-factor 150" in config and "weight 1\n" in config + "\n"
    # The engine's own ring places the users elsewhere than HAProxy: said, and not under
    # HAProxy's ring.
    assert any('router.ring = "haproxy"' in w for w in plan.warnings), plan.warnings
    doc["router"]["ring"] = "haproxy"
    assert not any("router.ring" in w for w in make_plan(Scenario(doc)).warnings)


# --- real runs ----------------------------------------------------------------------------------


def real(doc: Dict[str, object]) -> List[dict]:
    """`dynosim testbed` of `doc` in this process: its results (each with its records)."""
    from dynosim.testbed.run import testbed

    return testbed(Scenario(doc))["results"]


def alternation(dynos: List[str]) -> float:
    """The share of consecutive requests that went to different dynos."""
    pairs = list(zip(dynos, dynos[1:]))
    return sum(a != b for a, b in pairs) / max(1, len(pairs))


def check_answered(result: dict) -> List[dict]:
    """Every drawn request sent, routed by nginx and answered by the app; the router's stamp
    (X-Request-Start) read by the app, before its start. The records, in request order."""
    rows = sorted(result["_records"], key=lambda r: r["index"])
    rep, sim = result["measured"]["per_replication"][0], result["simulated"]["per_replication"][0]
    assert rep["requests"] == sim["requests"] == len(rows) > 40
    assert rep["failed"]["total"] == 0 and all(r["status"] == 200 for r in rows)
    assert result["testbed"]["router_log_lines"] == len(rows)
    assert {r["server"] for r in rows} == {"dyno0", "dyno1"}
    queueing = result["testbed"]["request_queueing"]
    # Stamped in whole milliseconds (so up to 1 ms early), before the app starts: a little
    # more than nothing at an idle dyno.
    assert 0 < queueing["mean"] and 0 <= queueing["p50"] and queueing["p99"] < 0.1, queueing
    assert result["testbed"]["router"]["kind"] == "nginx"
    return rows


@pytest.mark.needs("nginx", "gunicorn")
def test_a_real_nginx_runs_each_policy(tmp_path):
    results = real(scenario({"policy": ["random", "round_robin", "least_connections", "power_of_d"]}))
    assert [r["policy"] for r in results] == ["random", "round_robin", "least_connections", "power_of_d"]
    order = {}
    for result in results:
        rows = check_answered(result)
        assert len({r["router"] for r in rows}) == 1  # one worker: one router
        order[result["policy"]] = [r["server"] for r in rows]
    # Round robin alternates (but for requests that reached nginx out of send order); random
    # draws: strict alternation of 40 and more requests has probability below 2^-39.
    assert alternation(order["round_robin"]) > 0.9
    assert alternation(order["random"]) < 0.9
    assert not _testbed_processes(), _testbed_processes()


@pytest.mark.needs("haproxy", "gunicorn")
def test_a_real_haproxy_runs_first_and_bounded_hash():
    """HAProxy's ``balance first`` fills the lowest-numbered dyno: at 10 requests/s of about
    11 ms the first dyno is busy about 11% of the time, so it takes about 89% of the requests
    (random routing: half); 0.7 is 3.9 binomial standard errors below. Consistent hashing on
    the key header (``factor = "inf"``: no bound) sends every request of a user to one dyno,
    the keys HAProxy hashed are the ones the engine drew for those requests, and each user's
    dyno is the one HAProxy's ring gives it (``router.ring = "haproxy"``)."""
    doc = scenario({"kind": "haproxy", "policy": "first"}, arrivals={"process": "poisson", "rate": "10/s"})
    (first,) = real(doc)
    rows = first["_records"]
    assert len(rows) > 20 and all(r["status"] == 200 for r in rows)
    share = sum(r["server"] == "dyno0" for r in rows) / len(rows)
    assert share > 0.7, share
    assert first["testbed"]["router"]["kind"] == "haproxy"

    doc = scenario({"kind": "haproxy", "policy": "bounded_hash", "factor": "inf", "ring": "haproxy"})
    doc["fleet"] = {"dynos": 3}
    doc["arrivals"]["keys"] = {"users": 30, "popularity": "uniform"}
    (hashed,) = real(doc)
    keys = make_plan(Scenario(doc)).drawn["key"]
    servers: Dict[int, set] = {}
    for r in hashed["_records"]:
        assert r["status"] == 200
        servers.setdefault(keys[r["index"]], set()).add(r["server"])
    assert len(servers) > 20 and all(len(s) == 1 for s in servers.values()), servers
    # The real HAProxy's placement is HAProxy 2.x's ring as written below, which the engine's
    # ring = "haproxy" follows (its unit tests check it against the same rule and HAProxy's
    # own hash functions).
    placed = {key: f"dyno{haproxy_server(key, 3)}" for key in servers}
    assert {key: s.pop() for key, s in servers.items()} == placed
    assert len(set(placed.values())) == 3
    assert not _testbed_processes(), _testbed_processes()


def full_hash(a: int) -> int:
    """HAProxy's ``__full_hash`` (include/haproxy/intops.h, 2.x), on 32-bit words."""
    m = 0xFFFFFFFF
    a = (a + 0x7ED55D16 + (a << 12)) & m
    a = (a ^ 0xC761C23C) ^ (a >> 19)
    a = (a + 0x165667B1 + (a << 5)) & m
    a = ((a + 0xD3A2646C) ^ (a << 9)) & m
    a = (a + 0xFD7046C5 + (a << 3)) & m
    a = (a ^ 0xB55A4F09) ^ (a >> 16)
    return (a * 3221225473) & m


def haproxy_server(key: int, servers: int) -> int:
    """The server (from 0) HAProxy's ``balance hdr`` + ``hash-type consistent`` sends a key
    to: sdbm of its text, then full_hash (``hash-type consistent``'s default, "sdbm+avalanche");
    16 points per server of weight 1 at full_hash(id × 4096 + j), ids from 1; the nearest point
    either way on the 32-bit ring, the one before on a tie."""
    h = 0
    for c in str(key).encode():
        h = (c + (h << 6) + (h << 16) - h) & 0xFFFFFFFF
    h = full_hash(h)
    best = None
    for d in range(servers):
        for j in range(16):
            point = full_hash((d + 1) * 4096 + j)
            before, after = (h - point) & 0xFFFFFFFF, (point - h) & 0xFFFFFFFF
            candidate = (min(before, after), after < before, d)
            best = candidate if best is None else min(best, candidate)
    assert best is not None
    return best[2]


@pytest.mark.needs("nginx", "gunicorn")
def test_real_nginx_workers_are_routers_with_private_or_shared_views():
    """Two workers without a zone: each request lands on either at random (the kernel's
    reuseport hash), and each cycles through the dynos on its own; with a zone they share one
    round robin."""
    (private,) = real(scenario({"policy": "round_robin", "routers": 2}, run={
        "duration": "6s", "warmup": "0s", "replications": 2, "seed": 12}))
    rows = check_answered(private)
    by_worker: Dict[object, List[str]] = {}
    for r in rows:
        by_worker.setdefault(r["router"], []).append(r["server"])
    assert len(by_worker) == 2
    n = len(rows)
    share = max(Counter(r["router"] for r in rows).values()) / n
    # A fair coin per request: the larger share within 4 standard errors of a half.
    assert share - 0.5 <= 4 * math.sqrt(0.25 / n), (share, n)
    for dynos in by_worker.values():
        assert alternation(dynos) > 0.9
    # Seen together, the two private cycles interleave at random. Both start at the first
    # dyno; when the workers' next dynos are the same, the next request goes there whichever
    # worker takes it (the other dyno than the last), and leaves them different; then it
    # goes to either, at random, and leaves them the same. So every other pair of
    # consecutive requests is a fair coin: 3/4 go to different dynos, with a standard error
    # of 1/sqrt(8 pairs), where one shared cycle gives all.
    pairs = len(rows) - 1
    assert abs(alternation([r["server"] for r in rows]) - 0.75) <= 4 / math.sqrt(8 * pairs)
    (shared,) = real(scenario({"policy": "round_robin", "zone": True, "workers": 2}))
    rows = check_answered(shared)
    assert len({r["router"] for r in rows}) == 2
    assert alternation([r["server"] for r in rows]) > 0.9
    assert shared["simulated"]["routers"] == 1


@pytest.mark.needs("nginx", "gunicorn")
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_nothing_of_nginx_outlives_a_stopped_run(tmp_path, how):
    doc = scenario({"policy": "least_connections", "routers": 2},
                   run={"duration": "60s", "warmup": "0s", "replications": 1, "seed": 1})
    toml = tmp_path / "long.toml"
    toml.write_text(toml_document(doc))
    # Once nginx's workers run, the dynos are up and the load is on.
    stop_and_look(str(toml), how, lambda seen: sum("nginx: worker" in line for line in seen.values()) >= 2,
                  expect=("gunicorn", "nginx -p", "nginx: worker"))
    assert not _testbed_processes(), _testbed_processes()
