"""The playground's server (issue #27), through Starlette's TestClient: what the page asks and
what it gets, the refusals (4xx with a message, never a traceback), files only under --data,
the budgets, one run per client; and `dynosim serve` as a user starts and stops it. The page
itself, in Chromium, is tested in test_browser.py."""

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
