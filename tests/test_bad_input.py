"""Every user mistake: one line on stderr naming the file, the key path and what was expected;
a non-zero exit code; no traceback; nothing on stdout."""

import re

import pytest

from conftest import assert_one_line_error

from dynosim import ScenarioError, UnstableError
import dynosim




@pytest.mark.parametrize(
    "override, fragments",
    [
        ("arrivals.rate=0", ["--set: arrivals.rate:", "positive"]),
        ('arrivals.rate="-5/s"', ["arrivals.rate:", "positive", "-5"]),
        ("arrivals.rate=9000/fortnight", ["arrivals.rate:", "expected a rate", "9000/fortnight"]),
        ("router.policy=smart", ["router.policy:", 'unknown routing policy "smart"', "intelligent"]),
        ("run.duration=5parsecs", ["run.duration:", "expected a duration", "5parsecs"]),
        ("fleet.dynos=0", ["fleet.dynos:", "whole number"]),
        ("fleet.dynos=7.5", ["fleet.dynos:", "whole number"]),
        ("service.percentiles=[]", ["service.percentiles:", "at least two"]),
        ('service.percentiles=[[1,"7ms"],[50,"46ms"],[90,"20ms"]]',
         ["service.percentiles[2]:", "must not decrease"]),
        ('service.percentiles=[[50,"7ms"],[10,"46ms"]]', ["service.percentiles[1]:", "must increase"]),
        ('service.percentiles=[[0,"7ms"],[10,"46ms"]]', ["service.percentiles[0]:", "between 0 and 100"]),
        ('service.percentiles=[[5,"7 msec"],[10,"46ms"]]', ["service.percentiles[0][1]:", "expected a duration"]),
        ("router.dd=3", ["router.dd:", "unknown key"]),
        ("router.d=0", None),  # random ignores d (a key of power_of_d): not an error
        # Shards and threads (issue 28).
        ("run.shards=0", ["run.shards:", '"auto" or a whole number from 1 to 75', "got 0"]),
        ('run.shards="many"', ["run.shards:", '"auto"', "many"]),
        ("run.threads=0", ["run.threads:", '"auto" or a whole number from 1 to 1024', "got 0"]),
        ("run.threads=2.5", ["run.threads:", '"auto"', "2.5"]),
        ("run.shards=3", None),  # random routing, Poisson arrivals: split into 3
        ("run.threads=1", None),
        # The testbed's real router (issue 26): checked by every command.
        ("router.kind=ngnix", ["router.kind:", 'unknown router "ngnix"', "haproxy, nginx"]),
        ("router.zone=true", ["router.zone:", "only nginx takes it"]),
        ("router.kind=nginx", None),  # the simulation does not read it
        # Traffic (issue 12): bad schedules, sines and bursts.
        ('arrivals.rate=[["0s","50/s"],["10min","200/s"],["5min","100/s"]]',
         ["arrivals.rate[2][0]:", "must not decrease", "300 s comes after 600 s"]),
        ('arrivals.rate=[["0s","50/s"],["1min","-5/s"]]', ["arrivals.rate[1][1]:", "rate >= 0", "-5"]),
        ("arrivals.rate=[]", ["arrivals.rate:", "empty schedule", "[[time, rate], ...]"]),
        ('arrivals.rate=[["1min","50/s"]]', ["arrivals.rate[0][0]:", 'starts at "0s"']),
        ('arrivals.rate={mean="100/s",amplitude="150/s"}', ["arrivals.rate.amplitude:", "from 0 to the mean"]),
        ('arrivals.burst=[{at="2h",clients=600}]',
         ["arrivals.burst[0].at:", "7200 s", "after the run's end"]),
        ('arrivals.burst=[{at="5s",clients=0}]', ["arrivals.burst[0].clients:", ">= 1", "got 0"]),
        ('arrivals.rate=[["0s","50/s"],["5s","200/s"],["8s","100/s"]]', None),
        ('arrivals.burst=[{at="5s",clients=100,jitter={distribution="exponential",mean="1s"}}]', None),
        # Late load information (issue 26): router.view.
        ('router.view={update="stale",interval="2s"}',
         ["router.view.update:", 'unknown update "stale"', "periodic, delayed or individual"]),
        ('router.view={update="periodic"}', ["router.view.interval:", "missing", "periodic needs an interval"]),
        ('router.view={update="delayed",interval="0s"}', ["router.view.interval:", "positive duration"]),
        ('router.view={update="individual",interval="2 fortnights"}',
         ["router.view.interval:", "expected a duration", "2 fortnights"]),
        ('router.view={interval="2s"}', ["router.view.update:", "missing", "periodic"]),
        ('router.view={update="exact",interval="2s"}', ["router.view.interval:", "exact", "no interval"]),
        ('router.view={update="periodic",interval="2s",every="1s"}', ["router.view.every:", "unknown field"]),
        ('router.view="periodic"', ["router.view:", "expected"]),
        # random reads no load: the view is accepted and changes nothing for it.
        ('router.view={update="periodic",interval="2s"}', None),
    ],
)
def test_bad_override(cli, override, fragments):
    extra = ["--replications", "2"]
    if not override.startswith("router.policy"):
        extra += ["--policy", "random"]
    if not override.startswith("run.duration"):
        extra += ["--duration", "10s"]
    result = cli("run", "--set", override, *extra)
    if fragments is None:
        assert result.returncode == 0, result.stderr
        return
    assert_one_line_error(result, *fragments)


def test_shards_of_a_fleet_whose_dynos_are_coupled_are_refused(cli):
    result = cli("run", "--set", "run.shards=2", "--policy", "intelligent", "--duration", "10s",
                 "--replications", "2")
    assert_one_line_error(result, "run.shards:", "cannot be split", 'router.policy = \"random\"')


def test_power_of_d_rejects_d_zero(cli):
    result = cli("run", "--policy", "power_of_d", "--set", "router.d=0")
    assert_one_line_error(result, "router.d:", ">= 1")


@pytest.mark.parametrize(
    "policy, override, fragments",
    [
        # Issue 26: Join-Idle-Queue, peak-EWMA power of two, and the aperture.
        ("jiq", "router.jiq_report_d=0", ["router.jiq_report_d:", ">= 1", "got 0"]),
        ("jiq", "router.jiq_report_d=1.5", ["router.jiq_report_d:", "whole number"]),
        ("jiq", 'router.jiq_report_delay="-5ms"', ["router.jiq_report_delay:", "duration >= 0"]),
        ("jiq", 'router.jiq_report_delay="soon"', ["router.jiq_report_delay:", "expected a duration", "soon"]),
        ("p2c_ewma", "router.decay=0", ["router.decay:", "positive duration"]),
        ("p2c_ewma", 'router.default_rtt="fast"', ["router.default_rtt:", "expected a duration", "fast"]),
        ("random", "router.aperture=0", ["router.aperture:", "whole number", ">= 1"]),
        ("least_connections", "router.aperture=76", ["router.aperture:", "<= 75", "got 76"]),
        ("random", 'router.aperture="half"', ["router.aperture:", "whole number"]),
    ],
)
def test_balancer_keys_refuse_bad_values(cli, policy, override, fragments):
    result = cli("run", "--policy", policy, "--set", override, "--duration", "10s", "--replications", "2")
    assert_one_line_error(result, *fragments)


@pytest.mark.parametrize(
    "edit, fragments",
    [
        (("dynos = 75", "dynoss = 75"), ["bad.toml: fleet.dynoss:", "unknown field", "`dynos`"]),
        (("dynos = 75", ""), ["bad.toml: fleet.dynos: missing"]),
        (('process = "poisson"', 'process = "bursty"'), ["bad.toml: arrivals.process:", "poisson"]),
        (('distribution = "quantiles"', 'distribution = "pareto"'), ["bad.toml: service.distribution:", "weibull"]),
        (('rate = "9000/min"', 'rate = "9000/min"\ntimeout = { distribution = "uniform", min = "2s", max = "1s" }'),
         ["bad.toml: arrivals.timeout.max:", "at least min"]),
        (("[fleet]", "[flete]"), ["bad.toml:", "flete"]),
        (("9000/min", "9000 per fortnight"), ["bad.toml: arrivals.rate:", "expected a rate"]),
        (('rate = "9000/min"', 'rate = "9000/min"\n[[arrivals.burst]]\nat = "2h"\nclients = 600'),
         ["bad.toml: arrivals.burst[0].at:", "after the run's end"]),
        (('rate = "9000/min"', 'rate = [["0s", "100/s"], ["1min", "-1/s"]]'),
         ["bad.toml: arrivals.rate[1][1]:", "expected a rate >= 0"]),
        (("replications = 10", "replications = -1"), ["bad.toml: run.replications:", "whole number"]),
        (("[run]", "[run"), ["bad.toml: invalid TOML"]),
    ],
)
def test_bad_scenario_file(cli, tmp_path, rapgenius_text, edit, fragments):
    old, new = edit
    assert old in rapgenius_text
    (tmp_path / "bad.toml").write_text(rapgenius_text.replace(old, new, 1))
    assert_one_line_error(cli("run", "bad.toml", cwd=tmp_path), *fragments)


def test_empty_scenario_file(cli, tmp_path):
    (tmp_path / "empty.toml").write_text("")
    assert_one_line_error(cli("run", "empty.toml", cwd=tmp_path), "empty.toml:", "missing")


def test_missing_scenario_file(cli, tmp_path):
    assert_one_line_error(cli("run", "nope.toml", cwd=tmp_path), "nope.toml:", "cannot read")
    assert_one_line_error(cli("run", "nope", cwd=tmp_path), "nope:", "built-in", "rapgenius")


def test_unreadable_sample_file(cli, tmp_path):
    result = cli("run", "--set", "service.distribution=empirical", "--set", "service.file=missing.txt", cwd=tmp_path)
    assert_one_line_error(result, "service.file:", "cannot read", "missing.txt")


def test_sample_file_with_garbage_line(cli, tmp_path):
    (tmp_path / "times.txt").write_text("0.1\n0.2\nlots\n")
    result = cli("run", "--set", "service.distribution=empirical", "--set", "service.file=times.txt", cwd=tmp_path)
    assert_one_line_error(result, "service.file:", "times.txt:3", "lots")


def test_unstable_system_is_refused_up_front(cli):
    result = cli("run", "--set", "fleet.dynos=40")
    assert_one_line_error(result, "unstable", "1.13", "45.36 busy slots needed", "40 available", code=3)


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["run", "--replications", "0"], ["--replications", "at least 1"]),
        (["run", "--seed", "x"], ["--seed", "whole number"]),
        (["run", "--set", "fleetdynos"], ["--set", "key.path=value"]),
        (["compare"], ["--policy", "required"]),
        (["compare", "--policy", "random,smart"], ["unknown policy 'smart'"]),
        (["frob"], ["invalid choice"]),
        (["run", "--frobnicate"], ["unrecognized arguments"]),
        # A metric of the dyno model, which a scenario of plain slots does not report.
        (["capacity", "--set", "router.policy=intelligent", "--duration", "10s", "--replications", "2",
          "--target", "dyno.cpu_utilisation <= 50%"], ["--target", "does not report 'dyno.cpu_utilisation'"]),
    ],
)
def test_bad_arguments(cli, args, fragments):
    assert_one_line_error(cli(*args), *fragments)


def test_api_raises_typed_errors():
    with pytest.raises(ScenarioError) as info:
        dynosim.run("rapgenius", set={"fleet.slots": 0})
    assert info.value.path == "fleet.slots"
    assert isinstance(info.value, ValueError)
    with pytest.raises(UnstableError):
        dynosim.run("rapgenius", set={"fleet.dynos": 10})
    with pytest.raises(ScenarioError, match=re.escape("arrivals.rate")):
        dynosim.run({"arrivals": {"process": "poisson"}, "service": {"distribution": "constant", "value": 1},
                     "fleet": {"dynos": 2}, "router": {"policy": "random"}})
