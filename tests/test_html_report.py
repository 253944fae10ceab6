"""The self-contained HTML report (issue #27): `--html FILE` writes one file that needs nothing
else (every script and style inlined, a Content-Security-Policy that forbids every request),
holds the run's numbers, stays small beyond its data, and is written all or nothing. The
browser's view of it is tested in test_browser.py."""

import csv
import json
import re
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import dynosim
from conftest import BUILTIN, SMALL_MMC, assert_one_line_error, run_cli
from dynosim import Scenario, html_report
from dynosim.display import _cell
from dynosim.toml_text import toml_text

QUICK = ["--set", "run.replications=3", "--set", "run.duration=60s", "--set", "run.warmup=10s"]


def page_data(text):
    """The JSON the page's script draws from."""
    m = re.search(r'<script id="dynosim-data" type="application/json">(.*?)</script>', text, re.S)
    assert m, "no data element"
    return json.loads(m.group(1).replace("<\\/", "</"))


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "report.html"
    result = run_cli("compare", "rapgenius", "--policy", "random,intelligent", *QUICK, "--html", str(out))
    assert result.returncode == 0, result.stderr
    return out, out.read_text(encoding="utf-8"), result


def test_the_report_is_one_file_that_fetches_nothing(compared):
    _, text, result = compared
    assert f"wrote {compared[0]}" in result.stderr
    assert "<!doctype html>" in text.lower()
    # Nothing to fetch: no external script, style sheet, image or frame, and the page's own
    # policy forbids every request the browser could still be asked to make.
    assert re.search(r"<script[^>]+src=", text, re.I) is None
    assert re.findall(r"<link\b[^>]*>", text, re.I) == ['<link rel="icon" href="data:,">']  # no favicon request
    assert re.search(r"<(img|iframe|object|embed)\b", text, re.I) is None
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', text)
    assert csp and "default-src 'none'" in csp.group(1)
    assert "connect-src" not in csp.group(1)  # so it falls back to 'none'
    # uPlot and the report's script are inlined.
    assert "uPlot" in text and "dynosim-data" in text


def test_the_report_holds_the_runs_numbers(compared):
    _, text, _ = compared
    results = dynosim.run("rapgenius", policies=["random", "intelligent"],
                          set={"run.replications": 3, "run.duration": "60s", "run.warmup": "10s"}, warn=False)
    data = page_data(text)
    plots = {p["title"]: p for p in data["plots"]}
    response = plots["Response time"]
    assert response["x"]["ticks"] == ["p50", "p90", "p95", "p99", "p99.9"]
    for series, r in zip(response["series"], results):
        assert series["label"] == r.policy
        for k, key in enumerate(["p50", "p90", "p95", "p99", "p999"]):
            e = r.estimate(f"response.{key}")
            assert series["y"][k] == pytest.approx(e.mean * 1e3, rel=1e-12)
            if response["y"]["log"]:
                assert series["lo"][k] is None or series["lo"][k] == pytest.approx(e.ci_low * 1e3, rel=1e-12)
            assert series["hi"][k] == pytest.approx(e.ci_high * 1e3, rel=1e-12)
    # The table: the same cells the terminal shows with --wide, in the column's unit.
    queue = [r.estimate("queue.mean") for r in results]
    unit = 1.0 if max(e.mean for e in queue) >= 10 else 1e3
    for e in queue:
        assert f"{_cell(e, unit, True).partition(' ±')[0]} <span class=\"ci\">±" in text or \
            _cell(e, unit, True) in text
    # Over time: the policies on the same traffic, and one heat map per policy of a row per dyno.
    waiting = plots["Requests waiting"]
    assert [s["label"] for s in waiting["series"]] == ["random", "intelligent"]
    heat = [p for p in data["plots"] if p["kind"] == "heatmap"]
    assert [h["title"] for h in heat] == ["Per-dyno queues: random", "Per-dyno queues: intelligent"]
    assert len(heat[0]["rows"]) == 75 and all(len(row) == len(heat[0]["times"]) for row in heat[0]["rows"])
    # Intelligent routing sends a request only to an idle dyno: never more than one at a dyno.
    assert max(max(row) for row in heat[1]["rows"]) == 1
    assert max(max(row) for row in heat[0]["rows"]) > 1


def test_the_report_adds_under_200_kb_beyond_its_data(compared):
    _, text, _ = compared
    m = re.search(r'<script id="dynosim-data" type="application/json">(.*?)</script>', text, re.S)
    assert len(text.encode()) - len(m.group(1).encode()) < 200_000


def test_the_scenario_is_shown_as_toml_that_reads_back_and_in_words(compared):
    _, text, _ = compared
    m = re.search(r"<summary>The scenario as TOML</summary><pre>(.*?)</pre>", text, re.S)
    import html
    doc = tomllib.loads(html.unescape(m.group(1)))
    assert doc["fleet"]["dynos"] == 75 and doc["run"]["replications"] == 3
    assert "9,000 requests a minute" in text and "75 standard-1x dynos" in text


def test_warnings_reach_the_report(tmp_path):
    out = tmp_path / "short.html"
    result = run_cli("run", "rapgenius", "--set", "run.replications=2", "--set", "run.duration=5s",
                     "--set", "run.warmup=0s", "--html", str(out))
    assert result.returncode == 0, result.stderr
    warning = next(line for line in result.stderr.splitlines() if line.startswith("dynosim: warning: "))
    import html
    assert html.escape(warning.removeprefix("dynosim: warning: ")) in out.read_text(encoding="utf-8")


def test_an_autoscaled_run_shows_its_fleet_and_p95_over_time(tmp_path):
    out = tmp_path / "scaled.html"
    result = run_cli("run", BUILTIN / "autoscale-day.toml", "--set", "run.replications=2",
                     "--set", "run.duration=2h", "--html", str(out))
    assert result.returncode == 0, result.stderr
    plots = {p["title"]: p for p in page_data(out.read_text(encoding="utf-8"))["plots"]}
    fleet = plots["Fleet size"]
    assert len(fleet["series"]) == len(Scenario.load("autoscale-day").cases)
    for s in fleet["series"]:
        assert all(isinstance(v, (int, float)) and v >= 0 for v in s["y"])
    assert "Response time p95" in plots


def test_a_report_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path):
    target = tmp_path / "a-folder"
    target.mkdir()
    result = run_cli("run", "rapgenius", *QUICK, "--html", str(target))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "dynosim: error: --html: cannot write" in result.stderr
    assert list(target.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["a-folder"]


def test_a_bad_scenario_writes_no_report(tmp_path):
    out = tmp_path / "r.html"
    assert_one_line_error(run_cli("run", "rapgenius", "--set", "fleet.dynos=-1", "--html", str(out)), "fleet.dynos")
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(p.stem for p in BUILTIN.glob("*.toml")))
def test_toml_text_reads_back_as_the_same_document(name):
    doc = Scenario.load(name).doc
    assert tomllib.loads(toml_text(doc)) == doc


def test_script_json_cannot_end_its_element():
    text = html_report._script_json({"x": "</script><!-- a"})
    assert "</" not in text and "<!--" not in text
    assert json.loads(text.replace("<\\/", "</").replace("<\\!--", "<!--")) == {"x": "</script><!-- a"}


def test_a_log_axis_only_where_the_means_span_decades_and_none_is_zero():
    many = html_report.line_plot("t", "x", [0, 1], "y", [{"label": "a", "y": [1, 1000]}])
    assert many["y"]["log"] is True
    zero = html_report.line_plot("t", "x", [0, 1], "y", [{"label": "a", "y": [0, 1000]}])
    assert zero["y"]["log"] is False
    few = html_report.line_plot("t", "x", [0, 1, 2, 3], "y", [{"label": "a", "y": [0, 1, 10, 1000]}])
    assert few["y"]["log"] is True and few["series"][0]["y"] == [None, 1, 10, 1000]
    near = html_report.line_plot("t", "x", [0, 1], "y", [{"label": "a", "y": [10, 900]}])
    assert near["y"]["log"] is False
    # A band reaching below 0 on a log axis is cut at the axis, not dropped with its line.
    band = html_report.line_plot("t", "x", [0, 1], "y", [{"label": "a", "y": [1, 1000], "lo": [-5, 900],
                                                          "hi": [3, 1100]}])
    assert band["series"][0]["lo"] == [None, 900] and band["series"][0]["y"] == [1, 1000]


def test_a_heat_map_of_many_dynos_groups_them_by_their_largest():
    rows = [[d % 7, 0] for d in range(450)]
    heat = html_report.heat_map("t", [1.0, 2.0], rows)
    assert len(heat["rows"]) <= html_report.MAX_HEAT_ROWS
    group = 3  # ceil(450 / 200)
    assert heat["rows"][0] == [max(d % 7 for d in range(group)), 0]
    assert heat["row_names"][0] == "dynos 0–2 (largest)"


# --- every command's report holds what its JSON says -----------------------------------------



def both(tmp_path, *args):
    """The command's JSON on stdout and its report's plots, from one run."""
    out = tmp_path / "report.html"
    result = run_cli(*args, "--json", "--html", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    return json.loads(result.stdout), {p["title"]: p for p in page_data(text)["plots"]}, text


def test_capacity_report(tmp_path):
    (tmp_path / "mmc.toml").write_text(SMALL_MMC)
    doc, plots, text = both(tmp_path, "capacity", "mmc.toml", "--policy", "intelligent,random",
                            "--target", "queue.mean <= 10ms")
    plot = plots["queue.mean"]
    xs = plot["x"]["values"]
    for r, series in zip(doc["results"], plot["series"]):
        assert series["label"] == r["policy"]
        # The answer's estimate is on the curve, at its count, in ms.
        assert series["y"][xs.index(r["dynos"])] == pytest.approx(r["estimates"]["queue.mean"]["mean"] * 1e3)
        # Every count tried is a point of its curve, and only those.
        tried = {int(n) for n in r["evaluated"]}
        assert {x for x, y in zip(xs, series["y"]) if y is not None} == tried
    assert plot["series"][-1]["label"] == "target queue.mean <= 10ms" and set(plot["series"][-1]["y"]) == {10.0}
    assert "Dynos needed relative to intelligent" in text


def test_sweep_report(tmp_path):
    (tmp_path / "mmc.toml").write_text(SMALL_MMC)
    doc, plots, _ = both(tmp_path, "sweep", "mmc.toml", "--vary", "fleet.dynos=6,8,12",
                         "--vary", "router.policy=intelligent,random")
    plot = plots["queue.mean against fleet.dynos"]
    assert plot["x"]["values"] == [6, 8, 12]
    labels = [s["label"] for s in plot["series"]]
    for row in doc["rows"]:
        series = plot["series"][labels.index(row["policy"])]
        at = plot["x"]["values"].index(row["fleet.dynos"])
        assert series["y"][at] == pytest.approx(row["queue.mean"] * 1e3)
        assert series["hi"][at] == pytest.approx(row["queue.mean.ci_high"] * 1e3)


def test_ramp_report(tmp_path):
    (tmp_path / "mmc.toml").write_text(SMALL_MMC)
    doc, plots, _ = both(tmp_path, "ramp", "mmc.toml", "--rates", "20..60/20", "--duration", "30s")
    rate = plots["Response rate"]
    assert rate["x"]["values"] == [20, 40, 60]
    assert rate["series"][0]["y"] == pytest.approx([r["response_rate"] for r in doc["ramp"]])
    assert rate["series"][-1] == {"label": "offered", "dash": True, "y": [20, 40, 60]}
    p99 = plots["Response time p99"]["series"][0]["y"]
    assert p99 == pytest.approx([r["response_p99"] * 1e3 for r in doc["ramp"]])


def test_tune_report(tmp_path):
    (tmp_path / "mmc.toml").write_text(SMALL_MMC)
    doc, plots, text = both(tmp_path, "tune", "mmc.toml", "--vary", "fleet.dynos=5,6,8",
                            "--target", "queue.mean <= 10ms")
    plot = plots["queue.mean against cost"]
    ran = sorted((s for s in doc["points"] if s["status"] == "ok"), key=lambda s: s["cost"]["dollars_per_day"])
    assert plot["x"]["values"] == pytest.approx([s["cost"]["dollars_per_day"] for s in ran])
    meets, misses = plot["series"][0]["y"], plot["series"][1]["y"]
    for s, a, b in zip(ran, meets, misses):
        far = s["estimates"]["queue.mean"]["ci_high"] * 1e3
        assert (a, b) == ((pytest.approx(far), None) if s["meets"] else (None, pytest.approx(far)))
    assert "Best: " in text


def test_logs_summary_report(tmp_path):
    fixtures = BUILTIN.parents[2] / "tests" / "fixtures" / "logs"
    out = tmp_path / "logs.html"
    result = run_cli("logs", "summary", "heroku.log", "--json", "--html", str(out), cwd=fixtures)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    text = out.read_text(encoding="utf-8")
    plots = {p["title"]: p for p in page_data(text)["plots"]}
    rate = plots["Requests per second"]
    assert rate["x"]["time"] is True
    assert rate["series"][0]["y"] == [p["rate_per_s"] for p in doc["series"]]
    from datetime import datetime
    assert rate["x"]["values"] == [datetime.fromisoformat(p["start"]).timestamp() for p in doc["series"]]
    for route in doc["routes"]:
        import html
        assert f"<td class=\"text\">{html.escape(route['route'])}</td>" in text
    assert "1 malformed line skipped" in text  # the warning the terminal shows


def test_a_run_whose_clients_retried_shows_its_offered_load_and_goodput(tmp_path):
    """retry-storm's report draws the tries sent per interval against the goodput: the same
    figures as --timeseries's `offered` and `goodput` (each interval's), and a run without
    retries draws no such plot."""
    out, series = tmp_path / "storm.html", tmp_path / "storm.csv"
    result = run_cli("run", "retry-storm", "--set", "run.replications=1", "--html", str(out),
                     "--timeseries", str(series))
    assert result.returncode == 0, result.stderr
    plots = {p["title"]: p for p in page_data(out.read_text(encoding="utf-8"))["plots"]}
    load = {s["label"]: s["y"] for s in plots["Offered load and goodput"]["series"]}
    with open(series, newline="") as f:
        rows = list(csv.DictReader(f))
    assert load["random: offered"] == pytest.approx([float(r["offered"]) for r in rows])
    assert load["random: goodput"] == pytest.approx([float(r["goodput"]) for r in rows])
    assert max(load["random: offered"]) > 2 * max(float(r["arrivals_per_s"]) for r in rows[:10])
    plain = tmp_path / "plain.html"
    assert run_cli("run", "rapgenius", *QUICK, "--html", str(plain)).returncode == 0
    assert "Offered load and goodput" not in {p["title"] for p in page_data(plain.read_text(encoding="utf-8"))["plots"]}
