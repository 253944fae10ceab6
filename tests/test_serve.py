"""The playground's server (issue #27), through Starlette's TestClient: what the page asks and
what it gets, the refusals (4xx with a message, never a traceback), files only under --data,
the budgets, one run per client; and `dynosim serve` as a user starts and stops it. The page
itself, in Chromium, is tested in test_browser.py."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import require

require("starlette", "uvicorn")  # the 'ui' extra (pip install 'dynosim[ui]'); make install has it
import warnings  # noqa: E402

with warnings.catch_warnings():
    # Starlette 1.x would rather have httpx2 drive its TestClient; httpx still does.
    warnings.simplefilter("ignore", DeprecationWarning)
    from starlette.testclient import TestClient  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from conftest import BUILTIN, end_process  # noqa: E402
from dynosim import _dynosim, serve  # noqa: E402
from dynosim.errors import ScenarioError  # noqa: E402

RAPGENIUS = (BUILTIN / "rapgenius.toml").read_text(encoding="utf-8")
QUICK = {"run.replications": 2, "run.duration": "60s", "run.warmup": "10s"}


@pytest.fixture(scope="module")
def client():
    with TestClient(serve.make_app()) as c:
        yield c


def run(client, toml=RAPGENIUS, set=None, policies=None, **headers):
    return client.post("/api/run", json={"toml": toml, "set": {**QUICK, **(set or {})}, "policies": policies},
                       headers=headers)


def test_the_page_and_only_its_files_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and "dynosim playground" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in serve.STATIC:
        assert client.get(f"/static/{name}").status_code == 200
    assert client.get("/static/..%2F..%2Fserve.py").status_code == 404
    assert client.get("/static/playground.html").status_code == 404


def test_scenarios_lists_the_builtins_and_what_the_controls_offer(client):
    doc = client.get("/api/scenarios").json()
    names = [s["name"] for s in doc["scenarios"]]
    assert "rapgenius" in names and all(s["toml"] for s in doc["scenarios"])
    assert doc["policies"] == _dynosim.registry()["policies"]
    assert "standard-2x" in doc["dyno_types"] and "heroku" in doc["autoscalers"]
    assert {c["key"] for c in doc["controls"]} >= {"fleet.dynos", "router.policy", "arrivals.rate", "app.processes",
                                                  "app.threads", "fleet.type", "router.timeout", "autoscale.rule"}


def test_a_run_answers_what_the_report_shows(client):
    r = run(client, policies=["random", "intelligent"])
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["values"]["fleet.dynos"] == 75 and doc["values"]["router.policy"] == "random,intelligent"
    assert "<table>" in doc["html"] and "intelligent" in doc["html"]
    titles = [p["title"] for p in doc["plots"]]
    assert "Response time" in titles and "Per-dyno queues: intelligent" in titles
    assert tomllib.loads(doc["toml"])["run"]["replications"] == 2
    assert "9,000 requests a minute" in doc["words"]


def test_the_controls_change_the_scenario(client):
    doc = run(client, set={"fleet.dynos": 100, "arrivals.rate": "100/s"}).json()
    assert doc["values"]["fleet.dynos"] == 100 and doc["values"]["arrivals.rate"] == "100/s"
    assert tomllib.loads(doc["toml"])["fleet"]["dynos"] == 100
    assert "6,000 requests a minute" in doc["words"]


def test_a_toml_mistake_names_its_line(client):
    broken = RAPGENIUS.replace("[fleet]", "[fleet\n", 1)
    line = broken.splitlines().index("[fleet") + 1
    r = run(client, toml=broken)
    assert r.status_code == 400
    assert r.json()["line"] == line and "invalid TOML" in r.json()["error"]


def test_a_bad_value_names_its_key_and_line(client):
    bad = RAPGENIUS.replace("dynos = 75", "dynos = -3")
    r = run(client, toml=bad)
    assert r.status_code == 400
    body = r.json()
    assert "fleet.dynos" in body["error"]
    assert body["line"] == bad.splitlines().index(next(l for l in bad.splitlines() if "dynos = -3" in l)) + 1
    assert "Traceback" not in r.text


EMPIRICAL = """
name = "files"
[arrivals]
process = "poisson"
rate = "20/s"
[service]
distribution = "empirical"
file = "{file}"
[fleet]
dynos = 4
"""


def test_files_are_read_only_under_data(tmp_path):
    (tmp_path / "times.txt").write_text("40ms\n60ms\n80ms\n")
    with TestClient(serve.make_app()) as c:
        r = run(c, toml=EMPIRICAL.format(file="times.txt"))
        assert r.status_code == 400 and "reads no file" in r.json()["error"] and r.json()["key"] == "service.file"
        r = run(c, toml=EMPIRICAL.format(file="/etc/passwd"))
        assert r.status_code == 400
    with TestClient(serve.make_app(tmp_path)) as c:
        assert run(c, toml=EMPIRICAL.format(file="times.txt")).status_code == 200
        r = run(c, toml=EMPIRICAL.format(file="../../etc/passwd"))
        assert r.status_code == 400 and "not under the --data folder" in r.json()["error"]
        replay = ('name = "r"\n[arrivals]\nprocess = "replay"\nfile = "/etc/hostname"\n[service]\n'
                  'distribution = "constant"\nvalue = "10ms"\n[fleet]\ndynos = 2\n')
        assert run(c, toml=replay).status_code == 400


def test_malformed_requests_get_a_4xx_with_a_message(client):
    cases = [
        client.post("/api/run", content=b"not json", headers={"content-type": "application/json"}),
        client.post("/api/run", json=[1, 2]),
        client.post("/api/run", json={"toml": 3}),
        client.post("/api/run", json={"toml": RAPGENIUS, "set": [1]}),
        client.post("/api/run", json={"toml": RAPGENIUS, "policies": "random"}),
        client.post("/api/run", json={"toml": RAPGENIUS, "policies": ["no-such-policy"]}),
        client.post("/api/run", json={"toml": RAPGENIUS, "set": {"fleet.nonsense": 1}}),
    ]
    for r in cases:
        assert 400 <= r.status_code < 500, r.text
        assert r.json()["error"] and "Traceback" not in r.text
    assert client.get("/api/run").status_code == 405
    assert client.get("/nowhere").status_code == 404


def test_a_body_over_the_cap_is_refused(client):
    big = RAPGENIUS + "\n#" + "x" * serve.MAX_BODY
    r = client.post("/api/run", json={"toml": big})
    assert r.status_code == 413 and "larger than" in r.json()["error"]


def test_runs_are_held_to_the_servers_budgets(client):
    # Asking for a larger budget does not get it: the server's cap applies.
    r = run(client, set={"arrivals.rate": "100000/s", "fleet.dynos": 50000, "run.duration": "10h",
                         "run.max_requests": 1e12})
    assert r.status_code == 400 and "work budget" in r.json()["error"] or "max_requests" in r.json()["error"]


@pytest.fixture(scope="module")
def live():
    """A real server (`dynosim serve`), for requests at the same time."""
    proc, where = start_cli()
    try:
        yield where
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            end_process(proc)


def post(where, settings, client_id):
    body = json.dumps({"toml": RAPGENIUS, "set": {**QUICK, **settings}}).encode()
    request = urllib.request.Request(f"http://{where}/api/run", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "X-Dynosim-Client": client_id})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


SLOW = {"arrivals.rate": "3000/s", "fleet.dynos": 1500, "run.duration": "30min", "run.replications": 4}


def test_a_newer_run_of_the_same_client_cancels_the_older(live):
    answers = {}
    t = threading.Thread(target=lambda: answers.setdefault("first", post(live, SLOW, "page-1")))
    t.start()
    time.sleep(1.0)
    answers["second"] = post(live, {}, "page-1")
    t.join(timeout=120)
    assert answers["second"][0] == 200
    status, body = answers["first"]
    assert status == 409 and "cancelled" in body["error"]


def test_another_clients_run_is_not_cancelled(live):
    answers = {}
    t = threading.Thread(target=lambda: answers.setdefault("a", post(live, {"run.replications": 4}, "page-a")))
    t.start()
    time.sleep(0.2)
    answers["b"] = post(live, {}, "page-b")
    t.join(timeout=120)
    assert answers["a"][0] == 200 and answers["b"][0] == 200


def test_the_report_download_is_the_html_report(client):
    r = client.post("/api/report", json={"toml": RAPGENIUS, "set": QUICK})
    assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
    assert "<!doctype html>" in r.text.lower() and "default-src 'none'" in r.text


def test_loopback_is_recognised():
    from dynosim.cli.serve import _is_loopback
    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and _is_loopback("localhost")
    assert _is_loopback("127.0.0.2")
    assert not _is_loopback("0.0.0.0") and not _is_loopback("192.0.2.1")


def start_cli(*args):
    """`dynosim serve` in a process group of its own; its URL once it listens."""
    proc = subprocess.Popen([sys.executable, "-m", "dynosim", "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = proc.stdout.readline()
    if not line:
        end_process(proc)
        pytest.fail(f"serve did not start: {proc.stderr.read()}")
    return proc, line.split("http://", 1)[1].split("/", 1)[0]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_serve_prints_its_url_serves_and_stops(stop):
    proc, where = start_cli("rapgenius")
    try:
        assert where.startswith("127.0.0.1:")
        with urllib.request.urlopen(f"http://{where}/api/scenarios", timeout=10) as r:
            assert json.loads(r.read())["initial"] == {"name": "rapgenius", "toml": None}
        os.killpg(proc.pid, stop)
        assert proc.wait(timeout=20) in (0, 130, 143, -stop)
        assert "Traceback" not in proc.stderr.read()
    finally:
        end_process(proc)


def test_serve_opens_a_scenario_file_and_refuses_a_bad_one(tmp_path):
    good = tmp_path / "mine.toml"
    good.write_text(RAPGENIUS.replace('name = "rapgenius"', 'name = "mine"'))
    proc, where = start_cli(str(good))
    try:
        with urllib.request.urlopen(f"http://{where}/api/scenarios", timeout=10) as r:
            initial = json.loads(r.read())["initial"]
        assert initial["name"] == "" and 'name = "mine"' in initial["toml"]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=20)
        end_process(proc)
    bad = tmp_path / "bad.toml"
    bad.write_text(RAPGENIUS.replace("dynos = 75", "dynos = -1"))
    result = subprocess.run([sys.executable, "-m", "dynosim", "serve", str(bad), "--port", "0"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "fleet.dynos" in result.stderr and "Traceback" not in result.stderr


def test_the_pages_runs_use_no_more_threads_than_the_machine_has():
    from dynosim.serve import scenario_from_page
    body = {"toml": RAPGENIUS, "set": {"run.threads": 512}}  # valid, above any test machine's cores
    scenario, _ = scenario_from_page(body, None, [])
    assert scenario.doc["run"]["threads"] == "auto"
    body = {"toml": RAPGENIUS, "set": {"run.threads": 1}}
    scenario, _ = scenario_from_page(body, None, [])
    assert scenario.doc["run"]["threads"] == 1


# --- the server as a whole (issue 34): runs at once, their memory, a bounded queue ---------------


def admission(**limits):
    """A Runs with limits, whose engine cancellations are recorded rather than made."""
    cancelled = []
    return serve.Runs(cancel=cancelled.append, **limits), cancelled


def test_admission_holds_runs_memory_and_the_queue_first_come_first_served():
    async def scenario():
        runs, _ = admission(max_runs=2, max_memory=100, max_queue=2)
        a, b, c, d = (runs.start(name) for name in "abcd")
        await runs.admit(a, 60)
        # Two runs may run at once, but the memory has room for one of these: b waits, and c
        # (which would fit) waits behind it rather than overtaking it.
        waiting_b = asyncio.ensure_future(runs.admit(b, 60))
        waiting_c = asyncio.ensure_future(runs.admit(c, 10))
        await asyncio.sleep(0)
        assert not waiting_b.done() and not waiting_c.done()
        assert runs.status("b")["position"] == 1 and runs.status("c")["position"] == 2
        assert runs.status("a")["position"] is None
        # The queue is full: d is refused at once, with when to come back.
        with pytest.raises(serve.Refused) as refused:
            await runs.admit(d, 1)
        assert refused.value.status == 503 and int(refused.value.headers()["Retry-After"]) >= 1
        assert "busy" in str(refused.value) and "--max-queue 2" in str(refused.value)
        runs.done("d", d)
        assert runs.status()["runs"] == 1 and runs.memory == 60
        # a ends: b and then c run (60 + 10 <= 100, two runs).
        runs.done("a", a, seconds=2.0)
        await asyncio.wait_for(asyncio.gather(waiting_b, waiting_c), 5)
        assert runs.status()["runs"] == 2 and runs.memory == 70 and runs.status()["queued"] == 0
        runs.done("b", b)
        runs.done("c", c)
        assert runs.status()["memory"] == 0 and runs.peak_memory == 100 - 30 and runs.peak_runs == 2

    asyncio.run(scenario())


def test_a_run_larger_than_the_whole_limit_is_refused_at_once():
    async def scenario():
        runs, _ = admission(max_runs=4, max_memory=100, max_queue=4)
        token = runs.start("big")
        with pytest.raises(serve.Refused) as refused:
            await asyncio.wait_for(runs.admit(token, 101), 5)
        assert refused.value.status == 400 and "--max-memory" in str(refused.value)
        runs.done("big", token)
        assert runs.status()["queued"] == 0 and runs.memory == 0

    asyncio.run(scenario())


def test_a_newer_request_of_a_client_releases_its_older_one_running_or_queued():
    async def scenario():
        runs, cancelled = admission(max_runs=1, max_memory=100, max_queue=1)
        first = runs.start("page")
        await runs.admit(first, 50)
        other = runs.start("other")
        queued = asyncio.ensure_future(runs.admit(other, 50))
        await asyncio.sleep(0)
        # The running one is cancelled in the engine; its memory is held until its engine call
        # returns (done), and the newer request keeps its place, ahead of "other", although
        # the queue (1) is full.
        second = runs.start("page")
        assert cancelled == [first] and runs.why(first) == "newer"
        admitted = asyncio.ensure_future(runs.admit(second, 50))
        await asyncio.sleep(0)
        assert runs.status("page")["position"] == 1 and runs.status("other")["position"] == 2
        assert runs.memory == 50
        runs.done("page", first)
        await asyncio.wait_for(admitted, 5)
        assert not queued.done() and runs.memory == 50
        # A queued request replaced: it leaves the queue at once (Ended, answered 409).
        newer = runs.start("other")
        with pytest.raises(serve.Ended) as ended:
            await asyncio.wait_for(queued, 5)
        assert ended.value.why == "newer" and ended.value.refused().status == 409
        runs.done("other", other)
        assert runs.status("other")["position"] is None and runs.status()["queued"] == 0
        runs.done("page", second)
        runs.done("other", newer)
        assert runs.memory == 0

    asyncio.run(scenario())


def test_stopping_refuses_the_queue_and_cancels_the_runs():
    async def scenario():
        runs, cancelled = admission(max_runs=1, max_memory=100, max_queue=4)
        a, b = runs.start("a"), runs.start("b")
        await runs.admit(a, 10)
        queued = asyncio.ensure_future(runs.admit(b, 10))
        await asyncio.sleep(0)
        runs.stop()
        with pytest.raises(serve.Ended) as ended:
            await asyncio.wait_for(queued, 5)
        assert ended.value.refused().status == 503 and cancelled == [a] and runs.why(a) == "stopping"
        runs.done("a", a)
        runs.done("b", b)
        late = runs.start("late")
        with pytest.raises(serve.Ended):
            await runs.admit(late, 1)
        assert runs.memory == 0 and runs.status()["runs"] == 0

    asyncio.run(scenario())


def test_a_run_that_fails_releases_its_place(monkeypatch):
    app = serve.make_app(max_runs=1, max_memory=1e9, max_queue=1)

    def fails(*args, **kwargs):
        raise ScenarioError("run.duration: something only a run finds")

    def crashes(*args, **kwargs):
        raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False) as c:
        monkeypatch.setattr(serve, "run_for_page", fails)
        r = run(c)
        assert r.status_code == 400 and "only a run finds" in r.json()["error"]
        monkeypatch.setattr(serve, "run_for_page", crashes)
        assert run(c).status_code == 500  # a bug's answer, but its place is released all the same
        status = c.get("/api/status").json()
        assert status["runs"] == 0 and status["memory"] == 0 and status["peak_memory"] > 0
        monkeypatch.undo()
        assert run(c).status_code == 200


def asgi_post(app, path, body, client, gone):
    """A POST to the app as a server makes it, whose client closes the connection once `gone`
    is set."""
    sent = []
    messages = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"x-dynosim-client", client.encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8050)}
    return asyncio.ensure_future(app(scope, receive, send)), sent


async def until(condition, what, timeout=60.0):
    """Waits for `condition()` (a state the server reaches), failing after `timeout` s."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"not reached in {timeout} s: {what}")
        await asyncio.sleep(0.02)


def test_a_client_that_leaves_releases_its_run_and_its_place():
    app = serve.make_app(max_runs=1, max_memory=1e9, max_queue=2)
    runs = app.state.runs
    body = {"toml": RAPGENIUS, "set": {**QUICK, **SLOW}}

    async def scenario():
        left_running, left_waiting = asyncio.Event(), asyncio.Event()
        running, _ = asgi_post(app, "/api/run", body, "one", left_running)
        await until(lambda: runs.status()["runs"] == 1, "the first request runs")
        waiting, _ = asgi_post(app, "/api/run", body, "two", left_waiting)
        await until(lambda: runs.status()["queued"] == 1, "the second request waits")
        assert runs.status("two")["position"] == 1 and runs.memory > 0
        # The waiting client leaves: its place is given up; the run goes on.
        left_waiting.set()
        await asyncio.wait_for(waiting, 60)
        assert runs.status()["queued"] == 0 and runs.status()["runs"] == 1
        # The running one's client leaves: its engine run is cancelled and its memory released.
        left_running.set()
        await asyncio.wait_for(running, 60)
        assert runs.status()["runs"] == 0 and runs.memory == 0

    asyncio.run(scenario())


def test_the_status_says_the_limits_and_the_load(client):
    status = client.get("/api/status", headers={"X-Dynosim-Client": "someone"}).json()
    assert status["max_runs"] == serve.default_max_runs() and status["max_memory"] == serve.default_max_memory()
    assert status["max_queue"] == 4 * status["max_runs"]
    assert status["runs"] == 0 and status["queued"] == 0 and status["memory"] == 0 and status["position"] is None


def test_a_run_is_held_to_the_servers_memory_and_refused_when_it_alone_is_over():
    from dynosim.serve import held, run_memory, scenario_from_page
    # 1e5 dynos, 4 replications on 2 threads: the engine runs as many at once as the threads
    # and the memory limit allow.
    body = {"toml": RAPGENIUS,
            "set": {**QUICK, "fleet.dynos": 100000, "arrivals.rate": "50000/s", "run.replications": 4,
                    "run.threads": 2}}

    def described(limit):
        scenario, policies = scenario_from_page(body, None, [], max_memory=limit)
        return [scenario.for_policy(p).describe() for p in scenario.policies], run_memory(scenario, policies, limit)

    wide, _ = described(1e9)
    one = max(d["replication_bytes"] for d in wide)
    assert all(d["run_bytes"] == 2 * d["replication_bytes"] for d in wide)  # two threads
    # 1.5 replications' memory has room for one at a time, though two threads would run two.
    narrow, need = described(1.5 * one)
    assert all(d["run_bytes"] == d["replication_bytes"] for d in narrow)
    # A request counts its largest: a policy's replications at once, or a policy's trace (the
    # report's series over time: one replication on the event-driven engine, here larger).
    assert need == max(max(d["run_bytes"], d["trace_bytes"]) for d in narrow) > 1.5 * one
    # So this one is refused before it asks for a place: it would never fit.
    runs, _ = admission(max_runs=1, max_memory=1.5 * one, max_queue=1)
    with pytest.raises(serve.Refused) as refused:
        runs.check(need)
    assert refused.value.status == 400 and "--max-memory" in str(refused.value)
    runs.check(1.5 * one)
    # Alone over the limit: refused before it runs, naming the keys and the server's limit.
    body["set"]["fleet.dynos"] = 3_000_000
    with pytest.raises(serve.Refused) as refused:
        scenario_from_page(body, None, [], max_memory=100e6)
    assert refused.value.status == 400 and "--max-memory" in str(refused.value) and refused.value.key == "fleet"
    # A case's own keys are held to the budgets too.
    cases = RAPGENIUS + '\n[[cases]]\nlabel = "big"\nset = { "run.max_memory" = "100GB" }\n'
    scenario, _ = scenario_from_page({"toml": cases}, None, [], max_memory=300e6)
    assert [case.doc["run"]["max_memory"] for _, case in serve.each_run(scenario, 300e6)] == [300e6]
    assert held(scenario, 300e6).doc["run"]["max_memory"] == 300e6


def test_a_file_named_by_a_case_is_refused_too():
    case = RAPGENIUS + ('\n[[cases]]\nlabel = "x"\n'
                        'set = { "service.distribution" = "empirical", "service.file" = "/etc/passwd" }\n')
    with pytest.raises(serve.Refused) as refused:
        serve.scenario_from_page({"toml": case}, None, serve.path_keys())
    assert "reads no file" in str(refused.value)


#: A run of 1e5 dynos that takes many seconds, counted (by the engine's bounds, its report's
#: trace the largest) as about 0.67 GB, the seed scenario as 0.64 GB: under --max-memory 1GB
#: only one runs at a time, whatever --max-runs says (nothing near that is allocated).
HEAVY = {"fleet.dynos": 100000, "arrivals.rate": "50000/s", "run.duration": "7min", "run.warmup": "0s",
         "run.replications": 2}
LIMITS = ["--max-runs", "2", "--max-memory", "1GB", "--max-queue", "2"]


def status_of(where, client=None):
    headers = {"X-Dynosim-Client": client} if client else {}
    request = urllib.request.Request(f"http://{where}/api/status", headers=headers)
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.loads(r.read())


def post_with_headers(where, settings, client_id):
    """`post`, with the answer's headers."""
    body = json.dumps({"toml": RAPGENIUS, "set": {**QUICK, **settings}}).encode()
    request = urllib.request.Request(f"http://{where}/api/run", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "X-Dynosim-Client": client_id})
    try:
        with urllib.request.urlopen(request, timeout=300) as r:
            return r.status, json.loads(r.read()), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), {k.lower(): v for k, v in e.headers.items()}


def wait_for(condition, what, timeout=120.0):
    """Polls `condition()` (a state the server reaches), failing after `timeout` s."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"not reached in {timeout} s: {what}")
        time.sleep(0.05)


def test_a_flood_is_held_to_the_servers_limits_and_it_answers_after():
    proc, where = start_cli(*LIMITS)
    try:
        samples, sampling = [], threading.Event()

        def sample():
            while not sampling.is_set():
                samples.append(status_of(where))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        answers = {}
        # Eight heavy requests at once, each with its own client id: the ids buy nothing.
        flood = [threading.Thread(target=lambda i=i: answers.__setitem__(f"flood-{i}", post_with_headers(
            where, HEAVY, f"flood-{i}"))) for i in range(8)]
        for t in flood:
            t.start()
        # One runs, two wait, the others are refused (503, with when to come back).
        wait_for(lambda: len(answers) >= 5 or not any(t.is_alive() for t in flood), "the refusals")
        in_line = [cid for cid in (f"flood-{i}" for i in range(8)) if cid not in answers]
        for status, body, headers in list(answers.values()):
            assert status == 200 or status == 503 and "busy" in body["error"] and int(headers["retry-after"]) >= 1
        # The requests still in: each page asks again with a small run, which cancels its
        # older heavy one (409) and keeps its place.
        again = {}
        followers = [threading.Thread(target=lambda cid=cid: again.__setitem__(cid, post_with_headers(where, {}, cid)))
                     for cid in in_line]
        for t in followers:
            t.start()
        for t in flood + followers:
            t.join(timeout=300)
        sampling.set()
        sampler.join()
        assert all(answers[cid][0] in (200, 409) for cid in in_line)
        assert all(status == 200 for status, _, _ in again.values()) and len(again) == len(in_line)
        assert {status for status, _, _ in answers.values()} <= {200, 409, 503}
        # The memory accounted for never went over --max-memory, at any sample or at its peak
        # (which let one of these runs at a time, under --max-runs 2), nor the runs over
        # --max-runs, nor the queue over --max-queue (and a place for each run's newer request).
        final = status_of(where)
        assert (final["max_runs"], final["max_memory"], final["max_queue"]) == (2, 1e9, 2)
        assert samples and all(s["memory"] <= 1e9 and s["runs"] <= 2 and s["queued"] <= 2 + 2 for s in samples)
        assert 0 < final["peak_memory"] <= 1e9 and final["peak_runs"] == 1 and final["peak_queued"] <= 2 + 2
        assert final["busy"] == sum(1 for s, _, _ in answers.values() if s == 503)
        # Afterwards, a small run answers normally.
        status, body, _ = post_with_headers(where, {}, "afterwards")
        assert status == 200 and "<table>" in body["html"]
        assert status_of(where)["memory"] == 0
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            end_process(proc)


def test_a_client_that_closes_its_connection_frees_the_server(live):
    """As uvicorn tells it: a page that goes away (its fetch aborted, its tab closed) no
    longer holds a run."""
    import socket

    body = json.dumps({"toml": RAPGENIUS, "set": {**QUICK, **HEAVY}}).encode()
    host, port = live.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /api/run HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                  b"X-Dynosim-Client: closing\r\nContent-Length: %d\r\n\r\n" % (live.encode(), len(body)) + body)
        wait_for(lambda: status_of(live)["runs"] == 1, "the run starts")
        assert status_of(live)["memory"] > 0
    wait_for(lambda: status_of(live)["runs"] == 0, "the run is cancelled")
    assert status_of(live)["memory"] == 0


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_server_cancels_its_runs_and_its_queue(stop):
    proc, where = start_cli("--max-runs", "1", "--max-queue", "1")
    try:
        answers = {}
        running = threading.Thread(target=lambda: answers.setdefault("running", post_with_headers(where, HEAVY, "a")))
        running.start()
        wait_for(lambda: status_of(where)["runs"] == 1, "the first run starts")
        queued = threading.Thread(target=lambda: answers.setdefault("queued", post_with_headers(where, HEAVY, "b")))
        queued.start()
        wait_for(lambda: status_of(where, "b")["position"] == 1, "the second waits")
        os.killpg(proc.pid, stop)
        running.join(timeout=60)
        queued.join(timeout=60)
        for status, body, headers in answers.values():
            assert status == 503 and "stopping" in body["error"] and "retry-after" in headers
        assert proc.wait(timeout=30) in (0, 130, 143, -stop)
        assert "Traceback" not in proc.stderr.read()
    finally:
        end_process(proc)
