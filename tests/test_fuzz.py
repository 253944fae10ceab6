"""The fuzz target: generated scenario files, ``--set`` values and command lines, each held to
the property in :mod:`fuzzing` (a result or one clear line, exit 0/2/3, strict JSON, no
traceback, no hang).

Bounded for CI: ``FUZZ_EXAMPLES`` examples per generator (default 500) and derandomized
(the same inputs every run) when ``CI`` is set, so that a landing is never decided by luck.
Explore further with ``make fuzz`` (random inputs, more examples); every case it finds is
kept in ``test_regressions.py``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings

from fuzzing import Case, check, command_cases, dyno_cases, file_cases, override_cases, run_case

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "500"))

fuzz = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None if os.environ.get("CI") else settings.default.database,
)


def _check(case: Case) -> None:
    with tempfile.TemporaryDirectory(prefix="dynosim-fuzz-") as folder:
        outcome = run_case(case, Path(folder))
    # --hypothesis-show-statistics shows how the cases ended: how many ran, and where the
    # others were stopped (the option or key path of the error).
    where = outcome.stderr.split(": ")[2:4] if outcome.code else []
    event(f"exit {outcome.code} {' '.join(where)[:40]}")
    check(case, outcome)


@fuzz
@given(file_cases())
def test_scenario_files(case: Case) -> None:
    _check(case)


@fuzz
@given(override_cases())
def test_set_values(case: Case) -> None:
    _check(case)


@fuzz
@given(command_cases())
def test_command_lines(case: Case) -> None:
    _check(case)


@fuzz
@given(dyno_cases())
def test_dyno_model_files(case: Case) -> None:
    _check(case)
