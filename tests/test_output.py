"""What dynosim writes: files all or nothing (no partial target, no temporary file, no folder
left on an error, Ctrl-C or SIGTERM), stdout as one complete strict JSON document, SIGTERM
handled like Ctrl-C (exit 143), and sweeps bounded in size."""

import errno
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dynosim import DynosimError, ScenarioError, cli, output
from dynosim import sweep as sweep_module
from dynosim.capacity import CapacityResult
from dynosim.cli import common
from dynosim.cli import run as run_verb
from dynosim.results import PolicyResult
from dynosim.sweep import MAX_POINTS, parse_vary_args

from conftest import child_process

SMALL_SWEEP = ["sweep", "--vary", "fleet.dynos=100..400:4", "--duration", "2s", "--replications", "2"]


def strict_json(text: str):
    """Parses exactly one JSON document; NaN and Infinity (not JSON) fail."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def one_line_error(capsys, *fragments):
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynosim: error: "), captured.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# --- files: all or nothing -------------------------------------------------------------------


def test_write_error_mid_sweep_names_the_file_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def disk_full(*args, **kwargs):  # the CSV and JSON are written by now
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sweep_module, "plot", disk_full)
    assert cli.main(SMALL_SWEEP + ["--out", "new/dir/sw"]) == common.EXIT_INPUT
    one_line_error(capsys, f"--out: cannot write {Path('new/dir/sw.png')}: {os.strerror(errno.ENOSPC)}")
    assert os.listdir(tmp_path) == []  # no target, no temporary file, no folder it made


def test_write_error_keeps_the_previous_outputs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sw.csv").write_text("old csv")
    (tmp_path / "sw.png").write_text("old png")

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sweep_module, "plot", disk_full)
    assert cli.main(SMALL_SWEEP + ["--out", "sw"]) == common.EXIT_INPUT
    one_line_error(capsys, "sw.png")
    assert sorted(os.listdir(tmp_path)) == ["sw.csv", "sw.png"]
    assert (tmp_path / "sw.csv").read_text() == "old csv"
    assert (tmp_path / "sw.png").read_text() == "old png"


def test_a_target_that_cannot_be_renamed_leaves_the_others_unwritten(tmp_path, monkeypatch, capsys):
    """sw.png is a folder: the CSV and JSON must not appear without it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sw.png").mkdir()
    assert cli.main(SMALL_SWEEP + ["--out", "sw"]) == common.EXIT_INPUT
    one_line_error(capsys, "--out: cannot write sw.png: ")
    assert os.listdir(tmp_path) == ["sw.png"]
    assert os.listdir(tmp_path / "sw.png") == []


def test_a_failed_rename_puts_back_the_targets_already_renamed(tmp_path, monkeypatch):
    a, b, c = tmp_path / "a.csv", tmp_path / "b.json", tmp_path / "c.png"
    a.write_text("old a")
    b.write_text("old b")
    real_replace = os.replace
    renames = []

    def replace(src, dst):
        if str(src).endswith(".tmp"):
            renames.append(dst)
            if len(renames) == 2:
                raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(src))
        real_replace(src, dst)

    monkeypatch.setattr(output.os, "replace", replace)
    with pytest.raises(DynosimError) as error:
        output.write_files({p: (lambda tmp, p=p: tmp.write_text("new " + p.name)) for p in (a, b, c)})
    assert str(error.value) == f"--out: cannot write {b}: {os.strerror(errno.EPERM)}"
    assert renames == [a, b]  # a was in place when b failed
    assert a.read_text() == "old a" and b.read_text() == "old b"
    assert sorted(os.listdir(tmp_path)) == ["a.csv", "b.json"]  # no c, no temporary, no backup


def test_new_files_get_a_new_files_mode(tmp_path):
    previous = os.umask(0o027)
    try:
        output.write_files({tmp_path / "a.txt": lambda tmp: tmp.write_text("a")})
    finally:
        os.umask(previous)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path) == ["a.txt"]


def test_animate_uses_the_same_writer(tmp_path, monkeypatch, capsys):
    """A write error in animate is the same one line, and leaves no temporary file."""
    monkeypatch.chdir(tmp_path)
    from PIL import Image

    def disk_full(self, *args, **kwargs):
        Path(args[0]).write_bytes(b"GIF89a")  # a partial file, then the error
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Image.Image, "save", disk_full)
    assert cli.main(["animate", "--out", "q.gif", "--seconds", "2", "--fps", "2", "--speed", "1"]) == common.EXIT_INPUT
    one_line_error(capsys, f"--out: cannot write q.gif: {os.strerror(errno.ENOSPC)}")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("signum, code, word", [(signal.SIGTERM, 143, "terminated"),
                                                (signal.SIGINT, 130, "interrupted")])
def test_a_signal_while_writing_removes_the_temporary_files(tmp_path, monkeypatch, capsys, ctrl_c_raises, signum,
                                                             code, word):
    """A real signal, delivered while the temporary files exist (Ctrl-C's handler installed
    whatever pytest's disposition: ctrl_c_raises)."""
    monkeypatch.chdir(tmp_path)
    seen = []

    def signalled(sweep, path, fmt):
        seen.extend(os.listdir(tmp_path / "out"))
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler raises before this ends

    def callers_handler(signum, frame):  # keeps pytest alive should dynosim not handle SIGTERM
        raise AssertionError("SIGTERM reached the caller's handler")

    monkeypatch.setattr(sweep_module, "plot", signalled)
    callers = signal.signal(signal.SIGTERM, callers_handler)
    try:
        assert cli.main(SMALL_SWEEP + ["--out", "out/sw"]) == code
        assert signal.getsignal(signal.SIGTERM) is callers_handler  # main() put it back
    finally:
        signal.signal(signal.SIGTERM, callers)
    assert len([name for name in seen if name.endswith(".tmp")]) == 3  # csv, json, png
    assert capsys.readouterr().err == f"dynosim: {word}\n"
    assert os.listdir(tmp_path) == []


# --- stdout ----------------------------------------------------------------------------------


def test_json_text_is_strict():
    doc = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": ({"d": math.nan},), "e": "NaN"}
    assert strict_json(output.json_text(doc)) == {"a": None, "b": [None, None, 1.5], "c": [{"d": None}], "e": "NaN"}


@pytest.mark.parametrize("command", [
    ["run", "--duration", "2s", "--replications", "2"],
    ["compare", "--policy", "random,intelligent", "--duration", "2s", "--replications", "2"],
    ["demo", "--duration", "2s", "--replications", "2"],
    ["capacity", "--target", "queue.mean <= 1s", "--duration", "2s", "--replications", "2"],
])
def test_json_on_stdout_is_one_strict_document(command, monkeypatch, capsys):
    """Non-finite numbers anywhere in a report become null."""
    for cls in (PolicyResult, CapacityResult):
        def with_non_finite(self, real=cls.to_dict):
            return dict(real(self), injected=[math.nan, math.inf, -math.inf])
        monkeypatch.setattr(cls, "to_dict", with_non_finite)
    assert cli.main(command + ["--json"]) == 0
    doc = strict_json(capsys.readouterr().out)
    found = []

    def collect(value):
        if isinstance(value, dict):
            if "injected" in value:
                found.append(value["injected"])
            for v in value.values():
                collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)

    collect(doc)
    assert found and all(v == [None, None, None] for v in found)


def test_a_failed_command_prints_no_part_of_its_table(monkeypatch, capsys):
    def table_then_interrupted(results, **options):
        print("policy  dynos  queued")
        raise KeyboardInterrupt

    monkeypatch.setattr(run_verb, "print_table", table_then_interrupted)
    assert cli.main(["run", "--duration", "20s", "--replications", "2"]) == common.EXIT_INTERRUPTED
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "dynosim: interrupted\n"


def test_stdout_closed_early_is_not_a_traceback(tmp_path):
    with child_process([sys.executable, "-m", "dynosim", "run", "--json", "--duration", "20s"],
                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        proc.stdout.close()  # like `| head -1` that has already gone: the report meets a closed pipe
        _, err = proc.communicate(timeout=120)
    assert err.decode() == ""
    assert proc.returncode == common.EXIT_BROKEN_PIPE


# --- signals, in a real process --------------------------------------------------------------


def _status(pid: int, field: str) -> str:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _wait_for(proc: subprocess.Popen, ready, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"exited ({proc.returncode}) before {what}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        time.sleep(0.01)


def _catches_sigterm(pid: int) -> bool:
    return bool(int(_status(pid, "SigCgt"), 16) & (1 << (signal.SIGTERM - 1)))


SIGNALS = [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum, code, word", SIGNALS)
def test_a_signal_stops_a_sweep_inside_the_engine(tmp_path, signum, code, word):
    """Each point is ~100 s of engine work: only a sweep whose runs are told to stop exits."""
    with child_process(
            [sys.executable, "-m", "dynosim", "sweep", "--vary", "fleet.dynos=80,90",
             "--duration", "20000min", "--replications", "2", "--out", "new/s"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        _wait_for(proc, lambda: _catches_sigterm(proc.pid), "handling SIGTERM")
        threads = int(_status(proc.pid, "Threads"))
        _wait_for(proc, lambda: int(_status(proc.pid, "Threads")) > threads, "running the sweep")
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err == f"dynosim: {word}\n" and out == ""
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum, code, word", SIGNALS)
def test_a_signal_stops_animate(tmp_path, signum, code, word):
    (tmp_path / "q.gif").write_bytes(b"previous")
    with child_process([sys.executable, "-m", "dynosim", "animate", "--out", "q.gif"],
                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        _wait_for(proc, lambda: _catches_sigterm(proc.pid), "handling SIGTERM")
        proc.send_signal(signum)  # drawing the frames takes seconds: well before the file is written
        out, err = proc.communicate(timeout=60)
    # Now and then (1 run in 25 here), after printing "interrupted", CPython ends the process by SIGINT itself
    # (returncode -2) instead of exiting with 130; a shell shows 130 either way. Not yet
    # explained (not seen with `python -c`, nor under strace): see the note on #9.
    assert proc.returncode == code or (signum == signal.SIGINT and proc.returncode == -signal.SIGINT), err
    assert err == f"dynosim: {word}\n" and out == ""
    assert os.listdir(tmp_path) == ["q.gif"]
    assert (tmp_path / "q.gif").read_bytes() == b"previous"


# --- bounded sweeps --------------------------------------------------------------------------


def _never(what):
    def called(*args, **kwargs):
        raise AssertionError(f"{what} before the limit was checked")
    return called


def test_a_range_gives_at_most_max_points_values(monkeypatch):
    monkeypatch.setattr(sweep_module, "range_values", _never("the range's values were made"))
    with pytest.raises(ScenarioError, match=f"at most {MAX_POINTS:,} points, got 1,000,000,000"):
        parse_vary_args(["arrivals.rate=1..1e9:1000000000"])


def test_a_sweep_has_at_most_max_points_points(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sweep_module, "Point", _never("a point was built"))
    args = ["sweep", "--vary", "fleet.dynos=100..10000:1000:lin", "--vary", "fleet.slots=1..100:100:lin",
            "--out", "never"]
    assert cli.main(args) == common.EXIT_INPUT
    one_line_error(capsys, "--vary: ", "100,000 points", f"at most {MAX_POINTS:,}")
    assert os.listdir(tmp_path) == []
