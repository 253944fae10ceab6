"""Long time axes read as a clock (issue #34, "The docs speak of the product"): an axis of
seconds from a run's start that spans more than two hours is labelled in hours and minutes
(``00:00, 06:00, ..., 24:00`` for the built-in day, ``autoscale-day``), in every plot that has
one: ``run --timeseries``'s PNG and ``logs fit --plot``'s arrivals (matplotlib: the tick labels
of the figure as drawn), and the HTML report's plots and heat maps (the axis configuration it
emits; tests/test_browser.py reads the labels uPlot draws from it). Shorter axes keep seconds.
"""

import json
import re

import pytest

from conftest import SMALL_MMC, run_cli

from dynosim import time_axis, timeseries
from dynosim.logs.fit import _figure
from dynosim.scenario import Scenario

#: The built-in day with a tenth of its traffic (the same daily sine and hourly bursts): the
#: axes depend on the run's length, not on its rate.
LIGHT_DAY = ["run.replications=1", 'arrivals.rate={mean = "2.5/s", amplitude = "2/s", period = "24h", peak = "15h"}']

DAY_TICKS = ["00:00", "06:00", "12:00", "18:00", "24:00"]


# --- the rule ------------------------------------------------------------------------------


@pytest.mark.parametrize("seconds, text", [
    (0, "00:00"), (90, "00:01:30"), (6 * 3600, "06:00"), (13.5 * 3600, "13:30"), (86400, "24:00"),
    (86400 + 3600, "d2 01:00"), (2 * 86400, "d2 24:00"), (2 * 86400 + 60, "d3 00:01")])
def test_a_clock_label_is_hours_and_minutes_with_the_day_past_the_first(seconds, text):
    assert time_axis.label(seconds) == text


def test_only_axes_longer_than_two_hours_are_clocks():
    assert not time_axis.is_clock(2 * 3600)
    assert time_axis.is_clock(2 * 3600 + 1)
    assert time_axis.spec([0, 60, 7200]) is None
    assert time_axis.spec([0, 3600, 7201]) == {"steps": list(time_axis.STEPS), "most": time_axis.MOST_INTERVALS}


@pytest.mark.parametrize("hours", [2.5, 3, 6, 12, 24, 48, 24 * 7, 24 * 30])
def test_ticks_are_whole_steps_few_and_cover_the_axis(hours):
    span = hours * 3600
    ticks = time_axis.ticks(0, span)
    step = time_axis.step(span)
    assert ticks[0] == 0 and span - step < ticks[-1] <= span
    assert 3 <= len(ticks) <= time_axis.MOST_INTERVALS + 1
    assert all(b - a == step for a, b in zip(ticks, ticks[1:]))
    assert step % 60 == 0  # whole minutes: the labels never need seconds


def test_a_day_is_cut_at_six_hours():
    assert [time_axis.label(t) for t in time_axis.ticks(0, 86400)] == DAY_TICKS


# --- matplotlib: run --timeseries ------------------------------------------------------------


def _tick_labels(fig):
    """The bottom panel's x tick labels as drawn (those inside the axis), and its label."""
    fig.canvas.draw()
    ax = fig.axes[-1]
    lo, hi = sorted(ax.get_xlim())
    shown = [t.get_text() for t in ax.get_xticklabels() if lo - 1e-9 <= t.get_position()[0] <= hi + 1e-9]
    return shown, ax.get_xlabel()


def test_the_built_in_days_timeseries_reads_as_a_clock():
    import matplotlib.pyplot as plt

    day = Scenario.load("autoscale-day").with_overrides(LIGHT_DAY)
    label, case = day.cases[-1]  # the scheduled fleet's: it changes size, five panels
    rows = timeseries.series(case, case.policies, 3600.0, case=label)
    assert rows[-1]["time"] == 86400
    fig = timeseries.figure(rows, "a day")
    try:
        labels, xlabel = _tick_labels(fig)
        assert len(fig.axes) == 5
        assert labels == DAY_TICKS
        assert xlabel == "simulated time (hh:mm), warm-up included"
    finally:
        plt.close(fig)


def test_a_short_runs_timeseries_keeps_seconds(tmp_path):
    import matplotlib.pyplot as plt

    (tmp_path / "mmc.toml").write_text(SMALL_MMC)
    scenario = Scenario.load(tmp_path / "mmc.toml")
    rows = timeseries.series(scenario, scenario.policies, 5.0)
    fig = timeseries.figure(rows, "70 s")
    try:
        labels, xlabel = _tick_labels(fig)
        assert xlabel == "simulated time (s), warm-up included"
        assert labels and all(re.fullmatch(r"−?\d+", t) for t in labels if t), labels
    finally:
        plt.close(fig)


# --- matplotlib: logs fit --plot -------------------------------------------------------------


def _fit_report(hours: float):
    """What dynosim.logs.fit's figure reads of a fit's report: a Q-Q plot and the arrivals by segment."""
    span = hours * 3600
    edges = [span * k / 6 for k in range(7)]
    return {"service": {"qq": [[0.5, 0.1, 0.11], [0.9, 0.3, 0.28]], "ks_distance": 0.02},
            "arrivals": {"segments": [{"start": a, "end": b, "rate_per_s": 10.0 + k}
                                      for k, (a, b) in enumerate(zip(edges, edges[1:]))],
                         "schedule": None, "rate_per_s": 12.5}}


def test_a_day_long_logs_arrivals_read_as_a_clock():
    import matplotlib.pyplot as plt

    fig = _figure(_fit_report(24))
    try:
        labels, xlabel = _tick_labels(fig)
        assert labels == DAY_TICKS
        assert xlabel == "time from the first whole interval (hh:mm)"
    finally:
        plt.close(fig)


def test_an_hour_long_logs_arrivals_keep_minutes():
    import matplotlib.pyplot as plt

    fig = _figure(_fit_report(1))
    try:
        labels, xlabel = _tick_labels(fig)
        assert xlabel == "minutes from the first whole interval"
        assert not any(":" in t for t in labels)
        assert max(float(t.replace("−", "-")) for t in labels if t) <= 60
    finally:
        plt.close(fig)


# --- the HTML report -------------------------------------------------------------------------


def _plots(path):
    page = path.read_text(encoding="utf-8")
    data = re.search(r'<script id="dynosim-data" type="application/json">(.*?)</script>', page, re.S)
    assert data, "the report embeds its data"
    return json.loads(data.group(1).replace("<\\/", "</"))["plots"]


def test_the_built_in_days_report_emits_clock_axes(tmp_path):
    out = tmp_path / "day.html"
    result = run_cli("run", "autoscale-day", *[a for o in LIGHT_DAY for a in ("--set", o)], "--html", str(out))
    assert result.returncode == 0, result.stderr
    plots = _plots(out)
    timed = [p for p in plots if p["title"] in ("Requests waiting", "Fleet size", "Response time p95")]
    assert len(timed) == 3
    for p in timed:
        assert p["x"]["label"] == "time (hh:mm)"
        assert p["x"]["clock"] == {"steps": list(time_axis.STEPS), "most": time_axis.MOST_INTERVALS}
        assert p["x"]["values"][0] == 0 and p["x"]["values"][-1] == 86400
    heat = [p for p in plots if p["kind"] == "heatmap"]
    assert heat and all(p["clock"] == timed[0]["x"]["clock"] for p in heat)
    # The percentile plots are not time axes.
    assert all(p["x"].get("clock") is None for p in plots if p["kind"] == "line" and p not in timed)


def test_a_short_runs_report_keeps_seconds(tmp_path):
    (tmp_path / "mmc.toml").write_text(SMALL_MMC)
    out = tmp_path / "short.html"
    result = run_cli("run", "mmc.toml", "--html", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    plots = _plots(out)
    waiting = next(p for p in plots if p["title"] == "Requests waiting")
    assert waiting["x"]["label"] == "time (s)" and waiting["x"]["clock"] is None
    assert all(p["clock"] is None for p in plots if p["kind"] == "heatmap")
