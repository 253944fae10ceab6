"""The engine's autoscale rules as the testbed drives them (``dynosim._dynosim.Autoscaler``):
the binding converts types and nothing more, so these check that each rule is reachable,
that the window and the clamp are the engine's, and that a bad table is the package's one-line
error naming the key."""

from __future__ import annotations

import pytest

from dynosim import _dynosim
from dynosim.errors import ScenarioError, from_engine


def build(table, section="autoscale"):
    try:
        return _dynosim.Autoscaler(table, section)
    except _dynosim.EngineError as e:
        raise from_engine(e) from None


@pytest.mark.parametrize("table, interval, metric", [
    ({"rule": "heroku", "max": 10}, 60.0, "response_time"),
    ({"rule": "judoscale", "max": 10}, 10.0, "queue_time"),
    ({"rule": "hirefire", "max": 10}, 60.0, "queue_time"),
    ({"rule": "hpa", "max": 10, "target": 0.6}, 15.0, "cpu"),
    ({"rule": "hpa", "max": 10, "target": 0.6, "metric": "utilisation"}, 15.0, "utilisation"),
    ({"rule": "target_tracking", "max": 10, "target": 0.5}, 60.0, "cpu"),
    ({"rule": "schedule", "max": 10, "schedule": [["0s", 2]], "interval": "5s"}, 5.0, None),
])
def test_every_rule_is_built_with_its_interval_and_metric(table, interval, metric):
    a = build(table)
    assert a.rule == table["rule"]
    assert a.interval == interval
    assert a.metric == metric
    assert a.bounds == (1, 10)


def test_judoscale_sees_a_breach_one_report_later():
    # The engine's own example: queue times of 300 ms in [0, 10 s) are not shown at 10 s
    # (the 10 s reporting delay), and are at 20 s: one dyno more.
    a = build({"rule": "judoscale", "max": 10})
    for i in range(100):
        a.record(i * 0.1, 0.3)
    desired, why, seen, samples = a.evaluate(10.0, 2, 2)
    assert (desired, seen, samples) == (2, None, 0)
    desired, why, seen, samples = a.evaluate(20.0, 2, 2)
    assert (desired, why, samples) == (3, "above the range", 100)
    assert seen == pytest.approx(0.3, rel=1e-3)


def test_hpa_reads_the_mean_of_the_dynos_reports():
    a = build({"rule": "hpa", "max": 20, "target": 0.5, "metric": "utilisation", "delay": "0s"})
    for tick in range(3):
        a.record_total(tick * 5.0, 4.0, 4)  # four dynos, each busy all the time
    desired, _, seen, samples = a.evaluate(15.0, 4, 4)
    assert (desired, seen, samples) == (8, 1.0, 12)


def test_a_schedule_follows_the_time_of_day():
    a = build({"rule": "schedule", "min": 2, "max": 4, "interval": "10s",
               "schedule": [["0s", 2], ["30s", 4]]})
    assert [a.evaluate(t, 2, 2)[0] for t in (10.0, 20.0, 30.0, 40.0)] == [2, 2, 4, 4]


def test_answers_are_clamped_to_min_and_max():
    # Nothing to read: the rule holds, and the clamp brings a fleet outside [min, max] into it.
    a = build({"rule": "heroku", "min": 2, "max": 10})
    assert a.evaluate(60.0, 20, 20)[:2] == (10, "clamped to [min, max]")
    assert a.evaluate(120.0, 1, 1)[0] == 2


def test_each_autoscaler_keeps_its_own_state():
    a, b = build({"rule": "heroku", "max": 10}), build({"rule": "heroku", "max": 10})
    a.record(1.0, 5.0)
    assert a.evaluate(60.0, 2, 2)[0] == 3
    assert b.evaluate(60.0, 2, 2)[0] == 2


@pytest.mark.parametrize("table, section, expected", [
    ({"rule": "hpa", "max": 3}, "autoscale", "autoscale.target: missing"),
    ({"max": 3}, "autoscale", "autoscale.rule: missing; expected one of: heroku, judoscale"),
    ({"rule": "judoscale", "max": 3, "cooldown": "-3min"}, "autoscale",
     "autoscale.cooldown: must be a duration >= 0"),
    ({"rule": "schedule", "max": 3, "schedule": [["0s", 1]], "dynos": 2}, "x.autoscale",
     "x.autoscale.dynos: unknown key"),
    ([1, 2], "autoscale", "autoscale: expected a table, got list"),
    ({"rule": "hpa", "max": 3, "target": object()}, "autoscale",
     "autoscale: cannot be read as a table of plain values"),
])
def test_a_bad_table_is_one_line_naming_the_key(table, section, expected):
    with pytest.raises(ScenarioError) as caught:
        build(table, section)
    text = str(caught.value)
    assert text.startswith(expected), text
    assert "\n" not in text
