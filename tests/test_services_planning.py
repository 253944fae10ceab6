"""Planning with services (docs/services.md, "Planning a tier" and "The services' dollars"):
`capacity --vary services.NAME.fleet.dynos`, targets on a service's metrics in `capacity` and
`tune`, and each service's bill in a run's report."""

import json
import os
import re
import shlex

import pytest
from conftest import ROOT, assert_one_line_error

import dynosim
from dynosim import Scenario
from dynosim.capacity import check_attainable, parse_target, plan
from dynosim.cost import HOURS_PER_MONTH, PRICES, SECONDS_PER_HOUR
from dynosim.errors import ScenarioError

PAGE = ROOT / "docs" / "services.md"


def page_scenario(tmp_path, name="fanout.toml"):
    """The page's scenario whose first line names `name`, saved under that name."""
    (toml,) = [t for t in re.findall(r"```toml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
               if t.startswith(f"# {name}")]
    path = tmp_path / name
    path.write_text(toml, encoding="utf-8")
    return path


def page_command():
    """The page's capacity command and the table it shows, from its console block."""
    (block,) = [b for b in re.findall(r"```console\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
                if "dynosim capacity" in b]
    first, *shown = block.splitlines()
    return shlex.split(first.removeprefix("$ dynosim ")), "\n".join(shown)


def capacity_json(cli, *args, cwd):
    result = cli("capacity", *args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def far_end_meets(scenario, overrides, target_text):
    """Whether a run of `scenario` with `overrides` (its own seed: the search's common random
    numbers) meets the target by capacity's rule: the far end of the 95% interval."""
    target = parse_target(target_text)
    result = dynosim.run(scenario.with_overrides(overrides), warn=False)[0]
    return target.met_by(result.estimate(target.metric))


# --- capacity --vary services.NAME.fleet.dynos ------------------------------------------------------


def test_the_pages_example_sizes_the_search_tier_against_the_whole_requests_p99(tmp_path, cli):
    path = page_scenario(tmp_path)
    args, shown = page_command()
    assert args[:4] == ["capacity", "fanout.toml", "--vary", "services.search.fleet.dynos"]
    found = capacity_json(cli, *args[1:], cwd=tmp_path)
    assert found["vary"] == "services.search.fleet.dynos"
    # Today's keys are all there, the varied tier's price among them.
    assert {"scenario", "targets", "dyno_type", "price", "results"} <= set(found)
    assert (found["dyno_type"], found["price"]) == ("standard-2x", PRICES["standard-2x"])
    (r,) = found["results"]
    n = r["dynos"]
    # The page's table shows the count found and its price.
    row = [line for line in shown.splitlines() if line.split()[:1] == ["random"]][0].split()
    assert int(row[2]) == n and row[-2] == f"{n * 50:,}"
    # The cost is the varied tier's dynos at its dyno type's price.
    assert r["monthly_cost"] == pytest.approx(n * PRICES["standard-2x"])
    # The search started at the smallest stable count of the tier, from the traffic equations:
    # 50/s × 4 calls = 200 calls/s of 10 ms = 2 busy dynos, so 3.
    assert min(int(k) for k in r["evaluated"]) == 3
    # n meets the target and n − 1 does not, by capacity's rule, on runs made apart from the search.
    scenario = Scenario.load(str(path))
    target = "response.p99 <= 100ms"
    assert far_end_meets(scenario, {"services.search.fleet.dynos": n}, target)
    assert not far_end_meets(scenario, {"services.search.fleet.dynos": n - 1}, target)
    assert r["evaluated"][str(n)] is True and r["evaluated"].get(str(n - 1)) in (False, None)


def test_a_services_own_target_sizes_that_tier(tmp_path):
    scenario = Scenario.load(str(page_scenario(tmp_path)))
    target = "services.search.response.p99 <= 60ms"
    (r,) = plan(scenario, ["random"], [parse_target(target)], vary="services.search.fleet.dynos")
    assert r.vary == "services.search.fleet.dynos" and r.slots == 1
    n = r.dynos
    assert n is not None and r.smallest_stable == 3
    assert r.evaluated[n] and not r.evaluated.get(n - 1, False)
    assert far_end_meets(scenario, {"services.search.fleet.dynos": n}, target)
    assert not far_end_meets(scenario, {"services.search.fleet.dynos": n - 1}, target)
    assert r.monthly_cost == pytest.approx(n * 50.0)
    # The search's figure at the answer is the run's.
    assert r.estimates["services.search.response.p99"].ci_high <= 0.060


def test_fleet_dynos_still_sizes_the_entry_and_is_the_default(tmp_path, cli):
    path = page_scenario(tmp_path)
    # One slot per entry dyno: its 5 ms of its own and the fan-out hold it (not counted in its
    # offered load: docs/services.md), so the entry queues and its count matters.
    common = ["--target", "queue.mean <= 5ms", "--set", "fleet.slots=1", "--set", "services.search.fleet.dynos=40"]
    default = capacity_json(cli, str(path), *common, cwd=tmp_path)
    explicit = capacity_json(cli, str(path), "--vary", "fleet.dynos", *common, cwd=tmp_path)
    assert default == explicit
    assert default["vary"] == "fleet.dynos" and default["dyno_type"] == "standard-1x"
    (r,) = default["results"]
    assert r["dynos"] >= 2 and r["monthly_cost"] == pytest.approx(r["dynos"] * 25.0)


def test_a_service_target_no_count_can_meet_is_refused_before_searching(tmp_path):
    scenario = Scenario.load(str(page_scenario(tmp_path)))
    # Exponential service of 10 ms: its p99 alone is 10 ms × ln 100 = 46 ms.
    with pytest.raises(ScenarioError) as e:
        check_attainable(scenario, [parse_target("services.search.response.p99 <= 40ms")])
    assert e.value.file == "--target" and "services.search's service time alone has a p99 of 46" in e.value.message
    check_attainable(scenario, [parse_target("services.search.response.p99 <= 50ms")])
    with pytest.raises(ScenarioError, match="service time alone has a mean of 10"):
        check_attainable(scenario, [parse_target("services.search.response.mean <= 9ms")])


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--vary", "services.serch.fleet.dynos", "--target", "response.p99 <= 100ms"],
         ["--vary: services.serch.fleet.dynos: unknown service 'serch'; expected one of: search"]),
        (["--vary", "services.search.fleet.slots", "--target", "response.p99 <= 100ms"],
         ["--vary", "expected fleet.dynos or services.NAME.fleet.dynos, got 'services.search.fleet.slots'"]),
        (["--vary", "app.processes", "--target", "response.p99 <= 100ms"],
         ["--vary", "a fleet's dyno count", "'app.processes'"]),
        (["--vary", "services.search.fleet.dynos", "--target", "services.nope.response.p99 <= 50ms"],
         ["--target: services.nope.response.p99 <= 50ms: unknown service 'nope'; expected one of: search"]),
        (["--vary", "services.search.fleet.dynos", "--target", "services.search.response.p99 <= 40ms"],
         ["--target", "cannot be met by any number of dynos", "services.search's service time"]),
        (["--vary", "services.search.fleet.dynos", "--target", "response.p99 <= 100ms", "--dyno-type", "huge"],
         ["--dyno-type", "unknown dyno type 'huge'"]),
    ],
    ids=["unknown service", "not dynos", "not a fleet", "unknown service in a target", "unattainable",
         "unknown dyno type"],
)
def test_capacity_mistakes_give_one_line(tmp_path, cli, args, fragments):
    path = page_scenario(tmp_path)
    assert_one_line_error(cli("capacity", str(path), *args, cwd=tmp_path), *fragments)
    assert os.listdir(tmp_path) == ["fanout.toml"]


def test_a_service_vary_on_a_scenario_without_services_says_so(tmp_path, cli):
    result = cli("capacity", "hello-world-ramp", "--vary", "services.search.fleet.dynos",
                 "--target", "response.p99 <= 1s", cwd=tmp_path)
    assert_one_line_error(result, "--vary", "unknown service 'search'; the scenario has no [services]")


# --- tune with services -------------------------------------------------------------------------------


def test_tune_varies_a_service_against_a_target_and_prices_the_whole_app(tmp_path, cli):
    path = page_scenario(tmp_path)
    result = cli("tune", str(path), "--vary", "services.search.fleet.dynos=8,10,12",
                 "--target", "response.p99 <= 100ms", "--max-dynos", "2", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tuning = json.loads(result.stdout)
    best = tuning["best"]
    # The cheapest meeting the target: capacity's answer on the same seed (10; 9 misses).
    assert best["settings"] == {"services.search.fleet.dynos": 10}
    met = {p["settings"]["services.search.fleet.dynos"]: p["meets"] for p in tuning["points"]}
    assert met == {8: False, 10: True, 12: True}
    # A day of the whole app: 1 entry dyno at $25 and 10 search dynos at $50, a month of 730 h.
    assert best["cost"]["dollars_per_day"] == pytest.approx((1 * 25 + 10 * 50) * 24 / HOURS_PER_MONTH, rel=1e-9)
    # The fixed fleet sizes the entry (1 or 2 dynos here), the services as the file gives them.
    assert tuning["fixed_fleet"]["dynos"] is None


def test_tune_refuses_a_target_on_a_service_it_does_not_have(tmp_path, cli):
    path = page_scenario(tmp_path)
    result = cli("tune", str(path), "--vary", "services.search.fleet.dynos=8,10",
                 "--target", "services.api.response.p99 <= 50ms", cwd=tmp_path)
    assert_one_line_error(result, "--target: services.api.response.p99 <= 50ms: unknown service 'api'; "
                                  "expected one of: search")
    assert os.listdir(tmp_path) == ["fanout.toml"]


# --- the services' dollars ---------------------------------------------------------------------------


def per_second(dyno_type):
    return PRICES[dyno_type] / (HOURS_PER_MONTH * SECONDS_PER_HOUR)


def test_each_service_is_billed_at_its_own_price_and_the_top_is_the_whole_app(tmp_path):
    path = page_scenario(tmp_path)
    result = dynosim.run(str(path), warn=False)[0]
    window = 30.0
    search = result.estimate("services.search.cost.dollars")
    assert search.mean == pytest.approx(4 * window * per_second("standard-2x"), rel=1e-12)
    assert result.estimate("services.search.cost.dyno_hours").mean == pytest.approx(4 * window / 3600, rel=1e-12)
    entry = result.estimate("cost.entry.dollars")
    assert entry.mean == pytest.approx(1 * window * per_second("standard-1x"), rel=1e-12)
    whole = result.estimate("cost.dollars")
    assert whole.mean == pytest.approx(entry.mean + search.mean, rel=1e-12)
    assert whole.ci_low == whole.ci_high == whole.mean  # fixed fleets: no spread
    assert result.estimate("cost.dyno_hours").mean == pytest.approx(5 * window / 3600, rel=1e-12)
    for rep in result.per_replication:
        assert rep["cost"]["dollars"] == pytest.approx(rep["cost"]["entry"]["dollars"]
                                                       + rep["services"]["search"]["cost"]["dollars"], rel=1e-12)
    assert result.report["pricing"]["services"] == {"search": {"dyno_type": "standard-2x", "price_per_month": 50.0}}


def test_a_service_without_cost_is_priced_at_its_fleet_type_from_the_scenarios_price_list(tmp_path):
    path = page_scenario(tmp_path)
    text = path.read_text(encoding="utf-8").replace('[services.search.cost]\ndyno_type = "standard-2x"\n', "")
    text = text.replace("[services.search.fleet]\n", '[services.search.fleet]\ntype = "performance-m"\n')
    text += '\n[cost]\nprices = { "performance-m" = 100 }\n'
    path.write_text(text, encoding="utf-8")
    result = dynosim.run(str(path), warn=False)[0]
    assert result.report["pricing"]["services"]["search"] == {"dyno_type": "performance-m", "price_per_month": 100.0}
    assert result.estimate("services.search.cost.dollars").mean == pytest.approx(
        4 * 30.0 * 100.0 / (HOURS_PER_MONTH * SECONDS_PER_HOUR), rel=1e-12)
    # A service's own dyno_type may name a price only the scenario's list has.
    text = text.replace('prices = { "performance-m" = 100 }', 'prices = { "mine" = 40 }')
    path.write_text(text + '\n[services.search.cost]\ndyno_type = "mine"\n', encoding="utf-8")
    assert dynosim.run(str(path), warn=False)[0].report["pricing"]["services"]["search"]["price_per_month"] == 40.0


def test_a_scenario_without_services_has_no_entry_bill():
    result = dynosim.run("hello-world-ramp", duration="1min", replications=2, warn=False)[0]
    assert set(result.summary["cost"]) == {"dyno_hours", "dollars"}
    assert "services" not in result.report["pricing"]


def test_the_whole_apps_interval_comes_from_each_replications_sum():
    from dynosim.cost import Pricing, price_report

    # An entry of 1 fixed dyno and an autoscaled service that ran 30 and 50 dyno-seconds in a
    # 10 s window: the app's dyno-seconds are 40 and 60, whose interval is the service's shifted.
    t = 12.706204736174707  # Student's t, 1 degree of freedom, 97.5%
    service = {"mean": 40.0, "std_error": 10.0, "ci_low": 40.0 - t * 10.0, "ci_high": 40.0 + t * 10.0}
    report = {"dynos": 1, "duration": 10.0,
              "summary": {"services": {"search": {"fleet": {"dyno_seconds": service}}}},
              "per_replication": [{"services": {"search": {"fleet": {"dyno_seconds": s}}}} for s in (30.0, 50.0)]}
    one = Pricing("standard-1x", 25.0)
    price_report(report, one, {"search": (Pricing("standard-2x", 50.0), 99)})
    hours = report["summary"]["cost"]["dyno_hours"]
    assert hours["mean"] == pytest.approx(50.0 / 3600, rel=1e-12)
    assert hours["std_error"] == pytest.approx(10.0 / 3600, rel=1e-12)
    assert hours["ci_high"] - hours["mean"] == pytest.approx(t * 10.0 / 3600, rel=1e-9)
    dollars = [rep["cost"]["dollars"] for rep in report["per_replication"]]
    assert dollars == pytest.approx([(10 * 25 + s * 50) / (730 * 3600) for s in (30.0, 50.0)], rel=1e-12)
    assert report["summary"]["cost"]["entry"]["dyno_hours"]["mean"] == pytest.approx(10.0 / 3600, rel=1e-12)
