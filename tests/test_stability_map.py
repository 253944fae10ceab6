"""The metastability map that stops each replication at its verdict (what `dynosim stability`
runs for its table, picture and HTML report) draws the very map of the whole runs (what it runs
for --json and --out): every cell's recovered fraction, its interval and the recovery time,
equal to the bit, on a grid of the built-in retry-storm with cells that recover and cells that
stay down. The engine's own check, replication by replication, is
crates/dynosim-engine/tests/stop_at_verdict.rs."""

import json
import math
import re

from dynosim import Scenario
from dynosim.output import finite
from dynosim.sweep import parse_vary_args
from dynosim.stability import RECOVERED, StabilityMap, cell_text

#: retry-storm's map, three loads by three trigger lengths (docs/feedback.md).
VARY = ["arrivals.rate=3,6,9", "faults.0.for=15s,1min,4min"]


def _map(verdicts_only: bool) -> StabilityMap:
    grid_map = StabilityMap(Scenario.load("retry-storm"), parse_vary_args(VARY))
    grid_map.prepare()
    grid_map.run(verdicts_only=verdicts_only)
    return grid_map


def test_the_map_stopped_at_the_verdicts_is_the_whole_runs_map_to_the_bit():
    whole, stopped = _map(False), _map(True)
    # JSON text: floats to the last digit (repr), a missing recovery time as null on both.
    assert json.dumps(finite(stopped.grid())) == json.dumps(finite(whole.grid()))
    fractions = [c["recovered"] for row in whole.grid()["cells"] for c in row]
    assert 1.0 in fractions and 0.0 in fractions, fractions
    for w, s in zip(whole.sweep.rows, stopped.sweep.rows):
        for col, value in w.items():
            if col.startswith("stability."):
                assert json.dumps(finite(s[col])) == json.dumps(finite(value)), col
        # What the shortened runs measured besides the verdict is left out, not shown wrong.
        assert math.isnan(s["simulated_requests"]) and not math.isnan(w["simulated_requests"])
        assert s["offered_load"] == w["offered_load"] and s["status"] == w["status"] == "ok"
    # The runs did stop early: the map's JSON (whole runs) is what --json prints.
    assert stopped.verdicts_only and not whole.verdicts_only
    assert whole.to_json()["rows"][0][RECOVERED] == stopped.to_json()["rows"][0][RECOVERED]


def test_the_terminal_map_stops_at_the_verdicts_and_json_runs_whole(cli, tmp_path):
    """The command's table and --json agree cell by cell (the table's runs stopped at their
    verdicts, --json's whole)."""
    args = ["stability", "retry-storm", "--vary", VARY[0], "--vary", VARY[1], "--replications", "4"]
    table = cli(*args)
    assert table.returncode == 0, table.stderr
    doc = cli(*args, "--json")
    assert doc.returncode == 0, doc.stderr
    grid = json.loads(doc.stdout)["map"]
    lines = {re.split(r"\s{2,}", line.strip())[0]: re.split(r"\s{2,}", line.strip())
             for line in table.stdout.splitlines() if line.strip()}
    for load, row in zip(grid["loads"], grid["cells"]):
        # The load, its offered load, then a cell per trigger value.
        assert lines[str(load)][2:] == [cell_text(c) for c in row], lines[str(load)]
