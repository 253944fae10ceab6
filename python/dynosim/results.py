"""Results as plain Python objects, and as pandas DataFrames when pandas is installed.

Metric names are dotted paths into a replication's figures (documented in docs/output.md):
``queued_fraction``, ``queue.mean``, ``queue.p99``, ``queue_of_queued.mean``,
``response.p999``, ``response_ok.p99``, ``errors.h12``, ``goodput``, ``utilisation.mean``,
``max_queue_depth.dyno``...
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

__all__ = ["Estimate", "PolicyResult", "Results", "METRICS", "OPTIONAL_METRICS", "ERROR_KINDS", "is_metric",
           "is_time_metric", "is_fraction_metric"]

#: The kinds of error a request may be answered with (``errors.KIND``, ``error_counts.KIND``).
ERROR_KINDS: List[str] = ["total", "h11", "h12", "h13", "client_timeout", "queue_timeout", "app_timeout", "shed", "r15",
                           "no_dyno", "shutdown"]

#: Error kinds a scenario reports only when it can have them: an outage (``[[faults]]``), a dyno lost
#: (``dynos_lost``), a request too old when a thread took it (``app.wait_timeout``), one that ran
#: too long on its thread (``app.service_timeout``), a try failed at once by the clients' circuit breaker
#: (``[arrivals.breaker]``), a query stopped by its resource's ``timeout`` on its last try, a
#: try rejected at once by a concurrency limit (``router.concurrency_limit``,
#: ``app.concurrency_limit``), a call to another service failed on its last try.
FEEDBACK_ERROR_KINDS: List[str] = ["outage", "crashed", "wait_timeout", "service_timeout", "breaker_open",
                                   "resource_timeout", "limit_rejected", "call_failed"]

#: Every scalar metric, in display order.
METRICS: List[str] = (
    ["requests", "queued_fraction"]
    + [f"{group}.{stat}" for group in ("queue", "queue_of_queued", "response", "response_ok")
       for stat in ("mean", "p50", "p90", "p95", "p99", "p999", "max")]
    + ["service_mean", "throughput", "goodput"]
    + [f"errors.{kind}" for kind in ERROR_KINDS] + [f"error_counts.{kind}" for kind in ERROR_KINDS]
    + ["wasted.thread_seconds", "wasted.cpu_seconds"]
    + ["utilisation.mean", "utilisation.min", "utilisation.max",
       "max_queue_depth.dyno", "max_queue_depth.router", "simulated_requests", "events"]
)


_STATS = ("mean", "p50", "p90", "p95", "p99", "p999", "max")

#: Metrics of the dyno model (docs/dyno.md), reported only by scenarios with `[request]`
#: phases, `[app]` memory or a closed loop; besides these, `resources.NAME.*` and
#: `classes.NAME.*` for each resource and request class.
OPTIONAL_METRICS: List[str] = (
    ["dyno.cpu_utilisation", "dyno.thread_occupancy", "dyno.process_occupancy", "dyno.accept_queue_max",
     "dyno.memory.mean", "dyno.memory.peak", "dyno.memory.over_quota", "dyno.memory.r14_seconds",
     "dyno.memory.r15_restarts", "failed.fraction", "failed.total", "failed.r15", "failed.no_dyno",
     "closed_loop.clients", "closed_loop.completed", "closed_loop.failed", "closed_loop.elapsed",
     "closed_loop.requests_per_s"]
    + [f"closed_loop.latency.{stat}" for stat in _STATS]
    # A fleet that changes size (`[autoscale]`): its size and bill, and the autoscaler's actions.
    + ["fleet.size.mean", "fleet.size.min", "fleet.size.max", "fleet.dyno_seconds", "fleet.serving_mean",
       "fleet.starts", "fleet.r10", "fleet.cycles", "fleet.deploys", "autoscale.actions", "autoscale.reversals"]
    # Join-Idle-Queue's idle lists (`router.policy = "jiq"`).
    + ["routing.idle_hits", "routing.idle_hit_count", "routing.busy_hits"]
    # The run's bill (from Python's price table, docs/output.md).
    + ["cost.dyno_hours", "cost.dollars"]
    # With services, the top's bill is the whole app's and this the entry fleet's own (docs/services.md).
    + ["cost.entry.dyno_hours", "cost.entry.dollars"]
    # Clients that retry (`[arrivals.retry]`): the tries, the amplification, what a budget denied.
    + ["retries.attempts", "retries.attempts_per_request", "retries.count", "retries.client", "retries.router",
       "retries.app", "retries.denied", "retries.exhausted"]
    # Errors of the feedback features (`[[faults]]`, `app.wait_timeout`, `app.service_timeout`): reported
    # only by scenarios that can have them.
    + [f"{table}.{kind}" for table in ("errors", "error_counts") for kind in FEEDBACK_ERROR_KINDS]
    # The clients' circuit breaker (`[arrivals.breaker]`).
    + ["breaker.open_fraction", "breaker.opened", "breaker.rejected"]
    # Concurrency limits (`router.concurrency_limit`, `app.concurrency_limit`).
    + ["limit.rejected", "limit.rejected_per_s", "limit.router_mean", "limit.app_mean"]
    # A run with faults: did goodput come back after the last one (docs/feedback.md)?
    + ["stability.recovered", "stability.recovery_time", "stability.recovered_runs", "stability.baseline_goodput",
       "stability.window", "stability.interval"]
)

_NAMED = re.compile(r"^(resources\.[^.]+\.(utilisation|uses|(pool_wait|queue)\.(" + "|".join(_STATS) + r"))"
                    r"|classes\.[^.]+\.(requests|response\.(" + "|".join(_STATS) + r")))$")


#: What the calls to a service did (``services.NAME.calls.*``, docs/services.md).
CALL_METRICS: List[str] = ["sent", "answered", "errors", "timed_out", "timed_out_fraction", "retried", "hedged",
                           "failed", "late", "cancelled"]


def _service_metric(metric: str) -> Optional[str]:
    """A service's metric (``services.NAME.X``): X, its fleet's metric or ``calls.*``; else None."""
    parts = metric.split(".", 2)
    if len(parts) == 3 and parts[0] == "services" and parts[1]:
        return parts[2]
    return None


def is_metric(metric: str) -> bool:
    """Whether a name is a metric some scenario reports (docs/output.md)."""
    own = _service_metric(metric)
    if own is not None:
        return own in (f"calls.{c}" for c in CALL_METRICS) or is_metric(own)
    return metric in METRICS or metric in OPTIONAL_METRICS or bool(_NAMED.match(metric))


def metric_names_hint() -> str:
    """The metric names, for an error message."""
    return (", ".join(METRICS) + "; with the dyno model also dyno.*, failed.*, closed_loop.*, "
            "resources.NAME.*, classes.NAME.*; with [autoscale] fleet.* and autoscale.*; with jiq routing.*; "
            "with [services] services.NAME.* (a fleet's metrics and calls.*) "
            "(docs/output.md)")


def is_time_metric(metric: str) -> bool:
    """Whether a metric is a time, in seconds (the others are counts, rates and fractions)."""
    own = _service_metric(metric)
    if own is not None:
        return is_time_metric(own)
    parts = metric.split(".")
    return (parts[0] in ("queue", "queue_of_queued", "response", "response_ok") or metric == "service_mean"
            or metric in ("closed_loop.elapsed", "dyno.memory.r14_seconds", "stability.recovery_time",
                          "stability.window", "stability.interval")
            or metric.startswith("closed_loop.latency.")
            or (parts[0] == "resources" and len(parts) == 4 and parts[2] in ("pool_wait", "queue"))
            or (parts[0] == "classes" and len(parts) == 4 and parts[2] == "response"))


def is_fraction_metric(metric: str) -> bool:
    """Whether a metric is a fraction from 0 to 1 (shown as a percentage)."""
    own = _service_metric(metric)
    if own is not None:
        return own == "calls.timed_out_fraction" or is_fraction_metric(own)
    return (metric == "queued_fraction" or metric.startswith("utilisation.") or metric.startswith("errors.")
            or metric in ("dyno.cpu_utilisation", "dyno.thread_occupancy", "dyno.process_occupancy",
                          "dyno.memory.over_quota", "failed.fraction", "routing.idle_hits", "routing.busy_hits",
                          "stability.recovered", "breaker.open_fraction")
            or (metric.startswith("resources.") and metric.endswith(".utilisation")))


def metrics_of(tree: Mapping[str, Any]) -> List[str]:
    """The metrics a report's summary (or one replication) holds: every core one, then those
    of the dyno model it has, in display order."""
    names = list(METRICS)
    for metric in OPTIONAL_METRICS:
        try:
            _lookup(tree, metric)
            names.append(metric)
        except KeyError:
            pass
    for section in ("resources", "classes"):
        for name, sub in (tree.get(section) or {}).items():
            names += [f"{section}.{name}.{leaf}" for leaf in _leaves(sub)]
    # Each service's own metrics, as a fleet's, and its calls'.
    for name, sub in (tree.get("services") or {}).items():
        names += [f"services.{name}.{metric}" for metric in metrics_of(sub)]
        names += [f"services.{name}.calls.{c}" for c in CALL_METRICS if c in (sub.get("calls") or {})]
    return names


def _leaves(node: Any, prefix: str = "") -> List[str]:
    if isinstance(node, Mapping) and not ({"mean", "ci_low"} <= set(node) and len(node) == 4):
        return [leaf for k, v in node.items() for leaf in _leaves(v, f"{prefix}{k}.")]
    return [prefix[:-1]]


@dataclass(frozen=True)
class Estimate:
    """A mean over replications and its 95% confidence interval (NaN with one replication)."""

    mean: float
    ci_low: float
    ci_high: float
    std_error: float

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    @classmethod
    def from_dict(cls, d: Optional[Dict[str, Any]]) -> "Estimate":
        """An estimate from the report's dict; a null (a figure no replication had, such as
        the recovery time of runs that never recovered) is NaN throughout."""
        if d is None:
            return cls(math.nan, math.nan, math.nan, math.nan)

        def num(x: Any) -> float:
            return math.nan if x is None else float(x)

        return cls(num(d["mean"]), num(d["ci_low"]), num(d["ci_high"]), num(d["std_error"]))


def lookup(tree: Mapping[str, Any], metric: str) -> Any:
    """The node a dotted metric name leads to in a report's summary or one replication (an
    estimate's dict, or a plain figure); KeyError naming the known metrics if there is none."""
    return _lookup(tree, metric)


def _lookup(tree: Mapping[str, Any], metric: str) -> Any:
    node: Any = tree
    for part in metric.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"metric {metric!r} is not in this report; known: {metric_names_hint()}")
        node = node[part]
    return node


class PolicyResult:
    """One policy's run of a scenario: what ran, the summary, and every replication."""

    def __init__(self, report: Dict[str, Any]) -> None:
        self.report = report

    @property
    def policy(self) -> str:
        return str(self.report["policy"])

    @property
    def summary(self) -> Dict[str, Any]:
        return self.report["summary"]

    @property
    def per_replication(self) -> List[Dict[str, Any]]:
        return self.report["per_replication"]

    def estimate(self, metric: str) -> Estimate:
        """The estimate of a metric, e.g. ``result.estimate("queue.mean")``."""
        return Estimate.from_dict(_lookup(self.summary, metric))

    def __getitem__(self, metric: str) -> float:
        """The mean over replications of a metric."""
        return self.estimate(metric).mean

    def to_dict(self) -> Dict[str, Any]:
        return self.report

    def row(self) -> Dict[str, Any]:
        """A flat record: the run's header, then each metric with its interval."""
        row: Dict[str, Any] = {k: self.report[k] for k in (
            "scenario", "policy", "dynos", "slots", "routers", "arrival_rate",
            "service_mean", "offered_load", "duration", "replications", "seed")}
        row["service_mean_analytic"] = row.pop("service_mean")
        # The heavy-traffic estimate of how long the queues take to settle, s (None at ρ >= 1).
        row["relaxation_time"] = self.report.get("relaxation_time")
        for metric in metrics_of(self.summary):
            e = self.estimate(metric)
            row[metric] = e.mean
            row[f"{metric}.ci_low"] = e.ci_low
            row[f"{metric}.ci_high"] = e.ci_high
        return row

    def __repr__(self) -> str:
        q = self.estimate("queue.mean")
        return (f"PolicyResult(policy={self.policy!r}, dynos={self.report['dynos']}, "
                f"queued_fraction={self['queued_fraction']:.4f}, queue.mean={q.mean:.4g}s)")


class Results(Sequence[PolicyResult]):
    """The results of running a scenario: one :class:`PolicyResult` per policy, in order,
    all on the same arrivals and service times. Index by position or by policy name."""

    def __init__(self, results: List[PolicyResult]) -> None:
        self._results = results

    def __len__(self) -> int:
        return len(self._results)

    def __iter__(self) -> Iterator[PolicyResult]:
        return iter(self._results)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            for r in self._results:
                if r.policy == key:
                    return r
            raise KeyError(f"no result for policy {key!r}; have {[r.policy for r in self]}")
        return self._results[key]

    def to_dict(self) -> Dict[str, Any]:
        """The JSON document that ``dynosim run --json`` prints."""
        return {"results": [r.to_dict() for r in self._results]}

    def rows(self) -> List[Dict[str, Any]]:
        return [r.row() for r in self._results]

    def to_dataframe(self) -> Any:
        """One row per policy: header columns, then each metric and its 95% interval."""
        return _pandas().DataFrame(self.rows())

    def replications_dataframe(self) -> Any:
        """One row per (policy, replication), metrics as columns."""
        rows = []
        for r in self._results:
            for i, rep in enumerate(r.per_replication):
                row: Dict[str, Any] = {"policy": r.policy, "replication": i}
                row.update({m: _lookup(rep, m) for m in metrics_of(rep)})
                rows.append(row)
        return _pandas().DataFrame(rows)

    def __repr__(self) -> str:
        return "Results([" + ", ".join(repr(r) for r in self._results) + "])"


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("DataFrames need pandas: pip install 'dynosim[dataframe]'") from None
    return pandas


