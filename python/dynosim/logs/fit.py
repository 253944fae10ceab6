"""A scenario fitted to router logs (``dynosim logs fit``): the arrival rate, or a rate
schedule when the rate varies over the log; the service times as a quantile table, or per
route as request classes; the fleet seen in the log; and a report of how good the fit is.

The reading is the Rust crate ``dynosim-logs`` (one pass in bounded memory: arrival counts
per interval, service-time histograms, each request's overlap with the one before it on its
dyno); the fitting is here, from those. docs/logs.md says what is assumed.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from statistics import NormalDist
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .. import _dynosim, time_axis
from ..display import plural
from ..errors import LogError
from ..output import write_files
from ..scenario import Scenario
from ..toml_text import value as _toml_value
from . import spans
from .reading import PathLike, call, log_names, parse_window

__all__ = ["Fit", "fit", "fit_spans", "SPANS", "PERCENTILES", "DISPERSION_SCALES", "ks_distance", "quantile_table", "dispersion"]

#: The percentiles of a fitted quantile table, those the log has requests enough for: at
#: least one request beyond each (n·min(p, 100 − p)/100 ≥ 1).
PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99)
#: Interval lengths at which the counts of arrivals are compared with Poisson's, seconds.
DISPERSION_SCALES = (1.0, 10.0, 60.0, 600.0, 3600.0)
#: Intervals a dispersion needs (whole ones: the log's first and last are partial).
MIN_INTERVALS = 10
#: A dispersion test rejects Poisson below this p-value.
SIGNIFICANCE = 0.001
#: A schedule has at most this many segments, and a log is cut into at least MIN_SEGMENTS
#: before its rate is tested for variation.
MAX_SEGMENTS = 48
MIN_SEGMENTS = 4
#: Logs give times in whole milliseconds.
RESOLUTION = 0.001
#: The engine's run.duration when a scenario leaves it out, s; a fitted scenario whose rate
#: would expect fewer than MIN_EXPECTED requests in it gets a longer one.
DEFAULT_DURATION = 300.0
MIN_EXPECTED = 100.0
#: ``format`` of traces: spans as JSON lines.
SPANS = "spans"
#: Spans give times in micro- or nanoseconds: own times are kept in whole microseconds.
SPAN_RESOLUTION = 1e-6
#: Percentiles of the QQ plot and its table.
QQ_PERCENTILES = tuple(range(1, 100)) + (99.5, 99.9, 99.99)

_NORMAL = NormalDist()


# --- service times ---------------------------------------------------------------------------

Histogram = List[Tuple[float, int]]


def _count(hist: Histogram) -> int:
    return sum(c for _, c in hist)


def _quantile(hist: Histogram, n: int, p: float) -> float:
    """The nearest-rank p-th percentile: the smallest time at least p% of the requests do not
    exceed."""
    rank = max(1, math.ceil(p / 100 * n - 1e-9))
    seen = 0
    for value, count in hist:
        seen += count
        if seen >= rank:
            return value
    return hist[-1][0]


def _supported(n: int, ps: Sequence[float]) -> List[float]:
    return [p for p in ps if n * min(p, 100 - p) / 100 >= 1]


def quantile_table(hist: Histogram, resolution: float = RESOLUTION) -> List[List[Any]]:
    """``[[p, "Xms"], ...]`` of the histogram (seconds, count) at the :data:`PERCENTILES` its
    requests support. A percentile logged as 0 is written as half the ``resolution`` of the
    times (0.5 ms for a log's whole milliseconds): the table needs positive times."""
    n = _count(hist)
    ps = _supported(n, PERCENTILES)
    if len(ps) < 2:
        raise LogError(f"{n} service time{'s are' if n != 1 else ' is'} too few to fit a distribution: "
                       f"at least 4 are needed")
    return [[p, _ms(max(_quantile(hist, n, p), resolution / 2))] for p in ps]


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000, 3):g}ms"


def ks_distance(hist: Histogram, cdf: Any, resolution: float = RESOLUTION) -> float:
    """The Kolmogorov–Smirnov distance between the log's service times (a histogram of whole
    milliseconds, or multiples of ``resolution``) and a fitted distribution rounded as the log
    rounds them, so that the log's resolution does not count as misfit. ``cdf(xs)`` gives the
    fitted P(S ≤ x) for a list of x. Both are steps on the same grid: the distance is the
    largest gap at a logged time or just before it."""
    n = _count(hist)
    h = resolution / 2
    values = [v for v, _ in hist]
    upper = cdf([v + h for v in values])      # G(v): the rounded fit at v
    lower = cdf([max(v - h, 0.0) for v in values])  # G(v - 1 ms)
    distance = 0.0
    below = 0.0
    for (_, count), g_hi, g_lo in zip(hist, upper, lower):
        distance = max(distance, abs(below - g_lo))
        below += count / n
        distance = max(distance, abs(below - g_hi))
    return distance


def _qq(hist: Histogram, quantiles: Any) -> List[List[float]]:
    """``[[p, logged, fitted], ...]`` at the QQ percentiles the log supports."""
    n = _count(hist)
    ps = _supported(n, QQ_PERCENTILES)
    fitted = quantiles([p / 100 for p in ps]) if ps else []
    return [[p, _quantile(hist, n, p), f] for p, f in zip(ps, fitted)]


def _merge(hists: Sequence[Histogram]) -> Histogram:
    merged: Dict[float, int] = {}
    for hist in hists:
        for v, c in hist:
            merged[v] = merged.get(v, 0) + c
    return sorted(merged.items())


# --- arrivals --------------------------------------------------------------------------------


def _chi2_cdf(x: float, k: int) -> float:
    """P(χ²_k ≤ x), by Wilson and Hilferty's cube-root normal approximation (within a few
    thousandths for k ≥ 10, what the dispersion tests use)."""
    if x <= 0:
        return 0.0
    z = ((x / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return _NORMAL.cdf(z)


def dispersion(counts: Sequence[int], width: float) -> List[Dict[str, Any]]:
    """The index of dispersion (variance / mean) of the arrivals per interval at each of
    :data:`DISPERSION_SCALES` that is a multiple of the counts' ``width`` and fits at least
    :data:`MIN_INTERVALS` intervals in the counts (the intervals the log covers whole). Poisson
    arrivals at a constant rate give 1; each row has the χ² test's p-values (over- and
    under-dispersion) and a verdict."""
    rows = []
    for scale in DISPERSION_SCALES:
        k = round(scale / width)
        if k < 1 or abs(k * width - scale) > 1e-9 * scale:
            continue
        groups = [sum(counts[i:i + k]) for i in range(0, len(counts) - k + 1, k)]
        if len(groups) < MIN_INTERVALS:
            continue
        rows.append(_dispersion_row(groups, scale))
    return rows


def _dispersion_row(groups: Sequence[int], scale: float) -> Dict[str, Any]:
    n = len(groups)
    mean = sum(groups) / n
    variance = sum((g - mean) ** 2 for g in groups) / (n - 1)
    index = variance / mean if mean > 0 else math.nan
    statistic = (n - 1) * index if mean > 0 else math.nan
    below = _chi2_cdf(statistic, n - 1) if mean > 0 else math.nan
    if not mean > 0:
        verdict = "no arrivals"
    elif 1 - below < SIGNIFICANCE:
        verdict = "burstier than Poisson"
    elif below < SIGNIFICANCE:
        verdict = "more regular than Poisson"
    else:
        verdict = "consistent with Poisson"
    return {"interval_seconds": scale, "intervals": n, "mean": mean, "variance": variance, "index": index,
            "p_over": 1 - below, "p_under": below, "verdict": verdict}


def _segments(data: Dict[str, Any]) -> Tuple[float, List[Tuple[float, float, int]]]:
    """The intervals the log covers whole, grouped into at most MAX_SEGMENTS segments: their
    length, and each one's (start, end, arrivals), in seconds from the first interval's start
    (the last segment may be shorter)."""
    counts: List[int] = data["counts"]
    width = float(data["interval_seconds"])
    k = max(1, math.ceil(len(counts) / MAX_SEGMENTS))
    out = [(i * width, min(i + k, len(counts)) * width, sum(counts[i:i + k])) for i in range(0, len(counts), k)]
    return k * width, out


def _duration_text(seconds: float) -> str:
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size and abs(seconds / size - round(seconds / size)) < 1e-9:
            return f"{round(seconds / size)}{unit}"
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


def _words(seconds: float) -> str:
    """``1 s``, ``10 min``, ``1 h``: an interval in prose."""
    text = _duration_text(seconds)
    return text[:-1] + " s" if text.endswith("s") and not text.endswith("min") else \
        text.replace("min", " min").replace("h", " h")


def _rate_text(rate: float) -> str:
    return f"{rate:.6g}/s"


# --- the fit ---------------------------------------------------------------------------------


@dataclass
class Fit:
    """A fitted scenario and its report.

    ``scenario`` is the scenario document (a dict, as :class:`~dynosim.Scenario` takes it);
    ``toml`` the file ``dynosim logs fit -o`` writes (with comments saying where each value
    comes from); ``report`` what ``--json`` prints (fields in docs/logs.md)."""

    scenario: Dict[str, Any]
    toml: str
    report: Dict[str, Any]

    def write(self, path: PathLike) -> Path:
        """Writes the scenario file, whole or not at all."""
        target = Path(path)
        write_files({target: lambda tmp: tmp.write_text(self.toml, encoding="utf-8")}, option="-o")
        return target

    def write_report(self, path: PathLike) -> Path:
        """Writes the fit's plot (PNG): the QQ plot of the service times (of each service's own
        time, for traces), and the arrivals per segment with the fitted rate."""
        target = Path(path)
        write_files({target: lambda tmp: _plot(self.report, tmp)}, option="--report")
        return target


def fit(
    paths: Union[PathLike, Sequence[PathLike]],
    *,
    format: str = "auto",
    log_format: Optional[str] = None,
    host: Optional[str] = None,
    window: Optional[str] = None,
    classes: int = 1,
    correct_queueing: bool = False,
    name: Optional[str] = None,
) -> Fit:
    """Fits a scenario to router logs (plain, gzip, or ``"-"`` for standard input), or to
    traces: spans as JSON lines (``format="spans"``, or found so in the first file by
    ``"auto"``), into the services they cross and their calls (:func:`fit_spans`).

    ``window`` (``"10min..2h"``, ``"2014-01-09T06:00..2014-01-09T07:00"``) keeps the requests
    arriving in it; ``classes`` > 1 fits the busiest ``classes − 1`` routes and the rest as
    request classes, each with its own quantile table; ``correct_queueing`` takes each
    request's overlap with the one before it on its dyno off its service time (assuming one
    request at a time per dyno, first come first served). The scenario is validated by the
    engine before it is returned. Raises :class:`~dynosim.errors.LogError` for logs that
    cannot be read or hold too little to fit."""
    if format == SPANS or (format == "auto" and spans.looks_like_spans(log_names(paths, format))):
        given = {"--log-format": log_format, "--host": host, "--window": window,
                 "--classes": classes if classes != 1 else None, "--correct-queueing": correct_queueing or None}
        for option, v in given.items():
            if v is not None:
                raise LogError(f"{option}: applies to router logs, not to spans")
        return fit_spans(paths, name=name)
    names = log_names(paths, format)
    if classes < 1:
        raise LogError(f"--classes: must be at least 1, got {classes}")
    start, end = parse_window(window)
    data: Dict[str, Any] = json.loads(call(
        _dynosim.logs_fit, names, format, log_format, host, start, end, correct_queueing,
        classes - 1 if classes > 1 else 0))
    if data["service"] is None:
        raise LogError(f"none of the {data['fitted']:,} requests fitted has a service time: nothing to fit")
    span = float(data["span_seconds"])
    if not span > 0:
        raise LogError(f"the {data['fitted']:,} requests fitted all arrived at one instant: no rate to fit")

    arrivals = _fit_arrivals(data)
    summary = data["service"]["summary"]
    hist: Histogram = [(float(v), int(c)) for v, c in data["service"]["histogram"]]
    classes_doc = _fit_classes(data) if classes > 1 else []
    dynos = max(int(data["dynos"]), 1)
    title = name or _default_name(names)
    doc: Dict[str, Any] = {
        "name": title,
        "description": f"fitted to {', '.join(_file_names(data))}: {data['fitted']:,} requests from "
                       f"{data['first'][:19]} UTC over {_words(round(span))}",
        "arrivals": arrivals["section"],
    }
    if classes_doc:
        doc["request"] = {"class": [{"name": c["name"], "weight": c["weight"],
                                     "phases": [{"io": {"distribution": "quantiles",
                                                        "percentiles": c["percentiles"]}}]}
                                    for c in classes_doc]}
    else:
        # No time beyond the longest logged: the table's lognormal tails are unbounded, and fitted
        # to few requests their slope can put the mean far off.
        doc["service"] = {"distribution": "quantiles", "percentiles": quantile_table(hist),
                          "clip": ["0s", _ms(max(float(summary["max"]), RESOLUTION / 2))]}
    doc["fleet"] = {"dynos": dynos, "slots": 1}
    doc["router"] = {"policy": "random"}
    run = _run_section(arrivals)
    if run is not None:
        doc["run"] = run
    text = _toml(doc, data, arrivals, classes_doc)
    scenario = Scenario._from_text(text, f"{title}.toml", Path("."))
    if scenario.doc != doc:  # the writer below must write what was fitted
        raise RuntimeError(f"the fitted scenario's TOML does not read back as written:\n{text}")
    scenario.validate()

    service_quantiles = lambda ps: scenario._call(_dynosim.service_quantiles, ps)  # noqa: E731
    service_cdf = lambda xs: scenario._call(_dynosim.service_cdf, xs)  # noqa: E731
    described = scenario.describe()
    report: Dict[str, Any] = {
        "files": data["files"],
        "lines": data["lines"],
        "requests": data["requests"],
        "malformed": data["malformed"],
        "malformed_lines": data["malformed_lines"],
        "duplicates": data["duplicates"],
        "other_lines": data["other_lines"],
        "other_hosts": data["other_hosts"],
        "fitted": data["fitted"],
        "outside_window": data["outside_window"],
        "without_service": data["without_service"],
        "first": data["first"],
        "last": data["last"],
        "span_seconds": span,
        "window": {"start": _iso(data["window_start"]), "end": _iso(data["window_end"])},
        "arrivals": {k: v for k, v in arrivals.items() if k != "section"},
        "service": {
            **summary,
            "percentiles": [[p, _seconds(t)] for p, t in doc.get("service", {}).get("percentiles", [])],
            "fitted_mean": described["service_mean"],
            "ks_distance": ks_distance(hist, service_cdf),
            "qq": _qq(hist, service_quantiles),
        },
        "logged_service": data["service_logged"],
        "classes": [{k: v for k, v in c.items() if k != "histogram"} for c in classes_doc],
        "dynos": dynos,
        "queueing": _queueing(data),
        "scenario": doc,
    }
    for c, row in zip(classes_doc, report["classes"]):
        one = _alone({"distribution": "quantiles", "percentiles": c["percentiles"]})
        row["ks_distance"] = ks_distance(c["histogram"], lambda xs: one._call(_dynosim.service_cdf, xs))
    return Fit(scenario=doc, toml=text, report=report)


def _alone(service: Dict[str, Any]) -> Scenario:
    """A scenario of this service time alone: the engine's CDF, quantiles and mean of it."""
    return Scenario({"arrivals": {"process": "poisson", "rate": 1}, "fleet": {"dynos": 1}, "service": service})


def _run_section(arrivals: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """``[run]`` of a fitted scenario: a schedule's length, with no warm-up; or, for arrivals
    too sparse for about MIN_EXPECTED requests in the default run, a run that holds them."""
    if arrivals["schedule"] is not None:
        return {"duration": _duration_text(arrivals["covered_seconds"]), "warmup": "0s"}
    if arrivals["rate_per_s"] * DEFAULT_DURATION < MIN_EXPECTED:
        return {"duration": _duration_text(math.ceil(MIN_EXPECTED / arrivals["rate_per_s"]))}
    return None


def _seconds(text: str) -> float:
    value = _dynosim.parse_duration(text)
    assert value is not None
    return float(value)


def _iso(epoch: Optional[float]) -> Optional[str]:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat()


def _file_names(data: Dict[str, Any]) -> List[str]:
    return [f["name"] for f in data["files"]]


def _default_name(names: Sequence[str]) -> str:
    stem = Path(names[0]).name if names[0] != "-" else "stdin"
    for suffix in (".gz", ".log", ".txt", ".jsonl", ".ndjson", ".json"):
        stem = stem[: -len(suffix)] if stem.endswith(suffix) else stem
    return f"{stem or 'log'}-fitted"


def _fit_arrivals(data: Dict[str, Any]) -> Dict[str, Any]:
    """The mean rate over the intervals the log covers whole, or a schedule when the rate
    varies over the log: when the arrivals per segment (at most MAX_SEGMENTS of them, at least
    MIN_SEGMENTS whole ones) are over-dispersed at the SIGNIFICANCE level, more than Poisson
    arrivals at one rate would be. Time 0 of a schedule is the first whole interval's start."""
    counts: List[int] = data["counts"]
    width = float(data["interval_seconds"])
    covered = len(counts) * width
    # Over the whole intervals; unless they hold less than half the requests (a log too short
    # for one, or of far-apart pieces): then its requests over its span.
    whole_rate = sum(counts) >= data["fitted"] / 2
    rate = sum(counts) / covered if whole_rate else data["fitted"] / float(data["span_seconds"])
    rows = dispersion(counts, width)
    length, segments = _segments(data)
    whole = [count for a, b, count in segments if abs(b - a - length) < 1e-9 * length]
    test = _dispersion_row(whole, length) if len(whole) >= MIN_SEGMENTS else None
    varies = test is not None and test["verdict"] == "burstier than Poisson"
    schedule = None
    section: Dict[str, Any] = {"process": "poisson", "rate": _rate_text(rate)}
    if varies:
        rates = [(a, b, c / (b - a)) for a, b, c in segments]
        # Constant after the last point at the last segment's rate, or at the mean rate when that
        # is 0: the engine needs a positive long-run rate.
        last = rates[-1][2] if rates[-1][2] > 0 else rate
        points = [(0.0, rates[0][2])] + [((a + b) / 2, r) for a, b, r in rates] + [(covered, last)]
        schedule = [[_duration_text(round(t, 3)), _rate_text(r)] for t, r in points]
        section = {"process": "poisson", "rate": schedule}
    return {
        "rate_per_s": rate,
        "start": _iso(data["counts_start"]) if counts else None,
        "covered_seconds": covered,
        "varies": varies,
        "segment_seconds": length,
        "segments": [{"start": a, "end": b, "requests": c, "rate_per_s": c / (b - a)} for a, b, c in segments],
        "variation_test": test,
        "schedule": schedule,
        "dispersion": rows,
        "verdict": _arrival_verdict(rows, varies, test),
        "section": section,
    }


def _arrival_verdict(rows: List[Dict[str, Any]], varies: bool, test: Optional[Dict[str, Any]]) -> str:
    def scales(verdict: str) -> str:
        return ", ".join(_words(r["interval_seconds"]) for r in rows if r["verdict"] == verdict)

    parts = []
    for verdict in ("consistent with Poisson", "burstier than Poisson", "more regular than Poisson"):
        at = scales(verdict)
        if at:
            parts.append(f"{verdict} in {at} intervals")
    said = "; ".join(parts) if parts else "too short to test against Poisson"
    if varies:
        assert test is not None
        return (f"arrivals {said}. The rate varies over the log (arrivals per "
                f"{_words(test['interval_seconds'])} have {test['index']:.3g} times Poisson's "
                f"variance): fitted as a schedule")
    return f"arrivals {said}. The rate looks steady over the log: fitted as one rate"


def _fit_classes(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One class per route reported (the busiest first, then `(other)`); a route with too few
    service times for a table joins `(other)`."""
    routes = data["routes"]
    kept, pooled = [], []
    for r in routes:
        hist = [(float(v), int(c)) for v, c in r["service"]["histogram"]]
        if r["route"] != "(other)" and len(_supported(r["count"], PERCENTILES)) >= 2:
            kept.append((r["route"], r["count"], hist))
        else:
            pooled.append((r["count"], hist))
    if pooled:
        kept.append(("(other)", sum(n for n, _ in pooled), _merge([h for _, h in pooled])))
    total = sum(n for _, n, _ in kept)
    return [{"name": name, "weight": round(n / total, 6), "count": n, "percentiles": quantile_table(hist),
             "histogram": hist} for name, n, hist in kept]


def _queueing(data: Dict[str, Any]) -> Dict[str, Any]:
    q = dict(data["queueing"])
    share = q["overlap_seconds"] / q["service_seconds"] if q["service_seconds"] > 0 else 0.0
    q["overlapping_fraction"] = q["overlapping"] / q["requests"] if q["requests"] else 0.0
    q["share_of_service"] = share
    q["corrected"] = data["corrected"]
    if q["requests"] == 0:
        q["verdict"] = "no request names its dyno: queueing on the dynos cannot be checked"
    elif q["overlapping"] == 0:
        q["verdict"] = "no request started before the one before it on its dyno ended: no queueing in service="
    else:
        done = ("--correct-queueing took it off the fitted times" if data["corrected"]
                else "--correct-queueing takes it off")
        q["verdict"] = (f"{q['overlapping_fraction']:.1%} of the requests started before the one before them on "
                        f"their dyno ended: if each dyno serves one request at a time, {share:.1%} of the logged "
                        f"service time is queueing on the dyno ({done})")
    return q


# --- the scenario file -----------------------------------------------------------------------


def _toml(doc: Dict[str, Any], data: Dict[str, Any], arrivals: Dict[str, Any],
          classes: List[Dict[str, Any]]) -> str:
    n = data["service"]["summary"]["count"]
    q = data["queueing"]
    lines = [
        f"# Fitted by dynosim logs fit from {', '.join(_file_names(data))}: {data['fitted']:,} requests",
        f"# arriving from {data['first']} to {data['last']}.",
        "# What is assumed: docs/logs.md.",
        f"name = {_toml_value(doc['name'])}",
        f"description = {_toml_value(doc['description'])}",
        "",
        "[arrivals]",
    ]
    if arrivals["schedule"] is not None:
        lines += [f"# The rate varies over the log: the arrivals per {_duration_text(arrivals['segment_seconds'])} "
                  "segment, piecewise-linear between",
                  f"# the segments' midpoints; time 0 is {arrivals['start']} (constant after the last point)."]
    else:
        lines += ["# The mean rate over the log: the arrivals per segment do not vary more than Poisson's would."]
    lines += [f"process = {_toml_value(doc['arrivals']['process'])}"]
    if arrivals["schedule"] is not None:
        lines.append("rate = [")
        lines += [f"  {_toml_value(p)}," for p in doc["arrivals"]["rate"]]
        lines.append("]")
    else:
        lines.append(f"rate = {_toml_value(doc['arrivals']['rate'])}")
    lines.append("")
    correction = (", less the time queued on the dyno\n# (--correct-queueing: one request at a time per dyno, first "
                  "come first served)" if data["corrected"] else "")
    if classes:
        lines += [f"# One class per route (the busiest {len(classes) - 1} and the rest), weighted by their requests. Each "
                  "holds its",
                  f"# thread for its logged service time{correction}:",
                  "# an io phase (the same as [service]'s hold), quantiles of that route's requests."]
        for c, spec in zip(classes, doc["request"]["class"]):
            lines += ["[[request.class]]", f"name = {_toml_value(spec['name'])}",
                      f"weight = {_toml_value(spec['weight'])}   # {c['count']:,} requests",
                      "phases = [{ io = { distribution = \"quantiles\", percentiles = [",
                      *[f"  {_toml_value(row)}," for row in spec["phases"][0]["io"]["percentiles"]],
                      "] } }]", ""]
    else:
        lines += ["[service]", f"# The logged service times of {n:,} requests{correction}, as percentiles.",
                  f"distribution = {_toml_value(doc['service']['distribution'])}",
                  "percentiles = ["]
        lines += [f"  {_toml_value(row)}," for row in doc["service"]["percentiles"]]
        lines += ["]", f"clip = {_toml_value(doc['service']['clip'])}   # nothing longer than the longest logged", ""]
    lines += ["[fleet]",
              f"dynos = {doc['fleet']['dynos']}   # the dynos named in the log",
              "# The log does not say how many requests a dyno serves at once: set your app's."
              + (f" {plural(q['overlapping'], 'request')}\n# started before the one before them on their "
                 "dyno had ended." if q["overlapping"] else ""),
              "slots = 1",
              "",
              "[router]",
              "policy = \"random\"   # Heroku's router: each request to a dyno drawn at random", ""]
    if "run" in doc and "warmup" in doc["run"]:
        lines += ["[run]   # the schedule once through, from the first whole interval",
                  f"duration = {_toml_value(doc['run']['duration'])}",
                  f"warmup = {_toml_value(doc['run']['warmup'])}", ""]
    elif "run" in doc:
        lines += [f"[run]   # long enough for about {MIN_EXPECTED:.0f} requests at the log's rate",
                  f"duration = {_toml_value(doc['run']['duration'])}", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# --- traces: services and their calls ----------------------------------------------------------


def fit_spans(paths: Union[PathLike, Sequence[PathLike]], *, name: Optional[str] = None) -> Fit:
    """Fits a scenario to traces: spans as JSON lines (plain, gzip, or ``"-"``). The root
    spans' service is the entry (the top-level fleet), at the rate of the root spans' starts
    (or a schedule, as for a log); every other service a ``[services.NAME]``; each caller's
    calls to a callee a ``call`` or ``fanout`` phase, in the order they go out, beside one
    ``io`` phase of the caller's own time (its spans' durations less their calls' union),
    fitted as a quantile table as a log's service times are. docs/logs.md says what is
    assumed. The scenario is validated and described by the engine before it is returned."""
    names = log_names(paths, "auto")
    read = spans.read(names)
    g = spans.graph(read.spans)
    loop = spans.cycle(list(g.edges))
    if loop:
        raise LogError(f"the calls go round in a cycle: {' → '.join(loop)}; a scenario's calls may not "
                       "(docs/services.md)")
    first, last = g.roots[0], g.roots[-1]
    span = last - first
    if not span > 0:
        raise LogError(f"the {plural(len(g.roots), 'trace')} fitted all began at one instant: no rate to fit")
    arrivals = _fit_arrivals(_root_counts(g.roots))
    files = [f.name for f in read.files]
    title = name or _default_name(names)
    calling = {caller for caller, _ in g.edges}
    fitted = {s: _own_time(svc, clip=s not in calling) for s, svc in g.services.items()}
    shapes = {key: _shape(edge, g.services[edge.caller].spans) for key, edge in g.edges.items()}
    tiers = {s: _tier(svc, fitted[s], [(e, shapes[k]) for k, e in g.edges.items() if k[0] == s])
             for s, svc in g.services.items()}
    entry = tiers[g.entry]
    doc: Dict[str, Any] = {
        "name": title,
        "description": f"fitted to {', '.join(files)}: {len(g.roots):,} traces from {str(_iso(first))[:19]} UTC "
                       f"over {_words(round(span))}",
        "arrivals": arrivals["section"],
        **entry,
        "services": {s: tiers[s] for s in g.services if s != g.entry},
    }
    if not doc["services"]:
        del doc["services"]
    run = _run_section(arrivals)
    if run is not None:
        doc["run"] = run
    text = _spans_toml(doc, g, files, arrivals, fitted, shapes)
    scenario = Scenario._from_text(text, f"{title}.toml", Path("."))
    if scenario.doc != doc:  # the writer below must write what was fitted
        raise RuntimeError(f"the fitted scenario's TOML does not read back as written:\n{text}")
    described = scenario.describe()
    rates = {s["name"]: s["rate"] for s in described.get("services", [])}
    rates[g.entry] = described["arrival_rate"]
    report: Dict[str, Any] = {
        "source": SPANS,
        "files": [{"name": f.name, "lines": f.lines, "spans": f.spans, "malformed": f.malformed} for f in read.files],
        "lines": read.lines,
        "spans": len(read.spans),
        "malformed": read.malformed,
        "malformed_lines": read.malformed_lines,
        "duplicates": read.duplicates,
        "traces": g.traces,
        "fitted": len(g.roots),
        "incomplete": g.incomplete,
        "other_entries": g.other_entries,
        "first": _iso(first),
        "last": _iso(last),
        "span_seconds": span,
        "entry": g.entry,
        "arrivals": {k: v for k, v in arrivals.items() if k != "section"},
        "services": [{
            "name": s,
            "entry": s == g.entry,
            "spans": svc.spans,
            "rate_per_s": svc.spans / span,
            "fitted_rate_per_s": rates[s],
            "dynos": tiers[s]["fleet"]["dynos"],
            "slots": tiers[s]["fleet"]["slots"],
            "instances_named": any(i is not None for i in svc.instances),
            "service": {k: v for k, v in fitted[s].items() if k not in ("histogram", "table")},
            "own_time": _placement(svc),
        } for s, svc in g.services.items()],
        "calls": [{"caller": e.caller, "callee": e.callee, **{k: v for k, v in shapes[key].items() if k != "phases"}}
                  for key, e in g.edges.items()],
        "scenario": doc,
    }
    return Fit(scenario=doc, toml=text, report=report)


def _root_counts(roots: Sequence[float]) -> Dict[str, Any]:
    """The traces' starts as a log's arrivals are counted: per interval that the traces cover
    whole, of 1 s, or longer for a span of more than MAX_INTERVALS seconds."""
    first, last = roots[0], roots[-1]
    width = next((w for w in _WIDTHS if (last - first) / w <= MAX_INTERVALS), _WIDTHS[-1])
    lo, hi = math.ceil(first / width), math.floor(last / width)
    counts = [0] * max(0, hi - lo)
    for t in roots:
        i = math.floor(t / width) - lo
        if 0 <= i < len(counts):
            counts[i] += 1
    return {"counts": counts, "interval_seconds": float(width), "fitted": len(roots), "span_seconds": last - first,
            "counts_start": lo * width if counts else None}


#: The interval lengths traces' starts are counted in, s, and the most intervals kept.
_WIDTHS = (1, 5, 10, 30, 60, 300, 600, 1800, 3600, 21600, 86400)
MAX_INTERVALS = 20000


def _own_time(svc: "spans.Service", clip: bool) -> Dict[str, Any]:
    """A service's own times, in whole microseconds, fitted as a log's service times are:
    the quantile table (clipped at the longest when it is a ``[service]``: an ``io`` phase's
    table takes no clip), its mean and KS distance."""
    hist = sorted(Counter(round(t / SPAN_RESOLUTION) * SPAN_RESOLUTION for t in svc.own).items())
    try:
        table = quantile_table(hist, SPAN_RESOLUTION)
    except LogError as e:
        raise LogError(f"service {svc.name}: {e.message}") from None
    longest = hist[-1][0]
    dist: Dict[str, Any] = {"distribution": "quantiles", "percentiles": table}
    if clip:
        dist["clip"] = ["0s", _ms(max(longest, SPAN_RESOLUTION / 2))]
    one = _alone(dist)
    n = _count(hist)
    return {
        "count": n,
        "mean": statistics.fmean(svc.own),
        **{f"p{p}": _quantile(hist, n, p) for p in (50, 90, 95, 99)},
        "max": longest,
        "percentiles": [[p, _seconds(t)] for p, t in table],
        "fitted_mean": one.describe()["service_mean"],
        "ks_distance": ks_distance(hist, lambda xs: one._call(_dynosim.service_cdf, xs), SPAN_RESOLUTION),
        "qq": _qq(hist, lambda ps: one._call(_dynosim.service_quantiles, ps)),
        "table": dist,
    }


def _shape(edge: "spans.Edge", callers: int) -> Dict[str, Any]:
    """How a caller calls a callee, from the calls of each of its spans: ``call`` when every
    span calls once; several ``call`` phases when every span calls N times one after the
    other; otherwise a ``fanout`` of N, or of a geometric count of the mean calls a span sends
    (at least 1) when the number varies, waiting for all the calls when every span did, else
    for the fewest any span waited for ("first" for 1). ``phases`` are the phases, each with
    the median offset of its call from the caller's start (its order)."""
    counts = [len(c) for c in edge.calls] + [0] * (callers - len(edge.calls))
    constant = len(set(counts)) == 1
    side_by_side = edge.overlapping()
    mean = statistics.fmean(counts)
    out: Dict[str, Any] = {
        "calls_per_request": {"mean": mean, "min": min(counts), "max": max(counts),
                              "none": counts.count(0) / len(counts)},
        "side_by_side": side_by_side,
    }
    if constant and (counts[0] == 1 or not side_by_side):
        out.update(kind="call", count=counts[0], wait=None,
                   phases=[(edge.position(i), {"call": edge.callee}) for i in range(counts[0])])
        return out
    count: Any = counts[0] if constant else {"distribution": "geometric", "mean": round(max(mean, 1.0), 6)}
    waited = all(a >= len(c) for a, c in zip(edge.answered, edge.calls))
    fewest = min(edge.answered)
    wait: Any = "all" if waited else "first" if fewest <= 1 else fewest
    out.update(kind="fanout", count=count, wait=wait,
               phases=[(edge.position(0), {"fanout": edge.callee, "count": count, "wait": wait})])
    return out


def _placement(svc: "spans.Service") -> Dict[str, Any]:
    """Where a service's own time falls: its shares before its first call, between its calls
    and after its last, and where its one ``io`` phase goes (first unless more of it came
    after the calls than before)."""
    total = sum(svc.own)
    if total <= 0:
        return {"before": 0.0, "between": 0.0, "after": 0.0, "phase": "first"}
    before, after = svc.before / total, svc.after / total
    return {"before": before, "between": max(0.0, 1 - before - after), "after": after,
            "phase": "first" if svc.before >= svc.after else "last"}


def _tier(svc: "spans.Service", own: Dict[str, Any], edges: Sequence[Tuple["spans.Edge", Dict[str, Any]]]
          ) -> Dict[str, Any]:
    """A service's tables: ``[service]`` for one that calls nobody, else ``[request]`` phases;
    ``[fleet]`` its instances, each with as many slots as it had spans in progress at once;
    ``[router]`` random."""
    dynos = len(svc.instances)
    slots = max(spans.most_at_once(v) for v in svc.instances.values())
    tables: Dict[str, Any] = {}
    if edges:
        calls = sorted((p for _, shape in edges for p in shape["phases"]), key=lambda p: p[0])
        io = {"io": own["table"]}
        phases = [p for _, p in calls]
        phases = [io] + phases if _placement(svc)["phase"] == "first" else phases + [io]
        tables["request"] = {"phases": phases}
    else:
        tables["service"] = own["table"]
    tables["fleet"] = {"dynos": dynos, "slots": slots}
    tables["router"] = {"policy": "random"}
    return tables


def _spans_toml(doc: Dict[str, Any], g: "spans.Graph", files: Sequence[str], arrivals: Dict[str, Any],
                fitted: Dict[str, Dict[str, Any]], shapes: Dict[Tuple[str, str], Dict[str, Any]]) -> str:
    lines = [
        f"# Fitted by dynosim logs fit from {', '.join(files)}: {len(g.roots):,} traces",
        f"# starting from {_iso(g.roots[0])} to {_iso(g.roots[-1])}.",
        "# What is assumed: docs/logs.md (Traces).",
        f"name = {_toml_value(doc['name'])}",
        f"description = {_toml_value(doc['description'])}",
        "",
        "[arrivals]",
        f"# The rate of the traces' root spans, at the entry service {g.entry}."
        + (" It varies over the traces: a schedule." if arrivals["schedule"] is not None else ""),
        f"process = {_toml_value(doc['arrivals']['process'])}",
    ]
    if arrivals["schedule"] is not None:
        lines += ["rate = [", *[f"  {_toml_value(p)}," for p in doc["arrivals"]["rate"]], "]"]
    else:
        lines.append(f"rate = {_toml_value(doc['arrivals']['rate'])}")
    lines.append("")
    for s, svc in g.services.items():
        prefix = "" if s == g.entry else f"services.{s}."
        tables = doc if s == g.entry else doc["services"][s]
        own = fitted[s]
        lines.append(f"# {'The entry service, ' if s == g.entry else 'Service '}{s}: {plural(svc.spans, 'span')}; "
                     f"its own time (a span's duration less its calls') as percentiles.")
        if "service" in tables:
            dist = tables["service"]
            lines += [f"[{prefix}service]", f"distribution = {_toml_value(dist['distribution'])}", "percentiles = [",
                      *[f"  {_toml_value(row)}," for row in dist["percentiles"]], "]",
                      f"clip = {_toml_value(dist['clip'])}   # nothing longer than the longest"]
        else:
            calls = [shapes[k] for k in g.edges if k[0] == s]
            lines += [f"# Its calls, in the order they go out: "
                      + "; ".join(_shape_words(c) for c in calls) + ".",
                      f"[{prefix}request]", "phases = ["]
            for phase in tables["request"]["phases"]:
                if "io" in phase:
                    dist = phase["io"]
                    lines += [f"  {{ io = {{ distribution = {_toml_value(dist['distribution'])}, percentiles = [",
                              *[f"    {_toml_value(row)}," for row in dist["percentiles"]], "  ] } },"]
                else:
                    lines.append(f"  {_toml_value(phase)},")
            lines.append("]")
        fleet = tables["fleet"]
        named = any(i is not None for i in svc.instances)
        lines += ["", f"[{prefix}fleet]",
                  f"dynos = {fleet['dynos']}   # " + ("the instances named in its spans" if named
                                                      else "its spans name no instance"),
                  f"slots = {fleet['slots']}   # the most of its spans in progress at once on one",
                  "", f"[{prefix}router]", "policy = \"random\"", ""]
    if "run" in doc:
        lines += [f"[run]   # {'the schedule once through' if 'warmup' in doc['run'] else 'long enough for about 100 traces'}",
                  *[f"{k} = {_toml_value(v)}" for k, v in doc["run"].items()], ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _shape_words(shape: Dict[str, Any]) -> str:
    """``auth once``, ``search 4 at once, waiting for all``: a call's shape in words."""
    callee = shape["phases"][0][1].get("call") or shape["phases"][0][1].get("fanout")
    if shape["kind"] == "call":
        return f"{callee} " + ("once" if shape["count"] == 1 else f"{shape['count']} times, one after the other")
    count = shape["count"]
    n = f"{count}" if isinstance(count, int) else f"a geometric number (mean {count['mean']:g})"
    wait = {"all": "all", "first": "the first"}.get(shape["wait"], shape["wait"])
    how = "at once" if shape["side_by_side"] else "(one after the other in the trace)"
    return f"{callee} {n} {how}, waiting for {wait}"


# --- the report's plot -----------------------------------------------------------------------


def _plot(report: Dict[str, Any], path: Path) -> None:
    fig = _figure(report)  # first: it chooses matplotlib's backend
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def _figure(report: Dict[str, Any]) -> Any:
    """The fit's panels: for a log, the service times' Q-Q plot and the arrivals' rate over the
    log (minutes from the first whole interval; hours and minutes past two hours, as every
    elapsed-time axis: :mod:`dynosim.time_axis`); for traces, each service's own time's Q-Q
    plot, then the arrivals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if report.get("source") == SPANS:
        services = report["services"]
        columns = min(3, len(services) + 1)
        rows = math.ceil((len(services) + 1) / columns)
        fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 4.2 * rows), squeeze=False)
        panels = [ax for row in axes for ax in row]
        for ax, svc in zip(panels, services):
            _qq_panel(ax, svc["service"]["qq"], f"{svc['name']}: own time, KS {svc['service']['ks_distance']:.3f}",
                      "own time", SPAN_RESOLUTION)
        _rate_panel(panels[len(services)], report["arrivals"], "traces")
        for ax in panels[len(services) + 1:]:
            ax.set_visible(False)
    else:
        fig, (qq, rate) = plt.subplots(1, 2, figsize=(11, 4.8))
        _qq_panel(qq, report["service"]["qq"], f"service times: KS distance {report['service']['ks_distance']:.3f}",
                  "service time")
        _rate_panel(rate, report["arrivals"], "requests")
    fig.tight_layout()
    return fig


def _qq_panel(qq: Any, points: List[List[float]], title: str, what: str, resolution: float = RESOLUTION) -> None:
    logged = [max(p[1], resolution / 2) for p in points]
    fitted = [p[2] for p in points]
    qq.loglog(fitted, logged, "o", markersize=3, label="percentiles 1 to 99.99")
    lo, hi = min(logged + fitted), max(logged + fitted)
    qq.loglog([lo, hi], [lo, hi], color="grey", linewidth=1, label="y = x")
    qq.set_xlabel(f"fitted {what} (s)")
    qq.set_ylabel(f"logged {what} (s)")
    qq.set_title(title)
    qq.legend()


def _rate_panel(rate: Any, a: Dict[str, Any], what: str) -> None:
    segments = a["segments"]
    span = float(segments[-1]["end"]) if segments else 0.0
    clock = time_axis.is_clock(span)
    unit = 1.0 if clock else 60.0  # seconds under a clock's ticks, else minutes
    xs = [s["start"] / unit for s in segments] + [segments[-1]["end"] / unit] if segments else []
    ys = [s["rate_per_s"] for s in segments]
    if not segments:
        rate.text(0.5, 0.5, "the log covers no whole interval", ha="center", transform=rate.transAxes)
    else:
        rate.step(xs, ys + ys[-1:], where="post", label="logged, per segment")
    if a["schedule"] is not None:
        sched = [(_seconds(t) / unit, float(r.split("/")[0])) for t, r in a["schedule"]]
        rate.plot([t for t, _ in sched], [r for _, r in sched], color="tab:orange", label="fitted schedule")
    else:
        rate.axhline(a["rate_per_s"], color="tab:orange", label="fitted rate")
    rate.set_ylim(bottom=0)
    if clock:
        time_axis.apply_to_matplotlib(rate, 0.0, span)
        rate.set_xlabel(time_axis.axis_label("time from the first whole interval", span))
    else:
        rate.set_xlabel("minutes from the first whole interval")
    rate.set_ylabel(f"{what} per second")
    rate.set_title("arrivals")
    rate.legend()
