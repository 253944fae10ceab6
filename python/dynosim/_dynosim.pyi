"""The compiled engine (private). Scenarios cross as JSON text; use the package's API."""

from typing import Any, Dict, List, Optional, Tuple, final

__all__ = [
    "EngineError", "__version__", "build", "describe", "service_quantiles", "run", "run_block", "assemble",
    "registry", "trace",
    "interrupt", "set_cancel_token", "cancel", "forget_token", "keys", "parse_duration", "parse_rate", "parse_bytes", "erlang_c", "mmc_mean_wait", "mg1_mean_wait",
    "power_of_d_mean_time", "ps_mean_response", "pool_mean_wait", "mm1_late_fraction", "erlang_a",
    "mmck_blocking", "cpu_bound_throughput",
    "littles_law_gap", "mva_closed", "send_load", "draw_requests", "judge_stability", "logs_summary", "logs_trace",
    "logs_fit", "service_cdf", "Autoscaler",
]

__version__: str
# How the engine was compiled: "release", or "pgo" (tools/build-pgo.sh).
build: str

class EngineError(Exception):
    """args = (kind, path, message); kind is "config", "unstable", "overloaded", "log" or "interrupted"."""

def describe(scenario_json: str, base_dir: str) -> str: ...
def service_quantiles(scenario_json: str, base_dir: str, ps: List[float], service: Optional[str] = None) -> List[float]: ...
def service_cdf(scenario_json: str, base_dir: str, xs: List[float]) -> List[float]: ...
def run(scenario_json: str, base_dir: str, stop_at_verdict: bool = False) -> str: ...
def run_block(scenario_json: str, base_dir: str, first: int, count: int, stop_at_verdict: bool = False) -> str: ...
def assemble(scenario_json: str, base_dir: str, results: List[Any], per_dyno: List[List[float]],
             engines: List[str]) -> str: ...
def draw_requests(scenario_json: str, base_dir: str, replication: int, until: float, limit: int) -> str: ...
def judge_stability(scenario_json: str, base_dir: str, answers: List[float], end: float) -> str: ...
def trace(scenario_json: str, base_dir: str, interval: float, until: float, per_dyno: bool = True) -> str: ...
def interrupt() -> None: ...
def set_cancel_token(token: int) -> None: ...
def cancel(token: int) -> None: ...
def forget_token(token: int) -> None: ...
def registry() -> Dict[str, List[str]]: ...
def keys() -> str: ...
def parse_duration(text: str) -> Optional[float]: ...
def parse_rate(text: str) -> Optional[float]: ...
def parse_bytes(text: str) -> Optional[float]: ...
def erlang_c(c: int, a: float) -> float: ...
def mmc_mean_wait(c: int, a: float, mean_service: float) -> float: ...
def mg1_mean_wait(arrival_rate: float, mean_service: float, second_moment: float) -> float: ...
def power_of_d_mean_time(load: float, d: int) -> float: ...
def ps_mean_response(arrival_rate: float, mean_service: float, cores: int) -> float: ...
def pool_mean_wait(arrival_rate: float, mean_hold: float, connections: int) -> float: ...
def mm1_late_fraction(arrival_rate: float, service_rate: float, deadline: float) -> float: ...
def erlang_a(
    servers: int, arrival_rate: float, mean_service: float, mean_patience: float
) -> Tuple[float, float, float, float]: ...
def mmck_blocking(servers: int, capacity: int, arrival_rate: float, mean_service: float) -> float: ...
def cpu_bound_throughput(
    cpu_per_request: float, processes: int, threads_per_process: int, cores: int, lock: bool
) -> float: ...
def littles_law_gap(mean_in_system: float, throughput: float, mean_response: float) -> float: ...
def mva_closed(
    customers: int, think_time: float, stations: List[Tuple[float, int, str]]
) -> Dict[str, Any]: ...
def send_load(
    target: str,
    requests: List[Tuple[float, str, Dict[str, str]]],
    mode: str = "open",
    clients: int = 1,
    think: List[float] = ...,
    timeout: float = 30.0,
    deadline: float = 60.0,
    capture: List[str] = ...,
    retry: Optional[Tuple[str, str, int]] = None,
    id_header: Optional[str] = None,
    breaker: Optional[Tuple[str, str]] = None,
) -> Dict[str, Any]:
    """HTTP/1.1 load to a loopback ``target`` ("127.0.0.1:8080"), one connection per request.

    ``requests``: ``(at, path, headers)``; ``at`` is seconds after the start (open loop only).
    ``mode``: "open" sends each request at its time whatever the others do; "closed" runs
    ``clients`` clients that send the next request after their response and ``think[k]``
    seconds after the k-th response (``think`` empty, or one per request). ``timeout`` bounds
    each request, ``deadline`` the whole run; Ctrl-C stops it. Raises EngineError("config")
    for a target that is not loopback or bad arguments.

    Returns ``start`` (Unix epoch s), ``lateness`` (``{"count", "p50", "p99", "max"}`` of sent
    minus scheduled, s; None if nothing was sent), ``stopped`` (None, "deadline" or
    "interrupted"), ``unsent`` (requests never sent), and columns with one entry per request
    sent, in request order: ``index``, ``client``, ``scheduled``, ``sent``, ``connected``,
    ``first_byte``, ``done`` (Unix epoch s, NaN when not reached), ``status`` (0 if none),
    ``error`` (None, or "connect", "refused", "timeout", "io", "bad_response", "deadline",
    "interrupted", "breaker_open"), ``bytes`` (received), and ``headers``: for each name in ``capture``, its
    column of values (None where absent).

    ``retry``: ``(scenario_json, base_dir, replication)``: the clients retry as that
    replication of the scenario's ``[arrivals.retry]`` says (its budget, its backoff drawn
    from the replication's retry-delay stream); ``id_header``: the header whose value a retry
    sends with ``.k`` appended (k its try). With retries, each try is a row (a request's tries
    in order), with ``attempt`` (1 for the first), ``origin`` (the request's first send) and
    ``kept`` (why its client kept this try's outcome: "success", "failed", "denied",
    "exhausted"; None for a try it retried); without, ``attempt`` is 1, ``origin`` is ``sent``
    and ``kept`` None.

    ``breaker``: ``(scenario_json, base_dir)``: the clients share the scenario's
    ``[arrivals.breaker]`` (the engine's own state machine): a try it refuses is not sent (its
    row's error "breaker_open", ``sent`` its time, ``done`` NaN; retried as a refusal), and
    each try sent tells it its outcome. Returns also ``breaker``: when it opened and until
    when, ``[(from, until)]`` in Unix epoch s, in order (None without a breaker).
    """
def logs_summary(
    paths: List[str],
    format: str = "auto",
    log_format: Optional[str] = None,
    host: Optional[str] = None,
    interval: Optional[float] = None,
    top_routes: int = 20,
) -> str:
    """The summary of router logs (``"-"`` is standard input), as JSON text.

    ``format``: "auto", "heroku", "haproxy" or "nginx"; ``log_format``: nginx's layout;
    ``host``: only requests to that host; ``interval``: the series' interval in seconds
    (default: chosen from the span); ``top_routes``: routes reported one by one. Raises
    EngineError("log", "", message) for a log that cannot be read or holds no request, a bad
    format or interval; EngineError("interrupted", ...) on Ctrl-C.
    """
def logs_trace(
    paths: List[str],
    out: str,
    format: str = "auto",
    log_format: Optional[str] = None,
    host: Optional[str] = None,
    window_start: Optional[Tuple[bool, float]] = None,
    window_end: Optional[Tuple[bool, float]] = None,
    speed: float = 1.0,
    correct_queueing: bool = False,
) -> str:
    """Reads router logs into a trace written to ``out`` (``arrival,service`` lines, for
    ``arrivals.process = "replay"``); what was read and recorded, as JSON text. A window end is
    ``(relative, seconds)``: an offset from the first arrival, or seconds since the epoch."""
    ...
def logs_fit(
    paths: List[str],
    format: str = "auto",
    log_format: Optional[str] = None,
    host: Optional[str] = None,
    window_start: Optional[Tuple[bool, float]] = None,
    window_end: Optional[Tuple[bool, float]] = None,
    correct_queueing: bool = False,
    routes: int = 0,
) -> str:
    """What fitting a scenario to router logs needs (arrival counts per interval, service-time
    histograms overall and per route, overlaps per dyno), as JSON text."""
    ...


@final
class Autoscaler:
    """An autoscale rule of the engine's registry (docs/autoscaling.md), built from its table;
    a bad table raises EngineError("config", "SECTION.KEY", message). Times are seconds since
    the run's start."""

    def __new__(cls, table: Dict[str, Any], section: str = "autoscale") -> "Autoscaler": ...
    @property
    def interval(self) -> float: ...
    @property
    def rule(self) -> str: ...
    @property
    def bounds(self) -> Tuple[int, int]: ...
    @property
    def metric(self) -> Optional[str]:
        """"response_time", "queue_time", "cpu", "utilisation", or None (the rule reads none)."""
    def record(self, t: float, value: float) -> None: ...
    def record_total(self, t: float, total: float, count: int) -> None: ...
    def evaluate(self, now: float, size: int, up: int) -> Tuple[int, str, Optional[float], int]:
        """(desired size, why, the metric as the rule saw it or None, its samples)."""
