"""`dynosim testbed replay FILE`: a router log replayed against the real testbed under several
app-server configurations, each reported against a baseline (memory and median/p95 response
multipliers, as the heroku-cedar14-memory-use seed's table). The replay itself is
:mod:`dynosim.testbed.replay`; this module parses, prints and writes. :mod:`.testbed` hands it
``dynosim testbed replay ...``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..display import Column, activity, results_table, stdout_console
from ..output import print_json, write_files
from .common import (Parser, add_log_arguments, log_format_arg, positive_duration, positive_int, positive_number,
                     share, size)

def build_parser(prog: str) -> argparse.ArgumentParser:
    help = ("Replay a router log against the real testbed under several app-server configurations, and compare "
            "their memory (RSS) and median/p95 response with a baseline's.")
    p = Parser(
        prog=prog, description=help,
        epilog=("Each configuration gets a fresh stack (HAProxy, one gunicorn per dyno, on 127.0.0.1) and the same "
                "requests, sent at their logged arrival times; the app performs each logged service time (--work) "
                "and can allocate memory in the thread serving it (--alloc, --keep). A variable any configuration "
                "sets in env is unset in the others. What is measured and assumed: docs/testbed.md. Example: "
                "dynosim testbed replay app.log.gz --window ..2min --alloc 256KiB "
                "--config 'default: workers=2 threads=5' --config 'arena2: workers=2 threads=5 "
                "env=MALLOC_ARENA_MAX=2'"))
    add_log_arguments(p)
    p.add_argument("--config", dest="configs", action="append", default=[], metavar="'NAME: key=value ...'",
                   help="a configuration (repeatable; the first is the baseline unless --baseline): keys dynos, "
                        "workers, threads, class (sync, gthread, gevent), connections (gevent), env=NAME=VALUE "
                        "(repeatable)")
    p.add_argument("--configs", dest="configs_file", type=Path, metavar="FILE.toml",
                   help="the configurations as [configs.NAME] tables of a TOML file (and its baseline = NAME)")
    p.add_argument("--baseline", metavar="NAME", help="the configuration the others are compared with")
    p.add_argument("--speed", type=positive_number, default=1.0, metavar="F",
                   help="divide the gaps between arrivals by F (2: the same requests at twice the rate)")
    p.add_argument("--limit", type=positive_int, metavar="N", help="replay only the first N requests (by arrival)")
    p.add_argument("--correct-queueing", action="store_true",
                   help="replay each service time less its overlap with the request before it on its dyno (see "
                        "logs fit)")
    p.add_argument("--work", choices=("io", "cpu"), default="io",
                   help="how the app spends each logged service time: io waits (sleeps), cpu computes "
                        "(default io)")
    p.add_argument("--alloc", type=size, default=0, metavar="SIZE",
                   help="memory each request allocates in its thread, in 1-32 KiB pieces, held while it works "
                        "(e.g. 256KiB; default none)")
    p.add_argument("--keep", type=share, default=0.0, metavar="SHARE",
                   help="the share of --alloc's pieces kept past the request, in the worker's cache of at most "
                        "1024 pieces (default 0)")
    p.add_argument("--policy", default="random", metavar="POLICY",
                   help="HAProxy's routing across a configuration's dynos (default random)")
    p.add_argument("--rounds", type=positive_int, default=1, metavar="N",
                   help="run every configuration N times, round after round (default 1): the multipliers then "
                        "pool the rounds, with the range of each round's own")
    p.add_argument("--sample-every", type=positive_duration, default=0.25, metavar="TIME",
                   help="how often the dynos' memory is read from /proc (default 250ms)")
    p.add_argument("--json", action="store_true",
                   help='print {"log", "settings", "baseline", "results": [one per configuration], "warnings"}')
    p.add_argument("-o", "--out", metavar="DIR", type=Path,
                   help="write replay.json and requests.csv (one row per request and configuration) into DIR")
    return p


def main(args: argparse.Namespace) -> int:
    from ..errors import DynosimError
    from ..testbed.replay import replay

    if args.configs and args.configs_file is not None:
        raise DynosimError("give the configurations with --config or with --configs FILE.toml, not both")
    configs: Any = args.configs_file if args.configs_file is not None else args.configs
    if not args.configs and args.configs_file is None:
        raise DynosimError("no configuration to run: give --config 'NAME: workers=2 threads=5' (at least one) or "
                           "--configs FILE.toml")
    with activity() as shown:
        task = shown.task("testbed replay")
        doc = replay(args.files, configs, baseline=args.baseline, format=args.format,
                     log_format=log_format_arg(args.log_format), host=args.host, window=args.window,
                     speed=args.speed, limit=args.limit, correct_queueing=args.correct_queueing, work=args.work,
                     alloc=args.alloc, keep=args.keep, policy=args.policy, sample_every=args.sample_every,
                     rounds=args.rounds,
                     progress=lambda m: shown.update(task, note=m))
    rows = [row for r in doc["results"] for row in r.pop("_records")]
    if args.out is not None:
        write_outputs(args.out, doc, rows)
    if args.json:
        print_json(doc)
    else:
        print_report(doc)
    return 0


def _mib(value: Optional[float]) -> str:
    return "-" if value is None else f"{value / 2 ** 20:,.1f}"


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


def _x(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _times(result: Dict[str, Any], key: str, baseline: str) -> str:
    """A multiplier, and with rounds the range of the rounds' own below it: ``0.96x`` over
    ``0.95-0.98`` (none for the baseline, 1 in every round)."""
    text = _x(result["vs_baseline"][key])
    rounds = [v for v in (result.get("vs_baseline_rounds") or {}).get(key, []) if v is not None]
    if len(rounds) > 1 and result["vs_baseline"][key] is not None and result["config"] != baseline:
        text += f"\n{min(rounds):.2f}-{max(rounds):.2f}"
    return text


def print_report(doc: Dict[str, Any]) -> None:
    console = stdout_console()
    log = doc["log"]
    s = doc["settings"]
    what = [f"{doc['replayed']:,} requests of the log over {log['trace_seconds']:,.1f} s"]
    if s["speed"] != 1:
        what.append(f"at {s['speed']:g}x speed")
    if s["rounds"] > 1:
        what.append(f"under each configuration {s['rounds']} times, round after round")
    work = f"each logged service time performed as {s['work']}"
    if s["alloc"]:
        work += f", {s['alloc'] / 1024:,.0f} KiB allocated per request" + (f" ({s['keep']:g} kept)" if s["keep"]
                                                                             else "")
    console.print(f"[bold]testbed replay[/]: {' '.join(what)}; {work}; baseline [bold]{doc['baseline']}[/]",
                  highlight=False)
    columns = [
        Column("config", lambda r: r["config"], kind="text"),
        Column("setup", lambda r: r["describe"], kind="text", wrap=True, max_width=34, drop=1),
        Column("requests", lambda r: r["requests"], kind="count", drop=5),
        Column("errors", lambda r: r["errors"], kind="count"),
        Column("median\n(ms)", lambda r: _ms(r["response"]["p50"] if r["answered"] else None), kind="text"),
        Column("p95\n(ms)", lambda r: _ms(r["response"]["p95"] if r["answered"] else None), kind="text"),
        Column("RSS mean\n(MiB)", lambda r: _mib(r["memory"]["rss"]["mean"]), kind="text"),
        Column("RSS peak\n(MiB)", lambda r: _mib(r["memory"]["rss"]["peak"]), kind="text", drop=3),
        Column("PSS mean\n(MiB)", lambda r: _mib(r["memory"]["pss"]["mean"]), kind="text", drop=2),
        Column("memory\n×", lambda r: _times(r, "memory", doc["baseline"]), kind="text"),
        Column("median\n×", lambda r: _times(r, "median", doc["baseline"]), kind="text"),
        Column("p95\n×", lambda r: _times(r, "p95", doc["baseline"]), kind="text"),
    ]
    table, hidden = results_table(console, columns, doc["results"])
    console.print(table)
    if hidden:
        console.print(f"left out to fit the terminal: {', '.join(hidden)} (--json has every figure)", highlight=False)
    notes = ["response: sent to answered, 200s only",
             "RSS: the dynos' gunicorn processes (master and workers) summed, sampled from /proc while the "
             "requests ran (PSS counts shared pages once)",
             "×: over the baseline's (memory: mean RSS)" + ("; under each, the range of each round's ratio to "
                                                           "the same round's baseline" if s["rounds"] > 1 else "")]
    console.print("; ".join(notes) + ".", style="dim", highlight=False)
    for r in doc["results"]:
        if r["environment"]:
            seen = ", ".join(f"{var}={'/'.join('unset' if v is None else v for v in values)}"
                             for var, values in r["environment"].items())
            console.print(f"{r['config']}: the workers' environment had {seen}", highlight=False)
    for w in doc["warnings"] + [f"{r['config']}: {w}" for r in doc["results"] for w in r["warnings"]]:
        console.print(f"[yellow]warning[/]: {w}", highlight=False)


def write_outputs(folder: Path, doc: Dict[str, Any], rows: List[Dict[str, Any]]) -> None:
    from ..testbed.replay import write_records
    from ..testbed.run import write_json

    writers: Dict[Path, Any] = {folder / "replay.json": lambda p: write_json(p, doc),
                                folder / "requests.csv": lambda p: write_records(p, rows)}
    write_files(writers, option="--out")
    print(f"wrote {', '.join(str(p) for p in writers)}", file=sys.stderr)
