"""Fixed concurrency limits on the real stack (docs/testbed.md, "Concurrency limits"):
router.concurrency_limit as HAProxy's ``http-request return status 503`` while its backend
holds the limit (``be_conn``) or nginx's ``limit_conn``; app.concurrency_limit as a frontend
of HAProxy's own in front of each dyno's app server answering 503 while it has the limit
there. Each refusal is marked ``X-Dynosim-Limit``, which the measured report counts as the
simulation's ``errors.limit_rejected`` and ``limit.rejected``.

The real runs are short and paired: the load generator sends replication 0's requests.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from conftest import component
from dynosim import Scenario
from dynosim.errors import DynosimError
from dynosim.testbed import measure
from dynosim.testbed.plan import make_plan
from dynosim.testbed.router import LIMIT_HEADER
from test_testbed_retries import run_testbed

#: The cases (tests/fixtures/testbed/limits.toml): Poisson arrivals at λ of constant work 1/μ
#: on 2 dynos of 2 sync workers each (capacity 40 req/s), offered 1.5 times what the fleet can
#: do for SECONDS.
FIXTURE = Path(__file__).parent / "fixtures" / "testbed" / "limits.toml"
LAMBDA, SERVICE, SECONDS = 60.0, 0.1, 6.0
#: What the real stack adds to the time a limiter holds a request beyond its drawn work
#: (connecting, HAProxy, gunicorn's parse and write): ~2 ms (docs/testbed.md, "Timeouts on
#: the real stack"), taken as at most 3 ms here.
STACK = 0.003


def erlang_b(a: float, c: int) -> float:
    """Erlang's loss formula: the fraction of Poisson arrivals (offered load `a`) finding `c`
    servers busy in a system without a queue, for any distribution of the holding time."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def scenario(limits: Dict[str, Dict[str, object]], **router: object) -> Dict[str, Any]:
    """The fixture's scenario with these limits (by key path) and router keys."""
    with open(FIXTURE, "rb") as f:
        doc: Dict[str, Any] = tomllib.load(f)
    assert doc["arrivals"]["rate"] == f"{LAMBDA:g}/s" and doc["run"]["duration"] == f"{SECONDS:g}s"
    doc["router"].update(router)
    for path, table in limits.items():
        head, key = path.split(".")
        doc[head][key] = table
    return doc


#: router.concurrency_limit 3 before 4 workers, least connections: nothing ever waits for a
#: worker, so the router is Erlang's loss system of 3 servers at a = λ/μ = 6.
ROUTER = scenario({"router.concurrency_limit": {"algorithm": "fixed", "limit": 3}})
#: app.concurrency_limit 1 on each dyno of 2 workers, random routing: each dyno is a loss
#: system of 1 server at a = λ/2μ = 3 (a Poisson stream split at random is two).
APP = scenario({"app.concurrency_limit": {"algorithm": "fixed", "limit": 1}}, policy="random")


def test_fixed_limits_become_haproxys_rules_and_adaptive_ones_are_refused():
    """The router's limit is a rule of HAProxy's frontend on its backend's ``be_conn``; the
    app's a frontend per dyno between HAProxy's backend and the dyno's app server; nginx's is
    ``limit_conn`` (per worker without a zone, one for all with one). Adaptive algorithms,
    a dyno's limit under nginx or beside app.backlog, and limits on an autoscaled fleet are
    refused in one line naming the key."""
    plan = make_plan(Scenario(ROUTER))
    assert plan.router.router_limit == 3 and plan.router.app_limit is None
    config = plan.router.config(9000, [9001, 9002])
    rule = (f"http-request return status 503 content-type text/plain string \"concurrency limit\" "
            f"hdr {LIMIT_HEADER} router if {{ be_conn(dynos) ge 3 }}")
    assert rule in config
    # After the capture (the refused request's line carries its id), before the backend.
    assert config.index("capture req.hdr(X-Dynosim-Id)") < config.index(rule) < config.index("default_backend")
    assert "frontend limit0" not in config
    assert plan.router.describe() == "balance leastconn, 503 beyond 3 in the backend (be_conn)"
    assert "be_conn" not in make_plan(Scenario(scenario({}))).router.config(9000, [9001, 9002])

    app = make_plan(Scenario(APP))
    assert app.router.app_limit == 1 and app.router.router_limit is None
    config = app.router.config(9000, [9001, 9002], [9101, 9102])
    # HAProxy's servers are the limiters; each limiter's backend is its dyno's app server.
    assert "server dyno0 127.0.0.1:9101 " in config and "server dyno1 127.0.0.1:9102 " in config
    for d, (mine, dyno) in enumerate(((9101, 9001), (9102, 9002))):
        front = config[config.index(f"frontend limit{d}\n"):]
        front = front[:front.index("\nbackend")]
        assert f"bind 127.0.0.1:{mine}" in front and f"default_backend app{d}" in front
        assert f"hdr {LIMIT_HEADER} app if {{ be_conn(app{d}) ge 1 }}" in front
        assert "set-log-level silent" in front
        back = config[config.index(f"\nbackend app{d}\n") + 1:]
        assert back.split("\n\n")[0].rstrip().endswith(f"server app 127.0.0.1:{dyno}")
    assert not app.warnings
    retried = make_plan(Scenario(APP).with_overrides({"router.retry_on": ["5xx"]}))
    assert any("limit.rejected counts the refusals the clients got" in w for w in retried.warnings)
    with pytest.raises(DynosimError, match="no port for each dyno's limiter"):
        app.router.config(9000, [9001, 9002])

    ngx = make_plan(Scenario(scenario({"router.concurrency_limit": {"algorithm": "fixed", "limit": 3}},
                                      kind="nginx")))
    text = ngx.router.config(9000, [9001, 9002])
    assert "limit_conn_zone $pid zone=dynosim_limit" in text
    assert ngx.router.describe().endswith("limit_conn 3 (each worker its own)")
    assert "limit_conn dynosim_limit 3;" in text and "limit_conn_status 503;" in text
    assert f"add_header {LIMIT_HEADER} router always;" in text
    zoned = make_plan(Scenario(scenario({"router.concurrency_limit": {"algorithm": "fixed", "limit": 3}},
                                        kind="nginx", zone=True, workers=2)))
    assert "limit_conn_zone $dynosim_limit_key zone=dynosim_limit" in zoned.router.config(9000, [9001, 9002])

    refused = [
        ("router.concurrency_limit", {"algorithm": "aimd"}, {}, "router.concurrency_limit.algorithm"),
        ("router.concurrency_limit", {"algorithm": "gradient2"}, {}, "router.concurrency_limit.algorithm"),
        ("app.concurrency_limit", {"algorithm": "vegas"}, {}, "app.concurrency_limit.algorithm"),
        ("app.concurrency_limit", {"algorithm": "fixed", "limit": 2}, {"router.kind": "nginx"},
         "app.concurrency_limit"),
        ("app.concurrency_limit", {"algorithm": "fixed", "limit": 2}, {"app.backlog": 4}, "app.concurrency_limit"),
    ]
    for key, value, extra, named in refused:
        bad = Scenario(scenario({})).with_overrides({key: value, **extra})
        with pytest.raises(DynosimError, match=named.replace(".", r"\.")) as info:
            make_plan(bad)
        assert "\n" not in str(info.value)
    from dynosim.testbed.fleet import split
    from test_testbed_fleet import fleet_scenario

    for key in ("router.concurrency_limit", "app.concurrency_limit"):
        with pytest.raises(DynosimError, match=key.replace(".", r"\.")):
            split(Scenario(fleet_scenario()).with_overrides({key: {"algorithm": "fixed", "limit": 2}}))


@pytest.mark.needs("haproxy")
def test_haproxy_takes_the_limits_configuration(tmp_path):
    """``haproxy -c`` accepts what the testbed writes for both limits at once, without a
    warning."""
    both = scenario({"router.concurrency_limit": {"algorithm": "fixed", "limit": 3},
                     "app.concurrency_limit": {"algorithm": "fixed", "limit": 1}})
    path = tmp_path / "haproxy.cfg"
    path.write_text(make_plan(Scenario(both)).router.config(9000, [9001, 9002], [9101, 9102]))
    checked = subprocess.run([component("haproxy"), "-c", "-f", str(path)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    assert "WARNING" not in checked.stderr and "Warnings" not in checked.stdout, checked


def test_the_limits_refusals_are_counted_as_the_simulations():
    """A 503 marked X-Dynosim-Limit is errors.limit_rejected; every such try of the window's
    requests is in limit.rejected (with the clients' retries, a request may have several),
    and a fixed limit's mean is the limit. Without limits run, nothing of it is reported."""
    t0 = 1000.0
    load = {
        "start": t0, "index": [0, 0, 1, 2], "attempt": [1, 2, 1, 1], "kept": [None, "success", "exhausted", None],
        "origin": [t0 + 1, t0 + 1, t0 + 2, t0 + 3], "scheduled": [t0 + 1, t0 + 1.2, t0 + 2, t0 + 3],
        "sent": [t0 + 1, t0 + 1.2, t0 + 2, t0 + 3], "done": [t0 + 1.001, t0 + 1.3, t0 + 2.001, t0 + 3.1],
        "status": [503, 200, 503, 200], "error": [None] * 4,
        "headers": {h: [None] * 4 for h in ("x-dynosim-dyno", "x-dynosim-start", "x-dynosim-end",
                                            "x-dynosim-pool-wait", "x-dynosim-pid", "x-dynosim-limit")},
    }
    load["headers"]["x-dynosim-limit"][0] = "router"
    load["headers"]["x-dynosim-limit"][2] = "app"
    for k, (a, b) in ((1, (1.21, 1.29)), (3, (3.01, 3.09))):
        load["headers"]["x-dynosim-start"][k] = str(t0 + a)
        load["headers"]["x-dynosim-end"][k] = str(t0 + b)
        load["headers"]["x-dynosim-dyno"][k] = "0"
    kwargs = dict(dynos=1, slots=1, warmup=0.0, duration=10.0, closed=None, drawn_times=[1.0, 2.0, 3.0],
                  classes=["default"], class_of=[0, 0, 0], resources=[], retries=True)
    rep = measure.replication(load, {}, limits={"router": 3, "app": 1}, **kwargs)
    assert rep["limit"] == {"rejected": 2, "rejected_per_s": 0.2, "router_mean": 3.0, "app_mean": 1.0}
    # Request 0's first try was refused, its retry served: only request 1 failed, by the limit.
    assert rep["error_counts"]["limit_rejected"] == rep["error_counts"]["total"] == 1
    assert rep["errors"]["limit_rejected"] == pytest.approx(1 / 3)
    # The same 503 without the mark is not the limit's.
    unmarked = dict(load, headers=dict(load["headers"], **{"x-dynosim-limit": [None] * 4}))
    plain = measure.replication(unmarked, {}, limits={"router": 3}, **kwargs)
    assert plain["limit"]["rejected"] == plain["error_counts"]["limit_rejected"] == 0
    assert "limit" not in measure.replication(load, {}, **kwargs)


def max_at_once(start: List[float], end: List[float]) -> int:
    """The most intervals [start, end) open at once."""
    return measure.max_depth(np.asarray(start, dtype=float), np.asarray(end, dtype=float))


@pytest.mark.parametrize("case", [
    pytest.param("router", marks=pytest.mark.needs("haproxy", "gunicorn")),
    pytest.param("app", marks=pytest.mark.needs("haproxy", "gunicorn")),
    pytest.param("router-nginx", marks=pytest.mark.needs("nginx", "gunicorn")),
])
def test_an_overloaded_fleet_is_refused_by_its_fixed_limit_as_the_simulation_says(tmp_path, case):
    """A fleet of 2 dynos (2 sync workers each) offered 1.5 times its capacity for 6 s, behind a
    fixed limit: the router's (3 in flight, HAProxy and nginx) or each dyno's (1). Both are
    loss systems whose rejected fraction is Erlang's B, whatever the holding time's law: the
    simulation's mean is held to it within three standard errors. The real fraction is held
    to the simulation's within three standard deviations of one replication's fraction (the
    real run is one, of the same length; with the mean's own error) plus what the real
    stack's ~3 ms a request moves B by (the limiters hold each request that much longer than
    its drawn work). By count: every failure is the limit's 503, marked, and never reached
    the app; the app never worked on more requests at once than the limit lets through (3;
    1 a dyno), and did reach it."""
    doc = {"router": ROUTER, "app": APP}[case.split("-")[0]]
    if case == "router-nginx":
        doc = dict(doc, router=dict(doc["router"], kind="nginx"))
    r, real, sim, rows = run_testbed(tmp_path, f"limits-{case}", doc)
    n = real["requests"]
    assert n == sim["requests"] > 200
    if case == "app":
        a, c, what = LAMBDA * SERVICE / 2, 1, "app_mean"
    else:
        a, c, what = LAMBDA * SERVICE, 3, "router_mean"
    theory = erlang_b(a, c)
    summary = r["simulated"]["summary"]
    p_sim = summary["errors"]["limit_rejected"]
    assert abs(p_sim["mean"] - theory) <= 3 * p_sim["std_error"], (p_sim, theory)
    replications = len(r["simulated"]["per_replication"])
    one_run = p_sim["std_error"] * math.sqrt(replications)
    stack = erlang_b(a * (1 + STACK / SERVICE), c) - theory
    p_real = real["errors"]["limit_rejected"]
    assert abs(p_real - p_sim["mean"]) <= 3 * math.hypot(one_run, p_sim["std_error"]) + stack, (p_real, p_sim)

    # Counted as the simulation counts: each refusal a try of the window's requests.
    assert real["limit"]["rejected"] == real["error_counts"]["limit_rejected"] == real["error_counts"]["total"]
    assert real["limit"][what] == sim["limit"][what] == c
    assert real["limit"]["rejected_per_s"] == pytest.approx(real["limit"]["rejected"] / SECONDS, rel=0.05)
    refused = [row for row in rows if row["status"] != "200"]
    assert len(refused) == real["limit"]["rejected"] > 0
    assert all(row["status"] == "503" and not row["app_start"] for row in refused), refused[:3]
    served = [row for row in rows if row["status"] == "200"]
    groups = [served] if case != "app" else [[row for row in served if row["dyno"] == str(d)] for d in (0, 1)]
    for group in groups:
        at_once = max_at_once([float(row["app_start"]) for row in group], [float(row["app_end"]) for row in group])
        assert at_once == c, (case, at_once)
