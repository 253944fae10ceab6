"""Rate ramps, autobench style (issue #12): the scenario run at each offered rate in turn, for
its run's duration, and what came back: the response rate against the offered rate (a fleet
keeps up while they match, the x = y line), the errors, and the latency percentiles.

Every step runs with ``run.allow_overload``: a rate at or above the fleet's capacity is
simulated for the run's time (its queues grow and the response rate stays at the capacity),
not refused as unstable; a step whose queues pass ``run.max_waiting`` is reported as
``overloaded`` without figures. Each policy runs every rate on the same traffic (same seed).
A scenario with ``[[cases]]`` ramps each case in turn (its rows are labelled ``case``; empty
without cases): the seed hello-heroku-world's dyno counts, each ramped."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .distributed import executor_for
from .errors import DynosimError
from .output import csv_text, finite, json_text, write_files
from .results import lookup
from .scenario import Scenario

#: Most rates a ramp runs.
MAX_STEPS = 1000

#: The figures of a step, in the order of the CSV's columns after policy, offered and status.
FIGURES = ["response_rate", "response_rate_ci_low", "response_rate_ci_high", "errors", "queue_mean",
           "response_p50", "response_p90", "response_p99"]
COLUMNS = ["case", "policy", "offered", "status"] + FIGURES

_NUMBER = r"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"\s*(?P<a>{_NUMBER})\s*\.\.\s*(?P<b>{_NUMBER})\s*/\s*(?P<step>{_NUMBER})\s*")


def parse_rates(text: str) -> List[float]:
    """``--rates``: ``A..B/STEP`` (A, A + STEP, ... up to B, autobench's low, high and step) or
    a list ``a,b,c``, in requests per second."""
    def bad(why: str) -> DynosimError:
        return DynosimError(f"--rates: {why}; expected A..B/STEP (e.g. 100..2000/100) or a list a,b,c, in req/s")

    m = _RANGE.fullmatch(text)
    if m:
        a, b, step = (float(m.group(k)) for k in ("a", "b", "step"))
        if not (a > 0 and b >= a and step > 0):
            raise bad(f"{text!r} needs 0 < A <= B and STEP > 0")
        count = math.floor((b - a) / step + 1e-9) + 1
        if count > MAX_STEPS:
            raise bad(f"{text!r} is {count:,} rates, at most {MAX_STEPS:,}")
        return [float(f"{a + k * step:.12g}") for k in range(count)]
    try:
        rates = [float(part) for part in text.split(",")]
    except ValueError:
        raise bad(f"cannot read {text!r}") from None
    if not rates or not all(r > 0 and math.isfinite(r) for r in rates):
        raise bad(f"{text!r}: every rate must be a positive number")
    if len(rates) > MAX_STEPS:
        raise bad(f"{len(rates):,} rates, at most {MAX_STEPS:,}")
    return rates


def steps(scenario: Scenario, rates: Sequence[float], policies: Optional[Sequence[str]] = None) -> List[Scenario]:
    """Each rate's scenario, validated before any runs; a closed loop has no rate to ramp."""
    if scenario.doc.get("arrivals", {}).get("process") == "closed":
        raise DynosimError("ramp: a closed loop has no arrival rate to ramp; use an open arrival process "
                           "(arrivals.process = \"poisson\")")
    out = []
    for rate in rates:
        step = scenario.with_overrides({"arrivals.rate": rate, "run.allow_overload": True})
        if policies:
            step = step.with_overrides({"router.policy": list(policies)})
        step.validate()
        out.append(step)
    return out


def ramp(scenario: Scenario, rates: Sequence[float], policies: Optional[Sequence[str]] = None,
         progress: Any = None, client: Any = None) -> List[Dict[str, Any]]:
    """One row per (case, policy, rate), in that order (see the module's docstring). The steps
    run in parallel threads, or as tasks on the cluster of `client` (a
    ``dask.distributed.Client``; :mod:`dynosim.distributed`), with the same rows either way;
    `progress(finished, steps)` is called as each step finishes."""
    cases = scenario.cases or [("", scenario)]
    # Every case's every step is validated before any runs.
    ramps = [(label, steps(case, rates, policies)) for label, case in cases]
    todo = [(label, policy, rate, step.for_policy(policy))
            for label, scenarios in ramps for policy in scenarios[0].policies
            for rate, step in zip(rates, scenarios)]
    def on_done(finished: int) -> None:
        if progress is not None:
            progress(finished, len(todo))

    outcomes = executor_for(client).run([s for *_, s in todo], on_done)
    rows: List[Dict[str, Any]] = []
    for (label, policy, rate, _), (status, result) in zip(todo, outcomes):
        row: Dict[str, Any] = {"case": label, "policy": policy, "offered": rate, "status": status}
        if result is None:
            row.update({k: None for k in FIGURES})
        else:
            row.update(figures(result.summary))
        rows.append(row)
    return rows


def figures(summary: Dict[str, Any]) -> Dict[str, Any]:
    """A step's figures from its run's summary (means over the replications): the successful
    responses per second (`goodput`: an error answered at once is no response, as httperf
    counts a refused connection as none) and their latency (`response_ok`: "ideally httperf
    would exclude those [500s] from the report", says the hello-world seed), and the errors."""
    rate = lookup(summary, "goodput")
    errors = float(lookup(summary, "errors.total")["mean"])
    return {
        "response_rate": rate["mean"], "response_rate_ci_low": rate["ci_low"],
        "response_rate_ci_high": rate["ci_high"], "errors": errors,
        "queue_mean": lookup(summary, "queue.mean")["mean"],
        "response_p50": lookup(summary, "response_ok.p50")["mean"],
        "response_p90": lookup(summary, "response_ok.p90")["mean"],
        "response_p99": lookup(summary, "response_ok.p99")["mean"],
    }


def plot(rows: Sequence[Dict[str, Any]], path: Path, title: str, fmt: str = "png") -> None:
    """Response rate against offered rate with the x = y line; latency percentiles (and the
    error percentage, when there are errors) against offered rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rates_ax, latency_ax) = plt.subplots(1, 2, figsize=(12, 5))
    series = list(dict.fromkeys((r["case"], r["policy"]) for r in rows))
    several_policies = len({p for _, p in series}) > 1
    top = max(r["offered"] for r in rows)
    rates_ax.plot([0, top], [0, top], color="grey", linestyle=":", label="x = y (keeps up)")
    any_errors = any((r["errors"] or 0) > 0 for r in rows)
    errors_ax = latency_ax.twinx() if any_errors else None
    for case, policy in series:
        mine = [r for r in rows if (r["case"], r["policy"]) == (case, policy)]
        ok = [r for r in mine if r["status"] == "ok"]
        x = [r["offered"] for r in ok]
        name = policy if not case else f"{case}: {policy}" if several_policies else case
        line, = rates_ax.plot(x, [r["response_rate"] for r in ok], marker="o", label=name)
        colour = line.get_color()
        latency_ax.plot(x, [r["response_p50"] for r in ok], color=colour, marker=".", label=f"{name}: p50")
        latency_ax.plot(x, [r["response_p99"] for r in ok], color=colour, linestyle="--", marker=".",
                        label=f"{name}: p99")
        if errors_ax is not None:
            errors_ax.plot(x, [100 * r["errors"] for r in ok], color=colour, linestyle=":", label=f"{name}: errors")
        over = [r["offered"] for r in mine if r["status"] != "ok"]
        if over:
            rates_ax.plot(over, [top] * len(over), color=colour, marker="x", linestyle="none",
                          label=f"{name}: overloaded")
    rates_ax.set_xlabel("offered rate (req/s)")
    rates_ax.set_ylabel("response rate (req/s)")
    rates_ax.set_xlim(left=0)
    rates_ax.set_ylim(bottom=0)
    rates_ax.legend(fontsize="small")
    latency_ax.set_xlabel("offered rate (req/s)")
    latency_ax.set_ylabel("response time (s)")
    if any(r["response_p50"] for r in rows if r["status"] == "ok"):
        latency_ax.set_yscale("log")
    latency_ax.legend(fontsize="small", loc="upper left")
    if errors_ax is not None:
        errors_ax.set_ylabel("errors (%)")
        errors_ax.legend(fontsize="small", loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format=fmt)
    plt.close(fig)


def write(rows: Sequence[Dict[str, Any]], prefix: str, title: str, formats: Sequence[str] = ("png",)) -> List[Path]:
    """``PREFIX.csv``, ``PREFIX.json`` and the plot(s), all or none."""
    base = Path(prefix)
    paths: Dict[Path, Any] = {
        base.with_name(base.name + ".csv"): lambda tmp: tmp.write_text(csv_text(COLUMNS, rows), encoding="utf-8"),
        base.with_name(base.name + ".json"): lambda tmp: tmp.write_text(
            json_text({"ramp": [finite(r) for r in rows]}), encoding="utf-8"),
    }
    for fmt in formats:
        paths[base.with_name(f"{base.name}.{fmt}")] = (lambda f: lambda tmp: plot(rows, tmp, title, f))(fmt)
    write_files(paths, option="--out")
    return list(paths)

