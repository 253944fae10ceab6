"""The playground (issue #27): ``dynosim serve``, a local web app over the Python API.

A page (``web/playground.html`` and ``.js``, with the report's uPlot, styles and plots) edits a
scenario, by controls for its main keys or as TOML, and shows its results as the HTML report
does, policies side by side on the same traffic; this module only answers the page's
requests, with what :func:`dynosim.run` and :mod:`dynosim.run_report` give:

- ``GET /``: the page; ``GET /static/NAME``: its scripts and styles (nothing else is served);
- ``GET /api/scenarios``: the built-in scenarios (name, description, TOML), the policies, the
  dyno types and the controls;
- ``POST /api/run``: ``{"toml": text, "set": {key: value}, "policies": [names]}`` runs it and
  answers ``{"toml": the scenario with the controls applied, "words", "html": the table,
  notes and warnings, "plots": [...], "seconds"}``; a mistake is a 400 ``{"error", "line",
  "key"}`` with the CLI's message (and the TOML line it is on, when it is on one);
- ``POST /api/report``: the same body; answers the ``--html`` report as a download.

Safety: it listens on 127.0.0.1 unless told otherwise (then the CLI warns); a scenario from
the page cannot read files (every key of the schema's ``path`` kind, and so
``arrivals.process = "replay"``, is refused unless it names a file under ``--data DIR``); a
body is at most :data:`MAX_BODY` bytes; every run is held to the scenario's work and memory
budgets, capped at :data:`MAX_REQUESTS` and :data:`MAX_MEMORY`; each client (the page's own
id) has at most one run at a time, a newer one cancelling the older (the engine's cancel
tokens); a malformed request is a 4xx with a message, never a traceback. Stopping the server
(Ctrl-C) cancels its runs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import secrets
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _dynosim, html_report
from .errors import DynosimError, ScenarioError
from .output import finite
from .run_report import run_report
from .scenario import Scenario, builtin_scenarios, parse_override
from .toml_text import toml_text

#: The largest request body accepted (a scenario's TOML and the controls).
MAX_BODY = 256 * 1024
#: A run from the page simulates at most this many requests (run.max_requests is lowered to it).
MAX_REQUESTS = 50_000_000
#: And one replication's engine state takes at most this much memory (run.max_memory), bytes.
MAX_MEMORY = 2e9
#: The page's files that are served, and their types.
STATIC = {"playground.js": "text/javascript", "playground.css": "text/css", "report.js": "text/javascript",
          "report.css": "text/css", "uPlot.iife.min.js": "text/javascript", "uPlot.min.css": "text/css"}

#: The controls the page shows: (key, label, kind, choices).
CONTROLS: List[Dict[str, Any]] = [
    {"key": "fleet.dynos", "label": "dynos", "kind": "number", "min": 1},
    {"key": "router.policy", "label": "policies", "kind": "policies"},
    {"key": "arrivals.rate", "label": "rate", "kind": "text", "hint": "e.g. 150/s or 9000/min"},
    {"key": "app.processes", "label": "processes", "kind": "number", "min": 1},
    {"key": "app.threads", "label": "threads", "kind": "number", "min": 1},
    {"key": "fleet.type", "label": "dyno type", "kind": "choice"},
    {"key": "router.timeout", "label": "router timeout", "kind": "text", "hint": "e.g. 30s, or off"},
    {"key": "autoscale.rule", "label": "autoscaler", "kind": "choice"},
    {"key": "autoscale.min", "label": "autoscale min", "kind": "number", "min": 1},
    {"key": "autoscale.max", "label": "autoscale max", "kind": "number", "min": 1},
    {"key": "run.replications", "label": "replications", "kind": "number", "min": 2},
]


class Refused(Exception):
    """A request the server answers with a 4xx: ``status``, the message, and where."""

    def __init__(self, status: int, message: str, *, line: Optional[int] = None, key: Optional[str] = None):
        super().__init__(message)
        self.status, self.line, self.key = status, line, key

    def body(self) -> Dict[str, Any]:
        return {"error": str(self), "line": self.line, "key": self.key}


# --- the scenario from the page --------------------------------------------------------------


def path_keys() -> List[str]:
    """The names of the schema's keys that name a file (kind ``path``)."""
    doc = json.loads(_dynosim.keys())
    names = set()
    for section in doc.get("sections", []):
        for key in section.get("keys", []):
            if "path" in str(key.get("kind", "")).lower() or str(key.get("type", "")).startswith("path"):
                names.add(key["name"])
    return sorted(names or {"file"})


def _files(doc: Any, names: Sequence[str], prefix: str = "") -> List[Tuple[str, Any]]:
    """Every (key path, value) of `doc` whose key is one of `names`."""
    out: List[Tuple[str, Any]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if k in names and isinstance(v, str):
                out.append((path, v))
            else:
                out += _files(v, names, path)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _files(v, names, f"{prefix}[{i}]")
    return out


def scenario_from_page(body: Any, data: Optional[Path], names: Sequence[str]) -> Tuple[Scenario, List[str]]:
    """The scenario a request asks for, its controls applied, and its policies; Refused (400)
    for anything wrong with it, with the CLI's message and the TOML line where there is one."""
    if not isinstance(body, dict):
        raise Refused(400, "expected a JSON object with \"toml\"")
    text = body.get("toml")
    if not isinstance(text, str) or not text.strip():
        raise Refused(400, "\"toml\": expected the scenario's TOML text")
    overrides = body.get("set") or {}
    if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
        raise Refused(400, "\"set\": expected an object of key paths and values")
    policies = body.get("policies") or None
    if policies is not None and (not isinstance(policies, list) or not all(isinstance(p, str) for p in policies)
                                 or len(policies) > 12):
        raise Refused(400, "\"policies\": expected a list of at most 12 policy names")
    base = data if data is not None else Path.cwd()
    try:
        scenario = Scenario._from_text(text, "scenario.toml", base)
        items = {}
        for key, value in overrides.items():
            if value is None or value == "":
                continue
            items[key] = parse_override(f"{key}={value}")[1] if isinstance(value, str) else value
        scenario = scenario.with_overrides(items)
    except DynosimError as e:
        raise Refused(400, str(e), line=_line_of(e, text), key=getattr(e, "path", None)) from None
    for path, value in _files(scenario.doc, names):
        if data is None:
            raise Refused(400, f"{path}: the playground reads no file (start it with --data DIR to allow files "
                               "under DIR)", line=_key_line(text, path.rsplit(".", 1)[-1]), key=path)
        target = (data / value).resolve()
        if not target.is_relative_to(data.resolve()):
            raise Refused(400, f"{path}: {value!r} is not under the --data folder", key=path,
                          line=_key_line(text, path.rsplit(".", 1)[-1]))
    # The page's runs are held to the server's budgets, whatever the scenario asks.
    run = scenario.doc.get("run") or {}
    budget: Dict[str, Any] = {}
    if _amount(run.get("max_requests"), float) > MAX_REQUESTS:
        budget["run.max_requests"] = MAX_REQUESTS
    if _amount(run.get("max_memory"), _dynosim.parse_bytes) > MAX_MEMORY:
        budget["run.max_memory"] = MAX_MEMORY
    threads = run.get("threads")
    if isinstance(threads, int) and not isinstance(threads, bool) and threads > (os.cpu_count() or 1):
        budget["run.threads"] = "auto"  # one per core: the machine's, not the page's choice
    if budget:
        scenario = scenario.with_overrides(budget)
    try:
        for policy in policies or scenario.policies:
            scenario.for_policy(policy).describe()
    except DynosimError as e:
        raise Refused(400, str(e), line=_line_of(e, text), key=getattr(e, "path", None)) from None
    return scenario, list(policies) if policies else []


def _amount(value: Any, parse: Any) -> float:
    """A budget's value as a number (infinite when absent: the engine's default is above the
    server's cap); a value the engine will refuse is left to it (0 here)."""
    if value is None:
        return math.inf
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        parsed = parse(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    return 0.0 if parsed is None else float(parsed)


def _line_of(error: Exception, text: str) -> Optional[int]:
    """The TOML line an error is on: the line TOML's parser names, else the line of the key
    the message names (its last part, under its table)."""
    message = str(error)
    for marker in ("line ", "at line "):
        i = message.find(marker)
        if i >= 0:
            digits = "".join(itertools.takewhile(str.isdigit, message[i + len(marker):]))
            if digits:
                return int(digits)
    path = getattr(error, "path", None)
    if not path:
        head = message.split(":", 1)[0].strip()
        path = head if "." in head and " " not in head else None
    if path:
        return _key_line(text, path)
    return None


def _key_line(text: str, path: str) -> Optional[int]:
    """The 1-based line of `path` (``fleet.dynos``) in the TOML text: its key under its table."""
    parts = path.split(".")
    table, key = parts[:-1], parts[-1]
    current: List[str] = []
    fallback = None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip().split(".")
            continue
        name = stripped.split("=", 1)[0].strip().strip('"') if "=" in stripped else None
        if name == key:
            if current == table or not table:
                return n
            fallback = fallback or n
    return fallback


# --- the runs --------------------------------------------------------------------------------


class Runs:
    """Each client's run in progress (at most one): a newer one cancels the older."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_client: Dict[str, int] = {}
        self._tokens = itertools.count(secrets.randbelow(1 << 40) + 1)

    def start(self, client: str) -> int:
        with self._lock:
            old = self._by_client.get(client)
            token = next(self._tokens)
            self._by_client[client] = token
        if old is not None:
            _dynosim.cancel(old)
        return token

    def done(self, client: str, token: int) -> None:
        with self._lock:
            if self._by_client.get(client) == token:
                del self._by_client[client]
        _dynosim.forget_token(token)

    def cancel_all(self) -> None:
        with self._lock:
            tokens = list(self._by_client.values())
        for t in tokens:
            _dynosim.cancel(t)


def run_for_page(scenario: Scenario, policies: Sequence[str], token: int) -> Dict[str, Any]:
    """Runs the scenario on this thread (cancellable with `token`), and what the page shows."""
    from .api import run as run_scenario

    _dynosim.set_cancel_token(token)
    try:
        started = time.monotonic()
        cases = scenario.cases or [("", scenario)]
        results = [(label, run_scenario(case, policies=list(policies) or None, warn=False)) for label, case in cases]
        warnings = []
        for label, case in cases:
            for policy in policies or case.policies:
                w = case.for_policy(policy).steady_state_warning()
                if w:
                    warnings.append((f"{label}: " if label else "") + f"{policy}: {w}")
        doc = run_report(scenario, results, command="dynosim serve", title=scenario.name, policies=policies or None,
                         warnings=warnings)
        seconds = time.monotonic() - started
    finally:
        _dynosim.set_cancel_token(0)
    body, plots = html_report.sections_html(doc["sections"][1:])
    values = {c["key"]: _lookup(scenario.doc, c["key"]) for c in CONTROLS}
    values["router.policy"] = ",".join(policies or scenario.policies)
    return {"toml": toml_text(scenario.doc), "words": html_report.scenario_words(scenario, policies or None), "html": body,
            "plots": plots, "seconds": seconds, "values": values, "document": doc}


def _lookup(doc: Dict[str, Any], key: str) -> Any:
    """The value at a key path, or None (a table or list is shown as nothing)."""
    node: Any = doc
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, (str, int, float, bool)) else None


# --- the app ---------------------------------------------------------------------------------


def make_app(data: Optional[Path] = None, initial: Optional[str] = None) -> Any:
    """The Starlette app (tested with its TestClient); the page opens on `initial`: a built-in
    scenario's name or a scenario file (its TOML is sent to the page), else rapgenius."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route
    from starlette.concurrency import run_in_threadpool

    web = html_report.WEB
    runs = Runs()
    names = path_keys()
    start: Dict[str, Any] = {"name": initial or "rapgenius", "toml": None}
    if initial is not None and initial not in builtin_scenarios():
        path = Path(initial)
        try:
            start = {"name": "", "toml": path.read_text(encoding="utf-8")}
        except (OSError, UnicodeDecodeError) as e:
            raise ScenarioError(f"cannot read the scenario: {e}", file=str(path)) from None
        Scenario.load(str(path)).validate()  # its mistakes are the CLI's one line, before serving

    async def page(request: Request) -> Response:
        return HTMLResponse((web / "playground.html").read_text(encoding="utf-8"), headers=_headers())

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return JSONResponse({"error": f"no such file: {name}"}, status_code=404)
        return Response((web / name).read_bytes(), media_type=STATIC[name], headers=_headers())

    async def scenarios(request: Request) -> Response:
        folder = resources.files("dynosim").joinpath("scenarios")
        builtins = [{"name": name, "description": description,
                     "toml": folder.joinpath(f"{name}.toml").read_text(encoding="utf-8")}
                    for name, description in sorted(builtin_scenarios().items())]
        registry = _dynosim.registry()
        return JSONResponse({"scenarios": builtins, "policies": registry["policies"],
                             "dyno_types": registry["dyno_types"], "autoscalers": registry["autoscalers"],
                             "controls": CONTROLS, "initial": start,
                             "max_body": MAX_BODY}, headers=_headers())

    async def body_of(request: Request) -> Any:
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > MAX_BODY):
            raise Refused(413, f"the request is larger than {MAX_BODY // 1024} KiB")
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                raise Refused(413, f"the request is larger than {MAX_BODY // 1024} KiB")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise Refused(400, f"expected a JSON body: {e}") from None

    async def run_request(request: Request) -> Dict[str, Any]:
        body = await body_of(request)
        scenario, policies = await run_in_threadpool(scenario_from_page, body, data, names)
        client = request.headers.get("x-dynosim-client") or (request.client.host if request.client else "?")
        token = runs.start(client[:64])
        try:
            return await run_in_threadpool(run_for_page, scenario, policies, token)
        except KeyboardInterrupt:  # the engine's "interrupted": its token was cancelled
            raise Refused(409, "cancelled: a newer run from this page took its place") from None
        except DynosimError as e:  # found only when running (an overload, say)
            raise Refused(400, str(e), key=getattr(e, "path", None)) from None
        finally:
            runs.done(client[:64], token)

    async def api_run(request: Request) -> Response:
        try:
            out = await run_request(request)
        except Refused as e:
            return JSONResponse(e.body(), status_code=e.status, headers=_headers())
        out.pop("document")
        return JSONResponse(finite(out), headers=_headers())

    async def api_report(request: Request) -> Response:
        try:
            out = await run_request(request)
        except Refused as e:
            return JSONResponse(e.body(), status_code=e.status, headers=_headers())
        text = html_report.render(out["document"])
        return HTMLResponse(text, headers={**_headers(), "Content-Disposition": 'attachment; filename="report.html"'})

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"{request.method} is not allowed here"}, status_code=405)

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": "not found"}, status_code=404)

    app = Starlette(routes=[
        Route("/", page, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route("/api/scenarios", scenarios, methods=["GET"]),
        Route("/api/run", api_run, methods=["POST"]),
        Route("/api/report", api_report, methods=["POST"]),
    ], exception_handlers={405: not_allowed, 404: not_found})
    app.state.runs = runs
    return app


def _headers() -> Dict[str, str]:
    """Every answer: the page may load only from this server, and nothing is cached."""
    return {"Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'",
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def serve(host: str, port: int, data: Optional[Path], *, initial: Optional[str] = None,
          on_ready: Any = None) -> None:
    """Runs the server until Ctrl-C (or SIGTERM); its runs are cancelled as it stops."""
    import uvicorn

    app = make_app(data, initial)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    if on_ready is not None:
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets)
            on_ready(server)

        server.startup = startup  # type: ignore[method-assign]
    try:
        asyncio.run(server.serve())
    finally:
        app.state.runs.cancel_all()
