"""The fuzz target's regression corpus: every bad input found by hand or by fuzzing (issue #9),
each held to the same property as the fuzz target (a result or one clear line naming the
file, key path and what was expected; exit 2 for bad input, 3 for unstable load)."""

from __future__ import annotations

import pytest

from conftest import assert_one_line_error

from dynosim import cli

CHEAP = ["--duration", "2s", "--replications", "2", "--policy", "random"]


def main(capsys, *argv: str):
    """Runs the CLI in-process: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class Result:
    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = code, stdout, stderr


def one_line_error(capsys, argv, *fragments, code=2):
    assert_one_line_error(Result(*main(capsys, *argv)), *fragments, code=code)


@pytest.mark.parametrize("section", ["arrivals", "service", "fleet", "router", "run", "cost"])
@pytest.mark.parametrize("value", ["5", '"five"', "[1, 2]", "true", "1979-05-27"])
def test_a_table_set_to_a_value_is_one_line(capsys, section, value):
    # Regression: `--set router=5` ended in AttributeError: 'int' object has no attribute 'get'.
    one_line_error(capsys, ["run", "--set", f"{section}={value}", *CHEAP],
                   f"--set: {section}: expected a table [{section}]")


SMALL = {"arrivals": 'process = "poisson"\nrate = 10', "service": 'distribution = "constant"\nvalue = 0.01',
         "fleet": "dynos = 2", "router": 'policy = "random"', "run": 'duration = "2s"\nreplications = 2'}


@pytest.mark.parametrize("section", list(SMALL))
def test_a_table_written_as_a_value_in_a_file_is_one_line(capsys, tmp_path, section):
    text = f"{section} = 5\n" + "".join(f"[{k}]\n{v}\n" for k, v in SMALL.items() if k != section)
    (tmp_path / "bad.toml").write_text(text)
    one_line_error(capsys, ["run", str(tmp_path / "bad.toml")], "bad.toml: ", f"{section}: expected a table")


@pytest.mark.parametrize("literal", ["1979-05-27T07:32:00Z", "1979-05-27", "07:32:00", "1979-05-27T07:32:00"])
def test_toml_dates_and_times_are_refused_with_their_key(capsys, tmp_path, rapgenius_text, literal):
    # Regression: TypeError: Object of type datetime is not JSON serializable.
    (tmp_path / "bad.toml").write_text(rapgenius_text.replace('duration = "5min"', f"duration = {literal}"))
    one_line_error(capsys, ["run", str(tmp_path / "bad.toml")], "bad.toml: run.duration:", "date/time")
    one_line_error(capsys, ["run", "--set", f"run.duration={literal}"], "--set: run.duration:", "date/time")


@pytest.mark.parametrize("depth", [17, 300, 2000])
def test_deeply_nested_values_are_refused(capsys, tmp_path, rapgenius_text, depth):
    # Regression: RecursionError from tables and lists nested a few hundred deep.
    nested = "[" * depth + "1" + "]" * depth
    (tmp_path / "bad.toml").write_text(rapgenius_text.replace("dynos = 75", f"dynos = {nested}"))
    one_line_error(capsys, ["run", str(tmp_path / "bad.toml")], "bad.toml: ", "nested more than 16 levels")
    one_line_error(capsys, ["run", "--set", f"fleet.dynos={nested}"], "--set: ", "nested more than 16 levels")
    inline = "{a = " * depth + "1" + "}" * depth
    one_line_error(capsys, ["run", "--set", f"fleet.dynos={inline}"], "--set: ", "nested more than 16 levels")


def test_unprintable_characters_in_a_key_stay_on_one_line(capsys):
    # Found by fuzzing: a form feed in a --set key split the error over two lines.
    one_line_error(capsys, ["run", "--set", "flee\x0ct\x85.dynos=5", *CHEAP], "--set: ", "\\x0c")


def test_a_value_followed_by_more_toml_is_not_silently_cut(capsys):
    # "5\nx = 1" parses as TOML with two keys; taking the first would drop the rest unseen.
    one_line_error(capsys, ["run", "--set", "fleet.dynos=5\nx = 1", *CHEAP], "--set: fleet.dynos:", "whole number")


@pytest.mark.parametrize("target, fragment", [
    ("queue.mean <= -1s", "never negative"),
    ("queued_fraction <= -5%", "never negative"),
    ("queued_fraction <= 150%", "at most 1 (100%)"),
    ("utilisation.mean >= 2", "at most 1 (100%)"),
])
def test_nonsense_capacity_targets_are_refused(capsys, target, fragment):
    one_line_error(capsys, ["capacity", "--target", target], "--target", fragment)


@pytest.mark.parametrize("price", ["inf", "nan", "-1", '"cheap"', "true"])
def test_prices_must_be_finite_numbers(capsys, tmp_path, rapgenius_text, price):
    # Regression: price = inf was accepted and then printed as Infinity into JSON.
    text = rapgenius_text.replace('dyno_type = "2013-1x"', f'dyno_type = "mine"\nprices = {{ mine = {price} }}')
    (tmp_path / "bad.toml").write_text(text)
    one_line_error(capsys, ["capacity", str(tmp_path / "bad.toml"), "--target", "queue.mean <= 10ms"],
                   "bad.toml: cost.prices.mine:", "finite price")


def test_a_dyno_type_must_be_a_name(capsys, tmp_path, rapgenius_text):
    (tmp_path / "bad.toml").write_text(rapgenius_text.replace('dyno_type = "2013-1x"', "dyno_type = [1]"))
    one_line_error(capsys, ["capacity", str(tmp_path / "bad.toml"), "--target", "queue.mean <= 10ms"],
                   "bad.toml: cost.dyno_type:", "dyno type name")


def test_a_run_over_the_work_budget_is_refused_before_it_starts(capsys):
    # A typo in a duration ("100000h") must not start a run that would not end.
    one_line_error(capsys, ["run", "--duration", "100000h"], "run.max_requests:", "budget", "run.duration",
                   "run.replications")


def test_the_work_budget_can_be_raised(capsys):
    code, out, err = main(capsys, "run", "--duration", "20s", "--replications", "2", "--set", "run.max_requests=1e4")
    assert code == 2 and "budget of 1.000e4" in err
    code, out, err = main(capsys, "run", "--duration", "20s", "--replications", "2", "--set", "run.max_requests=1e5")
    assert code == 0, err


def test_no_command_prints_the_help(capsys):
    code, out, err = main(capsys)
    assert code == 0 and "COMMAND" in out and err == ""


def test_max_dynos_must_be_positive(capsys):
    # A negative --max-dynos searched nothing and printed "none found".
    one_line_error(capsys, ["capacity", "--target", "queue.mean <= 1s", "--max-dynos", "-3"],
                   "--max-dynos", "at least 1")


@pytest.mark.parametrize("command", [["capacity", "--target", "queue.mean <= 1s"],
                                     ["sweep", "--vary", "fleet.dynos=10,20", "--out", "out/x"]])
def test_an_infinite_mean_service_time_never_reaches_capacity_or_sweep(capsys, tmp_path, monkeypatch, command):
    # Regression: a lognormal whose mean overflows to inf reached capacity's search, whose
    # int(inf) raised OverflowError; the engine now refuses moments that are not finite.
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, [*command, "--set", "service.distribution=lognormal", "--set", "service.median=1s",
                            "--set", "service.sigma=40"], "service.median", "not finite")
    assert not any(tmp_path.iterdir())


NEAR_CAPACITY = ["--set", "fleet.dynos=46", "--policy", "random", "--duration", "30s", "--replications", "2"]


def test_a_run_near_capacity_warns_that_it_may_not_be_steady(capsys):
    # Offered load 45.36/46 = 0.986: the relaxation time is hours, the run half a minute.
    code, out, err = main(capsys, "run", *NEAR_CAPACITY, "--json")
    assert code == 0
    warning, = err.splitlines()
    assert warning.startswith("dynosim: warning: offered load 0.986: ") and "relaxation time" in warning
    assert "warm-up of 30 s" in warning and "duration of 30 s" in warning
    import json
    assert json.loads(out)["results"][0]["relaxation_time"] > 3600


def test_a_run_well_below_capacity_does_not_warn(capsys):
    code, out, err = main(capsys, "run", "--policy", "random", "--duration", "30s", "--replications", "2")
    assert code == 0 and err == ""


def test_the_api_warns_with_a_warning_class():
    import dynosim

    with pytest.warns(dynosim.NotSteadyWarning, match="offered load 0.986"):
        dynosim.run("rapgenius", set={"fleet.dynos": 46}, policies=["random"], duration="30s", replications=2)


def test_sweep_marks_rows_that_may_not_be_steady(capsys, tmp_path, monkeypatch):
    import csv

    monkeypatch.chdir(tmp_path)
    code, out, err = main(capsys, "sweep", "--vary", "fleet.dynos=46,75", "--set", "router.policy=random", "--out", "x",
                          "--duration", "30s", "--replications", "2")
    assert code == 0, err
    assert "1 of 2 rows may not be steady state" in err
    rows = list(csv.DictReader(open("x.csv")))
    assert [(r["fleet.dynos"], r["steady_state"]) for r in rows] == [("46", "false"), ("75", "true")]


def test_capacity_flags_an_answer_whose_runs_may_not_be_steady(capsys):
    # A target so loose that the smallest stable fleet (46 dynos, load 0.986) meets it.
    code, out, err = main(capsys, "capacity", "--target", "queue.mean <= 1h", "--policy", "random",
                          "--duration", "30s", "--replications", "2", "--json")
    assert code == 0, err
    import json
    result, = json.loads(out)["results"]
    assert result["dynos"] == 46 and "relaxation time" in result["not_steady"]
    assert err.startswith("dynosim: warning: random at 46 dynos: offered load 0.986")


def test_a_nul_character_in_a_file_name_is_a_scenario_error_not_a_value_error() -> None:
    # Found by the fuzz target: Path.resolve() and Path.exists() raise ValueError on NUL.
    from dynosim import Scenario, ScenarioError

    with pytest.raises(ScenarioError, match="NUL"):
        Scenario.load("rapgenius").with_overrides({"service.file": "samples\x00.txt"})
    with pytest.raises(ScenarioError, match="NUL"):
        Scenario.load("scen\x00ario")
