"""Late load information (issue 26, `router.view`): the CLI runs a policy that reads loads on a
late board, `describe()` shows the view, and a policy that reads no load is left alone."""

import json

from dynosim import Scenario

VIEW = 'router.view={update="periodic",interval="2s"}'


def test_run_with_a_periodic_board_from_the_command_line(cli):
    result = cli("run", "--policy", "power_of_d", "--set", VIEW, "--set", "router.routers=3",
                 "--duration", "30s", "--replications", "2", "--json")
    assert result.returncode == 0, result.stderr
    (first,) = json.loads(result.stdout)["results"]
    assert first["policy"] == "power_of_d"
    # A late board runs on the event-driven engine.
    assert first["engine"] == "events"
    assert first["summary"]["response"]["mean"]["mean"] > 0


def test_describe_shows_the_view_and_whether_the_policy_reads_it():
    late = Scenario.load("rapgenius").with_overrides(
        {"router.view": {"update": "delayed", "interval": "500ms"}})
    assert late.for_policy("least_connections").describe()["view"] == {
        "update": "delayed", "interval": 0.5, "read": True}
    assert late.for_policy("random").describe()["view"] == {
        "update": "delayed", "interval": 0.5, "read": False}
    exact = Scenario.load("rapgenius").for_policy("least_connections").describe()["view"]
    assert exact == {"update": "exact", "interval": 0.0, "read": False}


def test_a_policy_that_reads_no_load_gives_the_same_figures_with_a_view(cli):
    def run(*extra):
        result = cli("run", "--policy", "random", "--duration", "30s", "--replications", "2",
                     "--json", *extra)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["results"][0]["per_replication"]

    assert run() == run("--set", VIEW)


def test_compare_runs_every_policy_on_one_late_view(cli):
    result = cli("compare", "--policy", "random,least_connections,power_of_d", "--set", VIEW,
                 "--set", "router.routers=3", "--duration", "30s", "--replications", "2", "--json")
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout)["results"]
    assert [r["policy"] for r in results] == ["random", "least_connections", "power_of_d"]
