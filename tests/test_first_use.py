"""First use, as a new user meets it (issue #9): tables that fit the terminal, queues shown
where they form, capacity answers that explain themselves, progress only on a terminal's
stderr, `dynosim init`, `dynosim keys` and what `animate` says it wrote."""

import json
import os
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from io import StringIO
from pathlib import Path

import pytest

from conftest import ROOT, assert_one_line_error, run_cli

QUICK = ("--duration", "1min", "--replications", "3")


def cli_env(*args, columns=None, cwd=None):
    """The CLI with stdout piped and $COLUMNS set (or unset)."""
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return run_cli(*args, env=env, cwd=cwd)


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


# --- dynosim init ------------------------------------------------------------------------------


def test_init_writes_a_starter_that_runs_as_it_is(tmp_path):
    result = cli_env("init", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    path = tmp_path / "my-app.toml"
    assert "my-app.toml" in result.stdout and path.is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["my-app.toml"]  # no temporary file left
    doc = tomllib.loads(path.read_text())
    assert doc["name"] == "my-app"
    assert {"arrivals", "service", "fleet", "router", "run", "cost"} <= set(doc)
    ran = cli_env("run", "my-app.toml", "--duration", "30s", "--replications", "2", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert [r["scenario"] for r in json.loads(ran.stdout)["results"]][0] == "my-app"


def test_init_names_the_scenario_after_the_file(tmp_path):
    assert cli_env("init", "shop.toml", cwd=tmp_path).returncode == 0
    assert tomllib.loads((tmp_path / "shop.toml").read_text())["name"] == "shop"


def test_init_mentions_every_key_of_every_section(tmp_path):
    """The starter shows each section's keys, set or commented out, and the commented
    [[cases]] example is valid once uncommented."""
    import re

    from dynosim import Scenario
    from dynosim.starter import starter
    from dynosim.keys import reference

    text = starter("my-app")
    for key in reference()["keys"]:
        if key["kind"] is None and key["section"] != "":
            assert re.search(rf"^[#\s]*{key['name']}\s*=", text, re.M), key["path"]
    assert "[[cases]]" in text
    uncommented = re.sub(r"^# (\[\[cases\]\]|label|set)", r"\1", text, flags=re.M)
    cases = Scenario.load(tomllib.loads(uncommented)).cases
    assert len(cases) == 2
    for _, case in cases:
        case.validate()


def test_init_refuses_to_overwrite_without_force(tmp_path):
    path = tmp_path / "my-app.toml"
    path.write_text("# mine\n")
    result = cli_env("init", "my-app.toml", cwd=tmp_path)
    assert_one_line_error(result, "my-app.toml", "already exists", "--force")
    assert path.read_text() == "# mine\n"
    forced = cli_env("init", "my-app.toml", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "[arrivals]" in path.read_text()


@pytest.mark.parametrize("target, fragment", [
    ("no-such-dir/app.toml", "no such directory"),
    ("app.txt", ".toml"),
])
def test_init_bad_file_is_one_line(tmp_path, target, fragment):
    result = cli_env("init", target, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert list(tmp_path.iterdir()) == []


# --- dynosim keys ------------------------------------------------------------------------------


def test_docs_scenario_md_is_generated_from_the_schema():
    result = cli_env("keys", "--markdown")
    assert result.returncode == 0, result.stderr
    committed = (ROOT / "docs" / "scenario.md").read_text(encoding="utf-8")
    assert result.stdout == committed, (
        "docs/scenario.md is stale: regenerate it with "
        "`.venv/bin/dynosim keys --markdown > docs/scenario.md` and commit it")


def test_keys_prints_every_key_in_the_terminal():
    from dynosim.keys import reference

    result = cli_env("keys", columns=100)
    assert result.returncode == 0, result.stderr
    assert longest_line(result.stdout) <= 100
    for key in reference()["keys"]:
        assert key["name"] in result.stdout, key["path"]


def test_front_end_sections_accept_their_documented_keys():
    """[cost] and [[cases]] are read by the Python layer, not the engine: their documented
    keys (with their examples) are what it accepts."""
    from dynosim import Scenario
    from dynosim.cost import Pricing
    from dynosim.keys import reference

    ref = reference()
    front = {s["name"]: s for s in ref["sections"] if s["read_by"] == "front end"}
    assert set(front) == {"cost", "cases"}
    example = {s: {k["name"]: json.loads(k["example"]) for k in ref["keys"] if k["section"] == s}
               for s in front}
    doc = Scenario.load("rapgenius").doc
    doc["cost"] = example["cost"]
    doc["cost"]["prices"] = {example["cost"]["dyno_type"]: 50, **doc["cost"]["prices"]}
    assert Pricing.from_scenario(doc, "x.toml").dyno_type == example["cost"]["dyno_type"]
    doc["cases"] = [example["cases"]]
    (label, case), = Scenario.load(doc).cases
    assert label == example["cases"]["label"]
    case.validate()
