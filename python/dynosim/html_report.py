"""A self-contained HTML report (issue #27): one file that works offline, for `--html FILE`.

A report is a list of sections, built by each command from its results: the scenario (as
TOML, and in words), tables (the terminal's columns, every one of them, with their 95%
intervals), plots (lines with 95% bands, zoom and the values under the cursor; log axes where
the data span decades), heat maps (per-dyno queues over time), and the notes and warnings the
terminal shows. :func:`render` makes the page: tables, notes and the scenario as plain HTML
(readable without scripts, and printable), the plots drawn by ``web/report.js`` with uPlot
(vendored by ``tools/vendor-js.sh``), both inlined with the data, so that nothing is fetched:
the page's Content-Security-Policy forbids every request (``default-src 'none'``).
"""

from __future__ import annotations

import datetime
import html
import json
import math
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _dynosim, time_axis
from .display import Column, _cell, _header_and_format, _is_number
from .output import finite, write_files
from .results import Estimate
from .scenario import Scenario
from .toml_text import toml_text

#: The pages (templates) and their scripts and styles, inlined into every report and animation.
WEB = Path(__file__).resolve().parent / "web"

#: A series' values span this many times from its smallest positive value to its largest:
#: the axis is logarithmic.
LOG_SPAN = 100.0

#: Percentiles of a distribution plot, as the summary names them.
PERCENTILES = [("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"), ("p999", "p99.9")]

#: Rows of a heat map at most (more dynos: each row is the largest of a group of them).
MAX_HEAT_ROWS = 200


# --- sections --------------------------------------------------------------------------------


def scenario_section(scenario: Scenario, *, title: str = "Scenario",
                     policies: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """The scenario in words and as TOML (its overrides applied)."""
    return {"kind": "scenario", "title": title, "words": scenario_words(scenario, policies),
            "toml": toml_text(scenario.doc)}


def scenario_words(scenario: Scenario, policies: Optional[Sequence[str]] = None) -> str:
    """One paragraph saying what the scenario simulates (under `policies`, if given)."""
    try:
        d = scenario.for_policy(scenario.policies[0]).describe()
    except Exception:  # a scenario of cases: its first case says it as well
        cases = scenario.cases
        if not cases:
            raise
        d = cases[0][1].for_policy(cases[0][1].policies[0]).describe()
    if d.get("closed_loop"):
        traffic = f"a closed loop of {d['closed_clients']:,} clients"
    else:
        traffic = f"{d['arrival_rate'] * 60:,.0f} requests a minute"
    slots = f"{d['slots']} slot" + ("" if d["slots"] == 1 else "s")
    routers = f"{d['routers']} routers" if d["routers"] > 1 else "one router"
    parts = [f"{scenario.name}: {traffic} routed by {routers} ({', '.join(policies or scenario.policies)}) to "
             f"{d['dynos']:,} {d['dyno_type']} dynos of {slots} each",
             f"a mean service time of {_seconds(d['service_mean'])}"]
    if not d.get("closed_loop"):
        parts.append(f"an offered load of {100 * d['offered_load']:.1f}%")
    warmup = f"after {_seconds(d['warmup'])} of warm-up" if d["warmup"] else "with no warm-up"
    parts.append(f"{d['replications']} replications of {_seconds(d['duration'])} {warmup}, seed {d['seed']}")
    return "; ".join(parts) + "."


def table_section(title: str, columns: Sequence[Column], rows: Sequence[Any], *,
                  notes: Iterable[str] = ()) -> Dict[str, Any]:
    """A table of `rows` with every column a terminal shows with ``--wide`` (each number in
    the column's unit, with its ± half-width where the column has one, and the interval's
    bounds in the cell's title)."""
    shown = [c for c in columns if not c.narrow]
    header: List[Dict[str, Any]] = []
    cells: List[List[Dict[str, Any]]] = [[] for _ in rows]
    for column in shown:
        values = [column.value(row) for row in rows]
        head, scale = _header_and_format(column, values)
        header.append({"text": head, "kind": column.kind})
        for i, v in enumerate(values):
            text = f"{v:,}" if column.kind == "count" and _is_number(v) else _cell(v, scale, column.ci)
            cell: Dict[str, Any] = {"text": text}
            if isinstance(v, Estimate) and column.ci and not math.isnan(v.half_width):
                cell["title"] = (f"95% interval: {_cell(v.ci_low, scale, False)} to "
                                 f"{_cell(v.ci_high, scale, False)}")
            cells[i].append(cell)
    return {"kind": "table", "title": title, "columns": header, "rows": cells, "notes": list(notes)}


def notes_section(title: str, items: Sequence[str], *, warning: bool = False) -> Dict[str, Any]:
    return {"kind": "warnings" if warning else "notes", "title": title, "items": list(items)}


def line_plot(title: str, x_label: str, xs: Sequence[float], y_label: str, series: Sequence[Dict[str, Any]], *,
              caption: str = "", x_ticks: Optional[Sequence[str]] = None, x_log: Optional[bool] = None,
              y_log: Optional[bool] = None, height: int = 300, span_gaps: bool = False,
              x_time: bool = False, x_elapsed: bool = False) -> Dict[str, Any]:
    """A plot of lines sharing `xs`; each of `series` is ``{"label", "y", "lo"?, "hi"?,
    "dash"?, "points"?}`` (``lo`` and ``hi``: a 95% band; ``dash``: a dashed line, a target;
    ``points``: points alone, no line). The y axis is logarithmic when its positive values span
    :data:`LOG_SPAN` or more and at most a quarter are 0 or below (a log axis leaves those
    out), unless told; the x axis only when told. `x_time`: `xs` are dates (seconds since
    1970, shown in UTC); `x_elapsed`: `xs` are seconds from a run's start, and `x_label` says
    what they are without a unit: the axis is in seconds, or in hours and minutes when it spans
    more than two hours (``x.clock``, :mod:`dynosim.time_axis`)."""
    clean = [{"label": s["label"], **{k: True for k in ("dash", "points") if s.get(k)},
              **{k: [_number(v) for v in s[k]] for k in ("y", "lo", "hi") if s.get(k) is not None}}
             for s in series]
    if y_log is None:  # on the means: a band reaching 0 or below is cut at the axis
        ys = [v for s in clean for v in s["y"] if v is not None]
        y_log = _spans_decades(ys) and sum(v <= 0 for v in ys) <= len(ys) / 4
    x_log = bool(x_log)
    if y_log:  # a log axis has no place for 0
        for s in clean:
            for k in ("y", "lo", "hi"):
                if k in s:
                    s[k] = [v if v is not None and v > 0 else None for v in s[k]]
    x: Dict[str, Any] = {"label": x_label, "values": [_number(x) for x in xs], "log": bool(x_log), "time": x_time,
                         "ticks": list(x_ticks) if x_ticks is not None else None}
    if x_elapsed:
        values = [v for v in x["values"] if v is not None]
        span = max(values) - min(values) if values else 0.0
        x["label"] = time_axis.axis_label(x_label, span)
        x["clock"] = time_axis.spec(values)
    return {"kind": "line", "title": title, "caption": caption, "height": height, "span_gaps": span_gaps,
            "x": x,
            "y": {"label": y_label, "log": bool(y_log)}, "series": clean}


def heat_map(title: str, times: Sequence[float], rows: Sequence[Sequence[int]], *, row_label: str = "dyno",
             value_label: str = "waiting", caption: str = "") -> Dict[str, Any]:
    """Values over time, one row each (per-dyno queues): at most :data:`MAX_HEAT_ROWS` rows,
    each then the largest of a group of consecutive ones. `times` are seconds from a run's
    start, shown as a clock past two hours (``clock``, as :func:`line_plot`'s ``x_elapsed``)."""
    n = len(rows)
    group = max(1, math.ceil(n / MAX_HEAT_ROWS))
    merged, names = [], []
    for start in range(0, n, group):
        block = rows[start:start + group]
        merged.append([max(col) for col in zip(*block)] if block else [])
        end = min(n, start + group)
        names.append(f"{row_label} {start}" if group == 1 else f"{row_label}s {start}–{end - 1} (largest)")
    return {"kind": "heatmap", "title": title, "caption": caption, "times": [_number(t) for t in times],
            "rows": merged, "row_names": names, "row_label": row_label, "value_label": value_label,
            "clock": time_axis.spec([t for t in times if t is not None])}


def percentile_plot(title: str, results: Sequence[Any], metric: str, *, caption: str = "") -> Dict[str, Any]:
    """A metric's percentiles (``response``, ``queue``) for each result (a :class:`PolicyResult`
    with a ``label``), in ms, with their 95% intervals."""
    series = []
    for label, r in results:
        est = [r.estimate(f"{metric}.{key}") for key, _ in PERCENTILES]
        series.append({"label": label, "y": [e.mean * 1e3 for e in est],
                       "lo": [e.ci_low * 1e3 for e in est], "hi": [e.ci_high * 1e3 for e in est]})
    return line_plot(title, "percentile", list(range(len(PERCENTILES))), f"{metric} time (ms)", series,
                     x_ticks=[name for _, name in PERCENTILES], caption=caption)


# --- the page --------------------------------------------------------------------------------


def document(title: str, command: str, sections: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The report: what made it, when, and its sections."""
    return {"title": title, "command": command, "version": _dynosim.__version__,
            "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "sections": list(sections)}


def sections_html(sections: Sequence[Dict[str, Any]]) -> Tuple[str, List[Dict[str, Any]]]:
    """The sections as HTML, and the plots that its placeholders (``plot-N``) await."""
    plots: List[Dict[str, Any]] = []
    body = "\n".join(_section_html(section, plots) for section in sections)
    return body, plots


def render(doc: Dict[str, Any]) -> str:
    """The whole page, every script and style inlined."""
    body, plots = sections_html(doc["sections"])
    data = {"plots": plots}
    return fill_page("report.html", {
        "TITLE": html.escape(doc["title"]),
        "COMMAND": html.escape(doc["command"]),
        "GENERATED": html.escape(doc["generated"]),
        "VERSION": html.escape(doc["version"]),
        "BODY": body,
        "DATA": _script_json(data),
        "UPLOT_CSS": (WEB / "uPlot.min.css").read_text(encoding="utf-8"),
        "REPORT_CSS": (WEB / "report.css").read_text(encoding="utf-8"),
        "UPLOT_JS": (WEB / "uPlot.iife.min.js").read_text(encoding="utf-8"),
        "REPORT_JS": (WEB / "report.js").read_text(encoding="utf-8"),
    })


def fill_page(name: str, fills: Dict[str, str]) -> str:
    """The page ``web/NAME`` with each ``@@KEY@@`` in it replaced by ``fills[KEY]``; every key
    given must be in the page (the report's, the animation's)."""
    template = (WEB / name).read_text(encoding="utf-8")
    missing = set(fills) - set(re.findall(r"@@([A-Z_]+)@@", template))
    if missing:
        raise AssertionError(f"{name} lacks {sorted(missing)}")
    # One pass: what fills a placeholder is never read for placeholders itself.
    return re.sub(r"@@([A-Z_]+)@@", lambda m: fills[m.group(1)], template)


def write(path: Path, doc: Dict[str, Any]) -> None:
    """Writes the report atomically (a failure leaves nothing half-written)."""
    text = render(doc)
    write_files({path: lambda tmp: tmp.write_text(text, encoding="utf-8")}, option="--html")


def _section_html(section: Dict[str, Any], plots: List[Dict[str, Any]]) -> str:
    kind, title = section["kind"], html.escape(section.get("title", ""))
    if kind == "scenario":
        return (f'<section class="scenario"><h2>{title}</h2><p class="words">{html.escape(section["words"])}</p>'
                f'<details><summary>The scenario as TOML</summary><pre>{html.escape(section["toml"])}</pre>'
                f"</details></section>")
    if kind == "table":
        head = "".join(f'<th class="{html.escape(c["kind"])}" scope="col">{html.escape(c["text"])}</th>'
                       for c in section["columns"])
        rows = []
        for row in section["rows"]:
            cells = []
            for c, cell in zip(section["columns"], row):
                attr = f' title="{html.escape(cell["title"])}"' if cell.get("title") else ""
                text = html.escape(cell["text"])
                if " ±" in text:
                    mean, _, half = text.partition(" ±")
                    text = f'{mean} <span class="ci">±{half}</span>'
                cells.append(f'<td class="{html.escape(c["kind"])}"{attr}>{text}</td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in section.get("notes", []))
        return (f'<section class="table"><h2>{title}</h2><div class="table-wrap"><table><thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(rows)}</tbody></table></div>'
                + (f'<ul class="notes">{notes}</ul>' if notes else "") + "</section>")
    if kind in ("notes", "warnings"):
        if not section["items"]:
            return ""
        items = "".join(f"<li>{html.escape(n)}</li>" for n in section["items"])
        cls = "warnings" if kind == "warnings" else "notes-box"
        return f'<section class="{cls}"><h2>{title}</h2><ul>{items}</ul></section>'
    if kind in ("line", "heatmap"):
        pid = f"plot-{len(plots)}"
        plots.append({**section, "id": pid})
        caption = f'<p class="caption">{html.escape(section["caption"])}</p>' if section.get("caption") else ""
        banded = kind == "line" and any("lo" in s for s in section["series"])
        help_text = ("Drag across to zoom, double-click to reset; the legend shows the values under the cursor"
                     + ("; shaded: 95% interval." if banded else ".") if kind == "line" else "")
        return (f'<div class="plot"><h3>{title}</h3>{caption}<div id="{pid}" class="{"heat" if kind == "heatmap" else "chart"}">'
                f'<noscript>This plot needs JavaScript.</noscript></div>'
                + (f'<p class="help">{help_text}</p>' if help_text else "") + "</div>")
    if kind == "heading":
        return f"<section><h2>{title}</h2></section>"
    raise ValueError(f"unknown report section {kind!r}")


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no ``</`` can end it, no ``<!--`` open a comment."""
    text = json.dumps(finite(data), separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _number(v: Any) -> Optional[float]:
    if v is None or v == "":
        return None
    x = float(v)
    return x if math.isfinite(x) else None


def _spans_decades(values: Iterable[Any]) -> bool:
    positive = [float(v) for v in values if v is not None and _is_number(v) and float(v) > 0]
    return bool(positive) and max(positive) / min(positive) >= LOG_SPAN


def _seconds(seconds: float) -> str:
    from .display import duration

    return duration(float(seconds))

