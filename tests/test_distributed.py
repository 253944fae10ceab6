"""Sweeps, capacity searches and ramps on a real Dask cluster (issue #28): a `dask scheduler`
and two `dask worker` processes on loopback, started here and killed at the end. Through the
cluster the outputs are the local ones to the last bit (the JSON text compared whole), also
when a worker is killed in the middle of a sweep; files a scenario names travel with its
tasks; Ctrl-C cancels the tasks on the cluster; without Dask, --dask says how to install it."""

import _thread
import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from conftest import require

require("distributed")  # a real Dask cluster: skipped without Dask, failed under CI
import distributed as distributed_pkg  # noqa: E402

import dynosim  # noqa: E402
from dynosim import cli, distributed  # noqa: E402
from dynosim.capacity import parse_target, plan  # noqa: E402
from dynosim.ramp import ramp  # noqa: E402
from dynosim.sweep import Sweep  # noqa: E402

from conftest import assert_one_line_error, child_process, run_cli  # noqa: E402

DASK = Path(sys.executable).with_name("dask")

#: A small sweep: 6 points of a fraction of a second each.
SWEEP = ["sweep", "rapgenius", "--vary", "fleet.dynos=60..110:6", "--duration", "20s", "--replications", "3",
         "--seed", "7", "--json"]
CAPACITY = ["capacity", "rapgenius", "--target", "queue.mean <= 20ms", "--policy", "random,intelligent",
            "--duration", "20s", "--replications", "3", "--json"]


class Cluster:
    """A scheduler and its workers, each process in a group of its own."""

    def __init__(self, stack: ExitStack, tmp: Path, workers: int) -> None:
        self.file = tmp / "scheduler.json"
        env = dict(os.environ, RAYON_NUM_THREADS="1", DASK_DISTRIBUTED__WORKER__DAEMON="False")
        logs = open(tmp / "cluster.log", "wb")
        stack.callback(logs.close)
        self.scheduler = stack.enter_context(child_process(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(self.file)], stdout=logs, stderr=logs, env=env, cwd=tmp))
        deadline = time.monotonic() + 60
        while not (self.file.exists() and self.file.stat().st_size > 0):
            assert self.scheduler.poll() is None, (tmp / "cluster.log").read_text()
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written whole (json.dump), but give it a moment
        self.address = json.loads(self.file.read_text())["address"]
        # Workers run in a folder of their own: the files a scenario names must travel.
        home = tmp / "workers"
        home.mkdir()
        self.workers = [stack.enter_context(child_process(
            [str(DASK), "worker", self.address, "--nthreads", "1", "--nworkers", "1", "--no-nanny",
             "--no-dashboard", "--host", "127.0.0.1", "--name", f"w{i}", "--local-directory", str(home)],
            stdout=logs, stderr=logs, env=env, cwd=home)) for i in range(workers)]
        self.processes = [self.scheduler, *self.workers]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dask")
    with ExitStack() as stack:
        c = Cluster(stack, tmp, workers=2)
        client = stack.enter_context(distributed_pkg.Client(c.address, timeout=30))
        distributed.wait_for_workers(client, 2)
        c.client = client
        yield c
    # Everything started here has ended (child_process killed and reaped each group).
    assert all(p.poll() is not None for p in c.processes)
    for p in c.processes:
        with pytest.raises(ProcessLookupError):
            os.killpg(p.pid, 0)


def _same_json(local, remote):
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    assert json.loads(local.stdout)  # a real document
    assert remote.stdout == local.stdout  # every number, to the last bit


def test_sweep_through_the_cluster_is_the_local_sweep_bit_for_bit(cluster, tmp_path):
    _same_json(run_cli(*SWEEP, cwd=tmp_path), run_cli(*SWEEP, "--dask", cluster.address, cwd=tmp_path))


def test_dask_local_starts_a_cluster_for_the_command_and_stops_it(tmp_path):
    _same_json(run_cli(*SWEEP, cwd=tmp_path), run_cli(*SWEEP, "--dask", "local", cwd=tmp_path))


def test_capacity_through_the_cluster_is_the_local_search_bit_for_bit(cluster, tmp_path):
    _same_json(run_cli(*CAPACITY, cwd=tmp_path), run_cli(*CAPACITY, "--dask", cluster.address, cwd=tmp_path))


def test_tune_and_ramp_through_the_cluster_are_the_local_ones_bit_for_bit(cluster, tmp_path):
    (tmp_path / "mmc.toml").write_text(
        'name = "mmc"\n[arrivals]\nprocess = "poisson"\nrate = "50/s"\n[service]\ndistribution = "exponential"\n'
        'mean = "100ms"\n[fleet]\ndynos = 8\n[router]\npolicy = "intelligent"\n[run]\nduration = "1min"\n'
        'warmup = "10s"\nreplications = 4\n')
    tune = ["tune", "mmc.toml", "--vary", "fleet.dynos=6,7,8,10", "--target", "queue.mean <= 10ms", "--json"]
    _same_json(run_cli(*tune, cwd=tmp_path), run_cli(*tune, "--dask", cluster.address, cwd=tmp_path))
    ramp_args = ["ramp", "mmc.toml", "--rates", "20..70/25", "--json"]
    _same_json(run_cli(*ramp_args, cwd=tmp_path), run_cli(*ramp_args, "--dask", cluster.address, cwd=tmp_path))


def test_the_stability_map_through_the_cluster_is_the_local_one_bit_for_bit(cluster, tmp_path):
    """`dynosim stability ... --dask` (issue 35): the cells as tasks, the same map."""
    args = ["stability", "retry-storm", "--vary", "arrivals.rate=3,8", "--vary", "faults.0.for=30s,2min",
            "--replications", "2", "--json"]
    _same_json(run_cli(*args, cwd=tmp_path), run_cli(*args, "--dask", cluster.address, cwd=tmp_path))


def test_a_fan_out_between_services_through_the_cluster_is_the_local_one_bit_for_bit(cluster, tmp_path):
    """Issue 37: a scenario whose fleets call each other runs as one task a point (its fleets are
    one simulation, never split; docs/services.md), and the cluster gives the local sweep."""
    args = ["sweep", "fanout-search", "--vary", "request.phases.1.count=1,10", "--duration", "30s",
            "--replications", "2", "--metric", "response.p99", "--json"]
    _same_json(run_cli(*args, cwd=tmp_path), run_cli(*args, "--dask", cluster.address, cwd=tmp_path))


def test_python_api_takes_a_client(cluster):
    scenario = dynosim.Scenario.load("rapgenius").with_overrides(
        {"run.duration": "10s", "run.replications": 2, "router.policy": ["random", "intelligent"]})
    local, remote = Sweep(scenario, {"fleet.dynos": [70, 90]}), Sweep(scenario, {"fleet.dynos": [70, 90]})
    for s in (local, remote):
        s.prepare()
    local.run()
    remote.run(client=cluster.client)
    assert json.dumps(remote.to_json()) == json.dumps(local.to_json())
    targets = [parse_target("queue.mean <= 20ms")]
    here = plan(scenario, ["random"], targets)
    there = plan(scenario, ["random"], targets, client=cluster.client)
    assert [r.to_dict() for r in there] == [r.to_dict() for r in here]
    rates = [50.0, 80.0, 120.0]
    assert ramp(scenario, rates, client=cluster.client) == ramp(scenario, rates)


def _reports(outcomes):
    out = []
    for status, result in outcomes:
        report = dict(result.report) if result is not None else None
        if report is not None:
            report.pop("wall_seconds")
        out.append((status, json.dumps(report)))
    return out


@pytest.mark.parametrize("blocks", [2, 5])
def test_a_run_split_into_blocks_of_replications_is_the_whole_run_bit_for_bit(cluster, blocks):
    """Each block a task; the report assembled from them is run's, every number and key in
    order (per-dyno utilisation, each replication's figures), on the direct and the event
    engine."""
    base = dynosim.Scenario.load("rapgenius").with_overrides(
        {"run.duration": "1min", "run.replications": 5, "fleet.dynos": 80})
    scenarios = [base.for_policy("random"), base.for_policy("intelligent"),
                 base.with_overrides({"run.replications": 1}).for_policy("random")]
    local = distributed.LocalExecutor().run(scenarios, lambda n: None)
    split = distributed.DaskExecutor(cluster.client, blocks=blocks).run(scenarios)
    assert _reports(split) == _reports(local)
    assert len(local[0][1].report["summary"]["utilisation"]["per_dyno"]) == 80
    # Left to choose, a cluster of two threads splits one run in two (capacity's one count).
    assert distributed.DaskExecutor(cluster.client)._blocks_of(scenarios[:1]) == [[(0, 3), (3, 2)]]
    assert distributed.DaskExecutor(cluster.client)._blocks_of(scenarios) == [[None]] * 3


def test_files_a_scenario_names_travel_with_its_tasks(cluster, tmp_path):
    """The workers run in another folder: the empirical sample reaches them as bytes."""
    folder = tmp_path / "scenario"
    folder.mkdir()
    (folder / "times.txt").write_text("".join(f"{0.02 + 0.001 * (i % 37)}\n" for i in range(500)))
    (folder / "s.toml").write_text('name = "sampled"\n[arrivals]\nprocess = "poisson"\nrate = 300\n[service]\n'
                                   'distribution = "empirical"\nfile = "times.txt"\n[fleet]\ndynos = 10\n'
                                   '[run]\nduration = "20s"\nreplications = 2\n')
    args = ["sweep", str(folder / "s.toml"), "--vary", "fleet.dynos=8,12", "--json"]
    _same_json(run_cli(*args, cwd=tmp_path), run_cli(*args, "--dask", cluster.address, cwd=tmp_path))


def test_a_file_no_worker_can_read_is_one_line_naming_it():
    toml = ('[arrivals]\nprocess = "poisson"\nrate = 10\n[service]\ndistribution = "empirical"\nfile = "/nonexistent/dynosim/t.txt"\n'
            '[fleet]\ndynos = 2\n')
    status, error = distributed.run_task(toml, "s.toml", {})
    assert status == "error"
    kind, message, file, path = json.loads(error)
    assert path == "service.file" and "/nonexistent/dynosim/t.txt" in message and "Dask worker" in message
    with pytest.raises(dynosim.ScenarioError, match="service.file.*path every worker can read"):
        distributed._raise(error)


def test_a_worker_of_another_version_refuses():
    status, error = distributed.run_task('[fleet]\ndynos = 2\n', None, {}, version="0.0.0-other")
    assert status == "error"
    with pytest.raises(dynosim.DynosimError, match="has dynosim .*, this command 0.0.0-other"):
        distributed._raise(error)


def test_ctrl_c_cancels_the_tasks_on_the_cluster(cluster, ctrl_c_raises):
    scenario = dynosim.Scenario.load("rapgenius").with_overrides({"run.duration": "20s", "run.replications": 2})
    sweep = Sweep(scenario, {"fleet.dynos": list(range(60, 100))})
    sweep.prepare()

    def first_done(n: int) -> None:
        _thread.interrupt_main()  # what Ctrl-C does
        time.sleep(1)

    runs = [p.scenario.for_policy("random") for p in sweep.points]
    with pytest.raises(KeyboardInterrupt):
        distributed.DaskExecutor(cluster.client).run(runs, first_done)
    # The same tasks again at once, while the cancelled ones are still being let go (a user's
    # second try): every one runs, to the same bits.
    again = distributed.DaskExecutor(cluster.client).run(runs[:6])
    assert _reports(again) == _reports(distributed.LocalExecutor().run(runs[:6], lambda n: None))
    deadline = time.monotonic() + 20
    while cluster.client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
        assert time.monotonic() < deadline, "tasks left on the cluster"
        time.sleep(0.1)


def test_ctrl_c_on_the_command_exits_130_and_stops_its_runs_on_the_cluster(cluster, tmp_path):
    """Points of ~10 s or more of engine time each: after Ctrl-C no task is left on the
    scheduler, and the runs already inside the engine on the workers stop too (Dask cannot
    stop a running task; the engine's cancel token can), long before they would have ended."""
    args = [sys.executable, "-m", "dynosim", "sweep", "rapgenius", "--vary", "fleet.dynos=60..160:20",
            "--duration", "150h", "--replications", "2", "--json", "--dask", cluster.address]

    def executing():
        return sum(cluster.client.run(lambda dask_worker: len(dask_worker.state.executing)).values())

    with child_process(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        deadline = time.monotonic() + 60
        while executing() < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the sweep never reached the workers"
            time.sleep(0.05)
        time.sleep(0.5)  # inside the engine
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        stopped = time.monotonic()
        assert proc.returncode == 130, err
        assert err.decode().strip().splitlines()[-1] == "dynosim: interrupted"
    while cluster.client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) or executing():
        # A run of this length takes 10 s or more; stopped, within milliseconds.
        assert time.monotonic() - stopped < 5, "runs left going on the cluster"
        time.sleep(0.1)


def test_without_dask_the_option_says_how_to_install_it(tmp_path):
    # A `distributed` that cannot be imported, as where the extra is not installed.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "distributed.py").write_text("raise ImportError('no module named distributed')\n")
    env = dict(os.environ, PYTHONPATH=str(shadow))
    result = run_cli("sweep", "--vary", "fleet.dynos=50,60", "--dask", "local", cwd=tmp_path, env=env)
    assert_one_line_error(result, 'pip install "dynosim[dask]"')


def test_an_unreachable_scheduler_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT", 1.0)
    code = cli.main(["sweep", "--vary", "fleet.dynos=50,60", "--duration", "2s", "--dask", "tcp://127.0.0.1:9",
                     "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--dask" in err[0] and "tcp://127.0.0.1:9" in err[0]


def test_a_worker_killed_mid_sweep_loses_nothing(cluster, tmp_path):
    """Last: it kills one of the module's workers. 10 points of two policies, under a second each; one
    worker is SIGKILLed once both are busy; its tasks run again on the other."""
    args = ["sweep", "rapgenius", "--vary", "fleet.dynos=60..120:10", "--duration", "6h", "--replications",
            "2", "--seed", "11", "--json"]
    local = run_cli(*args, cwd=tmp_path)
    victim = cluster.workers[0]
    killed = threading.Event()

    def kill_when_busy() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy = cluster.client.processing()
            if sum(len(v) for v in busy.values()) >= 2 and all(busy.values()):
                time.sleep(0.5)
                os.killpg(victim.pid, signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    remote = run_cli(*args, "--dask", cluster.address, cwd=tmp_path)
    killer.join(timeout=60)
    assert killed.is_set(), "the sweep ended before a worker could be killed"
    victim.wait(timeout=10)
    _same_json(local, remote)
