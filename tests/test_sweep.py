"""`dynosim sweep`: the --vary parser, an end-to-end sweep on the seed study, its outputs and
plot, and that a mistake or Ctrl-C leaves no files behind."""

import _thread
import csv
import json
import math
import os
import time
import xml.etree.ElementTree as ET

import pytest

import dynosim
from dynosim import ScenarioError, cli
from dynosim import distributed
from dynosim import sweep as sweep_module
from dynosim.cli import common
from dynosim.sweep import parse_spec, parse_vary, parse_vary_args

from conftest import child_process, run_cli


# --- the --vary parser -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("1..100:3", [1, 10, 100]),                    # B/A >= 10: log by default
        ("1..100:log:3", [1, 10, 100]),                # options in any order
        ("0..100:5", [0, 25, 50, 75, 100]),            # A = 0: linear
        ("10..50:5", [10, 20, 30, 40, 50]),            # B/A < 10: linear
        ("1..4:3:log", [1, 2, 4]),
        ("1..1000:4:lin", [1, 334, 667, 1000]),
        ("-1..1:3", [-1, 0, 1]),
        ("1..5", [1, 2, 3, 4, 5]),                     # 12 points rounded to whole numbers: deduplicated
        ("1..3:12:log", [1, 2, 3]),
        ("0.5..2.5:5", [0.5, 1.0, 1.5, 2.0, 2.5]),     # decimal bounds: no rounding
        ("0.1..10:3", [0.1, 1.0, 10.0]),
        ("0..0.3:4", [0.0, 0.1, 0.2, 0.3]),            # no 0.30000000000000004
        (" 1 .. 100 : 3 ", [1, 10, 100]),
    ],
)
def test_range(spec, expected):
    values = parse_spec("fleet.dynos", spec)
    assert values == expected
    assert all(type(v) is type(expected[0]) for v in values)


def test_default_range_is_12_log_spaced_whole_numbers():
    values = parse_spec("fleet.dynos", "50..10000")
    assert len(values) == 12
    assert values[0] == 50 and values[-1] == 10000
    assert all(isinstance(v, int) for v in values)
    ratios = [b / a for a, b in zip(values, values[1:])]
    assert max(ratios) / min(ratios) < 1.02  # a constant ratio: log spacing
    assert parse_spec("x", "0.5..2")[:3] == [0.5, pytest.approx(0.636364), pytest.approx(0.772727)]


@pytest.mark.parametrize(
    "spec, expected",
    [
        # Points spaced, and rounded to whole numbers, in A's unit; given in the base unit.
        ("50ms..400ms:8", [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]),
        ("1min..20min:6", [60, 120, 180, 360, 660, 1200]),       # B/A >= 10: log, whole minutes
        ("500ms..2s:4", [0.5, 1, 1.5, 2]),                       # B in A's unit: 2000 ms
        ("1s..1500ms:3", [1, 1.25, 1.5]),                        # 1.5 s is no whole number of s
        ("0.05..400ms:8", [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]),  # a bare bound: seconds
        ("1.5 s .. 3 s:4", [1.5, 2, 2.5, 3]),
        ("50/s..6000/min:3", [50, 75, 100]),                     # rates, per second
        ("6000/min..12000/min:3", [100, 150, 200]),
        ("256MB..1GB:4", [256_000_000, 504_000_000, 752_000_000, 1_000_000_000]),
        ("1GiB..2GiB:2", [1024 ** 3, 2 * 1024 ** 3]),
    ],
)
def test_range_with_units(spec, expected):
    values = parse_spec("run.duration", spec)
    assert values == pytest.approx(expected, rel=1e-12, abs=0)
    # No float noise: each value is what its decimal text says.
    assert all(float(repr(v)) == v and len(repr(v)) <= 14 for v in values)


def test_a_range_with_units_is_what_the_same_list_gives():
    """A range's values, applied as the sweep applies them, give the scenario the same
    durations as the list of the same values written with units."""
    from dynosim import Scenario

    scenario = Scenario.load("rapgenius")
    ranged = [scenario.with_overrides({"run.warmup": v}).describe()["warmup"]
              for v in parse_spec("run.warmup", "500ms..2s:4")]
    listed = [scenario.with_overrides({"run.warmup": v}).describe()["warmup"]
              for v in parse_spec("run.warmup", '"500ms","1s","1500ms","2s"')]
    assert ranged == listed == [0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("random,intelligent", ["random", "intelligent"]),
        ("1, 2.5 ,true", [1, 2.5, True]),
        ("10s,1min", ["10s", "1min"]),                 # not TOML: plain strings, like --set
        ('"a,b",c', ["a,b", "c"]),                     # commas inside quotes and lists stay
        ('[1, 2],[3]', [[1, 2], [3]]),
        ("75", [75]),
        ("../data/times.txt", ["../data/times.txt"]),  # a path, not a range
    ],
)
def test_list(spec, expected):
    assert parse_spec("k", spec) == expected


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("fleet.dynos", "expected key.path=SPEC"),
        ("=1,2", "expected key.path=SPEC"),
        ("fleet..dynos=1", "invalid key path"),
        ("fleet.dynos=", "no values"),
        ("fleet.dynos=1,,2", "empty value"),
        ("fleet.dynos=1,", "empty value"),
        ("fleet.dynos=10..5", "expected A < B"),
        ("fleet.dynos=5..5", "expected A < B"),
        ("fleet.dynos=1..x", "not a number"),
        ("fleet.dynos=a..b", "invalid range"),
        ("run.duration=1min..5MB", "'min' is the unit of a duration and 'MB' of a size"),
        ("run.duration=1min..5parsecs", "unknown unit 'parsecs'"),
        ("run.duration=5min..1min", "expected A < B"),
        ("run.duration=1min..30", "expected A < B"),               # a bare bound is in seconds
        ("run.duration=1min..5min:log:lin", "given twice"),
        ("fleet.dynos=1..100:1", "at least 2 points"),
        ("fleet.dynos=1..100:0", "at least 2 points"),
        ("fleet.dynos=0..100:log", "log spacing needs A > 0"),
        ("fleet.dynos=1..100:quad", "unknown option 'quad'"),
        ("fleet.dynos=1..100:5:6", "given twice"),
        ("fleet.dynos=1..100:log:lin", "given twice"),
    ],
)
def test_bad_spec(text, fragment):
    with pytest.raises(ScenarioError) as info:
        parse_vary(text)
    assert info.value.file == "--vary"
    message = str(info.value)
    assert message.startswith("--vary: ") and fragment in message and "\n" not in message


def test_a_key_given_twice():
    with pytest.raises(ScenarioError, match="given twice"):
        parse_vary_args(["fleet.dynos=1,2", "fleet.dynos=3"])
    assert parse_vary_args(["fleet.dynos=1..4:4", "router.policy=random"]) == {
        "fleet.dynos": [1, 2, 3, 4], "router.policy": ["random"]}


def test_the_plot_names_the_base_unit_of_any_key_with_one():
    assert sweep_module._key_unit("autoscale.upscale_above", [0.05, 0.1]) == "s"
    assert sweep_module._key_unit("fleet.memory", [512_000_000]) == "bytes"
    assert sweep_module._key_unit("arrivals.rate", [100, 200]) == "req/s"
    assert sweep_module._key_unit("fleet.dynos", [1, 2]) is None
    assert sweep_module._key_unit("autoscale.upscale_above", ["50ms"]) is None  # a list's strings


def test_a_range_of_durations_runs_each_duration(cli, tmp_path):
    """`--vary router.timeout=1s..30s:2`: the points are 1 and 30 seconds, and the runs got
    them (at a 1 s timeout the router answers H12 to every request slower than that)."""
    result = cli("sweep", "rapgenius", "--vary", "router.timeout=1s..30s:2", "--set", "router.policy=random",
                 "--duration", "1min", "--replications", "2", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["vary"] == {"router.timeout": [1, 30]}
    rows = {row["router.timeout"]: row for row in doc["rows"]}
    # Every request whose service alone outlasts the timeout is an H12: at 1 s at least
    # P(S > 1 s) of them, less 5 binomial standard errors of the window's requests.
    from dynosim import Scenario, _dynosim

    one = Scenario.load("rapgenius").with_overrides({"router.policy": "random"})
    slow = 1 - one._call(_dynosim.service_cdf, [1.0])[0]
    n = rows[1]["requests"] * 2
    assert rows[1]["errors.h12"] >= slow - 5 * math.sqrt(slow * (1 - slow) / n), (rows[1]["errors.h12"], slow)
    assert rows[30]["errors.h12"] < slow / 10


# --- end to end ------------------------------------------------------------------------------

SWEEP = ["sweep", "rapgenius", "--vary", "fleet.dynos=40..400:5", "--vary", "router.policy=random,intelligent",
         "--duration", "1min", "--replications", "3", "--out", "tmp/sw"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One sweep, PNG and SVG: 5 fleet sizes (40 is unstable: load 1.13) × 2 policies."""
    cwd = tmp_path_factory.mktemp("sweep")
    result = run_cli(*SWEEP, "--format", "png,svg", cwd=cwd)
    return cwd, result


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_sweep_runs_and_writes_every_output(swept):
    cwd, result = swept
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(cwd)) == ["tmp"]
    assert sorted(os.listdir(cwd / "tmp")) == ["sw.csv", "sw.json", "sw.png", "sw.svg"]  # no temporaries
    assert "tmp/sw.csv" in result.stdout and "tmp/sw.png" in result.stdout
    assert "queue.mean" in result.stdout and "unstable" in result.stdout
    # One line on stderr about the unstable points.
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "2 of 10 points unstable" in lines[0], result.stderr
    assert "fleet.dynos=40" in lines[0]


def test_csv(swept):
    cwd, _ = swept
    header, *rows = _rows(cwd / "tmp" / "sw.csv")
    reference = dynosim.run("rapgenius", policies=["random"], duration="1s", replications=2)[0].row()
    assert header == ["fleet.dynos", "router.policy", "status", "steady_state"] + list(reference)
    assert header[4:7] == ["scenario", "policy", "dynos"]
    assert "queue.mean.ci_low" in header and "queue.mean.ci_high" in header
    table = [dict(zip(header, r)) for r in rows]
    # One row per point and policy, in point order.
    assert [(r["fleet.dynos"], r["policy"]) for r in table] == [
        (str(d), p) for d in (40, 71, 126, 225, 400) for p in ("random", "intelligent")]
    assert all(r["router.policy"] == r["policy"] and r["dynos"] == r["fleet.dynos"] for r in table)
    for r in table:
        if r["fleet.dynos"] == "40":
            assert r["status"] == "unstable" and r["steady_state"] == ""
            assert float(r["offered_load"]) == pytest.approx(1.134, abs=0.001)
            assert r["queue.mean"] == "" and r["queue.mean.ci_low"] == ""  # no metrics
            assert r["scenario"] == "rapgenius" and r["replications"] == "3"
        else:
            assert r["status"] == "ok"
            assert float(r["offered_load"]) < 1
            assert float(r["queue.mean.ci_low"]) <= float(r["queue.mean"]) <= float(r["queue.mean.ci_high"])


def test_random_queues_less_with_more_dynos(swept):
    cwd, _ = swept
    header, *rows = _rows(cwd / "tmp" / "sw.csv")
    random = {int(r[0]): dict(zip(header, r)) for r in rows if r[1] == "random" and r[2] == "ok"}
    means = [float(random[d]["queue.mean"]) for d in sorted(random)]
    assert means == sorted(means, reverse=True)
    # Beyond the confidence intervals: 71 dynos against 400.
    assert float(random[71]["queue.mean.ci_low"]) > float(random[400]["queue.mean.ci_high"])
    # Intelligent routing at this load queues (almost) nothing.
    intelligent = [dict(zip(header, r)) for r in rows if r[1] == "intelligent" and r[2] == "ok"]
    assert all(float(r["queue.mean"]) < 0.01 for r in intelligent)


def test_json(swept):
    cwd, _ = swept
    text = (cwd / "tmp" / "sw.json").read_text()

    def no_constants(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    doc = json.loads(text, parse_constant=no_constants)  # NaN written as null, not NaN
    assert doc["scenario"] == "rapgenius"
    assert doc["metric"] == "queue.mean"
    assert doc["vary"] == {"fleet.dynos": [40, 71, 126, 225, 400], "router.policy": ["random", "intelligent"]}
    assert len(doc["rows"]) == 10
    first, third = doc["rows"][0], doc["rows"][2]
    assert first["status"] == "unstable" and first["queue.mean"] is None
    assert third["status"] == "ok" and third["fleet.dynos"] == 71 and third["queue.mean"] > 0
    header = _rows(cwd / "tmp" / "sw.csv")[0]
    assert list(first) == header


def test_plots(swept):
    cwd, _ = swept
    png = (cwd / "tmp" / "sw.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    root = ET.parse(cwd / "tmp" / "sw.svg").getroot()
    assert root.tag.endswith("svg")
    svg = (cwd / "tmp" / "sw.svg").read_text()
    for text in ("queue.mean (s)", "fleet.dynos", "rapgenius", "random", "intelligent"):
        assert text in svg


def test_same_sweep_same_files(swept, tmp_path):
    """Threads finish in any order; the outputs do not depend on it."""
    cwd, _ = swept
    result = run_cli(*SWEEP, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "tmp" / "sw.csv").read_bytes() == (cwd / "tmp" / "sw.csv").read_bytes()
    assert sorted(os.listdir(tmp_path / "tmp")) == ["sw.csv", "sw.json", "sw.png"]  # PNG only by default


def _strict(text):
    def no_constants(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=no_constants)


def test_json_prints_the_document_and_writes_no_files(swept, tmp_path):
    """Issue 23: `dynosim sweep ... --json` was refused ("unrecognized arguments"). Like the
    other verbs' --json it prints one document, PREFIX.json's, and without --out writes nothing."""
    cwd, _ = swept
    assert SWEEP[-2] == "--out"
    result = run_cli(*SWEEP[:-2], "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert os.listdir(tmp_path) == []  # neither sweep.* nor temporaries
    written = (cwd / "tmp" / "sw.json").read_text()
    assert _strict(result.stdout) == _strict(written)
    assert result.stdout == written  # the very same text
    lines = result.stderr.strip().splitlines()  # the warnings as without --json, and no "wrote"
    assert len(lines) == 1 and "2 of 10 points unstable" in lines[0], result.stderr


def test_json_with_out_writes_the_files_too(swept, tmp_path):
    cwd, _ = swept
    result = run_cli(*SWEEP, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path / "tmp")) == ["sw.csv", "sw.json", "sw.png"]
    assert result.stdout == (tmp_path / "tmp" / "sw.json").read_text()
    assert _strict(result.stdout) == _strict((cwd / "tmp" / "sw.json").read_text())
    assert (tmp_path / "tmp" / "sw.csv").read_bytes() == (cwd / "tmp" / "sw.csv").read_bytes()
    assert result.stderr.strip().splitlines()[-1] == "wrote tmp/sw.csv, tmp/sw.json, tmp/sw.png"


# --- mistakes and interruptions leave nothing behind -----------------------------------------


@pytest.mark.parametrize(
    "vary, fragments",
    [
        ("fleet.dynos=400..40", ["--vary: fleet.dynos:", "A < B"]),
        ("fleet.dynos=10..100:zz", ["--vary: fleet.dynos:", "unknown option"]),
        ("router.dd=1,2", ["--vary: router.dd:", "unknown key"]),
        ("fleet.dynos=100,0", ["--vary: fleet.dynos:", "whole number"]),  # one bad point: nothing runs
        ("router.policy=random,smart", ["--vary: router.policy:", "smart"]),
        # A section the engine does not know is named as --vary's, without a point's value.
        ("frob.key=1,2", ["--vary: frob: unknown field `frob`"]),
    ],
)
def test_mistakes_give_one_line_and_no_files(cli, tmp_path, vary, fragments):
    result = cli("sweep", "--vary", vary, "--vary", "fleet.slots=1,2", "--duration", "10s",
                 "--replications", "2", "--out", "out/sw", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynosim: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--vary", "fleet.dynos=100,200", "--metric", "queue.p98"], "unknown metric 'queue.p98'"),
        (["--vary", "fleet.dynos=100,200", "--format", "gif"], "unknown plot format 'gif'"),
        (["--vary", "fleet.dynos=100,200", "--json", "--format", "svg"], "--format: give --out PREFIX too"),
        ([], "--vary"),
    ],
)
def test_bad_options(cli, tmp_path, args, fragment):
    result = cli("sweep", *args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert os.listdir(tmp_path) == []


def _small_sweep_args(out):
    return ["sweep", "--vary", "fleet.dynos=100..400:4", "--duration", "2s", "--replications", "2", "--out", out]


def test_failure_while_writing_leaves_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def broken_plot(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while drawing: the CSV and JSON are already written

    monkeypatch.setattr(sweep_module, "plot", broken_plot)
    assert cli.main(_small_sweep_args("new/dir/sw")) == common.EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []  # neither files, temporaries nor the folders it made


def test_ctrl_c_while_running_stops_and_leaves_nothing(tmp_path, monkeypatch, capsys, ctrl_c_raises):
    """interrupt_main() does nothing unless SIGINT has a Python handler: ctrl_c_raises."""
    monkeypatch.chdir(tmp_path)
    real = distributed._run_here
    calls = []

    def interrupted_run(scenario, *args):
        calls.append(scenario)
        if len(calls) == 2:
            _thread.interrupt_main()  # what Ctrl-C does to the main thread
            time.sleep(0.2)
        return real(scenario, *args)

    monkeypatch.setattr(distributed, "_run_here", interrupted_run)
    args = ["sweep", "--vary", "fleet.dynos=100..1000:30", "--duration", "2s", "--replications", "2",
            "--out", "sw"]
    assert cli.main(args) == common.EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
    time.sleep(0.5)
    assert len(calls) < 60  # the runs not started were dropped


def test_python_use(tmp_path):
    """The Sweep class, without the command line."""
    scenario = dynosim.Scenario.load("rapgenius").with_overrides(
        {"run.duration": "2s", "run.replications": 2, "router.policy": ["random", "power_of_d"]})
    sweep = sweep_module.Sweep(scenario, {"fleet.slots": [1, 2]}, metric="queue.p99")
    sweep.prepare()
    sweep.run()
    assert [(r["fleet.slots"], r["policy"], r["status"]) for r in sweep.rows] == [
        (1, "random", "ok"), (1, "power_of_d", "ok"), (2, "random", "ok"), (2, "power_of_d", "ok")]
    assert not any(isinstance(v, float) and math.isnan(v) for r in sweep.rows for v in [r["queue.p99"]])
    paths = sweep_module.output_paths(str(tmp_path / "s.csv"), ["svg"])  # a known suffix is dropped
    assert sorted(p.name for p in paths.values()) == ["s.csv", "s.json", "s.svg"]
    sweep_module.write_outputs(sweep, paths)
    assert ET.parse(tmp_path / "s.svg").getroot().tag.endswith("svg")
    assert "queue.p99 (s)" in (tmp_path / "s.svg").read_text()


def test_ctrl_c_stops_runs_already_in_the_engine(tmp_path):
    """A real SIGINT while worker threads are inside the engine: every run is told to stop
    (signals reach only the main thread). Each point here is ~100 s of engine work, so a
    sweep that waited for its runs could not exit within the generous limit below."""
    import signal
    import subprocess
    import sys
    import time

    with child_process(
            [sys.executable, "-m", "dynosim", "sweep", "rapgenius", "--vary", "fleet.dynos=80,90",
             "--duration", "20000min", "--replications", "2", "--out", "s"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        time.sleep(3)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)  # the child's SIGINT is at its default, whatever ours is
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
