"""`dynosim logs summary` and `dynosim.logs.summary` on the fixtures of tests/fixtures/logs
(what each line is: their README), against figures worked out by hand; and every kind of bad
input: one line naming the file (and the malformed lines' numbers), exit code 2."""

import gzip
import os
import json
import re
import sys

import pytest

from conftest import ROOT, assert_one_line_error, run_cli, run_process
import dynosim
from dynosim import logs
from dynosim.errors import DynosimError, LogError

FIXTURES = ROOT / "tests" / "fixtures" / "logs"


def fixture(name):
    return str(FIXTURES / name)


def run_json(cli, *args):
    result = cli("logs", "summary", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


# --- the worked example (docs/logs.md) -------------------------------------------------------


def test_heroku_log_summary_fields(cli):
    doc, stderr = run_json(cli, fixture("heroku.log"))
    # lines 2-5, 7-11 are requests; 12 is cut short; 13 repeats line 3's request id; 1 and 6
    # are an app's and a dyno's lines
    assert (doc["requests"], doc["malformed"], doc["duplicates"], doc["other_lines"]) == (9, 1, 1, 2)
    assert doc["first"] == "2014-01-09T06:16:50.100000+00:00"
    assert doc["last"] == "2014-01-09T06:16:57.700000+00:00"
    assert doc["span_seconds"] == 7.6
    assert doc["rate_per_s"] == pytest.approx(9 / 7.6)
    assert doc["dynos"] == 2
    # service times 10, 20, 30, 40, 60, 120 and 30000 ms: nearest rank p50 is the 4th
    assert doc["service"] == {"count": 7, "mean": pytest.approx(30.28 / 7), "p50": 0.04, "p90": 30.0,
                              "p95": 30.0, "p99": 30.0, "max": 30.0}
    assert doc["status"] == {"200": 4, "201": 1, "404": 1, "503": 3}
    assert doc["errors"] == {"H10": 1, "H12": 1, "H13": 1}
    routes = {r["route"]: r for r in doc["routes"]}
    assert routes["GET /users/:id"]["count"] == 4
    # 20, 30, 40, 30000 ms
    assert (routes["GET /users/:id"]["service"]["p50"], routes["GET /users/:id"]["service"]["max"]) == (0.03, 30.0)
    assert routes["GET /search/hello world"]["service"]["p50"] == 0.01
    assert routes["GET /"]["service"] is None
    assert [d["dyno"] for d in doc["per_dyno"]] == ["web.1", "web.2"]
    assert doc["per_dyno"][0]["busy_seconds"] == pytest.approx(30.15)
    assert "heroku.log:12: no status=" in stderr
    assert stderr.startswith("dynosim: warning: 1 malformed line skipped")


def test_series_accounts_for_every_request_and_every_second_of_service(cli):
    doc, _ = run_json(cli, fixture("heroku.log"))
    assert doc["interval_seconds"] == 1.0
    assert doc["series"][0]["start"] == "2014-01-09T06:16:24.000000+00:00"  # the H12 began 30 s early
    assert sum(p["requests"] for p in doc["series"]) == doc["requests"]
    assert sum(p["in_service"] for p in doc["series"]) * doc["interval_seconds"] == pytest.approx(30.28)
    doc, _ = run_json(cli, fixture("heroku.log"), "--interval", "10s")
    assert [p["requests"] for p in doc["series"]] == [0, 0, 0, 9]
    assert doc["series"][0]["in_service"] == pytest.approx(0.6)  # 6 s of the H12 in [06:16:20, 30)


def test_human_output(cli):
    result = cli("logs", "summary", "heroku.log", cwd=FIXTURES)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "heroku.log: 9 requests from 2014-01-09 06:16:50.100 to 06:16:57.700 UTC\n7.6 s, 1.18 req/s, 2 dynos\n" in out
    assert "skipped: 1 malformed line, 1 duplicate, 2 lines of other sources" in out
    assert "p50 40 ms, p90 30 s" in out
    # 34 one-second intervals from the H12's start; two lines end in 06:16:52; there the H12,
    # 0.12 s of line 4 and 0.03 s of line 11 are 1.15 requests in service
    assert "rate per 1 s interval (34 intervals): median 0, max 2 req/s\nin service per interval: mean 0.891, max 1.15\n" in out
    assert "status: 200 × 4, 201 × 1, 404 × 1, 503 × 3" in out
    assert re.search(r"GET /users/:id\s+4\s+1\s", out), out
    assert re.search(r"H12\s+1\s+Request timeout", out), out
    assert re.search(r"web\.1\s+4\s+30\.1\s+3\.97", out), out
    assert "Traceback" not in result.stderr


# --- the API ---------------------------------------------------------------------------------


def test_api_returns_the_json_document(cli):
    doc = logs.summary(fixture("heroku.log"))
    cli_doc, _ = run_json(cli, fixture("heroku.log"))
    cli_doc["files"][0]["name"] = doc["files"][0]["name"]
    cli_doc["malformed_lines"][0]["file"] = doc["malformed_lines"][0]["file"]
    assert doc == cli_doc


def test_api_options():
    doc = logs.summary([fixture("heroku-2025-router2.log"), fixture("heroku-2020.log")], host="www.123-bibel.de")
    assert (doc["requests"], doc["other_hosts"]) == (7, 3)
    assert doc["hosts"]["www.123-bibel.de"] == 7
    doc = logs.summary(fixture("heroku.log"), top_routes=1)
    assert [(r["route"], r["count"]) for r in doc["routes"]] == [("GET /users/:id", 4), ("(other)", 5)]
    doc = logs.summary(fixture("nginx-upstream.log"), format="nginx",
                       log_format=(FIXTURES / "nginx-upstream.format").read_text())
    assert (doc["requests"], doc["duplicates"], doc["service"]["max"]) == (2, 1, 0.059)


def test_api_errors_are_log_errors():
    with pytest.raises(LogError, match=r"truncated\.log\.gz: truncated gzip file: .*, after \d+ lines"):
        logs.summary(fixture("truncated.log.gz"))
    with pytest.raises(LogError, match="unknown log format 'apache'"):
        logs.summary(fixture("heroku.log"), format="apache")
    with pytest.raises(ValueError):  # LogError is a ValueError, like the other input errors
        logs.summary(fixture("garbled.log"))
    with pytest.raises(DynosimError, match="no log given"):
        logs.summary([])


# --- formats and eras ------------------------------------------------------------------------


@pytest.mark.parametrize("name, requests, malformed, formats", [
    ("heroku-2012-legacy.log", 5, 0, {"heroku": 5}),
    ("heroku-2013-drain.log", 3, 0, {"heroku": 3}),
    ("heroku-2020.log", 3, 0, {"heroku": 3}),
    ("heroku-2025-router2.log", 7, 0, {"heroku": 7}),
    ("heroku-crlf.log", 4, 0, {"heroku": 4}),
    ("heroku.log.gz", 9, 1, {"heroku": 9}),
    ("haproxy.log", 11, 0, {"haproxy": 11}),
    ("nginx.log", 7, 0, {"nginx": 7}),
])
def test_every_format_and_era(name, requests, malformed, formats):
    doc = logs.summary(fixture(name))
    assert (doc["requests"], doc["malformed"]) == (requests, malformed)
    assert doc["formats"] == formats


def test_haproxy_timers_give_service_and_connect():
    doc = logs.summary(fixture("haproxy.log"))
    # Ta - Tq - Tw - Tc of the nine lines that reached a server: 0, 0, 1, 1, 1, 1, 5, 5, 69 ms
    assert (doc["service"]["count"], doc["service"]["p50"], doc["service"]["max"]) == (9, 0.001, 0.069)
    assert doc["errors"] == {"SC": 1, "sQ": 1}
    assert doc["connect"]["max"] == 0.03


def test_files_are_read_as_one_log_in_any_order(cli):
    doc, _ = run_json(cli, fixture("haproxy.log"), fixture("nginx.log"), fixture("heroku.log"))
    assert doc["requests"] == 11 + 7 + 9
    assert [f["requests"] for f in doc["files"]] == [11, 7, 9]


def test_standard_input(cli):
    data = (FIXTURES / "heroku.log.gz").read_bytes()
    result = run_process([sys.executable, "-m", "dynosim", "logs", "summary", "-", "--json"], input=data, timeout=60)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["files"][0]["name"], doc["requests"]) == ("<stdin>", 9)


def test_plot_is_written(cli, tmp_path):
    out = tmp_path / "traffic.png"
    result = cli("logs", "summary", fixture("heroku.log"), "--plot", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in result.stderr


def test_no_subcommand_prints_help(cli):
    result = cli("logs")
    assert result.returncode == 0
    assert all(verb in result.stdout for verb in ("summary", "fit", "replay"))


# --- bad input: one line, exit 2, nothing on stdout, no file written ---------------------------


def test_truncated_gzip(cli, tmp_path):
    out = tmp_path / "p.png"
    result = cli("logs", "summary", fixture("truncated.log.gz"), "--plot", str(out))
    assert_one_line_error(result, "truncated.log.gz: truncated gzip file", "after")
    lines_read = int(re.search(r"after (\d+) lines", result.stderr).group(1))
    whole = len(gzip.decompress((FIXTURES / "heroku.log.gz").read_bytes()).splitlines()) * 20
    assert 0 < lines_read < whole
    assert not out.exists()


def test_garbled_log_names_its_lines(cli):
    result = cli("logs", "summary", fixture("garbled.log"))
    assert_one_line_error(result, "no request read: 3 of 3 lines malformed", "garbled.log:1: ", "garbled.log:3: ")


@pytest.mark.parametrize("args, fragments", [
    (["nope.log"], ["nope.log: cannot read: No such file or directory"]),
    ([str(FIXTURES)], ["is a folder"]),
    ([fixture("heroku.log"), "--interval", "0"], ["--interval: expected a positive duration"]),
    ([fixture("heroku.log"), "--interval", "10us"], ["--interval: ", "too fine for this log"]),
    ([fixture("heroku.log"), "--format", "apache"], ["invalid choice: 'apache'"]),
    ([fixture("heroku.log"), "--routes", "0"], ["--routes"]),
    ([fixture("nginx.log"), "--log-format", "$status"], ["--log-format: it has no time"]),
    ([fixture("nginx.log"), "--log-format", "@missing.format"], ["--log-format: cannot read missing.format"]),
    ([fixture("heroku-2020.log"), "--host", "x.com"],
     ["--host x.com: no request to that host; hosts in the log: dental-laboratory.herokuapp.com, "]),
    ([fixture("heroku.log"), "--plot", "out.svg"], ["--plot: the plot is a PNG"]),
    ([fixture("heroku.log"), "--format", "haproxy"], ["no request read: 13 of 13 lines malformed",
                                                     "heroku.log:1: not an HAProxy HTTP log line"]),
])
def test_bad_input_is_one_line(cli, tmp_path, args, fragments):
    assert_one_line_error(cli("logs", "summary", *args, cwd=tmp_path), *fragments)


def test_empty_log(cli, tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert_one_line_error(cli("logs", "summary", str(empty)), "empty.log: empty: no lines to summarise")


# --- the docs show what the command prints ------------------------------------------------------


def test_docs_worked_example_is_the_actual_output():
    """docs/logs.md pastes the output of its worked example: it must still be what the command
    prints (warning on stderr first, then stdout; trailing spaces aside)."""
    text = (ROOT / "docs" / "logs.md").read_text(encoding="utf-8")
    block = re.search(r"```console\n\$ (dynosim logs summary tests/fixtures/logs/heroku\.log)\n(.*?)```", text, re.S)
    assert block, "the worked example's console block"
    command, shown = block.group(1), block.group(2)
    env = dict(os.environ, COLUMNS="100")
    result = run_cli(*command.split()[1:], cwd=ROOT, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    actual = [line.rstrip() for line in (result.stderr + result.stdout).splitlines()]
    assert actual == [line.rstrip() for line in shown.splitlines()]


def test_standard_input_from_a_terminal_is_refused():
    """`-` on a terminal would block on a read that Ctrl-C cannot stop: refused at once."""
    import pty

    leader, follower = pty.openpty()
    try:
        result = run_process([sys.executable, "-m", "dynosim", "logs", "summary", "-"], stdin=follower,
                             text=True, timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert_one_line_error(result, "-: standard input is a terminal")


# --- replay (issue #13): the log's own requests through another fleet ------------------------------

#: Two single-slot dynos behind one intelligent router: the fleet of replay-hand.log.
TWO_DYNOS = {"name": "two-dynos", "arrivals": {"process": "poisson", "rate": "1/s"},
             "service": {"distribution": "constant", "value": "100ms"},
             "fleet": {"dynos": 2}, "router": {"policy": "intelligent", "timeout": "off"}}


def _two_dynos(tmp_path):
    path = tmp_path / "two-dynos.toml"
    path.write_text('name = "two-dynos"\n[arrivals]\nprocess = "poisson"\nrate = "1/s"\n[service]\n'
                    'distribution = "constant"\nvalue = "100ms"\n[fleet]\ndynos = 2\n[router]\n'
                    'policy = "intelligent"\ntimeout = "off"\n')
    return str(path)


def test_replay_through_the_same_fleet_and_the_intelligent_router_is_the_hand_worked_case(cli, tmp_path):
    """replay-hand.log: six requests (and an H13 without a service time, not replayed) whose
    arrivals (line time less connect and service) are 0, 0.25, 0.375, 0.5, 0.625 and 2 s with
    services 1, 0.5, 0.5, 0.125, 0.25 and 0.125 s. Two dynos behind one FIFO queue, by hand:
    the 0.375 s request starts at 0.75 (dyno 2 frees), waiting 0.375; the 0.5 s one at 1 (dyno
    1), waiting 0.5; the 0.625 s one at 1.125 (dyno 1 again), waiting 0.5; the others wait
    nothing. So 3 of 6 wait, 1.375 s in all; at 0.625 s three are held at the router; the
    longest response is the first request's 1 s."""
    result = cli("logs", "replay", fixture("replay-hand.log"), "--scenario", _two_dynos(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    [report] = doc["results"]
    rep = report["per_replication"][0]
    assert report["policy"] == "intelligent" and report["replications"] == 1 and report["warmup"] == 0
    assert rep["requests"] == 6
    assert rep["queued_fraction"] == 0.5
    assert rep["queue"]["mean"] == 1.375 / 6
    assert rep["queue"]["max"] == 0.5
    assert rep["queue_of_queued"]["mean"] == 1.375 / 3
    assert rep["max_queue_depth"]["router"] == 3
    assert rep["response"]["mean"] == 3.875 / 6
    assert rep["response"]["max"] == 1.0
    assert rep["service_mean"] == 2.5 / 6
    log = doc["log"]
    assert (log["replayed"], log["without_service"], log["other_lines"]) == (6, 1, 1)
    assert log["span_seconds"] == 2.0 and log["first"] == "2014-01-09T06:00:00.000000+00:00"
    # As logged: 125, 125, 250, 500, 500 and 1000 ms; the log's own fleet (random) queued
    # three requests behind others: 125 + 250 + 375 ms of overlap.
    assert log["recorded"]["service"]["p50"] == 0.25 and log["recorded"]["service"]["max"] == 1.0
    assert log["recorded"]["dynos"] == 2
    assert (log["queueing"]["overlapping"], log["queueing"]["overlap_seconds"]) == (3, 0.75)


def test_replay_from_python_is_results_with_the_log_beside(tmp_path):
    results = logs.replay(fixture("replay-hand.log"), TWO_DYNOS, policies=["random", "intelligent"])
    assert isinstance(results, dynosim.Results)
    assert [r.policy for r in results] == ["random", "intelligent"]
    assert results["intelligent"]["queue.mean"] == 1.375 / 6
    # Random routing of the same requests on the same two dynos: some wait at a busy dyno.
    assert results["random"]["requests"] == 6
    assert set(results.to_dict()) == {"results", "log"}
    # Replications vary only the routing: the intelligent router draws nothing.
    again = logs.replay(fixture("replay-hand.log"), TWO_DYNOS, replications=3)
    per = [rep["queue"]["mean"] for rep in again[0].per_replication]
    assert per == [1.375 / 6] * 3


def test_replay_window_speed_and_queueing_correction_shape_the_trace():
    # From 0.3 s on: the requests arriving at 0.375, 0.5, 0.625 and 2 s.
    windowed = logs.replay(fixture("replay-hand.log"), TWO_DYNOS, window="0.3s..")
    assert windowed.log["replayed"] == 4 and windowed.log["outside_window"] == 2
    assert windowed[0]["requests"] == 4 and windowed[0]["queue.mean"] == 0
    # Twice the speed: the same six requests over 1 s.
    fast = logs.replay(fixture("replay-hand.log"), TWO_DYNOS, speed=2)
    assert fast.log["trace_seconds"] == 1.0 and fast[0]["requests"] == 6
    assert fast[0]["queue.mean"] > 1.375 / 6
    # Less each request's overlap on its logged dyno: 125 and 250 ms requests that overlapped
    # all their service (0 left), and 375 of a 500 ms one.
    corrected = logs.replay(fixture("replay-hand.log"), TWO_DYNOS, correct_queueing=True)
    assert corrected[0]["service_mean"] == pytest.approx((1 + 0.5 + 0.125 + 0.125) / 6, rel=1e-12)


def test_replay_table_shows_the_log_beside_the_simulation(cli, tmp_path):
    result = cli("logs", "replay", fixture("replay-hand.log"), "--scenario", _two_dynos(tmp_path),
                 "--policy", "random,intelligent")
    assert result.returncode == 0, result.stderr
    assert "log, as recorded" in result.stdout and "intelligent" in result.stdout
    assert "6 requests" in result.stdout


def test_replay_drops_phases_and_says_so(cli):
    # gunicorn-db has [request] phases and [resources]: the log's service times replace them.
    result = cli("logs", "replay", fixture("replay-hand.log"), "--scenario", "gunicorn-db", "--json")
    assert result.returncode == 0, result.stderr
    assert "[request] and [resources] left out" in result.stderr
    assert json.loads(result.stdout)["results"][0]["per_replication"][0]["requests"] == 6


# --- fit (issue #13) -----------------------------------------------------------------------------


def synthetic_log(path, *, rates, seconds_each, seed=1, dynos=10, routes=None):
    """A Heroku log of Poisson arrivals at `rates` (one per stretch of `seconds_each`),
    lognormal service times (median 50 ms, sigma 0.8; or per route: {path: (median, sigma)}),
    random routing over `dynos`. Lines in end order, as a router writes them."""
    import math
    import random
    from datetime import datetime, timedelta, timezone

    rng = random.Random(seed)
    t0 = datetime(2014, 1, 9, 6, 0, 0, tzinfo=timezone.utc)
    routes = routes or {"/items": (0.05, 0.8)}
    names = sorted(routes)
    out = []
    t = 0.0
    for k, rate in enumerate(rates):
        end_of = (k + 1) * seconds_each
        while True:
            t += rng.expovariate(rate)
            if t >= end_of:
                t = end_of
                break
            route = names[rng.randrange(len(names))]
            median, sigma = routes[route]
            service_ms = max(1, round(median * 1000 * math.exp(rng.gauss(0, sigma))))
            end = t + 0.001 + service_ms / 1000
            stamp = (t0 + timedelta(seconds=end)).strftime("%Y-%m-%dT%H:%M:%S.%f")
            out.append((end, f"{stamp}+00:00 heroku[router]: at=info method=GET path={route}/{rng.randrange(1000)} "
                             f"host=a.example.com dyno=web.{rng.randrange(1, dynos + 1)} connect=1ms "
                             f"service={service_ms}ms status=200 bytes=100"))
    out.sort()
    path.write_text("\n".join(line for _, line in out) + "\n")
    return len(out)


def test_fit_of_poisson_arrivals_with_lognormal_service(cli, tmp_path):
    """30 min of Poisson arrivals at 20/s: the fitted rate within 4 standard errors
    (sqrt(N)/T), one rate (no schedule), arrivals per interval with Poisson's variance (index
    of dispersion within 4 standard errors of 1, sqrt(2/(k-1))), and the quantile table close
    to the log: a small KS distance, the median near 50 ms."""
    import math

    log = tmp_path / "poisson.log"
    n = synthetic_log(log, rates=[20.0], seconds_each=1800)
    out = tmp_path / "app.toml"
    result = cli("logs", "fit", str(log), "-o", str(out), "--json", "--report", str(tmp_path / "fit.png"))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["fitted"] == n
    rate = report["arrivals"]["rate_per_s"]
    assert abs(rate - 20.0) <= 4 * math.sqrt(n) / 1800
    assert report["arrivals"]["schedule"] is None and not report["arrivals"]["varies"]
    rows = report["arrivals"]["dispersion"]
    assert [r["interval_seconds"] for r in rows] == [1, 10, 60]
    for r in rows:
        assert abs(r["index"] - 1) <= 4 * math.sqrt(2 / (r["intervals"] - 1)), r
    assert report["service"]["ks_distance"] < 0.02
    assert report["service"]["p50"] == pytest.approx(0.05, rel=0.05)
    assert report["dynos"] == 10
    # Random routing over single-threaded dynos at 10% load queues about 10% of requests.
    assert 0.03 < report["queueing"]["overlapping_fraction"] < 0.2
    assert (tmp_path / "fit.png").stat().st_size > 1000
    # The file is a scenario that runs.
    scenario = dynosim.Scenario.load(str(out))
    assert scenario.doc["fleet"]["dynos"] == 10
    assert scenario.doc["service"]["distribution"] == "quantiles"
    assert scenario.describe()["arrival_rate"] == pytest.approx(rate, rel=1e-5)


def test_fit_of_a_rate_that_steps_up_is_a_schedule(tmp_path):
    log = tmp_path / "step.log"
    synthetic_log(log, rates=[10.0, 40.0], seconds_each=1200)
    fitted = logs.fit(str(log))
    a = fitted.report["arrivals"]
    assert a["varies"] and a["schedule"] is not None
    assert "fitted as a schedule" in a["verdict"]
    rates = [float(r.split("/")[0]) for _, r in a["schedule"]]
    assert rates[0] == pytest.approx(10, rel=0.25) and rates[-1] == pytest.approx(40, rel=0.15)
    assert fitted.scenario["run"] == {"duration": fitted.scenario["run"]["duration"], "warmup": "0s"}
    dynosim.Scenario(fitted.scenario).validate()


def test_fit_per_route_classes(tmp_path):
    log = tmp_path / "routes.log"
    synthetic_log(log, rates=[20.0], seconds_each=600,
                  routes={"/fast": (0.01, 0.3), "/slow": (0.3, 0.3), "/other": (0.05, 0.3)})
    fitted = logs.fit(str(log), classes=3)
    classes = fitted.scenario["request"]["class"]
    assert [c["name"] for c in classes][:2] in (["GET /fast/:id", "GET /slow/:id"], ["GET /slow/:id", "GET /fast/:id"])
    assert classes[-1]["name"] == "(other)"
    assert sum(c["weight"] for c in classes) == pytest.approx(1, abs=1e-5)
    medians = {c["name"]: dict((p, t) for p, t in c["phases"][0]["io"]["percentiles"])[50] for c in classes}
    assert medians["GET /fast/:id"] in ("10ms", "9ms", "11ms") and medians["GET /slow/:id"].endswith("ms")
    assert all(c["ks_distance"] < 0.05 for c in fitted.report["classes"])


def test_fit_correct_queueing_takes_the_overlap_off(tmp_path):
    log = tmp_path / "busy.log"
    synthetic_log(log, rates=[60.0], seconds_each=300, dynos=5)
    plain = logs.fit(str(log))
    corrected = logs.fit(str(log), correct_queueing=True)
    q = corrected.report["queueing"]
    assert q["corrected"] and q["share_of_service"] > 0.1
    logged, fitted = corrected.report["logged_service"]["mean"], corrected.report["service"]["mean"]
    assert fitted == pytest.approx(logged * (1 - q["share_of_service"]), rel=1e-3)
    assert plain.report["service"]["mean"] == pytest.approx(logged)


# --- bad input for fit and replay --------------------------------------------------------------


@pytest.mark.parametrize("args, fragments", [
    (["fit", "garbled.log", "-o", "{tmp}/x.toml"], ["no request read", "garbled.log:1:"]),
    (["fit", "heroku.log", "-o", "{tmp}/x.txt"], ["-o: the scenario is a TOML file"]),
    (["fit", "heroku.log", "-o", "{tmp}/x.toml", "--window", "soon..later"], ["--window:", "'soon'"]),
    (["fit", "heroku.log", "-o", "{tmp}/x.toml", "--window", "1h.."], ["--window: none of the 9 requests"]),
    (["fit", "truncated.log.gz", "-o", "{tmp}/x.toml"], ["truncated.log.gz: truncated gzip file"]),
    (["replay", "heroku.log", "--scenario", "no-such-scenario"], ["no-such-scenario"]),
    (["replay", "heroku.log", "--scenario", "rapgenius", "--speed", "0"], ["--speed"]),
    (["replay", "garbled.log", "--scenario", "rapgenius"], ["no request read"]),
    (["replay", "heroku.log", "--scenario", "rapgenius", "--window", "..0s"], ["--window"]),
    (["replay", "heroku.log", "--scenario", "rapgenius", "--warmup", "1h"], ["--warmup"]),
])
def test_bad_input_to_fit_and_replay_is_one_line(cli, tmp_path, args, fragments):
    args = [fixture(a) if (FIXTURES / a).exists() else a.replace("{tmp}", str(tmp_path)) for a in args]
    result = cli("logs", *args)
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "x.toml").exists()


def test_a_trace_file_with_a_bad_line_names_it(cli, tmp_path):
    (tmp_path / "trace.csv").write_text("arrival,service\n0,0.1\n0.5,oops\n")
    (tmp_path / "t.toml").write_text('[arrivals]\nprocess = "replay"\nfile = "trace.csv"\n[fleet]\ndynos = 1\n')
    result = cli("run", str(tmp_path / "t.toml"))
    assert_one_line_error(result, "t.toml: arrivals.file:", "trace.csv:3:")


def test_fit_needs_four_service_times(cli, tmp_path):
    lines = (FIXTURES / "heroku-crlf.log").read_text().splitlines()[:3]
    (tmp_path / "three.log").write_text("\n".join(lines) + "\n")
    result = cli("logs", "fit", str(tmp_path / "three.log"), "-o", str(tmp_path / "x.toml"))
    assert_one_line_error(result, "3 service times are too few to fit a distribution: at least 4")
    assert not (tmp_path / "x.toml").exists()


# --- shop.log.gz: a log simulated here, whose requests are known exactly -------------------------


def _shop():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_shop_log", FIXTURES / "make_shop_log.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shop_log_is_what_its_script_writes():
    shop = _shop()
    assert gzip.decompress((FIXTURES / "shop.log.gz").read_bytes()).decode().splitlines() == shop.lines()


def test_correct_queueing_recovers_the_work_of_single_threaded_dynos():
    """shop.log's dynos serve one request at a time, FIFO, and its times are whole
    milliseconds: each request's overlap with the one before it on its dyno is exactly its
    wait, so the corrected service times are exactly the work times, and the fitted table is
    the table of the work."""
    from collections import Counter

    from dynosim.logs.fit import quantile_table

    requests = _shop().requests()
    waits = [w for _, _, _, w, _ in requests]
    work = Counter(k for *_, k in requests)
    plain = logs.fit(fixture("shop.log.gz"))
    q = plain.report["queueing"]
    assert q["overlapping"] == sum(1 for w in waits if w > 0)
    assert q["overlap_seconds"] == pytest.approx(sum(waits) / 1000, abs=1e-6)
    corrected = logs.fit(fixture("shop.log.gz"), correct_queueing=True)
    hist = sorted((ms / 1000, n) for ms, n in work.items())
    assert corrected.scenario["service"]["percentiles"] == quantile_table(hist)
    assert corrected.report["service"]["mean"] == pytest.approx(sum(k * n for k, n in work.items()) / 1000 / len(requests))
    assert corrected.report["logged_service"]["mean"] == pytest.approx(plain.report["service"]["mean"])


def test_docs_fit_and_replay_examples_are_the_actual_output(tmp_path):
    """docs/logs.md's fit and replay examples, run in order (the second replay uses the file
    the fit writes) in a copy of the fixtures: each console block is what the command prints
    (stderr, then stdout), and the TOML block is the file written."""
    import shutil

    text = (ROOT / "docs" / "logs.md").read_text(encoding="utf-8")
    fits = text[text.index("## Fitting a scenario"):text.index("## The parsed request")]
    fits = re.sub(r"## Fitting traces.*?(?=\n## )", "", fits, flags=re.S)  # test_logs_spans.py's
    blocks = re.findall(r"```console\n\$ (dynosim logs (?:fit|replay) tests/fixtures/\S+ .*?)\n(.*?)```", fits, re.S)
    assert [b[0].split()[2] for b in blocks] == ["fit", "replay", "replay"]
    shutil.copytree(FIXTURES, tmp_path / "tests" / "fixtures" / "logs")
    env = dict(os.environ, COLUMNS="100")
    order = sorted(blocks, key=lambda b: b[0].split()[2] != "fit")  # the fit writes shop.toml first
    for command, shown in order:
        result = run_cli(*command.split()[1:], cwd=tmp_path, env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        actual = [line.rstrip() for line in (result.stderr + result.stdout).splitlines()]
        assert actual == [line.rstrip() for line in shown.splitlines()], command
    written = re.search(r"```toml\n(# Fitted by dynosim logs fit.*?)```", fits, re.S)
    assert written and (tmp_path / "shop.toml").read_text() == written.group(1)


@pytest.mark.parametrize("name", ["heroku.log", "haproxy.log", "heroku-2012-legacy.log", "heroku-2025-router2.log",
                                  "shop.log.gz"])
def test_every_fixture_fits_a_valid_scenario_and_replays(name):
    """Odd logs too: HAProxy's lines 17 years apart (a run long enough for 100 requests at
    their rate), 2012's whole-second lines (a schedule whose last segment is empty ends on the
    mean rate), Router 2.0's four service times with a 38 s one (the tail clipped at it)."""
    fitted = logs.fit(fixture(name))
    described = dynosim.Scenario(fitted.scenario).describe()
    assert described["arrival_rate"] > 0
    clip = fitted.scenario["service"]["clip"]
    assert clip[1] == f"{round(fitted.report['service']['max'] * 1000, 3):g}ms"
    assert fitted.report["service"]["fitted_mean"] <= fitted.report["service"]["max"]
    if fitted.scenario.get("run", {}).get("duration") and "warmup" not in fitted.scenario["run"]:
        assert described["arrival_rate"] * described["duration"] >= 99.9
    results = logs.replay(fixture(name), "rapgenius")
    assert results[0]["requests"] == results.log["replayed"] > 0
