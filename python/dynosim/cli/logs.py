"""`dynosim logs`: production router logs. ``summary`` reads Heroku, HAProxy and nginx logs
and prints what they hold: requests, span and rate, service-time percentiles overall and per
route, statuses, error codes, dynos, and requests in service over time; ``fit`` writes a
scenario fitted to them, with a report of the fit; ``replay`` runs their requests through
another fleet and policy. The reading is :mod:`dynosim.logs`; each subcommand is a function of
this module registered below."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List

from .. import html_report, logs
from ..display import Column, duration, number, plural, results_table, status, stdout_console
from ..errors import LogError
from ..output import print_json
from ..results import PolicyResult
from ..timeseries import parse_interval
from .common import (add_html_argument, add_log_arguments, command_line, log_format_arg, policy_list, positive_int,
                     positive_number, recorded_warnings, seed, warning, write_html)


def register(commands: argparse._SubParsersAction) -> None:
    help = "Read production router logs (Heroku, HAProxy, nginx): summarise them, fit a scenario, replay them."
    p = commands.add_parser("logs", help=help, description=help,
                            epilog="Run 'dynosim logs COMMAND --help' for a command's options.")
    verbs = p.add_subparsers(dest="logs_command", metavar="COMMAND")
    _register_summary(verbs)
    _register_fit(verbs)
    _register_replay(verbs)
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
    add_log_arguments(p, window=False)
    p.add_argument("--interval", metavar="TIME",
                   help="the interval of the rate and in-service series, e.g. 1min (default: the span in at most "
                        "200 intervals)")
    p.add_argument("--routes", type=positive_int, default=20, metavar="N",
                   help="routes shown one by one, the busiest first (default 20); the rest as (other)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (fields: docs/logs.md)")
    p.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="also write the rate and the requests in service per interval as a PNG")
    add_html_argument(p)
    p.set_defaults(handler=summary)


def summary(args: argparse.Namespace) -> int:
    interval = parse_interval(args.interval) if args.interval is not None else None
    log_format = log_format_arg(args.log_format)
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
    if args.html is not None:
        write_html(args.html, summary_report(doc))
    return 0


def _warn_malformed(doc: Dict[str, Any]) -> None:
    """Malformed lines are skipped, not fatal: a warning naming the first few."""
    if not doc["malformed"]:
        return
    shown = "; ".join(f"{m['file']}:{m['line']}: {m['reason']}" for m in doc["malformed_lines"])
    more = "; ..." if doc["malformed"] > len(doc["malformed_lines"]) else ""
    warning(f"{plural(doc['malformed'], 'malformed line')} skipped ({shown}{more})")


def _clock(iso: str) -> str:
    """``2014-01-09T06:16:50.100000+00:00`` as ``2014-01-09 06:16:50.100``."""
    date, time = iso.split("T")
    return f"{date} {time[:12]}"


def summary_lines(doc: Dict[str, Any]) -> List[str]:
    """The summary's head in words: the logs, their span and rate, what was skipped, the
    service times, the rate and the requests in service per interval, the statuses."""
    names = ", ".join(f["name"] for f in doc["files"])
    span = doc["span_seconds"]
    rate = doc["rate_per_s"]
    first, last = _clock(doc["first"]), _clock(doc["last"])
    if first[:10] == last[:10]:
        last = last[11:]
    lines = [f"{names}: {plural(doc['requests'], 'request')} from {first} to {last} UTC",
             f"{duration(span)}" + (f", {rate:,.3g} req/s" if rate is not None else "")
             + f", {plural(doc['dynos'], 'dyno')}"]
    skipped = [text for n, text in (
        (doc["malformed"], f"{plural(doc['malformed'], 'malformed line')}"),
        (doc["duplicates"], f"{plural(doc['duplicates'], 'duplicate')}"),
        (doc["other_hosts"], f"{plural(doc['other_hosts'], 'request')} to other hosts"),
        (doc["other_lines"], f"{plural(doc['other_lines'], 'line')} of other sources"),
    ) if n]
    if skipped:
        lines.append(f"skipped: {', '.join(skipped)}")
    service = doc["service"]
    if service:
        lines.append(
            f"service ({plural(service['count'], 'request')} with one): mean {duration(service['mean'])}, "
            f"p50 {duration(service['p50'])}, p90 {duration(service['p90'])}, p95 {duration(service['p95'])}, "
            f"p99 {duration(service['p99'])}, max {duration(service['max'])}")
    if doc["series"]:
        rates = sorted(p["rate_per_s"] for p in doc["series"])
        lines.append(f"rate per {duration(doc['interval_seconds'])} interval ({len(rates):,} intervals): "
                     f"median {statistics.median(rates):,.3g}, max {rates[-1]:,.3g} req/s")
        lines.append(f"in service per interval: mean {doc['in_service_mean']:.3g}, max {doc['in_service_peak']:.3g}")
    lines.append("status: " + ", ".join(f"{code} × {n:,}" for code, n in doc["status"].items()))
    return lines


ROUTE_COLUMNS = [
    Column("route", lambda r: r["route"], kind="text", wrap=True, max_width=40),
    Column("requests", lambda r: r["count"], kind="count"),
    Column("errors", lambda r: r["errors"], kind="count", drop=3),
    Column("mean", lambda r: _service("mean")(r), kind="time", drop=2),
    Column("p50", lambda r: _service("p50")(r), kind="time"),
    Column("p95", lambda r: _service("p95")(r), kind="time", drop=1),
    Column("p99", lambda r: _service("p99")(r), kind="time"),
    Column("max", lambda r: _service("max")(r), kind="time", drop=4),
]
ERROR_COLUMNS = [
    Column("error", lambda e: e["code"], kind="text"),
    Column("requests", lambda e: e["count"], kind="count"),
    Column("description", lambda e: e["description"] or "", kind="text", wrap=True),
]
DYNO_COLUMNS = [
    Column("dyno", lambda d: d["dyno"], kind="text"),
    Column("requests", lambda d: d["requests"], kind="count"),
    Column("busy", lambda d: d["busy_seconds"], kind="time"),
    Column("mean in\nservice", lambda d: _nan(d["in_service_mean"])),
]


def summary_notes(doc: Dict[str, Any]) -> List[str]:
    notes = ["service: the dyno's time, from the connection to the end of the response",
             "percentiles are over the requests that have one"]
    if doc["routes_distinct"] > len([r for r in doc["routes"] if r["route"] != "(other)"]):
        notes.append(f"{doc['routes_distinct']:,} routes in all (--routes shows more)")
    return notes


def summary_report(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The HTML report of the summary: its head in words, the tables of routes, errors and
    dynos, and the rate and the requests in service per interval over the log's time (UTC)."""
    sections: List[Dict[str, Any]] = [
        html_report.notes_section("The logs", summary_lines(doc)),
        html_report.table_section("Routes", ROUTE_COLUMNS, doc["routes"], notes=summary_notes(doc)),
    ]
    if doc["error_codes"]:
        sections.append(html_report.table_section("Errors", ERROR_COLUMNS, doc["error_codes"]))
    if doc["per_dyno"]:
        sections.append(html_report.table_section("Dynos", DYNO_COLUMNS, _dyno_rows(doc["per_dyno"])))
    sections.append(html_report.notes_section("Warnings", recorded_warnings(), warning=True))
    if doc["series"]:
        starts = [datetime.fromisoformat(p["start"]).timestamp() for p in doc["series"]]
        width = duration(doc["interval_seconds"])
        sections.append(html_report.line_plot(
            "Requests per second", "time (UTC)", starts, "req/s",
            [{"label": "rate", "y": [p["rate_per_s"] for p in doc["series"]]}], x_time=True, y_log=False,
            caption=f"Per {width} interval, from each interval's start."))
        sections.append(html_report.line_plot(
            "Requests in service", "time (UTC)", starts, "in service",
            [{"label": "in service", "y": [p["in_service"] for p in doc["series"]]}], x_time=True, y_log=False,
            caption="The mean number being served during each interval (from each line's time less its "
                    "service time)."))
    title = "dynosim logs summary: " + ", ".join(f["name"] for f in doc["files"])
    return html_report.document(title, command_line(), sections)


def print_summary(doc: Dict[str, Any]) -> None:
    console = stdout_console()
    head = summary_lines(doc)
    names = ", ".join(f["name"] for f in doc["files"])
    console.print(f"[bold]{names}[/bold]" + head[0][len(names):], highlight=False)
    for line in head[1:]:
        console.print(line, highlight=False)
    table, _ = results_table(console, ROUTE_COLUMNS, doc["routes"])
    console.print(table)
    if doc["error_codes"]:
        table, _ = results_table(console, ERROR_COLUMNS, doc["error_codes"])
        console.print(table)
    if doc["per_dyno"]:
        table, _ = results_table(console, DYNO_COLUMNS, _dyno_rows(doc["per_dyno"]))
        console.print(table)
    console.print("; ".join(summary_notes(doc)) + ".", style="dim", highlight=False)


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


# --- fit -------------------------------------------------------------------------------------


def _register_fit(verbs: argparse._SubParsersAction) -> None:
    help = ("Fit a scenario to router logs (arrival rate or schedule, service times, fleet) or to traces (the "
            "services, their calls and own times); and report the fit.")
    p = verbs.add_parser(
        "fit", help=help, description=help,
        epilog=("Writes a scenario TOML (validated first): [arrivals] at the log's mean rate, or a piecewise-linear "
                "schedule when the rate varies more than Poisson's would; [service] as a quantile table of the "
                "logged service times (or with --classes, one request class per route); [fleet] the dynos seen; "
                "[router] random, as Heroku's. The report gives the KS distance of the fit, the dispersion of "
                "arrivals at a few interval lengths, and how much of service= may be time queued on the dynos. "
                "From traces (OpenTelemetry, Jaeger or Zipkin spans as JSON lines): the root spans' service as the "
                "entry, each other service as [services.NAME], each caller's calls as call or fanout phases, and "
                "each service's own time (its spans less their calls) as a quantile table. "
                "What is assumed: docs/logs.md. Example: dynosim logs fit production.log.gz -o app.toml "
                "--report fit.png"),
    )
    add_log_arguments(p, spans=True)
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.toml",
                   help="the scenario file to write (replaced whole, or left as it was on an error)")
    p.add_argument("--classes", type=positive_int, default=1, metavar="N",
                   help="request classes: the busiest N-1 routes and the rest, each with its own service times "
                        "(default 1: one [service] for all)")
    p.add_argument("--correct-queueing", action="store_true",
                   help="take off each request's service time its overlap with the one before it on its dyno: the "
                        "time it queued there if each dyno serves one request at a time, first come first served")
    p.add_argument("--name", help="the scenario's name (default: the first log's, with -fitted)")
    p.add_argument("--report", type=Path, metavar="FILE.png",
                   help="also write the fit's plot: the QQ plot of the service times (of each service's own time, "
                        "for traces), and the arrivals over time")
    p.add_argument("--json", action="store_true", help="print the fit report as JSON (fields: docs/logs.md)")
    p.set_defaults(handler=fit)


def fit(args: argparse.Namespace) -> int:
    if args.output.suffix.lower() != ".toml":
        raise LogError(f"the scenario is a TOML file: give a FILE.toml, got {args.output}", file="-o")
    if args.report is not None and args.report.suffix.lower() != ".png":
        raise LogError(f"the report is a PNG: give a FILE.png, got {args.report}", file="--report")
    with status(f"fitting {plural(len(args.files), 'log')}"):
        fitted = logs.fit(args.files, format=args.format, log_format=log_format_arg(args.log_format), host=args.host,
                          window=args.window, classes=args.classes, correct_queueing=args.correct_queueing,
                          name=args.name)
    traces = fitted.report.get("source") == "spans"
    fitted.write(args.output)
    if args.report is not None:
        fitted.write_report(args.report)
    if args.json:
        print_json(fitted.report)
    elif traces:
        print_spans_fit(fitted.report)
    else:
        print_fit(fitted.report)
    print(f"wrote {args.output}" + (f", {args.report}" if args.report is not None else ""), file=sys.stderr)
    _warn_malformed(fitted.report)
    return 0


def print_fit(report: Dict[str, Any]) -> None:
    console = stdout_console()
    out = lambda text: console.print(text, highlight=False)  # noqa: E731
    names = ", ".join(f["name"] for f in report["files"])
    out(f"[bold]{names}[/bold]: {plural(report['fitted'], 'request')} fitted, arriving from "
        f"{_clock(report['first'])} over {duration(report['span_seconds'])}, {plural(report['dynos'], 'dyno')}")
    a = report["arrivals"]
    out(f"arrivals: {a['rate_per_s']:,.4g} req/s on average; " + a["verdict"] + ".")
    if a["dispersion"]:
        columns = [
            Column("interval", lambda r: duration(r["interval_seconds"]), kind="text"),
            Column("intervals", lambda r: r["intervals"], kind="count"),
            Column("mean\narrivals", lambda r: r["mean"]),
            Column("variance /\nmean", lambda r: r["index"]),
            Column("verdict", lambda r: r["verdict"], kind="text"),
        ]
        table, _ = results_table(console, columns, a["dispersion"])
        console.print(table)
    s = report["service"]
    out(f"service ({plural(s['count'], 'request')} with one): mean {duration(s['mean'])}, p50 {duration(s['p50'])}, "
        f"p99 {duration(s['p99'])}, max {duration(s['max'])}")
    if report["classes"]:
        out(f"fitted as {plural(len(report['classes']), 'request class')} (mean {duration(s['fitted_mean'])}), "
            f"KS distance {s['ks_distance']:.3f} over all:")
        columns = [
            Column("class", lambda c: c["name"], kind="text", wrap=True, max_width=40),
            Column("weight", lambda c: c["weight"], kind="percent"),
            Column("requests", lambda c: c["count"], kind="count"),
            Column("KS\ndistance", lambda c: c["ks_distance"]),
        ]
        table, _ = results_table(console, columns, report["classes"])
        console.print(table)
    else:
        table_text = ", ".join(f"p{p:g} {duration(t)}" for p, t in s["percentiles"])
        out(f"fitted as a quantile table ({table_text}): mean {duration(s['fitted_mean'])}, "
            f"KS distance {s['ks_distance']:.3f}")
    out("queueing on the dynos: " + report["queueing"]["verdict"] + ".")
    console.print("KS distance: the largest gap between the logged and fitted distributions (0 to 1), the fit "
                  "rounded to whole milliseconds as logs are; variance / mean of arrivals per interval is 1 for "
                  "Poisson arrivals at a steady rate.", style="dim", highlight=False)


def print_spans_fit(report: Dict[str, Any]) -> None:
    """A fit to traces: the traces, the arrivals, a table of the services (calls/s, fleet, own
    time and its fit) and one of the calls (their shapes)."""
    console = stdout_console()
    out = lambda text: console.print(text, highlight=False)  # noqa: E731
    names = ", ".join(f["name"] for f in report["files"])
    out(f"[bold]{names}[/bold]: {plural(report['fitted'], 'trace')} fitted ({plural(report['spans'], 'span')}), "
        f"starting from {_clock(report['first'])} over {duration(report['span_seconds'])}; entry service "
        f"{report['entry']}")
    skipped = [plural(n, what) for n, what in ((report["incomplete"], "incomplete trace"),
                                               (sum(report["other_entries"].values()), "trace of another entry"),
                                               (report["duplicates"], "duplicate span"),
                                               (report["malformed"], "malformed line")) if n]
    if skipped:
        out("skipped: " + ", ".join(skipped) + (f" (entries: {', '.join(report['other_entries'])})"
                                                 if report["other_entries"] else ""))
    a = report["arrivals"]
    out(f"arrivals: {a['rate_per_s']:,.4g} traces/s on average; " + a["verdict"] + ".")
    columns = [
        Column("service", lambda s: s["name"] + (" (entry)" if s.get("entry") else ""), kind="text"),
        Column("spans", lambda s: s["spans"], kind="count"),
        Column("calls/s", lambda s: s["rate_per_s"]),
        Column("dynos ×\nslots", lambda s: f"{s['dynos']} × {s['slots']}", kind="text"),
        Column("own mean\n(ms)", lambda s: s["service"]["mean"] * 1000),
        Column("own p50\n(ms)", lambda s: s["service"]["p50"] * 1000),
        Column("own p99\n(ms)", lambda s: s["service"]["p99"] * 1000),
        Column("fitted\nmean (ms)", lambda s: s["service"]["fitted_mean"] * 1000),
        Column("KS\ndistance", lambda s: s["service"]["ks_distance"]),
    ]
    table, _ = results_table(console, columns, report["services"])
    console.print(table)
    if report["calls"]:
        columns = [
            Column("caller → callee", lambda c: f"{c['caller']} → {c['callee']}", kind="text"),
            Column("calls per\nrequest", lambda c: c["calls_per_request"]["mean"]),
            Column("phase", lambda c: _call_phase(c), kind="text"),
        ]
        table, _ = results_table(console, columns, report["calls"])
        console.print(table)
    console.print("own time: a span's duration less the time its calls' spans cover, fitted as a quantile table; "
                  "KS distance: the largest gap between its distribution and the fitted one (0 to 1).",
                  style="dim", highlight=False)


def _call_phase(c: Dict[str, Any]) -> str:
    count = c["count"]
    if c["kind"] == "call":
        return "call" + (f" × {count}, one after the other" if count > 1 else "")
    n = str(count) if isinstance(count, int) else f"geometric, mean {count['mean']:g}"
    return f"fanout {n}, wait {c['wait']}" + ("" if c["side_by_side"] else " (one after the other in the trace)")


# --- replay ----------------------------------------------------------------------------------


def _register_replay(verbs: argparse._SubParsersAction) -> None:
    help = "Replay router logs through another fleet and policy: a simulation driven by the log's own requests."
    p = verbs.add_parser(
        "replay", help=help, description=help,
        epilog=("Each request arrives when it reached the router (its line's time less connect and service) and "
                "keeps its logged service time; the scenario gives the fleet, app server and router (its "
                "[arrivals] and [service] are replaced by the log's). The run lasts the trace, with one "
                "replication. What is assumed: docs/logs.md. Example: dynosim logs replay production.log.gz "
                "--scenario app.toml --policy random,intelligent --set fleet.dynos=20"),
    )
    add_log_arguments(p)
    p.add_argument("--scenario", required=True, metavar="SCENARIO",
                   help="the fleet to replay through: a TOML file or a built-in scenario name")
    p.add_argument("--policy", type=policy_list, metavar="P1,P2",
                   help="routing policies to replay through side by side instead of router.policy")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a scenario key, e.g. --set fleet.dynos=20 (repeatable)")
    p.add_argument("--speed", type=positive_number, default=1.0, metavar="F",
                   help="divide the gaps between arrivals by F (2: the same requests at twice the rate)")
    p.add_argument("--correct-queueing", action="store_true",
                   help="replay each service time less its overlap with the request before it on its dyno (see "
                        "logs fit)")
    p.add_argument("--warmup", metavar="TIME",
                   help="simulate the trace's first TIME without measuring it (default 0: the fleet starts idle)")
    p.add_argument("--replications", type=positive_int, metavar="N",
                   help="replications (default 1; they differ only in what is drawn, such as random routing)")
    p.add_argument("--seed", type=seed, help="random seed (run.seed)")
    p.add_argument("--json", action="store_true",
                   help="print JSON: dynosim run --json's document, with the log's figures as log")
    p.set_defaults(handler=replay)


def replay(args: argparse.Namespace) -> int:
    with status(f"replaying {plural(len(args.files), 'log')}"):
        results = logs.replay(args.files, args.scenario, format=args.format, log_format=log_format_arg(args.log_format),
                              host=args.host, window=args.window, speed=args.speed, set=args.overrides,
                              policies=args.policy, correct_queueing=args.correct_queueing,
                              replications=args.replications, seed=args.seed, warmup=args.warmup)
    if args.json:
        print_json(results.to_dict())
    else:
        print_replay(results)
    if results.dropped:
        warning(f"{args.scenario}: {' and '.join(results.dropped)} left out: the log gives each "
                f"request's service time")
    _warn_malformed(results.log)
    return 0


def print_replay(results: "logs.ReplayResults") -> None:
    console = stdout_console()
    log = results.log
    head = results[0].report
    names = ", ".join(f["name"] for f in log["files"])
    speed = f" at {log['speed']:g}× speed" if log["speed"] != 1 else ""
    corrected = ", service times less their queueing (--correct-queueing)" if log["corrected"] else ""
    console.print(f"[bold]{names}[/bold] through {head['scenario']}", highlight=False)
    console.print(f"{plural(log['replayed'], 'request')} from {_clock(log['first'])} UTC over "
                  f"{duration(log['span_seconds'])}{speed}{corrected}", highlight=False)
    skipped = [text for n, text in (
        (log["without_service"], f"{plural(log['without_service'], 'request')} without a service time"),
        (log["outside_window"], f"{plural(log['outside_window'], 'request')} outside --window"),
    ) if n]
    if skipped:
        console.print(f"not replayed: {', '.join(skipped)}", highlight=False)
    rows: List[Any] = [r for r in results] + [log]
    columns = [
        Column("", _cell(lambda r: r.policy, lambda log: "log, as recorded"), kind="text"),
        Column("dynos", _cell(_dynos, lambda log: f"{log['recorded']['dynos']:,}"), kind="text", drop=4),
        Column("load", _cell(lambda r: r.report["offered_load"], lambda log: math.nan), kind="percent", drop=5),
        Column("queued", _cell(lambda r: r.estimate("queued_fraction"), lambda log: math.nan), kind="percent"),
        Column("queue\nmean", _cell(lambda r: r.estimate("queue.mean"), lambda log: math.nan), kind="time"),
        Column("response\nmean", _cell(lambda r: r.estimate("response.mean"), _recorded("mean")), kind="time",
               drop=2),
        Column("response\np50", _cell(lambda r: r.estimate("response.p50"), _recorded("p50")), kind="time",
               drop=3),
        Column("response\np95", _cell(lambda r: r.estimate("response.p95"), _recorded("p95")), kind="time",
               drop=1),
        Column("response\np99", _cell(lambda r: r.estimate("response.p99"), _recorded("p99")), kind="time"),
        Column("errors", _cell(lambda r: r.estimate("errors.total"),
                               lambda log: sum(log["recorded"]["errors"].values()) / log["replayed"]),
               kind="percent", drop=6),
    ]
    table, left_out = results_table(console, columns, rows)
    console.print(table)
    errors = ", ".join(f"{code} × {n:,}" for code, n in log["recorded"]["errors"].items())
    notes = ["the log's response is its service= (the dyno's queue and work; the router's queue is not logged)"]
    if errors:
        notes.append(f"the log's errors: {errors}")
    if "H12" in log["recorded"]["errors"]:
        notes.append("an H12's 30 s is when the router gave up: the dyno worked longer, so its replayed time is a "
                     "lower bound")
    if left_out:
        notes.append(f"not shown: {', '.join(left_out)}")
    console.print("; ".join(notes) + ".", style="dim", highlight=False)


def _cell(simulated: Any, recorded: Any) -> Any:
    return lambda row: simulated(row) if isinstance(row, PolicyResult) else recorded(row)


def _recorded(key: str) -> Any:
    return lambda log: log["recorded"]["service"][key]


def _dynos(r: PolicyResult) -> str:
    rep = r.report
    return f"{rep['dynos']:,}" + (f"×{rep['slots']}" if rep["slots"] > 1 else "")
