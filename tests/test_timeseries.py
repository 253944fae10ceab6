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


def test_without_retries_offered_is_the_arrivals_and_goodput_the_responses(tmp_path):
    out = tmp_path / "series.csv"
    result = run_cli("run", *ARGS, "--json", "--timeseries", str(out), "--interval", "1s")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["results"]
    rows = read(out)
    assert {"offered", "goodput"} <= set(rows[0])
    for row in rows:
        # Every try is a first try: the offered load is the arrivals; goodput the responses.
        assert row["offered"] == row["arrivals_per_s"]
        assert row["goodput"] == row["responses_per_s"]
    for policy, r in zip(["random", "intelligent"], report):
        mine = [row for row in rows if row["policy"] == policy]
        # The answers that succeeded in the window (after the 30 s warm-up) are the run's goodput.
        answered = sum(float(row["goodput"]) for row in mine if float(row["time"]) > r["warmup"])
        assert round(answered) == round(r["per_replication"][0]["goodput"] * r["duration"])


STORM = ("retry-storm", "--replications", "1", "--set", "run.warmup=0s")


def test_in_a_retry_storm_the_offered_load_triples_and_goodput_falls_to_nothing(tmp_path):
    """retry-storm (clients trying 3 times on a 30 s timeout; the database 4× slower at 8–9
    min) stays down after the fault: every request then makes its 3 tries, so the offered load
    is 3 × the arrivals, and nothing succeeds. With no warm-up every interval is in the window,
    and the sums over the intervals are the run's own counts."""
    out = tmp_path / "storm.csv"
    step = 30.0
    result = run_cli("run", *STORM, "--json", "--timeseries", str(out), "--interval", "30s")
    assert result.returncode == 0, result.stderr
    r = json.loads(result.stdout)["results"][0]
    rep = r["per_replication"][0]
    rows = read(out)
    assert (tmp_path / "storm.png").stat().st_size > 10_000
    count = {key: [round(float(row[key]) * step) for row in rows] for key in ("arrivals_per_s", "offered", "goodput")}
    times = [float(row["time"]) for row in rows]
    assert all(o >= a for o, a in zip(count["offered"], count["arrivals_per_s"]))
    # Every request arrived in the window; every success was answered in it.
    assert sum(count["arrivals_per_s"]) == rep["simulated_requests"] == rep["requests"]
    assert sum(count["goodput"]) == round(rep["goodput"] * r["duration"])
    # The tries sent up to the end are the run's attempts but those sent after it: retries of
    # requests still being tried at the end, each sent within 2 × 30 s of timeouts and 2 × 20 s
    # of backoff (its cap) after its first try: at most 2 retries for each of the requests of
    # the last 100 s (the last 4 intervals).
    tries = sum(count["offered"])
    assert 0 <= rep["retries"]["attempts"] - tries <= 2 * sum(count["arrivals_per_s"][-4:])
    # Before the fault: the arrivals and their answers, hardly a retry.
    before = [i for i, t in enumerate(times) if t <= 480]
    offered_before = sum(count["offered"][i] for i in before)
    arrived_before = sum(count["arrivals_per_s"][i] for i in before)
    assert offered_before <= 1.01 * arrived_before
    assert sum(count["goodput"][i] for i in before) >= 0.95 * arrived_before
    # The last 10 minutes, well after the fault (its tries all fail): 3 tries a request. The
    # tries of an interval are those of the requests of the last n × 30 s and backoffs, so the
    # two counts differ by the arrivals of two stretches of about 100 s (Poisson, at 8/s): a
    # ratio to 3 within 4 of its standard errors, 3 × √(2 × 8 × 100) / (8 × 600).
    late = [i for i, t in enumerate(times) if t > times[-1] - 600]
    offered_late = sum(count["offered"][i] for i in late)
    arrived_late = sum(count["arrivals_per_s"][i] for i in late)
    assert offered_late / arrived_late == pytest.approx(3.0, abs=4 * 3 * (2 * 8 * 100) ** 0.5 / (8 * 600))
    assert sum(count["goodput"][i] for i in late) <= 0.05 * arrived_late
