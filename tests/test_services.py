"""Services that call services (docs/services.md): `[services.NAME]` and the call phases are
read, checked and described, and every run refuses them, in one line, until calls are
simulated. The engine's own tests (crates/dynosim-engine/src/calls.rs) check each refusal; these
check the page's examples and what the user sees through the package and the CLI."""

import re
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from conftest import ROOT, assert_one_line_error

from dynosim import Scenario
from dynosim.errors import ScenarioError

PAGE = ROOT / "docs" / "services.md"


def fenced(language):
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def page_scenario(tmp_path):
    """The page's three-tier scenario, saved under the name its first line gives."""
    (toml,) = fenced("toml")
    name = re.match(r"# ([\w.-]+\.toml)\b", toml).group(1)
    (tmp_path / name).write_text(toml, encoding="utf-8")
    return tmp_path / name


def test_the_pages_scenario_and_snippet_give_the_rates_the_page_states(tmp_path, monkeypatch):
    path = page_scenario(tmp_path)
    (snippet,) = fenced("python")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(snippet, str(PAGE), "exec"), namespace)
    rates = [(s["name"], s["rate"]) for s in namespace["described"]["services"]]
    # The traffic equations, by hand: 100/s, one call to api each, ten from api to search.
    assert rates == [("api", 100.0), ("search", 1000.0)]
    shown = re.search(r"# (\[\(.*\)\])", snippet).group(1)
    assert repr(rates) == shown
    described = Scenario.load(str(path)).describe()
    assert [(c["caller"], c["callee"], c["kind"]) for c in described["calls"]] == [
        (None, "api", "call"), ("api", "search", "fanout")]
    assert described["calls"][1]["hedge"] == "p95" and described["calls"][1]["wait"] == "all"
    assert described["refused"]["path"] == "services"


def test_a_run_is_refused_in_one_line_pointing_to_the_page(tmp_path, cli):
    path = page_scenario(tmp_path)
    result = cli("run", str(path), "--json", "--duration", "10s", cwd=tmp_path)
    assert_one_line_error(result, "three-tier.toml", "services", "not simulated yet", "docs/services.md")
    assert list(tmp_path.iterdir()) == [path]


def test_an_override_reaches_a_services_keys_and_is_blamed_on_set(tmp_path):
    scenario = Scenario.load(str(page_scenario(tmp_path)))
    described = scenario.with_overrides({"services.search.fleet.dynos": 20}).describe()
    assert described["services"][1]["dynos"] == 20
    with pytest.raises(ScenarioError) as e:
        scenario.with_overrides({"services.search.fleet.dynos": 0}).describe()
    assert e.value.path == "services.search.fleet.dynos"
    assert str(e.value).startswith("--set: services.search.fleet.dynos: must be a whole number")


def test_a_services_cost_is_checked_at_its_key_path(tmp_path):
    doc = tomllib.loads(page_scenario(tmp_path).read_text(encoding="utf-8"))
    doc["services"]["search"]["cost"] = {"dyno_type": "no-such-dyno"}
    with pytest.raises(ScenarioError) as e:
        Scenario.load(doc)
    assert e.value.path == "services.search.cost.dyno_type"
    doc["services"]["search"] = "ten dynos"
    with pytest.raises(ScenarioError) as e:
        Scenario.load(doc)
    assert e.value.path == "services.search"


def test_a_call_phase_without_services_is_refused_at_its_key_path(tmp_path):
    doc = tomllib.loads(page_scenario(tmp_path).read_text(encoding="utf-8"))
    del doc["services"]
    with pytest.raises(ScenarioError) as e:
        Scenario.load(doc).describe()
    assert str(e.value) == ('request.phases[1].call: unknown service "api"; the scenario has no '
                            '[services.api]')
