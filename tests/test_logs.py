"""`dynosim logs summary` and `dynosim.logs.summary` on the fixtures of tests/fixtures/logs
(what each line is: their README), against figures worked out by hand; and every kind of bad
input: one line naming the file (and the malformed lines' numbers), exit code 2."""

import gzip
import os
import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, assert_one_line_error
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
    result = subprocess.run([sys.executable, "-m", "dynosim", "logs", "summary", "-", "--json"],
                            input=data, capture_output=True, timeout=60)
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
    assert "summary" in result.stdout and "fit" not in result.stdout


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
    result = subprocess.run([sys.executable, "-m", "dynosim", *command.split()[1:]], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    actual = [line.rstrip() for line in (result.stderr + result.stdout).splitlines()]
    assert actual == [line.rstrip() for line in shown.splitlines()]


def test_standard_input_from_a_terminal_is_refused():
    """`-` on a terminal would block on a read that Ctrl-C cannot stop: refused at once."""
    import pty

    leader, follower = pty.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", "dynosim", "logs", "summary", "-"], stdin=follower,
                                capture_output=True, text=True, timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert_one_line_error(result, "-: standard input is a terminal")
