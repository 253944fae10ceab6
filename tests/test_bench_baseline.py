"""bench/seed_floor.py's check against its recorded baseline (issue #23 §1): a median more than
5% below the baseline's × floor is reported as a regression, and an engine that no longer
simulates what the floor simulates is refused rather than timed. No timing here: the
figures are made up, the logic is what is tested."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import seed_floor  # noqa: E402


def _rows(policy, ratios, queue=(1.5, 1.5)):
    return [{"policy": policy, "round": i, "requests": 1000, "floor_requests": 1000,
             "engine_seconds": 1.0, "floor_seconds": r, "engine_queue_mean": queue[0],
             "floor_queue_mean": queue[1]} for i, r in enumerate(ratios)]


def _baseline(x):
    return {"commit": "abc1234", "figures": {"random": {"x_floor": x}},
            "machine": {"cpu": "test", "os.cpu_count": 2}}


def test_the_median_over_rounds_is_the_figure():
    figures = seed_floor.summarise(_rows("random", [0.30, 0.40, 0.41, 0.42, 0.90]))
    assert figures["random"]["x_floor"] == pytest.approx(0.41)


@pytest.mark.parametrize("today, flagged", [(0.400, False), (0.381, False), (0.379, True), (0.300, True)])
def test_a_fall_of_more_than_five_percent_is_a_regression(today, flagged):
    figures = seed_floor.summarise(_rows("random", [today] * 3))
    lines, regressed = seed_floor.compare(figures, _baseline(0.400))
    assert (regressed == ["random"]) is flagged
    assert ("REGRESSION" in lines[1]) is flagged
    assert "0.400" in lines[1]  # the baseline's figure is printed beside today's


def test_no_baseline_no_verdict():
    lines, regressed = seed_floor.compare(seed_floor.summarise(_rows("random", [0.4] * 3)), None)
    assert regressed == [] and "baseline" not in lines[0]


def test_an_engine_that_simulates_something_else_is_refused():
    with pytest.raises(SystemExit, match="disagree"):
        seed_floor.summarise(_rows("random", [0.4] * 3, queue=(1.5, 1.6)))
