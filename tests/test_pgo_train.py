"""tools/pgo_train.py: the workload a profile-guided build learns from, and its check that
the instrumented and optimised builds compute exactly what the plain build computed."""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_tool():
    spec = importlib.util.spec_from_file_location("pgo_train", REPO / "tools" / "pgo_train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_workload_runs_every_built_in_scenario_and_the_benchmarks_dynos(tmp_path, capsys):
    tool = load_tool()
    results = tmp_path / "results.json"
    assert tool.main(["train", str(results)]) == 0
    saved = json.loads(results.read_text())
    from dynosim.scenario import builtin_scenarios
    for name in builtin_scenarios():
        assert any(label.startswith(f"{name} ") for label in saved), name
    for label in ("two-phase", "io-phase 10k", "phases 10k"):
        assert saved[label]["per_replication"][0]["simulated_requests"] > 100_000
    # No wall time kept: it differs from run to run, the figures must not.
    assert "wall_seconds" not in results.read_text()
    # The same build, run again: the same figures, so the check passes.
    assert tool.main(["check", str(results)]) == 0


def test_the_check_fails_on_any_difference(tmp_path, monkeypatch, capsys):
    tool = load_tool()
    results = {"two-phase": {"response": {"mean": 0.020}}, "phases 10k": {"x": [1, 2]}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    monkeypatch.setattr(tool, "run_all", lambda: json.loads(json.dumps(results)))
    assert tool.main(["check", str(path)]) == 0
    # The last bit of one figure.
    changed = json.loads(json.dumps(results))
    changed["two-phase"]["response"]["mean"] = 0.020000000000000004
    monkeypatch.setattr(tool, "run_all", lambda: changed)
    assert tool.main(["check", str(path)]) == 1
    assert "two-phase" in capsys.readouterr().err
    # A run missing, or one more.
    monkeypatch.setattr(tool, "run_all", lambda: {"two-phase": results["two-phase"]})
    assert tool.main(["check", str(path)]) == 1
    monkeypatch.setattr(tool, "run_all", lambda: dict(results, extra={}))
    assert tool.main(["check", str(path)]) == 1


def test_a_wrong_command_line_is_refused(capsys):
    assert load_tool().main(["merge"]) == 2
    assert "usage" in capsys.readouterr().err
