"""`dynosim run --timeseries FILE` (issue #12): replication 0 over time, per interval, as a CSV
and a plot, from the engine's trace."""

import csv
import json

import pytest

from conftest import assert_one_line_error, run_cli

ARGS = ("rapgenius", "--policy", "random,intelligent", "--duration", "40s", "--replications", "2")


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_series_accounts_for_every_request_of_replication_0(tmp_path):
    out = tmp_path / "series.csv"
    result = run_cli("run", *ARGS, "--json", "--timeseries", str(out), "--interval", "500ms")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["results"]
    rows = read(out)
    assert (tmp_path / "series.png").stat().st_size > 10_000
    span = report[0]["warmup"] + report[0]["duration"]  # 30 s warm-up + 40 s
    for policy, r in zip(["random", "intelligent"], report):
        mine = [row for row in rows if row["policy"] == policy]
        assert [float(row["time"]) for row in mine] == pytest.approx([0.5 * (k + 1) for k in range(int(span / 0.5))])
        # The arrivals per interval add up to every request replication 0 simulated.
        arrivals = sum(float(row["arrivals_per_s"]) * 0.5 for row in mine)
        assert round(arrivals) == r["per_replication"][0]["simulated_requests"]
        responses = sum(float(row["responses_per_s"]) * 0.5 for row in mine)
        waiting = int(mine[-1]["router_waiting"]) + int(mine[-1]["dyno_waiting"])
        busy = int(mine[-1]["busy_threads"])
        # Every request that arrived has been answered, is waiting, or is on a thread (no failures here).
        assert round(arrivals) == round(responses) + waiting + busy
        assert all(0 <= int(row["busy_threads"]) <= r["dynos"] * r["slots"] for row in mine)
    # The same traffic for both policies.
    by_policy = {p: [row["arrivals_per_s"] for row in rows if row["policy"] == p] for p in ("random", "intelligent")}
    assert by_policy["random"] == by_policy["intelligent"]


def test_the_default_interval_cuts_the_run_in_200(tmp_path):
    out = tmp_path / "s.csv"
    result = run_cli("run", *ARGS, "--timeseries", str(out))
    assert result.returncode == 0, result.stderr
    assert len(read(out)) == 2 * 200


@pytest.mark.parametrize("extra, fragment", [
    (("--interval", "1s"), "--timeseries"),
    (("--timeseries", "x.csv", "--interval", "soon"), "--interval"),
    (("--timeseries", "x.csv", "--interval", "2h"), "longer than the run"),
    (("--timeseries", "x.csv", "--interval", "1us"), "too many"),
])
def test_bad_options_are_one_line_and_write_nothing(tmp_path, extra, fragment):
    result = run_cli("run", *ARGS, *extra, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert list(tmp_path.iterdir()) == []
