"""First use, as a new user meets it (issue #9): tables that fit the terminal, queues shown
where they form, capacity answers that explain themselves, progress only on a terminal's
stderr, `dynosim init`, `dynosim keys` and what `animate` says it wrote."""

import json
import os
import subprocess
import sys
import tomllib
from io import StringIO
from pathlib import Path

import pytest

from conftest import ROOT, assert_one_line_error

QUICK = ("--duration", "1min", "--replications", "3")


def cli_env(*args, columns=None, cwd=None):
    """The CLI with stdout piped and $COLUMNS set (or unset)."""
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "dynosim", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def longest_line(text):
    return max(len(line) for line in text.splitlines())


# --- tables that fit ---------------------------------------------------------------------------

TABLE_COMMANDS = {
    "run": ["run", *QUICK],
    "compare": ["compare", "--policy", "random,intelligent", *QUICK],
    "variants": ["run", "rapgenius-variants", *QUICK],
    "demo": ["demo", *QUICK],
    "capacity": ["capacity", "--target", "queue.mean <= 50ms", "--target", "queued_fraction <= 20%",
                 "--policy", "random,intelligent", *QUICK],
}


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("command", list(TABLE_COMMANDS))
def test_tables_fit_the_width_in_columns(command, width):
    result = cli_env(*TABLE_COMMANDS[command], columns=width)
    assert result.returncode == 0, result.stderr
    assert "policy" in result.stdout or "routing" in result.stdout or "case" in result.stdout
    assert longest_line(result.stdout) <= width, result.stdout


def test_piped_output_without_columns_is_100_wide(tmp_path):
    result = cli_env("run", *QUICK)
    assert result.returncode == 0, result.stderr
    assert 80 < longest_line(result.stdout) <= 100, result.stdout  # the title line uses the room


def test_wide_shows_every_column_the_default_leaves_out():
    narrow = cli_env("run", *QUICK, columns=100)
    wide = cli_env("run", *QUICK, "--wide")  # piped, no $COLUMNS: the table's natural width
    assert narrow.returncode == wide.returncode == 0
    for header in ("utilisation", "max router", "of queued"):
        assert header in wide.stdout and header not in narrow.stdout, header
    assert "--wide" in narrow.stdout  # the default table says how to see the rest


def test_each_time_column_has_one_unit_in_its_header():
    result = cli_env("run", *QUICK, columns=100)
    header = result.stdout.split("───")[0]
    assert "(ms)" in header or "(s)" in header
    body = result.stdout.split("───")[-1]
    for unit in (" ms", " µs", " s "):
        assert unit not in body.split("±")[0], body


def test_max_queue_is_shown_where_it_forms():
    """Intelligent routing queues at the router, random routing at the dynos; the table used to
    show only the dyno queue, 0 for intelligent routing however long its router queue."""
    result = cli_env("run", "--set", "fleet.dynos=50", *QUICK, columns=100)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()
            if line.split() and line.split()[0] in ("random", "intelligent")}
    assert rows["intelligent"].rstrip().endswith("router"), rows
    assert rows["random"].rstrip().endswith("dyno"), rows


def test_successful_commands_print_nothing_on_a_piped_stderr():
    result = cli_env("run", *QUICK)
    assert result.returncode == 0 and result.stderr == ""


# --- progress on stderr ------------------------------------------------------------------------


def test_progress_shows_only_after_its_delay():
    from rich.console import Console

    from dynosim.display import PROGRESS_AFTER, late_progress

    now = [0.0]
    out = StringIO()
    console = Console(file=out, width=80, force_terminal=True)
    progress = late_progress(console=console, get_time=lambda: now[0])
    progress.add_task("searching random", total=None, note="3 counts tried")

    def rendered():
        out.seek(0)
        out.truncate()
        console.print(progress.get_renderable())
        return out.getvalue()

    assert "searching random" not in rendered()
    now[0] = PROGRESS_AFTER + 0.1
    assert "searching random" in rendered() and "3 counts tried" in rendered()


def test_activity_is_silent_when_stderr_is_not_a_terminal(monkeypatch):
    from dynosim.display import activity

    err = StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with activity() as shown:
        task = shown.task("running")
        shown.update(task, advance=1, note="1 done")
    assert err.getvalue() == ""


# --- capacity that explains itself -------------------------------------------------------------


def test_capacity_refuses_a_target_the_service_time_alone_breaks():
    """The seed's service time has a p99 of 3.1 s: no fleet gives a response p99 of 2 s. This
    used to search for seconds and print "none found" with no reason."""
    result = cli_env("capacity", "rapgenius", "--target", "response.p99 <= 2s")
    assert_one_line_error(result, "--target", "response.p99 <= 2s", "service time alone", "p99")


def test_capacity_refuses_a_mean_below_the_service_mean():
    result = cli_env("capacity", "rapgenius", "--target", "queue.mean <= 10ms",
                     "--target", "response.mean <= 100ms")
    assert_one_line_error(result, "--target", "response.mean <= 100ms", "mean")


def test_capacity_none_found_says_which_target_and_how_close():
    args = ["capacity", "rapgenius", "--target", "queue.mean <= 1ms", "--policy", "random",
            "--max-dynos", "300", *QUICK]
    result = cli_env(*args, columns=100)
    assert result.returncode == 0, result.stderr
    assert "none found" in result.stdout
    text = " ".join(result.stdout.split())
    assert "random: none of" in text and "queue.mean <= 1ms (closest:" in text
    doc = json.loads(cli_env(*args, "--json").stdout)
    found = doc["results"][0]
    assert found["dynos"] is None
    closest = found["closest"]["queue.mean"]
    assert str(closest["dynos"]) in found["evaluated"] and closest["ci_high"] > 0.001
    assert f"at {closest['dynos']:,} dynos" in text
