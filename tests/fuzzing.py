"""The fuzz target's generators and its one property: whatever a user types, dynosim answers
with a result or one clear line, in bounded time.

Inputs are built from a small, valid, cheap scenario (``BASE``) by mutation: keys set to
values of every kind TOML can hold (numbers of every size, NaN and infinities, strings with
and without units, dates and times, lists, tables nested deep), unknown keys, whole sections
replaced, and command lines drawn from the CLI's own vocabulary. Each case runs the CLI
in-process (``dynosim.cli.main``) with stdout and stderr captured.

The property (``check``): the command returns 0, 2 (bad input) or 3 (unstable); no exception
escapes (a traceback); an error is one ``dynosim: error:`` line (warnings may precede it);
stdout is empty after an error and, for ``--json``, holds one complete, strict JSON document;
and the case ends within ``CASE_SECONDS``. Work is kept small by a budget that every case
carries as its last override (``run.max_requests``), which the product checks before running.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import math
import signal
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hypothesis import strategies as st

#: A case that runs longer than this is a hang (the alarm interrupts it).
CASE_SECONDS = 10.0
#: The work budget every case carries: simulated requests over all replications and policies.
BUDGET = ["--set", "run.max_requests=200000"]

BASE: Dict[str, Any] = {
    "name": "fuzz",
    "arrivals": {"process": "poisson", "rate": "50/s"},
    "service": {"distribution": "exponential", "mean": "10ms"},
    "fleet": {"dynos": 2, "slots": 1},
    "router": {"policy": "random"},
    "run": {"duration": "2s", "warmup": "0s", "replications": 2, "seed": 1},
}

SECTIONS = ["arrivals", "service", "fleet", "router", "run", "cost", "cases", "name", "description",
            "app", "request", "resources", "autoscale"]
KEYS = [
    "arrivals.process", "arrivals.rate",
    "service.distribution", "service.mean", "service.median", "service.scale", "service.shape",
    "service.sigma", "service.value", "service.percentiles", "service.file", "service.unit",
    "service.round_up", "service.clip",
    "fleet.dynos", "fleet.slots",
    "router.policy", "router.routers", "router.d", "router.distinct", "router.tries",
    "run.duration", "run.warmup", "run.replications", "run.seed", "run.max_waiting",
    "cost.dyno_type", "cost.prices", "cost.prices.x",
    # The dyno model (docs/dyno.md).
    "fleet.type", "fleet.cores", "fleet.memory", "fleet.boot_time", "run.engine",
    "arrivals.clients", "arrivals.think", "arrivals.requests",
    # Traffic (issue 12): schedules and sines are values of arrivals.rate.
    "arrivals.size", "arrivals.on", "arrivals.off", "arrivals.burst",
    "app.server", "app.worker_class", "app.model", "app.processes", "app.threads", "app.worker_connections",
    "app.accept", "app.lock", "app.malloc_arena_max", "app.boot_time", "app.swap_slowdown", "app.arena_contention",
    "app.restart_at", "app.memory.dyno", "app.memory.process", "app.memory.thread", "app.memory.request",
    "app.memory.arena", "request.phases", "request.class", "resources.db.servers", "resources.db.discipline",
    "resources.db.pool", "resources.db.pool.size", "resources.db.pool.per",
    # A fleet that changes size (issue 24): the lifecycle keys and [autoscale].
    "fleet.boot_timeout", "fleet.stop_delay", "fleet.shutdown_grace",
    "autoscale.rule", "autoscale.min", "autoscale.max", "autoscale.interval", "autoscale.window",
    "autoscale.delay", "autoscale.target", "autoscale.cooldown", "autoscale.downscale_ratio",
    "autoscale.downscale_delay", "autoscale.upscale_above", "autoscale.downscale_below", "autoscale.step",
    "autoscale.metric", "autoscale.aggregation", "autoscale.percentile", "autoscale.upscale_step",
    "autoscale.upscale_sensitivity", "autoscale.upscale_timeout", "autoscale.tolerance",
    "autoscale.up_stabilization", "autoscale.down_policies", "autoscale.up_select",
    "autoscale.scale_in_ratio", "autoscale.scale_out_datapoints", "autoscale.schedule",
    # CPU time in slices and the interpreter locks (issue 25).
    "fleet.cpu_sharing", "fleet.cpu_quantum", "fleet.cpu_jitter", "app.switch_interval", "app.timeslice",
    "app.request_cpu",
    # The balancers of issue 26.
    "router.aperture", "router.jiq_report_d", "router.jiq_report_delay", "router.decay", "router.default_rtt",
]
RULES = ["heroku", "judoscale", "hirefire", "hpa", "target_tracking", "schedule"]
DISTRIBUTIONS = ["constant", "exponential", "lognormal", "weibull", "gamma", "empirical", "quantiles", "uniform"]
POLICIES = ["random", "round_robin", "least_connections", "power_of_d", "retry_if_busy", "intelligent", "jiq",
            "p2c_ewma", "least_request", "first", "bounded_hash"]
UNITS = ["", "ns", "us", "µs", "ms", "s", "sec", "min", "m", "h", "d", "/s", "/min", "/h", " per second",
         "rps", " rps", "req/s", "parsecs", "%", "e", "XYZ"]


# --- values ---------------------------------------------------------------------------------

_interesting_ints = st.sampled_from([0, 1, -1, 2, 7, 2**31 - 1, 2**31, 2**32, 2**53, 2**63 - 1,
                                     -(2**63), 10**7, 10**7 + 1, 100_000, 100_001, 10**12])
_interesting_floats = st.sampled_from([0.0, -0.0, 1e-320, 1e-16, 1e-9, 0.5, 0.999, 1.0, 1e300,
                                       math.inf, -math.inf, math.nan])
_numbers = st.one_of(_interesting_ints, _interesting_floats,
                     st.integers(min_value=-(2**63), max_value=2**63 - 1),
                     st.floats(allow_nan=True, allow_infinity=True))
_number_text = st.one_of(
    _numbers.map(lambda v: repr(v) if not isinstance(v, float) or math.isfinite(v) else str(v)),
    st.sampled_from(["1e", "1e5", "1_000", "..", "1..2", ".5", "5.", "-", "+3", "0x10", "nan", "inf"]),
)
_unit_text = st.builds(lambda n, sp, u: f"{n}{sp}{u}", _number_text, st.sampled_from(["", " ", "  "]),
                       st.sampled_from(UNITS))
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_scalars = st.one_of(
    _numbers, _unit_text, _text, st.booleans(),
    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)),
    st.dates(), st.times(), st.sampled_from(DISTRIBUTIONS + POLICIES),
)


def _nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


values = st.recursive(
    _scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(["a", "b", "_1", "mean", "x"]), children, max_size=3)),
    max_leaves=8,
)
values = st.one_of(values, values, values, st.integers(min_value=10, max_value=400).map(_nested))

#: Percentile tables: mostly well-formed rows with odd values, to reach the table's own checks.
percentile_tables = st.lists(
    st.tuples(st.one_of(st.floats(min_value=-1, max_value=101), _interesting_floats),
              st.one_of(_unit_text, _numbers)).map(list),
    max_size=6,
)


# --- TOML rendering (the inputs need not be valid TOML: invalid text is an input too) --------

def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def toml_document(doc: Dict[str, Any]) -> str:
    """Top-level scalars first, then one [section] per table (its values inline)."""
    lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{json.dumps(k)}]")
            lines += [f"{json.dumps(str(kk))} = {toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


def set_path(doc: Dict[str, Any], path: str, value: Any) -> None:
    node = doc
    parts = path.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


# --- cases ----------------------------------------------------------------------------------

@dataclass
class Case:
    """A command line and the files it reads (written to a temporary folder first)."""

    argv: List[str]
    files: Dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        files = "".join(f"\n--- {name}\n{text}" for name, text in self.files.items())
        return f"dynosim {' '.join(self.argv)}{files}"


def _durations(low: float, high: float) -> Any:
    """Durations from `low` to `high` seconds, written as a user would (with a unit, or not)."""
    seconds = st.floats(min_value=low, max_value=high)
    units = st.sampled_from([("ms", 1e-3), ("s", 1.0), ("min", 60.0), ("us", 1e-6)])
    return st.one_of(seconds, units.flatmap(lambda u: seconds.map(lambda v: f"{v / u[1]:.4g}{u[0]}")))


_service_params = {
    "constant": lambda: st.fixed_dictionaries({"value": _durations(1e-4, 1.0)}),
    "exponential": lambda: st.fixed_dictionaries({"mean": _durations(1e-4, 1.0)}),
    "lognormal": lambda: st.fixed_dictionaries({"median": _durations(1e-4, 1.0),
                                                "sigma": st.floats(min_value=0.01, max_value=4)}),
    "weibull": lambda: st.fixed_dictionaries({"shape": st.floats(min_value=0.05, max_value=5)}).flatmap(
        lambda d: st.sampled_from(["scale", "median"]).flatmap(
            lambda k: _durations(1e-4, 1.0).map(lambda v: {**d, k: v}))),
    "gamma": lambda: st.fixed_dictionaries({"shape": st.floats(min_value=0.05, max_value=5)}).flatmap(
        lambda d: st.sampled_from(["scale", "mean"]).flatmap(
            lambda k: _durations(1e-4, 1.0).map(lambda v: {**d, k: v}))),
    "quantiles": lambda: st.fixed_dictionaries({"percentiles": percentile_tables}),
    "uniform": lambda: st.fixed_dictionaries({"min": _durations(1e-4, 1.0), "max": _durations(1e-4, 2.0)}),
    "empirical": lambda: st.fixed_dictionaries({"file": st.just("times.txt")}),
}
_policy_params = {
    "power_of_d": lambda: st.fixed_dictionaries({"d": st.one_of(st.integers(1, 8), st.integers(1, 8), _interesting_ints)}),
    "retry_if_busy": lambda: st.fixed_dictionaries(
        {"tries": st.one_of(st.integers(1, 8), st.integers(1, 8), _interesting_ints)}),
    "least_request": lambda: st.one_of(
        st.fixed_dictionaries({"choice_count": st.one_of(st.integers(1, 8), _interesting_ints)}),
        st.fixed_dictionaries({"active_request_bias": st.one_of(st.floats(0, 10), st.floats(-1, 20))})),
    "bounded_hash": lambda: st.fixed_dictionaries({"factor": st.one_of(
        st.floats(1, 3).map(lambda v: round(v, 2)), st.just("inf"), st.floats(0, 5))}),
}
#: Lines of an empirical sample file: times with and without units, and some that are not.
sample_files = st.lists(st.one_of(_durations(0, 2).map(str), _unit_text, _text, st.just("# comment")),
                        max_size=12).map("\n".join)


@st.composite
def plausible_documents(draw: Any) -> Dict[str, Any]:
    def count(low: int, high: int) -> Any:  # mostly in range, sometimes at an edge
        return st.one_of(st.integers(low, high), st.integers(low, high), st.integers(low, high), _interesting_ints)

    """A scenario a user might write: every kind of distribution and policy, with parameters
    mostly in range and sometimes at the edge."""
    doc: Dict[str, Any] = {"name": "fuzz"}
    doc["arrivals"] = {"process": "poisson", "rate": draw(st.one_of(
        st.floats(min_value=0.1, max_value=5000),
        st.sampled_from(["/s", "/min", " rps", " per hour"]).flatmap(
            lambda u: st.floats(min_value=0.1, max_value=5000).map(lambda v: f"{v:.4g}{u}"))))}
    shape = draw(st.integers(0, 9))
    rate = st.floats(min_value=0.1, max_value=500)
    if shape == 0:  # a schedule: points from 0 s, times not decreasing
        times = sorted(draw(st.lists(st.floats(min_value=0, max_value=60), min_size=0, max_size=4)))
        doc["arrivals"]["rate"] = [[0, draw(rate)]] + [[t, draw(rate)] for t in times]
    elif shape == 1:
        mean = draw(rate)
        doc["arrivals"]["rate"] = {"mean": mean, "amplitude": draw(st.floats(min_value=0, max_value=mean)),
                                   "period": draw(_durations(0.01, 100)), "peak": draw(_durations(0, 10))}
    elif shape == 2:
        doc["arrivals"] = {"process": "batch", "rate": draw(rate), "size": draw(st.one_of(
            count(1, 10), st.floats(min_value=1, max_value=10).map(
                lambda m: {"distribution": "geometric", "mean": m})))}
    elif shape == 3:
        doc["arrivals"] = {"process": "on_off", "rate": draw(rate), "on": draw(_durations(0.01, 10)),
                           "off": draw(_durations(0.01, 10))}
    if draw(st.integers(0, 5)) == 0:
        doc["arrivals"]["burst"] = [
            {"at": draw(_durations(0, 30)), "clients": draw(count(1, 300)), "requests": draw(count(1, 3)),
             "jitter": draw(st.one_of(_durations(0, 5), _durations(0.001, 5).map(
                 lambda m: {"distribution": "exponential", "mean": m}))),
             **({"every": draw(_durations(0.5, 30))} if draw(st.booleans()) else {})}
            for _ in range(draw(st.integers(1, 2)))]
    kind = draw(st.sampled_from(DISTRIBUTIONS))
    service = {"distribution": kind, **draw(_service_params[kind]())}
    if draw(st.integers(0, 3)) == 0:
        service["round_up"] = draw(_durations(1e-6, 0.1))
    if draw(st.integers(0, 3)) == 0:
        low = draw(st.floats(min_value=0, max_value=0.1))
        service["clip"] = [low, low + draw(st.floats(min_value=1e-3, max_value=10))]
    doc["service"] = service
    doc["fleet"] = {"dynos": draw(count(1, 200)), "slots": draw(count(1, 8))}
    policy = draw(st.sampled_from(POLICIES))
    doc["router"] = {"policy": policy, **draw(_policy_params.get(policy, lambda: st.just({}))())}
    if draw(st.booleans()):
        doc["router"]["routers"] = draw(count(1, 5))
    if policy == "bounded_hash" or draw(st.integers(0, 7)) == 0:  # bounded_hash hashes the requests' keys
        doc["arrivals"]["keys"] = {"users": draw(count(1, 10_000)),
                                   "popularity": draw(st.sampled_from(["zipf", "uniform"]))}
    doc["run"] = {"duration": draw(_durations(0.001, 60)), "warmup": draw(_durations(0, 10)),
                  "replications": draw(count(1, 5)), "seed": draw(st.integers(0, 2**64 - 1))}
    if draw(st.integers(0, 3)) == 0:
        doc["autoscale"] = draw(autoscale_tables(doc["fleet"]["dynos"]))
        for key, value in draw(lifecycle_keys()).items():
            doc["fleet"][key] = value
    return doc


@st.composite
def autoscale_tables(draw: Any, dynos: Any) -> Dict[str, Any]:
    """An ``[autoscale]`` table: a rule, ``min`` and ``max`` around the fleet (sometimes not),
    an interval, and some of the rule's keys with plausible values, sometimes odd ones."""
    rule = draw(st.sampled_from(RULES + ["keda"]))
    low = draw(st.integers(1, 5))
    high = draw(st.integers(low, 20)) if draw(st.integers(0, 4)) else draw(_interesting_ints)
    table: Dict[str, Any] = {"rule": rule, "min": low, "max": high}
    if isinstance(dynos, int) and draw(st.integers(0, 3)):
        table["min"] = max(1, min(low, dynos)) if dynos >= 1 else low
        table["max"] = max(dynos, table["min"]) if isinstance(high, int) and high >= 1 else high
    if draw(st.booleans()):
        table["interval"] = draw(st.one_of(_durations(0.5, 120), _durations(0.5, 120), _unit_text))
    times = _durations(0.001, 2)
    own = {
        "heroku": {"target": times, "cooldown": _durations(0, 120), "downscale_ratio": st.floats(0, 1.5)},
        "judoscale": {"upscale_above": times, "downscale_below": times, "step": st.integers(-1, 5)},
        "hirefire": {"metric": st.sampled_from(["queue", "response", "cpu"]),
                     "aggregation": st.sampled_from(["percentile", "average", "p99"]),
                     "percentile": st.floats(0, 120), "upscale_step": st.integers(0, 6)},
        "hpa": {"metric": st.sampled_from(["cpu", "utilisation", "queue.p95"]),
                "target": st.one_of(st.floats(0, 2), times), "tolerance": st.floats(-0.1, 1.2),
                "up_select": st.sampled_from(["max", "min", "disabled", "all"]),
                "down_policies": st.lists(st.fixed_dictionaries(
                    {"type": st.sampled_from(["pods", "percent", "x"]), "value": st.integers(-1, 200),
                     "period": _durations(0, 2000)}), max_size=2)},
        "target_tracking": {"target": st.floats(0, 2), "scale_in_ratio": st.floats(0, 1.2),
                            "scale_out_datapoints": st.integers(0, 5)},
        "schedule": {"schedule": st.lists(st.tuples(_durations(0, 90000), st.integers(0, 25)).map(list),
                                          max_size=4).map(lambda pts: sorted(pts, key=str))},
        "keda": {"target": times},
    }[rule]
    for key, values in own.items():
        if draw(st.integers(0, 2)):
            table[key] = draw(values)
    if draw(st.integers(0, 9)) == 0:  # a key of another rule
        table[draw(st.sampled_from(["upscale_above", "tolerance", "schedule", "scale_in_cooldown"]))] = "1s"
    return table


@st.composite
def lifecycle_keys(draw: Any) -> Dict[str, Any]:
    """Some of ``fleet.boot_time`` (a duration or a distribution), ``boot_timeout``,
    ``stop_delay`` and ``shutdown_grace``."""
    keys = {
        "boot_time": st.one_of(_durations(0, 120), _durations(0.01, 60).map(
            lambda m: {"distribution": "exponential", "mean": m})),
        "boot_timeout": st.one_of(_durations(0, 120), _unit_text),
        "stop_delay": _durations(0, 5),
        "shutdown_grace": st.one_of(_durations(0, 60), _unit_text),
    }
    return {k: draw(v) for k, v in keys.items() if draw(st.booleans())}


@st.composite
def scenario_documents(draw: Any) -> Dict[str, Any]:
    """A plausible scenario with, sometimes, a few keys set to anything at all."""
    doc = draw(plausible_documents())
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        key = draw(st.one_of(st.sampled_from(KEYS), st.sampled_from(SECTIONS),
                             st.sampled_from(SECTIONS).map(lambda s: s + "._1")))
        value = draw(percentile_tables) if key == "service.percentiles" else draw(values)
        set_path(doc, key, value)
    return doc


@st.composite
def dyno_documents(draw: Any) -> Dict[str, Any]:
    """A scenario with the dyno model: an app server, phases or classes, a database with a
    pool, memory, an open or closed loop; then, sometimes, a few keys set to anything."""
    def time() -> Any:
        return st.one_of(_durations(1e-4, 0.05), _durations(1e-4, 0.05).map(
            lambda m: {"distribution": "exponential", "mean": m}))

    phase = st.one_of(time().map(lambda t: {"cpu": t}), time().map(lambda t: {"io": t}),
                      time().map(lambda t: {"use": "db", "time": t}))
    phases = st.lists(phase, min_size=1, max_size=4)
    doc: Dict[str, Any] = {"name": "fuzz-dyno"}
    if draw(st.booleans()):
        doc["arrivals"] = {"process": "poisson", "rate": draw(st.floats(min_value=1, max_value=300))}
    else:
        doc["arrivals"] = {"process": "closed", "clients": draw(st.integers(1, 40))}
        if draw(st.booleans()):
            doc["arrivals"]["requests"] = draw(st.integers(1, 500))
        if draw(st.booleans()):
            doc["arrivals"]["think"] = draw(time())
    if draw(st.booleans()):
        doc["request"] = {"phases": draw(phases)}
    else:
        doc["request"] = {"class": [{"name": f"c{i}", "weight": draw(st.floats(min_value=0.1, max_value=5)),
                                     "phases": draw(phases)} for i in range(draw(st.integers(1, 3)))]}
    doc["resources"] = {"db": {"servers": draw(st.integers(1, 8)), "discipline": draw(st.sampled_from(["fcfs", "ps"]))}}
    if draw(st.booleans()):
        doc["resources"]["db"]["pool"] = {"size": draw(st.integers(1, 10)),
                                          "per": draw(st.sampled_from(["process", "dyno", "app"]))}
    server = draw(st.sampled_from(["generic", "thin", "unicorn", "puma", "gunicorn"]))
    doc["app"] = {"server": server, "processes": draw(st.integers(1, 6)), "boot_time": "100ms"}
    if server == "gunicorn":
        doc["app"]["worker_class"] = draw(st.sampled_from(["sync", "gthread", "gevent"]))
        if doc["app"]["worker_class"] == "gthread":
            doc["app"]["threads"] = draw(st.integers(1, 8))
    elif server in ("puma", "generic"):
        doc["app"]["threads"] = draw(st.integers(1, 8))
    if draw(st.booleans()):
        doc["app"]["accept"] = draw(st.sampled_from(["shared", "greedy"]))
    if draw(st.booleans()):
        doc["app"]["memory"] = {k: f"{draw(st.integers(0, 300))}MB" for k in ("dyno", "process", "thread", "request")}
    doc["fleet"] = {"dynos": draw(st.integers(1, 6)),
                    "type": draw(st.sampled_from(["standard-1x", "standard-2x", "performance-m", "2013-1x"]))}
    doc["router"] = {"policy": draw(st.sampled_from(POLICIES))}
    doc["run"] = {"duration": draw(_durations(0.5, 5)), "warmup": "0s", "replications": 2, "seed": 1}
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        set_path(doc, draw(st.sampled_from(KEYS[KEYS.index("fleet.type"):] + SECTIONS)), draw(values))
    return doc


@st.composite
def dyno_cases(draw: Any) -> Case:
    return Case(["run", "d.toml", "--json", *BUDGET], {"d.toml": toml_document(draw(dyno_documents()))})


@st.composite
def file_cases(draw: Any) -> Case:
    doc = draw(scenario_documents())
    return Case(["run", "s.toml", "--json", *BUDGET],
                {"s.toml": toml_document(doc), "times.txt": draw(sample_files)})


@st.composite
def override_cases(draw: Any) -> Case:
    argv = ["run", "base.toml", "--json"]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        key = draw(st.one_of(st.sampled_from(KEYS + SECTIONS), _text))
        raw = draw(st.one_of(values.map(toml_value), _unit_text, _text))
        argv += ["--set", f"{key}={raw}"]
    return Case(argv + BUDGET, {"base.toml": toml_document(BASE)})


_option_values = st.one_of(_number_text, _unit_text, _text, st.sampled_from(POLICIES + ["random,intelligent"]))
_targets = st.builds(lambda m, op, v: f"{m} {op} {v}",
                     st.sampled_from(["queue.mean", "response.p99", "queued_fraction", "throughput", "nope"]),
                     st.sampled_from(["<=", "<", ">=", ">", "=", ""]), st.one_of(_unit_text, _number_text))
_varies = st.builds(lambda k, spec: f"{k}={spec}",
                    st.sampled_from(["fleet.dynos", "router.policy", "service.mean", "arrivals.rate", "run.seed"]),
                    st.one_of(_unit_text, _number_text,
                              st.builds(lambda a, b, n: f"{a}..{b}{n}", _number_text, _number_text,
                                        st.sampled_from(["", ":3", ":2:log", ":0", ":lin", ":1000000000"])),
                              st.lists(_number_text, min_size=1, max_size=3).map(",".join)))


#: The commands that run a scenario (and so carry the budget).
SCENARIO_COMMANDS = ("run", "compare", "capacity", "sweep", "tune", "animate")


@st.composite
def command_cases(draw: Any) -> Case:
    """Command lines from the CLI's vocabulary, each option with a value of any kind."""
    command = draw(st.sampled_from(["run", "compare", "capacity", "sweep", "tune", "animate", "scenarios", "frob", ""]))
    argv = [command] if command else []
    if command in SCENARIO_COMMANDS:
        argv.append(draw(st.sampled_from(["s.toml", "s.toml", "s.toml", "nope.toml", "rapgenius", "nope", ""])))
    required = {"compare": ["--policy"], "capacity": ["--target"], "sweep": ["--vary", "--out"],
                "tune": ["--vary", "--target"], "animate": ["--out"]}
    if draw(st.integers(0, 4)):
        for name in required.get(command, []):
            argv += [name, draw(_plausible_options[name])]
    options = {
        "--seed": _number_text, "--replications": _number_text, "--duration": _unit_text,
        "--policy": _option_values, "--set": values.map(lambda v: f"fleet.dynos={toml_value(v)}"),
        "--target": _targets, "--slots": _number_text, "--max-dynos": _number_text,
        "--dyno-type": _option_values, "--vary": _varies, "--metric": _option_values,
        "--format": st.sampled_from(["png", "svg", "png,svg", "pdf", ""]),
        "--out": st.sampled_from(["out/x", "out/x.gif", "out/x.html", "out/", "/proc/x/y", ""]),
        "--seconds": _number_text, "--fps": _number_text, "--speed": _number_text,
        "--json": st.just(None), "--frobnicate": st.just(None),
    }
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        name = draw(st.sampled_from(sorted(options)))
        value = draw(options[name])
        argv += [name] if value is None else [name, value]
    if command in SCENARIO_COMMANDS:
        argv += BUDGET
    return Case(argv, {"s.toml": toml_document(draw(plausible_documents())), "times.txt": draw(sample_files)})


_plausible_options = {
    "--policy": st.lists(st.sampled_from(POLICIES), min_size=1, max_size=3, unique=True).map(",".join),
    "--target": st.builds(lambda m, v: f"{m} <= {v}", st.sampled_from(["queue.mean", "response.p99", "queue.p90"]),
                          st.sampled_from(["1ms", "10ms", "100ms", "1s", "10s"])),
    "--vary": st.sampled_from(["fleet.dynos=2..20:3", "router.policy=random,intelligent", "fleet.slots=1,2",
                               "run.seed=1,2"]),
    "--out": st.sampled_from(["out/x", "x", "out/x.gif", "out/x.html", "x.html"]),
}


# --- the property ---------------------------------------------------------------------------

class Hang(Exception):
    """A case ran past CASE_SECONDS."""


@dataclass
class Outcome:
    code: Optional[int]
    stdout: str
    stderr: str
    escaped: Optional[BaseException]


def run_case(case: Case, folder: Path) -> Outcome:
    """Runs the CLI in-process in `folder` with the case's files written there first."""
    import os

    from dynosim import cli

    for name, text in case.files.items():
        (folder / name).write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    cwd = os.getcwd()
    code: Optional[int] = None
    escaped: Optional[BaseException] = None
    try:
        os.chdir(folder)
        signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(case.argv)
    except BaseException as e:  # anything that escapes main() is a traceback for the user
        escaped = e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(cwd)
    return Outcome(code, out.getvalue(), err.getvalue(), escaped)


def _alarm(signum: int, frame: Any) -> None:
    raise Hang(f"ran past {CASE_SECONDS} s")


def check(case: Case, outcome: Outcome) -> None:
    """The fuzz target's property; raises AssertionError naming what broke."""
    if outcome.escaped is not None:
        raise AssertionError(f"escaped {type(outcome.escaped).__name__}: {outcome.escaped}") from outcome.escaped
    assert outcome.code in (0, 2, 3), f"exit code {outcome.code} (130: ran past {CASE_SECONDS} s)\n{outcome.stderr}"
    lines = outcome.stderr.splitlines()
    errors = [line for line in lines if line.startswith("dynosim: error: ")]
    others = [line for line in lines if not line.startswith(("dynosim: error: ", "dynosim: warning: "))]
    assert not others, f"stderr has lines that are neither an error nor a warning:\n{outcome.stderr}"
    if outcome.code == 0:
        assert not errors, outcome.stderr
        if "--json" in case.argv:
            json.loads(outcome.stdout, parse_constant=_reject_constant)
    else:
        assert len(errors) == 1, f"expected one error line:\n{outcome.stderr}"
        assert outcome.stdout == "", f"stdout after an error:\n{outcome.stdout[:500]}"
        message = errors[0][len("dynosim: error: "):]
        assert len(message) >= 10 and "Traceback" not in message, message


def _reject_constant(name: str) -> Any:
    raise AssertionError(f"JSON output holds {name}, which RFC 8259 does not allow")

