"""`dynosim logs`: production router logs. ``summary`` reads Heroku, HAProxy and nginx logs
and prints what they hold: requests, span and rate, service-time percentiles overall and per
route, statuses, error codes, dynos, and requests in service over time. The reading is
:mod:`dynosim.logs`; each subcommand is a function of this module registered below."""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List

from .. import logs
from ..display import Column, duration, plural, results_table, status, stdout_console
from ..errors import LogError
from ..output import print_json
from ..timeseries import parse_interval
from .common import positive_int


def register(commands: argparse._SubParsersAction) -> None:
    help = "Read production router logs (Heroku, HAProxy, nginx): summarise them."
    p = commands.add_parser("logs", help=help, description=help,
                            epilog="Run 'dynosim logs COMMAND --help' for a command's options.")
    verbs = p.add_subparsers(dest="logs_command", metavar="COMMAND")
    _register_summary(verbs)
    p.set_defaults(handler=lambda args: _help(p))


def _help(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 0


def _register_summary(verbs: argparse._SubParsersAction) -> None:
    help = "Summarise router logs: requests, rate, service-time percentiles per route, statuses, errors, dynos."
    p = verbs.add_parser(
        "summary", help=help, description=help,
        epilog=("FILE may be plain text, gzip (.gz or not) or - for standard input; several FILEs are read as "
                "one log, in any order. Lines that are not requests of a known router (app lines) are skipped; "
                "malformed ones are counted and the first few named. Formats and fields: docs/logs.md. "
                "Example: dynosim logs summary production.log.gz --host www.example.com --plot traffic.png"),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="router logs (- for standard input)")
    p.add_argument("--format", choices=logs.FORMATS, default="auto",
                   help="read every line as this router's (default: auto, line by line)")
    p.add_argument("--log-format", metavar="FORMAT",
                   help="nginx's log_format (the string or the directive; @FILE reads it from FILE); default: "
                        "combined followed by $request_time $upstream_response_time")
    p.add_argument("--host", help="only requests to this host (the Host header), for logs of several apps")
    p.add_argument("--interval", metavar="TIME",
                   help="the interval of the rate and in-service series, e.g. 1min (default: the span in at most "
                        "200 intervals)")
    p.add_argument("--routes", type=positive_int, default=20, metavar="N",
                   help="routes shown one by one, the busiest first (default 20); the rest as (other)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (fields: docs/logs.md)")
    p.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="also write the rate and the requests in service per interval as a PNG")
    p.set_defaults(handler=summary)


def _log_format(text: str | None) -> str | None:
    if text is None or not text.startswith("@"):
        return text
    path = Path(text[1:])
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror or e}", file="--log-format") from None


def summary(args: argparse.Namespace) -> int:
    interval = parse_interval(args.interval) if args.interval is not None else None
    log_format = _log_format(args.log_format)
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise LogError(f"the plot is a PNG: give a FILE.png, got {args.plot}", file="--plot")
    with status(f"reading {plural(len(args.files), 'log')}"):
        doc = logs.summary(args.files, format=args.format, log_format=log_format, host=args.host,
                           interval=interval, top_routes=args.routes)
    if args.json:
        print_json(doc)
    else:
        print_summary(doc)
    if args.plot is not None:
        logs.write_plot(doc, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    _warn_malformed(doc)
    return 0


def _warn_malformed(doc: Dict[str, Any]) -> None:
    """Malformed lines are skipped, not fatal: a warning naming the first few."""
    if not doc["malformed"]:
        return
    shown = "; ".join(f"{m['file']}:{m['line']}: {m['reason']}" for m in doc["malformed_lines"])
    more = "; ..." if doc["malformed"] > len(doc["malformed_lines"]) else ""
    print(f"dynosim: warning: {plural(doc['malformed'], 'malformed line')} skipped ({shown}{more})", file=sys.stderr)


def _clock(iso: str) -> str:
    """``2014-01-09T06:16:50.100000+00:00`` as ``2014-01-09 06:16:50.100``."""
    date, time = iso.split("T")
    return f"{date} {time[:12]}"


def print_summary(doc: Dict[str, Any]) -> None:
    console = stdout_console()
    names = ", ".join(f["name"] for f in doc["files"])
    span = doc["span_seconds"]
    rate = doc["rate_per_s"]
    first, last = _clock(doc["first"]), _clock(doc["last"])
    if first[:10] == last[:10]:
        last = last[11:]
    console.print(f"[bold]{names}[/bold]: {plural(doc['requests'], 'request')} from {first} to {last} UTC",
                  highlight=False)
    console.print(f"{duration(span)}" + (f", {rate:,.3g} req/s" if rate is not None else "")
                  + f", {plural(doc['dynos'], 'dyno')}", highlight=False)
    skipped = [text for n, text in (
        (doc["malformed"], f"{plural(doc['malformed'], 'malformed line')}"),
        (doc["duplicates"], f"{plural(doc['duplicates'], 'duplicate')}"),
        (doc["other_hosts"], f"{plural(doc['other_hosts'], 'request')} to other hosts"),
        (doc["other_lines"], f"{plural(doc['other_lines'], 'line')} of other sources"),
    ) if n]
    if skipped:
        console.print(f"skipped: {', '.join(skipped)}", highlight=False)
    service = doc["service"]
    if service:
        console.print(
            f"service ({plural(service['count'], 'request')} with one): mean {duration(service['mean'])}, "
            f"p50 {duration(service['p50'])}, p90 {duration(service['p90'])}, p95 {duration(service['p95'])}, "
            f"p99 {duration(service['p99'])}, max {duration(service['max'])}", highlight=False)
    if doc["series"]:
        rates = sorted(p["rate_per_s"] for p in doc["series"])
        console.print(
            f"rate per {duration(doc['interval_seconds'])} interval ({len(rates):,} intervals): "
            f"median {statistics.median(rates):,.3g}, max {rates[-1]:,.3g} req/s", highlight=False)
        console.print(f"in service per interval: mean {doc['in_service_mean']:.3g}, max {doc['in_service_peak']:.3g}",
                      highlight=False)
    console.print("status: " + ", ".join(f"{code} × {n:,}" for code, n in doc["status"].items()), highlight=False)

    route_columns = [
        Column("route", lambda r: r["route"], kind="text", wrap=True, max_width=40),
        Column("requests", lambda r: r["count"], kind="count"),
        Column("errors", lambda r: r["errors"], kind="count", drop=3),
        Column("mean", _service("mean"), kind="time", drop=2),
        Column("p50", _service("p50"), kind="time"),
        Column("p95", _service("p95"), kind="time", drop=1),
        Column("p99", _service("p99"), kind="time"),
        Column("max", _service("max"), kind="time", drop=4),
    ]
    table, _ = results_table(console, route_columns, doc["routes"])
    console.print(table)
    if doc["error_codes"]:
        error_columns = [
            Column("error", lambda e: e["code"], kind="text"),
            Column("requests", lambda e: e["count"], kind="count"),
            Column("description", lambda e: e["description"] or "", kind="text", wrap=True),
        ]
        table, _ = results_table(console, error_columns, doc["error_codes"])
        console.print(table)
    if doc["per_dyno"]:
        dyno_columns = [
            Column("dyno", lambda d: d["dyno"], kind="text"),
            Column("requests", lambda d: d["requests"], kind="count"),
            Column("busy", lambda d: d["busy_seconds"], kind="time"),
            Column("mean in\nservice", lambda d: _nan(d["in_service_mean"])),
        ]
        table, _ = results_table(console, dyno_columns, _dyno_rows(doc["per_dyno"]))
        console.print(table)
    notes = ["service: the dyno's time, from the connection to the end of the response",
             "percentiles are over the requests that have one"]
    if doc["routes_distinct"] > len([r for r in doc["routes"] if r["route"] != "(other)"]):
        notes.append(f"{doc['routes_distinct']:,} routes in all (--routes shows more)")
    console.print("; ".join(notes) + ".", style="dim", highlight=False)


#: Dynos shown one by one; a larger fleet's quietest are summed in one row.
MAX_DYNO_ROWS = 30


def _dyno_rows(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    if len(rows) <= MAX_DYNO_ROWS:
        return rows
    busiest = sorted(rows, key=lambda d: -d["requests"])
    kept, rest = busiest[:MAX_DYNO_ROWS - 1], busiest[MAX_DYNO_ROWS - 1:]
    pooled = {"dyno": f"{len(rest)} others", "requests": sum(d["requests"] for d in rest),
              "busy_seconds": sum(d["busy_seconds"] for d in rest), "in_service_mean": None}
    return [d for d in rows if d in kept] + [pooled]


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _service(key: str) -> Any:
    return lambda r: _nan(r["service"][key]) if r["service"] else float("nan")
