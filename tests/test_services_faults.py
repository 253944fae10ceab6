"""Faults in a service, judged at every fleet (docs/services.md, "Faults and the verdict"): the
page's chain-storm runs, neither the entry nor api recovers, and its map has the cells the
page's table gives. The spans and the window are checked in the engine's own tests
(crates/dynosim-engine/tests/services_faults.rs)."""

import json
import re

import pytest

from conftest import ROOT

PAGE = ROOT / "docs" / "services.md"


def page_scenario(tmp_path):
    text = PAGE.read_text(encoding="utf-8")
    (toml,) = [t for t in re.findall(r"```toml\n(.*?)```", text, re.S) if t.startswith("# chain-storm.toml")]
    path = tmp_path / "chain-storm.toml"
    path.write_text(toml, encoding="utf-8")
    return path


def test_the_pages_storm_stays_down_at_the_entry_and_at_api(tmp_path, cli):
    path = page_scenario(tmp_path)
    result = cli("run", str(path), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (report,) = json.loads(result.stdout)["results"]
    for rep in report["per_replication"]:
        assert rep["stability"]["recovered"] == 0.0
        assert rep["services"]["api"]["stability"]["recovered"] == 0.0
        # The entry was up before the fault: its goodput then was its arrivals'.
        assert 60 < rep["stability"]["baseline_goodput"] < 80


def test_the_pages_map_has_the_pages_cells(tmp_path, cli):
    path = page_scenario(tmp_path)
    result = cli("stability", str(path), "--vary", "arrivals.rate=40/s,70/s",
                 "--vary", "services.api.faults.0.factor=1.5,3", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    cells = json.loads(result.stdout)["map"]["cells"]
    assert [[c["recovered"] for c in row] for row in cells] == [[1.0, 1.0], [0.0, 0.0]]
    # The page's table says so.
    table = PAGE.read_text(encoding="utf-8").split("## Faults and the verdict")[1]
    assert "| 40/s | 100% recovered, at once | 100%, after 4 min |" in table
    assert "| 70/s | 0% | 0% |" in table
    assert cells[0][0]["recovery_time"] == 0.0 and cells[0][1]["recovery_time"] == 240.0
    # The load is the busiest fleet's, api's (70/s × 100 ms over 10 dynos), not the entry's
    # (2,000 threads barely used).
    assert [row[0]["offered_load"] for row in cells] == pytest.approx([0.4, 0.7], rel=1e-12)
