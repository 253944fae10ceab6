"""Services that call services (docs/services.md): `[services.NAME]` and the call phases are
read, checked and described; a `call` and a `fanout` without `hedge` run (each service's
figures under `services.NAME`), and so does a hedged one. The engine's own tests
(crates/dynosim-engine/src/services.rs, tests/services.rs) check each refusal and the calls
against theory; these check the page's examples and what the user sees through the package and
the CLI."""

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


def page_scenario(tmp_path, name="three-tier.toml"):
    """One of the page's scenarios (the three-tier one, or `name`), saved under the name its
    first line gives."""
    (toml,) = [t for t in fenced("toml") if t.startswith(f"# {name}")]
    (tmp_path / name).write_text(toml, encoding="utf-8")
    return tmp_path / name


def test_the_pages_scenario_and_snippet_give_the_rates_the_page_states(tmp_path, monkeypatch):
    path = page_scenario(tmp_path)
    snippet = fenced("python")[0]
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


def test_the_pages_three_tier_runs_with_its_hedged_fanout(tmp_path, cli):
    """The page's three-tier scenario runs: each api request's fan-out sends the search tier ten
    first copies, and the hedges come on top (`calls.hedged`, counted in `sent`); every copy
    is answered in time or late; `--wide` shows the hedges."""
    path = page_scenario(tmp_path)
    result = cli("run", str(path), "--json", "--duration", "20s", "--replications", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    import json
    (report,) = json.loads(result.stdout)["results"]
    for ran in report["per_replication"]:
        api, search = ran["services"]["api"]["calls"], ran["services"]["search"]["calls"]
        assert search["hedged"] > 0 and api["hedged"] == 0
        assert search["sent"] - search["hedged"] == 10 * api["sent"]
        assert search["answered"] + search["late"] == search["sent"]
    import os
    # A terminal wide enough for every column (a narrow one leaves some out).
    env = dict(os.environ, COLUMNS="400")
    result = cli("run", str(path), "--duration", "20s", "--replications", "2", "--wide", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "search calls" in result.stdout and "hedged" in result.stdout


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


def test_the_pages_chain_runs_and_reports_its_service(tmp_path, monkeypatch):
    """The page's chain.toml and its snippet: the api's figures are under services.api, and the
    means the snippet's comments give (M/M/1 at ρ = 0.7: 0.1 / 0.3 s; the whole request 0.1 s
    more) are within the run's confidence intervals, widened to five standard errors."""
    page_scenario(tmp_path, "chain.toml")
    snippet = fenced("python")[1]
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(snippet, str(PAGE), "exec"), namespace)
    result = namespace["result"]
    api = result.estimate("services.api.response.mean")
    assert abs(api.mean - 0.1 / 0.3) <= 5 * api.std_error
    whole = result.estimate("response.mean")
    assert abs(whole.mean - (0.1 + 0.1 / 0.3)) <= 5 * whole.std_error
    assert "about 0.33 s" in snippet and "about 0.43 s" in snippet
    # Each service's figures and its calls' are metrics of the report, times in seconds.
    from dynosim.results import is_fraction_metric, is_metric, is_time_metric, metrics_of
    names = metrics_of(result.summary)
    assert {"services.api.response.p99", "services.api.utilisation.mean", "services.api.calls.sent",
            "services.api.calls.timed_out_fraction", "errors.call_failed"} <= set(names)
    assert is_time_metric("services.api.queue.mean") and not is_time_metric("services.api.calls.sent")
    assert is_fraction_metric("services.api.calls.timed_out_fraction")
    assert is_metric("services.api.calls.late") and not is_metric("services.api.calls.nope")
    assert is_metric("services.api.calls.hedged") and "services.api.calls.hedged" in names
    calls = result.per_replication[0]["services"]["api"]["calls"]
    assert calls["answered"] + calls["late"] == calls["sent"]


def test_a_chain_runs_on_the_cli_with_services_in_its_json(tmp_path, cli):
    path = page_scenario(tmp_path, "chain.toml")
    result = cli("run", str(path), "--json", "--duration", "1min", "--replications", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    import json
    (report,) = json.loads(result.stdout)["results"]
    assert report["engine"] == "events"
    api = report["summary"]["services"]["api"]
    assert api["requests"]["mean"] > 1000 and api["calls"]["sent"]["mean"] >= api["requests"]["mean"]
    assert 0.5 < api["utilisation"]["mean"]["mean"] < 0.9



def test_the_real_stack_refuses_what_it_cannot_run_of_services_in_one_line(tmp_path, cli):
    # The testbed runs a chain's calls and a fan-out hedged after a fixed time
    # (tests/test_testbed_services.py); a hedge at a percentile not.
    path = page_scenario(tmp_path, "chain.toml")
    path.write_text(path.read_text(encoding="utf-8").replace(
        '{ call = "api", timeout = "2s", retries = 1 }', '{ fanout = "api", count = 2, hedge = "p95" }'),
        encoding="utf-8")
    result = cli("testbed", str(path), "--duration", "10s", cwd=tmp_path)
    assert_one_line_error(result, "chain.toml", "request.phases[1].hedge")
    assert list(tmp_path.iterdir()) == [path]


def test_cancel_round_trips_through_run_and_a_bad_value_is_one_line(tmp_path, cli):
    """`cancel` on the page's fan-out (waiting for the first of its 4 calls): `describe()` shows
    it, `dynosim run --json` reports `calls.cancelled` with every copy answered, late or
    cancelled, `--wide` shows the column; `cancel = false` reports no such figure, and a bad
    value is refused in one line naming its key path (exit code 2)."""
    import json
    import os
    path = page_scenario(tmp_path, "fanout.toml")
    text = path.read_text(encoding="utf-8")
    phase = '{ fanout = "search", count = 4, wait = "all" }'
    assert phase in text
    for cancel, shown in (("true", True), ('"queued"', "queued"), ("false", False)):
        path.write_text(text.replace(phase, f'{{ fanout = "search", count = 4, wait = "first", cancel = {cancel} }}'),
                        encoding="utf-8")
        assert Scenario.load(str(path)).describe()["calls"][0]["cancel"] == shown
        result = cli("run", str(path), "--json", "--duration", "20s", "--replications", "2", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        (report,) = json.loads(result.stdout)["results"]
        for ran in report["per_replication"]:
            calls = ran["services"]["search"]["calls"]
            if shown is False:
                assert "cancelled" not in calls
                assert calls["answered"] + calls["late"] == calls["sent"]
            else:
                assert calls["answered"] + calls["late"] + calls["cancelled"] == calls["sent"]
                if shown is True:
                    # Nothing queues long here: the three calls not waited for are stopped.
                    assert calls["cancelled"] > 2 * calls["answered"]
        if shown is True:
            assert report["summary"]["services"]["search"]["calls"]["cancelled"]["mean"] > 0
            env = dict(os.environ, COLUMNS="400")
            result = cli("run", str(path), "--duration", "20s", "--replications", "2", "--wide", cwd=tmp_path,
                         env=env)
            assert result.returncode == 0, result.stderr
            assert "search calls" in result.stdout and "cancelled" in result.stdout
    # A sweep over the key: the points that cancel report their copies cancelled, those that
    # do not, none.
    result = cli("sweep", str(path), "--vary", "request.phases.1.cancel=false,true", "--duration", "20s",
                 "--replications", "2", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert [r["request.phases.1.cancel"] for r in rows] == [False, True]
    assert rows[0]["services.search.calls.cancelled"] is None
    assert rows[1]["services.search.calls.cancelled"] > 0
    path.write_text(text.replace(phase, '{ fanout = "search", count = 4, wait = "first", cancel = "yes" }'),
                    encoding="utf-8")
    result = cli("run", str(path), "--duration", "20s", cwd=tmp_path)
    assert_one_line_error(result, "fanout.toml", "request.phases[1].cancel", '"queued"', 'got "yes"')
