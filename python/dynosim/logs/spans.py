"""Traces for ``dynosim logs fit``: OpenTelemetry, Jaeger and Zipkin spans as JSON lines, read
into the call graph of the services they cross (who calls whom, how many calls a request
sends, in what order, waiting for how many) and each service's own time (its spans' durations
less the time they waited on their calls). The fitting of distributions and the scenario file
are :mod:`.fit`'s, shared with router logs; docs/logs.md says what is read and assumed.

A trace's spans may come in any order and in several files, so the spans are held in memory.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import LogError

#: Malformed lines named in the warning and the report (as the log reader does).
MALFORMED_SHOWN = 5
#: Characters of a malformed line kept in the report.
TEXT_SHOWN = 200
#: A line longer than this is malformed (as the log reader's).
MAX_LINE = 1 << 20

#: Where each field is read from, in the order tried (the first key present wins).
TRACE_KEYS = ("traceId", "traceID", "trace_id")
SPAN_KEYS = ("spanId", "spanID", "span_id", "id")
PARENT_KEYS = ("parentSpanId", "parentSpanID", "parent_span_id", "parentId")


@dataclass
class Span:
    trace: str
    id: str
    parent: Optional[str]
    service: str
    start: float        # seconds since the epoch
    end: float
    instance: Optional[str]


@dataclass
class SpanFile:
    name: str
    lines: int = 0
    spans: int = 0
    malformed: int = 0


@dataclass
class Read:
    """The spans of the files, and what was skipped."""

    files: List[SpanFile]
    spans: List[Span] = field(default_factory=list)
    malformed: int = 0
    malformed_lines: List[Dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0

    @property
    def lines(self) -> int:
        return sum(f.lines for f in self.files)


# --- reading ---------------------------------------------------------------------------------


def _open(name: str) -> IO[bytes]:
    if name == "-":
        return sys.stdin.buffer
    path = Path(name)
    if path.is_dir():
        raise LogError("is a folder: expected a file of spans", file=name)
    try:
        raw = path.open("rb")
    except OSError as e:
        raise LogError(f"cannot read: {e.strerror or e}", file=name) from None
    if raw.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    return raw


def _lines(name: str) -> Iterator[bytes]:
    f = _open(name)
    try:
        yield from f
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise LogError(f"cannot read: {e}", file=name) from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def looks_like_spans(names: Sequence[str]) -> bool:
    """Whether the first file is spans: its first line that is not blank is a JSON object
    with a trace id. Standard input is read as spans only with ``--format spans`` (it cannot
    be looked at first)."""
    name = names[0]
    if name == "-":
        return False
    try:
        with _open(name) as f:
            head = f.read(MAX_LINE)
    except (LogError, OSError, EOFError, gzip.BadGzipFile):
        return False  # the log reader says what is wrong with it
    for line in head.splitlines():
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            return False
        return isinstance(doc, dict) and any(k in doc for k in TRACE_KEYS)
    return False


def read(names: Sequence[str]) -> Read:
    """Every span of the files; a line that is not a span is malformed (counted, skipped, the
    first five named), a span read twice (the same trace and span id) a duplicate."""
    out = Read(files=[SpanFile("<stdin>" if n == "-" else n) for n in names])
    seen = set()
    for name, stats in zip(names, out.files):
        for number, raw in enumerate(_lines(name), 1):
            stats.lines += 1
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not text.strip():
                continue
            try:
                span = parse(text)
            except ValueError as e:
                stats.malformed += 1
                out.malformed += 1
                if len(out.malformed_lines) < MALFORMED_SHOWN:
                    out.malformed_lines.append({"file": stats.name, "line": number, "reason": str(e),
                                                "text": text[:TEXT_SHOWN]})
                continue
            if (span.trace, span.id) in seen:
                out.duplicates += 1
                continue
            seen.add((span.trace, span.id))
            stats.spans += 1
            out.spans.append(span)
    if not out.spans:
        lines = out.lines
        names_text = ", ".join(f.name for f in out.files)
        if lines == 0:
            raise LogError(f"{names_text}: empty: no spans to fit")
        if out.malformed == 0:
            raise LogError(f"{names_text}: no span among {lines} blank lines")
        at = "; ".join(f"{m['file']}:{m['line']}: {m['reason']}" for m in out.malformed_lines)
        more = "; ..." if out.malformed > len(out.malformed_lines) else ""
        raise LogError(f"no span read: {out.malformed} of {lines} line{'s' if lines != 1 else ''} malformed "
                       f"({at}{more})")
    return out


def parse(text: str) -> Span:
    """One line as a span, or ValueError saying what was expected."""
    if len(text) > MAX_LINE:
        raise ValueError(f"longer than {MAX_LINE} bytes")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at column {e.colno}): expected one span a line") from None
    except RecursionError:
        raise ValueError("JSON nested too deep: expected one span a line") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object: expected one span a line, { \"traceId\": ..., ... }")
    trace = _id(doc, TRACE_KEYS, "trace id")
    span = _id(doc, SPAN_KEYS, "span id")
    if trace is None:
        raise ValueError(f"no trace id ({', '.join(TRACE_KEYS)})")
    if span is None:
        raise ValueError(f"no span id ({', '.join(SPAN_KEYS)})")
    service = _service(doc)
    if service is None:
        raise ValueError("no service name (service, resource's service.name, process.serviceName or "
                         "localEndpoint.serviceName)")
    start, end = _times(doc)
    return Span(trace, span, _parent(doc), service, start, end, _instance(doc))


def _id(doc: Dict[str, Any], keys: Sequence[str], what: str) -> Optional[str]:
    for k in keys:
        if k in doc:
            v = doc[k]
            if isinstance(v, str) and v and not _zero(v):
                return v
            if isinstance(v, int) and not isinstance(v, bool):
                return str(v)
            raise ValueError(f"{k}: expected a {what} (a string), got {json.dumps(v)[:40]}")
    return None


def _zero(text: str) -> bool:
    """OpenTelemetry writes an absent id as zeros."""
    return set(text) == {"0"}


def _parent(doc: Dict[str, Any]) -> Optional[str]:
    for k in PARENT_KEYS:
        if k in doc:
            v = doc[k]
            if v is None or v == "" or (isinstance(v, str) and _zero(v)):
                return None
            if isinstance(v, str):
                return v
            if isinstance(v, int) and not isinstance(v, bool):
                return str(v)
            raise ValueError(f"{k}: expected the parent's span id (a string), null or \"\", got {json.dumps(v)[:40]}")
    refs = doc.get("references")
    if refs is None or refs == []:
        return None
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        raise ValueError("references: expected a list of { refType, traceID, spanID }")
    parents = [r for r in refs if r.get("refType", "CHILD_OF") == "CHILD_OF"] or refs
    v = parents[0].get("spanID", parents[0].get("spanId"))
    if not isinstance(v, str) or not v:
        raise ValueError("references[0].spanID: expected the parent's span id (a string)")
    return v


def _attribute(attrs: Any, key: str) -> Optional[str]:
    """A string attribute of an OpenTelemetry resource, as a plain object
    (``{"service.name": "api"}``) or as OTLP's list (``[{"key": ..., "value": {"stringValue":
    ...}}]``); or of Jaeger's tags (``[{"key": ..., "value": ...}]``)."""
    if isinstance(attrs, dict):
        v = attrs.get(key)
        return v if isinstance(v, str) and v else None
    if isinstance(attrs, list):
        for a in attrs:
            if isinstance(a, dict) and a.get("key") == key:
                v = a.get("value")
                if isinstance(v, dict):
                    v = v.get("stringValue")
                return v if isinstance(v, str) and v else None
    return None


def _resource(doc: Dict[str, Any]) -> Any:
    r = doc.get("resource")
    return r.get("attributes", r) if isinstance(r, dict) else None


def _service(doc: Dict[str, Any]) -> Optional[str]:
    v = doc.get("service")
    if isinstance(v, str) and v:
        return v
    v = _attribute(_resource(doc), "service.name")
    if v:
        return v
    for holder in ("process", "localEndpoint"):
        h = doc.get(holder)
        if isinstance(h, dict) and isinstance(h.get("serviceName"), str) and h["serviceName"]:
            return h["serviceName"]
    return None


def _instance(doc: Dict[str, Any]) -> Optional[str]:
    v = _attribute(_resource(doc), "service.instance.id")
    if v:
        return v
    process = doc.get("process")
    if isinstance(process, dict):
        v = _attribute(process.get("tags"), "hostname")
        if v:
            return v
    endpoint = doc.get("localEndpoint")
    if isinstance(endpoint, dict):
        v = endpoint.get("ipv4") or endpoint.get("ipv6")
        if isinstance(v, str) and v:
            return v
    return None


def _whole(doc: Dict[str, Any], key: str, unit: str) -> int:
    v = doc.get(key)
    if isinstance(v, str) and v.isdigit():
        return int(v)
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, float) and v >= 0 and v == int(v):
        return int(v)
    raise ValueError(f"{key}: expected a whole number of {unit} >= 0, got {json.dumps(v)[:40]}")


def _times(doc: Dict[str, Any]) -> Tuple[float, float]:
    """(start, end) in seconds since the epoch: OpenTelemetry's start and end in nanoseconds,
    or Jaeger's ``startTime`` and Zipkin's ``timestamp`` with a ``duration``, in microseconds."""
    if "startTimeUnixNano" in doc:
        start = _whole(doc, "startTimeUnixNano", "nanoseconds")
        if "endTimeUnixNano" not in doc:
            raise ValueError("no endTimeUnixNano beside startTimeUnixNano")
        end = _whole(doc, "endTimeUnixNano", "nanoseconds")
        if end < start:
            raise ValueError("endTimeUnixNano is before startTimeUnixNano")
        return start / 1e9, end / 1e9
    for key in ("startTime", "timestamp"):
        if key in doc:
            start = _whole(doc, key, "microseconds")
            if "duration" not in doc:
                raise ValueError(f"no duration (microseconds) beside {key}")
            length = _whole(doc, "duration", "microseconds")
            return start / 1e6, (start + length) / 1e6
    raise ValueError("no start time (startTimeUnixNano with endTimeUnixNano; startTime or timestamp with "
                     "duration)")


# --- the call graph ----------------------------------------------------------------------------


@dataclass
class Edge:
    """The calls of one service to another, per span of the caller."""

    caller: str
    callee: str
    #: per caller span that called the callee: its calls' (start, end) offsets from the caller
    #: span's start, in order (a caller span that made none is not here)
    calls: List[List[Tuple[float, float]]] = field(default_factory=list)
    #: per caller span that called: how many of its calls answered before it went on (its next
    #: call to any service, or its end)
    answered: List[int] = field(default_factory=list)

    def overlapping(self) -> bool:
        """Whether the calls of a caller span go out side by side (each after the first starts
        before the one before it has ended), in most of the caller spans with several."""
        several = [c for c in self.calls if len(c) > 1]
        side = sum(1 for c in several if any(b[0] < a[1] for a, b in zip(c, c[1:])))
        return bool(several) and 2 * side >= len(several)

    def position(self, i: int = 0) -> float:
        """The median offset of a caller span's i-th call (those with one)."""
        starts = [c[i][0] for c in self.calls if len(c) > i]
        return statistics.median(starts) if starts else float("inf")


@dataclass
class Service:
    name: str
    spans: int = 0
    #: each span's own time: its duration less the union of its calls' spans within it, s
    own: List[float] = field(default_factory=list)
    before: float = 0.0     # own time before the first call, summed over spans, s
    after: float = 0.0      # own time after the last call
    instances: Dict[Optional[str], List[Tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class Graph:
    entry: str
    roots: List[float]                  # the start of each fitted trace, s since the epoch
    services: Dict[str, Service]        # the entry first, then in order of first call
    edges: Dict[Tuple[str, str], Edge]
    traces: int                         # traces read
    incomplete: int                     # skipped: a span's parent missing, or no single root
    other_entries: Dict[str, int]       # skipped: traces whose root is another service's


def graph(spans: Sequence[Span]) -> Graph:
    """The call graph of the traces whose root is the busiest root service: each span whose
    parent is of another service is a call to its service; a span of the same service as its
    parent is part of that service's work (an internal or client span)."""
    by_trace: Dict[str, List[Span]] = defaultdict(list)
    for s in spans:
        by_trace[s.trace].append(s)
    complete: List[Tuple[Span, List[Span]]] = []
    incomplete = 0
    for members in by_trace.values():
        ids = {s.id for s in members}
        tops = [s for s in members if s.parent is None]
        if len(tops) != 1 or any(s.parent is not None and s.parent not in ids for s in members):
            incomplete += 1
            continue
        complete.append((tops[0], members))
    if not complete:
        raise LogError(f"none of the {len(by_trace):,} traces is whole (one root span, every parent present): "
                       "nothing to fit")
    root_services = Counter(root.service for root, _ in complete)
    entry = max(root_services, key=lambda s: (root_services[s], s))
    services: Dict[str, Service] = {entry: Service(entry)}
    edges: Dict[Tuple[str, str], Edge] = {}
    roots: List[float] = []
    for root, members in sorted(complete, key=lambda c: c[0].start):
        if root.service != entry:
            continue
        roots.append(root.start)
        _trace(members, services, edges)
    other = {s: n for s, n in sorted(root_services.items()) if s != entry}
    return Graph(entry, roots, services, edges, len(by_trace), incomplete, other)


def _trace(members: Sequence[Span], services: Dict[str, Service], edges: Dict[Tuple[str, str], Edge]) -> None:
    by_id = {s.id: s for s in members}
    owner: Dict[str, Span] = {}

    def owner_of(s: Span) -> Span:
        chain = []
        while s.id not in owner:
            parent = by_id.get(s.parent) if s.parent is not None else None
            if parent is None or parent.service != s.service:
                owner[s.id] = s
                break
            chain.append(s)
            s = parent
        for c in chain:
            owner[c.id] = owner[s.id]
        return owner[s.id]

    calls: Dict[str, List[Span]] = defaultdict(list)     # owner span id -> the spans it called
    heads = []
    for s in sorted(members, key=lambda s: s.start):
        if owner_of(s) is s:
            heads.append(s)
            if s.parent is not None:
                calls[owner_of(by_id[s.parent]).id].append(s)
    for s in heads:
        svc = services.setdefault(s.service, Service(s.service))
        svc.spans += 1
        svc.instances[s.instance].append((s.start, s.end))
        called = calls.get(s.id, [])
        svc.own.append(max(0.0, (s.end - s.start) - _union(called, s.start, s.end)))
        if called:
            svc.before += max(0.0, min(c.start for c in called) - s.start)
            svc.after += max(0.0, s.end - max(c.end for c in called))
        else:
            svc.before += s.end - s.start
        by_callee: Dict[str, List[Span]] = defaultdict(list)
        for c in called:
            by_callee[c.service].append(c)
        for callee, group in by_callee.items():
            edge = edges.setdefault((s.service, callee), Edge(s.service, callee))
            edge.calls.append([(c.start - s.start, c.end - s.start) for c in group])
            last_start = max(c.start for c in group)
            resumed = min([c.start for c in called if c.start > last_start] + [s.end])
            edge.answered.append(sum(1 for c in group if c.end <= resumed))


def _union(spans: Sequence[Span], lo: float, hi: float) -> float:
    """The length of the union of the spans' intervals within [lo, hi]."""
    total, reach = 0.0, lo
    for a, b in sorted((max(s.start, lo), min(s.end, hi)) for s in spans):
        if b <= reach:
            continue
        total += b - max(a, reach)
        reach = b
    return total


def cycle(edges: Sequence[Tuple[str, str]]) -> Optional[List[str]]:
    """A cycle of the call graph, as the services in it, the first repeated at the end."""
    out: Dict[str, List[str]] = defaultdict(list)
    for a, b in edges:
        out[a].append(b)
    state: Dict[str, int] = {}
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in out[node]:
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in list(out):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def most_at_once(intervals: Sequence[Tuple[float, float]]) -> int:
    """The most intervals in progress at one instant (an end before a start at the same time)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most

