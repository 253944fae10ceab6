"""`dynosim logs fit` on traces (docs/logs.md, "Traces"): spans as JSON lines read into the
services, their call shapes and own times. shop-trace.jsonl.gz is simulated by the script
beside it, so the parameters the fit must recover are known: they are checked within bounds
derived from the sample's standard error, the call graph and its shapes exactly. Small traces
written here in each style (OpenTelemetry, OTLP's attribute lists, Jaeger, Zipkin) check the
shapes a fit can take against times worked out by hand; and every kind of bad input gives one
line, exit code 2, and writes nothing."""

import gzip
import importlib.util
import json
import math
import os
import re
import shutil
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from conftest import ROOT, assert_one_line_error, run_cli, run_process

from dynosim import Scenario, logs
from dynosim.errors import LogError

FIXTURES = ROOT / "tests" / "fixtures" / "logs"
TRACE = FIXTURES / "shop-trace.jsonl.gz"
#: Bounds are this many standard errors wide: a correct fit fails one about 6 times in 100,000.
Z = 4.0


def _script():
    spec = importlib.util.spec_from_file_location("make_shop_trace", FIXTURES / "make_shop_trace.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def shop():
    return _script()


@pytest.fixture(scope="module")
def fitted():
    return logs.fit(str(TRACE))


def services(fit):
    return {s["name"]: s for s in fit.report["services"]}


# --- shop-trace.jsonl.gz: traces simulated with known parameters --------------------------------


def test_shop_trace_is_what_its_script_writes(shop):
    assert gzip.decompress(TRACE.read_bytes()).decode().splitlines() == shop.lines()


def test_the_call_graph_and_its_shapes_are_recovered_exactly(fitted, shop):
    doc = fitted.scenario
    assert fitted.report["entry"] == "api" and fitted.report["fitted"] == len(shop.traces())
    assert list(doc["services"]) == ["auth", "search"]
    phases = doc["request"]["phases"]
    # auth once, then search 4 ways waiting for all; api's own time is one io phase, after
    # its calls: more of it (median 6 ms against 4 ms) comes after them.
    assert phases[:2] == [{"call": "auth"}, {"fanout": "search", "count": shop.FANOUT, "wait": "all"}]
    assert list(phases[2]) == ["io"] and phases[2]["io"]["distribution"] == "quantiles"
    assert services(fitted)["api"]["own_time"]["phase"] == "last"
    # auth and search call nobody: their own time is their [service].
    for name in ("auth", "search"):
        assert set(doc["services"][name]) == {"service", "fleet", "router"}
        assert doc["services"][name]["fleet"]["dynos"] == shop.INSTANCES[name]
    assert doc["fleet"]["dynos"] == shop.INSTANCES["api"]
    calls = {(c["caller"], c["callee"]): c for c in fitted.report["calls"]}
    assert calls[("api", "auth")]["calls_per_request"] == {"mean": 1.0, "min": 1, "max": 1, "none": 0.0}
    assert calls[("api", "search")]["side_by_side"] and calls[("api", "search")]["count"] == 4


def _mean_bound(mean, variance, n):
    return Z * math.sqrt(variance / n)


def test_the_service_times_and_the_rate_are_recovered_within_their_standard_errors(fitted, shop):
    """Each service's own time: its sample mean and the fitted table's mean within Z standard
    errors of the true mean; for the exponential ones, the fitted table's every percentile
    within Z binomial standard errors of the true CDF there. The rate within Z standard errors
    of a Poisson count's."""
    s = services(fitted)
    # api's own time: both lognormal works, and 0.1 ms each way of its two calls' round trips.
    mean = shop.lognormal_mean(*shop.API_BEFORE) + shop.lognormal_mean(*shop.API_AFTER) + 4 * shop.NETWORK
    variance = shop.lognormal_variance(*shop.API_BEFORE) + shop.lognormal_variance(*shop.API_AFTER)
    cases = [("api", mean, variance, None), ("auth", shop.AUTH_MEAN, shop.AUTH_MEAN**2, shop.AUTH_MEAN),
             ("search", shop.SEARCH_MEAN, shop.SEARCH_MEAN**2, shop.SEARCH_MEAN)]
    for name, mean, variance, exponential in cases:
        own = s[name]["service"]
        n = own["count"]
        assert n == s[name]["spans"]
        bound = _mean_bound(mean, variance, n)
        assert abs(own["mean"] - mean) < bound, (name, own["mean"], mean, bound)
        assert abs(own["fitted_mean"] - mean) < bound, (name, own["fitted_mean"], mean, bound)
        if exponential:
            for p, t in own["percentiles"]:
                q = p / 100
                assert abs((1 - math.exp(-t / exponential)) - q) < Z * math.sqrt(q * (1 - q) / n), (name, p, t)
    a = fitted.report["arrivals"]
    covered = a["covered_seconds"]
    assert abs(a["rate_per_s"] - shop.RATE) < Z * math.sqrt(shop.RATE / covered)
    # The engine's traffic equations give each service the rate the traces show per trace.
    assert s["auth"]["fitted_rate_per_s"] == pytest.approx(s["api"]["fitted_rate_per_s"])
    assert s["search"]["fitted_rate_per_s"] == pytest.approx(shop.FANOUT * s["api"]["fitted_rate_per_s"])


def test_the_written_file_loads_and_describes_as_fitted(tmp_path, cli):
    out = tmp_path / "shop.toml"
    result = cli("logs", "fit", str(TRACE), "-o", str(out), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["source"] == "spans"
    scenario = Scenario.load(str(out))
    assert scenario.doc == report["scenario"] == tomllib.loads(out.read_text())
    described = scenario.describe()
    assert [(c["caller"], c["callee"], c["kind"]) for c in described["calls"]] == [
        (None, "auth", "call"), (None, "search", "fanout")]
    assert [s["name"] for s in described["services"]] == ["auth", "search"]
    # as docs/logs.md states them
    assert [f"{s['rate']:.3g}" for s in described["services"]] == ["5.48", "21.9"]
    # Its call and its fan-out (no hedge) are simulated (docs/services.md): the run goes ahead,
    # each service's figures under services.NAME.
    result = cli("run", str(out), "--duration", "10s", "--replications", "2", "--json")
    assert result.returncode == 0, result.stderr
    ran = json.loads(result.stdout)["results"][0]["per_replication"][0]
    assert sorted(ran["services"]) == ["auth", "search"]
    assert ran["services"]["search"]["calls"]["sent"] > 0


def test_docs_example_is_the_actual_output(tmp_path):
    """docs/logs.md's fit of shop-trace.jsonl.gz: the console block is what the command prints
    (stderr, then stdout), and the TOML block is the file written."""
    text = (ROOT / "docs" / "logs.md").read_text(encoding="utf-8")
    section = text[text.index("## Fitting traces: services and their calls"):text.index("## Replaying a log")]
    (command, shown), = re.findall(r"```console\n\$ (dynosim logs fit \S+trace\S+ .*?)\n(.*?)```", section, re.S)
    shutil.copytree(FIXTURES, tmp_path / "tests" / "fixtures" / "logs")
    result = run_cli(*command.split()[1:], cwd=tmp_path, env=dict(os.environ, COLUMNS="100"), timeout=120)
    assert result.returncode == 0, result.stderr
    actual = [line.rstrip() for line in (result.stderr + result.stdout).splitlines()]
    assert actual == [line.rstrip() for line in shown.splitlines()]
    written = re.search(r"```toml\n(# Fitted by dynosim logs fit from tests/fixtures/logs/shop-trace.*?)```", section, re.S)
    out = command.split("-o ")[1].split()[0]
    assert written and (tmp_path / out).read_text() == written.group(1)


# --- the styles of spans, and the shapes of calls, by hand -------------------------------------


def _hand_spans():
    """Nine traces of a web service, one a second. Each web span (0 to 100 ms, on web-1 or
    web-2) calls db through a client span of its own (50–70 ms; the db span 51–69 ms), then
    db again directly (75–80 ms), then 1, 2 or 3 cache calls at 85 ms: the first answers at
    88 ms, the others at 130 ms, after web has answered at 100 ms (it waited for the first).
    Times in microseconds: (trace, span, parent, service, start, end, instance)."""
    out = []
    for i in range(9):
        t = i * 1_000_000
        trace = f"{i + 1:032x}"
        root = f"a{i:015x}"
        out.append((trace, root, None, "web", t, t + 100_000, f"web-{i % 2 + 1}"))
        out.append((trace, f"b{i:015x}", root, "web", t + 50_000, t + 70_000, f"web-{i % 2 + 1}"))
        out.append((trace, f"c{i:015x}", f"b{i:015x}", "db", t + 51_000, t + 69_000, None))
        out.append((trace, f"d{i:015x}", root, "db", t + 75_000, t + 80_000, None))
        for j in range(i % 3 + 1):
            out.append((trace, f"e{i:014x}{j}", root, "cache", t + 85_000, t + (88_000 if j == 0 else 130_000),
                        "10.0.0.9"))
    return out


def _render(style, span):
    trace, sid, parent, service, start, end, instance = span
    if style == "otel":
        doc = {"traceId": trace, "spanId": sid, "parentSpanId": parent or "", "name": "x",
               "startTimeUnixNano": str(start * 1000), "endTimeUnixNano": (end * 1000),
               "resource": {"service.name": service, **({"service.instance.id": instance} if instance else {})}}
    elif style == "otlp":
        attrs = [{"key": "service.name", "value": {"stringValue": service}}]
        if instance:
            attrs.append({"key": "service.instance.id", "value": {"stringValue": instance}})
        doc = {"traceId": trace, "spanId": sid, "startTimeUnixNano": start * 1000, "endTimeUnixNano": end * 1000,
               "resource": {"attributes": attrs}, **({"parentSpanId": parent} if parent else {})}
    elif style == "jaeger":
        doc = {"traceID": trace, "spanID": sid, "operationName": "x", "startTime": start, "duration": end - start,
               "references": [{"refType": "CHILD_OF", "traceID": trace, "spanID": parent}] if parent else [],
               "process": {"serviceName": service,
                           "tags": [{"key": "hostname", "type": "string", "value": instance}] if instance else []}}
    else:
        doc = {"traceId": trace, "id": sid, "timestamp": start, "duration": end - start, "name": "x",
               "localEndpoint": {"serviceName": service, **({"ipv4": instance} if instance else {})},
               **({"parentId": parent} if parent else {})}
    return json.dumps(doc)


def _write(path, style, spans=None, reverse=True):
    lines = [_render(style, s) for s in (spans or _hand_spans())]
    path.write_text("\n".join(reversed(lines) if reverse else lines) + "\n")
    return path


@pytest.mark.parametrize("style", ["otel", "otlp", "jaeger", "zipkin"])
def test_every_style_gives_the_shapes_worked_by_hand(tmp_path, monkeypatch, style):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "t.jsonl", style)
    fit = logs.fit("t.jsonl")
    doc = fit.scenario
    assert (doc["arrivals"]["process"], fit.report["entry"], fit.report["fitted"]) == ("poisson", "web", 9)
    phases = doc["request"]["phases"]
    # web's own time comes first (51 ms before its first call; after its last, 12 ms in a
    # third of them); db twice, one after the other (the first through web's client span);
    # cache 1, 2 or 3 times (mean 2: geometric), going on after the first answer.
    assert phases[1:] == [{"call": "db"}, {"call": "db"},
                          {"fanout": "cache", "count": {"distribution": "geometric", "mean": 2.0}, "wait": "first"}]
    assert list(phases[0]) == ["io"]
    # Own time: 100 ms less db's 18 and 5 ms and the cache calls' cover within web's span:
    # 3 ms for one call, 15 ms (85 to 100) for more.
    s = services(fit)
    assert s["web"]["service"]["mean"] == pytest.approx((3 * 74 + 6 * 62) / 9 / 1000)
    assert s["web"]["service"]["max"] == pytest.approx(0.074) and s["web"]["service"]["p50"] == pytest.approx(0.062)
    assert s["db"]["spans"] == 18 and s["db"]["service"]["mean"] == pytest.approx((18 + 5) / 2 / 1000)
    assert s["cache"]["spans"] == 18 and s["cache"]["service"]["max"] == pytest.approx(0.045)
    # web-1 and web-2; db names no instance (one dyno); cache's three calls at once on one.
    assert (doc["fleet"], doc["services"]["db"]["fleet"], doc["services"]["cache"]["fleet"]) == (
        {"dynos": 2, "slots": 1}, {"dynos": 1, "slots": 1}, {"dynos": 1, "slots": 3})
    cache = [c for c in fit.report["calls"] if c["callee"] == "cache"][0]
    assert cache["calls_per_request"] == {"mean": 2.0, "min": 1, "max": 3, "none": 0.0}
    assert Scenario.load(doc).describe()["services"][1]["rate"] == pytest.approx(2 * doc_rate(doc))


def doc_rate(doc):
    return float(doc["arrivals"]["rate"].removesuffix("/s"))


def test_the_styles_give_one_scenario(tmp_path, monkeypatch):
    docs = []
    for style in ("otel", "otlp", "jaeger", "zipkin"):
        (tmp_path / style).mkdir()
        monkeypatch.chdir(tmp_path / style)
        _write(tmp_path / style / "t.jsonl", style)
        docs.append(logs.fit("t.jsonl").scenario)
    assert all(d == docs[0] for d in docs[1:])


def test_malformed_lines_are_skipped_and_named_as_a_logs_are(tmp_path, cli):
    path = _write(tmp_path / "t.jsonl", "otel", reverse=False)
    lines = path.read_text().splitlines()
    lines[3:3] = ["not json at all", '{"traceId": "1", "spanId": "2"}']
    path.write_text("\n".join(lines) + "\n")
    result = cli("logs", "fit", str(path), "-o", str(tmp_path / "t.toml"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"dynosim: warning: 2 malformed lines skipped ({path}:4: not JSON (Expecting value at column 1): expected "
        f"one span a line; {path}:5: no service name (service, resource's service.name, process.serviceName or "
        "localEndpoint.serviceName))")
    assert "skipped: 2 malformed lines" in result.stdout
    assert (tmp_path / "t.toml").exists()


def test_format_spans_reads_standard_input(tmp_path, cli):
    path = _write(tmp_path / "t.jsonl", "jaeger")
    result = run_process([sys.executable, "-m", "dynosim", "logs", "fit", "-", "--format", "spans", "-o",
                          str(tmp_path / "t.toml"), "--json"], text=True, input=path.read_text(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"][0]["name"] == "<stdin>"


# --- bad input: one line, nothing written ------------------------------------------------------


def _bad(tmp_path, lines):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


SPAN = {"traceId": "t1", "spanId": "s1", "startTimeUnixNano": "1000000000", "endTimeUnixNano": "2000000000",
        "service": "web"}


def _span(**changes):
    doc = dict(SPAN, **changes)
    return json.dumps({k: v for k, v in doc.items() if v is not None})


@pytest.mark.parametrize("lines, fragments", [
    (["{not json", "[1, 2]", _span(traceId=None)],
     ["no span read: 3 of 3 lines malformed (", "bad.jsonl:1: not JSON", "bad.jsonl:2: not a JSON object",
      "bad.jsonl:3: no trace id (traceId, traceID, trace_id)"]),
    ([_span(endTimeUnixNano="1")], ["bad.jsonl:1: endTimeUnixNano is before startTimeUnixNano"]),
    ([_span(endTimeUnixNano=None)], ["bad.jsonl:1: no endTimeUnixNano beside startTimeUnixNano"]),
    ([_span(startTimeUnixNano="soon")], ["bad.jsonl:1: startTimeUnixNano: expected a whole number of nanoseconds"]),
    ([_span(startTimeUnixNano=None, endTimeUnixNano=None)], ["bad.jsonl:1: no start time (startTimeUnixNano"]),
    ([_span(spanId=None)], ["bad.jsonl:1: no span id (spanId, spanID, span_id, id)"]),
    ([_span(parentSpanId=7.5)], ["bad.jsonl:1: parentSpanId: expected the parent's span id"]),
    ([json.dumps({"traceID": "t", "spanID": "s", "startTime": 1, "process": {"serviceName": "a"}})],
     ["bad.jsonl:1: no duration (microseconds) beside startTime"]),
    ([_span(parentSpanId="elsewhere")], ["none of the 1 traces is whole"]),
    ([_span(traceId=f"t{i}", spanId="s", startTimeUnixNano="1000000000") for i in range(5)],
     ["the 5 traces fitted all began at one instant: no rate to fit"]),
    ([_span(traceId=f"t{i}", startTimeUnixNano=str(i * 10**9), endTimeUnixNano=str(i * 10**9 + 5)) for i in range(3)],
     ["service web: 3 service times are too few to fit a distribution: at least 4"]),
    ([], ["bad.jsonl: empty: no spans to fit"]),
    (["[" * 100_000 + "]" * 100_000], ["bad.jsonl:1: JSON nested too deep"]),
    (["x" * (1 << 20) + "y"], ["bad.jsonl:1: longer than 1048576 bytes"]),
])
def test_bad_spans_give_one_line_and_write_nothing(tmp_path, cli, lines, fragments):
    path = _bad(tmp_path, lines)
    result = cli("logs", "fit", path, "--format", "spans", "-o", str(tmp_path / "x.toml"))
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "x.toml").exists()


def test_a_cycle_of_calls_is_refused(tmp_path, cli):
    """a → b → a: a scenario's calls may not go round (docs/services.md)."""
    spans = []
    for i in range(5):
        t = i * 1_000_000
        tr = f"{i + 1:032x}"
        spans += [(tr, f"1{i}", None, "a", t, t + 10_000, None), (tr, f"2{i}", f"1{i}", "b", t + 1_000, t + 9_000, None),
                  (tr, f"3{i}", f"2{i}", "a", t + 2_000, t + 8_000, None)]
    path = _write(tmp_path / "t.jsonl", "otel", spans)
    result = cli("logs", "fit", str(path), "-o", str(tmp_path / "x.toml"))
    assert_one_line_error(result, "the calls go round in a cycle: a → b → a")
    assert not (tmp_path / "x.toml").exists()


@pytest.mark.parametrize("args, fragment", [
    (["--classes", "2"], "--classes: applies to router logs, not to spans"),
    (["--correct-queueing"], "--correct-queueing: applies to router logs, not to spans"),
    (["--window", "..10s"], "--window: applies to router logs, not to spans"),
    (["--host", "example.com"], "--host: applies to router logs, not to spans"),
])
def test_log_options_are_refused_for_spans(tmp_path, cli, args, fragment):
    path = _write(tmp_path / "t.jsonl", "otel")
    result = cli("logs", "fit", str(path), "-o", str(tmp_path / "x.toml"), *args)
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "x.toml").exists()


def test_the_report_draws_each_services_qq_plot_and_the_arrivals(tmp_path, cli):
    from dynosim.logs.fit import _figure

    result = cli("logs", "fit", str(TRACE), "-o", str(tmp_path / "x.toml"), "--report", str(tmp_path / "fit.png"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "fit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads(cli("logs", "fit", str(TRACE), "-o", str(tmp_path / "x.toml"), "--json").stdout)
    titles = [ax.get_title() for ax in _figure(report).axes if ax.get_visible()]
    assert titles == [f"{s['name']}: own time, KS {s['service']['ks_distance']:.3f}" for s in report["services"]] + [
        "arrivals"]


def test_a_router_log_is_not_read_as_spans():
    from dynosim.logs import spans

    assert not spans.looks_like_spans([str(FIXTURES / "heroku.log")])
    assert not spans.looks_like_spans([str(FIXTURES / "garbled.log")])
    assert spans.looks_like_spans([str(TRACE)])
    with pytest.raises(LogError, match="no request read"):
        logs.fit(str(FIXTURES / "garbled.log"))


def test_traces_of_one_service_fit_a_scenario_that_runs(tmp_path, monkeypatch):
    """No calls: the entry's own time is its [service], clipped at the longest, and nothing
    refuses a run (docs/services.md)."""
    monkeypatch.chdir(tmp_path)
    durations = [3, 5, 8, 13, 21, 34, 55, 89]  # ms
    spans = [(f"{i + 1:032x}", f"{i + 1:016x}", None, "web", i * 1_000_000, i * 1_000_000 + d * 1000, None)
             for i, d in enumerate(durations)]
    _write(tmp_path / "t.jsonl", "zipkin", spans)
    fit = logs.fit("t.jsonl")
    assert "services" not in fit.scenario and "request" not in fit.scenario
    assert fit.scenario["service"]["clip"] == ["0s", "89ms"]
    assert fit.report["calls"] == [] and fit.report["services"][0]["service"]["mean"] == pytest.approx(0.0285)
    Scenario.load(fit.scenario).check_runnable(simulated=True)
