"""A time series of every fleet (`run --timeseries` on a scenario with services,
docs/services.md "Over time"): a `service` column after `policy`, "entry" for the top-level
fleet's rows and each service's name for its own, all at the same times; the scenario without
services keeps its columns; no service may be called "entry"."""

import csv
import json

from conftest import assert_one_line_error

from dynosim import Scenario, _dynosim
from dynosim import timeseries

#: The entry's thread makes its call as soon as it takes the request (its own phase comes after), and
#: has threads enough that no request waits for one: every request's call reaches api at the
#: instant the request arrives. api fans out to search after its own I/O.
CHAIN = """
name = "series-chain"
[arrivals]
process = "poisson"
rate = "200/s"
[fleet]
dynos = 4
slots = 200
[request]
phases = [ { call = "api" }, { io = "1ms" } ]
[services.api.fleet]
dynos = 4
slots = 8
[services.api.request]
phases = [ { io = { distribution = "exponential", mean = "5ms" } }, { fanout = "search", count = 3 } ]
[services.search.fleet]
dynos = 6
[services.search.service]
distribution = "exponential"
mean = "4ms"
[run]
warmup = "5s"
duration = "55s"
replications = 1
"""


def test_each_fleet_has_its_rows_at_the_same_times_and_its_own_traffic(tmp_path, cli):
    path = tmp_path / "chain.toml"
    path.write_text(CHAIN, encoding="utf-8")
    out = tmp_path / "series.csv"
    result = cli("run", str(path), "--timeseries", str(out), "--interval", "1s", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "series.png").stat().st_size > 0
    with out.open(encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        rows = list(reader)
    assert header == timeseries.columns([{"service": "entry"}])
    assert header[header.index("policy") + 1] == "service"
    by = {}
    for r in rows:
        by.setdefault(r["service"], []).append(r)
    assert sorted(by) == ["api", "entry", "search"]
    times = [r["time"] for r in by["entry"]]
    assert len(times) == 60 and all([r["time"] for r in by[s]] == times for s in by)
    # The entry's calls reach api the instant each request arrives: the same count in every
    # interval, not merely on average (a frame taken after a later call would differ).
    assert [r["arrivals_per_s"] for r in by["api"]] == [r["arrivals_per_s"] for r in by["entry"]]
    # Search gets three calls for each api request that got past its I/O: over the run, three
    # times api's arrivals, less the few still in I/O at the last frame.
    api_total = sum(float(r["arrivals_per_s"]) for r in by["api"])
    search_total = sum(float(r["arrivals_per_s"]) for r in by["search"])
    assert 3 * api_total - 3 * 20 <= search_total <= 3 * api_total
    # Each fleet's p95 is its own: the whole request's above api's, api's above search's.
    p95 = {s: sorted(float(r["response_p95"]) for r in by[s])[30] for s in by}
    assert p95["entry"] >= p95["api"] > p95["search"] > 0


def test_the_frames_of_a_service_are_taken_before_the_calls_that_come_after_them(tmp_path):
    """Frame by frame, through the engine's trace: api's arrivals so far equal the entry's at
    every frame, and search's calls never exceed three per api request."""
    scenario = Scenario.load(_loaded(tmp_path))
    trace = json.loads(scenario._call(_dynosim.trace, 0.25, 20.0, False))
    entry, api, search = trace["frames"], trace["services"]["api"]["frames"], trace["services"]["search"]["frames"]
    assert len(entry) == len(api) == len(search) == 81
    assert [f["arrived"] for f in api] == [f["arrived"] for f in entry]
    assert all(s["arrived"] <= 3 * a["arrived"] for s, a in zip(search, api))
    assert all(s["arrived"] % 3 == 0 for s in search)


def test_a_scenario_without_services_keeps_its_columns(tmp_path, cli):
    out = tmp_path / "series.csv"
    result = cli("run", "rapgenius", "--duration", "2min", "--replications", "1", "--timeseries", str(out),
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    header = out.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header == timeseries.COLUMNS and "service" not in header


def test_a_service_may_not_be_called_entry(tmp_path, cli):
    path = tmp_path / "chain.toml"
    path.write_text(CHAIN.replace('"api"', '"entry"').replace("services.api.", "services.entry."),
                    encoding="utf-8")
    result = cli("run", str(path), cwd=tmp_path)
    assert_one_line_error(result, "chain.toml", "services.entry", "top-level fleet")
    assert list(tmp_path.iterdir()) == [path]


def _loaded(tmp_path):
    path = tmp_path / "chain.toml"
    path.write_text(CHAIN, encoding="utf-8")
    return str(path)
